"""``agentlens score``: score stored runs (only what the current scorer versions have not seen)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentlens.cli._app import app, err_console, fail, out_console, real_console, state
from agentlens.cli._util import (
    VERDICT_STYLE,
    AgentOpt,
    Column,
    FromOpt,
    SinceOpt,
    ToOpt,
    command,
    command_store,
    json_line,
    print_table,
    time_window,
    visible,
)

if TYPE_CHECKING:  # pragma: no cover
    from agentlens.model import Score, ScoreRow

__all__ = ["score"]

_TABLE_LIMIT = 100
"""Rows the table shows; beyond that only what did not pass is listed."""
_PROGRESS_FROM = 50
"""Batches of at least this many runs get a progress bar (on a terminal)."""


@command(app)
def score(
    scorer: Annotated[
        list[str] | None,
        typer.Option(
            "--scorer",
            "-s",
            help="A scorer to run (repeat for several). Default: the configured default set.",
            metavar="NAME",
        ),
    ] = None,
    since: SinceOpt = None,
    start: FromOpt = None,
    end: ToOpt = None,
    agent: AgentOpt = None,
    rescore: Annotated[
        bool,
        typer.Option(
            "--rescore", help="Score again even runs already scored at the current version."
        ),
    ] = False,
    workers: Annotated[
        int, typer.Option("--workers", "-j", help="Score in N parallel processes.", min=1)
    ] = 1,
    judge: Annotated[
        str | None,
        typer.Option(
            "--judge",
            help="Judge backend for scorers that use one (openai, anthropic, offline...).",
            metavar="BACKEND",
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="The judge's model.", metavar="MODEL")
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="JSON Lines on stdout, one object per (run, scorer)."),
    ] = False,
) -> None:
    """Score stored runs from their evidence, without re-running the agent.

    Only what the current scorer versions have not seen yet is scored (a new scorer version, or
    new options for an agent role, re-scores history); --rescore forces. Results are stored in
    batches as they are done, so an interrupted batch continues where it stopped when run again.
    Exit status: 0 when scoring completed (flagged runs included), 1 when some stored runs could
    not be read (they are named; the others were scored), 2 on a usage or data error.
    """
    from agentlens.eval import check_settings, get_scorer
    from agentlens.eval._runner import ScoringInterrupted, score_runs
    from agentlens.store import RunFilter

    lower, upper = time_window(since, start, end)
    settings = state.settings()
    names = list(dict.fromkeys(scorer or settings.default_scorers))
    check_settings(settings, names)  # every configured option, before any run is scored
    bases = [get_scorer(name) for name in names]
    if judge is not None or model is not None:
        bases = _with_judge(bases, judge, model, settings)
    where = RunFilter(start=lower, end=upper, agent=agent)
    shown: list[ScoreRow] = []
    with command_store() as store:
        closed: list[bool] = []

        def emit(batch: list[Score]) -> None:
            if closed:
                return
            lines = (json_line(s.to_json_line()) for s in batch)
            try:
                sys.stdout.write("".join(line + "\n" for line in lines))
                sys.stdout.flush()
            except BrokenPipeError:
                # The reader went away (``| head``): keep scoring, stop printing.
                closed.append(True)
                _silence_stdout()

        def keep(batch: list[ScoreRow]) -> None:
            shown.extend(batch)
            _trim(shown)

        with _progress(enabled=not as_json) as progress:
            try:
                summary = score_runs(
                    store,
                    bases,
                    where,
                    rescore=rescore,
                    workers=workers,
                    settings=settings,
                    progress=progress,
                    on_scores=emit if as_json else None,
                    on_rows=None if as_json else keep,
                )
            except ScoringInterrupted as stop:
                done = stop.summary
                err_console.print(
                    f"interrupted after {done.examined} of {done.selected} runs; "
                    f"{done.scores_written} scores are stored. Run the same command again "
                    "to continue where it stopped.",
                    markup=False,
                )
                raise typer.Exit(130) from None
    if summary.unreadable:
        from agentlens.cli._util import report_unreadable
        from agentlens.errors import UnreadableRunError

        report_unreadable(
            [UnreadableRunError(why, run_id=r, reason=why) for r, why in summary.unreadable],
            "scored",
        )
    if as_json:
        if summary.unreadable:
            raise typer.Exit(1)
        return
    if summary.selected == 0:
        err_console.print("no runs match the selection; nothing to score", markup=False)
        return
    _print_table(shown, summary.scores_written)
    verdicts = ", ".join(f"{n} {v}" for v, n in sorted(summary.verdicts.items())) or "none"
    out_console.print(
        f"scored {summary.scored_runs} runs ({summary.scores_written} scores: {verdicts}); "
        f"{summary.skipped} already scored at the current versions; "
        f"{summary.elapsed:.1f} s",
        markup=False,
    )
    if summary.unreadable:
        raise typer.Exit(1)


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (e.g. a test runner's buffer)
        pass


_NETWORK_JUDGES = frozenset({"openai", "anthropic"})


def _with_judge(bases: list[Any], judge: str | None, model: str | None, settings: Any) -> list[Any]:
    """Bind ``judge``/``model`` to the scorers that take them (checked now, before any run is
    scored); refuse when none does, and ``--model`` when no scorer would use a network judge."""
    from agentlens.eval import resolve_scorer

    options = {k: v for k, v in (("judge", judge), ("model", model)) if v is not None}
    bound = []
    takers = []
    for base in bases:
        params = base.factory.params if base.factory is not None else {}
        accepted = {k: v for k, v in options.items() if k in params}
        if accepted:
            base = base.factory.bind({**base.options, **accepted}, settings)
            takers.append(base)
        bound.append(base)
    if not takers:
        flags = " and ".join(f"--{k}" for k in options)
        raise fail(
            f"{flags} apply to scorers that use a judge (faithful_synthesis, parametric_leakage); "
            f"none of {', '.join(b.name for b in bases)} takes them"
        )
    if model is not None and judge is None:
        roles = [None, *settings.agents]
        used = {
            (resolve_scorer(b, role, settings).version_options or {}).get("judge")
            for b in takers
            for role in roles
        }
        if not used & _NETWORK_JUDGES:
            raise fail(
                "--model is the model of a network judge, and the judge in use is offline: "
                "add --judge openai or --judge anthropic (or set [judge] backend)"
            )
    return bound


def _trim(rows: list[ScoreRow]) -> None:
    """Keep the table's rows bounded: past the limit, drop passes, then the oldest rows."""
    if len(rows) <= _TABLE_LIMIT:
        return
    kept = [r for r in rows if r.verdict != "passed"]
    rows[:] = kept[-_TABLE_LIMIT:]


