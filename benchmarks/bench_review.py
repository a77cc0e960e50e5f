"""Review on completion: what it costs the agent, how fast it reviews, how far it lags.

Three measurements, on a SQLite file in a temporary folder, with the default deterministic
review scorers (no judge):

1. ``run.__exit__``: the wall time the agent's thread spends leaving ``with agentlens.run(...)``
   for the same run (a tool step, an answer citing an id), with review on
   (``agentlens.configure(db=..., review=True)``) and off (``review=False``). Rounds alternate
   off/on so the machine's load hits both alike; the median and p99 of all exits per side, and
   their ratio, are printed.
2. Throughput: ``review_pending`` over RUNS stored runs (half of them cite an id that is not in
   their evidence), in runs/s.
3. Lag: runs are captured as fast as the agent loop can (faster than review), with review on;
   the age of the oldest pending run (``store.review_lag()``) is sampled while they arrive and
   until review has caught up.

Usage::

    .venv/bin/python benchmarks/bench_review.py [--runs 2000] [--exits 400] [--rounds 5]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import threading
import time
from pathlib import Path

import agentlens
from agentlens.model import Step, Trace
from agentlens.review import review_pending_result
from agentlens.store import open_store


@agentlens.tool
def get_order(order_id: str) -> dict[str, str]:
    return {"order": order_id, "status": "shipped", "ships": "2026-03-04", "carrier": "DHL"}


def one_run(i: int) -> float:
    """Capture one run; return the seconds its block's exit took in this thread."""
    with agentlens.run(
        agent="support", input=f"where is ORD-{i:05d}?", links={"ticket": f"T-{i}"}
    ) as run:
        order = get_order(f"ORD-{i:05d}")
        cited = order["order"] if i % 2 else "ORD-99999"
        run.output = f"Your order {cited} is {order['status']}; it ships on {order['ships']}."
        start = time.perf_counter()
    return time.perf_counter() - start


def stored_run(i: int) -> Trace:
    cited = f"ORD-{i:05d}" if i % 2 else "ORD-99999"
    return Trace(
        id=f"bench-{i:06d}",
        agent="support",
        input=f"where is ORD-{i:05d}?",
        output=f"Your order {cited} is shipped; it ships on 2026-03-04.",
        links={"ticket": f"T-{i}"},
        steps=[
            Step(
                kind="tool",
                name="get_order",
                input={"order_id": f"ORD-{i:05d}"},
                output={"order": f"ORD-{i:05d}", "status": "shipped", "ships": "2026-03-04"},
            ),
            Step(kind="text", output="Let me check that order."),
        ],
    )


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def bench_exit(folder: Path, exits: int, rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"off": [], "on": []}
    for r in range(rounds):
        for side in ("off", "on"):
            url = f"sqlite:///{folder / f'exit-{side}-{r}.db'}"
            agentlens.configure(db=url, review=side == "on", flush_interval=0.05)
            for i in range(20):  # warm-up: the store opens, the reviewer starts
                one_run(i)
            agentlens.flush(60)
            times[side].extend(one_run(i) for i in range(exits))
            agentlens.flush(60)
            agentlens.capture.reset(30)
    return times


def bench_throughput(folder: Path, runs: int) -> tuple[float, int, int]:
    store = open_store(f"sqlite:///{folder / 'throughput.db'}")
    try:
        store.put_traces(stored_run(i) for i in range(runs))
        t0 = time.perf_counter()
        result = review_pending_result(store, deliver=False)
        elapsed = time.perf_counter() - t0
    finally:
        store.close()
    return result.reviewed / elapsed, result.reviewed, result.flagged


def bench_lag(folder: Path, runs: int) -> tuple[float, float, float, float]:
    """(seconds to capture, runs/s captured, max lag s, seconds until caught up)."""
    url = f"sqlite:///{folder / 'lag.db'}"
    agentlens.configure(db=url, review=True, flush_interval=0.05)
    store = open_store(url)
    samples: list[float] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append(store.review_lag().lag_s)
            stop.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.perf_counter()
    for i in range(runs):
        one_run(i)
    captured = time.perf_counter() - t0
    agentlens.flush(120)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        lag = store.review_lag()
        if lag.pending == 0:
            break
        time.sleep(0.05)
    caught_up = time.perf_counter() - t0
    stop.set()
    sampler.join(5)
    agentlens.capture.reset(30)
    store.close()
    return captured, runs / captured, max(samples, default=0.0), caught_up


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="runs for throughput and lag")
    parser.add_argument("--exits", type=int, default=400, help="run exits timed per round/side")
    parser.add_argument("--rounds", type=int, default=5, help="alternating off/on rounds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        times = bench_exit(folder, args.exits, args.rounds)
        print(f"python {platform.python_version()} on {platform.machine()}")
        print(f"run.__exit__ over {args.rounds} alternating rounds x {args.exits} runs per side:")
        med = {s: statistics.median(v) * 1e6 for s, v in times.items()}
        p99 = {s: pct(v, 0.99) * 1e6 for s, v in times.items()}
        for side in ("off", "on"):
            print(f"  review {side:<3}: median {med[side]:7.1f} µs, p99 {p99[side]:8.1f} µs")
        print(
            f"  on / off: median {med['on'] / med['off']:.2f}x, p99 {p99['on'] / p99['off']:.2f}x"
        )

        rate, reviewed, flagged = bench_throughput(folder, args.runs)
        print(f"throughput: reviewed {reviewed} runs ({flagged} flagged) at {rate:,.0f} runs/s")

        captured, arrival, max_lag, caught_up = bench_lag(folder, args.runs)
        print(
            f"lag: {args.runs} runs captured in {captured:.2f} s ({arrival:,.0f} runs/s); "
            f"oldest unreviewed run at most {max_lag:.2f} s old; all reviewed "
            f"{caught_up:.2f} s after the first run"
        )


if __name__ == "__main__":
    main()
