"""``@tool``, ``@retrieval`` and ``@llm``: record a function call as a step of the current run.

Each decorated call records its name, its arguments (bound to the signature's parameter names),
its raw return value or the exception it raised (re-raised unchanged), and when it started and
ended. Sync and async functions, and sync and async generators (their yielded items become the
output list) are supported. Outside a run, or with capture not configured, a decorated function
is called straight through and nothing is recorded.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncGenerator, Callable, Generator
from typing import Any, TypeVar, overload

from agentlens.capture._run import (
    _CTX,
    ActiveStep,
    Context,
    _internal_error,
    _reset,
    describe_error,
    jsonable,
)
from agentlens.errors import LoopDetected
from agentlens.model import StepKind, to_jsonable

__all__ = ["llm", "retrieval", "tool"]

F = TypeVar("F", bound=Callable[..., Any])

_SKIPPED = frozenset({"self", "cls"})


class _Binder:
    """Binds call arguments to parameter names, computed once per decorated function.

    Named parameters are recorded by name (defaults included), ``*args`` under its own name as
    a list, and extra keyword arguments of ``**kwargs`` flat beside the named ones. ``self`` and
    ``cls`` are left out.
    """

    __slots__ = ("defaults", "names", "skip_first", "varpos")

    def __init__(self, func: Callable[..., Any]) -> None:
        self.names: tuple[str, ...] = ()
        self.varpos: str | None = None
        self.defaults: tuple[tuple[str, Any], ...] = ()
        self.skip_first = False
        try:
            sig = inspect.signature(func)
        except (TypeError, ValueError):
            self.varpos = "args"
            return
        names: list[str] = []
        defaults: list[tuple[str, Any]] = []
        params = list(sig.parameters.values())
        if (
            params
            and params[0].name in _SKIPPED
            and params[0].kind
            in (
                inspect.Parameter.POSITIONAL_ONLY,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
            )
        ):
            self.skip_first = True
            params = params[1:]
        for p in params:
            if p.kind in (
                inspect.Parameter.POSITIONAL_ONLY,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
            ):
                names.append(p.name)
            elif p.kind is inspect.Parameter.VAR_POSITIONAL:
                self.varpos = p.name
            if p.default is not inspect.Parameter.empty and p.kind is not p.VAR_KEYWORD:
                defaults.append((p.name, p.default))
        self.names = tuple(names)
        self.defaults = tuple(defaults)

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if self.skip_first and args:
            args = args[1:]
        names = self.names
        bound = dict(zip(names, args, strict=False))
        if len(args) > len(names):
            bound[self.varpos or "args"] = list(args[len(names) :])
        if kwargs:
            bound.update(kwargs)
        for name, default in self.defaults:
            if name not in bound:
                bound[name] = default
        return bound


def _begin(
    ctx: Context,
    kind: StepKind,
    name: str,
    binder: _Binder,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> ActiveStep | None:
    """Open a step for a call; ``None`` when nothing should be recorded. Never raises."""
    try:
        run = ctx[0]
        if not run._recording or run._closed:
            return None
        step = ActiveStep(run, kind, name, ctx[1], run._clock())
        try:
            step._input = jsonable(binder(args, kwargs))
        except Exception:
            step._input = {"args": to_jsonable(args), "kwargs": to_jsonable(kwargs)}
        run.steps.append(step)
        return step
    except Exception as exc:
        _internal_error(exc)
        return None


def _end(step: ActiveStep, result: Any) -> None:
    try:
        run = step._run
        if run._closed:  # finished after its run was exported: keep the export as it was
            return
        step._output = jsonable(result)
        step._ended_ns = run._clock()
        if step.kind is StepKind.LLM:
            _llm_attributes(step, result)
        if run._guard is not None:
            run._guard.after(step)
    except Exception as exc:
        _internal_error(exc)


def _fail(step: ActiveStep, exc: BaseException, output: Any = None) -> None:
    try:
        run = step._run
        if run._closed:
            return
        step._error = describe_error(exc)
        if output is not None:
            step._output = output
        step._ended_ns = run._clock()
        if run._guard is not None:
            run._guard.after(step)
    except Exception as err:  # pragma: no cover - describe_error never raises
        _internal_error(err)


def _blocked(step: ActiveStep) -> LoopDetected | None:
    """The loop guard's :class:`~agentlens.errors.LoopDetected` for a call it stops (recorded as
    the step's error), else ``None``. Never raises."""
    try:
        guard = step._run._guard
        if guard is None:
            return None
        stop = guard.before(step)
        if stop is not None:
            _fail(step, stop)
        return stop
    except Exception as exc:
        _internal_error(exc)
        return None


