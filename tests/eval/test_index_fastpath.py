"""The evidence index's run index finds exactly what reading the evidence finds.

Past a few passes over a run's evidence, :class:`EvidenceIndex` looks tokens and numbers up
through a :class:`_RunIndex` (where each run of letters and digits, or of digits, stands)
instead of ``str.find``. Held here to the plain search (:func:`_first_checked`) on generated
text, and the two grounding scorers to themselves with the index forced from the first look-up.
"""

from __future__ import annotations

import bisect
import random
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentlens.eval import Evidence, EvidenceItem, _index, get_scorer
from agentlens.eval._index import (
    _DIGIT_RUN,
    _ISO_TEXT,
    _ISO_TEXT_LED,
    _WORD_RUN,
    EvidenceIndex,
    Match,
    _amount_at,
    _first_checked,
    _number_at,
    _number_variants,
    _RunIndex,
    _token_at,
    _word_candidates,
)
from agentlens.eval._quantities import NUMBER
from agentlens.eval._references import Reference, distance_within, edit_distance, number_key
from agentlens.eval.detectors import _grounding
from agentlens.model import Trace

# letters, digits (ASCII, Arabic-Indic, superscript: isdigit but not \d), separators, "_"
_PIECES = [*"aAbZ019 -_.,:/$%[]()\n", "٣", "²", "é", "İ", "12", "1,834.20", "cust-0042", "x_1"]
_TEXT = st.lists(st.sampled_from(_PIECES), max_size=40).map("".join)
_CHECKS = {"token": _token_at, "number": _number_at, "amount": _amount_at}


@settings(max_examples=1500, deadline=None)
@given(_TEXT, _TEXT, st.integers(0, 40), st.integers(1, 12), st.sampled_from(sorted(_CHECKS)))
@example("inv-551-b inv-5510 inv-551", "", 0, 7, "token")
@example("HAT117 117", "", 7, 3, "number")
@example("²117 5117 1,117 117", "", 15, 3, "number")
def test_the_run_index_finds_the_first_checked_occurrence(
    hay: str, other: str, start: int, width: int, check_name: str
) -> None:
    check = _CHECKS[check_name]
    pattern = _WORD_RUN if check_name == "token" else _DIGIT_RUN
    index = _RunIndex(hay, pattern)
    needles = {hay[start : start + width], other, other[:width], hay[start:]}
    for needle in needles - {""}:
        assert index.first(needle, check) == _first_checked(hay, needle, check), needle


def _bench_runs() -> list[dict[str, Any]]:
    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    try:
        from bench_grounding import make_run
    finally:
        sys.path.pop(0)
    rng = random.Random(19)
    return [make_run(i, rng) for i in range(60)]


def _grounding_results(traces: list[Trace]) -> list[str]:
    """The JSON of both grounding scorers' results on each of ``traces``, in order."""
    scorers = [get_scorer("no_fabricated_refs"), get_scorer("parametric_leakage")]
    out = []
    for trace in traces:
        evidence = Evidence(trace)
        out += [s.score(trace, evidence).model_dump_json() for s in scorers]
    return out


@pytest.mark.parametrize("forced", [False, True])
def test_the_grounding_scorers_give_the_same_results_through_the_run_index(
    monkeypatch: pytest.MonkeyPatch, forced: bool
) -> None:
    traces = [Trace.model_validate(r) for r in _bench_runs()]

    def results() -> list[str]:
        return _grounding_results(traces)

    plain = results()
    monkeypatch.setattr(_index, "_INDEX_AFTER", 0)
    monkeypatch.setattr(_index, "_INDEX_MIN", -1 if forced else 1 << 40)
    built: list[int] = []
    real = _index._RunIndex.__init__

    def counting(self: Any, hay: str, pattern: Any) -> None:
        built.append(len(hay))
        real(self, hay, pattern)

    monkeypatch.setattr(_index._RunIndex, "__init__", counting)
    assert results() == plain
    assert bool(built) == forced  # the forced pass really went through the run index


