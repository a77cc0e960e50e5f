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


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from ``/proc``)."""
    from pathlib import Path

    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _rows(store: Any, sql: str) -> list[tuple[Any, ...]]:
    """The rows of ``sql`` on the store's tables, the run id (first column) decoded."""
    from agentlens.store._pg_text import dec

    rows = store.read(lambda c: c.execute(sql).fetchall())
    return [(dec(row[0]) or "", *row[1:]) for row in rows]


def _review_runs(n: int, offset: int) -> list[Any]:
    """``n`` runs of 12 steps each (their review takes a while), citing an id no step returned."""
    from datetime import UTC, datetime, timedelta

    from agentlens.model import Step, StepKind, Trace

    start = datetime.now(UTC) - timedelta(hours=1)
    steps = [
        Step(id=f"s{j}", kind=StepKind.TOOL, name=f"lookup_{j % 3}", input={"customer": "CUST-1"},
             output={"id": "CUST-1", "notes": "x" * 300, "rows": list(range(30))})
        for j in range(12)
    ]  # fmt: skip
    return [
        Trace(id=f"kill-{offset + i:05d}", agent="support", input="status of CUST-1?",
              output=f"Customer CUST-{90000 + i} is active.", started_at=start, steps=steps)
        for i in range(n)
    ]  # fmt: skip


@pytest.mark.timeout(240)
def test_a_killed_servers_claims_are_reviewed_by_another_after_the_lease(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``agentlens serve`` killed (SIGKILL, with its background process: a crash) while its
    reviewer holds claims: the runs it had not marked reviewed stay claimed until the lease
    (``AGENTLENS_REVIEW_LEASE=4``) runs out, and are then reviewed by another server; the runs
    it had reviewed are not reviewed again."""
    import os
    import signal

    lease_s = 4
    monkeypatch.setenv("AGENTLENS_REVIEW_LEASE", str(lease_s))
    store: Any = open_store(pg_url)
    claimed = (
        "SELECT run_id, lease_until FROM run_review WHERE reviewed_at IS NULL"
        " AND claimed_by LIKE 'serve:%'"
    )
    held: dict[str, int] = {}
    try:
        for attempt in range(3):  # the kill must land while a batch is claimed: retried if not
            server = ServerProcess(pg_url)
            store.put_traces(_review_runs(400, attempt * 1000))
            deadline = time.monotonic() + 60
            while not _rows(store, claimed + " LIMIT 1") and time.monotonic() < deadline:
                pass
            for pid in _children(server.proc.pid):  # the background process holds the claims
                os.kill(pid, signal.SIGKILL)
            server.kill()
            held = dict(_rows(store, claimed))  # type: ignore[arg-type]
            if held:
                break
        assert held, "the server was never killed while it held claims"
        killed_at_us = time.time_ns() // 1000
        assert all(until > killed_at_us for until in held.values())  # the lease still runs
        assert max(held.values()) <= killed_at_us + lease_s * 1_000_000
        reviewed = "SELECT run_id, reviewed_at FROM run_review WHERE reviewed_at IS NOT NULL"
        before = dict(_rows(store, reviewed))
        monkeypatch.delenv("AGENTLENS_REVIEW_LEASE")  # the other server: the default lease
        other = ServerProcess(pg_url)
        try:
            deadline = time.monotonic() + 120
            while store.review_lag().pending and time.monotonic() < deadline:
                time.sleep(0.2)
            assert store.review_lag().pending == 0
        finally:
            other.stop()
        after = dict(_rows(store, reviewed))
        for run_id, until in held.items():  # reviewed by the other, once the lease ran out
            assert after[run_id] >= until, run_id
            flags = store.get_flags(run_id)
            assert flags is not None and flags.hallucination_detected
        for run_id, at in before.items():  # what the killed server marked is not reviewed again
            assert after[run_id] == at, run_id
    finally:
        store.close()
