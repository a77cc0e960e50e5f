"""Runs and steps as they are being captured, and the context that nests them.

One :class:`contextvars.ContextVar` holds ``(run, id of the enclosing step)``. Entering a run or
a step sets it; leaving resets it. Threads started through :func:`contextvars.copy_context`
(or :func:`asyncio.to_thread`) and asyncio tasks copy it, so their steps get the right parent.
Values are copied into JSON form (:func:`agentlens.model.to_jsonable`) when they are recorded,
in the agent's thread, so a later mutation by the agent cannot change what was captured.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from datetime import datetime
from types import TracebackType
from typing import Any

from agentlens.capture import _state
from agentlens.capture._guard import RunGuard
from agentlens.capture._state import Pipeline
from agentlens.model import (
    MAX_INT_DIGITS,
    Step,
    StepKind,
    Trace,
    from_epoch_us,
    json_str,
    to_jsonable,
)

__all__ = ["ActiveStep", "Run", "current_run", "run"]

logger = logging.getLogger("agentlens")

Context = tuple["Run", "str | None"]
_CTX: ContextVar[Context | None] = ContextVar("agentlens_context", default=None)

_SCALARS = frozenset({bool, type(None)})
_INT_BOUND = 10**MAX_INT_DIGITS
_MAX_DEPTH = 32  # as in to_jsonable: deeper (or self-referencing) values are recorded by repr


def jsonable(value: Any, _depth: int = 0) -> Any:
    """A JSON-ready copy of ``value``: :func:`to_jsonable`, with a fast path for plain data.

    Exact ``bool``/``None``/finite ``float`` values, ASCII ``str``, ``int`` of at most
    :data:`~agentlens.model.MAX_INT_DIGITS` digits, and exact ``dict``/``list``/``tuple``
    containers of them, are handled here (the common case for tool arguments and results,
    measured in ``benchmarks/bench_capture.py``); anything else (other text is checked for lone
    surrogates, longer integers are marked) goes to :func:`to_jsonable`, which gives the same
    result. Never raises.
    """
    t = type(value)
    if t in _SCALARS or (t is str and value.isascii()):
        return value
    try:
        if t is float:
            return value if math.isfinite(value) else to_jsonable(value)
        if t is int and -_INT_BOUND < value < _INT_BOUND:
            return value
        if _depth < _MAX_DEPTH:
            if t is dict:
                return {
                    (k if type(k) is str and k.isascii() else json_str(str(k))): (
                        v
                        if ((tv := type(v)) is str and v.isascii())
                        or tv in _SCALARS
                        or (tv is int and -_INT_BOUND < v < _INT_BOUND)
                        else jsonable(v, _depth + 1)
                    )
                    for k, v in value.items()
                }
            if t is list or t is tuple:
                return [
                    v
                    if ((tv := type(v)) is str and v.isascii())
                    or tv in _SCALARS
                    or (tv is int and -_INT_BOUND < v < _INT_BOUND)
                    else jsonable(v, _depth + 1)
                    for v in value
                ]
    except Exception:  # a hostile key: let to_jsonable record what it can
        pass
    return to_jsonable(value, _depth)


def describe_error(exc: BaseException) -> dict[str, Any]:
    """The JSON form of an exception: ``{"type": ..., "message": ...}``. Never raises."""
    try:
        message = json_str(str(exc))
    except Exception:
        message = f"<unprintable {type(exc).__name__}>"
    t = type(exc)
    name = t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
    return {"type": name, "message": message}


class ActiveStep:
    """A step being recorded; what :meth:`Run.step` returns.

    Set :attr:`output`, :attr:`error` or :attr:`attributes` on it while it is open. Used as a
    context manager it times the block and becomes the parent of steps recorded inside it::

        with run.step("llm", "gpt-4o", input=messages) as step:
            reply = client.chat(messages)
            step.output = reply
    """

    __slots__ = (
        "_attributes",
        "_ended_ns",
        "_error",
        "_guard_key",
        "_input",
        "_output",
        "_run",
        "_started_ns",
        "_token",
        "id",
        "kind",
        "name",
        "parent_id",
    )

    def __init__(
        self, run: Run, kind: StepKind, name: str | None, parent_id: str | None, started_ns: int
    ) -> None:
        self._run = run
        self.id: str = f"s{next(run._seq)}"
        self.kind = kind
        self.name = name
        self.parent_id = parent_id
        self._input: Any = None
        self._output: Any = None
        self._error: Any = None
        self._attributes: dict[str, Any] | None = None
        self._started_ns = started_ns
        self._ended_ns: int | None = None
        self._token: Token[Context | None] | None = None
        self._guard_key: Any = None

    @property
    def input(self) -> Any:
        """The step's input (arguments, messages), as recorded (JSON)."""
        return self._input

    @input.setter
    def input(self, value: Any) -> None:
        self._input = jsonable(value)

    @property
    def output(self) -> Any:
        """The step's output (raw result, reply, text), as recorded (JSON)."""
        return self._output

    @output.setter
    def output(self, value: Any) -> None:
        self._output = jsonable(value)

    @property
    def error(self) -> Any:
        """The step's failure: a message, or ``{"type", "message"}`` for an exception."""
        return self._error

    @error.setter
    def error(self, value: Any) -> None:
        self._error = describe_error(value) if isinstance(value, BaseException) else jsonable(value)

    @property
    def attributes(self) -> dict[str, Any]:
        """Model name, token counts, anything else; a mutable dict."""
        if self._attributes is None:
            self._attributes = {}
        return self._attributes

    @attributes.setter
    def attributes(self, value: dict[str, Any] | None) -> None:
        # Misuse is recorded, never raised into the agent: None clears the attributes, a value
        # that is not a mapping is kept under "value" (each with a warning).
        try:
            if value is None:
                logger.warning(
                    "agentlens: step %s: attributes = None; recorded as no attributes", self.id
                )
                self._attributes = None
            elif isinstance(value, Mapping):
                self._attributes = dict(value)
            else:
                logger.warning(
                    "agentlens: step %s: attributes must be a dict, got %s; recorded under 'value'",
                    self.id,
                    type(value).__name__,
                )
                self._attributes = {"value": jsonable(value)}
        except Exception as exc:
            _internal_error(exc)

    def __enter__(self) -> ActiveStep:
        try:
            if self._run._recording:
                self._started_ns = self._run._clock()
                self._ended_ns = None
                self._token = _CTX.set((self._run, self.id))
        except Exception as exc:  # pragma: no cover - defensive
            _internal_error(exc)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self._token is not None:
                _reset(self._token)
                self._token = None
            if self._run._recording and not self._run._closed:
                self._ended_ns = self._run._clock()
                if exc is not None and self._error is None:
                    self._error = describe_error(exc)
        except Exception as err:  # pragma: no cover - defensive
            _internal_error(err)

    def to_step(self) -> Step:
        """The :class:`~agentlens.model.Step` recorded so far. A step not ended yet is marked
        ``attributes.incomplete = true``."""
        # Attributes were copied into JSON form when the run ended (Run._finish).
        attributes: dict[str, Any] = dict(self._attributes) if self._attributes else {}
        if self._ended_ns is None:
            attributes["incomplete"] = True
        return Step.model_construct(
            id=json_str(self.id),
            parent_id=self.parent_id,
            kind=self.kind,
            name=_text(self.name),
            input=self._input,
            output=self._output,
            error=self._error,
            started_at=_time(self._started_ns),
            ended_at=_time(self._ended_ns),
            attributes=attributes,
        )

    def __repr__(self) -> str:
        return f"<ActiveStep {self.id} {self.kind.value} {self.name!r}>"


