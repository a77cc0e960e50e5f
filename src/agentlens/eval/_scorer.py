"""The scorer API: scorers as registered factories with typed, keyword-only options.

A scorer is made by a *factory*: a function whose keyword-only, typed parameters are the
scorer's options, checked when it is called, and which returns the scoring function::

    @agentlens.eval.scorer(name="max_tool_calls", version="1")
    def max_tool_calls(*, limit: int = 10):
        if limit < 1:
            raise ConfigError("limit must be at least 1")

        def score(*, trace, evidence):
            n = sum(1 for s in trace.steps if s.kind == "tool")
            return ScoreResult(passed=n <= limit, value=n)

        return score

    max_tool_calls(limit=5)            # a Scorer with that option bound

A plain scoring function (one that takes ``trace`` and/or ``evidence``) is the short form: its
other keyword arguments are its options. Either way options are checked against their type
annotations and by the factory *when they are bound*, so a bad value is an error there (a
:class:`~agentlens.errors.ConfigError` naming the file and key when it came from
``agentlens.toml``), not an ``error`` score on every run.

The stored version is the declared version, then a tag the factory names (a judge's prompt
version: ``1+offline-6``), then a short hash of the options that differ from their defaults
(``max_steps = 15`` written out and left out are both version ``1``) and of whatever else the
factory says changes a verdict (a judge's backend, model and mode).

A scorer that raises while scoring yields an ``error`` result; it never aborts a batch.
"""

from __future__ import annotations

import collections.abc as cabc
import functools
import hashlib
import inspect
import json
import logging
import re
import types
import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from agentlens.errors import AgentlensError, ConfigError, ScorerError
from agentlens.eval._evidence import Evidence
from agentlens.model import ScoreResult, ScoreRow, Trace

__all__ = [
    "Bound",
    "Scorer",
    "ScorerFactory",
    "ScorerFn",
    "WithRow",
    "define_scorer",
    "scorer",
]

logger = logging.getLogger("agentlens")

CONTEXT = "settings"
"""A factory parameter of this name receives the resolved settings (not an option)."""


class ScorerFn(Protocol):
    """What a scoring function looks like: keyword-only ``trace`` and ``evidence``."""

    def __call__(
        self, *, trace: Trace, evidence: Evidence
    ) -> ScoreResult | Awaitable[ScoreResult]: ...


RowFn = Callable[[Evidence, str, str, str], "ScoreRow | ScoreResult"]
"""``row(evidence, run_id, scorer, version)``: see :class:`WithRow`."""


@dataclass(frozen=True, slots=True)
class WithRow:
    """A scoring function that can also give a run's stored row without its score.

    ``fn`` is the scoring function, as any other (:meth:`Scorer.score` calls it). ``row`` scores
    the same run with the same rules and gives the :class:`~agentlens.model.ScoreRow` that
    ``ScoreRow.of(Score.of(fn(...)), keep=False)`` would give, made without the score, where it
    can (the built-in grounding scorers, for a run that passed: a dozen grounded claims whose
    models nothing reads once the row is stored; the transcript analysers, for a run that
    passed: three results per run and their scores), else the result ``fn`` gives. Batch scoring
    asks for it when it keeps no score it does not need (:func:`~agentlens.eval.score_runs`);
    a scorer without one is scored as ever."""

    fn: Callable[..., ScoreResult]
    row: RowFn

    def __call__(self, *, trace: Trace, evidence: Evidence) -> ScoreResult:
        return self.fn(trace=trace, evidence=evidence)


@dataclass(frozen=True, slots=True)
class Bound:
    """What a factory may return instead of a bare scoring function: the function, and what
    goes into the stored version instead of the options that differ from their defaults (for a
    scorer whose verdicts also depend on something resolved, such as its judge)."""

    fn: Callable[..., Any]
    version_options: Mapping[str, Any]
    version_tag: str | None = None
    """Shown in the stored version after the declared version, before the hash (the judge's
    prompt version, ``offline-6``): what changes verdicts and should be readable, not hashed.
    Letters, digits, ``.``, ``_`` and ``-`` only."""


