"""What the run-count rollup (migration 9) costs on writes: ``put_traces`` with its triggers on
``runs``, beside the same store with those four triggers dropped (how schema 8 wrote runs), in
the same run.

Each variant writes the same ``--runs`` small runs (two steps each) into its own new SQLite
file in calls of ``--batch`` runs, then writes them all again changed (another agent, so every
run is replaced: a delete and an insert per run), then deletes them. Variants are interleaved,
``--reps`` times; the figure is the median CPU time of the process (and the wall time) per
1,000 runs. ``rate_breakdown`` results are checked equal between the variants after a rebuild
of the dropped variant's rollup, so both wrote the same thing.

Usage: ``python benchmarks/bench_run_rollup.py [--runs 5000] [--batch 500] [--reps 5]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from agentlens.model import Step, StepKind, Trace  # noqa: E402
from agentlens.store import open_store  # noqa: E402
from agentlens.store._sqlite_rates import RUN_ROLLUP_TRIGGER_NAMES  # noqa: E402


def traces(n: int, agent: str) -> list[Trace]:
    now = datetime(2026, 12, 1, tzinfo=UTC)
    return [
        Trace(
            id=f"01BENCH{i:07d}", project=("acme", "globex")[i % 2], agent=agent, input="q",
            output=f"order ORD-{i} ships", started_at=now - timedelta(minutes=i),
            metadata={"release": f"v{i % 6}"},
            steps=[Step(kind=StepKind.TOOL, name="get_order", input={"id": i},
                        output={"order": f"ORD-{i}"}),
                   Step(kind=StepKind.TEXT, name="answer", output=f"order ORD-{i} ships")],
        )
        for i in range(n)
    ]  # fmt: skip


def _cpu(fn: Callable[[], Any]) -> tuple[float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def one(folder: Path, first: list[Trace], second: list[Trace], batch: int, triggers: bool) -> Any:
    path = folder / f"{'on' if triggers else 'off'}-{time.monotonic_ns()}.db"
    store: Any = open_store(f"sqlite:///{path}")
    if not triggers:
        store._write(
            lambda c: [c.execute(f"DROP TRIGGER {name}") for name in RUN_ROLLUP_TRIGGER_NAMES]
        )

    def put(items: list[Trace]) -> Callable[[], None]:
        def go() -> None:
            for at in range(0, len(items), batch):
                store.put_traces(items[at : at + batch])

        return go

    out = {
        "insert": _cpu(put(first)),
        "replace": _cpu(put(second)),
    }
    ids = [t.id for t in second]
    kept = store.count_runs()
    out["delete"] = _cpu(lambda: store.delete_runs(ids))
    assert kept == len(ids) and store.count_runs() == 0
    store.close()
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    return out


def check_same(folder: Path, first: list[Trace]) -> None:
    """The rates over the runs agree between the trigger-kept rollup and a rebuild."""
    from agentlens.analytics import rate_breakdown
    from agentlens.store._sqlite_rates import rebuild_run_rollup

    store: Any = open_store(f"sqlite:///{folder / 'check.db'}")
    store.put_traces(first)
    before = rate_breakdown("release", store=store, flagged_ids=False)
    store._write(rebuild_run_rollup)
    assert rate_breakdown("release", store=store, flagged_ids=False) == before
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    first, second = traces(args.runs, "support"), traces(args.runs, "billing")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, load {os.getloadavg()[0]:.1f}; "
          f"{args.runs:,} runs in calls of {args.batch}, {args.reps} reps interleaved")  # fmt: skip
    results: dict[bool, list[Any]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="agentlens-bench-run-rollup-") as name:
        folder = Path(name)
        check_same(folder, first)
        for _ in range(args.reps):
            for triggers in (False, True):
                results[triggers].append(one(folder, first, second, args.batch, triggers))
    per = 1000 / args.runs
    print(f"{'per 1,000 runs':<22} {'triggers on: wall':>18} {'CPU':>8}"
          f" {'dropped: wall':>14} {'CPU':>8} {'CPU +':>7}")  # fmt: skip
    for step in ("insert", "replace", "delete"):
        on = [statistics.median(r[step][i] for r in results[True]) * per for i in (0, 1)]
        off = [statistics.median(r[step][i] for r in results[False]) * per for i in (0, 1)]
        extra = (on[1] / off[1] - 1) * 100 if off[1] else float("nan")
        print(f"{step:<22} {on[0] * 1000:15.1f} ms {on[1] * 1000:5.1f} ms"
              f" {off[0] * 1000:11.1f} ms {off[1] * 1000:5.1f} ms {extra:6.1f}%")  # fmt: skip
    print(f"load {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
