"""Fixtures shared by every test folder (the only conftest with fixtures of its own)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

DATA_ROOT = Path(
    os.environ.get("AGENTLENS_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data"
)
"""The public evaluation data: ``AGENTLENS_DATA``, default ``../shared/data`` beside the repo."""

IN_CI = os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}
"""True on CI (``CI=true``, as GitHub Actions and most CI services set it)."""

KEPT_VARIABLES = frozenset({"AGENTLENS_DATA"})
"""``AGENTLENS_*`` variables the tests keep: where the test data is, not an agentlens setting."""


@pytest.fixture(autouse=True)
def _no_agentlens_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts without the developer's ``AGENTLENS_*`` settings (``AGENTLENS_DB``,
    ``AGENTLENS_CONFIG``...), so a configured shell cannot change a result. A test that needs
    one sets it with ``monkeypatch.setenv``."""
    for name in list(os.environ):
        if name.startswith("AGENTLENS_") and name not in KEPT_VARIABLES:
            monkeypatch.delenv(name)


@pytest.fixture
def fresh_capture() -> Iterator[None]:
    """Capture unconfigured at the start of the test and reset again after it (with the
    autouse fixture above, no ``AGENTLENS_*`` variable is set either)."""
    from agentlens.capture import reset

    reset(10.0)
    try:
        yield
    finally:
        reset(10.0)


@pytest.fixture
def data_dir() -> Callable[[str], Path]:
    """``data_dir("tau_bench")``: that data set's folder.

    When it is absent the test is skipped on a developer's machine and FAILS on CI (``CI=true``),
    where the data is expected: a data test must not pass by not running.
    """

    def folder(name: str) -> Path:
        path = DATA_ROOT / name
        if not path.is_dir():
            message = f"data set {name!r} not found in {DATA_ROOT}"
            if IN_CI:
                pytest.fail(f"{message} (CI=true: data tests must run on CI)")
            pytest.skip(message)
        return path

    return folder
