"""A server killed with SIGKILL in the middle of sustained ingestion, then restarted: every span
that got a 2xx is stored, exactly once, and every acknowledged trace becomes its run."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import pytest
from _process import ServerProcess

from _otlp_fixtures import request, span
from agentlens.store import open_store

pytestmark = pytest.mark.e2e


def _trace(worker: int, n: int) -> tuple[str, list[str], dict]:
    trace_id = f"{worker:04x}{n:028x}"
    root = trace_id[16:]
    ids = [root, *(f"{worker:02x}{n:010x}{k:04x}" for k in range(1, 4))]
    spans = [span(trace_id, root, None, "invoke_agent a", 0, 50,
                  {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "k"})]  # fmt: skip
    spans += [
        span(trace_id, sid, root, "execute_tool t", 1, 2, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t",
            "gen_ai.tool.call.result": "x" * 900})
        for sid in ids[1:]
    ]  # fmt: skip
    return trace_id, ids, request(spans)


def test_sigkill_mid_ingestion_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'kill.db'}"
    server = ServerProcess(db)
    acked: dict[str, list[str]] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def client(worker: int) -> None:
        with httpx.Client(timeout=5) as http:
            for n in range(1, 100_000):
                if stop.is_set():
                    return
                trace_id, ids, doc = _trace(worker, n)
                try:
                    r = http.post(server.url + "/v1/traces", content=json.dumps(doc),
                                  headers={"Content-Type": "application/json"})  # fmt: skip
                except httpx.HTTPError:
                    return  # the server is gone
                if r.status_code == 200 and not r.json().get("partialSuccess"):
                    with lock:
                        acked[trace_id] = ids

    threads = [threading.Thread(target=client, args=(w,)) for w in range(1, 4)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while len(acked) < 150 and time.monotonic() < deadline:
        time.sleep(0.05)
    server.kill()  # SIGKILL, mid-stream
    stop.set()
    for t in threads:
        t.join(30)
    assert len(acked) >= 50, "too little was acknowledged before the kill to test anything"

    # Every acknowledged span is staged exactly once, even before the restart.
    store = open_store(db)
    try:
        rows = store.read(lambda c: c.execute(
            "SELECT trace_id, span_id, count(*) FROM otlp_spans GROUP BY trace_id, span_id"
        ).fetchall())  # fmt: skip
    finally:
        store.close()
    staged = {(t, s): n for t, s, n in rows}
    for trace_id, ids in acked.items():
        for sid in ids:
            assert staged.get((trace_id, sid)) == 1, (trace_id, sid)

    # After a restart, the assembler builds every acknowledged trace into its run.
    server = ServerProcess(db)
    try:
        store = open_store(db)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                pending = store.staging_counts().traces
                if pending == 0:
                    break
                time.sleep(0.2)
            runs = {run.id: run for run in store.query_traces()}
        finally:
            store.close()
    finally:
        server.stop()
    for trace_id, ids in acked.items():
        run = runs[trace_id]
        step_ids = [s.id for s in run.steps]
        assert sorted(step_ids) == sorted(ids)  # each span once, none missing
