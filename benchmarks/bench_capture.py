"""Capture overhead per recorded step: agentlens vs an OpenTelemetry SDK span, side by side.

Both sides record the same workload: a small function (two arguments, a small dict back) called
STEPS times inside one enclosing run / root span, RUNS times over. Each side exports through its
batching background processor to an exporter that discards:

* agentlens: ``@agentlens.tool`` (and ``run.step``) with the default ``BatchProcessor``;
* agentlens with the online loop guard (``loop_guard = "warn"`` for the runs' role), beside the
  same runs of a role without it: with distinct arguments at every step (the usual case) and with
  the same call repeated at every step (the guard trips at the third call of each run and warns
  once; later repeats are not compared again);
* OpenTelemetry: ``tracer.start_as_current_span`` with a ``BatchSpanProcessor``, once bare
  (name and timings only) and once recording the arguments and result as JSON attributes,
  which is what agentlens records (the fair comparison).

Two figures per variant, each the median of ROUNDS interleaved rounds, minus the cost of the
plain undecorated call:

* ``hot``: wall time in the agent's thread per step (what the agent waits for);
* ``cpu``: process CPU time per step including the background export, up to a final flush.

The loop guard's cost is read from CPU time, best of the ROUNDS rounds (the least disturbed by
other jobs on the machine): the agent thread's own (``time.thread_time``: the guard runs there
and nowhere else) and the process's, each minus the same runs without the guard.

Usage::

    .venv/bin/python benchmarks/bench_capture.py [--runs 400] [--steps 25] [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import agentlens
from agentlens.capture import Exporter, ExportResult
from agentlens.model import Trace


class NullExporter(Exporter):
    """Discards every run (but the runs are still converted to Trace objects)."""

    def export(self, traces: Sequence[Trace]) -> ExportResult:
        return ExportResult.success(len(traces))


class NullSpanExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def lookup_plain(customer_id: str, fields: tuple[str, ...] = ("name", "tier")) -> dict[str, Any]:
    return {"id": customer_id, "name": "Ada Lovelace", "tier": 3}


lookup_agentlens = agentlens.tool(name="lookup")(lookup_plain)


def make_otel(
    tracer: Any, with_attributes: bool
) -> Callable[[str, tuple[str, ...]], dict[str, Any]]:
    if not with_attributes:

        @tracer.start_as_current_span("lookup")
        def lookup_bare(customer_id: str, fields: tuple[str, ...] = ("name", "tier")) -> Any:
            return lookup_plain(customer_id, fields)

        return lookup_bare

    def lookup_attrs(customer_id: str, fields: tuple[str, ...] = ("name", "tier")) -> Any:
        with tracer.start_as_current_span("lookup") as span:
            span.set_attribute(
                "input.value", json.dumps({"customer_id": customer_id, "fields": list(fields)})
            )
            result = lookup_plain(customer_id, fields)
            span.set_attribute("output.value", json.dumps(result))
            return result

    return lookup_attrs


def measure(
    body: Callable[[], None], flush: Callable[[], object], steps_total: int
) -> tuple[float, float, float]:
    """(hot µs/step, cpu µs/step, agent thread's cpu µs/step) of one round."""
    cpu0 = time.process_time()
    thread0 = time.thread_time()
    t0 = time.perf_counter()
    body()
    hot = time.perf_counter() - t0
    thread = time.thread_time() - thread0
    flush()
    cpu = time.process_time() - cpu0
    return hot / steps_total * 1e6, cpu / steps_total * 1e6, thread / steps_total * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400, help="runs (root spans) per round")
    parser.add_argument("--steps", type=int, default=25, help="steps per run")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds; median kept")
    parser.add_argument(
        "--guard-only",
        action="store_true",
        help="only the loop guard's variants (with and without it), not OpenTelemetry's",
    )
    args = parser.parse_args()
    runs, steps, total = args.runs, args.steps, args.runs * args.steps

    # The loop guard is on for role "guarded" only, so that guarded and unguarded runs share one
    # pipeline and their rounds interleave.
    config = Path(tempfile.mkdtemp()) / "agentlens.toml"
    config.write_text('[agents.guarded]\nloop_guard = "warn"\n', encoding="utf-8")
    os.environ["AGENTLENS_CONFIG"] = str(config)
    agentlens.configure(exporter=NullExporter())
    guard_log = logging.getLogger("agentlens")  # the guard's warning: once per guarded run
    guard_log.addHandler(logging.NullHandler())
    guard_log.propagate = False
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(NullSpanExporter()))
    tracer = provider.get_tracer("bench")
    otel_bare = make_otel(tracer, with_attributes=False)
    otel_attrs = make_otel(tracer, with_attributes=True)

    def plain() -> None:
        for r in range(runs):
            for i in range(steps):
                lookup_plain(f"CUST-{r}-{i}")

    def agentlens_decorated() -> None:
        for r in range(runs):
            with agentlens.run(agent="bench", input="q") as run:
                for i in range(steps):
                    lookup_agentlens(f"CUST-{r}-{i}")
                run.output = "done"

    def agentlens_guarded(agent: str, repeat: bool) -> Callable[[], None]:
        def body() -> None:
            for r in range(runs):
                with agentlens.run(agent=agent, input="q") as run:
                    for i in range(steps):
                        lookup_agentlens(f"CUST-{r}" if repeat else f"CUST-{r}-{i}")
                    run.output = "done"

        return body

    def agentlens_manual() -> None:
        for r in range(runs):
            with agentlens.run(agent="bench", input="q") as run:
                for i in range(steps):
                    cid = f"CUST-{r}-{i}"
                    result = lookup_plain(cid)
                    run.step("tool", "lookup", input={"customer_id": cid}, output=result)
                run.output = "done"

    def otel(fn: Callable[..., Any]) -> Callable[[], None]:
        def body() -> None:
            for r in range(runs):
                with tracer.start_as_current_span("run"):
                    for i in range(steps):
                        fn(f"CUST-{r}-{i}")

        return body

    variants: dict[str, tuple[Callable[[], None], Callable[[], object]]] = {
        "plain call": (plain, lambda: None),
        "agentlens @tool": (agentlens_decorated, lambda: agentlens.flush(60)),
        "agentlens run.step": (agentlens_manual, lambda: agentlens.flush(60)),
        "@tool, same args": (agentlens_guarded("bench", True), lambda: agentlens.flush(60)),
        "@tool + guard": (agentlens_guarded("guarded", False), lambda: agentlens.flush(60)),
        "@tool + guard, same args": (
            agentlens_guarded("guarded", True),
            lambda: agentlens.flush(60),
        ),
        "otel span (bare)": (otel(otel_bare), lambda: provider.force_flush(60_000)),
        "otel span + JSON attrs": (otel(otel_attrs), lambda: provider.force_flush(60_000)),
    }
    if args.guard_only:
        keep = ("plain call", "agentlens @tool", "@tool, same args", "@tool + guard")
        variants = {n: v for n, v in variants.items() if n.startswith(keep)}
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in variants}
    for body, flush in variants.values():  # warm-up
        measure(body, flush, total)
    for _ in range(args.rounds):
        for name, (body, flush) in variants.items():
            results[name].append(measure(body, flush, total))

    hot = {n: statistics.median(h for h, _, _ in r) for n, r in results.items()}
    cpu = {n: statistics.median(c for _, c, _ in r) for n, r in results.items()}
    best_cpu = {n: min(c for _, c, _ in r) for n, r in results.items()}
    best_thread = {n: min(t for _, _, t in r) for n, r in results.items()}
    base_hot, base_cpu = hot["plain call"], cpu["plain call"]

    print(f"python {platform.python_version()} on {platform.machine()}, {args.rounds} rounds of")
    print(f"{runs} runs x {steps} steps; median µs per step, the plain call subtracted")
    print(f"{'variant':<24}{'hot µs/step':>13}{'cpu µs/step':>13}")
    print(f"{'plain call (absolute)':<24}{base_hot:>13.2f}{base_cpu:>13.2f}")
    over_hot = {n: hot[n] - base_hot for n in variants if n != "plain call"}
    over_cpu = {n: cpu[n] - base_cpu for n in variants if n != "plain call"}
    for name in over_hot:
        print(f"{name:<24}{over_hot[name]:>13.2f}{over_cpu[name]:>13.2f}")
    print()
    for ours in ("agentlens @tool", "agentlens run.step") if not args.guard_only else ():
        for theirs in ("otel span (bare)", "otel span + JSON attrs"):
            print(
                f"{ours} / {theirs}: hot {over_hot[ours] / over_hot[theirs]:.2f}, "
                f"cpu {over_cpu[ours] / over_cpu[theirs]:.2f}"
            )
    print()
    print("loop guard (warn), CPU µs per step, best of the rounds (goal: under 5 µs added):")
    print(
        f"{'workload':<22}{'thread, without':>16}{'added':>8}{'process, without':>18}{'added':>8}"
    )
    for label, guard, base in (
        ("distinct arguments", "@tool + guard", "agentlens @tool"),
        ("the same call", "@tool + guard, same args", "@tool, same args"),
    ):
        print(
            f"{label:<22}{best_thread[base]:>16.2f}"
            f"{best_thread[guard] - best_thread[base]:>8.2f}"
            f"{best_cpu[base]:>18.2f}{best_cpu[guard] - best_cpu[base]:>8.2f}"
        )
    print(
        f"(medians: hot added {over_hot['@tool + guard'] - over_hot['agentlens @tool']:.2f}", end=""
    )
    print(f" / {over_hot['@tool + guard, same args'] - over_hot['@tool, same args']:.2f} µs)")
    stats = agentlens.capture.stats()
    print(
        f"\nagentlens: exported {stats.exported} runs, dropped {stats.dropped}, failed {stats.failed}"
    )
    agentlens.shutdown()
    provider.shutdown()

    # With capture off (nothing configured), a decorated call inside a run only checks a flag.
    agentlens.configure(enabled=False)
    noop = [measure(agentlens_decorated, lambda: None, total)[0] for _ in range(args.rounds)]
    print(f"agentlens @tool with capture off: {statistics.median(noop) - base_hot:.2f} µs/step")


if __name__ == "__main__":
    main()
