"""Record a live Claude Agent SDK session from its message stream.

::

    import agentlens
    from claude_agent_sdk import ClaudeAgentOptions, query
    from agentlens.integrations.claude_agent_sdk import record

    agentlens.configure(db="sqlite:///agentlens.db")
    prompt = "Why was ORD-7731 refunded twice?"
    async for message in record(query(prompt=prompt, options=ClaudeAgentOptions()), prompt=prompt):
        ...  # the SDK's messages, passed through unchanged

:func:`record` passes every message through and records, as they arrive (the same mapping as
the ``claude-code`` importer, :mod:`agentlens.ingest.claude_code`):

- ``AssistantMessage`` blocks: ``TextBlock`` -> ``text`` step, ``ThinkingBlock`` ->
  ``thinking`` step, ``ToolUseBlock`` -> ``tool`` step (``name``, ``input``), opened until its
  result arrives; the response's ``model``, token usage (``input_tokens``, ``output_tokens``,
  ``cache_read_tokens``, ``cache_write_tokens``) and ``stop_reason`` on its first step, once
  per ``message_id``;
- ``UserMessage`` ``ToolResultBlock`` -> closes that tool step: ``output`` = its content (text
  parts joined), or ``error`` with ``is_error``; ``attributes.truncated`` when the result says
  it was cut (``[N lines truncated]``, ``Output too large``...); text from the user -> ``user``
  step;
- messages with ``parent_tool_use_id`` belong to a sub-agent: they are children of an ``agent``
  step under the ``Task`` / ``Agent`` tool call that started it;
- ``ClaudeAgentOptions.system_prompt``, which goes to the CLI and never into the stream ->
  a ``system`` step at the start of the session (evidence: what the model was told), once per
  run; the options are read from the stream ``query()`` or ``ClaudeSDKClient`` returned, or
  from ``options=``. Of a ``preset`` only the ``append`` text is known (``attributes.preset``);
  a ``file`` prompt is read (``attributes.path``);
- ``SystemMessage`` ``init`` -> ``metadata`` (``session_id``, ``model``, ``tools``...);
- ``ResultMessage`` -> the run's ``output`` (``result``), ``status`` (``error`` when
  ``is_error``), ``metadata``: ``total_cost_usd``, ``num_turns``, ``duration_ms``, ``usage``.

Inside :func:`agentlens.run` the session joins that run (the prompt, when it is text, becomes a
``user`` step of it), and its ``ResultMessage`` is kept without overriding what the run's code
set: ``session_id``, ``subtype``, ``is_error``, ``total_cost_usd``, ``num_turns``,
``duration_ms`` and ``usage`` are appended to ``metadata.claude_agent_sdk`` (a list, one entry
per session), ``result`` is the run's output when the run has none (or the answer of an
earlier session), and ``is_error`` makes the status ``error`` unless the run's code set one;
otherwise it is a run of its own
(``agent`` = ``claude-agent-sdk`` unless given, ``input`` = ``prompt``), exported when the
``ResultMessage`` arrives or the stream ends. A session that ends without its ``ResultMessage``
(the caller's ``break``, a stream that ran out) marks the run ``metadata.incomplete = true`` (its
status stays ``ok``: stopping early is no failure; an exception makes it ``error``), and the
tool calls it left unanswered ``attributes.incomplete``. Recording never raises into the
session. Needs the ``claude-agent-sdk`` extra.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import threading
from collections import OrderedDict
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentlens.capture._run import ActiveStep, Run, current_run
from agentlens.capture._run import run as new_run
from agentlens.capture._state import is_enabled
from agentlens.capture.integrations._common import _internal, require, safe
from agentlens.model import StepKind

__all__ = ["record"]

_sdk = require("claude_agent_sdk", "claude-agent-sdk")

_TRUNCATED = re.compile(
    r"\[\d[\d,]* (?:lines|characters|chars|bytes) truncated\]"
    r"|\[Truncated|Output too large|<persisted-output>|Results are truncated",
    re.IGNORECASE,
)
_TASK_TOOLS = frozenset({"Task", "Agent"})
_RESULT_FIGURES = (
    "session_id",
    "subtype",
    "is_error",
    "total_cost_usd",
    "num_turns",
    "duration_ms",
    "usage",
)
"""What a joined run keeps of each session's ``ResultMessage``, in ``metadata.claude_agent_sdk``."""
_SESSIONS_KEY = "claude_agent_sdk"
_answers: OrderedDict[str, Any] = OrderedDict()
"""Run id -> the answer a session of it set as the run's output (so that a later session's
answer replaces it, and an output the run's code set is never replaced)."""
_MAX_ANSWERS = 256
_answers_lock = threading.Lock()


