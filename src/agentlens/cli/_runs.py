"""``agentlens runs`` (a listing) and ``agentlens show`` (one run, its steps and its findings)."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentlens.cli._app import app, out_console
from agentlens.cli._review import summary_json
from agentlens.cli._util import (
    VERDICT_STYLE,
    AgentOpt,
    Column,
    FromOpt,
    SinceOpt,
    ToOpt,
    command,
    command_store,
    format_time,
    iso,
    json_line,
    preview,
    print_table,
    time_window,
    visible,
    write_json_lines,
)
from agentlens.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from rich.text import Text

    from agentlens.model import Finding, Score, Step, Trace, Verdict
    from agentlens.store import RunSummary, TraceStore
    from agentlens.store._flags import RunFlags
    from agentlens.store._protocol import VerdictRecord

__all__ = [
    "describe_finding",
    "latest_scores",
    "print_score",
    "render_answer",
    "render_run",
    "runs",
    "show",
    "verdict_summary",
]

# by Verdict (a str enum: its members are these keys)
_MARK = {
    "passed": "✓",
    "flagged": "✗",
    "unverifiable": "?",
    "error": "!",
}
_HIGHLIGHT = "bold red reverse"
ANSWER_SHOWN = 20_000
"""Characters of the answer ``show`` prints unless ``--full``."""


def latest_scores(scores: Iterable[Score]) -> list[Score]:
    """The most recent score of each scorer (any version), in scorer-name order."""
    latest: dict[str, Score] = {}
    for score in scores:
        seen = latest.get(score.scorer)
        if seen is None or score.scored_at >= seen.scored_at:
            latest[score.scorer] = score
    return [latest[name] for name in sorted(latest)]


def verdict_summary(scores: Sequence[Score]) -> tuple[Verdict | None, str]:
    """The run's overall verdict and a short text for tables: ``flagged: a, b``, ``passed (3)``.

    ``flagged`` wins over ``error``, which wins over ``unverifiable``; ``None`` when unscored.
    """
    from agentlens.model import Verdict, worst_verdict

    if not scores:
        return None, ""
    verdict = worst_verdict(s.verdict for s in scores)
    if verdict is Verdict.PASSED or verdict is None:
        return Verdict.PASSED, f"passed ({len(scores)})"
    return verdict, f"{verdict}: {', '.join(s.scorer for s in scores if s.verdict is verdict)}"


@command(app)
def runs(
    agent: AgentOpt = None,
    since: SinceOpt = None,
    start: FromOpt = None,
    end: ToOpt = None,
    limit: Annotated[
        int,
        typer.Option(
            "--limit",
            "-n",
            min=0,
            metavar="N",
            help="Show at most N runs, newest first; 0 for all.",
        ),
    ] = 50,
    flagged: Annotated[
        bool,
        typer.Option("--flagged", help="Only runs flagged hallucination_detected (from an index)."),
    ] = False,
    mode: Annotated[
        str | None,
        typer.Option(
            "--mode",
            metavar="MODE",
            help="Only flagged runs with a finding of this failure mode (fabricated_grounding, "
            "parametric_leakage, unsupported_synthesis, repeated_tool_call, alternating_loop, "
            "error_loop, repeated_message, excessive_steps, no_progress).",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="JSON Lines, one object per run.")
    ] = False,
) -> None:
    """List stored runs, newest first, with their verdicts when they have been scored."""
    from agentlens.model import FailureMode
    from agentlens.store import RunFilter

    window = time_window(since, start, end)
    if mode is not None and mode not in {m.value for m in FailureMode}:
        known = ", ".join(m.value for m in FailureMode)
        raise ConfigError(f"unknown --mode {mode!r}; failure modes: {known}")
    where = RunFilter(
        start=window.start,
        end=window.end,
        agent=agent,
        flagged=True if flagged else None,
        failure_mode=mode,
    )
    with command_store(read_only=True) as store:
        rows = store.list_runs(where, limit=limit or None, newest_first=True)
        if as_json:
            write_json_lines(
                (_summary_json(r, latest_scores(store.get_scores(r.id))) for r in rows),
                ensure_ascii=True,
            )
            return
        _print_table(store, rows)


def _summary_json(summary: RunSummary, scores: Sequence[Score]) -> dict[str, Any]:
    verdict, _ = verdict_summary(scores)
    return {
        "id": summary.id,
        "project": summary.project,
        "agent": summary.agent,
        "name": summary.name,
        "status": summary.status,
        "started_at": iso(summary.started_at),
        "ended_at": iso(summary.ended_at),
        "step_count": summary.step_count,
        "has_output": summary.has_output,
        "metadata": summary.metadata,
        "verdict": None if verdict is None else str(verdict),
        "scores": {s.scorer: str(s.verdict) for s in scores},
        **summary_json(summary),
    }


_RUN_COLUMNS = (
    Column("id", key=True),
    Column("agent", min=8, drop=4, grow=3, max=20),
    Column("name", min=12, drop=2, grow=4, max=40),
    Column("started", drop=3),
    Column("steps", drop=1, justify="right"),
    Column("status"),
    Column("verdict", min=18, grow=1),
    Column("reason", min=18, drop=5, grow=2),
)
"""The columns of ``agentlens runs``: the id, status and verdict are always shown; when the
terminal is narrow, the name, the reason, the agent and the verdict's scorers are cut first
(``…``), then the steps, the name, the start, the agent and the reason are left out, in that
order."""


def _print_table(store: TraceStore, rows: Iterable[RunSummary]) -> None:
    from rich.text import Text

    cells = []
    for summary in rows:
        verdict, text = verdict_summary(latest_scores(store.get_scores(summary.id)))
        cells.append(
            [
                Text(visible(summary.id, lines=False)),
                Text(visible(summary.agent or "", lines=False)),
                Text(preview(summary.name, 40)),
                Text(format_time(summary.started_at)),
                Text(str(summary.step_count)),
                Text(
                    visible(summary.status, lines=False),
                    style="red" if summary.status == "error" else "",
                ),
                Text(
                    visible(text, lines=False),
                    style=VERDICT_STYLE.get(verdict, "") if verdict else "dim",
                ),
                Text(preview(summary.hallucination_reason or "", 80), style="red"),
            ]
        )
    if not cells:
        out_console.print("no runs match", markup=False)
        return
    print_table(_RUN_COLUMNS, cells)  # into a pipe or a file: whole, up to 240 columns


@command(app)
def show(
    run_id: Annotated[
        str, typer.Argument(help="The run id (see `agentlens runs`).", metavar="RUN_ID")
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="The run in the trace format, plus a 'scores' list.")
    ] = False,
    full: Annotated[
        bool,
        typer.Option(
            "--full",
            help=f"Print the whole answer (default: its first {ANSWER_SHOWN:,} characters).",
        ),
    ] = False,
) -> None:
    """Show one run: its steps as a tree, the answer, and each scorer's findings in place.

    Control characters from the trace (terminal escape sequences, carriage returns...) are
    printed as visible escapes (``\\x1b``), never sent to the terminal.
    """
    from agentlens.store import RunFilter

    with command_store(read_only=True) as store:
        trace = store.get_trace(run_id)
        scores = store.get_scores(run_id)
        flags = store.get_flags(run_id)
        verdicts = store.get_verdicts(run_id)
        summary = next(iter(store.list_runs(RunFilter(run_ids=[run_id]))), None)
    if as_json:
        doc = trace.to_dict()
        review = summary_json(summary) if summary is not None else {}
        review["findings"] = [f.to_json() for f in flags.findings] if flags else []
        review["verdicts"] = [_verdict_json(v) for v in verdicts]
        doc["review"] = review
        doc["scores"] = [s.to_json_line() for s in scores]
        sys.stdout.write(json_line(doc, indent=2) + "\n")
        sys.stdout.flush()
        return
    render_run(trace, latest_scores(scores), flags=flags, verdicts=verdicts, full=full)


def _verdict_json(v: VerdictRecord) -> dict[str, Any]:
    return {
        "finding_key": v.finding_key,
        "scorer": v.scorer,
        "failure_mode": v.failure_mode,
        "text": v.text,
        "verdict": v.verdict,
        "note": v.note,
        "by": v.author,
        "scope": v.scope,
        "live": v.live,
        "created_at": iso(v.created_at),
    }


def render_flags(flags: RunFlags | None, verdicts: Sequence[VerdictRecord] = ()) -> None:
    """The run's flag, its reason first, then its numbered findings with their verdicts."""
    from rich.text import Text

    console = out_console
    if flags is None:
        return
    if flags.hallucination_detected:
        line = Text("HALLUCINATION DETECTED: ", style="bold red")
        line.append(visible(flags.reason or "", lines=False), style="red")
        console.print(line)
    elif str(flags.state) == "unverifiable":
        console.print(
            Text(
                "unverifiable: a check could not verify a claim (not flagged, not cleared)",
                style="yellow",
            )
        )
    elif str(flags.state) == "error":
        console.print(
            Text("review error: a scorer failed (not flagged, not cleared)", style="magenta")
        )
    else:
        console.print(Text("clean: no hallucination detected", style="green"))
    live = {v.finding_key: v for v in verdicts if v.live}
    for f in flags.findings:
        line = Text(f"  {f.n}. ", style="bold")
        line.append(visible(f"[{f.failure_mode or f.scorer}] ", lines=False), style="red")
        line.append(visible(f.detail, lines=False))
        line.append(visible(f"  ({f.scorer}", lines=False), style="dim")
        if f.step_ids:
            line.append(visible(f", steps {', '.join(f.step_ids)}", lines=False), style="dim")
        line.append(")", style="dim")
        v = live.get(f.key)
        if v is not None:
            line.append(
                f"  verdict: {v.verdict}", style="green" if v.verdict == "confirmed" else "yellow"
            )
            if v.author:
                line.append(visible(f" by {v.author}", lines=False), style="dim")
            if v.note:
                line.append(visible(f": {v.note}", lines=False), style="dim")
        console.print(line)


