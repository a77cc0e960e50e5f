"""How much the transcript analysers add to the scoring time of the grounding scorers.

Usage::

    python benchmarks/bench_transcript.py [--runs 200] [--rounds 5] [--seed 7]

Builds synthetic runs of about 20 steps and about 10 KB of evidence (tool and retrieval outputs
with ids, amounts, dates and prose; some calls repeated, some empty), then, in the same process
and on the same runs, times:

- the grounding scorers ``no_fabricated_refs`` + ``parametric_leakage`` (the baseline), and
- the transcript analysers ``repeated_tool_calls`` + ``excessive_steps`` + ``no_progress``,

each scorer called as ``run_scorers`` calls it (one ``Evidence`` per run, shared by the scorers
of that run; a fresh one every round so no cache outlives its round). Rounds alternate the order
of the two groups. Each group is timed in CPU time (``time.process_time``: what other jobs on
the machine take from it is not counted) and the best round of each is kept; the wall-time
medians are printed beside. The target is transcript / grounding < 20%.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from agentlens.eval import Evidence, get_scorer
from agentlens.model import Step, StepKind, Trace

GROUNDING = ("no_fabricated_refs", "parametric_leakage")
TRANSCRIPT = ("repeated_tool_calls", "excessive_steps", "no_progress")

WORDS = [
    "invoice",
    "customer",
    "refund",
    "shipment",
    "policy",
    "account",
    "balance",
    "order",
    "priority",
    "support",
    "contract",
    "renewal",
    "discount",
    "warehouse",
    "delivery",
    "schedule",
    "payment",
    "ticket",
    "escalation",
    "region",
    "quarter",
]


def _prose(rnd: random.Random, n: int) -> str:
    return " ".join(rnd.choice(WORDS) for _ in range(n)).capitalize() + "."


def _record(rnd: random.Random) -> dict[str, Any]:
    return {
        "id": f"CUST-{rnd.randint(10000, 99999)}",
        "doc": f"DOC-{rnd.getrandbits(32):08x}",
        "amount": f"${rnd.randint(10, 9999):,}.{rnd.randint(0, 99):02d}",
        "date": f"2026-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}",
        "note": _prose(rnd, 60),
    }


def synthetic_run(rnd: random.Random, index: int) -> Trace:
    """About 20 steps: a user message, LLM turns, 8-9 tool calls, 2 retrievals, a final text;
    about 10 KB of evidence; every fourth run repeats a search three times."""
    t0 = datetime(2026, 11, 29, tzinfo=UTC) + timedelta(minutes=index)
    clock = [t0]
    steps: list[Step] = []

    def add(kind: StepKind, **fields: Any) -> Step:
        start = clock[0]
        clock[0] += timedelta(seconds=rnd.uniform(0.1, 2.0))
        step = Step(
            id=f"s{len(steps) + 1}", kind=kind, started_at=start, ended_at=clock[0], **fields
        )
        steps.append(step)
        return step

    add(
        StepKind.USER,
        output=f"Please reconcile the account of customer CUST-{rnd.randint(10000, 99999)}.",
    )
    facts: list[dict[str, Any]] = []
    repeat = index % 4 == 0
    for turn in range(8):
        add(
            StepKind.LLM,
            name="gpt-4o",
            attributes={"input_tokens": rnd.randint(500, 4000), "output_tokens": 60},
        )
        if repeat and turn in (2, 4, 6):
            records = [facts[0]] if facts else [_record(rnd)]
            add(
                StepKind.TOOL,
                name="search_orders",
                input={"customer": "CUST-10001"},
                output={"results": records},
            )
            continue
        if turn == 5:
            add(
                StepKind.TOOL,
                name="lookup_refund",
                input={"order": rnd.randint(1, 99)},
                output={"results": []},
            )
            continue
        records = [_record(rnd) for _ in range(2)]
        facts.extend(records)
        add(
            StepKind.TOOL,
            name=rnd.choice(["search_orders", "get_invoice", "get_ticket"]),
            input={"customer": f"CUST-{rnd.randint(10000, 99999)}", "page": turn},
            output={"results": records},
        )
    for _ in range(2):
        add(
            StepKind.RETRIEVAL,
            name="search_knowledge",
            input={"query": _prose(rnd, 4)},
            output=[
                {"id": f"DOC-{rnd.getrandbits(32):08x}", "text": _prose(rnd, 60)} for _ in range(2)
            ],
        )
    cited = rnd.sample(facts, k=min(4, len(facts)))
    answer = (
        " ".join(
            f"Order {r['id']} ({r['doc']}) was refunded {r['amount']} on {r['date']}."
            for r in cited
        )
        + f" Also CUST-{rnd.randint(10000, 99999)} owes $42.00 since 2026-01-05."
    )
    add(StepKind.TEXT, output=answer)
    return Trace(id=f"bench-{index}", steps=steps, output=answer, input=steps[0].output)


def _evidence_bytes(trace: Trace) -> int:
    ev = Evidence(trace)
    return sum(len(item.text.encode()) for item in ev.items)


def _time_group(
    names: tuple[str, ...], traces: list[Trace], evidences: list[Evidence]
) -> tuple[float, float]:
    """(CPU seconds, wall seconds) to score every run with the group's scorers."""
    scorers = [get_scorer(n) for n in names]
    cpu = time.process_time()
    start = time.perf_counter()
    for trace, ev in zip(traces, evidences, strict=True):
        for s in scorers:
            result = s.score(trace, ev)
            if result.error:
                raise SystemExit(f"{s.name} failed: {result.error}")
    return time.process_time() - cpu, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    rnd = random.Random(args.seed)
    traces = [synthetic_run(rnd, i) for i in range(args.runs)]
    sizes = [_evidence_bytes(t) for t in traces]
    print(
        f"python {platform.python_version()} on {platform.machine()}; {args.runs} runs, "
        f"{statistics.mean(len(t.steps) for t in traces):.1f} steps and "
        f"{statistics.mean(sizes) / 1024:.1f} KB of evidence per run (mean)"
    )
    # Warm up (imports, regex compilation) on a few runs.
    warm = [Evidence(t) for t in traces[:5]]
    _time_group(GROUNDING, traces[:5], warm)
    _time_group(TRANSCRIPT, traces[:5], warm)
    grounding: list[tuple[float, float]] = []
    transcript: list[tuple[float, float]] = []
    for round_ in range(args.rounds):
        evidences = [Evidence(t) for t in traces]
        order = (GROUNDING, TRANSCRIPT) if round_ % 2 == 0 else (TRANSCRIPT, GROUNDING)
        for group in order:
            seconds = _time_group(group, traces, evidences)
            (grounding if group is GROUNDING else transcript).append(seconds)
    g = min(c for c, _ in grounding) / args.runs * 1e3
    t = min(c for c, _ in transcript) / args.runs * 1e3
    g_wall = statistics.median(w for _, w in grounding) / args.runs * 1e3
    t_wall = statistics.median(w for _, w in transcript) / args.runs * 1e3
    print(
        json.dumps(
            {
                "grounding_ms_per_run": round(g, 3),
                "transcript_ms_per_run": round(t, 3),
                "ratio": round(t / g, 3),
                "clock": "cpu, best round",
                "wall_median_ratio": round(t_wall / g_wall, 3),
                "target": "< 0.20",
            }
        )
    )
    print(f"grounding (no_fabricated_refs + parametric_leakage): {g:.3f} ms/run of CPU")
    print(
        f"transcript (repeated_tool_calls + excessive_steps + no_progress): {t:.3f} ms/run of CPU"
    )
    print(
        f"transcript / grounding = {t / g:.1%}  ({'OK' if t / g < 0.2 else 'OVER'} against the"
        f" 20% target); wall-time medians: {g_wall:.3f} and {t_wall:.3f} ms/run, {t_wall / g_wall:.1%}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