def record(
    messages: AsyncIterable[Any],
    *,
    prompt: Any = None,
    agent: str | None = None,
    options: Any = None,
) -> AsyncIterator[Any]:
    """Pass the messages of a Claude Agent SDK session through, recording them as a run.

    Args:
        messages: what ``claude_agent_sdk.query(...)`` or ``ClaudeSDKClient.receive_response()``
            yields.
        prompt: the prompt sent (the run's ``input`` when the session is a run of its own).
        agent: the agent role of that run (default ``claude-agent-sdk``).
        options: the session's ``ClaudeAgentOptions``, whose ``system_prompt`` (which the
            message stream never shows) is recorded as a ``system`` step. Found without it on
            the stream ``query()`` or ``ClaudeSDKClient.receive_response()`` /
            ``receive_messages()`` returned; pass it when ``messages`` is another stream (your
            own generator around ``query()``).

    Returns:
        An async iterator of the same messages (with ``aclose()``).

    Importing this module raises :class:`~agentlens.errors.MissingExtraError` when the
    ``claude-agent-sdk`` package is not installed.
    """
    return _Recording(messages, prompt, agent, options)


class _Recording:
    """What :func:`record` returns: the session's messages, passed through and recorded.

    Not an async generator: one left by a ``break`` is closed only later, by a task the event
    loop schedules, by when the run it joined has usually ended (and been exported without
    saying the session was cut short). This object is dropped at once, and ends the session
    then: a session that ends before its ``ResultMessage`` (the caller stopped reading, or the
    stream ran out) marks its run ``metadata.incomplete = true``.
    """

    __slots__ = ("_agent", "_items", "_messages", "_options", "_prompt", "_session", "_started")

    def __init__(
        self, messages: AsyncIterable[Any], prompt: Any, agent: str | None, options: Any
    ) -> None:
        self._messages = messages
        self._prompt = prompt
        self._agent = agent
        self._options = options
        self._items: AsyncIterator[Any] | None = None
        self._session: _Session | None = None
        self._started = False

    def __aiter__(self) -> _Recording:
        return self

    async def __anext__(self) -> Any:
        if self._items is None:
            if not self._started:  # the session starts when the messages are first read
                self._started = True
                options = self._options
                if options is None:
                    options = safe(_options_of, self._messages)
                self._session = _Session.start(_sdk, self._prompt, self._agent, options)
            self._items = self._messages.__aiter__()
        try:
            message = await self._items.__anext__()
        except StopAsyncIteration:
            self._end(None)
            raise
        except BaseException as exc:
            self._end(exc)
            raise
        if self._session is not None:
            self._session.add(message)
        return message

    async def aclose(self) -> None:
        """Stop reading: end the session with what arrived, and close the SDK's stream."""
        self._end(None)
        close = getattr(self._items, "aclose", None)
        if close is not None:
            await close()

    def _end(self, exc: BaseException | None) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.finish(exc)

    def __del__(self) -> None:  # the caller stopped reading: what arrived is the run
        with contextlib.suppress(Exception):
            self._end(None)


