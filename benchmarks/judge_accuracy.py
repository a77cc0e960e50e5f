"""Judge accuracy on public data: HaluEval QA and WiCE dev, side by side with a coverage baseline.

Usage::

    python benchmarks/judge_accuracy.py [DATA_DIR] --judge offline|openai|anthropic
        [--model M] [--base-url URL] [--mode balanced|strict|lenient]
        [--min-coverage X] [--min-words N] [--limit N] [--json]

DATA_DIR defaults to ``$AGENTLENS_DATA`` or ``../shared/data`` (relative to the repository).

- HaluEval QA (``halueval/qa_one-turn_data.json`` and ``qa_multi-turn_data.json``): for each row,
  the right answer (label supported) and the hallucinated answer (label unsupported), each
  checked against the same evidence: the question (the run's input) and the knowledge (a
  retrieval). The answer is split into claims with ``extract_claims``; an answer is predicted
  unsupported when any claim is not ``supported``; an answer with no checkable claim (a bare
  "yes"/"no") is predicted supported, as the scorer would pass it.
- WiCE dev (``wice/dev.jsonl``): the claim as one claim, against its evidence sentences;
  ``partially_supported`` counts as unsupported (the LLM-AggreFact convention).

"Positive" is *unsupported*. Reported: balanced accuracy, precision and recall of unsupported,
unverifiable count, cost and latency. Rows are split in two halves by a hash of the row id:
``tune`` (the half the offline thresholds were calibrated on) and ``holdout``; figures are given
for both halves and overall. The baseline (share of the claim's content words found anywhere in
the evidence, >= a threshold) has its threshold chosen on the tune half of each data set, which
flatters it.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentlens.eval._claims import Claim, extract_claims
from agentlens.eval._evidence import EvidenceItem
from agentlens.eval.judges import Label, OfflineJudge, get_judge
from agentlens.eval.judges._offline import MODES, evidence_items
from agentlens.eval.judges._text import STOPWORDS, tokenize


@dataclass
class Case:
    dataset: str
    row_id: str
    claims: list[Claim]
    evidence: list[EvidenceItem]
    unsupported: bool
    claim_text: str


@dataclass
class Outcome:
    case: Case
    predicted_unsupported: bool
    unverifiable: int = 0
    seconds: float = 0.0


@dataclass
class Metrics:
    n: int = 0
    tp: int = 0
    fp: int = 0
    tn: int = 0
    fn: int = 0
    unverifiable: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def add(self, truth: bool, predicted: bool) -> None:
        self.n += 1
        if truth and predicted:
            self.tp += 1
        elif truth:
            self.fn += 1
        elif predicted:
            self.fp += 1
        else:
            self.tn += 1

    @property
    def balanced_accuracy(self) -> float:
        tpr = self.tp / max(1, self.tp + self.fn)
        tnr = self.tn / max(1, self.tn + self.fp)
        return 0.5 * (tpr + tnr)

    @property
    def precision(self) -> float:
        return self.tp / max(1, self.tp + self.fp)

    @property
    def recall(self) -> float:
        return self.tp / max(1, self.tp + self.fn)

    def as_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "balanced_accuracy": round(self.balanced_accuracy, 4),
            "precision_unsupported": round(self.precision, 4),
            "recall_unsupported": round(self.recall, 4),
            "unverifiable": self.unverifiable,
            **self.extra,
        }


def half(row_id: str) -> str:
    """``tune`` or ``holdout``: a fixed split by hash of the row id."""
    return "tune" if int(hashlib.md5(row_id.encode()).hexdigest(), 16) % 2 == 0 else "holdout"


def _item(source: str, kind: str, text: str, index: int) -> EvidenceItem:
    return EvidenceItem(source, kind, None, text, text, index)


def load_cases(data: Path, limit: int | None) -> list[Case]:
    cases: list[Case] = []
    for name in ("qa_one-turn_data.json", "qa_multi-turn_data.json"):
        path = data / "halueval" / name
        with path.open(encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                if limit is not None and i >= limit:
                    break
                row = json.loads(line)
                evidence = [
                    _item("input", "input", row["question"], -1),
                    _item("knowledge", "retrieval", row["knowledge"], 0),
                ]
                rid = f"{name}{i}"
                for answer, bad in (
                    (row["right_answer"], False),
                    (row["hallucinated_answer"], True),
                ):
                    cases.append(
                        Case("halueval", rid, extract_claims(answer), evidence, bad, answer)
                    )
    with (data / "wice" / "dev.jsonl").open(encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            if limit is not None and i >= limit:
                break
            row = json.loads(line)
            text = "\n".join(row["evidence"])
            claim = row["claim"]
            rid = row["meta"]["id"]
            cases.append(
                Case(
                    "wice",
                    rid,
                    [Claim(claim, 0, len(claim))],
                    [_item("evidence", "retrieval", text, 0)],
                    row["label"] != "supported",
                    claim,
                )
            )
    return cases


def baseline_coverage(case: Case) -> float:
    """The share of the answer's content words found anywhere in the evidence."""
    stems = {t.stem for _, text in evidence_items(case.evidence) for t in tokenize(text)}
    content = {t.stem for t in tokenize(case.claim_text) if t.stem not in STOPWORDS}
    if not content:
        return 1.0
    return len(content & stems) / len(content)


