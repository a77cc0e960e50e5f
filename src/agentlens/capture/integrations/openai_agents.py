"""A tracing processor for the OpenAI Agents SDK: one agentlens run per SDK trace.

::

    import agentlens
    from agents import Agent, Runner, add_trace_processor
    from agentlens.integrations.openai_agents import AgentlensProcessor

    agentlens.configure(db="sqlite:///agentlens.db")
    add_trace_processor(AgentlensProcessor())
    result = Runner.run_sync(Agent(name="support", instructions="..."), "Where is ORD-1?")

The SDK calls the processor as each span starts and ends, so steps keep their real times and
nesting (a span's parent is its step's parent):

- ``agent`` span -> ``agent`` step named after the agent (``attributes``: ``tools``,
  ``handoffs``, ``output_type``);
- ``generation`` and ``response`` spans -> ``llm`` steps: ``input`` = the messages sent,
  ``output`` = the reply, ``attributes``: ``model``, ``input_tokens``, ``output_tokens``,
  ``cost_usd``, ``response_id``;
- ``function`` span -> ``tool`` step: ``input`` = the parsed arguments, ``output`` = what the
  tool returned, ``error`` = the span's error (a tool that raised);
- ``handoff`` span -> ``agent`` step named ``handoff`` (``attributes.from_agent`` /
  ``to_agent``); ``guardrail`` span -> ``agent`` step named after the guardrail with
  ``attributes.triggered``; the SDK's ``task`` (the whole workflow) and ``turn`` spans ->
  ``agent`` steps with their fields (``turn``, ``agent_name``, ``usage``: totals of the spans
  below, not counted again); any other span (``custom``, ``mcp_tools``...) -> an ``agent``
  step; every step made from a span keeps ``attributes.span_type``.

A trace started inside :func:`agentlens.run` joins that run; otherwise the trace is a run of its
own (``name`` = the trace's workflow name, ``metadata``: ``trace_id``, ``group_id`` and the
trace's metadata; ``input`` = the first user message, ``output`` = the last reply text), exported
when the trace ends, with ``status = "error"`` and ``metadata.error`` when an ``agent`` (or
``task``) span ended with an error (the SDK raised out of the run). Needs the ``openai-agents`` extra.
"""

from __future__ import annotations

import contextvars
import json
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentlens.capture._run import ActiveStep, Run, current_run
from agentlens.capture._run import run as new_run
from agentlens.capture._state import is_enabled
from agentlens.capture.integrations._common import (
    ToolCall,
    ToolResult,
    _internal,
    estimate_cost,
    fingerprint,
    move_before,
    plain,
    require,
)
from agentlens.capture.integrations.openai import _served as served_item

__all__ = ["AgentlensProcessor"]

_tracing = require("agents.tracing", "openai-agents")


@dataclass
class _Trace:
    run: Run
    ctx: contextvars.Context
    own: bool
    first_input: Any = None
    last_text: str | None = None
    error: dict[str, Any] | None = None
    """The first error of an ``agent`` or ``task`` span: the SDK raised out of the run."""
    shown: Counter[str] = field(default_factory=Counter)
    """How often each system prompt or user message (by fingerprint) is recorded as a step."""


