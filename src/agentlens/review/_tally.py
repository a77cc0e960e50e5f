"""Score what just finished, then tally: the first step of reviewing runs.

Whatever ends runs (the ``agentlens_eval`` fixture, ``agentlens demo``, and the review pipeline
that runs on completion) does the same two things: score each finished run with the configured
scorers, then count the outcomes under the rate's rules (:func:`agentlens.analytics.tally`).
:func:`score_finished` is that, once::

    result = score_finished(traces, scorers=["no_fabricated_refs"], store=store)
    result.stats.rate, result.counts.flagged_run_ids, result.runs[0].outcome
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentlens.analytics import Outcome, RateStats, classify_run, facts_of, tally, worst_outcome

if TYPE_CHECKING:  # pragma: no cover
    from agentlens.config import Settings
    from agentlens.eval import Scorer, StepHistory
    from agentlens.model import FailureMode, Score, Trace
    from agentlens.store import RateCounts, TraceStore

__all__ = ["ScoredRun", "ScorersFor", "Tally", "score_finished"]


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


ScorersFor = Callable[[str | None], Sequence["str | Scorer"]]
"""The scorers of an agent role (``None``: runs without a role)."""


def score_finished(
    traces: Iterable[Trace],
    *,
    scorers: Sequence[str | Scorer] | ScorersFor | None = None,
    settings: Settings | None = None,
    store: TraceStore | None = None,
    modes: Iterable[str | FailureMode] | None = None,
    missing_only: bool = False,
) -> Tally:
    """Score each run with ``scorers``, then count the outcomes.

    Args:
        traces: the finished runs.
        scorers: scorer names or objects (one name alone is that scorer), or a function giving
            them per agent role (the review pipeline's per-role review scorers); default: the
            settings' ``default_scorers``.
            Each is bound once per role, with that role's options.
        settings: scorer options per agent role (default: :func:`~agentlens.config.load_settings`).
        store: where to write the scores (one ``put_scores`` for all of them; the runs must
            already be stored); ``None`` keeps them in memory only.
        modes: count only flags in these failure modes.
        missing_only: with a store, run a scorer on a run only when the store has no result of
            it at its current version (a run ``agentlens score`` already scored is not scored
            again); a run's ``scores`` and outcome are then those of this call's scores alone.

    A scorer that fails gives an ``error`` score, as everywhere: the batch goes on.
    """
    from agentlens.config import load_settings

    cfg = settings if settings is not None else load_settings()
    given = scorers if scorers is not None else cfg.default_scorers
    if isinstance(given, str):  # one name, not its letters ("unknown scorer 'n'")
        given = [given]
    mode_list = None if modes is None else [str(m) for m in modes]
    runs = list(traces)
    scored: dict[int, list[Score]] = {}
    by_agent: dict[str | None, list[int]] = {}
    for index, trace in enumerate(runs):
        by_agent.setdefault(trace.agent, []).append(index)
    from agentlens.eval import StepHistory

    history = StepHistory(store) if store is not None else None  # learnt once per call
    for agent, indexes in by_agent.items():
        group = [runs[i] for i in indexes]
        found = _score_group(group, agent, given, cfg, store, missing_only, history)
        scored.update(zip(indexes, found, strict=True))
    written = [score for i in range(len(runs)) for score in scored[i]]
    if store is not None and written:
        store.put_scores(written)
    done: list[ScoredRun] = []
    rows = []
    for i, trace in enumerate(runs):
        facts = [facts_of(s) for s in scored[i]]
        outcome, _ = classify_run(facts, mode_list)
        done.append(ScoredRun(trace=trace, scores=scored[i], outcome=outcome))
        rows.append((trace.id, facts))
    return Tally(runs=done, counts=tally(rows, mode_list), modes=mode_list)


def _score_group(
    group: list[Trace],
    agent: str | None,
    given: Sequence[str | Scorer] | ScorersFor,
    settings: Settings,
    store: TraceStore | None,
    missing_only: bool,
    history: StepHistory | None,
) -> list[list[Score]]:
    """The scores of one agent role's runs, in their order: the role's scorers bound once."""
    from agentlens.eval import resolve_scorer, score_trace
    from agentlens.store import RunFilter

    names = given(agent) if callable(given) else given
    bound = [resolve_scorer(s, agent, settings) for s in names]
    needs: dict[str, set[str]] | None = None
    if missing_only and store is not None:
        ids = RunFilter(run_ids=[t.id for t in group])
        needs = {s.name: set(store.unscored_run_ids(s.name, s.stored_version, ids)) for s in bound}
    out = []
    for trace in group:
        todo = bound if needs is None else [s for s in bound if trace.id in needs[s.name]]
        report = score_trace(trace, todo, settings, history=history) if todo else None
        out.append(list(report.results.values()) if report is not None else [])
    return out
