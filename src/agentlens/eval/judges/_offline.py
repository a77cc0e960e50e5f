"""The offline judge: deterministic claim-to-evidence alignment, no network, no download.

For each claim it

1. aligns the claim to the evidence: the evidence is cut into segments (sentences of prose, the
   innermost objects of JSON), and segments are ranked by BM25 over the claim's content words;
2. measures coverage: which of the claim's content words (lightly stemmed, diacritics folded, no
   synonyms; see :data:`RULES` for what else matches: ``Canadian`` = ``Canada``, ``died`` =
   ``dies``, ``TechCrunch`` = ``Tech Crunch``...) the best aligned segment contains, and which
   the evidence contains anywhere; numbers match by value across formats (``1,000`` =
   ``1000``, ``5.2 million`` = ``5200000``, ``twelve`` = ``12``, ``1990s`` by ``1994``), a
   numeric date by what it says (``2018-06-30`` = ``30 June 2018``) and ``United States`` as
   ``U.S.``;
3. checks agreement: a number or name of the claim that is absent from the evidence, or a
   negation on one side only, makes the claim unsupported (a claim's negation may be in any
   sentence that negates the same words).

Three modes:

``balanced`` (the default)
    A claim is supported when one aligned segment holds all its content words (a restatement),
    or, for a paraphrase, when every name and number is in the evidence, at least
    ``min_words`` of its content words are found (words it repeats from the user's request do
    not count), and their weighted share reaches ``min_coverage``. A short claim therefore has
    to be restated; a long one may paraphrase its common words but not its names or numbers;
    and a claim that echoes the question is as long as what it adds. A negation on one side
    only fails either way.
``strict``
    Every content word of the claim must be found in one aligned evidence segment (a sentence,
    or one JSON record). Paraphrase counts against a claim.
``lenient``
    Names and numbers must all occur in the evidence, and the weighted share of the claim found
    anywhere must reach ``min_coverage``, whatever the claim's length; no negation check.

The rules and thresholds were chosen by 5-fold cross-validation on WiCE dev and HaluEval QA
(``benchmarks/judge_accuracy.py``; see ``docs/judges.md``).
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
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
    NEGATION_FORMS,
    NEGATIONS,
    STOPWORDS,
    Token,
    claim_number,
    count_word,
    decade_values,
    is_decade,
    lemma,
    negation_word,
    number_values,
    read_dates,
    read_initialisms,
    stem,
    tokenize,
)

__all__ = [
    "MODES",
    "READING_FIXES",
    "RULES",
    "OfflineJudge",
    "coverage_baseline",
    "evidence_items",
]

Mode = Literal["balanced", "strict", "lenient"]
MODES: tuple[str, ...] = ("balanced", "strict", "lenient")
"""The offline judge's modes; the first is the default."""

RULES: dict[str, str] = {
    "request": "words a claim repeats from the user's request do not count towards min_words",
    "demonyms": "in a paraphrase, a name matches its demonym: Canada = Canadian",
    "inflections": "inflected forms match their base: died = dies, won = wins, wrote = writes",
    "negation-forms": "every negation reads as one word: cannot = unable to = did not = failed "
    "to; 'not only' is no negation",
    "compounds": "a compound matches written as one word or two: TechCrunch = Tech Crunch",
    "count-words": "a spelled-out count before a plural noun ('two films') need not be in the "
    "evidence as a number",
    "decades": "a decade is a span: '1990s' is found by 1994, and '1990' is not found by '1990s'",
    "fragments": "a claim of one letter ('N.') is a fragment, with nothing to check",
    "dates": "a numeric date reads as its year, month and day: 2018-06-30 = 30 June 2018; "
    "a short year range is two years: 2018-19 = 2018 to 2019",
    "initialisms": "a name written out matches its acronym: United States = U.S. = USA, "
    "United Nations = UN",
    "negation-anywhere": "a claim's negation is matched by a negation of the same words in any "
    "sentence of the evidence, not only in the closest one",
}
"""The judge's rules that can be left out, all on by default. ``benchmarks/judge_accuracy.py``
prints one ablation line per rule: what it changes on each cross-validation fold."""

