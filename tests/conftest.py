"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

DATA_ROOT = Path(
    os.environ.get("AGENTLENS_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data"
)
"""The public evaluation data: ``AGENTLENS_DATA``, default ``../shared/data`` beside the repo."""


@pytest.fixture
def data_dir() -> Callable[[str], Path]:
    """``data_dir("tau_bench")``: that data set's folder; the test is skipped when it is absent."""

    def folder(name: str) -> Path:
        path = DATA_ROOT / name
        if not path.is_dir():
            pytest.skip(f"data set {name!r} not found in {DATA_ROOT}")
        return path

    return folder


# -- PostgreSQL (helpers in pg_support.py) ---------------------------------------------------------


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A PostgreSQL store URL whose schema is this test's alone (dropped afterwards)."""
    from pg_support import new_pg_schema

    url, drop = new_pg_schema()
    try:
        yield url
    finally:
        from agentlens.store import close_shared_stores

        close_shared_stores()
        drop()