@dataclass(frozen=True)
class Scorer:
    """A named, versioned scorer with its options bound. Made by a :class:`ScorerFactory`."""

    name: str
    """The registered name (public interface: stored with every score)."""
    version: str
    """The declared version; bump it when the scorer's logic changes."""
    fn: Callable[..., Any]
    """The scoring function, options bound: ``fn(trace=..., evidence=...)``."""
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """The options bound that differ from their defaults (JSON-ready)."""
    description: str = ""
    """One line saying what the scorer checks."""
    factory: ScorerFactory | None = field(default=None, compare=False, repr=False)
    """The factory that made it (rebinds options)."""
    version_options: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    """What the stored version hashes, when not :attr:`options`."""
    settings: Any = field(default=None, compare=False, repr=False)
    """The settings it was bound with (kept when options are rebound)."""
    version_tag: str | None = field(default=None, compare=False, repr=False)
    """Shown in the stored version after the declared version (a judge's prompt version)."""

    @functools.cached_property
    def stored_version(self) -> str:
        """The version stored with results: the declared version, then the factory's tag (a
        judge's prompt version), then a short hash of what else changes a verdict (the options
        that differ from their defaults, a judge's identity), each after a ``+``. Computed once
        (a batch asks it for every run and score; the options and the tag are frozen)."""
        material = self.options if self.version_options is None else self.version_options
        version = self.version if self.version_tag is None else f"{self.version}+{self.version_tag}"
        if not material:
            return version
        blob = json.dumps(dict(material), sort_keys=True, default=str).encode()
        return f"{version}+{hashlib.sha256(blob).hexdigest()[:8]}"

    @property
    def takes_settings(self) -> bool:
        """True when the factory uses the resolved settings (e.g. the ``[judge]`` table)."""
        return self.factory is not None and self.factory.takes_settings

    def with_options(self, **options: Any) -> Scorer:
        """A copy with ``options`` bound (merged over those already bound), through the factory.

        Raises:
            ScorerError: an option the scorer does not have.
            ConfigError: a value of the wrong type, or one the factory refuses.
        """
        if not options:
            return self
        if self.factory is None:
            raise ScorerError(f"scorer {self.name!r} has no factory to bind options with")
        return self.factory.bind({**self.options, **options}, self.settings)

    async def ascore(self, trace: Trace, evidence: Evidence | None = None) -> ScoreResult:
        """Score one run; never raises (a failing scorer gives an ``error`` result)."""
        ev = evidence if evidence is not None else Evidence(trace)
        try:
            result = self.fn(trace=trace, evidence=ev)
            if inspect.isawaitable(result):
                result = await result
            return _check_result(self.name, result)
        except Exception as exc:
            return self._failed(trace, exc)

    @functools.cached_property
    def is_async(self) -> bool:
        """True when the scoring function is a coroutine function (to be awaited: see
        :meth:`ascore`)."""
        return inspect.iscoroutinefunction(self.fn)

    def _failed(self, trace: Trace, exc: Exception) -> ScoreResult:
        """The ``error`` result of this scorer failing on ``trace`` (logged at debug level, with
        the traceback)."""
        logger.debug("scorer %s failed on run %s", self.name, trace.id, exc_info=exc)
        return ScoreResult.from_error(exc)

    def _score_or_row(
        self, trace: Trace, evidence: Evidence, version: str
    ) -> ScoreResult | ScoreRow:
        """:meth:`score`, or the stored row of the score (``version`` its stored version) when
        the scoring function gives one without the score (:class:`WithRow`); never raises."""
        fn = self.fn
        if type(fn) is not WithRow:
            return self.score(trace, evidence)
        try:
            return fn.row(evidence, trace.id, self.name, version)
        except Exception as exc:
            return self._failed(trace, exc)

    def score(self, trace: Trace, evidence: Evidence | None = None) -> ScoreResult:
        """Score one run synchronously; never raises. Use :meth:`ascore` inside an event loop."""
        ev = evidence if evidence is not None else Evidence(trace)
        if not self.is_async:
            try:
                result = self.fn(trace=trace, evidence=ev)
                if type(result) is ScoreResult:  # what nearly every scorer returns
                    return result
                if not inspect.isawaitable(result):
                    return _check_result(self.name, result)
                return _run_sync(result)
            except Exception as exc:
                return self._failed(trace, exc)
        return _run_sync(self.ascore(trace, ev))


