"""Two versions of agentlens side by side on the grounding benchmark's passes.

Runs each pass of ``bench_grounding.py`` (``load``, ``naive``, ``naive_full``, ``naive_both``,
``refs``, ``grounding``) over the same stored runs, for two source trees in turn, for several
rounds, each pass in a fresh process, and prints the median runs/s of each and the ratios the
issue's target is stated in. Alternating the trees round by round spreads a shared machine's
noise over both.

The trees are folders holding ``src/agentlens``, for example a second checkout of an earlier
commit (``git worktree add /tmp/before <rev>``) and this one. The store comes from
``bench_grounding.py --keep --db PATH``.

Usage::

    python benchmarks/ab_grounding.py --db PATH [--runs 20000] [--rounds 3] TREE_A TREE_B
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from bench_grounding import PASSES, RATIOS

_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1] + "/src")
sys.path.insert(0, sys.argv[2])
import bench_grounding
print(json.dumps(bench_grounding.run_pass(sys.argv[3], sys.argv[4], int(sys.argv[5]), False)))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs=2, help="two folders holding src/agentlens")
    parser.add_argument("--db", required=True, help="a store made by bench_grounding.py --keep")
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    for tree in args.trees:
        if not (Path(tree) / "src" / "agentlens").is_dir():
            parser.error(f"{tree}: no src/agentlens in it")
    if not Path(args.db).is_file():
        parser.error(f"{args.db}: no such store")
    here = str(Path(__file__).resolve().parent)
    seconds: dict[tuple[str, str], list[float]] = {}
    for rnd in range(args.rounds):
        for tree in args.trees:
            for name in PASSES:
                out = subprocess.run(
                    [sys.executable, "-c", _CHILD, tree, here, args.db, name, str(args.runs)],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                result = json.loads(out.stdout)
                seconds.setdefault((tree, name), []).append(result["seconds"])
                print(
                    f"round {rnd + 1} {tree} {name}: {result['runs_per_s']:,.0f} runs/s, "
                    f"flagged {result['flagged'] or '-'}",
                    file=sys.stderr,
                )
    for tree in args.trees:
        median = {name: statistics.median(seconds[(tree, name)]) for name in PASSES}
        print(tree)
        for name in PASSES:
            each = ", ".join(f"{args.runs / s:,.0f}" for s in seconds[(tree, name)])
            print(f"  {name:>10}: {args.runs / median[name]:7,.0f} runs/s (rounds: {each})")
        for a, b in RATIOS:
            print(f"  {a} / {b} time: {median[a] / median[b]:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
