"""The transcript-event format: one agent run per file, one event per line.

Each line is a JSON object (a JSON array of the same objects is accepted too)::

    {"type": "tool_use", "content": "", "timestamp": "2026-11-29T10:00:02Z",
     "metadata": {"toolName": "search_knowledge", "args": "{\\"query\\": \\"brand voice\\"}"}}
    {"type": "tool_result", "content": "3 results", "timestamp": "2026-11-29T10:00:03Z",
     "metadata": {"toolName": "search_knowledge", "result": "[...]"}}
    {"type": "text", "content": "Here is the post...", "timestamp": "2026-11-29T10:00:09Z"}

Mapping:

- ``tool_use`` starts a ``tool`` step: ``name`` = ``metadata.toolName`` (required), ``input`` =
  ``metadata.args``, parsed when it is JSON text; ``started_at`` = the event's time.
- ``tool_result`` completes the earliest ``tool_use`` still waiting for its result (the earliest
  with the same ``toolName`` when the result names one): ``output`` = ``metadata.result``, else
  ``content``; ``ended_at`` = the event's time. With ``metadata.isError`` (or ``is_error``) true,
  or a ``metadata.error``, the result is the step's ``error``.
- ``text`` -> a ``text`` step; ``thinking`` -> a ``thinking`` step; ``user`` and ``system``
  (not in the seed format, accepted) -> ``user`` and ``system`` steps. The run's ``output`` is
  the last ``text``; its ``input`` the first ``user`` event.
- A ``tool_use`` never answered, or a ``tool_result`` with no ``tool_use`` before it, becomes a
  ``tool`` step with ``attributes.unpaired = true``.
- Fields of an event (or of its ``metadata``) that have no place in a step are kept in the
  step's ``attributes``; ``attributes.line`` is the event's line in the file.

The run id is derived from the file's name and content, so importing a file twice changes
nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from agentlens.errors import FormatError
from agentlens.ingest._agentlog import decode_json, open_binary, parse_time, run_id, source_name
from agentlens.ingest._checks import parse_nested_json, read_record, record_lines
from agentlens.model import Step, StepKind, Trace

__all__ = ["read"]

_TYPES = {
    "tool_use": StepKind.TOOL,
    "tool_result": StepKind.TOOL,
    "text": StepKind.TEXT,
    "thinking": StepKind.THINKING,
    "user": StepKind.USER,
    "system": StepKind.SYSTEM,
}
_EVENT_KEYS = {"type", "content", "metadata", "timestamp"}
_META_KEYS = {"toolName", "args", "result"}


def read(path: Path) -> Iterator[Trace]:
    """Read the one run in a transcript file.

    Raises:
        FormatError: the file cannot be read, or an event is malformed (file:line, field).
    """
    builder = _Builder(source_name(path))
    for line, event in _events(path, builder):
        builder.add(event, line)
    yield builder.trace()


def _events(path: Path, builder: _Builder) -> Iterator[tuple[int, Any]]:
    name = builder.source
    with open_binary(path) as handle:
        first = handle.read(4096)
        if first.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"[":
            raw = read_record(handle, name, first)
            builder.digest.update(raw)
            events = decode_json(raw, name)
            for i, event in enumerate(events):
                yield i + 1, event
            return
        handle.seek(0)
        for number, raw_line in record_lines(handle, name):
            builder.digest.update(raw_line)
            text = raw_line.strip()
            if number == 1:
                text = text.removeprefix(b"\xef\xbb\xbf")
            if not text:
                continue
            yield number, decode_json(text, name, number)


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return parse_nested_json(value)
        except ValueError:
            return value
    return value


class _Builder:
    """Accumulates the steps of one run as events arrive."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.digest = hashlib.sha256()
        self.steps: list[Step] = []
        self.pending: list[Step] = []
        self.times: list[datetime] = []
        self.output: Any = None
        self.input: Any = None

    def _error(self, reason: str, line: int, field: str | None = None) -> FormatError:
        return FormatError(reason, source=self.source, line=line, field=field)

    def _new_step(self, kind: StepKind, line: int, **fields: Any) -> Step:
        step = Step(id=f"s{len(self.steps) + 1}", kind=kind, **fields)
        step.attributes["line"] = line
        self.steps.append(step)
        return step

    def add(self, event: Any, line: int) -> None:
        if not isinstance(event, dict):
            raise self._error(f"an event must be a JSON object, got {type(event).__name__}", line)
        kind_name = event.get("type")
        if not isinstance(kind_name, str):
            raise self._error("missing or non-string event type", line, "type")
        if kind_name not in _TYPES:
            raise self._error(
                f"unknown event type {kind_name!r}; expected one of {', '.join(_TYPES)}",
                line,
                "type",
            )
        metadata = event.get("metadata")
        if metadata is None:
            metadata = {}
        if not isinstance(metadata, dict):
            raise self._error("metadata must be a JSON object", line, "metadata")
        when = parse_time(event.get("timestamp"), source=self.source, line=line, field="timestamp")
        if when is not None:
            self.times.append(when)
        extra = {k: v for k, v in event.items() if k not in _EVENT_KEYS}
        for key, value in metadata.items():
            if key not in _META_KEYS:
                extra[key if key not in extra else f"metadata.{key}"] = value
        content = event.get("content")
        tool_name = metadata.get("toolName")
        if tool_name is not None and not isinstance(tool_name, str):
            raise self._error("toolName must be a string", line, "metadata.toolName")

        if kind_name == "tool_use":
            if not tool_name:
                raise self._error("a tool_use needs metadata.toolName", line, "metadata.toolName")
            step = self._new_step(
                StepKind.TOOL,
                line,
                name=tool_name,
                input=_maybe_json(metadata.get("args")),
                started_at=when,
            )
            if content not in (None, ""):
                step.attributes["content"] = content
            step.attributes.update(extra)
            self.pending.append(step)
            return

        if kind_name == "tool_result":
            result = metadata.get("result", content)
            taken = self._take(tool_name)
            if taken is None:
                step = self._new_step(
                    StepKind.TOOL, line, name=tool_name or "unknown", started_at=when
                )
                step.attributes["unpaired"] = True
            else:
                step = taken
                step.attributes["result_line"] = line
            step.ended_at = when
            failed = bool(
                metadata.get("isError") or metadata.get("is_error") or event.get("is_error")
            )
            if "error" in metadata and metadata["error"] not in (None, "", False):
                failed = True
                step.error = metadata["error"]
                step.output = result
            elif failed:
                step.error = result
            else:
                step.output = result
            if "result" in metadata and content not in (None, "", result):
                step.attributes["result_content"] = content
            for key, value in extra.items():
                if key in ("isError", "is_error", "error"):
                    continue
                step.attributes[key if key not in step.attributes else f"result.{key}"] = value
            return

        kind = _TYPES[kind_name]
        step = self._new_step(kind, line, output=content, started_at=when, ended_at=when)
        if tool_name is not None:
            step.name = tool_name
        step.attributes.update(extra)
        if kind is StepKind.TEXT and content not in (None, ""):
            self.output = content
        elif kind is StepKind.USER and self.input is None:
            self.input = content

    def _take(self, tool_name: str | None) -> Step | None:
        for i, step in enumerate(self.pending):
            if tool_name is None or step.name == tool_name:
                return self.pending.pop(i)
        return None

    def trace(self) -> Trace:
        if not self.steps:
            raise FormatError("no events", source=self.source)
        for step in self.pending:
            step.attributes["unpaired"] = True
        started = min(self.times) if self.times else None
        return Trace(
            id=run_id("transcript", self.source, self.digest.digest(), started_at=started),
            name=Path(self.source).stem,
            started_at=started,
            ended_at=max(self.times) if self.times else None,
            input=self.input,
            output=self.output,
            metadata={"source_format": "transcript", "source": self.source},
            steps=self.steps,
        )
