"""Fixtures for the server tests: an app over a SQLite file and over PostgreSQL, called in-process
through httpx."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _server_api import Api

from agentlens.server import create_app


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The server's store: a SQLite file, and a PostgreSQL schema of the test's own
    (``pg_url``: skipped, or failed under ``AGENTLENS_TEST_POSTGRES=1``, without a server)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'server.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def make_api(db_url: str) -> Iterator[Callable[..., Api]]:
    """``make_api(**options)``: a started app over the test's store (stopped at teardown)."""
    apps: list[Any] = []

    def make(**options: Any) -> Api:
        options.setdefault("review", False)
        app = create_app(db_url, **options)
        app.state.agentlens.start()
        apps.append(app)
        return Api(app)

    yield make
    for app in apps:
        app.state.agentlens.close()


@pytest.fixture
def api(make_api: Callable[..., Api]) -> Api:
    return make_api()
