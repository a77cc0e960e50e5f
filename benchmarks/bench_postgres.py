"""Benchmark: the PostgreSQL store beside SQLite, and the rate over 1,000,000 runs in PostgreSQL.

Part 1, same data, same run, both backends (``--runs``, default 4,000 runs of 6 steps):

- *ingest*: ``put_traces`` in batches of 250 into a new store;
- *review*: ``score_runs`` with ``no_fabricated_refs`` and ``repeated_tool_calls`` (score every
  run, store the scores: the store side of what the review pipeline does);
- *rate*: ``hallucination_rate`` over the last 7 days (median of ``--repeat``).

Part 2 (``--big``, default 1,000,000; 0 skips it): that many runs started in the
last 7 days (about 6,000 an hour), three agent roles, four releases, each scored by one scorer
(3 % flagged, 1 % unverifiable, 0.2 % errors), generated inside the server with
``generate_series`` (no Python objects: building a million traces would take minutes) with the
rate triggers disabled, then the rollups are filled by the store's own refresh function
(:meth:`PostgresStore.rebuild_rate_rollup`, the code the triggers run) and compacted. Timed: the
bulk load, the rollup rebuild, and ``hallucination_rate`` over the last 7 days (the target: under
200 ms) and ``rate_breakdown("day")``, each the median of ``--repeat`` calls. The same runs and
scores are then loaded into a SQLite file (SQL inside SQLite, the rollup's triggers dropped for
the load and the rollup rebuilt by the store's own function) and the same two rates timed there.

The PostgreSQL server: ``--pg`` (default ``postgresql://postgres@127.0.0.1:5432/test``); each
run uses a new schema, dropped at the end (``--keep`` keeps it). Figures from a shared, loaded
machine vary run to run: compare the backends within one run.

Usage: ``python benchmarks/bench_postgres.py [--runs N] [--big N] [--repeat K] [--pg URL]``.

Old and new code on the same million runs (``--ab SCHEMA``, a schema kept by ``--keep``): the
rate over the 7 days of part 2 is timed in separate processes, this code's and the code in
``--baseline-src DIR`` (a checkout's ``src/``), alternating for ``--rounds`` rounds; each process
prints the median wall time of ``--repeat`` calls, and, per call over all of them, its own CPU
time and the CPU time of the PostgreSQL backend that served it (from ``/proc``: the server runs
on this machine), so that the comparison does not depend on the load. The baseline opens the schema without migrating it (the
newer schema keeps every column the old code reads). The flagged ids of both must be equal.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from agentlens.analytics import hallucination_rate, rate_breakdown
from agentlens.config import Settings
from agentlens.eval import get_scorer
from agentlens.eval._runner import score_runs
from agentlens.model import Step, StepKind, Trace
from agentlens.store import open_store
from agentlens.store._sqlite import to_us

SCORERS = ["no_fabricated_refs", "repeated_tool_calls"]


def make_traces(n: int, now: datetime) -> list[Trace]:
    """``n`` support runs over the last 6 days, 6 steps each; every 10th cites an unseen id."""
    out = []
    for i in range(n):
        start = now - timedelta(days=6) + timedelta(seconds=i * (6 * 86400 / max(n, 1)))
        cited = f"CUST-{10000 + i}" if i % 10 else f"CUST-{90000 + i}"
        steps = [
            Step(
                id=f"s{j}",
                kind=StepKind.TOOL if j % 2 else StepKind.RETRIEVAL,
                name=f"lookup_{j % 3}",
                input={"customer": f"CUST-{10000 + i}", "page": j},
                output={"id": f"CUST-{10000 + i}", "notes": "x" * 200, "rows": list(range(20))},
                started_at=start + timedelta(milliseconds=10 * j),
            )
            for j in range(6)
        ]
        out.append(
            Trace(
                id=f"run-{i:07d}",
                agent=["support", "billing", "triage"][i % 3],
                started_at=start,
                ended_at=start + timedelta(seconds=4),
                input=f"What is the status of customer CUST-{10000 + i}?",
                output=f"Customer {cited} is active.",
                metadata={"release": f"v{i % 4}"},
                steps=steps,
            )
        )
    return out


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def median_ms(fn: Callable[[], Any], repeat: int) -> float:
    fn()  # warm
    return statistics.median(timed(fn)[0] for _ in range(repeat)) * 1000


def part1(url: str, traces: list[Trace], now: datetime, repeat: int) -> dict[str, float]:
    store: Any = open_store(url)
    try:
        batches = [traces[i : i + 250] for i in range(0, len(traces), 250)]
        ingest, _ = timed(lambda: [store.put_traces(b) for b in batches])
        review, _ = timed(lambda: score_runs(store, SCORERS, settings=Settings()))
        rate = median_ms(
            lambda: hallucination_rate(
                store=store, settings=Settings(), since_hours=168, scorers=SCORERS, now=now
            ),
            repeat,
        )
        report = hallucination_rate(
            store=store, settings=Settings(), since_hours=168, scorers=SCORERS, now=now
        )
        return {
            "ingest_s": round(ingest, 2),
            "ingest_runs_per_s": round(len(traces) / ingest),
            "review_s": round(review, 2),
            "review_runs_per_s": round(len(traces) / review),
            "rate_7d_ms": round(rate, 1),
            "runs": report.runs,
            "flagged": report.flagged,
        }
    finally:
        store.close()


_BULK = """
ALTER TABLE runs DISABLE TRIGGER USER;
ALTER TABLE scores DISABLE TRIGGER USER;
INSERT INTO runs (id, project, agent, name, status, started_at, ended_at, sort_at, has_output,
    step_count, release, written_at, digest, doc, steps)
