"""The review pipeline: score pending runs, derive their flags, tell the host application.

The store is the queue (:meth:`~agentlens.store.TraceStore.pending_review`): every run
``put_traces`` writes (new, or replacing a different stored run) waits there until
:func:`review_pending` has

1. scored it with its role's review scorers through :func:`~agentlens.review.score_finished`
   (the one path that scores finished runs; only the scorers without a result at their current
   version: a run ``agentlens score`` already scored is not scored again),
2. derived its flags (the store does it as the scores are written; content flags follow),
3. for a flagged run: called the :func:`~agentlens.review.on_flagged` callbacks and stored a
   webhook delivery (when ``[review] webhook`` is set),
4. marked it reviewed (a run replaced meanwhile stays pending, and is reviewed again).

Steps 3 and 4 happen in that order, so a crash between them repeats a callback (at least once)
rather than losing it. Webhook deliveries due are then attempted, every one of them
(:func:`deliver_all_due`).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from urllib.parse import quote

from agentlens.config import Settings
from agentlens.errors import ConfigError
from agentlens.eval import Scorer, get_scorer, resolve_scorer
from agentlens.model import Trace
from agentlens.review._hooks import STATS, FlaggedRun, fire
from agentlens.review._settings import ReviewSettings, review_settings
from agentlens.review._tally import score_finished
from agentlens.review._webhook import deliver_all, new_delivery
from agentlens.store import RunFilter, RunSummary, TraceStore
from agentlens.store._protocol import PendingRun

__all__ = ["ReviewResult", "review_pending"]

logger = logging.getLogger("agentlens")

DEFAULT_BATCH = 64
"""Runs reviewed per round (one read of their traces, one write of their scores)."""

_JUDGE_OPTION = frozenset({"faithful_synthesis", "parametric_leakage"})
_lock = threading.Lock()  # one review round at a time in a process: no double callbacks


@dataclass
class ReviewResult:
    """What one :func:`review_pending` call did."""

    reviewed: int = 0
    flagged: int = 0
    scores_written: int = 0
    delivered: int = 0
    delivery_failures: int = 0
    """Webhook attempts that failed (each retried later, or its delivery kept as failed)."""


class _Scorers:
    """Each role's review scorers with its options (and the review judge) bound, cached."""

    def __init__(self, settings: Settings, review: ReviewSettings) -> None:
        self.settings = settings
        self.review = review
        self._cache: dict[str | None, list[Scorer]] = {}

    def for_agent(self, agent: str | None) -> list[Scorer]:
        found = self._cache.get(agent)
        if found is None:
            found = []
            judge = self.review.judge_for(agent)
            for name in self.review.scorers_for(agent):
                scorer = resolve_scorer(get_scorer(name), agent, self.settings)
                if judge is not None and name in _JUDGE_OPTION and "judge" not in scorer.options:
                    scorer = scorer.with_options(judge=judge)
                found.append(scorer)
            self._cache[agent] = found
        return found


def _flagged_run(
    summary: RunSummary, trace: Trace, store: TraceStore, review: ReviewSettings
) -> FlaggedRun:
    flags = store.get_flags(summary.id)
    findings = tuple(f.to_json() for f in flags.findings) if flags is not None else ()
    # the run's page, its id one path segment (a "/", "?", "#" or "%" in it escaped)
    url = f"{review.base_url}/runs/{quote(summary.id, safe='')}" if review.base_url else None
    return FlaggedRun(
        run_id=summary.id,
        agent=summary.agent,
        project=summary.project,
        name=summary.name,
        reason=summary.hallucination_reason,
        failure_modes=summary.failure_modes,
        links=dict(trace.links),
        started_at=summary.started_at,
        findings=findings,
        url=url,
    )


