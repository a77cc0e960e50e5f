"""OpenAI chat-message conversations (format ``openai``), e.g. tau-bench trajectories.

A file holds one conversation, a JSON array of conversations, or JSON Lines with one
conversation per line. A conversation is either a list of chat messages or an object whose
``messages`` (or ``traj``, as in tau-bench's historical trajectories) is that list; the object's
other fields (``reward``, ``task_id``, ``info``...) are kept in the run's ``metadata``, and its
``id`` (or ``conversation_id``), ``agent``, ``name`` and ``created_at``/``started_at`` are used
when present.

Messages map to steps in order:

- ``system`` and ``developer`` messages -> ``system`` steps; ``user`` -> ``user`` steps;
- an ``assistant`` message's content -> a ``text`` step (its ``refusal`` too);
- each of its ``tool_calls`` (and a legacy ``function_call``) -> a ``tool`` step named after
  the function, with the parsed JSON ``arguments`` as ``input``, and as ``output`` the content
  of the ``tool`` message whose ``tool_call_id`` matches (parsed when it is JSON); a legacy
  ``function`` message fills the latest open call of that name;
- a ``tool`` message that answers no call becomes a ``tool`` step of its own;
- a tool result that reports a failure is the step's ``error``, not its ``output``: text
  starting ``Error:`` (tau-bench's ``Error: payment method not found``), ``Exception:`` or a
  Python traceback, and a JSON object whose only key is ``error``.

``run.input`` is the first user message; ``run.output`` the last assistant text. Content given
as a list of parts keeps its text parts (other parts are noted in ``attributes``).

JSON Lines are streamed line by line. A JSON document (one conversation, or an array) is parsed
whole, so it is limited to 64 MiB; convert a larger one to JSON Lines. Run ids are
deterministic (file name, position, content), so importing a file twice replaces the runs.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentlens.errors import FormatError
from agentlens.ingest._agentlog import decode_json, open_binary, parse_time, run_id, source_name
from agentlens.ingest._checks import parse_nested_json, record_lines
from agentlens.model import Step, StepKind, Trace

__all__ = ["MAX_DOCUMENT_BYTES", "read"]

MAX_DOCUMENT_BYTES = 64 << 20
"""The largest JSON (not JSONL) document parsed whole."""

_MESSAGE_LISTS = ("messages", "traj", "trajectory", "conversation")
_FAILURE = re.compile(r"\s*(?:error|exception)\s*:|\s*Traceback \(most recent call last\)", re.I)
"""A tool result that reports a failure (tau-bench's tools answer ``Error: ...``)."""
_ROLES = {"system", "developer", "user", "assistant", "tool", "function"}


def read(path: Path) -> Iterator[Trace]:
    """Stream the conversations in ``path`` as runs.

    Raises:
        FormatError: the file cannot be read, is not JSON/JSONL, or a conversation or message has
            the wrong shape (the message names the file, line and field).
    """
    path = Path(path)
    name = source_name(path)
    with open_binary(path) as handle:
        head = handle.read(4096)
        first = head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
        if not first:
            raise FormatError("empty file", source=name)
        if first not in (b"[", b"{"):
            raise FormatError("not JSON: expected '[' or '{'", source=name, line=1)
        handle.seek(0)
        if first == b"{" and _looks_like_jsonl(head):
            yield from _read_jsonl(handle, name)
            return
        raw = handle.read(MAX_DOCUMENT_BYTES + 1)
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise FormatError(
            f"a JSON document over {MAX_DOCUMENT_BYTES >> 20} MiB is not read whole; "
            "write one conversation per line (JSON Lines)",
            source=name,
        )
    data = decode_json(raw, name)
    if isinstance(data, list) and data and all(_is_message(m) for m in data):
        yield _conversation(data, name, 0, None, "")
    elif isinstance(data, list):
        for i, conv in enumerate(data):
            yield _conversation(conv, name, i, None, f"[{i}]")
    else:
        yield _conversation(data, name, 0, None, "")


def _looks_like_jsonl(head: bytes) -> bool:
    """True when the first line is a complete JSON value (JSON Lines), not the start of one
    pretty-printed document."""
    line = head.lstrip(b"\xef\xbb\xbf \t\r\n").split(b"\n", 1)[0]
    if not line.strip():
        return False
    try:
        json.loads(line)
    except ValueError:
        # A first line longer than the peek cannot be judged here: JSONL lines are long,
        # pretty-printed documents' first lines are short.
        return len(line) >= len(head) - 1
    return True


def _read_jsonl(handle: Any, name: str) -> Iterator[Trace]:
    index = 0
    for lineno, line in record_lines(handle, name):
        text = line.strip()
        if lineno == 1:
            text = text.lstrip(b"\xef\xbb\xbf")
        if not text:
            continue
        conv = decode_json(text, name, lineno)
        yield _conversation(conv, name, index, lineno, "")
        index += 1


def _is_message(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("role"), str)


def _conversation(conv: Any, source: str, index: int, line: int | None, where: str) -> Trace:
    fields: dict[str, Any] = {}
    if isinstance(conv, list):
        messages = conv
        key = ""
    elif isinstance(conv, dict):
        key = next((k for k in _MESSAGE_LISTS if isinstance(conv.get(k), list)), "")
        if not key:
            raise FormatError(
                "a conversation must be a list of messages or an object with 'messages'",
                source=source,
                line=line,
                field=where or None,
            )
        messages = conv[key]
        fields = {k: v for k, v in conv.items() if k != key}
    else:
        raise FormatError(
            f"a conversation must be a list or an object, not {type(conv).__name__}",
            source=source,
            line=line,
            field=where or None,
        )
    prefix = f"{where}.{key}" if key else where
    steps = _steps(messages, source, line, prefix)
    digest = hashlib.sha256(
        json.dumps(conv, sort_keys=True, ensure_ascii=False, default=str).encode()
    ).digest()
    started_at = parse_time(
        fields.get("started_at", fields.get("created_at")),
        source=source,
        line=line,
        field=f"{where}.started_at".lstrip("."),
    )
    explicit_id = fields.pop("id", None) or fields.pop("conversation_id", None)
    agent = fields.pop("agent", None)
    name = fields.pop("name", None)
    if name is None and "task_id" in fields:
        name = f"task {fields['task_id']}"
        if "trial" in fields:
            name += f" trial {fields['trial']}"
    metadata: dict[str, Any] = {"source_format": "openai", "source": source}
    metadata.update(fields)
    user_text = next((s.output for s in steps if s.kind is StepKind.USER), None)
    output = next(
        (
            s.output
            for s in reversed(steps)
            if s.kind is StepKind.TEXT and s.output not in (None, "")
        ),
        None,
    )
    return Trace(
        id=str(explicit_id)
        if explicit_id
        else run_id("openai", source, str(index), digest, started_at=started_at),
        agent=agent if isinstance(agent, str) else None,
        name=str(name) if name is not None else None,
        started_at=started_at,
        input=user_text,
        output=output,
        metadata=metadata,
        steps=steps,
    )


def _content(value: Any, source: str, line: int | None, field: str) -> tuple[Any, dict[str, Any]]:
    """A message's content as text (parts joined) and attributes for non-text parts."""
    if value is None or isinstance(value, str):
        return value, {}
    if isinstance(value, list):
        texts: list[str] = []
        other: list[str] = []
        for part in value:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part, dict):
                other.append(str(part.get("type", "unknown")))
            else:
                raise FormatError(
                    "a content part must be an object", source=source, line=line, field=field
                )
        return "\n".join(texts), ({"content_parts": other} if other else {})
    if isinstance(value, dict):
        return value, {}
    raise FormatError(
        f"content must be a string or a list of parts, not {type(value).__name__}",
        source=source,
        line=line,
        field=field,
    )


