"""Several processes on one PostgreSQL store: writers ingesting (some of them the same run ids)
while rates are read and two review workers share the queue, and a worker killed with runs
claimed. Nothing is lost, stored twice or reviewed twice; the dead worker's runs are reviewed by
another once its lease has run out."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentlens.analytics import hallucination_rate
from agentlens.config import Settings
from agentlens.store import open_store

_WRITER = """
import sys
from datetime import UTC, datetime, timedelta
from agentlens.model import Step, StepKind, Trace
from agentlens.store import open_store

url, k = sys.argv[1], int(sys.argv[2])
t0 = datetime.now(UTC) - timedelta(hours=3)

def run(run_id, i, answer):
    return Trace(id=run_id, agent="support", started_at=t0 + timedelta(seconds=i), input="q",
                 output=answer, steps=[Step(id="s1", kind=StepKind.TOOL, name="lookup",
                                            output={"id": f"CUST-{i}"})])

store = open_store(url)
for b in range(6):
    # every third run cites an id its step did not return (flagged once reviewed)
    batch = [run(f"w{k}-{b * 10 + j:03d}", b * 10 + j, f"CUST-{b * 10 + j + 5000 * (j % 3 == 0)}")
             for j in range(10)]
    # the same ids from every writer, flagged in some writers' versions only
    batch += [run(f"shared-{b}", b, f"writer {k} says CUST-{b + 5000 * (k == 1)}")]
    store.put_traces(batch)
store.close()
"""

_WORKER = """
import json, sys
from agentlens.cli._worker import run_worker
from agentlens.config import Settings
from agentlens.store import open_store

url, name, log = sys.argv[1], sys.argv[2], sys.argv[3]
store = open_store(url)
claim = store.claim_review

def logged(worker, **kw):
    got = claim(worker, **kw)
    with open(log, "a") as f:
        for p in got:
            f.write(json.dumps([p.run_id, p.stored_at]) + "\\n")
    return got

store.claim_review = logged
run_worker(store, name=name, settings=Settings(), lease_s=30, batch=8, interval_s=0.2,
           score=False, idle_exit_s=6)
store.close()
"""

_DOOMED = """
import sys, time
from agentlens.store import open_store

store = open_store(sys.argv[1])
got = store.claim_review("doomed", limit=5, lease_s=3)
print(" ".join(p.run_id for p in got), flush=True)
time.sleep(600)
"""


def _spawn(code: str, *args: str, cwd: Path, **kw: Any) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLENS_DB")}
    return subprocess.Popen([sys.executable, "-c", code, *args], cwd=cwd, env=env, text=True, **kw)


@pytest.mark.timeout(240)
def test_writers_workers_and_a_killed_worker(pg_url: str, tmp_path: Path) -> None:
    from store_factories import make_trace

    store: Any = open_store(pg_url)
    procs: list[subprocess.Popen[str]] = []
    try:
        store.put_traces([make_trace(i) for i in range(20)])
        doomed = _spawn(_DOOMED, pg_url, cwd=tmp_path, stdout=subprocess.PIPE)
        assert doomed.stdout is not None
        taken = doomed.stdout.readline().split()
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(10)
        doomed.stdout.close()
        assert len(taken) == 5

        logs = [tmp_path / "a.log", tmp_path / "b.log"]
        workers = [
            _spawn(_WORKER, pg_url, name, str(log), cwd=tmp_path)
            for name, log in zip(("a", "b"), logs, strict=True)
        ]
        writers = [_spawn(_WRITER, pg_url, str(k), cwd=tmp_path) for k in range(3)]
        procs = [*workers, *writers]
        seen: list[int] = []
        while any(w.poll() is None for w in writers):
            report = hallucination_rate(store=store, settings=Settings(), since_hours=24 * 400)
            seen.append(report.runs)
            time.sleep(0.2)
        assert all(w.wait(60) == 0 for w in writers)
        assert all(w.wait(120) == 0 for w in workers)
        assert seen == sorted(seen)  # the count only grows: no run is ever seen twice or lost

        total = 20 + 3 * 60 + 6
        ids = [r.id for r in store.list_runs()]
        assert len(ids) == len(set(ids)) == total == store.count_runs()
        assert store.pending_review() == []
        final = set(
            store.read(
                lambda c: [tuple(r) for r in c.execute("SELECT run_id, stored_at FROM run_review")]
            )
        )
        claims = [tuple(json.loads(line)) for log in logs for line in log.read_text().splitlines()]
        assert len(claims) == len(set(claims))  # no version of a run was claimed twice
        assert final <= set(claims)  # every run, as last written, was reviewed by a live worker
        assert set(taken) <= {run_id for run_id, _ in claims}  # the dead worker's runs too
        assert all(store.get_flags(run_id) is not None for run_id in ids)
        report = hallucination_rate(store=store, settings=Settings(), since_hours=24 * 400)
        assert report.runs == total and report.unscored == 0
        # the rollups the concurrent writers left (delta rows, flagged ids added and removed as
        # the shared runs were replaced) count what the runs and scores say, before and after
        # compaction and after a rebuild
        from datetime import UTC, datetime

        from agentlens.analytics._rate import PythonRateSource

        now = datetime.now(UTC)

        def rate(source: Any) -> Any:
            return hallucination_rate(store=source, settings=Settings(), since_hours=24 * 400,
                                      now=now)  # fmt: skip

        counted = rate(PythonRateSource(store))
        assert counted.flagged > 0 and rate(store) == counted
        store.compact_rollups()
        assert rate(store) == counted
        store.rebuild_rate_rollup()
        assert rate(store) == counted
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        store.close()
