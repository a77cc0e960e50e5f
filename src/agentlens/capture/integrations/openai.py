"""Record the calls of an OpenAI client: ``agentlens.integrations.openai.wrap(client)``.

::

    import agentlens, openai
    from agentlens.integrations.openai import wrap

    agentlens.configure(db="sqlite:///agentlens.db")
    client = wrap(openai.OpenAI())          # or openai.AsyncOpenAI()

    with agentlens.run(agent="support", input=question):
        reply = client.chat.completions.create(model="gpt-4o", messages=messages, tools=tools)

``client.chat.completions.create`` and ``client.responses.create`` (sync and async, streaming
or not) become ``llm`` steps: ``input`` = the messages (or Responses ``input``), ``output`` =
the assistant message (``{"role": "assistant", "content": ..., "tool_calls": [...]}``),
``attributes``: ``model``, ``input_tokens``, ``output_tokens``, ``total_tokens``,
``cache_read_tokens``, ``cost_usd`` (from a list-price table, or ``prices=``; the cached input
tokens, which ``input_tokens`` includes, at the cached-input price),
``finish_reason``, ``response_id``. A tool call the model asks for is a ``tool`` step, closed by
the ``tool`` message (or ``function_call_output`` item) fed back with its result. How calls
are grouped into runs is described in :mod:`agentlens.capture.integrations._common`.

The client is changed in place (its two ``create`` methods) and returned, so ``isinstance``
and every other method keep working. Needs the ``openai`` extra.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from agentlens.capture.integrations._common import (
    Call,
    Recorder,
    Shown,
    ToolCall,
    ToolResult,
    async_wrapper,
    fingerprint,
    member,
    plain,
    require,
    sync_wrapper,
    wrap_copies,
)

__all__ = ["wrap"]

C = TypeVar("C")


def wrap(
    client: C,
    *,
    agent: str | None = None,
    record_tool_results: bool = True,
    prices: Mapping[str, Sequence[float]] | None = None,
) -> C:
    """Record every chat-completions and Responses call of ``client``; returns ``client``.

    Args:
        client: an ``openai.OpenAI`` or ``openai.AsyncOpenAI`` (or Azure) client.
        agent: the agent role of the runs made for conversations outside ``agentlens.run()``.
        record_tool_results: record tool calls and the results fed back as ``tool`` steps
            (turn off when the tools are decorated with ``@agentlens.tool``).
        prices: {model prefix: (USD per 1M input tokens, per 1M output tokens)}, optionally
            followed by the price of cached input tokens (else :data:`CACHE_RATES` applies).

    Raises:
        MissingExtraError: the ``openai`` package is not installed.
    """
    openai = require("openai", "openai")
    if getattr(client, "_agentlens_wrapped", False):
        return client
    recorder = Recorder(
        "openai",
        agent=agent,
        record_tool_results=record_tool_results,
        prices=prices,
        input_includes_cache=True,
    )
    _install(client, recorder, isinstance(client, openai.AsyncOpenAI))
    return client


def _install(client: Any, recorder: Recorder, is_async: bool) -> None:
    """Wrap the ``create`` methods of ``client`` (and of its copies) to record through
    ``recorder``."""
    wrapper = async_wrapper if is_async else sync_wrapper
    resources: list[tuple[Any, Any]] = [
        (client.chat.completions, _Chat),
        (client.responses, _Responses),
    ]
    # client.beta.chat.completions (the spelling of structured outputs' first docs) is another
    # Completions object of its own
    beta = getattr(getattr(getattr(client, "beta", None), "chat", None), "completions", None)
    if beta is not None and beta is not client.chat.completions:
        resources.append((beta, _Chat))
    for resource, api in resources:
        # parse() (structured outputs) posts the request itself, not through create()
        for method in ("create", "parse"):
            if callable(getattr(resource, method, None)):
                setattr(resource, method, wrapper(getattr(resource, method), recorder, api))
    client._agentlens_wrapped = True
    wrap_copies(client, lambda copy: _install(copy, recorder, is_async))


# -- plain values from the SDK's objects ----------------------------------------------------------


def _text(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            text = member(part, "text")
            if isinstance(text, str):
                parts.append(text)
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    return str(content)


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _usage(usage: Any) -> dict[str, int | None]:
    if usage is None:
        return {}
    details = member(usage, "prompt_tokens_details") or member(usage, "input_tokens_details")
    return {
        "input_tokens": member(usage, "prompt_tokens", member(usage, "input_tokens")),
        "output_tokens": member(usage, "completion_tokens", member(usage, "output_tokens")),
        "total_tokens": member(usage, "total_tokens"),
        "cache_read_tokens": member(details, "cached_tokens") if details is not None else None,
    }


_SHOWN = {"system": "system", "developer": "system", "user": "user"}
"""The roles of the messages that are evidence, and the kind of step each becomes."""


# -- chat completions ------------------------------------------------------------------------------


class _Chat:
    """Reading chat-completions requests, replies and stream chunks."""

    @staticmethod
    def begin(recorder: Recorder, kwargs: dict[str, Any]) -> Call | None:
        messages = [plain(m) for m in kwargs.get("messages") or []]
        results = [
            ToolResult(
                call_id=str(m.get("tool_call_id")),
                content=_text(m.get("content")),
                name=m.get("name"),
            )
            if m.get("role") == "tool"
            else _function_result(m, messages[: i + 1])
            for i, m in enumerate(messages)
            if isinstance(m, dict)
            and ((m.get("role") == "tool" and m.get("tool_call_id")) or m.get("role") == "function")
        ]
        first_user = next(
            (_text(m.get("content")) for m in messages if member(m, "role") == "user"), None
        )
        shown = [
            Shown(_SHOWN[role], _text(m.get("content")), _message_fp(m))
            for m in messages
            if isinstance(m, dict) and (role := m.get("role")) in _SHOWN
        ]
        return recorder.begin(
            model=kwargs.get("model"),
            input=messages,
            sent=[_message_fp(m) for m in messages],
            results=results,
            first_user=first_user,
            shown=shown,
        )

    @staticmethod
    def end(recorder: Recorder, call: Call | None, response: Any) -> None:
        choices = member(response, "choices") or []
        message = member(choices[0], "message") if choices else None
        content = member(message, "content")
        calls = [
            ToolCall(
                id=str(member(tc, "id")),
                name=str(member(member(tc, "function"), "name")),
                arguments=_arguments(member(member(tc, "function"), "arguments")),
            )
            for tc in (member(message, "tool_calls") or [])
        ]
        function_call = member(message, "function_call")
        if function_call is not None and not calls:
            calls = [
                _legacy_call(member(function_call, "name"), member(function_call, "arguments"))
            ]
        _Chat.finish(
            recorder,
            call,
            content=content,
            refusal=member(message, "refusal"),
            calls=calls,
            model=member(response, "model"),
            usage=member(response, "usage"),
            finish=member(choices[0], "finish_reason") if choices else None,
            response_id=member(response, "id"),
        )

    @staticmethod
    def finish(
        recorder: Recorder,
        call: Call | None,
        *,
        content: str | None,
        refusal: str | None,
        calls: list[ToolCall],
        model: str | None,
        usage: Any,
        finish: str | None,
        response_id: str | None,
    ) -> None:
        output: dict[str, Any] = {"role": "assistant", "content": content}
        if refusal:
            output["refusal"] = refusal
        if calls:
            output["tool_calls"] = [
                {"id": None if c.legacy else c.id, "name": c.name, "arguments": c.arguments}
                for c in calls
            ]
        # as _message_fp reads the reply when it is sent back (a function_call has no id)
        ids = [c.id for c in calls if not c.legacy]
        reply = fingerprint("assistant", content or "", ids, None)
        recorder.end(
            call,
            output=output,
            model=model,
            usage=_usage(usage),
            tool_calls=calls,
            reply=[reply],
            text=content,
            response_id=response_id,
            attributes={"finish_reason": finish} if finish else None,
        )

    @staticmethod
    def accumulator() -> _ChatChunks:
        return _ChatChunks()


_LEGACY_IDS = itertools.count(1)


def _legacy_call(name: Any, arguments: Any) -> ToolCall:
    """The ``function_call`` of a reply of the legacy function-calling API (``functions=``):
    a tool call without an id, which the ``function`` message fed back answers by name."""
    return ToolCall(
        id=f"function_call-{next(_LEGACY_IDS)}",
        name=str(name),
        arguments=_arguments(arguments),
        legacy=True,
    )


def _function_result(message: dict[str, Any], upto: list[Any]) -> ToolResult:
    """A ``function`` message (the result of a legacy ``function_call``): it names the function,
    not a call, so it is paired by name. Its ``call_id`` (a digest of the conversation up to and
    with it, ``upto``) only keeps it from being recorded again when the messages are resent."""
    name, content = message.get("name"), _text(message.get("content"))
    key = fingerprint("function", name, [_message_fp(m) for m in upto])
    return ToolResult(
        call_id=f"function-{key}",
        content=content,
        name=str(name) if name is not None else None,
        by_name=True,
    )


def _message_fp(message: Any) -> str:
    calls = [str(member(tc, "id")) for tc in (member(message, "tool_calls") or [])]
    return fingerprint(
        member(message, "role"),
        _text(member(message, "content")) or "",
        calls,
        member(message, "tool_call_id"),
    )


class _ChatChunks:
    """A chat-completions stream, put back together chunk by chunk."""

    def __init__(self) -> None:
        self.content: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.function: dict[str, str] | None = None
        """A legacy ``function_call`` streamed in (``functions=``)."""
        self.model: str | None = None
        self.usage: Any = None
        self.finish: str | None = None
        self.id: str | None = None

    def add(self, chunk: Any) -> None:
        self.model = member(chunk, "model") or self.model
        self.id = member(chunk, "id") or self.id
        if member(chunk, "usage") is not None:
            self.usage = member(chunk, "usage")
        for choice in member(chunk, "choices") or []:
            delta = member(choice, "delta")
            if member(choice, "finish_reason"):
                self.finish = member(choice, "finish_reason")
            if delta is None:
                continue
            if member(delta, "content"):
                self.content.append(member(delta, "content"))
            if member(delta, "refusal"):
                self.refusal.append(member(delta, "refusal"))
            function_call = member(delta, "function_call")
            if function_call is not None:
                if self.function is None:
                    self.function = {"name": "", "arguments": ""}
                self.function["name"] += member(function_call, "name") or ""
                self.function["arguments"] += member(function_call, "arguments") or ""
            for tc in member(delta, "tool_calls") or []:
                slot = self.calls.setdefault(
                    member(tc, "index", 0), {"id": None, "name": "", "arguments": ""}
                )
                if member(tc, "id"):
                    slot["id"] = member(tc, "id")
                function = member(tc, "function")
                if function is not None:
                    slot["name"] += member(function, "name") or ""
                    slot["arguments"] += member(function, "arguments") or ""

    def finish_call(self, recorder: Recorder, call: Call | None) -> None:
        calls = [
            ToolCall(id=str(c["id"]), name=c["name"], arguments=_arguments(c["arguments"]))
            for _, c in sorted(self.calls.items())
        ]
        if self.function is not None and not calls:
            calls = [_legacy_call(self.function["name"], self.function["arguments"])]
        _Chat.finish(
            recorder,
            call,
            content="".join(self.content) if self.content or not calls else None,
            refusal="".join(self.refusal) or None,
            calls=calls,
            model=self.model,
            usage=self.usage,
            finish=self.finish,
            response_id=self.id,
        )


# -- Responses API --------------------------------------------------------------------------------


class _Responses:
    """Reading Responses API requests, responses and stream events."""

    @staticmethod
    def begin(recorder: Recorder, kwargs: dict[str, Any]) -> Call | None:
        raw = kwargs.get("input")
        items = [{"role": "user", "content": raw}] if isinstance(raw, str) else raw or []
        items = [plain(i) for i in items]
        results = [
            ToolResult(call_id=str(i.get("call_id")), content=_output_text(i.get("output")))
            for i in items
            if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        first_user = next(
            (
                _text(i.get("content"))
                for i in items
                if isinstance(i, dict) and i.get("role") == "user"
            ),
            None,
        )
        sent = [_item_fp(i) for i in items]
        instructions = kwargs.get("instructions")
        sending: Any = items if not instructions else {"instructions": instructions, "input": items}
        shown = [Shown("system", instructions, fingerprint("instructions", instructions))]
        shown += [
            Shown(_SHOWN[role], _text(i.get("content")), _item_fp(i))
            for i in items
            if isinstance(i, dict)
            and i.get("type", "message") == "message"
            and (role := i.get("role")) in _SHOWN
        ]
        return recorder.begin(
            model=kwargs.get("model"),
            input=sending,
            sent=sent,
            results=results,
            first_user=first_user,
            previous_response=kwargs.get("previous_response_id"),
            shown=shown if instructions else shown[1:],
        )

    @staticmethod
    def end(recorder: Recorder, call: Call | None, response: Any) -> None:
        output = [plain(i) for i in (member(response, "output") or [])]
        calls = [
            ToolCall(
                id=str(i.get("call_id")),
                name=str(i.get("name")),
                arguments=_arguments(i.get("arguments")),
            )
            for i in output
            if isinstance(i, dict) and i.get("type") == "function_call"
        ]
        texts = [
            _text(i.get("content"))
            for i in output
            if isinstance(i, dict) and i.get("type") == "message"
        ]
        content = "\n".join(t for t in texts if t) if texts else None
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls
            ]
        status = member(response, "status")
        recorder.end(
            call,
            output=message,
            model=member(response, "model"),
            usage=_usage(member(response, "usage")),
            tool_calls=calls,
            reply=[_item_fp(i) for i in output],
            text=content,
            response_id=member(response, "id"),
            attributes={"status": status} if status else None,
            served=[s for s in map(_served, output) if s is not None],
        )

    @staticmethod
    def accumulator() -> _ResponseEvents:
        return _ResponseEvents()


_SERVED = {
    # output item type: (step kind, step name, the fields that are its input, its output field)
    "file_search_call": ("retrieval", "file_search", ("queries",), "results"),
    "web_search_call": ("tool", "web_search", ("action",), "action"),
    "code_interpreter_call": ("tool", "code_interpreter", ("code",), "outputs"),
    "mcp_call": ("tool", None, ("server_label", "arguments"), "output"),
}
"""The tools OpenAI runs itself, whose results come back in the response's output."""


