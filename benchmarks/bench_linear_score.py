"""Time to score one run as the work grows: flat per unit of work when the cost is linear.

Scores synthetic support-agent runs with the five default scorers (one :class:`Evidence` per
run, as ``agentlens score`` does) while one dimension grows and the others stay small:

- ``evidence``: the tool outputs of a run, 1 KB to 1 MB in all (the answer cites a few of them);
- ``steps``: 5 to 500 tool steps (about 500 bytes each), one short answer at the end;
- ``turns``: 1 to 100 assistant turns, each after a tool step and citing what it returned (each
  turn is checked against the evidence before it: the index is built once per run);
- ``answer``: the final answer, 200 bytes to 100 KB of sentences citing the evidence.

Prints, per dimension and size, the CPU milliseconds per run and per unit (KB, step, turn), and
the ratio of the largest size's per-unit time to the smallest's (1.0: linear; a cost quadratic
in the dimension would show the size ratio, 100x to 1000x). Each figure is the best of
``--repeat`` runs.

Usage::

    python benchmarks/bench_linear_score.py [--repeat 3] [--markdown]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import time
from collections.abc import Callable
from typing import Any

from agentlens.config import DEFAULT_SCORERS
from agentlens.eval import Evidence, get_scorer
from agentlens.model import Trace

WORDS = ["policy", "refund", "invoice", "customer", "account", "payment", "shipping", "order"]


def _record(rng: random.Random, k: int) -> dict[str, Any]:
    """One customer record of about 500 bytes of JSON."""
    return {
        "id": f"CUST-{k:05d}",
        "invoice": f"INV-{rng.randrange(10**4):04d}",
        "amount": round(rng.uniform(5, 5000), 2),
        "date": f"2026-0{1 + k % 9}-1{k % 9}",
        "notes": " ".join(rng.choice(WORDS) for _ in range(50)),
    }


def _cite(rec: dict[str, Any]) -> str:
    return f"Customer {rec['id']} has invoice {rec['invoice']} for ${rec['amount']:,.2f}. "


def run_of(outputs: list[list[dict[str, Any]]], turns: list[str], answer: str) -> Trace:
    """A run: a user message, then for each group of records a tool step (and the turn after it,
    when there is one), then the final answer."""
    steps: list[dict[str, Any]] = [{"id": "u", "kind": "user", "output": "Check my account."}]
    for i, records in enumerate(outputs):
        steps.append(
            {"id": f"t{i}", "kind": "tool", "name": "lookup", "input": {"n": i}, "output": records}
        )
        if i < len(turns):
            steps.append({"id": f"a{i}", "kind": "text", "output": turns[i]})
    return Trace.model_validate({"id": "r", "input": "q", "output": answer, "steps": steps})


def by_evidence(kb: int, rng: random.Random) -> Trace:
    records = [_record(rng, k) for k in range(max(1, kb * 2))]
    per_step = 20
    outputs = [records[i : i + per_step] for i in range(0, len(records), per_step)]
    return run_of(outputs, [], "".join(_cite(r) for r in records[:3]))


def by_steps(n: int, rng: random.Random) -> Trace:
    outputs = [[_record(rng, k)] for k in range(n)]
    return run_of(outputs, [], _cite(outputs[-1][0]))


def by_turns(n: int, rng: random.Random) -> Trace:
    outputs = [[_record(rng, k)] for k in range(n)]
    return run_of(outputs, [_cite(o[0]) for o in outputs], "Done.")


def by_answer(size: int, rng: random.Random) -> Trace:
    records = [_record(rng, k) for k in range(40)]
    text = ""
    while len(text) < size:
        text += _cite(rng.choice(records))
    return run_of([records], [], text[:size])


# name -> (build(size, rng), sizes, unit name, units of a size)
DIMENSIONS: dict[str, tuple[Callable[[int, random.Random], Trace], list[int], str]] = {
    "evidence": (by_evidence, [1, 10, 100, 1000], "KB"),
    "steps": (by_steps, [5, 50, 500], "step"),
    "turns": (by_turns, [1, 10, 100], "turn"),
    "answer": (by_answer, [200, 2_000, 20_000, 100_000], "KB"),
}


def _label_of(name: str, unit: str) -> Callable[[int], str]:
    if name == "answer":
        return lambda size: f"{size / 1000:g} KB"
    return lambda size: f"{size} {unit}"


def score_once(trace: Trace) -> float:
    scorers = [get_scorer(name) for name in DEFAULT_SCORERS]
    t0 = time.process_time()
    evidence = Evidence(trace)
    for s in scorers:
        result = s.score(trace, evidence)
        if result.error:
            raise RuntimeError(result.error)
    return time.process_time() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(
        f"# {platform.machine()}, {os.cpu_count()} cores (shared), Python "
        f"{platform.python_version()}, load average {load:.1f} at start; scorers: "
        f"{', '.join(DEFAULT_SCORERS)}"
    )
    for name, (build, sizes, unit) in DIMENSIONS.items():
        rows = []
        for size in sizes:
            trace = build(size, random.Random(size))
            best = min(score_once(trace) for _ in range(args.repeat))
            units = size / 1000 if name == "answer" else size
            rows.append((size, best * 1e3, best * 1e3 / units))
        label = _label_of(name, unit)
        ratio = rows[-1][2] / rows[0][2]
        if args.markdown:
            print(f"\n| {name} | ms per run | ms per {unit} |\n|---|---|---|")
            for size, ms, per in rows:
                print(f"| {label(size)} | {ms:,.2f} | {per:,.3f} |")
            print(f"| largest / smallest per {unit} | | {ratio:.2f} |")
        else:
            cells = "  ".join(
                f"{label(s)}: {ms:,.1f} ms ({per:,.3f}/{unit})" for s, ms, per in rows
            )
            print(f"{name:>9}: {cells}; per-{unit} ratio {ratio:.2f}")


if __name__ == "__main__":
    main()