READING_FIXES = frozenset(
    [
        *("inflections", "negation-forms", "compounds", "count-words", "decades"),
        *("fragments", "dates", "initialisms"),
    ]
)
"""The rules that correct how a form is read (each pinned by unit tests and near misses). The
others are heuristics, kept only because they raised every fold whose verdicts they change."""

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
    joined: frozenset[str]
    """The stems of its adjacent words written as one (rule ``compounds``)."""


def _read(text: str, rules: frozenset[str]) -> list[Token]:
    """The tokens of ``text`` as the judge reads them under ``rules``: with ``dates`` a numeric
    date is its year, month name and day and ``2018–19`` two years, with ``initialisms``
    ``United States`` is ``usa`` (as ``U.S.``), with ``negation-forms`` every negation is the
    word ``not`` (and ``not only`` none), with ``decades`` a decade keeps its ``s`` (``1990s``,
    not the year ``1990``)."""
    toks = tokenize(text)
    if "dates" in rules:
        toks = read_dates(text, toks)
    if "initialisms" in rules:
        toks = read_initialisms(text, toks)
    negations = "negation-forms" in rules
    decades = "decades" in rules
    for i, tok in enumerate(toks):
        if negations and tok.stem in _NEGATION_STEMS:
            raw = text[tok.start : tok.end]
            if not negation_word(raw):
                continue
            nxt = toks[i + 1] if i + 1 < len(toks) else None
            not_only = (
                raw.lower() == "not"
                and nxt is not None
                and nxt.stem == "only"
                and text[tok.end : nxt.start].isspace()
            )
            toks[i] = tok._replace(stem="only" if not_only else "not")
        elif decades and tok.number and text[tok.end - 1] == "s":
            raw = text[tok.start : tok.end]
            if is_decade(raw):
                toks[i] = tok._replace(stem=raw)
    return toks


_NEGATION_STEMS = frozenset(stem(w) for w in NEGATION_FORMS) - {"without"}
"""The stems of the negation words: a token with one of them may be a negation (its form
decides, :func:`negation_word`)."""


def _joined(toks: list[Token], text: str) -> dict[int, str]:
    """The stem of two adjacent words written as one (``Tech Crunch`` -> ``techcrunch``,
    ``spin-off`` -> ``spinoff``), by the index of the first: words, not numbers, with a hyphen
    between them, or a space between two content words."""
    out = {}
    for i, (a, b) in enumerate(itertools.pairwise(toks)):
        if (
            b.start - a.end == 1
            and not a.number
            and not b.number
            and (
                text[a.end] == "-"
                or (text[a.end] == " " and a.stem not in STOPWORDS and b.stem not in STOPWORDS)
            )
        ):
            out[i] = stem(text[a.start : a.end] + text[b.start : b.end])
    return out


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
    """The word-family keys of ``stems``: (marked ``@``) their :func:`lemma` and (``^``) their
    bases without a demonym ending. A claim word with the same key is a form of the same word
    (each kind under its rule)."""
    out = {"@" + lemma(w) for w in stems if not w[0].isdigit()}
    out.update("^" + k for w in stems if not w[0].isdigit() for k in _demonym_keys(w))
    return frozenset(out)


_DEMONYM_ENDINGS = ("ians", "ian", "ans", "an", "ish", "ese", "ia", "and", "i", "y", "a")


@functools.lru_cache(maxsize=65536)
def _demonym_keys(word_stem: str) -> tuple[str, ...]:
    """The word and its bases without a demonym ending (``canadian`` -> ``canad``)."""
    bases = (word_stem[: -len(e)] for e in _DEMONYM_ENDINGS if word_stem.endswith(e))
    return (word_stem, *(b for b in bases if len(b) >= 4))


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
    all_joined: set[str] = field(default_factory=set)
    avg_len: float = 1.0


