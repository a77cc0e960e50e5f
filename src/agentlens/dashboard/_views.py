"""What the pages show, built from store objects: plain data for the templates, no HTML.

Everything here is untrusted text (model and tool output) carried as text; the templates
escape it. The only markup decisions made here are where highlights start and end.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agentlens.eval import text_of
from agentlens.eval.detectors._transcript import waste_of
from agentlens.model import FailureMode, Finding, Score, Step, Trace
from agentlens.store._flags import RunFlags, current_scores, finding_key

__all__ = [
    "COLLAPSE_CHARS",
    "LOOP_MODES",
    "FindingView",
    "Segment",
    "StepView",
    "duration_s",
    "finding_views",
    "highlight",
    "input_segments",
    "pretty",
    "step_tree",
    "usage",
]

INPUT = "input"
"""The ``step_id`` a finding's closest evidence names when it is in the run's input."""
COLLAPSE_CHARS = 1200
"""A step input or output longer than this is shown collapsed."""
MAX_DEPTH = 32
"""Steps nested deeper are shown at this depth."""
LOOP_MODES = frozenset(
    {
        FailureMode.REPEATED_TOOL_CALL,
        FailureMode.ALTERNATING_LOOP,
        FailureMode.ERROR_LOOP,
        FailureMode.REPEATED_MESSAGE,
        FailureMode.NO_PROGRESS,
        FailureMode.EXCESSIVE_STEPS,
    }
)


@dataclass(frozen=True)
class Segment:
    """A piece of a text; ``mark`` is the finding number it highlights (claims) or the finding
    whose closest evidence it is (evidence); ``None`` for plain text."""

    text: str
    mark: int | None = None


@dataclass
class FindingView:
    """One numbered finding of a flagged run, with what the scorer attached to it."""

    n: int
    scorer: str
    failure_mode: str | None
    text: str
    detail: str
    location: str
    step_ids: list[str]
    start: int | None
    end: int | None
    closest_text: str | None = None
    closest_step: str | None = None
    wasted_step_ids: list[str] = field(default_factory=list)
    waste: dict[str, Any] = field(default_factory=dict)
    located: bool = False
    """True once the claim was highlighted in place."""

    @property
    def is_loop(self) -> bool:
        return self.failure_mode in LOOP_MODES


@dataclass
class StepView:
    """One step of the timeline, with its children."""

    step: Step
    depth: int
    input_text: str
    output_segments: list[Segment]
    output_chars: int
    error_text: str
    children: list[StepView] = field(default_factory=list)
    evidence_for: list[int] = field(default_factory=list)
    """Findings whose closest evidence is in this step."""
    claims: list[int] = field(default_factory=list)
    """Findings made in this step's text."""
    repeated_by: list[int] = field(default_factory=list)
    """Loop findings that count this step as wasted."""

    @property
    def truncated(self) -> bool:
        return bool(self.step.attributes.get("truncated"))

    @property
    def collapsed(self) -> bool:
        return max(len(self.input_text), self.output_chars) > COLLAPSE_CHARS

    @property
    def usage(self) -> dict[str, Any]:
        return {k: v for k, v in self.step.attributes.items() if k in _USAGE_KEYS}


_USAGE_KEYS = ("model", "input_tokens", "output_tokens", "total_tokens", "cost_usd")


