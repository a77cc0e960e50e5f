"""Run the transcript analysers on real agent logs and report what they flag.

Usage::

    python benchmarks/transcript_real_logs.py [DATA_DIR] [--samples N] [--json]

DATA_DIR defaults to ``$AGENTLENS_DATA`` or ``../shared/data`` (relative to the repository).
It imports the SWE-agent, OpenHands, Who&When and tau-bench logs found there, scores every run
with ``repeated_tool_calls``, ``excessive_steps`` and ``no_progress`` (default options), and
prints, per data set: runs, tool steps, and how many runs each analyser flags, by failure mode.
With ``--samples N`` it prints up to N findings per (data set, failure mode) for reading by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentlens.config import Settings
from agentlens.eval import run_scorers
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


def analyse(root: Path, samples: int) -> dict[str, Any]:
    """Score every run of every data set; return the figures and sample findings."""
    settings = Settings()
    report: dict[str, Any] = {}
    for name, loader in DATASETS.items():
        if not (root / name).is_dir():
            continue
        runs = 0
        tool_steps = 0
        flagged_by_scorer: Counter[str] = Counter()
        flagged_by_mode: Counter[str] = Counter()
        findings_by_mode: Counter[str] = Counter()
        any_flag = 0
        examples: dict[str, list[str]] = defaultdict(list)
        for trace in loader(root):
            runs += 1
            tool_steps += sum(
                1 for s in trace.steps if s.kind in (StepKind.TOOL, StepKind.RETRIEVAL)
            )
            result = run_scorers(SCORERS, trace=trace, settings=settings)
            flagged = False
            for score in result:
                if score.error:
                    raise SystemExit(f"{name} {trace.name}: {score.scorer} failed: {score.error}")
                if not score.passed:
                    flagged = True
                    flagged_by_scorer[score.scorer] += 1
                for mode in score.failure_modes:
                    flagged_by_mode[str(mode)] += 1
                for finding in score.findings:
                    mode = str(finding.failure_mode)
                    findings_by_mode[mode] += 1
                    if len(examples[mode]) < samples:
                        waste = finding.attributes.get("waste", {})
                        examples[mode].append(
                            f"{trace.name}: {finding.text} | steps {finding.step_ids[:8]} | waste {waste}"
                        )
            any_flag += flagged
        report[name] = {
            "runs": runs,
            "tool_steps": tool_steps,
            "runs_flagged": any_flag,
            "runs_flagged_by_scorer": dict(flagged_by_scorer),
            "runs_flagged_by_mode": dict(flagged_by_mode),
            "findings_by_mode": dict(findings_by_mode),
            "examples": dict(examples),
        }
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir", nargs="?", type=Path, default=None)
    parser.add_argument("--samples", type=int, default=0, help="findings to print per mode")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    root = args.data_dir or default_data_dir()
    if not root.is_dir():
        print(f"no data folder at {root}", file=sys.stderr)
        return 2
    report = analyse(root, args.samples)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    modes = [
        "repeated_tool_call",
        "alternating_loop",
        "error_loop",
        "excessive_steps",
        "no_progress",
    ]
    header = f"{'data set':<14}{'runs':>6}{'tool steps':>12}{'flagged':>9}" + "".join(
        f"{m:>20}" for m in modes
    )
    print(header)
    for name, figures in report.items():
        by_mode = figures["runs_flagged_by_mode"]
        print(
            f"{name:<14}{figures['runs']:>6}{figures['tool_steps']:>12}{figures['runs_flagged']:>9}"
            + "".join(f"{by_mode.get(m, 0):>20}" for m in modes)
        )
    if args.samples:
        for name, figures in report.items():
            for mode, lines in figures["examples"].items():
                print(f"\n== {name} / {mode}")
                for line in lines:
                    print("  " + line[:400])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
