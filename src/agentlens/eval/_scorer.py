"""The scorer API: define scorers, look them up by name, run them on a run.

A scorer is a plain function, sync or async, that receives the trace and its evidence as keyword
arguments (plus any options it declares) and returns a :class:`ScoreResult`::

    @agentlens.eval.scorer(name="mentions_ticket", version="1")
    def mentions_ticket(*, trace, evidence):
        ok = trace.links.get("ticket", "") in str(trace.output)
        return ScoreResult(passed=ok, detail="ticket id present" if ok else "no ticket id")

Options are keyword arguments with defaults; ``scorer.with_options(max_repeats=5)`` binds them
(per agent role, from ``agentlens.toml``). A scorer that raises yields an ``error`` result; it
never aborts a batch.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Protocol

from agentlens.config import Settings
from agentlens.errors import ScorerError
from agentlens.eval._evidence import Evidence
from agentlens.model import Score, ScoreResult, Trace, Verdict, worst_verdict

__all__ = [
    "Report",
    "Scorer",
    "ScorerFn",
    "arun_scorers",
    "define_scorer",
    "get_scorer",
    "registered_scorers",
    "resolve_scorer",
    "run_scorers",
    "scorer",
]

logger = logging.getLogger("agentlens")


class ScorerFn(Protocol):
    """What a scorer function looks like: keyword-only ``trace`` and ``evidence``, plus options."""

    def __call__(
        self, *, trace: Trace, evidence: Evidence, **options: Any
    ) -> ScoreResult | Awaitable[ScoreResult]: ...


@dataclass(frozen=True)
class Scorer:
    """A named, versioned scorer with its options bound."""

    name: str
    """The registered name (public interface: stored with every score)."""
    version: str
    """The declared version; bump it when the scorer's logic changes."""
    fn: Callable[..., Any]
    """The scoring function."""
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """Options bound with :meth:`with_options`."""
    description: str = ""
    """One line saying what the scorer checks."""

    @property
    def stored_version(self) -> str:
        """The version stored with results: the declared version, plus a short hash of the
        options when any are bound, so that changed settings re-score history."""
        if not self.options:
            return self.version
        blob = json.dumps(dict(self.options), sort_keys=True, default=str).encode()
        return f"{self.version}+{hashlib.sha256(blob).hexdigest()[:8]}"

    def with_options(self, **options: Any) -> Scorer:
        """A copy with ``options`` bound (merged over those already bound).

        Raises:
            ScorerError: an option the scorer function does not accept.
        """
        if not options:
            return self
        params = inspect.signature(self.fn).parameters
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        for key in options:
            if not takes_any and (key not in params or key in ("trace", "evidence")):
                accepted = sorted(k for k in params if k not in ("trace", "evidence"))
                raise ScorerError(
                    f"scorer {self.name!r} has no option {key!r}"
                    + (f"; its options are {', '.join(accepted)}" if accepted else "")
                )
        merged = {**self.options, **options}
        return replace(self, options=MappingProxyType(merged))

    async def ascore(self, trace: Trace, evidence: Evidence | None = None) -> ScoreResult:
        """Score one run; never raises (a failing scorer gives an ``error`` result)."""
        ev = evidence if evidence is not None else Evidence(trace)
        try:
            result = self.fn(trace=trace, evidence=ev, **self.options)
            if inspect.isawaitable(result):
                result = await result
            return _check_result(self.name, result)
        except Exception as exc:
            logger.debug("scorer %s failed on run %s", self.name, trace.id, exc_info=True)
            return ScoreResult.from_error(exc)

    def score(self, trace: Trace, evidence: Evidence | None = None) -> ScoreResult:
        """Score one run synchronously; never raises. Use :meth:`ascore` inside an event loop."""
        ev = evidence if evidence is not None else Evidence(trace)
        if not inspect.iscoroutinefunction(self.fn):
            try:
                result = self.fn(trace=trace, evidence=ev, **self.options)
                if not inspect.isawaitable(result):
                    return _check_result(self.name, result)
                return _run_sync(result)
            except Exception as exc:
                logger.debug("scorer %s failed on run %s", self.name, trace.id, exc_info=True)
                return ScoreResult.from_error(exc)
        return _run_sync(self.ascore(trace, ev))


