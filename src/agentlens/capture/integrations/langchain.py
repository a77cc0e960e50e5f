"""A LangChain callback handler that records chains, chat models, tools and retrievers.

::

    import agentlens
    from agentlens.integrations.langchain import AgentlensCallbackHandler

    agentlens.configure(db="sqlite:///agentlens.db")
    handler = AgentlensCallbackHandler(agent="support")
    answer = chain.invoke({"question": q}, config={"callbacks": [handler]})

Every LangChain run becomes a step, nested as LangChain nests them (``parent_run_id``):

- a chain (any runnable: a sequence, a lambda, an agent executor, a graph node) -> ``agent``
  step: ``input`` = its inputs, ``output`` = its outputs;
- the system prompt and each user message (or prompt) a model is sent, the first time the run
  sees it -> ``system`` / ``user`` step before its ``llm`` step (evidence; the ``llm`` step's
  input is not);
- a chat model or LLM -> ``llm`` step: ``input`` = the messages (``{"role", "content"}``, with
  ``tool_calls`` / ``tool_call_id``) or prompts, ``output`` = the reply message, ``attributes``:
  ``model``, ``input_tokens``, ``output_tokens``, ``total_tokens``, ``cost_usd`` (when the model
  is in the price table);
- a tool -> ``tool`` step: ``input`` = its arguments, ``output`` = what it returned (a
  ``ToolMessage``'s content), ``error`` = the exception it raised, or its content when the
  ``ToolMessage`` has ``status="error"``;
- a retriever -> ``retrieval`` step: ``input`` = ``{"query": ...}``, ``output`` = the documents,
  whole: ``[{"id", "page_content", "metadata"}]``.

The outermost LangChain run joins the current :func:`agentlens.run` when there is one (its steps
go under the enclosing step); otherwise it is a run of its own, with the root's inputs as
``input`` and its outputs as ``output``, ended when the root ends. Needs the ``langchain``
extra (``langchain-core``).
"""

from __future__ import annotations

import contextvars
import threading
from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from agentlens.capture._run import ActiveStep, Run, current_run
from agentlens.capture._run import run as new_run
from agentlens.capture._state import is_enabled
from agentlens.capture.integrations._common import (
    _internal,
    estimate_cost,
    fingerprint,
    require,
)

__all__ = ["AgentlensCallbackHandler"]

_base = require("langchain_core.callbacks", "langchain")


