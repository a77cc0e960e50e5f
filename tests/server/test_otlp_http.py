"""``POST /v1/traces``: OTLP/HTTP in JSON and protobuf, gzip, partial success, limits."""

from __future__ import annotations

import gzip
import json

from _server_api import Api, wait_until

from _otlp_fixtures import (
    GENAI_TRACE,
    OI_TRACE,
    genai_spans,
    openinference_spans,
    request,
    request_pb,
    span,
)
from agentlens.errors import RunNotFoundError


def stored(api: Api, run_id: str) -> object:
    def get() -> object:
        try:
            return api.store.get_trace(run_id)
        except RunNotFoundError:
            return None

    return wait_until(get)


def post_json(api: Api, doc: object, **headers: str) -> object:
    return api.post(
        "/v1/traces",
        content=json.dumps(doc),
        headers={"Content-Type": "application/json", **headers},
    )


def test_json_request_becomes_a_run(api: Api) -> None:
    r = post_json(api, request(genai_spans() + openinference_spans()))
    assert r.status_code == 200, r.text
    assert r.json() == {}
    run = stored(api, GENAI_TRACE)
    assert run.agent == "support" and run.project == "default"
    assert stored(api, OI_TRACE).agent == "rag"


def test_spans_split_over_requests_in_any_order_join_one_run(api: Api) -> None:
    spans = genai_spans()
    root, children = spans[0], spans[1:]
    for s in reversed(children):
        assert post_json(api, request([s])).status_code == 200
    # not complete yet: the root has not arrived
    assert api.store.count_runs() == 0
    assert post_json(api, request([root])).status_code == 200
    run = stored(api, GENAI_TRACE)
    assert len([s for s in run.steps if "." not in s.id]) == 4
    assert "otel_incomplete" not in run.metadata


def test_a_late_span_rebuilds_the_run(api: Api) -> None:
    spans = genai_spans()
    post_json(api, request(spans[:3]))
    first = stored(api, GENAI_TRACE)
    assert "3" * 16 not in {s.id for s in first.steps}
    post_json(api, request(spans[3:]))
    wait_until(lambda: "3" * 16 in {s.id for s in api.store.get_trace(GENAI_TRACE).steps})


def test_a_trace_without_root_is_stored_after_the_idle_time(make_api) -> None:  # type: ignore[no-untyped-def]
    api = make_api(idle_timeout_s=0.3)
    post_json(api, request(genai_spans()[1:]))
    run = stored(api, GENAI_TRACE)
    assert run.metadata["otel_incomplete"] is True


def test_duplicate_spans_are_stored_once(api: Api) -> None:
    doc = request(genai_spans())
    post_json(api, doc)
    post_json(api, doc)
    stored(api, GENAI_TRACE)
    n = api.store.read(lambda c: c.execute("SELECT count(*) FROM otlp_spans").fetchone()[0])
    assert n == 4


def test_protobuf_and_gzip(api: Api) -> None:
    import base64

    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )

    doc = request(genai_spans(structured=True))
    for s in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        for k in ("traceId", "spanId", "parentSpanId"):
            if k in s:
                s[k] = base64.b64encode(bytes.fromhex(s[k])).decode()
    body = ParseDict(doc, ExportTraceServiceRequest()).SerializeToString()
    r = api.post(
        "/v1/traces",
        content=gzip.compress(body),
        headers={"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"},
    )
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/x-protobuf"
    response = ExportTraceServiceResponse.FromString(r.content)
    assert response.partial_success.rejected_spans == 0
    assert stored(api, GENAI_TRACE).agent == "support"


def test_partial_success_reports_rejected_spans(api: Api) -> None:
    doc = request(genai_spans())
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"].append({"traceId": "nothex", "spanId": "x"})
    r = post_json(api, doc)
    assert r.status_code == 200
    body = r.json()
    assert body["partialSuccess"]["rejectedSpans"] == "1"
    assert "traceId" in body["partialSuccess"]["errorMessage"]
    assert stored(api, GENAI_TRACE)


