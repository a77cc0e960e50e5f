"""SQLite store: ingestion throughput against baselines, and reads of a 1,000,000-step store.

Part 1, ingestion (each variant writes the same runs into its own new file, in a temp folder,
WAL + synchronous=NORMAL for every variant), side by side in one process:

* ``SQLiteStore.put_traces``: Trace objects in, calls of ``--batch`` runs (the figure the target
  is about: >= 20,000 steps/s);
* ``agentlens import FILE``: the real command run in this process on a JSONL file of the same
  runs (the streaming reader, validation, one ``put_traces`` transaction), against the same
  command with the reader as it was before its fast path (every line through the standard
  JSON decoder, default read buffer), and each reader alone (no store); interleaved, best of
  ``--import-reps``;
* baseline ``Trace.from_json per line + put_traces``: ``model_validate_json`` per line;
* baseline ``bare table, serialise + executemany``: each run's full JSON (``model_dump_json``)
  into a table ``(id TEXT PRIMARY KEY, doc TEXT)``, ``executemany`` per batch: the floor any
  design that stores the run's JSON pays;
* baseline ``bare table, pre-serialised``: the same rows with the JSON already made: SQLite's
  raw write speed for these bytes;
* baseline ``one run per transaction``: ``put_traces`` of one run per call (how a naive
  capture exporter would write).

Part 2, reads: a store of ``--steps`` steps (default 1,000,000: 50,000 runs of 20 steps, 1-2 KB
of JSON per step) spread evenly over ``--days`` days, built with ``put_traces`` (timed too);
then, over a one-day window in the middle, median of ``--reps`` repetitions on a freshly opened
store (OS page cache warm: the file was just written):

* ``count_runs`` and ``list_runs`` (summaries, no steps) of the window;
* ``query_traces``: time to the first Trace, to the first 100, and to drain the whole window
  (every run of the day with its steps, as pydantic objects, built by the trusted constructor);
* the same rows validated again (``model_validate_json``, the read path before the trusted
  constructor), parsed only (JSON to Python objects, no Trace), and read only (SQL and paging),
  to show where the time goes;
* ``query_traces`` of one agent role in the window, first 100;
* ``unscored_run_ids`` over the window; ``get_trace`` of random runs (median per call), and the
  same validated again.

Usage::

    .venv/bin/python benchmarks/bench_store.py [--steps 1000000] [--days 30] [--reps 5]
        [--ingest-runs 2000] [--batch 500] [--import-reps 5] [--keep DIR [--reuse]]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import os
import platform
import random
import sqlite3
import statistics
import subprocess
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic_core import from_json

from agentlens.model import Trace
from agentlens.store import RunFilter, SQLiteStore

STEPS_PER_RUN = 20
AGENTS = ("support", "billing", "research", "writer", "triage")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


# -- realistic runs ---------------------------------------------------------------------------


class RunFactory:
    """Runs of a tool-using support agent: 20 steps, tool/retrieval outputs of 1-2 KB of JSON."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        letters = "abcdefghijklmnopqrstuvwxyz"
        words = [
            "".join(self.rng.choice(letters) for _ in range(self.rng.randint(2, 9)))
            for _ in range(4000)
        ]
        self.sentences = [
            " ".join(self.rng.choice(words) for _ in range(self.rng.randint(8, 20))).capitalize()
            + "."
            for _ in range(3000)
        ]

    def text(self, size: int) -> str:
        out: list[str] = []
        n = 0
        while n < size:
            s = self.rng.choice(self.sentences)
            out.append(s)
            n += len(s) + 1
        return " ".join(out)

    def records(self, size: int) -> list[dict[str, Any]]:
        recs: list[dict[str, Any]] = []
        n = 0
        while n < size:
            text = self.text(self.rng.randint(200, 400))
            recs.append(
                {
                    "id": f"CUST-{self.rng.randint(10000, 99999)}",
                    "doc": f"DOC-{self.rng.getrandbits(32):08x}",
                    "amount": round(self.rng.uniform(5, 5000), 2),
                    "text": text,
                }
            )
            n += len(text) + 80
        return recs

    def run(self, i: int, started: datetime) -> dict[str, Any]:
        rng = self.rng
        steps: list[dict[str, Any]] = []
        t = started
        for j in range(STEPS_PER_RUN):
            kind = ("user", "llm", "tool", "retrieval", "tool", "llm", "text")[j % 7]
            end = t + timedelta(milliseconds=rng.randint(50, 2000))
            step: dict[str, Any] = {
                "id": f"s{j}",
                "parent_id": None,
                "kind": kind,
                "started_at": t.isoformat(),
                "ended_at": end.isoformat(),
            }
            if kind in ("tool", "retrieval"):
                step["name"] = rng.choice(("get_customer", "search_kb", "list_invoices"))
                step["input"] = {"query": self.text(40), "limit": 5}
                step["output"] = self.records(rng.randint(800, 1500))
            elif kind == "llm":
                step["name"] = "gpt-4o"
                step["input"] = [{"role": "user", "content": self.text(300)}]
                step["output"] = self.text(rng.randint(600, 1300))
                step["attributes"] = {"input_tokens": rng.randint(500, 4000), "output_tokens": 300}
            else:
                step["output"] = self.text(rng.randint(800, 1700))
            steps.append(step)
            t = end
        return {
            "id": f"run-{i:08d}",
            "agent": AGENTS[i % len(AGENTS)],
            "name": f"ticket {i}",
            "started_at": started.isoformat(),
            "ended_at": t.isoformat(),
            "input": self.text(200),
            "output": self.text(600),
            "metadata": {"release": f"v{i % 9}", "tenant": "acme"},
            "links": {"ticket": f"T-{i}"},
            "steps": steps,
        }

    def traces(self, n: int, *, start: int = 0, span: timedelta) -> Iterator[Trace]:
        """``n`` runs with start times spread evenly over ``span`` from T0."""
        for k in range(n):
            i = start + k
            yield Trace.model_validate(self.run(i, T0 + span * (k / n)))


