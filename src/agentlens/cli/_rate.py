"""``agentlens rate`` (the hallucination rate, its interval and breakdowns) and ``agentlens gate``
(fail a CI job when the rate, or its rise over a baseline, is out of bounds)."""

from __future__ import annotations

import os
import sys
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer

from agentlens.cli._app import app, err_console, fail, out_console, state
from agentlens.cli._util import (
    AgentOpt,
    FromOpt,
    ToOpt,
    command,
    command_store,
    json_line,
    parse_duration,
    time_window,
)
from agentlens.errors import AgentlensError, ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from agentlens.model._time import Window

__all__ = ["forest_bar", "gate", "parse_fraction", "rate", "sparkline", "write_atomic"]

_DEFAULT_SINCE = "7d"
"""The window of ``rate`` and ``gate`` when none is given."""


class By(StrEnum):
    """What ``rate --by`` groups runs by."""

    day = "day"
    week = "week"
    agent = "agent"
    mode = "mode"
    release = "release"
    scorer_version = "scorer_version"


_SinceOpt = Annotated[
    str | None,
    typer.Option(
        "--since",
        help="Runs started in the last 30m, 36h, 7d... (default 7d), since a date, or 'all' "
        "(every run, runs without a start time included).",
    ),
]
_ModeOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--mode",
        "-m",
        help="Count only flags in this failure mode (repeat for several).",
        metavar="MODE",
    ),
]
_ScorerOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--scorer",
        "-s",
        help="Count only this scorer (NAME or NAME@VERSION; repeat). Default: every stored scorer.",
        metavar="NAME",
    ),
]


def _window(since: str | None, start: str | None, end: str | None) -> Window:
    """The window of ``--since``/``--from``/``--to``; open on both sides for ``--since all``."""
    from agentlens.model._time import Window

    if since is not None and since.strip().lower() == "all":
        if start is not None or end is not None:
            raise ConfigError("--since all takes every run; it cannot be combined with --from/--to")
        return Window(None, None)
    if since is None and start is None:  # the default start, said so if --to is before it
        lower = time_window(_DEFAULT_SINCE, None, None).start
        upper = time_window(None, None, end).end
        assert lower is not None
        if upper is not None and upper <= lower:
            raise ConfigError(
                f"empty time window: --to {end!r} is not after the start, which is"
                f" {_DEFAULT_SINCE} ago when neither --since nor --from is given; give one of them"
            )
        return Window(lower, upper)
    window = time_window(since, start, end)
    assert window.start is not None
    return window


def _window_label(start: datetime | None, end: datetime | None) -> str:
    from agentlens.model._time import Window

    return Window(start, end).label()


def _pct(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x * 100:.{digits}f}%"


def parse_fraction(text: str, option: str) -> float:
    """``0.05`` or ``5%`` as a fraction.

    Raises:
        ConfigError: not a number (or a percentage) between 0 and 1.
    """
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
    except ValueError:
        raise ConfigError(
            f"bad {option} {text!r}: use a fraction (0.05) or a percentage (5%)"
        ) from None
    if not 0.0 <= value <= 1.0:
        raise ConfigError(f"bad {option} {text!r}: must be between 0 and 1 (0% and 100%)")
    return value


# ---------------------------------------------------------------- charts

_SPARKS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float | None]) -> str:
    """One character per value, scaled to the largest; a gap (space) where there is no value."""
    known = [v for v in values if v is not None]
    top = max(known, default=0.0)
    out = []
    for v in values:
        if v is None:
            out.append(" ")
        elif top <= 0:
            out.append(_SPARKS[0])
        else:
            out.append(_SPARKS[min(len(_SPARKS) - 1, int(v / top * (len(_SPARKS) - 1) + 0.5))])
    return "".join(out)


