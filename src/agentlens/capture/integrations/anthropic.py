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
``cache_read_tokens``, ``cache_write_tokens``, ``cost_usd``, ``stop_reason``,
``response_id``. Each ``tool_use`` block opens a ``tool`` step that the ``tool_result`` block
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
    ToolCall,
    ToolResult,
    async_wrapper,
    fingerprint,
    require,
    sync_wrapper,
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
        prices: {model prefix: (USD per 1M input tokens, per 1M output tokens)}.

    Raises:
        MissingExtraError: the ``anthropic`` package is not installed.
    """
    anthropic = require("anthropic", "anthropic")
    if getattr(client, "_agentlens_wrapped", False):
        return client
    recorder = Recorder(
        "anthropic", agent=agent, record_tool_results=record_tool_results, prices=prices
    )
    messages = client.messages  # type: ignore[attr-defined]
    if isinstance(client, anthropic.AsyncAnthropic):
        messages.create = async_wrapper(messages.create, recorder, _Messages)
    else:
        messages.create = sync_wrapper(messages.create, recorder, _Messages)
    client._agentlens_wrapped = True  # type: ignore[attr-defined]
    return client


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return dump(mode="json", exclude_none=True)
        except Exception:
            return value
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def _text(content: Any) -> str:
    return "\n".join(
        str(_get(b, "text"))
        for b in _blocks(content)
        if _get(b, "type") == "text" and _get(b, "text") is not None
    )


def _result_content(content: Any) -> Any:
    """A ``tool_result``'s content: its text when it is text blocks, else as sent."""
    if isinstance(content, list) and all(_get(b, "type") == "text" for b in content):
        return _text(content)
    return content


def _message_fp(message: Any) -> str:
    blocks = _blocks(_get(message, "content"))
    return fingerprint(
        _get(message, "role"),
        _text(blocks),
        [_get(b, "id") for b in blocks if _get(b, "type") == "tool_use"],
        [_get(b, "tool_use_id") for b in blocks if _get(b, "type") == "tool_result"],
    )


def _usage(usage: Any) -> dict[str, int | None]:
    if usage is None:
        return {}
    return {
        "input_tokens": _get(usage, "input_tokens"),
        "output_tokens": _get(usage, "output_tokens"),
        "cache_read_tokens": _get(usage, "cache_read_input_tokens"),
        "cache_write_tokens": _get(usage, "cache_creation_input_tokens"),
    }


class _Messages:
    @staticmethod
    def begin(recorder: Recorder, kwargs: dict[str, Any]) -> Call | None:
        messages = [_plain(m) for m in kwargs.get("messages") or []]
        results = []
        for message in messages:
            for block in _blocks(_get(message, "content")):
                if _get(block, "type") == "tool_result":
                    results.append(
                        ToolResult(
                            call_id=str(_get(block, "tool_use_id")),
                            content=_result_content(_get(block, "content")),
                            is_error=_get(block, "is_error") is True,
                        )
                    )
        first_user = next(
            (
                _text(_get(m, "content"))
                for m in messages
                if _get(m, "role") == "user"
                and not any(_get(b, "type") == "tool_result" for b in _blocks(_get(m, "content")))
            ),
            None,
        )
        system = kwargs.get("system")
        shown: Any = (
            messages if system is None else {"system": _plain(system), "messages": messages}
        )
        return recorder.begin(
            model=kwargs.get("model"),
            input=shown,
            sent=[_message_fp(m) for m in messages],
            results=results,
            first_user=first_user,
        )

    @staticmethod
    def end(recorder: Recorder, call: Call | None, message: Any) -> None:
        _Messages.finish(
            recorder,
            call,
            blocks=[_plain(b) for b in _get(message, "content") or []],
            model=_get(message, "model"),
            usage=_usage(_get(message, "usage")),
            stop=_get(message, "stop_reason"),
            response_id=_get(message, "id"),
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
        kind = _get(event, "type")
        if kind == "message_start":
            message = _get(event, "message")
            self.model = _get(message, "model")
            self.id = _get(message, "id")
            self.usage.update({k: v for k, v in _usage(_get(message, "usage")).items() if v})
        elif kind == "content_block_start":
            block = _plain(_get(event, "content_block"))
            self.blocks[_get(event, "index", 0)] = dict(block) if isinstance(block, dict) else {}
        elif kind == "content_block_delta":
            index = _get(event, "index", 0)
            block = self.blocks.setdefault(index, {"type": "text", "text": ""})
            delta = _get(event, "delta")
            dtype = _get(delta, "type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + (_get(delta, "text") or "")
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + (_get(delta, "thinking") or "")
            elif dtype == "input_json_delta":
                self.json.setdefault(index, []).append(_get(delta, "partial_json") or "")
        elif kind == "message_delta":
            self.stop = _get(_get(event, "delta"), "stop_reason") or self.stop
            self.usage.update({k: v for k, v in _usage(_get(event, "usage")).items() if v})

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
