"""The background :class:`Reviewer`: review runs off the agent's (or request's) thread.

Capture's on-completion hook and the server call :meth:`Reviewer.notify` after writing runs:
it sets an event and returns (it never blocks, never raises). A daemon thread wakes up, runs
:func:`review_pending` in rounds of ``batch_size`` runs, attempts the webhook deliveries that
are due, and sleeps until the next notification, the next retry, or ``interval`` seconds. The
queue is the store, so nothing is held in memory and nothing is lost when the process ends: the
runs still pending are reviewed by the next process that reviews that store.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime

from agentlens.config import Settings
from agentlens.review._hooks import STATS
from agentlens.review._pipeline import DEFAULT_BATCH, review_pending_result
from agentlens.review._settings import ReviewSettings, review_settings
from agentlens.store import TraceStore

__all__ = ["Reviewer"]

logger = logging.getLogger("agentlens")


class Reviewer:
    """Reviews a store's pending runs in a daemon thread.

    Args:
        store: an open store, or a store URL (opened through
            :func:`agentlens.store.shared_store`).
        settings: scorer options per role (default: :func:`agentlens.config.load_settings`).
        review: the review settings (default: from ``settings``).
        interval: seconds between two looks at the store when nobody notifies.
        batch_size: runs per review round.
        worker: claim the runs under this name (with a lease of ``lease_s`` seconds), so that
            several processes reviewing one store never review a run twice, and the runs of one
            that died are reviewed by another once the lease runs out
            (:meth:`~agentlens.store.TraceStore.claim_review`). ``None``: read the queue.

    Raises:
        ConfigError: bad review settings (checked here, not in the thread).
    """

    def __init__(
        self,
        store: TraceStore | str,
        *,
        settings: Settings | None = None,
        review: ReviewSettings | None = None,
        interval: float = 5.0,
        batch_size: int = DEFAULT_BATCH,
        worker: str | None = None,
        lease_s: float = 300.0,
    ) -> None:
        if settings is None:
            from agentlens.config import load_settings

            settings = load_settings()
        self._settings = settings
        self._review = review if review is not None else review_settings(settings)
        self._store_arg = store
        self._store: TraceStore | None = None if isinstance(store, str) else store
        self._interval = interval
        self._batch_size = batch_size
        self._worker = worker
        self._lease_s = lease_s
        self._wake = threading.Event()
        self._idle = threading.Condition()
        self._busy = False
        self._generation = 0  # notifications seen
        self._done_generation = 0  # notifications fully handled
        self._ok_generation = 0  # notifications handled by a round that succeeded
        self._stop = False
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def settings(self) -> ReviewSettings:
        """The review settings in use."""
        return self._review

    def start(self) -> Reviewer:
        """Start the thread (idempotent); returns ``self``."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._stop = False
                self._thread = threading.Thread(
                    target=self._loop, name="agentlens-reviewer", daemon=True
                )
                self._thread.start()
        return self

    def notify(self) -> None:
        """Say runs were written: the thread reviews them soon. Never blocks, never raises."""
        try:
            with self._idle:
                self._generation += 1
            self._wake.set()
        except Exception:  # pragma: no cover - must never break the caller
            pass

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until everything pending when called is reviewed (and due deliveries tried).

        Returns:
            True when a review round that started after this call succeeded within ``timeout``
            seconds; False when it failed (the runs stay pending: see the ``agentlens`` log),
            the time ran out, or the reviewer is shut down.
        """
        if self._stop:
            return False
        self.start()
        with self._idle:
            self._generation += 1
            target = self._generation
        self._wake.set()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            while self._done_generation < target:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._idle.wait(remaining)
            return self._ok_generation >= target

    def shutdown(self, timeout: float | None = 30.0) -> bool:
        """Finish the round in progress and stop the thread; True when it stopped in time."""
        with self._lock:
            thread = self._thread
            self._stop = True
        self._wake.set()
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def _open(self) -> TraceStore:
        if self._store is None:
            from agentlens.store import shared_store

            self._store = shared_store(str(self._store_arg))
        return self._store

    def _next_wait(self, store: TraceStore) -> float:
        """Sleep until the next retry is due, or ``interval``."""
        wait = self._interval
        try:
            pending = store.list_deliveries(status="pending", limit=None)
        except Exception:
            return wait
        now = datetime.now(UTC)
        for d in pending:
            if d.next_attempt_at is not None:
                wait = min(wait, max(0.0, (d.next_attempt_at - now).total_seconds()))
        return max(0.01, wait)

    def _loop(self) -> None:
        failures = 0
        while True:
            self._wake.wait(self._interval if failures == 0 else min(60.0, 2.0**failures))
            self._wake.clear()
            with self._idle:
                target = self._generation
            if self._stop:
                with self._idle:
                    self._done_generation = target
                    self._idle.notify_all()
                return
            wait = self._interval
            try:
                store = self._open()
                review_pending_result(
                    store,
                    settings=self._settings,
                    review=self._review,
                    batch_size=self._batch_size,
                    worker=self._worker,
                    lease_s=self._lease_s,
                )
                wait = self._next_wait(store)
                failures = 0
            except Exception as exc:  # logged and counted; the runs stay pending
                failures += 1
                STATS.add(errors=1)
                logger.warning(
                    "agentlens: review failed (will retry): %s: %s", type(exc).__name__, exc
                )
            with self._idle:
                self._done_generation = max(self._done_generation, target)
                if failures == 0:
                    self._ok_generation = max(self._ok_generation, target)
                self._idle.notify_all()
            if wait < self._interval and not self._wake.is_set() and failures == 0:
                self._wake.wait(wait)
                self._wake.set()