@functools.lru_cache(maxsize=512)
def _item_segments(source: str, text: str, rules: frozenset[str]) -> tuple[_Segment, ...]:
    """The segments of one evidence item (memoised: turns of a run share their evidence)."""
    segments: list[_Segment] = []
    if text:
        for s, e in _segment_spans(text):
            seg_text = text[s:e]
            if seg_text.rstrip().endswith("?"):
                continue  # a question asserts nothing
            toks = _read(seg_text, rules)
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
                    frozenset(_joined(toks, seg_text).values())
                    if "compounds" in rules
                    else frozenset(),
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
def _request_stems(text: str, rules: frozenset[str]) -> frozenset[str]:
    return frozenset(t.stem for t in _read(text, rules) if t.stem not in STOPWORDS)


@functools.lru_cache(maxsize=64)
def _build_index(items: tuple[tuple[str, str, bool], ...], rules: frozenset[str]) -> _Index:
    segments = [seg for source, text, _ in items for seg in _item_segments(source, text, rules)]
    asked = frozenset().union(
        *(_request_stems(text, rules) for _, text, request in items if request)
    )
    index = _Index(segments, asked)
    for seg in segments:
        index.df.update(t for t in seg.stems if t not in STOPWORDS)
        index.all_stems |= seg.stems
        index.all_numbers |= seg.numbers
        index.all_joined |= seg.joined
    index.all_prefixes = _prefixes(frozenset(index.all_stems))
    index.avg_len = sum(s.length for s in segments) / max(1, len(segments))
    return index


def _covered(
    claim: _Claim,
    j: int,
    stems: frozenset[str] | set[str],
    prefixes: frozenset[str],
    numbers: frozenset[str] | set[str],
    joined: frozenset[str] | set[str],
    rules: frozenset[str],
    *,
    restating: bool,
) -> bool:
    """Whether the claim's content word ``j`` is among ``stems``/``numbers`` (a segment's, or
    the whole evidence's; ``joined``: its compounds), under ``rules``. ``restating``: in one
    aligned segment, where a related word (a demonym for a name) is not the same word."""
    tok = claim.content[j]
    if tok.number:
        return bool(claim.values[j] & numbers)  # by value: "2 million" is not found in "km2"
    stem_ = tok.stem
    if stem_ in stems:
        return True
    if "inflections" in rules and not stem_[0].isdigit() and "@" + lemma(stem_) in prefixes:
        return True
    if (
        "demonyms" in rules
        and not restating
        and tok.capital
        and any("^" + k in prefixes for k in _demonym_keys(stem_))
    ):
        return True
    if "compounds" not in rules:
        return False
    return stem_ in joined or any(c in stems for c in claim.joined[j])


@dataclass(frozen=True, slots=True)
class _Claim:
    tokens: list[Token]
    content: list[Token]
    values: list[set[str]]
    weights: list[float]
    soft: frozenset[int]
    """Content words that are no name or number although they look like one (counts)."""
    joined: list[tuple[str, ...]]
    """For each content word, the stems of it written together with a neighbour."""
    negations: tuple[tuple[str, ...], ...]


