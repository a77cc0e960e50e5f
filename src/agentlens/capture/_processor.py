"""Processors: what capture does with a run when its block ends.

The seam is the OpenTelemetry SDK's: the agent thread calls :meth:`Processor.on_end` with the
finished :class:`~agentlens.capture.Run`; a processor turns it into a
:class:`~agentlens.model.Trace` (:meth:`Run.to_trace`) and hands it to an
:class:`~agentlens.capture.Exporter`.

- :class:`BatchProcessor` (the default) puts the run on a bounded queue and returns: a daemon
  thread converts, batches and exports. The agent never waits for a write; when the queue is
  full the run is dropped, counted and logged; when the exporter fails the batch is counted and
  logged.
- :class:`SimpleProcessor` converts and exports at once, in the agent's thread: for tests and
  short scripts, where being synchronous matters more than the agent's latency.

A processor of your own (sampling, redaction, a hook when a run completes) subclasses
:class:`Processor` or wraps one of these and is installed with
``agentlens.configure(processor=...)``. ``on_end`` runs in the agent's thread: it must return
quickly and never raise (an exception is caught and logged, and the run counts as failed).
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
import weakref
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentlens.capture._export import Exporter, ExportResult, describe
from agentlens.model import Trace

if TYPE_CHECKING:  # pragma: no cover
    from agentlens.capture._run import Run

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_FLUSH_INTERVAL",
    "DEFAULT_MAX_QUEUE",
    "BatchProcessor",
    "CaptureStats",
    "Processor",
    "SimpleProcessor",
]

logger = logging.getLogger("agentlens")

DEFAULT_MAX_QUEUE = 2048
"""Finished runs waiting to be exported before new ones are dropped."""
DEFAULT_BATCH_SIZE = 64
"""Runs handed to the exporter in one call (one transaction for a store)."""
DEFAULT_FLUSH_INTERVAL = 1.0
"""Seconds the background thread waits before exporting a batch that is not full."""


@dataclass(frozen=True, slots=True)
class CaptureStats:
    """Counters of a processor since it was made."""

    exported: int = 0
    """Runs the exporter accepted."""
    dropped: int = 0
    """Runs never handed to the exporter: the queue was full, or capture was shut down."""
    failed: int = 0
    """Runs handed to the exporter that it could not write, or that could not be converted."""
    pending: int = 0
    """Runs waiting in the queue right now."""


class Processor(ABC):
    """Receives every recorded run when its block ends. Only :meth:`on_end` is required."""

    @abstractmethod
    def on_end(self, run: Run) -> None:
        """The run's block has ended: its status, output and steps are final.

        Called in the agent's thread, once per recorded run; return quickly and never raise.
        ``run.to_trace()`` gives its :class:`~agentlens.model.Trace`.
        """

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Export every run ended so far; True when done within ``timeout`` seconds."""
        return True

    def shutdown(self, timeout: float | None = 30.0) -> bool:
        """Export what is pending and release resources; runs ended afterwards are dropped.
        True when done within ``timeout`` seconds. Idempotent."""
        return True

    def stats(self) -> CaptureStats:
        """The counters so far (all zero unless the processor keeps them)."""
        return CaptureStats()


class _RateLimitedLog:
    """Logs a warning per kind of trouble at most once per ``interval`` seconds, with a count."""

    def __init__(self, interval: float = 60.0) -> None:
        self._interval = interval
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def warning(self, kind: str, message: str, *args: Any) -> None:
        try:
            now = time.monotonic()
            with self._lock:
                last = self._last.get(kind)
                if last is not None and now - last < self._interval:
                    self._suppressed[kind] = self._suppressed.get(kind, 0) + 1
                    return
                self._last[kind] = now
                suppressed = self._suppressed.pop(kind, 0)
            if suppressed:
                message += " (%d similar messages suppressed)"
                args = (*args, suppressed)
            logger.warning(message, *args)
        except Exception:  # pragma: no cover - logging must never break capture
            pass


