"""Exporters: where finished runs go, as :class:`~agentlens.model.Trace` objects.

An :class:`Exporter` is the last link of capture's pipeline (as in the OpenTelemetry SDK): a
processor (:mod:`agentlens.capture._processor`) hands it batches of finished runs and it writes
them somewhere, a store (:class:`StoreExporter`), memory (:class:`InMemoryExporter`), or
anything else a subclass implements (an HTTP server, a file). Results are values: ``export``
returns an :class:`ExportResult`, ``flush`` and ``shutdown`` return True when they finished in
time; an exception raised by an exporter is caught, counted and logged all the same.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentlens.model import Trace

if TYPE_CHECKING:  # pragma: no cover
    from agentlens.store import TraceStore

__all__ = [
    "ExportResult",
    "Exporter",
    "InMemoryExporter",
    "StoreExporter",
]


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


class Exporter(ABC):
    """Receives batches of finished runs from a processor.

    A processor calls its exporter from one thread at a time (the :class:`BatchProcessor`'s
    background thread, or the agent's thread under a lock for the :class:`SimpleProcessor`),
    so an implementation needs no locking of its own. Report failure through
    :class:`ExportResult` rather than raise; an exception is caught, counted and logged all the
    same. Only :meth:`export` is required.
    """

    @abstractmethod
    def export(self, traces: Sequence[Trace]) -> ExportResult:
        """Write a batch of finished runs."""

    def flush(self, timeout: float | None = None) -> bool:
        """Write anything buffered; return True when done within ``timeout`` seconds."""
        return True

    def shutdown(self, timeout: float | None = None) -> bool:
        """Release resources; return True when done within ``timeout`` seconds. Called once,
        after the last :meth:`export`."""
        return True


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

    def shutdown(self, timeout: float | None = None) -> bool:
        """Refuse further exports; the runs already kept stay readable."""
        with self._lock:
            self._closed = True
        return True


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

    @property
    def spill_dir(self) -> str | None:
        """Where a :class:`~agentlens.capture.BatchProcessor` keeps the runs it cannot write in
        time: ``FILE-spill`` next to a SQLite file (``agentlens.db-spill``); ``None`` (no
        spilling) for an in-memory store or a store given as an object without a file URL."""
        url = self.url
        if not url.startswith("sqlite:///"):
            return None
        path = url[len("sqlite:///") :].partition("?")[0]
        if not path or path == ":memory:" or path.startswith("file::memory:"):
            return None
        return f"{path}-spill"

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
            reason = f"cannot open store {self._url!r}: {describe(exc)}"
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
            return ExportResult.failure(f"writing to {self.url!r} failed: {describe(exc)}")
        return ExportResult.success(written if isinstance(written, int) else len(traces))

    def shutdown(self, timeout: float | None = None) -> bool:
        """Let go of the store. A store given as an object belongs to its caller; one opened from
        a URL is the process-wide shared store, which the reading API may still be using. Neither
        is closed here."""
        self._store = None
        return True


def describe(exc: BaseException) -> str:
    """``Type: message`` for an exception, even one whose ``__str__`` raises."""
    try:
        text = str(exc)
    except Exception:
        text = "<unprintable>"
    name = type(exc).__name__
    return f"{name}: {text}" if text else name