# -- the four wrappers --------------------------------------------------------------------------


def _wrap_function(func: Callable[..., Any], kind: StepKind, name: str) -> Callable[..., Any]:
    binder = _Binder(func)
    get = _CTX.get
    set_ = _CTX.set

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = get()
        if ctx is None or not ctx[0]._recording:
            return func(*args, **kwargs)
        step = _begin(ctx, kind, name, binder, args, kwargs)
        if step is None:
            return func(*args, **kwargs)
        blocked = _blocked(step)
        if blocked is not None:
            raise blocked
        token = set_((ctx[0], step.id))
        try:
            result = func(*args, **kwargs)
        except BaseException as exc:
            _reset(token)
            _fail(step, exc)
            raise
        _reset(token)
        _end(step, result)
        return result

    return wrapper


def _wrap_coroutine(func: Callable[..., Any], kind: StepKind, name: str) -> Callable[..., Any]:
    binder = _Binder(func)

    @functools.wraps(func)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = _CTX.get()
        if ctx is None or not ctx[0]._recording:
            return await func(*args, **kwargs)
        step = _begin(ctx, kind, name, binder, args, kwargs)
        if step is None:
            return await func(*args, **kwargs)
        blocked = _blocked(step)
        if blocked is not None:
            raise blocked
        token = _CTX.set((ctx[0], step.id))
        try:
            result = await func(*args, **kwargs)
        except BaseException as exc:
            _reset(token)
            _fail(step, exc)
            raise
        _reset(token)
        _end(step, result)
        return result

    return wrapper


def _wrap_generator(func: Callable[..., Any], kind: StepKind, name: str) -> Callable[..., Any]:
    binder = _Binder(func)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        ctx = _CTX.get()
        step = None if ctx is None else _begin(ctx, kind, name, binder, args, kwargs)
        if ctx is None or step is None:
            return (yield from func(*args, **kwargs))
        blocked = _blocked(step)
        if blocked is not None:
            raise blocked
        inner: Context = (ctx[0], step.id)
        items: list[Any] = []
        gen = func(*args, **kwargs)
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            # Each resumption of the inner generator runs with this step as the parent.
            token = _CTX.set(inner)
            try:
                if thrown is not None:
                    exc, thrown = thrown, None
                    item = gen.throw(exc)
                else:
                    item = gen.send(sent)
            except StopIteration as stop:
                _reset(token)
                _end(step, items)
                return stop.value
            except BaseException as exc:
                _reset(token)
                _fail(step, exc, items)
                raise
            _reset(token)
            _append(items, item)
            try:
                sent = yield item
            except GeneratorExit:
                _close(gen, inner)
                _closed_early(step, items)
                raise
            except BaseException as exc:
                thrown = exc

    return wrapper


