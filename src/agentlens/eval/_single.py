"""Scoring one run: :func:`run_scorers` / :func:`arun_scorers` and their :class:`Report`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agentlens.config import Settings
from agentlens.errors import ScorerError
from agentlens.eval._evidence import Evidence
from agentlens.eval._history import StepHistory
from agentlens.eval._registry import resolve_scorer
from agentlens.eval._scorer import Scorer
from agentlens.model import Score, ScoreResult, Trace, Verdict, worst_verdict

__all__ = ["Report", "arun_scorers", "run_scorers", "score_trace"]


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
    import asyncio  # (imported when used: with ssl and sockets, about 20 ms)

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
    report = _score(trace, evidence, resolved)
    if store is not None and (save if save is not None else run_id is not None):
        store.put_scores(report.results.values())
    return report


def score_trace(
    trace: Trace,
    scorers: Sequence[Scorer],
    settings: Settings,
    *,
    history: StepHistory | None = None,
) -> Report:
    """Score one run with scorers whose options are already bound for its agent role (what
    :func:`~agentlens.eval.resolve_scorer` returns), against the role's evidence, in this
    thread; nothing is stored. What scores many runs of one role binds the scorers once and
    calls this per run, with one ``history`` of its store for all of them (what a scorer learns
    from stored runs, :mod:`agentlens.eval._history`)."""
    evidence = Evidence(trace, settings.for_agent(trace.agent).evidence, history=history)
    return _score(trace, evidence, scorers)


def _score(trace: Trace, evidence: Evidence, scorers: Sequence[Scorer]) -> Report:
    return _report(trace.id, list(scorers), [s.score(trace, evidence) for s in scorers])


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
    history = StepHistory(store) if store is not None else None
    evidence = Evidence(trace, cfg.for_agent(trace.agent).evidence, history=history)
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