class Run:
    """One agent run being captured: a context manager (sync or async).

    Create it with :func:`agentlens.run`. Inside, set :attr:`output` to the final answer;
    steps recorded by decorated functions (or :meth:`step`) are added to it. On exit the status
    is ``ok``, or ``error`` when an exception left the block (the exception is recorded in
    ``metadata["error"]`` and propagates unchanged), and the run is queued for export.
    With capture not configured the run records nothing but behaves the same.
    """

    __slots__ = (
        "_clock",
        "_closed",
        "_entered",
        "_guard",
        "_output",
        "_pipeline",
        "_recording",
        "_reentries",
        "_seq",
        "_token",
        "agent",
        "ended_ns",
        "id",
        "input",
        "links",
        "metadata",
        "name",
        "project",
        "started_ns",
        "status",
        "steps",
    )

    def __init__(
        self,
        *,
        agent: str | None = None,
        input: Any = None,
        name: str | None = None,
        links: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
        project: str | None = None,
        run_id: str | None = None,
    ) -> None:
        self._pipeline: Pipeline | None = None
        self._clock: Callable[[], int] = time.time_ns
        self._recording = False
        self._seq = itertools.count(1)
        self._token: Token[Context | None] | None = None
        self._entered = 0
        self._reentries: list[Token[Context | None]] = []
        self._closed = False
        self._output: Any = None
        self._guard: RunGuard | None = None
        self.steps: list[ActiveStep] = []
        self.status = "running"
        self.started_ns: int | None = None
        self.ended_ns: int | None = None
        self.id = "" if run_id is None else str(run_id)
        self.agent = agent
        self.name = name
        self.project = project
        self.input: Any = None
        self.metadata: dict[str, Any] = {}
        self.links: dict[str, Any] = {}
        try:
            pipeline = _state.current()
            self._pipeline = pipeline
            self._clock = pipeline.clock
            self._recording = pipeline.enabled
            if not self.id:
                self.id = pipeline.id_generator()
            if project is None:
                self.project = pipeline.project or "default"
            self.input = jsonable(input)
            if metadata:
                self.metadata = (
                    dict(metadata) if isinstance(metadata, dict) else {"metadata": metadata}
                )
            if links:
                self.links = dict(links) if isinstance(links, dict) else {"link": links}
            guard = pipeline.guard
            if guard is not None and self._recording:
                role = guard.for_agent(agent)
                if role is not None:
                    self._guard = RunGuard(self, guard, role)
        except Exception as exc:  # never raise into the agent
            self._recording = False
            _internal_error(exc)

    @property
    def recording(self) -> bool:
        """True when this run will be exported (capture is configured and enabled)."""
        return self._recording

    @property
    def output(self) -> Any:
        """The final answer, as recorded (JSON)."""
        return self._output

    @output.setter
    def output(self, value: Any) -> None:
        self._output = jsonable(value)

    # -- context management -------------------------------------------------------------------

    def __enter__(self) -> Run:
        if self._closed:
            # Entered again after its block ended (and it was exported): that block records
            # nothing, but the run is current for its duration (so that its calls attach to no
            # other run) and stops being current when it ends.
            logger.warning(
                "agentlens: run %s already ended; entering it again records nothing "
                "(start a new agentlens.run() for a new run)",
                self.id,
            )
            try:
                self._reentries.append(_CTX.set((self, None)))
            except Exception as exc:  # pragma: no cover - defensive
                _internal_error(exc)
            return self
        self._entered += 1
        if self._entered > 1:
            logger.warning("agentlens: run %s entered twice; the second entry is ignored", self.id)
            return self
        try:
            outer = _CTX.get()
            if outer is not None and outer[0]._recording and self._recording:
                self.metadata.setdefault("parent_run_id", outer[0].id)
            self.started_ns = self._clock()
            self._token = _CTX.set((self, None))
        except Exception as exc:  # pragma: no cover - defensive
            _internal_error(exc)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._closed and self._reentries:
            try:
                _reset(self._reentries.pop())
            except Exception as err:  # pragma: no cover - defensive
                _internal_error(err)
            return
        self._entered -= 1
        if self._closed or self._entered != 0:
            return
        try:
            if self._token is not None:
                _reset(self._token)
                self._token = None
            self._finish(exc)
        except Exception as err:
            _internal_error(err)

    async def __aenter__(self) -> Run:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    def _finish(self, exc: BaseException | None) -> None:
        self.ended_ns = self._clock()
        # run.metadata = None, run.links = None (or another non-dict) must not lose the run:
        # recorded as empty (None) or under one key, with a warning.
        self.metadata = _as_dict(self.metadata, "metadata", "metadata", self.id)
        self.links = _as_dict(self.links, "links", "link", self.id)
        if exc is not None:
            self.status = "error"
            self.metadata["error"] = describe_error(exc)
        elif self.status == "running":
            self.status = "ok"
        self._closed = True
        if not self._recording:
            return
        self.metadata = jsonable(self.metadata)
        for step in self.steps:
            if step._attributes:
                step._attributes = jsonable(step._attributes)
        self.links = {str(k): _link(v) for k, v in self.links.items()}
        pipeline = self._pipeline
        if pipeline is not None and pipeline.processor is not None:
            pipeline.processor.on_end(self)

    def to_trace(self) -> Trace:
        """The :class:`~agentlens.model.Trace` of this run, as recorded so far.

        What a processor exports once the run has ended. Steps still open when the run ended
        are marked ``attributes.incomplete = true``; steps are in the order they started.
        Every value was copied into JSON form when it was recorded, so this reads nothing the
        agent may still be changing (and may run on another thread).
        """
        metadata = self.metadata
        links = self.links
        return Trace.model_construct(
            schema_version=1,
            id=json_str(self.id),
            project=_text(self.project) or "default",
            agent=_text(self.agent),
            name=_text(self.name),
            status=self.status,
            started_at=_time(self.started_ns),
            ended_at=_time(self.ended_ns),
            input=self.input,
            output=self._output,
            metadata=metadata if isinstance(metadata, dict) else {"metadata": metadata},
            links={json_str(k): json_str(v) for k, v in links.items()}
            if isinstance(links, dict)
            else {},
            steps=[step.to_step() for step in list(self.steps)],
        )

    # -- steps by hand ------------------------------------------------------------------------

    def step(
        self,
        kind: StepKind | str,
        name: str | None = None,
        *,
        input: Any = None,
        output: Any = None,
        error: Any = None,
        attributes: dict[str, Any] | None = None,
    ) -> ActiveStep:
        """Record a step by hand, for code that cannot be decorated.

        The step is recorded at once (started and ended now). Used as a context manager it
        is timed instead and is the parent of the steps recorded inside the block.

        Args:
            kind: a :class:`~agentlens.model.StepKind` or its value (``"tool"``, ``"llm"``...).
            name: the tool, retriever or model name.
            input: arguments or messages sent.
            output: the raw result, reply or message text.
            error: a message, or an exception.
            attributes: model name, token counts...

        Returns:
            The step, to set more on it or to use as a context manager.
        """
        try:
            step_kind = _kind(kind)
            if not self._recording:
                return ActiveStep(self, step_kind, name, None, 0)
            now = self._clock()
            parent: str | None = None
            ctx = _CTX.get()
            if ctx is not None and ctx[0] is self:
                parent = ctx[1]
            active = ActiveStep(self, step_kind, name, parent, now)
            if step_kind.value != kind and not isinstance(kind, StepKind):
                active.attributes["original_kind"] = jsonable(kind)
            if input is not None:
                active.input = input
            if output is not None:
                active.output = output
            if error is not None:
                active.error = error
            if attributes:
                active.attributes.update(attributes)
            active._ended_ns = now
            if not self._closed:
                self.steps.append(active)
            return active
        except Exception as exc:
            _internal_error(exc)
            return ActiveStep(_NOOP_RUN, StepKind.TEXT, name, None, 0)

    def __repr__(self) -> str:
        return f"<Run {self.id} agent={self.agent!r} status={self.status} steps={len(self.steps)}>"


