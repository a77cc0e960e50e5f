"""Peak memory of ``agentlens import`` on a large JSONL file, against loading the file whole.

Generates a JSONL trace file of realistic runs (20 steps, JSON tool outputs, about 10 KB each)
in a temporary folder, then imports it into a fresh SQLite store in a child process, once per
measurement, and reads the child's peak resident set size (``ru_maxrss`` from ``wait4``):

- ``streaming``: the real command, ``agentlens --db sqlite:///... import FILE`` (the streaming
  reader feeding one ``put_traces`` transaction in batches), at several file sizes;
- ``read-only``: the streaming reader alone (parse and validate every run, store nothing), to
  separate the reader's memory from SQLite's page cache;
- ``load-whole`` (the baseline): ``json.loads`` of every line into a list, validated into
  ``Trace`` objects, then one ``put_traces`` of the list, at the smaller size only.

Flat memory means the streaming peak does not grow with the file; the baseline grows with it.

Usage::

    .venv/bin/python benchmarks/bench_import_memory.py                 # 1 GB (takes minutes)
    .venv/bin/python benchmarks/bench_import_memory.py --size-mb 256 --baseline-mb 64
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable

_CLI = "import sys; from agentlens.cli import main; main(sys.argv[1:])"

_READ_ONLY = r"""
import sys
from agentlens.ingest.trace_file import scan
for record in scan(sys.argv[1]):
    pass
"""

_BASELINE = r"""
import json, sys
from agentlens.model import Trace
from agentlens.store import open_store
path, url = sys.argv[1], sys.argv[2]
with open(path, encoding="utf-8") as f:
    raw = [json.loads(line) for line in f if line.strip()]
traces = [Trace.model_validate(obj) for obj in raw]
store = open_store(url)
store.put_traces(traces)
store.close()
"""


def make_run(i: int) -> dict[str, object]:
    """One realistic support-agent run of 20 steps (about 10 KB of JSON)."""
    steps: list[dict[str, object]] = [
        {"id": "s0", "kind": "system", "output": "You are Acme's support assistant. " * 4},
        {"id": "s1", "kind": "user", "output": f"Where is my order ORD-{i:07d}? It is late."},
    ]
    for k in range(2, 20):
        if k % 3 == 2:
            steps.append(
                {
                    "id": f"s{k}",
                    "kind": "tool",
                    "name": "get_order",
                    "input": {"order_id": f"ORD-{i:07d}", "fields": ["status", "items"]},
                    "output": {
                        "id": f"ORD-{i:07d}",
                        "customer": f"CUST-{(i * 7919) % 100000:05d}",
                        "status": "in_transit",
                        "amount": round(10 + (i % 997) * 1.37, 2),
                        "items": [
                            {"sku": f"SKU-{j:04d}", "qty": j % 3 + 1, "price": 9.99 + j}
                            for j in range(6)
                        ],
                        "events": [
                            {"at": f"2026-03-{d:02d}T10:00:00Z", "where": "hub", "note": "scan"}
                            for d in range(1, 5)
                        ],
                    },
                    "started_at": "2026-03-05T10:00:00Z",
                    "ended_at": "2026-03-05T10:00:00.250Z",
                    "attributes": {"latency_ms": 250},
                }
            )
        elif k % 3 == 0:
            steps.append(
                {
                    "id": f"s{k}",
                    "kind": "retrieval",
                    "name": "search_kb",
                    "input": {"query": "late delivery policy", "k": 3},
                    "output": [
                        {
                            "id": f"DOC-{(i + j) % 65536:08x}",
                            "text": "Orders ship in 2-5 days. " * 3,
                        }
                        for j in range(3)
                    ],
                }
            )
        else:
            steps.append(
                {
                    "id": f"s{k}",
                    "kind": "llm",
                    "name": "gpt-4o-mini",
                    "input": [{"role": "user", "content": "Summarise the order status."}],
                    "output": "Your order is in transit and should arrive within 2-5 days.",
                    "attributes": {
                        "model": "gpt-4o-mini",
                        "input_tokens": 812,
                        "output_tokens": 41,
                    },
                }
            )
    return {
        "schema_version": 1,
        "id": f"BENCH{i:021d}",
        "agent": "support",
        "name": f"order status {i}",
        "started_at": f"2026-03-05T10:{(i // 60) % 60:02d}:{i % 60:02d}Z",
        "input": f"Where is my order ORD-{i:07d}?",
        "output": f"Your order ORD-{i:07d} is in transit.",
        "metadata": {"release": "v42"},
        "steps": steps,
    }


def generate(path: Path, size_bytes: int) -> tuple[int, int]:
    """Write runs until the file reaches ``size_bytes``. Returns (runs, steps)."""
    runs = steps = 0
    written = 0
    with path.open("w", encoding="utf-8") as f:
        while written < size_bytes:
            run = make_run(runs)
            line = json.dumps(run, separators=(",", ":")) + "\n"
            f.write(line)
            written += len(line.encode("utf-8"))
            runs += 1
            steps += len(run["steps"])  # type: ignore[arg-type]
    return runs, steps


def measure(args: list[str]) -> tuple[float, float]:
    """Run a child process; return (peak RSS in MB, wall seconds)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    start = time.perf_counter()
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if status != 0:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"child failed ({status}): {' '.join(args)}\n{err}")
    return usage.ru_maxrss / 1024, elapsed  # ru_maxrss is in KiB on Linux


