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
_EXIT = re.compile(r"exitcode:\s*(-?\d+)")
# The speaker forms, as regular expressions (the definitions; tests/ingest hold the functions
# below to them). Run by the engine they try every "(" against every later character: quadratic
# in a name of many " (" (15 s for 50 KB). _qualified() and _code_blocks() find the same
# matches in one pass.
_TO = r"^(?P<who>.+?)\s*\(->\s*(?P<to>[^)]+)\)$"
_THOUGHT = r"^(?P<who>.+?)\s*\(thought\)$"
_QUALIFIED = r"^(?P<who>.+?)\s*\((?P<what>[^)]*)\)$"
_CODE = r"```[^\n`]*\n(.*?)```"  # with re.DOTALL: findall gives each code block's body


def _qualified(speaker: str, opener: str, *, whole: bool = False) -> tuple[str, str] | None:
    """``(who, what)`` of ``who (OPENERwhat)`` at the end of ``speaker``, as the expression
    ``^(?P<who>.+?)\\s*\\(OPENER(?P<what>[^)]*)\\)$`` matches it; ``None`` when it does not.

    The closing ")" is the last character (or the one before a final newline, where ``$`` also
    matches). The "(" must come after every other ")" (``what`` holds none): the first such
    ``(OPENER`` whose white space before it starts after the first character, and ``who`` (the
    text before that white space) holds no newline (``.`` matches none). ``who`` being as short
    as it can, that first one is the one the expression takes. With ``whole``, ``what`` must be
    empty (``\\(thought\\)$``): the only candidate is the ``(OPENER`` just before the ")".
    """
    if speaker.endswith(")"):
        close = len(speaker) - 1
    elif speaker.endswith(")\n"):
        close = len(speaker) - 2
    else:
        return None
    after = speaker.rfind(")", 0, close) + 1
    newline = speaker.find("\n")
    while True:
        if whole:
            paren = close - 1 - len(opener)
            if paren < after or not speaker.startswith("(" + opener, paren):
                return None
        else:
            paren = speaker.find("(" + opener, after, close)
            if paren < 0:
                return None
        who_end = paren
        while who_end > 0 and speaker[who_end - 1].isspace():
            who_end -= 1
        who_end = max(who_end, 1)
        if who_end <= paren:
            if 0 <= newline < who_end:
                return None  # every later "(" leaves a longer who, with the newline in it
            return speaker[:who_end], speaker[paren + 1 + len(opener) : close]
        if whole:
            return None
        after = paren + 1  # "(" first: who cannot be empty


def _to_whom(speaker: str) -> tuple[str, str] | None:
    """``(who, to)`` of ``Orchestrator (-> WebSurfer)``, as ``_TO`` matches it."""
    found = _qualified(speaker, "->")
    if found is None:
        return None
    who, rest = found
    if not rest:
        return None  # "[^)]+" needs a character
    to = rest.lstrip()
    # "\s*" gives back the last white space when nothing else is left for "[^)]+"
    return who, to if to else rest[-1]


def _code_blocks(content: str) -> list[str]:
    """The bodies of the fenced code blocks in ``content``, as ``re.findall(_CODE, content,
    re.DOTALL)`` gives them, in one pass.

    At each "```" the fence's info string (up to a newline or a backquote) must end with a
    newline, then the body runs to the next "```". When there is no "```" after the newline,
    no later fence has one either: the search stops.
    """
    blocks: list[str] = []
    pos = 0
    while True:
        fence = content.find("```", pos)
        if fence < 0:
            return blocks
        info_end = fence + 3
        while info_end < len(content) and content[info_end] not in "\n`":
            info_end += 1
        if info_end >= len(content) or content[info_end] != "\n":
            pos = fence + 1
            continue
        close = content.find("```", info_end + 1)
        if close < 0:
            return blocks
        blocks.append(content[info_end + 1 : close])
        pos = close + 3


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

        to = _to_whom(speaker)
        if to is not None:
            target = to[1].strip()
            step = add(StepKind.TOOL, name=target, input=content, attributes=attributes)
            step.attributes["caller"] = to[0].strip()
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

        thought = _qualified(speaker, "thought", whole=True)
        if thought is not None:
            add(
                StepKind.THINKING,
                name=thought[0].strip(),
                output=content,
                attributes=attributes,
            )
        elif speaker == "human":
            add(StepKind.USER, output=content, attributes=attributes)
        else:
            qualified = _qualified(speaker, "")
            who = qualified[0].strip() if qualified is not None else speaker
            add(StepKind.TEXT, name=who, output=content, attributes=attributes)
        last_content = content
    for step in waiting.values():
        step.attributes["unpaired"] = True
    return steps


def _code_of(content: Any) -> str | None:
    if not isinstance(content, str):
        return None
    blocks = [b.strip() for b in _code_blocks(content)]
    blocks = [b for b in blocks if b]
    return "\n\n".join(blocks) if blocks else None
