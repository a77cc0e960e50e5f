"""The offline judge: deterministic claim-to-evidence alignment, no network, no download.

For each claim it

1. aligns the claim to the evidence: the evidence is cut into segments (sentences of prose, the
   innermost objects of JSON), and segments are ranked by BM25 over the claim's content words;
2. measures coverage: which of the claim's content words (lightly stemmed, diacritics folded, no
   synonyms; words of one family match: ``singer`` = ``singing``, ``Norway`` = ``Norwegian``)
   the best aligned segment contains, and which the evidence contains anywhere; numbers match by
   value across formats (``1,000`` = ``1000``, ``5.2 million`` = ``5200000``, ``twelve`` =
   ``12``);
3. checks agreement: a number or name of the claim that is absent from the evidence, or a
   negation on one side only, makes the claim unsupported.

Three modes:

``balanced`` (the default)
    A claim is supported when one aligned segment holds all its content words (a restatement),
    or, for a paraphrase, when every name and number is in the evidence, at least
    ``min_words`` of its content words are found (words it repeats from the user's request do
    not count), and their weighted share reaches ``min_coverage``. A short claim therefore has
    to be restated; a long one may paraphrase its common words but not its names or numbers; a
    claim that echoes the question is as long as what it adds; and each clause of a paraphrase
    (three or more content words) needs more than a quarter of its words in the evidence. A
    negation on one side only fails either way.
``strict``
    Every content word of the claim must be found in one aligned evidence segment (a sentence,
    or one JSON record). Paraphrase counts against a claim.
``lenient``
    Names and numbers must all occur in the evidence, and the weighted share of the claim found
    anywhere must reach ``min_coverage``, whatever the claim's length; no negation check.

The thresholds were calibrated on the ``tune`` half of WiCE dev and HaluEval QA (see
``docs/judges.md``).
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from agentlens.eval._claims import Claim, split_sentences
from agentlens.eval._evidence import EvidenceItem
from agentlens.eval.judges._protocol import (
    ClaimVerdict,
    EvidenceSpan,
    JudgeUsage,
    Label,
    as_claims,
)
from agentlens.eval.judges._text import (
    NEGATIONS,
    STOPWORDS,
    Token,
    claim_number,
    number_values,
    root,
    tokenize,
)

__all__ = ["MODES", "OfflineJudge", "coverage_baseline", "evidence_items"]

Mode = Literal["balanced", "strict", "lenient"]
MODES: tuple[str, ...] = ("balanced", "strict", "lenient")
"""The offline judge's modes; the first is the default."""

_BREAK = re.compile(r"\n+|(?<=[a-z0-9)\"])\.(?=[A-Z][a-z])")
_TOP_K = 5
_K1, _B = 1.2, 0.75


def evidence_items(evidence: Sequence[EvidenceItem] | str) -> list[tuple[str, str]]:
    """Evidence as ``(source, text)`` pairs; a plain string is one item named ``evidence``."""
    if isinstance(evidence, str):
        return [("evidence", evidence)]
    return [(item.source, item.text) for item in evidence]


@dataclass(slots=True)
class _Segment:
    source: str
    start: int
    end: int
    text: str
    stems: frozenset[str]
    numbers: frozenset[str]
    negations: tuple[tuple[str, ...], ...]
    """For each negation word in the segment, the stems of the (up to 4) words after it."""
    length: int


def _negation_scopes(toks: list[Token], text: str) -> tuple[tuple[str, ...], ...]:
    scopes = []
    for i, tok in enumerate(toks):
        if tok.stem not in NEGATIONS:
            continue
        scope: list[str] = []
        prev_end = tok.end
        for nxt in toks[i + 1 : i + 5]:
            if any(ch in ";,:.!?" for ch in text[prev_end : nxt.start]):
                break  # a negation does not reach past the end of its clause
            scope.append(nxt.stem)
            prev_end = nxt.end
        scopes.append(tuple(scope))
    return tuple(scopes)