@dataclass
class _Session:
    sdk: Any
    run: Run
    ctx: contextvars.Context
    own: bool
    tools: dict[str, tuple[ActiveStep, contextvars.Context]] = field(default_factory=dict)
    agents: dict[str, tuple[ActiveStep, contextvars.Context]] = field(default_factory=dict)
    responses: dict[str, ActiveStep] = field(default_factory=dict)
    done: bool = False
    resulted: bool = False
    """The session's ``ResultMessage`` arrived (without it, the session is incomplete)."""

    @classmethod
    def start(cls, sdk: Any, prompt: Any, agent: str | None, options: Any) -> _Session | None:
        try:
            if not is_enabled():
                return None
            system = safe(_system_prompt, options) if options is not None else None
            joined = current_run()
            if joined is not None:
                if not joined.recording:
                    return None
                if system is not None and not any(
                    s.kind is StepKind.SYSTEM and s.output == system[0] for s in joined.steps
                ):
                    joined.step("system", output=system[0], attributes=system[1])
                # The run holds its own input (or none): the prompt is evidence, keep it.
                if isinstance(prompt, str) and prompt:
                    joined.step("user", output=prompt)
                return cls(sdk, joined, contextvars.copy_context(), own=False)
            run = new_run(
                agent=agent or "claude-agent-sdk",
                input=prompt if isinstance(prompt, str) else None,
                metadata={"integration": "claude-agent-sdk"},
            )
            ctx = contextvars.Context()
            ctx.run(run.__enter__)
            if system is not None:
                ctx.run(run.step, "system", output=system[0], attributes=system[1])
            return cls(sdk, run, ctx, own=True)
        except Exception as exc:
            _internal(exc)
            return None

    # -- messages ----------------------------------------------------------------------------

    def add(self, message: Any) -> None:
        try:
            sdk = self.sdk
            if isinstance(message, sdk.AssistantMessage):
                self.assistant(message)
            elif isinstance(message, sdk.UserMessage):
                self.user(message)
            elif isinstance(message, sdk.SystemMessage):
                if message.subtype == "init" and self.own:
                    data = message.data or {}
                    for key in ("session_id", "model", "cwd", "tools", "permissionMode"):
                        if key in data:
                            self.run.metadata[key] = data[key]
            elif isinstance(message, sdk.ResultMessage):
                self.result(message)
        except Exception as exc:
            _internal(exc)

    def context(self, parent_tool: str | None) -> contextvars.Context:
        """The context new steps are opened in: the sub-agent's, the run's, or the caller's."""
        if parent_tool:
            sub = self.agents.get(parent_tool)
            if sub is None:
                caller = self.tools.get(parent_tool)
                base = caller[1] if caller is not None else self.base()
                ctx = base.copy()
                name = None
                if caller is not None and isinstance(caller[0].input, dict):
                    name = caller[0].input.get("subagent_type")
                step = ctx.run(
                    self.run.step,
                    "agent",
                    name or "subagent",
                    attributes={"tool_use_id": parent_tool},
                )
                if caller is not None and isinstance(caller[0].input, dict):
                    step.input = caller[0].input.get("prompt")
                ctx.run(step.__enter__)
                sub = self.agents[parent_tool] = (step, ctx)
            return sub[1].copy()
        return self.base().copy()

    def base(self) -> contextvars.Context:
        return self.ctx if self.own else contextvars.copy_context()

    def assistant(self, message: Any) -> None:
        sdk = self.sdk
        parent = getattr(message, "parent_tool_use_id", None)
        first: ActiveStep | None = None
        for block in message.content:
            ctx = self.context(parent)
            step: ActiveStep | None = None
            if isinstance(block, sdk.TextBlock):
                step = ctx.run(self.run.step, "text", output=block.text)
                if parent in self.agents:
                    self.agents[parent][0].output = block.text
            elif isinstance(block, sdk.ThinkingBlock):
                step = ctx.run(self.run.step, "thinking", output=block.thinking)
            elif isinstance(block, sdk.ToolUseBlock):
                step = ctx.run(
                    self.run.step,
                    "tool",
                    block.name,
                    input=block.input,
                    attributes={"tool_use_id": block.id},
                )
                ctx.run(step.__enter__)
                self.tools[block.id] = (step, ctx)
            if step is not None and first is None:
                first = step
        if first is None:
            return
        key = getattr(message, "message_id", None) or f"step-{first.id}"
        holder = self.responses.setdefault(key, first)
        attrs = holder.attributes
        if getattr(message, "model", None):
            attrs["model"] = message.model
        if getattr(message, "message_id", None):
            attrs["message_id"] = message.message_id
        if getattr(message, "stop_reason", None):
            attrs["stop_reason"] = message.stop_reason
        usage = getattr(message, "usage", None) or {}
        for source, target in (
            ("input_tokens", "input_tokens"),
            ("output_tokens", "output_tokens"),
            ("cache_read_input_tokens", "cache_read_tokens"),
            ("cache_creation_input_tokens", "cache_write_tokens"),
        ):
            value = usage.get(source)
            if isinstance(value, int):
                attrs[target] = max(value, attrs.get(target, 0))

    def user(self, message: Any) -> None:
        sdk = self.sdk
        parent = getattr(message, "parent_tool_use_id", None)
        content = message.content
        if isinstance(content, str):
            if content:
                self.context(parent).run(self.run.step, "user", output=content)
            return
        texts = []
        for block in content:
            if isinstance(block, sdk.ToolResultBlock):
                self.tool_result(block, getattr(message, "tool_use_result", None), parent)
            elif isinstance(block, sdk.TextBlock):
                texts.append(block.text)
        if texts:
            self.context(parent).run(self.run.step, "user", output="\n".join(texts))

    def tool_result(self, block: Any, structured: Any, parent: str | None) -> None:
        content = block.content
        if isinstance(content, list):
            content = "\n".join(
                str(part.get("text", ""))
                for part in content
                if isinstance(part, dict) and part.get("type") == "text"
            )
        opened = self.tools.pop(block.tool_use_id, None)
        if opened is None:
            ctx = self.context(parent)
            step = ctx.run(
                self.run.step,
                "tool",
                attributes={"tool_use_id": block.tool_use_id, "unpaired": True},
            )
        else:
            step, ctx = opened
        if block.is_error:
            step.error = content if content not in (None, "") else "error"
        else:
            step.output = content
        if isinstance(structured, dict) and structured:
            step.attributes["tool_use_result"] = structured
        if isinstance(content, str) and _TRUNCATED.search(content):
            step.attributes["truncated"] = True
        if opened is not None:
            ctx.run(step.__exit__, None, None, None)
        sub = self.agents.pop(block.tool_use_id, None)
        if sub is not None:
            sub[1].run(sub[0].__exit__, None, None, None)

    def result(self, message: Any) -> None:
        self.resulted = True
        if not self.own:
            self.joined_result(message)
            return
        run = self.run
        run.output = message.result
        for key in ("total_cost_usd", "num_turns", "duration_ms", "usage", "session_id"):
            value = getattr(message, key, None)
            if value is not None:
                run.metadata[key] = value
        if message.is_error:
            run.status = "error"
            run.metadata["result_subtype"] = message.subtype
        self.finish(None)

    def joined_result(self, message: Any) -> None:
        """The ``ResultMessage`` of a session that joined a run: kept without overriding what
        the run's own code set. Its figures are appended to ``metadata.claude_agent_sdk`` (a
        list: a run may hold several sessions); its ``result`` becomes the run's output when
        the run has none (or has the answer of an earlier session of it); ``is_error`` makes
        the run's status ``error`` unless it was set already."""
        run = self.run
        entry: dict[str, Any] = {}
        for key in _RESULT_FIGURES:
            value = getattr(message, key, None)
            if value is not None:
                entry[key] = value
        metadata = run.metadata
        if isinstance(metadata, dict):
            sessions = metadata.setdefault(_SESSIONS_KEY, [])
            if isinstance(sessions, list):  # else the run's code put something else there
                sessions.append(entry)
        answer = message.result
        with _answers_lock:
            if answer is not None and (run.output is None or _answers.get(run.id) == run.output):
                run.output = answer
                _answers[run.id] = run.output
                _answers.move_to_end(run.id)
                while len(_answers) > _MAX_ANSWERS:
                    _answers.popitem(last=False)
        if message.is_error and run.status == "running":
            run.status = "error"

    def finish(self, exc: BaseException | None) -> None:
        if self.done:
            return
        self.done = True
        try:
            if not self.resulted and isinstance(self.run.metadata, dict):
                self.run.metadata["incomplete"] = True
            if not self.own:
                return
            for step, ctx in list(self.agents.values()):
                ctx.run(step.__exit__, None, None, None)
            if exc is None:
                self.ctx.run(self.run.__exit__, None, None, None)
            else:
                self.ctx.run(self.run.__exit__, type(exc), exc, None)
        except Exception as err:
            _internal(err)


