"""Fixtures for the store tests: the backends the contract suite runs over, and trace factories.

To run the contract suite over another backend, add it to ``BACKENDS`` with a factory that
opens a fresh, empty store (e.g. a PostgreSQL schema per test, marked to run where the server is).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentlens.store import TraceStore, close_shared_stores, open_store

BACKENDS: dict[str, Callable[[Path], str]] = {
    "sqlite-file": lambda tmp: f"sqlite:///{tmp / 'agentlens.db'}",
    "sqlite-memory": lambda tmp: "sqlite:///:memory:",
}

StoreFactory = Callable[[], TraceStore]


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest) -> str:
    """The name of the backend under test."""
    return str(request.param)


@pytest.fixture
def store_url(backend: str, tmp_path: Path) -> str:
    return BACKENDS[backend](tmp_path)


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
