"""A bounded reader of Python literals, for logs that print Python values instead of JSON.

SWE-agent writes a step's ``state`` (and at times its ``tool_calls``) as the ``repr`` of a dict:
``{'open_file': '/repo/a.py', 'working_dir': '/repo'}``. :func:`ast.literal_eval` reads that but
builds a whole syntax tree first: a 10 MB string took 87 s and 4.8 GB. :func:`parse_literal`
reads the same values (dicts, lists, tuples, sets are read as lists, strings, bytes as text,
numbers, ``True``/``False``/``None``) in one pass with a regular-expression tokenizer, in
memory proportional to the text, and refuses anything else, any text longer than
:data:`MAX_LITERAL_CHARS`, or nesting deeper than :data:`~agentlens.ingest._checks.MAX_NESTING`.
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any

from agentlens.ingest._checks import MAX_NESTING, surrogate_path

__all__ = ["MAX_LITERAL_CHARS", "parse_literal"]

MAX_LITERAL_CHARS = 4 << 20
"""The longest text read as a Python literal; a longer one is kept as text."""

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<str>[rRbBuU]{0,2}(?:'[^'\\\n]*(?:\\.[^'\\\n]*)*'|"[^"\\\n]*(?:\\.[^"\\\n]*)*"))
    | (?P<num>[-+]?0[xX][0-9a-fA-F_]+|[-+]?0[oO][0-7_]+|[-+]?0[bB][01_]+
              |[-+]?(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][-+]?\d+)?j?)
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<punct>[{}\[\](),:])
    )""",
    re.VERBOSE | re.DOTALL,
)
_END = re.compile(r"\s*")
_CLOSE = {"{": "}", "[": "]", "(": ")"}
_NAMES: dict[str, Any] = {"True": True, "False": False, "None": None}
_MAX_NUMBER_CHARS = 4300


class _Refused(ValueError):
    pass


def parse_literal(text: str) -> Any:
    """The Python literal ``text`` spells, as JSON-ready values (tuples and sets as lists,
    bytes as text).

    Raises:
        ValueError: ``text`` is not such a literal, is longer than :data:`MAX_LITERAL_CHARS`,
            or nests deeper than the importers allow.
    """
    if len(text) > MAX_LITERAL_CHARS:
        raise _Refused(f"longer than {MAX_LITERAL_CHARS} characters")
    tokens = _tokens(text)
    value, index = _value(tokens, 0, 1)
    if index != len(tokens):
        raise _Refused("extra text after the literal")
    return value


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    end = len(text)
    while True:
        pos = _END.match(text, pos).end()  # type: ignore[union-attr]
        if pos >= end:
            return out
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise _Refused(f"not a Python literal at character {pos}")
        kind = match.lastgroup
        assert kind is not None
        out.append((kind, match.group(kind)))
        pos = match.end()


def _value(tokens: list[tuple[str, str]], i: int, depth: int) -> tuple[Any, int]:
    if i >= len(tokens):
        raise _Refused("the literal ends early")
    kind, text = tokens[i]
    if kind == "str":
        parts = [_string(text)]
        i += 1
        while i < len(tokens) and tokens[i][0] == "str":  # adjacent literals concatenate
            parts.append(_string(tokens[i][1]))
            i += 1
        return "".join(parts), i
    if kind == "num":
        return _number(text), i + 1
    if kind == "name":
        if text in _NAMES:
            return _NAMES[text], i + 1
        raise _Refused(f"not a literal: {text}")
    if text not in _CLOSE:
        raise _Refused(f"unexpected {text!r}")
    if depth > MAX_NESTING:
        raise _Refused(f"nested more than {MAX_NESTING} levels deep")
    close = _CLOSE[text]
    i += 1
    if text == "{":
        return _braces(tokens, i, depth)
    items: list[Any] = []
    while True:
        if i < len(tokens) and tokens[i][1] == close:
            return items, i + 1
        item, i = _value(tokens, i, depth + 1)
        items.append(item)
        if i < len(tokens) and tokens[i][1] == ",":
            i += 1
        elif i >= len(tokens) or tokens[i][1] != close:
            raise _Refused(f"expected ',' or {close!r}")


def _braces(tokens: list[tuple[str, str]], i: int, depth: int) -> tuple[Any, int]:
    """A dict (``{k: v, ...}``) or a set (``{a, b}``, read as a list), after its ``{``."""
    mapping: dict[str, Any] = {}
    members: list[Any] = []
    while True:
        if i < len(tokens) and tokens[i][1] == "}":
            return (members if members else mapping), i + 1
        first, i = _value(tokens, i, depth + 1)
        if i < len(tokens) and tokens[i][1] == ":" and not members:
            value, i = _value(tokens, i + 1, depth + 1)
            if isinstance(first, dict | list):
                raise _Refused("a dict key must be a string, number, bool or None")
            mapping[first if isinstance(first, str) else _key(first)] = value
        elif not mapping:
            members.append(first)
        else:
            raise _Refused("expected ':' in a dict")
        if i < len(tokens) and tokens[i][1] == ",":
            i += 1
        elif i >= len(tokens) or tokens[i][1] != "}":
            raise _Refused("expected ',' or '}'")


def _key(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _string(token: str) -> str:
    prefix = token[: len(token) - len(token.lstrip("rRbBuU"))]
    body = token[len(prefix) + 1 : -1]
    if "\\" not in body:
        return body
    if "r" in prefix.lower():
        return body
    try:
        value = ast.literal_eval(token)  # one string token: linear, a tiny syntax tree
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise _Refused("a malformed string literal") from None
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    text = str(value)
    if surrogate_path(text) is not None:
        raise _Refused("a string with a lone surrogate")
    return text


def _number(token: str) -> Any:
    if len(token) > _MAX_NUMBER_CHARS:
        raise _Refused("a number too long to read")
    text = token.replace("_", "")
    if text.endswith("j"):
        raise _Refused("a complex number")
    try:
        if re.fullmatch(r"[-+]?\d+", text):
            return int(text)
        if re.fullmatch(r"[-+]?0[xXoObB][0-9a-fA-F]+", text):
            return int(text, 0)
        value = float(text)
    except ValueError:
        raise _Refused(f"not a number: {token}") from None
    return value if math.isfinite(value) else None
