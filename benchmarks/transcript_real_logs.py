"""Run the transcript analysers on real agent logs and report what they flag.

Usage::

    python benchmarks/transcript_real_logs.py [DATA_DIR] [--flags] [--json]

DATA_DIR defaults to ``$AGENTLENS_DATA`` or ``../shared/data`` (relative to the repository).
It imports the SWE-agent, OpenHands, Who&When and tau-bench logs found there, scores every run
with ``repeated_tool_calls``, ``excessive_steps`` and ``no_progress`` twice, *before* (the rules
of issue 18 switched off by their options: see :data:`BEFORE`) and *after* (default options),
and prints, per data set: runs, tool steps, and how many runs each configuration flags, by
failure mode; then every flag that was added or removed, one line each (run | mode | text |
detail | steps), for reading by hand. ``--flags`` lists the unchanged flags too.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentlens.config import Settings
from agentlens.eval import Scorer, get_scorer, run_scorers, score_runs
from agentlens.model import Step, StepKind, Trace
from agentlens.store import open_store

SCORERS = ("repeated_tool_calls", "excessive_steps", "no_progress")
REPO = Path(__file__).resolve().parent.parent


def default_data_dir() -> Path:
    """``$AGENTLENS_DATA``, else ``../shared/data`` relative to the repository."""
    env = os.environ.get("AGENTLENS_DATA")
    return Path(env) if env else (REPO / ".." / "shared" / "data").resolve()


def swe_agent_runs(root: Path) -> Iterator[Trace]:
    from agentlens.ingest import swe_agent

    for path in sorted((root / "swe_agent").rglob("*.traj")):
        yield from swe_agent.read(path)


def openhands_runs(root: Path) -> Iterator[Trace]:
    from agentlens.ingest import openhands

    base = root / "openhands"
    for path in sorted([*base.rglob("*.json"), *base.rglob("*.jsonl")]):
        yield from openhands.read(path)


def who_and_when_runs(root: Path) -> Iterator[Trace]:
    from agentlens.ingest import who_and_when

    for path in sorted((root / "who_and_when").rglob("*.json")):
        yield from who_and_when.read(path)


def tau_bench_runs(root: Path) -> Iterator[Trace]:
    """tau-bench trajectories through ``agentlens.ingest.openai_messages`` when it is there,
    else through the small loader below."""
    paths = sorted((root / "tau_bench").glob("*.json"))
    try:
        from agentlens.ingest import openai_messages
    except ImportError:
        for path in paths:
            yield from _tau_bench_fallback(path)
        return
    for path in paths:
        for trace in openai_messages.read(path):
            yield _tau_errors(trace)


def _tau_errors(trace: Trace) -> Trace:
    """tau-bench tools report a failure as a result starting with ``Error:``; make it the
    step's ``error`` so that repeated failures count as error loops."""
    for step in trace.steps:
        if (
            step.kind is StepKind.TOOL
            and isinstance(step.output, str)
            and step.output.startswith("Error:")
        ):
            step.error, step.output = step.output, None
    return trace


def _tau_bench_fallback(path: Path) -> Iterator[Trace]:
    """OpenAI chat messages with ``tool_calls`` -> steps; a ``tool`` message answers the call with
    its ``tool_call_id``. Kept minimal: only what the analysers need."""
    for n, item in enumerate(json.loads(path.read_text(encoding="utf-8"))):
        steps: list[Step] = []
        calls: dict[str, Step] = {}
        for message in item.get("traj", []):
            role = message.get("role")
            if role == "assistant":
                if message.get("content"):
                    steps.append(
                        Step(id=f"s{len(steps) + 1}", kind=StepKind.TEXT, output=message["content"])
                    )
                for call in message.get("tool_calls") or []:
                    fn = call.get("function", {})
                    try:
                        args = json.loads(fn.get("arguments") or "null")
                    except ValueError:
                        args = fn.get("arguments")
                    step = Step(
                        id=f"s{len(steps) + 1}", kind=StepKind.TOOL, name=fn.get("name"), input=args
                    )
                    steps.append(step)
                    calls[call.get("id", "")] = step
            elif role == "tool":
                answered = calls.get(message.get("tool_call_id", ""))
                if answered is not None:
                    step = answered
                    content = message.get("content")
                    if isinstance(content, str) and content.startswith("Error:"):
                        step.error = content  # tau-bench tools report failures this way
                    else:
                        step.output = content
            elif role in ("user", "system"):
                steps.append(
                    Step(
                        id=f"s{len(steps) + 1}", kind=StepKind(role), output=message.get("content")
                    )
                )
        yield Trace(id=f"tau-{n}", name=f"task {item.get('task_id')}", steps=steps)


