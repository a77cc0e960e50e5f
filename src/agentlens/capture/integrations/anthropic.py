"""Record the calls of an Anthropic client: ``agentlens.integrations.anthropic.wrap(client)``.

::

    import agentlens, anthropic
    from agentlens.integrations.anthropic import wrap

    agentlens.configure(db="sqlite:///agentlens.db")
    client = wrap(anthropic.Anthropic())        # or anthropic.AsyncAnthropic()

    with agentlens.run(agent="support", input=question):
        reply = client.messages.create(model="claude-sonnet-4-5", max_tokens=1024,
                                       messages=messages, tools=tools)

``client.messages.create`` (sync and async, ``stream=True`` or not) becomes an ``llm`` step:
``input`` = the messages (with ``system`` when given: ``{"system": ..., "messages": [...]}``),
``output`` = ``{"role": "assistant", "content": <the text blocks>, "tool_calls": [...],
"thinking": ...}``, ``attributes``: ``model``, ``input_tokens``, ``output_tokens``,
``cache_read_tokens``, ``cache_write_tokens`` (``cache_write_1h_tokens``: those of them with the
1-hour TTL), ``cost_usd`` (cache reads at 0.1x the input price, cache writes at 1.25x, 2x for
the 1-hour TTL), ``stop_reason``, ``response_id``. Each ``tool_use`` block opens a ``tool`` step that the ``tool_result`` block
fed back closes: its content raw as ``output``, or as ``error`` with ``is_error``. Grouping into
runs is described in :mod:`agentlens.capture.integrations._common`. ``client.messages.stream``
(the SDK's stream helper) is not recorded; use ``create(stream=True)``.

Needs the ``anthropic`` extra.
"""

from __future__ import annotations

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
    """Record every ``messages.create`` call of ``client``; returns ``client``.

    Args:
        client: an ``anthropic.Anthropic`` or ``anthropic.AsyncAnthropic`` client.
        agent: the agent role of the runs made for conversations outside ``agentlens.run()``.
        record_tool_results: record tool calls and the results fed back as ``tool`` steps
            (turn off when the tools are decorated with ``@agentlens.tool``).
        prices: {model prefix: (USD per 1M input tokens, per 1M output tokens)}, optionally
            followed by the prices of cache reads, cache writes and 1-hour cache writes (else
            :data:`CACHE_RATES` applies: 0.1x, 1.25x and 2x the input price).

    Raises:
        MissingExtraError: the ``anthropic`` package is not installed.
    """
    anthropic = require("anthropic", "anthropic")
    if getattr(client, "_agentlens_wrapped", False):
        return client
    recorder = Recorder(
        "anthropic", agent=agent, record_tool_results=record_tool_results, prices=prices
    )
    _install(client, recorder, isinstance(client, anthropic.AsyncAnthropic))
    return client


def _install(client: Any, recorder: Recorder, is_async: bool) -> None:
    """Wrap ``client.messages.create`` (and its copies') to record through ``recorder``."""
    messages = client.messages
    wrapper = async_wrapper if is_async else sync_wrapper
    for method in ("create", "parse"):  # parse() posts the request itself, not through create()
        if callable(getattr(messages, method, None)):
            setattr(messages, method, wrapper(getattr(messages, method), recorder, _Messages))
    client._agentlens_wrapped = True
    wrap_copies(client, lambda copy: _install(copy, recorder, is_async))


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def _text(content: Any) -> str:
    return "\n".join(
        str(member(b, "text"))
        for b in _blocks(content)
        if member(b, "type") == "text" and member(b, "text") is not None
    )


def _user_content(content: Any) -> Any:
    """What a user message shows the model, as evidence: its text; with the ``document`` and
    ``search_result`` blocks (the context handed to the model, often what its answer cites) as
    sent, beside the text blocks. Tool results are steps of their own; images carry no text."""
    blocks = [
        plain(b) for b in _blocks(content) if member(b, "type") not in ("tool_result", "image")
    ]
    if all(member(b, "type") == "text" for b in blocks):
        return _text(blocks)
    return blocks


def _result_content(content: Any) -> Any:
    """A ``tool_result``'s content: its text when it is text blocks, else as sent."""
    if isinstance(content, list) and all(member(b, "type") == "text" for b in content):
        return _text(content)
    return content


def _message_fp(message: Any) -> str:
    blocks = _blocks(member(message, "content"))
    return fingerprint(
        member(message, "role"),
        _text(blocks),
        [member(b, "id") for b in blocks if member(b, "type") == "tool_use"],
        [member(b, "tool_use_id") for b in blocks if member(b, "type") == "tool_result"],
    )


def _usage(usage: Any) -> dict[str, int | None]:
    if usage is None:
        return {}
    # cache_creation splits the cache writes by TTL (1-hour writes cost more)
    long_lived = member(member(usage, "cache_creation"), "ephemeral_1h_input_tokens")
    return {
        "input_tokens": member(usage, "input_tokens"),
        "output_tokens": member(usage, "output_tokens"),
        "cache_read_tokens": member(usage, "cache_read_input_tokens"),
        "cache_write_tokens": member(usage, "cache_creation_input_tokens"),
        "cache_write_1h_tokens": long_lived or None,
    }