def run(
    *,
    agent: str | None = None,
    input: Any = None,
    name: str | None = None,
    links: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    project: str | None = None,
    run_id: str | None = None,
) -> Run:
    """Capture one agent run: ``with agentlens.run(agent=..., input=question) as run:``.

    Also ``async with``. Set ``run.output`` to the final answer inside the block.

    Args:
        agent: the agent role (scorer settings are chosen by it).
        input: the user's request (any value; recorded as JSON).
        name: a human-readable name for the run.
        links: ids of things the run produced or served (``{"ticket": "T-1"}``).
        metadata: free-form labels (``{"release": "v42"}``).
        project: the project (default: the one given to :func:`configure`, else ``default``).
        run_id: the run id; a time-sortable id is made when absent.
    """
    return Run(
        agent=agent,
        input=input,
        name=name,
        links=links,
        metadata=metadata,
        project=project,
        run_id=run_id,
    )


def _as_dict(value: Any, field: str, key: str, run_id: str) -> dict[Any, Any]:
    if isinstance(value, dict):
        return value
    if value is None:
        logger.warning("agentlens: run %s: %s = None; recorded as empty", run_id, field)
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    logger.warning(
        "agentlens: run %s: %s must be a dict, got %s; recorded under %r",
        run_id,
        field,
        type(value).__name__,
        key,
    )
    return {key: value}


