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
from agentlens.eval import Scorer, get_scorer, run_scorers
from agentlens.model import Step, StepKind, Trace

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


def analyse(root: Path) -> dict[str, Any]:
    """Score every run of every data set before and after; return the figures and every flag."""
    settings = Settings()
    configs = {name: _scorers(name) for name in ("before", "after")}
    report: dict[str, Any] = {}
    for name, loader in DATASETS.items():
        if not (root / name).is_dir():
            continue
        runs = 0
        tool_steps = 0
        figures: dict[str, Any] = {
            config: {"runs_flagged": 0, "runs_flagged_by_mode": Counter(), "flags": []}
            for config in configs
        }
        for trace in loader(root):
            runs += 1
            tool_steps += sum(
                1 for s in trace.steps if s.kind in (StepKind.TOOL, StepKind.RETRIEVAL)
            )
            for config, scorers in configs.items():
                flags = _flags(trace, scorers, settings)
                out = figures[config]
                out["flags"].extend(flags)
                out["runs_flagged"] += bool(flags)
                out["runs_flagged_by_mode"].update({line.split(" | ")[1] for line in flags})
        before, after = set(figures["before"]["flags"]), set(figures["after"]["flags"])
        report[name] = {
            "runs": runs,
            "tool_steps": tool_steps,
            **{
                config: {**out, "runs_flagged_by_mode": dict(out["runs_flagged_by_mode"])}
                for config, out in figures.items()
            },
            "added": [line for line in figures["after"]["flags"] if line not in before],
            "removed": [line for line in figures["before"]["flags"] if line not in after],
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
    header = f"{'data set':<14}{'':<8}{'runs':>6}{'tool steps':>12}{'flagged':>9}" + "".join(
        f"{m:>20}" for m in MODES
    )
    print(header)
    for name, figures in report.items():
        for config in ("before", "after"):
            by_mode = figures[config]["runs_flagged_by_mode"]
            print(
                f"{name:<14}{config:<8}{figures['runs']:>6}{figures['tool_steps']:>12}"
                f"{figures[config]['runs_flagged']:>9}"
                + "".join(f"{by_mode.get(m, 0):>20}" for m in MODES)
            )
    for name, figures in report.items():
        lines = figures["after"]["flags"] if args.flags else []
        if lines or figures["added"] or figures["removed"]:
            print(f"\n== {name}")
        changed = _changed(figures["removed"], figures["added"])
        for line in figures["removed"]:
            if line in changed:
                print(f"  ~ {line[:200]}\n      now: {changed[line].split(' | ', 2)[2][:200]}")
            else:
                print("  - " + line[:400])
        for line in figures["added"]:
            if line not in changed.values():
                print("  + " + line[:400])
        for line in lines:
            if line not in figures["added"]:
                print("    " + line[:400])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