def render_run(
    trace: Trace,
    scores: Sequence[Score],
    *,
    flags: RunFlags | None = None,
    verdicts: Sequence[VerdictRecord] = (),
    full: bool = False,
) -> None:
    """Print a run for a human: its flag and reason first, then header, step tree, answer with
    findings marked, scores.

    The answer is cut after :data:`ANSWER_SHOWN` characters (with a note saying how to see it
    all) unless ``full``.
    """
    from rich.text import Text

    console = out_console
    render_flags(flags, verdicts)
    header = Text("run ", style="bold")
    header.append(visible(trace.id, lines=False), style="bold cyan")
    console.print(header)
    facts = [
        ("agent", trace.agent),
        ("name", trace.name),
        ("status", trace.status),
        ("started", format_time(trace.started_at) if trace.started_at else None),
        ("duration", _duration(trace.started_at, trace.ended_at)),
        ("project", trace.project if trace.project != "default" else None),
        ("links", preview(trace.links, 100) if trace.links else None),
        ("metadata", preview(trace.metadata, 100) if trace.metadata else None),
        ("input", preview(trace.input, 200) if trace.input is not None else None),
    ]
    for key, value in facts:
        if value:
            line = Text(f"  {key}: ", style="dim")
            line.append(visible(str(value), lines=False))
            console.print(line)

    console.print(Text(f"steps ({len(trace.steps)})", style="bold"))
    if not trace.steps:
        console.print(Text("  (none)", style="dim"))
    for prefix, step in _tree(trace.steps):
        console.print(_step_line(prefix, step))

    texts = _turn_texts(trace)
    console.print(Text("answer", style="bold"))
    limit = None if full else ANSWER_SHOWN
    answer = render_answer(trace, scores, texts, limit=limit)
    console.print(_indent(answer, "  ") if answer.plain else Text("  (no answer)", style="dim"))
    whole = len(texts.get("output", ""))
    if limit is not None and whole > limit:
        note = (
            f"  (the answer is cut here: {limit:,} of {whole:,} characters shown; "
            f"`agentlens show {trace.id} --full` prints it all, `--json` as data)"
        )
        console.print(Text(visible(note, lines=False), style="yellow"))

    console.print(Text("scores", style="bold"))
    if not scores:
        console.print(Text("  not scored yet (run `agentlens score`)", style="dim"))
    for score in scores:
        print_score(score, trace, texts)


