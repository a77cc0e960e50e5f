"""Checks shared by the importers: text no store can hold, and the size of what one record holds.

JSON can spell a lone surrogate (``"\\ud800"``), which UTF-8, and so every store and every JSON
file agentlens writes, cannot encode. A record holding one is bad input: the importers report it
as a :class:`~agentlens.errors.FormatError` naming the file, the line and the field, so that
``import --skip-invalid`` leaves out that run alone. The check costs one scan of the raw text
for a ``\\uD800``-``\\uDFFF`` escape; only a record that has one is walked.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any, BinaryIO

from pydantic_core import from_json

from agentlens.errors import FormatError

__all__ = [
    "MAX_NESTING",
    "MAX_RECORD_BYTES",
    "NONFINITE_REASON",
    "OVERFLOW_REASON",
    "SURROGATE_ESCAPE",
    "SURROGATE_REASON",
    "check_nonfinite",
    "check_surrogates",
    "deep_path",
    "json_error_reason",
    "may_be_nonfinite",
    "may_overflow",
    "nonfinite_path",
    "nonfinite_problem",
    "parse_nested_json",
    "storable_problem",
    "surrogate_path",
]

MAX_NESTING = 200
"""The deepest a value inside an imported record may nest (objects and arrays). A store writes
values up to about 250 levels deep, counting the record's own levels; pydantic's JSON parser,
which reads stores and files, stops at 200."""

SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
"""A JSON escape of a surrogate code point (paired or not: decoding tells)."""
SURROGATE_REASON = (
    "a string holds a lone surrogate (an unpaired \\ud800-\\udfff escape), which UTF-8 "
    "cannot encode"
)
_ESCAPE = SURROGATE_ESCAPE
_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


MAX_RECORD_BYTES = 256 << 20
"""The most an importer holds of one record: one line of a JSON Lines file, or a file that is
one document (a trajectory, a transcript). A longer one is a format error naming the line, not
a process that grows until the machine runs out of memory."""


def _too_large(source: str, line: int | None, what: str) -> FormatError:
    return FormatError(
        f"{what} is larger than {MAX_RECORD_BYTES >> 20} MiB, the most one record may hold",
        source=source,
        line=line,
    )


def read_record(handle: BinaryIO, source: str, head: bytes = b"") -> bytes:
    """The rest of ``handle`` after ``head`` (already read), as one record.

    Raises:
        FormatError: it is larger than :data:`MAX_RECORD_BYTES`.
    """
    limit = MAX_RECORD_BYTES
    data = head + handle.read(max(limit + 1 - len(head), 0))
    if len(data) > limit:
        raise _too_large(source, None, "the document")
    return data


def record_lines(handle: BinaryIO, source: str) -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` of a JSON Lines file, from line 1.

    Raises:
        FormatError: a line is larger than :data:`MAX_RECORD_BYTES` (naming it).
    """
    number = 0
    while True:
        line = handle.readline(MAX_RECORD_BYTES + 1)
        if not line:
            return
        number += 1
        if len(line) > MAX_RECORD_BYTES:
            raise _too_large(source, number, "the line")
        yield number, line


def surrogate_path(value: Any) -> str | None:
    """The dotted path (``steps[2].output.text``) of the first string or key in ``value`` that
    holds a lone surrogate, ``""`` when ``value`` itself is such a string, or ``None``.

    Iterative, so any depth of nesting is fine.
    """
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and _SURROGATE.search(item):
                return path
        elif isinstance(item, dict):
            children = []
            for key, child in item.items():
                where = f"{path}.{key}" if path else str(key)
                if isinstance(key, str) and not key.isascii() and _SURROGATE.search(key):
                    return where
                children.append((child, where))
            stack.extend(reversed(children))
        elif isinstance(item, list):
            stack.extend((child, f"{path}[{i}]") for i, child in reversed(list(enumerate(item))))
    return None


def deep_path(value: Any, limit: int = MAX_NESTING) -> str | None:
    """The dotted path of the first array or object in ``value`` nested more than ``limit``
    levels deep (``value`` itself is level 1), or ``None``; a path longer than 60 characters
    is cut with an ellipsis. Iterative."""
    stack: list[tuple[Any, str, int]] = [(value, "", 1)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, dict):
            if depth > limit:
                return path if len(path) <= 60 else path[:59] + "…"
            stack.extend((v, f"{path}.{k}" if path else str(k), depth + 1) for k, v in item.items())
        elif isinstance(item, list):
            if depth > limit:
                return path if len(path) <= 60 else path[:59] + "…"
            stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(item))
    return None


