"""OTLP/JSON traces written for the tests, from the GenAI and OpenInference conventions.

Each builder returns an ``ExportTraceServiceRequest`` in the OTLP/JSON encoding (a dict).
"""

from __future__ import annotations

import json
from typing import Any

T0 = 1_764_583_200_000_000_000  # 2025-12-01T10:00:00Z in ns
MS = 1_000_000


def value(v: Any) -> dict[str, Any]:
    """An OTLP/JSON AnyValue."""
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, str):
        return {"stringValue": v}
    if isinstance(v, list):
        return {"arrayValue": {"values": [value(x) for x in v]}}
    if isinstance(v, dict):
        return {"kvlistValue": {"values": [{"key": k, "value": value(x)} for k, x in v.items()]}}
    raise TypeError(v)


def attrs(d: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": value(v)} for k, v in d.items()]


def span(
    trace_id: str,
    span_id: str,
    parent: str | None,
    name: str,
    start_ms: int,
    end_ms: int | None,
    attributes: dict[str, Any],
    *,
    events: list[dict[str, Any]] | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(T0 + start_ms * MS),
        "attributes": attrs(attributes),
    }
    if end_ms is not None:
        out["endTimeUnixNano"] = str(T0 + end_ms * MS)
    if parent:
        out["parentSpanId"] = parent
    if events:
        out["events"] = [
            {
                "name": e["name"],
                "timeUnixNano": str(T0 + e.get("at", start_ms) * MS),
                "attributes": attrs(e.get("attributes", {})),
            }
            for e in events
        ]
    if error:
        out["status"] = {"code": 2, "message": error}
    return out


def request(spans: list[dict[str, Any]], service: str = "support-svc") -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": attrs({"service.name": service, "service.version": "v42"})
                },
                "scopeSpans": [{"scope": {"name": "tests"}, "spans": spans}],
            }
        ]
    }


def request_pb(spans: list[dict[str, Any]], service: str = "support-svc") -> bytes:
    """The spans as a protobuf ``ExportTraceServiceRequest`` (ids in bytes, as exporters send)."""
    import base64

    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    doc = request(json.loads(json.dumps(spans)), service)
    for s in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        for key in ("traceId", "spanId", "parentSpanId"):
            if key in s:
                s[key] = base64.b64encode(bytes.fromhex(s[key])).decode()
    return bytes(ParseDict(doc, ExportTraceServiceRequest()).SerializeToString())


GENAI_TRACE = "0af7651916cd43dd8448eb211c80319c"
OI_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
LEGACY_TRACE = "5b8efff798038103d269b633813fc60c"


def genai_spans(
    trace_id: str = GENAI_TRACE, *, answer: str | None = None, structured: bool = False
) -> list[dict[str, Any]]:
    """A support agent (gen_ai.* conventions): invoke_agent -> chat -> execute_tool -> chat.

    The tool returns order ORD-12345 for 42.50 EUR; the default answer cites ORD-99999, which
    no tool returned (a fabricated reference)."""
    answer = answer or "Your order ORD-99999 was refunded: 42.50 EUR."
    question = "Where is the refund for my order?"
    in1 = [{"role": "user", "parts": [{"type": "text", "content": question}]}]
    out1 = [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "call_1",
                    "name": "get_order",
                    "arguments": {"customer": "C-7"},
                }
            ],
            "finish_reason": "tool_call",
        }
    ]
    in2 = (
        in1
        + out1
        + [
            {
                "role": "tool",
                "parts": [
                    {
                        "type": "tool_call_response",
                        "id": "call_1",
                        "response": {"order_id": "ORD-12345", "refund": "42.50 EUR"},
                    }
                ],
            }
        ]
    )
    out2 = [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": answer}],
            "finish_reason": "stop",
        }
    ]
    enc = (lambda v: v) if structured else json.dumps
    root, chat1, tool, chat2 = (trace_id[:16], "1" * 16, "2" * 16, "3" * 16)
    return [
        span(
            trace_id,
            root,
            None,
            "invoke_agent support",
            0,
            900,
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "support",
                "gen_ai.conversation.id": "conv-1",
                "gen_ai.provider.name": "openai",
                "gen_ai.input.messages": enc(in1),
                "gen_ai.output.messages": enc(out2),
                "agentlens.link.ticket": "T-1",
            },
        ),
        span(
            trace_id,
            chat1,
            root,
            "chat gpt-4o",
            10,
            300,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.provider.name": "openai",
                "gen_ai.system_instructions": enc([{"type": "text", "content": "Be brief."}]),
                "gen_ai.input.messages": enc(in1),
                "gen_ai.output.messages": enc(out1),
                "gen_ai.usage.input_tokens": 50,
                "gen_ai.usage.output_tokens": 12,
                "gen_ai.usage.cache_read.input_tokens": 5,
                "gen_ai.response.finish_reasons": ["tool_calls"],
            },
        ),
        span(
            trace_id,
            tool,
            root,
            "execute_tool get_order",
            310,
            400,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_order",
                "gen_ai.tool.call.id": "call_1",
            },
        ),
        span(
            trace_id,
            chat2,
            root,
            "chat gpt-4o",
            410,
            890,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.input.messages": enc(in2),
                "gen_ai.output.messages": enc(out2),
                "gen_ai.usage.input_tokens": 80,
                "gen_ai.usage.output_tokens": 20,
                "gen_ai.usage.cache_write.input_tokens": 7,
            },
        ),
    ]