def forest_bar(
    rate: float | None, low: float | None, high: float | None, scale: float, width: int = 24
) -> str:
    """The interval as a line and the estimate as a dot, on a 0..``scale`` axis: ``  ├──●───┤``."""
    if rate is None or low is None or high is None or scale <= 0:
        return " " * width
    last = width - 1

    def pos(x: float) -> int:
        return max(0, min(last, round(x / scale * last)))

    lo, mid, hi = pos(low), pos(rate), pos(high)
    cells = [" "] * width
    for i in range(lo, hi + 1):
        cells[i] = "─"
    if hi > lo:
        cells[lo] = "├"
        cells[hi] = "┤"
    cells[mid] = "●"
    return "".join(cells)


# ---------------------------------------------------------------- rate


@command(app)
def rate(
    since: _SinceOpt = None,
    start: FromOpt = None,
    end: ToOpt = None,
    agent: AgentOpt = None,
    mode: _ModeOpt = None,
    scorer: _ScorerOpt = None,
    by: Annotated[
        By | None,
        typer.Option(
            "--by", help="Break the rate down by day, week, agent, mode, release or scorer_version."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
) -> None:
    """The hallucination rate over a window, with a 95% Wilson interval and the flagged run ids.

    A run is flagged when any counted scorer (at its current version) flagged it; runs a check
    could not verify, and runs a scorer failed on, are counted apart and never as passes:
    rate = flagged / (flagged + passed).
    """
    from agentlens.analytics import hallucination_rate, rate_breakdown

    lower, upper = _window(since, start, end)
    settings = state.settings()
    with command_store(read_only=True) as store:
        common: dict[str, Any] = {
            "start": lower,
            "end": upper,
            "agent": agent,
            "modes": mode or None,
            "scorers": scorer or None,
            "store": store,
            "settings": settings,
        }
        if by is not None:
            breakdown = rate_breakdown(str(by), **common)
        else:
            report = hallucination_rate(**common)
    if as_json:
        data = breakdown.to_json() if by is not None else report.to_json()
        sys.stdout.write(json_line(data) + "\n")
        return
    if by is not None:
        _print_breakdown(breakdown)
    else:
        _print_report(report)


def _print_report(report: Any) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("window", _window_label(report.start, report.end))
    if report.agent:
        table.add_row("agent", report.agent)
    if report.modes:
        table.add_row("modes", ", ".join(report.modes))
    rate_text = Text(_pct(report.rate, 2), style="bold red" if report.flagged else "bold green")
    if report.rate is not None:
        rate_text.append(
            f"  (95% CI {_pct(report.ci_low, 2)} – {_pct(report.ci_high, 2)})", style=""
        )
    table.add_row("rate", rate_text)
    table.add_row("flagged", f"{report.flagged} of {report.scored} scored runs")
    table.add_row("unverifiable", f"{report.unverifiable} (counted apart)")
    table.add_row("errors", f"{report.errors} (counted apart)")
    table.add_row("unscored", str(report.unscored))
    table.add_row("runs", str(report.runs))
    table.add_row(
        "scorers", ", ".join(f"{n}@{'/'.join(v) or '-'}" for n, v in report.scorers.items()) or "-"
    )
    out_console.print(table)
    modes = [(m, n) for m, n in report.by_mode.items() if n]
    if modes:
        out_console.print()
        by_mode = Table(box=None, pad_edge=False, header_style="bold")
        by_mode.add_column("failure mode")
        by_mode.add_column("flagged", justify="right")
        by_mode.add_column("of scored", justify="right")
        for m, n in sorted(modes, key=lambda kv: (-kv[1], kv[0])):
            by_mode.add_row(m, str(n), _pct(n / report.scored if report.scored else None, 2))
        out_console.print(by_mode)
    if report.flagged_run_ids:
        out_console.print()
        shown = report.flagged_run_ids[-20:]
        out_console.print(
            f"flagged runs ({len(report.flagged_run_ids)}"
            + (", newest 20" if len(report.flagged_run_ids) > 20 else "")
            + "): "
            + " ".join(shown),
            markup=False,
        )
    if report.scored == 0:
        err_console.print(
            "no scored runs in this window; score them with `agentlens score`"
            " (runs without a start time, as imported logs often are, count only with"
            " --since all)",
            markup=False,
        )


def _print_breakdown(breakdown: Any) -> None:
    groups = breakdown.groups
    out_console.print(
        f"rate by {breakdown.by}, {_window_label(breakdown.start, breakdown.end)}", markup=False
    )
    if not groups:
        err_console.print("no runs in this window", markup=False)
        return
    from agentlens.cli._util import Column, print_table

    timeline = breakdown.by in ("day", "week")
    scale = max((g.ci_high or 0.0) for g in groups) or 1.0
    # the counts always whole; a long group name (an agent, a release) is cut, then the chart
    # is left out, on a narrow terminal
    columns = [Column(breakdown.by, min=12, grow=1)]
    columns += [
        Column(name, justify="right") for name in ("runs", "scored", "flagged", "rate", "95% CI")
    ]
    columns.append(Column("apart", justify="right"))
    if timeline:
        columns.append(Column(f"0 ─ {_pct(scale, 1)}", drop=1))
    rows = []
    for g in groups:
        row = [
            "(none)" if g.key is None else str(g.key),
            str(g.runs),
            str(g.scored),
            str(g.flagged),
            _pct(g.rate),
            "-" if g.rate is None else f"{g.ci_low * 100:.1f}–{g.ci_high * 100:.1f}",
            str(g.unverifiable + g.errors),
        ]
        if timeline:
            row.append(forest_bar(g.rate, g.ci_low, g.ci_high, scale, width=20))
        rows.append(row)
    print_table(columns, rows, lines=False)
    out_console.print(
        "apart: unverifiable and errored runs, counted apart from the rate", markup=False
    )
    if timeline and len(groups) > 1:
        out_console.print(
            f"trend  {sparkline([g.rate for g in groups])}  ({groups[0].key} → {groups[-1].key})",
            markup=False,
        )


# ---------------------------------------------------------------- gate


def write_atomic(path: Path, text: str, *, append: bool = False) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename (readers never see half a
    file: :func:`agentlens.ingest._atomic.write_atomic`); with ``append``, the new file is the old
    content, kept byte for byte, followed by ``text``. A missing folder is created. An
    :class:`OSError` names ``path``."""
    from agentlens.ingest._atomic import write_atomic as write_file

    path = Path(path)
    old = path.read_bytes() if append and path.is_file() else None
    if not path.parent.exists():  # reports/gate.xml in a fresh CI checkout, as pytest does
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(path)) from None

    def write(fp: TextIO) -> None:
        if old is not None:
            fp.buffer.write(old)
            if text:
                fp.buffer.write(b"\n")
        fp.write(text)

    write_file(path, write)


def _is_step_summary(path: Path) -> bool:
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if not summary:
        return False
    return Path(summary).resolve() == path.resolve()


@command(app)
def gate(
    max_rate: Annotated[
        str,
        typer.Option(
            "--max-rate", help="Fail when the rate is above this (0.05 or 5%).", metavar="R"
        ),
    ],
    since: _SinceOpt = None,
    start: FromOpt = None,
    end: ToOpt = None,
    agent: AgentOpt = None,
    mode: _ModeOpt = None,
    scorer: _ScorerOpt = None,
    baseline_since: Annotated[
        str | None,
        typer.Option(
            "--baseline-since",
            help="Compare with the window of this length (e.g. 14d) just before the current one.",
            metavar="DURATION",
        ),
    ] = None,
    max_increase: Annotated[
        str | None,
        typer.Option(
            "--max-increase",
            help="Fail when the rate rose by more than this over the baseline (0.01 or 1%).",
            metavar="D",
        ),
    ] = None,
    significant_only: Annotated[
        bool,
        typer.Option(
            "--significant-only",
            help="Fail on an increase only when it is also larger than noise (p < 0.05).",
        ),
    ] = False,
    upper_bound: Annotated[
        bool,
        typer.Option(
            "--upper-bound",
            help="Check the upper end of the rate's 95% interval against --max-rate, not the"
            " rate: pass only when the runs show it is within (one clean run does not).",
        ),
    ] = False,
    junit: Annotated[
        Path | None, typer.Option("--junit", help="Write a JUnit XML report here.", metavar="FILE")
    ] = None,
    markdown: Annotated[
        str | None,
        typer.Option(
            "--markdown",
            help="Write a Markdown summary here (appended to $GITHUB_STEP_SUMMARY); an empty "
            "value (an unset $GITHUB_STEP_SUMMARY outside CI) writes none.",
            metavar="FILE",
        ),
    ] = None,
    max_listed: Annotated[
        int,
        typer.Option("--max-listed", help="List at most N flagged runs in the reports.", min=0),
    ] = 200,
    as_json: Annotated[
        bool, typer.Option("--json", help="The outcome as one JSON object.")
    ] = False,
) -> None:
    """Exit 0 when the rate (and its increase over a baseline) is within bounds, 1 when it is
    not, 2 on a usage or data error. A window with no scored runs is an error, never a pass.

    The baseline window is the --baseline-since length immediately before the current window:
    with --since 7d --baseline-since 14d it is the 14 days that end 7 days ago.
    """
    from agentlens.analytics import evaluate_gate, hallucination_rate

    limit = parse_fraction(max_rate, "--max-rate")
    increase = None if max_increase is None else parse_fraction(max_increase, "--max-increase")
    if increase is not None and baseline_since is None:
        raise ConfigError("--max-increase needs --baseline-since (the window to compare with)")
    if significant_only and increase is None:
        raise ConfigError("--significant-only applies to --max-increase")
    window = _window(since, start, end)
    base_window: Window | None = None
    if baseline_since is not None:
        length = parse_duration(baseline_since)
        if window.start is None:
            raise ConfigError("--baseline-since needs a window with a start; not --since all")
        base_window = window.preceding(length, f"bad --baseline-since {baseline_since!r}")
    settings = state.settings()
    label = window.label()
    base_label = "" if base_window is None else base_window.label()
    error: str | None = None
    result = None
    runs: list[Any] = []
    try:
        with command_store(read_only=True) as store:
            common: dict[str, Any] = {
                "agent": agent,
                "modes": mode or None,
                "scorers": scorer or None,
                "store": store,
                "settings": settings,
            }
            current = hallucination_rate(start=window.start, end=window.end, **common)
            baseline = None
            if base_window is not None:
                same = _same_versions(current, scorer)
                if same is not None:  # the baseline counts what the current window counts
                    common["scorers"] = same
                baseline = hallucination_rate(
                    start=base_window.start, end=base_window.end, **common
                )
            try:
                result = evaluate_gate(
                    current,
                    max_rate=limit,
                    baseline=baseline,
                    max_increase=increase,
                    significant_only=significant_only,
                    upper_bound=upper_bound,
                )
            except ValueError as exc:
                error = str(exc)
            listed = current.flagged_run_ids[:max_listed] if result is not None else []
            runs = _flagged_runs(store, current, listed) if listed else []
    except AgentlensError as exc:
        # a store that is not there, a --scorer that counts nothing: a data error, which the
        # reports say too (the CI job's artifact and summary), as for an empty window
        error, result, runs = str(exc), None, []
    omitted = result.current.flagged - len(runs) if result is not None else 0
    markdown_path: Path | None = None
    if markdown is not None and markdown.strip():
        markdown_path = Path(markdown)
    elif markdown is not None:
        err_console.print(
            "--markdown is empty ($GITHUB_STEP_SUMMARY is not set outside GitHub Actions): "
            "no Markdown summary written",
            markup=False,
        )
    _write_reports(junit, markdown_path, result, runs, error, omitted, label, base_label)
    if error is not None:
        raise fail(error)
    assert result is not None
    if as_json:
        sys.stdout.write(json_line(result.to_json()) + "\n")
    else:
        from rich.text import Text

        out_console.print(
            Text(
                f"gate {'passed' if result.passed else 'FAILED'}",
                style="bold green" if result.passed else "bold red",
            )
        )
        for check in result.checks:
            mark = "✓" if check.passed else "✗"
            out_console.print(f"  {mark} {check.message}", markup=False)
        cur = result.current
        out_console.print(
            f"  95% CI {_pct(cur.ci_low, 2)} – {_pct(cur.ci_high, 2)}; {cur.unverifiable} "
            f"unverifiable and {cur.errors} errored runs counted apart; {cur.unscored} unscored",
            markup=False,
        )
    if not result.passed:
        raise typer.Exit(1)


def _same_versions(current: Any, given: list[str] | None) -> list[str] | None:
    """The scorers for the baseline window, pinned where the current window's choice of version
    depends on the window: a scorer not registered here counts at the newest version stored
    in *its* window, so the baseline could count another version than the current window (an
    increase of one version's rate over another's). ``None``: the same selection will do."""
    from agentlens.errors import ScorerError
    from agentlens.eval import get_scorer

    items = list(given) if given else list(current.scorers)
    out: list[str] = []
    changed = False
    for item in items:
        name = item.partition("@")[0].strip()
        if "@" in item:
            out.append(item)
            continue
        try:
            get_scorer(name)
        except ScorerError:
            changed = True
            out.extend(f"{name}@{v}" for v in current.scorers.get(name, []))
            continue
        out.append(item)
    return out if changed else None


def _flagged_runs(store: Any, report: Any, run_ids: list[str]) -> list[Any]:
    """The flagged runs with the counted scores that flagged them."""
    from agentlens.analytics import FlaggedRun
    from agentlens.model import Verdict
    from agentlens.store import RunFilter

    summaries = {s.id: s for s in store.list_runs(RunFilter(run_ids=run_ids), newest_first=False)}
    wanted_modes = set(report.modes) if report.modes else None
    runs = []
    for run_id in run_ids:
        scores = []
        for s in store.get_scores(run_id):
            if s.verdict is not Verdict.FLAGGED or s.version not in report.scorers.get(
                s.scorer, []
            ):
                continue
            if wanted_modes is not None:
                s = s.model_copy(
                    update={
                        "findings": [f for f in s.findings if str(f.failure_mode) in wanted_modes]
                    }
                )
                if not s.findings:
                    continue
            scores.append(s)
        summary = summaries.get(run_id)
        runs.append(
            FlaggedRun(
                run_id=run_id,
                scores=scores,
                agent=None if summary is None else summary.agent,
                started_at=None if summary is None else summary.started_at,
            )
        )
    return runs


def _write_reports(
    junit: Path | None,
    markdown: Path | None,
    result: Any,
    runs: list[Any],
    error: str | None,
    omitted: int,
    label: str,
    base_label: str,
) -> None:
    from agentlens.analytics import render_junit, render_markdown

    if junit is not None:
        write_atomic(junit, render_junit(result, runs, error=error, omitted=omitted))
    if markdown is not None:
        append = _is_step_summary(markdown)
        budget = None
        if append:  # GitHub drops a step's whole summary past 1 MiB: what is there counts
            before = markdown.stat().st_size if markdown.is_file() else 0
            budget = max(0, _STEP_SUMMARY_LIMIT - before - 1)
        text = render_markdown(
            result,
            runs,
            error=error,
            omitted=omitted,
            window=label,
            baseline_window=base_label,
            max_bytes=budget,
        )
        write_atomic(markdown, text, append=append)


_STEP_SUMMARY_LIMIT = 1024 * 1024
"""The most a GitHub Actions step's job summary may hold, in bytes."""
