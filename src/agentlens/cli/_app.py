"""The ``agentlens`` command: the typer app, global options, and one-line errors."""

from __future__ import annotations

import copy
import functools
import os
import re
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from agentlens.cli import command_name
from agentlens.config import DEFAULT_DB_URL, env_flag
from agentlens.errors import AgentlensError

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

    from agentlens.config import Settings

__all__ = [
    "PIPED_WIDTH",
    "State",
    "app",
    "command_name",
    "err_console",
    "fail",
    "main",
    "make_console",
    "out_console",
    "real_console",
    "state",
]


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's final flush of a closed pipe does
    not complain either."""
    _quiet(sys.stdout)


def _quiet(stream: Any) -> None:
    """Point the file descriptor of ``stream`` at /dev/null (a closed pipe's writes vanish)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
    except (OSError, ValueError, AttributeError):  # no real file descriptor (a test's buffer)
        pass


_UsageError: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError"
)
"""Click's usage error (typer's own copy of click, or click itself, as typer uses)."""
_NoArgsIsHelp: tuple[type[Exception], ...] = tuple(
    c
    for c in (getattr(sys.modules[typer.BadParameter.__module__], "NoArgsIsHelpError", None),)
    if isinstance(c, type)
)
"""``agentlens`` or ``agentlens review`` alone: the help, not an error."""


class UsageLine(typer.BadParameter):
    """A usage error as one line on stderr, ``error: ...`` (exit status 2), in place of click's
    usage, hint and ``Error:`` lines."""

    def __init__(self, message: str) -> None:
        super().__init__(message)

    def format_message(self) -> str:
        return self.message

    def show(self, file: Any = None) -> None:
        err_console.print(f"error: {self.message}", markup=False)


_INPUT = {
    "int_parsing": "is not an integer",
    "int_from_float": "is not an integer",
    "int_type": "is not an integer",
    "float_parsing": "is not a number",
    "float_type": "is not a number",
    "bool_parsing": "is not a yes/no value (true, false, 1, 0...)",
    "finite_number": "is not a finite number",
}
"""What a value that pydantic (typer's conversion) refused is, by pydantic's error type."""
_BOUND = {
    "greater_than_equal": ("ge", "at least"),
    "greater_than": ("gt", "more than"),
    "less_than_equal": ("le", "at most"),
    "less_than": ("lt", "less than"),
}


def _param_name(param: Any) -> str | None:
    """How the command line names a parameter: its long option (``--limit``), else its short
    one, else the argument's metavar (``RUN_ID``)."""
    if param is None:
        return None
    opts = [o for o in getattr(param, "opts", ()) or () if isinstance(o, str)]
    if getattr(param, "param_type_name", None) != "argument" and opts:
        return next((o for o in opts if o.startswith("--")), opts[0])
    metavar = getattr(param, "metavar", None)
    return str(metavar or (param.name or "").upper() or "") or None


def _reason(exc: Any) -> str:
    """What was wrong with a parameter's value, in plain words: pydantic's error when typer's
    conversion raised it (``'abc' is not an integer``, ``must be at least 1, not -1``), else
    the message, without the validation library's phrasing."""
    cause = exc.__cause__
    errors = cause.errors() if hasattr(cause, "errors") else []
    if errors:
        error = errors[0]
        kind = str(error.get("type", ""))
        value = error.get("input")
        shown = repr(value) if isinstance(value, str) else str(value)
        context = error.get("ctx") or {}
        if kind in _INPUT:
            return f"{shown} {_INPUT[kind]}"
        if kind in _BOUND and _BOUND[kind][0] in context:
            key, words = _BOUND[kind]
            return f"must be {words} {context[key]}, not {value}"
        if kind in ("enum", "literal_error") and "expected" in context:
            return f"{shown} is not one of {context['expected']}"
        message = str(error.get("msg", "")) or str(exc.message)
    else:
        message = str(exc.message)
    return _plain(message)