def render_answer(
    trace: Trace,
    scores: Sequence[Score],
    texts: dict[str, str] | None = None,
    *,
    limit: int | None = None,
) -> Text:
    """The run's final answer with every finding's token in it highlighted (its first ``limit``
    characters when given); control characters are made visible."""
    texts = texts if texts is not None else _turn_texts(trace)
    answer = texts.get("output", "")
    # A finding in a model reply that is the answer itself is marked in the answer too.
    same = {loc for loc, text in texts.items() if text == answer}
    spans = [_span(f, answer) for s in scores for f in s.findings if f.location in same]
    if limit is not None and len(answer) > limit:
        answer = answer[:limit]
        spans = [(a, min(b, limit)) for a, b in (sp for sp in spans if sp) if a < limit]
    return _highlighted(answer, [sp for sp in spans if sp])


def _tree(steps: Sequence[Step]) -> list[tuple[str, Step]]:
    """Steps in file order, nested by ``parent_id``, with tree-drawing prefixes."""
    ids = {s.id for s in steps}
    children: dict[str | None, list[Step]] = {}
    for step in steps:
        parent = step.parent_id if step.parent_id in ids and step.parent_id != step.id else None
        children.setdefault(parent, []).append(step)
    out: list[tuple[str, Step]] = []
    seen: set[str] = set()

    def walk(parent: str | None, lead: str) -> None:
        kids = children.get(parent, [])
        for i, step in enumerate(kids):
            if step.id in seen:  # a cycle of parent ids: show each step once
                continue
            seen.add(step.id)
            last = i == len(kids) - 1
            out.append((lead + ("└─ " if last else "├─ "), step))
            walk(step.id, lead + ("   " if last else "│  "))

    walk(None, "  ")
    for step in steps:  # steps only reachable through a cycle
        if step.id not in seen:
            seen.add(step.id)
            out.append(("  ?─ ", step))
    return out


