"""The OpenAI client integration, on the real ``openai`` client over a faked HTTP transport."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest

import agentlens
from agentlens.integrations.openai import wrap
from agentlens.model import StepKind

Handler = Callable[[httpx.Request], httpx.Response]


def calls(trace: Any) -> list[Any]:
    """The model calls and tool calls of a run (without the system and user steps of what the
    model was shown)."""
    return [s for s in trace.steps if s.kind in (StepKind.LLM, StepKind.TOOL)]


def _completion(
    content: str | None, tool_calls: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c["args"])},
            }
            for c in tool_calls
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1764000000,
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": 100,
            "completion_tokens": 20,
            "total_tokens": 120,
            "prompt_tokens_details": {"cached_tokens": 64},
        },
    }


class Server:
    """Answers each request with the next scripted body; keeps the requests it saw."""

    def __init__(self, *bodies: Any) -> None:
        self.bodies = list(bodies)
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(json.loads(request.content))
        body = self.bodies.pop(0)
        if isinstance(body, httpx.Response):
            return body
        if isinstance(body, list):  # a stream: server-sent events
            text = "".join(f"data: {json.dumps(event)}\n\n" for event in body) + "data: [DONE]\n\n"
            return httpx.Response(
                200, content=text.encode(), headers={"content-type": "text/event-stream"}
            )
        return httpx.Response(200, json=body)


def client(server: Server) -> openai.OpenAI:
    return wrap(
        openai.OpenAI(
            api_key="sk-test",
            base_url="http://fake.openai/v1",
            http_client=httpx.Client(transport=httpx.MockTransport(server)),
            max_retries=0,
        )
    )


def async_client(server: Server) -> openai.AsyncOpenAI:
    return wrap(
        openai.AsyncOpenAI(
            api_key="sk-test",
            base_url="http://fake.openai/v1",
            http_client=httpx.AsyncClient(transport=httpx.MockTransport(server)),
            max_retries=0,
        )
    )


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_order",
            "parameters": {"type": "object", "properties": {"id": {"type": "string"}}},
        },
    }
]


def _agent_loop(c: openai.OpenAI, tool_output: str) -> str | None:
    messages: list[Any] = [{"role": "user", "content": "Where is order ORD-1?"}]
    reply = c.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
    messages.append(reply.choices[0].message)
    for call in reply.choices[0].message.tool_calls or []:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": tool_output})
    final = c.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
    return final.choices[0].message.content


def test_a_tool_loop_inside_a_run_joins_it(captured_traces: Any) -> None:
    server = Server(
        _completion(None, [{"id": "call_1", "name": "get_order", "args": {"id": "ORD-1"}}]),
        _completion("ORD-1 shipped on 2026-11-20."),
    )
    c = client(server)
    with agentlens.run(agent="support", input="Where is order ORD-1?") as run:
        run.output = _agent_loop(c, '{"id": "ORD-1", "shipped": "2026-11-20"}')
    trace = captured_traces.one()
    assert [(s.kind, s.name) for s in calls(trace)] == [
        (StepKind.LLM, "gpt-4o"),
        (StepKind.TOOL, "get_order"),
        (StepKind.LLM, "gpt-4o"),
    ]
    first, tool, second = calls(trace)
    assert first.input == [{"role": "user", "content": "Where is order ORD-1?"}]
    assert first.output["tool_calls"] == [
        {"id": "call_1", "name": "get_order", "arguments": {"id": "ORD-1"}}
    ]
    assert first.attributes["model"] == "gpt-4o-2024-08-06"
    assert first.attributes["input_tokens"] == 100
    assert first.attributes["output_tokens"] == 20
    assert first.attributes["total_tokens"] == 120
    assert first.attributes["cache_read_tokens"] == 64
    # 64 of the 100 input tokens were cached: $1.25 per million instead of $2.50
    assert first.attributes["cost_usd"] == pytest.approx((36 * 2.5 + 64 * 1.25 + 20 * 10.0) / 1e6)
    assert tool.input == {"id": "ORD-1"}
    assert tool.output == '{"id": "ORD-1", "shipped": "2026-11-20"}'  # raw content
    assert tool.error is None and tool.attributes["tool_call_id"] == "call_1"
    assert tool.started_at is not None and tool.ended_at is not None
    assert second.output == {"role": "assistant", "content": "ORD-1 shipped on 2026-11-20."}
    assert second.started_at >= tool.ended_at
    assert trace.output == "ORD-1 shipped on 2026-11-20."
    # the request the client sent was not changed
    assert server.requests[1]["messages"][2]["tool_call_id"] == "call_1"


def test_a_failed_tool_result_is_the_tool_steps_error(captured_traces: Any) -> None:
    server = Server(
        _completion(None, [{"id": "call_1", "name": "get_order", "args": {"id": "X"}}]),
        _completion("I could not find it."),
    )
    with agentlens.run(agent="support"):
        _agent_loop(client(server), "Error: order X not found")
    tool = calls(captured_traces.one())[1]
    assert tool.error == "Error: order X not found" and tool.output is None


def test_outside_a_run_each_conversation_is_a_run(captured_traces: Any) -> None:
    server = Server(
        _completion(None, [{"id": "call_1", "name": "get_order", "args": {"id": "ORD-1"}}]),
        _completion("Shipped."),
        _completion("Hello!"),
    )
    c = client(server)
    assert _agent_loop(c, "shipped") == "Shipped."
    c.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    first, second = captured_traces.traces
    assert [s.kind for s in calls(first)] == [StepKind.LLM, StepKind.TOOL, StepKind.LLM]
    assert first.input == "Where is order ORD-1?" and first.output == "Shipped."
    assert first.metadata["integration"] == "openai"
    assert [s.kind for s in calls(second)] == [StepKind.LLM]
    assert second.input == "hi" and second.output == "Hello!"


def test_a_follow_up_turn_is_a_new_run_that_names_the_previous(captured_traces: Any) -> None:
    server = Server(_completion("Paris."), _completion("About 2.1 million."))
    c = client(server)
    messages: list[Any] = [{"role": "user", "content": "Capital of France?"}]
    reply = c.chat.completions.create(model="gpt-4o", messages=messages)
    messages += [reply.choices[0].message, {"role": "user", "content": "Population?"}]
    c.chat.completions.create(model="gpt-4o", messages=messages)
    first, second = captured_traces.traces
    assert second.metadata["continues"] == first.id


def test_streamed_chat_with_tool_call_deltas(captured_traces: Any) -> None:
    def chunk(
        delta: dict[str, Any], finish: str | None = None, usage: Any = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": "chatcmpl-s",
            "object": "chat.completion.chunk",
            "created": 1764000000,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if usage is not None:
            body["choices"] = []
            body["usage"] = usage
        return body

    server = Server(
        [
            chunk(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_9",
                            "type": "function",
                            "function": {"name": "get_order", "arguments": ""},
                        }
                    ],
                }
            ),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"id": '}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"ORD-9"}'}}]}),
            chunk({}, "tool_calls"),
            chunk({}, usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}),
        ],
        [
            chunk({"role": "assistant", "content": "ORD-9 "}),
            chunk({"content": "is late."}, "stop"),
        ],
    )
    c = client(server)
    with agentlens.run(agent="support"):
        messages: list[Any] = [{"role": "user", "content": "ORD-9?"}]
        stream = c.chat.completions.create(
            model="gpt-4o-mini",
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
        assert len(chunks) == 5
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_9",
                        "type": "function",
                        "function": {"name": "get_order", "arguments": '{"id": "ORD-9"}'},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": "call_9", "content": "late"})
        text = "".join(
            ch.choices[0].delta.content or ""
            for ch in c.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True)
        )
    assert text == "ORD-9 is late."
    llm1, tool, llm2 = calls(captured_traces.one())
    assert llm1.output["tool_calls"] == [
        {"id": "call_9", "name": "get_order", "arguments": {"id": "ORD-9"}}
    ]
    assert llm1.attributes["input_tokens"] == 10 and llm1.attributes["output_tokens"] == 5
    assert llm1.attributes["cost_usd"] == pytest.approx((10 * 0.15 + 5 * 0.6) / 1e6)
    assert tool.output == "late"
    assert llm2.output == {"role": "assistant", "content": "ORD-9 is late."}
    assert llm2.attributes["finish_reason"] == "stop"


def test_responses_api_with_function_calls(captured_traces: Any) -> None:
    def response(rid: str, output: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": rid,
            "object": "response",
            "created_at": 1764000000,
            "model": "gpt-4.1-2025-04-14",
            "status": "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": 50,
                "output_tokens": 10,
                "total_tokens": 60,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }

    server = Server(
        response(
            "resp_1",
            [
                {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "call_r",
                    "name": "get_order",
                    "arguments": '{"id": "ORD-2"}',
                    "status": "completed",
                }
            ],
        ),
        response(
            "resp_2",
            [
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [
                        {"type": "output_text", "text": "ORD-2 is paid.", "annotations": []}
                    ],
                }
            ],
        ),
    )
    c = client(server)
    first = c.responses.create(model="gpt-4.1", input="Is ORD-2 paid?", instructions="Be brief.")
    c.responses.create(
        model="gpt-4.1",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": "call_r", "output": "paid"}],
    )
    trace = captured_traces.one()  # one conversation, by previous_response_id
    llm1, tool, llm2 = calls(trace)
    assert llm1.input == {
        "instructions": "Be brief.",
        "input": [{"role": "user", "content": "Is ORD-2 paid?"}],
    }
    assert llm1.attributes["response_id"] == "resp_1"
    assert llm1.attributes["cost_usd"] == pytest.approx((50 * 2.0 + 10 * 8.0) / 1e6)
    assert (tool.name, tool.input, tool.output) == ("get_order", {"id": "ORD-2"}, "paid")
    assert llm2.output == {"role": "assistant", "content": "ORD-2 is paid."}
    assert trace.output == "ORD-2 is paid." and trace.input == "Is ORD-2 paid?"


def test_async_client_and_async_stream(captured_traces: Any) -> None:
    server = Server(
        _completion("Async answer."),
        [
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "gpt-4o",
                "choices": [
                    {"index": 0, "delta": {"content": "streamed"}, "finish_reason": "stop"}
                ],
            },
        ],
    )
    c = async_client(server)

    async def main() -> str:
        async with agentlens.run(agent="support"):
            reply = await c.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "a?"}]
            )
            stream = await c.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "b?"}], stream=True
            )
            parts = [ch.choices[0].delta.content async for ch in stream]
            return (reply.choices[0].message.content or "") + "".join(p or "" for p in parts)

    assert asyncio.run(main()) == "Async answer.streamed"
    steps = calls(captured_traces.one())
    assert [s.output["content"] for s in steps] == ["Async answer.", "streamed"]


def test_a_client_error_is_recorded_and_raised_unchanged(captured_traces: Any) -> None:
    server = Server(httpx.Response(400, json={"error": {"message": "bad model", "type": "x"}}))
    c = client(server)
    with agentlens.run(agent="support"), pytest.raises(openai.BadRequestError):
        c.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
    step = calls(captured_traces.one())[0]
    assert step.kind is StepKind.LLM and step.error["type"] == "openai.BadRequestError"


def test_without_capture_the_client_is_untouched_in_behaviour() -> None:
    server = Server(_completion("plain"))
    reply = client(server).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "x"}]
    )
    assert reply.choices[0].message.content == "plain"


def test_wrapping_twice_records_once(captured_traces: Any) -> None:
    server = Server(_completion("once"))
    c = wrap(client(server))
    with agentlens.run():
        c.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    assert len(calls(captured_traces.one())) == 1


def test_a_missing_openai_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from agentlens.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'agentlens\[openai\]'"):
        wrap(object())


def test_responses_input_lists_continue_the_conversation(captured_traces: Any) -> None:
    def response(rid: str, output: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": rid,
            "object": "response",
            "created_at": 1764000000,
            "model": "gpt-4.1",
            "status": "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }

    server = Server(
        response(
            "r1",
            [
                {
                    "type": "function_call",
                    "id": "fc",
                    "call_id": "c7",
                    "name": "lookup",
                    "arguments": "{}",
                    "status": "completed",
                }
            ],
        ),
        response(
            "r2",
            [
                {
                    "type": "message",
                    "id": "m",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "Found.", "annotations": []}],
                }
            ],
        ),
    )
    c = client(server)
    items: list[Any] = [{"role": "user", "content": "Find it"}]
    first = c.responses.create(model="gpt-4.1", input=items)
    items += [*first.output, {"type": "function_call_output", "call_id": "c7", "output": "it"}]
    c.responses.create(model="gpt-4.1", input=items)
    trace = captured_traces.one()
    assert [s.kind for s in calls(trace)] == [StepKind.LLM, StepKind.TOOL, StepKind.LLM]
    assert calls(trace)[1].output == "it" and trace.output == "Found."


def _chunk(content: str, finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-s",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}],
    }


def test_an_async_stream_read_with_anext_is_passed_through_and_recorded(
    captured_traces: Any,
) -> None:
    # The SDK's AsyncStream is an async iterator: anext() / __anext__ work on it, so they must
    # work on the wrapped one too (they raised TypeError: not an async iterator).
    server = Server([_chunk("Hel"), _chunk("lo", "stop")])
    c = async_client(server)

    async def main() -> list[str | None]:
        async with agentlens.run(agent="support"):
            stream = await c.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            parts = []
            while True:
                try:
                    chunk = await anext(stream)
                except StopAsyncIteration:
                    return parts
                parts.append(chunk.choices[0].delta.content)

    assert asyncio.run(main()) == ["Hel", "lo"]
    (step,) = calls(captured_traces.one())
    assert step.output == {"role": "assistant", "content": "Hello"}
    assert step.attributes["finish_reason"] == "stop"
    assert "incomplete" not in step.attributes


def test_a_client_made_by_with_options_or_copy_records_too(captured_traces: Any) -> None:
    # with_options() builds a new client with new resources, which were not wrapped: its calls
    # went unrecorded, silently.
    server = Server(
        _completion(None, [{"id": "call_1", "name": "get_order", "args": {"id": "ORD-1"}}]),
        _completion("Shipped."),
        _completion("Hello."),
    )
    c = client(server)
    # outside a run the conversation goes on across the copies: they share one recorder
    assert _agent_loop(c.with_options(timeout=5.0), "shipped") == "Shipped."
    with agentlens.run(agent="support"):
        c.copy(max_retries=0).with_options(timeout=3.0).chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        )
    loop, joined = captured_traces.traces
    assert [s.kind for s in calls(loop)] == [StepKind.LLM, StepKind.TOOL, StepKind.LLM]
    assert loop.output == "Shipped." and calls(loop)[1].output == "shipped"
    assert [s.output for s in calls(joined)] == [{"role": "assistant", "content": "Hello."}]
    assert len(server.requests) == 3


def test_with_raw_response_records_the_parsed_reply(captured_traces: Any) -> None:
    # The raw response was taken for the reply: an llm step with content None, no tool calls,
    # and the tool result fed back later recorded as an unpaired tool step.
    server = Server(
        _completion(None, [{"id": "call_1", "name": "get_order", "args": {"id": "ORD-1"}}]),
        _completion("Shipped."),
    )
    c = client(server)
    messages: list[Any] = [{"role": "user", "content": "Where is ORD-1?"}]
    with agentlens.run(agent="support"):
        raw = c.chat.completions.with_raw_response.create(model="gpt-4o", messages=messages)
        assert raw.headers["content-type"] == "application/json"
        reply = raw.parse()
        messages.append(reply.choices[0].message)
        messages.append({"role": "tool", "tool_call_id": "call_1", "content": "shipped"})
        c.chat.completions.create(model="gpt-4o", messages=messages)
    llm, tool, final = calls(captured_traces.one())
    assert llm.output["tool_calls"] == [
        {"id": "call_1", "name": "get_order", "arguments": {"id": "ORD-1"}}
    ]
    assert llm.attributes["input_tokens"] == 100
    assert (tool.name, tool.output) == ("get_order", "shipped")
    assert "unpaired" not in tool.attributes
    assert final.output["content"] == "Shipped."


def test_with_streaming_response_is_left_to_the_caller_and_said_so(
    captured_traces: Any,
) -> None:
    server = Server(_completion("Hi."))
    c = client(server)
    with (
        agentlens.run(agent="support"),
        c.chat.completions.with_streaming_response.create(
            model="gpt-4o", messages=[{"role": "user", "content": "x"}]
        ) as response,
    ):
        assert json.loads(response.read())["choices"][0]["message"]["content"] == "Hi."
    (step,) = calls(captured_traces.one())
    assert step.attributes["unread"] is True and step.output is None


def test_the_system_prompt_and_user_messages_are_steps_and_so_evidence(
    captured_traces: Any,
) -> None:
    # They were only in the llm step's input, which is not evidence: an answer taken from the
    # system prompt was flagged as a fabricated reference and as parametric leakage.
    from agentlens.eval import run_scorers

    server = Server(
        _completion("Your order ORD-9 shipped on 2026-11-20."),
        _completion("Yes."),
        _completion("Yes."),
    )
    c = client(server)
    system = {"role": "system", "content": "Customer context: ORD-9 shipped on 2026-11-20."}
    messages: list[Any] = [system, {"role": "user", "content": "When did my order ship?"}]
    with agentlens.run(agent="support"):
        reply = c.chat.completions.create(model="gpt-4o", messages=messages)
        messages += [reply.choices[0].message, {"role": "user", "content": "yes"}]
        reply = c.chat.completions.create(model="gpt-4o", messages=messages)
        messages += [reply.choices[0].message, {"role": "user", "content": "yes"}]
        c.chat.completions.create(model="gpt-4o", messages=messages)
    trace = captured_traces.one()
    assert [(s.kind, s.output) for s in trace.steps if s.kind is not StepKind.LLM] == [
        (StepKind.SYSTEM, "Customer context: ORD-9 shipped on 2026-11-20."),
        (StepKind.USER, "When did my order ship?"),
        (StepKind.USER, "yes"),  # said twice, recorded twice, each before the call it began
        (StepKind.USER, "yes"),
    ]
    assert [s.kind for s in trace.steps][:3] == [StepKind.SYSTEM, StepKind.USER, StepKind.LLM]
    report = run_scorers(["no_fabricated_refs", "parametric_leakage"], trace=trace)
    assert all(r.passed for r in report.results.values()), report


def test_responses_instructions_are_the_system_step(captured_traces: Any) -> None:
    server = Server(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1,
            "model": "gpt-4o",
            "status": "completed",
            "output": [
                {
                    "type": "message",
                    "id": "m1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "Hi.", "annotations": []}],
                }
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
    )
    with agentlens.run():
        client(server).responses.create(model="gpt-4o", instructions="Be terse.", input="Hello")
    kinds = [(s.kind, s.output) for s in captured_traces.one().steps][:2]
    assert kinds == [(StepKind.SYSTEM, "Be terse."), (StepKind.USER, "Hello")]


def test_messages_given_as_a_generator_are_still_sent(captured_traces: Any) -> None:
    # The SDK takes any iterable of messages; recording read the generator first, so the
    # request went out with "messages": [] (the API's 400, or a reply to nothing).
    server = Server(_completion("Hi."))
    c = client(server)
    sent = [{"role": "user", "content": "hello"}]
    with agentlens.run():
        c.chat.completions.create(model="gpt-4o", messages=(m for m in sent))
    assert server.requests[0]["messages"] == sent
    (llm,) = calls(captured_traces.one())
    assert llm.input == sent


def test_structured_outputs_through_parse_are_recorded(captured_traces: Any) -> None:
    # chat.completions.parse() and responses.parse() post the request themselves, not through
    # create(): their calls went unrecorded, silently.
    from pydantic import BaseModel

    class Order(BaseModel):
        id: str
        status: str

    body = _completion('{"id": "ORD-1", "status": "shipped"}')
    server = Server(body)
    with agentlens.run():
        reply = client(server).chat.completions.parse(
            model="gpt-4o", messages=[{"role": "user", "content": "ORD-1?"}], response_format=Order
        )
    assert reply.choices[0].message.parsed == Order(id="ORD-1", status="shipped")
    (llm,) = calls(captured_traces.one())
    assert llm.output["content"] == '{"id": "ORD-1", "status": "shipped"}'
    assert llm.attributes["input_tokens"] == 100


def test_a_client_wrapped_per_request_frees_its_runs(captured_traces: Any) -> None:
    # Every recorder was kept in a module list forever, and with it each run it had joined,
    # every step's data included: a server wrapping a client per request grew without end.
    import gc

    from agentlens.capture._run import Run

    def alive() -> int:
        gc.collect()
        return sum(1 for o in gc.get_objects() if type(o) is Run)

    before = alive()
    for _ in range(5):
        c = client(Server(_completion("x" * 10_000)))
        with agentlens.run():
            c.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "q"}])
        del c
    assert len(captured_traces.traces) == 5
    assert alive() <= before
    # a long-lived client keeps only the last run it joined (forgotten when the next starts)
    c = client(Server(_completion("a"), _completion("b"), _completion("c")))
    for _ in range(3):
        with agentlens.run():
            c.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "q"}])
    assert alive() <= before + 1


def test_an_open_conversation_of_a_dropped_client_is_still_ended(captured_traces: Any) -> None:
    import gc

    from agentlens.capture.integrations import end_conversations

    c = client(
        Server(_completion(None, [{"id": "call_1", "name": "get_order", "args": {"id": "X"}}]))
    )
    c.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "X?"}])
    del c
    gc.collect()
    assert captured_traces.traces == []  # still waiting for the tool's result
    end_conversations()
    (trace,) = captured_traces.traces
    assert trace.input == "X?" and calls(trace)[-1].attributes["incomplete"] is True


def test_an_async_stream_left_by_break_keeps_what_arrived(captured_traces: Any) -> None:
    # The async generator a break leaves is closed later, by a task of the event loop: the run
    # had ended by then, and its llm step went out incomplete, without the text that arrived.
    server = Server([_chunk("Hel"), _chunk("lo"), _chunk(" there", "stop")])
    c = async_client(server)

    async def main() -> None:
        async with agentlens.run():
            stream = await c.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            async for chunk in stream:
                if chunk.choices[0].delta.content == "lo":
                    break

    asyncio.run(main())
    (llm,) = calls(captured_traces.one())
    assert llm.output == {"role": "assistant", "content": "Hello"}
    assert "incomplete" not in llm.attributes


def test_a_built_in_file_search_is_a_retrieval_step_before_the_reply(
    captured_traces: Any,
) -> None:
    # The results of OpenAI's own tools (file search, web search, code interpreter, remote MCP)
    # come back in the response's output, where they were dropped: an answer from the files
    # was checked against no evidence, and its references flagged as fabricated.
    from agentlens.eval import run_scorers

    results = [{"file_id": "file-1", "filename": "refunds.md", "score": 0.9,
                "text": "Refund REF-3141 was issued on 2026-11-02."}]  # fmt: skip
    server = Server(
        {
            "id": "resp_fs",
            "object": "response",
            "created_at": 1,
            "model": "gpt-4o",
            "status": "completed",
            "output": [
                {"type": "file_search_call", "id": "fs_1", "status": "completed",
                 "queries": ["refund REF-3141"], "results": results},
                {"type": "message", "id": "m1", "role": "assistant", "status": "completed",
                 "content": [{"type": "output_text", "annotations": [],
                              "text": "REF-3141 was issued on 2026-11-02."}]},
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
    )  # fmt: skip
    with agentlens.run(agent="support", input="When was REF-3141 issued?") as run:
        reply = client(server).responses.create(
            model="gpt-4o",
            input="When was REF-3141 issued?",
            tools=[{"type": "file_search", "vector_store_ids": ["vs_1"]}],
            include=["file_search_call.results"],
        )
        run.output = reply.output_text
    trace = captured_traces.one()
    found, llm = (s for s in trace.steps if s.kind in (StepKind.RETRIEVAL, StepKind.LLM))
    assert (found.kind, found.name, found.input) == (
        StepKind.RETRIEVAL,
        "file_search",
        {"queries": ["refund REF-3141"]},
    )
    assert found.output == results and found.attributes["served"] is True
    assert "tool_calls" not in llm.output
    report = run_scorers(["no_fabricated_refs", "parametric_leakage"], trace=trace)
    assert all(r.passed for r in report.results.values()), report


def test_the_beta_spelling_of_parse_is_recorded(captured_traces: Any) -> None:
    # client.beta.chat.completions is a Completions object of its own: unwrapped, unrecorded.
    from pydantic import BaseModel

    class Answer(BaseModel):
        text: str

    server = Server(_completion('{"text": "hi"}'), _completion("plain"))
    c = client(server)
    with agentlens.run():
        c.beta.chat.completions.parse(
            model="gpt-4o", messages=[{"role": "user", "content": "x"}], response_format=Answer
        )
        c.beta.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "y"}])
    assert [s.output["content"] for s in calls(captured_traces.one())] == [
        '{"text": "hi"}',
        "plain",
    ]


def test_cached_input_tokens_are_priced_at_the_cached_rate(captured_traces: Any) -> None:
    # prompt_tokens / input_tokens include the cached tokens, which cost less (gpt-4o: $1.25
    # per million instead of $2.50; gpt-4.1: $0.50 instead of $2.00): they were priced in full.
    reply = {
        "id": "resp_c",
        "object": "response",
        "created_at": 1764000000,
        "model": "gpt-4.1-2025-04-14",
        "status": "completed",
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 5000,
            "output_tokens": 10,
            "total_tokens": 5010,
            "input_tokens_details": {"cached_tokens": 4096},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }
    c = client(Server(_completion("Hi."), reply))
    with agentlens.run():
        c.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        c.responses.create(model="gpt-4.1", input="hi")
    chat, responses = calls(captured_traces.one())
    assert chat.attributes["cache_read_tokens"] == 64
    assert chat.attributes["cost_usd"] == pytest.approx((36 * 2.5 + 64 * 1.25 + 20 * 10.0) / 1e6)
    assert responses.attributes["cache_read_tokens"] == 4096
    assert responses.attributes["cost_usd"] == pytest.approx(
        (904 * 2.0 + 4096 * 0.5 + 10 * 8.0) / 1e6
    )


def _function_call_reply(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """A reply of the legacy function-calling API (``functions=``): ``function_call``, no id."""
    body = _completion(None)
    body["choices"][0]["message"]["function_call"] = {"name": name, "arguments": json.dumps(args)}
    body["choices"][0]["finish_reason"] = "function_call"
    return body


FUNCTIONS = [TOOLS[0]["function"]]


def test_a_legacy_function_message_is_the_tool_result(captured_traces: Any) -> None:
    # A `function` message (the result of the old function-calling API) was not read: the
    # function_call asked for was no tool step and its result, evidence, was lost; outside a
    # run the conversation ended at the function_call, as if it were the answer.
    server = Server(
        _function_call_reply("get_order", {"id": "ORD-1"}),
        _completion("ORD-1 shipped on 2026-11-20."),
    )
    c = client(server)
    messages: list[Any] = [{"role": "user", "content": "Where is order ORD-1?"}]
    reply = c.chat.completions.create(model="gpt-4o", messages=messages, functions=FUNCTIONS)
    messages.append(reply.choices[0].message)
    messages.append({"role": "function", "name": "get_order", "content": "shipped 2026-11-20"})
    c.chat.completions.create(model="gpt-4o", messages=messages, functions=FUNCTIONS)
    trace = captured_traces.one()  # one conversation
    first, tool, second = calls(trace)
    assert first.output["tool_calls"] == [
        {"id": None, "name": "get_order", "arguments": {"id": "ORD-1"}}
    ]
    assert (tool.kind, tool.name, tool.input) == (StepKind.TOOL, "get_order", {"id": "ORD-1"})
    assert tool.output == "shipped 2026-11-20" and tool.error is None
    assert "unpaired" not in tool.attributes and tool.attributes["legacy_function"] is True
    assert tool.started_at <= tool.ended_at <= second.started_at
    assert trace.output == "ORD-1 shipped on 2026-11-20."


def test_a_legacy_function_message_without_its_call_is_an_unpaired_tool_step(
    captured_traces: Any,
) -> None:
    server = Server(_completion("It failed."), _completion("It failed."))
    c = client(server)
    messages = [
        {"role": "user", "content": "Where is ORD-1?"},
        {"role": "assistant", "content": None, "function_call": {"name": "get_order",
                                                                 "arguments": "{}"}},
        {"role": "function", "name": "get_order", "content": "Error: no such order"},
    ]  # fmt: skip
    with agentlens.run():
        for _ in range(2):  # sent again: recorded once
            c.chat.completions.create(model="gpt-4o", messages=messages)
    steps = calls(captured_traces.one())
    tools = [s for s in steps if s.kind is StepKind.TOOL]
    assert len(tools) == 1
    assert tools[0].name == "get_order" and tools[0].error == "Error: no such order"
    assert tools[0].attributes["unpaired"] is True


def test_a_streamed_legacy_function_call_is_a_tool_step(captured_traces: Any) -> None:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-f",
            "object": "chat.completion.chunk",
            "created": 1764000000,
            "model": "gpt-4o",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    server = Server(
        [
            chunk({"role": "assistant", "function_call": {"name": "get_order", "arguments": ""}}),
            chunk({"function_call": {"arguments": '{"id": "ORD-3"}'}}),
            chunk({}, "function_call"),
        ],
        _completion("ORD-3 is late."),
    )
    c = client(server)
    messages: list[Any] = [{"role": "user", "content": "ORD-3?"}]
    with agentlens.run():
        list(c.chat.completions.create(model="gpt-4o", messages=messages, stream=True))
        messages += [
            {"role": "assistant", "content": None,
             "function_call": {"name": "get_order", "arguments": '{"id": "ORD-3"}'}},
            {"role": "function", "name": "get_order", "content": "late"},
        ]  # fmt: skip
        c.chat.completions.create(model="gpt-4o", messages=messages)
    _, tool, _ = calls(captured_traces.one())
    assert (tool.name, tool.input, tool.output) == ("get_order", {"id": "ORD-3"}, "late")


def test_legacy_function_results_of_two_conversations_in_a_run_close_their_own_calls(
    captured_traces: Any,
) -> None:
    server = Server(
        _function_call_reply("get_order", {"id": "ORD-1"}),
        _completion("Shipped."),
        _function_call_reply("get_order", {"id": "ORD-1"}),
        _completion("Shipped."),
    )
    c = client(server)
    with agentlens.run():
        for question in ("Where is ORD-1?", "Is ORD-1 out yet?"):
            messages: list[Any] = [{"role": "user", "content": question}]
            reply = c.chat.completions.create(model="gpt-4o", messages=messages)
            messages += [
                reply.choices[0].message,
                {"role": "function", "name": "get_order", "content": "shipped"},
            ]
            c.chat.completions.create(model="gpt-4o", messages=messages)
    tools = [s for s in captured_traces.one().steps if s.kind is StepKind.TOOL]
    assert [(t.output, t.attributes.get("incomplete")) for t in tools] == [("shipped", None)] * 2