@functools.lru_cache(maxsize=4096)
def _prefixes(stems: frozenset[str]) -> frozenset[str]:
    """The word-family keys of ``stems``: the first four letters of a word of six or more, and
    (marked ``~``) its :func:`root`. A claim word with the same key is the same word."""
    out = {w[:4] for w in stems if len(w) >= 6 and not w[0].isdigit()}
    out.update("~" + root(w) for w in stems if len(w) >= 4 and not w[0].isdigit())
    return frozenset(out)


def _json_objects(text: str) -> list[tuple[int, int]]:
    """Spans of the innermost JSON objects of ``text`` (records), by bracket matching."""
    spans: list[tuple[int, int]] = []
    stack: list[list[int]] = []  # [start, has_child]
    in_str = False
    esc = False
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch == "{":
            if stack:
                stack[-1][1] = 1
            stack.append([i, 0])
        elif ch == "}" and stack:
            start, has_child = stack.pop()
            if not has_child:
                spans.append((start, i + 1))
    return spans


def _segment_spans(text: str) -> list[tuple[int, int]]:
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        objects = _json_objects(text)
        if objects:
            return objects
    spans: list[tuple[int, int]] = []
    for s, e in split_sentences(text):
        pos = s
        for m in _BREAK.finditer(text, s, e):
            if m.start() > pos:
                spans.append((pos, m.start()))
            pos = m.end()
        if e > pos:
            spans.append((pos, e))
    return spans


@dataclass
class _Index:
    segments: list[_Segment]
    asked: frozenset[str] = frozenset()
    """The content stems of the user's request (the run's input and user messages)."""
    df: Counter[str] = field(default_factory=Counter)
    all_stems: set[str] = field(default_factory=set)
    all_prefixes: frozenset[str] = frozenset()
    all_numbers: set[str] = field(default_factory=set)
    avg_len: float = 1.0


@functools.lru_cache(maxsize=512)
def _item_segments(source: str, text: str) -> tuple[_Segment, ...]:
    """The segments of one evidence item (memoised: turns of a run share their evidence)."""
    segments: list[_Segment] = []
    if text:
        for s, e in _segment_spans(text):
            seg_text = text[s:e]
            if seg_text.rstrip().endswith("?"):
                continue  # a question asserts nothing
            toks = tokenize(seg_text)
            if not toks:
                continue
            stems = frozenset(t.stem for t in toks)
            content = [t for t in stems if t not in STOPWORDS]
            segments.append(
                _Segment(
                    source,
                    s,
                    e,
                    seg_text,
                    stems,
                    frozenset(number_values(toks)),
                    _negation_scopes(toks, seg_text),
                    max(1, len(content)),
                )
            )
    return tuple(segments)


_REQUEST_KINDS = frozenset(["input", "user"])
"""Evidence kinds that carry what the user asked."""


def _index_items(evidence: Sequence[EvidenceItem] | str) -> tuple[tuple[str, str, bool], ...]:
    """``(source, text, is_request)`` for each evidence item (the key of the index cache)."""
    if isinstance(evidence, str):
        return (("evidence", evidence, False),)
    return tuple((item.source, item.text, item.kind in _REQUEST_KINDS) for item in evidence)


@functools.lru_cache(maxsize=512)
def _request_stems(text: str) -> frozenset[str]:
    return frozenset(t.stem for t in tokenize(text) if t.stem not in STOPWORDS)


@functools.lru_cache(maxsize=64)
def _build_index(items: tuple[tuple[str, str, bool], ...]) -> _Index:
    segments = [seg for source, text, _ in items for seg in _item_segments(source, text)]
    asked = frozenset().union(*(_request_stems(text) for _, text, request in items if request))
    index = _Index(segments, asked)
    for seg in segments:
        index.df.update(t for t in seg.stems if t not in STOPWORDS)
        index.all_stems |= seg.stems
        index.all_numbers |= seg.numbers
    index.all_prefixes = _prefixes(frozenset(index.all_stems))
    index.avg_len = sum(s.length for s in segments) / max(1, len(segments))
    return index


