"""``agentlens import`` and ``agentlens export``: trace files in and out of the store.

An import is all-or-nothing per file. Each file is read as a stream and handed to one
``store.put_traces`` call, which writes it in batches inside a single transaction: a bad record
anywhere in the file raises out of the stream, the transaction rolls back, and nothing of that
file is stored. Memory stays flat (one record and one batch at a time), standard input works
(one pass), and nothing is parsed twice. ``--skip-invalid`` instead leaves bad runs out, imports
the rest, and lists every run it skipped with its line, id and reason.
"""

from __future__ import annotations

import functools
import gc
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentlens.cli._app import app, err_console, fail, out_console, real_console, state
from agentlens.cli._util import (
    AgentOpt,
    FromOpt,
    SinceOpt,
    ToOpt,
    command,
    command_store,
    report_unreadable,
    time_window,
)
from agentlens.errors import FormatError, UnreadableRunError

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from agentlens.model import Trace

__all__ = ["export", "import_"]

_PROGRESS_MIN_BYTES = 4 << 20
"""Files at least this large get a progress bar (when stderr is a terminal)."""


@dataclass
class _Tally:
    """What one file's import did."""

    runs: int = 0
    steps: int = 0
    skipped: list[tuple[int | None, str | None, str]] = field(default_factory=list)
    """(line, run id, reason) of every run left out."""
    stopped: FormatError | None = None
    """With --skip-invalid: the error that ended the file early (the rest was unreadable)."""
    rejected: FormatError | None = None
    """With --skip-invalid and a converter format: the error that made the whole file skipped."""
    format: str | None = None
    """The format the file was read as (None when it could not be told)."""


@command(app, "import")
def import_(
    files: Annotated[
        list[str],
        typer.Argument(
            help="Files to import; '-' reads standard input (in the trace format).",
            metavar="FILE",
            show_default=False,
        ),
    ],
    format: Annotated[
        str | None,
        typer.Option(
            "--format",
            "-f",
            metavar="NAME",
            help="Input format: trace (agentlens's own), transcript, openai, swe-agent, "
            "openhands, who-and-when, claude-code, otlp-json. Default: told from each file's "
            "content.",
            show_default=False,
        ),
    ] = None,
    skip_invalid: Annotated[
        bool,
        typer.Option(
            "--skip-invalid",
            help="Import the valid runs and report the ones skipped (default: a bad run fails "
            "its whole file).",
        ),
    ] = False,
    per_prompt: Annotated[
        bool,
        typer.Option(
            "--per-prompt",
            help="claude-code: one run per user prompt (default: one run per session).",
        ),
    ] = False,
    no_review: Annotated[
        bool,
        typer.Option(
            "--no-review",
            help="Do not review the imported runs now (they stay pending review: "
            "`agentlens review run` reviews them later).",
        ),
    ] = False,
) -> None:
    """Import runs from files. Runs already stored under the same id are replaced.

    Then the imported runs are reviewed (scored with their role's review scorers, flagged,
    their content flagged, callbacks and the webhook told), unless --no-review.

    Without --format, each file's format is told from its content and named in the output;
    a file that fits no format is refused. The import ends with a summary per format.
    """
    from agentlens.ingest import get_reader

    if format is not None and format != "trace":
        get_reader(format)  # an unknown format fails before anything is opened
    review = None if no_review else _review_config()
    tallies: list[tuple[str, _Tally]] = []
    with command_store() as store:
        for name in files:
            tally = _Tally()
            tallies.append((name, tally))
            try:
                fmt = _format_of(name, format)
                tally.format = fmt
                if per_prompt and fmt != "claude-code":
                    raise FormatError(
                        f"--per-prompt applies to claude-code sessions; this file is {fmt}",
                        source=name,
                    )
                reader = None if fmt == "trace" else get_reader(fmt)
                if per_prompt and reader is not None:
                    reader = functools.partial(reader, per_prompt=True)  # type: ignore[call-arg]
                records = (
                    _trace_records(name, tally, skip_invalid)
                    if reader is None
                    else _foreign_records(reader, name, tally)
                )
                with _fewer_gc_pauses():
                    store.put_traces(_counted(records, tally))
            except FormatError as exc:
                if not skip_invalid:
                    raise fail(f"{exc}; nothing was imported from this file") from None
                # a converter failed, or the format could not be told: the file is skipped
                tallies[-1] = (name, _Tally(rejected=exc, format=tally.format))
                tally = tallies[-1][1]
            _report(name, tally, detected=format is None)
        if review is not None and any(t.runs for _, t in tallies):
            _review_imported(store, *review)
    _print_summary(tallies)
    if any(t.skipped or t.stopped or t.rejected for _, t in tallies):
        raise typer.Exit(1)


