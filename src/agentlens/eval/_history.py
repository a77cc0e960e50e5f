"""Stored history for the scorers that learn from it: an agent role's recent runs.

A scorer that compares a run with what is usual for its role (``excessive_steps`` with
``max_steps = "auto"``) reads the role's recent runs from the store. :class:`StepHistory` is
that seam: the batch that scores (``score_runs``, ``run_scorers`` on a stored run, review) makes
one per batch over its store and hands it to every scorer through the run's
:class:`~agentlens.eval.Evidence` (``evidence.history``). What a scorer learns from it is
computed once per batch (:meth:`StepHistory.memo`), so every run of a role in a batch is scored
against the same learned value, and the scorer stays a deterministic function of the run and
that value.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Iterator
from typing import Any, TypeVar

from agentlens.model import Trace
from agentlens.store import RunFilter

__all__ = ["StepHistory"]

logger = logging.getLogger("agentlens")

_T = TypeVar("_T")

_SCAN = 20
"""For runs without an agent role (which a filter cannot select), at most this many times the
window of run summaries are looked through."""


class StepHistory:
    """The recent runs of each agent role in a store, for one scoring batch.

    Args:
        store: an open :class:`~agentlens.store.TraceStore`.
    """

    def __init__(self, store: Any) -> None:
        self.store = store
        self._memo: dict[Hashable, Any] = {}
        self._lock = threading.Lock()

    def recent(self, agent: str | None, window: int) -> Iterator[Trace]:
        """The ``window`` most recent runs of role ``agent`` (by start time; ``None``: the runs
        without a role), newest first. A run the store cannot read is left out."""
        if agent is None:
            summaries = self.store.list_runs(RunFilter(), limit=window * _SCAN, newest_first=True)
            ids = [s.id for s in summaries if s.agent is None][:window]
        else:
            summaries = self.store.list_runs(
                RunFilter(agent=agent), limit=window, newest_first=True
            )
            ids = [s.id for s in summaries]
        if not ids:
            return iter(())

        def skip(exc: Exception) -> None:
            logger.debug("agentlens: history skipped an unreadable run: %s", exc)

        return self.store.query_traces(
            RunFilter(run_ids=ids), newest_first=True, on_unreadable=skip
        )

    def memo(self, key: Hashable, factory: Callable[[], _T]) -> _T:
        """A value learnt from the history, computed once per batch: ``factory()`` on first use
        of ``key`` (thread-safe: scorers of one batch may run concurrently)."""
        with self._lock:
            if key in self._memo:
                found: _T = self._memo[key]
                return found
            value = self._memo[key] = factory()
            return value
