"""Who&When multi-agent failure logs (ag2ai/Agents_Failure_Attribution): one run per file.

A file is a JSON object with the task (``question``, ``ground_truth``), the conversation
(``history``: a list of ``{"role", "content"}`` messages, with ``name`` in the
algorithm-generated logs) and the failure annotation (``mistake_agent``, ``mistake_step``,
``mistake_reason``).

The logs hold almost no explicit tool calls, but two speakers are tools in all but name, and
become ``tool`` steps:

- **Algorithm-generated logs** (CaptainAgent group chats): a message from ``Computer_terminal``
  is the result of running the code blocks of the message before it. It becomes a ``tool`` step
  named ``Computer_terminal`` with ``input`` = those code blocks (``None`` and
  ``attributes.no_code = true`` when there were none: the terminal replied that it had nothing
  to run) and ``output`` = the message; an ``exitcode`` other than 0 makes the message the step's
  ``error`` instead.
- **Hand-crafted logs** (Magentic-One): ``Orchestrator (-> WebSurfer)`` is an instruction to a
  sub-agent; the next message from that sub-agent is its result. The pair becomes a ``tool``
  step named after the sub-agent (``WebSurfer``, ``FileSurfer``, ``Assistant``,
  ``ComputerTerminal``), with ``input`` = the instruction and ``output`` = the reply.

Every other message is a ``text`` step named after its speaker (``name``, else ``role`` without
a parenthesised qualifier: ``Orchestrator (termination condition)`` -> ``Orchestrator``);
``Orchestrator (thought)`` messages (ledgers, "Next speaker ...") are ``thinking`` steps named
``Orchestrator``; ``human`` is a ``user`` step. Each step keeps ``attributes.role`` and
``attributes.history_index`` (the message's position, which ``mistake_step`` refers to).
The run's ``input`` is the ``question``, its ``output`` the last text message (other than a bare
``TERMINATE``), and every other
field (annotation included) goes to ``metadata``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentlens.errors import FormatError
from agentlens.ingest._agentlog import load_json, run_id, source_name
from agentlens.model import Step, StepKind, Trace

__all__ = ["read"]

_TERMINALS = {"Computer_terminal"}
_CODE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)
_EXIT = re.compile(r"exitcode:\s*(-?\d+)")
_TO = re.compile(r"^(?P<who>.+?)\s*\(->\s*(?P<to>[^)]+)\)$")
_THOUGHT = re.compile(r"^(?P<who>.+?)\s*\(thought\)$")
_QUALIFIED = re.compile(r"^(?P<who>.+?)\s*\((?P<what>[^)]*)\)$")


def read(path: Path) -> Iterator[Trace]:
    """Read the run in a Who&When log file.

    Raises:
        FormatError: the file is not JSON, or has no list of messages in ``history``.
    """
    data, raw = load_json(path)
    name = source_name(path)
    if not isinstance(data, dict):
        raise FormatError("a Who&When log must be a JSON object", source=name)
    history = data.get("history")
    if not isinstance(history, list):
        raise FormatError("missing or non-list history", source=name, field="history")
    steps = _steps(history, name)
    output = None
    for step in reversed(steps):
        if step.kind is StepKind.TEXT and step.output not in (None, "", "TERMINATE"):
            output = step.output
            break
    metadata: dict[str, Any] = {"source_format": "who-and-when", "source": name}
    metadata.update({k: v for k, v in data.items() if k not in ("history", "question")})
    subset = path.parent.name
    if subset:
        metadata.setdefault("subset", subset)
    yield Trace(
        id=run_id("who-and-when", subset, name, hashlib.sha256(raw).digest()),
        name=f"{subset}/{Path(name).stem}" if subset else Path(name).stem,
        input=data.get("question"),
        output=output,
        metadata=metadata,
        steps=steps,
    )


def _steps(history: list[Any], source: str) -> list[Step]:
    steps: list[Step] = []
    waiting: dict[str, Step] = {}
    last_content: Any = None

    def add(kind: StepKind, **fields: Any) -> Step:
        step = Step(id=f"s{len(steps) + 1}", kind=kind, **fields)
        steps.append(step)
        return step

    for i, message in enumerate(history):
        where = f"history[{i}]"
        if not isinstance(message, dict):
            raise FormatError("a message must be an object", source=source, field=where)
        role = message.get("role")
        speaker = message.get("name") or role
        if not isinstance(speaker, str):
            raise FormatError(
                "a message needs a 'role' or 'name'", source=source, field=f"{where}.role"
            )
        content = message.get("content")
        attributes: dict[str, Any] = {"role": role, "history_index": i}
        attributes.update(
            {k: v for k, v in message.items() if k not in ("role", "name", "content")}
        )

        if speaker in _TERMINALS:
            code = _code_of(last_content)
            step = add(StepKind.TOOL, name=speaker, input=code, attributes=attributes)
            if code is None:
                step.attributes["no_code"] = True
            exit_code = _EXIT.search(content) if isinstance(content, str) else None
            if exit_code is not None and exit_code.group(1) != "0":
                step.error = content
            else:
                step.output = content
            last_content = content
            continue

        to = _TO.match(speaker)
        if to is not None:
            target = to.group("to").strip()
            step = add(StepKind.TOOL, name=target, input=content, attributes=attributes)
            step.attributes["caller"] = to.group("who").strip()
            if target in waiting:
                waiting[target].attributes["unpaired"] = True
            waiting[target] = step
            last_content = content
            continue

        if speaker in waiting:
            step = waiting.pop(speaker)
            step.output = content
            step.attributes["result_index"] = i
            last_content = content
            continue

        thought = _THOUGHT.match(speaker)
        if thought is not None:
            add(
                StepKind.THINKING,
                name=thought.group("who").strip(),
                output=content,
                attributes=attributes,
            )
        elif speaker == "human":
            add(StepKind.USER, output=content, attributes=attributes)
        else:
            qualified = _QUALIFIED.match(speaker)
            who = qualified.group("who").strip() if qualified is not None else speaker
            add(StepKind.TEXT, name=who, output=content, attributes=attributes)
        last_content = content
    for step in waiting.values():
        step.attributes["unpaired"] = True
    return steps


def _code_of(content: Any) -> str | None:
    if not isinstance(content, str):
        return None
    blocks = [b.strip() for b in _CODE.findall(content)]
    blocks = [b for b in blocks if b]
    return "\n\n".join(blocks) if blocks else None
