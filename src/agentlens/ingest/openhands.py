"""OpenHands event streams: actions and the observations they caused.

Three shapes are read, told apart by the file's content:

- a JSON array of events (a saved trajectory): one run;
- JSON Lines of evaluation or resolver outputs, each an object with a ``history`` list of events
  (plus ``instance_id`` / ``instruction`` / ``metrics`` / ``test_result``...): one run per line;
- a single such output object in a ``.json`` file: one run.

An event is an action (``"action": "run"``, with ``args``) or an observation
(``"observation": "run"``, with ``content`` and ``extras``) whose ``cause`` is the id of the
action it answers. Older outputs carry no ids: their fields are flattened into the event and
each observation follows its action; those are paired in order.

Mapping:

- ``message`` from the user -> ``user`` step (the first is the run's ``input`` when the output
  has no ``instruction``); from the agent -> ``text`` step; ``system`` -> ``system`` step;
  ``think`` -> ``thinking`` step; ``finish`` -> ``text`` step, and its message is the run's
  ``output``.
- ``recall`` (workspace and knowledge lookups) -> ``retrieval`` step.
- Every other action (``run``, ``run_ipython``, ``read``, ``edit``, ``write``, ``browse``...)
  -> ``tool`` step: ``name`` = the action type, ``input`` = its ``args`` without ``thought``,
  ``output`` = the observation's ``content``, ``started_at`` / ``ended_at`` = the two events'
  times. The ``thought`` that came with the action is a ``thinking`` step before it.
  A command that exited with a non-zero code (``extras.metadata.exit_code``, or ``exit_code``)
  has ``error`` = ``"exit code N"``; an ``error`` observation, and a file-editor observation
  (``read``, ``edit``, ``write``) whose content starts with ``ERROR:``, is the step's ``error``.
- The token usage of the model response that chose a tool call
  (``tool_call_metadata.model_response.usage``) becomes ``input_tokens`` / ``output_tokens`` on
  that call's step (on the first call only when one response made several).
- Agent-state changes and empty (``null``) observations are bookkeeping, not steps: their
  states are listed in ``metadata.agent_states``.

Everything else an event carries is kept in the step's ``attributes``; the output's other fields
(``metrics``, ``test_result``, ``instance``, ``metadata``...) go to the run's ``metadata``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from agentlens.errors import FormatError
from agentlens.ingest._agentlog import decode_json, open_binary, parse_time, run_id, source_name
from agentlens.ingest._checks import read_record, record_lines
from agentlens.model import Step, StepKind, Trace

__all__ = ["read"]

_BOOKKEEPING_ACTIONS = {"change_agent_state", "null"}
_BOOKKEEPING_OBSERVATIONS = {"agent_state_changed", "null"}
_EDITOR_OBSERVATIONS = {"read", "edit", "write"}
"""Observations of the file editor, which reports a failed call as content starting ``ERROR:``."""
_OLD_ACTION_META = {
    "action",
    "thought",
    "is_confirmed",
    "action_risk",
    "keep_prompt",
    "kernel_init_code",
}


def read(path: Path) -> Iterator[Trace]:
    """Read the runs in an OpenHands trajectory or output file.

    Raises:
        FormatError: the file is not JSON / JSON Lines, or an event is malformed.
    """
    name = source_name(path)
    with open_binary(path) as handle:
        head = handle.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
        handle.seek(0)
        if head[:1] == b"[":
            raw = read_record(handle, name)
            yield _run(decode_json(raw, name, None), {}, name, 1, raw, None)
            return
        lines = ((n, line) for n, line in record_lines(handle, name) if line.strip())
        first = next(lines, None)
        if first is None:
            raise FormatError("empty file", source=name)
        try:
            json.loads(first[1])  # is the first line a document of its own (JSON Lines)?
        except RecursionError:
            raise FormatError(
                "invalid JSON: nested too deeply", source=name, line=first[0]
            ) from None
        except ValueError:  # one pretty-printed output object
            raw = read_record(handle, name, first[1])
            data = decode_json(raw, name, None)
            if not isinstance(data, dict):
                raise FormatError(
                    "expected an array of events or an output object", source=name
                ) from None
            yield _output(data, name, 1, raw)
            return
        # Decoded again with the checks every other line gets (a lone surrogate, too deep).
        yield _line(decode_json(first[1], name, first[0]), name, first[0], first[1])
        for number, line in lines:
            yield _line(decode_json(line, name, number), name, number, line)


def _line(data: Any, source: str, number: int, raw: bytes) -> Trace:
    if not isinstance(data, dict):
        raise FormatError("each line must be a JSON object", source=source, line=number)
    return _output(data, source, number, raw)


def _output(data: dict[str, Any], source: str, line: int, raw: bytes) -> Trace:
    history = data.get("history")
    if not isinstance(history, list):
        raise FormatError("missing or non-list history", source=source, line=line, field="history")
    return _run(history, data, source, line, raw, line)


def _run(
    events: Any, output: dict[str, Any], source: str, position: int, raw: bytes, line: int | None
) -> Trace:
    if not isinstance(events, list):
        raise FormatError("expected a list of events", source=source, line=line)
    builder = _Builder(source, line)
    for i, event in enumerate(events):
        builder.add(event, i)
    builder.finish()
    times = [t for s in builder.steps for t in (s.started_at, s.ended_at) if t is not None]
    started = min(times) if times else None
    metadata: dict[str, Any] = {"source_format": "openhands", "source": source}
    for key, value in output.items():
        if key not in ("history", "instruction"):
            metadata[key] = value
    if builder.states:
        metadata["agent_states"] = builder.states
    error = output.get("error")
    name = output.get("instance_id")
    if name is None and isinstance(output.get("issue"), dict):
        issue = output["issue"]
        name = f"{issue.get('owner', '')}/{issue.get('repo', '')}#{issue.get('number', '')}"
    return Trace(
        id=run_id(
            "openhands", source, str(position), hashlib.sha256(raw).digest(), started_at=started
        ),
        name=str(name) if name is not None else f"{Path(source).stem}:{position}",
        status="error" if error else "ok",
        started_at=started,
        ended_at=max(times) if times else None,
        input=output.get("instruction", builder.first_user),
        output=builder.final,
        metadata=metadata,
        steps=builder.steps,
    )


def _usage(metadata: Any) -> dict[str, int]:
    if not isinstance(metadata, dict):
        return {}
    response = metadata.get("model_response")
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return {}
    out = {}
    for src, dst in (("prompt_tokens", "input_tokens"), ("completion_tokens", "output_tokens")):
        value = usage.get(src)
        if isinstance(value, int) and not isinstance(value, bool):
            out[dst] = value
    return out


def _exit_code(event: dict[str, Any]) -> Any:
    extras = event.get("extras")
    if isinstance(extras, dict):
        meta = extras.get("metadata")
        if isinstance(meta, dict) and "exit_code" in meta:
            return meta["exit_code"]
        if "exit_code" in extras:
            return extras["exit_code"]
    return event.get("exit_code")


class _Builder:
    def __init__(self, source: str, line: int | None) -> None:
        self.source = source
        self.line = line
        self.steps: list[Step] = []
        self.by_id: dict[str, Step] = {}
        self.open: list[Step] = []
        self.states: list[Any] = []
        self.first_user: Any = None
        self.final: Any = None
        self.responses: set[str] = set()

    def _step(self, kind: StepKind, **fields: Any) -> Step:
        step = Step(id=f"s{len(self.steps) + 1}", kind=kind, **fields)
        self.steps.append(step)
        return step

    def _time(self, event: dict[str, Any], i: int) -> datetime | None:
        return parse_time(
            event.get("timestamp"),
            source=self.source,
            line=self.line,
            field=f"history[{i}].timestamp",
        )

    def add(self, event: Any, i: int) -> None:
        where = f"history[{i}]"
        if isinstance(event, list) and len(event) == 2:  # very old outputs: [action, observation]
            self.add(event[0], i)
            self.add(event[1], i)
            return
        if not isinstance(event, dict):
            raise FormatError(
                "an event must be an object", source=self.source, line=self.line, field=where
            )
        if "action" in event:
            self._action(event, i)
        elif "observation" in event:
            self._observation(event, i)
        else:
            raise FormatError(
                "an event needs 'action' or 'observation'",
                source=self.source,
                line=self.line,
                field=where,
            )

    def _action(self, event: dict[str, Any], i: int) -> None:
        action = event.get("action")
        if not isinstance(action, str):
            raise FormatError(
                "action must be a string",
                source=self.source,
                line=self.line,
                field=f"history[{i}].action",
            )
        when = self._time(event, i)
        if action in _BOOKKEEPING_ACTIONS:
            args = event.get("args")
            if isinstance(args, dict) and "agent_state" in args:
                self.states.append(args["agent_state"])
            return
        if "args" in event:
            args = event.get("args")
            if not isinstance(args, dict):
                raise FormatError(
                    "args must be an object",
                    source=self.source,
                    line=self.line,
                    field=f"history[{i}].args",
                )
            args = dict(args)
            extra = {
                k: v
                for k, v in event.items()
                if k not in ("action", "args", "timestamp", "message")
            }
        else:  # older flattened events
            args = {k: v for k, v in event.items() if k not in _OLD_ACTION_META}
            extra = {
                k: event[k]
                for k in ("is_confirmed", "action_risk", "keep_prompt", "kernel_init_code")
                if k in event
            }
        thought = args.pop("thought", None) if "thought" in args else event.get("thought")
        message = event.get("message")
        source = event.get("source")
        content = args.get("content", message)

        if action == "message":
            # Older outputs carry no ``source``: there the first message is the user's.
            from_user = source == "user" or (source is None and not self.steps)
            kind = StepKind.USER if from_user else StepKind.TEXT
            step = self._step(
                kind, output=content, started_at=when, ended_at=when, attributes=extra
            )
            if kind is StepKind.USER and self.first_user is None:
                self.first_user = content
            return
        if action == "system":
            self._step(
                StepKind.SYSTEM, output=content, started_at=when, ended_at=when, attributes=extra
            )
            return
        if action == "think":
            text = thought if thought else message
            self._step(
                StepKind.THINKING, output=text, started_at=when, ended_at=when, attributes=extra
            )
            return
        if isinstance(thought, str) and thought.strip():
            self._step(StepKind.THINKING, output=thought, started_at=when, ended_at=when)
        if action == "finish":
            final = args.get("final_thought") or message or thought
            self._step(
                StepKind.TEXT,
                output=final,
                started_at=when,
                ended_at=when,
                attributes={**extra, "args": args},
            )
            self.final = final
            return
        kind = StepKind.RETRIEVAL if action == "recall" else StepKind.TOOL
        attributes = dict(extra)
        if message not in (None, ""):
            attributes["message"] = message
        meta = event.get("tool_call_metadata")
        if isinstance(meta, dict):
            response = meta.get("model_response")
            raw_id = response.get("id") if isinstance(response, dict) else None
            response_id = None if raw_id is None else str(raw_id)
            if response_id is None or response_id not in self.responses:
                attributes.update(_usage(meta))
            if response_id is not None:
                self.responses.add(response_id)
        step = self._step(kind, name=action, input=args, started_at=when, attributes=attributes)
        if "id" in event:
            self.by_id[str(event["id"])] = step
        self.open.append(step)

    def _observation(self, event: dict[str, Any], i: int) -> None:
        observation = event.get("observation")
        if not isinstance(observation, str):
            raise FormatError(
                "observation must be a string",
                source=self.source,
                line=self.line,
                field=f"history[{i}].observation",
            )
        when = self._time(event, i)
        if observation in _BOOKKEEPING_OBSERVATIONS:
            extras = event.get("extras")
            if isinstance(extras, dict) and "agent_state" in extras:
                self.states.append(extras["agent_state"])
            return
        step = self._match(event, observation)
        extras = {
            k: v
            for k, v in event.items()
            if k not in ("observation", "content", "cause", "timestamp", "tool_call_metadata", "id")
        }
        if step is None:
            # An observation that answers no action: an error the runtime reported on a malformed
            # call, or a stray result. It still cost a step.
            meta = event.get("tool_call_metadata")
            name = meta.get("function_name") if isinstance(meta, dict) else None
            step = self._step(
                StepKind.TOOL,
                name=str(name or observation),
                started_at=when,
                attributes={"unpaired": True},
            )
        step.ended_at = when
        content = event.get("content")
        if observation == "error" or (
            observation in _EDITOR_OBSERVATIONS
            and isinstance(content, str)
            and content.startswith("ERROR:")
        ):
            step.error = content
        else:
            step.output = content
            code = _exit_code(event)
            if isinstance(code, int | str) and str(code) not in ("0", "-1", ""):
                step.error = f"exit code {code}"
        for key, value in extras.items():
            step.attributes[key if key not in step.attributes else f"observation.{key}"] = value
        if "id" in event:
            step.attributes["observation_id"] = event["id"]

    def _match(self, event: dict[str, Any], observation: Any) -> Step | None:
        cause = event.get("cause")
        if cause is not None:
            step = self.by_id.get(str(cause))
            if step is not None and step in self.open:
                self.open.remove(step)
                return step
            return None
        if "id" in event and observation == "error":
            return None
        for step in self.open:
            if step.name == observation:
                self.open.remove(step)
                return step
        return None

    def finish(self) -> None:
        for step in self.open:
            step.attributes["unpaired"] = True
