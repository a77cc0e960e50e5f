"""Turning arbitrary Python values into JSON faithfully, for capture."""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import decimal
import enum
import uuid
from collections.abc import Mapping
from typing import Any

__all__ = ["to_jsonable"]

_MAX_DEPTH = 32


def to_jsonable(value: Any, _depth: int = 0) -> Any:
    """Return a JSON-ready copy of ``value``. Never raises.

    JSON values pass through; containers are converted element by element; pydantic models,
    dataclasses, enums, dates, UUIDs and Decimals get their natural JSON form; anything else is
    recorded as ``{"type": "module.Class", "repr": "..."}`` so nothing is lost silently.
    """
    try:
        return _convert(value, _depth)
    except Exception as exc:  # a hostile __repr__ or __iter__ must not break capture
        return {"type": _type_name(value), "repr": f"<unrepresentable: {type(exc).__name__}>"}


def _convert(value: Any, depth: int) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return {"type": "float", "repr": repr(value)}
        return value
    if depth >= _MAX_DEPTH:
        return {"type": _type_name(value), "repr": _safe_repr(value)}
    # Elements go through to_jsonable (not _convert) so that one bad element is recorded as
    # unrepresentable on its own instead of spoiling its whole container.
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v, depth + 1) for v in value]
    if isinstance(value, enum.Enum):
        return _convert(value.value, depth + 1)
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
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
        return repr(value)
    except Exception as exc:
        return f"<unrepresentable: {type(exc).__name__}>"
