"""The entry point: user errors and internal errors are one line; no traceback."""

from __future__ import annotations

import pytest
import typer

from agentlens.cli import _app
from agentlens.cli._app import main
from agentlens.errors import ConfigError


@pytest.fixture
def broken_command() -> typer.Typer:
    app = typer.Typer()

    @app.command()
    def explode(kind: str) -> None:
        if kind == "user":
            raise ConfigError("agentlens.toml: unknown key 'x'")
        raise RuntimeError("a bug")

    return app


def test_internal_errors_are_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], broken_command: typer.Typer
) -> None:
    monkeypatch.setattr(_app, "app", broken_command)
    monkeypatch.delenv("AGENTLENS_DEBUG", raising=False)
    with pytest.raises(SystemExit) as info:
        main(["bug"])
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.startswith("error: internal error: RuntimeError: a bug")
    assert len(err.strip().splitlines()) <= 2  # one line, maybe wrapped by the console


def test_user_errors_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], broken_command: typer.Typer
) -> None:
    monkeypatch.setattr(_app, "app", broken_command)
    with pytest.raises(SystemExit) as info:
        main(["user"])
    assert info.value.code == 2
    assert capsys.readouterr().err.strip() == "error: agentlens.toml: unknown key 'x'"


def test_debug_shows_the_traceback(
    monkeypatch: pytest.MonkeyPatch, broken_command: typer.Typer
) -> None:
    monkeypatch.setattr(_app, "app", broken_command)
    monkeypatch.setenv("AGENTLENS_DEBUG", "1")
    with pytest.raises(RuntimeError, match="a bug"):
        main(["bug"])