def _prepare(text: str, rules: frozenset[str]) -> _Claim:
    tokens = _read(text, rules)
    content: list[Token] = []
    values: list[set[str]] = []
    soft: set[int] = set()
    joined: list[tuple[str, ...]] = []
    seen: set[str] = set()
    pairs = _joined(tokens, text) if "compounds" in rules else {}
    for i, t in enumerate(tokens):
        if t.stem in STOPWORDS or t.stem in seen:
            continue
        seen.add(t.stem)
        raw = text[t.start : t.end]
        if t.number and "decades" in rules and is_decade(raw):
            values.append(decade_values(raw))
        else:
            values.append(claim_number(tokens, i) if t.number else set())
        following = text[tokens[i + 1].start : tokens[i + 1].end] if i + 1 < len(tokens) else None
        if t.number and "count-words" in rules and count_word(raw, following):
            soft.add(len(content))
        joined.append(tuple(pairs[k] for k in (i - 1, i) if k in pairs))
        content.append(t)
    weights = [
        2.0 if _specific(t) and j not in soft else (1.0 if len(t.stem) > 4 else 0.6)
        for j, t in enumerate(content)
    ]
    return _Claim(
        tokens,
        content,
        values,
        weights,
        frozenset(soft),
        joined,
        _negation_scopes(tokens, text),
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


def _negation_elsewhere(
    claim_scopes: tuple[tuple[str, ...], ...], segments: Sequence[_Segment]
) -> bool:
    """True when some segment negates every content word one of the claim's negations bears
    on (rule ``negation-anywhere``): ``he hasn't done it`` is matched by ``"Because he hasn't
    done it," he said`` even when another sentence is the closest to the whole claim."""
    for scope in claim_scopes:
        words = {w for w in scope if w not in STOPWORDS}
        if words and any(
            words.issubset(seg_scope) for seg in segments for seg_scope in seg.negations
        ):
            return True
    return False


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
        rules: the names of the optional :data:`RULES` to apply (default: all of them); for
            ablation studies. A judge without some of them names them in its ``model``.
    """

    name = "offline"
    prompt_version = "offline-6"

    def __init__(
        self,
        *,
        mode: Mode = "balanced",
        min_coverage: float = 0.5,
        min_words: int = 6,
        rules: Iterable[str] | None = None,
    ) -> None:
        from agentlens.errors import ConfigError

        if mode not in MODES:
            raise ConfigError(
                f"offline judge: mode must be one of {', '.join(MODES)}, not {mode!r}"
            )
        self.rules = frozenset(RULES if rules is None else rules)
        unknown = sorted(self.rules - set(RULES))
        if unknown:
            raise ConfigError(
                f"offline judge: unknown rule {unknown[0]!r}; known rules: {', '.join(RULES)}"
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
        left_out = [name for name in RULES if name not in self.rules]
        if left_out:
            self.model += "-without-" + "+".join(left_out)
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
        index = _build_index(_index_items(evidence), self.rules)
        return [self._one(claim, index) for claim in as_claims(claims)]

    # -- one claim -------------------------------------------------------------------------

    def _one(self, claim: Claim, index: _Index) -> ClaimVerdict:
        who = f"offline/{self.model}"
        prepared = _prepare(claim.text, self.rules)
        fragment = (
            "fragments" in self.rules
            and len(prepared.tokens) == 1
            and len(prepared.tokens[0].stem) == 1
            and not prepared.tokens[0].number
        )
        if not prepared.content or fragment:
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
                for i in range(len(prepared.content))
                if not _covered(
                    prepared,
                    i,
                    index.all_stems,
                    index.all_prefixes,
                    index.all_numbers,
                    index.all_joined,
                    self.rules,
                    restating=False,
                )
            ]
            names = [i for i in absent if _specific(prepared.content[i]) and i not in prepared.soft]
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
                if i not in lost and ("request" not in self.rules or t.stem not in index.asked)
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
        shared = {t.stem for t in prepared.content if t.stem in best.stems}
        claim_neg = _negated_about(prepared.negations, shared | {t.stem for t in prepared.content})
        ev_neg = _negated_about(best.negations, shared)
        if (
            claim_neg
            and not ev_neg
            and "negation-anywhere" in self.rules
            and _negation_elsewhere(prepared.negations, index.segments)
        ):
            ev_neg = True
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

    def _best_segment(
        self, prepared: _Claim, index: _Index, ranked: list[int]
    ) -> tuple[_Segment, list[int]]:
        best: tuple[float, _Segment, list[int]] | None = None
        for i in ranked:
            seg = index.segments[i]
            prefixes = _prefixes(seg.stems)
            missing = [
                j
                for j in range(len(prepared.content))
                if not _covered(
                    prepared,
                    j,
                    seg.stems,
                    prefixes,
                    seg.numbers,
                    seg.joined,
                    self.rules,
                    restating=True,
                )
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