class AgentlensCallbackHandler(_base.BaseCallbackHandler):  # type: ignore[name-defined]
    """Records LangChain runs as agentlens steps (see the module docstring).

    Args:
        agent: the agent role of the runs this handler starts (outside ``agentlens.run()``).
        prices: {model prefix: (USD per 1M input tokens, per 1M output tokens)}.
    """

    raise_error = False
    run_inline = True

    def __init__(
        self, *, agent: str | None = None, prices: Mapping[str, Sequence[float]] | None = None
    ) -> None:
        super().__init__()
        self.agent = agent
        self.prices = dict(prices or {})
        self._lock = threading.Lock()
        self._steps: dict[UUID, tuple[ActiveStep, contextvars.Context, Run]] = {}
        self._roots: dict[UUID, tuple[Run, contextvars.Context]] = {}
        self._shown: OrderedDict[str, Counter[str]] = OrderedDict()
        """Per agentlens run: how often each system prompt or user message was recorded."""
        self._results: OrderedDict[str, tuple[set[str], Counter[str]]] = OrderedDict()
        """Per agentlens run: the tool call ids whose result is recorded, and how many tool
        results were recorded without an id (by content), not yet matched to one."""

    # -- opening and closing ---------------------------------------------------------------

    def _open(
        self,
        run_id: UUID,
        parent_run_id: UUID | None,
        kind: str,
        name: str | None,
        input: Any,
        attributes: dict[str, Any] | None = None,
        shown: Sequence[tuple[str, Any]] = (),
    ) -> None:
        try:
            with self._lock:
                parent = self._steps.get(parent_run_id) if parent_run_id else None
            if parent is not None:
                _, parent_ctx, run = parent
                ctx = parent_ctx.copy()
            else:
                if not is_enabled():
                    return
                joined = current_run()
                if joined is not None:
                    if not joined.recording:
                        return
                    run, ctx = joined, contextvars.copy_context()
                else:
                    run = new_run(
                        agent=self.agent,
                        input=input,
                        name=name,
                        metadata={"integration": "langchain"},
                    )
                    ctx = contextvars.Context()
                    ctx.run(run.__enter__)
                    with self._lock:
                        self._roots[run_id] = (run, ctx)
                    ctx = ctx.copy()
            for shown_kind, content in self._new_shown(run, shown):
                ctx.run(run.step, shown_kind, output=content)
            for message in self._unrecorded_results(run, input if kind == "llm" else None):
                failed = message.get("status") == "error"
                ctx.run(
                    run.step,
                    "tool",
                    message.get("name"),
                    output=None if failed else message.get("content"),
                    error=(message.get("content") or "error") if failed else None,
                    attributes={"tool_call_id": message["tool_call_id"], "unpaired": True},
                )
            step = ctx.run(run.step, kind, name, input=input, attributes=attributes)
            ctx.run(step.__enter__)
            with self._lock:
                self._steps[run_id] = (step, ctx, run)
        except Exception as exc:
            _internal(exc)

    def _new_shown(self, run: Run, shown: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
        """The system prompts and user messages of ``shown`` the run has not recorded yet
        (counted: a message said twice is recorded twice, a call sent again adds nothing)."""
        if not shown:
            return []
        here: Counter[str] = Counter()
        new = []
        with self._lock:
            counts = self._shown.setdefault(run.id, Counter())
            self._shown.move_to_end(run.id)
            while len(self._shown) > _MAX_RUNS:
                self._shown.popitem(last=False)
            for kind, content in shown:
                key = fingerprint(kind, content)
                here[key] += 1
                if here[key] > counts[key]:
                    counts[key] += 1
                    if content not in (None, "", []):
                        new.append((kind, content))
        return new

    def _run_results(self, run: Run) -> tuple[set[str], Counter[str]]:
        with self._lock:
            state = self._results.setdefault(run.id, (set(), Counter()))
            self._results.move_to_end(run.id)
            while len(self._results) > _MAX_RUNS:
                self._results.popitem(last=False)
        return state

    def _unrecorded_results(self, run: Run, sent: Any) -> list[dict[str, Any]]:
        """The tool results (``ToolMessage``) a model is sent whose tool ran without this
        handler seeing it (called outside LangChain's callbacks): they are evidence, recorded as
        ``tool`` steps. One matching, by content, a tool step recorded without a call id is that
        step's result, not another."""
        if not isinstance(sent, list):
            return []
        ids, unnamed = self._run_results(run)
        new = []
        with self._lock:
            for message in sent:
                if not isinstance(message, dict) or message.get("role") != "tool":
                    continue
                call_id = message.get("tool_call_id")
                if not isinstance(call_id, str) or call_id in ids:
                    continue
                ids.add(call_id)
                key = fingerprint(message.get("content"))
                if unnamed[key] > 0:
                    unnamed[key] -= 1
                    continue
                new.append(message)
        return new

    def _close(
        self,
        run_id: UUID,
        *,
        output: Any = None,
        error: Any = None,
        attributes: dict[str, Any] | None = None,
    ) -> None:
        try:
            with self._lock:
                entry = self._steps.pop(run_id, None)
                root = self._roots.pop(run_id, None)
            if entry is None:
                return
            step, ctx, _ = entry
            if output is not None:
                step.output = output
            if error is not None:
                step.error = error
            if attributes:
                step.attributes.update(attributes)
            ctx.run(step.__exit__, None, None, None)
            if root is not None:
                run, rctx = root
                if error is None:
                    run.output = output
                    rctx.run(run.__exit__, None, None, None)
                else:
                    exc = error if isinstance(error, BaseException) else RuntimeError(str(error))
                    rctx.run(run.__exit__, type(exc), exc, None)
        except Exception as exc:
            _internal(exc)

    # -- chains ----------------------------------------------------------------------------

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._open(run_id, parent_run_id, "agent", _name(serialized, kwargs), _plain(inputs))

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._close(run_id, output=_plain(outputs))

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._close(run_id, error=error)

    # -- models ----------------------------------------------------------------------------

    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: list[list[Any]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        model = _model(serialized, kwargs)
        sent = [_message(m) for batch in messages for m in batch]
        shown = [
            (_SHOWN[m["role"]], m.get("content"))
            for m in sent
            if isinstance(m, dict) and m.get("role") in _SHOWN
        ]
        self._open(run_id, parent_run_id, "llm", model, sent, _model_attrs(model), shown)

    def on_llm_start(
        self,
        serialized: dict[str, Any] | None,
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        model = _model(serialized, kwargs)
        shown = [("user", p) for p in prompts]
        self._open(run_id, parent_run_id, "llm", model, list(prompts), _model_attrs(model), shown)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        try:
            generations = [g for batch in response.generations for g in batch]
            first = generations[0] if generations else None
            message = getattr(first, "message", None)
            output: Any = _message(message) if message is not None else getattr(first, "text", None)
            attrs: dict[str, Any] = {}
            usage = getattr(message, "usage_metadata", None) if message is not None else None
            llm_output = response.llm_output or {}
            if not usage:
                token_usage = llm_output.get("token_usage") or llm_output.get("usage") or {}
                usage = {
                    "input_tokens": token_usage.get(
                        "prompt_tokens", token_usage.get("input_tokens")
                    ),
                    "output_tokens": token_usage.get(
                        "completion_tokens", token_usage.get("output_tokens")
                    ),
                    "total_tokens": token_usage.get("total_tokens"),
                }
            for key in ("input_tokens", "output_tokens", "total_tokens"):
                value = usage.get(key) if isinstance(usage, Mapping) else None
                if isinstance(value, int):
                    attrs[key] = value
            meta = getattr(message, "response_metadata", None) or {}
            model = meta.get("model_name") or meta.get("model") or llm_output.get("model_name")
            if isinstance(model, str):
                attrs["model"] = model
            with self._lock:
                entry = self._steps.get(run_id)
            known = attrs.get("model") or (entry[0].attributes.get("model") if entry else None)
            cost = estimate_cost(
                known, attrs.get("input_tokens"), attrs.get("output_tokens"), self.prices
            )
            if cost is not None:
                attrs["cost_usd"] = cost
            self._close(run_id, output=output, attributes=attrs)
        except Exception as exc:
            _internal(exc)
            self._close(run_id)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._close(run_id, error=error)

    # -- tools -----------------------------------------------------------------------------

    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        call_id = kwargs.get("tool_call_id")
        self._open(
            run_id,
            parent_run_id,
            "tool",
            _name(serialized, kwargs),
            _plain(inputs) if inputs is not None else input_str,
            {"tool_call_id": call_id} if isinstance(call_id, str) else None,
        )
        if isinstance(call_id, str):  # its result, fed back, is this step's (even if it fails)
            with self._lock:
                entry = self._steps.get(run_id)
            if entry is not None:
                ids, _ = self._run_results(entry[2])
                with self._lock:
                    ids.add(call_id)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        status = getattr(output, "status", None)
        content = getattr(output, "content", output) if _is_tool_message(output) else output
        attributes = {}
        call_id = getattr(output, "tool_call_id", None)
        if isinstance(call_id, str):
            attributes["tool_call_id"] = call_id
        try:
            with self._lock:
                entry = self._steps.get(run_id)
            if entry is not None:
                ids, unnamed = self._run_results(entry[2])
                with self._lock:
                    if isinstance(call_id, str):
                        ids.add(call_id)
                    elif "tool_call_id" not in entry[0].attributes:
                        unnamed[fingerprint(_plain(content))] += 1
        except Exception as exc:
            _internal(exc)
        if status == "error":
            self._close(run_id, error=_plain(content), attributes=attributes)
        else:
            self._close(run_id, output=_plain(content), attributes=attributes)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._close(run_id, error=error)

    # -- retrievers ------------------------------------------------------------------------

    def on_retriever_start(
        self,
        serialized: dict[str, Any] | None,
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._open(run_id, parent_run_id, "retrieval", _name(serialized, kwargs), {"query": query})

    def on_retriever_end(self, documents: Sequence[Any], *, run_id: UUID, **kwargs: Any) -> None:
        docs = []
        for doc in documents:
            item: dict[str, Any] = {}
            if getattr(doc, "id", None) is not None:
                item["id"] = doc.id
            item["page_content"] = getattr(doc, "page_content", None)
            item["metadata"] = _plain(getattr(doc, "metadata", {}))
            docs.append(item)
        self._close(run_id, output=docs)

    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._close(run_id, error=error)


# -- plain values ---------------------------------------------------------------------------------


def _is_tool_message(value: Any) -> bool:
    return type(value).__name__ == "ToolMessage" and hasattr(value, "tool_call_id")


_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}
_SHOWN = {"system": "system", "developer": "system", "user": "user"}
"""The roles of the messages that are evidence, and the kind of step each becomes."""
_MAX_RUNS = 256
"""Runs whose recorded messages are remembered at once (the oldest forgotten past this)."""


def _role(message: Any, kind: str) -> str:
    """The chat role of a LangChain message. A streamed one is a chunk, whose ``type`` is
    its class name (``AIMessageChunk``); a ``ChatMessage`` names its role itself."""
    if kind.endswith("MessageChunk"):
        kind = kind[: -len("MessageChunk")].lower()
    if kind == "chat" and isinstance(getattr(message, "role", None), str):
        return str(message.role)
    return _ROLES.get(kind, kind)


def _message(message: Any) -> Any:
    kind = getattr(message, "type", None)
    if not isinstance(kind, str) or not hasattr(message, "content"):
        return _plain(message)
    out: dict[str, Any] = {"role": _role(message, kind), "content": message.content}
    calls = getattr(message, "tool_calls", None)
    if calls:
        out["tool_calls"] = [
            {"id": c.get("id"), "name": c.get("name"), "arguments": c.get("args")} for c in calls
        ]
    if getattr(message, "tool_call_id", None):
        out["tool_call_id"] = message.tool_call_id
        if getattr(message, "status", None) == "error":
            out["status"] = "error"
    if getattr(message, "name", None):
        out["name"] = message.name
    return out


def _plain(value: Any) -> Any:
    if hasattr(value, "type") and hasattr(value, "content") and hasattr(value, "model_dump"):
        return _message(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _name(serialized: Mapping[str, Any] | None, kwargs: Mapping[str, Any]) -> str | None:
    name = kwargs.get("name")
    if isinstance(name, str) and name:
        return name
    if serialized:
        if isinstance(serialized.get("name"), str):
            return str(serialized["name"])
        ids = serialized.get("id")
        if isinstance(ids, list) and ids:
            return str(ids[-1])
    return None


def _model(serialized: Mapping[str, Any] | None, kwargs: Mapping[str, Any]) -> str | None:
    params = kwargs.get("invocation_params") or {}
    for key in ("model", "model_name", "model_id"):
        if isinstance(params.get(key), str):
            return str(params[key])
    meta = kwargs.get("metadata") or {}
    if isinstance(meta.get("ls_model_name"), str):
        return str(meta["ls_model_name"])
    return _name(serialized, kwargs)


def _model_attrs(model: str | None) -> dict[str, Any]:
    return {"integration": "langchain", **({"model": model} if model else {})}