def test_malformed_bodies_get_400_with_the_error_shape(api: Api) -> None:
    """A JSON request gets the API's error shape, a protobuf one a google.rpc.Status."""
    r = api.post("/v1/traces", content=b"{nope", headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "invalid_request"
    r = api.post(
        "/v1/traces", content=b"\xff\xff\xff", headers={"Content-Type": "application/x-protobuf"}
    )
    assert r.status_code == 400 and "protobuf" in status_of(r).message
    r = post_json(api, {"resourceSpans": 3})
    assert r.status_code == 400 and "resourceSpans" in r.json()["error"]["message"]
    r = api.post("/v1/traces", content=b"x", headers={"Content-Type": "text/plain"})
    assert r.status_code == 415 and r.json()["error"]["code"] == "unsupported_media_type"
    r = api.post(
        "/v1/traces",
        content=b"not gzip",
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    assert r.status_code == 400


def test_size_limit_counts_the_decompressed_body(make_api) -> None:  # type: ignore[no-untyped-def]
    api = make_api(max_body_bytes=100_000)
    big = b"{" + b" " * 200_000 + b"}"
    r = api.post("/v1/traces", content=big, headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and r.json()["error"]["code"] == "too_large"
    bomb = gzip.compress(b" " * 50_000_000)  # ~50 KB compressed, 50 MB inflated
    assert len(bomb) < 100_000
    r = api.post(
        "/v1/traces",
        content=bomb,
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    assert r.status_code == 413
    assert "decompressed" in r.json()["error"]["message"]


def test_overloaded_writer_answers_429_with_retry_after(make_api) -> None:  # type: ignore[no-untyped-def]
    api = make_api(max_pending_spans=1)
    ingestor = api.app.state.agentlens.ingestor
    # hold the writer: a pending job that is never taken
    ingestor.shutdown()
    ingestor._stop = False
    ingestor._pending = 1
    r = post_json(api, request(genai_spans()))
    assert r.status_code == 429
    assert r.headers["Retry-After"] == "1"
    assert r.json()["error"]["code"] == "overloaded"
    assert ingestor.metrics.requests_refused == 1
    ingestor._pending = 0


def status_of(r: object) -> object:
    """The google.rpc.Status an OTLP error response carries in protobuf."""
    from google.rpc.status_pb2 import Status

    return Status.FromString(r.content)  # type: ignore[attr-defined]


def test_a_protobuf_request_gets_its_errors_as_a_protobuf_status(make_api) -> None:  # type: ignore[no-untyped-def]
    """OTLP/HTTP: every 4xx/5xx body is a google.rpc.Status in the request's encoding, with
    the request's Content-Type (exporters decode it to log why); JSON keeps the error shape."""
    api = make_api(max_body_bytes=10_000)
    pb = {"Content-Type": "application/x-protobuf"}
    r = api.post("/v1/traces", content=b"\xff\xff\xff", headers=pb)
    assert r.status_code == 400
    assert r.headers["content-type"] == "application/x-protobuf"
    status = status_of(r)
    assert status.code == 3 and "protobuf" in status.message  # INVALID_ARGUMENT
    r = api.post("/v1/traces", content=b"\xff", headers={"Content-Type": "application/protobuf"})
    assert r.status_code == 400 and r.headers["content-type"] == "application/protobuf"
    assert "protobuf" in status_of(r).message
    r = api.post("/v1/traces", content=b"\x00" * 20_000, headers=pb)
    assert r.status_code == 413 and "larger than" in status_of(r).message
    r = api.post("/v1/traces", content=request_pb(genai_spans()), headers={**pb,
                 "Content-Encoding": "br"})  # fmt: skip
    assert r.status_code == 415 and "Content-Encoding" in status_of(r).message
    r = api.as_(client="10.1.2.3").post("/v1/traces", content=request_pb(genai_spans()), headers=pb)
    assert r.status_code == 401 and r.headers["content-type"] == "application/x-protobuf"
    assert status_of(r).code == 16 and r.headers["WWW-Authenticate"] == "Bearer"  # UNAUTHENTICATED
    # success: the response's Content-Type is the request's
    r = api.post("/v1/traces", content=request_pb(genai_spans()),
                 headers={"Content-Type": "application/protobuf"})  # fmt: skip
    assert r.status_code == 200 and r.headers["content-type"] == "application/protobuf"
    # a JSON request keeps the API's one error shape
    r = api.post("/v1/traces", content=b"{nope", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request"


def test_an_overloaded_writer_answers_a_protobuf_request_with_a_status(make_api) -> None:  # type: ignore[no-untyped-def]
    api = make_api(max_pending_spans=1)
    ingestor = api.app.state.agentlens.ingestor
    ingestor.shutdown()
    ingestor._stop = False
    ingestor._pending = 1
    r = api.post("/v1/traces", content=request_pb(genai_spans()),
                 headers={"Content-Type": "application/x-protobuf"})  # fmt: skip
    assert r.status_code == 429 and r.headers["Retry-After"] == "1"
    assert r.headers["content-type"] == "application/x-protobuf"
    assert status_of(r).code == 8  # RESOURCE_EXHAUSTED
    ingestor._pending = 0


def test_a_gzip_body_of_several_members_is_read_whole(api: Api) -> None:
    """A gzip stream may hold several members (RFC 1952; what concatenating gzip files or a
    writer that restarts its stream gives): the spans in the second were dropped under a 200."""
    body = gzip.compress(request_pb(genai_spans())) + gzip.compress(
        request_pb(openinference_spans())
    )
    r = api.post("/v1/traces", content=body,
                 headers={"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"})  # fmt: skip
    assert r.status_code == 200, r.text
    assert stored(api, GENAI_TRACE).agent == "support"
    assert stored(api, OI_TRACE).agent == "rag"


def test_the_size_limit_counts_every_gzip_member(make_api) -> None:  # type: ignore[no-untyped-def]
    api = make_api(max_body_bytes=100_000)
    body = gzip.compress(b" " * 60_000) + gzip.compress(b" " * 60_000)
    r = api.post("/v1/traces", content=body,
                 headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})  # fmt: skip
    assert r.status_code == 413 and "decompressed" in r.json()["error"]["message"]


def test_a_body_nested_too_deeply_is_a_400_not_a_500(api: Api) -> None:
    """A permanent fault of the request is a 400 (not retried); it was an internal error."""
    body = b"[" * 100_000 + b"]" * 100_000
    r = api.post("/v1/traces", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "nested too deeply" in r.json()["error"]["message"]


def deep_value(depth: int) -> object:
    value: object = "x"
    for _ in range(depth):
        value = {"k": value}
    return value


def test_an_attribute_nested_too_deeply_is_rejected_and_the_other_traces_built(api: Api) -> None:
    """A span with an attribute value nested past 64 levels is rejected (partial success); it
    was acknowledged, then could not be read back from staging, and the assembler retried it
    for ever: no run of any trace was built after it."""
    deep = span("c" * 32, "d" * 16, None, "root", 0, 10, {"deep": deep_value(200)})
    r = post_json(api, request([deep]))
    assert r.status_code == 200
    body = r.json()["partialSuccess"]
    assert body["rejectedSpans"] == "1" and "nested deeper than 64" in body["errorMessage"]
    kept = span("e" * 32, "f" * 16, None, "root", 0, 10, {"ok": deep_value(60)})
    assert post_json(api, request([kept])).json() == {}
    assert post_json(api, request(genai_spans())).status_code == 200
    assert stored(api, GENAI_TRACE).agent == "support"
    assert stored(api, "e" * 32)


def test_a_staged_trace_that_cannot_be_read_does_not_stop_the_others(api: Api) -> None:
    from agentlens.store._server import StagedSpan

    bad = StagedSpan("default", "c" * 32, "d" * 16, True, '{"trace_id": ' + "[" * 300)
    api.store.stage_spans([bad], 1)
    assert post_json(api, request(genai_spans())).status_code == 200
    assert stored(api, GENAI_TRACE).agent == "support"


def test_a_span_with_a_lone_surrogate_is_rejected_not_the_request(api: Api) -> None:
    """JSON can spell a lone surrogate (``"\\ud800"``), which UTF-8 cannot hold: the span is
    rejected (partial success, naming the field) and the others stored; the whole request was a
    500, which an exporter does not retry, so every span of the batch was lost."""
    bad = span("c" * 32, "d" * 16, None, "root", 0, 10, {"note": "x\ud800y"})
    body = json.dumps(request([bad, *genai_spans()]))
    r = api.post("/v1/traces", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    partial = r.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1"
    assert "spans[0].attributes.note" in partial["errorMessage"]
    assert "surrogate" in partial["errorMessage"]
    assert stored(api, GENAI_TRACE).agent == "support"
    event = span("c" * 32, "d" * 16, None, "root", 0, 10, {},
                 events=[{"name": "e", "attributes": {"\udfffkey": "v"}}])  # fmt: skip
    r = post_json(api, request([event]))
    assert r.json()["partialSuccess"]["rejectedSpans"] == "1"
    r = post_json(api, request(genai_spans(), service="svc\ud800"))
    assert r.status_code == 400 and "resource.attributes.service.name" in r.text


def test_a_nul_character_is_stored_on_every_backend(api: Api) -> None:
    """U+0000 is valid in an OTLP string (protobuf and JSON): PostgreSQL's text and jsonb cannot
    hold it, and the run must be stored all the same, with the other traces."""
    nul = span("c" * 32, "d" * 16, None, "root\x00", 0, 10,
               {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t",
                "gen_ai.tool.call.result": "a\x00b"})  # fmt: skip
    r = api.post("/v1/traces", content=request_pb([nul]),
                 headers={"Content-Type": "application/x-protobuf"})  # fmt: skip
    assert r.status_code == 200, r.content
    assert post_json(api, request(genai_spans())).status_code == 200
    assert stored(api, GENAI_TRACE).agent == "support"
    assert stored(api, "c" * 32).steps[0].output == "a\x00b"


def test_a_trace_continued_from_another_service_is_built_when_its_local_root_ends(
    api: Api,
) -> None:
    """An agent serving a request whose trace began upstream (a traceparent header): its first
    span has a parent, in another process, that is never sent here; OTLP flags it as remote.
    That span is the run's root: the run was built only after the idle timeout (5 minutes),
    marked incomplete."""
    from opentelemetry import trace as trace_api
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests")
    upstream = trace_api.SpanContext(
        int("ab" * 16, 16), int("cd" * 8, 16), is_remote=True,
        trace_flags=trace_api.TraceFlags(1),
    )  # fmt: skip
    context = trace_api.set_span_in_context(trace_api.NonRecordingSpan(upstream))
    with tracer.start_as_current_span("invoke_agent support", context=context) as root:
        root.set_attribute("gen_ai.operation.name", "invoke_agent")
        root.set_attribute("gen_ai.agent.name", "support")
        with tracer.start_as_current_span("execute_tool t") as tool:
            tool.set_attribute("gen_ai.operation.name", "execute_tool")
            tool.set_attribute("gen_ai.tool.name", "t")
    provider.shutdown()
    body = encode_spans(memory.get_finished_spans()).SerializeToString()
    r = api.post("/v1/traces", content=body, headers={"Content-Type": "application/x-protobuf"})
    assert r.status_code == 200
    run = stored(api, "ab" * 16)
    assert "otel_incomplete" not in run.metadata
    assert (run.name, run.agent) == ("invoke_agent support", "support")
    root_step = run.step(format(root.get_span_context().span_id, "016x"))
    assert root_step.parent_id is None