class ScorerFactory:
    """A registered scorer: its name, version and a factory of keyword-only, typed options.

    Calling it binds options and returns a :class:`Scorer`; :meth:`bind` does the same from a
    mapping. :attr:`defaults` are the options' defaults.
    """

    def __init__(
        self,
        name: str,
        make: Callable[..., Any],
        *,
        version: str = "1",
        description: str = "",
        unversioned: cabc.Iterable[str] = (),
        plain: bool = False,
    ) -> None:
        _check_name(name)
        self.name = name
        self.version = str(version)
        self.make = make
        self.plain = plain
        """True for the short form: ``make`` is the scoring function itself."""
        params = inspect.signature(make).parameters
        skip = {"trace", "evidence", CONTEXT} if plain else {CONTEXT}
        self.params = {
            k: p
            for k, p in params.items()
            if k not in skip
            and p.kind not in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)
        }
        self.takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        if not plain:
            positional = [k for k, p in self.params.items() if p.kind is not p.KEYWORD_ONLY]
            if positional:
                raise ScorerError(
                    f"scorer factory {name!r}: options must be keyword-only "
                    f"(def {getattr(make, '__name__', name)}(*, {positional[0]}=...)); "
                    f"{positional[0]!r} is not"
                )
        self.takes_settings = CONTEXT in params
        self.defaults: dict[str, Any] = {
            k: p.default for k, p in self.params.items() if p.default is not inspect.Parameter.empty
        }
        self.unversioned = frozenset(unversioned)
        self.hints = _hints(make)
        self.description = description or (inspect.getdoc(make) or "").split("\n", 1)[0]
        self._default: Scorer | None = None
        self.__doc__ = make.__doc__
        self.__name__ = getattr(make, "__name__", name)
        self.__module__ = getattr(make, "__module__", __name__)
        self.__wrapped__ = make

    def __repr__(self) -> str:
        return f"<scorer factory {self.name!r} version {self.version}>"

    def __call__(self, **options: Any) -> Scorer:
        return self.bind(options)

    @property
    def default(self) -> Scorer:
        """The scorer with every option at its default."""
        if self._default is None:
            self._default = self.bind({})
        return self._default

    def option_names(self) -> list[str]:
        return sorted(self.params)

    def check(self, options: Mapping[str, Any]) -> None:
        """Refuse options the scorer does not have, and values of the wrong type.

        Raises:
            ScorerError: an unknown option.
            ConfigError: a value that does not match the option's type.
        """
        for key, value in options.items():
            if key not in self.params:
                if self.takes_any and key not in ("trace", "evidence", CONTEXT):
                    continue
                accepted = self.option_names()
                raise ScorerError(
                    f"scorer {self.name!r} has no option {key!r}"
                    + (f"; its options are {', '.join(accepted)}" if accepted else "")
                )
            hint = self.hints.get(key)
            if hint is not None and not _matches(value, hint):
                raise ConfigError(
                    f"scorer {self.name!r}: option {key!r} must be {_describe(hint)}, got {value!r}"
                )

    def bind(self, options: Mapping[str, Any], settings: Any = None) -> Scorer:
        """The scorer with ``options`` bound (and ``settings``, for a factory that uses them).

        Raises:
            ScorerError: an unknown option.
            ConfigError: a bad value (wrong type, or refused by the factory).
        """
        self.check(options)
        given = {k: _jsonable(v) for k, v in options.items()}
        changed = {
            k: v
            for k, v in given.items()
            if k not in self.defaults or v != _jsonable(self.defaults[k])
        }
        kwargs = dict(options)
        if self.takes_settings:
            kwargs[CONTEXT] = settings
        tag: str | None = None
        if self.plain:
            fn = _partial(self.make, kwargs)
            versioned: Mapping[str, Any] | None = None
        else:
            try:
                made = self.make(**kwargs)
            except AgentlensError:
                raise
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"scorer {self.name!r}: {exc}") from None
            if isinstance(made, Bound):
                fn, versioned = made.fn, MappingProxyType(dict(made.version_options))
                tag = made.version_tag
                if tag is not None and not VERSION_TAG.fullmatch(tag):
                    raise ScorerError(
                        f"scorer factory {self.name!r}: bad version tag {tag!r}: use letters, "
                        "digits, '.', '_' or '-'"
                    )
            else:
                fn, versioned = made, None
            if not callable(fn):
                raise ScorerError(
                    f"scorer factory {self.name!r} returned {type(fn).__name__}, not a function"
                )
        if versioned is None and self.unversioned & set(changed):
            versioned = MappingProxyType(
                {k: v for k, v in changed.items() if k not in self.unversioned}
            )
        return Scorer(
            name=self.name,
            version=self.version,
            fn=fn,
            options=MappingProxyType(changed),
            description=self.description,
            factory=self,
            version_options=versioned,
            settings=settings if self.takes_settings else None,
            version_tag=tag,
        )


