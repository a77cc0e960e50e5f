"""``agentlens score`` end to end, as whole processes, against the naive check on the same runs.

Generates ``--runs`` stored runs (bench_grounding's support agent: about 20 steps and 10 KB of
evidence each, about 1 in 20 with a fabricated reference) into a SQLite store cached under
``/tmp`` (``--cache``), then, for ``--rounds`` rounds, runs each variant as its own process on a
fresh copy of that store, alternating (naive, grounding, ... then again), and times it:

- ``naive``: ``benchmarks/naive_check.py``: the design essay's three-pattern check (JSON-dump
  the tool outputs, substring-test each match of three patterns) over every stored run;
- ``grounding``: ``agentlens score --scorer no_fabricated_refs --scorer parametric_leakage``;
- ``defaults``: ``agentlens score`` with the five default scorers;
- each ``agentlens score`` variant again with ``--workers 2`` (``grounding-j2``, ``defaults-j2``).

The agentlens package's bytecode is compiled first (as ``pip install`` compiles it), so no
process spends its time compiling sources.

Prints, per variant, the median over the rounds of CPU seconds (user + system of the process and
its workers) and wall seconds, the ratio of each to the naive check's, and runs/s per core (runs
over CPU seconds) and per second of wall time. Goals (issue 19): ``grounding`` within 2x of the
naive check, ``defaults`` within 3x. Then the flag counts of every scorer and a digest of the
stored scores (every score's JSON without its ``scored_at``) of each variant: equal digests
across rounds, worker counts and code versions mean byte-identical results.

Usage::

    python benchmarks/bench_score_e2e.py [--runs 2000] [--rounds 3] [--variants naive,grounding]
        [--cache /tmp/agentlens-bench-e2e] [--profile VARIANT]

The figures in docs/performance.md are at ``--runs 20000``. ``--profile VARIANT`` runs that variant
once under cProfile instead and prints its top functions by own time (``BENCH_SORT`` to change).

``--instructions`` counts instead of timing: each variant runs once under valgrind
(``cachegrind --cache-sim=no``, every process of it: ``--workers`` children too), and the
machine instructions it executed are printed beside the naive check's, with the same flag
counts and digests. The count is the same whatever else a shared machine is doing, so an A/B
of a few per cent (``--baseline-src``) shows in one run where timings need many rounds; it does
not see the time spent waiting on memory or in the kernel. Valgrind runs a process about 50x
slower: use ``--runs 2000``.
"""

from __future__ import annotations

import argparse
import compileall
import hashlib
import json
import os
import platform
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
GROUNDING = ["--scorer", "no_fabricated_refs", "--scorer", "parametric_leakage"]
VARIANTS: dict[str, list[str]] = {
    "naive": [],
    "grounding": GROUNDING,
    "defaults": [],
    "grounding-j2": [*GROUNDING, "--workers", "2"],
    "defaults-j2": ["--workers", "2"],
}
BASE = "@base"
"""Suffix of a variant run by the baseline's code (``--baseline-src``)."""
GOALS = {"grounding": 2.0, "defaults": 3.0, "grounding-j2": 2.0, "defaults-j2": 3.0}


def cached_store(folder: Path, runs: int, src: str | None) -> Path:
    """The generated store of ``runs`` runs, made once and kept in ``folder``; by the code in
    ``src`` when given (a baseline reads only the stores of its own schema or older)."""
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / f"runs-{runs}{'-base' if src else ''}.db"
    if not db.exists():
        partial = folder / f"{db.stem}.partial.db"
        partial.unlink(missing_ok=True)
        make = f"from bench_grounding import generate; generate({str(partial)!r}, {runs})"
        subprocess.run([sys.executable, "-c", make], cwd=HERE, env=child_env(src), check=True)
        partial.rename(db)
    return db


def precompile(src: str | None) -> None:
    """Compile the bytecode of the agentlens package that ``src`` (or the environment) imports,
    as ``pip install`` does for an installed package: every process timed then reads the
    ``.pyc`` files instead of compiling the sources again (an editable checkout, or one run with
    ``PYTHONDONTWRITEBYTECODE=1``, would otherwise pay about 0.2 s of compilation per process,
    the naive check too)."""
    where = "import agentlens, os; print(os.path.dirname(agentlens.__file__))"
    out = subprocess.run(
        [sys.executable, "-c", where], env=child_env(src), capture_output=True, text=True
    )
    if out.returncode == 0:
        compileall.compile_dir(out.stdout.strip(), quiet=1)


def command(variant: str, db: Path) -> list[str]:
    name = variant.removesuffix(BASE)
    if name == "naive":
        return [sys.executable, str(HERE / "naive_check.py"), "--db", str(db)]
    return [sys.executable, "-m", "agentlens", "--db", str(db), "score", *VARIANTS[name]]