_SCORE_COLUMNS = (
    Column("run", key=True),
    Column("scorer", min=12, grow=1),
    Column("verdict"),
    Column("detail", min=20, grow=2, fold=True),
)
"""``score``'s table: the run id and the verdict whole; a long detail folds onto more lines."""


def _print_table(rows: list[ScoreRow], total: int) -> None:
    if not rows:
        return
    from rich.text import Text

    from agentlens.model import Verdict

    cells: list[list[str | Text]] = []
    for row in rows:
        verdict = Verdict.ERROR if row.verdict == "None" else row.verdict  # a score without one
        detail = row.detail
        if not detail and row.finding_count and row.score is not None:
            detail = "; ".join(f"{f.failure_mode}: {f.text}" for f in row.score.findings[:3])
        cells.append(
            [
                visible(row.run_id, lines=False),
                visible(row.scorer, lines=False),
                Text(verdict, style=VERDICT_STYLE.get(verdict, "")),
                visible(detail or "", lines=False),
            ]
        )
    print_table(_SCORE_COLUMNS, cells, lines=False)  # piped: whole, up to 240 columns
    if total > len(rows):
        out_console.print(
            f"({total - len(rows)} more scores not shown: past {_TABLE_LIMIT} rows only "
            "results that did not pass are listed)",
            markup=False,
        )


@contextmanager
def _progress(*, enabled: bool) -> Iterator[Any]:
    """A progress callback: a bar with ETA on stderr when it is a terminal, else nothing."""
    if not enabled or not err_console.is_terminal:
        yield None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    progress = Progress(
        TextColumn("scoring"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("runs"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=real_console(err_console),
        transient=True,
    )
    task: list[Any] = []

    def update(done: int, total: int) -> None:
        if total < _PROGRESS_FROM:
            return
        if not task:
            progress.start()
            task.append(progress.add_task("scoring", total=total))
        progress.update(task[0], completed=done, total=total)

    try:
        yield update
    finally:
        if task:
            progress.stop()
