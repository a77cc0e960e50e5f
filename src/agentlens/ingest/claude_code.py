"""Claude Code (and Claude Agent SDK) session transcripts (format ``claude-code``).

Claude Code writes each session to ``~/.claude/projects/<project>/<session-id>.jsonl``, one record
per line, and a sub-agent's conversation either into the same file (``isSidechain: true``) or
into ``<session-id>/subagents/agent-<id>.jsonl``. A JSON document is read too: an object with
``loglines`` (a list of records, as claude-code-transcripts saves a session) or a list of
records. Every record type of the CLI's session schemas, 2.0.x to 2.1.97+, is known here.

Mapping (one session is one run; with ``per_prompt=True``, one run per user prompt):

- a ``user`` record whose content is text -> a ``user`` step (the prompt). ``isMeta`` records
  (caveats, command output the CLI injects) keep ``attributes.meta = true`` and are not prompts;
  a compacted-conversation summary (``isCompactSummary``) is a ``system`` step.
- an ``assistant`` record's content blocks: ``text`` -> ``text`` step; ``thinking`` and
  ``redacted_thinking`` -> ``thinking`` step; ``tool_use`` / ``server_tool_use`` -> ``tool``
  step (``name``, ``input``, ``attributes.tool_use_id``).
- a ``tool_result`` block fills the ``tool`` step of its ``tool_use_id``: ``output`` = its
  content (text parts joined; other parts listed in ``attributes.content_parts``), or with
  ``is_error`` the step's ``error``; ``ended_at`` = the result's time. The record's
  ``toolUseResult`` (the tool's structured result) is kept in ``attributes.tool_use_result``
  when it says more than the text. A result that was cut (Claude Code's ``[N lines
  truncated]``, ``Output too large``, ``<persisted-output>``, ``Results are truncated``, a
  ``Read`` of part of a file, ``truncated: true``) has ``attributes.truncated = true``.
  A result whose call is not in the file is a ``tool`` step with ``attributes.unpaired = true``.
- token usage: each API response (``message.id``; the CLI writes one record per content block,
  each repeating the usage) is counted once, on the first step it produced: ``model``,
  ``input_tokens``, ``output_tokens``, ``cache_read_tokens``, ``cache_write_tokens``,
  ``stop_reason``; the run's totals are in ``metadata.usage`` and the models in
  ``metadata.models``.
- a sidechain (a sub-agent's conversation, grouped by ``agentId`` or by the chain of
  ``parentUuid``) -> an ``agent`` step whose children are the sidechain's steps, child of the
  ``Task`` / ``Agent`` tool call that started it (matched by ``sourceToolUseID``, else by the
  prompt); ``agent_progress`` records that carry a sub-agent's message are read the same way.
- ``system`` records with content -> ``system`` steps (``attributes.subtype``, ``level``).
- ``summary`` / ``custom-title`` / ``ai-title`` name the run (``metadata.summary``);
  ``agent-name`` is its agent (default ``claude-code``). Bookkeeping records
  (``file-history-snapshot``, ``queue-operation``, other ``progress``, ``attachment``,
  ``permission-mode``...) are not steps: ``metadata.records`` counts them by type, and types
  unknown to this version are counted in ``metadata.unknown_records`` (not an error: newer CLIs
  add types).

The run's ``input`` is its first prompt, its ``output`` the last main-chain assistant text; its
id is derived from the session id (the file name when there is none), so re-importing a session
that has grown replaces it. A record that is not a JSON object, a ``user`` or ``assistant``
record without a ``message`` object or without ``content``, or a bad timestamp, is a
:class:`~agentlens.errors.FormatError` naming the file, line and field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from agentlens.errors import FormatError
from agentlens.ingest._agentlog import decode_json, open_binary, parse_time, run_id, source_name
from agentlens.model import Step, StepKind, Trace

__all__ = ["BOOKKEEPING_RECORDS", "CONTENT_BLOCKS", "CONVERSATION_RECORDS", "read"]

CONVERSATION_RECORDS = frozenset({"user", "assistant", "system", "summary"})
"""Record types that carry the conversation (or name it)."""

BOOKKEEPING_RECORDS = frozenset(
    {
        "file-history-snapshot",
        "queue-operation",
        "progress",
        "pr-link",
        "agent-name",
        "custom-title",
        "last-prompt",
        "attachment",
        "permission-mode",
        "ai-title",
        "agent-setting",
        "bridge-session",
        "worktree-state",
    }
)
"""Record types of the CLI's own state: counted in ``metadata.records``, not steps."""

