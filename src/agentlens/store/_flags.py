"""Run flags: what a run's current scores say, in the few fields the review pipeline keeps.

:func:`derive_flags` is a pure function of a run's stored scores, so every backend derives the
same flags whenever scores are written (``put_scores``), whoever wrote them: the review pipeline,
``agentlens score``, or a user's own ``run_scorers(save=True)``.

Which scores are current
    The most recent score (by ``scored_at``) of each scorer name, whatever its version: a
    re-score with a new scorer version or new options supersedes the old result.

The run's state (:class:`FlagState`)
    ``flagged`` when a current score is flagged; otherwise ``error`` when one failed; otherwise
    ``unverifiable`` when one could not verify a claim; otherwise ``clean``. Only ``flagged``
    sets ``hallucination_detected``. An ``unverifiable`` or ``error`` run is neither flagged nor
    cleared: it keeps the content flags it already held (see the content flags in
    :mod:`agentlens.store._sqlite`).

The findings, and the most important one
    The findings of the flagged current scores, without the unverifiable ones, in order of
    importance (:data:`MODE_ORDER`, then scorer, then position in the answer). They are
    numbered from 1 in that order: ``agentlens show`` lists them so, and
    ``agentlens review verdict RUN_ID ... --finding N`` names one by that number. The first is
    the *most important finding*; ``hallucination_reason`` is its one-line detail. Content
    that reached a reader with a made-up reference or fact does the most harm, and a fabricated
    reference is the most certain finding (an exact token absent from the evidence, found by
    set membership, never by a model), so hallucinated content comes first (fabricated
    references, then facts not in the evidence, then unsupported conclusions, which need a
    judge), and struggle (loops, wasted steps, blown budgets) after it.

A finding's identity (:func:`finding_key`)
    (scorer, failure mode, text, location, steps). A verdict a human gave on a finding stays
    attached to it across re-scoring as long as a current score still reports the same key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from agentlens.model import FailureMode, Finding, Score, Verdict, worst_verdict

__all__ = [
    "MODE_ORDER",
    "VERDICTS",
    "CurrentScore",
    "FlagState",
    "FlaggedFinding",
    "RunFlags",
    "current_scores",
    "derive_flags",
    "derive_from_current",
    "finding_key",
]

MODE_ORDER: tuple[FailureMode, ...] = (
    FailureMode.FABRICATED_GROUNDING,
    FailureMode.PARAMETRIC_LEAKAGE,
    FailureMode.UNSUPPORTED_SYNTHESIS,
    FailureMode.ERROR_LOOP,
    FailureMode.REPEATED_TOOL_CALL,
    FailureMode.ALTERNATING_LOOP,
    FailureMode.REPEATED_MESSAGE,
    FailureMode.NO_PROGRESS,
    FailureMode.EXCESSIVE_STEPS,
)
"""Failure modes from most to least important (see the module docstring for why)."""

VERDICTS: tuple[str, ...] = ("confirmed", "false_positive")
"""The two verdicts a human gives on a finding."""

_RANK = {mode: i for i, mode in enumerate(MODE_ORDER)}
_REASON_MAX = 300
"""``hallucination_reason`` is cut to this many characters (with an ellipsis)."""


class FlagState(StrEnum):
    """What a run's current scores say, taken together."""

    CLEAN = "clean"
    """Every current score passed."""
    FLAGGED = "flagged"
    """At least one current score is flagged: ``hallucination_detected``."""
    UNVERIFIABLE = "unverifiable"
    """Nothing flagged or failed, but a check could not verify a claim: neither flagged nor
    cleared."""
    ERROR = "error"
    """Nothing flagged, but a scorer failed: neither flagged nor cleared."""