def _served(blocks: list[Any]) -> list[tuple[ToolCall, ToolResult]]:
    """The server tools of a reply (``server_tool_use`` blocks: web search, web fetch, code
    execution...) each with its ``*_tool_result`` block, which comes in the same reply."""
    uses = {
        str(b.get("id")): b
        for b in blocks
        if isinstance(b, dict) and b.get("type") == "server_tool_use"
    }
    out = []
    for block in blocks:
        if not isinstance(block, dict) or not str(block.get("type", "")).endswith("_tool_result"):
            continue
        use = uses.get(str(block.get("tool_use_id")))
        if use is None:
            continue
        content = block.get("content")
        failed = isinstance(content, dict) and str(content.get("type", "")).endswith("_error")
        out.append(
            (
                ToolCall(
                    id=str(use.get("id")), name=str(use.get("name")), arguments=use.get("input")
                ),
                ToolResult(call_id=str(use.get("id")), content=content, is_error=failed),
            )
        )
    return out


class _Messages:
    @staticmethod
    def begin(recorder: Recorder, kwargs: dict[str, Any]) -> Call | None:
        messages = [plain(m) for m in kwargs.get("messages") or []]
        results = []
        for message in messages:
            for block in _blocks(member(message, "content")):
                if member(block, "type") == "tool_result":
                    results.append(
                        ToolResult(
                            call_id=str(member(block, "tool_use_id")),
                            content=_result_content(member(block, "content")),
                            is_error=member(block, "is_error") is True,
                        )
                    )
        first_user = next(
            (
                _text(member(m, "content"))
                for m in messages
                if member(m, "role") == "user"
                and not any(
                    member(b, "type") == "tool_result" for b in _blocks(member(m, "content"))
                )
            ),
            None,
        )
        system = kwargs.get("system")
        sending: Any = (
            messages if system is None else {"system": plain(system), "messages": messages}
        )
        shown = []
        if system is not None:
            text = _text(plain(system))
            shown.append(Shown("system", text, fingerprint("system", text)))
        shown += [
            Shown("user", _user_content(member(m, "content")), _message_fp(m))
            for m in messages
            if member(m, "role") == "user"
        ]
        return recorder.begin(
            model=kwargs.get("model"),
            input=sending,
            sent=[_message_fp(m) for m in messages],
            results=results,
            first_user=first_user,
            shown=shown,
        )

    @staticmethod
    def end(recorder: Recorder, call: Call | None, message: Any) -> None:
        _Messages.finish(
            recorder,
            call,
            blocks=[plain(b) for b in member(message, "content") or []],
            model=member(message, "model"),
            usage=_usage(member(message, "usage")),
            stop=member(message, "stop_reason"),
            response_id=member(message, "id"),
        )

    @staticmethod
    def finish(
        recorder: Recorder,
        call: Call | None,
        *,
        blocks: list[Any],
        model: str | None,
        usage: dict[str, int | None],
        stop: str | None,
        response_id: str | None,
    ) -> None:
        calls = [
            ToolCall(id=str(b.get("id")), name=str(b.get("name")), arguments=b.get("input"))
            for b in blocks
            if b.get("type") == "tool_use"
        ]
        text = _text(blocks)
        served = _served(blocks)
        output: dict[str, Any] = {"role": "assistant", "content": text}
        thinking = [b.get("thinking") for b in blocks if b.get("type") == "thinking"]
        if thinking:
            output["thinking"] = "\n".join(str(t) for t in thinking)
        if calls:
            output["tool_calls"] = [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls
            ]
        recorder.end(
            call,
            output=output,
            model=model,
            usage=usage,
            tool_calls=calls,
            reply=[_message_fp({"role": "assistant", "content": blocks})],
            text=text,
            response_id=response_id,
            attributes={"stop_reason": stop} if stop else None,
            served=served,
        )

    @staticmethod
    def accumulator() -> _Events:
        return _Events()


class _Events:
    """A ``stream=True`` event stream put back together."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.json: dict[int, list[str]] = {}
        self.model: str | None = None
        self.id: str | None = None
        self.usage: dict[str, int | None] = {}
        self.stop: str | None = None

    def add(self, event: Any) -> None:
        kind = member(event, "type")
        if kind == "message_start":
            message = member(event, "message")
            self.model = member(message, "model")
            self.id = member(message, "id")
            self.usage.update({k: v for k, v in _usage(member(message, "usage")).items() if v})
        elif kind == "content_block_start":
            block = plain(member(event, "content_block"))
            self.blocks[member(event, "index", 0)] = dict(block) if isinstance(block, dict) else {}
        elif kind == "content_block_delta":
            index = member(event, "index", 0)
            block = self.blocks.setdefault(index, {"type": "text", "text": ""})
            delta = member(event, "delta")
            dtype = member(delta, "type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + (member(delta, "text") or "")
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + (member(delta, "thinking") or "")
            elif dtype == "input_json_delta":
                self.json.setdefault(index, []).append(member(delta, "partial_json") or "")
        elif kind == "message_delta":
            self.stop = member(member(event, "delta"), "stop_reason") or self.stop
            self.usage.update({k: v for k, v in _usage(member(event, "usage")).items() if v})

    def finish_call(self, recorder: Recorder, call: Call | None) -> None:
        for index, parts in self.json.items():
            raw = "".join(parts)
            try:
                self.blocks[index]["input"] = json.loads(raw) if raw else {}
            except ValueError:
                self.blocks[index]["input"] = raw
        _Messages.finish(
            recorder,
            call,
            blocks=[b for _, b in sorted(self.blocks.items())],
            model=self.model,
            usage=self.usage,
            stop=self.stop,
            response_id=self.id,
        )
