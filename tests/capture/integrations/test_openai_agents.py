"""The OpenAI Agents SDK tracing processor, on the real SDK with a custom model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from agents import (
    Agent,
    GuardrailFunctionOutput,
    InputGuardrail,
    Model,
    ModelResponse,
    Runner,
    Usage,
    function_tool,
    generation_span,
    set_trace_processors,
)
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

import agentlens
from agentlens.integrations.openai_agents import AgentlensProcessor
from agentlens.model import StepKind


@function_tool
def get_order(order_id: str) -> str:
    """Look an order up."""
    if order_id == "ORD-404":
        raise ValueError("no such order")
    return f"{order_id}: shipped 2026-11-20"


class ScriptedModel(Model):
    """A model that answers from a script, and traces each call as a model adapter does."""

    def __init__(self, *replies: list[Any]) -> None:
        self.replies = list(replies)

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        output = self.replies.pop(0)
        sent = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        with generation_span(model="scripted-gpt-4o", input=sent) as span:
            span.span_data.output = [o.model_dump() for o in output]
            span.span_data.usage = {"input_tokens": 40, "output_tokens": 10}
        return ModelResponse(
            output=output,
            usage=Usage(requests=1, input_tokens=40, output_tokens=10, total_tokens=50),
            response_id=None,
        )

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def _call(order_id: str) -> list[Any]:
    return [
        ResponseFunctionToolCall(
            type="function_call",
            call_id="call_1",
            name="get_order",
            arguments=f'{{"order_id": "{order_id}"}}',
            id="fc_1",
            status="completed",
        )
    ]


def _text(text: str) -> list[Any]:
    return [
        ResponseOutputMessage(
            type="message",
            id="msg_1",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
        )
    ]


@pytest.fixture
def processor() -> Iterator[AgentlensProcessor]:
    ours = AgentlensProcessor(prices={"scripted-gpt-4o": (1.0, 2.0)})
    set_trace_processors([ours])
    try:
        yield ours
    finally:
        set_trace_processors([])


def test_a_trace_is_one_run_with_agent_llm_and_tool_steps(
    captured_traces: Any, processor: AgentlensProcessor
) -> None:
    model = ScriptedModel(_call("ORD-1"), _text("ORD-1 shipped on 2026-11-20."))
    agent = Agent(name="support", instructions="Help.", tools=[get_order], model=model)
    result = asyncio.run(Runner.run(agent, "Where is ORD-1?"))
    assert result.final_output == "ORD-1 shipped on 2026-11-20."
    trace = captured_traces.one()
    assert trace.name == "Agent workflow"
    assert trace.metadata["integration"] == "openai-agents"
    assert trace.metadata["trace_id"].startswith("trace_")
    assert trace.input == "Where is ORD-1?"
    assert trace.output == "ORD-1 shipped on 2026-11-20."
    agent_step = next(s for s in trace.steps if s.attributes.get("span_type") == "agent")
    assert (agent_step.kind, agent_step.name) == (StepKind.AGENT, "support")
    assert agent_step.attributes["tools"] == ["get_order"]
    children = [s for s in trace.steps if _under(trace.steps, s, agent_step.id)]
    children = [s for s in children if s.kind in (StepKind.LLM, StepKind.TOOL)]
    assert [s.kind for s in children] == [StepKind.LLM, StepKind.TOOL, StepKind.LLM]
    llm, tool, _ = children
    assert llm.name == "scripted-gpt-4o"
    assert (llm.attributes["input_tokens"], llm.attributes["output_tokens"]) == (40, 10)
    assert llm.attributes["cost_usd"] == pytest.approx((40 * 1.0 + 10 * 2.0) / 1e6)
    assert llm.input == [{"role": "user", "content": "Where is ORD-1?"}]
    assert (tool.name, tool.input, tool.output) == (
        "get_order",
        {"order_id": "ORD-1"},
        "ORD-1: shipped 2026-11-20",
    )
    assert tool.started_at <= tool.ended_at


def test_a_failing_tool_is_the_tool_steps_error(
    captured_traces: Any, processor: AgentlensProcessor
) -> None:
    model = ScriptedModel(_call("ORD-404"), _text("I could not find it."))
    agent = Agent(name="support", tools=[get_order], model=model)
    asyncio.run(Runner.run(agent, "ORD-404?"))
    tool = next(s for s in captured_traces.one().steps if s.kind is StepKind.TOOL)
    # the SDK reports the failure on the span (and redacts the exception's text by default)
    assert tool.error["message"] == "Error running tool (non-fatal)"
    assert tool.error["data"]["tool_name"] == "get_order"


def test_handoffs_and_guardrails_are_steps(
    captured_traces: Any, processor: AgentlensProcessor
) -> None:
    billing = Agent(name="billing", model=ScriptedModel(_text("Your invoice is 120 EUR.")))

    def polite(ctx: Any, agent: Any, input: Any) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info="ok", tripwire_triggered=False)

    from openai.types.responses import ResponseFunctionToolCall as Call

    triage_model = ScriptedModel(
        [
            Call(
                type="function_call",
                call_id="h1",
                name="transfer_to_billing",
                arguments="{}",
                id="fc_h",
                status="completed",
            )
        ]
    )
    triage = Agent(
        name="triage",
        handoffs=[billing],
        model=triage_model,
        input_guardrails=[InputGuardrail(guardrail_function=polite, name="polite")],
    )
    result = asyncio.run(Runner.run(triage, "What is my invoice?"))
    assert result.final_output == "Your invoice is 120 EUR."
    steps = captured_traces.one().steps
    kinds = {(s.attributes.get("span_type"), s.name) for s in steps}
    assert ("handoff", "handoff") in kinds and ("guardrail", "polite") in kinds
    handoff = next(s for s in steps if s.attributes.get("span_type") == "handoff")
    assert (handoff.attributes["from_agent"], handoff.attributes["to_agent"]) == (
        "triage",
        "billing",
    )
    guard = next(s for s in steps if s.attributes.get("span_type") == "guardrail")
    assert guard.attributes["triggered"] is False
    assert [s.name for s in steps if s.attributes.get("span_type") == "agent"] == [
        "triage",
        "billing",
    ]


def test_inside_a_run_the_trace_joins_it(
    captured_traces: Any, processor: AgentlensProcessor
) -> None:
    agent = Agent(name="support", model=ScriptedModel(_text("hi")))
    with agentlens.run(agent="outer"):
        asyncio.run(Runner.run(agent, "hello"))
    trace = captured_traces.one()
    assert trace.agent == "outer"
    assert [s.kind for s in trace.steps if s.kind is not StepKind.AGENT] == [
        StepKind.USER,
        StepKind.LLM,
    ]
    assert "support" in [s.name for s in trace.steps]


def _under(steps: list[Any], step: Any, ancestor: str) -> bool:
    by_id = {s.id: s for s in steps}
    parent = step.parent_id
    while parent is not None:
        if parent == ancestor:
            return True
        parent = by_id[parent].parent_id
    return False


def test_a_workflow_that_raises_is_a_run_with_status_error(
    captured_traces: Any, processor: AgentlensProcessor
) -> None:
    # The run ended as "ok" when the SDK raised out of Runner.run (here: the agent never
    # finishes within max_turns); only the agent step's error said otherwise.
    from agents.exceptions import MaxTurnsExceeded

    agent = Agent(name="support", tools=[get_order], model=ScriptedModel(_call("ORD-1")))
    with pytest.raises(MaxTurnsExceeded):
        asyncio.run(Runner.run(agent, "Where is ORD-1?", max_turns=1))
    trace = captured_traces.one()
    assert trace.status == "error"
    assert trace.metadata["error"]["message"] == "Max turns exceeded"
    assert trace.metadata["error"]["data"] == {"max_turns": 1}
    assert trace.input == "Where is ORD-1?"


def test_a_tool_that_fails_does_not_fail_the_run(
    captured_traces: Any, processor: AgentlensProcessor
) -> None:
    model = ScriptedModel(_call("ORD-404"), _text("I could not find it."))
    asyncio.run(Runner.run(Agent(name="support", tools=[get_order], model=model), "ORD-404?"))
    trace = captured_traces.one()
    assert trace.status == "ok" and "error" not in trace.metadata


def test_the_instructions_and_the_input_are_steps_before_the_model_call(
    captured_traces: Any, processor: AgentlensProcessor
) -> None:
    # The agent's instructions (its system prompt) and the user's input were only in the llm
    # step's input, which is not evidence: an answer taken from them was flagged.
    from agentlens.eval import run_scorers

    class Instructed(ScriptedModel):
        async def get_response(
            self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
        ) -> ModelResponse:
            output = self.replies.pop(0)
            sent = [{"role": "system", "content": system_instructions}]
            sent += [{"role": "user", "content": input}] if isinstance(input, str) else input
            with generation_span(model="scripted-gpt-4o", input=sent) as span:
                span.span_data.output = [o.model_dump() for o in output]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

    model = Instructed(_call("ORD-1"), _text("ORD-9 shipped on 2026-11-20."))
    agent = Agent(
        name="support",
        instructions="Customer context: ORD-9 shipped on 2026-11-20.",
        tools=[get_order],
        model=model,
    )
    asyncio.run(Runner.run(agent, "When did my order ship?"))
    trace = captured_traces.one()
    kinds = [s.kind for s in trace.steps if s.kind is not StepKind.AGENT]
    assert kinds == [
        StepKind.SYSTEM,
        StepKind.USER,
        StepKind.LLM,
        StepKind.TOOL,
        StepKind.LLM,  # the same instructions and input again: nothing new recorded
    ]
    system = next(s for s in trace.steps if s.kind is StepKind.SYSTEM)
    assert system.output == "Customer context: ORD-9 shipped on 2026-11-20."
    report = run_scorers(["no_fabricated_refs", "parametric_leakage"], trace=trace)
    assert all(r.passed for r in report.results.values()), report


def test_the_run_is_of_the_first_agent_or_of_the_role_given(
    captured_traces: Any, processor: AgentlensProcessor
) -> None:
    # The runs had no agent role at all (and the processor no agent= as the others have), so no
    # per-agent setting applied and the rate per agent had them under none.
    asyncio.run(Runner.run(Agent(name="support", model=ScriptedModel(_text("hi"))), "x"))
    set_trace_processors([AgentlensProcessor(agent="billing-bot")])
    asyncio.run(Runner.run(Agent(name="support", model=ScriptedModel(_text("hi"))), "y"))
    first, second = captured_traces.traces
    assert (first.agent, second.agent) == ("support", "billing-bot")


def test_a_hosted_file_search_is_a_retrieval_step_before_the_reply(
    captured_traces: Any, processor: AgentlensProcessor
) -> None:
    # A hosted tool's results (FileSearchTool here) are items of the response, and were
    # dropped: the answer taken from the files had no evidence.
    import json

    import httpx
    import openai
    from agents import FileSearchTool, OpenAIResponsesModel

    results = [{"file_id": "file-1", "filename": "refunds.md", "score": 0.9,
                "text": "Refund REF-3141 was issued on 2026-11-02."}]  # fmt: skip
    body = {
        "id": "resp_fs", "object": "response", "created_at": 1, "model": "gpt-4o",
        "status": "completed", "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "output": [
            {"type": "file_search_call", "id": "fs_1", "status": "completed",
             "queries": ["REF-3141"], "results": results},
            {"type": "message", "id": "m1", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "annotations": [],
                          "text": "REF-3141 was issued on 2026-11-02."}]},
        ],
    }  # fmt: skip

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=json.dumps(body).encode(),
                              headers={"content-type": "application/json"})  # fmt: skip

    client = openai.AsyncOpenAI(
        api_key="sk-test",
        base_url="http://fake.openai/v1",
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(answer)),
        max_retries=0,
    )
    agent = Agent(
        name="support",
        tools=[FileSearchTool(vector_store_ids=["vs_1"], include_search_results=True)],
        model=OpenAIResponsesModel(model="gpt-4o", openai_client=client),
    )
    result = asyncio.run(Runner.run(agent, "When was REF-3141 issued?"))
    assert result.final_output == "REF-3141 was issued on 2026-11-02."
    trace = captured_traces.one()
    found, llm = (s for s in trace.steps if s.kind in (StepKind.RETRIEVAL, StepKind.LLM))
    assert (found.name, found.input, found.output) == (
        "file_search",
        {"queries": ["REF-3141"]},
        results,
    )
    assert llm.attributes["response_id"] == "resp_fs"
