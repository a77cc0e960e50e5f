"""``extract_facts``'s fast paths give exactly what the plain definitions give.

Each speed-up in ``_facts`` has its plain form here (the look-behind written first, the regular
expression searched on the slice, a scan of every span, a re-parse of the number, the dataclass
``__init__``) and a differential test against it on generated text, plus the edge cases where a
pre-check decides.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import FrozenInstanceError, fields, replace

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentlens.eval._facts import (
    _CONNECTOR,
    _HEDGE,
    _HEDGE_LAST,
    _LABEL_LAST,
    _LABELLED_NUMBER,
    _NAME,
    _NAME_WORDS,
    _NUMBER,
    _SCALE_WORDS,
    _TIME,
    Fact,
    _fact,
    _hedged,
    _labelled,
    _overlaps,
    _spans_index,
    _times,
    _tolerance,
    extract_facts,
    fact_tolerance,
)
from agentlens.eval._references import _NUM, Reference, get_extractor, parse_number

# The plain definition of a word of a name and of a name: the look-behind first.
_PLAIN_WORD = r"(?:[A-Z][a-z]*['’])?[A-Z][a-z]+(?:[A-Z][a-z]+)?(?:-[A-Z][a-z]+)*"
_PLAIN_END = r"(?:(?![\w'’-])|(?=['’]s(?![\w'’-])))"  # a word's end, or a possessive after it
_PLAIN_NAME_WORD = (
    rf"(?:[A-Z]\.(?=[ \t]+[A-Z])|{_PLAIN_WORD}|[A-Z]{{2,6}}(?:(?![\w'’])|(?=['’]s(?![\w'’-]))))"
)
_PLAIN_NAME = re.compile(
    rf"(?=[A-Z])(?<![\w'’-]){_PLAIN_NAME_WORD}"
    rf"(?:[ \t]+(?:{_CONNECTOR}[ \t]+)?{_PLAIN_NAME_WORD})*{_PLAIN_END}"
)

# ... and of a number: the look-behind first, over ``_references``' own _NUM.
_PLAIN_NUMBER = re.compile(
    rf"(?=[\d.])(?<![\w.,/:#-])(?P<num>{_NUM})(?:\s?(?P<scale>{_SCALE_WORDS})\b)?"
    r"(?P<ordinal>st|nd|rd|th)?(?![\w/-]|[.,:]\d)"
)

_HEDGES = [
    "about",
    "around",
    "approximately",
    "approx",
    "approx.",
    "roughly",
    "nearly",
    "almost",
    "over",
    "under",
    "some",
    "circa",
    "ca.",
    "more than",
    "less than",
    "fewer than",
    "up to",
    "at least",
    "at most",
    "close to",
    "~",
    "≈",
]
_LABELS = [
    "step",
    "option",
    "item",
    "part",
    "chapter",
    "section",
    "page",
    "no.",
    "number",
    "#",
    "rank",
    "level",
    "tier",
    "round",
    "phase",
    "stage",
    "line",
    "row",
    "column",
    "figure",
    "fig.",
    "table",
    "version",
    "v",
]

# Pieces of answers: names and near-names, numbers, times, hedges, labels, references, Markdown.
_PIECES = [
    *"aAbBmMpPkKxXZ0123456789 -_.,:;@$€£¥[]()/%#*>\n\t\u2003\xa0'’~≈&İ\u212a",
    "Jane ",
    "Smith",
    "O'Brien",
    "D’Angelo",
    "McDonald",
    "New York",
    "JFK",
    "USA",
    "Thanks",
    "The ",
    "Step ",
    "Option",
    "about ",
    "Over ",
    "APPROX. ",
    "at least ",
    "v",
    "No. ",
    "fig. ",
    "7:30",
    " PM",
    "am",
    "a.m.",
    "12 pm",
    "10:00",
    "23:59:59",
    "11",
    "1,234",
    "1,234.5",
    ".5",
    " million",
    "k",
    "bn",
    " thousand",
    "3rd",
    "2024",
    "1999",
    "$1,214.33",
    "20%",
    "USD 12.5",
    "March 5, 2026",
    "2026-03-05",
    "CUST-05306",
    "HAT069",
    "[3]",
    "https://a.example.com/x/42",
    "\n1. ",
    "\n- ",
    "\n## ",
    "**Departure:** ",
    "Yara",
    "Silva",
    "Members",
    "Quickly",
    "van ",
    "de ",
    "of ",
    "Paris",
    "paris",
    ". ",
    "? ",
    "Dr. ",
    "A. ",
    "Jean-Luc",
    "5 K. Smith",
    "100",
    "12.50",
    "9,000",
    "2,000,000",
    "1.5bn",
    "123,456",
    "12,345.67",
    "0.75",
    "Mary-Kate",
    "ACME",
    "'s ",
    "’s",
    "'sx",
]
_TEXTS = st.lists(st.sampled_from(_PIECES), max_size=30).map("".join)


@settings(max_examples=400, deadline=None)
@given(text=_TEXTS)
def test_name_expression_is_the_plain_one(text: str) -> None:
    def spans(pattern: re.Pattern[str], text: str) -> list[tuple[int, int]]:
        return [m.span() for m in pattern.finditer(text)]

    assert spans(_NAME, text) == spans(_PLAIN_NAME, text)
    assert spans(_NAME_WORDS, text) == spans(re.compile(_PLAIN_NAME_WORD), text)


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.sampled_from("AZazs'’- \t.&1"), max_size=40))
def test_name_expression_is_the_plain_one_on_letters(text: str) -> None:
    assert [m.span() for m in _NAME.finditer(text)] == [
        m.span() for m in _PLAIN_NAME.finditer(text)
    ]


def _numbers(pattern: re.Pattern[str], text: str, num: str) -> list[tuple[object, ...]]:
    return [
        (m.span(), text[m.start() : m.end(num)], m.group("scale"), m.group("ordinal"))
        for m in pattern.finditer(text)
    ]


@settings(max_examples=400, deadline=None)
@given(text=_TEXTS)
def test_number_expression_is_the_plain_one(text: str) -> None:
    assert _numbers(_NUMBER, text, "num_tail") == _numbers(_PLAIN_NUMBER, text, "num")


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(
        st.sampled_from([*"0123456789.,:/#- kKmMbB$\n", "12", "123", "1234", "st", "nd", "th"]),
        max_size=20,
    )
)
def test_number_expression_is_the_plain_one_on_digits(parts: list[str]) -> None:
    text = "".join(parts)
    assert _numbers(_NUMBER, text, "num_tail") == _numbers(_PLAIN_NUMBER, text, "num")


def _time_matches(matches: Iterable[re.Match[str]]) -> list[tuple[object, ...]]:
    return [(m.span(), m.groupdict()) for m in matches]


@settings(max_examples=400, deadline=None)
@given(
    parts=st.lists(
        st.sampled_from(
            [
                *"0123456789:. aApPmM\n\t\u2003x/",
                "12",
                "23",
                "07:00",
                "1:23:45",
                "12:30pm",
                "7 a.m.",
                "10 PM",
                "9am",
                "24:00",
                "٣",
            ]
        ),
        max_size=20,
    )
)
def test_times_are_the_search(parts: list[str]) -> None:
    text = "".join(parts)
    assert _time_matches(_times(text)) == _time_matches(_TIME.finditer(text))


_CASED = st.sampled_from(_HEDGES + _LABELS).flatmap(
    lambda w: st.sampled_from([w, w.upper(), w.title(), w.replace("k", "\u212a")])
)
_SPACES = st.sampled_from(["", " ", "  ", "\n", "\t", "\u2003", "\xa0", " $", "$ ", " € ", "$$"])


@settings(max_examples=400, deadline=None)
@given(
    parts=st.lists(
        st.one_of(_CASED, _SPACES, st.sampled_from(["x", "9", "ab", "the ", ":", "."])),
        max_size=12,
    )
)
def test_hedge_and_label_prechecks_decide_as_the_search(parts: list[str]) -> None:
    text = "".join(parts) + "5"
    for start in range(len(text) + 1):
        assert _hedged(text, start) == bool(_HEDGE.search(text[max(0, start - 24) : start]))
        assert _labelled(text, start) == bool(
            _LABELLED_NUMBER.search(text[max(0, start - 12) : start])
        )


@pytest.mark.parametrize("last", [_HEDGE_LAST, _LABEL_LAST])
def test_last_characters_cover_case_folding(last: frozenset[str]) -> None:
    """Every character that IGNORECASE matches with one of the last characters lower-cases
    to it (the Kelvin sign to ``k``...): the pre-checks compare ``lower()``."""
    one_of = re.compile("|".join(re.escape(c) for c in sorted(last)), re.IGNORECASE)
    for code in range(0x110000):
        c = chr(code)
        if one_of.fullmatch(c):
            assert c.lower() in last, hex(code)
    for word in _HEDGES:
        assert word[-1] in _HEDGE_LAST
    for word in _LABELS:
        assert word[-1] in _LABEL_LAST


_SPAN = st.tuples(st.integers(-2, 30), st.integers(-2, 30))


@settings(max_examples=500, deadline=None)
@given(spans=st.lists(_SPAN, max_size=6), queries=st.lists(_SPAN, min_size=1, max_size=8))
def test_overlaps_is_the_scan_of_every_span(
    spans: list[tuple[int, int]], queries: list[tuple[int, int]]
) -> None:
    starts, ends, ordered = _spans_index([s for s, _ in spans], [e for _, e in spans])
    for a, b in queries:
        start, end = min(a, b), max(a, b) + 1  # a match is never empty
        plain = any(start < e and s < end for s, e in spans)
        assert _overlaps(starts, ends, ordered, start, end) == plain


def _fields(facts: list[Fact]) -> list[tuple[object, ...]]:
    return [tuple(getattr(f, x.name) for x in fields(Fact)) for f in facts]


@settings(max_examples=300, deadline=None)
@given(text=_TEXTS)
def test_reference_order_does_not_matter(text: str) -> None:
    """References out of order (the extractor's are sorted) take the merged-span path."""
    refs = get_extractor().extract(text)
    assert len({r.start for r in refs}) == len(refs)  # else their order shows in the result
    assert _fields(extract_facts(text, list(reversed(refs)))) == _fields(extract_facts(text, refs))


@settings(max_examples=300, deadline=None)
@given(text=_TEXTS)
def test_number_value_and_tolerance_are_the_reparsed_ones(text: str) -> None:
    for fact in extract_facts(text, get_extractor().extract(text)):
        if fact.kind in ("number", "year"):
            assert fact.value == parse_number(fact.text)
        if fact.kind == "number":
            assert fact.tolerance == _tolerance(fact.text, text, fact.start)


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        # every digit inside a reference: no number or time is searched for
        ("Paid $1,214.33 on 2025-08-21 for ORD-139148.", ["money", "date"]),
        # one digit outside them: both are
        ("Paid $1,214.33 on 2025-08-21 for 12 seats.", ["money", "date", "number"]),
        ("Paid $1,214.33 on 2025-08-21 at 10:30.", ["money", "date", "time"]),
        ("Paid $1,214.33 at 7 p.M. for ORD-139148.", ["money", "time"]),
        ("Flight HAT069 at 7 PM", ["time"]),
        ("Code HAT069, seats 7am", ["time"]),
        ("No digits here, Yara.", ["name"]),
    ],
)
def test_digits_inside_references(text: str, kinds: list[str]) -> None:
    refs = get_extractor().extract(text)
    assert [f.kind for f in extract_facts(text, refs)] == kinds


