"""Writing scores, alone: ``put_scores`` of the benchmark's scores into a fresh copy of its store.

What ``agentlens score`` pays after scoring (issue 19): the score rows, their failure modes,
the rate rollup refreshed in bulk, each run's flags derived and written. The scores are those
``agentlens score`` (the five default scorers) stores for bench_score_e2e's runs (generated
once and cached under ``/tmp``, like that benchmark's store); each pass, in its own process,
copies the unscored store, opens it, and writes the scores in the command's batches (200 runs
per ``put_scores``), timing the writes only (CPU time, ``time.process_time``). ``--scorers 2``
writes only the two grounding scorers' scores.

``--baseline-src DIR`` also runs each pass with another checkout's ``src/``, alternating with
this code's. Each pass prints a digest of every table the write fills (scores without their
times, failure modes, the rate and run rollups, the runs' review rows, flag modes and content
flags): the same digest for both codes means the same stored bytes and rates.

Usage::

    python benchmarks/bench_put_scores.py [--runs 2000] [--rounds 3] [--scorers 5]
        [--baseline-src DIR] [--profile]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_score_e2e import cached_store, child_env  # noqa: E402

GROUNDING = ("no_fabricated_refs", "parametric_leakage")
BATCH_RUNS = 200
"""Runs per ``put_scores``: ``agentlens score``'s chunk."""
_TIMES = {"scored_at", "flagged_at", "stored_at", "claimed_at", "reviewed_at", "lease_until"}
_TABLES = {
    "scores": "run_id, scorer, version",
    "score_modes": "run_id, scorer, version, mode",
    "rate_sigs": "id",
    "rate_runs": "run_id",
    "rate_rollup": "1, 2, 3, 4, 5",
    "run_rollup": "1, 2, 3, 4",
    "run_review": "run_id",
    "run_flag_modes": "1, 2",
    "content_flags": "1, 2, 3",
    "review_verdicts": "1, 2",
}


def scores_file(folder: Path, db: Path) -> Path:
    """The JSON lines of every score ``agentlens score`` stores for the runs of ``db``."""
    out = folder / f"scores-{db.stem}.jsonl"
    if out.exists():
        return out
    scored = folder / f"scored-{db.stem}.db"
    shutil.copyfile(db, scored)
    cmd = [sys.executable, "-m", "agentlens", "--db", str(scored), "score"]
    subprocess.run(cmd, check=True, capture_output=True, env=this_code_env())
    conn = sqlite3.connect(scored)
    try:
        rows = conn.execute("SELECT doc FROM scores ORDER BY rowid").fetchall()
    finally:
        conn.close()
    partial = out.with_suffix(".partial")
    partial.write_text("".join(doc + "\n" for (doc,) in rows))
    partial.rename(out)
    scored.unlink()
    return out


def this_code_env() -> dict[str, str]:
    """The environment of a child running this checkout's code."""
    env = child_env(None)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent / "src"), str(HERE)])
    return env


def digest(db: Path) -> str:
    """A digest of every table the write fills, without the times it records."""
    h = hashlib.sha256()
    conn = sqlite3.connect(db)
    try:
        for table, order in _TABLES.items():
            cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            cols = [c for c in cols if c not in _TIMES]
            h.update(table.encode())
            for row in conn.execute(f"SELECT {', '.join(cols)} FROM {table} ORDER BY {order}"):
                values = list(row)
                if table == "scores":
                    doc = json.loads(values[cols.index("doc")])
                    doc.pop("scored_at", None)
                    values[cols.index("doc")] = json.dumps(doc, sort_keys=True)
                h.update(repr(values).encode())
    finally:
        conn.close()
    return h.hexdigest()[:16]


def one_pass(db: str, scores: str, scorers: int, work: str, profile: bool) -> None:
    """In the child: write the scores into a copy of ``db``; print JSON (CPU s, digest)."""
    from agentlens.model import Score
    from agentlens.store import open_store

    loaded = [Score.model_validate_json(line) for line in Path(scores).read_text().splitlines()]
    if scorers == 2:
        loaded = [s for s in loaded if s.scorer in GROUNDING]
    by_run: dict[str, list[Score]] = {}
    for score in loaded:
        by_run.setdefault(score.run_id, []).append(score)
    ids = list(by_run)
    batches = [
        [s for run_id in ids[i : i + BATCH_RUNS] for s in by_run[run_id]]
        for i in range(0, len(ids), BATCH_RUNS)
    ]
    copy = Path(work) / f"put-{os.getpid()}.db"
    shutil.copyfile(db, copy)
    store = open_store(f"sqlite:///{copy}")
    store.count_runs()  # opened and migrated before the clock starts
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    start = time.process_time()
    for batch in batches:
        store.put_scores(batch)
    cpu = time.process_time() - start
    if profiler is not None:
        import pstats

        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(30)
    store.close()
    print(json.dumps({"cpu": cpu, "runs": len(ids), "scores": len(loaded), "digest": digest(copy)}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scorers", type=int, choices=(2, 5), default=5)
    parser.add_argument(
        "--cache", default=os.path.join(tempfile.gettempdir(), "agentlens-bench-e2e")
    )
    parser.add_argument("--baseline-src", metavar="DIR")
    parser.add_argument("--profile", action="store_true", help="cProfile one pass of this code")
    parser.add_argument(
        "--child", nargs=3, metavar=("DB", "SCORES", "WORK"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.child:
        db, scores, work = args.child
        one_pass(db, scores, args.scorers, work, args.profile)
        return 0
    folder = Path(args.cache)
    db = cached_store(folder, args.runs, args.baseline_src)  # the baseline's schema
    scores = scores_file(folder, db)
    codes: list[str | None] = [None]
    if args.baseline_src:
        codes.append(args.baseline_src)
    rounds = 1 if args.profile else args.rounds
    cpu: dict[str, list[float]] = {}
    digests: dict[str, set[str]] = {}
    counts = (0, 0)
    work = tempfile.mkdtemp(prefix="agentlens-put-")
    try:
        for rnd in range(rounds):
            for src in codes:
                name = "baseline" if src else "this code"
                cmd = [sys.executable, __file__, "--scorers", str(args.scorers)]
                cmd += ["--profile"] if args.profile else []
                cmd += ["--child", str(db), str(scores), work]
                env = child_env(src) if src else this_code_env()
                out = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if out.returncode != 0:
                    raise SystemExit(f"{name} failed:\n{out.stderr[-2000:]}")
                if args.profile:
                    print(out.stderr)
                result = json.loads(out.stdout.splitlines()[-1])
                counts = (result["runs"], result["scores"])
                cpu.setdefault(name, []).append(result["cpu"])
                digests.setdefault(name, set()).add(result["digest"])
                us = result["cpu"] / result["runs"] * 1e6
                print(f"round {rnd + 1} {name}: {us:.0f} us per run", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()[0]
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs (shared), Python "
        f"{platform.python_version()}, load average {load:.1f} at the end"
    )
    print(f"{counts[0]} runs, {counts[1]} scores, {BATCH_RUNS} runs per put_scores; medians")
    for name, values in cpu.items():
        median = statistics.median(values)
        print(
            f"{name:>10}: {median / counts[0] * 1e6:6.0f} us per run, "
            f"{median / counts[1] * 1e6:5.1f} us per score, digest {', '.join(sorted(digests[name]))}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
