"""Benchmark: ``agentlens rate`` over a store of 1,000,000 scored runs.

Targets (issue 5): a 7-day window in under 200 ms; ``--by day`` over 90 days in under 1 s.

The store: 1,000,000 runs spread uniformly over the 180 days before now (about 5,560 a day),
four agent roles, six releases in time order, each run scored by two scorers (``bench_grounding``
and ``bench_loops``, version 1; about 3% of runs flagged for grounding, 1% unverifiable, 0.2%
errors; 2% flagged for loops), and the oldest 60 days also carry results of an older
``bench_grounding`` version 0 (re-scored history), about 2.33 million score rows in all.

It is built with ``executemany`` straight into the store's own tables (opened, and so migrated,
by :class:`SQLiteStore` first) in batches of 50,000 rows, because building 1M pydantic traces and
2.3M scores through ``put_traces``/``put_scores`` takes minutes; the rows have exactly the columns
``put_traces``/``put_scores`` write. The rate rollup (schema migration 2) is filled by the
store's own triggers as the score rows go in, exactly as on every other write path. A store built
by an older agentlens (schema 1) is migrated when opened: migration 2 fills the rollup from the
scores in bulk. The store is kept (``--db``), so later runs reuse it.

Compared side by side in the same run, on the same store, with three baselines:

- *scan (previous implementation)*: the same public calls with ``rate_counts`` replaced by
  :func:`scan_rate_counts` (``tests/_rate_scan.py``), which aggregates the window's rows of
  ``scores`` (what ``agentlens rate`` did before migration 2); the results must be equal;
- *naive SQL + Python*: fetch every score row of the window (run id, scorer, version, verdict and
  its failure modes) and aggregate in Python with the reference tally;
- *store protocol*: ``list_runs`` + ``get_scores`` per run (what a backend without SQL does), on
  the 7-day window only, once (it is slow).

It also times the price of the rollup on writes: ``put_scores`` of 2 scores for each of 5,000
runs into a new store, with the triggers and with them dropped.

Usage: ``python benchmarks/bench_rate.py [--db PATH] [--runs N] [--repeat K] [--rebuild]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from agentlens._ids import new_id
from agentlens.analytics import ScoreFacts, hallucination_rate, rate_breakdown, tally
from agentlens.analytics._rate import python_rate_counts
from agentlens.config import Settings
from agentlens.eval import ScoreResult, define_scorer
from agentlens.model import FailureMode, Finding, Score, Trace, Verdict
from agentlens.store import RateCounts, RateQuery, VersionSelector, open_store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _rate_scan import scan_rate_counts  # the reference scan lives in tests/

DAYS = 180
AGENTS = ("support", "billing", "research", "triage")
SETTINGS = Settings()


def _grounding(*, trace: Any) -> ScoreResult:  # pragma: no cover - registered for its version
    return ScoreResult(passed=True)


def _loops(*, trace: Any) -> ScoreResult:  # pragma: no cover
    return ScoreResult(passed=True)


define_scorer("bench_grounding", _grounding, version="1")
define_scorer("bench_loops", _loops, version="1")


def _us(t: datetime) -> int:
    return (t - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def build(path: Path, runs: int, now: datetime, seed: int = 7) -> None:
    """Fill a new store at ``path`` with ``runs`` scored runs."""
    store = open_store(f"sqlite:///{path}")  # creates and migrates the schema
    store.close()
    rng = random.Random(seed)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -262144")
    start_us = _us(now - timedelta(days=DAYS))
    span_us = DAYS * 86_400_000_000
    old_cutoff = start_us + 60 * 86_400_000_000
    batch = 50_000
    t0 = time.perf_counter()
    conn.execute("BEGIN")
    run_rows: list[tuple[Any, ...]] = []
    score_rows: list[tuple[Any, ...]] = []
    mode_rows: list[tuple[Any, ...]] = []
    for i in range(runs):
        started = start_us + (span_us * i) // runs + rng.randrange(0, max(1, span_us // runs))
        run_id = new_id(started // 1000)
        agent = AGENTS[rng.randrange(len(AGENTS))]
        release = f"v{1 + (started - start_us) * 6 // span_us}"
        iso = datetime.fromtimestamp(started / 1e6, UTC).isoformat().replace("+00:00", "Z")
        doc = json.dumps(
            {
                "schema_version": 1,
                "id": run_id,
                "project": "default",
                "agent": agent,
                "status": "ok",
                "started_at": iso,
                "output": "answer",
                "metadata": {"release": release},
            },
            separators=(",", ":"),
        )
        run_rows.append(
            (
                run_id,
                "default",
                agent,
                None,
                "ok",
                started,
                started + 2_000_000,
                started,
                1,
                0,
                release,
                doc,
            )
        )
        scored_at = started + 60_000_000
        versions = [("bench_grounding", "1"), ("bench_loops", "1")]
        if started < old_cutoff:
            versions.append(("bench_grounding", "0"))
        for scorer, version in versions:
            roll = rng.random()
            modes: list[str] = []
            if scorer == "bench_grounding":
                if roll < 0.03:
                    verdict = "flagged"
                    modes = ["fabricated_grounding"] + (
                        ["parametric_leakage"] if roll < 0.01 else []
                    )
                elif roll < 0.04:
                    verdict, modes = "unverifiable", ["fabricated_grounding"]
                elif roll < 0.042:
                    verdict = "error"
                else:
                    verdict = "passed"
            else:
                verdict, modes = (
                    ("flagged", ["repeated_tool_call"]) if roll < 0.02 else ("passed", [])
                )
            findings = [
                {"failure_mode": m, "text": "CUST-48231", "unverifiable": verdict == "unverifiable"}
                for m in modes
            ]
            score_doc = json.dumps(
                {
                    "run_id": run_id,
                    "scorer": scorer,
                    "version": version,
                    "passed": verdict == "passed",
                    "verdict": verdict,
                    "findings": findings,
                    "scored_at": iso,
                },
                separators=(",", ":"),
            )
            score_rows.append(
                (
                    run_id,
                    scorer,
                    version,
                    verdict,
                    int(verdict == "passed"),
                    float(len(modes)),
                    "",
                    "boom" if verdict == "error" else None,
                    len(findings),
                    scored_at,
                    "default",
                    agent,
                    release,
                    started,
                    score_doc,
                )
            )
            mode_rows.extend((run_id, scorer, version, m, 1) for m in modes)
        if len(run_rows) >= batch:
            _flush(conn, run_rows, score_rows, mode_rows)
    _flush(conn, run_rows, score_rows, mode_rows)
    conn.execute("COMMIT")
    conn.close()
    print(f"built {runs:,} runs in {time.perf_counter() - t0:.1f} s -> {path}", flush=True)


def _flush(conn: sqlite3.Connection, runs: list[Any], scores: list[Any], modes: list[Any]) -> None:
    conn.executemany(
        "INSERT INTO runs (id, project, agent, name, status, started_at, ended_at, sort_at,"
        " has_output, step_count, release, doc, steps) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,'[]')",
        runs,
    )
    conn.executemany(
        "INSERT INTO scores (run_id, scorer, version, verdict, passed, value, detail, error,"
        " finding_count, scored_at, run_project, run_agent, run_release, run_started_at, doc)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        scores,
    )
    conn.executemany(
        "INSERT INTO score_modes (run_id, scorer, version, mode, findings) VALUES (?,?,?,?,?)",
        modes,
    )
    runs.clear()
    scores.clear()
    modes.clear()


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Median wall time (s) of ``repeat`` calls after one warm-up call, and the last result."""
    result = fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def timed_cpu(fn: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """Median wall time and median CPU time of the process (s) of ``repeat`` calls after one
    warm-up call, and the last result."""
    result = fn()
    walls, cpus = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus), result