def _review_config() -> tuple[Any, Any]:
    """The settings review needs, checked before anything is imported."""
    from agentlens.review import review_settings

    settings = state.settings()
    return settings, review_settings(settings)


def _review_imported(store: Any, settings: Any, review: Any) -> None:
    from agentlens.review import review_pending_result

    result = review_pending_result(store, settings=settings, review=review)
    err_console.print(
        f"reviewed {result.reviewed:,} run(s): {result.flagged:,} flagged",
        markup=False,
    )


def _format_of(name: str, given: str | None) -> str:
    """The format to read ``name`` as: the one given, else the one its content shows."""
    if given is not None:
        return given
    if name == "-":
        return "trace"  # standard input is read once, as a stream: only the trace format
    from agentlens.ingest import detect

    return detect(Path(name))


@contextmanager
def _fewer_gc_pauses() -> Iterator[None]:
    """Collect garbage less often while importing.

    An import allocates millions of short-lived dicts and models that form no reference cycles
    (reference counting frees them), yet each allocation burst triggers the cyclic collector,
    which then walks everything alive. Freezing what exists and raising the first threshold
    cuts the import's CPU time by about a third; cycles are still collected, just less often.
    """
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def _trace_records(name: str, tally: _Tally, skip_invalid: bool) -> Iterator[Trace]:
    from agentlens.ingest.trace_file import scan

    size = _size(name)
    bar = _progress(name, size)
    try:
        for record in scan(name):
            if bar is not None:
                bar[0].update(bar[1], completed=record.offset)
            if record.error is not None:
                if not skip_invalid:
                    raise record.error
                tally.skipped.append((record.line, record.run_id, _reason(record.error)))
                continue
            assert record.trace is not None
            yield record.trace
    except FormatError as exc:
        if not skip_invalid:
            raise
        tally.stopped = exc
    finally:
        if bar is not None:
            bar[0].stop()


def _foreign_records(
    reader: Callable[[Path], Iterator[Trace]], name: str, tally: _Tally
) -> Iterator[Trace]:
    # Other formats read from a path; their readers raise at the first bad record.
    if name == "-":
        raise FormatError(
            "standard input can only be read with --format trace; save it to a file first",
            source="<stdin>",
        )
    yield from reader(Path(name))


def _reason(err: FormatError) -> str:
    return f"field {err.field!r}: {err.reason}" if err.field else err.reason


def _counted(records: Iterator[Trace], tally: _Tally) -> Iterator[Trace]:
    for trace in records:
        tally.runs += 1
        tally.steps += len(trace.steps)
        yield trace


def _size(name: str) -> int | None:
    if name == "-":
        return None
    try:
        return os.stat(name).st_size
    except OSError:
        return None