def _review_batch(
    store: TraceStore,
    batch: list[PendingRun],
    scorers: _Scorers,
    review: ReviewSettings,
    result: ReviewResult,
) -> None:
    ids = [p.run_id for p in batch]

    def unreadable(exc: Exception) -> None:  # reviewed as it is: nothing in it can be scored
        logger.warning("agentlens: review skipped an unreadable run: %s", exc)

    found = store.query_traces(RunFilter(run_ids=ids), newest_first=False, on_unreadable=unreadable)
    traces = {t.id: t for t in found}
    present = [traces[i] for i in ids if i in traces]
    scored = score_finished(
        present,
        scorers=scorers.for_agent,
        settings=scorers.settings,
        store=store,
        missing_only=True,
    )
    result.scores_written += sum(len(r.scores) for r in scored.runs)
    unscored = sorted(r.trace.id for r in scored.runs if not r.scores)
    if unscored:
        store.refresh_flags(unscored)
    flagged = list(store.list_runs(RunFilter(run_ids=ids, flagged=True), newest_first=False))
    deliveries = []
    for summary in flagged:
        trace = traces.get(summary.id)
        if trace is None:
            continue
        run = _flagged_run(summary, trace, store, review)
        if review.webhook:  # its body first: a callback may change what it is given
            deliveries.append(new_delivery(run, review.webhook))
        fire(run)
    if deliveries:
        store.add_deliveries(deliveries)
    store.mark_reviewed(batch)
    result.reviewed += len(batch)
    result.flagged += len(flagged)
    STATS.add(reviewed=len(batch), flagged=len(flagged))


def review_pending(
    store: TraceStore,
    *,
    limit: int | None = None,
    settings: Settings | None = None,
    review: ReviewSettings | None = None,
    batch_size: int = DEFAULT_BATCH,
    deliver: bool = True,
    deadline_s: float | None = None,
    worker: str | None = None,
    lease_s: float = 300.0,
) -> int:
    """Review the runs waiting in ``store``, oldest first; return how many were reviewed.

    Safe to call from any thread (rounds in one process are serialised), and again after a
    failure: what was not marked reviewed is reviewed next time.

    Args:
        store: an open store.
        limit: review at most this many runs (default: until none is pending).
        settings: scorer options and evidence per role (default: :func:`load_settings`).
        review: the review settings (default: from ``settings``).
        batch_size: runs per round.
        deliver: also attempt the webhook deliveries that are due.
        deadline_s: stop starting new rounds after this many seconds.
        worker: share the queue with other workers: batches are claimed under this name for
            ``lease_s`` seconds (:meth:`~agentlens.store.TraceStore.claim_review`) instead of
            read from :meth:`~agentlens.store.TraceStore.pending_review`, so no two workers
            review the same run, and a dead worker's runs are reviewed after its lease.
        lease_s: how long a claim holds (longer than a batch takes to review).

    Raises:
        ConfigError: bad review settings (unknown scorer, bad webhook URL...).
    """
    return review_pending_result(
        store,
        limit=limit,
        settings=settings,
        review=review,
        batch_size=batch_size,
        deliver=deliver,
        deadline_s=deadline_s,
        worker=worker,
        lease_s=lease_s,
    ).reviewed


def review_pending_result(
    store: TraceStore,
    *,
    limit: int | None = None,
    settings: Settings | None = None,
    review: ReviewSettings | None = None,
    batch_size: int = DEFAULT_BATCH,
    deliver: bool = True,
    deadline_s: float | None = None,
    worker: str | None = None,
    lease_s: float = 300.0,
) -> ReviewResult:
    """:func:`review_pending`, returning a :class:`ReviewResult` with every count."""
    if batch_size < 1:
        raise ConfigError(f"batch_size must be at least 1, got {batch_size}")
    if settings is None:
        from agentlens.config import load_settings

        settings = load_settings()
    review = review if review is not None else review_settings(settings)
    scorers = _Scorers(settings, review)
    result = ReviewResult()
    started = time.monotonic()
    with _lock:
        while limit is None or result.reviewed < limit:
            if deadline_s is not None and time.monotonic() - started > deadline_s:
                break
            n = batch_size if limit is None else min(batch_size, limit - result.reviewed)
            if worker is None:
                batch = store.pending_review(limit=n)
            else:
                batch = store.claim_review(worker, limit=n, lease_s=lease_s)
            if not batch:
                break
            _review_batch(store, batch, scorers, review, result)
    if deliver:
        delivered, failed = deliver_all(store, review)
        result.delivered += delivered
        result.delivery_failures += failed
    return result
