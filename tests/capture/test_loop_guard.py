"""The online loop guard: ``agentlens.configure(loop_guard=...)``. Each rule fires, and a near
miss does not."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agentlens
from agentlens.capture import InMemoryExporter, LoopEvent, SimpleProcessor
from agentlens.errors import ConfigError, LoopDetected
from agentlens.model import Trace


class Guarded:
    """Capture into memory with the loop guard on; the events the callback received."""

    def __init__(self, exporter: InMemoryExporter, processor: SimpleProcessor) -> None:
        self.exporter = exporter
        self.processor = processor
        self.events: list[LoopEvent] = []

    def configure(self, **options: Any) -> None:
        agentlens.configure(
            processor=self.processor, enabled=True, on_loop=self.events.append, **options
        )

    def last(self) -> Trace:
        self.processor.flush(10.0)
        return self.exporter.traces[-1]


@pytest.fixture
def guarded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Guarded]:
    monkeypatch.chdir(tmp_path)  # no agentlens.toml but the test's own
    monkeypatch.delenv("AGENTLENS_LOOP_GUARD", raising=False)
    exporter = InMemoryExporter()
    yield Guarded(exporter, SimpleProcessor(exporter))
    agentlens.capture.reset(10.0)


CALLS: list[str] = []


@agentlens.tool
def job_status(job: str) -> dict[str, Any]:
    CALLS.append(job)
    return {"job": job, "state": "running"}


@agentlens.tool
def clock_status(job: str) -> str:
    CALLS.append(job)
    return f"job {job} running, checked at 2026-12-01T10:00:0{len(CALLS) % 10}Z"


@agentlens.tool
def page(n: int) -> str:
    CALLS.append(str(n))
    return f"page {n}"


@agentlens.tool(name="think")
def think(thought: str) -> str:
    return ""


@agentlens.tool
def flaky(url: str) -> str:
    raise ConnectionError("connection refused")


def test_warn_calls_back_and_records_the_finding_once(
    guarded: Guarded, caplog: pytest.LogCaptureFixture
) -> None:
    guarded.configure(loop_guard="warn")
    CALLS.clear()
    with caplog.at_level(logging.WARNING, logger="agentlens"), agentlens.run(agent="ops") as run:
        for _ in range(4):
            job_status("J1")
    assert CALLS == ["J1"] * 4  # warn never stops the tool
    assert len(guarded.events) == 1
    event = guarded.events[0]
    assert (event.tool, event.args, event.count, event.mode) == (
        "job_status",
        {"job": "J1"},
        3,
        "warn",
    )
    assert event.step_ids == ("s1", "s2", "s3") and event.run_id == run.id
    warnings = [r for r in caplog.records if "loop guard" in r.getMessage()]
    assert len(warnings) == 1 and "job_status" in warnings[0].getMessage()
    finding = guarded.last().metadata["loop_guard"][0]
    assert finding["action"] == "warned" and finding["count"] == 3
    assert finding["failure_mode"] == "repeated_tool_call"
    assert finding["step_ids"] == ["s1", "s2", "s3"]


def test_changing_results_arguments_or_two_repeats_are_not_a_loop(guarded: Guarded) -> None:
    guarded.configure(loop_guard="raise")
    with agentlens.run(agent="ops"):
        for n in range(5):
            page(n)  # different arguments
        job_status("J1")
        job_status("J1")  # two identical: not yet
        page(1)
    assert guarded.events == []
    assert "loop_guard" not in guarded.last().metadata


def test_results_are_compared_normalised(guarded: Guarded) -> None:
    guarded.configure(loop_guard="warn")
    CALLS.clear()
    with agentlens.run(agent="ops"):
        for _ in range(3):  # only the timestamp in the result changes
            clock_status("J2")
    assert [e.count for e in guarded.events] == [3]


def test_raise_stops_the_next_identical_call_before_the_tool_runs(guarded: Guarded) -> None:
    guarded.configure(loop_guard="raise")
    CALLS.clear()
    with agentlens.run(agent="ops"):
        for _ in range(3):
            job_status("J1")
        with pytest.raises(LoopDetected) as raised:
            job_status("J1")
        with pytest.raises(LoopDetected):
            job_status(job="J1")  # the same call, however the arguments are passed
        assert job_status("J2")["job"] == "J2"  # another call runs
    assert CALLS == ["J1", "J1", "J1", "J2"]
    assert raised.value.tool == "job_status" and raised.value.count == 3
    assert isinstance(raised.value, agentlens.AgentlensError)
    trace = guarded.last()
    blocked = trace.steps[3]
    assert blocked.error == {"type": "agentlens.errors.LoopDetected", "message": str(raised.value)}
    finding = trace.metadata["loop_guard"][0]
    assert finding["action"] == "raised"
    assert finding["blocked_step_ids"] == ["s4", "s5"]
    assert [e.mode for e in guarded.events] == ["raise"]


def test_raise_stops_async_and_generator_tools_too(guarded: Guarded) -> None:
    guarded.configure(loop_guard="raise")

    @agentlens.tool
    async def fetch(url: str) -> str:
        return "same"

    @agentlens.tool
    def rows(table: str) -> Iterator[int]:
        yield 1

    async def agent() -> None:
        for _ in range(3):
            await fetch("u")
        with pytest.raises(LoopDetected):
            await fetch("u")

    with agentlens.run(agent="ops"):
        asyncio.run(agent())
        for _ in range(3):
            assert list(rows("t")) == [1]
        with pytest.raises(LoopDetected):
            list(rows("t"))
    assert len(guarded.events) == 2


def test_repeated_failures_are_an_error_loop(guarded: Guarded) -> None:
    guarded.configure(loop_guard="warn")
    with agentlens.run(agent="ops"):
        for _ in range(3):
            with pytest.raises(ConnectionError):
                flaky("u")
    assert guarded.last().metadata["loop_guard"][0]["failure_mode"] == "error_loop"


def test_off_by_default_and_bookkeeping_is_never_guarded(guarded: Guarded) -> None:
    guarded.configure()
    with agentlens.run(agent="ops"):
        for _ in range(5):
            job_status("J1")
    assert guarded.events == [] and "loop_guard" not in guarded.last().metadata
    guarded.configure(loop_guard="raise")
    with agentlens.run(agent="ops"):
        for _ in range(5):
            think("plan")  # a bookkeeping event (repeated_tool_calls' bookkeeping list)
    assert guarded.events == []


def test_the_guard_is_per_role_in_config(guarded: Guarded, tmp_path: Path) -> None:
    (tmp_path / "agentlens.toml").write_text(
        'loop_guard = "warn"\n'
        '[agents.coder]\nloop_guard = "raise"\n'
        '[agents.writer]\nloop_guard = "off"\n'
        "[agents.writer.scorers.repeated_tool_calls]\nmax_repeats = 2\n"
        "[agents.ops.scorers.repeated_tool_calls]\nmax_repeats = 4\n",
        encoding="utf-8",
    )
    guarded.configure()
    with agentlens.run(agent="coder"):
        for _ in range(3):
            job_status("J1")
        with pytest.raises(LoopDetected):
            job_status("J1")
    with agentlens.run(agent="writer"):
        for _ in range(4):
            job_status("J1")
    with agentlens.run(agent="ops"):  # warn, and its own max_repeats
        for _ in range(4):
            job_status("J1")
    assert [(e.agent, e.mode, e.count) for e in guarded.events] == [
        ("coder", "raise", 3),
        ("ops", "warn", 4),
    ]


def test_a_failing_callback_is_logged_not_raised(
    guarded: Guarded, caplog: pytest.LogCaptureFixture
) -> None:
    def boom(event: LoopEvent) -> None:
        raise RuntimeError("callback broke")

    agentlens.configure(processor=guarded.processor, enabled=True, loop_guard="warn", on_loop=boom)
    with caplog.at_level(logging.WARNING, logger="agentlens"), agentlens.run(agent="ops"):
        for _ in range(4):
            job_status("J1")
    assert any("callback broke" in r.getMessage() for r in caplog.records)


def test_bad_modes_are_refused(guarded: Guarded, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="loop_guard must be one of off, warn, raise"):
        guarded.configure(loop_guard="stop")
    with pytest.raises(ConfigError, match="on_loop must be callable"):
        agentlens.configure(processor=guarded.processor, loop_guard="warn", on_loop="print")
    (tmp_path / "agentlens.toml").write_text('[agents.a]\nloop_guard = "yes"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"agents\.a\.loop_guard: expected one of off, warn"):
        guarded.configure(loop_guard="warn")


def test_an_unreadable_file_leaves_the_guard_off_when_it_was_not_asked_for(
    guarded: Guarded, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # a destination given in code needed no file before the guard existed: still none
    (tmp_path / "agentlens.toml").write_text('[agents.a]\nloop_guard = "yes"\n', encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="agentlens"):
        guarded.configure()
    assert any("loop guard off" in r.getMessage() for r in caplog.records)
    with agentlens.run(agent="a"):
        for _ in range(4):
            job_status("J1")
    assert guarded.events == []


def test_configure_without_a_guard_loads_nothing_of_eval(tmp_path: Path) -> None:
    code = (
        "import sys, agentlens; agentlens.configure(enabled=False); "
        "print('agentlens.eval' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.strip() == "False"
