"""Fixtures for the store tests: the backends the contract suite runs over, and trace factories.

The contract suite runs over every backend in ``BACKENDS``: SQLite (a file, and in memory) and
PostgreSQL (a schema of its own per test).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentlens.store import TraceStore, close_shared_stores, open_store

BACKENDS: dict[str, Callable[[Path], str]] = {
    "sqlite-file": lambda tmp: f"sqlite:///{tmp / 'agentlens.db'}",
    "sqlite-memory": lambda tmp: "sqlite:///:memory:",
    "postgres": lambda tmp: "postgres",  # a schema of its own: see ``store_url``
}

StoreFactory = Callable[[], TraceStore]


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest) -> str:
    """The name of the backend under test."""
    return str(request.param)


@pytest.fixture
def store_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """The URL of a fresh store of the backend under test. PostgreSQL: a schema for this test
    alone, dropped afterwards; skipped (failed under ``AGENTLENS_TEST_POSTGRES=1``) when the
    server at ``AGENTLENS_TEST_POSTGRES_URL`` (default 127.0.0.1:5432, database ``test``) is
    unreachable."""
    if backend != "postgres":
        yield BACKENDS[backend](tmp_path)
        return
    from pg_support import new_pg_schema

    url, drop = new_pg_schema()
    try:
        yield url
    finally:
        close_shared_stores()
        drop()


@pytest.fixture
def store(store_url: str) -> Iterator[TraceStore]:
    """A fresh, empty store of the backend under test, closed after the test."""
    s = open_store(store_url)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(autouse=True)
def _no_shared_stores() -> Iterator[None]:
    yield
    close_shared_stores()