def openinference_spans(trace_id: str = OI_TRACE) -> list[dict[str, Any]]:
    """A RAG agent (OpenInference): AGENT -> RETRIEVER -> LLM; the answer cites DOC-9f9f9f9f,
    which the retriever did not return."""
    root, ret, llm = (trace_id[:16], "a" * 16, "b" * 16)
    question = "What is the return window?"
    return [
        span(
            trace_id,
            root,
            None,
            "rag-agent",
            0,
            500,
            {
                "openinference.span.kind": "AGENT",
                "input.value": question,
                "output.value": "Returns are accepted within 30 days (see DOC-9f9f9f9f).",
                "agent.name": "rag",
            },
        ),
        span(
            trace_id,
            ret,
            root,
            "retrieve",
            10,
            100,
            {
                "openinference.span.kind": "RETRIEVER",
                "input.value": question,
                "retrieval.documents.0.document.id": "DOC-1a2b3c4d",
                "retrieval.documents.0.document.content": "Returns are accepted within 30 days.",
                "retrieval.documents.0.document.score": 0.92,
                "retrieval.documents.1.document.id": "DOC-5e6f7a8b",
                "retrieval.documents.1.document.content": "Shipping takes 3 business days.",
                "retrieval.documents.1.document.score": 0.41,
            },
        ),
        span(
            trace_id,
            llm,
            root,
            "llm",
            110,
            490,
            {
                "openinference.span.kind": "LLM",
                "llm.model_name": "claude-sonnet",
                "llm.input_messages.0.message.role": "system",
                "llm.input_messages.0.message.content": "Answer from the documents.",
                "llm.input_messages.1.message.role": "user",
                "llm.input_messages.1.message.content": question,
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": "Returns are accepted within 30 days (see DOC-9f9f9f9f).",
                "llm.token_count.prompt": 120,
                "llm.token_count.completion": 15,
                "llm.token_count.prompt_details.cache_write": 3,
            },
        ),
    ]


def legacy_spans(trace_id: str = LEGACY_TRACE) -> list[dict[str, Any]]:
    """OpenLLMetry-style flat prompt/completion attributes and message events (no agent span)."""
    root, chat = (trace_id[:16], "c" * 16)
    return [
        span(
            trace_id,
            root,
            None,
            "workflow",
            0,
            300,
            {"traceloop.span.kind": "workflow", "traceloop.entity.name": "weather"},
        ),
        span(
            trace_id,
            chat,
            root,
            "openai.chat",
            5,
            290,
            {
                "llm.request.type": "chat",
                "gen_ai.system": "openai",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.prompt.0.role": "user",
                "gen_ai.prompt.0.content": "Weather in Paris?",
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.content": "It is 57°F and rainy in Paris.",
                "gen_ai.completion.0.finish_reason": "stop",
                "gen_ai.usage.prompt_tokens": 9,
                "gen_ai.usage.completion_tokens": 11,
            },
        ),
    ]


def event_spans(trace_id: str = "6c8efff798038103d269b633813fc60d") -> list[dict[str, Any]]:
    """Messages as span events (gen_ai.user.message, gen_ai.choice), the older convention."""
    return [
        span(
            trace_id,
            trace_id[:16],
            None,
            "chat gpt-4o",
            0,
            100,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.system": "openai",
                "gen_ai.request.model": "gpt-4o",
            },
            events=[
                {"name": "gen_ai.user.message", "attributes": {"content": "Hi there"}},
                {
                    "name": "gen_ai.choice",
                    "at": 90,
                    "attributes": {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": "Hello! How can I help?"},
                    },
                },
            ],
        ),
    ]