def _plain(message: str) -> str:
    """A click or pydantic message as the tail of an ``error:`` line: no validation-library
    phrasing (``Value error, ``, ``Input should be``), no capital, no full stop."""
    message = " ".join(message.split())
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            message = message[len(prefix) :]
    if message.startswith("Input should be "):
        message = "must be " + message[len("Input should be ") :]
    message = message.replace(". Did you mean", "; did you mean")
    message = message.replace("(Possible options:", "(possible options:")
    if message.endswith(".") and not message.endswith(".."):
        message = message[:-1]
    if message[:1].isupper() and message[1:2].islower():
        message = message[0].lower() + message[1:]
    return message


def usage_line(exc: Exception) -> str:
    """A click usage error as the one line printed after ``error: ``, naming the option:
    ``--limit: 'abc' is not an integer``, ``missing argument 'RUN_ID'``, ``no such option:
    --limt (possible options: --limit, --to)``, ``no such command 'rnus'; did you mean
    'runs'?``."""
    missing = any(c.__name__ == "MissingParameter" for c in type(exc).__mro__)
    param = getattr(exc, "param", None)
    if missing and _param_name(param):
        kind = getattr(exc, "param_type", None) or getattr(param, "param_type_name", "option")
        return f"missing {kind} '{_param_name(param)}'"
    if isinstance(exc, typer.BadParameter) and not missing:
        hint = exc.param_hint
        if isinstance(hint, (list, tuple)):
            hint = next((h for h in hint if str(h).startswith("--")), hint[0] if hint else None)
        name = str(hint).strip("'\"") if hint else _param_name(exc.param)
        return f"{name}: {_reason(exc)}" if name else _reason(exc)
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    extra = re.fullmatch(r"Got unexpected extra arguments?(?:\(s\))? \((.*)\)", message)
    if extra:
        return f"unexpected extra argument(s): {extra.group(1)}"
    line = _plain(message)
    ctx = getattr(exc, "ctx", None)
    if line.startswith("no such command") and "did you mean" not in line and ctx is not None:
        line += f" (`{ctx.command_path} --help` lists the commands)"
    return line


@contextmanager
def _one_line_usage_errors() -> Iterator[None]:
    """Click's usage errors (a bad value, a missing or unknown option, argument or command)
    as :class:`UsageLine`: one line, exit status 2; the help of a group given no command is
    left to click."""
    try:
        yield
    except UsageLine:
        raise
    except _NoArgsIsHelp:
        raise
    except _UsageError as exc:
        raise UsageLine(usage_line(exc)) from None