class _Exporting:
    """What both processors share: converting runs, calling the exporter, counting."""

    def __init__(self, exporter: Exporter) -> None:
        self.exporter = exporter
        self._exported = 0
        self._dropped = 0
        self._failed = 0
        self._count_lock = threading.Lock()  # counted from many agent threads
        self._log = _RateLimitedLog()

    def _count_drop(self) -> None:
        with self._count_lock:
            self._dropped += 1

    def _to_trace(self, item: Run | Trace) -> Trace | None:
        if isinstance(item, Trace):
            return item
        try:
            return item.to_trace()
        except Exception as exc:
            with self._count_lock:
                self._failed += 1
            self._log.warning("convert", "agentlens: could not convert a run: %s", describe(exc))
            return None

    def _export(self, batch: list[Trace]) -> None:
        if not batch:
            return
        try:
            result = self.exporter.export(batch)
            if not isinstance(result, ExportResult):
                result = ExportResult.success(len(batch))
        except Exception as exc:
            result = ExportResult.failure(f"exporter raised {describe(exc)}")
        # a partial failure (some runs written, ``result.count``) counts the rest as failed
        written = len(batch) if result.ok else max(0, min(result.count, len(batch)))
        with self._count_lock:
            self._exported += written
            self._failed += len(batch) - written
        if not result.ok:
            self._log.warning(
                "export",
                "agentlens: %d run(s) not exported: %s",
                len(batch) - written,
                result.error,
            )

    def _exporter_flush(self, timeout: float | None) -> bool:
        try:
            return bool(self.exporter.flush(timeout))
        except Exception as exc:
            self._log.warning("flush", "agentlens: exporter flush failed: %s", describe(exc))
            return False

    def _exporter_shutdown(self, timeout: float | None) -> bool:
        try:
            done = self.exporter.shutdown(timeout)
            return done is None or bool(done)
        except Exception as exc:
            self._log.warning("shutdown", "agentlens: exporter shutdown failed: %s", describe(exc))
            return False

    def _stats(self, pending: int) -> CaptureStats:
        return CaptureStats(
            exported=self._exported, dropped=self._dropped, failed=self._failed, pending=pending
        )


