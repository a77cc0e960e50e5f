"""Judge accuracy on public data, by k-fold cross-validation: HaluEval QA and WiCE dev.

Usage::

    python benchmarks/judge_accuracy.py [DATA_DIR] --judge offline|openai|anthropic
        [--model M] [--base-url URL] [--mode balanced|strict|lenient]
        [--min-coverage X] [--min-words N] [--folds 5] [--seed 0]
        [--no-ablation] [--select] [--without RULES] [--errors DATASET] [--limit N] [--json]

DATA_DIR defaults to ``$AGENTLENS_DATA`` or ``../shared/data`` (relative to the repository).

- HaluEval QA (``halueval/qa_one-turn_data.json`` and ``qa_multi-turn_data.json``): for each row,
  the right answer (label supported) and the hallucinated answer (label unsupported), each
  checked against the same evidence: the question (the run's input) and the knowledge (a
  retrieval). The answer is split into claims with ``extract_claims``; an answer is predicted
  unsupported when any claim is not ``supported``; an answer with no checkable claim (a bare
  "yes"/"no") is predicted supported, as the scorer would pass it.
- WiCE dev (``wice/dev.jsonl``): the claim as one claim, against its evidence sentences;
  ``partially_supported`` counts as unsupported (the LLM-AggreFact convention).

"Positive" is *unsupported*; the figure is balanced accuracy. Each data set is cut into
``--folds`` folds (default 5), stratified by label, with a fixed ``--seed``. A group never
straddles two folds: a HaluEval row (its right and its hallucinated answer share the evidence)
and a WiCE claim (each appears about three times, with different evidence). Reported, per data
set and per mode (the offline judge: every mode unless ``--mode``):

- the figure on all rows with precision and recall of unsupported, and the figure on each fold
  with their mean, standard deviation, minimum and maximum;
- the coverage baseline (the share of the claim's content words found anywhere in the evidence,
  >= a threshold), its threshold chosen on the other folds for each fold;
- (offline, default mode, unless ``--no-ablation``) one ablation line per optional rule of the
  judge: the judge without that rule, the change the rule makes on each fold, and whether it is
  kept. A heuristic rule is kept only if it lowers no fold of either set and raises every fold
  whose verdicts it changes. A reading fix (``READING_FIXES``: how a form is read, such as
  ``died`` = ``dies``) is kept for its unit tests; its line shows what it costs or gains;
- (``--select``, offline ``balanced``) ``min_words`` and ``min_coverage`` chosen on the other
  folds for each fold (the best WiCE figure among settings with HaluEval >= 0.95 there) and
  scored on the fold itself: the honest estimate of choosing the thresholds on this data.

``--without dates,initialisms`` also runs each mode without those rules (labelled ``MODE*``),
to compare two rule sets on the same folds in one run.

``--errors wice`` (or ``halueval``) prints the cases the judge gets wrong in the first mode,
to read them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentlens.eval._claims import Claim, extract_claims
from agentlens.eval._evidence import EvidenceItem
from agentlens.eval.judges import Label, OfflineJudge, get_judge
from agentlens.eval.judges._offline import MODES, READING_FIXES, RULES, evidence_items
from agentlens.eval.judges._text import STOPWORDS, tokenize

DATASETS = ("halueval", "wice")
HALUEVAL_TARGET = 0.95
MIN_WORDS_GRID = (4, 5, 6, 7, 8)
MIN_COVERAGE_GRID = (0.4, 0.5, 0.6)


@dataclass
class Case:
    dataset: str
    group: str
    """Cases of one group (a HaluEval row, a WiCE claim) always fall in the same fold."""
    claims: list[Claim]
    evidence: list[EvidenceItem]
    unsupported: bool
    claim_text: str


@dataclass
class Outcome:
    predicted_unsupported: bool
    unverifiable: int = 0
    seconds: float = 0.0
    reason: str = ""


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
                for answer, bad in (
                    (row["right_answer"], False),
                    (row["hallucinated_answer"], True),
                ):
                    cases.append(
                        Case(
                            "halueval", f"{name}{i}", extract_claims(answer), evidence, bad, answer
                        )
                    )
    with (data / "wice" / "dev.jsonl").open(encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            if limit is not None and i >= limit:
                break
            row = json.loads(line)
            claim = row["claim"]
            evidence = [_item("evidence", "retrieval", "\n".join(row["evidence"]), 0)]
            bad = row["label"] != "supported"
            cases.append(Case("wice", claim, [Claim(claim, 0, len(claim))], evidence, bad, claim))
    return cases


def assign_folds(cases: Sequence[Case], k: int, seed: int) -> list[int]:
    """The fold of each case: groups dealt round-robin, in a seeded shuffle, within each
    (data set, labels of the group) stratum, so every fold has about the same mix."""
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, case in enumerate(cases):
        groups[(case.dataset, case.group)].append(i)
    strata: dict[tuple[str, tuple[bool, ...]], list[tuple[str, str]]] = defaultdict(list)
    for key, members in groups.items():
        labels = tuple(sorted({cases[i].unsupported for i in members}))
        strata[(key[0], labels)].append(key)
    rng = random.Random(seed)
    fold = [0] * len(cases)
    for stratum in sorted(strata):
        keys = sorted(strata[stratum])
        rng.shuffle(keys)
        for n, key in enumerate(keys):
            for i in groups[key]:
                fold[i] = n % k
    return fold


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
            return Outcome(False, reason="no checkable claim")
        async with sem:
            started = time.perf_counter()
            verdicts = await judge.judge(claims=case.claims, evidence=case.evidence)
            seconds = time.perf_counter() - started
        unver = sum(1 for v in verdicts if v.label is Label.UNVERIFIABLE)
        failed = [v for v in verdicts if v.label is not Label.SUPPORTED]
        reason = failed[0].reason if failed else verdicts[0].reason
        return Outcome(bool(failed), unver, seconds, reason)

    return list(await asyncio.gather(*(one(c) for c in cases)))


def metrics(cases: Sequence[Case], predicted: Sequence[bool], rows: Sequence[int]) -> Metrics:
    m = Metrics()
    for i in rows:
        m.add(cases[i].unsupported, predicted[i])
    return m


def fold_scores(
    cases: Sequence[Case], predicted: Sequence[bool], folds: Sequence[int], dataset: str, k: int
) -> list[float]:
    """Balanced accuracy of ``predicted`` on each fold of ``dataset``."""
    rows: list[list[int]] = [[] for _ in range(k)]
    for i, case in enumerate(cases):
        if case.dataset == dataset:
            rows[folds[i]].append(i)
    return [metrics(cases, predicted, r).balanced_accuracy for r in rows]


def spread(scores: Sequence[float]) -> dict[str, Any]:
    return {
        "folds": [round(s, 4) for s in scores],
        "mean": round(statistics.fmean(scores), 4),
        "std": round(statistics.pstdev(scores), 4),
        "min": round(min(scores), 4),
        "max": round(max(scores), 4),
    }


def baseline_by_fold(
    cases: Sequence[Case], folds: Sequence[int], dataset: str, k: int
) -> dict[str, Any]:
    """The coverage baseline, its threshold chosen on the other folds for each fold."""
    cov = [baseline_coverage(c) if c.dataset == dataset else 1.0 for c in cases]
    thresholds = sorted({round(v, 3) for i, v in enumerate(cov) if cases[i].dataset == dataset})
    scores, chosen = [], []
    for f in range(k):
        train = [i for i, c in enumerate(cases) if c.dataset == dataset and folds[i] != f]
        test = [i for i, c in enumerate(cases) if c.dataset == dataset and folds[i] == f]
        best_t = max(
            thresholds,
            key=lambda t: metrics(cases, [v < t for v in cov], train).balanced_accuracy,
        )
        chosen.append(best_t)
        scores.append(metrics(cases, [v < best_t for v in cov], test).balanced_accuracy)
    return {**spread(scores), "thresholds": chosen}


Predict = Callable[[Any], list[bool]]


def ablation(
    cases: Sequence[Case], folds: Sequence[int], k: int, predict: Predict, base: OfflineJudge
) -> dict[str, Any]:
    """For each optional rule: the change it makes on each fold (with it minus without it)."""
    with_all = predict(base)
    out: dict[str, Any] = {}
    for rule in RULES:
        judge = OfflineJudge(
            mode=base.mode,
            min_coverage=base.min_coverage,
            min_words=base.min_words,
            rules=base.rules - {rule},
        )
        without = predict(judge)
        line: dict[str, Any] = {}
        hurts, idle_or_gains, changed_folds = False, True, set()
        for dataset in DATASETS:
            a = fold_scores(cases, with_all, folds, dataset, k)
            b = fold_scores(cases, without, folds, dataset, k)
            delta = [round(x - y, 4) for x, y in zip(a, b, strict=True)]
            changed = [
                sum(
                    1
                    for i, c in enumerate(cases)
                    if c.dataset == dataset and folds[i] == f and with_all[i] != without[i]
                )
                for f in range(k)
            ]
            changed_folds |= {f for f in range(k) if changed[f]}
            hurts = hurts or any(d < 0 for d in delta)
            line[dataset] = {
                "delta": delta,
                "mean": round(statistics.fmean(delta), 4),
                "changed": changed,
            }
        for f in changed_folds:
            if not any(line[d]["delta"][f] > 0 for d in DATASETS):
                idle_or_gains = False
        if not changed_folds:
            verdict = "drop: changes no verdict"
        elif hurts:
            verdict = "drop: lowers a fold"
        elif not idle_or_gains:
            verdict = "drop: a fold it changes does not gain"
        else:
            verdict = f"keep: raises every fold it changes ({len(changed_folds)} of {k})"
        if rule in READING_FIXES and verdict.startswith("drop"):
            verdict = f"keep as a reading fix (unit tests); by the folds alone: {verdict}"
        out[rule] = {**line, "verdict": verdict}
    return out


def select_thresholds(
    cases: Sequence[Case], folds: Sequence[int], k: int, predict: Predict
) -> dict[str, Any]:
    """``min_words`` and ``min_coverage`` chosen on the other folds, scored on each fold."""
    grid = [(w, c) for w in MIN_WORDS_GRID for c in MIN_COVERAGE_GRID]
    preds = {
        (w, c): predict(OfflineJudge(mode="balanced", min_words=w, min_coverage=c)) for w, c in grid
    }
    chosen: list[tuple[int, float]] = []
    held: dict[str, list[float]] = {d: [] for d in DATASETS}
    for f in range(k):

        def train_score(setting: tuple[int, float], dataset: str, fold: int = f) -> float:
            rows = [i for i, c in enumerate(cases) if c.dataset == dataset and folds[i] != fold]
            return metrics(cases, preds[setting], rows).balanced_accuracy

        ok = [s for s in grid if train_score(s, "halueval") >= HALUEVAL_TARGET] or grid
        best = max(ok, key=lambda s: (train_score(s, "wice"), s == (6, 0.5)))
        chosen.append(best)
        for dataset in DATASETS:
            rows = [i for i, c in enumerate(cases) if c.dataset == dataset and folds[i] == f]
            held[dataset].append(metrics(cases, preds[best], rows).balanced_accuracy)
    return {
        "chosen": [{"min_words": w, "min_coverage": c} for w, c in chosen],
        **{d: spread(held[d]) for d in DATASETS},
    }


def _judges(args: argparse.Namespace) -> list[tuple[str, Any]]:
    if args.judge != "offline":
        options: dict[str, Any] = {"max_concurrency": args.concurrency}
        if args.budget_usd is not None:
            options["budget_usd"] = args.budget_usd
        return [
            ("judge", get_judge(args.judge, model=args.model, base_url=args.base_url, **options))
        ]
    out: list[tuple[str, Any]] = []
    for mode in [args.mode] if args.mode else MODES:
        kwargs: dict[str, Any] = {"mode": mode}
        if args.min_coverage is not None:
            kwargs["min_coverage"] = args.min_coverage
        if args.min_words is not None:
            kwargs["min_words"] = args.min_words
        out.append((mode, OfflineJudge(**kwargs)))
    if args.without:
        left_out = {name.strip() for name in args.without.split(",") if name.strip()}
        unknown = sorted(left_out - set(RULES))
        if unknown:
            raise SystemExit(f"error: --without: unknown rule {unknown[0]!r}")
        for label, judge in list(out):
            out.append(
                (
                    f"{label}*",
                    OfflineJudge(
                        mode=judge.mode,
                        min_coverage=judge.min_coverage,
                        min_words=judge.min_words,
                        rules=judge.rules - left_out,
                    ),
                )
            )
    return out


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
    p.add_argument("--mode", choices=list(MODES), help="offline judge: one mode (default: all)")
    p.add_argument("--min-coverage", type=float, help="offline judge: paraphrase coverage")
    p.add_argument("--min-words", type=int, help="offline judge (balanced): paraphrase words")
    p.add_argument("--folds", type=int, default=5, help="cross-validation folds (default: 5)")
    p.add_argument("--seed", type=int, default=0, help="the fold shuffle's seed (default: 0)")
    p.add_argument("--no-ablation", action="store_true", help="skip the per-rule ablation")
    p.add_argument("--select", action="store_true", help="choose thresholds by nested CV")
    p.add_argument(
        "--without",
        metavar="RULES",
        help="offline judge: also run each mode without these rules (comma-separated), "
        "labelled MODE* (such as the previous version's rules, to compare in one run)",
    )
    p.add_argument("--errors", choices=DATASETS, help="print the cases judged wrong")
    p.add_argument("--limit", type=int, help="rows per data file")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--budget-usd", type=float)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    data = Path(args.data)
    if not (data / "wice" / "dev.jsonl").is_file():
        print(f"error: no data in {data} (expected halueval/ and wice/)", file=sys.stderr)
        return 2
    if args.folds < 2:
        print(f"error: --folds must be 2 or more, not {args.folds}", file=sys.stderr)
        return 2
    cases = load_cases(data, args.limit)
    k = args.folds
    folds = assign_folds(cases, k, args.seed)

    def predict(judge: Any) -> list[bool]:
        return [o.predicted_unsupported for o in asyncio.run(run_judge(judge, cases, 8))]

    judges = _judges(args)
    report: dict[str, Any] = {
        "judges": {label: f"{j.name}/{j.model}" for label, j in judges},
        "data": str(data),
        "folds": k,
        "seed": args.seed,
        "cases": len(cases),
        "claims": sum(len(c.claims) for c in cases),
        "results": {d: {} for d in DATASETS},
    }
    for n, (label, judge) in enumerate(judges):
        started = time.perf_counter()
        outcomes = asyncio.run(run_judge(judge, cases, args.concurrency))
        wall = time.perf_counter() - started
        predicted = [o.predicted_unsupported for o in outcomes]
        for dataset in DATASETS:
            rows = [i for i, c in enumerate(cases) if c.dataset == dataset]
            m = metrics(cases, predicted, rows)
            m.unverifiable = sum(1 for i in rows if outcomes[i].unverifiable)
            report["results"][dataset][label] = {
                "all": m.as_dict(),
                **spread(fold_scores(cases, predicted, folds, dataset, k)),
            }
        report.setdefault("wall_s", {})[label] = round(wall, 2)
        usage = judge.usage.as_dict()
        report.setdefault("cost_usd", {})[label] = usage["cost_usd"]
        if n == 0 and args.errors:
            _print_errors(cases, outcomes, folds, args.errors)
    for dataset in DATASETS:
        report["results"][dataset]["baseline"] = baseline_by_fold(cases, folds, dataset, k)
    first = judges[0][1]
    if isinstance(first, OfflineJudge) and first.mode == MODES[0] and not args.no_ablation:
        report["ablation"] = ablation(cases, folds, k, predict, first)
    if args.select and args.judge == "offline":
        report["selection"] = select_thresholds(cases, folds, k, predict)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_report(report)
    return 0


def _print_errors(
    cases: Sequence[Case], outcomes: Sequence[Outcome], folds: Sequence[int], dataset: str
) -> None:
    """The cases judged wrong, with their fold, the truth and the judge's reason (to stderr)."""
    wrong = 0
    for case, o, fold in zip(cases, outcomes, folds, strict=True):
        if case.dataset == dataset and case.unsupported != o.predicted_unsupported:
            wrong += 1
            kind = "missed" if case.unsupported else "false alarm"
            print(f"[{kind}, fold {fold}] {case.claim_text}\n    -> {o.reason}", file=sys.stderr)
    print(f"{wrong} {dataset} cases judged wrong", file=sys.stderr)


