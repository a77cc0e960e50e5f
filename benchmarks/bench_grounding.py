"""Throughput of the grounding checks, end to end from the store, against the naive check.

Generates N stored runs (default 100,000) of about 20 steps and 10 KB of evidence each (a
support agent: system prompt, user messages, customer / invoice / order / document look-ups,
assistant turns that cite ids, codes, amounts, dates, URLs and names from earlier tool results,
about 5% of them with a fabricated reference) into a SQLite store, then runs, each in a fresh
process on one core and over the same runs:

- ``load``: read every run from the store (``query_traces``), nothing else: the floor;
- ``naive``: the essay's check: dump the tool outputs as JSON, take every match of
  ``CUST-\\d{5}``, ``DOC-[a-f0-9]{8}``, ``\\$[\\d,]+\\.\\d{2}`` in each answer, substring-test it;
- ``naive_full``: the same naive substring test, but over every reference agentlens's extractor
  finds in the answers (the same shapes as ``no_fabricated_refs``, without normalisation, turn
  order or truncation): the cost of extraction without the cost of checking it properly;
- ``naive_both``: the same naive substring test over every reference and every fact the two
  scorers extract (``parametric_leakage``'s numbers, dates, times and names too): the cost of
  both scorers' extraction, with a substring test in place of the checks;
- ``refs``: ``no_fabricated_refs`` alone;
- ``grounding``: ``no_fabricated_refs`` and ``parametric_leakage`` on every run, as the runner
  calls them (one :class:`Evidence` per run shared by both).

and prints runs/s, the ratio to the naive check, what each check flagged, and the peak RSS
after 10% of the runs and at the end (memory flat in the number of runs).

Usage::

    python benchmarks/bench_grounding.py [--runs 100000] [--db PATH] [--keep] [--profile]

``--profile`` prints cProfile's top functions for the grounding pass, sorted by cumulative time
(``BENCH_SORT=tottime`` sorts by own time).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

FIRST = ["Jane", "Omar", "Mia", "Liam", "Aarav", "Sofia", "Yara", "Kenji", "Lena", "Raj"]
LAST = ["Smith", "Davis", "Li", "Garcia", "Rossi", "Muller", "Silva", "Tanaka", "Novak", "Patel"]
CITIES = ["Austin", "Denver", "Boston", "Seattle", "Chicago", "Miami", "Phoenix", "Houston"]
STATUS = ["paid", "open", "overdue", "refunded"]
WORDS = [
    "policy",
    "refund",
    "invoice",
    "customer",
    "account",
    "payment",
    "shipping",
    "delivery",
    "warranty",
    "order",
    "billing",
    "support",
    "escalation",
    "priority",
    "agent",
    "response",
    "resolution",
    "ticket",
    "subscription",
    "renewal",
    "plan",
]
SYSTEM = (
    "You are the support agent of Example Corp. Answer only from the tools' results and what "
    "the customer said. Never invent ids, amounts or dates. Refunds over $500.00 need a "
    "manager. Escalations go to https://support.example.com/escalate. " * 3
)
PASSES = ("load", "naive", "naive_full", "naive_both", "refs", "grounding")
# the ratios of time the target is stated in (<= 2x), checker over baseline
RATIOS = (
    ("grounding", "naive"),
    ("grounding", "naive_full"),
    ("grounding", "naive_both"),
    ("refs", "naive_full"),
)
NAIVE_PATTERNS = [
    re.compile(r"CUST-\d{5}"),
    re.compile(r"DOC-[a-f0-9]{8}"),
    re.compile(r"\$[\d,]+\.\d{2}"),
]


def _money(rng: random.Random) -> float:
    return round(rng.uniform(5, 5000), 2)


def make_run(i: int, rng: random.Random) -> dict[str, Any]:
    """One synthetic run (about 20 steps, 10 KB of evidence)."""
    start = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=i)
    first, last = rng.choice(FIRST), rng.choice(LAST)
    cust = f"CUST-{rng.randrange(10**5):05d}"
    day = (start - timedelta(days=rng.randrange(1, 400))).date()
    customer = {
        "id": cust,
        "name": f"{first} {last}",
        "email": f"{first.lower()}.{last.lower()}@example.com",
        "since": day.isoformat(),
        "city": rng.choice(CITIES),
        "tier": rng.choice(["gold", "silver", "regular"]),
        "balance": _money(rng),
        "notes": " ".join(rng.choice(WORDS) for _ in range(60)),
    }
    invoices = [
        {
            "id": f"INV-{rng.randrange(10**4):04d}",
            "amount": _money(rng),
            "date": (day + timedelta(days=30 * k)).isoformat(),
            "status": rng.choice(STATUS),
            "url": f"https://billing.example.com/invoices/{k}{rng.randrange(10**6)}",
        }
        for k in range(8)
    ]
    docs = [
        {
            "id": f"DOC-{rng.randrange(16**8):08x}",
            "title": f"{rng.choice(WORDS).title()} {rng.choice(WORDS)} guide",
            "text": " ".join(rng.choice(WORDS) for _ in range(110)),
        }
        for _ in range(4)
    ]
    booking = "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ") for _ in range(3)) + str(
        rng.randrange(100, 999)
    )
    order = {
        "order": f"ORD-{rng.randrange(10**6):06d}",
        "booking": booking,
        "items": [
            {
                "sku": f"SKU-{rng.randrange(10**5):05d}",
                "price": _money(rng),
                "qty": rng.randrange(1, 4),
            }
            for _ in range(6)
        ],
        "shipped": (day + timedelta(days=3)).isoformat() + "T10:00:00Z",
    }
    inv = rng.choice(invoices)
    fabricate = rng.random() < 0.05
    cited_cust = f"CUST-{rng.randrange(10**5):05d}" if fabricate else cust
    cited_amount = inv["amount"] + (
        rng.choice([1, -1]) * 10 if fabricate and rng.random() < 0.5 else 0
    )
    d0 = datetime.fromisoformat(inv["date"]).strftime("%B %-d, %Y")
    steps: list[dict[str, Any]] = [
        {"kind": "system", "output": SYSTEM},
        {"kind": "user", "output": f"Hi, I'm {first} {last} ({cust}). Question about my invoices."},
        {"kind": "tool", "name": "get_customer", "input": {"id": cust}, "output": customer},
        {
            "kind": "text",
            "output": f"Thanks {first}, I found your account {cited_cust}, a customer since {day.isoformat()}.",
        },
        {
            "kind": "tool",
            "name": "list_invoices",
            "input": {"customer": cust},
            "output": invoices[:4],
        },
        {
            "kind": "tool",
            "name": "list_invoices",
            "input": {"customer": cust, "page": 2},
            "output": invoices[4:],
        },
        {
            "kind": "text",
            "output": f"Invoice {inv['id']} from {d0} is {inv['status']}: ${cited_amount:,.2f}. Details: {inv['url']}.",
        },
        {"kind": "user", "output": "Can you check my last order and the refund policy?"},
        {"kind": "tool", "name": "get_order", "input": {"customer": cust}, "output": order},
        {
            "kind": "retrieval",
            "name": "search_docs",
            "input": {"q": "refund policy"},
            "output": docs,
        },
        {
            "kind": "text",
            "output": f"Order {order['order']} (booking {booking}) shipped; see [{docs[0]['id']}] and [{docs[1]['id']}].",
        },
        {"kind": "user", "output": "What's the total of the first two items?"},
        {
            "kind": "tool",
            "name": "calculator",
            "input": {"expr": "a+b"},
            "output": round(order["items"][0]["price"] + order["items"][1]["price"], 2),
        },
        {
            "kind": "text",
            "output": f"The first two items come to ${order['items'][0]['price'] + order['items'][1]['price']:,.2f}.",
        },
        {
            "kind": "tool",
            "name": "get_customer",
            "input": {"id": cust},
            "output": {"id": cust, "tier": customer["tier"]},
        },
        {
            "kind": "text",
            "output": f"You are a {customer['tier']} member; write to {customer['email']} for receipts.",
        },
        {"kind": "user", "output": "Thanks!"},
        {"kind": "tool", "name": "log", "input": {"event": "done"}, "output": {"ok": True}},
        {"kind": "text", "output": "You're welcome. Anything else?"},
    ]
    for n, step in enumerate(steps):
        step["id"] = f"s{n + 1}"
    return {
        "id": f"bench-{i:07d}",
        "agent": "support",
        "started_at": start.isoformat(),
        "input": steps[1]["output"],
        "output": f"Summary for {first} {last}: {cited_cust}, invoice {inv['id']} ${cited_amount:,.2f}, order {order['order']}.",
        "steps": steps,
    }


def generate(db: str, runs: int, seed: int = 0) -> None:
    from agentlens.model import Trace
    from agentlens.store import open_store

    rng = random.Random(seed)
    store = open_store(f"sqlite:///{db}")
    batch: list[Trace] = []
    started = time.perf_counter()
    for i in range(runs):
        batch.append(Trace.model_validate(make_run(i, rng)))
        if len(batch) == 1000:
            store.put_traces(batch)
            batch.clear()
    if batch:
        store.put_traces(batch)
    store.close()
    print(f"generated {runs} runs in {time.perf_counter() - started:.1f}s", file=sys.stderr)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _naive_view(trace: Any) -> tuple[str, list[str]]:
    """The naive checks' view of a run: the tool outputs dumped as JSON, and the answers."""
    evidence = "\n".join(
        json.dumps(s.output) for s in trace.steps if s.kind in ("tool", "retrieval")
    )
    answers = [str(s.output) for s in trace.steps if s.kind == "text"] + [str(trace.output)]
    return evidence, answers


