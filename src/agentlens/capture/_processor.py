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
from agentlens.capture._spill import SpillDir
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
RETRY_FIRST = 0.25
"""Seconds before the first retry of a failed batch; doubled after each failure."""
RETRY_MAX = 10.0
"""The longest wait between two retries."""


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
    """Runs waiting right now: in the queue, or in a failed batch waiting to be retried."""
    retried: int = 0
    """Runs of failed export attempts that were kept to be retried (each attempt counts)."""
    spilled: int = 0
    """Runs written to the spill directory because they could not be exported in time."""
    resent: int = 0
    """Runs read back from the spill directory and exported."""


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
        self._count_lock = (
            threading.RLock()
        )  # counted from many agent threads (re-entrant: SIGTERM)
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

    def _stats(
        self, pending: int, retried: int = 0, spilled: int = 0, resent: int = 0
    ) -> CaptureStats:
        return CaptureStats(
            exported=self._exported,
            dropped=self._dropped,
            failed=self._failed,
            pending=pending,
            retried=retried,
            spilled=spilled,
            resent=resent,
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
    __slots__ = ("done", "ok")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.ok = True


class BatchProcessor(_Exporting, Processor):
    """A bounded queue of finished runs, drained by a daemon thread into an :class:`Exporter`.

    :meth:`on_end` never blocks and never raises: when ``max_queue`` runs are already waiting
    the new one is dropped, counted and logged (at most once a minute). The thread starts at
    the first run, converts each run to a :class:`Trace` (off the agent's thread), exports
    whenever ``batch_size`` runs are waiting or ``flush_interval`` seconds have passed, and
    restarts in a forked child.

    A batch the exporter could not write is kept and retried, oldest first, after 0.25 s, then
    twice as long after each failure (at most :data:`RETRY_MAX` seconds), while later runs
    wait in the queue. When the queue is half full, or at a flush or shutdown, the runs that
    cannot be written yet go to the spill directory (:mod:`agentlens.capture._spill`) instead,
    and are sent again by the next processor for the same destination, in this process or the
    next one. Only what can be neither written nor spilled is finally dropped: counted as
    ``failed`` and logged.

    Args:
        exporter: where the runs go.
        max_queue: runs that may wait before new ones are dropped.
        batch_size: runs per ``export`` call.
        flush_interval: seconds before a partial batch is exported.
        spill_dir: where runs that cannot be exported in time go; default: the exporter's
            ``spill_dir`` (a SQLite store's is ``FILE.db-spill`` next to it), else none;
            ``False``: never spill.
        spill_max_bytes: the most the spill directory may hold; beyond it runs are dropped.
    """

    def __init__(
        self,
        exporter: Exporter,
        *,
        max_queue: int = DEFAULT_MAX_QUEUE,
        batch_size: int = DEFAULT_BATCH_SIZE,
        flush_interval: float = DEFAULT_FLUSH_INTERVAL,
        spill_dir: str | os.PathLike[str] | bool | None = None,
        spill_max_bytes: int = 256 * 1024 * 1024,
    ) -> None:
        super().__init__(exporter)
        self._max_queue = max_queue
        self._batch_size = batch_size
        self._flush_interval = flush_interval
        self._spill = _spill_dir(exporter, spill_dir, spill_max_bytes)
        # Failed batches waiting to be retried, oldest first; touched only by the export thread
        # (and by shutdown() once that thread is past its deadline).
        self._held: collections.deque[list[Trace]] = collections.deque()
        self._held_runs = 0
        self._backoff = 0.0
        self._retry_at = 0.0
        self._inflight: list[Trace] | None = None
        self._inflight_since = 0.0
        self._failing = False  # the last export attempt failed
        self._spiller: threading.Thread | None = None
        self._spill_wake = threading.Event()
        self._retried = 0
        self._spilled = 0
        self._resent = 0
        self._queue: collections.deque[Any] = collections.deque()
        self._wake = threading.Event()
        # Re-entrant: the SIGTERM handler (capture._signals) may run shutdown() in the main
        # thread while that thread is inside one of these locks.
        self._lock = threading.RLock()  # guards thread start/stop, not the queue
        self._thread: threading.Thread | None = None
        self._stopped = False
        _instances.add(self)
        try:
            if self._spill is not None and self._spill.has_files():
                self._ensure_thread()  # re-send what an earlier run of the program spilled
        except Exception:  # pragma: no cover - defensive: never raise from here
            pass

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
            if len(queue) >= self._high_water and self._spill is not None and self._stuck():
                self._spill_wake.set()
                if self._spiller is None:
                    self._ensure_spiller()
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
            return self._exporter_flush(timeout) and request.ok
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
                    if self._spill is None:
                        self._log.warning(
                            "shutdown",
                            "agentlens: export thread still busy after %ss; %d run(s) not exported",
                            timeout,
                            self.stats().pending,
                        )
                        return False
                    # Past the deadline (the destination is slow: a held lock): what is still
                    # queued, and the batch being written, go to the spill directory from here,
                    # so that exiting loses nothing. A run spilled and then written too is
                    # harmless: stores replace a run by its id.
                    left, requests = self._take_queued()
                    for request in requests:
                        request.ok = False
                        request.done.set()
                    inflight = self._inflight
                    if inflight:
                        left = list(inflight) + left
                    spilled = self._spill_or_drop(left, "the export thread was busy")
                    self._log.warning(
                        "shutdown",
                        "agentlens: export thread still busy after %ss; %d run(s) spilled to %s",
                        timeout,
                        spilled,
                        self._spill.path,
                    )
                    return spilled == len(left)
                return True
            self._final()
            return self._exporter_shutdown(timeout)
        except Exception as exc:
            self._log.warning("shutdown", "agentlens: shutdown failed: %s", describe(exc))
            return False

    def stats(self) -> CaptureStats:
        """The counters so far."""
        pending = sum(1 for item in list(self._queue) if not isinstance(item, _FlushRequest))
        return self._stats(pending + self._held_runs, self._retried, self._spilled, self._resent)

    # -- background side ----------------------------------------------------------------------

    def _after_fork(self) -> None:
        # In a forked child the parent's thread does not exist and its locks may be held;
        # the runs still queued belong to the parent, which exports them itself.
        self._lock = threading.RLock()
        self._count_lock = threading.RLock()
        self._wake = threading.Event()
        self._spill_wake = threading.Event()
        self._thread = None
        self._spiller = None
        self._queue.clear()

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is not None or self._stopped:
                return
            thread = threading.Thread(target=self._loop, name="agentlens-export", daemon=True)
            self._thread = thread
            thread.start()

    def _loop(self) -> None:
        try:
            self._resend()  # what an earlier process (or processor) spilled
        except Exception as exc:  # pragma: no cover - defensive
            self._log.warning("loop", "agentlens: export thread error: %s", describe(exc))
        while True:
            try:
                wait = self._flush_interval
                if self._held:
                    wait = min(wait, max(0.0, self._retry_at - time.monotonic()))
                self._wake.wait(wait)
                self._wake.clear()
                if self._stopped:
                    self._final()
                    self._exporter_shutdown(None)
                    return
                self._drain()
            except Exception as exc:  # pragma: no cover - defensive: keep the thread alive
                self._log.warning("loop", "agentlens: export thread error: %s", describe(exc))

    # A batch is written by _attempt; one that fails is held (_hold) and retried first, with
    # backoff, before anything newer is sent, so runs reach the destination in order.

    @property
    def _high_water(self) -> int:
        return max(1, self._max_queue * 3 // 4)

    def _stuck(self) -> bool:
        """The destination is failing, or the export under way has taken over a second."""
        if self._failing:
            return True
        return self._inflight is not None and time.monotonic() - self._inflight_since > 1.0

    def _ensure_spiller(self) -> None:
        with self._lock:
            if self._spiller is not None or self._stopped:
                return
            thread = threading.Thread(target=self._spill_loop, name="agentlens-spill", daemon=True)
            self._spiller = thread
            thread.start()

    def _spill_loop(self) -> None:
        """While the export thread is stuck in a write (SQLite waits up to its busy timeout for
        another process's lock) the queue can fill: this thread moves the newest queued runs
        to the spill directory, down to a quarter of the queue, so that the agent's new runs
        still find room. The oldest runs (and any flush request) stay for the export thread."""
        while not self._stopped:
            try:
                self._spill_wake.wait(1.0)
                self._spill_wake.clear()
                if len(self._queue) < self._high_water or not self._stuck():
                    continue
                taken: list[Any] = []
                queue = self._queue
                while len(queue) > self._max_queue // 4:
                    try:
                        item = queue.pop()
                    except IndexError:
                        break
                    if isinstance(item, _FlushRequest):
                        queue.append(item)
                        break
                    taken.append(item)
                taken.reverse()
                traces = [t for t in (self._to_trace(item) for item in taken) if t is not None]
                self._spill_or_drop(traces, "the destination is failing")
            except Exception as exc:  # pragma: no cover - defensive: keep the thread alive
                self._log.warning("spill", "agentlens: spill thread error: %s", describe(exc))

    def _attempt(self, batch: list[Trace]) -> bool:
        self._inflight_since = time.monotonic()
        self._inflight = batch
        try:
            result = self.exporter.export(batch)
            if not isinstance(result, ExportResult):
                result = ExportResult.success(len(batch))
        except Exception as exc:
            result = ExportResult.failure(f"exporter raised {describe(exc)}")
        finally:
            self._inflight = None
        if result.ok:
            with self._count_lock:
                self._exported += len(batch)
            self._backoff = 0.0
            self._failing = False
            return True
        self._failing = True
        self._retried += len(batch)
        self._backoff = min(RETRY_MAX, self._backoff * 2 or RETRY_FIRST)
        self._retry_at = time.monotonic() + self._backoff
        self._log.warning(
            "export",
            "agentlens: %d run(s) not exported yet, retrying in %.2gs: %s",
            len(batch),
            self._backoff,
            result.error,
        )
        return False

    def _hold(self, batch: list[Trace]) -> None:
        self._held.append(batch)
        self._held_runs += len(batch)

    def _retry_held(self, *, now: bool = False) -> bool:
        """Retry the held batches, oldest first, when their time has come (or ``now``); True
        when none is left."""
        while self._held:
            if not now and time.monotonic() < self._retry_at:
                return False
            batch = self._held[0]
            if not self._attempt(batch):
                return False
            self._held.popleft()
            self._held_runs -= len(batch)
        return True

    def _drain(self) -> None:
        queue = self._queue
        if not self._retry_held():
            # The destination still fails (or its retry is not due). A waiting flush gets a
            # retry now; otherwise keep waiting while the queue has room. When it is half full,
            # or a flush waits and the retry failed, move what cannot be written to the spill
            # directory.
            request = self._first_flush_request()
            if request is None or not self._retry_held(now=True):
                if len(queue) >= max(1, self._max_queue // 2):
                    self._spill_pending()
                elif request is not None:
                    self._spill_pending(until=request)
                return
        # The batch being built is visible as _inflight, so that a shutdown past its deadline
        # can spill it (the runs were taken off the queue already).
        batch: list[Trace] = []
        self._inflight = batch
        while True:
            try:
                item = queue.popleft()
            except IndexError:
                break
            if isinstance(item, _FlushRequest):
                if batch and not self._attempt(batch):
                    self._hold(batch)
                batch = []
                if self._held and not self._retry_held(now=True):
                    item.ok = self._spill_pending(take_queue=False)
                elif self._spill is not None and self._spill.has_files():
                    self._resend()  # the destination takes runs: what was spilled goes first
                item.done.set()
                self._inflight = batch
                continue
            trace = self._to_trace(item)
            if trace is not None:
                batch.append(trace)
            if len(batch) >= self._batch_size:
                if not self._attempt(batch):
                    self._hold(batch)
                    return
                batch = []
                self._inflight = batch
        if batch and not self._attempt(batch):
            self._hold(batch)
            return
        self._inflight = None
        if self._spill is not None and self._resend_due():
            self._resend()

    def _first_flush_request(self) -> _FlushRequest | None:
        for item in list(self._queue):
            if isinstance(item, _FlushRequest):
                return item
        return None

    def _take_queued(
        self, until: _FlushRequest | None = None
    ) -> tuple[list[Trace], list[_FlushRequest]]:
        """Pop and convert the queued runs, up to and including the flush request ``until``
        (all of them without one); the flush requests met are returned, to be answered."""
        traces: list[Trace] = []
        requests: list[_FlushRequest] = []
        queue = self._queue
        while True:
            try:
                item = queue.popleft()
            except IndexError:
                break
            if isinstance(item, _FlushRequest):
                requests.append(item)
                if item is until:
                    break
                continue
            trace = self._to_trace(item)
            if trace is not None:
                traces.append(trace)
        return traces, requests

    def _spill_pending(
        self, *, until: _FlushRequest | None = None, take_queue: bool = True
    ) -> bool:
        """The destination is failing: move the held batches (and the queued runs, up to
        ``until``) to the spill directory, and answer the flush requests met. Without a spill
        directory, the held batches stay (and are retried) until they alone would fill the
        queue; the oldest is then dropped. True when nothing was dropped."""
        if self._spill is None:
            while self._held and self._held_runs > self._max_queue:
                batch = self._held.popleft()
                self._held_runs -= len(batch)
                self._drop(len(batch), "the destination is failing and nothing can be spilled")
            return not self._held
        held = [trace for batch in self._held for trace in batch]
        self._held.clear()
        self._held_runs = 0
        queued, requests = self._take_queued(until) if take_queue else ([], [])
        traces = held + queued
        ok = self._spill_or_drop(traces, "the destination is failing") == len(traces)
        for request in requests:
            request.ok = ok
            request.done.set()
        return ok

    def _spill_or_drop(self, traces: list[Trace], why: str) -> int:
        """Spill ``traces`` in batches; count and log what cannot be. Returns how many were
        spilled."""
        spilled = 0
        for start in range(0, len(traces), self._batch_size):
            batch = traces[start : start + self._batch_size]
            spilled += self._spill.write(batch) if self._spill is not None else 0
        with self._count_lock:
            self._spilled += spilled
        if spilled < len(traces):
            self._drop(len(traces) - spilled, why)
        return spilled

    def _drop(self, count: int, why: str) -> None:
        with self._count_lock:
            self._failed += count
        self._log.warning("lost", "agentlens: %d run(s) lost: %s", count, why)

    def _final(self) -> None:
        """Stopping: write what is held and queued, once, without waiting for a retry; spill
        what cannot be written (or drop it, counted and logged, without a spill directory)."""
        ok = self._retry_held(now=True) if self._held else True
        while ok:
            batch: list[Trace] = []
            self._inflight = batch
            while len(batch) < self._batch_size:
                try:
                    item = self._queue.popleft()
                except IndexError:
                    break
                if isinstance(item, _FlushRequest):
                    item.done.set()
                    continue
                trace = self._to_trace(item)
                if trace is not None:
                    batch.append(trace)
            if not batch:
                self._inflight = None
                return
            if not self._attempt(batch):
                self._hold(batch)
                ok = False
        held = [trace for batch in self._held for trace in batch]
        self._held.clear()
        self._held_runs = 0
        queued, requests = self._take_queued()
        left = held + queued
        if left:
            self._spill_or_drop(left, "capture was shut down while the destination was failing")
        for request in requests:
            request.ok = False
            request.done.set()

    _resend_checked_at = 0.0

    def _resend_due(self) -> bool:
        now = time.monotonic()
        if now - self._resend_checked_at < 1.0:
            return False
        self._resend_checked_at = now
        return self._spill is not None and self._spill.has_files()

    def _resend(self) -> None:
        """Send what the spill directory holds, a file at a time, while the destination takes
        it; a file that fails goes back for later."""
        spill = self._spill
        if spill is None:
            return
        for _ in range(1000):  # bounded: files spilled meanwhile wait for the next round
            claimed = spill.claim()
            if claimed is None:
                return
            path, traces = claimed
            ok = True
            for start in range(0, len(traces), self._batch_size):
                if not self._attempt(traces[start : start + self._batch_size]):
                    ok = False
                    break
            if not ok:
                spill.release(path)
                return
            spill.done(path)
            self._resent += len(traces)


def _spill_dir(
    exporter: Exporter, spill_dir: str | os.PathLike[str] | bool | None, max_bytes: int
) -> SpillDir | None:
    """The processor's spill directory: as given, else the exporter's ``spill_dir``."""
    if spill_dir is False:
        return None
    path: object = spill_dir
    if spill_dir is None or spill_dir is True:
        try:
            path = getattr(exporter, "spill_dir", None)
        except Exception:
            path = None
    if not isinstance(path, str | os.PathLike):
        return None
    return SpillDir(path, max_bytes=max_bytes)


_instances: weakref.WeakSet[BatchProcessor] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for processor in list(_instances):
        processor._after_fork()


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_after_fork_in_child)