SELECT 'big-' || lpad(g::text, 8, '0'), 'default', (ARRAY['support','billing','triage'])[g %% 3 + 1],
    NULL, 'ok', %(t0)s + g * %(step)s, %(t0)s + g * %(step)s + 4000000, %(t0)s + g * %(step)s, true,
    1, 'v' || (g %% 4), %(t0)s, decode(md5(g::text), 'hex'),
    json_build_object('schema_version', 1, 'id', 'big-' || lpad(g::text, 8, '0'),
        'project', 'default', 'status', 'ok', 'metadata',
        json_build_object('release', 'v' || (g %% 4)),
        'links', CASE WHEN g %% 5 = 0 THEN json_build_object('ticket', 'T-' || (g %% 50000))
            ELSE '{}'::json END),
    '[]'::json
FROM generate_series(0::bigint, %(n)s - 1) AS g;
INSERT INTO run_links (kind, item_id, run_id, sort_at)
SELECT 'ticket', 'T-' || (g %% 50000), 'big-' || lpad(g::text, 8, '0'), %(t0)s + g * %(step)s
FROM generate_series(0::bigint, %(n)s - 1, 5) AS g;
INSERT INTO scores (run_id, scorer, version, verdict, passed, value, detail, error, finding_count,
    scored_at, modes, mode_findings, run_project, run_agent, run_release, run_started_at,
    run_sort_at, doc)
SELECT 'big-' || lpad(g::text, 8, '0'), 'no_fabricated_refs', %(version)s, v.verdict,
    v.verdict = 'passed',
    NULL, '', NULL, CASE WHEN v.verdict = 'flagged' THEN 1 ELSE 0 END, %(t0)s,
    CASE WHEN v.verdict = 'flagged' THEN ARRAY['fabricated_grounding'] ELSE ARRAY[]::text[] END,
    CASE WHEN v.verdict = 'flagged' THEN ARRAY[1] ELSE ARRAY[]::integer[] END,
    'default', (ARRAY['support','billing','triage'])[g %% 3 + 1], 'v' || (g %% 4),
    %(t0)s + g * %(step)s, %(t0)s + g * %(step)s, '{}'::json