CONTENT_BLOCKS = frozenset(
    {
        "text",
        "thinking",
        "redacted_thinking",
        "tool_use",
        "server_tool_use",
        "tool_result",
        "advisor_tool_result",
        "image",
        "document",
        "tool_reference",
    }
)
"""Content block types understood (an unknown one is listed in ``metadata.unmapped_blocks``)."""

_TRUNCATED = re.compile(
    r"\[\d[\d,]* (?:lines|characters|chars|bytes) truncated\]"
    r"|\[Truncated|\(truncated\)|Output too large|<persisted-output>"
    r"|Results are truncated|truncated \d[\d,]* (?:lines|characters)",
    re.IGNORECASE,
)
_TASK_TOOLS = frozenset({"Task", "Agent"})


def read(path: Path, *, per_prompt: bool = False) -> Iterator[Trace]:
    """Read the Claude Code session in ``path`` as one run (or one run per user prompt).

    Raises:
        FormatError: a record is not a JSON object, or a message has the wrong shape (the
            message names the file, line and field).
    """
    path = Path(path)
    name = source_name(path)
    session = _Session(name)
    for line, record in _records(path, name):
        session.add(record, line)
    yield from session.traces(per_prompt)


# -- reading records --------------------------------------------------------------------------


def _records(path: Path, name: str) -> Iterator[tuple[int | None, dict[str, Any]]]:
    with open_binary(path) as handle:
        head = handle.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
        if not head:
            raise FormatError("empty file", source=name)
        handle.seek(0)
        if head[:1] == b"[" or not _first_line_is_whole(head):
            data = decode_json(handle.read(), name)
            yield from _document(data, name)
            return
        for lineno, raw in enumerate(handle, start=1):
            text = raw.strip()
            if lineno == 1:
                text = text.lstrip(b"\xef\xbb\xbf")
            if not text:
                continue
            record = decode_json(text, name, lineno)
            if not isinstance(record, dict):
                raise FormatError(
                    f"a session record must be a JSON object, not {_kind(record)}",
                    source=name,
                    line=lineno,
                )
            yield lineno, record


def _first_line_is_whole(head: bytes) -> bool:
    """True when the first line is a whole JSON value (JSON Lines), not the start of one
    pretty-printed document. A first line longer than the peek is taken as JSON Lines."""
    first = head.split(b"\n", 1)[0].strip()
    try:
        json.loads(first)
    except ValueError:
        return len(first) >= len(head) - 1
    return True


def _document(data: Any, name: str) -> Iterator[tuple[int | None, dict[str, Any]]]:
    if isinstance(data, dict) and isinstance(data.get("loglines"), list):
        items, where = data["loglines"], "loglines"
    elif isinstance(data, list):
        items, where = data, ""
    else:
        raise FormatError(
            "expected JSON Lines of session records, a list of them, or an object with 'loglines'",
            source=name,
        )
    for i, record in enumerate(items):
        if not isinstance(record, dict):
            raise FormatError(
                f"a session record must be a JSON object, not {_kind(record)}",
                source=name,
                field=f"{where}[{i}]",
            )
        yield None, {**record, "__index__": f"{where}[{i}]"}


def _kind(value: Any) -> str:
    return {str: "a string", int: "a number", float: "a number", list: "an array"}.get(
        type(value), "null" if value is None else type(value).__name__
    )


# -- building the run ---------------------------------------------------------------------------


@dataclass
class _Chain:
    """A sidechain: one sub-agent's conversation."""

    step: Step
    text: str | None = None


