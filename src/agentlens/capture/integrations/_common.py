"""What the client integrations share: joining the current run or keeping a conversation's run,
llm and tool steps opened and closed across calls, costs, and the missing-extra error.

A model call is recorded as an ``llm`` step. Where it goes:

- inside :func:`agentlens.run` (or any step of it), the call joins that run: the step is a child
  of the enclosing step;
- outside any run, each conversation is a run of its own. A call continues a conversation when
  the messages it sends begin with everything that conversation has seen (its messages and
  replies so far), or when it names an earlier response (``previous_response_id``). The
  conversation's run ends, and is exported, when the model answers without asking for a tool
  (the end of an agent loop); a later call that goes on with the same messages starts a new run
  whose ``metadata.continues`` names the previous one. Conversations that never get there are
  ended when too many are open (the oldest first) and when the process exits.

The system prompt and the user messages a call sends become ``system`` and ``user`` steps (before
its ``llm`` step, once per run however often they are sent again): they are evidence, and an
``llm`` step's input is not.

Each tool call the model asks for opens a ``tool`` step (input = its arguments) when the reply
arrives; the result fed back in a later call (a ``tool`` message, a ``function_call_output``
item, a ``tool_result`` block) closes it with the raw content as ``output``, or as ``error``
when the result says it failed. So a tool step spans the time the tool ran, and a call whose
result never came back stays open (``attributes.incomplete``). Turn this off with
``record_tool_results=False`` when the tools are already decorated with ``@agentlens.tool``.

Everything here runs under ``try``: a failure to record is logged and counted, never raised into
the agent, and the client's own result or exception is returned untouched.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import functools
import hashlib
import importlib
import inspect
import json
import logging
import re
import threading
import weakref
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from agentlens.capture._run import ActiveStep, Run, current_run
from agentlens.capture._run import run as new_run
from agentlens.capture._state import is_enabled
from agentlens.errors import MissingExtraError

__all__ = [
    "CACHE_RATES",
    "PRICES",
    "Call",
    "Recorder",
    "Shown",
    "ToolCall",
    "ToolResult",
    "async_wrapper",
    "estimate_cost",
    "fingerprint",
    "member",
    "move_before",
    "plain",
    "require",
    "safe",
    "sync_wrapper",
    "wrap_copies",
]

logger = logging.getLogger("agentlens")

PRICES: dict[str, tuple[float, float]] = {
    # USD per million (input, output) tokens: list prices, estimates only; override with prices=.
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5": (1.25, 10.00),
    "o4-mini": (1.10, 4.40),
    "o3-mini": (1.10, 4.40),
    "o3": (2.00, 8.00),
    "claude-3-haiku": (0.25, 1.25),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-haiku-4": (1.00, 5.00),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-opus-4": (15.00, 75.00),
    "claude-opus-4-5": (5.00, 25.00),
}
"""Prices per model name prefix (the longest matching prefix wins); ``cost_usd`` is left out
for a model not in the table (or in ``prices=``)."""

CACHE_RATES: dict[str, tuple[float, float, float]] = {
    # (cache read, cache write with the 5-minute TTL, cache write with the 1-hour TTL), as
    # multiples of the model's input price in PRICES (or prices=), by model name prefix.
    # Anthropic's prompt-caching multipliers, the same for every Claude model:
    "claude": (0.10, 1.25, 2.00),
    # OpenAI's "cached input" column (OpenAI charges nothing extra to write its cache):
    "gpt-4o": (0.50, 1.0, 1.0),  # $1.25 of $2.50; gpt-4o-mini $0.075 of $0.15
    "gpt-4.1": (0.25, 1.0, 1.0),  # $0.50 of $2.00; -mini $0.10 of $0.40; -nano $0.025 of $0.10
    "gpt-5": (0.10, 1.0, 1.0),  # $0.125 of $1.25; -mini $0.025 of $0.25; -nano $0.005 of $0.05
    "o3": (0.25, 1.0, 1.0),  # $0.50 of $2.00
    "o3-mini": (0.50, 1.0, 1.0),  # $0.55 of $1.10
    "o4-mini": (0.25, 1.0, 1.0),  # $0.275 of $1.10
}
"""How prompt-cache tokens are priced, relative to the input price (longest prefix wins). A
model in neither this table nor ``prices=`` has its cache tokens priced as ordinary input.
A ``prices=`` entry may give them in USD per million after input and output:
``(input, output, cache read, cache write, cache write 1-hour)``."""

MAX_CONVERSATIONS = 64
"""Conversations (outside any run) kept open at once; the oldest is ended past this."""
MAX_JOINED = 256
"""Runs joined at once whose tool calls are tracked."""

_FAILURE = re.compile(r"\s*(?:error|exception)\s*:|\s*Traceback \(most recent call last\)", re.I)


def plain(value: Any) -> Any:
    """A JSON-shaped form of an SDK value: pydantic objects dumped (``mode="json"``, without
    ``None`` fields), mappings and sequences converted all the way down (keys as strings);
    anything else, or an object whose dump fails, as it is."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return dump(mode="json", exclude_none=True)
        except Exception:
            return value
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def member(obj: Any, key: str, default: Any = None) -> Any:
    """``obj[key]`` of a mapping, ``obj.key`` of an SDK object (SDKs return either)."""
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtraError` naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtraError(module, extra) from None


def estimate_cost(
    model: str | None,
    input_tokens: int | None,
    output_tokens: int | None,
    prices: Mapping[str, Sequence[float]] | None = None,
    *,
    cache_read_tokens: int | None = None,
    cache_write_tokens: int | None = None,
    cache_write_1h_tokens: int | None = None,
) -> float | None:
    """USD for a call, or ``None`` when the model's price or the token counts are unknown.

    ``input_tokens`` are the tokens billed at the input price: without the cache reads and
    writes, which are priced by :data:`CACHE_RATES` (or a ``prices=`` entry's third to fifth
    values). ``cache_write_tokens`` counts every cache write; ``cache_write_1h_tokens`` how
    many of them were written with the 1-hour TTL (the others are priced at the 5-minute rate).
    """
    if not model or input_tokens is None or output_tokens is None:
        return None
    table: dict[str, Sequence[float]] = {**PRICES, **(prices or {})}
    best = max((p for p in table if model.startswith(p)), key=len, default="")
    if not best:
        return None
    price = table[best]
    base = price[0]
    prefix = max((p for p in CACHE_RATES if model.startswith(p)), key=len, default="")
    rates = CACHE_RATES.get(prefix)
    read, write, write_1h = (base * r for r in rates) if rates else (base, base, base)
    read = price[2] if len(price) > 2 else read
    write = price[3] if len(price) > 3 else write
    write_1h = price[4] if len(price) > 4 else write_1h
    cached = cache_read_tokens or 0
    written = cache_write_tokens or 0
    long_lived = min(cache_write_1h_tokens or 0, written)
    total = (
        input_tokens * base
        + output_tokens * price[1]
        + cached * read
        + (written - long_lived) * write
        + long_lived * write_1h
    )
    return round(total / 1e6, 8)


def _count(value: Any) -> int:
    """A token count as an ``int`` (0 when it is not one)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def fingerprint(*parts: Any) -> str:
    """A short digest of JSON-able parts (a message's role, text, tool call ids...)."""
    text = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def looks_failed(content: Any) -> bool:
    """True when a tool result's text reports a failure (``Error: ...``, a traceback)."""
    return isinstance(content, str) and _FAILURE.match(content) is not None


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model asked for."""

    id: str
    name: str
    arguments: Any
    kind: str = "tool"
    """The kind of step it is: ``tool``, or ``retrieval`` for a provider's file search."""
    legacy: bool = False
    """A ``function_call`` of OpenAI's legacy function-calling API: the API gives it no id
    (``id`` is made up, and not recorded); its result is paired with it by name."""


@dataclass(frozen=True)
class Shown:
    """A message the model was shown that is evidence: a system prompt or a user message."""

    kind: str
    """``"system"`` or ``"user"``: the kind of the step it becomes."""
    content: Any
    """Its text (or content as sent, when it is not text)."""
    fingerprint: str
    """Tells it apart from the other messages of the conversation."""


@dataclass(frozen=True)
class ToolResult:
    """A tool's result fed back to the model."""

    call_id: str
    content: Any
    is_error: bool = False
    name: str | None = None
    by_name: bool = False
    """A result that names no call (a legacy ``function`` message): it closes the oldest open
    call of its ``name``; ``call_id`` only tells it apart from the other results."""


@dataclass
class _Session:
    run: Run
    ctx: contextvars.Context
    own: bool
    open_calls: dict[str, tuple[ActiveStep, contextvars.Context]] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)
    known: list[str] = field(default_factory=list)
    responses: set[str] = field(default_factory=set)
    shown: Counter[str] = field(default_factory=Counter)
    """How often each system prompt or user message (by fingerprint) is recorded as a step."""


@dataclass
class Call:
    """One model call being recorded."""

    session: _Session
    step: ActiveStep
    ctx: contextvars.Context
    sent: list[str]


class Recorder:
    """Records the model calls of one wrapped client."""

    def __init__(
        self,
        integration: str,
        *,
        agent: str | None,
        record_tool_results: bool,
        prices: Mapping[str, Sequence[float]] | None,
        input_includes_cache: bool = False,
    ) -> None:
        self.integration = integration
        self.input_includes_cache = input_includes_cache
        """True when the API's input token count includes the cached tokens (OpenAI's does,
        Anthropic's does not): they are taken out of it to price them apart."""
        self.agent = agent
        self.record_tool_results = record_tool_results
        self.prices = dict(prices or {})
        self._lock = threading.Lock()
        self._own: OrderedDict[int, _Session] = OrderedDict()
        self._joined: OrderedDict[str, _Session] = OrderedDict()
        self._ended: dict[str, str] = {}
        """Last fingerprint of an ended conversation -> its run id (for ``continues``)."""
        _RECORDERS.add(self)

    # -- a call ------------------------------------------------------------------------------

    def begin(
        self,
        *,
        model: str | None,
        input: Any,
        sent: list[str],
        results: list[ToolResult],
        first_user: Any,
        previous_response: str | None = None,
        attributes: Mapping[str, Any] | None = None,
        shown: Sequence[Shown] = (),
    ) -> Call | None:
        """Open the ``llm`` step of a call (and close the tool steps its results answer).
        ``None`` when nothing is recorded. Never raises.

        ``shown``: the system prompts and user messages the call sends, in order; each one the
        run has not recorded yet becomes a ``system`` or ``user`` step before the ``llm`` step
        (they are evidence; the ``llm`` step's input is not)."""
        try:
            if not is_enabled():
                return None
            session = self._session(sent, first_user, previous_response)
            if session is None:
                return None
            self._results(session, results)
            self._shown(session, shown)
            ctx = session.ctx.copy() if session.own else contextvars.copy_context()
            step = ctx.run(
                session.run.step,
                "llm",
                model,
                input=input,
                attributes={"integration": self.integration, **(attributes or {})},
            )
            ctx.run(step.__enter__)
            return Call(session, step, ctx, sent)
        except Exception as exc:
            _internal(exc)
            return None

    def end(
        self,
        call: Call | None,
        *,
        output: Any,
        model: str | None,
        usage: Mapping[str, int | None],
        tool_calls: list[ToolCall],
        reply: list[str],
        text: str | None,
        response_id: str | None = None,
        attributes: Mapping[str, Any] | None = None,
        served: Sequence[tuple[ToolCall, ToolResult]] = (),
    ) -> None:
        """Close the call's ``llm`` step with the reply, and open a tool step per tool call.

        ``served``: the tools the provider ran itself within the call (Anthropic's web search,
        web fetch, code execution), each with its result: recorded as finished ``tool`` steps
        after the ``llm`` step, whatever ``record_tool_results`` says (no code of the caller's
        ran them), since their results are what the reply was grounded in."""
        if call is None:
            return
        try:
            step, session = call.step, call.session
            step.output = output
            attrs = step.attributes
            if model:
                attrs["model"] = model
            for key, value in usage.items():
                if value is not None:
                    attrs[key] = value
            if "total_tokens" not in attrs and {"input_tokens", "output_tokens"} <= set(attrs):
                attrs["total_tokens"] = attrs["input_tokens"] + attrs["output_tokens"]
            cost = self._cost(model, attrs)
            if cost is not None:
                attrs["cost_usd"] = cost
            if response_id:
                attrs["response_id"] = response_id
                session.responses.add(response_id)
            if attributes:
                attrs.update(attributes)
            call.ctx.run(step.__exit__, None, None, None)
            ran = []
            for tool, result in served:
                sctx = session.ctx.copy() if session.own else call.ctx.copy()
                ran += [
                    sctx.run(
                        session.run.step,
                        tool.kind,
                        tool.name,
                        input=tool.arguments,
                        output=None if result.is_error else result.content,
                        error=(result.content or "error") if result.is_error else None,
                        attributes={"tool_call_id": tool.id, "served": True},
                    )
                ]
            move_before(session.run, ran, step)  # they ran before the reply was written
            if self.record_tool_results:
                for tool in tool_calls:
                    tctx = session.ctx.copy() if session.own else call.ctx.copy()
                    tstep = tctx.run(
                        session.run.step,
                        "tool",
                        tool.name,
                        input=tool.arguments,
                        attributes={"legacy_function": True}
                        if tool.legacy
                        else {"tool_call_id": tool.id},
                    )
                    tctx.run(tstep.__enter__)
                    session.open_calls[tool.id] = (tstep, tctx)
            if session.own:
                with self._lock:
                    session.known = call.sent + reply
                if not tool_calls:
                    session.run.output = text
                    self._end_own(session)
        except Exception as exc:
            _internal(exc)

    def _cost(self, model: str | None, attrs: Mapping[str, Any]) -> float | None:
        """The estimated cost of a call from its step's token counts (``cache_read_tokens``,
        ``cache_write_tokens`` and ``cache_write_1h_tokens`` priced apart)."""
        billed = attrs.get("input_tokens")
        if not isinstance(billed, int) or isinstance(billed, bool):
            return None
        read = _count(attrs.get("cache_read_tokens"))
        if self.input_includes_cache:
            read = min(read, billed)
            billed -= read
        return estimate_cost(
            model,
            billed,
            attrs.get("output_tokens"),
            self.prices,
            cache_read_tokens=read,
            cache_write_tokens=_count(attrs.get("cache_write_tokens")),
            cache_write_1h_tokens=_count(attrs.get("cache_write_1h_tokens")),
        )

    def fail(self, call: Call | None, exc: BaseException) -> None:
        """Close the call's step with the client's exception (which the caller re-raises)."""
        if call is None:
            return
        try:
            call.step.error = exc
            call.ctx.run(call.step.__exit__, type(exc), exc, None)
        except Exception as err:
            _internal(err)

    # -- sessions ----------------------------------------------------------------------------

    def _session(
        self, sent: list[str], first_user: Any, previous_response: str | None
    ) -> _Session | None:
        run = current_run()
        if run is not None:
            if not run.recording:
                return None
            with self._lock:
                session = self._joined.get(run.id)
                if session is None or session.run is not run:
                    # forget the runs that ended: each holds all its steps' data
                    ended = [k for k, v in self._joined.items() if v.run.ended_ns is not None]
                    for gone in ended:
                        del self._joined[gone]
                    session = _Session(run, contextvars.copy_context(), own=False)
                    self._joined[run.id] = session
                    while len(self._joined) > MAX_JOINED:
                        self._joined.popitem(last=False)
                self._joined.move_to_end(run.id)
            return session
        with self._lock:
            for key, session in reversed(self._own.items()):
                if (previous_response and previous_response in session.responses) or (
                    not previous_response
                    and session.known
                    and sent[: len(session.known)] == session.known
                ):
                    self._own.move_to_end(key)
                    return session
            evicted = []
            while len(self._own) >= MAX_CONVERSATIONS:
                evicted.append(self._own.popitem(last=False)[1])
        for old in evicted:
            self._close(old)
        metadata: dict[str, Any] = {"integration": self.integration}
        continues = self._continues(sent, previous_response)
        if continues:
            metadata["continues"] = continues
        own = new_run(agent=self.agent, input=first_user, metadata=metadata)
        # Run after (atexit is last-in, first-out) capture's own exit hook, registered when
        # capture was configured: end the conversations first, then the exporter flushes them.
        atexit.unregister(end_conversations)
        atexit.register(end_conversations)
        ctx = contextvars.Context()
        ctx.run(own.__enter__)
        session = _Session(own, ctx, own=True)
        with self._lock:
            self._own[id(session)] = session
            _OPEN.add(self)  # ended at exit even when the client is gone by then
        return session

    def _continues(self, sent: list[str], previous_response: str | None) -> str | None:
        with self._lock:
            if previous_response and previous_response in self._ended:
                return self._ended[previous_response]
            for i in range(len(sent), 0, -1):
                if sent[i - 1] in self._ended:
                    return self._ended[sent[i - 1]]
        return None

    def _results(self, session: _Session, results: list[ToolResult]) -> None:
        if not self.record_tool_results:
            return
        for result in results:
            if result.call_id in session.seen:
                continue
            session.seen.add(result.call_id)
            failed = result.is_error or looks_failed(result.content)
            opened = session.open_calls.pop(result.call_id, None)
            if opened is None and result.by_name:
                opened = _pop_by_name(session, result.name)
            if opened is not None:
                step, ctx = opened
                if failed:
                    step.error = result.content if result.content not in (None, "") else "error"
                else:
                    step.output = result.content
                ctx.run(step.__exit__, None, None, None)
            else:
                ctx = session.ctx.copy() if session.own else contextvars.copy_context()
                ctx.run(
                    session.run.step,
                    "tool",
                    result.name,
                    output=None if failed else result.content,
                    error=(result.content or "error") if failed else None,
                    attributes={"legacy_function": True, "unpaired": True}
                    if result.by_name
                    else {"tool_call_id": result.call_id, "unpaired": True},
                )

    def _shown(self, session: _Session, shown: Sequence[Shown]) -> None:
        # Counted, not just seen: a conversation may say the same thing twice ("yes"), and a
        # call sent again (a retry) records nothing new.
        here: Counter[str] = Counter()
        new: list[Shown] = []
        with self._lock:
            for message in shown:
                here[message.fingerprint] += 1
                if here[message.fingerprint] > session.shown[message.fingerprint]:
                    session.shown[message.fingerprint] += 1
                    new.append(message)
        for message in new:
            if message.content in (None, "", []):
                continue
            ctx = session.ctx.copy() if session.own else contextvars.copy_context()
            ctx.run(session.run.step, message.kind, output=message.content)

    def _end_own(self, session: _Session) -> None:
        with self._lock:
            self._own.pop(id(session), None)
            if not self._own:
                _OPEN.discard(self)
            if session.known:
                self._ended[session.known[-1]] = session.run.id
            for response in session.responses:
                self._ended[response] = session.run.id
            while len(self._ended) > 4 * MAX_CONVERSATIONS:
                self._ended.pop(next(iter(self._ended)))
        self._close(session)

    def _close(self, session: _Session) -> None:
        with contextlib.suppress(Exception):
            session.ctx.run(session.run.__exit__, None, None, None)

    def close(self) -> None:
        """End every conversation still open (their runs are exported as they are)."""
        with self._lock:
            sessions = list(self._own.values())
            self._own.clear()
            _OPEN.discard(self)
        for session in sessions:
            self._close(session)


def _pop_by_name(
    session: _Session, name: str | None
) -> tuple[ActiveStep, contextvars.Context] | None:
    """The oldest open call named ``name``, taken out of the open calls: a legacy
    ``function_call`` first, else any call of that name."""
    if not name:
        return None
    named = [k for k, (step, _) in session.open_calls.items() if step.name == name]
    legacy = [k for k in named if session.open_calls[k][0].attributes.get("legacy_function")]
    keys = legacy or named
    return session.open_calls.pop(keys[0]) if keys else None


_RECORDERS: weakref.WeakSet[Recorder] = weakref.WeakSet()
"""Every recorder whose client is alive. Weak: a client wrapped per request (and the runs its
recorder joined) is freed with it; a strong list kept every run ever recorded."""
_OPEN: set[Recorder] = set()
"""The recorders with open conversations (kept until they end, to end them at exit)."""


def end_conversations() -> None:
    """End every open conversation of every wrapped client (also done at exit)."""
    for recorder in {*_RECORDERS, *_OPEN}:
        recorder.close()


atexit.register(end_conversations)


def move_before(run: Run, steps: Sequence[ActiveStep], step: ActiveStep) -> None:
    """Put ``steps`` (just recorded) right before ``step`` in the run's order: what a model
    was shown, or what a provider's tool found, known only when the call ends, is evidence for
    its reply, which is checked against the steps before it."""
    order = run.steps
    if not steps or step not in order:
        return
    for added in steps:
        with contextlib.suppress(ValueError):
            order.remove(added)
    at = order.index(step)
    order[at:at] = list(steps)


def _internal(exc: BaseException) -> None:
    with contextlib.suppress(Exception):
        logger.warning("agentlens: integration error (ignored): %s", exc)


def safe(fn: Callable[..., Any], *args: Any, default: Any = None, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, or ``default`` when it raises (logged)."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        _internal(exc)
        return default


# -- wrapping the methods ----------------------------------------------------------------------


def wrap_copies(client: Any, install: Callable[[Any], None]) -> None:
    """Make ``client.copy()`` and ``client.with_options()`` return clients that record too.

    The SDKs' copies are new clients with new resource objects, which the wrapped ``create``
    methods are not on: without this, calls through ``client.with_options(timeout=...)`` were
    silently not recorded. ``install`` wraps a copy (with the same recorder).
    """
    original = getattr(client, "copy", None)
    if not callable(original):
        return

    @functools.wraps(original)
    def copy(*args: Any, **kwargs: Any) -> Any:
        new = original(*args, **kwargs)
        if not getattr(new, "_agentlens_wrapped", False):
            safe(install, new)
        return new

    client.copy = copy
    client.with_options = copy


def sync_wrapper(create: Any, recorder: Recorder, api: Any) -> Any:
    """``create`` recording each call through ``api`` (``begin``, ``end``, ``accumulator``)."""

    @functools.wraps(create)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _materialise(kwargs)
        call = safe(api.begin, recorder, kwargs)
        try:
            result = create(*args, **kwargs)
        except BaseException as exc:
            recorder.fail(call, exc)
            raise
        if call is None:
            return result
        raw = _raw_mode(kwargs)
        if raw is not None:
            parsed = safe(result.parse) if raw != "stream" and not kwargs.get("stream") else None
            _end_raw(recorder, api, call, parsed)
            return result
        if kwargs.get("stream"):
            return _Stream(result, recorder, call, api.accumulator())
        safe(api.end, recorder, call, result)
        return result

    return wrapper


_READ = ("messages", "input", "system")
"""The arguments a call is recorded from."""


def _materialise(kwargs: dict[str, Any]) -> None:
    """Turn the arguments recording reads that can be read only once (a generator of
    messages: the SDKs take any iterable) into lists, which the SDK is then given: reading the
    generator to record it left the SDK nothing to send."""
    for key in _READ:
        value = kwargs.get(key)
        if isinstance(value, Iterator):
            kwargs[key] = list(value)


def _raw_mode(kwargs: Mapping[str, Any]) -> str | None:
    """``"stream"`` for a call made through ``with_streaming_response``, another value
    (``"true"``, ``"raw"``) through ``with_raw_response`` (the SDKs mark them with a header);
    else ``None``."""
    headers = kwargs.get("extra_headers")
    if not isinstance(headers, Mapping):
        return None
    mode = headers.get(_RAW_RESPONSE_HEADER)
    return mode if isinstance(mode, str) else None


_RAW_RESPONSE_HEADER = "X-Stainless-Raw-Response"


def _end_raw(recorder: Recorder, api: Any, call: Call, parsed: Any) -> None:
    """Record a call made through ``with_raw_response``: from the reply ``parse()`` gave (the
    SDK keeps it, so the caller's own ``parse()`` gets the same object). A streamed reply, or
    one of ``with_streaming_response``, is the caller's to read: the step says it was not."""
    if parsed is not None:
        safe(api.end, recorder, call, parsed)
        return
    try:
        call.step.attributes["unread"] = True
        call.ctx.run(call.step.__exit__, None, None, None)
    except Exception as exc:
        _internal(exc)


def async_wrapper(create: Any, recorder: Recorder, api: Any) -> Any:
    """The async form of :func:`sync_wrapper`."""

    @functools.wraps(create)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        _materialise(kwargs)
        call = safe(api.begin, recorder, kwargs)
        try:
            result = await create(*args, **kwargs)
        except BaseException as exc:
            recorder.fail(call, exc)
            raise
        if call is None:
            return result
        raw = _raw_mode(kwargs)
        if raw is not None:
            parsed = None
            if raw != "stream" and not kwargs.get("stream"):
                try:
                    parsed = result.parse()
                    if inspect.isawaitable(parsed):
                        parsed = await parsed
                except Exception as exc:
                    _internal(exc)
                    parsed = None
            _end_raw(recorder, api, call, parsed)
            return result
        if kwargs.get("stream"):
            return _AsyncStream(result, recorder, call, api.accumulator())
        safe(api.end, recorder, call, result)
        return result

    return wrapper


class _Stream:
    """The SDK's stream, passed through item by item; the call is recorded when it ends."""

    def __init__(self, inner: Any, recorder: Recorder, call: Call, acc: Any) -> None:
        self._inner = inner
        self._recorder = recorder
        self._call: Call | None = call
        self._acc = acc

    def __iter__(self) -> Iterator[Any]:
        try:
            for item in self._inner:
                safe(self._acc.add, item)
                yield item
        except GeneratorExit:  # the caller stopped reading: record what arrived
            self._done()
            raise
        except BaseException as exc:
            self._fail(exc)
            raise
        self._done()

    def __next__(self) -> Any:
        try:
            item = next(self._inner)
        except StopIteration:
            self._done()
            raise
        except BaseException as exc:
            self._fail(exc)
            raise
        safe(self._acc.add, item)
        return item

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._done()
        self._inner.close()

    def _done(self) -> None:
        call, self._call = self._call, None
        if call is not None:
            safe(self._acc.finish_call, self._recorder, call)

    def _fail(self, exc: BaseException) -> None:
        call, self._call = self._call, None
        self._recorder.fail(call, exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _AsyncStream:
    """The SDK's async stream, passed through; the call is recorded when it ends."""

    def __init__(self, inner: Any, recorder: Recorder, call: Call, acc: Any) -> None:
        self._inner = inner
        self._recorder = recorder
        self._call: Call | None = call
        self._acc = acc

    def __aiter__(self) -> _AsyncItems:
        return _AsyncItems(self, self._inner.__aiter__())

    async def __anext__(self) -> Any:
        # The SDKs' async streams are async iterators: ``anext(stream)`` must work here too.
        return await self._next(self._inner)

    async def _next(self, items: AsyncIterator[Any]) -> Any:
        """The next item of ``items`` (the stream, or what ``async for`` iterates), recorded;
        the call recorded when the stream ends or fails."""
        try:
            item = await items.__anext__()
        except StopAsyncIteration:
            self._done()
            raise
        except BaseException as exc:
            self._fail(exc)
            raise
        safe(self._acc.add, item)
        return item

    async def __aenter__(self) -> _AsyncStream:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        self._done()
        await self._inner.close()

    def _done(self) -> None:
        call, self._call = self._call, None
        if call is not None:
            safe(self._acc.finish_call, self._recorder, call)

    def _fail(self, exc: BaseException) -> None:
        call, self._call = self._call, None
        self._recorder.fail(call, exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _AsyncItems:
    """What ``async for`` over an :class:`_AsyncStream` iterates.

    Not an async generator: one left by a ``break`` is closed only later, by a task the event
    loop schedules, by when the run has usually ended and the call's step gone out as
    incomplete, without what arrived. This object is dropped at once (a sync generator is
    closed at once too), and records the call then.
    """

    __slots__ = ("_items", "_stream")

    def __init__(self, stream: _AsyncStream, items: AsyncIterator[Any]) -> None:
        self._stream = stream
        self._items = items

    def __aiter__(self) -> _AsyncItems:
        return self

    async def __anext__(self) -> Any:
        return await self._stream._next(self._items)

    def __del__(self) -> None:  # the caller stopped reading: record what arrived
        with contextlib.suppress(Exception):
            self._stream._done()