FROM generate_series(0::bigint, %(n)s - 1) AS g,
LATERAL (SELECT CASE WHEN g %% 1000 < 30 THEN 'flagged' WHEN g %% 1000 < 40 THEN 'unverifiable'
    WHEN g %% 1000 < 42 THEN 'error' ELSE 'passed' END AS verdict) AS v;
ALTER TABLE runs ENABLE TRIGGER USER;
ALTER TABLE scores ENABLE TRIGGER USER;
ANALYZE runs; ANALYZE scores;
"""


def part2(pg: str, n: int, now: datetime, repeat: int) -> dict[str, float]:
    import psycopg

    url = _schema_url(pg)
    store: Any = open_store(url)
    try:
        t0 = to_us(now - timedelta(days=7) + timedelta(minutes=1)) or 0
        step = (7 * 86400 * 1_000_000 - 120_000_000) // n
        months = {(to_us(now - timedelta(days=d)) or 0) for d in range(8)}
        from agentlens.store._postgres import _month_of

        store._ensure_months({_month_of(t) for t in months})
        schema = url.rsplit("schema=", 1)[1]
        version = get_scorer("no_fabricated_refs").version  # scores the rate counts: current
        with psycopg.connect(pg, autocommit=True, options=f"-c search_path={schema}") as conn:
            load, _ = timed(
                lambda: [
                    conn.execute(part, {"t0": t0, "step": step, "n": n, "version": version})
                    for part in _BULK.split(";\n")
                    if part.strip()
                ]
            )
        rebuild, _ = timed(store.rebuild_rate_rollup)
        with psycopg.connect(pg, autocommit=True, options=f"-c search_path={schema}") as conn:
            # what autovacuum does after a bulk load (index-only scans need the visibility map)
            conn.execute("VACUUM ANALYZE rate_runs, rate_rollup, run_rollup, runs")
        return {
            "bulk_load_s": round(load, 1),
            "rollup_rebuild_s": round(rebuild, 1),
            **_big_rates(store, now, repeat),
        }
    finally:
        store.close()


_SQLITE_BULK = (
    """
    WITH RECURSIVE g(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM g WHERE x < :n - 1)
    INSERT INTO runs (id, project, agent, name, status, started_at, ended_at, sort_at, has_output,
        step_count, release, doc, steps)
    SELECT printf('big-%08d', x), 'default',
        CASE x % 3 WHEN 0 THEN 'support' WHEN 1 THEN 'billing' ELSE 'triage' END, NULL, 'ok',
        :t0 + x * :step, :t0 + x * :step + 4000000, :t0 + x * :step, 1, 1, 'v' || (x % 4),
        json_object('schema_version', 1, 'id', printf('big-%08d', x), 'project', 'default',
            'status', 'ok', 'metadata', json_object('release', 'v' || (x % 4)),
            'links', CASE WHEN x % 5 = 0 THEN json_object('ticket', 'T-' || (x % 50000))
                ELSE json_object() END), '[]'
    FROM g
    """,
    """
    WITH RECURSIVE g(x) AS (SELECT 0 UNION ALL SELECT x + 5 FROM g WHERE x < :n - 5)
    INSERT INTO run_links (kind, item_id, run_id, sort_at)
    SELECT 'ticket', 'T-' || (x % 50000), printf('big-%08d', x), :t0 + x * :step FROM g
    """,
    """
    WITH RECURSIVE g(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM g WHERE x < :n - 1)
    INSERT INTO scores (run_id, scorer, version, verdict, passed, value, detail, error,
        finding_count, scored_at, run_project, run_agent, run_release, run_started_at, doc)
    SELECT printf('big-%08d', x), 'no_fabricated_refs', :version, v, v = 'passed', NULL, '', NULL,
        v = 'flagged', :t0, 'default',
        CASE x % 3 WHEN 0 THEN 'support' WHEN 1 THEN 'billing' ELSE 'triage' END,
        'v' || (x % 4), :t0 + x * :step, '{}'
    FROM (SELECT x, CASE WHEN x % 1000 < 30 THEN 'flagged' WHEN x % 1000 < 40 THEN 'unverifiable'
        WHEN x % 1000 < 42 THEN 'error' ELSE 'passed' END AS v FROM g)
    """,
    "INSERT INTO score_modes (run_id, scorer, version, mode, findings)"
    " SELECT run_id, scorer, version, 'fabricated_grounding', 1 FROM scores"
    " WHERE verdict = 'flagged'",
)
"""The same million runs and scores as :data:`_BULK`, in SQLite's tables."""