def _step_line(prefix: str, step: Step) -> Text:
    from rich.text import Text

    line = Text(prefix, style="dim")
    line.append(visible(step.id, lines=False), style="cyan")
    line.append(f" {step.kind}", style="bold")
    if step.name:
        line.append(" " + visible(step.name, lines=False))
    shows_input = step.kind in ("tool", "retrieval", "llm", "agent")
    if shows_input and step.input is not None:
        line.append("  in: ", style="dim")
        line.append(preview(step.input, 50))
    if step.output is not None:
        line.append("  out: " if shows_input else "  ", style="dim")
        line.append(preview(step.output, 70))
    if step.error is not None:
        line.append("  error: ", style="red")
        line.append(preview(step.error, 60), style="red")
    if step.attributes.get("truncated"):
        line.append("  (output truncated)", style="yellow")
    duration = _duration(step.started_at, step.ended_at)
    if duration:
        line.append(f"  {duration}", style="dim")
    return line


def _duration(start: Any, end: Any) -> str | None:
    if start is None or end is None:
        return None
    seconds = (end - start).total_seconds()
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.1f} s"


def _turn_texts(trace: Trace) -> dict[str, str]:
    """The text each finding's span refers to: the answer and every assistant turn."""
    from agentlens.eval import Evidence, text_of

    texts = {"output": text_of(trace.output)}
    try:
        for turn in Evidence(trace).turns:
            texts[turn.location] = turn.text
    except Exception:  # a display must not fail on an odd trace
        pass
    return texts


def _span(finding: Finding, text: str) -> tuple[int, int] | None:
    """Where the finding sits in ``text``: its recorded span, else the token's first occurrence."""
    if not finding.text:
        return None
    start, end = finding.start, finding.end
    if start is not None and end is not None and 0 <= start < end <= len(text):
        return start, end
    found = text.find(finding.text)
    return (found, found + len(finding.text)) if found >= 0 else None


def _highlighted(text: str, spans: Sequence[tuple[int, int]]) -> Text:
    """``text`` with its control characters made visible and ``spans`` (offsets into the raw
    text) highlighted: each piece between span boundaries is made visible on its own, so the
    highlights stay on the tokens they mark."""
    from rich.text import Text

    marks = sorted({0, len(text), *(p for sp in spans for p in sp if 0 <= p <= len(text))})
    out = Text()
    for start, end in itertools.pairwise(marks):
        piece = visible(text[start:end])
        lit = any(a <= start and end <= b for a, b in spans)
        out.append(piece, style=_HIGHLIGHT if lit else "")
    return out


def _indent(text: Text, lead: str) -> Text:
    from rich.text import Text

    lines = text.split("\n")
    out = Text()
    for i, line in enumerate(lines):
        if i:
            out.append("\n")
        out.append(lead)
        out.append_text(line)
    return out