class AgentlensProcessor(_tracing.TracingProcessor):  # type: ignore[name-defined]
    """Records each Agents SDK trace as a run (see the module docstring).

    Args:
        prices: {model prefix: (USD per 1M input tokens, per 1M output tokens)}.
        agent: the agent role of the runs this processor starts (outside ``agentlens.run()``);
            by default the name of the trace's first agent.
    """

    def __init__(
        self, *, prices: Mapping[str, Sequence[float]] | None = None, agent: str | None = None
    ) -> None:
        self.prices = dict(prices or {})
        self.agent = agent
        self._lock = threading.Lock()
        self._traces: dict[str, _Trace] = {}
        self._steps: dict[str, tuple[ActiveStep, contextvars.Context, _Trace]] = {}

    # -- traces ------------------------------------------------------------------------------

    def on_trace_start(self, trace: Any) -> None:
        try:
            if not is_enabled():
                return
            joined = current_run()
            if joined is not None:
                if not joined.recording:
                    return
                state = _Trace(joined, contextvars.copy_context(), own=False)
            else:
                metadata: dict[str, Any] = {"integration": "openai-agents"}
                metadata["trace_id"] = trace.trace_id
                group = getattr(trace, "group_id", None)
                if group:
                    metadata["group_id"] = group
                extra = getattr(trace, "metadata", None)
                if isinstance(extra, Mapping):
                    metadata.update({str(k): v for k, v in extra.items()})
                run = new_run(
                    agent=self.agent, name=getattr(trace, "name", None), metadata=metadata
                )
                ctx = contextvars.Context()
                ctx.run(run.__enter__)
                state = _Trace(run, ctx, own=True)
            with self._lock:
                self._traces[trace.trace_id] = state
        except Exception as exc:
            _internal(exc)

    def on_trace_end(self, trace: Any) -> None:
        try:
            with self._lock:
                state = self._traces.pop(trace.trace_id, None)
            if state is None or not state.own:
                return
            if state.run.input is None and state.first_input is not None:
                state.run.input = state.first_input
            state.run.output = state.last_text
            if state.error is not None:
                state.run.status = "error"
                state.run.metadata["error"] = state.error
            state.ctx.run(state.run.__exit__, None, None, None)
        except Exception as exc:
            _internal(exc)

    # -- spans -------------------------------------------------------------------------------

    def on_span_start(self, span: Any) -> None:
        try:
            with self._lock:
                state = self._traces.get(span.trace_id)
                parent = self._steps.get(span.parent_id) if span.parent_id else None
            if state is None:
                return
            if parent is not None:
                ctx = parent[1].copy()
            elif state.own:
                ctx = state.ctx.copy()
            else:
                ctx = contextvars.copy_context()
            data = span.span_data
            kind, name = _kind_and_name(data)
            if state.own and state.run.agent is None and data.type == "agent" and name:
                state.run.agent = name  # the role: without it no per-agent settings apply
            step = ctx.run(state.run.step, kind, name, attributes={"span_type": data.type})
            ctx.run(step.__enter__)
            with self._lock:
                self._steps[span.span_id] = (step, ctx, state)
        except Exception as exc:
            _internal(exc)

    def on_span_end(self, span: Any) -> None:
        try:
            with self._lock:
                entry = self._steps.pop(span.span_id, None)
            if entry is None:
                return
            step, ctx, state = entry
            self._fill(step, span.span_data, state)
            shown = _shown(span.span_data)
            served = _served_of(span.span_data)
            error = span.error
            if error:
                message = error.get("message") if isinstance(error, Mapping) else str(error)
                details = error.get("data") if isinstance(error, Mapping) else None
                step.error = message if not details else {"message": message, "data": details}
                # The SDK sets an error on an agent span when the run raises out of it (max
                # turns, a model error, a tripped guardrail); a failed tool is handled, the run
                # goes on.
                if state.error is None and span.span_data.type in ("agent", "task"):
                    state.error = {"message": message, **({"data": details} if details else {})}
            ctx.run(step.__exit__, None, None, None)
            if shown:
                self._record_shown(state, step, ctx, shown)
            if served:  # the hosted tools (file search, web search...) ran before the reply
                ran = [
                    ctx.run(
                        state.run.step,
                        tool.kind,
                        tool.name,
                        input=tool.arguments,
                        output=None if result.is_error else result.content,
                        error=result.content if result.is_error else None,
                        attributes={"tool_call_id": tool.id, "served": True},
                    )
                    for tool, result in served
                ]
                move_before(state.run, ran, step)
        except Exception as exc:
            _internal(exc)

    @staticmethod
    def _record_shown(
        state: _Trace, step: ActiveStep, ctx: contextvars.Context, shown: list[tuple[str, Any]]
    ) -> None:
        """Record the system prompt and the user messages a model call was sent, those the
        run has not recorded yet, as ``system`` / ``user`` steps just before the call's step (so
        they are evidence for its reply). The SDK gives the input when the span ends."""
        here: Counter[str] = Counter()
        new = []
        for kind, content in shown:
            key = fingerprint(kind, content)
            here[key] += 1
            if here[key] > state.shown[key]:
                state.shown[key] += 1
                new.append(ctx.run(state.run.step, kind, output=content))
        move_before(state.run, new, step)

    def shutdown(self) -> None:
        with self._lock:
            traces = [t for t in self._traces.values() if t.own]
            self._traces.clear()
        for state in traces:
            try:
                state.ctx.run(state.run.__exit__, None, None, None)
            except Exception as exc:
                _internal(exc)

    def force_flush(self) -> None:
        return None

    # -- span data ---------------------------------------------------------------------------

    def _fill(self, step: ActiveStep, data: Any, state: _Trace) -> None:
        kind = data.type
        if kind == "agent":
            for key in ("tools", "handoffs", "output_type"):
                value = getattr(data, key, None)
                if value:
                    step.attributes[key] = value
        elif kind == "function":
            step.input = _json(data.input)
            step.output = data.output
        elif kind == "generation":
            step.input = data.input
            step.output = data.output
            self._llm(step, data.model, data.usage, None)
            self._remember(state, data.input, _last_text(data.output))
        elif kind == "response":
            response = data.response
            items = [plain(i) for i in (getattr(response, "output", None) or [])]
            text = "\n".join(t for t in (_item_text(i) for i in items) if t) or None
            calls = [
                {
                    "id": i.get("call_id"),
                    "name": i.get("name"),
                    "arguments": _json(i.get("arguments")),
                }
                for i in items
                if i.get("type") == "function_call"
            ]
            output: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                output["tool_calls"] = calls
            step.input = plain(data.input)
            step.output = output
            usage = getattr(response, "usage", None) or getattr(data, "usage", None)
            self._llm(
                step, getattr(response, "model", None), plain(usage), getattr(response, "id", None)
            )
            self._remember(state, step.input, text)
        elif kind == "handoff":
            step.attributes["from_agent"] = data.from_agent
            step.attributes["to_agent"] = data.to_agent
        elif kind == "guardrail":
            step.attributes["triggered"] = bool(data.triggered)
        elif kind in ("task", "turn"):  # the SDK's grouping spans: keep their own fields
            exported = data.export() if callable(getattr(data, "export", None)) else {}
            inner: Mapping[str, Any] = exported if isinstance(exported, Mapping) else {}
            if isinstance(inner.get("data"), Mapping):
                inner = inner["data"]
            for key, value in inner.items():
                if key not in ("sdk_span_type", "name", "type"):
                    step.attributes[key] = value
            if kind == "turn" and isinstance(inner.get("turn"), int):
                step.name = f"turn {inner['turn']}"
        elif kind == "custom":
            step.attributes["data"] = getattr(data, "data", None)
        else:
            exported = getattr(data, "export", None)
            if callable(exported):
                step.attributes["data"] = exported()

    def _llm(self, step: ActiveStep, model: Any, usage: Any, response_id: Any) -> None:
        attrs = step.attributes
        if isinstance(model, str):
            attrs["model"] = model
            step.name = step.name or model
        if isinstance(usage, Mapping):
            for source, target in (
                ("input_tokens", "input_tokens"),
                ("prompt_tokens", "input_tokens"),
                ("output_tokens", "output_tokens"),
                ("completion_tokens", "output_tokens"),
                ("total_tokens", "total_tokens"),
            ):
                value = usage.get(source)
                if isinstance(value, int) and target not in attrs:
                    attrs[target] = value
        cost = estimate_cost(
            attrs.get("model"), attrs.get("input_tokens"), attrs.get("output_tokens"), self.prices
        )
        if cost is not None:
            attrs["cost_usd"] = cost
        if isinstance(response_id, str):
            attrs["response_id"] = response_id

    @staticmethod
    def _remember(state: _Trace, sent: Any, text: str | None) -> None:
        if state.first_input is None:
            state.first_input = _first_user(sent)
        if text:
            state.last_text = text


