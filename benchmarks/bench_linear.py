"""Time per KB of the grounding extractors from 1 KB to 1 MB of answer: flat when linear.

For each input shape (a realistic support answer, and the degenerate repetitions issue 12
reported as quadratic), builds answers of 1 KB to 1 MB and times, on each, what scoring one
answer extracts: the references (``no_fabricated_refs``), the facts (``parametric_leakage``)
and the claims; and, for the Who&When shapes, the speaker-name parsing. Prints microseconds per
KB at each size, and the ratio of the 1 MB figure to the 1 KB one (1.0 = perfectly linear; a
quadratic extractor's ratio grows with the size: 1000 at 1 MB). Each figure is the best of
``--repeat`` runs, so that a loaded machine's pauses count less.

Usage::

    python benchmarks/bench_linear.py [--max-kb 1024] [--repeat 3] [--markdown]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable

from agentlens.eval._claims import extract_claims
from agentlens.eval._facts import extract_facts
from agentlens.eval._references import get_extractor
from agentlens.ingest import who_and_when

REALISTIC = (
    "Hi Jane, I checked your account CUST-48213. Invoice INV-7781 for $1,834.20 was paid on "
    "March 5, 2026 (10% discount applied); the refund of $152.00 for order ORD-2024-00123 goes "
    "to card ending 4421 within 5 business days. Booking ZK3P9Q: Austin to Denver at 7:30 PM. "
    "See https://support.example.com/refunds [2] or write to billing@example.com. Omar Davis "
    "from the Boston office approved it, and he will follow up.\n"
)

# name -> (prefix, repeated unit, suffix, what is timed)
SHAPES: dict[str, tuple[str, str, str, str]] = {
    "realistic answer": ("", REALISTIC, "", "grounding"),
    "id-like segments": ("", "a-b1c", "-_", "grounding"),
    '"5%" repeated': ("", "5%", "", "grounding"),
    '"a." repeated, then "@"': ("", "a.", "@", "grounding"),
    '"[" then "a1" repeated': ("[", "a1", "", "grounding"),
    'a URL then "]" repeated': ("http://example.com/", "]", "", "grounding"),
    'a URL then ".)" repeated': ("http://example.com/", ".)", "", "grounding"),
    '"." repeated': ("", ".", "", "grounding"),
    '"x and " repeated': ("", "x and ", "", "grounding"),
    '"Zed. " repeated': ("", "Zed. ", "", "grounding"),
    'Who&When speaker, " (" repeated': ("Orchestrator", " (", ")", "speaker"),
    'Who&When speaker, " (->" repeated': ("Orchestrator", " (->", " x)", "speaker"),
}

_EXTRACTOR = get_extractor()


def grounding(text: str) -> None:
    refs = _EXTRACTOR.extract(text)
    extract_facts(text, refs)
    extract_claims(text)


def speaker(text: str) -> None:
    who_and_when._to_whom(text)
    who_and_when._qualified(text, "thought", whole=True)
    who_and_when._qualified(text, "")


WORK: dict[str, Callable[[str], None]] = {"grounding": grounding, "speaker": speaker}


def build(prefix: str, unit: str, suffix: str, size: int) -> str:
    body = unit * max(1, (size - len(prefix) - len(suffix)) // len(unit))
    return prefix + body + suffix


def best_of(work: Callable[[str], None], text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        work(text)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-kb", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args()
    sizes = [kb for kb in (1, 4, 16, 64, 256, 1024) if kb <= args.max_kb]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {sys.version.split()[0]}, load average {load:.1f} at start"
    )
    header = ["input", *[f"{kb} KB" for kb in sizes], f"{sizes[-1]} KB / 1 KB"]
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
    else:
        print("  ".join(f"{h:>12}" for h in header))
    for name, (prefix, unit, suffix, what) in SHAPES.items():
        per_kb = []
        for kb in sizes:
            text = build(prefix, unit, suffix, kb * 1024)
            seconds = best_of(WORK[what], text, args.repeat if kb < 1024 else 1)
            per_kb.append(seconds * 1e6 / (len(text) / 1024))
        cells = [f"{v:,.0f}" if v >= 10 else f"{v:.2f}" for v in per_kb] + [
            f"{per_kb[-1] / per_kb[0]:.2f}"
        ]
        if args.markdown:
            print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
        else:
            print(f"{name:>34}  " + "  ".join(f"{c:>12}" for c in cells), flush=True)
    print("(microseconds per KB of answer; the last column is 1.0 when time is linear)")


if __name__ == "__main__":
    main()
