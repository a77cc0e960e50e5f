"""The backlog gauges of ``/metrics``: staged spans and traces, the review queue and its lag.

Counting the backlog costs time in proportion to it: under a long burst millions of spans wait
to be built and hundreds of thousands of runs to be reviewed, and counting them takes seconds
(more on a busy machine). A scrape must not wait on that, nor pile counts on a store that is
already behind. So the counts are cached: a value is reused while it is younger than
:data:`REUSE_FACTOR` times what it took to count (a count of 2 ms is reused for 40 ms, one of
3 s for a minute, none for more than :data:`MAX_REUSE_S`). Past that, a count that was quick (under :data:`SLOW_S`) is made again before
the scrape is answered; a slow one is made in a thread while the scrape gets the previous value
at once. So a scrape waits only for a quick count, or on the first scrape.
``agentlens_backlog_age_seconds`` says how old the values served are.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["CachedCount"]

logger = logging.getLogger("agentlens.server")

REUSE_FACTOR = 20.0
"""A count is reused while younger than this many times its own duration."""

MAX_REUSE_S = 300.0
"""No count is reused for longer than this (a count of a minute is then made every five)."""

SLOW_S = 0.25
"""A count that took longer than this is refreshed in a thread, not while a scrape waits."""


T = TypeVar("T")


class CachedCount(Generic[T]):
    """The latest value of ``count()`` (one of the backlog's counts), refreshed as described
    above. Each count has its own cache, so a quick one (the review queue) is not held back by
    a slow one (the staged spans).

    ``clock`` is injectable for tests (monotonic seconds).
    """

    def __init__(
        self, count: Callable[[], T], *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._count = count
        self._clock = clock
        self._lock = threading.Lock()
        self._value: T | None = None
        self._counted_at = 0.0
        self._took = 0.0
        self._refreshing = False

    def get(self) -> tuple[T, float]:
        """The count and its age in seconds."""
        with self._lock:
            value, counted_at, took = self._value, self._counted_at, self._took
            reuse = min(REUSE_FACTOR * took, MAX_REUSE_S)
            fresh = value is not None and self._clock() - counted_at <= reuse
            slow = took > SLOW_S
            start = value is not None and not fresh and slow and not self._refreshing
            if start:
                self._refreshing = True
        if value is None or (not fresh and not slow):
            return self._refresh(), 0.0
        if start:
            threading.Thread(
                target=self._refresh_quietly, name="agentlens-backlog", daemon=True
            ).start()
        return value, max(0.0, self._clock() - counted_at)

    def _refresh(self) -> T:
        started = self._clock()
        try:
            value = self._count()
        except BaseException:
            with self._lock:
                self._refreshing = False
            raise
        with self._lock:
            self._value, self._counted_at = value, self._clock()
            self._took = self._counted_at - started
            self._refreshing = False
        return value

    def _refresh_quietly(self) -> None:
        try:
            self._refresh()
        except Exception:
            logger.exception("counting the backlog for /metrics failed")
