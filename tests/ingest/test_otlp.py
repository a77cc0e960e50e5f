"""The OTLP converter (``agentlens.ingest.otlp``) and ``import --format otlp-json``."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path

import pytest

from _otlp_fixtures import (
    GENAI_TRACE,
    MS,
    OI_TRACE,
    T0,
    event_spans,
    genai_spans,
    legacy_spans,
    openinference_spans,
    request,
    span,
)
from agentlens.errors import FormatError
from agentlens.eval import run_scorers
from agentlens.ingest import get_reader
from agentlens.ingest.otlp import (
    OtlpSpan,
    build_trace,
    read,
    span_records_from_protobuf,
    spans_from_json,
    spans_from_protobuf,
    traces_from_spans,
)
from agentlens.model import StepKind

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "otlp"


def one(spans: list[dict]) -> object:
    [trace] = traces_from_spans(spans_from_json(request(spans)))
    return trace


def test_registered_as_format_otlp_json() -> None:
    assert get_reader("otlp-json") is read


def test_genai_trace_becomes_one_run_with_its_steps() -> None:
    trace = one(genai_spans())
    assert trace.id == GENAI_TRACE  # the trace id, at its width
    assert trace.agent == "support"
    assert trace.input == "Where is the refund for my order?"
    assert trace.output == "Your order ORD-99999 was refunded: 42.50 EUR."
    assert trace.links == {"ticket": "T-1"}
    assert trace.metadata["release"] == "v42"
    assert trace.metadata["conversation_id"] == "conv-1"
    assert [str(s.kind) for s in trace.steps] == ["agent", "system", "user", "llm", "tool", "llm"]
    assert {len(s.id) for s in trace.steps if "." not in s.id} == {16}
    tool = trace.step("2" * 16)
    assert tool.name == "get_order"
    # execute_tool had no arguments/result: paired with the message parts by call id
    assert tool.input == {"customer": "C-7"}
    assert tool.output == {"order_id": "ORD-12345", "refund": "42.50 EUR"}
    chat1, chat2 = trace.step("1" * 16), trace.step("3" * 16)
    assert chat1.attributes["input_tokens"] == 50
    assert chat1.attributes["cache_read_tokens"] == 5
    assert chat2.attributes["cache_write_tokens"] == 7  # the newer name
    assert "tool_calls" in chat1.attributes["finish_reasons"]  # from the attribute
    assert chat2.attributes["finish_reasons"] == ["stop"]  # from the output message
    assert chat1.attributes["model"] == "gpt-4o"
    assert trace.step("1" * 16 + ".system1").output == "Be brief."


def test_messages_as_json_strings_and_as_structured_values_read_alike() -> None:
    as_text = one(genai_spans(structured=False))
    as_values = one(genai_spans(structured=True))
    assert as_text.to_dict() == as_values.to_dict()


def test_spans_in_any_order_and_repeated_make_the_same_run() -> None:
    spans = genai_spans()
    expected = one(spans).to_dict()
    shuffled = spans * 2
    random.Random(7).shuffle(shuffled)
    assert one(shuffled).to_dict() == expected


def test_genai_run_is_flagged_for_its_fabricated_reference() -> None:
    report = run_scorers(["no_fabricated_refs"], trace=one(genai_spans()), save=False)
    score = report.results["no_fabricated_refs"]
    assert not score.passed
    assert [f.text for f in score.findings] == ["ORD-99999"]
    grounded = run_scorers(
        ["no_fabricated_refs"],
        trace=one(genai_spans(answer="Order ORD-12345 is refunded.")),
        save=False,
    )
    assert grounded.results["no_fabricated_refs"].passed


def test_openinference_trace() -> None:
    trace = one(openinference_spans())
    assert trace.id == OI_TRACE
    assert trace.agent == "rag"
    assert trace.input == "What is the return window?"
    assert trace.output == "Returns are accepted within 30 days (see DOC-9f9f9f9f)."
    retrieval = trace.step("a" * 16)
    assert retrieval.kind is StepKind.RETRIEVAL
    assert [d["id"] for d in retrieval.output] == ["DOC-1a2b3c4d", "DOC-5e6f7a8b"]
    llm = trace.step("b" * 16)
    assert llm.attributes["input_tokens"] == 120
    assert llm.attributes["cache_write_tokens"] == 3
    assert llm.input[1] == {"role": "user", "content": "What is the return window?"}
    score = run_scorers(["no_fabricated_refs"], trace=trace, save=False).results[
        "no_fabricated_refs"
    ]
    assert [f.text for f in score.findings] == ["DOC-9f9f9f9f"]


def test_legacy_openllmetry_attributes() -> None:
    trace = one(legacy_spans())
    assert trace.agent == "weather"
    assert trace.input == "Weather in Paris?"
    assert trace.output == "It is 57°F and rainy in Paris."
    llm = next(s for s in trace.steps if s.kind is StepKind.LLM)
    assert llm.attributes["provider"] == "openai"  # gen_ai.system, the old name
    assert llm.attributes["input_tokens"] == 9 and llm.attributes["output_tokens"] == 11
    assert llm.attributes["finish_reasons"] == ["stop"]


def test_messages_as_span_events() -> None:
    trace = one(event_spans())
    assert trace.input == "Hi there"
    assert trace.output == "Hello! How can I help?"
    assert trace.steps[-1].attributes["finish_reasons"] == ["stop"]


def test_retrieval_documents_with_ids_and_scores_only_are_marked_unverifiable() -> None:
    tid = "7" * 32
    spans = [
        span(tid, "7" * 16, None, "invoke_agent kb", 0, 100, {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "kb",
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                {"type": "text", "content": "See DOC-00aa11bb."}], "finish_reason": "stop"}]),
        }),
        span(tid, "8" * 16, "7" * 16, "retrieval kb", 10, 20, {
            "gen_ai.operation.name": "retrieval", "gen_ai.retrieval.query.text": "policy",
            "gen_ai.retrieval.documents": json.dumps([{"id": "doc_1", "score": 0.9}]),
        }),
    ]  # fmt: skip
    trace = one(spans)
    step = trace.step("8" * 16)
    assert step.input == {"query": "policy"}
    assert step.output == [{"id": "doc_1", "score": 0.9}]
    assert step.attributes["truncated"] is True
    assert "without their content" in step.attributes["truncated_reason"]
    score = run_scorers(["no_fabricated_refs"], trace=trace, save=False).results[
        "no_fabricated_refs"
    ]
    assert score.findings and all(f.unverifiable for f in score.findings)


def test_a_tool_call_only_in_messages_becomes_a_tool_step() -> None:
    spans = genai_spans()
    del spans[2]  # no execute_tool span: the call and its response are only in messages
    trace = one(spans)
    tools = [s for s in trace.steps if s.kind is StepKind.TOOL]
    assert len(tools) == 1
    assert tools[0].name == "get_order"
    assert tools[0].output == {"order_id": "ORD-12345", "refund": "42.50 EUR"}


def test_failed_tool_span_and_unknown_attributes() -> None:
    tid = "9" * 32
    spans = [
        span(tid, "9" * 16, None, "invoke_agent a", 0, 100, {"gen_ai.operation.name": "invoke_agent"},
             error="agent failed"),
        span(tid, "a" * 16, "9" * 16, "execute_tool t", 10, 20, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
            "gen_ai.tool.call.arguments": {"q": "x"}, "custom.thing": 3},
            events=[{"name": "exception", "attributes": {
                "exception.type": "TimeoutError", "exception.message": "took too long"}}],
            error="boom"),
    ]  # fmt: skip
    trace = one(spans)
    assert trace.status == "error"
    tool = trace.step("a" * 16)
    assert tool.error == "TimeoutError: took too long"
    assert tool.input == {"q": "x"}
    assert tool.attributes["custom.thing"] == 3


def test_a_trace_without_its_root_is_marked_incomplete() -> None:
    spans = genai_spans()[1:]
    trace = one(spans)
    assert trace.metadata["otel_incomplete"] is True
    assert "otel_incomplete" not in one(genai_spans()).metadata
    spans_ = spans_from_json(request(genai_spans()))
    assert "otel_incomplete" in build_trace(spans_, complete=False).metadata


def test_base64_ids_and_snake_case_keys() -> None:
    doc = request(genai_spans())
    for s in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        s["trace_id"] = base64.b64encode(bytes.fromhex(s.pop("traceId"))).decode()
        s["span_id"] = base64.b64encode(bytes.fromhex(s.pop("spanId"))).decode()
        if "parentSpanId" in s:
            s["parent_span_id"] = base64.b64encode(bytes.fromhex(s.pop("parentSpanId"))).decode()
    [trace] = traces_from_spans(spans_from_json(doc))
    assert trace.to_dict() == one(genai_spans()).to_dict()


def test_protobuf_and_json_encodings_decode_alike() -> None:
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    doc = request(genai_spans(structured=True) + openinference_spans())
    # protobuf's JSON mapping wants base64 ids
    pb_doc = json.loads(json.dumps(doc))
    for s in pb_doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        for key in ("traceId", "spanId", "parentSpanId"):
            if key in s:
                s[key] = base64.b64encode(bytes.fromhex(s[key])).decode()
    message = ParseDict(pb_doc, ExportTraceServiceRequest())
    from_pb = spans_from_protobuf(message.SerializeToString())
    from_json = spans_from_json(doc)
    assert [s.to_dict() for s in from_pb] == [s.to_dict() for s in from_json]
    # What the server stages without decoding reads back as the same spans.
    records = span_records_from_protobuf(message.SerializeToString())
    staged = [OtlpSpan.from_dict(json.loads(r.doc)) for r in records]
    assert [s.to_dict() for s in staged] == [s.to_dict() for s in from_json]
    assert [(r.trace_id, r.span_id, r.root_ended) for r in records] == [
        (s.trace_id, s.span_id, s.is_root and s.end_ns is not None) for s in from_json
    ]
    assert {r.root_ended for r in records} == {True, False}
    assert [r.doc for r in (s.record() for s in from_json)] == [
        json.dumps(s.to_dict(), separators=(",", ":"), ensure_ascii=False) for s in from_json
    ]


def test_protobuf_records_reject_what_decoding_rejects() -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    message = ExportTraceServiceRequest()
    spans = message.resource_spans.add().scope_spans.add().spans
    for trace_id, span_id, parent in (
        (b"\x01" * 16, b"\x02" * 8, b""),
        (b"\x01" * 15, b"\x03" * 8, b""),  # a short trace id
        (b"\x01" * 16, b"\x00" * 8, b""),  # a span id of zeros
        (b"\x01" * 16, b"\x04" * 8, b"\x05" * 7),  # a short parent id
        (b"\x01" * 16, b"\x06" * 8, b"\x00" * 8),  # a parent of zeros: a root
        (b"\x01" * 16, b"\x07" * 8, b"\x00" * 5),  # zeros of another width: a root too
    ):
        spans.add(
            trace_id=trace_id, span_id=span_id, parent_span_id=parent, name="s",
            end_time_unix_nano=5,
        )  # fmt: skip
    body = message.SerializeToString()
    decoded: list[FormatError] = []
    staged: list[FormatError] = []
    good = spans_from_protobuf(body, decoded)
    records = span_records_from_protobuf(body, staged)
    assert [str(e) for e in staged] == [str(e) for e in decoded] and len(staged) == 3
    assert [r.span_id for r in records] == [s.span_id for s in good]
    assert [r.span_id for r in records] == ["02" * 8, "06" * 8, "07" * 8]
    assert [r.root_ended for r in records] == [s.is_root for s in good] == [True, True, True]


def test_doubles_that_json_cannot_hold_keep_their_otlp_spelling(tmp_path: Path) -> None:
    """NaN and the infinities are valid OTLP doubles (their OTLP/JSON spelling is a string);
    a store would write the float as null, so the step keeps the spelling, from either
    encoding, and a finite double stays a number."""
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from agentlens.store import open_store

    doubles = {"nan": "NaN", "up": "Infinity", "down": "-Infinity", "half": 0.5, "one": 1}
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": "1" * 32, "spanId": "2" * 16, "name": "root",
        "startTimeUnixNano": str(T0), "endTimeUnixNano": str(T0 + MS),
        "attributes": [{"key": k, "value": {"doubleValue": v}} for k, v in doubles.items()],
    }]}]}]}  # fmt: skip
    expected = {"nan": "NaN", "up": "Infinity", "down": "-Infinity", "half": 0.5, "one": 1.0}
    pb_doc = json.loads(json.dumps(doc))
    pb_span = pb_doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    for key in ("traceId", "spanId"):
        pb_span[key] = base64.b64encode(bytes.fromhex(pb_span[key])).decode()
    body = ParseDict(pb_doc, ExportTraceServiceRequest()).SerializeToString()
    for spans in (spans_from_json(doc), spans_from_protobuf(body)):
        [trace] = traces_from_spans(spans)
        attributes = trace.steps[0].attributes
        assert {k: attributes[k] for k in expected} == expected
        assert all(type(attributes[k]) is type(v) for k, v in expected.items())
        with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
            store.put_traces([trace])
            stored = store.get_trace(trace.id)
        assert {k: stored.steps[0].attributes[k] for k in expected} == expected


@pytest.mark.parametrize("bad", ["many", "", True, None, [1.5], {"x": 1}])
def test_a_double_that_is_not_a_number_is_refused(bad: object) -> None:
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": "1" * 32, "spanId": "2" * 16,
        "attributes": [{"key": "d", "value": {"doubleValue": bad}}],
    }]}]}]}  # fmt: skip
    with pytest.raises(FormatError) as info:
        spans_from_json(doc)
    assert info.value.field == "resourceSpans[0].scopeSpans[0].spans[0].attributes.d"
    assert "doubleValue is not a number" in str(info.value)


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ([], "$"),
        ({"resourceSpans": {}}, "resourceSpans"),
        ({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz", "spanId": "1" * 16}]}]}]},
         "resourceSpans[0].scopeSpans[0].spans[0].traceId"),
        ({"resourceSpans": [{"scopeSpans": [{"spans": [
            {"traceId": "1" * 32, "spanId": "1" * 16,
             "attributes": [{"key": "a", "value": {"intValue": "x"}}]}]}]}]},
         "resourceSpans[0].scopeSpans[0].spans[0].attributes.a"),
    ],
)  # fmt: skip
def test_malformed_requests_name_the_field(doc: dict, field: str) -> None:
    with pytest.raises(FormatError) as info:
        spans_from_json(doc)
    assert info.value.field == field


def test_malformed_protobuf() -> None:
    with pytest.raises(FormatError):
        spans_from_protobuf(b"\xff\xff\xff\xff")


def test_read_golden_file_and_jsonl(tmp_path: Path) -> None:
    traces = list(read(GOLDEN / "genai_and_openinference.json"))
    assert [t.id for t in traces] == [GENAI_TRACE, OI_TRACE]
    # JSON Lines, one request per line, a trace split across lines: still one run
    spans = genai_spans()
    path = tmp_path / "spans.jsonl"
    path.write_text(json.dumps(request(spans[:2])) + "\n" + json.dumps(request(spans[2:])) + "\n")
    [trace] = list(read(path))
    assert trace.to_dict() == one(spans).to_dict()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(request(spans)) + "\n{not json\n")
    with pytest.raises(FormatError) as info:
        list(read(bad))
    assert info.value.line == 2


def test_cli_import_otlp_json(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from agentlens.cli import app
    from agentlens.store import open_store

    db = f"sqlite:///{tmp_path / 'x.db'}"
    result = CliRunner().invoke(
        app,
        [
            "--db",
            db,
            "import",
            "--format",
            "otlp-json",
            str(GOLDEN / "genai_and_openinference.json"),
        ],
    )
    assert result.exit_code == 0, result.output
    store = open_store(db)
    try:
        assert store.get_trace(GENAI_TRACE).agent == "support"
        assert store.count_runs() == 2
    finally:
        store.close()


def test_a_server_tool_call_and_its_response_in_the_reply_are_a_tool_step() -> None:
    """Built-in tools the provider runs (web search, code interpreter, file search) come back in
    the model's reply as ``server_tool_call`` / ``server_tool_call_response`` parts: what the
    search returned is evidence the answer may cite; it was dropped, so a citation of it was
    reported as fabricated."""
    tid = "5" * 32
    reply = [{"role": "assistant", "finish_reason": "stop", "parts": [
        {"type": "server_tool_call", "id": "srvtoolu_1", "name": "web_search",
         "server_tool_call": {"type": "web_search", "query": "return policy"}},
        {"type": "server_tool_call_response", "id": "srvtoolu_1",
         "server_tool_call_response": {"type": "web_search", "results": [
             {"url": "https://shop.example/policy", "title": "Policy DOC-7c7c7c7c"}]}},
        {"type": "text", "content": "Returns take 30 days (DOC-7c7c7c7c)."},
    ]}]  # fmt: skip
    spans = [
        span(tid, "5" * 16, None, "chat claude", 0, 100, {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "claude",
            "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [
                {"type": "text", "content": "What is the return policy?"}]}]),
            "gen_ai.output.messages": json.dumps(reply),
        }),
    ]  # fmt: skip
    trace = one(spans)
    [tool] = [s for s in trace.steps if s.kind is StepKind.TOOL]
    assert tool.id == "5" * 16 + ".call.srvtoolu_1"
    assert tool.name == "web_search"
    assert tool.input == {"type": "web_search", "query": "return policy"}
    assert tool.output["results"][0]["title"] == "Policy DOC-7c7c7c7c"
    assert tool.attributes["server_tool"] is True and tool.parent_id == "5" * 16
    # evidence of the reply it ends: before the model step
    assert trace.steps.index(tool) < trace.steps.index(trace.step("5" * 16))
    assert trace.output == "Returns take 30 days (DOC-7c7c7c7c)."
    llm = trace.step("5" * 16)
    assert llm.output["tool_calls"] == [{"id": "srvtoolu_1", "name": "web_search",
        "arguments": {"type": "web_search", "query": "return policy"}}]  # fmt: skip
    score = run_scorers(["no_fabricated_refs"], trace=trace, save=False).results[
        "no_fabricated_refs"
    ]
    assert score.passed, score.findings


def test_attributes_the_exporter_dropped_mark_the_step_truncated() -> None:
    """An SDK keeps 128 attributes a span by default and drops the oldest past that (OTLP says
    how many: dropped_attributes_count): documents of a retrieval span sent as flat
    ``retrieval.documents.N.*`` attributes were lost without a word, and the answer's citation
    of one reported as fabricated."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests")
    with tracer.start_as_current_span("rag") as root:
        root.set_attribute("openinference.span.kind", "AGENT")
        root.set_attribute("output.value", "See DOC-00000003.")
        with tracer.start_as_current_span("retrieve") as retrieve:
            retrieve.set_attribute("openinference.span.kind", "RETRIEVER")
            for i in range(70):  # 140 attributes: the 13 oldest are dropped
                retrieve.set_attribute(f"retrieval.documents.{i}.document.id", f"DOC-{i:08x}")
                retrieve.set_attribute(f"retrieval.documents.{i}.document.content", f"text {i}")
    provider.shutdown()
    body = encode_spans(memory.get_finished_spans()).SerializeToString()
    [trace] = traces_from_spans(spans_from_protobuf(body))
    [step] = [s for s in trace.steps if s.name == "retrieve"]
    assert step.attributes["truncated"] is True
    assert "dropped 13 attributes" in step.attributes["truncated_reason"]
    score = run_scorers(["no_fabricated_refs"], trace=trace, save=False).results[
        "no_fabricated_refs"
    ]
    assert score.findings and all(f.unverifiable for f in score.findings)
    # the JSON encoding says it alike (span attributes, events, an event's attributes)
    tid = "6" * 32
    doc = request([span(tid, "6" * 16, None, "invoke_agent a", 0, 10, {"gen_ai.agent.name": "a"},
                        events=[{"name": "gen_ai.user.message", "attributes": {"content": "hi"}}])])  # fmt: skip
    raw = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    raw["droppedAttributesCount"] = 2
    raw["droppedEventsCount"] = 1
    raw["events"][0]["droppedAttributesCount"] = 3
    [json_trace] = traces_from_spans(spans_from_json(doc))
    reason = json_trace.steps[0].attributes["truncated_reason"]
    assert "dropped 5 attributes and 1 event" in reason, reason
    # a step made from the span's messages (here a user message of a model call) says so too
    chat = span(tid, "7" * 16, "6" * 16, "chat m", 1, 9, {"gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [
            {"type": "text", "content": "Where is ORD-1?"}]}])})  # fmt: skip
    chat["droppedAttributesCount"] = 1
    [chat_trace] = traces_from_spans(spans_from_json(request([chat])))
    [user] = [s for s in chat_trace.steps if s.kind is StepKind.USER]
    assert user.attributes["truncated"] is True
    assert spans_from_json(doc)[0].to_dict()["dropped_attributes"] == 5
    assert OtlpSpan.from_dict(spans_from_json(doc)[0].to_dict()).dropped_events == 1


