"""What every CLI command shares, written once: registration with one-line user errors
(:func:`command`), the command's store opened and closed (:func:`command_store`), the window
options as one :class:`~agentlens.analytics.Window` (:func:`time_window`), JSON output
(:func:`json_line`, :func:`write_json_lines`), times, previews and terminal-safe text."""

from __future__ import annotations

import functools
import json
import re
import sqlite3
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from agentlens.cli._app import err_console, fail, out_console, state
from agentlens.errors import AgentlensError, ConfigError, UnreadableRunError

if TYPE_CHECKING:  # pragma: no cover
    from datetime import timedelta

    from rich.console import Console, JustifyMethod
    from rich.text import Text

    from agentlens.model._time import Window
    from agentlens.store import TraceStore

__all__ = [
    "VERDICT_STYLE",
    "AgentOpt",
    "Column",
    "FromOpt",
    "SinceOpt",
    "ToOpt",
    "command",
    "command_store",
    "fit_widths",
    "format_time",
    "iso",
    "json_line",
    "parse_duration",
    "parse_time",
    "preview",
    "print_table",
    "report_unreadable",
    "time_window",
    "user_errors",
    "visible",
    "write_json_lines",
]

_F = TypeVar("_F", bound=Callable[..., Any])

VERDICT_STYLE = {
    "passed": "green",
    "flagged": "bold red",
    "unverifiable": "yellow",
    "error": "magenta",
}
"""The rich style of each verdict in tables and trees, by ``Verdict`` (a str enum: its members
are these keys; the model is not imported for it)."""

# The options that select runs, shared by every command that takes them.
AgentOpt = Annotated[
    str | None, typer.Option("--agent", help="Only this agent role.", metavar="AGENT")
]
SinceOpt = Annotated[
    str | None,
    typer.Option(
        "--since", help="Runs started in the last 30m, 36h, 7d... or since a date.", metavar="WHEN"
    ),
]
FromOpt = Annotated[
    str | None,
    typer.Option("--from", help="Runs started at or after this ISO time.", metavar="TIME"),
]
ToOpt = Annotated[
    str | None, typer.Option("--to", help="Runs started before this ISO time.", metavar="TIME")
]


# The model (pydantic) is imported by the commands that use it, not by every command's module.


def parse_duration(text: str) -> timedelta:
    """:func:`agentlens.model._time.parse_duration`."""
    from agentlens.model._time import parse_duration

    return parse_duration(text)


def parse_time(text: str, option: str = "time") -> datetime:
    """:func:`agentlens.model._time.parse_time`."""
    from agentlens.model._time import parse_time

    return parse_time(text, option)


def time_window(
    since: str | None,
    start: str | None,
    end: str | None,
    *,
    now: datetime | None = None,
) -> Window:
    """The ``[start, end)`` window of ``--since`` or ``--from``/``--to`` (UTC); ``lower, upper =
    time_window(...)`` unpacks it.

    ``--since`` takes a duration back from now (``7d``) or an ISO date or time.

    Raises:
        ConfigError: both ``--since`` and ``--from`` given, a bad value, or an empty window.
    """
    from agentlens.model._time import Window, parse_since

    if since is not None and start is not None:
        raise ConfigError("give --since or --from, not both")
    lower: datetime | None = None
    upper: datetime | None = None
    if since is not None:
        lower = parse_since(since, "--since", now or datetime.now(UTC))
    if start is not None:
        lower = parse_time(start, "--from")
    if end is not None:
        upper = parse_time(end, "--to")
    if lower is not None and upper is not None and upper <= lower:
        raise ConfigError(f"empty time window: --to {end!r} is not after the start")
    return Window(lower, upper)


def iso(value: datetime | None) -> str | None:
    """A time as the trace format and every ``--json`` write it: ISO 8601 in UTC with a ``Z``."""
    from agentlens.model import utc

    return None if value is None else utc(value).isoformat().replace("+00:00", "Z")


def format_time(value: datetime | None) -> str:
    """A UTC time for tables: ``2026-11-29 10:00:41Z`` (``-`` when unknown)."""
    if value is None:
        return "-"
    from agentlens.model import utc

    return utc(value).strftime("%Y-%m-%d %H:%M:%SZ")


def preview(value: Any, width: int = 60) -> str:
    """A one-line preview of a JSON value, cut to ``width`` characters with an ellipsis."""
    if value is None:
        return ""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
        except (TypeError, ValueError):
            text = repr(value)
    text = " ".join(text[: width * 4 + 64].split())  # a huge value is not joined whole
    if len(text) > width:
        return visible(text[: max(width - 1, 1)], lines=False) + "…"
    return visible(text, lines=False)


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""Characters a terminal may act on instead of printing: C0 controls other than tab and newline
(ESC starts the escape sequences that clear screens, move the cursor, set window titles or write
the clipboard through OSC 52), DEL, C1 controls (U+009B is a one-byte CSI), the line separators
and the bidirectional overrides and isolates."""


def visible(text: str, *, lines: bool = True) -> str:
    """``text`` safe to print on a terminal: every control character replaced by its escape
    (``\\x1b``, ``\\u202e``), so it shows instead of acting.

    Args:
        lines: keep newlines and tabs (for text printed on several lines); ``False`` turns
            them into spaces (for one-line fields).
    """
    if not lines:
        text = text.replace("\r\n", " ").replace("\n", " ").replace("\t", " ")
    if text.isascii() and text.isprintable():
        return text
    return _CONTROL.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_C1 = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""What ``json.dumps(ensure_ascii=False)`` leaves raw that a terminal may act on."""


