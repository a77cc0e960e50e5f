"""End to end on a real socket: a real ``agentlens serve`` process, the real OpenTelemetry SDK
with its OTLP/HTTP protobuf exporter, and agentlens's own HTTP exporter."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _process import ServerProcess

pytestmark = pytest.mark.e2e


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(f"sqlite:///{tmp_path / 'e2e.db'}")
    try:
        yield proc
    finally:
        proc.stop()


def wait_runs(server: ServerProcess, n: int, timeout: float = 30.0, **params: Any) -> list[dict]:
    deadline = time.monotonic() + timeout
    runs: list[dict] = []
    while time.monotonic() < deadline:
        runs = httpx.get(server.url + "/api/runs", params=params, timeout=5).json()["runs"]
        if len(runs) >= n:
            return runs
        time.sleep(0.1)
    raise AssertionError(f"expected {n} runs, got {runs}")


def test_opentelemetry_sdk_protobuf_exporter(server: ServerProcess) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "support-svc"}))
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=server.url + "/v1/traces", timeout=10))
    )
    tracer = provider.get_tracer("e2e")
    question = "Where is the refund for order ORD-12345?"
    with tracer.start_as_current_span("invoke_agent support") as root:
        root.set_attribute("gen_ai.operation.name", "invoke_agent")
        root.set_attribute("gen_ai.agent.name", "support")
        root.set_attribute("gen_ai.input.messages", json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": question}]}]))  # fmt: skip
        with tracer.start_as_current_span("execute_tool get_order") as tool:
            tool.set_attribute("gen_ai.operation.name", "execute_tool")
            tool.set_attribute("gen_ai.tool.name", "get_order")
            tool.set_attribute("gen_ai.tool.call.arguments", json.dumps({"id": "ORD-12345"}))
            tool.set_attribute("gen_ai.tool.call.result", json.dumps({"refund": "42.50 EUR"}))
        with tracer.start_as_current_span("chat gpt-4o") as chat:
            chat.set_attribute("gen_ai.operation.name", "chat")
            chat.set_attribute("gen_ai.request.model", "gpt-4o")
            chat.set_attribute("gen_ai.usage.input_tokens", 40)
            chat.set_attribute("gen_ai.output.messages", json.dumps([{"role": "assistant",
                "parts": [{"type": "text", "content": "Refund ORD-77777 was sent."}],
                "finish_reason": "stop"}]))  # fmt: skip
        trace_id = format(root.get_span_context().trace_id, "032x")
    assert provider.force_flush(20_000)
    provider.shutdown()
    [run] = wait_runs(server, 1)
    assert run["id"] == trace_id
    assert run["agent"] == "support"
    detail = httpx.get(f"{server.url}/api/runs/{trace_id}", timeout=5).json()["run"]
    assert detail["input"] == question
    assert detail["output"] == "Refund ORD-77777 was sent."
    kinds = sorted(s["kind"] for s in detail["steps"])
    assert kinds == ["agent", "llm", "tool"]
    tool_step = next(s for s in detail["steps"] if s["kind"] == "tool")
    assert tool_step["output"] == {"refund": "42.50 EUR"}
    assert len(tool_step["id"]) == 16
    # reviewed on arrival: the made-up order id flags the run
    [flagged] = wait_runs(server, 1, flagged="true")
    assert flagged["id"] == trace_id
    assert "ORD-77777" in flagged["hallucination_reason"]


def test_agentlens_sdk_http_exporter(server: ServerProcess) -> None:
    import agentlens

    agentlens.configure(endpoint=server.url)
    try:

        @agentlens.tool
        def get_order(order_id: str) -> dict:
            return {"order_id": order_id, "status": "shipped"}

        for i in range(5):
            with agentlens.run(agent="shop", input=f"where is ORD-1000{i}?") as run:
                get_order(f"ORD-1000{i}")
                run.output = f"ORD-1000{i} has shipped."
        assert agentlens.flush(30)
        stats = agentlens.capture.stats()
        assert stats.exported == 5 and stats.failed == 0 and stats.dropped == 0
    finally:
        agentlens.shutdown(10)
        agentlens.capture.reset()
    runs = wait_runs(server, 5, agent="shop")
    assert {r["agent"] for r in runs} == {"shop"}
    detail = httpx.get(f"{server.url}/api/runs/{runs[0]['id']}", timeout=5).json()["run"]
    assert detail["steps"][0]["name"] == "get_order"


def test_opentelemetry_exporter_gzip_structured_attributes_and_a_refused_key(
    tmp_path: Path,
) -> None:
    """The real exporter with gzip, structured (non-string) GenAI attributes, the system
    instructions, several traces in one export, a tool result in a span; a wrong key is a 401
    the exporter does not retry, answered as OTLP/HTTP says (a google.rpc.Status, protobuf)."""
    from google.rpc.status_pb2 import Status
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from agentlens.server._keys import create_key
    from agentlens.store import open_store

    url = f"sqlite:///{tmp_path / 'keys.db'}"
    with open_store(url) as store:
        key = create_key(store, "acme").key
    server = ServerProcess(url)
    try:
        memory = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource.create({"service.name": "kb-svc",
                                                            "agentlens.link.ticket": "T-9"}))  # fmt: skip
        provider.add_span_processor(SimpleSpanProcessor(memory))
        tracer = provider.get_tracer("e2e")
        trace_ids = []
        for n in range(3):
            with tracer.start_as_current_span("invoke_agent kb") as root:
                root.set_attribute("gen_ai.operation.name", "invoke_agent")
                root.set_attribute("gen_ai.agent.name", "kb")
                with tracer.start_as_current_span("execute_tool lookup") as tool:
                    tool.set_attribute("gen_ai.operation.name", "execute_tool")
                    tool.set_attribute("gen_ai.tool.name", "lookup")
                    tool.set_attribute("gen_ai.tool.call.result", {"doc": f"DOC-0000000{n}"})  # type: ignore[arg-type]
                with tracer.start_as_current_span("chat m") as chat:
                    chat.set_attribute("gen_ai.operation.name", "chat")
                    chat.set_attribute("gen_ai.request.model", "m")
                    chat.set_attribute("gen_ai.system_instructions",
                                       [{"type": "text", "content": "Cite policy POL-4242."}])  # type: ignore[arg-type]  # fmt: skip
                    chat.set_attribute("gen_ai.input.messages", [{"role": "user",
                        "parts": [{"type": "text", "content": f"question {n}"}]}])  # type: ignore[arg-type]  # fmt: skip
                    chat.set_attribute("gen_ai.output.messages", [{"role": "assistant",
                        "parts": [{"type": "text", "content": f"See DOC-0000000{n} (POL-4242)."}]}])  # type: ignore[arg-type]  # fmt: skip
                trace_ids.append(format(root.get_span_context().trace_id, "032x"))
        provider.shutdown()
        spans = memory.get_finished_spans()
        endpoint = server.url + "/v1/traces"
        refused = OTLPSpanExporter(endpoint=endpoint, timeout=10, compression=Compression.Gzip,
                                   headers={"Authorization": "Bearer al_nope_nope"})  # fmt: skip
        started = time.monotonic()
        assert refused.export(spans) is SpanExportResult.FAILURE
        assert time.monotonic() - started < 5  # a 401 is not retried
        refused.shutdown()
        r = httpx.post(endpoint, content=b"", headers={"Content-Type": "application/x-protobuf",
                                                      "Authorization": "Bearer al_nope_nope"})  # fmt: skip
        assert r.status_code == 401 and r.headers["content-type"] == "application/x-protobuf"
        assert "invalid" in Status.FromString(r.content).message
        exporter = OTLPSpanExporter(endpoint=endpoint, timeout=10, compression=Compression.Gzip,
                                    headers={"Authorization": "Bearer " + key})  # fmt: skip
        assert exporter.export(spans) is SpanExportResult.SUCCESS  # all three traces at once
        exporter.shutdown()
        headers = {"Authorization": "Bearer " + key}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            runs = httpx.get(server.url + "/api/runs", headers=headers, timeout=5).json()["runs"]
            if len(runs) == 3:
                break
            time.sleep(0.1)
        assert sorted(r["id"] for r in runs) == sorted(trace_ids)
        for n, trace_id in enumerate(trace_ids):
            got = httpx.get(f"{server.url}/api/runs/{trace_id}", headers=headers, timeout=5)
            run = got.json()["run"]
            assert (run["project"], run["agent"], run["links"]) == ("acme", "kb", {"ticket": "T-9"})
            assert run["output"] == f"See DOC-0000000{n} (POL-4242)."
            by_kind = {s["kind"]: s for s in run["steps"]}
            assert by_kind["tool"]["output"] == {"doc": f"DOC-0000000{n}"}
            assert by_kind["system"]["output"] == "Cite policy POL-4242."
            assert by_kind["user"]["output"] == f"question {n}"
    finally:
        server.stop()