def test_a_tool_result_in_the_conversation_history_is_evidence() -> None:
    """A later turn of a conversation (its own trace) sends the earlier turns as history: a tool
    result among them was shown to the model, so an answer citing it is grounded; no span of
    the trace made the call, and the result was not evidence."""
    tid = "9" * 32
    history = [
        {"role": "user", "parts": [{"type": "text", "content": "Where is my order?"}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_0", "name": "get_order",
                                         "arguments": {"customer": "C-7"}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_0",
                                    "response": {"order_id": "ORD-55555", "status": "shipped"}}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "It has shipped."}]},
        {"role": "user", "parts": [{"type": "text", "content": "What is its number?"}]},
    ]  # fmt: skip
    spans = [
        span(tid, "9" * 16, None, "chat gpt-4o", 0, 100, {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
            "gen_ai.input.messages": json.dumps(history),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                {"type": "text", "content": "Your order is ORD-55555."}]}]),
        }),
    ]  # fmt: skip
    trace = one(spans)
    [tool] = [s for s in trace.steps if s.kind is StepKind.TOOL]
    assert (tool.id, tool.name) == ("9" * 16 + ".call.call_0", "get_order")
    assert tool.input == {"customer": "C-7"}
    assert tool.output == {"order_id": "ORD-55555", "status": "shipped"}
    assert tool.attributes["from_history"] is True
    assert trace.steps.index(tool) < trace.steps.index(trace.step("9" * 16))
    score = run_scorers(["no_fabricated_refs"], trace=trace, save=False).results[
        "no_fabricated_refs"
    ]
    assert score.passed, score.findings
    # within one trace, a call a span's reply made is its own step once, after that span
    in_trace = [s for s in one(genai_spans()).steps if s.kind is StepKind.TOOL]
    assert len(in_trace) == 1


def test_a_span_whose_parent_is_remote_is_the_root() -> None:
    """OTLP span flags 0x100 | 0x200: the parent is in another process (the trace was continued
    from an upstream service): the span is the run's root, in either encoding."""
    tid = "ab" * 16
    entry = span(tid, "1" * 16, "f" * 16, "invoke_agent a", 0, 50, {"gen_ai.agent.name": "a"})
    entry["flags"] = 0x300
    child = span(tid, "2" * 16, "1" * 16, "execute_tool t", 10, 20, {"gen_ai.tool.name": "t"})
    [trace] = traces_from_spans(spans_from_json(request([child, entry])))
    assert "otel_incomplete" not in trace.metadata
    assert (trace.name, trace.agent) == ("invoke_agent a", "a")
    assert trace.step("1" * 16).parent_id is None
    decoded = spans_from_json(request([entry]))[0]
    assert decoded.is_root and decoded.record().root_ended
    assert OtlpSpan.from_dict(decoded.to_dict()).is_root
    # the remote bit without "has is_remote" says nothing; a local parent is not a root
    entry["flags"] = 0x200
    assert not spans_from_json(request([entry]))[0].is_root
    entry["flags"] = 0x100
    assert not spans_from_json(request([entry]))[0].is_root