def json_line(value: Any, *, ensure_ascii: bool = False, indent: int | None = None) -> str:
    """``value`` as the JSON a command prints: UTF-8 text as it is, but the characters a
    terminal may act on (C1 controls, line separators, bidirectional overrides) escaped as
    ``\\uXXXX``, which JSON reads back the same."""
    text = json.dumps(value, ensure_ascii=ensure_ascii, indent=indent)
    return _C1.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def write_json_lines(rows: Iterable[Any], *, ensure_ascii: bool = False) -> None:
    """One :func:`json_line` per row on stdout (JSON Lines), flushed at the end."""
    for row in rows:
        sys.stdout.write(json_line(row, ensure_ascii=ensure_ascii) + "\n")
    sys.stdout.flush()


def command(group: typer.Typer, name: str | None = None) -> Callable[[_F], _F]:
    """Register a command of ``group`` (``@command(app)``) whose whole body runs under
    :func:`user_errors`: what a user can cause prints one ``error: ...`` line, exit code 2."""

    def register(fn: _F) -> _F:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            with user_errors():
                return fn(*args, **kwargs)

        group.command(name)(run)
        return run  # type: ignore[return-value]

    return register


@contextmanager
def command_store(*, read_only: bool = False) -> Iterator[TraceStore]:
    """The command's store (``--db``, ``AGENTLENS_DB``, the file, the default), closed at the
    end. Commands that only read pass ``read_only=True`` (see :meth:`State.open_store
    <agentlens.cli._app.State.open_store>`)."""
    store = state.open_store(read_only=read_only)
    try:
        yield store
    finally:
        store.close()


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn the errors a user can cause into one ``error: ...`` line and exit code 2."""
    try:
        yield
    except AgentlensError as exc:
        raise fail(str(exc)) from None
    except sqlite3.Error as exc:  # a backend that let a driver error escape
        raise fail(f"database error: {exc}") from None
    except OverflowError as exc:  # a time, duration or number beyond what Python can hold
        raise fail(f"a value is out of range: {exc}") from None
    except BrokenPipeError:
        raise  # the reader went away (`agentlens runs | head`): main() exits quietly
    except OSError as exc:
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        raise fail(f"{where}{exc.strerror or exc}") from None


_UNREADABLE_SHOWN = 20
"""Unreadable runs named one by one in a report; the rest are counted."""


def report_unreadable(errors: list[UnreadableRunError], done: str) -> None:
    """One stderr line per stored run that could not be read, then how to remove them."""
    for exc in errors[:_UNREADABLE_SHOWN]:
        err_console.print(f"skipped unreadable run {exc.run_id!r}: {exc.reason}", markup=False)
    if len(errors) > _UNREADABLE_SHOWN:
        err_console.print(f"... and {len(errors) - _UNREADABLE_SHOWN} more", markup=False)
    n = len(errors)
    runs = f"{n:,} run" if n == 1 else f"{n:,} runs"
    err_console.print(
        f"{runs} could not be read and {'was' if n == 1 else 'were'} not {done}; the others "
        "were. `agentlens delete RUN_ID` removes a run.",
        markup=False,
    )


# ----------------------------------------------------------------------------- tables

KEY_WHOLE = 40
"""An id (a :attr:`Column.key` column) up to this many characters is cut only when nothing else
can make room for it (a ULID is 26, a UUID 36); the part of a longer one past this goes first."""
KEY_FLOOR = 8
"""The narrowest an id is cut to, when even that is all the terminal has room for."""
_GAP = 2
"""Cells between two columns of a table without lines (each cell's padding of one)."""
_BOXED_GAP = 3
"""Cells between two columns of a table with lines: the padding and the line."""


@dataclass(frozen=True)
class Column:
    """One column of a table sized by :func:`print_table`.

    Attributes:
        header: its heading.
        min: the narrowest it may be made (its cells then end with ``…``, or fold onto more
            lines with ``fold``) when the table is wider than the terminal; ``None``: always
            as wide as its widest cell (or dropped, or a key).
        drop: dropped when even every column at its narrowest does not fit: the lowest first;
            ``None``: never dropped.
        key: an id, which users copy: shown whole while it fits (see :data:`KEY_WHOLE`), cut
            with a trailing ``…`` only when nothing else makes room; never dropped.
        grow: the order in which the columns that were made narrower get their width back
            (lowest first, after the keys).
        fold: wrap long cells onto more lines instead of cutting them with ``…``.
        max: never wider than this (its longer cells end with ``…``).
    """

    header: str
    min: int | None = None
    drop: int | None = None
    key: bool = False
    grow: int = 0
    justify: JustifyMethod = "left"
    fold: bool = False
    max: int | None = None


def fit_widths(
    columns: Sequence[Column], natural: Sequence[int], width: int, *, gap: int = _GAP
) -> list[int | None]:
    """The width of each column (``None``: dropped) for a table of at most ``width`` cells whose
    columns' widest cells are ``natural`` wide, ``gap`` cells apart.

    Every column is as wide as its widest cell when that fits. Otherwise the columns with a
    ``min`` are made narrower, down to it, and then the spare room is given back in ``grow``
    order (keys first); when even that does not fit, the ``drop`` columns are dropped, lowest
    first, one at a time, until it does. A key longer than :data:`KEY_WHOLE` is made narrower
    like a ``min`` column (a 100,000-character id never pushes the other columns out), and a
    key is cut below that only when every droppable column is gone and the rest is at its
    narrowest."""

    def low(i: int) -> int:
        c = columns[i]
        if c.key:
            return min(natural[i], KEY_WHOLE)
        return natural[i] if c.min is None else min(natural[i], c.min)

    def attempt(shown: list[int]) -> dict[int, int] | None:
        room = width - gap * (len(shown) - 1)
        out = {i: low(i) for i in shown}
        spare = room - sum(out.values())
        if spare < 0:
            return None
        for i in sorted(shown, key=lambda i: (not columns[i].key, columns[i].grow, i)):
            more = min(spare, natural[i] - out[i])
            out[i] += more
            spare -= more
        return out

    drops = [i for _, i in sorted((c.drop, i) for i, c in enumerate(columns) if c.drop is not None)]
    for k in range(len(drops) + 1):
        gone = set(drops[:k])
        fitted = attempt([i for i in range(len(columns)) if i not in gone])
        if fitted is not None:
            return [fitted.get(i) for i in range(len(columns))]
    # Not even the columns never dropped fit at their narrowest: narrower still (down to their
    # heading), the widest first, and only then the keys cut.
    shown = [i for i, c in enumerate(columns) if c.drop is None]
    widths = {i: low(i) for i in shown}
    excess = sum(widths.values()) + gap * (len(shown) - 1) - width
    squeezable = [i for i in shown if columns[i].min is not None and not columns[i].key]
    while excess > 0:
        floors = {i: min(natural[i], max(len(columns[i].header), 8)) for i in squeezable}
        wide = [i for i in squeezable if widths[i] > floors[i]]
        if not wide:
            break
        widest = max(wide, key=lambda i: widths[i])
        widths[widest] -= 1
        excess -= 1
    keys = [i for i in shown if columns[i].key]
    for n, i in enumerate(keys):
        if excess <= 0:
            break
        cut = min(excess, widths[i] - min(widths[i], KEY_FLOOR), -(-excess // (len(keys) - n)))
        widths[i] -= cut
        excess -= cut
    return [widths.get(i) for i in range(len(columns))]


def print_table(
    columns: Sequence[Column],
    rows: Iterable[Sequence[str | Text]],
    *,
    lines: bool = True,
    console: Console | None = None,
) -> None:
    """Print a table sized to the console (a terminal's width; a pipe or a file: 240 columns):
    see :func:`fit_widths` for what gives way when it is too wide. One line per row, unless a
    ``fold`` column wraps.

    Args:
        lines: a line under the heading and between the columns (else spaces only).
        console: where to print (default :data:`~agentlens.cli._app.out_console`).
    """
    from rich.table import Table
    from rich.text import Text

    console = out_console if console is None else console
    cells = [[c if isinstance(c, Text) else Text(c) for c in row] for row in rows]
    natural = []
    for i, column in enumerate(columns):
        wide = max([len(column.header), *(_cell_width(row[i]) for row in cells)])
        natural.append(wide if column.max is None else min(wide, max(column.max, 1)))
    widths = fit_widths(columns, natural, console.width, gap=_BOXED_GAP if lines else _GAP)
    if lines:
        table = Table(show_edge=False, pad_edge=False, header_style="bold")
    else:
        table = Table(box=None, pad_edge=False, header_style="bold")
    shown = [i for i, w in enumerate(widths) if w is not None]
    for i in shown:
        column = columns[i]
        table.add_column(
            column.header,
            width=widths[i],
            no_wrap=not column.fold,
            overflow="fold" if column.fold else "ellipsis",
            justify=column.justify,
        )
    for row in cells:
        table.add_row(*(row[i] for i in shown))
    console.print(table)


def _cell_width(text: Text) -> int:
    """The cells the widest line of ``text`` takes on a terminal."""
    from rich.cells import cell_len

    plain = text.plain
    if "\n" not in plain:
        return text.cell_len
    return max(cell_len(line) for line in plain.split("\n"))
