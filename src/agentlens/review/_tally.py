"""Score what just finished, then tally: the first step of reviewing runs.

Whatever ends runs (the ``agentlens_eval`` fixture, ``agentlens demo``, and the review pipeline
that runs on completion) does the same two things: score each finished run with the configured
scorers, then count the outcomes under the rate's rules (:func:`agentlens.analytics.tally`).
:func:`score_finished` is that, once::

    result = score_finished(traces, scorers=["no_fabricated_refs"], store=store)
    result.stats.rate, result.counts.flagged_run_ids, result.runs[0].outcome
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentlens.analytics import Outcome, RateStats, classify_run, facts_of, tally, worst_outcome

if TYPE_CHECKING:  # pragma: no cover
    from agentlens.config import Settings
    from agentlens.eval import Scorer
    from agentlens.model import FailureMode, Score, Trace
    from agentlens.store import RateCounts, TraceStore

__all__ = ["ScoredRun", "Tally", "score_finished"]


@dataclass
class ScoredRun:
    """One finished run, its scores and what it counts as."""

    trace: Trace
    """The run."""
    scores: list[Score]
    """Its scores, one per scorer, in the order the scorers were given."""
    outcome: Outcome
    """``flagged``, ``error``, ``unverifiable``, ``passed`` or ``unscored`` under the tally's
    failure modes."""


@dataclass
class Tally:
    """The scored runs and their counts."""

    runs: list[ScoredRun]
    """In the order the runs were given."""
    counts: RateCounts
    """Runs, flagged, passed, unverifiable, errors, flags per mode and the flagged run ids."""
    modes: list[str] | None = field(default=None)
    """The failure modes counted (``None``: all)."""

    @property
    def stats(self) -> RateStats:
        """The counts with the rate and its 95% Wilson interval."""
        return RateStats.of(self.counts)

    def outcome_of(self, run_ids: Iterable[str]) -> Outcome:
        """The worst outcome of the given runs (flagged > error > unverifiable > passed >
        unscored): what a group of runs, such as one input of an evaluation, counts as."""
        wanted = set(run_ids)
        return worst_outcome(r.outcome for r in self.runs if r.trace.id in wanted)


def score_finished(
    traces: Iterable[Trace],
    *,
    scorers: Sequence[str | Scorer] | None = None,
    settings: Settings | None = None,
    store: TraceStore | None = None,
    modes: Iterable[str | FailureMode] | None = None,
) -> Tally:
    """Score each run with ``scorers``, then count the outcomes.

    Args:
        traces: the finished runs.
        scorers: scorer names or objects; default: the settings' ``default_scorers``.
        settings: scorer options per agent role (default: :func:`~agentlens.config.load_settings`).
        store: where to write the scores (one ``put_scores`` per run; the runs must already be
            stored); ``None`` keeps them in memory only.
        modes: count only flags in these failure modes.

    A scorer that fails gives an ``error`` score, as everywhere: the batch goes on.
    """
    from agentlens.config import load_settings
    from agentlens.eval import run_scorers

    cfg = settings if settings is not None else load_settings()
    names: Sequence[str | Scorer] = scorers if scorers is not None else cfg.default_scorers
    mode_list = None if modes is None else [str(m) for m in modes]
    runs: list[ScoredRun] = []
    rows = []
    for trace in traces:
        report = run_scorers(names, trace=trace, settings=cfg, store=store, save=store is not None)
        scores = list(report.results.values())
        facts = [facts_of(s) for s in scores]
        outcome, _ = classify_run(facts, mode_list)
        runs.append(ScoredRun(trace=trace, scores=scores, outcome=outcome))
        rows.append((trace.id, facts))
    return Tally(runs=runs, counts=tally(rows, mode_list), modes=mode_list)