def pretty(value: Any) -> str:
    """A value as text: a string as it is, anything else as indented JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def duration_s(started: datetime | None, ended: datetime | None) -> float | None:
    if started is None or ended is None:
        return None
    return (ended - started).total_seconds()


def usage(trace: Trace) -> dict[str, Any]:
    """Tokens and cost of a whole run, from its steps' attributes (as loop findings count
    waste): ``total_tokens`` and ``cost_usd`` when any step carried them."""
    return waste_of(trace, range(len(trace.steps)))


def highlight(text: str, marks: Iterable[tuple[int, int | None, int | None, str]]) -> list[Segment]:
    """``text`` cut into segments, ``(n, start, end, needle)`` marking ``text[start:end]`` with
    ``n``. A span that does not hold ``needle`` falls back to the needle's first occurrence;
    overlapping marks keep the earlier one. Returns the segments and sets nothing else."""
    spans: list[tuple[int, int, int]] = []
    for n, start, end, needle in marks:
        span = _locate(text, start, end, needle)
        if span is not None:
            spans.append((span[0], span[1], n))
    spans.sort()
    out: list[Segment] = []
    pos = 0
    for start, end, n in spans:
        if start < pos:
            continue
        if start > pos:
            out.append(Segment(text[pos:start]))
        out.append(Segment(text[start:end], n))
        pos = end
    if pos < len(text) or not out:
        out.append(Segment(text[pos:]))
    return out


def _locate(text: str, start: int | None, end: int | None, needle: str) -> tuple[int, int] | None:
    if (
        start is not None
        and end is not None
        and 0 <= start < end <= len(text)
        and (not needle or text[start:end] == needle)
    ):
        return start, end
    if needle:
        found = text.find(needle)
        if found >= 0:
            return found, found + len(needle)
    return None


def finding_views(flags: RunFlags | None, scores: Sequence[Score]) -> list[FindingView]:
    """The run's numbered findings (as verdicts number them), each with the closest evidence
    and the waste its scorer recorded."""
    if flags is None:
        return []
    attached: dict[str, Finding] = {}
    for score in current_scores(scores):
        for f in score.findings:
            mode = None if f.failure_mode is None else str(f.failure_mode)
            attached[finding_key(score.scorer, mode, f.text, f.location, f.step_ids)] = f
    views = []
    for ff in flags.findings:
        view = FindingView(
            n=ff.n, scorer=ff.scorer, failure_mode=ff.failure_mode, text=ff.text,
            detail=ff.detail, location=ff.location, step_ids=list(ff.step_ids),
            start=ff.start, end=ff.end,
        )  # fmt: skip
        found = attached.get(ff.key)
        if found is not None:
            closest = found.attributes.get("closest")
            if isinstance(closest, dict):
                view.closest_text = _str_or_none(closest.get("text"))
                view.closest_step = _str_or_none(closest.get("step_id"))
            wasted = found.attributes.get("wasted_step_ids")
            if isinstance(wasted, list):
                view.wasted_step_ids = [str(s) for s in wasted]
            waste = found.attributes.get("waste")
            if isinstance(waste, dict):
                view.waste = waste
        views.append(view)
    return views


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def answer_segments(trace: Trace, findings: Sequence[FindingView]) -> list[Segment]:
    """The final answer with each claim made in it highlighted: claims found in the answer,
    and claims found in a step whose text is the answer (the turn that gave it)."""
    answer = text_of(trace.output) if trace.output is not None else ""
    same = {s.id for s in trace.steps if s.output is not None and text_of(s.output) == answer}
    marks = [
        (f.n, f.start, f.end, f.text)
        for f in findings
        if not f.is_loop and (f.location == "output" or f.location in same)
    ]
    segments = highlight(answer, marks)
    _mark_located(findings, segments)
    return segments


def input_segments(trace: Trace, findings: Sequence[FindingView]) -> list[Segment]:
    """The run's input with the closest evidence of findings that point at it marked."""
    marks = [(f.n, None, None, f.closest_text or "") for f in findings if f.closest_step == INPUT]
    return highlight(pretty(trace.input), marks)


def _mark_located(findings: Sequence[FindingView], segments: Sequence[Segment]) -> None:
    shown = {s.mark for s in segments if s.mark is not None}
    for f in findings:
        if f.n in shown:
            f.located = True


def step_tree(trace: Trace, findings: Sequence[FindingView]) -> list[StepView]:
    """The steps as a tree (a step whose parent is unknown is a root), in recorded order, with
    claims, closest evidence and repeated steps marked."""
    claims: dict[str, list[FindingView]] = {}
    evidence: dict[str, list[FindingView]] = {}
    repeated: dict[str, list[int]] = {}
    for f in findings:
        if f.location != "output" and not f.is_loop:
            claims.setdefault(f.location, []).append(f)
        if f.closest_step is not None:
            evidence.setdefault(f.closest_step, []).append(f)
        for sid in f.wasted_step_ids:
            repeated.setdefault(sid, []).append(f.n)
    ids = {s.id for s in trace.steps}
    views: dict[str, StepView] = {}
    roots: list[StepView] = []
    for step in trace.steps:
        view = _step_view(step, claims.get(step.id, []), evidence.get(step.id, []))
        view.repeated_by = repeated.get(step.id, [])
        parent = views.get(step.parent_id) if step.parent_id in ids else None
        if parent is not None and parent.step.id != step.id and parent.depth < MAX_DEPTH:
            view.depth = parent.depth + 1
            parent.children.append(view)
        else:
            roots.append(view)
        views.setdefault(step.id, view)
    return roots


def _step_view(step: Step, claims: list[FindingView], evidence: list[FindingView]) -> StepView:
    if claims:  # the text the claims were found in, with them highlighted
        text = text_of(step.output) if step.output is not None else ""
        segments = highlight(text, [(f.n, f.start, f.end, f.text) for f in claims])
        _mark_located(claims, segments)
    else:
        text = pretty(step.output)
        marks = [(f.n, None, None, f.closest_text or "") for f in evidence]
        segments = highlight(text, marks)
    return StepView(
        step=step,
        depth=0,
        input_text=pretty(step.input),
        output_segments=segments,
        output_chars=len(text),
        error_text=pretty(step.error),
        evidence_for=[f.n for f in evidence],
        claims=[f.n for f in claims],
    )


def flatten(tree: Iterable[StepView]) -> list[StepView]:
    """The tree in display order (a step before its children)."""
    out: list[StepView] = []
    for view in tree:
        out.append(view)
        out.extend(flatten(view.children))
    return out
