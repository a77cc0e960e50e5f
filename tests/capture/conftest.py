"""Shared fixtures for the capture tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentlens import config
from agentlens.capture import _state


@pytest.fixture
def fresh_capture(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Capture unconfigured, with no AGENTLENS_* variables; everything restored afterwards."""
    monkeypatch.delenv("AGENTLENS_DB", raising=False)
    monkeypatch.delenv("AGENTLENS_DISABLED", raising=False)
    configured_db = config._configured_db
    saved = _state.swap(None)
    try:
        yield
    finally:
        pipeline = _state._pipeline
        if pipeline is not None and pipeline.processor is not None:
            pipeline.processor.shutdown(10.0)
        _state.restore(saved)
        config.set_configured_db(configured_db)
