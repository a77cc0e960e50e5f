"""Exporters: where finished runs go, and the bounded background queue that feeds them.

The agent thread only ever appends a finished run to a bounded queue (:class:`BatchExporter`);
a daemon thread turns runs into :class:`~agentlens.model.Trace` objects, batches them and hands
them to an :class:`Exporter`. The agent never waits for a write: when the queue is full the run
is dropped, counted and logged; when the exporter fails the batch is counted and logged.
Export results are values (:class:`ExportResult`), not exceptions.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentlens.model import Trace

if TYPE_CHECKING:  # pragma: no cover
    from agentlens.store import TraceStore

__all__ = [
    "BatchExporter",
    "CaptureStats",
    "ExportResult",
    "Exporter",
    "InMemoryExporter",
    "StoreExporter",
]

logger = logging.getLogger("agentlens")

DEFAULT_MAX_QUEUE = 2048
"""Finished runs waiting to be exported before new ones are dropped."""
DEFAULT_BATCH_SIZE = 64
"""Runs handed to the exporter in one call (one transaction for a store)."""
DEFAULT_FLUSH_INTERVAL = 1.0
"""Seconds the background thread waits before exporting a batch that is not full."""


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What an :meth:`Exporter.export` call achieved: a value, never an exception."""

    ok: bool
    """True when every run of the batch was written."""
    count: int = 0
    """How many runs were written."""
    error: str | None = None
    """Why the batch failed, in one line, when it did."""

    @classmethod
    def success(cls, count: int) -> ExportResult:
        """A batch of ``count`` runs was written."""
        return cls(ok=True, count=count)

    @classmethod
    def failure(cls, error: str) -> ExportResult:
        """The batch was not written, for the reason given."""
        return cls(ok=False, count=0, error=error)


@dataclass(frozen=True, slots=True)
class CaptureStats:
    """Counters of the capture pipeline since it was configured."""

    exported: int = 0
    """Runs the exporter accepted."""
    dropped: int = 0
    """Runs never handed to the exporter: the queue was full, or capture was shut down."""
    failed: int = 0
    """Runs handed to the exporter that it could not write, or that could not be converted."""
    pending: int = 0
    """Runs waiting in the queue right now."""


class Exporter(ABC):
    """Receives batches of finished runs, on the background thread.

    Implementations must be safe to call from one thread at a time (the :class:`BatchExporter`
    never calls them concurrently) and should report failure through :class:`ExportResult`
    rather than raise; an exception is caught, counted and logged all the same.
    """

    @abstractmethod
    def export(self, traces: Sequence[Trace]) -> ExportResult:
        """Write a batch of finished runs."""

    def flush(self, timeout: float | None = None) -> bool:
        """Write anything buffered; return True when done within ``timeout`` seconds."""
        return True

    def shutdown(self, timeout: float | None = None) -> None:  # noqa: B027 - optional hook
        """Release resources. Called once, from the thread that shuts capture down."""