@dataclass(frozen=True, slots=True)
class FlaggedFinding:
    """One finding behind a run's flag, numbered in order of importance."""

    n: int
    """The finding's number (1 = the most important): what ``--finding N`` names."""
    key: str
    """The finding's identity across re-scoring (:func:`finding_key`)."""
    scorer: str
    """The scorer that reported it."""
    version: str
    """That scorer's stored version."""
    failure_mode: str | None
    """The failure mode (``None`` for a flagged score that reported no finding)."""
    text: str
    """The offending token, claim or call."""
    detail: str
    """One line for a human."""
    location: str = "output"
    """Where ``text`` was found: ``output`` or a step id."""
    step_ids: tuple[str, ...] = ()
    """The steps involved."""
    start: int | None = None
    """Start of ``text`` in the checked text."""
    end: int | None = None
    """End of ``text`` in the checked text."""

    def to_json(self) -> dict[str, Any]:
        """The JSON shape used in run summaries and stored with the run."""
        return {
            "n": self.n,
            "key": self.key,
            "scorer": self.scorer,
            "version": self.version,
            "failure_mode": self.failure_mode,
            "text": self.text,
            "detail": self.detail,
            "location": self.location,
            "step_ids": list(self.step_ids),
            "start": self.start,
            "end": self.end,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FlaggedFinding:
        """Read back what :meth:`to_json` wrote."""
        return cls(
            n=int(data["n"]),
            key=str(data["key"]),
            scorer=str(data["scorer"]),
            version=str(data["version"]),
            failure_mode=data.get("failure_mode"),
            text=str(data.get("text", "")),
            detail=str(data.get("detail", "")),
            location=str(data.get("location", "output")),
            step_ids=tuple(data.get("step_ids") or ()),
            start=data.get("start"),
            end=data.get("end"),
        )


@dataclass(frozen=True, slots=True)
class RunFlags:
    """A run's flags, derived from its current scores by :func:`derive_flags`."""

    state: FlagState
    """Flagged, clean, unverifiable or error."""
    reason: str | None = None
    """The one-line detail of the most important finding (flagged runs only)."""
    failure_modes: tuple[str, ...] = ()
    """The failure modes of the findings, most important first (flagged runs only)."""
    findings: tuple[FlaggedFinding, ...] = field(default_factory=tuple)
    """The findings, numbered from 1 in order of importance (flagged runs only)."""

    @property
    def hallucination_detected(self) -> bool:
        """True when the run is flagged."""
        return self.state is FlagState.FLAGGED

    def finding(self, n: int) -> FlaggedFinding | None:
        """Finding number ``n`` (from 1), or ``None``."""
        return self.findings[n - 1] if 1 <= n <= len(self.findings) else None


def finding_key(
    scorer: str, failure_mode: str | None, text: str, location: str, step_ids: Iterable[str]
) -> str:
    """A finding's identity: the same scorer, failure mode, token, place and steps give the same
    key (a short hash), whatever the scorer version or the finding's wording."""
    blob = json.dumps(
        [scorer, failure_mode or "", text, location, sorted(step_ids)], ensure_ascii=False
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def current_scores(scores: Iterable[Score]) -> list[Score]:
    """The most recent score of each scorer name, in scorer-name order."""
    latest: dict[str, Score] = {}
    for score in scores:
        seen = latest.get(score.scorer)
        if seen is None or (score.scored_at, score.version) >= (seen.scored_at, seen.version):
            latest[score.scorer] = score
    return [latest[name] for name in sorted(latest)]


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _REASON_MAX else line[: _REASON_MAX - 1] + "…"


@dataclass(frozen=True, slots=True)
class CurrentScore:
    """What derivation needs of one current score (a backend builds these without parsing the
    documents of scores that are not flagged)."""

    scorer: str
    version: str
    verdict: Verdict
    detail: str = ""
    findings: tuple[Finding, ...] = ()
    """The score's findings (only needed when it is flagged)."""


def _sort_key(item: tuple[CurrentScore, Finding | None]) -> tuple[Any, ...]:
    score, finding = item
    if finding is None:
        return (len(_RANK) + 1, score.scorer, 0, "")
    rank = _RANK.get(finding.failure_mode, len(_RANK)) if finding.failure_mode else len(_RANK)
    start = finding.start if finding.start is not None else 1 << 62
    return (rank, score.scorer, start, finding.text)


def derive_flags(scores: Iterable[Score]) -> RunFlags | None:
    """The flags of a run from its stored scores (all versions); ``None`` when it has none."""
    return derive_from_current(
        CurrentScore(
            s.scorer, s.version, Verdict(s.verdict or Verdict.ERROR), s.detail, tuple(s.findings)
        )
        for s in current_scores(scores)
    )


def derive_from_current(current: Iterable[CurrentScore]) -> RunFlags | None:
    """:func:`derive_flags` from the current scores alone (one per scorer name)."""
    current = sorted(current, key=lambda c: c.scorer)
    if not current:
        return None
    worst = worst_verdict(s.verdict for s in current)
    if worst is not Verdict.FLAGGED:
        return RunFlags(FlagState.CLEAN if worst is Verdict.PASSED else FlagState(str(worst)))
    items: list[tuple[CurrentScore, Finding | None]] = []
    for score in current:
        if score.verdict is not Verdict.FLAGGED:
            continue
        real = [f for f in score.findings if not f.unverifiable]
        if real:
            items.extend((score, f) for f in real)
        else:  # flagged without a finding of its own: the score itself is the finding
            items.append((score, None))
    items.sort(key=_sort_key)
    findings: list[FlaggedFinding] = []
    seen: set[str] = set()
    for score, f in items:
        if f is None:
            mode, text, detail, location = None, score.detail, score.detail, "output"
            steps: tuple[str, ...] = ()
            start = end = None
        else:
            mode = str(f.failure_mode) if f.failure_mode is not None else None
            text, location, steps = f.text, f.location, tuple(f.step_ids)
            detail = f.detail or f"{f.text!r}"
            start, end = f.start, f.end
        key = finding_key(score.scorer, mode, text, location, steps)
        if key in seen:
            continue
        seen.add(key)
        findings.append(
            FlaggedFinding(
                n=len(findings) + 1,
                key=key,
                scorer=score.scorer,
                version=score.version,
                failure_mode=mode,
                text=text,
                detail=_one_line(detail),
                location=location,
                step_ids=steps,
                start=start,
                end=end,
            )
        )
    top = findings[0]
    label = top.failure_mode or top.scorer
    reason = _one_line(f"{label}: {top.detail}" if top.detail else label)
    modes = tuple(dict.fromkeys(f.failure_mode for f in findings if f.failure_mode))
    return RunFlags(FlagState.FLAGGED, reason=reason, failure_modes=modes, findings=tuple(findings))
