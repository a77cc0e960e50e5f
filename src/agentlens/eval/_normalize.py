"""Canonical forms and fingerprints of tool arguments and results, for comparing calls.

Two tool calls are "the same" when their canonical forms are equal. The canonical form ignores
what a model or a serialiser varies without changing the meaning:

- JSON key order (``{"a": 1, "b": 2}`` and ``{"b": 2, "a": 1}``);
- a JSON object or array given as a string (``'{"q": "x"}'`` and ``{"q": "x"}``);
- number formatting (``1``, ``1.0`` and ``1e0``);
- whitespace in strings: leading and trailing whitespace, trailing whitespace on each line,
  runs of spaces and tabs inside a line (``"a  b\\n"`` and ``"a b"``), and line endings
  (``\\r\\n`` and ``\\n``). Indentation at the start of a line is kept: in code it is meaning
  (found on Who&When logs, where re-indenting a script turned an ``IndentationError`` into a run).

Fingerprints are SHA-1 digests of the canonical JSON: cheap to compare and to keep, whatever the
size of a tool's output.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

import orjson

__all__ = [
    "canonical",
    "canonical_json",
    "fingerprint",
    "fingerprint_of_text",
    "is_empty_result",
    "json_container",
]

_TRAILING = re.compile(r"[ \t\f\v]+$", re.MULTILINE)
_INNER = re.compile(r"(?<=\S)[ \t\f\v]{2,}|(?<=\S)[\t\f\v]")
_MAX_DEPTH = 64

_EMPTY_TEXT = re.compile(
    r"""^[\s"'`.:;!()\[\]{}-]*(?:
        none|null|nil|n/?a|empty|\[\]|\{\}|
        no(?:thing)?(?:\s+(?:results?|matches|matching\s+\w+|data|records?|documents?|items?|
            entries|hits|files?|output|content|rows?))?(?:\s+(?:were\s+|was\s+)?(?:found|returned|available))?|
        (?:0|zero)\s+(?:results?|matches|records?|documents?|items?|hits|rows?)(?:\s+found)?|
        not\s+found
    )[\s"'`.:;!()\[\]{}-]*$""",
    re.IGNORECASE | re.VERBOSE,
)


def canonical(value: Any, _depth: int = 0) -> Any:
    """The canonical form of a JSON-like value (see the module docstring).

    Strings that hold a JSON object or array are parsed; other strings have their whitespace
    collapsed. Integral floats become ints; NaN and infinities become their names. Anything that is
    not JSON is represented by its ``repr``. Never raises.
    """
    return _canonical(value, _depth, [])


def _canonical(value: Any, depth: int, odd: list[float]) -> Any:
    """:func:`canonical`, appending to ``odd`` every float it keeps whose ``repr`` has an
    exponent (which :func:`canonical_json`'s fast serialiser writes differently). The exact types
    JSON decodes to are dispatched first; subclasses and other objects take
    :func:`_canonical_other`."""
    kind = type(value)
    if kind is str:
        return _string(value, depth, odd)
    if kind is dict:
        if depth >= _MAX_DEPTH:
            return repr(value)
        return _mapping(value, depth, odd)
    if kind is list:
        if depth >= _MAX_DEPTH:
            return repr(value)
        return [v if _is_plain(v) else _canonical(v, depth + 1, odd) for v in value]
    if kind is int or kind is bool or value is None:
        return value
    if kind is float:
        return _float(value, odd)
    return _canonical_other(value, depth, odd)


def _canonical_other(value: Any, depth: int, odd: list[float]) -> Any:
    if isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return _float(value, odd)
    if isinstance(value, str):
        return _string(value, depth, odd)
    if depth >= _MAX_DEPTH:
        return repr(value)
    if isinstance(value, dict):
        return _mapping(value, depth, odd)
    if isinstance(value, list | tuple):
        return [_canonical(v, depth + 1, odd) for v in value]
    return " ".join(repr(value).split())


def _float(value: float, odd: list[float]) -> Any:
    if math.isnan(value) or math.isinf(value):
        return repr(value)
    if value.is_integer() and abs(value) < 2**63:
        return int(value)
    if not _PLAIN_FLOAT_MIN <= abs(value) < _PLAIN_FLOAT_MAX:
        odd.append(value)
    return value


def _string(value: str, depth: int, odd: list[float]) -> Any:
    stripped = value.strip()
    parsed = json_container(stripped) if depth < _MAX_DEPTH else None
    if parsed is not None:
        return _canonical(parsed, depth + 1, odd)
    return _text(stripped)