def _plain_scan(index: Any, needle: str, lower: bool, mode: int) -> Any:
    """:meth:`EvidenceIndex._scan` as it was written before its loop was inlined."""
    raw, raw_starts, low, low_starts = index._texts()
    hay, starts = (low, low_starts) if lower else (raw, raw_starts)
    check = _amount_at if mode == 2 else _number_at if mode == 1 else _token_at
    family = "digits" if mode else "words"
    runs = index._run_index(hay, family)
    if runs is not None:
        pos = runs.first(needle, check)
        return None if pos is None else index.items[bisect.bisect_right(starts, pos) - 1]
    pos = _first_checked(hay, needle, check)
    index._read[family] = index._read.get(family, 0) + (len(hay) if pos is None else pos)
    return None if pos is None else index.items[bisect.bisect_right(starts, pos) - 1]


@settings(max_examples=500, deadline=None)
@given(
    st.lists(_TEXT, min_size=1, max_size=4),
    st.lists(st.tuples(_TEXT, st.booleans(), st.integers(0, 2)), min_size=1, max_size=12),
    st.integers(-1, 1 << 7),
)
def test_scan_finds_what_the_plain_scan_finds(
    texts: list[str], asks: list[tuple[str, bool, int]], index_min: int
) -> None:
    items = [EvidenceItem(f"s{n}", "tool", None, t, t, n) for n, t in enumerate(texts)]
    fast, plain = EvidenceIndex(items), EvidenceIndex(items)
    saved = _index._INDEX_MIN
    _index._INDEX_MIN = index_min  # small: the run index takes over part-way through
    try:
        for needle, lower, mode in asks:
            for needle_ in (needle, needle[:3], texts[0][1:4]):
                got = fast._scan(needle_, lower, mode)
                want = _plain_scan(plain, needle_, lower, mode)
                assert got == (want and want.item), (needle_, lower, mode)
                assert fast._read == plain._read
                assert sorted(k for k, _ in fast._runs) == sorted(k for k, _ in plain._runs)
    finally:
        _index._INDEX_MIN = saved


# ASCII and not: "K" (the Kelvin sign) and "ſ" (a long s) match "k" and "s" when case is
# ignored, "İ" lower-cases to two characters
_WORDS_PIECES = [*"cCuUsSkK019-_ []\n.", "CUST-", "cust-4", "\u212a", "\u017f", "İ", "é", "٣"]
_WORDS_TEXT = st.lists(st.sampled_from(_WORDS_PIECES), max_size=30).map("".join)


@settings(max_examples=800, deadline=None)
@given(_WORDS_TEXT, st.text(alphabet="cCuUkKsS1-_.[\u212a\u017fé", max_size=3), st.booleans())
@example("xCUST-1 CUST-12 -cust-3", "cu", True)
@example("\u212aey-1 key-2", "ke", True)
def test_the_led_candidates_are_the_plain_expressions_matches(
    text: str, head: str, has_digit: bool
) -> None:
    digit = r"(?=[\w-]*\d)" if has_digit else ""
    plain = re.compile(rf"(?i)(?<![\w-]){re.escape(head)}{digit}[\w-]*")
    led, lowered = _word_candidates(head, has_digit, text.isascii())
    assert lowered == bool(head and text.isascii() and head.isascii())
    hay = text.lower() if lowered else text
    assert len(hay) == len(text)
    for end in (len(text), len(text) // 2):
        assert [m.span() for m in led.finditer(hay, 0, end)] == [
            m.span() for m in plain.finditer(text, 0, end)
        ]


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="0123456789-x٣\n", max_size=30))
@example("12024-01-01 2024-01-01 2024-01-011 x2024-12-31")
def test_the_led_iso_dates_are_the_plain_expressions_matches(text: str) -> None:
    assert [m.span() for m in _ISO_TEXT_LED.finditer(text)] == [
        m.span() for m in _ISO_TEXT.finditer(text)
    ]


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet="abc-12", max_size=9), st.text(alphabet="abc-12", max_size=9))
@example("cust-48231", "cust-48213")
@example("abc", "xyzabc")
def test_distance_within_is_the_edit_distance_within_the_limit(a: str, b: str) -> None:
    for limit in range(5):
        d = edit_distance(a, b, limit)
        assert distance_within(a, b, limit) == (d if d <= limit else None)
        assert (d <= limit) == (edit_distance(a, b) <= limit)