async def run_judge(judge: Any, cases: list[Case], concurrency: int) -> list[Outcome]:
    sem = asyncio.Semaphore(concurrency)

    async def one(case: Case) -> Outcome:
        if not case.claims:
            return Outcome(case, False)
        async with sem:
            started = time.perf_counter()
            verdicts = await judge.judge(claims=case.claims, evidence=case.evidence)
            seconds = time.perf_counter() - started
        unver = sum(1 for v in verdicts if v.label is Label.UNVERIFIABLE)
        bad = any(v.label is not Label.SUPPORTED for v in verdicts)
        return Outcome(case, bad, unver, seconds)

    return list(await asyncio.gather(*(one(c) for c in cases)))


def main(argv: list[str] | None = None) -> int:
    default_data = os.environ.get("AGENTLENS_DATA") or str(
        Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
    )
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "data", nargs="?", default=default_data, help="the data folder (default: %(default)s)"
    )
    p.add_argument("--judge", default="offline", choices=["offline", "openai", "anthropic"])
    p.add_argument("--model")
    p.add_argument("--base-url")
    p.add_argument("--mode", choices=list(MODES), help="offline judge mode (default: balanced)")
    p.add_argument("--min-coverage", type=float, help="offline judge: paraphrase coverage")
    p.add_argument("--min-words", type=int, help="offline judge (balanced): paraphrase words")
    p.add_argument("--limit", type=int, help="rows per data file")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--budget-usd", type=float)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    data = Path(args.data)
    if not (data / "wice" / "dev.jsonl").is_file():
        print(f"error: no data in {data} (expected halueval/ and wice/)", file=sys.stderr)
        return 2
    options: dict[str, Any] = {}
    if args.mode:
        options["mode"] = args.mode
    if args.min_coverage is not None:
        options["min_coverage"] = args.min_coverage
    if args.judge != "offline":
        options["max_concurrency"] = args.concurrency
        if args.budget_usd is not None:
            options["budget_usd"] = args.budget_usd
    judge = get_judge(args.judge, model=args.model, base_url=args.base_url, **options)
    if args.min_words is not None and isinstance(judge, OfflineJudge):
        judge = OfflineJudge(
            mode=judge.mode, min_coverage=judge.min_coverage, min_words=args.min_words
        )
    cases = load_cases(data, args.limit)
    started = time.perf_counter()
    outcomes = asyncio.run(run_judge(judge, cases, args.concurrency))
    wall = time.perf_counter() - started
    report: dict[str, Any] = {
        "judge": f"{judge.name}/{judge.model}",
        "data": str(data),
        "results": {},
    }
    n_claims = sum(len(c.claims) for c in cases)
    for dataset in ("halueval", "wice"):
        subset = [o for o in outcomes if o.case.dataset == dataset]
        # baseline threshold chosen on the tune half
        cov = {id(o.case): baseline_coverage(o.case) for o in subset}
        tune = [o for o in subset if half(o.case.row_id) == "tune"]
        best_t, best_b = 0.5, -1.0
        for t in sorted({round(v, 3) for v in cov.values()}):
            m = Metrics()
            for o in tune:
                m.add(o.case.unsupported, cov[id(o.case)] < t)
            if m.balanced_accuracy > best_b:
                best_b, best_t = m.balanced_accuracy, t
        block: dict[str, Any] = {}
        for split in ("tune", "holdout", "all"):
            rows = [o for o in subset if split == "all" or half(o.case.row_id) == split]
            jm, bm = Metrics(), Metrics()
            for o in rows:
                jm.add(o.case.unsupported, o.predicted_unsupported)
                jm.unverifiable += 1 if o.unverifiable else 0
                bm.add(o.case.unsupported, cov[id(o.case)] < best_t)
            bm.extra["threshold"] = best_t
            block[split] = {"judge": jm.as_dict(), "baseline": bm.as_dict()}
        report["results"][dataset] = block
    usage = judge.usage.as_dict()
    report["cost_usd"] = usage["cost_usd"]
    report["usage"] = usage
    report["cases"] = len(cases)
    report["claims"] = n_claims
    report["wall_s"] = round(wall, 2)
    report["latency_ms_per_case"] = round(
        1000 * sum(o.seconds for o in outcomes) / max(1, len(outcomes)), 3
    )
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"judge {report['judge']}  cases {len(cases)}  claims {n_claims}  wall {wall:.1f}s  "
        f"cost ${usage['cost_usd']:.4f}  latency {report['latency_ms_per_case']} ms/case"
    )
    print(
        f"{'data':9} {'split':8} {'who':9} {'n':>5} {'bal.acc':>8} {'P(uns)':>7} {'R(uns)':>7} {'unver':>6}"
    )
    for dataset, block in report["results"].items():
        for split, pair in block.items():
            for who in ("judge", "baseline"):
                m = pair[who]
                extra = f"  (threshold {m['threshold']})" if who == "baseline" else ""
                print(
                    f"{dataset:9} {split:8} {who:9} {m['n']:5d} {m['balanced_accuracy']:8.3f} "
                    f"{m['precision_unsupported']:7.3f} {m['recall_unsupported']:7.3f} "
                    f"{m['unverifiable']:6d}{extra}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
