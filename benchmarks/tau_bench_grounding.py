"""Grounding checks on real runs: tau-bench airline conversations (GPT-4o).

Imports ``tau_bench/*.json`` with the ``openai`` importer, scores every run with
``no_fabricated_refs`` and ``parametric_leakage`` (each assistant turn against the evidence
before it: the system prompt, the user's messages and earlier tool results), and prints how
many turns and runs each scorer flags, broken down by reference/fact kind, then a sample of
flags with their context for reading by hand.

Usage::

    python benchmarks/tau_bench_grounding.py [DATA_DIR] [--sample 40] [--seed 0] [--no-config]

``DATA_DIR`` defaults to ``$AGENTLENS_DATA`` or ``../shared/data`` (relative to the repo).
``--no-config`` scores without the airline role's extra pattern (6-character reservation ids
made only of letters, which the built-in ``code`` shape cannot tell from a word).
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import sys
import time
from pathlib import Path

from agentlens.config import AgentSettings, Settings
from agentlens.eval import run_scorers
from agentlens.ingest import get_reader
from agentlens.model import Trace

SCORERS = ("no_fabricated_refs", "parametric_leakage")
AIRLINE = {
    # Reservation ids are 6 upper-case letters or digits; the built-in `code` kind only takes
    # shapes that mix letters and digits, so the all-letter ones (IFOYYZ) need the role's pattern.
    "no_fabricated_refs": {"patterns": {"reservation": r"(?<![\w-])[A-Z0-9]{6}(?![\w-])"}},
    "parametric_leakage": {"patterns": {"reservation": r"(?<![\w-])[A-Z0-9]{6}(?![\w-])"}},
}


def data_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    env = os.environ.get("AGENTLENS_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1] / ".." / "shared" / "data"


def load(folder: Path) -> list[Trace]:
    reader = get_reader("openai")
    runs: list[Trace] = []
    for path in sorted((folder / "tau_bench").glob("*.json")):
        for trace in reader(path):
            trace.agent = "airline"
            runs.append(trace)
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="?", help="the data folder (holds tau_bench/)")
    parser.add_argument("--sample", type=int, default=40, help="flags to print with context")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-config", action="store_true", help="no airline-role patterns")
    parser.add_argument("--scorer", choices=SCORERS, action="append", help="only these scorers")
    args = parser.parse_args(argv)
    folder = data_dir(args.data)
    if not (folder / "tau_bench").is_dir():
        print(f"no tau_bench folder in {folder}", file=sys.stderr)
        return 2
    runs = load(folder)
    role = AgentSettings() if args.no_config else AgentSettings(scorers=AIRLINE)
    settings = Settings(agents={"airline": role})
    scorers = tuple(args.scorer or SCORERS)

    started = time.perf_counter()
    turns_total = 0
    flagged_turns: dict[str, set[tuple[str, str]]] = collections.defaultdict(set)
    flagged_runs: dict[str, set[str]] = collections.defaultdict(set)
    unverifiable_runs: dict[str, set[str]] = collections.defaultdict(set)
    by_kind: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    checked_kind: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    flags: list[tuple[str, Trace, object]] = []
    for trace in runs:
        from agentlens.eval import Evidence

        evidence = Evidence(trace, settings.for_agent(trace.agent).evidence)
        turns_total += len(evidence.turns)
        report = run_scorers(scorers, trace=trace, settings=settings)
        for name, score in report.results.items():
            if score.error:
                print(f"{trace.id} {name}: error {score.error}", file=sys.stderr)
            for g in score.grounded:
                checked_kind[name][g.attributes.get("kind", "?")] += 1
            for f in score.findings:
                checked_kind[name][f.attributes.get("kind", "?")] += 1
                if f.unverifiable:
                    unverifiable_runs[name].add(trace.id)
                    continue
                by_kind[name][f.attributes.get("kind", "?")] += 1
                flagged_turns[name].add((trace.id, f.location))
                flagged_runs[name].add(trace.id)
                flags.append((name, trace, f))
    elapsed = time.perf_counter() - started

    print(f"tau-bench airline: {len(runs)} runs, {turns_total} assistant turns checked")
    print(f"config: {'none' if args.no_config else 'airline role patterns'}; {elapsed:.2f}s")
    for name in scorers:
        kinds = ", ".join(
            f"{k} {by_kind[name][k]}/{n}" for k, n in checked_kind[name].most_common()
        )
        print(
            f"{name}: {len(flagged_turns[name])} turns flagged, {len(flagged_runs[name])} runs "
            f"flagged, {len(unverifiable_runs[name])} unverifiable; "
            f"flags by kind (flagged/checked): {kinds or '-'}"
        )
    rng = random.Random(args.seed)
    sample = rng.sample(flags, min(args.sample, len(flags)))
    print(f"\nsample of {len(sample)} flags (seed {args.seed}):")
    for name, trace, f in sample:
        text = _turn_text(trace, f.location)  # type: ignore[attr-defined]
        start, end = f.start or 0, f.end or 0  # type: ignore[attr-defined]
        context = (
            text[max(0, start - 70) : start] + "«" + text[start:end] + "»" + text[end : end + 50]
        )
        context = context.replace("\n", " ⏎ ")
        print(f"- [{name} {f.attributes.get('kind')}] {trace.name} {f.location}: {context}")  # type: ignore[attr-defined]
    return 0


def _turn_text(trace: Trace, location: str) -> str:
    from agentlens.eval import text_of

    if location == "output":
        return text_of(trace.output)
    return text_of(trace.step(location).output)


if __name__ == "__main__":
    raise SystemExit(main())