class InMemoryExporter(Exporter):
    """Keeps every exported run in a list: for tests (see :mod:`agentlens.testing`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._traces: list[Trace] = []
        self._closed = False

    def export(self, traces: Sequence[Trace]) -> ExportResult:
        """Append the runs to :attr:`traces`."""
        with self._lock:
            if self._closed:
                return ExportResult.failure("the in-memory exporter was shut down")
            self._traces.extend(traces)
        return ExportResult.success(len(traces))

    @property
    def traces(self) -> list[Trace]:
        """A copy of the runs exported so far, in export order."""
        with self._lock:
            return list(self._traces)

    def clear(self) -> None:
        """Forget the runs exported so far."""
        with self._lock:
            self._traces.clear()

    def shutdown(self, timeout: float | None = None) -> None:
        """Refuse further exports; the runs already kept stay readable."""
        with self._lock:
            self._closed = True


class StoreExporter(Exporter):
    """Writes runs to a :class:`~agentlens.store.TraceStore` with ``put_traces``.

    Given a URL, the store is opened lazily, on the background thread, at the first export
    (opening SQLite may be slow, or fail). A store that cannot be opened is retried at most
    every ``retry_interval`` seconds; batches in between fail at once.

    Args:
        store: a store URL (``sqlite:///agentlens.db``) or an open store.
        retry_interval: seconds between attempts to open a store that failed to open.
    """

    def __init__(self, store: str | TraceStore, *, retry_interval: float = 5.0) -> None:
        self._url: str | None = store if isinstance(store, str) else None
        self._store: TraceStore | None = None if isinstance(store, str) else store
        self._retry_interval = retry_interval
        self._last_failure: tuple[float, str] | None = None

    @property
    def url(self) -> str:
        """The URL of the store (as given, or the open store's)."""
        if self._url is not None:
            return self._url
        return str(getattr(self._store, "url", "<store>"))

    def _open(self) -> TraceStore | str:
        if self._store is not None:
            return self._store
        now = time.monotonic()
        if self._last_failure is not None and now - self._last_failure[0] < self._retry_interval:
            return self._last_failure[1]
        try:
            from agentlens.store import shared_store

            assert self._url is not None
            # The process-wide store for this URL: the reading API (agentlens.get_trace) sees
            # what capture wrote, even for sqlite:///:memory:.
            self._store = shared_store(self._url)
        except Exception as exc:
            reason = f"cannot open store {self._url!r}: {_describe(exc)}"
            self._last_failure = (now, reason)
            return reason
        self._last_failure = None
        return self._store

    def export(self, traces: Sequence[Trace]) -> ExportResult:
        """Store the runs in one ``put_traces`` call (atomic in the store)."""
        store = self._open()
        if isinstance(store, str):
            return ExportResult.failure(store)
        try:
            written = store.put_traces(traces)
        except Exception as exc:
            return ExportResult.failure(f"writing to {self.url!r} failed: {_describe(exc)}")
        return ExportResult.success(written if isinstance(written, int) else len(traces))

    def shutdown(self, timeout: float | None = None) -> None:
        """Let go of the store. A store given as an object belongs to its caller; one opened from
        a URL is the process-wide shared store, which the reading API may still be using. Neither
        is closed here."""
        self._store = None


class _FlushRequest:
    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()


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


class BatchExporter:
    """A bounded queue of finished runs, drained by a daemon thread into an :class:`Exporter`.

    :meth:`submit` never blocks and never raises: when ``max_queue`` runs are already waiting
    the new one is dropped, counted and logged (at most once a minute). The thread starts at
    the first submit, exports whenever ``batch_size`` runs are waiting or ``flush_interval``
    seconds have passed, and restarts in a forked child.

    Args:
        exporter: where the runs go.
        convert: turns a queued item into a :class:`Trace` (on the background thread).
        max_queue: runs that may wait before new ones are dropped.
        batch_size: runs per ``export`` call.
        flush_interval: seconds before a partial batch is exported.
    """

    def __init__(
        self,
        exporter: Exporter,
        *,
        convert: Callable[[Any], Trace] | None = None,
        max_queue: int = DEFAULT_MAX_QUEUE,
        batch_size: int = DEFAULT_BATCH_SIZE,
        flush_interval: float = DEFAULT_FLUSH_INTERVAL,
    ) -> None:
        self.exporter = exporter
        self._convert = convert
        self._max_queue = max_queue
        self._batch_size = batch_size
        self._flush_interval = flush_interval
        self._queue: collections.deque[Any] = collections.deque()
        self._wake = threading.Event()
        self._lock = threading.Lock()  # guards thread start/stop, not the queue
        self._count_lock = threading.Lock()  # drops are counted from many agent threads
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._exported = 0
        self._dropped = 0
        self._failed = 0
        self._log = _RateLimitedLog()
        _instances.add(self)

    # -- agent side ---------------------------------------------------------------------------

    def submit(self, item: Any) -> bool:
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
            self._log.warning("submit", "agentlens: could not queue a run: %s", _describe(exc))
            return False

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until every run submitted before this call is exported (or failed).

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
            self._log.warning("flush", "agentlens: flush failed: %s", _describe(exc))
            return False

    def shutdown(self, timeout: float | None = 30.0) -> None:
        """Export what is queued, stop the thread and shut the exporter down. Idempotent."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
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
            else:
                self._drain()
                self._shutdown_exporter(timeout)
        except Exception as exc:
            self._log.warning("shutdown", "agentlens: shutdown failed: %s", _describe(exc))

    def _shutdown_exporter(self, timeout: float | None) -> None:
        try:
            self.exporter.shutdown(timeout)
        except Exception as exc:
            self._log.warning("shutdown", "agentlens: exporter shutdown failed: %s", _describe(exc))

    def _count_drop(self) -> None:
        with self._count_lock:
            self._dropped += 1

    def stats(self) -> CaptureStats:
        """The counters so far."""
        pending = sum(1 for item in list(self._queue) if not isinstance(item, _FlushRequest))
        return CaptureStats(
            exported=self._exported, dropped=self._dropped, failed=self._failed, pending=pending
        )

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
                    self._shutdown_exporter(None)
                    return
            except Exception as exc:  # pragma: no cover - defensive: keep the thread alive
                self._log.warning("loop", "agentlens: export thread error: %s", _describe(exc))

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

    def _to_trace(self, item: Any) -> Trace | None:
        if self._convert is None:
            return item if isinstance(item, Trace) else None
        try:
            return self._convert(item)
        except Exception as exc:
            self._failed += 1
            self._log.warning("convert", "agentlens: could not convert a run: %s", _describe(exc))
            return None

    def _export(self, batch: list[Trace]) -> None:
        if not batch:
            return
        try:
            result = self.exporter.export(batch)
            if not isinstance(result, ExportResult):
                result = ExportResult.success(len(batch))
        except Exception as exc:
            result = ExportResult.failure(f"exporter raised {_describe(exc)}")
        if result.ok:
            self._exported += len(batch)
        else:  # a partial failure (some runs written) counts the rest as failed
            written = max(0, min(result.count, len(batch)))
            self._exported += written
            self._failed += len(batch) - written
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
            self._log.warning("flush", "agentlens: exporter flush failed: %s", _describe(exc))
            return False


_instances: weakref.WeakSet[BatchExporter] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for batcher in list(_instances):
        batcher._after_fork()


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _describe(exc: BaseException) -> str:
    """``Type: message`` for an exception, even one whose ``__str__`` raises."""
    try:
        text = str(exc)
    except Exception:
        text = "<unprintable>"
    name = type(exc).__name__
    return f"{name}: {text}" if text else name