def _covered(
    tok: Token,
    values: set[str],
    stems: frozenset[str] | set[str],
    prefixes: frozenset[str],
    numbers: frozenset[str] | set[str],
) -> bool:
    if tok.number:
        return bool(values & numbers)  # by value: "2 million" is not found in "km2"
    if tok.stem in stems:
        return True
    stem_ = tok.stem
    if len(stem_) >= 6 and stem_[:4] in prefixes:
        return True
    return len(stem_) >= 4 and "~" + root(stem_) in prefixes


@dataclass(frozen=True, slots=True)
class _Claim:
    tokens: list[Token]
    content: list[Token]
    values: list[set[str]]
    weights: list[float]
    negations: tuple[tuple[str, ...], ...]
    clauses: tuple[tuple[str, tuple[int, ...]], ...]
    """The claim's clauses of three or more content words: (text, indices into ``content``)."""


_CLAUSE_BREAK = re.compile(r"[,;:()\u2013\u2014]|\s(?:and|but|which|while|who)\s")
_CLAUSE_WORDS = 3


def _clauses(
    text: str, tokens: list[Token], index_of: dict[str, int]
) -> list[tuple[str, tuple[int, ...]]]:
    """Pieces of the claim between commas, semicolons, dashes, brackets and ``and``/``but``/
    ``which``/``while``/``who``, with three or more distinct content words."""
    out: list[tuple[str, tuple[int, ...]]] = []
    bounds = [
        0,
        *(p for m in _CLAUSE_BREAK.finditer(text) for p in (m.start(), m.end())),
        len(text),
    ]
    k = 0
    for start, end in zip(bounds[::2], bounds[1::2], strict=True):
        words: dict[int, None] = {}
        while k < len(tokens) and tokens[k].start < end:
            if tokens[k].start >= start and tokens[k].stem in index_of:
                words[index_of[tokens[k].stem]] = None
            k += 1
        if len(words) >= _CLAUSE_WORDS:
            out.append((text[start:end].strip(), tuple(words)))
    return out


def _prepare(text: str) -> _Claim:
    tokens = tokenize(text)
    content: list[Token] = []
    values: list[set[str]] = []
    seen: set[str] = set()
    for i, t in enumerate(tokens):
        if t.stem in STOPWORDS or t.stem in seen:
            continue
        seen.add(t.stem)
        content.append(t)
        values.append(claim_number(tokens, i) if t.number else set())
    weights = [2.0 if _specific(t) else (1.0 if len(t.stem) > 4 else 0.6) for t in content]
    index_of = {t.stem: i for i, t in enumerate(content)}
    return _Claim(
        tokens,
        content,
        values,
        weights,
        _negation_scopes(tokens, text),
        tuple(_clauses(text, tokens, index_of)),
    )


def _specific(tok: Token) -> bool:
    """A number, or a capitalised word that does not start the text (a name)."""
    return tok.number or (tok.capital and tok.start > 0)


def _cov_best(prepared: _Claim, missing: list[int]) -> float:
    """The weighted share of the claim found in its best aligned segment."""
    return 1.0 - sum(prepared.weights[i] for i in missing) / sum(prepared.weights)


def _negated_about(scopes: tuple[tuple[str, ...], ...], stems: set[str]) -> bool:
    """True when a negation bears on one of ``stems`` (appears within the 4 words after it)."""
    return any(stems.intersection(scope) for scope in scopes)


