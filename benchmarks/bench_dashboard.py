"""The server's read paths over a store of 1,000,000 scored, reviewed runs (target: each
dashboard page in under 300 ms).

The store: ``--runs`` runs (default 1,000,000) over the 30 days before the fill, two projects
(``acme`` 70 %, ``globex`` 30 %), eight agent roles, six releases in time order, two steps each,
a content link (``ticket``) on one run in five; each run scored by ``no_fabricated_refs`` and
``repeated_tool_calls`` at their current versions (about 6 % flagged for grounding, 2 % for
loops, 1 % unverifiable), reviewed: its flags, failure modes and content flags stored as the
review pipeline stores them, and a third of the flagged runs still open in the review queue.
It is written with ``executemany`` straight into the store's own tables (opened, and so
migrated, by :class:`SQLiteStore` first), with the rollups' triggers dropped during the load
and the rollups rebuilt in bulk by the store's own :func:`rebuild_rate_rollup` and
:func:`rebuild_run_rollup` after it (a fill made at an older schema gets its run-count rollup
from migration 9 when it is next opened). Building a million pydantic traces through
``put_traces`` would take most of an hour here. The
fill is kept (``--db``, default ``/tmp/agentlens-bench-dashboard.db``) and reused by later runs
while it has the same size and scorer versions.

What is timed (median of ``--repeat`` calls after one warm-up), per dashboard need:

- the runs list: ``GET /api/runs`` newest first, and filtered by agent, window (``since=7d``),
  ``flagged``, failure mode, release (when the store's filter knows it), a content link, the
  next page by cursor, and one project's runs (a key of ``globex``);
- one run: ``GET /api/runs/{id}``;
- the rate: ``GET /api/rate`` (7 days), by agent (the per-role summary: runs, flagged, rate,
  modes), by mode, by day (30 days), as the keyless local user (the whole store) and as a key
  of one project;
- the review queue: ``GET /api/review/queue``, all and per project;
- a content item: ``GET /api/content/ticket/{id}``;
- the dashboard's pages (``/runs`` with and without filters, a run, ``/review``, ``/trends``,
  a content item), whole, in local use (no key: every project);
- what the pages read besides the routes: ``rate_breakdown``/``hallucination_rate`` with
  ``flagged_ids=False`` (counts only: the per-role summary and the trends), for the whole
  store and one project's view.

Each route is called in-process through the ASGI app (``httpx.ASGITransport``), so a figure is
the route's whole cost (store query, JSON), without a socket. Beside each, the store call it
makes is timed alone.

Usage: ``python benchmarks/bench_dashboard.py [--runs N] [--db PATH] [--repeat K] [--refill]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import sqlite3
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from bench_rate import timed_cpu  # noqa: E402  (the rate benchmark's median-of-repeats timer)

from agentlens._ids import new_id  # noqa: E402
from agentlens.eval import get_scorer  # noqa: E402
from agentlens.store import open_store  # noqa: E402
from agentlens.store._sqlite_rates import (  # noqa: E402
    BULK_ROLLUP,
    RUN_ROLLUP_TRIGGERS,
    rebuild_rate_rollup,
    rebuild_run_rollup,
)

DAYS = 30
PROJECTS = (("acme", 0.7), ("globex", 0.3))
AGENTS = ("support", "billing", "research", "triage", "sales", "onboarding", "legal", "ops")
SCORERS = ("no_fabricated_refs", "repeated_tool_calls")
TARGET_S = 0.300
_DAY_US = 86_400_000_000


def old_reads(store: Any, on: bool) -> None:
    """Read as the store did before the run-count rollup (``on``), or as it does now: each rate
    group's runs counted from ``runs``, a project's scorers looked up in ``scores``, a
    project's runs page and review queue planned by SQLite alone."""
    from agentlens.store import _server

    store._runs_from_rollup = store._scorers_from_rollup = store._queue_from_rollup = not on
    _server.PLAN_FROM_ROLLUP = not on


