"""The PostgreSQL store's two bulk writes of JSON, this code beside a baseline, alternating.

- ``runs``: ``put_traces`` of ``--runs`` stored runs (bench_grounding's support agent, about 20
  steps and 10 KB of JSON each, read from ``bench_score_e2e``'s cached store) in batches of 250
  into a fresh schema;
- ``spans``: ``stage_spans`` (the server's OTLP staging) of ``--spans`` spans of about 600
  bytes of JSON each, their attributes holding JSON text as OpenInference's ``input.value``
  and ``output.value`` do (so each document is full of escaped quotes), 100 spans a call.

Each measurement is its own process, this code's and, with ``--baseline-src DIR`` (a
checkout's ``src/``), the baseline's, alternating for ``--rounds`` rounds. Each prints the CPU
time of the client (the Python process: what escaping and encoding cost) and the wall time
per run or span, and a digest of what it stored (the runs' documents and steps as PostgreSQL
returns them; the staged spans' keys and documents): equal digests mean the same rows.

Usage::

    python benchmarks/bench_pg_writes.py [--runs 2000] [--spans 20000] [--rounds 3]
        [--baseline-src DIR] [--pg postgresql://postgres@127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_score_e2e import cached_store, child_env  # noqa: E402

PG = "postgresql://postgres@127.0.0.1:5432/test"


def _span_doc(i: int) -> str:
    call = {"query": f"order status for CUST-{i % 100_000:05d}", "limit": 5}
    result = [{"id": f"DOC-{i:08x}", "title": 'the "refund" policy', "score": 0.5 + i % 7 / 20}]
    return json.dumps(
        {
            "name": f"search {i}",
            "kind": "SPAN_KIND_INTERNAL",
            "attributes": {
                "openinference.span.kind": "TOOL",
                "input.value": json.dumps(call),
                "output.value": json.dumps(result),
            },
        }
    )


def _child(what: str, pg: str, n: int, db: str) -> dict[str, Any]:
    import psycopg

    from agentlens.store import open_store

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        store = open_store(f"{pg}?schema={schema}")
        try:
            if what == "runs":
                source = open_store(f"sqlite:///{db}")
                try:
                    items: list[Any] = list(source.query_traces(newest_first=False))[:n]
                finally:
                    source.close()
                batch = 250
                cpu0, wall0 = time.process_time(), time.perf_counter()
                for i in range(0, len(items), batch):
                    store.put_traces(items[i : i + batch])
            else:
                from agentlens.store._server import StagedSpan

                items = [
                    StagedSpan(
                        project="default",
                        trace_id=f"{i // 4:032x}",
                        span_id=f"{i:016x}",
                        root_ended=i % 4 == 3,
                        doc=_span_doc(i),
                    )
                    for i in range(n)
                ]
                batch = 100
                cpu0, wall0 = time.process_time(), time.perf_counter()
                for i in range(0, len(items), batch):
                    store.stage_spans(items[i : i + batch], 1_700_000_000_000_000 + i)
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        finally:
            store.close()
        query = (
            "SELECT id, doc::text, steps::text FROM runs ORDER BY id"
            if what == "runs"
            else "SELECT project, trace_id, span_id, doc FROM otlp_spans ORDER BY 1, 2, 3"
        )
        digest = hashlib.sha256()
        with psycopg.connect(pg, options=f"-c search_path={schema}") as conn:
            for row in conn.execute(query):
                digest.update("\0".join(str(v) for v in row).encode() + b"\n")
    finally:
        with psycopg.connect(pg, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return {
        "cpu_us": 1e6 * cpu / len(items),
        "wall_us": 1e6 * wall / len(items),
        "digest": digest.hexdigest()[:16],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--spans", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline-src", metavar="DIR")
    parser.add_argument("--pg", default=os.environ.get("AGENTLENS_TEST_PG", PG))
    parser.add_argument("--cache", default="/tmp/agentlens-bench-e2e")
    parser.add_argument("--child", choices=("runs", "spans"), help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        n = args.runs if args.child == "runs" else args.spans
        print(json.dumps(_child(args.child, args.pg, n, args.db or "")))
        return 0
    # the cached store holds at least --runs runs (made by this code, readable by both)
    db = cached_store(Path(args.cache), max(args.runs, 2000), None)
    codes = {"this code": str(HERE.parent / "src")} | (
        {"baseline": args.baseline_src} if args.baseline_src else {}
    )
    figures: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for _ in range(args.rounds):
        for what in ("runs", "spans"):
            for label, src in codes.items():
                cmd = [sys.executable, __file__, "--child", what, "--pg", args.pg, "--db", str(db)]
                cmd += ["--runs", str(args.runs), "--spans", str(args.spans)]
                env = child_env(src)  # the code in src first on the path
                out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
                if out.returncode != 0:
                    raise SystemExit(f"{label} {what} failed:\n{out.stderr[-2000:]}")
                figures.setdefault((what, label), []).append(json.loads(out.stdout))
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(
        f"PostgreSQL at {args.pg}; medians of {args.rounds} rounds; load average {load} at the end"
    )
    print(f"{'write':>6} {'code':>10} {'client CPU':>14} {'wall':>14}  digest")
    for (what, label), rows in figures.items():
        unit = "run" if what == "runs" else "span"
        cpu = statistics.median(r["cpu_us"] for r in rows)
        wall = statistics.median(r["wall_us"] for r in rows)
        digests = {r["digest"] for r in rows}
        print(
            f"{what:>6} {label:>10} {cpu:>8.1f} us/{unit:<4} {wall:>8.1f} us/{unit:<4}"
            f"  {' '.join(sorted(digests))}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
