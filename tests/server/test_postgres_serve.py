"""Two real ``agentlens serve`` processes on one PostgreSQL store: API keys and projects, OTLP
traces whose spans arrive at different processes (staged by one, completed through the other),
assembly, and review shared through claims, so that no run is reviewed twice."""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import httpx
import pytest
from _process import ServerProcess, free_port

from _otlp_fixtures import genai_spans, request
from agentlens.server._keys import create_key
from agentlens.store import open_store

pytestmark = pytest.mark.e2e

_TRACES = 24


def _trace_id(i: int) -> str:
    return f"{i + 1:08x}" + "ab" * 12


@pytest.mark.timeout(240)
def test_two_servers_share_ingestion_and_review(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every flagged review queues a webhook delivery with a new id: one per review
    monkeypatch.setenv("AGENTLENS_REVIEW_WEBHOOK", f"http://127.0.0.1:{free_port()}/hook")
    store: Any = open_store(pg_url)
    servers: list[ServerProcess] = []
    try:
        keys = {p: create_key(store, p).key for p in ("alpha", "beta")}
        servers = [ServerProcess(pg_url), ServerProcess(pg_url)]
        projects = {}
        with httpx.Client(timeout=10) as http:
            for i in range(_TRACES):
                project = "alpha" if i % 2 else "beta"
                trace_id = _trace_id(i)
                projects[trace_id] = project
                root, *children = genai_spans(trace_id)
                headers = {
                    "Content-Type": "application/json",
                    "Authorization": f"Bearer {keys[project]}",
                }
                # the children reach one process, the root span the other
                first, second = servers[i % 2], servers[(i + 1) % 2]
                for target, spans in ((first, children), (second, [root])):
                    r = http.post(target.url + "/v1/traces", content=json.dumps(request(spans)),
                                  headers=headers)  # fmt: skip
                    assert r.status_code == 200, r.text
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if store.count_runs() == _TRACES and store.review_lag().pending == 0:
                break
            time.sleep(0.2)
        assert store.count_runs() == _TRACES
        assert store.review_lag().pending == 0
        assert store.staging_counts().spans == 0
        assert store.run_projects(list(projects)) == projects
        for trace_id in projects:
            trace = store.get_trace(trace_id)
            ids = [step.id for step in trace.steps]
            assert len(ids) == len(set(ids))  # every span once, the root's and the others'
            assert {trace_id[:16], "1" * 16, "2" * 16, "3" * 16} <= set(ids)
            assert trace.output == "Your order ORD-99999 was refunded: 42.50 EUR."
            flags = store.get_flags(trace_id)
            assert flags is not None and flags.hallucination_detected
        # each run was reviewed once, by one of the two processes: one delivery each
        reviews = Counter(d.run_id for d in store.list_deliveries(limit=None))
        assert reviews == Counter({trace_id: 1 for trace_id in projects})
        for server in servers:  # either process answers for a key's project only
            for project, key in keys.items():
                runs = httpx.get(server.url + "/api/runs", params={"limit": 100},
                                 headers={"Authorization": f"Bearer {key}"}, timeout=10)  # fmt: skip
                ids = {r["id"] for r in runs.json()["runs"]}
                assert ids == {t for t, p in projects.items() if p == project}
                rate = httpx.get(server.url + "/api/rate", params={"since": "all"},
                                 headers={"Authorization": f"Bearer {key}"}, timeout=10)  # fmt: skip
                assert rate.json()["flagged"] == _TRACES // 2
    finally:
        for server in servers:
            server.stop()
        store.close()