# -- helpers ----------------------------------------------------------------------------------


def chunks(items: list[Trace], size: int) -> Iterator[list[Trace]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def bare(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE TABLE runs (id TEXT PRIMARY KEY, doc TEXT NOT NULL)")
    return conn


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def timed_cpu(fn: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU (this process) seconds of ``fn()``."""
    c = time.process_time()
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t, time.process_time() - c


def load() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def median_of(reps: int, fn: Callable[[], object]) -> tuple[float, float, float]:
    times = [timed(fn) for _ in range(reps)]
    return statistics.median(times), min(times), max(times)


def ms(x: float) -> str:
    return f"{x * 1000:9.1f} ms"


@contextlib.contextmanager
def _previous_reader() -> Iterator[None]:
    """The trace-file reader as it was before its fast path: every JSONL line through the
    standard decoder (its fallback), with the default read buffer."""
    from agentlens.ingest import trace_file

    def refuse(*args: object, **kwargs: object) -> object:
        raise ValueError("fast path off")

    saved = trace_file._fast_json, trace_file._BUFFER
    trace_file._fast_json, trace_file._BUFFER = refuse, -1
    try:
        yield
    finally:
        trace_file._fast_json, trace_file._BUFFER = saved


def machine() -> str:
    cpu = "?"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        cpu = next(
            (ln.split(":", 1)[1].strip() for ln in out.splitlines() if "Model name" in ln), "?"
        )
    except (OSError, subprocess.CalledProcessError):
        pass
    return (
        f"{os.cpu_count()} CPU ({cpu}), Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, {platform.system()} {platform.release()}"
    )


# -- part 1: ingestion ------------------------------------------------------------------------


def bench_ingest(folder: Path, runs: int, batch: int, import_reps: int) -> None:
    factory = RunFactory(seed=1)
    traces = list(factory.traces(runs, span=timedelta(days=1)))
    lines = [t.to_json() for t in traces]
    steps = sum(len(t.steps) for t in traces)
    step_bytes = [len(s.model_dump_json()) for t in traces for s in t.steps]
    print(
        f"\nIngestion: {runs} runs, {steps} steps, step JSON {min(step_bytes)}-{max(step_bytes)} "
        f"bytes (mean {statistics.mean(step_bytes):.0f}), calls of {batch} runs"
    )
    results: list[tuple[str, tuple[float, float]]] = []

    def put_store() -> None:
        with SQLiteStore(f"sqlite:///{folder / 'ingest-store.db'}") as store:
            for part in chunks(traces, batch):
                store.put_traces(part)

    results.append(("SQLiteStore.put_traces", timed_cpu(put_store)))

    jsonl = folder / "ingest.jsonl"
    jsonl.write_text("".join(line + "\n" for line in lines), encoding="utf-8")

    def cli_import(db: str, path: Path = jsonl) -> Callable[[], None]:
        # The real command, in this process: trace_file.scan -> one put_traces transaction.
        def go() -> None:
            from agentlens.cli import main as cli

            try:
                cli(["--db", f"sqlite:///{folder / db}", "import", str(path)])
            except SystemExit as exc:
                if exc.code:
                    raise

        return go

    def reader_only() -> None:
        from agentlens.ingest.trace_file import scan

        for _ in scan(jsonl):
            pass

    # Warm up (the first command in a process imports the CLI's modules), then interleave the
    # variants, best of --import-reps (the machine is shared: the best is the least disturbed).
    warm = folder / "warm.jsonl"
    warm.write_text(lines[0] + "\n", encoding="utf-8")
    cli_import("warm.db", warm)()
    imports: dict[str, list[tuple[float, float]]] = {}
    for rep in range(import_reps):
        for name, fn, previous in (
            ("agentlens import FILE (in process)", cli_import(f"cli{rep}.db"), False),
            ("baseline: the same, previous reader", cli_import(f"cli-prev{rep}.db"), True),
            ("  reader alone (parse + validate, no store)", reader_only, False),
            ("  baseline: previous reader alone", reader_only, True),
        ):
            with _previous_reader() if previous else contextlib.nullcontext():
                imports.setdefault(name, []).append(timed_cpu(fn))
    for name, measured in imports.items():
        results.append(
            (
                f"{name} (best of {import_reps})",
                (min(w for w, _ in measured), min(c for _, c in measured)),
            )
        )

    def import_jsonl() -> None:
        with SQLiteStore(f"sqlite:///{folder / 'ingest-import.db'}") as store:
            for i in range(0, len(lines), batch):
                store.put_traces(Trace.from_json(line) for line in lines[i : i + batch])

    results.append(("baseline: Trace.from_json per line + put_traces", timed_cpu(import_jsonl)))

    def bare_serialise() -> None:
        conn = bare(folder / "ingest-bare1.db")
        for part in chunks(traces, batch):
            conn.execute("BEGIN")
            conn.executemany(
                "INSERT INTO runs VALUES (?, ?)", [(t.id, t.model_dump_json()) for t in part]
            )
            conn.execute("COMMIT")
        conn.close()

    results.append(("baseline: bare table, serialise + executemany", timed_cpu(bare_serialise)))

    rows = [(t.id, t.model_dump_json()) for t in traces]

    def bare_raw() -> None:
        conn = bare(folder / "ingest-bare2.db")
        for i in range(0, len(rows), batch):
            conn.execute("BEGIN")
            conn.executemany("INSERT INTO runs VALUES (?, ?)", rows[i : i + batch])
            conn.execute("COMMIT")
        conn.close()

    results.append(("baseline: bare table, pre-serialised rows", timed_cpu(bare_raw)))

    one_n = min(runs, 500)

    def one_by_one() -> None:
        with SQLiteStore(f"sqlite:///{folder / 'ingest-one.db'}") as store:
            for t in traces[:one_n]:
                store.put_traces([t])

    wall, cpu = timed_cpu(one_by_one)
    scale = runs / one_n  # extrapolated from the first one_n runs
    results.append(
        (f"baseline: put_traces one run per call ({one_n} runs)", (wall * scale, cpu * scale))
    )

    print(f"(load average at the end: {load()})")
    print(f"{'variant':<60} {'steps/s':>10} {'runs/s':>9} {'MB/s':>7} {'steps/CPU-s':>12}")
    megabytes = sum(len(r[1]) for r in rows) / 1e6
    for name, (seconds, cpu_s) in results:
        print(
            f"{name:<60} {steps / seconds:>10,.0f} {runs / seconds:>9,.0f} "
            f"{megabytes / seconds:>7.1f} {steps / cpu_s:>12,.0f}"
        )

    # zlib: would compressing step JSON pay off?
    docs = [s.model_dump_json().encode() for t in traces[:500] for s in t.steps]
    comp = [zlib.compress(d, 1) for d in docs]
    c_time = timed(lambda: [zlib.compress(d, 1) for d in docs])
    d_time = timed(lambda: [zlib.decompress(c) for c in comp])
    ser_time = timed(lambda: [s.model_dump_json() for t in traces[:500] for s in t.steps])
    ratio = sum(map(len, docs)) / sum(map(len, comp))
    print(
        f"zlib level 1 on step JSON: ratio {ratio:.2f}, compress {c_time / len(docs) * 1e6:.1f} "
        f"us/step, decompress {d_time / len(docs) * 1e6:.1f} us/step "
        f"(serialising a step: {ser_time / len(docs) * 1e6:.1f} us)"
    )


# -- part 2: reads of a large store -----------------------------------------------------------


def build(url: str, total_steps: int, days: int, batch: int) -> tuple[int, float, float, float]:
    runs = total_steps // STEPS_PER_RUN
    factory = RunFactory(seed=2)
    span = timedelta(days=days)
    gen_time = 0.0
    put_time = 0.0
    put_cpu = 0.0
    with SQLiteStore(url) as store:
        made = 0
        while made < runs:
            n = min(batch * 4, runs - made)
            t = time.perf_counter()
            part = [
                Trace.model_validate(factory.run(made + k, T0 + span * ((made + k) / runs)))
                for k in range(n)
            ]
            gen_time += time.perf_counter() - t
            wall, cpu = timed_cpu(functools.partial(store.put_traces, part))
            put_time += wall
            put_cpu += cpu
            made += n
            print(f"\r  built {made * STEPS_PER_RUN:,} steps", end="", flush=True)
    print()
    return runs, gen_time, put_time, put_cpu


def bench_reads(
    folder: Path, total_steps: int, days: int, reps: int, batch: int, reuse: bool
) -> None:
    path = folder / "big.db"
    url = f"sqlite:///{path}"
    if reuse and path.exists():
        print(f"\nReusing the store in {path} (built by an earlier run with the same options)")
    else:
        print(f"\nBuilding a store of {total_steps:,} steps over {days} days in {path} ...")
        runs, gen_time, put_time, put_cpu = build(url, total_steps, days, batch)
        size = sum(p.stat().st_size for p in folder.glob("big.db*"))
        print(
            f"  {runs:,} runs; generating the Trace objects {gen_time:.1f} s; put_traces "
            f"{put_time:.1f} s = {total_steps / put_time:,.0f} steps/s "
            f"({total_steps / put_cpu:,.0f} steps/CPU-s); file {size / 1e9:.2f} GB; "
            f"load {load()}"
        )

    mid = T0 + timedelta(days=days // 2)
    window = RunFilter(start=mid, end=mid + timedelta(days=1))
    store = SQLiteStore(url)
    try:
        in_window = store.count_runs(window)
        ids = [s.id for s in store.list_runs(limit=None)]
        print(
            f"\nReads: one-day window {window.start:%Y-%m-%d} = {in_window:,} runs, "
            f"{in_window * STEPS_PER_RUN:,} steps; median of {reps} (min-max); load {load()}"
        )
        rows: list[tuple[str, tuple[float, float, float]]] = []

        def first(n: int, where: RunFilter = window) -> Callable[[], object]:
            def go() -> None:
                for _ in itertools.islice(store.query_traces(where), n):
                    pass

            return go

        rows.append(("count_runs(window)", median_of(reps, lambda: store.count_runs(window))))
        rows.append(
            (
                "list_runs(window), all summaries",
                median_of(reps, lambda: list(store.list_runs(window))),
            )
        )
        rows.append(("query_traces(window): first trace", median_of(reps, first(1))))
        rows.append(("query_traces(window): first 100 traces", median_of(reps, first(100))))
        agent_window = RunFilter(start=window.start, end=window.end, agent="billing")
        rows.append(
            (
                "query_traces(window, agent=billing): first 100",
                median_of(reps, first(100, agent_window)),
            )
        )

        def raw_rows() -> Iterator[tuple[Any, ...]]:
            # The rows query_traces reads (SQL, key paging), nothing built from them.
            for page in store._pages(_filter(window), "r.doc, r.steps", _rows, None, True):
                yield from page

        def validated_drain() -> int:
            # Baseline: the previous read path, every stored run validated again.
            n = 0
            for _, _, doc, steps in raw_rows():
                Trace.model_validate_json(f'{doc[:-1]},"steps":{steps}}}')
                n += 1
            return n

        def parse_drain() -> int:
            # The JSON parse alone (the same parser), no objects built.
            return sum(1 for _, _, doc, steps in raw_rows() if (from_json(doc), from_json(steps)))

        # The drains side by side, interleaved (each round runs every variant once), so that
        # the machine's load falls on all of them alike; 2x --reps rounds.
        drains: dict[str, Callable[[], object]] = {
            f"query_traces(window): all {in_window:,} traces": lambda: sum(
                1 for _ in store.query_traces(window)
            ),
            "  baseline: same rows validated (previous read path)": validated_drain,
            "  same rows, JSON parsed only (no Trace objects)": parse_drain,
            "  same rows, SQL only (JSON text)": lambda: sum(1 for _ in raw_rows()),
        }
        drain_times: dict[str, list[float]] = {name: [] for name in drains}
        for _ in range(2 * reps):
            for name, fn in drains.items():
                drain_times[name].append(timed(fn))
        for name, measured in drain_times.items():
            rows.append((name, (statistics.median(measured), min(measured), max(measured))))
        rows.append(
            (
                "unscored_run_ids(window), all",
                median_of(reps, lambda: list(store.unscored_run_ids("x", "1", window))),
            )
        )
        rng = random.Random(3)
        sample = [rng.choice(ids) for _ in range(200)]

        def get_validated(run_id: str) -> Trace:
            # Baseline: get_trace as it was (the stored JSON validated again).
            def work(conn: sqlite3.Connection) -> tuple[str, str]:
                row = conn.execute("SELECT doc, steps FROM runs WHERE id = ?", (run_id,))
                doc, steps = row.fetchone()
                return doc, steps

            doc, steps = store.read(work)
            return Trace.model_validate_json(f'{doc[:-1]},"steps":{steps}}}')

        per_call: list[float] = []
        per_call_validated: list[float] = []
        for rid in sample:  # interleaved, like the drains
            per_call.append(timed(functools.partial(store.get_trace, rid)))
            per_call_validated.append(timed(functools.partial(get_validated, rid)))
        print(f"{'operation':<52} {'median':>12} {'min':>12} {'max':>12}")
        for name, (med, lo, hi) in rows:
            print(f"{name:<52} {ms(med):>12} {ms(lo):>12} {ms(hi):>12}")
        for name, times in (
            ("get_trace(random id), per call (200 calls)", per_call),
            ("  baseline: validated (previous get_trace)", per_call_validated),
        ):
            print(
                f"{name:<52} {ms(statistics.median(times)):>12}"
                f" {ms(min(times)):>12} {ms(max(times)):>12}"
            )
    finally:
        store.close()


def _filter(where: RunFilter) -> Any:
    from agentlens.store._sqlite import _filter_sql

    return _filter_sql(where)


def _rows(_: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--ingest-runs", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--import-reps", type=int, default=5)
    parser.add_argument("--keep", type=Path, default=None, help="build in this folder and keep it")
    parser.add_argument(
        "--reuse", action="store_true", help="with --keep: read the store built there before"
    )
    parser.add_argument("--skip-ingest", action="store_true")
    parser.add_argument("--skip-reads", action="store_true")
    args = parser.parse_args()
    print(f"Machine: {machine()}")
    print("Note: a shared 2-core machine; other work was running, so figures are noisy.")
    with tempfile.TemporaryDirectory(prefix="agentlens-bench-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        if not args.skip_ingest:
            bench_ingest(folder, args.ingest_runs, args.batch, args.import_reps)
        if not args.skip_reads:
            bench_reads(folder, args.steps, args.days, args.reps, args.batch, args.reuse)


if __name__ == "__main__":
    main()