def _parse_json(value: Any) -> Any:
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("{", "[", '"') or text in ("true", "false", "null") or _is_number(text):
            try:
                return parse_nested_json(text)
            except ValueError:
                return value
    return value


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return text not in ("nan", "inf", "-inf", "NaN", "Infinity", "-Infinity")


def _failure(content: Any, parsed: Any) -> Any:
    """The error a tool result reports, or ``None`` when it is a result."""
    if isinstance(content, str) and _FAILURE.match(content):
        return content
    if isinstance(parsed, dict) and set(parsed) == {"error"} and parsed["error"] not in (None, ""):
        return parsed["error"]
    return None


def _steps(messages: list[Any], source: str, line: int | None, prefix: str) -> list[Step]:
    steps: list[Step] = []
    open_calls: dict[str, Step] = {}
    open_functions: dict[str, Step] = {}

    def add(kind: StepKind, **fields: Any) -> Step:
        step = Step(id=f"s{len(steps) + 1}", kind=kind, **fields)
        steps.append(step)
        return step

    for i, message in enumerate(messages):
        field = f"{prefix}[{i}]".lstrip(".")
        if not isinstance(message, dict):
            raise FormatError("a message must be an object", source=source, line=line, field=field)
        role = message.get("role")
        if role not in _ROLES:
            raise FormatError(
                f"unknown role {role!r}; expected one of {', '.join(sorted(_ROLES))}",
                source=source,
                line=line,
                field=f"{field}.role",
            )
        content, attributes = _content(message.get("content"), source, line, f"{field}.content")
        speaker = message.get("name") if isinstance(message.get("name"), str) else None
        if role in ("system", "developer"):
            if role == "developer":
                attributes["role"] = "developer"
            add(StepKind.SYSTEM, name=speaker, output=content, attributes=attributes)
        elif role == "user":
            add(StepKind.USER, name=speaker, output=content, attributes=attributes)
        elif role == "assistant":
            if content not in (None, ""):
                add(StepKind.TEXT, name=speaker, output=content, attributes=attributes)
            if isinstance(message.get("refusal"), str) and message["refusal"]:
                add(
                    StepKind.TEXT,
                    name=speaker,
                    output=message["refusal"],
                    attributes={"refusal": True},
                )
            calls = message.get("tool_calls") or []
            if not isinstance(calls, list):
                raise FormatError(
                    "tool_calls must be a list",
                    source=source,
                    line=line,
                    field=f"{field}.tool_calls",
                )
            for j, call in enumerate(calls):
                cfield = f"{field}.tool_calls[{j}]"
                if not isinstance(call, dict):
                    raise FormatError(
                        "a tool call must be an object", source=source, line=line, field=cfield
                    )
                nested = call.get("function")
                function: dict[str, Any] = nested if isinstance(nested, dict) else call
                fname = function.get("name")
                if not isinstance(fname, str):
                    raise FormatError(
                        "a tool call needs a function name",
                        source=source,
                        line=line,
                        field=f"{cfield}.function.name",
                    )
                call_id = call.get("id")
                step = add(
                    StepKind.TOOL,
                    name=fname,
                    input=_parse_json(function.get("arguments")),
                    attributes={"tool_call_id": call_id} if call_id else {},
                )
                if isinstance(call_id, str):
                    open_calls[call_id] = step
            legacy = message.get("function_call")
            if isinstance(legacy, dict) and isinstance(legacy.get("name"), str):
                step = add(
                    StepKind.TOOL, name=legacy["name"], input=_parse_json(legacy.get("arguments"))
                )
                open_functions[legacy["name"]] = step
        else:  # tool or function result
            call_id = message.get("tool_call_id")
            target = open_calls.pop(call_id, None) if isinstance(call_id, str) else None
            if target is None and role == "function" and speaker in open_functions:
                target = open_functions.pop(speaker)
            output = _parse_json(content)
            error = _failure(content, output)
            if error is not None:
                output = None
            if target is not None:
                target.output = output
                target.error = error
                target.attributes.update(attributes)
            else:
                extra = dict(attributes)
                if call_id:
                    extra["tool_call_id"] = call_id
                add(StepKind.TOOL, name=speaker, output=output, error=error, attributes=extra)
    return steps
