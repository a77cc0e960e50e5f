"""Sustained OTLP/HTTP ingestion into ``agentlens serve`` (SQLite store, review on).

Starts a real server process on loopback, then several client processes send protobuf
``ExportTraceServiceRequest`` s (agent runs of 4 spans: invoke_agent, chat, execute_tool, chat;
about 1 KB of attributes per span; ``--runs-per-request`` runs per request) for ``--seconds``.
Every few seconds it samples the server's ``/metrics`` and its resident memory. It reports:

- spans acknowledged (2xx) per second and spans committed per second (the server's
  ``agentlens_spans_stored_total``, new spans only);
- runs built per second from the staged spans, and the review lag and queue depth beside them;
- the server's RSS over time (start, middle, end, max), and its background process's;
- the CPU time the server process (and its background process) used: spans committed per
  CPU-second is the figure that does not depend on how busy the shared machine is;
- a baseline in the same run: the same spans staged straight into a store in this process
  (no HTTP, no protobuf), so the figure can be read as a ratio on a loaded machine.

Usage::

    python benchmarks/bench_server.py --seconds 60 --clients 3

Keep it bounded: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

_FILLER = (
    "The customer asked about an order; the tool returned the order record with its items, "
    "shipping address, payment status and the refund policy that applies to it. "
)


def _kv(key: str, value: Any) -> Any:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    v = AnyValue()
    if isinstance(value, bool):
        v.bool_value = value
    elif isinstance(value, int):
        v.int_value = value
    else:
        v.string_value = str(value)
    return KeyValue(key=key, value=v)


def _template() -> list[Any]:
    """The 4 spans of one run, ids left to fill; about 1 KB of attributes each."""
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    text = (_FILLER * 8)[:700]
    question = "Where is the refund for order ORD-12345?"
    spans = []
    for name, attrs in (
        ("invoke_agent support", {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support",
            "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [
                {"type": "text", "content": question}]}]),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                {"type": "text", "content": "Refund ORD-12345 of 42.50 EUR was sent."}],
                "finish_reason": "stop"}]),
            "app.notes": text}),
        ("chat gpt-4o", {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 20,
            "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [
                {"type": "text", "content": question}]}]),
            "app.notes": text}),
        ("execute_tool get_order", {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_order",
            "gen_ai.tool.call.arguments": json.dumps({"order_id": "ORD-12345"}),
            "gen_ai.tool.call.result": json.dumps({"order_id": "ORD-12345",
                                                   "refund": "42.50 EUR", "notes": text})}),
        ("chat gpt-4o", {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                {"type": "text", "content": "Refund ORD-12345 of 42.50 EUR was sent."}],
                "finish_reason": "stop"}]),
            "app.notes": text}),
    ):  # fmt: skip
        span = Span(name=name, kind=Span.SPAN_KIND_INTERNAL)
        span.attributes.extend(_kv(k, v) for k, v in attrs.items())
        spans.append(span)
    return spans


def _request(template: list[Any], runs: int, rng: random.Random) -> tuple[bytes, int]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.append(_kv("service.name", "bench"))
    ss = rs.scope_spans.add()
    now = time.time_ns()
    for _ in range(runs):
        trace_id = rng.randbytes(16)
        root_id = rng.randbytes(8)
        for i, tmpl in enumerate(template):
            span = ss.spans.add()
            span.CopyFrom(tmpl)
            span.trace_id = trace_id
            span.span_id = root_id if i == 0 else rng.randbytes(8)
            if i:
                span.parent_span_id = root_id
            span.start_time_unix_nano = now + i * 1000
            span.end_time_unix_nano = now + (10_000 if i == 0 else i * 1000 + 500)
    return req.SerializeToString(), runs * len(template)


def _client(url: str, seconds: float, runs: int, seed: int, out: Any) -> None:
    import httpx

    rng = random.Random(seed)
    template = _template()
    acked = refused = failed = 0
    deadline = time.monotonic() + seconds
    with httpx.Client(timeout=30) as http:
        while time.monotonic() < deadline:
            body, n = _request(template, runs, rng)
            try:
                r = http.post(url + "/v1/traces", content=body,
                              headers={"Content-Type": "application/x-protobuf"})  # fmt: skip
            except httpx.HTTPError:
                failed += n
                continue
            if r.status_code == 200:
                acked += n
            elif r.status_code in (429, 503):
                refused += n
                time.sleep(float(r.headers.get("Retry-After", "1")))
            else:
                failed += n
    out.put({"acked": acked, "refused": refused, "failed": failed})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _metrics(url: str) -> dict[str, float]:
    import httpx

    text = httpx.get(url + "/metrics", timeout=30).text
    return {m[0]: float(m[1]) for m in re.findall(r"^agentlens_(\w+) (\S+)$", text, re.M)}


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _baseline(spans: int) -> float:
    """Spans per second staged straight into a store (no HTTP, no protobuf)."""
    from agentlens.ingest.otlp import spans_from_protobuf
    from agentlens.store import open_store
    from agentlens.store._server import StagedSpan

    folder = Path(tempfile.mkdtemp(prefix="agentlens-bench-base-"))
    store: Any = open_store(f"sqlite:///{folder / 'base.db'}")
    rng = random.Random(1)
    template = _template()
    body, _ = _request(template, max(1, spans // 4), rng)
    decoded = spans_from_protobuf(body)
    rows = [
        StagedSpan("default", s.trace_id, s.span_id, s.parent_span_id is None,
                   json.dumps(s.to_dict(), separators=(",", ":")))
        for s in decoded
    ]  # fmt: skip
    start = time.perf_counter()
    for i in range(0, len(rows), 400):
        store.stage_spans(rows[i : i + 400], time.time_ns() // 1000)
    elapsed = time.perf_counter() - start
    store.close()
    return len(rows) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--runs-per-request", type=int, default=25)
    parser.add_argument("--sample", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--no-review", action="store_true")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="agentlens-bench-server-"))
    db = f"sqlite:///{folder / 'server.db'}"
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    cmd = [sys.executable, "-c", "from agentlens.cli import main; main()", "--db", db, "serve",
           "--port", str(port)] + (["--no-review"] if args.no_review else [])  # fmt: skip
    server = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        import httpx

        for _ in range(600):
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            raise SystemExit("the server did not start")
        out: Any = mp.Queue()
        clients = [
            mp.Process(target=_client, args=(url, args.seconds, args.runs_per_request, i, out))
            for i in range(args.clients)
        ]
        start = time.monotonic()
        for c in clients:
            c.start()
        samples = []
        cpu_start = _cpu_s(server.pid)
        helpers = _children(server.pid)  # the background process (and multiprocessing's tracker)
        helper_start = sum(_cpu_s(p) for p in helpers)
        while any(c.is_alive() for c in clients):
            time.sleep(args.sample)
            m = _metrics(url)
            helper_rss = sum(_rss_mb(p) for p in helpers)
            samples.append((time.monotonic() - start, m, _rss_mb(server.pid), helper_rss))
            t, m, rss, _ = samples[-1]
            print(
                f"t={t:6.1f}s stored={m['spans_stored_total']:9.0f} built="
                f"{m['runs_built_total']:7.0f} staged={m['staged_spans']:7.0f} review_queue="
                f"{m['review_queue_depth']:6.0f} review_lag={m['review_lag_seconds']:6.1f}s "
                f"(counted {m.get('backlog_age_seconds', 0):.0f}s ago) "
                f"rss={rss:6.1f}MB (+{helper_rss:.0f}MB background) "
                f"load={os.getloadavg()[0]:.1f}",
                flush=True,
            )
        server_cpu = _cpu_s(server.pid) - cpu_start
        helper_cpu = sum(_cpu_s(p) for p in helpers) - helper_start
        results = [out.get(timeout=30) for _ in clients]
        for c in clients:
            c.join(30)
        elapsed = time.monotonic() - start
        final = _metrics(url)
        acked = sum(r["acked"] for r in results)
        refused = sum(r["refused"] for r in results)
        rss = [s[2] for s in samples]
        bg_rss = [s[3] for s in samples]
        print()
        print(f"clients={args.clients} runs/request={args.runs_per_request} "
              f"spans/request={args.runs_per_request * 4} seconds={elapsed:.1f} "
              f"review={'off' if args.no_review else 'on'}")  # fmt: skip
        print(f"acknowledged: {acked} spans = {acked / elapsed:,.0f} spans/s "
              f"(refused with 429/503: {refused})")  # fmt: skip
        print(f"committed:    {final['spans_stored_total']:.0f} spans = "
              f"{final['spans_stored_total'] / elapsed:,.0f} spans/s")  # fmt: skip
        print(f"runs built:   {final['runs_built_total']:.0f} = "
              f"{final['runs_built_total'] / elapsed:,.0f} runs/s "
              f"(staged, not yet built: {final['staged_spans']:.0f} spans)")  # fmt: skip
        print(f"review:       queue {final['review_queue_depth']:.0f} runs, "
              f"lag {final['review_lag_seconds']:.1f} s at the end")  # fmt: skip
        if rss:
            print(f"server RSS:   start {rss[0]:.0f} MB, middle {rss[len(rss) // 2]:.0f} MB, "
                  f"end {rss[-1]:.0f} MB, max {max(rss):.0f} MB; background process start "
                  f"{bg_rss[0]:.0f} MB, middle {bg_rss[len(rss) // 2]:.0f} MB, end "
                  f"{bg_rss[-1]:.0f} MB, max {max(bg_rss):.0f} MB")  # fmt: skip
        stored = final["spans_stored_total"]
        background = (
            f"{final['runs_built_total'] / helper_cpu:,.0f} runs built and reviewed per CPU-second"
            if helper_cpu >= 0.05
            else "none"
        )
        print(f"CPU:          server process {server_cpu:.1f} s "
              f"({stored / max(server_cpu, 1e-9):,.0f} spans committed per CPU-second), "
              f"background process {helper_cpu:.1f} s ({background}); load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")  # fmt: skip
        base = _baseline(20_000)
        print(f"baseline:     {base:,.0f} spans/s staged in-process (no HTTP); "
              f"server / baseline = {final['spans_stored_total'] / elapsed / base:.2f}")  # fmt: skip
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)
        if server.stderr:
            server.stderr.close()


if __name__ == "__main__":
    main()