def part2_sqlite(path: Path, n: int, now: datetime, repeat: int) -> dict[str, float]:
    """:func:`part2`'s runs in a SQLite file: loaded with the rollup's triggers dropped, the
    rollup then rebuilt by the store's own function, and the same two rates timed."""
    import sqlite3

    from agentlens.store._sqlite_rates import rebuild_rate_rollup, rebuild_run_rollup

    open_store(f"sqlite:///{path}").close()  # created and migrated
    version = get_scorer("no_fabricated_refs").version  # as in part2: what the rate counts
    t0 = to_us(now - timedelta(days=7) + timedelta(minutes=1)) or 0
    step = (7 * 86400 * 1_000_000 - 120_000_000) // n
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        triggers = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")
        saved = triggers.fetchall()

        def load() -> None:
            conn.execute("BEGIN")
            for name, _ in saved:
                conn.execute(f'DROP TRIGGER "{name}"')
            for statement in _SQLITE_BULK:
                conn.execute(statement, {"n": n, "t0": t0, "step": step, "version": version})
            rebuild_rate_rollup(conn)
            rebuild_run_rollup(conn)  # the run counts too: the runs were written without triggers
            for _, sql in saved:
                conn.execute(sql)
            conn.execute("COMMIT")
            conn.execute("ANALYZE")

        load_s, _ = timed(load)
    finally:
        conn.close()
    store: Any = open_store(f"sqlite:///{path}")
    try:
        return {"bulk_load_and_rollup_s": round(load_s, 1), **_big_rates(store, now, repeat)}
    finally:
        store.close()


def _big_rates(store: Any, now: datetime, repeat: int) -> dict[str, Any]:
    """The rate over the last 7 days and its breakdown by day, each the median of ``repeat``."""
    settings = Settings()

    def rate() -> Any:
        return hallucination_rate(
            store=store, settings=settings, since_hours=168, scorers=SCORERS[:1], now=now
        )

    rate_ms = median_ms(rate, repeat)
    by_day_ms = median_ms(
        lambda: rate_breakdown(
            "day", store=store, settings=settings, since_hours=168, scorers=SCORERS[:1], now=now
        ),
        repeat,
    )
    report = rate()
    return {
        "runs": report.runs,
        "flagged": report.flagged,
        "rate_7d_ms": round(rate_ms, 1),
        "rate_by_day_7d_ms": round(by_day_ms, 1),
        **_link_pages(store, repeat),
    }


def _link_pages(store: Any, repeat: int) -> dict[str, Any]:
    """``/api/runs?link=ticket:ID``'s page (the newest 50 runs of one content item): from the
    ``run_links`` table, and, as it was read before that table, by the runs' documents (the
    same SQL as the old page, median of at most 3 calls: it reads every run)."""
    from agentlens.store._server import list_runs_page

    out: dict[str, Any] = {}
    for label, item in (("20_runs", "T-125"), ("none", "T-123")):
        page, _ = list_runs_page(store, None, before=None, limit=50, link=("ticket", item))
        out[f"link_page_{label}_found"] = len(page)
        out[f"link_page_{label}_ms"] = round(
            median_ms(
                lambda item=item: list_runs_page(
                    store, None, before=None, limit=50, link=("ticket", item)
                ),
                repeat,
            ),
            1,
        )
        found, ms = _old_link_page(store, item, min(repeat, 3))
        assert found == len(page), (found, len(page))
        out[f"link_page_{label}_by_documents_ms"] = round(ms, 1)
    return out


