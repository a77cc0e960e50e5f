"""The canonical form's fast paths give exactly what the plain definitions give.

:func:`canonical_json` serialises with orjson and falls back to ``json.dumps`` where orjson would
write other text; :func:`canonical` dispatches on exact types and collapses white space with
``str.split``. Each is held here to its plain definition: ``json.dumps(canonical(v),
sort_keys=True, ensure_ascii=False, separators=(",", ":"))``, and a recursive ``isinstance``
walk with ``re.sub(r"\\s+", " ", ...)``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentlens.eval._normalize import canonical, canonical_json, fingerprint

_WS = re.compile(r"\s+")
_TRAILING = re.compile(r"[ \t\f\v]+$", re.MULTILINE)
_INNER = re.compile(r"(?<=\S)[ \t\f\v]{2,}|(?<=\S)[\t\f\v]")


def _plain(value: Any, depth: int = 0) -> Any:
    """The canonical form as first written: one ``isinstance`` chain, regular expressions."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return repr(value)
        return int(value) if value.is_integer() and abs(value) < 2**63 else value
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "[") and depth < 64:
            try:
                parsed = json.loads(stripped)
            except (ValueError, RecursionError):
                pass
            else:
                if isinstance(parsed, dict | list):
                    return _plain(parsed, depth + 1)
        if "\n" not in stripped and "\r" not in stripped:
            return _WS.sub(" ", stripped)
        text = stripped.replace("\r\n", "\n").replace("\r", "\n")
        return _INNER.sub(" ", _TRAILING.sub("", text))
    if depth >= 64:
        return repr(value)
    if isinstance(value, dict):
        out = {str(k).strip(): _plain(v, depth + 1) for k, v in value.items()}
        if len(out) < len(value):
            ordered = sorted(value.items(), key=lambda kv: str(kv[0]))
            out = {str(k).strip(): _plain(v, depth + 1) for k, v in ordered}
        return out
    if isinstance(value, list | tuple):
        return [_plain(v, depth + 1) for v in value]
    return _WS.sub(" ", repr(value).strip())


def _plain_json(value: Any) -> str:
    return json.dumps(
        _plain(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=repr
    )


_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),  # NaN, infinities, subnormals, exponents both ways
    st.text(max_size=12),  # every code point, lone surrogates included
    st.sampled_from(
        [
            "  a \t b \n c  \r\n",
            '{"b": 1, "a": [1.0, 2e-9, 1e300]}',
            "[1, 2",
            "\xa0y\u2003z\x1c",
            "\u2028line\u2029",
            "1e-7",
            "é ü 漢字",
        ]
    ),
)
_KEYS = st.one_of(st.text(max_size=4), st.sampled_from([" id", "id", "id "]), st.integers(0, 3))
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(_KEYS, inner, max_size=4),
    ),
    max_leaves=24,
)


@settings(max_examples=1500, deadline=None)
@given(_VALUES)
@example({"x": 1e-7, "y": 1.5e-5, "z": 1e22})  # orjson writes these exponents otherwise
@example({"n": 2**64, "m": -(2**63) - 1})  # past 64 bits: orjson refuses
@example({"s": "a\ud800b"})  # a lone surrogate: orjson refuses
@example([1.0, -0.0, 2.5, 123456789.123, 0.1 + 0.2, 9.999e15, 1e16 + 2.0])
def test_canonical_json_is_json_dumps_of_the_plain_canonical_form(value: Any) -> None:
    assert repr(canonical(value)) == repr(_plain(value))
    assert canonical_json(value) == _plain_json(value)
    digest = hashlib.sha1(_plain_json(value).encode("utf-8", "surrogatepass")).hexdigest()
    assert fingerprint(value) == digest


def test_deep_nesting_and_objects_are_the_plain_forms() -> None:
    deep: list[Any] = []
    cursor = deep
    for _ in range(100):
        inner: list[Any] = []
        cursor.extend([{"s": " a  b ", "f": 1.5e-9}, inner])
        cursor = inner
    odd = {"set": {1, 2}, "bytes": b"a  b", 3: object.__name__, "t": (1.0, "x\ty")}
    for value in (deep, odd, "[" * 200 + "]" * 200):
        assert canonical_json(value) == _plain_json(value)
