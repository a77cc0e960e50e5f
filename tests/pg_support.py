"""PostgreSQL for the tests: where the server is, whether it must be there, a schema per test.

The server: ``AGENTLENS_TEST_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/test``,
trust auth). ``AGENTLENS_TEST_POSTGRES=1`` (set by ``.ci/run``) makes an unreachable server a
failure of every PostgreSQL test; elsewhere those tests are skipped, with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

PG_SERVER = os.environ.get(
    "AGENTLENS_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
"""The PostgreSQL server the tests use (trust auth; each test gets a schema of its own)."""

PG_REQUIRED = os.environ.get("AGENTLENS_TEST_POSTGRES", "") == "1"
"""Set by ``.ci/run``: an unreachable server fails the PostgreSQL tests instead of skipping."""

_pg_problem: list[str | None] = []


def _pg_unavailable() -> str | None:
    """Why PostgreSQL tests cannot run here (``None`` when they can); checked once."""
    if not _pg_problem:
        try:
            import psycopg

            with psycopg.connect(PG_SERVER, connect_timeout=3) as conn:
                conn.execute("SELECT 1")
            _pg_problem.append(None)
        except Exception as exc:  # the driver missing, or the server unreachable
            _pg_problem.append(
                f"PostgreSQL at {PG_SERVER} is not usable: {' '.join(str(exc).split())}"
            )
    return _pg_problem[0]


def require_postgres() -> None:
    """Skip (or, in CI, fail) the calling test when the PostgreSQL server cannot be used."""
    problem = _pg_unavailable()
    if problem is None:
        return
    if PG_REQUIRED:
        pytest.fail(f"{problem} (AGENTLENS_TEST_POSTGRES=1: the PostgreSQL tests must run)")
    pytest.skip(f"{problem}; set AGENTLENS_TEST_POSTGRES_URL, or start the server")


def new_pg_schema() -> tuple[str, Callable[[], None]]:
    """A store URL with a fresh, empty schema of its own, and the function that drops it."""
    import uuid

    import psycopg

    require_postgres()
    schema = f"t_{uuid.uuid4().hex[:16]}"
    sep = "&" if "?" in PG_SERVER else "?"

    def drop() -> None:
        with psycopg.connect(PG_SERVER, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    return f"{PG_SERVER}{sep}schema={schema}", drop