def current_run() -> Run | None:
    """The run being captured in this context, or ``None`` outside any run."""
    ctx = _CTX.get()
    return None if ctx is None else ctx[0]


def _kind(kind: StepKind | str) -> StepKind:
    if isinstance(kind, StepKind):
        return kind
    try:
        return StepKind(kind)
    except ValueError:
        logger.warning("agentlens: unknown step kind %r, recorded as 'agent'", kind)
        return StepKind.AGENT


def _time(ns: int | None) -> datetime | None:
    return None if ns is None else from_epoch_us(ns // 1000)


def _text(value: Any) -> str | None:
    """A name or id as text a store can hold (a lone surrogate becomes U+FFFD)."""
    if value is None:
        return None
    return json_str(value if isinstance(value, str) else str(value))


def _link(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return str(value)
    except Exception:
        return repr(to_jsonable(value))


def _reset(token: Token[Context | None]) -> None:
    try:
        _CTX.reset(token)
    except ValueError:
        # The token was made in another context (a generator resumed elsewhere): put back
        # what was current when it was set.
        _CTX.set(token.old_value if token.old_value is not Token.MISSING else None)


def _internal_error(exc: BaseException) -> None:
    with contextlib.suppress(Exception):
        logger.warning("agentlens: capture error (ignored): %s", describe_error(exc)["message"])


_NOOP_RUN = Run.__new__(Run)
_NOOP_RUN._recording = False
_NOOP_RUN._guard = None
_NOOP_RUN._clock = time.time_ns
_NOOP_RUN._seq = itertools.count(1)