VERSION_TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")
"""A version tag: one readable token, so that the stored version stays one."""


def _check_name(name: str) -> None:
    if not name or not name.replace("_", "").replace("-", "").replace(".", "").isalnum():
        raise ScorerError(f"bad scorer name {name!r}: use letters, digits, '_', '-' or '.'")


def _partial(fn: Callable[..., Any], options: Mapping[str, Any]) -> Callable[..., Any]:
    """``fn`` with ``options`` bound, taking only the arguments it declares (``trace``,
    ``evidence`` or both)."""
    params = inspect.signature(fn).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    keep = {"trace", "evidence"} if takes_any else {"trace", "evidence"} & set(params)
    bound = dict(options)
    if inspect.iscoroutinefunction(fn):

        async def ascoring(**kwargs: Any) -> Any:
            return await fn(**{k: v for k, v in kwargs.items() if k in keep}, **bound)

        return ascoring

    def scoring(**kwargs: Any) -> Any:
        return fn(**{k: v for k, v in kwargs.items() if k in keep}, **bound)

    return scoring


def _jsonable(value: Any) -> Any:
    """Options as they are compared and hashed: tuples and lists alike, mappings as dicts."""
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


# --------------------------------------------------------------------------- option types


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """The options' type annotations; an annotation that cannot be resolved is not checked."""
    try:
        return typing.get_type_hints(fn)
    except Exception:
        out: dict[str, Any] = {}
        for key, param in inspect.signature(fn).parameters.items():
            ann = param.annotation
            if ann is inspect.Parameter.empty:
                continue
            if isinstance(ann, str):
                try:
                    ann = eval(ann, getattr(fn, "__globals__", {}), dict(vars(typing)))
                except Exception:
                    continue
            out[key] = ann
        return out


def _matches(value: Any, hint: Any) -> bool:
    """True when ``value`` fits the annotation ``hint`` (what a TOML file or code can give)."""
    if hint is Any or hint is object:
        return True
    if hint is None or hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        return any(_matches(value, a) for a in args)
    if origin is typing.Literal:
        return value in args
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin in (cabc.Sequence, list, tuple, cabc.Iterable, cabc.Collection, frozenset, set):
        if not isinstance(value, list | tuple | set | frozenset):
            return False
        inner = [a for a in args if a is not Ellipsis]
        return not inner or all(_matches(v, inner[0]) for v in value)
    if origin in (cabc.Mapping, dict):
        if not isinstance(value, Mapping):
            return False
        if len(args) != 2:
            return True
        return all(_matches(k, args[0]) and _matches(v, args[1]) for k, v in value.items())
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True  # an annotation we do not know how to check (a Protocol...)


