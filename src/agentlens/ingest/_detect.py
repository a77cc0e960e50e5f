"""Telling a file's format from its content, for ``agentlens import`` without ``--format``.

:func:`detect` reads a sample of the file (the first records of a JSON Lines file, or the
document of a JSON file) and looks for the shape each format has and the others lack:

============== =====================================================================
format          recognised by
============== =====================================================================
trace           an object with ``steps`` (a list) or ``schema_version`` and no key of
                another format, or with ``input`` / ``output`` and only trace keys
openai          a list of chat messages (``role`` + ``content``), or an object holding one
                under ``messages`` / ``traj`` / ``conversation``; a list of those
transcript      objects whose ``type`` is ``tool_use``, ``tool_result``, ``text``,
                ``thinking``, ``user`` or ``system``, with ``content`` or ``metadata`` and
                no ``message``
swe-agent       an object with ``trajectory`` (entries with ``action``), or ``history``
                with ``info`` / ``environment``, or a history of SWE-agent messages
                (``message_type`` / ``agent``)
openhands       a list of events (``action`` / ``observation``), or objects whose
                ``history`` is such a list
who-and-when    an object whose ``history`` is ``{role, content}`` messages, with
                ``question`` or ``mistake_agent``
claude-code     records with a Claude Code ``type`` (``user``, ``assistant``, ``summary``,
                ``queue-operation``...) and ``message`` / ``sessionId`` / ``uuid``; or an
                object with ``loglines``
otlp-json       an object with ``resourceSpans`` (an OTLP/JSON export request)
============== =====================================================================

When no format fits, or two records of one file fit different formats, :func:`detect` raises a
:class:`~agentlens.errors.FormatError` that names every format it tried. A file that starts
like JSON but is broken (malformed or truncated before any record could be read) is given to
the trace reader, whose errors name the line and column of the damage; a record whose keys are
all trace-format fields goes to the trace reader too, which says what is wrong with it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agentlens.errors import FormatError
from agentlens.ingest._agentlog import decode_json, open_binary
from agentlens.ingest.claude_code import BOOKKEEPING_RECORDS, CONVERSATION_RECORDS

__all__ = ["DETECTABLE", "MAX_SAMPLE_BYTES", "detect", "foreign_keys", "json_value_kind"]

DETECTABLE = (
    "trace",
    "openai",
    "transcript",
    "swe-agent",
    "openhands",
    "who-and-when",
    "claude-code",
    "otlp-json",
)
"""The formats :func:`detect` recognises, in the order it names them."""

MAX_SAMPLE_BYTES = 64 << 20
"""A JSON (not JSONL) document larger than this is not parsed to find its format."""

_SAMPLE_LINES = 20
"""JSON Lines records looked at."""

_TRACE_KEYS = frozenset(
    {
        "schema_version",
        "id",
        "project",
        "agent",
        "name",
        "status",
        "started_at",
        "ended_at",
        "input",
        "output",
        "metadata",
        "links",
        "steps",
    }
)
_TRANSCRIPT_TYPES = frozenset({"tool_use", "tool_result", "text", "thinking", "user", "system"})
# Claude Code's conversation and bookkeeping records, and the SDK's closing ``result`` record.
_CLAUDE_TYPES = CONVERSATION_RECORDS | BOOKKEEPING_RECORDS | {"result"}
_CLAUDE_KEYS = frozenset({"message", "sessionId", "session_id", "uuid", "parentUuid", "leafUuid"})
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_MESSAGE_LISTS = ("messages", "traj", "conversation", "trajectory")

_FOREIGN: dict[str, str] = {
    "messages": "openai",
    "traj": "openai",
    "conversation": "openai",
    "trajectory": "swe-agent",
    "history": "swe-agent, openhands or who-and-when",
    "loglines": "claude-code",
    "sessionId": "claude-code",
    "parentUuid": "claude-code",
    "leafUuid": "claude-code",
    "message": "claude-code",
    "resourceSpans": "otlp-json",
    "action": "openhands",
    "observation": "openhands",
    "role": "openai",
    "content": "transcript or openai",
    "type": "transcript or claude-code",
}
"""Top-level keys that a trace-format run never has and that another format's records do."""