OVERFLOW_REASON = (
    "a number too large for a 64-bit float: it would be read as Infinity, which is not valid "
    "JSON and which no store can hold"
)
NONFINITE_REASON = "NaN and Infinity are not valid JSON, and no store can hold them"
_FOLD_DIGITS = bytes.maketrans(b"123456789E+", b"000000000ee")
_LONG_DIGITS = b"0" * 200
_ZERO = ord("0")
_E = ord("e")
_NUMBER_END = frozenset(b",]} \t\r\n")
_NUMBER_TOKEN = re.compile(
    rb"(?<![\w.+-])-?(?:NaN|Infinity|[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)(?![\w.])"
)


def may_overflow(raw: bytes) -> bool:
    """False when no number literal in the JSON text ``raw`` can overflow a 64-bit float.

    One that does has an exponent of three digits or more after a digit, and ends where a
    number may end (``1e999,``, ``1.5E+0400}``), or 200 digits in a row followed by a fraction
    or an exponent (``1000...0.0``). Text in a string rarely looks like that (a hexadecimal id
    such as ``"…0e4736"`` ends with a quote); what does is cleared by :func:`nonfinite_path`.
    Costs one ``bytes.translate`` and two substring searches, about 2 ns a byte, unless one of
    them hits.
    """
    folded = raw.translate(_FOLD_DIGITS)  # digits to 0, E to e, + to e: 1E+999 is 0ee000
    if b"e000" not in folded and _LONG_DIGITS not in folded:
        return False
    size = len(folded)
    at = folded.find(b"e000")
    while at != -1:
        end = at + 4
        while end < size and folded[end] == _ZERO:
            end += 1
        before = at - 1 if at > 0 and folded[at - 1] != _E else at - 2  # past a sign
        if before >= 0 and folded[before] == _ZERO and (end == size or folded[end] in _NUMBER_END):
            return True
        at = folded.find(b"e000", end)
    at = folded.find(_LONG_DIGITS)
    while at != -1:
        end = at + len(_LONG_DIGITS)
        while end < size and folded[end] == _ZERO:
            end += 1
        if end < size and folded[end] in b".e":
            return True
        at = folded.find(_LONG_DIGITS, end)
    return False


def may_be_nonfinite(raw: bytes) -> bool:
    """False when the JSON text ``raw`` can hold no NaN, Infinity or number that overflows a
    float (``1e999``); True when it may (one in a string may look like one)."""
    return b"NaN" in raw or b"Infinity" in raw or may_overflow(raw)


def nonfinite_path(value: Any) -> str | None:
    """The dotted path of the first float in ``value`` that is NaN or infinite (what an
    overflowing literal such as ``1e999`` decodes to), ``""`` when ``value`` itself is one, or
    ``None``. Iterative, so any depth of nesting is fine."""
    found = _nonfinite(value)
    return None if found is None else found[0]


def nonfinite_problem(value: Any, *, literal: bool) -> tuple[str, str] | None:
    """The dotted path of the first NaN or infinite float in ``value``, with the reason, or
    ``None``. Iterative. For a caller whose parser reads NaN and Infinity (the server's JSON
    API; the importers refuse those literals as malformed JSON), after :func:`may_be_nonfinite`
    said its text may hold one: ``literal`` says that text spells ``Infinity``, else an
    infinity is worded as a number that overflowed (``1e999``)."""
    found = _nonfinite(value)
    if found is None:
        return None
    path, number = found
    overflow = math.isinf(number) and not literal
    return path, OVERFLOW_REASON if overflow else NONFINITE_REASON


def _nonfinite(value: Any) -> tuple[str, float] | None:
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        kind = type(item)
        if kind is float:
            if not math.isfinite(item):
                return path, item
        elif kind is dict:
            stack.extend(
                reversed([(v, f"{path}.{k}" if path else str(k)) for k, v in item.items()])
            )
        elif kind is list:
            stack.extend((child, f"{path}[{i}]") for i, child in reversed(list(enumerate(item))))
    return None


def _nonfinite_line(raw: bytes, base_line: int) -> int | None:
    """The line of the first NaN, Infinity or overflowing number literal in ``raw`` (one in a
    string may be named instead: a guess, as for a surrogate)."""
    for match in _NUMBER_TOKEN.finditer(raw):
        token = match.group()
        if token.lstrip(b"-").isdigit():
            continue  # an integer: JSON reads it as one, never as a float
        if not math.isfinite(float(token)):
            return base_line + raw.count(b"\n", 0, match.start())
    return None


