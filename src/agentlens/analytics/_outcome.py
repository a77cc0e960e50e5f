"""How one run's scores become one outcome, in plain Python.

This is the reference implementation of the counting rules; the SQL in
:mod:`agentlens.store._rates` computes the same thing inside the database, and the tests hold the
two to agreement. The pytest fixture and small in-memory evaluations use it directly.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from enum import StrEnum
from typing import NamedTuple

from agentlens.model import FailureMode, Score, Verdict
from agentlens.store._rates import RateCounts

__all__ = ["Outcome", "ScoreFacts", "classify_run", "facts_of", "mode_keys", "tally"]


class Outcome(StrEnum):
    """What a run counts as in a rate."""

    FLAGGED = "flagged"
    PASSED = "passed"
    UNVERIFIABLE = "unverifiable"
    ERROR = "error"
    UNSCORED = "unscored"


class ScoreFacts(NamedTuple):
    """What the counting rules need from one score."""

    verdict: str
    """The score's verdict (``passed``, ``flagged``, ``unverifiable``, ``error``)."""
    modes: frozenset[str]
    """The failure modes of the score's findings."""


def facts_of(score: Score) -> ScoreFacts:
    """The counting facts of a stored score."""
    modes = frozenset(str(f.failure_mode) for f in score.findings if f.failure_mode is not None)
    return ScoreFacts(str(score.verdict), modes)


def classify_run(
    scores: Iterable[ScoreFacts], modes: Collection[str] | None = None
) -> tuple[Outcome, frozenset[str]]:
    """The outcome of one run from its current scores, and the selected modes it was flagged in.

    Flagged beats error beats unverifiable beats passed; no scores at all is ``unscored``. With
    ``modes``, a ``flagged`` score counts only through a finding of a selected mode
    (a run flagged only in other modes passes, as far as those modes go).
    """
    wanted = None if modes is None else frozenset(str(m) for m in modes)
    seen = False
    error = unverifiable = flagged = False
    flagged_modes: set[str] = set()
    for facts in scores:
        seen = True
        if facts.verdict == Verdict.FLAGGED:
            hit = facts.modes if wanted is None else facts.modes & wanted
            if wanted is None or hit:
                flagged = True
                flagged_modes.update(hit)
        elif facts.verdict == Verdict.ERROR:
            error = True
        elif facts.verdict == Verdict.UNVERIFIABLE:
            unverifiable = True
    if not seen:
        return Outcome.UNSCORED, frozenset()
    if flagged:
        return Outcome.FLAGGED, frozenset(flagged_modes)
    if error:
        return Outcome.ERROR, frozenset()
    if unverifiable:
        return Outcome.UNVERIFIABLE, frozenset()
    return Outcome.PASSED, frozenset()


def mode_keys(modes: Collection[str] | None) -> list[str]:
    """The keys of ``by_mode``: the selected modes, or every failure mode."""
    if modes is None:
        return [str(m) for m in FailureMode]
    return sorted({str(m) for m in modes})


def tally(
    runs: Iterable[tuple[str, Iterable[ScoreFacts]]],
    modes: Collection[str] | None = None,
    *,
    key: str | None = None,
) -> RateCounts:
    """Count outcomes over ``(run_id, current scores)`` pairs (a run with no scores is unscored)."""
    counts = RateCounts(key=key, by_mode=dict.fromkeys(mode_keys(modes), 0))
    flagged_ids: list[str] = []
    for run_id, scores in runs:
        counts.runs += 1
        outcome, hit = classify_run(scores, modes)
        if outcome is Outcome.FLAGGED:
            counts.flagged += 1
            flagged_ids.append(run_id)
            for m in hit:
                counts.by_mode[m] = counts.by_mode.get(m, 0) + 1
        elif outcome is Outcome.PASSED:
            counts.passed += 1
        elif outcome is Outcome.ERROR:
            counts.errors += 1
        elif outcome is Outcome.UNVERIFIABLE:
            counts.unverifiable += 1
    counts.flagged_run_ids = sorted(flagged_ids)
    return counts
