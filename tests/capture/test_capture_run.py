"""``agentlens.run``: the run context, hand-recorded steps, statuses and metadata."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

import agentlens
from agentlens.model import StepKind
from agentlens.testing import CapturedTraces


@agentlens.tool
def get_customer(email: str) -> dict[str, str]:
    return {"id": "CUST-00042", "email": email}


def test_run_records_input_output_steps_and_deterministic_ids(
    captured_traces: CapturedTraces,
) -> None:
    with agentlens.run(
        agent="support", input="where is my order?", name="ticket T-1", links={"ticket": "T-1"}
    ) as run:
        customer = get_customer("a@example.com")
        run.output = f"Your customer id is {customer['id']}"
        assert agentlens.current_run() is run

    assert agentlens.current_run() is None
    trace = captured_traces.one()
    assert trace.id == "run-0001" == run.id
    assert (trace.agent, trace.name, trace.status) == ("support", "ticket T-1", "ok")
    assert trace.input == "where is my order?"
    assert trace.output == "Your customer id is CUST-00042"
    assert trace.links == {"ticket": "T-1"}
    assert trace.project == "default"
    [step] = trace.steps
    assert (step.id, step.kind, step.name, step.parent_id) == (
        "s1",
        StepKind.TOOL,
        "get_customer",
        None,
    )
    assert step.input == {"email": "a@example.com"}
    assert step.output == {"id": "CUST-00042", "email": "a@example.com"}
    assert step.error is None
    # The deterministic clock starts at 2026-01-01 and ticks one millisecond per reading.
    assert trace.started_at == datetime(2026, 1, 1, tzinfo=UTC)
    assert trace.started_at < step.started_at < step.ended_at < trace.ended_at  # type: ignore[operator]


def test_every_run_gets_its_own_id_and_step_numbering(captured_traces: CapturedTraces) -> None:
    for _ in range(2):
        with agentlens.run(agent="a"):
            get_customer("x")
            get_customer("y")
    assert [t.id for t in captured_traces] == ["run-0001", "run-0002"]
    assert [[s.id for s in t.steps] for t in captured_traces] == [["s1", "s2"], ["s1", "s2"]]


def test_an_exception_marks_the_run_as_error_and_propagates_unchanged(
    captured_traces: CapturedTraces,
) -> None:
    error = RuntimeError("the model timed out")
    with pytest.raises(RuntimeError) as raised, agentlens.run(agent="support"):
        get_customer("a@example.com")
        raise error
    assert raised.value is error
    trace = captured_traces.one()
    assert trace.status == "error"
    assert trace.metadata["error"] == {"type": "RuntimeError", "message": "the model timed out"}
    assert len(trace.steps) == 1


def test_async_with(captured_traces: CapturedTraces) -> None:
    @agentlens.tool
    async def lookup(key: str) -> str:
        await asyncio.sleep(0)
        return key.upper()

    async def agent() -> str:
        async with agentlens.run(agent="async", input="k") as run:
            run.output = await lookup("k")
            return run.output

    assert asyncio.run(agent()) == "K"
    trace = captured_traces.one()
    assert trace.output == "K"
    assert [(s.name, s.output) for s in trace.steps] == [("lookup", "K")]


def test_run_step_records_by_hand(captured_traces: CapturedTraces) -> None:
    with agentlens.run(agent="manual") as run:
        run.step("user", output="hi there")
        step = run.step(
            StepKind.TOOL,
            "search",
            input={"q": "refund policy"},
            output=[{"id": "DOC-1"}],
            attributes={"latency_ms": 12},
        )
        run.step("tool", "broken", input={"x": 1}, error=ValueError("bad x"))
    assert step.id == "s2"
    trace = captured_traces.one()
    user, search, broken = trace.steps
    assert (user.kind, user.output) == (StepKind.USER, "hi there")
    assert (search.name, search.input, search.output) == (
        "search",
        {"q": "refund policy"},
        [{"id": "DOC-1"}],
    )
    assert search.attributes == {"latency_ms": 12}
    assert search.started_at == search.ended_at
    assert broken.error == {"type": "ValueError", "message": "bad x"}


def test_run_step_as_a_context_manager_is_timed_and_parents_nested_steps(
    captured_traces: CapturedTraces,
) -> None:
    with agentlens.run(agent="manual") as run:
        with run.step("agent", "planner") as planner:
            get_customer("a@example.com")
            planner.output = "plan"
        with pytest.raises(KeyError), run.step("llm", "gpt-4o", input=[{"role": "user"}]):
            raise KeyError("missing")
    trace = captured_traces.one()
    plan, tool, llm = trace.steps
    assert (plan.id, plan.output) == ("s1", "plan")
    assert tool.parent_id == "s1"
    assert plan.started_at < tool.started_at < tool.ended_at < plan.ended_at  # type: ignore[operator]
    assert llm.parent_id is None
    assert llm.error == {"type": "KeyError", "message": "'missing'"}


def test_unknown_step_kind_is_kept_not_raised(
    captured_traces: CapturedTraces, caplog: pytest.LogCaptureFixture
) -> None:
    with agentlens.run() as run:
        run.step("observation", "x", output=1)
    [step] = captured_traces.one().steps
    assert step.kind == StepKind.AGENT
    assert step.attributes == {"original_kind": "observation"}
    assert "unknown step kind" in caplog.text


def test_nested_runs_are_separate_traces_linked_by_parent_run_id(
    captured_traces: CapturedTraces,
) -> None:
    with agentlens.run(agent="outer") as outer:
        with agentlens.run(agent="inner") as inner:
            get_customer("x")
            assert agentlens.current_run() is inner
        assert agentlens.current_run() is outer
        get_customer("y")
    by_agent = {t.agent: t for t in captured_traces}
    assert by_agent["inner"].metadata == {"parent_run_id": outer.id}
    assert [s.input for s in by_agent["inner"].steps] == [{"email": "x"}]
    assert [s.input for s in by_agent["outer"].steps] == [{"email": "y"}]


def test_values_are_copied_when_recorded(captured_traces: CapturedTraces) -> None:
    shared: list[str] = ["first"]

    @agentlens.retrieval
    def search(query: list[str]) -> list[str]:
        return shared

    with agentlens.run(input=shared) as run:
        search(shared)
        run.output = shared
        shared.append("mutated later")
    [step] = captured_traces.one().steps
    assert step.input == {"query": ["first"]}
    assert step.output == ["first"]
    assert captured_traces.one().input == ["first"]
    assert captured_traces.one().output == ["first"]


def test_non_json_metadata_links_and_ids(captured_traces: CapturedTraces) -> None:
    when = datetime(2026, 5, 1, tzinfo=UTC)
    with agentlens.run(
        run_id="my-run",
        project="billing",
        links={"invoice": 1234},
        metadata={"release": "v42", "when": when, "obj": object()},
    ) as run:
        run.metadata["tenant"] = "acme"
    trace = captured_traces.one()
    assert (trace.id, trace.project) == ("my-run", "billing")
    assert trace.links == {"invoice": "1234"}
    assert trace.metadata["when"] == "2026-05-01T00:00:00+00:00"
    assert trace.metadata["obj"]["type"] == "object"
    assert trace.metadata["tenant"] == "acme"
    assert run.status == "ok"


def test_status_set_by_the_agent_is_kept(captured_traces: CapturedTraces) -> None:
    with agentlens.run() as run:
        run.status = "error"
    assert captured_traces.one().status == "error"


def test_a_step_still_open_when_the_run_ends_is_marked_incomplete(
    captured_traces: CapturedTraces,
) -> None:
    @agentlens.tool
    def stream():  # type: ignore[no-untyped-def]
        yield 1
        yield 2

    with agentlens.run():
        gen = stream()
        next(gen)
    [step] = captured_traces.one().steps
    assert step.attributes == {"incomplete": True}
    assert step.ended_at is None
    gen.close()  # closing after the run changes nothing already exported
    assert captured_traces.one().steps[0].attributes == {"incomplete": True}


def test_entering_a_run_twice_is_ignored(
    captured_traces: CapturedTraces, caplog: pytest.LogCaptureFixture
) -> None:
    run = agentlens.run(agent="twice")
    with run, run:
        get_customer("x")
    assert len(captured_traces) == 1
    assert "entered twice" in caplog.text