def baseline_floor() -> float:
    """Peak RSS of a child that only imports agentlens and opens a store (the fixed cost)."""
    code = "import agentlens.cli, agentlens.store as s; s.open_store('sqlite:///:memory:').close()"
    return measure([PYTHON, "-c", code])[0]


def row(label: str, size_mb: float, runs: int, steps: int, rss: float, secs: float) -> str:
    return (
        f"{label:<11} {size_mb:>8.0f} MB {runs:>9,} runs {steps:>11,} steps  "
        f"peak RSS {rss:>7.1f} MB  {secs:>7.1f} s  {steps / secs:>9,.0f} steps/s  "
        f"{size_mb / secs:>6.1f} MB/s"
    )


def main() -> None:
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--size-mb", type=float, default=1024, help="largest file (default 1024)")
    parser.add_argument(
        "--baseline-mb", type=float, default=128, help="size for the load-whole baseline"
    )
    parser.add_argument("--tmp", type=Path, default=None, help="folder for the files")
    args = parser.parse_args()

    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs")
    folder = Path(tempfile.mkdtemp(prefix="agentlens-bench-", dir=args.tmp))
    try:
        floor = baseline_floor()
        print(f"fixed cost (python + agentlens + an empty store): peak RSS {floor:.1f} MB\n")
        sizes = sorted({args.baseline_mb, max(args.baseline_mb, args.size_mb / 4), args.size_mb})
        for size_mb in sizes:
            path = folder / f"runs-{size_mb:.0f}MB.jsonl"
            t0 = time.perf_counter()
            runs, steps = generate(path, int(size_mb * 1024 * 1024))
            actual_mb = path.stat().st_size / 1024 / 1024
            print(f"generated {path.name}: {runs:,} runs in {time.perf_counter() - t0:.1f} s")

            db = folder / f"stream-{size_mb:.0f}.db"
            rss, secs = measure(
                [PYTHON, "-c", _CLI, "--db", f"sqlite:///{db}", "import", str(path)]
            )
            print(row("streaming", actual_mb, runs, steps, rss, secs))
            rss, secs = measure([PYTHON, "-c", _READ_ONLY, str(path)])
            print(row("read-only", actual_mb, runs, steps, rss, secs))
            _remove_db(db)

            if size_mb == args.baseline_mb:
                db = folder / f"whole-{size_mb:.0f}.db"
                rss, secs = measure([PYTHON, "-c", _BASELINE, str(path), f"sqlite:///{db}"])
                print(row("load-whole", actual_mb, runs, steps, rss, secs))
                _remove_db(db)
            path.unlink()
            print()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _remove_db(db: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)


if __name__ == "__main__":
    main()