def _us(t: datetime) -> int:
    return (t - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def _iso(us: int) -> str:
    return datetime.fromtimestamp(us / 1e6, UTC).isoformat().replace("+00:00", "Z")


def _meta(runs: int) -> dict[str, Any]:
    return {"runs": runs, "versions": {s: get_scorer(s).version for s in SCORERS}, "format": 2}


def _steps(run_id: str, started: int, order: str) -> str:
    return json.dumps(
        [
            {"id": "s1", "parent_id": None, "kind": "tool", "name": "get_order",
             "input": {"order_id": order}, "output": {"order_id": order, "refund": "42.50 EUR"},
             "error": None, "started_at": _iso(started), "ended_at": _iso(started + 200_000),
             "attributes": {}},
            {"id": "s2", "parent_id": None, "kind": "llm", "name": "chat",
             "input": [{"role": "user", "content": "Where is my refund?"}],
             "output": {"role": "assistant", "content": f"Refund {order} was sent."},
             "error": None, "started_at": _iso(started + 300_000),
             "ended_at": _iso(started + 1_500_000), "attributes": {"model": "gpt-4o"}},
        ],
        separators=(",", ":"),
    )  # fmt: skip


def fill(path: Path, runs: int, seed: int = 11) -> float:
    """Write ``runs`` scored, reviewed runs into a new store at ``path``; returns seconds."""
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    open_store(f"sqlite:///{path}").close()  # creates and migrates the schema
    versions = _meta(runs)["versions"]
    rng = random.Random(seed)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -262144")
    t0 = time.perf_counter()
    conn.execute("BEGIN")
    for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'trigger'"
        " AND (name LIKE 'rate_%' OR name LIKE 'run_rollup_%')"
    ).fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    now = _us(datetime.now(UTC))
    start = now - DAYS * _DAY_US
    rows: dict[str, list[tuple[Any, ...]]] = {k: [] for k in _INSERTS}
    for i in range(runs):
        started = start + (DAYS * _DAY_US * i) // runs + rng.randrange(1_000_000)
        _one_run(rng, rows, started, versions)
        if len(rows["runs"]) >= 20_000:
            _flush(conn, rows)
            print(f"  {i + 1:,} runs ({time.perf_counter() - t0:.0f} s)", end="\r", flush=True)
    _flush(conn, rows)
    # the triggers as migrations 7 and 9 left them
    for statement in (*BULK_ROLLUP, *RUN_ROLLUP_TRIGGERS):
        conn.execute(statement)
    rebuild_rate_rollup(conn)
    rebuild_run_rollup(conn)
    conn.execute("COMMIT")
    conn.execute("ANALYZE")
    conn.close()
    Path(str(path) + ".json").write_text(json.dumps(_meta(runs)))
    return time.perf_counter() - t0


