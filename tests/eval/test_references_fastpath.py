"""The extraction loop's fast paths give exactly what the plain definitions give.

``Extractor.extract`` scans with a cheaper form of the word-start test, normalises ids and codes
inline, caches the other keys, builds ``Reference`` objects through their slots and merges the
custom matches in one pass. Each is checked here against a plain version: ``_builtin.finditer``
(the expression the guard tests in test_grounding_fastpath.py check), ``_builtin_key`` per match,
the dataclass constructor, and the quadratic overlap filter with a sort.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlens.eval import Evidence
from agentlens.eval._references import (
    _FAST_HEAD,
    _HEAD,
    _NOT_CODE,
    _TRIGGER,
    _TRIGGER_ASCII,
    _TRIGGER_LED,
    Extractor,
    Reference,
    _ascii_alike,
    _builtin_key,
    _make_ref,
    get_extractor,
)

_PIECES = [
    *"aAbBcCdDeEfFxXzZ0123456789 -_.,:;@$€£¥[]()/%#\n\t\u2003\xa0\x1c\x1f*?'\"",
    "March ",
    "May ",
    "Sept. ",
    "Jan",
    "USD",
    "US$",
    "A$",
    " dollars",
    " per cent",
    "percent",
    "http://",
    "https://",
    "www.",
    "INV-",
    "CUST-",
    "DOC-",
    "2026-03-05",
    "T10:00Z",
    "k ",
    " million",
    "deadbeef-dead-beef-dead-beefdeadbeef",
    "a@b.co",
    "1,834.20",
    "ZK3P9Q",
    "HAT117",
    "COVID19",
    "FY2024",
    "Q32024",
    "H264",
    "1080P",
    "ARM64",
    "X86",
    "4K",
    "CFA123",
    "sha-256",
    "SHA_1",
    "gpt-4o",
    "v-12",
    "my_id_42",
    "[smith2020]",
    "[3]",
    "5th of ",
    "-$",
    "12 ",
    ", 2026",
    "Note:",
    "one-way",
    "re-book",
    "a-1",
    "://",
    "**",
]

_PATTERNS = {
    "cust": r"CUST-\d{5}",
    "doc": r"DOC-[a-f0-9]{8}",
    "amount": r"\$[\d,]+\.\d{2}",
    "num": r"\d+",
    "word": r"\w+-\w+",
    "empty": r"x*",
}

texts = st.lists(st.sampled_from(_PIECES), max_size=40).map("".join)


def _plain_extract(extractor: Extractor, text: str) -> list[Reference]:
    """The plain definition: every match of ``_builtin``, its key, the custom matches."""
    refs: list[Reference] = []
    if extractor._builtin is not None:  # every text: the pre-check must change nothing
        for m in extractor._builtin.finditer(text):
            assert m.lastgroup is not None
            found = _builtin_key(m.lastgroup, m.group())
            if found is not None:
                kind, token, key = found
                refs.append(Reference(kind, token, m.start(), m.start() + len(token), key))
    extra: list[Reference] = []
    for kind, rx in extractor.custom:
        for m in rx.finditer(text):
            if m.end() > m.start():
                extra.append(extractor._custom_ref(kind, m.group(), m.start(), m.end()))
    extra.sort(key=lambda r: (r.start, -r.end))
    kept: list[Reference] = []
    for r in extra:
        if not kept or r.start >= kept[-1].end:
            kept.append(r)
    out = [r for r in refs if not any(r.start < c.end and c.start < r.end for c in kept)]
    return sorted(out + kept, key=lambda r: r.start)


def _fields(refs: list[Reference]) -> list[tuple[object, ...]]:
    return [dataclasses.astuple(r) for r in refs]


def test_the_fast_head_is_the_plain_word_start_test() -> None:
    fast, plain = re.compile(_FAST_HEAD), re.compile(_HEAD)
    for text in ["", "a", "[", "a[", "a [b", "x[1] [2]", "_[", "é[3", "-[", "[[", "ab[c] d[ x"]:
        positions = [m.start() for m in fast.finditer(text)]
        assert positions == [m.start() for m in plain.finditer(text)], text


@pytest.mark.parametrize("kinds", [None, ["id", "code"], ["date", "money", "percent"]])
@settings(max_examples=300, deadline=None)
@given(text=texts)
def test_scan_finds_what_the_plain_expression_finds(kinds: list[str] | None, text: str) -> None:
    ex = get_extractor(kinds=kinds)
    assert ex._scan is not None and ex._builtin is not None
    spans = [(m.span(), m.lastgroup) for m in ex._scan.finditer(text)]
    assert spans == [(m.span(), m.lastgroup) for m in ex._builtin.finditer(text)]


@pytest.mark.parametrize("patterns", [(), list(_PATTERNS.values())[:3], _PATTERNS])
@settings(max_examples=300, deadline=None)
@given(text=texts)
def test_extract_gives_the_plain_definition(
    patterns: list[str] | dict[str, str], text: str
) -> None:
    ex = get_extractor(patterns)
    assert _fields(ex.extract(text)) == _fields(_plain_extract(ex, text))


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.characters(codec="utf-8"), max_size=60))
def test_extract_gives_the_plain_definition_on_any_text(text: str) -> None:
    ex = get_extractor(_PATTERNS)
    assert _fields(ex.extract(text)) == _fields(_plain_extract(ex, text))


@pytest.mark.parametrize(
    "token",
    [
        "COVID19",
        "FY2024",
        "Q32024",
        "H2640",
        "ARM64",
        "1080P",
        "4000K",
        "CFA123",
        "ZK3P9Q",
        "HAT117",
        "MP3A1",
        "X86AB",
        "AB12K",
        "9P9Q9",
    ],
)
def test_code_pre_check_skips_no_excluded_code(token: str) -> None:
    """Every token _NOT_CODE excludes starts with C/F/Q/M/H/X/A or ends with P/K."""
    excluded = _NOT_CODE.match(token) is not None
    refs = get_extractor(kinds=["code"]).extract(f"see {token} 1")
    assert (refs == []) == excluded or len(token) > 12


def test_every_not_code_alternative_starts_or_ends_as_the_pre_check_assumes() -> None:
    for alternative in _NOT_CODE.pattern[4:-2].split("|"):
        first, last = alternative[0], alternative[-1]
        assert first in "CFQMHXA" or last in "PK" or alternative.startswith("\\d"), alternative
        if alternative.startswith("\\d"):
            assert last in "PK", alternative


def test_fast_reference_is_the_dataclass() -> None:
    fast = _make_ref("id", "CUST-1", 3, 9, "cust-1")
    plain = Reference("id", "CUST-1", 3, 9, "cust-1")
    assert type(fast) is Reference
    assert fast == plain and hash(fast) == hash(plain) and repr(fast) == repr(plain)
    assert dataclasses.asdict(fast) == dataclasses.asdict(plain)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.key = "x"  # type: ignore[misc]


def test_id_prefix_is_cut_at_the_first_separator_of_either_kind() -> None:
    ex = get_extractor(kinds=["id"])
    assert ex.extract("sha_256x-1 x") == []  # prefix "sha"
    assert [r.text for r in ex.extract("my-sha_256 x")] == ["my-sha_256"]
    assert ex.extract("v-12_ab3 x") == []


@pytest.mark.data
def test_extract_gives_the_plain_definition_on_real_runs(
    data_dir: Callable[[str], Path],
) -> None:
    folder = data_dir("tau_bench")
    from agentlens.ingest.openai_messages import read

    ex = get_extractor(list(_PATTERNS.values())[:3])
    texts = 0
    for path in sorted(folder.glob("*.json")):
        for trace in read(path):
            ev = Evidence(trace)
            for text in [t.text for t in ev.turns] + [i.text for i in ev.items]:
                assert _fields(ex.extract(text)) == _fields(_plain_extract(ex, text))
                texts += 1
    assert texts > 1000


_ASCII_PIECES = [p for p in _PIECES if p.isascii()] + ["\x1d", "\x1e", "\x0b", "\x0c", "\r"]
ascii_texts = st.lists(st.sampled_from(_ASCII_PIECES), max_size=40).map("".join)


@settings(max_examples=500, deadline=None)
@given(text=st.one_of(texts, st.text(alphabet=st.characters(codec="utf-8"), max_size=40)))
def test_the_led_trigger_finds_a_trigger_exactly_when_the_plain_one_does(text: str) -> None:
    plain = _TRIGGER.search(text) is not None
    assert (_TRIGGER_LED.search(text) is not None) == plain
    if text.isascii():
        assert (_TRIGGER_ASCII.search(text) is not None) == plain


def test_the_led_trigger_holds_each_kind_of_trigger() -> None:
    for text in ["x٣", "a@b", "see ://", "www.x", "Deadbeef-dead-", "9"]:
        assert _TRIGGER_LED.search(text) and _TRIGGER.search(text), text
    for text in ["", "hello", "a:/b", "ww.x", "deadbee-dead-", "deadbeef-dea-", "- . :"]:
        assert not _TRIGGER_LED.search(text) and not _TRIGGER.search(text), text


@pytest.mark.parametrize("kinds", [None, ["id", "code"], ["date", "money", "percent"]])
@settings(max_examples=400, deadline=None)
@given(text=ascii_texts)
def test_the_ascii_scan_finds_what_the_scan_finds_on_an_ascii_alike_text(
    kinds: list[str] | None, text: str
) -> None:
    ex = get_extractor(kinds=kinds)
    assert ex._scan is not None and ex._scan_ascii is not None
    alike = _ascii_alike(text)
    assert alike == (text.isascii() and not any(c in text for c in "\x1c\x1d\x1e\x1f"))
    if alike:
        spans = [(m.span(), m.lastgroup) for m in ex._scan_ascii.finditer(text)]
        assert spans == [(m.span(), m.lastgroup) for m in ex._scan.finditer(text)]


def test_the_ascii_scan_is_used_only_where_it_matches_alike() -> None:
    # \s matches the separator \x1c in Unicode mode only: the two modes read "March\x1c5"
    # differently, so such a text must take the Unicode scan (and does: the result is the plain
    # definition's).
    ex = get_extractor()
    assert ex._scan is not None and ex._scan_ascii is not None
    text = "on March\x1c5 and July 4"
    assert [m.span() for m in ex._scan.finditer(text)] != [
        m.span() for m in ex._scan_ascii.finditer(text)
    ]
    assert not _ascii_alike(text) and not _ascii_alike("é 5") and _ascii_alike("March 5")
    assert _fields(ex.extract(text)) == _fields(_plain_extract(ex, text))
    assert [r.text for r in ex.extract(text)] == ["March\x1c5", "July 4"]


_PROSE = [
    " ",
    "  ",
    "\t",
    "\n",
    "\xa0",
    "\u2003",
    "Thanks",
    "see",
    "the",
    "a",
    ",",
    ".",
    "Dec.",
    "USD",
]
prose_then_refs = st.tuples(st.lists(st.sampled_from(_PROSE), max_size=12).map("".join), texts).map(
    "".join
)


@pytest.mark.parametrize("kinds", [None, ["id", "code"], ["date", "money", "percent", "url"]])
@settings(max_examples=300, deadline=None)
@given(text=prose_then_refs)
def test_the_scan_starting_before_the_first_trigger_finds_every_match(
    kinds: list[str] | None, text: str
) -> None:
    """``extract`` starts its scan at the word before the first trigger's word: the matches are
    those of the expression over the whole text."""
    ex = get_extractor(kinds=kinds)
    assert _fields(ex.extract(text)) == _fields(_plain_extract(ex, text))


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("We met on  March \t 5, 2026.", ["March \t 5, 2026"]),
        ("due Dec.\n\n5 for USD\u20035 or US$ 12", ["Dec.\n\n5", "USD\u20035", "US$ 12"]),
        ("pay -$ 12 at www.example.com or a@b.co", ["-$ 12", "www.example.com", "a@b.co"]),
        ("id deadbeef-dead-beef-dead-beefdeadbeef ok", ["deadbeef-dead-beef-dead-beefdeadbeef"]),
        ("see x[3] and ABCDEFGHIJKLMNOP-12345", ["[3]", "ABCDEFGHIJKLMNOP-12345"]),
        ("5 items", []),
        ("12% of it", ["12%"]),
    ],
)
def test_the_scan_start_keeps_a_reference_led_by_a_word(text: str, found: list[str]) -> None:
    ex = get_extractor()
    assert [r.text for r in ex.extract(text)] == found
    assert _fields(ex.extract(text)) == _fields(_plain_extract(ex, text))
