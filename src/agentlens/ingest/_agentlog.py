"""Helpers shared by the importers of agent logs (transcript, SWE-agent, OpenHands, Who&When).

Run ids of imported logs are deterministic, so that importing a file twice replaces the runs
instead of adding copies: they keep the ULID layout of :mod:`agentlens._ids` (26 characters of
Crockford base32) with the run's start time in the first 48 bits, so they still sort by time,
and a hash of the source (file name, position in the file, content) in the last 80 bits.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from pydantic_core import from_json

from agentlens._ids import new_id
from agentlens.errors import FormatError
from agentlens.ingest._checks import (
    MAX_NESTING,
    check_nonfinite,
    check_surrogates,
    deep_path,
    json_error_reason,
    parse_nested_json,
    read_record,
)

__all__ = [
    "decode_json",
    "load_json",
    "open_binary",
    "parse_json_text",
    "parse_time",
    "run_id",
    "source_name",
]

_NUMERIC = re.compile(r"^-?\d+(\.\d+)?$")


def run_id(*parts: str | bytes, started_at: datetime | None = None) -> str:
    """A deterministic, time-sortable run id from the run's start and the given source parts.

    Args:
        parts: what identifies the run in its source: the file's name, the run's position in
            the file, a digest of its content.
        started_at: the run's start; runs without one sort first (time 0).
    """
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8") if isinstance(part, str) else part)
        digest.update(b"\x00")
    ms = int(started_at.timestamp() * 1000) if started_at is not None else 0
    ms = max(0, min(ms, (1 << 48) - 1))
    return new_id(ms, entropy=digest.digest())


def source_name(path: Path) -> str:
    """The file's name as shown in errors and used in run ids (not its folder, so that a moved
    file keeps its run ids)."""
    return path.name


def parse_time(value: Any, *, source: str, line: int | None, field: str) -> datetime | None:
    """Parse an ISO 8601 time or epoch seconds (or milliseconds); a time without an offset is UTC.

    Raises:
        FormatError: the value is neither (the message names the file, line and field).
    """
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise FormatError(f"not a time: {value!r}", source=source, line=line, field=field)
    if isinstance(value, str) and _NUMERIC.match(value.strip()):
        value = float(value)
    if isinstance(value, int | float):
        seconds = float(value) / 1000.0 if value > 1e11 else float(value)
        try:
            return datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise FormatError(
                f"not a time: {value!r}", source=source, line=line, field=field
            ) from None
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise FormatError(
                f"not an ISO 8601 time: {value!r}", source=source, line=line, field=field
            ) from None
        try:
            return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
        except OverflowError:
            raise FormatError(
                f"time {value!r} is out of range in UTC: its offset takes it outside the years "
                "1 to 9999",
                source=source,
                line=line,
                field=field,
            ) from None
    raise FormatError(f"not a time: {value!r}", source=source, line=line, field=field)


def open_binary(path: Path) -> BinaryIO:
    """``path`` opened for reading bytes.

    Raises:
        FormatError: the file cannot be read (naming the path as given).
    """
    try:
        return path.open("rb")
    except OSError as exc:
        raise FormatError(f"cannot read: {exc.strerror or exc}", source=str(path)) from None


def decode_json(raw: bytes, source: str, line: int | None = None) -> Any:
    """The JSON value in ``raw`` (UTF-8, a byte-order mark allowed).

    Args:
        raw: one JSON document, or one line of a JSON Lines file.
        source: the file's name, for errors.
        line: the line of the file ``raw`` is, for JSON Lines; ``None`` for a whole document,
            whose errors name the line inside it.

    Raises:
        FormatError: not UTF-8, not JSON, nested more than 200 levels deep, or holding what no
            store can hold (a lone surrogate, an integer of more than 4,300 digits, NaN,
            Infinity or a number that overflows to it, such as ``1e999``).
    """
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise FormatError("not UTF-8 text", source=source, line=line) from None
    try:
        # pydantic's parser reads every document the standard one reads alike, and refuses
        # what a store could not hold back; the standard parser then words the error.
        value = from_json(text, allow_inf_nan=True)
    except ValueError:
        pass
    else:
        check_nonfinite(value, raw, source=source, line=line)
        return value
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        at = line if line is not None else exc.lineno
        raise FormatError(f"invalid JSON: {exc.msg}", source=source, line=at) from None
    except RecursionError:
        raise FormatError("invalid JSON: nested too deeply", source=source, line=line) from None
    except ValueError as exc:  # an integer too long to read
        raise FormatError(
            f"invalid JSON: {json_error_reason(exc)}", source=source, line=line
        ) from None
    check_surrogates(value, raw, source=source, line=line)
    path = deep_path(value)
    if path is not None:
        raise FormatError(
            f"nested more than {MAX_NESTING} levels deep", source=source, line=line, field=path
        )
    check_nonfinite(value, raw, source=source, line=line)
    return value


def load_json(path: Path) -> tuple[Any, bytes]:
    """The parsed JSON document in ``path`` and its raw bytes.

    Raises:
        FormatError: the file cannot be read or is not JSON (with the line of the error).
    """
    with open_binary(path) as handle:
        raw = read_record(handle, source_name(path))
    return decode_json(raw, source_name(path)), raw


def parse_json_text(value: Any) -> Any:
    """``value`` parsed when it is a string holding a JSON object or array, else unchanged."""
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("{", "["):
            try:
                return parse_nested_json(text)
            except ValueError:
                return value
    return value
