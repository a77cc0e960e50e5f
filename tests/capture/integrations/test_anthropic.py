"""The Anthropic client integration, on the real ``anthropic`` client over a faked transport."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import anthropic
import pytest

try:  # recent anthropic releases run on httpx2, older ones on httpx: fake the one it uses
    import httpx2 as httpx
except ImportError:  # pragma: no cover
    import httpx  # type: ignore[no-redef]

import agentlens
from agentlens.errors import MissingExtraError
from agentlens.integrations.anthropic import wrap
from agentlens.model import StepKind


def calls(trace: Any) -> list[Any]:
    """The model calls and tool calls of a run (without the system and user steps of what the
    model was shown)."""
    return [s for s in trace.steps if s.kind in (StepKind.LLM, StepKind.TOOL)]


def _message(mid: str, content: list[dict[str, Any]], stop: str = "end_turn") -> dict[str, Any]:
    return {
        "id": mid,
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6-20260101",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 200,
            "output_tokens": 30,
            "cache_read_input_tokens": 150,
            "cache_creation_input_tokens": 10,
        },
    }


class Server:
    def __init__(self, *bodies: Any) -> None:
        self.bodies = list(bodies)
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(json.loads(request.content))
        body = self.bodies.pop(0)
        if isinstance(body, list):
            text = "".join(
                f"event: {event['type']}\ndata: {json.dumps(event)}\n\n" for event in body
            )
            return httpx.Response(
                200, content=text.encode(), headers={"content-type": "text/event-stream"}
            )
        return httpx.Response(200, json=body)


def client(server: Server) -> anthropic.Anthropic:
    return wrap(
        anthropic.Anthropic(
            api_key="sk-ant-test",
            base_url="http://fake.anthropic",
            http_client=httpx.Client(transport=httpx.MockTransport(server)),
            max_retries=0,
        )
    )


TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "get_invoice", "input": {"id": "INV-7"}}


def _loop(c: anthropic.Anthropic, result: dict[str, Any]) -> str:
    messages: list[Any] = [{"role": "user", "content": "What does INV-7 say?"}]
    reply = c.messages.create(
        model="claude-sonnet-4-6", max_tokens=100, system="Be exact.", messages=messages
    )
    messages.append({"role": "assistant", "content": reply.content})
    messages.append(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", **result}]}
    )
    final = c.messages.create(model="claude-sonnet-4-6", max_tokens=100, messages=messages)
    return "".join(b.text for b in final.content if b.type == "text")


def test_tool_use_and_tool_result_inside_a_run(captured_traces: Any) -> None:
    server = Server(
        _message(
            "msg_1",
            [
                {"type": "thinking", "thinking": "look it up", "signature": "s"},
                {"type": "text", "text": "Let me check."},
                TOOL_USE,
            ],
            "tool_use",
        ),
        _message("msg_2", [{"type": "text", "text": "INV-7 is 120 EUR."}]),
    )
    with agentlens.run(agent="billing") as run:
        run.output = _loop(
            client(server), {"content": [{"type": "text", "text": "INV-7: 120 EUR"}]}
        )
    llm1, tool, llm2 = calls(captured_traces.one())
    assert (llm1.kind, tool.kind, llm2.kind) == (StepKind.LLM, StepKind.TOOL, StepKind.LLM)
    assert llm1.input == {
        "system": "Be exact.",
        "messages": [{"role": "user", "content": "What does INV-7 say?"}],
    }
    assert llm1.output == {
        "role": "assistant",
        "content": "Let me check.",
        "thinking": "look it up",
        "tool_calls": [{"id": "toolu_1", "name": "get_invoice", "arguments": {"id": "INV-7"}}],
    }
    attrs = llm1.attributes
    assert attrs["model"] == "claude-sonnet-4-6-20260101"
    assert (attrs["input_tokens"], attrs["output_tokens"]) == (200, 30)
    assert (attrs["cache_read_tokens"], attrs["cache_write_tokens"]) == (150, 10)
    # 150 cache reads at 0.1x the input price, 10 cache writes at 1.25x
    assert attrs["cost_usd"] == pytest.approx((200 * 3 + 150 * 0.3 + 10 * 3.75 + 30 * 15) / 1e6)
    assert attrs["stop_reason"] == "tool_use" and attrs["response_id"] == "msg_1"
    assert (tool.name, tool.input, tool.output, tool.error) == (
        "get_invoice",
        {"id": "INV-7"},
        "INV-7: 120 EUR",
        None,
    )
    assert llm2.output["content"] == "INV-7 is 120 EUR."


def test_an_is_error_tool_result_is_the_steps_error(captured_traces: Any) -> None:
    server = Server(
        _message("msg_1", [TOOL_USE], "tool_use"),
        _message("msg_2", [{"type": "text", "text": "Not found."}]),
    )
    with agentlens.run():
        _loop(client(server), {"content": "no invoice INV-7", "is_error": True})
    tool = calls(captured_traces.one())[1]
    assert tool.error == "no invoice INV-7" and tool.output is None


def test_outside_a_run_the_conversation_is_one_run(captured_traces: Any) -> None:
    server = Server(
        _message("msg_1", [TOOL_USE], "tool_use"),
        _message("msg_2", [{"type": "text", "text": "120 EUR."}]),
    )
    assert _loop(client(server), {"content": "120 EUR"}) == "120 EUR."
    trace = captured_traces.one()
    assert [s.kind for s in calls(trace)] == [StepKind.LLM, StepKind.TOOL, StepKind.LLM]
    assert trace.input == "What does INV-7 say?" and trace.output == "120 EUR."
    assert trace.metadata["integration"] == "anthropic"


def test_streamed_message_with_a_tool_use(captured_traces: Any) -> None:
    events = [
        {
            "type": "message_start",
            "message": {
                **_message("msg_s", [], "tool_use"),
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 40, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "Checking "},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "now."},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_s",
                "name": "get_invoice",
                "input": {},
            },
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"id": "IN'},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": 'V-9"}'},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 25},
        },
        {"type": "message_stop"},
    ]
    with agentlens.run():
        stream = client(Server(events)).messages.create(
            model="claude-sonnet-4-6",
            max_tokens=100,
            stream=True,
            messages=[{"role": "user", "content": "INV-9?"}],
        )
        assert len(list(stream)) == len(events)
    llm, tool = calls(captured_traces.one())
    assert llm.output["content"] == "Checking now."
    assert llm.output["tool_calls"] == [
        {"id": "toolu_s", "name": "get_invoice", "arguments": {"id": "INV-9"}}
    ]
    assert (llm.attributes["input_tokens"], llm.attributes["output_tokens"]) == (40, 25)
    assert llm.attributes["stop_reason"] == "tool_use"
    assert tool.name == "get_invoice" and tool.attributes.get("incomplete") is True


def test_async_client(captured_traces: Any) -> None:
    server = Server(_message("msg_a", [{"type": "text", "text": "async ok"}]))
    c = wrap(
        anthropic.AsyncAnthropic(
            api_key="k",
            base_url="http://fake.anthropic",
            http_client=httpx.AsyncClient(transport=httpx.MockTransport(server)),
            max_retries=0,
        )
    )

    async def main() -> None:
        async with agentlens.run():
            await c.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=10,
                messages=[{"role": "user", "content": "x"}],
            )

    asyncio.run(main())
    (step,) = calls(captured_traces.one())
    assert step.output["content"] == "async ok"
    assert step.attributes["cost_usd"] == pytest.approx(
        (200 * 3 + 150 * 0.3 + 10 * 3.75 + 30 * 15) / 1e6
    )


def test_a_missing_anthropic_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(MissingExtraError, match=r"agentlens\[anthropic\]"):
        wrap(object())


def _async_client(server: Server) -> anthropic.AsyncAnthropic:
    return wrap(
        anthropic.AsyncAnthropic(
            api_key="k",
            base_url="http://fake.anthropic",
            http_client=httpx.AsyncClient(transport=httpx.MockTransport(server)),
            max_retries=0,
        )
    )


def _text_events(*parts: str) -> list[dict[str, Any]]:
    start = {**_message("msg_t", [], "end_turn"), "stop_reason": None}
    deltas = [
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}
        for p in parts
    ]
    return [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *deltas,
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 3},
        },
        {"type": "message_stop"},
    ]


def test_an_async_stream_read_with_anext_is_passed_through_and_recorded(
    captured_traces: Any,
) -> None:
    # anext() works on the SDK's AsyncStream; it raised TypeError on the wrapped one.
    events = _text_events("INV-7 ", "is paid.")
    c = _async_client(Server(events))

    async def main() -> int:
        async with agentlens.run():
            stream = await c.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=10,
                stream=True,
                messages=[{"role": "user", "content": "INV-7?"}],
            )
            seen = 0
            while True:
                try:
                    await anext(stream)
                except StopAsyncIteration:
                    return seen
                seen += 1

    assert asyncio.run(main()) == len(events)
    (step,) = calls(captured_traces.one())
    assert step.output == {"role": "assistant", "content": "INV-7 is paid."}
    assert step.attributes["stop_reason"] == "end_turn"


def test_a_client_made_by_with_options_records_too(captured_traces: Any) -> None:
    # with_options() returns a new client whose messages.create was not wrapped: unrecorded.
    server = Server(_message("msg_o", [{"type": "text", "text": "copied ok"}]))
    c = client(server).with_options(timeout=5.0)
    with agentlens.run():
        c.messages.create(
            model="claude-sonnet-4-6", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    (step,) = calls(captured_traces.one())
    assert step.output == {"role": "assistant", "content": "copied ok"}


def test_with_raw_response_records_the_parsed_reply(captured_traces: Any) -> None:
    server = Server(_message("msg_r", [{"type": "text", "text": "raw ok"}, TOOL_USE], "tool_use"))
    c = client(server)
    with agentlens.run():
        raw = c.messages.with_raw_response.create(
            model="claude-sonnet-4-6", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
        assert raw.parse().content[0].text == "raw ok"
    llm, tool = calls(captured_traces.one())
    assert llm.output["content"] == "raw ok"
    assert llm.output["tool_calls"][0]["id"] == "toolu_1"
    assert tool.name == "get_invoice"


def test_async_with_raw_response_records_the_parsed_reply(captured_traces: Any) -> None:
    c = _async_client(Server(_message("msg_r", [{"type": "text", "text": "async raw"}])))

    async def main() -> str:
        async with agentlens.run():
            raw = await c.messages.with_raw_response.create(
                model="claude-sonnet-4-6",
                max_tokens=10,
                messages=[{"role": "user", "content": "x"}],
            )
            message = raw.parse()
            if not isinstance(message, anthropic.types.Message):
                message = await message
            return str(message.content[0].text)

    assert asyncio.run(main()) == "async raw"
    (step,) = calls(captured_traces.one())
    assert step.output["content"] == "async raw"


def test_the_system_prompt_and_the_question_are_steps(captured_traces: Any) -> None:
    # system= and the user's text were only in the llm step's input, which is not evidence.
    server = Server(
        _message("msg_1", [TOOL_USE], "tool_use"),
        _message("msg_2", [{"type": "text", "text": "INV-7 is 120 EUR."}]),
    )
    with agentlens.run():
        _loop(client(server), {"content": "INV-7: 120 EUR"})
    steps = captured_traces.one().steps
    assert [(s.kind, s.output) for s in steps[:2]] == [
        (StepKind.SYSTEM, "Be exact."),
        (StepKind.USER, "What does INV-7 say?"),
    ]
    # the message that carries only the tool result is no user step
    assert [s.kind for s in steps[2:]] == [StepKind.LLM, StepKind.TOOL, StepKind.LLM]


def test_messages_given_as_a_generator_are_still_sent(captured_traces: Any) -> None:
    server = Server(_message("msg_g", [{"type": "text", "text": "ok"}]))
    sent = [{"role": "user", "content": "hello"}]
    with agentlens.run():
        client(server).messages.create(
            model="claude-sonnet-4-6", max_tokens=10, messages=iter(sent)
        )
    assert server.requests[0]["messages"] == sent
    (llm,) = calls(captured_traces.one())
    assert llm.input == sent


def test_messages_parse_is_recorded(captured_traces: Any) -> None:
    # messages.parse() posts the request itself, not through create(): it went unrecorded.
    server = Server(_message("msg_p", [{"type": "text", "text": '{"id": "INV-7"}'}]))
    with agentlens.run():
        client(server).messages.parse(
            model="claude-sonnet-4-6", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    (llm,) = calls(captured_traces.one())
    assert llm.output["content"] == '{"id": "INV-7"}'


def test_a_server_tool_and_its_result_are_a_tool_step(captured_traces: Any) -> None:
    # Web search (a tool Anthropic runs) came back in the reply as server_tool_use and
    # web_search_tool_result blocks, which were dropped: the answer's sources were no evidence.
    from agentlens.eval import run_scorers

    url = "https://status.example.com/incidents/INC-4821"
    found = [{"type": "web_search_result", "url": url, "title": "INC-4821 resolved",
              "encrypted_content": "abc", "page_age": "2 days ago"}]  # fmt: skip
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
              "input": {"query": "INC-4821 status"}}  # fmt: skip
    server = Server(
        _message(
            "msg_w",
            [
                search,
                {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": found},
                {"type": "text", "text": f"INC-4821 is resolved, see {url}"},
            ],
        )
    )
    with agentlens.run(agent="ops", input="Is INC-4821 resolved?") as run:
        reply = client(server).messages.create(
            model="claude-sonnet-4-6",
            max_tokens=100,
            tools=[{"type": "web_search_20250305", "name": "web_search"}],
            messages=[{"role": "user", "content": "Is INC-4821 resolved?"}],
        )
        run.output = reply.content[-1].text
    trace = captured_traces.one()
    tool, llm = calls(trace)  # the search ran before the reply was written: evidence for it
    assert (tool.name, tool.input, tool.output) == (
        "web_search",
        {"query": "INC-4821 status"},
        found,
    )
    assert tool.attributes["served"] is True and "incomplete" not in tool.attributes
    assert "tool_calls" not in llm.output  # nothing for the caller to answer
    report = run_scorers(["no_fabricated_refs"], trace=trace)
    assert report.results["no_fabricated_refs"].passed, report


def test_documents_in_the_question_are_evidence(captured_traces: Any) -> None:
    # A document (or search_result) block is the context handed to the model: the user step
    # kept only the text blocks, so an answer citing the document was flagged.
    from agentlens.eval import run_scorers

    document = {"type": "document", "title": "policy.md", "citations": {"enabled": True},
                "source": {"type": "text", "media_type": "text/plain",
                           "data": "Refunds over 500 EUR need approval from FIN-42."}}  # fmt: skip
    question = {"type": "text", "text": "Who approves a 700 EUR refund?"}
    server = Server(_message("msg_d", [{"type": "text", "text": "FIN-42 approves it."}]))
    with agentlens.run(agent="billing") as run:
        reply = client(server).messages.create(
            model="claude-sonnet-4-6",
            max_tokens=50,
            messages=[{"role": "user", "content": [document, question]}],
        )
        run.output = reply.content[0].text
    trace = captured_traces.one()
    user = next(s for s in trace.steps if s.kind is StepKind.USER)
    assert user.output == [document, question]
    report = run_scorers(["no_fabricated_refs"], trace=trace)
    assert report.results["no_fabricated_refs"].passed, report


def test_the_cost_prices_prompt_cache_reads_and_writes(captured_traces: Any) -> None:
    # input_tokens counts only the uncached input: cache writes cost 1.25x the input price
    # (2x with the 1-hour TTL) and cache reads 0.1x; they were left out of cost_usd.
    split = _message("msg_c", [{"type": "text", "text": "ok"}])
    split["usage"] = {
        "input_tokens": 20,
        "output_tokens": 10,
        "cache_read_input_tokens": 4000,
        "cache_creation_input_tokens": 1000,
        "cache_creation": {"ephemeral_5m_input_tokens": 600, "ephemeral_1h_input_tokens": 400},
    }
    c = client(Server(_message("msg_b", [{"type": "text", "text": "ok"}]), split))
    with agentlens.run():
        for _ in range(2):
            c.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=10,
                messages=[{"role": "user", "content": "x"}],
            )
    first, second = calls(captured_traces.one())
    # 200 input, 150 cache reads, 10 cache writes (TTL not said: 5 minutes), 30 output
    assert first.attributes["cost_usd"] == pytest.approx(
        (200 * 3 + 150 * 0.3 + 10 * 3.75 + 30 * 15) / 1e6
    )
    assert second.attributes["cache_write_1h_tokens"] == 400
    assert second.attributes["cost_usd"] == pytest.approx(
        (20 * 3 + 4000 * 0.3 + 600 * 3.75 + 400 * 6.0 + 10 * 15) / 1e6
    )