def print_score(
    score: Score, trace: Trace, texts: dict[str, str] | None = None, indent: str = "  "
) -> None:
    """Print one score: its verdict, then each finding with the closest evidence and where
    the token sits in the text it was found in."""
    from rich.text import Text

    from agentlens.model import Verdict

    if texts is None:
        texts = _turn_texts(trace)
    verdict = score.verdict or Verdict.ERROR
    line = Text(f"{indent}{_MARK[verdict]} ", style=VERDICT_STYLE[verdict])
    line.append(visible(score.scorer, lines=False), style="bold")
    line.append(visible(f" v{score.version}: ", lines=False), style="dim")
    line.append(str(verdict), style=VERDICT_STYLE[verdict])
    if score.detail:
        line.append(visible(f" — {score.detail}", lines=False))
    out_console.print(line)
    # The same token found in several turns (a model reply and the final answer that repeats
    # it) is shown once, in the answer when it is there, naming the other places.
    groups: dict[tuple[str, str, bool], list[Finding]] = {}
    for finding in score.findings:
        key = (str(finding.failure_mode), finding.text, finding.unverifiable)
        groups.setdefault(key, []).append(finding)
    for group in groups.values():
        shown = next((f for f in group if f.location == "output"), group[0])
        out_console.print(_finding_line(shown, trace, indent + "    "))
        where = _context(shown, texts, indent + "      ", trace)
        if where is not None:
            out_console.print(where)
        others = sorted({f.location for f in group if f is not shown and f.location != "output"})
        if others:
            also = Text(visible(f"{indent}      also in step {', '.join(others)}"), style="dim")
            out_console.print(also)


def _finding_line(finding: Finding, trace: Trace, indent: str) -> Text:
    from rich.text import Text

    mark = "?" if finding.unverifiable else "•"
    line = Text(f"{indent}{mark} ", style="yellow" if finding.unverifiable else "red")
    if finding.failure_mode is not None:
        line.append(f"{finding.failure_mode}: ", style="bold")
    line.append(visible(describe_finding(finding, trace), lines=False))
    return line


def describe_finding(finding: Finding, trace: Trace | None = None) -> str:
    """One line for a finding, naming the closest evidence when the finding carries it:
    ``CUST-48231 is not in the evidence; closest: CUST-48213 in step s1 get_customer``."""
    from agentlens.model import FailureMode

    grounding = finding.failure_mode in (
        FailureMode.FABRICATED_GROUNDING,
        FailureMode.PARAMETRIC_LEAKAGE,
    )
    if finding.detail:
        text = finding.detail
    elif grounding:
        verb = "could not be confirmed in" if finding.unverifiable else "is not in"
        text = f"{finding.text} {verb} the evidence"
    else:
        text = finding.text
    closest = finding.attributes.get("closest")
    if isinstance(closest, dict) and closest.get("text") and "closest" not in text:
        where = ""
        step_id = closest.get("step_id")
        if step_id:
            name = closest.get("step_name")
            if not name and trace is not None:
                try:
                    name = trace.step(str(step_id)).name
                except KeyError:
                    name = None
            where = f" in step {step_id}" + (f" {name}" if name else "")
        text += f"; closest: {closest['text']}{where}"
    if finding.step_ids and not grounding:
        text += f" (steps {', '.join(finding.step_ids)})"
    return text


def _context(
    finding: Finding, texts: dict[str, str], indent: str, trace: Trace, width: int = 30
) -> Text | None:
    """``in the answer, chars 21-31: …customer »CUST-48231« has…`` for a finding with a span."""
    from rich.text import Text

    text = texts.get(finding.location)
    if text is None:
        return None
    span = _span(finding, text)
    if span is None:
        return None
    start, end = span
    before = text[max(0, start - width) : start]
    after = text[end : end + width]
    where = "the answer" if finding.location == "output" else f"step {finding.location}"
    if finding.location != "output":
        try:
            step = trace.step(finding.location)
            where += f" ({step.kind}{' ' + step.name if step.name else ''})"
        except KeyError:
            pass
    line = Text(visible(f"{indent}in {where}, chars {start}-{end}: ", lines=False), style="dim")
    line.append(visible(("…" if start > width else "") + before, lines=False))
    line.append("»")
    line.append(visible(text[start:end], lines=False), style=_HIGHLIGHT)
    line.append("«")
    line.append(visible(after + ("…" if end + width < len(text) else ""), lines=False))
    return line