_SHOWN = {"system": "system", "developer": "system", "user": "user"}


def _served_of(data: Any) -> list[tuple[ToolCall, ToolResult]]:
    """The hosted tools of a ``response`` span's response (file search, web search, code
    interpreter, remote MCP), each with its result, as the OpenAI client integration reads
    them."""
    if data.type != "response":
        return []
    items = [plain(i) for i in (getattr(getattr(data, "response", None), "output", None) or [])]
    return [s for s in map(served_item, items) if s is not None]


def _shown(data: Any) -> list[tuple[str, Any]]:
    """The system prompt and user messages a ``response`` or ``generation`` span was sent."""
    if data.type not in ("response", "generation"):
        return []
    out: list[tuple[str, Any]] = []
    if data.type == "response":
        instructions = getattr(getattr(data, "response", None), "instructions", None)
        if isinstance(instructions, str) and instructions:
            out.append(("system", instructions))
    sent = plain(getattr(data, "input", None))
    if isinstance(sent, str):
        return [*out, ("user", sent)]
    for item in sent or []:
        if not isinstance(item, Mapping) or item.get("type", "message") != "message":
            continue
        kind = _SHOWN.get(str(item.get("role")))
        if kind is not None:
            text = _first_user([{"role": "user", "content": item.get("content")}])
            if text not in (None, ""):
                out.append((kind, text))
    return out


def _kind_and_name(data: Any) -> tuple[str, str | None]:
    kind = data.type
    if kind == "function":
        return "tool", data.name
    if kind in ("generation", "response"):
        return "llm", getattr(data, "model", None)
    if kind == "handoff":
        return "agent", "handoff"
    return "agent", getattr(data, "name", None) or kind


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _item_text(item: Any) -> str | None:
    if not isinstance(item, Mapping) or item.get("type") != "message":
        return None
    content = item.get("content")
    if isinstance(content, str):
        return content
    parts = [p.get("text") for p in content or [] if isinstance(p, Mapping)]
    return "\n".join(p for p in parts if isinstance(p, str)) or None


def _first_user(sent: Any) -> Any:
    if isinstance(sent, str):
        return sent
    for item in sent or []:
        if isinstance(item, Mapping) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, list):
                return "\n".join(
                    str(p.get("text")) for p in content if isinstance(p, Mapping) and p.get("text")
                )
            return content
    return None


def _last_text(output: Any) -> str | None:
    for item in reversed(list(output or [])):
        if isinstance(item, Mapping):
            text = _item_text(item) or (
                item.get("content") if isinstance(item.get("content"), str) else None
            )
            if text:
                return text
    return None
