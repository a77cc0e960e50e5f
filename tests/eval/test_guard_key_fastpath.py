"""The loop guard's call key (``loop_rule(...).call_key``) equals exactly for the calls whose
normalised arguments are equal: the rule of ``repeated_tool_calls``, whose call fingerprint is
the digest of :func:`canonical_json`.

The key is read off the arguments' own JSON text when that text shows nothing
:func:`canonical` would rewrite (the common case), else computed from the canonical form. Both
ways are held here to the plain definition: the JSON text of the canonical form.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentlens.capture._run import jsonable
from agentlens.eval._normalize import canonical, canonical_json
from agentlens.eval.detectors._transcript import _KEY_TEXT_MAX, loop_rule

call_key = loop_rule({}).call_key


def _expected(tool: str, args: Any) -> Any:
    """The key by its definition: the canonical form, always normalised, then written."""
    canon = canonical(args)
    try:
        text = orjson.dumps(canon, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        text = json.dumps(
            canon, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=repr
        )
    if len(text) <= _KEY_TEXT_MAX:
        return (tool, text)
    return (tool, hashlib.sha1(text.encode("utf-8", "surrogatepass")).digest(), len(text))


_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),  # NaN and infinities are recorded as objects by capture
    st.text(max_size=12),  # every code point, lone surrogates included
    st.text(alphabet=" ab{[]}.0e+-,:\"'\\\t", max_size=10),  # what the text tests look at
    st.sampled_from(
        [
            "  a \t b \n c  \r\n",
            '{"b": 1, "a": [1.0, 2e-9, 1e300]}',
            " [1, 2]",
            "[1, 2",
            "x.0",
            "1e+16",
            "a\x7fb",
            "\xa0y\u2003z\x1c",
            "é ü 漢字",
        ]
    ),
    st.sampled_from([10.0, -0.0, 1e16, 2.0**63, 1e22, 1.5e-7, 1e-5, 0.1, 2.5]),
)
_KEYS = st.one_of(
    st.text(max_size=4), st.sampled_from([" id", "id", "id ", "{k", "a b"]), st.integers(0, 3)
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(_KEYS, inner, max_size=4),
    ),
    max_leaves=24,
)


@settings(max_examples=2000, deadline=None)
@given(_VALUES)
@example({"customer_id": "CUST-1-2", "fields": ["name", "tier"]})
@example({"limit": 10.0, "q": "x.0"})
@example({"q": "a  b", "r": " a", "s": "a "})
@example({"q": "a  b"})  # each rewrite of white space alone
@example({"q": " a"})
@example({"q": "a "})
@example({"q": '{"a": 1}', "r": "[1]", "s": "{not json"})
@example({"ids": "[1,2]"})  # JSON given as text: parsed
@example(["{}", "{x"])
@example({"n": 2**64, "f": 1e-7})
@example({"s": "a\ud800b"})
@example({"x": "y" * 600})
def test_the_key_is_the_canonical_text_whichever_way_it_is_computed(value: Any) -> None:
    args = jsonable(value)  # what the guard is given: the arguments as capture records them
    assert call_key("search", args) == _expected("search", args)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"q": "SFO JFK", "n": 2}, {"n": 2.0, "q": "  SFO \t JFK "}),
        ({"q": {"from": "SFO"}}, {"q": '{"from":  "SFO"}'}),
        ({"ids": [1, 2]}, {"ids": "[1, 2.0]"}),
        ({"s": "a\nb"}, {"s": "a  \r\nb"}),
        ({"x": 10**20}, {"x": 10**20}),
    ],
)
def test_equal_after_normalisation_means_the_same_key(a: Any, b: Any) -> None:
    assert canonical_json(a) == canonical_json(b)
    assert call_key("t", jsonable(a)) == call_key("t", jsonable(b))


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"q": "SFO JFK"}, {"q": "SFO  JFK!"}),
        ({"q": "a b"}, {"q": "ab"}),
        ({"n": 1}, {"n": True}),
        ({"n": 1}, {"n": "1"}),
        ({"n": None}, {}),
        ({"ids": [1, 2]}, {"ids": [2, 1]}),
        ({"s": "if x:\n    y"}, {"s": "if x:\ny"}),  # indentation at a line start is kept
        ({"x": "y" * 600}, {"x": "y" * 599 + "z"}),
    ],
)
def test_different_after_normalisation_means_another_key(a: Any, b: Any) -> None:
    assert canonical_json(a) != canonical_json(b)
    assert call_key("t", jsonable(a)) != call_key("t", jsonable(b))
    assert call_key("t", jsonable(a)) != call_key("u", jsonable(a))  # another tool
