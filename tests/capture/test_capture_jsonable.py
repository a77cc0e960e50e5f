"""The fast JSON copy used on the hot path agrees with ``to_jsonable`` on every value."""

from __future__ import annotations

import datetime as dt
import json
import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agentlens.capture._run import jsonable
from agentlens.model import to_jsonable

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**4299, max_value=10**4301).map(lambda n: n * (-1) ** (n % 2)),
    st.text(st.characters(codec=None, min_codepoint=0xD7F0, max_codepoint=0xE010), max_size=4),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.binary(max_size=4),
    st.dates(),
    st.datetimes(timezones=st.just(dt.UTC)),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(st.one_of(st.text(max_size=4), st.integers()), children, max_size=4),
    ),
    max_leaves=20,
)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


@given(values)
def test_fast_path_matches_to_jsonable(value: Any) -> None:
    assert _same(jsonable(value), to_jsonable(value))


@given(values)
def test_every_value_becomes_json_every_reader_reads_back(value: Any) -> None:
    for copy in (jsonable(value), to_jsonable(value)):
        text = json.dumps(copy, ensure_ascii=False, allow_nan=False, default=str)
        text.encode("utf-8")  # no lone surrogate
        json.loads(text)  # no integer longer than the reader's limit


def test_huge_integers_are_kept_as_marked_decimal_text() -> None:
    big = 10**5000
    expected = {"type": "int", "repr": "1" + "0" * 5000}
    assert jsonable({"n": [big]}) == {"n": [expected]}
    assert to_jsonable(-big) == {"type": "int", "repr": "-1" + "0" * 5000}
    assert jsonable(10**4300 - 1) == 10**4300 - 1  # 4,300 digits: still a number
    assert jsonable(10**4300) == {"type": "int", "repr": "1" + "0" * 4300}
    huge = to_jsonable(1 << 400_000)
    assert huge == {"type": "int", "repr": "<unrepresentable: integer of 400001 bits>"}


def test_lone_surrogates_become_replacement_characters() -> None:
    assert jsonable({"k\ud800": ["a\udfffb", "ok"]}) == {"k\ufffd": ["a\ufffdb", "ok"]}
    assert to_jsonable(("\ud83d\ude00",)) == ["\ufffd\ufffd"]  # an unpaired pair, in Python
    assert jsonable("caf\u00e9 \U0001f600") == "caf\u00e9 \U0001f600"


def test_self_referencing_containers_terminate() -> None:
    loop: list[Any] = []
    loop.append(loop)
    mapping: dict[str, Any] = {}
    mapping["self"] = mapping
    assert _same(jsonable(loop), to_jsonable(loop))
    assert _same(jsonable(mapping), to_jsonable(mapping))