def test_empty_or_inverted_reference_spans_are_tested_as_written() -> None:
    text = "Sold 1,500 units to Acme Widgets in 2019."
    # an empty span inside "1,500" drops it; one at its edge does not
    assert [f.kind for f in extract_facts(text, [Reference("id", "", 6, 6, "x")])] == [
        "name",
        "year",
    ]
    assert [f.kind for f in extract_facts(text, [Reference("id", "", 5, 5, "x")])] == [
        "number",
        "name",
        "year",
    ]
    # an inverted span (30, 10) drops only a match that starts before 10 and ends after 30
    kept = extract_facts(text, [Reference("id", "", 30, 10, "x")])
    assert [f.text for f in kept] == ["1,500", "Acme Widgets", "2019"]
    kept = extract_facts(text, [Reference("id", "", 25, 21, "x")])
    assert [f.text for f in kept] == ["1,500", "2019"]


def test_fact_maker_builds_the_dataclass() -> None:
    args = ("money", "$1,214.33", 49, 58, "1214.33", 1214.33, 0.005000005)
    made, plain = _fact(*args), Fact(*args)
    assert type(made) is Fact
    assert made == plain
    assert hash(made) == hash(plain)
    assert repr(made) == repr(plain)
    with pytest.raises(FrozenInstanceError):
        made.start = 0  # type: ignore[misc]


_ROUNDED = st.lists(
    st.sampled_from(
        [*_PIECES, "about ", "over ", "~", "roughly $", "$1,834.20", "12.5%", " million", "9,000"]
    ),
    max_size=20,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=_TEXTS | _ROUNDED)
@example(text="about $5.2 million, over 8 million and ~12.5% of 9,000")
def test_facts_without_tolerances_are_the_facts_with_them(text: str) -> None:
    """``tolerances=False`` changes nothing but the tolerance, which ``fact_tolerance`` gives."""
    refs = get_extractor().extract(text)
    eager = extract_facts(text, refs)
    lazy = extract_facts(text, refs, tolerances=False)
    assert lazy == [replace(f, tolerance=0.0) for f in eager]
    assert [fact_tolerance(f, text) for f in lazy] == [f.tolerance for f in eager]
