"""SWE-agent trajectories (``.traj``): one run per file.

A ``.traj`` file is a JSON object with ``trajectory`` (one entry per turn: ``thought``,
``action``, ``observation``, ``response``, ``state``, and in newer versions ``execution_time``
and ``messages``), ``history`` (the chat sent to the model), ``info`` (``exit_status``,
``submission``, ``model_stats``) and ``environment``.

Mapping, per trajectory entry:

- ``thought`` -> a ``thinking`` step (when not empty), with ``response`` in its attributes;
- ``action`` -> a ``tool`` step: ``name`` = the program it runs (``open``, ``edit``,
  ``python``, ``submit``...; a leading ``cd DIR &&`` or ``VAR=value`` is passed over, so
  ``cd /repo && python -m pytest`` is ``python``), ``input`` = the action text, ``output`` =
  ``observation``; ``execution_time`` becomes ``attributes.duration_s``, ``state`` is kept
  (parsed when it is JSON).
- An observation in which the tool refused or failed the call is the step's ``error`` rather
  than its ``output`` (the call did nothing): 0.x's refused edit ("Your proposed edit has
  introduced new syntax error(s)...") and ``EXECUTION TIMED OUT``, and 1.x's blocked command
  ("Operation '...' is not supported by this environment"), timeout ("The command '...' was
  cancelled because it took more than N seconds"), bash syntax check ("Your bash command
  contained syntax errors and was NOT executed"), edit not applied ("Your edit was not
  applied"), and ``str_replace_editor`` refusals ("No replacement was performed", "The path ...
  does not exist", "Invalid `view_range`"...).

The first ``system`` message of ``history`` becomes a ``system`` step and the first ``user``
message the run's ``input``; ``info.submission`` is the run's ``output``; ``exit_status``
decides ``status`` (``ok`` when it starts with ``submitted``, else ``error``); ``model_stats``
(cost, tokens sent and received, API calls: for the whole run, SWE-agent does not record them
per turn), ``environment`` and the rest of ``info`` go to ``metadata``.

Files written by the function-calling agents sometimes hold only ``history``; then the steps
come from it: an ``assistant`` message is a thought and an action (named by its tool call),
and the ``tool`` message after it is the observation.

Not kept, and named in ``metadata.omitted``: the top-level ``history`` when a ``trajectory``
is present, and each entry's ``messages``: both are the prompt re-sent to the model at each
turn, which the steps already hold.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentlens.errors import FormatError
from agentlens.ingest._agentlog import load_json, run_id, source_name
from agentlens.ingest._checks import parse_nested_json
from agentlens.ingest._pyliteral import parse_literal
from agentlens.model import Step, StepKind, Trace

__all__ = ["command_name", "read"]

_FAILED = re.compile(
    r"\s*(?:"
    r"Your proposed edit has introduced new syntax error"  # 0.x and 1.x windowed editor
    r"|EXECUTION TIMED OUT"  # 0.x timeout
    r"|Operation '.*' is not supported by this environment"  # 1.x blocklist
    r"|Interactive operation '.*' is not supported"  # 1.x interactive blocklist
    r"|The command '.*' was cancelled because it took more than"  # 1.x timeout
    r"|Your bash command contained syntax errors and was NOT executed"  # 1.x bash -n check
    r"|Your edit was not applied"  # 1.x edit tools
    r"|No replacement was performed"  # 1.x str_replace_editor
    r"|The path \S+ does not exist"
    r"|The path \S+ is a directory and only the `view` command"
    r"|File already exists at: "
    r"|Invalid `(?:view_range|insert_line)`"
    r"|Parameter `\w+` is required for command"
    r"|Unrecognized command \S+\. The allowed commands"
    r")",
    re.DOTALL,
)
"""How SWE-agent (0.x and 1.x) reports a call its tools refused or that failed to run."""
_PRELUDE = re.compile(
    r"\s*(?:cd\s+(?:\"[^\"]*\"|'[^']*'|[^\s;&|]+)\s*(?:&&|;)|[A-Za-z_]\w*=\S*\s)\s*"
)
"""A ``cd DIR &&`` (or ``cd DIR;``) or a ``VAR=value`` before the program an action runs."""
_ENTRY_KEYS = {
    "action",
    "observation",
    "thought",
    "response",
    "state",
    "execution_time",
    "messages",
}


def read(path: Path) -> Iterator[Trace]:
    """Read the run in a SWE-agent ``.traj`` file.

    Raises:
        FormatError: the file is not JSON, or not a SWE-agent trajectory (names the field).
    """
    data, raw = load_json(path)
    name = source_name(path)
    if not isinstance(data, dict):
        raise FormatError("a .traj file must hold a JSON object", source=name)
    trajectory = data.get("trajectory")
    history = data.get("history")
    if trajectory is None and history is None:
        raise FormatError("no 'trajectory' and no 'history'", source=name, field="trajectory")
    if trajectory is not None and not isinstance(trajectory, list):
        raise FormatError("must be a list", source=name, field="trajectory")
    if history is not None and not isinstance(history, list):
        raise FormatError("must be a list", source=name, field="history")

    steps: list[Step] = []
    omitted: list[str] = []
    system, user = _prompt(history or [], name)
    if system is not None:
        steps.append(Step(id="s1", kind=StepKind.SYSTEM, output=system))
    if trajectory:
        steps.extend(_from_trajectory(trajectory, name, len(steps)))
        if history:
            omitted.append("history")
        if any(isinstance(e, dict) and "messages" in e for e in trajectory):
            omitted.append("trajectory[].messages")
    else:
        steps.extend(_from_history(history or [], name, len(steps)))

    info = data.get("info")
    if info is None:
        info = {}
    if not isinstance(info, dict):
        raise FormatError("must be an object", source=name, field="info")
    exit_status = info.get("exit_status")
    metadata: dict[str, Any] = {"source_format": "swe-agent", "source": name}
    for key, value in info.items():
        if key != "submission":
            metadata[key] = value
    for key, value in data.items():
        if key not in ("trajectory", "history", "info"):
            metadata[key] = value
    if omitted:
        metadata["omitted"] = omitted
    status = "ok"
    if isinstance(exit_status, str) and not exit_status.startswith("submitted"):
        status = "error"
    yield Trace(
        id=run_id("swe-agent", name, hashlib.sha256(raw).digest()),
        name=Path(name).stem,
        status=status,
        input=user,
        output=info.get("submission"),
        metadata=metadata,
        steps=steps,
    )


def command_name(action: str) -> str:
    """The program a SWE-agent action runs: ``open "setup.py"`` -> ``open``,
    ``cd /repo && python -m pytest`` -> ``python``."""
    text = action
    while True:
        match = _PRELUDE.match(text)
        if match is None or match.end() >= len(text.rstrip()):
            break
        text = text[match.end() :]
    words = text.strip().split(None, 1)
    if not words:
        return "empty"
    word = words[0]
    return word.strip("'\"`") or "empty"


def _prompt(history: list[Any], source: str) -> tuple[Any, Any]:
    system = user = None
    for i, message in enumerate(history):
        if not isinstance(message, dict):
            raise FormatError(
                "a history message must be an object", source=source, field=f"history[{i}]"
            )
        role = message.get("role")
        if role == "system" and system is None:
            system = message.get("content")
        elif role == "user" and user is None:
            user = message.get("content")
        if system is not None and user is not None:
            break
    return system, user


def _duration(value: Any) -> float | None:
    try:
        return float(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def _state(value: Any) -> Any:
    """A state string read as JSON, else as the Python literal SWE-agent printed (a bounded
    parse: see :mod:`agentlens.ingest._pyliteral`), else kept as text."""
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            return parse_nested_json(value)
        except ValueError:
            try:
                return parse_literal(value.strip())
            except ValueError:
                return value
    return value


def _from_trajectory(entries: list[Any], source: str, offset: int) -> list[Step]:
    steps: list[Step] = []

    def sid() -> str:
        return f"s{offset + len(steps) + 1}"

    for i, entry in enumerate(entries):
        where = f"trajectory[{i}]"
        if not isinstance(entry, dict):
            raise FormatError("must be an object", source=source, field=where)
        action = entry.get("action")
        if not isinstance(action, str):
            raise FormatError(
                "missing or non-string action", source=source, field=f"{where}.action"
            )
        thought = entry.get("thought")
        if isinstance(thought, str) and thought.strip():
            think = Step(id=sid(), kind=StepKind.THINKING, output=thought, attributes={"turn": i})
            if entry.get("response") not in (None, "", thought):
                think.attributes["response"] = entry["response"]
            steps.append(think)
        attributes: dict[str, Any] = {"turn": i}
        duration = _duration(entry.get("execution_time"))
        if duration is not None:
            attributes["duration_s"] = duration
        if "state" in entry:
            attributes["state"] = _state(entry["state"])
        for key, value in entry.items():
            if key not in _ENTRY_KEYS:
                attributes[key] = value
        observation = entry.get("observation")
        failed = isinstance(observation, str) and _FAILED.match(observation) is not None
        steps.append(
            Step(
                id=sid(),
                kind=StepKind.TOOL,
                name=command_name(action),
                input=action,
                output=None if failed else observation,
                error=observation if failed else None,
                attributes=attributes,
            )
        )
    return steps


def _tool_call(message: dict[str, Any]) -> tuple[str | None, Any]:
    calls = message.get("tool_calls")
    if isinstance(calls, str):
        try:
            calls = parse_literal(calls)
        except ValueError:
            return None, None
    if isinstance(calls, list) and calls and isinstance(calls[0], dict):
        function = calls[0].get("function")
        if isinstance(function, dict):
            args = function.get("arguments")
            if isinstance(args, str):
                with contextlib.suppress(ValueError):
                    args = parse_nested_json(args)
            return function.get("name"), args
    return None, None


def _from_history(history: list[Any], source: str, offset: int) -> list[Step]:
    steps: list[Step] = []
    pending: Step | None = None
    turn = 0
    for message in history:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "assistant":
            thought = message.get("thought") or message.get("content")
            if isinstance(thought, str) and thought.strip():
                steps.append(
                    Step(
                        id=f"s{offset + len(steps) + 1}",
                        kind=StepKind.THINKING,
                        output=thought,
                        attributes={"turn": turn},
                    )
                )
            action = message.get("action")
            if isinstance(action, str):
                tool, args = _tool_call(message)
                attributes: dict[str, Any] = {"turn": turn}
                if tool is not None:
                    attributes["function"] = tool
                    attributes["arguments"] = args
                pending = Step(
                    id=f"s{offset + len(steps) + 1}",
                    kind=StepKind.TOOL,
                    name=command_name(action),
                    input=action,
                    attributes=attributes,
                )
                steps.append(pending)
                turn += 1
        elif pending is not None and (
            role == "tool" or (role == "user" and message.get("message_type") == "observation")
        ):
            content = message.get("content")
            if isinstance(content, str) and _FAILED.match(content) is not None:
                pending.error = content
            else:
                pending.output = content
            pending = None
    return steps
