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


# -- the fast path: a call made once keeps only its step; a call that comes back is compared --


@agentlens.tool
def search(query: Any, limit: Any = 10) -> str:
    return "no flights"


def test_equal_arguments_that_are_not_the_same_objects_are_the_same_call(
    guarded: Guarded,
) -> None:
    guarded.configure(loop_guard="raise")
    with agentlens.run(agent="ops"):
        search("".join(["SFO", "-JFK"]))
        search(query="SFO-JFK", limit=10)  # by keyword, the default given
        search("SFO-JFK", 10.0)  # 10.0 is 10 once normalised
        with pytest.raises(LoopDetected):
            search("-".join(("SFO", "JFK")))
    assert [e.count for e in guarded.events] == [3]


def test_raw_forms_that_normalise_alike_are_the_same_call(guarded: Guarded) -> None:
    """The first call's arguments are already canonical (their own key); the later ones are
    not, and are normalised to it: whitespace, key order, a JSON object given as text."""
    guarded.configure(loop_guard="warn")
    with agentlens.run(agent="ops"):
        search({"from": "SFO", "to": "JFK"})
        search({"to": "JFK", "from": "SFO"})
        search('{"from": "SFO",  "to": "JFK"}')
    assert [e.count for e in guarded.events] == [3]
    guarded.events.clear()
    with agentlens.run(agent="ops"):
        search("SFO JFK")
        search("SFO  JFK ")
        search("SFO\tJFK")
    assert [e.count for e in guarded.events] == [3]


def test_near_misses_of_the_fast_path_are_different_calls(guarded: Guarded) -> None:
    guarded.configure(loop_guard="raise")
    with agentlens.run(agent="ops"):
        for query in ("SFO-JFK", "sfo-jfk", "SFO-JFK ", "SFO - JFK", "SFO-JFK."):
            search(query)  # case and inner spacing are meaning; a trailing space is not
        search("SFO-JFK", 11)  # another argument differs
        search(["SFO", "JFK"])
        search(["JFK", "SFO"])  # a list's order is meaning
        search({"from": "SFO", "to": "JFK"})
        search({"from": "SFO", "to": "JFK", "via": None})
    assert guarded.events == []  # "SFO-JFK" (with the trailing-space one) came twice only
    assert "loop_guard" not in guarded.last().metadata


def test_arguments_mutated_between_calls_are_compared_as_they_were_when_called(
    guarded: Guarded,
) -> None:
    guarded.configure(loop_guard="raise")
    legs = ["SFO", "JFK"]
    with agentlens.run(agent="ops"):
        search(legs)
        legs.append("BOS")  # the same list object, other arguments now
        search(legs)
        search(legs)
        legs.pop()  # back to the first call's arguments: its third time
        search(legs)
        assert guarded.events == []  # SFO-JFK twice and SFO-JFK-BOS twice
        search(legs)
        assert [e.count for e in guarded.events] == [3]
        with pytest.raises(LoopDetected):
            search(["SFO", "JFK"])
        legs.append("ORD")
        assert search(legs) == "no flights"  # another call: runs
    finding = guarded.last().metadata["loop_guard"][0]
    assert finding["args"] == {"query": ["SFO", "JFK"], "limit": 10}
    assert finding["step_ids"] == ["s1", "s4", "s5"]


class Opaque:
    """An argument that is neither JSON nor hashable: recorded by its repr."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Opaque({self.name!r})"


def test_unhashable_and_nested_arguments(guarded: Guarded) -> None:
    guarded.configure(loop_guard="raise")
    nested = {"legs": [{"from": "SFO"}, {"to": "JFK"}], "dates": {"out": "2024-05-20"}}
    with agentlens.run(agent="ops"):
        for _ in range(3):
            search(nested)
        with pytest.raises(LoopDetected):
            search({"dates": {"out": "2024-05-20"}, "legs": [{"from": "SFO"}, {"to": "JFK"}]})
        search({"legs": [{"from": "SFO"}, {"to": "BOS"}], "dates": {"out": "2024-05-20"}})
        search({1: "a"})  # a key that is not text
        search({1: "a"})
        for _ in range(2):
            search(Opaque("x"))
        search(Opaque("y"))
        search(Opaque("x"))
        with pytest.raises(LoopDetected):
            search(Opaque("x"))
    assert [e.count for e in guarded.events] == [3, 3]


def test_concurrent_identical_calls_warn_once_with_exact_counts(guarded: Guarded) -> None:
    """The first call with some arguments takes no lock: threads of one run calling the same
    tool at once still see one loop, one warning, one finding."""
    import contextvars
    import threading
    from concurrent.futures import ThreadPoolExecutor

    guarded.configure(loop_guard="warn")
    start = threading.Barrier(8)

    def worker(n: int) -> None:
        start.wait()
        for i in range(200):
            search(f"Q{i % 50}")  # 50 calls, each made 32 times over the threads

    with agentlens.run(agent="ops"), ThreadPoolExecutor(8) as pool:
        for f in [pool.submit(contextvars.copy_context().run, worker, n) for n in range(8)]:
            f.result()
    trace = guarded.last()
    assert len(trace.steps) == 8 * 200
    assert sorted(e.args["query"] for e in guarded.events) == sorted(f"Q{i}" for i in range(50))
    findings = trace.metadata["loop_guard"]
    assert len(findings) == 50 and {f["count"] for f in findings} == {3}
    by_query: dict[str, list[str]] = {}
    for step in trace.steps:
        by_query.setdefault(step.input["query"], []).append(step.id)
    for finding in findings:
        # the three steps named are three of that call's own
        assert set(finding["step_ids"]) <= set(by_query[finding["args"]["query"]])
        assert len(set(finding["step_ids"])) == 3
