"""Shared fixtures for the capture tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentlens.capture import _state
from agentlens.store import _api


@pytest.fixture
def fresh_capture(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Capture unconfigured, with no AGENTLENS_* variables; everything restored afterwards."""
    monkeypatch.delenv("AGENTLENS_DB", raising=False)
    monkeypatch.delenv("AGENTLENS_DISABLED", raising=False)
    configured_db = _api._default
    saved = _state.swap(None)
    try:
        yield
    finally:
        pipeline = _state._pipeline
        if pipeline is not None and pipeline.processor is not None:
            pipeline.processor.shutdown(10.0)
        _state.restore(saved)
        _api._default = configured_db