def _mapping(value: dict[Any, Any], depth: int, odd: list[float]) -> dict[str, Any]:
    out = {
        str(k).strip(): v if _is_plain(v) else _canonical(v, depth + 1, odd)
        for k, v in value.items()
    }
    if len(out) < len(value):  # keys equal once stripped (" id", "id"): the same one wins
        ordered = sorted(value.items(), key=lambda kv: str(kv[0]))  # whatever their order
        out = {str(k).strip(): _canonical(v, depth + 1, odd) for k, v in ordered}
    return out


_SLOW_START = frozenset(" {[")


def _is_plain(value: Any) -> bool:
    """True when ``value`` is its own canonical form and :func:`_canonical` would say so without
    noting it in ``odd``: ``None``, a boolean, an integer, a one-line printable text with no
    space at either end, no double space, and no ``{`` or ``[`` to parse. (In a printable text
    the only white space is the space, so ``strip`` and :func:`_text` leave it as it is.)"""
    kind = type(value)
    if kind is str:
        return (
            value.isprintable()
            and "  " not in value
            and value[:1] not in _SLOW_START
            and value[-1:] != " "
        )
    return kind is int or kind is bool or value is None


def json_container(text: str) -> dict[str, Any] | list[Any] | None:
    """The JSON object or array that ``text`` (stripped) holds, else ``None`` (not JSON, a JSON
    scalar, or nested too deeply to parse)."""
    if text[:1] not in ("{", "["):
        return None
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return parsed if isinstance(parsed, dict | list) else None


def _text(text: str) -> str:
    if text.isprintable() and "  " not in text:
        # Nothing to collapse: every white-space character but the space is non-printable.
        return text
    if "\n" not in text and "\r" not in text:
        # The same as ``re.sub(r"\s+", " ", text)`` on a stripped text (both split on
        # ``str.isspace`` characters), several times faster.
        return " ".join(text.split())
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _INNER.sub(" ", _TRAILING.sub("", text))


_PLAIN_FLOAT_MIN = 1e-4
_PLAIN_FLOAT_MAX = 1e16
"""Floats in ``[1e-4, 1e16)`` are written without an exponent by ``repr``; orjson writes the
same shortest digits for them (and an exponent differently: ``1e-7`` for ``1e-07``)."""


def canonical_json(value: Any) -> str:
    """The canonical form as compact JSON with sorted keys: the text that is fingerprinted.

    Serialised by orjson (one C call, several times faster than ``json.dumps``), and by
    ``json.dumps`` whenever orjson would write something else: a float whose ``repr`` has an
    exponent, an integer past 64 bits, a lone surrogate. The text is the same either way.
    """
    odd: list[float] = []
    canon = _canonical(value, 0, odd)
    if not odd:
        try:
            return orjson.dumps(canon, option=orjson.OPT_SORT_KEYS).decode()
        except TypeError:  # orjson.JSONEncodeError: an int past 64 bits, a lone surrogate
            pass
    return json.dumps(
        canon, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=repr
    )


def fingerprint(value: Any) -> str:
    """A SHA-1 hex digest of :func:`canonical_json`: equal for values that are the same call."""
    return fingerprint_of_text(canonical_json(value))


def fingerprint_of_text(text: str) -> str:
    """:func:`fingerprint` of the value whose :func:`canonical_json` is ``text`` (for a caller
    that already has the text)."""
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


def is_empty_result(value: Any) -> bool:
    """True when a tool result carries nothing: ``None``, blank text, an empty list or object,
    an object whose every value is empty (``{"results": [], "total": 0}``), or a
    "no results" message (``"No results found."``, ``"[]"``, ``"0 matches"``)."""
    return _empty(value, 0)


def _empty(value: Any, depth: int) -> bool:
    if value is None:
        return True
    if isinstance(value, bool):
        return False
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return True
        if len(text) > 80:
            return False
        if text[:1] in ("{", "[") and depth < 4:
            try:
                return _empty(json.loads(text), depth + 1)
            except (ValueError, RecursionError):
                pass
        return _EMPTY_TEXT.match(text) is not None
    if isinstance(value, list | tuple):
        return len(value) == 0
    if isinstance(value, dict):
        if not value:
            return True
        if depth >= 4:
            return False
        return all(_empty_field(v, depth + 1) for v in value.values())
    return False


def _empty_field(value: Any, depth: int) -> bool:
    # Inside an object, a zero count goes with empty lists: {"results": [], "total": 0}.
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value == 0
    return _empty(value, depth)