def _wrap_async_generator(
    func: Callable[..., Any], kind: StepKind, name: str
) -> Callable[..., Any]:
    binder = _Binder(func)

    @functools.wraps(func)
    async def wrapper(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        ctx = _CTX.get()
        step = None if ctx is None else _begin(ctx, kind, name, binder, args, kwargs)
        blocked = None if step is None else _blocked(step)
        if blocked is not None:
            raise blocked
        agen = func(*args, **kwargs)
        if ctx is None or step is None:
            sent_plain: Any = None
            while True:
                try:
                    value = await agen.asend(sent_plain)
                except StopAsyncIteration:
                    return
                sent_plain = yield value
        inner: Context = (ctx[0], step.id)
        items: list[Any] = []
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            token = _CTX.set(inner)
            try:
                if thrown is not None:
                    exc, thrown = thrown, None
                    item = await agen.athrow(exc)
                else:
                    item = await agen.asend(sent)
            except StopAsyncIteration:
                _reset(token)
                _end(step, items)
                return
            except BaseException as exc:
                _reset(token)
                _fail(step, exc, items)
                raise
            _reset(token)
            _append(items, item)
            try:
                sent = yield item
            except GeneratorExit:
                token = _CTX.set(inner)
                try:
                    await agen.aclose()
                finally:
                    _reset(token)
                _closed_early(step, items)
                raise
            except BaseException as exc:
                thrown = exc

    return wrapper


def _append(items: list[Any], item: Any) -> None:
    try:
        items.append(jsonable(item))
    except Exception as exc:  # pragma: no cover - jsonable never raises
        _internal_error(exc)


def _close(gen: Generator[Any, Any, Any], inner: Context) -> None:
    token = _CTX.set(inner)
    try:
        gen.close()
    finally:
        _reset(token)


def _closed_early(step: ActiveStep, items: list[Any]) -> None:
    try:
        if step._run._closed:
            return
        step._output = items
        step._ended_ns = step._run._clock()
        step.attributes["closed_early"] = True
    except Exception as exc:  # pragma: no cover - defensive
        _internal_error(exc)


# -- LLM usage ------------------------------------------------------------------------------------

# Source field -> attribute name, for OpenAI (chat and responses), Anthropic and LangChain usage.
_USAGE_FIELDS: tuple[tuple[str, str], ...] = (
    ("prompt_tokens", "input_tokens"),
    ("input_tokens", "input_tokens"),
    ("completion_tokens", "output_tokens"),
    ("output_tokens", "output_tokens"),
    ("total_tokens", "total_tokens"),
    ("cache_read_input_tokens", "cache_read_tokens"),
    ("cache_creation_input_tokens", "cache_write_tokens"),
)


def _field(obj: Any, key: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


def _llm_attributes(step: ActiveStep, result: Any) -> None:
    """Best effort: model name and token counts from an OpenAI/Anthropic/LangChain response."""
    try:
        attrs: dict[str, Any] = {}
        model = _field(result, "model")
        if not isinstance(model, str):
            metadata = _field(result, "response_metadata")
            model = _field(metadata, "model_name") if metadata is not None else None
        if not isinstance(model, str) and isinstance(step._input, dict):
            model = step._input.get("model")
        if isinstance(model, str):
            attrs["model"] = model
        usage = _field(result, "usage")
        if usage is None:
            usage = _field(result, "usage_metadata")
        if usage is not None:
            for source, target in _USAGE_FIELDS:
                value = _field(usage, source)
                if isinstance(value, int) and not isinstance(value, bool):
                    attrs.setdefault(target, value)
            if "total_tokens" not in attrs and "input_tokens" in attrs and "output_tokens" in attrs:
                attrs["total_tokens"] = attrs["input_tokens"] + attrs["output_tokens"]
        if attrs:
            step.attributes.update(attrs)
    except Exception:  # best effort: a strange response object is not an error
        return


# -- the public decorators ---------------------------------------------------------------------


def _decorate(kind: StepKind, func: Callable[..., Any], name: str | None) -> Callable[..., Any]:
    try:
        step_name = name or getattr(func, "__name__", None) or type(func).__name__
        if inspect.isasyncgenfunction(func):
            return _wrap_async_generator(func, kind, step_name)
        if inspect.isgeneratorfunction(func):
            return _wrap_generator(func, kind, step_name)
        if inspect.iscoroutinefunction(func):
            return _wrap_coroutine(func, kind, step_name)
        return _wrap_function(func, kind, step_name)
    except Exception as exc:  # a callable we cannot wrap is returned as it is
        _internal_error(exc)
        return func


def _factory(kind: StepKind) -> Callable[..., Any]:
    def decorator(func: Callable[..., Any] | None = None, /, *, name: str | None = None) -> Any:
        if func is None:
            return lambda f: _decorate(kind, f, name)
        return _decorate(kind, func, name)

    return decorator


@overload
def tool(func: F, /) -> F: ...
@overload
def tool(*, name: str | None = None) -> Callable[[F], F]: ...
def tool(func: Callable[..., Any] | None = None, /, *, name: str | None = None) -> Any:
    """Record each call of the function as a ``tool`` step: ``@agentlens.tool`` or
    ``@agentlens.tool(name="lookup")``.

    Args:
        func: the function (when used bare).
        name: the step name; default the function's ``__name__``.
    """
    return _tool(func, name=name)


@overload
def retrieval(func: F, /) -> F: ...
@overload
def retrieval(*, name: str | None = None) -> Callable[[F], F]: ...
def retrieval(func: Callable[..., Any] | None = None, /, *, name: str | None = None) -> Any:
    """Record each call of the function as a ``retrieval`` step (its output is evidence).

    Args:
        func: the function (when used bare).
        name: the step name; default the function's ``__name__``.
    """
    return _retrieval(func, name=name)


@overload
def llm(func: F, /) -> F: ...
@overload
def llm(*, name: str | None = None) -> Callable[[F], F]: ...
def llm(func: Callable[..., Any] | None = None, /, *, name: str | None = None) -> Any:
    """Record each call of the function as an ``llm`` step.

    When the return value looks like an OpenAI, Anthropic or LangChain response, the model name
    and token counts go into the step's attributes (``model``, ``input_tokens``,
    ``output_tokens``, ``total_tokens``, ``cache_read_tokens``, ``cache_write_tokens``).

    Args:
        func: the function (when used bare).
        name: the step name; default the function's ``__name__``.
    """
    return _llm(func, name=name)


_tool = _factory(StepKind.TOOL)
_retrieval = _factory(StepKind.RETRIEVAL)
_llm = _factory(StepKind.LLM)
