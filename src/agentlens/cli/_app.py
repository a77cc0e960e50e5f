"""The ``agentlens`` command: the typer app, global options, and one-line errors."""

from __future__ import annotations

import os
import signal
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from typer.core import TyperGroup

from agentlens.config import DEFAULT_DB_URL, env_flag
from agentlens.errors import AgentlensError

if TYPE_CHECKING:  # pragma: no cover
    from agentlens.config import Settings

__all__ = ["State", "app", "err_console", "fail", "main", "out_console", "state"]


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's final flush of a closed pipe does
    not complain either."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (a test runner's buffer)
        pass


class _Group(TyperGroup):
    """The command group: a closed pipe (``agentlens runs --json | head -1``) is a normal end
    (exit 0, nothing printed), and Ctrl-C prints ``interrupted`` and exits 130, wherever in a
    command they happen. Click would otherwise exit 1 on the pipe and print ``Aborted!``."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            _quiet_stdout()
            raise typer.Exit(0) from None
        except KeyboardInterrupt:
            err_console.print("interrupted", markup=False)
            raise typer.Exit(130) from None


app = typer.Typer(
    name="agentlens",
    cls=_Group,
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

    def open_store(self, *, read_only: bool = False):  # type: ignore[no-untyped-def]
        """Open the store named by ``--db``, ``AGENTLENS_DB``, the config file, or the default.

        Commands that only read pass ``read_only=True``: a mistyped path is then an error
        (nothing is created), and a store on read-only media can be read.
        """
        from agentlens.store import open_store

        return open_store(self.settings().store_url, read_only=read_only)


state = State()


def _print_version(value: bool) -> None:
    if value:
        from agentlens import __version__

        out_console.print(f"agentlens {__version__}", markup=False)
        raise typer.Exit(0)


@app.callback()
def _global(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print the version and exit.",
            callback=_print_version,
            is_eager=True,
        ),
    ] = False,
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
        if threading.current_thread() is threading.main_thread():
            # Ctrl-C as KeyboardInterrupt from here on (agentlens.__main__ exits at once while
            # the command line loads); set inside the try, so no window is left uncovered.
            signal.signal(signal.SIGINT, signal.default_int_handler)
        app(args=argv, standalone_mode=True)
    except AgentlensError as exc:
        err_console.print(f"error: {exc}", markup=False)
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("interrupted", markup=False)
        sys.exit(130)
    except BrokenPipeError:
        # The reader went away (`agentlens runs | head`): not an error.
        _quiet_stdout()
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
