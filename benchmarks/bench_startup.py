"""Start-up of the command line, as whole processes: what every command and every ``--workers``
child pays before it does any work.

Times, alternating, for ``--rounds`` rounds (each variant its own process; CPU seconds of the
process, user + system, from the children's resource usage):

- ``python``: ``python -c pass`` (the interpreter alone);
- ``naive``: ``benchmarks/naive_check.py`` on an empty store (it imports agentlens's store and
  model, as the baseline of ``bench_score_e2e.py``);
- ``help``: ``agentlens --help``;
- ``score``: ``agentlens score`` on an empty store (the five default scorers, nothing to score);
- ``runs``: ``agentlens runs`` on an empty store (a listing).

With ``--baseline-src DIR`` each agentlens variant also runs with the code in ``DIR`` (a
checkout's ``src/``), alternating with this code's. The package's bytecode is compiled first, as
``pip install`` compiles it. Prints the median and the range of each variant's CPU and wall
seconds, and the load average before and after.

Usage::

    python benchmarks/bench_startup.py [--rounds 15] [--baseline-src DIR] [--variants help,score]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_score_e2e import child_env, precompile  # noqa: E402

BASE = "@base"
VARIANTS = ("python", "naive", "help", "score", "runs")


def command(variant: str, db: Path) -> list[str]:
    name = variant.removesuffix(BASE)
    cli = [sys.executable, "-m", "agentlens"]
    if name == "python":
        return [sys.executable, "-c", "pass"]
    if name == "naive":
        return [sys.executable, str(HERE / "naive_check.py"), "--db", str(db)]
    if name == "help":
        return [*cli, "--help"]
    if name == "score":
        return [*cli, "--db", str(db), "score"]
    if name == "runs":
        return [*cli, "--db", str(db), "runs"]
    raise SystemExit(f"unknown variant {variant}")


def timed(cmd: list[str], cwd: str, src: str | None) -> tuple[float, float]:
    """CPU and wall seconds of ``cmd`` run to completion (any exit status but a crash)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, env=child_env(src), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--baseline-src", metavar="DIR", help="also time the code in DIR")
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"--variants: choose from {', '.join(VARIANTS)}")
    base = args.baseline_src
    if base:
        variants += [v + BASE for v in variants if v != "python"]
    precompile(None)
    if base:
        precompile(base)
    work = tempfile.mkdtemp(prefix="agentlens-startup-")
    dbs = {None: Path(work) / "empty.db", base: Path(work) / "empty-base.db"}
    for src, db in dbs.items():  # each code makes its own empty store, untimed
        timed(command("score", db), work, src)
    load_before = os.getloadavg()
    cpu: dict[str, list[float]] = {v: [] for v in variants}
    wall: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(args.rounds):
        for v in variants:
            src = base if v.endswith(BASE) else None
            c, w = timed(command(v, dbs[src]), work, src)
            cpu[v].append(c)
            wall[v].append(w)
    load_after = os.getloadavg()
    print(f"{args.rounds} rounds, Python {sys.version.split()[0]}, load average", end=" ")
    print(f"{load_before[0]:.2f} -> {load_after[0]:.2f}")
    print(f"{'variant':<14} {'CPU s median':>12} {'(min-max)':>14} {'wall s median':>14}")
    for v in variants:
        c = cpu[v]
        print(
            f"{v:<14} {statistics.median(c):>12.3f} "
            f"{f'({min(c):.3f}-{max(c):.3f})':>14} {statistics.median(wall[v]):>14.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
