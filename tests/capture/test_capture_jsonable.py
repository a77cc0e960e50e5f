"""The fast JSON copy used on the hot path agrees with ``to_jsonable`` on every value."""

from __future__ import annotations

import datetime as dt
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


def test_self_referencing_containers_terminate() -> None:
    loop: list[Any] = []
    loop.append(loop)
    mapping: dict[str, Any] = {}
    mapping["self"] = mapping
    assert _same(jsonable(loop), to_jsonable(loop))
    assert _same(jsonable(mapping), to_jsonable(mapping))