def _old_link_page(store: Any, item: str, repeat: int) -> tuple[int, float]:
    """The link page as it was read before ``run_links``: ``links.ticket`` of each run's JSON."""
    from agentlens.store._sqlite_review import SUMMARY_COLUMNS

    if hasattr(store, "runs_page"):  # PostgreSQL
        from agentlens.store._pg_review import pg_summary_columns

        sql = (
            f"SELECT r.sort_at, r.id, {pg_summary_columns()} FROM runs r"
            " LEFT JOIN run_review f ON f.run_id = r.id"
            " WHERE json_extract_path_text(r.doc, 'links', %s) = %s"
            " ORDER BY r.sort_at DESC, r.id DESC LIMIT %s"
        )

        def page() -> int:
            return len(store._query(sql, ("ticket", item, 51)))
    else:
        sql = (
            f"SELECT r.sort_at, r.id, {SUMMARY_COLUMNS} FROM runs r"
            " LEFT JOIN run_review f ON f.run_id = r.id WHERE json_extract(r.doc, ?) = ?"
            " ORDER BY r.sort_at DESC, r.id DESC LIMIT ?"
        )

        def page() -> int:
            rows = store.read(lambda c: c.execute(sql, ('$.links."ticket"', item, 51)).fetchall())
            return len(rows)

    return page(), median_ms(page, repeat)


_schemas: list[str] = []


def _schema_url(pg: str) -> str:
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    _schemas.append(schema)
    return f"{pg}{'&' if '?' in pg else '?'}schema={schema}"


def _backend_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a local process (a PostgreSQL backend), from ``/proc``."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ab_child(pg: str, schema: str, repeat: int) -> dict[str, Any]:
    """One side of ``--ab``: the 7-day rate on ``schema``, timed in this process."""
    import hashlib
    import os

    import psycopg

    if os.environ.get("BENCH_NO_MIGRATE") == "1":  # the baseline: read the newer schema as is
        import agentlens.store._postgres as pg_module

        pg_module.migrate_pg = lambda conn, schema, where: 0  # type: ignore[assignment]
    with psycopg.connect(pg, options=f"-c search_path={schema}") as conn:
        (t0,) = conn.execute("SELECT min(started_at) FROM runs").fetchone()
    now = from_us_utc(t0) + timedelta(days=7) - timedelta(minutes=1)  # part 2's "now"
    sep = "&" if "?" in pg else "?"
    store: Any = open_store(f"{pg}{sep}schema={schema}&pool_max=1")
    settings = Settings()

    def rate() -> Any:
        return hallucination_rate(
            store=store, settings=settings, since_hours=168, scorers=SCORERS[:1], now=now
        )

    def by_day() -> Any:
        return rate_breakdown(
            "day", store=store, settings=settings, since_hours=168, scorers=SCORERS[:1], now=now
        )

    def timed_calls(fn: Callable[[], Any], pid: int) -> dict[str, float]:
        walls = []
        s0, c0 = _backend_cpu_s(pid), time.process_time()
        for _ in range(repeat):
            w0 = time.perf_counter()
            fn()
            walls.append(time.perf_counter() - w0)
        # CPU per call over all the calls (/proc counts in clock ticks of 10 ms)
        client = (time.process_time() - c0) / repeat
        server = (_backend_cpu_s(pid) - s0) / repeat
        return {
            "wall_ms": round(statistics.median(walls) * 1000, 1),
            "client_cpu_ms": round(client * 1000, 1),
            "server_cpu_ms": round(server * 1000, 1),
            "cpu_ms": round((client + server) * 1000, 1),
        }

    try:
        report = rate()  # warm (and the schema migrated, for this code)
        days = by_day()
        (pid,) = store.read(lambda c: c.execute("SELECT pg_backend_pid()").fetchone())
        ids = "\n".join(report.flagged_run_ids).encode()
        for group in days.groups:
            ids += "\n".join(group.flagged_run_ids).encode()
        return {
            "rate": timed_calls(rate, pid),
            "by_day": timed_calls(by_day, pid),
            "runs": report.runs,
            "flagged": report.flagged,
            "ids_digest": hashlib.sha256(ids).hexdigest()[:16],
        }
    finally:
        store.close()