class _Group(TyperGroup):
    """The command group: a usage error is one line, ``error: ...``, exit 2 (click prints the
    usage, a hint and the error, and typer's conversion speaks pydantic); a closed pipe
    (``agentlens runs --json | head -1``) is a normal end (exit 0, nothing printed), and Ctrl-C
    prints ``interrupted`` and exits 130, wherever in a command they happen. Click would
    otherwise exit 1 on the pipe and print ``Aborted!``."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any
    ) -> Any:
        with _one_line_usage_errors():
            return super().make_context(info_name, args, parent=parent, **extra)

    def invoke(self, ctx: Any) -> Any:
        try:
            with _one_line_usage_errors():
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


class _LazyConsole:
    """A rich ``Console`` made on first use (importing rich costs about 40 ms, which ``--help``
    and a command that prints nothing through rich need not pay): every attribute read or set
    goes to the console, made with these options."""

    __slots__ = ("_console", "_options")

    def __init__(self, **options: Any) -> None:
        object.__setattr__(self, "_options", options)
        object.__setattr__(self, "_console", None)

    def _get(self) -> Console:
        console = self._console
        if console is None:
            console = _console_class()(**self._options)
            object.__setattr__(self, "_console", console)
        return console

    def __getattr__(self, name: str) -> Any:
        return getattr(self._get(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._get(), name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._get(), name)


PIPED_WIDTH = 240
"""The width of what is printed into a pipe or a file: tables are printed whole, up to this."""


@functools.cache
def _console_class() -> type[Console]:
    """The rich ``Console`` of every command (made once rich is imported):

    - A closed pipe (``agentlens show ID | head -1``) ends its output quietly: rich would raise
      ``SystemExit(1)``; this console stops printing (its stream now writes to /dev/null), and
      the command goes on to its normal end and exit status (0), so a command that writes to
      the store is not cut short by the reader of its output going away.
    - Not a terminal (a pipe, a file), it is :data:`PIPED_WIDTH` columns wide, whatever the
      terminal the command was started from or ``COLUMNS`` say, so a table is printed whole,
      not squeezed into 80 columns; on a terminal it is the terminal's width (or ``COLUMNS``).
      A width given when it is made, or set later, is kept.
    """
    from rich.console import Console, ConsoleDimensions

    class _Console(Console):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # the width rich read from COLUMNS, or none; a width given or set later differs
            self._auto_width: object = object() if "width" in kwargs else self._width

        def on_broken_pipe(self) -> None:
            self.quiet = True
            _quiet(self.file)

        @property
        def size(self) -> ConsoleDimensions:
            size = super().size
            if self._width == self._auto_width and not self.is_terminal:
                return ConsoleDimensions(PIPED_WIDTH, size.height)
            return size

        @size.setter
        def size(self, new_size: tuple[int, int]) -> None:
            self._width, self._height = new_size

    return _Console


def make_console(**options: Any) -> Console:
    """A console like :data:`out_console` (a closed pipe is a quiet end, a pipe or a file is
    :data:`PIPED_WIDTH` wide; see :func:`_console_class`), with these options (``file=``,
    ``width=``...)."""
    return _console_class()(**options)


def real_console(console: Console) -> Console:
    """The rich ``Console`` itself behind :data:`out_console` or :data:`err_console`, for what
    takes a console as an object (a progress display enters it as a context manager)."""
    return console._get() if isinstance(console, _LazyConsole) else console


out_console: Console = _LazyConsole(highlight=False, soft_wrap=True)  # type: ignore[assignment]
err_console: Console = _LazyConsole(stderr=True, highlight=False, soft_wrap=True)  # type: ignore[assignment]


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

        url = self.settings().store_url
        if url.backend == "sqlite" and url.sqlite_path is None:
            err_console.print(
                f"note: {url} is a store in memory: it starts empty and what this command"
                " writes to it is gone when it ends (a file: sqlite:///agentlens.db)",
                markup=False,
            )
        return open_store(url, read_only=read_only)


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
            help="Store URL (sqlite:///path or postgresql://user@host/db) or a SQLite file path. "
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


def _entry_name(entry: Any) -> str | None:
    """The name a registered command (typer's ``CommandInfo``) or group (``TyperInfo``) has on
    the command line, as typer names it."""
    from typer.main import get_command_name, solve_typer_info_defaults
    from typer.models import CommandInfo

    if isinstance(entry, CommandInfo):
        if entry.name:
            return entry.name
        return get_command_name(entry.callback.__name__) if entry.callback else None
    name = solve_typer_info_defaults(entry).name
    return name if isinstance(name, str) and name else None


def _app_for(args: list[str]) -> typer.Typer:
    """The app to run ``args`` with: :data:`app` with only the command ``args`` names (see
    :func:`command_name`; typer builds the click command of every registered command on each
    call, about 50 ms for all of ours, one in a few), or the whole app (the group's help,
    ``--version``, a name that is no command, shell completion).

    The global options are parsed as before (the group and its callback are the same), and
    click finds the command the same way, so the outcome is the same as with every command
    registered (``tests/cli/test_app.py`` compares the help and errors of each)."""
    from agentlens import cli

    name = command_name(args)
    if name is None or any(k.endswith("_COMPLETE") for k in os.environ):
        cli.register()
        return app
    commands = [e for e in app.registered_commands if _entry_name(e) == name]
    groups = [e for e in app.registered_groups if _entry_name(e) == name]
    if len(commands) + len(groups) != 1:
        cli.register()  # not a command of the module imported: the whole app answers
        return app
    only = copy.copy(app)
    only.registered_commands = commands
    only.registered_groups = groups
    return only


def main(argv: list[str] | None = None) -> None:
    """The console-script entry point: user errors print one line and exit 2; no traceback."""
    from agentlens import cli

    args = sys.argv[1:] if argv is None else argv
    cli.register(args)  # the module of the command that runs
    try:
        if threading.current_thread() is threading.main_thread():
            # Ctrl-C as KeyboardInterrupt from here on (agentlens.__main__ exits at once while
            # the command line loads); set inside the try, so no window is left uncovered.
            signal.signal(signal.SIGINT, signal.default_int_handler)
        _app_for(args)(args=argv, standalone_mode=True)
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
