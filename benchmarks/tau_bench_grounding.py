"""Grounding checks on real runs: tau-bench airline conversations (GPT-4o), and other real logs.

Imports ``tau_bench/*.json`` with the ``openai`` importer (``--set`` names another data set:
``who-and-when``, ``claude-code``, ``swe-agent`` or ``openhands``, read with their importers),
scores every run with
``no_fabricated_refs`` and ``parametric_leakage`` (each assistant turn against the evidence
before it: the system prompt, the user's messages and earlier tool results), and prints how
many turns and runs each scorer flags, broken down by reference/fact kind, then a sample of
flags with their context for reading by hand.

Usage::

    python benchmarks/tau_bench_grounding.py [DATA_DIR] [--sample 40] [--seed 0] [--no-config]
        [--before TREE] [--set NAME]

``--before TREE`` also scores the same runs with another source tree (a folder holding
``src/agentlens``, e.g. ``git worktree add /tmp/before main``), in a child process, and lists
every flag that differs between the two, with its context, and every grounded computed amount
(a grounded claim with a ``derived`` arithmetic) whose derivation changed or that is no longer
grounded: the before/after the grounding rules are measured by.

``DATA_DIR`` defaults to ``$AGENTLENS_DATA`` or ``../shared/data`` (relative to the repo).
``--no-config`` scores without the airline role's extra pattern (6-character reservation ids
made only of letters, which the built-in ``code`` shape cannot tell from a word); the other
sets are scored with the default options.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from agentlens.config import AgentSettings, Settings
from agentlens.errors import FormatError
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


# Each data set: its folder, the importer that reads it, and the files it reads there.
SETS = {
    "tau-bench": ("tau_bench", "openai", ("*.json",)),
    "who-and-when": ("who_and_when", "who-and-when", ("*.json",)),
    "claude-code": ("claude_code", "claude-code", ("*.jsonl",)),
    "swe-agent": ("swe_agent", "swe-agent", ("*.traj",)),
    "openhands": ("openhands", "openhands", ("*.json", "*.jsonl")),
}


def load(folder: Path, name: str = "tau-bench") -> list[Trace]:
    """The runs of one data set (tau-bench's as the airline role); a file its importer refuses
    (a Claude Code JSON Schema, a deliberately broken log) is skipped, and said on stderr."""
    sub, fmt, globs = SETS[name]
    reader = get_reader(fmt)
    runs: list[Trace] = []
    for path in sorted(p for pattern in globs for p in (folder / sub).rglob(pattern)):
        try:
            traces = list(reader(path))
        except FormatError as exc:
            print(f"skipped: {exc}", file=sys.stderr)
            continue
        for trace in traces:
            if name == "tau-bench":
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
    parser.add_argument("--before", metavar="TREE", help="compare with this source tree")
    parser.add_argument("--set", choices=SETS, default="tau-bench", help="the data set")
    parser.add_argument("--dump", action="store_true", help=argparse.SUPPRESS)  # for --before
    args = parser.parse_args(argv)
    folder = data_dir(args.data)
    if not (folder / SETS[args.set][0]).is_dir():
        print(f"no {SETS[args.set][0]} folder in {folder}", file=sys.stderr)
        return 2
    if args.before and not (Path(args.before) / "src" / "agentlens").is_dir():
        print(f"{args.before}: no src/agentlens in it", file=sys.stderr)
        return 2
    runs = load(folder, args.set)
    role = AgentSettings() if args.no_config else AgentSettings(scorers=AIRLINE)
    settings = Settings(agents={"airline": role})
    scorers = tuple(args.scorer or SCORERS)
    if args.dump:
        json.dump(records(runs, settings, scorers), sys.stdout)
        return 0

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

    label = "tau-bench airline" if args.set == "tau-bench" else args.set
    print(f"{label}: {len(runs)} runs, {turns_total} assistant turns checked")
    configured = args.set == "tau-bench" and not args.no_config
    print(f"config: {'airline role patterns' if configured else 'none'}; {elapsed:.2f}s")
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
    if args.before:
        before = _records_of(args.before, folder, args.no_config, scorers, args.set)
        compare(before, records(runs, settings, scorers), {t.id: t for t in runs})
    return 0


def records(
    runs: list[Trace], settings: Settings, scorers: tuple[str, ...]
) -> list[dict[str, Any]]:
    """Every flag and every grounded computed claim of both scorers, as plain records."""
    out: list[dict[str, Any]] = []
    for trace in runs:
        report = run_scorers(scorers, trace=trace, settings=settings)
        for name, score in report.results.items():
            for what, found in (("flag", score.findings), ("grounded", score.grounded)):
                for f in found:
                    derived = f.attributes.get("derived")
                    if what == "grounded" and not derived:
                        continue
                    out.append(
                        {
                            "what": what,
                            "scorer": name,
                            "run": trace.id,
                            "location": f.location,
                            "start": f.start,
                            "end": f.end,
                            "text": f.text,
                            "kind": f.attributes.get("kind"),
                            "derived": derived,
                            "unverifiable": f.unverifiable,
                        }
                    )
    return out


def _records_of(
    tree: str, folder: Path, no_config: bool, scorers: tuple[str, ...], name: str
) -> list[dict[str, Any]]:
    """:func:`records` computed by the source tree ``tree``, in a child process."""
    argv = [sys.executable, __file__, str(folder), "--dump", "--set", name]
    argv += ["--no-config"] if no_config else []
    for name in scorers:
        argv += ["--scorer", name]
    env = {**os.environ, "PYTHONPATH": str(Path(tree) / "src")}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    loaded: list[dict[str, Any]] = json.loads(done.stdout)
    return loaded


_ARITHMETIC = ("+", " - ", "×", "/", "%")


def _computed(record: dict[str, Any]) -> bool:
    """A grounded claim whose value was computed from evidence numbers."""
    derived = record["derived"] or ""
    return record["what"] == "grounded" and any(op in derived for op in _ARITHMETIC)


def compare(
    before: list[dict[str, Any]], after: list[dict[str, Any]], traces: dict[str, Trace]
) -> None:
    """Print every flag that differs between ``before`` and ``after``, and what became of each
    grounded computed amount."""

    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return r["scorer"], r["run"], r["location"], r["start"], r["end"], r["text"]

    def line(r: dict[str, Any], note: str = "") -> str:
        trace = traces[r["run"]]
        text = _turn_text(trace, r["location"])
        start, end = r["start"] or 0, r["end"] or 0
        context = text[max(0, start - 70) : start] + "«" + text[start:end] + "»"
        context = (context + text[end : end + 50]).replace("\n", " ⏎ ")
        return f"- [{r['scorer']} {r['kind']}] {trace.name} {r['location']}{note}: {context}"

    flags_before = {key(r): r for r in before if r["what"] == "flag"}
    flags_after = {key(r): r for r in after if r["what"] == "flag"}
    grounded_after = {key(r): r for r in after if r["what"] == "grounded"}
    new = [r for k, r in flags_after.items() if k not in flags_before]
    gone = [r for k, r in flags_before.items() if k not in flags_after]
    print(f"\nbefore/after: {len(flags_before)} flags before, {len(flags_after)} after")
    print(f"newly flagged ({len(new)}):")
    for r in new:
        print(line(r))
    print(f"no longer flagged ({len(gone)}):")
    for r in gone:
        print(
            line(
                r,
                f" (now {'grounded: ' + grounded_after[key(r)]['derived'] if key(r) in grounded_after else 'not a claim'})",
            )
        )
    computed = [r for r in before if _computed(r)]
    kept = [r for r in computed if key(r) in grounded_after]
    changed = [r for r in kept if grounded_after[key(r)]["derived"] != r["derived"]]
    lost = [r for r in computed if key(r) not in grounded_after]
    print(
        f"grounded computed amounts before: {len(computed)}; still grounded after: {len(kept)} "
        f"(derivation shown changed for {len(changed)}); no longer grounded: {len(lost)}"
    )
    for r in changed:
        print(line(r, f" {r['derived']} -> {grounded_after[key(r)]['derived']}"))
    for r in lost:
        print(line(r, f" was {r['derived']}, now flagged"))


def _turn_text(trace: Trace, location: str) -> str:
    from agentlens.eval import text_of

    if location == "output":
        return text_of(trace.output)
    return text_of(trace.step(location).output)


if __name__ == "__main__":
    raise SystemExit(main())