class SimpleProcessor(_Exporting, Processor):
    """Converts and exports each run as its block ends, in the agent's thread.

    The agent waits for the export: use it for tests (``agentlens.testing`` does, with an
    :class:`~agentlens.capture.InMemoryExporter`) and short scripts, not in production. Calls
    to the exporter are serialised with a lock, so runs ending in several threads at once
    reach it one batch at a time. Never raises.
    """

    def __init__(self, exporter: Exporter) -> None:
        super().__init__(exporter)
        self._lock = threading.Lock()
        self._stopped = False

    def on_end(self, run: Run | Trace) -> None:
        """Export the run now (a :class:`Trace` is exported as it is)."""
        try:
            if self._stopped:
                self._count_drop()
                return
            trace = self._to_trace(run)
            if trace is not None:
                with self._lock:
                    self._export([trace])
        except Exception as exc:  # pragma: no cover - defensive: on_end must never raise
            self._log.warning("submit", "agentlens: could not export a run: %s", describe(exc))

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Nothing is pending here; flush the exporter."""
        return self._exporter_flush(timeout)

    def shutdown(self, timeout: float | None = 30.0) -> bool:
        """Refuse further runs and shut the exporter down. Idempotent."""
        with self._lock:
            if self._stopped:
                return True
            self._stopped = True
            return self._exporter_shutdown(timeout)

    def stats(self) -> CaptureStats:
        """The counters so far (``pending`` is always 0)."""
        return self._stats(0)


class _FlushRequest:
    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()


class BatchProcessor(_Exporting, Processor):
    """A bounded queue of finished runs, drained by a daemon thread into an :class:`Exporter`.

    :meth:`on_end` never blocks and never raises: when ``max_queue`` runs are already waiting
    the new one is dropped, counted and logged (at most once a minute). The thread starts at
    the first run, converts each run to a :class:`Trace` (off the agent's thread), exports
    whenever ``batch_size`` runs are waiting or ``flush_interval`` seconds have passed, and
    restarts in a forked child.

    Args:
        exporter: where the runs go.
        max_queue: runs that may wait before new ones are dropped.
        batch_size: runs per ``export`` call.
        flush_interval: seconds before a partial batch is exported.
    """

    def __init__(
        self,
        exporter: Exporter,
        *,
        max_queue: int = DEFAULT_MAX_QUEUE,
        batch_size: int = DEFAULT_BATCH_SIZE,
        flush_interval: float = DEFAULT_FLUSH_INTERVAL,
    ) -> None:
        super().__init__(exporter)
        self._max_queue = max_queue
        self._batch_size = batch_size
        self._flush_interval = flush_interval
        self._queue: collections.deque[Any] = collections.deque()
        self._wake = threading.Event()
        self._lock = threading.Lock()  # guards thread start/stop, not the queue
        self._thread: threading.Thread | None = None
        self._stopped = False
        _instances.add(self)

    # -- agent side ---------------------------------------------------------------------------

    def on_end(self, run: Run | Trace) -> None:
        """Queue the run (a :class:`Trace` is queued as it is). Never blocks, never raises."""
        self.submit(run)

    def submit(self, item: Run | Trace) -> bool:
        """Queue one finished run; False when it was dropped. Never blocks, never raises."""
        try:
            if self._stopped:
                self._count_drop()
                return False
            queue = self._queue
            if len(queue) >= self._max_queue:
                self._count_drop()
                self._log.warning(
                    "queue_full",
                    "agentlens: export queue full (%d runs); dropped a run. "
                    "The store is slow or unavailable, or max_queue is too small.",
                    self._max_queue,
                )
                return False
            queue.append(item)
            if self._thread is None:
                self._ensure_thread()
            if len(queue) >= self._batch_size:
                self._wake.set()
            return True
        except Exception as exc:  # pragma: no cover - defensive: submit must never raise
            self._count_drop()
            self._log.warning("submit", "agentlens: could not queue a run: %s", describe(exc))
            return False

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until every run queued before this call is exported (or failed).

        Returns:
            True when done within ``timeout`` seconds (``None``: wait as long as it takes).
        """
        try:
            if not self._queue and self._thread is None:
                return self._exporter_flush(timeout)
            if self._thread is threading.current_thread():
                self._drain()
                return True
            request = _FlushRequest()
            self._queue.append(request)
            self._ensure_thread()
            self._wake.set()
            if not request.done.wait(timeout):
                return False
            return self._exporter_flush(timeout)
        except Exception as exc:  # pragma: no cover - defensive
            self._log.warning("flush", "agentlens: flush failed: %s", describe(exc))
            return False

    def shutdown(self, timeout: float | None = 30.0) -> bool:
        """Export what is queued, stop the thread and shut the exporter down. Idempotent: a
        second call after one that timed out waits for the thread again.

        Returns:
            True when everything queued was handed to the exporter within ``timeout`` seconds.
        """
        with self._lock:
            already = self._stopped
            self._stopped = True
        if already:
            thread = self._thread
            if thread is None or thread is threading.current_thread():
                return True
            thread.join(timeout)
            return not thread.is_alive()
        try:
            thread = self._thread
            if thread is not None and thread.is_alive():
                # The thread exports what is queued, shuts the exporter down and ends; the
                # exporter is only ever touched from that thread.
                self._wake.set()
                thread.join(timeout)
                if thread.is_alive():
                    self._log.warning(
                        "shutdown",
                        "agentlens: export thread still busy after %ss; %d run(s) not exported",
                        timeout,
                        self.stats().pending,
                    )
                    return False
                return True
            self._drain()
            return self._exporter_shutdown(timeout)
        except Exception as exc:
            self._log.warning("shutdown", "agentlens: shutdown failed: %s", describe(exc))
            return False

    def stats(self) -> CaptureStats:
        """The counters so far."""
        pending = sum(1 for item in list(self._queue) if not isinstance(item, _FlushRequest))
        return self._stats(pending)

    # -- background side ----------------------------------------------------------------------

    def _after_fork(self) -> None:
        # In a forked child the parent's thread does not exist and its locks may be held;
        # the runs still queued belong to the parent, which exports them itself.
        self._lock = threading.Lock()
        self._count_lock = threading.Lock()
        self._wake = threading.Event()
        self._thread = None
        self._queue.clear()

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is not None or self._stopped:
                return
            thread = threading.Thread(target=self._loop, name="agentlens-export", daemon=True)
            self._thread = thread
            thread.start()

    def _loop(self) -> None:
        while True:
            try:
                self._wake.wait(self._flush_interval)
                self._wake.clear()
                self._drain()
                if self._stopped:
                    self._drain()
                    self._exporter_shutdown(None)
                    return
            except Exception as exc:  # pragma: no cover - defensive: keep the thread alive
                self._log.warning("loop", "agentlens: export thread error: %s", describe(exc))

    def _drain(self) -> None:
        queue = self._queue
        batch: list[Trace] = []
        while True:
            try:
                item = queue.popleft()
            except IndexError:
                break
            if isinstance(item, _FlushRequest):
                self._export(batch)
                batch = []
                item.done.set()
                continue
            trace = self._to_trace(item)
            if trace is not None:
                batch.append(trace)
            if len(batch) >= self._batch_size:
                self._export(batch)
                batch = []
        self._export(batch)


_instances: weakref.WeakSet[BatchProcessor] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for processor in list(_instances):
        processor._after_fork()


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_after_fork_in_child)