def child_env(src: str | None = None) -> dict[str, str]:
    """The environment without any AGENTLENS_ setting (the defaults are what is timed), with
    ``src`` first on the path when given (the baseline's code)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLENS_")}
    if src:
        env["PYTHONPATH"] = os.pathsep.join([src, str(HERE)])
    return env


def timed(cmd: list[str], cwd: str, src: str | None) -> tuple[float, float, str]:
    """Run ``cmd`` to completion: (CPU seconds of it and its children, wall seconds, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, env=child_env(src), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, out.stdout


def counted(cmd: list[str], cwd: str, src: str | None) -> tuple[int, str]:
    """Run ``cmd`` to completion under valgrind: (machine instructions of it and of every
    process it started, stdout)."""
    out_dir = tempfile.mkdtemp(prefix="cachegrind-", dir=cwd)
    valgrind = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=no",
        "--trace-children=yes",
        f"--cachegrind-out-file={out_dir}/cg.%p",
    ]
    # one hash seed for every count: the counts of two runs of the same code then differ by
    # well under 0.1% (with random seeds, by up to about 0.5%)
    env = {**child_env(src), "PYTHONHASHSEED": "0"}
    out = subprocess.run([*valgrind, *cmd], cwd=cwd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(
            f"{' '.join(cmd)} failed under valgrind ({out.returncode}):\n{out.stderr[-2000:]}"
        )
    total = 0
    for path in Path(out_dir).iterdir():
        for line in path.read_text().splitlines():
            if line.startswith("summary:"):
                total += int(line.split()[1])
    shutil.rmtree(out_dir, ignore_errors=True)
    return total, out.stdout


def run_once(
    variant: str,
    db: Path,
    work: str,
    src: str | None,
    measure: Callable[[list[str], str, str | None], tuple[Any, ...]],
) -> tuple[tuple[Any, ...], int | tuple[str, str]]:
    """Run ``variant`` once on a fresh copy of the store ``db``, measured by ``measure``
    (:func:`timed` or :func:`counted`, whose last value is the process's stdout): (the other
    values ``measure`` gave, the outcome). The outcome is the runs the naive check flagged,
    or the flags per scorer (JSON) and the digest of the stored scores."""
    copy = Path(work) / f"{variant}.db"
    shutil.copyfile(db, copy)
    try:
        *measured, stdout = measure(command(variant, copy), work, src)
        if variant == "naive":
            return tuple(measured), int(json.loads(stdout)["flagged"])
        flags, digest = stored_results(copy)
        return tuple(measured), (json.dumps(flags), digest)
    finally:
        copy.unlink()


def stored_results(db: Path) -> tuple[dict[str, int], str]:
    """Flagged runs per scorer, and a digest of every stored score without its time."""
    digest = hashlib.sha256()
    flagged: Counter[str] = Counter()
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(
            "SELECT run_id, scorer, version, verdict, doc FROM scores"
            " ORDER BY run_id, scorer, version"
        )
        for run_id, scorer, version, verdict, doc in rows:
            body = json.loads(doc)
            body.pop("scored_at", None)
            digest.update(f"{run_id}\0{scorer}\0{version}\0".encode())
            digest.update(json.dumps(body, sort_keys=True).encode())
            flagged[scorer] += verdict == "flagged"
    finally:
        conn.close()
    return dict(sorted(flagged.items())), digest.hexdigest()[:16]


def profile(variant: str, db: Path, work: str) -> None:
    copy = Path(work) / "profile.db"
    shutil.copyfile(db, copy)
    sort = os.environ.get("BENCH_SORT", "tottime")
    cmd = command(variant, copy)
    cmd[1:1] = ["-m", "cProfile", "-s", sort]
    out = subprocess.run(cmd, cwd=work, env=child_env(None), capture_output=True, text=True)
    lines = out.stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if "function calls" in line), 0)
    print("\n".join(lines[start : start + 60]))
    print(out.stderr[-2000:], file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument(
        "--cache", default=os.path.join(tempfile.gettempdir(), "agentlens-bench-e2e")
    )
    parser.add_argument("--profile", metavar="VARIANT", help="cProfile one variant, once")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count machine instructions under valgrind (one run per variant) instead of timing",
    )
    parser.add_argument(
        "--baseline-src",
        metavar="DIR",
        help="also run each agentlens variant with the code in DIR (a checkout's src/), "
        "alternating with this code's, on the same runs (stored in DIR's schema)",
    )
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or ("naive" not in variants and not args.profile):
        raise SystemExit(f"--variants: choose from {', '.join(VARIANTS)} (naive included)")
    if args.instructions and shutil.which("valgrind") is None:
        raise SystemExit("--instructions: valgrind is not installed (apt-get install valgrind)")
    base = args.baseline_src
    if base:
        variants += [v + BASE for v in variants if v != "naive"]
    db = cached_store(Path(args.cache), args.runs, base)
    precompile(None)
    if base:
        precompile(base)
    work = tempfile.mkdtemp(prefix="agentlens-e2e-")
    try:
        if args.profile:
            profile(args.profile, db, work)
            return 0
        if args.instructions:
            instructions(args.runs, variants, db, work, base)
            return 0
        cpu: dict[str, list[float]] = {v: [] for v in variants}
        wall: dict[str, list[float]] = {v: [] for v in variants}
        results: dict[str, set[tuple[str, str]]] = {v: set() for v in variants}
        naive_flagged: set[int] = set()
        for rnd in range(args.rounds):
            for v in variants:
                (c, w), outcome = run_once(v, db, work, base if v.endswith(BASE) else None, timed)
                cpu[v].append(c)
                wall[v].append(w)
                if isinstance(outcome, int):
                    naive_flagged.add(outcome)
                else:
                    results[v].add(outcome)
                print(f"round {rnd + 1} {v}: {c:.1f} s CPU, {w:.1f} s wall", file=sys.stderr)
        report(args.runs, variants, cpu, wall, results, naive_flagged, db)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def instructions(runs: int, variants: list[str], db: Path, work: str, base: str | None) -> None:
    """``--instructions``: each variant once under valgrind, and the table of its counts."""
    count: dict[str, int] = {}
    results: dict[str, tuple[str, str]] = {}
    naive_flagged = None
    for v in variants:
        # this code (the naive check's too) by its own src/, as the baseline by its: the same
        # shape of path to search on every import, which the counts would otherwise show
        src = base if v.endswith(BASE) else str(HERE.parent / "src")
        (count[v],), outcome = run_once(v, db, work, src, counted)
        if isinstance(outcome, int):
            naive_flagged = outcome
        else:
            results[v] = outcome
        print(f"{v}: {count[v]:,} instructions", file=sys.stderr)
    print(f"machine: {platform.machine()}, Python {platform.python_version()}; valgrind cachegrind")
    print(f"store: {runs} runs, {db.stat().st_size / 2**20:.0f} MiB; one run per variant")
    print(f"{'variant':>13} {'G instr':>9} {'instr/naive':>12} {'k instr/run':>12}")
    for v in variants:
        ratio = count[v] / count["naive"]
        print(f"{v:>13} {count[v] / 1e9:9.3f} {ratio:11.2f}x {count[v] / runs / 1e3:12,.0f}")
    print(f"naive flagged runs: {naive_flagged}")
    for v, (flags, digest) in results.items():
        print(f"{v}: flagged {flags} digest {digest}")


