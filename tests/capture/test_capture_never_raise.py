"""Capture never raises into the agent: every internal failure is caught, logged and counted."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import pytest

import agentlens
from agentlens.capture import Exporter, ExportResult, stats
from agentlens.model import Trace
from agentlens.testing import CapturedTraces


class Hostile:
    """Every way of looking at it raises."""

    def __repr__(self) -> str:
        raise RuntimeError("repr exploded")

    def __str__(self) -> str:
        raise RuntimeError("str exploded")

    def __getattr__(self, name: str) -> NoReturn:
        raise RuntimeError(f"getattr {name} exploded")

    def __iter__(self) -> NoReturn:
        raise RuntimeError("iter exploded")


class HostileError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str exploded")


class RaisingExporter(Exporter):
    def export(self, traces: Sequence[Trace]) -> ExportResult:
        raise MemoryError("exporter blew up")

    def flush(self, timeout: float | None = None) -> bool:
        raise RuntimeError("flush blew up")

    def shutdown(self, timeout: float | None = None) -> None:
        raise RuntimeError("shutdown blew up")


def test_hostile_values_are_recorded_not_raised(captured_traces: CapturedTraces) -> None:
    hostile = Hostile()

    @agentlens.tool
    def use(value: Any) -> Any:
        return value

    @agentlens.llm
    def chat(value: Any) -> Any:
        return value  # _llm_attributes pokes at .usage / .model: it must shrug

    @agentlens.retrieval
    def gen(value: Any) -> Iterator[Any]:
        yield value

    with agentlens.run(input=hostile, metadata={"h": hostile}, links={"h": hostile}) as run:
        assert use(hostile) is hostile
        assert chat(hostile) is hostile
        assert list(gen(hostile)) == [hostile]
        run.step("tool", "manual", input=hostile, output=hostile, attributes={"h": hostile})
        run.output = hostile
    trace = captured_traces.one()
    unrepresentable = {"type": f"{__name__}.Hostile", "repr": "<unrepresentable: RuntimeError>"}
    assert trace.input == unrepresentable
    assert trace.output == unrepresentable
    assert trace.steps[0].input == {"value": unrepresentable}
    assert trace.steps[0].output == unrepresentable
    assert trace.steps[1].attributes == {}
    assert trace.steps[2].output == [unrepresentable]
    assert trace.steps[3].attributes == {"h": unrepresentable}
    assert trace.metadata == {"h": unrepresentable}
    assert isinstance(trace.links["h"], str)


def test_an_exception_whose_str_raises_is_recorded(captured_traces: CapturedTraces) -> None:
    @agentlens.tool
    def fail() -> None:
        raise HostileError

    with pytest.raises(HostileError), agentlens.run():
        fail()
    trace = captured_traces.one()
    expected = {"type": f"{__name__}.HostileError", "message": "<unprintable HostileError>"}
    assert trace.steps[0].error == expected
    assert trace.metadata["error"] == expected


def test_an_exporter_that_raises_everywhere_never_reaches_the_agent(
    fresh_capture: None, caplog: pytest.LogCaptureFixture
) -> None:
    agentlens.configure(exporter=RaisingExporter(), flush_interval=60)

    @agentlens.tool
    def f(x: int) -> int:
        return x + 1

    for i in range(3):
        with agentlens.run(agent="a") as run:
            run.output = f(i)
    assert agentlens.flush(1) is False  # kept for a retry; the exporter's own flush raises
    assert "exporter blew up" in caplog.text
    agentlens.shutdown(10)  # exporter.shutdown raises: logged, not raised
    assert "shutdown blew up" in caplog.text
    assert stats().failed == 3  # nowhere to spill them: lost at shutdown, counted


def test_a_store_that_cannot_be_opened_counts_failures(
    fresh_capture: None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    not_a_db = tmp_path / "a-directory"
    not_a_db.mkdir()
    agentlens.configure(db=f"sqlite:///{not_a_db}/missing/sub/x.db", flush_interval=60)
    with agentlens.run(agent="a") as run:
        run.output = "still answered"
    assert run.output == "still answered"
    # retried, then (at the flush) neither written nor spilled (the folder does not exist)
    assert agentlens.flush(10) is False
    assert (stats().exported, stats().failed) == (0, 1)
    assert "cannot open store" in caplog.text


def test_a_broken_clock_does_not_break_the_agent(fresh_capture: None) -> None:
    broken = threading.Event()

    def clock() -> int:
        if broken.is_set():
            raise OSError("clock")
        return 1_000_000

    exporter = agentlens.capture.InMemoryExporter()
    agentlens.configure(processor=agentlens.capture.SimpleProcessor(exporter), clock=clock)

    @agentlens.tool
    def f(x: int) -> int:
        return x

    @agentlens.tool
    async def g(x: int) -> int:
        return x

    with agentlens.run() as run:
        broken.set()
        assert f(1) == 1
        assert asyncio.run(g(2)) == 2
        with run.step("agent", "x"):
            assert f(3) == 3
        broken.clear()
    assert [t.status for t in exporter.traces] == ["ok"]


def test_run_in_a_broken_configuration_still_runs(fresh_capture: None) -> None:
    def broken() -> str:
        raise RuntimeError("no ids today")

    agentlens.configure(exporter=agentlens.capture.InMemoryExporter(), id_generator=broken)
    with agentlens.run() as run:
        run.output = 1
    assert run.recording is False
    assert run.output == 1


def test_a_processor_that_raises_everywhere_never_reaches_the_agent(
    fresh_capture: None, caplog: pytest.LogCaptureFixture
) -> None:
    class RaisingProcessor(agentlens.capture.Processor):
        def on_end(self, run: agentlens.capture.Run) -> None:
            raise RuntimeError("on_end blew up")

        def flush(self, timeout: float | None = 30.0) -> bool:
            raise RuntimeError("flush blew up")

        def shutdown(self, timeout: float | None = 30.0) -> bool:
            raise RuntimeError("shutdown blew up")

        def stats(self) -> agentlens.capture.CaptureStats:
            raise RuntimeError("stats blew up")

    agentlens.configure(processor=RaisingProcessor())
    with agentlens.run() as run:
        run.output = "answered"
    assert run.status == "ok" and run.output == "answered"
    assert "on_end blew up" in caplog.text
    assert agentlens.flush(1) is False and "flush blew up" in caplog.text
    assert stats() == agentlens.capture.CaptureStats()
    assert agentlens.shutdown(1) is False and "shutdown blew up" in caplog.text
    agentlens.capture.reset()  # shuts it down again: logged, not raised