DATASETS = {
    "swe_agent": swe_agent_runs,
    "openhands": openhands_runs,
    "who_and_when": who_and_when_runs,
    "tau_bench": tau_bench_runs,
}


BEFORE: dict[str, dict[str, Any]] = {
    "repeated_tool_calls": {
        "volatile": [],
        "bookkeeping": [],
        "max_failures": 10**9,
        "max_varied_errors": 10**9,
        "max_messages": 10**9,
    },
    "excessive_steps": {"bookkeeping": []},
    "no_progress": {"volatile": [], "bookkeeping": []},
}
"""The analysers as they were before issue 18: the new rules switched off by their options
(no volatile parts, no bookkeeping events, no failing-in-a-row, varied-argument or repeated-message
rule). "after" is every scorer at its defaults."""

CONFIGS = ("before", "after", "after, auto budget")

MODES = (
    "repeated_tool_call",
    "alternating_loop",
    "error_loop",
    "repeated_message",
    "excessive_steps",
    "no_progress",
)


def _scorers(config: str) -> list[Scorer]:
    options = BEFORE if config == "before" else {}
    return [get_scorer(name).with_options(**options.get(name, {})) for name in SCORERS]


def _flags(trace: Trace, scorers: list[Scorer], settings: Settings) -> list[str]:
    """One line per finding: ``run | mode | text | detail | steps``."""
    lines = []
    for score in run_scorers(scorers, trace=trace, settings=settings):
        if score.error:
            raise SystemExit(f"{trace.name}: {score.scorer} failed: {score.error}")
        for finding in score.findings:
            lines.append(
                f"{trace.name} | {finding.failure_mode} | {finding.text} | {finding.detail}"
                f" | steps {finding.step_ids[:8]}"
            )
    return lines


def _auto_flags(traces: list[Trace]) -> dict[str, list[str]]:
    """``excessive_steps`` with ``max_steps = "auto"``, as a batch learns it: the runs stored in
    a SQLite store (in memory) and scored by ``score_runs``, which learns each role's budget
    once from the stored history. Flag lines by run id."""
    scorer = get_scorer("excessive_steps").with_options(max_steps="auto")
    lines: dict[str, list[str]] = {t.id: [] for t in traces}
    names = {t.id: t.name for t in traces}
    with open_store("sqlite:///:memory:") as store:  # type: ignore[attr-defined]
        store.put_traces(traces)
        score_runs(store, [scorer], settings=Settings())
        for run_id in lines:
            for score in store.get_scores(run_id):
                for finding in score.findings:
                    lines[run_id].append(
                        f"{names[run_id]} | {finding.failure_mode} | {finding.text} | "
                        f"{finding.detail} | steps {finding.step_ids[:8]}"
                    )
    return lines


