"""The capture fixtures: ``captured_traces`` and ``agentlens_store``, and their helpers."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, overload

import pytest

if TYPE_CHECKING:  # pragma: no cover
    from agentlens.capture import CaptureStats, InMemoryExporter, Processor
    from agentlens.model import Trace
    from agentlens.store import TraceStore

__all__ = [
    "CLOCK_START",
    "CapturedTraces",
    "agentlens_store",
    "captured_traces",
    "deterministic_clock",
    "deterministic_run_ids",
]

CLOCK_START = datetime(2026, 1, 1, tzinfo=UTC)
"""Where the deterministic clock of :func:`captured_traces` starts."""


def deterministic_clock(
    start: datetime = CLOCK_START, step_ns: int = 1_000_000
) -> Callable[[], int]:
    """A thread-safe clock (nanoseconds since the epoch) that advances ``step_ns`` per reading."""
    base = int(start.timestamp()) * 1_000_000_000
    counter = itertools.count()
    return lambda: base + next(counter) * step_ns


def deterministic_run_ids(prefix: str = "run-") -> Callable[[], str]:
    """A thread-safe run-id factory: ``run-0001``, ``run-0002``..."""
    counter = itertools.count(1)
    return lambda: f"{prefix}{next(counter):04d}"


class CapturedTraces:
    """The runs captured during a test, as :class:`~agentlens.model.Trace` objects.

    Behaves like a list of the finished runs (``len``, indexing, iteration); every read flushes
    capture first, so runs finished so far are included.
    """

    def __init__(self, exporter: InMemoryExporter, processor: Processor) -> None:
        self.exporter = exporter
        self.processor = processor

    @property
    def traces(self) -> list[Trace]:
        """Every run finished so far, in the order they finished."""
        self.processor.flush(10.0)
        return self.exporter.traces

    def one(self) -> Trace:
        """The only run captured; fails the test when there is not exactly one."""
        traces = self.traces
        if len(traces) != 1:
            pytest.fail(f"expected exactly one captured run, got {len(traces)}")
        return traces[0]

    def clear(self) -> None:
        """Forget the runs captured so far."""
        self.processor.flush(10.0)
        self.exporter.clear()

    def stats(self) -> CaptureStats:
        """The capture counters (exported, dropped, failed, pending)."""
        return self.processor.stats()

    def __len__(self) -> int:
        return len(self.traces)

    def __iter__(self) -> Iterator[Trace]:
        return iter(self.traces)

    @overload
    def __getitem__(self, index: int) -> Trace: ...
    @overload
    def __getitem__(self, index: slice) -> list[Trace]: ...
    def __getitem__(self, index: int | slice) -> Trace | list[Trace]:
        return self.traces[index]

    def __repr__(self) -> str:
        return f"<CapturedTraces {len(self.exporter.traces)} run(s)>"


@pytest.fixture
def captured_traces() -> Iterator[CapturedTraces]:
    """Capture into memory for this test, with deterministic ids and clock."""
    from agentlens.capture import InMemoryExporter, SimpleProcessor, configure, reset

    exporter = InMemoryExporter()
    processor = SimpleProcessor(exporter)
    configure(
        processor=processor,
        clock=deterministic_clock(),
        id_generator=deterministic_run_ids(),
        enabled=True,
    )
    try:
        yield CapturedTraces(exporter, processor)
    finally:
        reset(10.0)


@pytest.fixture
def agentlens_store() -> Iterator[TraceStore]:
    """A fresh in-memory store, closed after the test."""
    from agentlens.store import open_store

    store = open_store("sqlite:///:memory:")
    try:
        yield store
    finally:
        store.close()
