"""The processors: the bounded background one (batching, flush, drops when full, failures,
shutdown) and the synchronous one."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from agentlens.capture import (
    BatchProcessor,
    CaptureStats,
    Exporter,
    ExportResult,
    InMemoryExporter,
    SimpleProcessor,
)
from agentlens.model import Trace


class GatedExporter(Exporter):
    """Blocks in export() until released; says when it has entered."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.batches: list[list[str]] = []

    def export(self, traces: Sequence[Trace]) -> ExportResult:
        self.entered.set()
        self.release.wait(10)
        self.batches.append([t.id for t in traces])
        return ExportResult.success(len(traces))


class FailingExporter(Exporter):
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.calls = 0

    def export(self, traces: Sequence[Trace]) -> ExportResult:
        self.calls += 1
        if self.mode == "raise":
            raise OSError("disk full")
        return ExportResult.failure("server said 503")


def _trace(i: int) -> Trace:
    return Trace(id=f"run-{i}", agent="a")


def test_batches_are_exported_in_order_and_flush_waits_for_them() -> None:
    exporter = InMemoryExporter()
    batcher = BatchProcessor(exporter, batch_size=3, flush_interval=60)
    try:
        for i in range(7):
            assert batcher.submit(_trace(i))
        assert batcher.flush(10)
        assert [t.id for t in exporter.traces] == [f"run-{i}" for i in range(7)]
        stats = batcher.stats()
        assert (stats.exported, stats.dropped, stats.failed, stats.pending) == (7, 0, 0, 0)
    finally:
        batcher.shutdown(10)


def test_batch_size_bounds_each_export_call() -> None:
    exporter = GatedExporter()
    exporter.release.set()
    batcher = BatchProcessor(exporter, batch_size=2, flush_interval=60)
    try:
        for i in range(5):
            batcher.submit(_trace(i))
        assert batcher.flush(10)
        assert all(1 <= len(b) <= 2 for b in exporter.batches)
        assert [i for b in exporter.batches for i in b] == [f"run-{i}" for i in range(5)]
    finally:
        batcher.shutdown(10)


def test_a_full_queue_drops_counts_and_logs_without_blocking(
    caplog: pytest.LogCaptureFixture,
) -> None:
    exporter = GatedExporter()
    batcher = BatchProcessor(exporter, max_queue=3, batch_size=1, flush_interval=60)
    try:
        batcher.submit(_trace(0))
        assert exporter.entered.wait(10)  # the worker holds run-0 and is stuck in export()
        accepted = [batcher.submit(_trace(i)) for i in range(1, 11)]
        assert accepted == [True] * 3 + [False] * 7
        stats = batcher.stats()
        assert (stats.dropped, stats.pending) == (7, 3)
        # Logged once (rate-limited), through the "agentlens" logger.
        full = [r for r in caplog.records if "queue full" in r.getMessage()]
        assert len(full) == 1 and full[0].name == "agentlens"
        exporter.release.set()
        assert batcher.flush(10)
        assert batcher.stats().exported == 4
    finally:
        exporter.release.set()
        batcher.shutdown(10)