def _options_of(messages: Any) -> Any:
    """The ``ClaudeAgentOptions`` of a stream ``query()`` or ``ClaudeSDKClient.receive_response()``
    / ``receive_messages()`` returned, from the arguments of the (not yet started) generator;
    ``None`` for another stream."""
    frame = getattr(messages, "ag_frame", None)
    if frame is None or not str(frame.f_globals.get("__name__", "")).startswith("claude_agent_sdk"):
        return None
    local = frame.f_locals
    options = local.get("options")
    if options is None:
        options = getattr(local.get("self"), "options", None)
    return options if isinstance(options, _sdk.ClaudeAgentOptions) else None


def _system_prompt(options: Any) -> tuple[str, dict[str, Any]] | None:
    """The text of a session's system prompt and the attributes of its step, or ``None``.

    ``system_prompt`` is a string, ``{"type": "custom", "prompt": ...}``, ``{"type": "file",
    "path": ...}`` (the file is read, relative to ``cwd``), or ``{"type": "preset", "preset":
    "claude_code", "append": ...}``: only the appended text is known here (the CLI builds the
    preset), recorded with ``attributes.preset``; a preset without ``append`` adds nothing.
    """
    prompt = getattr(options, "system_prompt", None)
    if isinstance(prompt, str):
        return (prompt, {}) if prompt else None
    if not isinstance(prompt, dict):
        return None
    kind = prompt.get("type")
    if kind == "custom" and isinstance(prompt.get("prompt"), str) and prompt["prompt"]:
        return prompt["prompt"], {}
    if kind == "preset" and isinstance(prompt.get("append"), str) and prompt["append"]:
        return prompt["append"], {"preset": prompt.get("preset")}
    if kind == "file" and prompt.get("path"):
        path = Path(prompt["path"])
        cwd = getattr(options, "cwd", None)
        if not path.is_absolute() and cwd:
            path = Path(cwd) / path
        text = path.read_text(encoding="utf-8", errors="replace")
        return (text, {"path": str(prompt["path"])}) if text else None
    return None