def test_kept_derivations_are_the_computed_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    try:
        from bench_grounding import make_run
    finally:
        sys.path.pop(0)
    rng = random.Random(7)
    traces = [Trace.model_validate(make_run(i, rng)) for i in range(300)]
    scorers = [get_scorer("no_fabricated_refs"), get_scorer("parametric_leakage")]
    computed: list[int] = []
    real = EvidenceIndex._derive

    def counting(self: Any, *args: Any) -> Any:
        computed.append(1)
        return real(self, *args)

    def results() -> list[str]:
        out = []
        for trace in traces:
            evidence = Evidence(trace)
            out += [s.score(trace, evidence).model_dump_json() for s in scorers]
        return out

    monkeypatch.setattr(EvidenceIndex, "_derive", counting)
    kept = results()
    kept_count = len(computed)
    computed.clear()

    def always(self: Any, value: float, index: int, **options: Any) -> Any:
        return counting(
            self,
            value,
            index,
            options.get("percent", False),
            options.get("tolerance", 0.0),
            options.get("extra", ()),
            options.get("quantity", NUMBER),
        )

    monkeypatch.setattr(EvidenceIndex, "derive", always)
    assert results() == kept
    assert kept_count < len(computed)  # some derivations were kept and not computed again


def _plain_find_token(index: EvidenceIndex, ref: Reference, at: int) -> Match | None:
    """``find`` of an id or a code as written before its fast path: :meth:`_find_token`."""
    return index._find_token(ref, at)


def _plain_written_value(index: EvidenceIndex, value: float, at: int, strict: bool) -> Any:
    """The written forms of ``find_value`` (no arithmetic) through :meth:`_first`, as written
    before its loop was inlined."""
    key = number_key(abs(value))
    for v in _number_variants(key):
        hit = index._first(v, at, lower=False, number=True, amount=strict)
        if hit is not None:
            return Match(hit, key)
    return None


_FIND_PIECES = [*"aAcCuU019 -_.,:\n", "CUST-", "cust-1", "1,834.20", "1834.2", "HAT117", "٣"]
_FIND_TEXT = st.lists(st.sampled_from(_FIND_PIECES), max_size=25).map("".join)


@settings(max_examples=600, deadline=None)
@given(
    st.lists(_FIND_TEXT, min_size=1, max_size=4),
    st.lists(
        st.tuples(
            st.sampled_from(["id", "code", "uuid", "pattern"]),
            st.text(alphabet="cCuU019-_.", min_size=1, max_size=8),
            st.integers(-1, 5),
        ),
        min_size=1,
        max_size=8,
    ),
    st.lists(st.tuples(st.sampled_from([0.0, 1.0, 117.0, 1834.2, 1834.25, 1.5]), st.booleans())),
)
def test_find_gives_what_the_plain_look_ups_give(
    texts: list[str],
    asks: list[tuple[str, str, int]],
    values: list[tuple[float, bool]],
) -> None:
    items = [EvidenceItem(f"s{n}", "tool", None, t, t, n) for n, t in enumerate(texts)]
    fast, plain = EvidenceIndex(items), EvidenceIndex(items)
    for kind, key, at in asks:
        ref = Reference(kind, key.upper(), 0, len(key), key.lower())
        got, want = fast.find(ref, at), _plain_find_token(plain, ref, at)
        assert got == want and type(got) is type(want), (kind, key, at)
    for value, strict in values:
        for at in (0, 2, 9):
            got = fast.find_value(value, at, arithmetic=False, strict=strict)
            want = _plain_written_value(plain, value, at, strict)
            assert got == want and type(got) is type(want), (value, strict, at)
    assert fast._hits == plain._hits and fast._read == plain._read