def _one_run(
    rng: random.Random, rows: dict[str, list[tuple[Any, ...]]], started: int,
    versions: dict[str, str],
) -> None:  # fmt: skip
    run_id = new_id(started // 1000)
    project = "acme" if rng.random() < PROJECTS[0][1] else "globex"
    agent = AGENTS[rng.randrange(len(AGENTS))]
    release = f"v{1 + (started % (DAYS * _DAY_US)) * 6 // (DAYS * _DAY_US)}"
    order = f"ORD-{rng.randrange(100_000):05d}"
    links = {"ticket": f"T-{rng.randrange(50_000)}"} if rng.random() < 0.2 else {}
    doc = json.dumps(
        {"schema_version": 1, "id": run_id, "project": project, "agent": agent,
         "name": f"refund {order}", "status": "ok", "started_at": _iso(started),
         "ended_at": _iso(started + 2_000_000), "input": "Where is my refund?",
         "output": f"Refund {order} was sent.", "metadata": {"release": release},
         "links": links},
        separators=(",", ":"),
    )  # fmt: skip
    rows["runs"].append((run_id, project, agent, f"refund {order}", "ok", started,
                         started + 2_000_000, started, 1, 2, release, doc,
                         _steps(run_id, started, order)))  # fmt: skip
    rows["run_links"].extend((kind, item, run_id, started) for kind, item in links.items())
    modes: list[str] = []
    pairs: list[tuple[str, str]] = []  # (scorer, mode) of each flagged finding
    state = "clean"
    for scorer in SCORERS:
        roll = rng.random()
        found: list[str] = []
        if scorer == "no_fabricated_refs":
            verdict = "flagged" if roll < 0.06 else "unverifiable" if roll < 0.07 else "passed"
            found = ["fabricated_grounding"] if verdict != "passed" else []
        else:
            verdict = "flagged" if roll < 0.02 else "passed"
            found = ["repeated_tool_call"] if verdict == "flagged" else []
        if verdict == "flagged":
            modes += found
            pairs += [(scorer, m) for m in found]
            state = "flagged"
        elif verdict == "unverifiable" and state == "clean":
            state = "unverifiable"
        findings = [{"failure_mode": m, "text": order, "unverifiable": verdict == "unverifiable"}
                    for m in found]  # fmt: skip
        score_doc = json.dumps(
            {"run_id": run_id, "scorer": scorer, "version": versions[scorer],
             "passed": verdict == "passed", "verdict": verdict, "findings": findings,
             "scored_at": _iso(started + 60_000_000)},
            separators=(",", ":"),
        )  # fmt: skip
        rows["scores"].append((run_id, scorer, versions[scorer], verdict, int(verdict == "passed"),
                               float(len(found)), "", None, len(found), started + 60_000_000,
                               project, agent, release, started, score_doc))  # fmt: skip
        rows["score_modes"].extend((run_id, scorer, versions[scorer], m, 1) for m in found)
    flagged = state == "flagged"
    reason = f"{order} appears nowhere in the evidence" if flagged else None
    findings_doc = json.dumps(
        [
            {"n": n, "key": f"{scorer}:{m}:{order}", "scorer": scorer,
             "version": versions[scorer], "failure_mode": m, "text": order,
             "detail": f"{order} appears nowhere in the evidence", "location": None,
             "step_ids": ["s2"], "start": None, "end": None}
            for n, (scorer, m) in enumerate(pairs, start=1)
        ]
    )  # fmt: skip
    open_ = len(modes) if flagged and rng.random() < 0.33 else 0
    rows["run_review"].append((run_id, started, agent, started + 1_000_000,
                               started + 61_000_000, state, int(flagged), reason,
                               json.dumps(modes), findings_doc, open_))  # fmt: skip
    if flagged:
        rows["run_flag_modes"].extend((run_id, m) for m in dict.fromkeys(modes))
        rows["content_flags"].extend(
            (kind, item, run_id, reason, started + 61_000_000, 0) for kind, item in links.items()
        )


_INSERTS = {
    "runs": "INSERT INTO runs (id, project, agent, name, status, started_at, ended_at, sort_at,"
    " has_output, step_count, release, doc, steps) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
    "scores": "INSERT INTO scores (run_id, scorer, version, verdict, passed, value, detail, error,"
    " finding_count, scored_at, run_project, run_agent, run_release, run_started_at, doc)"
    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    "score_modes": "INSERT INTO score_modes (run_id, scorer, version, mode, findings)"
    " VALUES (?,?,?,?,?)",
    "run_review": "INSERT INTO run_review (run_id, sort_at, agent, stored_at, reviewed_at, state,"
    " flagged, reason, modes, findings, open) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
    "run_flag_modes": "INSERT INTO run_flag_modes (run_id, mode) VALUES (?,?)",
    "content_flags": "INSERT OR IGNORE INTO content_flags (kind, item_id, run_id, reason,"
    " flagged_at, dismissed) VALUES (?,?,?,?,?,?)",
    "run_links": "INSERT INTO run_links (kind, item_id, run_id, sort_at) VALUES (?,?,?,?)",
}


def _flush(conn: sqlite3.Connection, rows: dict[str, list[tuple[Any, ...]]]) -> None:
    for table, sql in _INSERTS.items():
        conn.executemany(sql, rows[table])
        rows[table].clear()


# -- timing -------------------------------------------------------------------------------------


class _Client:
    """GETs to the ASGI app in-process, on one event loop."""

    def __init__(self, app: Any, key: str | None = None) -> None:
        import httpx

        self._loop = asyncio.new_event_loop()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 40000))
        self._http = httpx.AsyncClient(
            transport=transport, base_url="http://bench", headers=headers
        )

    def get(self, url: str, **params: Any) -> Any:
        response = self._loop.run_until_complete(self._http.get(url, params=params))
        if response.status_code != 200:
            raise SystemExit(f"GET {url} {params}: {response.status_code} {response.text[:300]}")
        return response.json()

    def page(self, url: str, **params: Any) -> str:
        """A dashboard page's HTML (it must answer 200)."""
        response = self._loop.run_until_complete(self._http.get(url, params=params))
        if response.status_code != 200:
            raise SystemExit(f"GET {url} {params}: {response.status_code} {response.text[:300]}")
        return response.text

    def close(self) -> None:
        self._loop.run_until_complete(self._http.aclose())
        self._loop.close()