def _fmt_spread(s: dict[str, Any]) -> str:
    folds = " ".join(f"{x:.3f}" for x in s["folds"])
    return f"{s['mean']:6.3f} {s['std']:6.3f} {s['min']:6.3f} {s['max']:6.3f}   {folds}"


def _print_report(report: dict[str, Any]) -> None:
    judges = "  ".join(f"{k}={v}" for k, v in report["judges"].items())
    print(
        f"{judges}\ncases {report['cases']}  claims {report['claims']}  "
        f"{report['folds']} folds (seed {report['seed']}, stratified by label; a HaluEval row "
        f"or a WiCE claim stays in one fold)  wall {report['wall_s']}"
    )
    print("balanced accuracy; 'all' = every row (P/R of unsupported); mean/std/min/max over folds")
    print(
        f"{'data':9} {'who':9} {'n':>5} {'all':>6} {'P':>6} {'R':>6}  "
        f"{'mean':>6} {'std':>6} {'min':>6} {'max':>6}   folds"
    )
    for dataset, block in report["results"].items():
        for who, r in block.items():
            if who == "baseline":
                print(
                    f"{dataset:9} {who:9} {'':5} {'':6} {'':6} {'':6}  {_fmt_spread(r)}"
                    f"   (threshold from the other folds: {r['thresholds']})"
                )
                continue
            a = r["all"]
            print(
                f"{dataset:9} {who:9} {a['n']:5d} {a['balanced_accuracy']:6.3f} "
                f"{a['precision_unsupported']:6.3f} {a['recall_unsupported']:6.3f}  {_fmt_spread(r)}"
            )
    if "ablation" in report:
        print("\nablation (default mode): change each rule makes, with it minus without it")
        print(f"{'rule':16} {'data':9} {'mean':>7}   per fold (verdicts changed)")
        for rule, line in report["ablation"].items():
            for dataset in DATASETS:
                d = line[dataset]
                per = " ".join(
                    f"{x:+.3f}({c})" for x, c in zip(d["delta"], d["changed"], strict=True)
                )
                print(f"{rule:16} {dataset:9} {d['mean']:+7.3f}   {per}")
            print(f"{'':16} -> {line['verdict']}")
    if "selection" in report:
        sel = report["selection"]
        print("\nthresholds chosen on the other folds (balanced), scored on the fold itself")
        print(
            "  chosen: " + ", ".join(f"{c['min_words']}/{c['min_coverage']}" for c in sel["chosen"])
        )
        for dataset in DATASETS:
            print(f"  {dataset:9} {_fmt_spread(sel[dataset])}")


if __name__ == "__main__":
    raise SystemExit(main())