def run_pass(db: str, name: str, runs: int, profile: bool) -> dict[str, Any]:
    from agentlens.eval import Evidence, get_scorer
    from agentlens.eval._facts import extract_facts
    from agentlens.eval._references import get_extractor
    from agentlens.store import open_store

    store = open_store(f"sqlite:///{db}")

    scorers = [get_scorer("no_fabricated_refs"), get_scorer("parametric_leakage")]
    extractor = get_extractor()
    flagged = {"no_fabricated_refs": 0, "parametric_leakage": 0, "naive": 0}
    checkpoint = max(1, runs // 10)
    rss_at_checkpoint = 0.0
    count = 0
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    started = time.perf_counter()
    for trace in store.query_traces(newest_first=False, limit=runs):
        if name == "naive":
            evidence, answers = _naive_view(trace)
            bad = [
                m.group(0)
                for text in answers
                for p in NAIVE_PATTERNS
                for m in p.finditer(text)
                if m.group(0) not in evidence
            ]
            flagged["naive"] += bool(bad)
        elif name == "naive_full":
            evidence, answers = _naive_view(trace)
            bad = [
                r.text
                for text in answers
                for r in extractor.extract(text)
                if r.text not in evidence
            ]
            flagged["naive"] += bool(bad)
        elif name == "naive_both":
            evidence, answers = _naive_view(trace)
            bad = []
            for text in answers:
                refs = extractor.extract(text)
                bad += [r.text for r in refs if r.text not in evidence]
                bad += [f.text for f in extract_facts(text, refs) if f.text not in evidence]
            flagged["naive"] += bool(bad)
        elif name in ("grounding", "refs"):
            ev = Evidence(trace)
            for s in scorers if name == "grounding" else scorers[:1]:
                result = s.score(trace, ev)
                if result.error:
                    raise RuntimeError(result.error)
                flagged[s.name] += not result.passed
        count += 1
        if count == checkpoint:
            rss_at_checkpoint = _rss_mb()
    elapsed = time.perf_counter() - started
    if profiler is not None:
        import pstats

        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats(
            os.environ.get("BENCH_SORT", "cumulative")
        ).print_stats(40)
    store.close()
    return {
        "pass": name,
        "runs": count,
        "seconds": elapsed,
        "runs_per_s": count / elapsed,
        "flagged": {k: v for k, v in flagged.items() if v},
        "rss_mb_at_10pct": rss_at_checkpoint,
        "rss_mb_end": _rss_mb(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--db", help="store file (default: a temporary file)")
    parser.add_argument("--keep", action="store_true", help="keep the generated store")
    parser.add_argument("--profile", action="store_true", help="cProfile the grounding pass")
    parser.add_argument("--pass", dest="only", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.only:  # a child process: one pass, JSON on stdout
        print(json.dumps(run_pass(args.db, args.only, args.runs, args.profile)))
        return 0
    folder = tempfile.mkdtemp(prefix="agentlens-bench-")
    db = args.db or os.path.join(folder, "bench.db")
    if not Path(db).exists():
        generate(db, args.runs)
    results = {}
    for name in PASSES:
        cmd = [sys.executable, __file__, "--pass", name, "--db", db, "--runs", str(args.runs)]
        if args.profile and name == "grounding":
            cmd.append("--profile")
        out = subprocess.run(cmd, check=True, capture_output=True, text=True)
        if out.stderr:
            print(out.stderr, file=sys.stderr)
        results[name] = json.loads(out.stdout)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    print(f"store: {db} ({Path(db).stat().st_size / 2**20:.0f} MiB)")
    for name, r in results.items():
        print(
            f"{name:>10}: {r['runs']} runs in {r['seconds']:.1f}s = {r['runs_per_s']:,.0f} runs/s; "
            f"peak RSS {r['rss_mb_at_10pct']:.0f} MiB at 10%, {r['rss_mb_end']:.0f} MiB at the end; "
            f"flagged {r['flagged'] or '-'}"
        )
    for a, b in RATIOS:
        ratio = results[a]["seconds"] / results[b]["seconds"]
        print(f"{a} / {b} time: {ratio:.2f}x (target <= 2x)")
    print(f"grounding runs/s: {results['grounding']['runs_per_s']:,.0f} (target >= 5,000)")
    if not args.keep and not args.db:
        os.remove(db)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