_KINDS = {
    bool: "a JSON boolean",
    int: "a JSON number",
    float: "a JSON number",
    str: "a JSON string",
}


def json_value_kind(head: bytes) -> str | None:
    """What the JSON value ``head`` starts with is (``a JSON number``, ``a JSON string``...),
    when it is a whole value that is not an object or an array; else ``None`` (not JSON, or cut
    off within the bytes given). What follows the first value is not looked at."""
    try:
        text = head.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        text = head[: exc.start].decode("utf-8")
    try:
        value, _ = json.JSONDecoder().raw_decode(text.lstrip("\ufeff \t\r\n"))
    except (ValueError, RecursionError):
        return None
    if value is None:
        return "JSON null"
    return _KINDS.get(type(value))


def foreign_keys(record: dict[str, Any]) -> list[tuple[str, str]]:
    """The keys of a would-be trace-format run that belong to another format, with that format.

    ``type`` counts only when it is a string (transcript and Claude Code records), ``content``
    only without ``steps``.
    """
    found: list[tuple[str, str]] = []
    for key, fmt in _FOREIGN.items():
        if key not in record:
            continue
        if key == "type" and not isinstance(record[key], str):
            continue
        if key == "content" and "steps" in record:
            continue
        found.append((key, fmt))
    return found


def detect(path: Path) -> str:
    """The format of the file at ``path``: one of :data:`DETECTABLE`.

    Raises:
        FormatError: the file cannot be read, is not JSON, or fits no format (or two); the
            message names the formats tried.
    """
    name = str(path)  # as given, like the trace reader: several files may share a name
    if not path.is_file():
        return "trace"  # missing, a folder...: the trace reader words the error
    sample = _sample(path, name)
    if sample is None:
        return "trace"  # broken JSON: the trace reader says where
    records, shape = sample
    found: list[tuple[int, str]] = []
    for index, record in enumerate(records):
        fmt = _classify(record, shape)
        if fmt is not None:
            found.append((index, fmt))
    formats = {fmt for _, fmt in found}
    if len(formats) > 1:
        (i, a), (j, b) = found[0], next(x for x in found if x[1] != found[0][1])
        where = "line" if shape == "jsonl" else "item"
        raise FormatError(
            f"mixed formats: {where} {i + 1} looks like {a}, {where} {j + 1} like {b}; "
            "give --format NAME",
            source=name,
        )
    if not formats:
        raise FormatError(
            f"cannot tell the format: {_describe(records, shape)}; tried "
            f"{', '.join(DETECTABLE)}; give --format NAME",
            source=name,
        )
    return formats.pop()


# -- sampling ---------------------------------------------------------------------------------


def _sample(path: Path, name: str) -> tuple[list[Any], str] | None:
    """The records to look at and the file's shape (``jsonl``, ``array`` or ``object``), or
    ``None`` when the file is broken JSON from its first record on."""
    with open_binary(path) as handle:
        head = handle.read(1 << 16)
        body = head.lstrip(b"\xef\xbb\xbf \t\r\n")
        if not body:
            raise FormatError("empty file: no runs", source=name)
        first = body[:1]
        if first not in (b"[", b"{"):
            kind = json_value_kind(body)
            if kind is not None:
                what = f"it is {kind}, not a run or a list of runs (nor records of another format)"
            else:
                what = f"not JSON (starts with {first.decode('utf-8', errors='replace')!r})"
            raise FormatError(
                f"cannot tell the format: {what}; tried {', '.join(DETECTABLE)}",
                source=name,
                line=1,
            )
        handle.seek(0)
        lines = _jsonl_sample(handle, name)
        if lines is not None:
            return lines, "jsonl"
        handle.seek(0)
        raw = handle.read(MAX_SAMPLE_BYTES + 1)
    if len(raw) > MAX_SAMPLE_BYTES:
        raise FormatError(
            f"a JSON document over {MAX_SAMPLE_BYTES >> 20} MiB is not read to find its "
            "format; give --format NAME",
            source=name,
        )
    try:
        doc = decode_json(raw, name)
    except FormatError:
        return None
    if isinstance(doc, list):
        return doc[:_SAMPLE_LINES] if not _is_message_list(doc) else [doc], "array"
    return [doc], "object"