def naive(store: Any, since: datetime, now: datetime, by_day: bool) -> Any:
    """Baseline: every score row of the window into Python, then the reference tally."""
    sql = (
        "SELECT s.run_id, s.run_started_at, s.verdict, (SELECT group_concat(mode) FROM score_modes m"
        " WHERE m.run_id = s.run_id AND m.scorer = s.scorer AND m.version = s.version)"
        " FROM scores s WHERE s.run_started_at >= ? AND s.run_started_at < ?"
        " AND s.version = '1' AND s.scorer IN ('bench_grounding', 'bench_loops')"
    )
    rows = store.read(lambda c: c.execute(sql, (_us(since), _us(now))).fetchall())
    per_run: dict[str, tuple[int, list[ScoreFacts]]] = {}
    for run_id, started, verdict, modes in rows:
        entry = per_run.setdefault(run_id, (started, []))
        entry[1].append(ScoreFacts(verdict, frozenset(modes.split(",")) if modes else frozenset()))
    if not by_day:
        return tally((k, v[1]) for k, v in per_run.items())
    days: dict[str, list[tuple[str, list[ScoreFacts]]]] = {}
    for run_id, (started, facts) in per_run.items():
        day = datetime.fromtimestamp(started / 1e6, UTC).date().isoformat()
        days.setdefault(day, []).append((run_id, facts))
    return [tally(v, key=k) for k, v in sorted(days.items())]


