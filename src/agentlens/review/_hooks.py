"""What the host application hears about a flagged run: :func:`on_flagged` callbacks.

A callback receives a :class:`FlaggedRun` (the same summary the webhook sends as JSON). It may be
a plain function or a coroutine function; it runs in the reviewing thread (the
:class:`~agentlens.review.Reviewer`'s, never the agent's). A callback that raises (or an async
one that takes longer than :data:`CALLBACK_TIMEOUT`) is logged and counted
(:func:`review_stats`), never raised.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import inspect
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = [
    "CALLBACK_TIMEOUT",
    "FlaggedRun",
    "ReviewStats",
    "clear_flagged_callbacks",
    "on_flagged",
    "review_stats",
]

logger = logging.getLogger("agentlens")

CALLBACK_TIMEOUT = 30.0
"""Seconds an async callback may take before it is abandoned (and counted as failed)."""


@dataclass(frozen=True, slots=True)
class FlaggedRun:
    """The summary of a flagged run, as callbacks get it and the webhook sends it."""

    run_id: str
    agent: str | None
    project: str
    name: str | None
    reason: str | None
    """The one-line detail of the most important finding."""
    failure_modes: tuple[str, ...]
    links: dict[str, str]
    """The content the run produced (``{"blog_post": "123"}``): now ``hallucination_suspected``."""
    started_at: datetime | None
    findings: tuple[dict[str, Any], ...] = ()
    """Every finding behind the flag, numbered in order of importance."""
    url: str | None = None
    """The run in the dashboard, when ``[review] base_url`` is configured."""

    def to_json(self) -> dict[str, Any]:
        """The JSON object the webhook POSTs (``event`` is ``run.flagged``)."""
        return {
            "event": "run.flagged",
            "run_id": self.run_id,
            "agent": self.agent,
            "project": self.project,
            "name": self.name,
            "hallucination_detected": True,
            "hallucination_reason": self.reason,
            "failure_modes": list(self.failure_modes),
            "links": dict(self.links),
            "started_at": None
            if self.started_at is None
            else self.started_at.isoformat().replace("+00:00", "Z"),
            "findings": list(self.findings),
            "url": self.url,
        }


@dataclass
class ReviewStats:
    """Counters of the review pipeline in this process."""

    reviewed: int = 0
    """Runs reviewed."""
    flagged: int = 0
    """Of those, runs that came out flagged."""
    callback_failures: int = 0
    """Callback calls that raised or timed out."""
    deliveries_sent: int = 0
    """Webhook deliveries accepted by the receiver."""
    delivery_attempts_failed: int = 0
    """Webhook attempts that failed (each retried until the delivery is given up)."""
    deliveries_given_up: int = 0
    """Deliveries marked failed after their last attempt (kept in the store and listed)."""
    errors: int = 0
    """Review rounds that failed (logged; the runs stay pending and are tried again)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for key, n in counts.items():
                setattr(self, key, getattr(self, key) + n)

    def snapshot(self) -> ReviewStats:
        with self._lock:
            return ReviewStats(
                self.reviewed,
                self.flagged,
                self.callback_failures,
                self.deliveries_sent,
                self.delivery_attempts_failed,
                self.deliveries_given_up,
                self.errors,
            )


STATS = ReviewStats()

_callbacks: list[Callable[[FlaggedRun], Any]] = []
_callbacks_lock = threading.Lock()


def on_flagged(callback: Callable[[FlaggedRun], Any]) -> Callable[[FlaggedRun], Any]:
    """Register ``callback`` (sync or async) to receive every run review flags, as a
    :class:`FlaggedRun`. Returns it, so it can be used as a decorator.

    Raises:
        TypeError: ``callback`` is not callable.
    """
    if not callable(callback):
        raise TypeError(f"on_flagged needs a callable, got {type(callback).__name__}")
    with _callbacks_lock:
        _callbacks.append(callback)
    return callback


def clear_flagged_callbacks() -> None:
    """Forget every registered callback (tests, shutdown)."""
    with _callbacks_lock:
        _callbacks.clear()


def review_stats() -> ReviewStats:
    """A copy of the review counters of this process."""
    return STATS.snapshot()


def _in_own_loop(coro: Any) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(coro, CALLBACK_TIMEOUT)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(bounded())
    with cf.ThreadPoolExecutor(1) as pool:  # called inside a loop: run beside it
        return pool.submit(asyncio.run, bounded()).result()


def fire(run: FlaggedRun) -> int:
    """Call every registered callback with ``run``; return how many failed (each logged)."""
    with _callbacks_lock:
        callbacks = list(_callbacks)
    failures = 0
    for callback in callbacks:
        try:
            result = callback(run)
            if inspect.isawaitable(result):
                _in_own_loop(result)
        except Exception as exc:  # a failing callback is logged and counted, never raised
            failures += 1
            logger.warning(
                "agentlens: on_flagged callback %r failed on run %s: %s: %s",
                getattr(callback, "__qualname__", callback),
                run.run_id,
                type(exc).__name__,
                exc,
            )
    if failures:
        STATS.add(callback_failures=failures)
    return failures
