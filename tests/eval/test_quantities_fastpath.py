"""The kinds of the evidence numbers, computed by the fast paths as by the plain definitions.

``STANDALONE`` and the index's ``_NUMBER_WITH_SCALE`` are led by their first character (the
look-behind moved after it), the spelled counts are searched only in a text that holds one of
their words, and the kinds of a JSON key path are cached. Each is held here to the plain form,
written out as it was.
"""

from __future__ import annotations

import re
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentlens.eval import _quantities
from agentlens.eval._index import _NUMBER_WITH_SCALE
from agentlens.eval._quantities import (
    _COUNT_KEY,
    _MONEY_KEY,
    _RATE_KEY,
    _SPELLED,
    _SPELLED_COUNT,
    _WEAK_MONEY_KEY,
    COUNT,
    MONEY,
    NUMBER,
    RATE,
    STANDALONE,
    Quantities,
    _key_kinds,
    _kinds_at,
    _spelled_value,
    quantities,
)
from agentlens.eval._references import _NUM

_PLAIN_STANDALONE = re.compile(rf"(?<![\w.,/:#-]){_NUM}(?![\w/:-]|[.,]\d)")
_PLAIN_WITH_SCALE = re.compile(
    rf"(?<![\w.]){_NUM}\s?(?:thousand|million|billion|trillion|bn|[kKmMbB])\b"
)

_PIECES = [
    *"0123456789 .,-/:#_x$%\n",
    "1,834.20",
    "12,500",
    ".5",
    "٣",
    " million",
    "k",
    " bn",
    "two ",
    "Six bags",
    "\u017fix bags",
    "three passengers",
    "EIGHT nights",
    "per night",
]
_TEXT = st.lists(st.sampled_from(_PIECES), max_size=24).map("".join)


@settings(max_examples=1500, deadline=None)
@given(_TEXT)
@example("a1,834.20 .5x 1,834.205 12 -3 #4 5/6 7:8 9-")
def test_the_led_number_expressions_are_the_plain_ones(text: str) -> None:
    assert STANDALONE.findall(text) == _PLAIN_STANDALONE.findall(text)
    assert [m.span() for m in STANDALONE.finditer(text)] == [
        m.span() for m in _PLAIN_STANDALONE.finditer(text)
    ]
    assert [m.span() for m in _NUMBER_WITH_SCALE.finditer(text)] == [
        m.span() for m in _PLAIN_WITH_SCALE.finditer(text)
    ]


def _plain_text_kinds(text: str, out: Quantities) -> None:
    for m in _PLAIN_STANDALONE.finditer(text):
        start, end = m.span()
        value = float(m.group(0).replace(",", ""))
        out.add(value, _kinds_at(text, start, end, whole=value.is_integer()))
    for m in _SPELLED_COUNT.finditer(text):
        out.counts.add(float(_spelled_value(m.group(1))))


def _plain_key_kinds(keys: tuple[str, ...]) -> set[str]:
    for key in reversed(keys):
        kinds = set()
        if _RATE_KEY.search(key):
            kinds.add(RATE)
        if _COUNT_KEY.search(key):
            kinds.add(COUNT)
        if _MONEY_KEY.search(key):
            kinds.add(MONEY)
        if not kinds and _WEAK_MONEY_KEY.search(key):
            kinds.add(MONEY)
        if kinds:
            return kinds
    return {NUMBER}


def _plain_quantities(value: Any, text: str) -> Quantities:
    out = Quantities()
    if isinstance(value, str) or value is None:
        _plain_text_kinds(text, out)
        return out
    stack: list[tuple[Any, tuple[str, ...]]] = [(value, ())]
    while stack:
        item, keys = stack.pop()
        if isinstance(item, bool) or item is None:
            continue
        if isinstance(item, int | float):
            out.add(float(abs(item)), _plain_key_kinds(keys))
        elif isinstance(item, str):
            _plain_text_kinds(item, out)
        elif isinstance(item, dict):
            stack.extend((v, (*keys[-3:], str(k).lower())) for k, v in item.items())
        elif isinstance(item, list | tuple):
            if len(item) >= 2:
                out.counts.add(float(len(item)))
            stack.extend((v, keys) for v in item)
    return out


@settings(max_examples=1000, deadline=None)
@given(_TEXT)
@example("Six bags, \u017fix bags, two  checked bags, EIGHT nights")
def test_text_kinds_are_the_plain_ones(text: str) -> None:
    fast, plain = quantities(text, text), _plain_quantities(text, text)
    assert (fast.kinds, fast.counts) == (plain.kinds, plain.counts)


_KEYS = st.sampled_from(
    ["price", "unit_price", "total", "passengers", "Seats", "rate", "id", "x", "count_per_day"]
)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(0, 1e6) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=600, deadline=None)
@given(_JSON)
def test_json_kinds_are_the_plain_ones(value: Any) -> None:
    fast, plain = quantities(value, ""), _plain_quantities(value, "")
    assert (fast.kinds, fast.counts) == (plain.kinds, plain.counts)


@given(st.lists(_KEYS | st.text(max_size=6), max_size=5).map(tuple))
def test_cached_key_kinds_are_the_plain_ones(keys: tuple[str, ...]) -> None:
    assert _key_kinds(keys) == _plain_key_kinds(keys)
    assert isinstance(_key_kinds(keys), frozenset)  # shared by the cache: never mutable


def test_the_spelled_words_are_those_of_the_expression() -> None:
    # the prefilter looks for these words; the expression's group lists the same ones
    words = _SPELLED_COUNT.pattern.split("(", 1)[1].split(")", 1)[0].split("|")
    assert sorted(words) == sorted(_SPELLED) == sorted(_quantities._SPELLED_WORDS)


def test_a_spelled_count_with_a_long_s_is_six() -> None:
    # "ſix" matches "six" when case is ignored; it used to raise a KeyError
    assert quantities("ſix bags and SIX seats", "ſix bags and SIX seats").counts == {6.0}
    assert _spelled_value("ſeven") == 7 and _spelled_value("Two") == 2