def _plain_find_fact(
    fact: Any, text: str, at: int, index: EvidenceIndex, numbers: Any, quantity: str
) -> Match | None:
    """``_find_fact`` of a number, an amount or a percentage as written before the look-up as
    written was kept per run and the tolerance read lazily: one ``find_value`` call."""
    if fact.kind in ("number", "money", "percent"):
        return index.find_value(
            fact.value,
            at,
            percent=fact.kind == "percent",
            tolerance=fact.tolerance,  # extract_facts's, with_tolerances below
            extra=numbers,
            strict=fact.kind != "number",
            quantity=quantity,
        )
    return _real_find_fact(fact, text, at, index, numbers, quantity)


_real_find_fact = _grounding._find_fact


def _rounded_traces() -> list[Trace]:
    """Runs whose amounts, percentages and numbers are rounded, hedged, derived or absent."""
    answers = [
        "About $1,800 is due; 12% of it ($216.00) is tax, 3 bags at $45 make $135.",
        "Over 8 million users, roughly 1.83 thousand a day; the rate is 12.5% (0.125).",
        "Revenue was $5.2mn, up 4%; a refund of $1,834.20 and $1,834.2 and $99.99 are open.",
        "The total is $3,052.97 and 7 items cost 1,250; ~30% off gives $875.",
    ]
    evidence = [
        {"balance": 1834.2, "rate": 0.125, "users": 8_810_000, "per_day": 1834},
        {"items": [1250.0, 1802.97], "tax": 0.12, "revenue": 5_200_000, "growth": 0.04},
        {"bags": 3, "fee": 45, "discount": "30%", "price": 1250},
    ]
    out = []
    for n, answer in enumerate(answers):
        steps: list[dict[str, Any]] = [
            {"id": f"t{k}", "kind": "tool", "name": "get", "output": e}
            for k, e in enumerate(evidence[n % 3 :] + evidence[: n % 3])
        ]
        steps.append({"id": "a", "kind": "text", "output": answer})
        out.append(Trace.model_validate({"steps": steps, "output": answer + " Thanks."}))
    return out


def test_numbers_looked_up_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """The look-up as written kept per run (and shared by both scorers), and the tolerances
    read only for the arithmetic, give what one ``find_value`` with the tolerances of
    ``extract_facts`` gave, on the benchmark's runs and on rounded and derived amounts."""
    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    try:
        from bench_grounding import make_run
    finally:
        sys.path.pop(0)
    rng = random.Random(11)
    traces = [Trace.model_validate(make_run(i, rng)) for i in range(150)] + _rounded_traces()

    def results() -> list[str]:
        return _grounding_results(traces)

    fast = results()
    eager = _grounding.extract_facts

    def with_tolerances(text: str, refs: Any, **_: Any) -> Any:
        return eager(text, refs)

    monkeypatch.setattr(_grounding, "extract_facts", with_tolerances)
    monkeypatch.setattr(_grounding, "_find_fact", _plain_find_fact)
    monkeypatch.setattr(EvidenceIndex, "find_written", _uncached_written)
    plain = results()
    assert plain == fast
    assert sum(r.count('"derived"') for r in fast) >= 4  # some amounts were derived


def _uncached_written(
    self: EvidenceIndex, value: float, index: int, *, percent: bool = False, strict: bool = True
) -> Any:
    """``find_written`` computed on every call (nothing is kept, so the probes of the kept
    look-ups in ``find_value`` and ``_find_number`` never hit either)."""
    return self._find_written(value, index, percent, strict)