def _jsonl_sample(handle: Any, name: str) -> list[Any] | None:
    """The first records of a JSON Lines file, or ``None`` when it is one JSON document."""
    records: list[Any] = []
    lineno = 0
    for raw in handle:
        lineno += 1
        text = raw.strip()
        if lineno == 1:
            text = text.lstrip(b"\xef\xbb\xbf")
        if not text:
            continue
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            if not records:
                return None  # the first line is not a whole value: a pretty-printed document
            break  # a broken line: judge by the lines before it (the reader reports it)
        if not records and isinstance(value, list):
            return None  # a one-line JSON array: read as a document
        records.append(value)
        if len(records) >= _SAMPLE_LINES:
            break
    return records


# -- classifying ------------------------------------------------------------------------------


def _is_message(value: Any) -> bool:
    return isinstance(value, dict) and value.get("role") in _ROLES and "type" not in value


def _is_message_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(_is_message(m) for m in value)


def _is_event(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and "role" not in value
        and (isinstance(value.get("action"), str) or isinstance(value.get("observation"), str))
    )


def _classify(record: Any, shape: str) -> str | None:
    if _is_message_list(record):
        return "openai"
    if not isinstance(record, dict):
        return None
    keys = record.keys()
    if "$schema" in keys:
        return None  # a JSON Schema describes a format; it is not a log
    if isinstance(record.get("resourceSpans"), list):
        return "otlp-json"
    if isinstance(record.get("loglines"), list):
        return "claude-code"
    kind = record.get("type")
    if isinstance(kind, str):
        if kind in _CLAUDE_TYPES and keys & _CLAUDE_KEYS:
            return "claude-code"
        if kind in _TRANSCRIPT_TYPES and ("content" in keys or "metadata" in keys):
            return "transcript"
    trajectory = record.get("trajectory")
    if isinstance(trajectory, list) and (
        not trajectory or any(isinstance(e, dict) and "action" in e for e in trajectory)
    ):
        return "swe-agent"
    history = record.get("history")
    if isinstance(history, list):
        return _classify_history(record, history)
    for key in _MESSAGE_LISTS:
        if _is_message_list(record.get(key)):
            return "openai"
    if shape == "array" and _is_event(record):
        return "openhands"
    if isinstance(record.get("steps"), list) or "schema_version" in keys:
        return None if foreign_keys(record) else "trace"
    if keys and keys <= _TRACE_KEYS:
        return "trace"  # only trace fields: the trace reader checks them
    return None


def _classify_history(record: dict[str, Any], history: list[Any]) -> str | None:
    items = [m for m in history if isinstance(m, dict)]
    if items and any(_is_event(m) for m in items):
        return "openhands"
    if "info" in record or "environment" in record:
        return "swe-agent"
    if items and any("message_type" in m or "agent" in m for m in items):
        return "swe-agent"
    if "question" in record or "mistake_agent" in record:
        return "who-and-when"
    if not history and ("instance_id" in record or "instruction" in record):
        return "openhands"
    return None


def _describe(records: Iterable[Any], shape: str) -> str:
    items = list(records)
    if not items:
        return "no records"
    first = items[0]
    what = {"jsonl": "its first line", "array": "its first item", "object": "it"}[shape]
    if isinstance(first, dict):
        if "$schema" in first:
            return f"{what} is a JSON Schema, not a log"
        keys = ", ".join(sorted(first)[:8]) + (", ..." if len(first) > 8 else "")
        return f"{what} is an object with keys {keys or '(none)'}"
    if isinstance(first, list):
        return f"{what} is an array"
    if first is None:
        return f"{what} is JSON null"
    return f"{what} is {_KINDS.get(type(first), type(first).__name__)}"
