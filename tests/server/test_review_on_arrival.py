"""Review on arrival: runs that complete over OTLP or the JSON API are reviewed (flags, content
flags), and the review routes read and write review state, scoped to the key's project."""

from __future__ import annotations

import json
from typing import Any

from _server_api import Api, wait_until

from _otlp_fixtures import GENAI_TRACE, OI_TRACE, genai_spans, openinference_spans, request
from agentlens.server._keys import create_key


def flagged_ids(api: Api) -> list[str]:
    return [r["id"] for r in api.get("/api/runs", params={"flagged": "true"}).json()["runs"]]


def test_otlp_runs_are_reviewed_and_flagged(make_api: Any) -> None:
    api = make_api(review=True)
    r = api.post("/v1/traces", content=json.dumps(request(genai_spans() + openinference_spans())),
                 headers={"Content-Type": "application/json"})  # fmt: skip
    assert r.status_code == 200
    wait_until(lambda: set(flagged_ids(api)) == {GENAI_TRACE, OI_TRACE}, timeout=60)
    run = api.get(f"/api/runs/{GENAI_TRACE}").json()
    assert run["flags"]["hallucination_detected"] is True
    assert "fabricated_grounding" in run["flags"]["failure_modes"]
    assert "ORD-99999" in run["flags"]["hallucination_reason"]
    content = api.get("/api/content/ticket/T-1").json()
    assert content["hallucination_suspected"] is True
    assert content["runs"][0]["run_id"] == GENAI_TRACE
    assert api.get("/api/content/ticket/nope").json()["hallucination_suspected"] is False
    queue = api.get("/api/review/queue").json()["runs"]
    assert {r["id"] for r in queue} == {GENAI_TRACE, OI_TRACE}
    v = api.post(f"/api/runs/{GENAI_TRACE}/verdict", json={"verdict": "confirmed", "finding": 1})
    assert v.status_code == 200, v.text
    assert v.json()["verdicts"][0]["verdict"] == "confirmed"
    precision = api.get("/api/review/precision").json()["precision"]
    assert api.get("/api/review/precision", params={"since": "all"}).json()["precision"] == (
        precision
    )
    scorer_row = next(p for p in precision if p["by"] == "scorer")
    assert scorer_row["confirmed"] == 1
    assert (
        api.post(f"/api/runs/{GENAI_TRACE}/verdict", json={"verdict": "maybe"}).status_code == 400
    )
    text = api.get("/metrics").text
    assert "agentlens_review_queue_depth 0" in text


def test_a_background_process_builds_and_reviews_both_paths(make_api: Any) -> None:
    """With ``background_process`` (what ``agentlens serve`` uses for a file store), the
    server's process only stages; a child process builds the runs and reviews them."""
    api = make_api(review=True, background_process=True)
    assert api.app.state.agentlens.ingestor._threads[0].name == "agentlens-writer"
    assert len(api.app.state.agentlens.ingestor._threads) == 1  # no assembler here
    r = api.post("/v1/traces", content=request_pb(genai_spans() + openinference_spans()),
                 headers={"Content-Type": "application/x-protobuf"})  # fmt: skip
    assert r.status_code == 200
    run = {"id": "j1", "agent": "support", "input": "q", "output": "See invoice INV-4242.",
           "steps": [{"id": "s1", "kind": "tool", "name": "t", "output": {"invoice": "INV-1"}}]}  # fmt: skip
    assert api.post("/api/runs", json=run).json()["stored"] == 1
    wait_until(lambda: set(flagged_ids(api)) == {GENAI_TRACE, OI_TRACE, "j1"}, timeout=60)
    text = api.get("/metrics").text
    wait_until(lambda: "agentlens_runs_built_total 2" in api.get("/metrics").text, timeout=10)
    assert "agentlens_spans_stored_total" in text
    assert api.app.state.agentlens.background._process.is_alive()
    api.app.state.agentlens.close()
    assert not api.app.state.agentlens.background._process.is_alive()


def request_pb(spans: list[dict]) -> bytes:
    """The spans as a protobuf ExportTraceServiceRequest."""
    import base64

    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    doc = request(spans)
    for s in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        for key in ("traceId", "spanId", "parentSpanId"):
            if key in s:
                s[key] = base64.b64encode(bytes.fromhex(s[key])).decode()
    return bytes(ParseDict(doc, ExportTraceServiceRequest()).SerializeToString())


def test_json_api_runs_are_reviewed(make_api: Any) -> None:
    api = make_api(review=True)
    run = {"id": "j1", "agent": "support", "input": "q", "output": "See invoice INV-4242.",
           "steps": [{"id": "s1", "kind": "tool", "name": "t", "output": {"invoice": "INV-1"}}]}  # fmt: skip
    assert api.post("/api/runs", json=run).json()["stored"] == 1
    wait_until(lambda: flagged_ids(api) == ["j1"], timeout=60)


def test_review_routes_are_scoped_to_the_keys_project(make_api: Any) -> None:
    api = make_api(review=True)
    a = api.as_(key=create_key(api.store, "alpha").key)
    b = api.as_(key=create_key(api.store, "beta").key)
    a.post("/v1/traces", content=json.dumps(request(genai_spans())),
           headers={"Content-Type": "application/json"})  # fmt: skip
    wait_until(lambda: flagged_ids(a) == [GENAI_TRACE], timeout=60)
    assert flagged_ids(b) == []
    assert b.get("/api/review/queue").json()["runs"] == []
    assert b.get("/api/content/ticket/T-1").json()["hallucination_suspected"] is False
    assert a.get("/api/content/ticket/T-1").json()["hallucination_suspected"] is True
    r = b.post(f"/api/runs/{GENAI_TRACE}/verdict", json={"verdict": "false_positive"})
    assert r.status_code == 404
    assert (
        a.post(f"/api/runs/{GENAI_TRACE}/verdict", json={"verdict": "confirmed"}).status_code == 200
    )
    assert all(p["judged"] == 0 for p in b.get("/api/review/precision").json()["precision"])
    assert any(p["judged"] for p in a.get("/api/review/precision").json()["precision"])