def _describe(hint: Any) -> str:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        return " or ".join(_describe(a) for a in args)
    if hint is None or hint is type(None):
        return "none"
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (cabc.Sequence, list, tuple, cabc.Iterable, cabc.Collection, frozenset, set):
        inner = [a for a in args if a is not Ellipsis]
        plural = {str: "strings", int: "integers", float: "numbers", bool: "booleans"}
        if not inner:
            return "a list"
        return f"a list of {plural.get(inner[0], _describe(inner[0]))}"
    if origin in (cabc.Mapping, dict):
        return "a table"
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    return names.get(hint, getattr(hint, "__name__", str(hint)))


# --------------------------------------------------------------------------- results


def _check_result(name: str, result: Any) -> ScoreResult:
    if isinstance(result, ScoreResult):
        return result
    if isinstance(result, bool):
        return ScoreResult(passed=result, value=float(result))
    raise ScorerError(f"scorer {name!r} returned {type(result).__name__}, not a ScoreResult")


def _run_sync(awaitable: Awaitable[Any]) -> Any:
    import asyncio  # (with ssl and sockets: about 20 ms, for async scorers only)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await(awaitable))
    raise ScorerError(
        "an async scorer cannot be run synchronously inside an event loop; use ascore"
    )


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


# --------------------------------------------------------------------------- definition

_DEFINED: dict[str, ScorerFactory] = {}
"""Scorers registered by :func:`scorer` / :func:`define_scorer` (built-ins are listed in
:mod:`agentlens.eval._registry`, not registered here)."""


def _is_plain(fn: Callable[..., Any]) -> bool:
    params = inspect.signature(fn).parameters
    return bool({"trace", "evidence"} & set(params)) or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()
    )


def define_scorer(
    name: str,
    fn: Callable[..., Any],
    *,
    version: str = "1",
    description: str = "",
    register: bool = True,
) -> Scorer:
    """Register the scoring function ``fn`` as scorer ``name`` and return it (options at their
    defaults). Registering a name again replaces it.

    Raises:
        ScorerError: a bad name, or ``fn`` takes neither ``trace`` nor ``evidence``.
    """
    _check_name(name)
    if not _is_plain(fn):
        raise ScorerError(f"scorer {name!r} must accept the keyword argument 'trace' or 'evidence'")
    factory = ScorerFactory(name, fn, version=version, description=description, plain=True)
    if register:
        _DEFINED[name] = factory
    return factory.default


def scorer(
    name: str | None = None,
    *,
    version: str = "1",
    description: str = "",
    unversioned: cabc.Iterable[str] = (),
    register: bool = True,
) -> Callable[[Callable[..., Any]], Any]:
    """Declare a scorer: on a factory (keyword-only options, returns the scoring function) it
    gives the :class:`ScorerFactory`; on a plain scoring function (takes ``trace`` and/or
    ``evidence``) the :class:`Scorer`. The name defaults to the function's name.

    Args:
        name: the scorer's name (public interface: stored with every score).
        version: bump it when the scorer's logic changes.
        description: one line; default the docstring's first line.
        unversioned: options that do not change a verdict (timeouts, concurrency): not hashed
            into the stored version.
        register: add it to the registry (the built-ins are listed explicitly instead).
    """

    def decorate(fn: Callable[..., Any]) -> Any:
        label = name or fn.__name__
        if _is_plain(fn):
            return define_scorer(
                label, fn, version=version, description=description, register=register
            )
        factory = ScorerFactory(
            label, fn, version=version, description=description, unversioned=unversioned
        )
        if register:
            _DEFINED[label] = factory
        return factory

    return decorate