@dataclass
class _Session:
    source: str
    steps: list[Step] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)
    """The prompt (0-based) during which each step happened."""
    prompts: int = 0
    calls: dict[str, Step] = field(default_factory=dict)
    chains: dict[str, _Chain] = field(default_factory=dict)
    chain_of_uuid: dict[str, str] = field(default_factory=dict)
    first_of_message: dict[str, Step] = field(default_factory=dict)
    usage: dict[str, dict[str, int]] = field(default_factory=dict)
    models: list[str] = field(default_factory=list)
    records: dict[str, int] = field(default_factory=dict)
    unknown: dict[str, int] = field(default_factory=dict)
    unmapped: dict[str, int] = field(default_factory=dict)
    summaries: list[str] = field(default_factory=list)
    title: str | None = None
    agent: str | None = None
    session_id: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    times: list[datetime] = field(default_factory=list)

    # -- records ------------------------------------------------------------------------------

    def error(
        self, reason: str, line: int | None, field_: str, record: dict[str, Any]
    ) -> FormatError:
        where = record.get("__index__")
        path = f"{where}.{field_}" if isinstance(where, str) and where else field_
        return FormatError(reason, source=self.source, line=line, field=path)

    def add(self, record: dict[str, Any], line: int | None) -> None:
        kind = record.get("type")
        if not isinstance(kind, str):
            raise self.error("missing or non-string record type", line, "type", record)
        if self.session_id is None and isinstance(record.get("sessionId"), str):
            self.session_id = record["sessionId"]
        for key, target in (
            ("cwd", "cwd"),
            ("gitBranch", "git_branch"),
            ("version", "cli_version"),
        ):
            if key in record and target not in self.info:
                self.info[target] = record[key]
        when = parse_time(record.get("timestamp"), source=self.source, line=line, field="timestamp")
        if when is not None:
            self.times.append(when)
        if kind in ("user", "assistant"):
            self.message(record, kind, line, when, self.chain_for(record, line, when))
        elif kind == "system":
            self.system(record, line, when)
        elif kind == "summary":
            if isinstance(record.get("summary"), str):
                self.summaries.append(record["summary"])
        elif kind in BOOKKEEPING_RECORDS:
            self.records[kind] = self.records.get(kind, 0) + 1
            self.bookkeeping(record, kind, line, when)
        else:
            self.unknown[kind] = self.unknown.get(kind, 0) + 1

    def bookkeeping(
        self, record: dict[str, Any], kind: str, line: int | None, when: datetime | None
    ) -> None:
        if kind in ("custom-title", "ai-title"):
            title = record.get("customTitle", record.get("aiTitle", record.get("title")))
            if isinstance(title, str) and title:
                self.title = title
        elif kind == "agent-name":
            agent = record.get("agentName", record.get("name"))
            if isinstance(agent, str) and agent:
                self.agent = agent
        elif kind == "progress":
            data = record.get("data")
            if isinstance(data, dict) and data.get("type") == "agent_progress":
                inner = data.get("message")
                if (
                    isinstance(inner, dict)
                    and inner.get("type") in ("user", "assistant")
                    and isinstance(inner.get("message"), dict)
                ):
                    agent_id = data.get("agentId")
                    sub = {**inner, "isSidechain": True, "agentId": agent_id}
                    sub.setdefault("sourceToolUseID", record.get("parentToolUseID"))
                    self.message(sub, sub["type"], line, when, self.chain_for(sub, line, when))

    def chain_for(
        self, record: dict[str, Any], line: int | None, when: datetime | None
    ) -> _Chain | None:
        """The sidechain the record belongs to (opened at its first record), or None."""
        if record.get("isSidechain") is not True:
            return None
        uuid = record.get("uuid")
        parent = record.get("parentUuid")
        key = record.get("agentId")
        if not isinstance(key, str) or not key:
            key = self.chain_of_uuid.get(parent) if isinstance(parent, str) else None
            if key is None:
                key = uuid if isinstance(uuid, str) else f"line-{line}"
        if isinstance(uuid, str):
            self.chain_of_uuid[uuid] = key
        chain = self.chains.get(key)
        if chain is None:
            step = self.new(StepKind.AGENT, when, name="sidechain", attributes={"agent_id": key})
            caller = record.get("sourceToolUseID")
            if isinstance(caller, str) and caller in self.calls:
                self.link(step, self.calls[caller])
            chain = self.chains[key] = _Chain(step)
        return chain

    def link(self, agent: Step, call: Step) -> None:
        agent.parent_id = call.id
        kind = call.input.get("subagent_type") if isinstance(call.input, dict) else None
        if isinstance(kind, str) and kind:
            agent.name = kind

    def new(
        self, kind: StepKind, when: datetime | None, *, chain: _Chain | None = None, **fields: Any
    ) -> Step:
        step = Step(id=f"s{len(self.steps) + 1}", kind=kind, started_at=when, **fields)
        if chain is not None:
            step.parent_id = chain.step.id
            turn = self.turns[int(chain.step.id[1:]) - 1]
            if chain.step.ended_at is None or (when is not None and when > chain.step.ended_at):
                chain.step.ended_at = when
        else:
            turn = max(self.prompts - 1, 0)
        self.steps.append(step)
        self.turns.append(turn)
        return step

    def message(
        self,
        record: dict[str, Any],
        kind: str,
        line: int | None,
        when: datetime | None,
        chain: _Chain | None,
    ) -> None:
        message = record.get("message")
        if not isinstance(message, dict):
            raise self.error("must be an object", line, "message", record)
        if "content" not in message:
            raise self.error("required field is missing", line, "message.content", record)
        content = message["content"]
        if not isinstance(content, str | list):
            raise self.error(
                f"must be a string or a list of content blocks, not {_kind(content)}",
                line,
                "message.content",
                record,
            )
        base: dict[str, Any] = {}
        if isinstance(record.get("uuid"), str):
            base["uuid"] = record["uuid"]
        if kind == "user":
            self.user(record, content, line, when, chain, base)
        else:
            self.assistant(record, message, content, line, when, chain, base)

    def user(
        self,
        record: dict[str, Any],
        content: str | list[Any],
        line: int | None,
        when: datetime | None,
        chain: _Chain | None,
        base: dict[str, Any],
    ) -> None:
        texts: list[str] = []
        parts: list[str] = []
        blocks = [content] if isinstance(content, str) else content
        for i, block in enumerate(blocks):
            if isinstance(block, str):
                texts.append(block)
                continue
            if not isinstance(block, dict):
                raise self.error(
                    f"a content block must be an object, not {_kind(block)}",
                    line,
                    f"message.content[{i}]",
                    record,
                )
            btype = block.get("type")
            if btype == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif btype in ("tool_result", "advisor_tool_result"):
                self.result(record, block, line, when, chain, f"message.content[{i}]")
            elif btype in CONTENT_BLOCKS:
                parts.append(str(btype))
            else:
                self.unmapped[str(btype)] = self.unmapped.get(str(btype), 0) + 1
        if not texts:
            return
        attributes = dict(base)
        if parts:
            attributes["content_parts"] = parts
        text = "\n".join(texts)
        if record.get("isCompactSummary") is True:
            attributes["compact_summary"] = True
            self.new(StepKind.SYSTEM, when, chain=chain, output=text, attributes=attributes)
            return
        meta = record.get("isMeta") is True or _is_command_echo(text)
        if meta:
            attributes["meta"] = True
        elif chain is None:
            self.prompts += 1
        step = self.new(StepKind.USER, when, chain=chain, output=text, attributes=attributes)
        if chain is not None and chain.step.input is None:
            chain.step.input = text
            self.match_prompt(chain, text)
        del step

    def match_prompt(self, chain: _Chain, prompt: str) -> None:
        if chain.step.parent_id is not None:
            return
        for call in reversed(list(self.calls.values())):
            if (
                call.name in _TASK_TOOLS
                and isinstance(call.input, dict)
                and call.input.get("prompt") == prompt
            ):
                self.link(chain.step, call)
                return

    def assistant(
        self,
        record: dict[str, Any],
        message: dict[str, Any],
        content: str | list[Any],
        line: int | None,
        when: datetime | None,
        chain: _Chain | None,
        base: dict[str, Any],
    ) -> None:
        first: Step | None = None
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for i, block in enumerate(blocks):
            where = f"message.content[{i}]"
            if not isinstance(block, dict):
                raise self.error(
                    f"a content block must be an object, not {_kind(block)}", line, where, record
                )
            btype = block.get("type")
            step: Step | None = None
            if btype == "text":
                text = block.get("text")
                if not isinstance(text, str):
                    raise self.error("must be a string", line, f"{where}.text", record)
                step = self.new(
                    StepKind.TEXT, when, chain=chain, output=text, attributes=dict(base)
                )
                if chain is not None and text:
                    chain.text = text
                    chain.step.output = text
            elif btype == "thinking":
                step = self.new(
                    StepKind.THINKING,
                    when,
                    chain=chain,
                    output=block.get("thinking"),
                    attributes=dict(base),
                )
            elif btype == "redacted_thinking":
                step = self.new(
                    StepKind.THINKING,
                    when,
                    chain=chain,
                    output=None,
                    attributes={**base, "redacted": True},
                )
            elif btype in ("tool_use", "server_tool_use"):
                tool = block.get("name")
                if not isinstance(tool, str):
                    raise self.error("a tool call needs a name", line, f"{where}.name", record)
                attributes = dict(base)
                call_id = block.get("id")
                if isinstance(call_id, str):
                    attributes["tool_use_id"] = call_id
                if btype == "server_tool_use":
                    attributes["server_tool"] = True
                step = self.new(
                    StepKind.TOOL,
                    when,
                    chain=chain,
                    name=tool,
                    input=block.get("input"),
                    attributes=attributes,
                )
                if isinstance(call_id, str):
                    self.calls[call_id] = step
            elif btype in CONTENT_BLOCKS:
                if btype == "advisor_tool_result":
                    self.result(record, block, line, when, chain, where)
                continue
            else:
                self.unmapped[str(btype)] = self.unmapped.get(str(btype), 0) + 1
                continue
            if first is None:
                first = step
        if first is not None:
            self.count_usage(record, message, first)

    def count_usage(self, record: dict[str, Any], message: dict[str, Any], step: Step) -> None:
        message_id = message.get("id")
        key = message_id if isinstance(message_id, str) else f"step-{step.id}"
        holder = self.first_of_message.setdefault(key, step)
        model = message.get("model")
        if isinstance(model, str):
            holder.attributes["model"] = model
            if model not in self.models and model != "<synthetic>":
                self.models.append(model)
        if isinstance(message_id, str):
            holder.attributes["message_id"] = message_id
        if isinstance(record.get("requestId"), str):
            holder.attributes["request_id"] = record["requestId"]
        if message.get("stop_reason") is not None:
            holder.attributes["stop_reason"] = message["stop_reason"]
        usage = message.get("usage")
        if not isinstance(usage, dict):
            return
        counts: dict[str, int] = {}
        for source, target in (
            ("input_tokens", "input_tokens"),
            ("output_tokens", "output_tokens"),
            ("cache_read_input_tokens", "cache_read_tokens"),
            ("cache_creation_input_tokens", "cache_write_tokens"),
        ):
            value = usage.get(source)
            if isinstance(value, int) and not isinstance(value, bool):
                counts[target] = value
        # The same response is written once per content block; its last record has the
        # final counts. Keep the largest seen (counts only grow while a response streams).
        seen = self.usage.setdefault(key, {})
        for target, value in counts.items():
            seen[target] = max(seen.get(target, 0), value)
        holder.attributes.update(seen)

    def result(
        self,
        record: dict[str, Any],
        block: dict[str, Any],
        line: int | None,
        when: datetime | None,
        chain: _Chain | None,
        where: str,
    ) -> None:
        call_id = block.get("tool_use_id")
        step = self.calls.get(call_id) if isinstance(call_id, str) else None
        if step is None:
            attributes: dict[str, Any] = {"unpaired": True}
            if isinstance(call_id, str):
                attributes["tool_use_id"] = call_id
            step = self.new(StepKind.TOOL, when, chain=chain, attributes=attributes)
        content = block.get("content")
        parts: list[str] = []
        if isinstance(content, list):
            texts: list[str] = []
            for item in content:
                if isinstance(item, dict) and item.get("type") == "text":
                    texts.append(str(item.get("text", "")))
                elif isinstance(item, str):
                    texts.append(item)
                else:
                    parts.append(str(item.get("type")) if isinstance(item, dict) else _kind(item))
            value: Any = "\n".join(texts)
        else:
            value = content
        if parts:
            step.attributes["content_parts"] = parts
        if block.get("is_error") is True:
            step.error = value if value not in (None, "") else "error"
            step.output = None
        else:
            step.output = value
        step.ended_at = when
        structured = record.get("toolUseResult")
        if structured is not None and structured != value:
            step.attributes["tool_use_result"] = structured
        if _was_truncated(value, structured):
            step.attributes["truncated"] = True
        if isinstance(structured, dict) and structured.get("interrupted") is True:
            step.attributes["interrupted"] = True
        if isinstance(record.get("uuid"), str):
            step.attributes["result_uuid"] = record["uuid"]

    def system(self, record: dict[str, Any], line: int | None, when: datetime | None) -> None:
        content = record.get("content")
        if not isinstance(content, str) or not content:
            self.records["system"] = self.records.get("system", 0) + 1
            return
        attributes: dict[str, Any] = {}
        for key in ("subtype", "level"):
            if isinstance(record.get(key), str):
                attributes[key] = record[key]
        chain = self.chain_for(record, line, when)
        self.new(StepKind.SYSTEM, when, chain=chain, output=content, attributes=attributes)

    # -- runs ---------------------------------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        metadata: dict[str, Any] = {"source_format": "claude-code", "source": self.source}
        if self.session_id is not None:
            metadata["session_id"] = self.session_id
        metadata.update(self.info)
        if self.summaries:
            metadata["summary"] = self.summaries[-1]
        if self.models:
            metadata["models"] = self.models
        if self.records:
            metadata["records"] = dict(sorted(self.records.items()))
        if self.unknown:
            metadata["unknown_records"] = dict(sorted(self.unknown.items()))
        if self.unmapped:
            metadata["unmapped_blocks"] = dict(sorted(self.unmapped.items()))
        return metadata

    def traces(self, per_prompt: bool) -> Iterator[Trace]:
        if not self.steps and not self.summaries:
            raise FormatError(
                "no conversation: the file holds no user or assistant message", source=self.source
            )
        for call in self.calls.values():
            if call.output is None and call.error is None:
                call.attributes.setdefault("unanswered", True)
        key = self.session_id or self.source
        if not per_prompt:
            yield self.trace(self.steps, key, None)
            return
        groups: dict[int, list[Step]] = {}
        for step, turn in zip(self.steps, self.turns, strict=True):
            groups.setdefault(turn, []).append(step)
        for turn in sorted(groups):
            yield self.trace(groups[turn], key, turn)

    def trace(self, steps: list[Step], key: str, turn: int | None) -> Trace:
        main = [s for s in steps if s.parent_id is None or s.kind is StepKind.AGENT]
        prompt = next(
            (s.output for s in main if s.kind is StepKind.USER and not s.attributes.get("meta")),
            None,
        )
        output = next(
            (
                s.output
                for s in reversed(steps)
                if s.kind is StepKind.TEXT and s.output and self.is_main(s)
            ),
            None,
        )
        times = [t for s in steps for t in (s.started_at, s.ended_at) if t is not None]
        if turn is None:
            times = times or self.times
        started = min(times) if times else None
        metadata = self.metadata()
        totals: dict[str, int] = {}
        for step in steps:
            for counter in (
                "input_tokens",
                "output_tokens",
                "cache_read_tokens",
                "cache_write_tokens",
            ):
                value = step.attributes.get(counter)
                if isinstance(value, int):
                    totals[counter] = totals.get(counter, 0) + value
        if totals:
            metadata["usage"] = totals
        parts = ["claude-code", key] if turn is None else ["claude-code", key, str(turn)]
        if turn is not None:
            metadata["prompt_index"] = turn
        name = self.title or (self.summaries[-1] if self.summaries else None)
        return Trace(
            id=run_id(*parts, started_at=started),
            agent=self.agent or "claude-code",
            name=name,
            started_at=started,
            ended_at=max(times) if times else None,
            input=prompt,
            output=output,
            metadata=metadata,
            steps=steps,
        )

    def is_main(self, step: Step) -> bool:
        return step.parent_id is None


def _is_command_echo(text: str) -> bool:
    """Text the CLI writes for a slash command or its output (not a prompt the user typed)."""
    start = text.lstrip()[:40]
    return start.startswith(
        ("<command-name>", "<command-message>", "<local-command-stdout>", "<local-command-stderr>")
    )


def _was_truncated(value: Any, structured: Any) -> bool:
    if isinstance(value, str) and _TRUNCATED.search(value):
        return True
    if isinstance(structured, dict):
        if structured.get("truncated") is True or structured.get("isTruncated") is True:
            return True
        file = structured.get("file")
        if isinstance(file, dict):
            lines, total = file.get("numLines"), file.get("totalLines")
            if isinstance(lines, int) and isinstance(total, int) and lines < total:
                return True
    return False
