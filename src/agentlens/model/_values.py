"""Turning arbitrary Python values into JSON faithfully, for capture."""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import decimal
import enum
import math
import re
import uuid
from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_INT_DIGITS", "json_int", "json_str", "to_jsonable"]

_MAX_DEPTH = 32

MAX_INT_DIGITS = 4300
"""The most decimal digits an integer may have to be recorded as a JSON number: what Python's
``json`` module and pydantic's parser read by default (``sys.get_int_max_str_digits()``).
A longer integer is recorded as ``{"type": "int", "repr": "<its decimal digits>"}``."""
_INT_BOUND = 10**MAX_INT_DIGITS
_MAX_INT_TEXT_BITS = 340_000
"""Integers up to this many bits (about 100,000 digits) are recorded with their digits; a longer
one as ``<unrepresentable: integer of N bits>`` (writing it out would cost the agent time)."""
_INT_CHUNK = 10**4000
_SURROGATE = re.compile("[\ud800-\udfff]")
"""A lone surrogate code point: text UTF-8 cannot encode, which no JSON writer can store."""


def json_str(text: str) -> str:
    """``text`` with every surrogate code point (which UTF-8 cannot encode, so no store or
    JSON file can hold) replaced by U+FFFD, the Unicode replacement character. Other text is
    returned as is (ASCII text without a scan)."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub("\ufffd", text)


def json_int(value: int) -> Any:
    """``value`` when every JSON reader can read it back, else its marked decimal form.

    An integer of more than :data:`MAX_INT_DIGITS` digits is recorded as
    ``{"type": "int", "repr": "<decimal digits>"}`` (one of more than about 100,000 digits as
    ``{"type": "int", "repr": "<unrepresentable: integer of N bits>"}``). Never raises.
    """
    if -_INT_BOUND < value < _INT_BOUND:
        return value
    bits = value.bit_length()
    if bits > _MAX_INT_TEXT_BITS:
        return {"type": "int", "repr": f"<unrepresentable: integer of {bits} bits>"}
    return {"type": "int", "repr": _decimal(value)}


def _decimal(value: int) -> str:
    """The decimal digits of an integer too long for ``str()`` (which refuses more than
    ``sys.get_int_max_str_digits()`` digits): written 4,000 digits at a time."""
    sign = "-" if value < 0 else ""
    value = abs(value)
    parts: list[str] = []
    while value >= _INT_CHUNK:
        value, rest = divmod(value, _INT_CHUNK)
        parts.append(str(rest).zfill(4000))
    parts.append(str(value))
    return sign + "".join(reversed(parts))


def to_jsonable(value: Any, _depth: int = 0) -> Any:
    """Return a JSON-ready copy of ``value``. Never raises.

    JSON values pass through; containers are converted element by element; pydantic models,
    dataclasses, enums, dates, UUIDs and Decimals get their natural JSON form; anything else is
    recorded as ``{"type": "module.Class", "repr": "..."}`` so nothing is lost silently.
    What no JSON reader could read back is recorded so that every reader can: an integer of
    more than :data:`MAX_INT_DIGITS` digits as ``{"type": "int", "repr": "<digits>"}``
    (:func:`json_int`), a lone surrogate in a string or key as U+FFFD (:func:`json_str`).
    """
    try:
        return _convert(value, _depth)
    except Exception as exc:  # a hostile __repr__ or __iter__ must not break capture
        return {"type": _type_name(value), "repr": f"<unrepresentable: {type(exc).__name__}>"}


def _convert(value: Any, depth: int) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return json_str(value)
    if isinstance(value, int):
        return json_int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return {"type": "float", "repr": repr(value)}
        return value
    if depth >= _MAX_DEPTH:
        return {"type": _type_name(value), "repr": _safe_repr(value)}
    # Elements go through to_jsonable (not _convert) so that one bad element is recorded as
    # unrepresentable on its own instead of spoiling its whole container.
    if isinstance(value, Mapping):
        return {json_str(str(k)): to_jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v, depth + 1) for v in value]
    if isinstance(value, enum.Enum):
        return _convert(value.value, depth + 1)
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return _safe_str(value)
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return {"type": "bytes", "base64": base64.b64encode(bytes(value)).decode("ascii")}
    dump = getattr(value, "model_dump", None)  # pydantic v2 models
    if callable(dump) and not isinstance(value, type):
        return _convert(dump(mode="json"), depth + 1)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _convert(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value)
        }
    return {"type": _type_name(value), "repr": _safe_repr(value)}


def _type_name(value: Any) -> str:
    t = type(value)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _safe_repr(value: Any) -> str:
    try:
        return json_str(repr(value))
    except Exception as exc:
        return f"<unrepresentable: {type(exc).__name__}>"


def _safe_str(value: Any) -> str:
    try:
        return json_str(str(value))
    except Exception as exc:  # a Decimal of more digits than str() writes
        return f"<unrepresentable: {type(exc).__name__}>"
