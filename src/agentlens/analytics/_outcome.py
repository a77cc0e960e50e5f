"""How one run's scores become one outcome, in plain Python.

This is the reference implementation of the counting rules; the SQL of each store's
:class:`~agentlens.store.RateSource` computes the same thing inside the database, and the tests
hold them to agreement. The pytest fixture and small in-memory evaluations use it directly.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from enum import StrEnum
from typing import NamedTuple

from agentlens.model import VERDICT_PRECEDENCE, FailureMode, Score, Verdict, worst_verdict
from agentlens.store import RateCounts

__all__ = [
    "OUTCOME_PRECEDENCE",
    "Outcome",
    "ScoreFacts",
    "classify_run",
    "facts_of",
    "mode_keys",
    "tally",
    "worst_outcome",
]


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


_VERDICTS = frozenset(v.value for v in Verdict)


def classify_run(
    scores: Iterable[ScoreFacts], modes: Collection[str] | None = None
) -> tuple[Outcome, frozenset[str]]:
    """The outcome of one run from its current scores, and the selected modes it was flagged in.

    The verdicts rank as :data:`~agentlens.model.VERDICT_PRECEDENCE` says (flagged beats error
    beats unverifiable beats passed); no scores at all is ``unscored``. With ``modes``, a
    ``flagged`` score counts only through a finding of a selected mode (a run flagged only in
    other modes passes, as far as those modes go).
    """
    wanted = None if modes is None else frozenset(str(m) for m in modes)
    verdicts: set[str] = set()
    flagged_modes: set[str] = set()
    for facts in scores:
        verdict = facts.verdict if facts.verdict in _VERDICTS else Verdict.PASSED
        if verdict == Verdict.FLAGGED and wanted is not None:
            hit = facts.modes & wanted
            if not hit:
                verdict = Verdict.PASSED
            flagged_modes.update(hit)
        elif verdict == Verdict.FLAGGED:
            flagged_modes.update(facts.modes)
        verdicts.add(verdict)
    worst = worst_verdict(verdicts)
    if worst is None:
        return Outcome.UNSCORED, frozenset()
    outcome = Outcome(worst.value)
    return outcome, frozenset(flagged_modes) if outcome is Outcome.FLAGGED else frozenset()


OUTCOME_PRECEDENCE: tuple[Outcome, ...] = (
    *(Outcome(v.value) for v in VERDICT_PRECEDENCE),
    Outcome.UNSCORED,
)
"""The outcome a group of runs takes: the verdict order, then ``unscored`` last."""


def worst_outcome(outcomes: Iterable[Outcome | str]) -> Outcome:
    """The outcome of a group of runs (one input of an evaluation): the first of
    :data:`OUTCOME_PRECEDENCE` that any of them has; ``unscored`` for none."""
    seen = {Outcome(o) for o in outcomes}
    for outcome in OUTCOME_PRECEDENCE:
        if outcome in seen:
            return outcome
    return Outcome.UNSCORED


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