def check_nonfinite(
    value: Any, raw: str | bytes, *, source: str, line: int | None, base_line: int = 1
) -> None:
    """Raise when ``value`` (decoded from ``raw``) holds NaN, an infinity, or a number that
    overflowed to one (``1e999``): a value no store can hold (it would be written as null).

    Args:
        value: the decoded JSON.
        raw: the text it was decoded from (looked at first, so that most records are not
            walked).
        source: the file's name, for the error.
        line: the line of the record, when known; else the line of the first such number in
            ``raw`` (counted from ``base_line``) is named.

    Raises:
        FormatError: naming the file, line and field.
    """
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if not may_be_nonfinite(data):
        return
    problem = nonfinite_problem(value, literal=False)  # an infinity: worded as 1e999 is
    if problem is None:
        return
    path, reason = problem
    if line is None:
        line = _nonfinite_line(data, base_line)
    raise FormatError(reason, source=source, line=line, field=path or None)


_MAX_INT_DIGITS = 4300
_INT_TOO_LONG = re.compile(r"integer string conversion.*?value has (\d+) digits")


def json_error_reason(exc: ValueError) -> str:
    """What a JSON parser's ``ValueError`` means, worded for someone who cannot change the
    program: an integer too long to read (Python's message suggests
    ``sys.set_int_max_str_digits()``) says so; any other error is given as it is."""
    text = str(exc)
    found = _INT_TOO_LONG.search(text)
    if found is not None or "integer string conversion" in text:
        digits = f"of {int(found.group(1)):,} digits " if found is not None else ""
        return f"an integer {digits}is too long to read: the most is {_MAX_INT_DIGITS:,} digits"
    return text


def parse_nested_json(text: str | bytes) -> Any:
    """A JSON text found inside a record (tool-call arguments, a state string), parsed.

    Parsed with pydantic's parser, which refuses what no store could hold back (a lone
    surrogate, an integer of more than 4,300 digits, nesting deeper than 200 levels) along with
    malformed JSON; ``NaN``, ``Infinity`` and a number that overflows to it (``1e999``) are
    refused too (a store would write them as null).

    Raises:
        ValueError: the text is not JSON, or holds one of those (callers keep the text).
    """
    value = from_json(text, allow_inf_nan=True)
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if may_be_nonfinite(data) and nonfinite_path(value) is not None:
        raise ValueError("NaN or Infinity")
    return value


def check_surrogates(
    value: Any, raw: str | bytes, *, source: str, line: int | None, base_line: int = 1
) -> None:
    """Raise when ``value`` (decoded from ``raw``) holds a lone surrogate.

    Args:
        value: the decoded JSON.
        raw: the text it was decoded from (scanned for a surrogate escape first).
        source: the file's name, for the error.
        line: the line of the record, when known; else the line of the first escape in ``raw``
            (counted from ``base_line``) is named.

    Raises:
        FormatError: naming the file, line and field.
    """
    found = (_ESCAPE_BYTES if isinstance(raw, bytes) else _ESCAPE).search(raw)  # type: ignore[arg-type]
    if found is None:
        return
    path = surrogate_path(value)
    if path is None:
        return  # an escaped backslash followed by "ud800": plain text
    if line is None:
        newline: Any = b"\n" if isinstance(raw, bytes) else "\n"
        line = base_line + raw.count(newline, 0, found.start())
    raise FormatError(
        SURROGATE_REASON,
        source=source,
        line=line,
        field=path or None,
    )


def storable_problem(value: Any, raw: bytes) -> tuple[str, str] | None:
    """The field and the reason when ``value``, decoded from ``raw``, holds what no store can
    hold: a lone surrogate (``"\\ud800"``, which UTF-8 cannot encode) or arrays and objects
    nested more than :data:`MAX_NESTING` levels deep; else ``None``. ``raw`` is scanned first
    (for a surrogate escape, for enough brackets), so an ordinary value is not walked; the
    importer's readers check the same while they parse, the server's run API with this."""
    if _ESCAPE_BYTES.search(raw) is not None:
        path = surrogate_path(value)
        if path is not None:
            return path, SURROGATE_REASON
    if raw.count(b"[") + raw.count(b"{") > MAX_NESTING:
        path = deep_path(value)
        if path is not None:
            return path, f"nested more than {MAX_NESTING} levels deep"
    return None