def _check_result(name: str, result: Any) -> ScoreResult:
    if isinstance(result, ScoreResult):
        return result
    if isinstance(result, bool):
        return ScoreResult(passed=result, value=float(result))
    raise ScorerError(f"scorer {name!r} returned {type(result).__name__}, not a ScoreResult")


def _run_sync(awaitable: Awaitable[Any]) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await(awaitable))
    raise ScorerError(
        "an async scorer cannot be run synchronously inside an event loop; use ascore"
    )


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


_REGISTRY: dict[str, Scorer] = {}


def define_scorer(
    name: str, fn: Callable[..., Any], *, version: str = "1", description: str = ""
) -> Scorer:
    """Register ``fn`` as scorer ``name`` and return it. Registering a name again replaces it."""
    if not name or not name.replace("_", "").replace("-", "").replace(".", "").isalnum():
        raise ScorerError(f"bad scorer name {name!r}: use letters, digits, '_', '-' or '.'")
    params = inspect.signature(fn).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    if not takes_any and not {"trace", "evidence"} & set(params):
        raise ScorerError(f"scorer {name!r} must accept the keyword argument 'trace' or 'evidence'")
    doc = description or (inspect.getdoc(fn) or "").split("\n", 1)[0]
    s = Scorer(name=name, version=str(version), fn=_adapt(fn, params, takes_any), description=doc)
    _REGISTRY[name] = s
    return s


def _adapt(
    fn: Callable[..., Any], params: Mapping[str, Any], takes_any: bool
) -> Callable[..., Any]:
    """Let a scorer declare only the arguments it uses (``trace``, ``evidence`` or both)."""
    if takes_any or {"trace", "evidence"} <= set(params):
        return fn
    drop = "evidence" if "evidence" not in params else "trace"
    if inspect.iscoroutinefunction(fn):

        async def awrapper(**kwargs: Any) -> Any:
            kwargs.pop(drop, None)
            return await fn(**kwargs)

        awrapper.__signature__ = inspect.signature(fn)  # type: ignore[attr-defined]
        return awrapper

    def wrapper(**kwargs: Any) -> Any:
        kwargs.pop(drop, None)
        return fn(**kwargs)

    wrapper.__signature__ = inspect.signature(fn)  # type: ignore[attr-defined]
    return wrapper


def scorer(
    name: str | None = None, *, version: str = "1", description: str = ""
) -> Callable[[Callable[..., Any]], Scorer]:
    """Decorator form of :func:`define_scorer`; the name defaults to the function's name."""

    def decorate(fn: Callable[..., Any]) -> Scorer:
        return define_scorer(name or fn.__name__, fn, version=version, description=description)

    return decorate


def _load_builtins() -> None:
    # Importing the detectors and judges registers the built-in scorers.
    import agentlens.eval.detectors  # noqa: F401


def get_scorer(name: str) -> Scorer:
    """The registered scorer called ``name``.

    Raises:
        ScorerError: no scorer has that name (the message lists the known ones).
    """
    if name not in _REGISTRY:
        _load_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise ScorerError(f"unknown scorer {name!r}; known scorers: {known}") from None


def registered_scorers() -> dict[str, Scorer]:
    """Every registered scorer by name, built-ins included."""
    _load_builtins()
    return dict(sorted(_REGISTRY.items()))


def resolve_scorer(name_or_scorer: str | Scorer, agent: str | None, settings: Settings) -> Scorer:
    """The scorer with the options configured for ``agent`` bound."""
    base = get_scorer(name_or_scorer) if isinstance(name_or_scorer, str) else name_or_scorer
    options = settings.for_agent(agent).scorer_options(base.name)
    return base.with_options(**options) if options else base