def from_us_utc(us: int) -> datetime:
    return datetime.fromtimestamp(us / 1_000_000, UTC)


def ab(pg: str, schema: str, baseline: str, rounds: int, repeat: int) -> dict[str, Any]:
    """``--ab``: this code and ``baseline``'s, alternating, each in its own process."""
    import os
    import subprocess
    import sys

    here = str(Path(__file__).resolve().parents[1] / "src")
    sides = {"before": (baseline, "1"), "after": (here, "0")}
    out: dict[str, list[dict[str, Any]]] = {k: [] for k in sides}
    # this code opens the schema first (migrating it), then it is vacuumed as after part 2's load
    env = dict(os.environ, PYTHONPATH=here, BENCH_NO_MIGRATE="0")
    cmd = [sys.executable, __file__, "--child", schema, "--pg", pg, "--repeat", "1"]
    subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    import psycopg

    with psycopg.connect(pg, autocommit=True, options=f"-c search_path={schema}") as conn:
        conn.execute("VACUUM ANALYZE")
    for _ in range(rounds):
        for name, (src, no_migrate) in sides.items():
            env = dict(os.environ, PYTHONPATH=src, BENCH_NO_MIGRATE=no_migrate)
            cmd = [sys.executable, __file__, "--child", schema, "--pg", pg, "--repeat", str(repeat)]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            out[name].append(json.loads(done.stdout))
            print(name, out[name][-1], file=sys.stderr)
    digests = {r["ids_digest"] for rows in out.values() for r in rows}
    return {"rounds": out, "same_flagged_ids": len(digests) == 1, "load": os.getloadavg()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=4000)
    parser.add_argument("--big", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--ab", metavar="SCHEMA", help="old and new code on a kept schema")
    parser.add_argument("--baseline-src", metavar="DIR", help="the old code's src/ (for --ab)")
    parser.add_argument("--rounds", type=int, default=4, help="alternating rounds (for --ab)")
    parser.add_argument("--child", metavar="SCHEMA", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(ab_child(args.pg, args.child, args.repeat)))
        return
    if args.ab:
        if not args.baseline_src:
            raise SystemExit("--ab needs --baseline-src DIR")
        print(
            json.dumps(ab(args.pg, args.ab, args.baseline_src, args.rounds, args.repeat), indent=2)
        )
        return
    import psycopg

    now = datetime.now(UTC).replace(microsecond=0)
    results: dict[str, Any] = {"runs": args.runs, "big": args.big}
    try:
        traces = make_traces(args.runs, now)
        with tempfile.TemporaryDirectory() as tmp:
            results["sqlite"] = part1(
                f"sqlite:///{Path(tmp) / 'bench.db'}", traces, now, args.repeat
            )
        results["postgres"] = part1(_schema_url(args.pg), traces, now, args.repeat)
        if args.big:
            results["postgres_big"] = part2(args.pg, args.big, now, args.repeat)
            with tempfile.TemporaryDirectory() as tmp:
                results["sqlite_big"] = part2_sqlite(
                    Path(tmp) / "big.db", args.big, now, args.repeat
                )
    finally:
        if not args.keep:
            with psycopg.connect(args.pg, autocommit=True) as conn:
                for schema in _schemas:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