class OfflineJudge:
    """A deterministic, lexical judge: no network, no model, no download.

    Args:
        mode: ``"balanced"`` (the default: a short claim restated in one segment, a long one
            may paraphrase), ``"strict"`` (every content word in one aligned evidence segment)
            or ``"lenient"`` (names and numbers present, weighted coverage >= ``min_coverage``).
        min_coverage: the weighted share of a paraphrased claim that must be in the evidence
            (``balanced`` and ``lenient``).
        min_words: how many content words of a paraphrased claim must be in the evidence
            (``balanced`` only).
    """

    name = "offline"
    prompt_version = "offline-4"

    def __init__(
        self,
        *,
        mode: Mode = "balanced",
        min_coverage: float = 0.5,
        min_words: int = 6,
    ) -> None:
        if mode not in MODES:
            from agentlens.errors import ConfigError

            raise ConfigError(
                f"offline judge: mode must be one of {', '.join(MODES)}, not {mode!r}"
            )
        self.mode = mode
        self.min_coverage = float(min_coverage)
        self.min_words = int(min_words)
        if mode == "strict":
            self.model = "lexical-strict"
        elif mode == "lenient":
            self.model = f"lexical-lenient-{self.min_coverage:g}"
        else:
            self.model = f"lexical-balanced-{self.min_coverage:g}-{self.min_words}"
        self.usage = JudgeUsage()

    async def judge(
        self, *, claims: Sequence[Claim | str], evidence: Sequence[EvidenceItem] | str
    ) -> list[ClaimVerdict]:
        """One verdict per claim (see :meth:`judge_sync`)."""
        return self.judge_sync(claims=claims, evidence=evidence)

    def judge_sync(
        self, *, claims: Sequence[Claim | str], evidence: Sequence[EvidenceItem] | str
    ) -> list[ClaimVerdict]:
        """One verdict per claim, computed in this thread."""
        index = _build_index(_index_items(evidence))
        return [self._one(claim, index) for claim in as_claims(claims)]

    # -- one claim -------------------------------------------------------------------------

    def _one(self, claim: Claim, index: _Index) -> ClaimVerdict:
        who = f"offline/{self.model}"
        prepared = _prepare(claim.text)
        if not prepared.content:
            return ClaimVerdict(
                Label.UNVERIFIABLE,
                0.0,
                "nothing checkable in the claim (no content words, numbers or names)",
                None,
                claim,
                who,
            )
        if not index.segments:
            return ClaimVerdict(Label.UNSUPPORTED, 0.9, "there is no evidence", None, claim, who)
        ranked = self._rank(prepared, index)
        best, missing = self._best_segment(prepared, index, ranked)
        span = EvidenceSpan(best.source, best.start, best.end, _shorten(best.text))
        total_w = sum(prepared.weights)
        if self.mode == "strict" or (self.mode == "balanced" and not missing):
            if missing:
                words = ", ".join(repr(prepared.content[i].stem) for i in missing[:6])
                frac = sum(prepared.weights[i] for i in missing) / total_w
                return ClaimVerdict(
                    Label.UNSUPPORTED,
                    round(0.55 + 0.45 * frac, 3),
                    f"not in the closest evidence: {words}",
                    span,
                    claim,
                    who,
                )
        else:
            absent = [
                i
                for i, t in enumerate(prepared.content)
                if not _covered(
                    t, prepared.values[i], index.all_stems, index.all_prefixes, index.all_numbers
                )
            ]
            names = [i for i in absent if _specific(prepared.content[i])]
            if names:
                words = ", ".join(repr(prepared.content[i].stem) for i in names[:6])
                return ClaimVerdict(
                    Label.UNSUPPORTED,
                    0.8,
                    f"names or numbers not in the evidence: {words}",
                    span,
                    claim,
                    who,
                )
            cov = 1.0 - sum(prepared.weights[i] for i in absent) / total_w
            # what the claim repeats from the user's request shows that it answers the
            # question, not that the evidence says it: it does not count towards its length
            lost = set(absent)
            found = sum(
                1
                for i, t in enumerate(prepared.content)
                if i not in lost and t.stem not in index.asked
            )
            if self.mode == "balanced" and found < self.min_words:
                words = ", ".join(repr(prepared.content[i].stem) for i in missing[:6])
                short = (
                    "a claim this short must be restated"
                    if found == len(prepared.content) - len(absent)
                    else "the words it repeats from the question do not count"
                )
                return ClaimVerdict(
                    Label.UNSUPPORTED,
                    round(0.55 + 0.45 * (1 - _cov_best(prepared, missing)), 3),
                    f"not in the closest evidence: {words} ({short})",
                    span,
                    claim,
                    who,
                )
            if cov < self.min_coverage:
                words = ", ".join(repr(prepared.content[i].stem) for i in absent[:6])
                return ClaimVerdict(
                    Label.UNSUPPORTED,
                    round(0.55 + 0.45 * (1 - cov), 3),
                    f"only {cov:.0%} of the claim is in the evidence; missing {words}",
                    span,
                    claim,
                    who,
                )
            # a paraphrase may reword, but each of its clauses must be grounded: a clause with a
            # quarter or less of its words in the evidence is an addition of its own
            bare = (
                next(
                    (
                        text
                        for text, words in prepared.clauses
                        if 4 * sum(1 for i in words if i not in lost) <= len(words)
                    ),
                    None,
                )
                if self.mode == "balanced"
                else None
            )
            if bare is not None:
                return ClaimVerdict(
                    Label.UNSUPPORTED,
                    0.65,
                    f"a clause of the claim is not in the evidence: {_shorten(bare, 120)!r}",
                    span,
                    claim,
                    who,
                )
        shared = {t.stem for t in prepared.content if t.stem in best.stems}
        claim_neg = _negated_about(prepared.negations, shared | {t.stem for t in prepared.content})
        ev_neg = _negated_about(best.negations, shared)
        if self.mode != "lenient" and claim_neg != ev_neg:
            side = "the claim" if claim_neg else "the evidence"
            return ClaimVerdict(
                Label.UNSUPPORTED,
                0.7,
                f"negation mismatch: only {side} is negated",
                span,
                claim,
                who,
            )
        share = _cov_best(prepared, missing)
        return ClaimVerdict(
            Label.SUPPORTED,
            round(0.6 + 0.4 * share, 3),
            "every content word, number and name is in the evidence"
            if not missing
            else f"{share:.0%} of the claim is in the closest evidence; its names and numbers "
            "are all in the evidence",
            span,
            claim,
            who,
        )

    @staticmethod
    def _rank(prepared: _Claim, index: _Index) -> list[int]:
        n = len(index.segments)
        scores = []
        stems = [t.stem for t in prepared.content]
        idf = {w: math.log(1 + (n - index.df[w] + 0.5) / (index.df[w] + 0.5)) for w in stems}
        for seg in index.segments:
            norm = _K1 * (1 - _B + _B * seg.length / index.avg_len)
            scores.append(sum(idf[w] * (_K1 + 1) / (1 + norm) for w in stems if w in seg.stems))
        return sorted(range(n), key=lambda i: -scores[i])[:_TOP_K]

    @staticmethod
    def _best_segment(
        prepared: _Claim, index: _Index, ranked: list[int]
    ) -> tuple[_Segment, list[int]]:
        best: tuple[float, _Segment, list[int]] | None = None
        for i in ranked:
            seg = index.segments[i]
            prefixes = _prefixes(seg.stems)
            missing = [
                j
                for j, t in enumerate(prepared.content)
                if not _covered(t, prepared.values[j], seg.stems, prefixes, seg.numbers)
            ]
            lost = sum(prepared.weights[j] for j in missing)
            if best is None or lost < best[0]:
                best = (lost, seg, missing)
        assert best is not None
        return best[1], best[2]


def _shorten(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def coverage_baseline(
    claim: str, evidence: Sequence[EvidenceItem] | str, threshold: float = 0.6
) -> bool:
    """The plain baseline: True (supported) when the share of the claim's content words found
    anywhere in the evidence reaches ``threshold``. For benchmarks, side by side with the judge."""
    stems = {t.stem for t in tokenize(" ".join(text for _, text in evidence_items(evidence)))}
    content = {t.stem for t in tokenize(claim) if t.stem not in STOPWORDS}
    if not content:
        return True
    return len(content & stems) / len(content) >= threshold