@dataclass
class Report:
    """The results of several scorers on one run."""

    run_id: str
    results: dict[str, Score]
    """Score per scorer name."""

    @property
    def passed(self) -> bool:
        """True when every scorer passed (an error or unverifiable result is not a pass)."""
        return all(s.verdict is Verdict.PASSED for s in self.results.values())

    @property
    def verdict(self) -> Verdict:
        """``flagged`` if any scorer flagged; else ``error``, then ``unverifiable``; else ``passed``."""
        return worst_verdict(s.verdict for s in self.results.values()) or Verdict.PASSED

    def __iter__(self) -> Any:
        return iter(self.results.values())


def _settings(settings: Settings | None) -> Settings:
    if settings is not None:
        return settings
    from agentlens.config import load_settings

    return load_settings()


async def arun_scorers(
    scorers: Iterable[str | Scorer],
    *,
    run_id: str | None = None,
    trace: Trace | None = None,
    store: Any = None,
    settings: Settings | None = None,
    save: bool | None = None,
) -> Report:
    """Run scorers on one run (by ``run_id`` from the store, or a ``trace`` given directly).

    Results are stored per (run, scorer, scorer version) when the run came from a store, or when
    ``save=True`` and a store is given. Scorers run concurrently; none can abort the others.
    """
    trace, store, evidence, resolved = _prepare(scorers, run_id, trace, store, settings)
    results = await asyncio.gather(*(s.ascore(trace, evidence) for s in resolved))
    return _finish(
        trace.id, resolved, results, store, save if save is not None else run_id is not None
    )


def run_scorers(
    scorers: Iterable[str | Scorer],
    *,
    run_id: str | None = None,
    trace: Trace | None = None,
    store: Any = None,
    settings: Settings | None = None,
    save: bool | None = None,
) -> Report:
    """Synchronous :func:`arun_scorers`: sync scorers run in this thread, without an event loop."""
    trace, store, evidence, resolved = _prepare(scorers, run_id, trace, store, settings)
    results = [s.score(trace, evidence) for s in resolved]
    return _finish(
        trace.id, resolved, results, store, save if save is not None else run_id is not None
    )


def _prepare(
    scorers: Iterable[str | Scorer],
    run_id: str | None,
    trace: Trace | None,
    store: Any,
    settings: Settings | None,
) -> tuple[Trace, Any, Evidence, list[Scorer]]:
    """The run, its store, its evidence for its agent role, and the scorers with that role's
    options bound."""
    trace, store = _resolve_target(run_id, trace, store)
    cfg = _settings(settings)
    evidence = Evidence(trace, cfg.for_agent(trace.agent).evidence)
    return trace, store, evidence, [resolve_scorer(s, trace.agent, cfg) for s in scorers]


def _finish(
    run_id: str, scorers: list[Scorer], results: list[ScoreResult], store: Any, save: bool
) -> Report:
    """The report; its scores stored when asked (and a store is there)."""
    report = _report(run_id, scorers, results)
    if store is not None and save:
        store.put_scores(report.results.values())
    return report


def _resolve_target(run_id: str | None, trace: Trace | None, store: Any) -> tuple[Trace, Any]:
    if (run_id is None) == (trace is None):
        raise ScorerError("give exactly one of run_id= or trace=")
    if trace is not None:
        return trace, store
    if store is None:
        from agentlens.store import open_store

        store = open_store()
    return store.get_trace(run_id), store


def _report(run_id: str, scorers: list[Scorer], results: list[ScoreResult]) -> Report:
    return Report(
        run_id=run_id,
        results={
            s.name: Score.of(r, run_id=run_id, scorer=s.name, version=s.stored_version)
            for s, r in zip(scorers, results, strict=True)
        },
    )