def measure(db: Path, repeat: int) -> list[tuple[str, float, str]]:
    """Time every route (and the store call behind it); returns (what, seconds, note) rows."""
    from agentlens.server import create_app
    from agentlens.server._keys import create_key
    from agentlens.store import RunFilter
    from agentlens.store._server import list_runs_page

    with sqlite3.connect(db) as conn:  # keys of an earlier run: start keyless
        conn.execute("DELETE FROM api_keys")
    store: Any = open_store(f"sqlite:///{db}")
    out: list[tuple[str, float, str]] = []
    print("wall and CPU time; then, for a rate, the same as before the run-count rollup: each"
          " group's runs counted from `runs` (before migration 9), a project's scorers looked up"
          " in `scores`")  # fmt: skip

    def row(
        what: str, fn: Callable[[], Any], note: Callable[[Any], str], baseline: bool = False
    ) -> Any:
        """Time ``fn``; with ``baseline``, also as the store read before the run-count rollup
        (each rate group's runs counted from ``runs``, a project's scorers looked up in
        ``scores``), in the same run."""
        seconds, cpu, result = timed_cpu(fn, repeat)
        old = f"{'—':>22}"
        if baseline:
            old_reads(store, True)
            try:
                old_s, old_cpu, old_result = timed_cpu(fn, repeat)
            finally:
                old_reads(store, False)
            old = f"{old_s * 1000:9.1f} ms {old_cpu * 1000:7.1f} CPU"
            # the reports of a fixed window must be equal (a route's window moves with the
            # clock, a page carries a fresh CSRF token)
            if hasattr(result, "model_dump") and old_result != result:
                raise SystemExit(f"{what}: the rollups and the old reads differ")
        out.append((what, seconds, note(result)))
        print(f"{seconds * 1000:9.1f} ms {cpu * 1000:7.1f} CPU {old}  {what}  ({note(result)})",
              flush=True)  # fmt: skip
        return result

    def runs(r: Any) -> str:
        return f"{len(r['runs'])} runs"

    def rate(r: Any) -> str:
        return f"{r['runs']:,} runs, {r['flagged']:,} flagged"

    def groups(r: Any) -> str:
        return f"{len(r['groups'])} groups"

    def rates(who: str, client: _Client) -> None:
        row(f"GET /api/rate, 7d ({who})", lambda: client.get("/api/rate"), rate, True)
        for by, since in (("agent", "7d"), ("mode", "7d"), ("release", "30d"), ("day", "30d")):
            row(f"GET /api/rate?by={by}&since={since} ({who})",
                lambda b=by, s=since: client.get("/api/rate", by=b, since=s), groups,
                True)  # fmt: skip

    def pages(client: _Client, run_id: str) -> None:
        """The dashboard's pages, whole (local use: no sign-in, every project)."""
        for url, params in (
            ("/runs", {}), ("/runs", {"since": "30d", "agent": "legal", "flagged": "1"}),
            ("/runs", {"release": "v3"}), (f"/runs/{run_id}", {}), ("/review", {}),
            ("/trends", {}), ("/content/ticket/T-123", {}),
        ):  # fmt: skip
            query = "&".join(f"{k}={v}" for k, v in params.items())
            row(f"page {url}{'?' + query if query else ''}",
                lambda u=url, p=params: client.page(u, **p),
                lambda html: f"{len(html) / 1000:.0f} kB of HTML",
                url in ("/runs", "/trends"))  # fmt: skip

    def summaries(store: Any) -> None:
        """What the dashboard's pages read besides the routes: rates without the flagged ids
        (``flagged_ids=False``), for the whole store and one project's view."""
        from agentlens.analytics import hallucination_rate, rate_breakdown
        from agentlens.server._scope import project_view

        now = datetime.now(UTC)
        for who, view in (("whole store", store), ("globex view", project_view(store, "globex"))):
            for by, days in (("agent", 7), ("mode", 30), ("release", 30), ("day", 30)):
                row(f"  rate_breakdown({by!r}, {days}d, no ids) ({who})",
                    lambda b=by, d=days, v=view: rate_breakdown(
                        b, start=now - timedelta(days=d), store=v, flagged_ids=False),
                    lambda r: f"{len(r.groups)} groups, "
                              f"{sum(g.flagged for g in r.groups):,} flagged", True)  # fmt: skip
            row(f"  hallucination_rate(7d, no ids) ({who})",
                lambda v=view: hallucination_rate(
                    start=now - timedelta(days=7), store=v, flagged_ids=False),
                lambda r: f"{r.runs:,} runs, {r.flagged:,} flagged", True)  # fmt: skip

    try:
        app = create_app(store, review=False)
        local = _Client(app)  # loopback without a key while no key exists: the whole store
        first = row("GET /api/runs (newest 50)", lambda: local.get("/api/runs"), runs)
        row("  store: list_runs_page", lambda: list_runs_page(
            store, RunFilter(), before=None, limit=50), lambda r: "")  # fmt: skip
        row("GET /api/runs next page by cursor",
            lambda: local.get("/api/runs", cursor=first["next"]), runs)  # fmt: skip
        for label, params in (
            ("project=globex", {"project": "globex"}),
            ("agent=billing", {"agent": "billing"}),
            ("since=7d", {"since": "7d"}),
            ("flagged=true", {"flagged": "true"}),
            ("flagged=false", {"flagged": "false"}),
            ("failure_mode=repeated_tool_call", {"failure_mode": "repeated_tool_call"}),
            ("project=globex&agent=legal&flagged=true&since=7d",
             {"project": "globex", "agent": "legal", "flagged": "true", "since": "7d"}),
            ("link=ticket:T-123", {"link": "ticket:T-123"}),
        ):  # fmt: skip
            row(f"GET /api/runs?{label}", lambda p=params: local.get("/api/runs", **p), runs)
        run_id = first["runs"][0]["id"]
        row("GET /api/runs/{id}", lambda: local.get(f"/api/runs/{run_id}"),
            lambda r: f"{len(r['run']['steps'])} steps, {len(r['scores'])} scores")  # fmt: skip
        row("GET /api/review/queue", lambda: local.get("/api/review/queue"), runs)
        row("GET /api/content/ticket/T-123", lambda: local.get("/api/content/ticket/T-123"),
            lambda r: f"{len(r['runs'])} flagged runs")  # fmt: skip
        rates("whole store", local)
        pages(local, run_id)
        local.close()
        # A key of one project: from now on every request needs one and sees its project only.
        globex = _Client(app, create_key(store, "globex", "bench").key)
        rates("globex key", globex)
        summaries(store)
        row("GET /api/runs (globex key)", lambda: globex.get("/api/runs"), runs)
        row("GET /api/review/queue (globex key)", lambda: globex.get("/api/review/queue"), runs)
        row("GET /api/review/queue?agent=ops (globex key)",
            lambda: globex.get("/api/review/queue", agent="ops"), runs)  # fmt: skip
        row("GET /api/content/ticket/T-123 (globex key)",
            lambda: globex.get("/api/content/ticket/T-123"),
            lambda r: f"{len(r['runs'])} flagged runs")  # fmt: skip
        globex.close()
        app.state.agentlens.close()
        # keyless again, as it was: a later run of bench_dashboard_pages.py on this store
        # would otherwise sign in as a key of a project with no runs
        store._write(lambda c: c.execute("DELETE FROM api_keys"))
    finally:
        store.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--db", type=Path, default=Path("/tmp/agentlens-bench-dashboard.db"))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--refill", action="store_true")
    parser.add_argument("--fill-only", action="store_true")
    args = parser.parse_args()
    meta = Path(str(args.db) + ".json")
    cached = meta.exists() and json.loads(meta.read_text()) == _meta(args.runs)
    if args.refill or not cached or not args.db.exists():
        print(f"filling {args.db} with {args.runs:,} runs...", flush=True)
        print(f"filled in {fill(args.db, args.runs):.0f} s" + " " * 20, flush=True)
    if args.fill_only:
        return
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}; store {args.db} "
          f"({args.db.stat().st_size / 1e9:.2f} GB, {args.runs:,} runs)")  # fmt: skip
    rows = measure(args.db, args.repeat)
    worst = max(rows, key=lambda r: r[1])
    print(f"\nslowest: {worst[0]} {worst[1] * 1000:.0f} ms (target {TARGET_S * 1000:.0f} ms)")


if __name__ == "__main__":
    main()
