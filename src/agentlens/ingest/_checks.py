"""Checks shared by the importers: text no store can hold, and the size of what one record holds.

JSON can spell a lone surrogate (``"\\ud800"``), which UTF-8, and so every store and every JSON
file agentlens writes, cannot encode. A record holding one is bad input: the importers report it
as a :class:`~agentlens.errors.FormatError` naming the file, the line and the field, so that
``import --skip-invalid`` leaves out that run alone. The check costs one scan of the raw text
for a ``\\uD800``-``\\uDFFF`` escape; only a record that has one is walked.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, BinaryIO

from pydantic_core import from_json

from agentlens.errors import FormatError

__all__ = [
    "MAX_NESTING",
    "MAX_RECORD_BYTES",
    "SURROGATE_ESCAPE",
    "SURROGATE_REASON",
    "check_surrogates",
    "deep_path",
    "parse_nested_json",
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


def parse_nested_json(text: str | bytes) -> Any:
    """A JSON text found inside a record (tool-call arguments, a state string), parsed.

    Parsed with pydantic's parser, which refuses what no store could hold back (a lone
    surrogate, an integer of more than 4,300 digits, nesting deeper than 200 levels) along with
    malformed JSON; ``NaN`` and ``Infinity`` are read as Python reads them.

    Raises:
        ValueError: the text is not JSON, or holds one of those (callers keep the text).
    """
    return from_json(text, allow_inf_nan=True)


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