def analyse(root: Path) -> dict[str, Any]:
    """Score every run of every data set before and after (and with ``max_steps = "auto"``,
    each data set one agent role); return the figures and every flag."""
    settings = Settings()
    configs = {name: _scorers(name) for name in ("before", "after")}
    report: dict[str, Any] = {}
    for name, loader in DATASETS.items():
        if not (root / name).is_dir():
            continue
        traces = [
            t.model_copy(update={"agent": name, "id": f"{name}-{i}"})
            for i, t in enumerate(loader(root))
        ]
        tool_steps = sum(
            1 for t in traces for s in t.steps if s.kind in (StepKind.TOOL, StepKind.RETRIEVAL)
        )
        per_run = {
            config: [_flags(t, scorers, settings) for t in traces]
            for config, scorers in configs.items()
        }
        auto = _auto_flags(traces)
        per_run["after, auto budget"] = [
            [line for line in flags if " | excessive_steps | " not in line] + auto[t.id]
            for t, flags in zip(traces, per_run["after"], strict=True)
        ]
        figures: dict[str, Any] = {}
        for config, runs in per_run.items():
            figures[config] = {
                "runs_flagged": sum(1 for flags in runs if flags),
                "runs_flagged_by_mode": dict(
                    Counter(mode for flags in runs for mode in {f.split(" | ")[1] for f in flags})
                ),
                "flags": [line for flags in runs for line in flags],
            }
        before, after = set(figures["before"]["flags"]), set(figures["after"]["flags"])
        budget = set(figures["after, auto budget"]["flags"])
        report[name] = {
            "runs": len(traces),
            "tool_steps": tool_steps,
            **figures,
            "added": [line for line in figures["after"]["flags"] if line not in before],
            "removed": [line for line in figures["before"]["flags"] if line not in after],
            "auto_added": [f for f in figures["after, auto budget"]["flags"] if f not in after],
            "auto_removed": [f for f in figures["after"]["flags"] if f not in budget],
        }
    return report


def _run_and_mode(line: str) -> tuple[str, str]:
    run, mode, _ = line.split(" | ", 2)
    return run, mode


def _changed(removed: list[str], added: list[str]) -> dict[str, str]:
    """Removed flags that came back changed (same run and mode, first of each): old -> new."""
    first: dict[tuple[str, str], str] = {}
    for line in added:
        first.setdefault(_run_and_mode(line), line)
    out: dict[str, str] = {}
    for line in removed:
        new = first.get(_run_and_mode(line))
        if new is not None and new not in out.values():
            out[line] = new
    return out


def _print_changes(removed: list[str], added: list[str]) -> None:
    """Each flag removed (``-``), added (``+``) or changed (``~``, with what it is now)."""
    changed = _changed(removed, added)
    for line in removed:
        if line in changed:
            print(f"  ~ {line[:200]}\n      now: {changed[line].split(' | ', 2)[2][:250]}")
        else:
            print("  - " + line[:400])
    for line in added:
        if line not in changed.values():
            print("  + " + line[:400])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir", nargs="?", type=Path, default=None)
    parser.add_argument("--flags", action="store_true", help="list every flag, before and after")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    root = args.data_dir or default_data_dir()
    if not root.is_dir():
        print(f"no data folder at {root}", file=sys.stderr)
        return 2
    report = analyse(root)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    header = f"{'data set':<14}{'':<20}{'runs':>6}{'tool steps':>12}{'flagged':>9}" + "".join(
        f"{m:>20}" for m in MODES
    )
    print(header)
    for name, figures in report.items():
        for config in CONFIGS:
            by_mode = figures[config]["runs_flagged_by_mode"]
            print(
                f"{name:<14}{config:<20}{figures['runs']:>6}{figures['tool_steps']:>12}"
                f"{figures[config]['runs_flagged']:>9}"
                + "".join(f"{by_mode.get(m, 0):>20}" for m in MODES)
            )
    for name, figures in report.items():
        print(f"\n== {name}: before -> after")
        _print_changes(figures["removed"], figures["added"])
        if args.flags:
            for line in figures["after"]["flags"]:
                if line not in figures["added"]:
                    print("    " + line[:400])
        print(f'== {name}: after -> after with max_steps = "auto"')
        _print_changes(figures["auto_removed"], figures["auto_added"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
