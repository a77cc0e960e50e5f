"""Fixtures for the CLI tests: a store URL in tmp_path and a runner that never hides errors."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from agentlens.cli import app

Invoke = Callable[..., Result]


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """A SQLite store in this test's folder."""
    return f"sqlite:///{tmp_path / 'test.db'}"


@pytest.fixture
def cli(db_url: str) -> Invoke:
    """Run ``agentlens --db <tmp db> ARGS...``; a crash (not a clean exit) fails the test."""

    def invoke(*args: str, input: str | bytes | None = None, db: str | None = None) -> Result:
        result = CliRunner().invoke(app, ["--db", db or db_url, *args], input=input)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise AssertionError(f"agentlens {' '.join(args)} crashed") from result.exception
        assert "Traceback" not in result.output
        return result

    return invoke


@pytest.fixture
def restore_capture() -> Iterator[None]:
    """Undo what ``agentlens demo`` configures: capture is reset after the test."""
    from agentlens.capture import reset

    yield
    reset(5.0)