def _progress(name: str, size: int | None) -> tuple[Progress, TaskID] | None:
    if size is None or size < _PROGRESS_MIN_BYTES or not err_console.is_terminal:
        return None
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    progress = Progress(
        TextColumn("importing {task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=real_console(err_console),
        transient=True,
    )
    task = progress.add_task(Path(name).name, total=size)
    progress.start()
    return progress, task


def _report(name: str, tally: _Tally, *, detected: bool) -> None:
    label = "<stdin>" if name == "-" else name
    if tally.rejected is None or tally.format is not None:
        how = f"{tally.format}, detected" if detected and name != "-" else tally.format
        out_console.print(
            f"imported {_plural(tally.runs, 'run')} ({_plural(tally.steps, 'step')}) "
            f"from {label} [{how}]",
            markup=False,
        )
    for line, run_id, reason in tally.skipped:
        where = f"{label}:{line}" if line is not None else label
        who = f" run {run_id!r}" if run_id else " run"
        err_console.print(f"skipped{who} at {where}: {reason}", markup=False)
    if tally.rejected is not None:
        err_console.print(
            f"skipped the whole file: {tally.rejected}; nothing was imported from it", markup=False
        )
    if tally.stopped is not None:
        err_console.print(
            f"stopped reading {label}: {tally.stopped}; the runs before it were imported",
            markup=False,
        )


def _print_summary(tallies: list[tuple[str, _Tally]]) -> None:
    """Runs and steps imported, in all and per format, then what was skipped and why."""
    runs = sum(t.runs for _, t in tallies)
    steps = sum(t.steps for _, t in tallies)
    lines = [
        f"summary: {_plural(runs, 'run')} ({_plural(steps, 'step')}) "
        f"from {_plural(len(tallies), 'file')}"
    ]
    per_format: dict[str, list[int]] = {}
    for _, tally in tallies:
        if tally.format is not None and tally.rejected is None:
            counts = per_format.setdefault(tally.format, [0, 0, 0])
            counts[0] += tally.runs
            counts[1] += tally.steps
            counts[2] += 1
    for fmt in sorted(per_format):
        r, s, f = per_format[fmt]
        lines.append(
            f"  {fmt}: {_plural(r, 'run')} ({_plural(s, 'step')}) from {_plural(f, 'file')}"
        )
    for name, tally in tallies:
        label = "<stdin>" if name == "-" else name
        if tally.skipped:
            reasons: dict[str, int] = {}
            for _, _, reason in tally.skipped:
                reasons[reason] = reasons.get(reason, 0) + 1
            why = "; ".join(f"{r} ({n})" if n > 1 else r for r, n in reasons.items())
            lines.append(f"  skipped {_plural(len(tally.skipped), 'run')} of {label}: {why}")
        if tally.stopped is not None:
            lines.append(f"  skipped the rest of {label}: {tally.stopped.reason}")
        if tally.rejected is not None:
            lines.append(f"  skipped all of {label}: {tally.rejected.reason}")
    out_console.print("\n".join(lines), markup=False)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


@command(app)
def export(
    run_ids: Annotated[
        list[str] | None,
        typer.Argument(
            help="Ids of the runs to export (default: every run the options select).",
            metavar="[RUN_ID]...",
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", metavar="FILE", help="Write to this file (atomically) instead of stdout."
        ),
    ] = None,
    agent: AgentOpt = None,
    since: SinceOpt = None,
    start: FromOpt = None,
    end: ToOpt = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit", "-n", min=1, metavar="N", help="At most the N most recent matching runs."
        ),
    ] = None,
) -> None:
    """Export runs as JSON Lines in the trace format, oldest first.

    Runs named by id are exported whatever their time or role; an id that is not stored is an
    error, and nothing is written.
    """
    from agentlens.ingest.trace_file import write, write_file
    from agentlens.store import RunFilter

    if run_ids and any(v is not None for v in (agent, since, start, end, limit)):
        raise fail("give run ids or a filter (--agent, --since, --from, --to, --limit), not both")
    window = time_window(since, start, end)
    where = RunFilter(start=window.start, end=window.end, agent=agent)
    with command_store(read_only=True) as store:
        if run_ids:
            wanted = list(dict.fromkeys(run_ids))
            found = {r.id for r in store.list_runs(RunFilter(run_ids=wanted))}
            missing = [r for r in wanted if r not in found]
            if missing:
                named = ", ".join(repr(r) for r in missing)
                raise fail(f"no run with id {named}; nothing exported", code=1)
            where = RunFilter(run_ids=wanted)
        elif limit is not None:
            # The N most recent runs, still written oldest first.
            ids = [r.id for r in store.list_runs(where, limit=limit, newest_first=True)]
            where = RunFilter(run_ids=ids)
        unreadable: list[UnreadableRunError] = []
        traces: Iterator[Trace] = (
            iter(())
            if where.run_ids is not None and not where.run_ids
            else store.query_traces(where, newest_first=False, on_unreadable=unreadable.append)
        )
        if out is None:
            count = write(traces, sys.stdout)
            sys.stdout.flush()
        else:
            count = write_file(traces, out)
    target = "stdout" if out is None else str(out)
    err_console.print(f"exported {_plural(count, 'run')} to {target}", markup=False)
    if unreadable:
        report_unreadable(unreadable, "exported")
        raise typer.Exit(1)