def _served(item: Any) -> tuple[ToolCall, ToolResult] | None:
    """A built-in tool call of a response (file search, web search, code interpreter, a
    remote MCP tool) with its result; ``None`` for another item."""
    if not isinstance(item, dict) or item.get("type") not in _SERVED:
        return None
    kind, name, inputs, field_name = _SERVED[item["type"]]
    arguments = {
        k: _arguments(item[k]) if k == "arguments" else item[k] for k in inputs if k in item
    }
    error = item.get("error")
    tool = ToolCall(
        id=str(item.get("id")), name=name or str(item.get("name")), arguments=arguments, kind=kind
    )
    result = item.get(field_name)
    if field_name == "action" and isinstance(result, dict):
        result = result.get("sources")  # what the search found (with include=[...sources])
    return tool, ToolResult(call_id=tool.id, content=error or result, is_error=bool(error))


def _output_text(value: Any) -> Any:
    if isinstance(value, list):
        return _text(value)
    return value


def _item_fp(item: Any) -> str:
    kind = member(item, "type") or "message"
    if kind == "message":
        return fingerprint("message", member(item, "role"), _text(member(item, "content")) or "")
    if kind in ("function_call", "function_call_output"):
        return fingerprint(kind, member(item, "call_id"))
    return fingerprint(kind, member(item, "id"))


class _ResponseEvents:
    """A Responses stream: the completed response at its end (or what arrived before)."""

    def __init__(self) -> None:
        self.response: Any = None
        self.text: list[str] = []

    def add(self, event: Any) -> None:
        kind = member(event, "type")
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            self.response = member(event, "response")
        elif kind == "response.output_text.delta":
            self.text.append(member(event, "delta") or "")

    def finish_call(self, recorder: Recorder, call: Call | None) -> None:
        if self.response is not None:
            _Responses.end(recorder, call, self.response)
            return
        recorder.end(
            call,
            output={"role": "assistant", "content": "".join(self.text)},
            model=None,
            usage={},
            tool_calls=[],
            reply=[],
            text="".join(self.text),
            attributes={"stream_incomplete": True},
        )