def machine() -> str:
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()[:12]
    return "\n".join(
        [
            f"nproc: {os.cpu_count()}",
            f"python: {platform.python_version()} ({platform.python_implementation()})",
            f"sqlite: {sqlite3.sqlite_version}",
            *lscpu,
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--db", type=Path, default=Path(tempfile.gettempdir()) / "agentlens_bench_rate.db"
    )
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args()
    stamp = args.db.with_suffix(".now")
    if args.rebuild or not args.db.exists() or not stamp.exists():
        for p in (args.db, Path(f"{args.db}-wal"), Path(f"{args.db}-shm")):
            p.unlink(missing_ok=True)
        now = datetime.now(UTC).replace(microsecond=0)
        build(args.db, args.runs, now)
        stamp.write_text(now.isoformat())
    now = datetime.fromisoformat(stamp.read_text())
    print(machine())
    print(f"store: {args.db} ({args.db.stat().st_size / 1e6:.0f} MB), now = {now.isoformat()}\n")

    print(f"{'measurement':56} {'median':>10}  notes")
    for name, seconds, note in measure(args.db, now, args.repeat):
        print(f"{name:56} {seconds * 1000:8.1f} ms  {note}", flush=True)
    for name, seconds, note in write_cost(args.repeat):
        print(f"{name:56} {seconds * 1000:8.1f} ms  {note}", flush=True)


class Scanning:
    """A store whose rate queries are answered by the previous implementation (the scan over
    ``scores``, ``tests/_rate_scan.py``) instead of the rollup."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def rate_counts(self, query: RateQuery, by: str | None = None) -> list[RateCounts]:
        return scan_rate_counts(self.store, query, by)

    def stored_scorers(self) -> list[str]:
        return list(self.store.stored_scorers())

    def stored_versions(
        self, scorer: str, start_us: int | None = None, end_us: int | None = None
    ) -> list[tuple[str, int]]:
        return list(self.store.stored_versions(scorer, start_us, end_us))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def scanning(fn: Callable[[Any], Any], store: Any) -> Callable[[], Any]:
    """``fn(store)`` run with the previous implementation (the scan over ``scores``)."""
    return lambda: fn(Scanning(store))


def measure(db: Path, now: datetime, repeat: int) -> list[tuple[str, float, str]]:
    """Time the rate queries and their baselines; check that they agree."""
    store = open_store(f"sqlite:///{db}")
    week, quarter = now - timedelta(days=7), now - timedelta(days=90)
    scorers = ["bench_grounding", "bench_loops"]
    results: list[tuple[str, float, str]] = []
    try:

        def week_rate(store: Any = store) -> Any:
            return hallucination_rate(
                start=week, end=now, scorers=scorers, store=store, settings=SETTINGS
            )

        def by_day(store: Any = store) -> Any:
            return rate_breakdown(
                "day", start=quarter, end=now, scorers=scorers, store=store, settings=SETTINGS
            )

        def by_mode(store: Any = store) -> Any:
            return rate_breakdown(
                "mode", start=week, end=now, scorers=scorers, store=store, settings=SETTINGS
            )

        t, report = timed(week_rate, repeat)
        results.append(("rate, 7 days", t, f"{report.runs:,} runs, rate {report.rate:.4f}"))
        t_scan, scanned = timed(scanning(week_rate, store), max(3, repeat // 2))
        assert scanned == report, "the rollup and the scan disagree"
        results.append(("  baseline: scan over scores (previous)", t_scan, "equal report"))
        t_naive, counts = timed(lambda: naive(store, week, now, False), 3)
        assert counts.flagged == report.flagged and counts.scored == report.scored
        results.append(("  baseline: naive SQL + Python", t_naive, "same counts"))

        t, breakdown = timed(by_day, repeat)
        total = sum(g.runs for g in breakdown.groups)
        flagged = sum(g.flagged for g in breakdown.groups)
        results.append(
            (
                "--by day, 90 days",
                t,
                f"{len(breakdown.groups)} days, {total:,} runs, {flagged:,} flagged ids",
            )
        )
        t_scan, scanned = timed(scanning(by_day, store), 3)
        assert scanned == breakdown, "the rollup and the scan disagree"
        results.append(("  baseline: scan over scores (previous)", t_scan, "equal breakdown"))
        t_naive, days = timed(lambda: naive(store, quarter, now, True), 1)
        assert [d.flagged for d in days] == [g.flagged for g in breakdown.groups]
        results.append(("  baseline: naive SQL + Python", t_naive, "same counts"))

        t, modes = timed(by_mode, repeat)
        results.append(("--by mode, 7 days", t, f"{len(modes.groups)} modes"))
        t_scan, scanned = timed(scanning(by_mode, store), max(3, repeat // 2))
        assert scanned == modes, "the rollup and the scan disagree"
        results.append(("  baseline: scan over scores (previous)", t_scan, "equal breakdown"))

        query = RateQuery(
            selectors=(
                VersionSelector("bench_grounding", "1"),
                VersionSelector("bench_loops", "1"),
            ),
            start_us=_us(week),
            end_us=_us(now),
        )
        t0 = time.perf_counter()
        (slow,) = python_rate_counts(store, query)
        assert slow.flagged == report.flagged
        results.append(
            ("  baseline: store protocol, 7 days (1 run)", time.perf_counter() - t0, "same")
        )
    finally:
        store.close()
    return results


def write_cost(repeat: int, runs: int = 5_000) -> list[tuple[str, float, str]]:
    """``put_scores`` of 2 scores per run into a new store, with and without the triggers."""
    rng = random.Random(3)
    started = datetime(2026, 1, 1, tzinfo=UTC)
    traces = [
        Trace(agent=AGENTS[i % 4], started_at=started + timedelta(seconds=i), output="x")
        for i in range(runs)
    ]
    scores = []
    for run in traces:
        for name in ("bench_grounding", "bench_loops"):
            flagged = rng.random() < 0.05
            scores.append(
                Score(
                    run_id=run.id,
                    scorer=name,
                    version="1",
                    passed=not flagged,
                    verdict=Verdict.FLAGGED if flagged else Verdict.PASSED,
                    findings=[Finding(failure_mode=FailureMode.FABRICATED_GROUNDING, text="X")]
                    if flagged
                    else [],
                )
            )
    results = []
    timings: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(max(3, repeat // 2)):
            for triggers in (True, False):
                store = open_store(f"sqlite:///{Path(tmp) / f'w{i}{triggers}.db'}")
                try:
                    store.put_traces(traces)
                    if not triggers:
                        store._write(_drop_triggers)  # type: ignore[attr-defined]
                    t0 = time.perf_counter()
                    store.put_scores(scores)
                    timings[triggers].append(time.perf_counter() - t0)
                finally:
                    store.close()
    for triggers in (True, False):
        label = "with the rollup triggers" if triggers else "  baseline: triggers dropped"
        t = statistics.median(timings[triggers])
        results.append(
            (
                f"put_scores, {len(scores):,} scores, {label}",
                t,
                f"{t / len(scores) * 1e6:.0f} µs a score",
            )
        )
    return results


def _drop_triggers(conn: sqlite3.Connection) -> None:
    names = conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall()
    for (name,) in names:
        conn.execute(f"DROP TRIGGER {name}")


if __name__ == "__main__":
    main()