def report(
    runs: int,
    variants: list[str],
    cpu: dict[str, list[float]],
    wall: dict[str, list[float]],
    results: dict[str, set[tuple[str, str]]],
    naive_flagged: set[int],
    db: Path,
) -> None:
    load = os.getloadavg()[0]
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs (shared), Python "
        f"{platform.python_version()}, load average {load:.1f} at the end"
    )
    rounds = len(next(iter(cpu.values())))
    print(f"store: {runs} runs, {db.stat().st_size / 2**20:.0f} MiB; medians of {rounds} rounds")
    base_cpu = statistics.median(cpu["naive"])
    base_wall = statistics.median(wall["naive"])
    print(
        f"{'variant':>13} {'CPU s':>8} {'wall s':>8} {'CPU/naive':>10} {'wall/naive':>11}"
        f" {'runs/s/core':>12} {'runs/s':>8}  goal"
    )
    for v in variants:
        c, w = statistics.median(cpu[v]), statistics.median(wall[v])
        goal = GOALS.get(v.removesuffix(BASE))
        verdict = (
            ""
            if goal is None
            else f"<= {goal:.0f}x: {'met' if c / base_cpu <= goal else 'NOT met'}"
        )
        print(
            f"{v:>13} {c:8.1f} {w:8.1f} {c / base_cpu:9.2f}x {w / base_wall:10.2f}x"
            f" {runs / c:12,.0f} {runs / w:8,.0f}  {verdict}"
        )
    print(f"naive flagged runs: {sorted(naive_flagged)}")
    for v in variants:
        if v != "naive":
            seen = sorted(results[v])
            same = "same in every round" if len(seen) == 1 else "DIFFERS between rounds"
            print(f"{v}: flagged {'; '.join(f'{f} digest {d}' for f, d in seen)} ({same})")


if __name__ == "__main__":
    raise SystemExit(main())
