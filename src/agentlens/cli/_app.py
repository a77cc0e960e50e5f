"""The ``agentlens`` command: the typer app, global options, and one-line errors."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from agentlens.config import DEFAULT_DB_URL, env_flag
from agentlens.errors import AgentlensError

if TYPE_CHECKING:  # pragma: no cover
    from agentlens.config import Settings

__all__ = ["State", "app", "err_console", "fail", "main", "out_console", "state"]

app = typer.Typer(
    name="agentlens",
    help="Capture agent runs and measure how often they hallucinate.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

out_console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


@dataclass
class State:
    """Options given before the command, shared by every command."""

    db: str | None = None
    _settings: Settings | None = None

    def settings(self) -> Settings:
        """The settings of this command, loaded once (``--db`` as the store argument).

        Raises:
            ConfigError: a bad value in the environment or the configuration file.
        """
        if self._settings is None:
            from agentlens.config import load_settings

            self._settings = load_settings(db=self.db)
        return self._settings

    def open_store(self):  # type: ignore[no-untyped-def]
        """Open the store named by ``--db``, ``AGENTLENS_DB``, the config file, or the default."""
        from agentlens.store import open_store

        return open_store(self.settings().store_url)


state = State()


@app.callback()
def _global(
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="Store URL (sqlite:///path) or a SQLite file path. "
            f"Default: AGENTLENS_DB, then agentlens.toml, then {DEFAULT_DB_URL}.",
            metavar="URL",
        ),
    ] = None,
) -> None:
    state.db = db
    state._settings = None  # loaded once per command, on first use


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``error: message`` on stderr and return the exit to raise."""
    err_console.print(f"error: {message}", markup=False)
    return typer.Exit(code)


def main(argv: list[str] | None = None) -> None:
    """The console-script entry point: user errors print one line and exit 2; no traceback."""
    from agentlens import cli as _cli  # noqa: F401  (registers the commands)

    try:
        app(args=argv, standalone_mode=True)
    except AgentlensError as exc:
        err_console.print(f"error: {exc}", markup=False)
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("interrupted", markup=False)
        sys.exit(130)
    except BrokenPipeError:
        # The reader went away (`agentlens runs | head`): not an error. Point stdout at devnull
        # so the interpreter's final flush does not complain either.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(0)
    except Exception as exc:
        # A bug of ours, not the user's: still one line, unless asked for the traceback.
        if env_flag("AGENTLENS_DEBUG"):
            raise
        err_console.print(
            f"error: internal error: {type(exc).__name__}: {exc} "
            "(set AGENTLENS_DEBUG=1 for the traceback, and please report it)",
            markup=False,
        )
        sys.exit(1)