@pytest.mark.parametrize("mode", ["raise", "result"])
def test_exporter_failures_are_counted_and_logged(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    exporter = FailingExporter(mode)
    batcher = BatchProcessor(exporter, batch_size=2, flush_interval=60)
    try:
        for i in range(4):
            assert batcher.submit(_trace(i))
        # kept and retried (issue 12 item 6): not done, nothing lost yet
        assert batcher.flush(1) is False
        stats = batcher.stats()
        assert (stats.exported, stats.failed, stats.pending) == (0, 0, 4)
        assert stats.retried >= 2
        messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        expected = "OSError: disk full" if mode == "raise" else "server said 503"
        assert messages and expected in messages[0] and "retrying" in messages[0]
    finally:
        batcher.shutdown(10)
    # no spill directory (a custom exporter has none): finally dropped at shutdown, counted
    assert (batcher.stats().failed, batcher.stats().pending) == (4, 0)
    assert "4 run(s) lost" in caplog.text


def test_flush_times_out_when_the_exporter_is_stuck() -> None:
    exporter = GatedExporter()
    batcher = BatchProcessor(exporter, batch_size=1, flush_interval=60)
    try:
        batcher.submit(_trace(0))
        assert exporter.entered.wait(10)
        assert batcher.flush(0.05) is False
        batcher.submit(_trace(1))
        assert batcher.shutdown(0.05) is False  # still stuck: says so, as a value
        exporter.release.set()
        assert batcher.shutdown(10) is True  # waits for the thread this time
    finally:
        exporter.release.set()
        batcher.shutdown(10)
    assert exporter.batches == [["run-0"], ["run-1"]]


def test_shutdown_exports_what_is_queued_then_drops() -> None:
    exporter = InMemoryExporter()
    batcher = BatchProcessor(exporter, batch_size=100, flush_interval=60)
    for i in range(3):
        batcher.submit(_trace(i))
    assert batcher.shutdown(10) is True
    assert len(exporter.traces) == 3
    assert batcher.submit(_trace(9)) is False
    assert batcher.stats().dropped == 1
    batcher.shutdown(10)  # idempotent
    assert exporter.export([_trace(10)]).ok is False  # the in-memory exporter was shut down


def test_flush_with_nothing_submitted_does_not_start_a_thread() -> None:
    batcher = BatchProcessor(InMemoryExporter())
    assert batcher.flush(1)
    assert not any(
        t.name == "agentlens-export" and t is batcher._thread for t in threading.enumerate()
    )
    batcher.shutdown(1)


class Convertible:
    """Stands for a finished Run: the processors only call ``to_trace()`` on what they get."""

    def __init__(self, text: str) -> None:
        self.text = text

    def to_trace(self) -> Trace:
        if self.text == "bad":
            raise ValueError("cannot convert")
        return _trace(int(self.text))


def test_a_conversion_failure_is_counted_as_failed(caplog: pytest.LogCaptureFixture) -> None:
    exporter = InMemoryExporter()
    batcher = BatchProcessor(exporter, flush_interval=60)
    try:
        for text in ("1", "bad", "2"):
            batcher.on_end(Convertible(text))  # type: ignore[arg-type]
        assert batcher.flush(10)
        assert [t.id for t in exporter.traces] == ["run-1", "run-2"]
        assert (batcher.stats().exported, batcher.stats().failed) == (2, 1)
        assert "cannot convert" in caplog.text
    finally:
        assert batcher.shutdown(10) is True


def test_the_simple_processor_exports_in_the_callers_thread_and_counts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    exporter = InMemoryExporter()
    processor = SimpleProcessor(exporter)
    processor.on_end(Convertible("1"))  # type: ignore[arg-type]
    assert [t.id for t in exporter.traces] == ["run-1"]  # no flush needed: already exported
    processor.on_end(Convertible("bad"))  # type: ignore[arg-type]
    assert "cannot convert" in caplog.text
    failing = SimpleProcessor(FailingExporter("raise"))
    failing.on_end(_trace(2))
    assert (failing.stats().exported, failing.stats().failed) == (0, 1)
    assert "disk full" in caplog.text
    assert processor.shutdown(1) is True
    processor.on_end(_trace(3))  # after shutdown: dropped, not exported, not raised
    assert processor.stats() == CaptureStats(exported=1, dropped=1, failed=1)
    assert [t.id for t in exporter.traces] == ["run-1"]
    assert not any(t.name == "agentlens-export" for t in threading.enumerate() if t.is_alive())


def test_the_simple_processor_serialises_exports_from_many_threads() -> None:
    class Counting(Exporter):
        def __init__(self) -> None:
            self.inside = 0
            self.most = 0
            self.ids: list[str] = []

        def export(self, traces: Sequence[Trace]) -> ExportResult:
            self.inside += 1
            self.most = max(self.most, self.inside)
            self.ids.extend(t.id for t in traces)
            self.inside -= 1
            return ExportResult.success(len(traces))

    exporter = Counting()
    processor = SimpleProcessor(exporter)

    def worker(n: int) -> None:
        for i in range(200):
            processor.on_end(_trace(n * 1000 + i))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(exporter.ids)) == 800 and exporter.most == 1
    assert processor.stats().exported == 800


def test_many_threads_submitting_lose_nothing() -> None:
    exporter = InMemoryExporter()
    batcher = BatchProcessor(exporter, max_queue=100_000, batch_size=50, flush_interval=60)
    try:

        def worker(n: int) -> None:
            for i in range(500):
                batcher.submit(_trace(n * 1000 + i))

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert batcher.flush(30)
        assert len({t.id for t in exporter.traces}) == 2000
        assert batcher.stats().exported == 2000
    finally:
        batcher.shutdown(10)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_exports_its_own_runs_only(tmp_path: Path) -> None:
    out = tmp_path / "exported.txt"
    script = f"""
import os, agentlens
from agentlens.capture import Exporter, ExportResult

class FileExporter(Exporter):
    def export(self, traces):
        with open({str(out)!r}, "a") as f:
            for t in traces:
                f.write(f"{{t.id}} {{os.getpid()}}\\n")
        return ExportResult.success(len(traces))

agentlens.configure(exporter=FileExporter(), flush_interval=3600)
with agentlens.run(run_id="parent-before-fork"):
    pass
pid = os.fork()
if pid == 0:
    with agentlens.run(run_id="child"):
        pass
    ok = agentlens.flush(30)
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0
with agentlens.run(run_id="parent-after-fork"):
    pass
"""
    subprocess.run([sys.executable, "-W", "ignore", "-c", script], check=True, timeout=60)
    lines = [line.split() for line in out.read_text().splitlines()]
    assert sorted(run_id for run_id, _ in lines) == [
        "child",
        "parent-after-fork",
        "parent-before-fork",
    ]
    pids = {run_id: pid for run_id, pid in lines}
    assert pids["child"] != pids["parent-before-fork"] == pids["parent-after-fork"]
