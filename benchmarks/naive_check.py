"""The naive three-pattern check of the design essay, as a whole process: the baseline of
``bench_score_e2e.py``.

For every stored run: dump the tool and retrieval outputs as JSON, take every match of
``CUST-\\d{5}``, ``DOC-[a-f0-9]{8}`` and ``\\$[\\d,]+\\.\\d{2}`` in each assistant message and in
the final answer, and flag the run when a match is not a substring of the dump. Runs are read
through the store (``query_traces``), as ``agentlens score`` reads them. Prints one JSON line:
runs checked and runs flagged.

Usage::

    python benchmarks/naive_check.py --db PATH
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from agentlens.store import open_store

PATTERNS = (
    re.compile(r"CUST-\d{5}"),
    re.compile(r"DOC-[a-f0-9]{8}"),
    re.compile(r"\$[\d,]+\.\d{2}"),
)


def naive_flagged(trace: Any) -> bool:
    """True when an answer of ``trace`` holds a match of a pattern that is not in the dumped
    tool outputs."""
    evidence = "\n".join(
        json.dumps(s.output) for s in trace.steps if s.kind in ("tool", "retrieval")
    )
    answers = [str(s.output) for s in trace.steps if s.kind == "text"] + [str(trace.output)]
    return any(
        m.group(0) not in evidence for text in answers for p in PATTERNS for m in p.finditer(text)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="the SQLite store file")
    args = parser.parse_args(argv)
    store = open_store(f"sqlite:///{args.db}")
    runs = flagged = 0
    try:
        for trace in store.query_traces(newest_first=False):
            runs += 1
            flagged += naive_flagged(trace)
    finally:
        store.close()
    print(json.dumps({"runs": runs, "flagged": flagged}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
