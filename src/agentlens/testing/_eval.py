"""Evaluate an agent in pytest: run it over fixed inputs, capture, score, assert on the rate.

The ``agentlens_eval`` fixture (of the :mod:`agentlens.testing` plugin) gives an
:class:`AgentEval`. Its :meth:`~AgentEval.run` calls the agent once per input inside
``agentlens.run(...)`` (capture goes to memory for the test, as with ``captured_traces``),
scores every captured run, and returns an :class:`EvalResult` to assert on::

    def test_support_agent_does_not_invent_ids(agentlens_eval):
        result = agentlens_eval.run(
            support_agent,                         # a callable: input -> answer (sync or async)
            ["where is order 1?", "refund INV-7781", "what is my plan?"],
            agent="support",
            scorers=["no_fabricated_refs", "repeated_tool_calls"],
        )
        result.assert_rate_below(0.05)

A failed assertion lists the flagged runs with their findings. The rules are those of
``agentlens rate``: runs a check could not verify, and runs a scorer failed on, are counted apart
and never as passes.

When the agent is itself instrumented (it opens its own ``agentlens.run``), its runs nest under
the harness's run (``metadata.parent_run_id``) and those inner runs are what gets scored.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # pragma: no cover
    from agentlens.analytics import RateStats
    from agentlens.config import Settings
    from agentlens.eval import Scorer
    from agentlens.model import FailureMode, Score, Trace

__all__ = ["AgentEval", "EvalCase", "EvalResult", "agentlens_eval"]


@dataclass
class EvalCase:
    """One input of an evaluation: the runs it produced and their scores."""

    index: int
    """Position of the input in the list given to :meth:`AgentEval.run`."""
    input: Any
    """The input the agent was called with."""
    output: Any
    """What the agent callable returned."""
    traces: list[Trace]
    """The runs scored for this input (the harness's run, or the agent's own nested runs)."""
    scores: dict[str, list[Score]] = field(default_factory=dict)
    """Scores per run id."""
    outcome: str = "unscored"
    """``flagged``, ``passed``, ``unverifiable``, ``error`` or ``unscored`` (worst of its runs)."""


@dataclass
class EvalResult:
    """The scored runs of an evaluation, with the rate over them."""

    cases: list[EvalCase]
    stats: RateStats
    """Runs, scored, flagged, unverifiable, errors, rate and its 95% Wilson interval."""

    @property
    def rate(self) -> float | None:
        """Flagged / scored runs; ``None`` when no run had a definite verdict."""
        return self.stats.rate

    @property
    def flagged(self) -> list[EvalCase]:
        """The inputs with at least one flagged run."""
        return [c for c in self.cases if c.outcome == "flagged"]

    def explain(self, limit: int = 20) -> str:
        """A multi-line summary: the rate, what was counted apart, and the flagged runs."""
        s = self.stats
        head = (
            f"hallucination rate {s.flagged}/{s.scored} = {_pct(s.rate)} "
            f"(95% CI {_pct(s.ci_low)} – {_pct(s.ci_high)}); "
            f"{s.unverifiable} unverifiable and {s.errors} errored runs counted apart"
        )
        lines = [head]
        flagged = self.flagged
        if flagged:
            lines.append(f"flagged ({len(flagged)}):")
        for case in flagged[:limit]:
            lines.append(f"  [{case.index}] input={_short(case.input)}")
            for trace in case.traces:
                for score in case.scores.get(trace.id, []):
                    if str(score.verdict) != "flagged":
                        continue
                    if not score.findings:
                        lines.append(f"      run {trace.id} {score.scorer}: {score.detail}")
                    for f in score.findings:
                        detail = f" — {f.detail}" if f.detail else ""
                        lines.append(
                            f"      run {trace.id} {score.scorer}: {f.failure_mode}: "
                            f"{f.text!r}{detail}"
                        )
        if len(flagged) > limit:
            lines.append(f"  … and {len(flagged) - limit} more")
        for case in self.cases:
            if case.outcome in ("error", "unverifiable"):
                names = [
                    f"{s.scorer}: {s.detail or s.verdict}"
                    for scores in case.scores.values()
                    for s in scores
                    if str(s.verdict) == case.outcome
                ]
                lines.append(f"  [{case.index}] {case.outcome}: {'; '.join(names)}")
        return "\n".join(lines)

    def assert_rate_below(self, max_rate: float, *, upper_bound: bool = False) -> None:
        """Fail the test unless the rate is below ``max_rate``.

        Args:
            max_rate: the limit (a fraction: 0.05 for 5%).
            upper_bound: compare the upper end of the 95% interval instead of the estimate: a
                stricter test that a small sample cannot pass by luck.

        An evaluation in which no run had a definite verdict fails: nothing was shown.

        Raises:
            ValueError: ``max_rate`` is not a fraction between 0 and 1 (``5`` meant as 5%
                would pass every evaluation).
        """
        __tracebackhide__ = True
        if not 0.0 <= max_rate <= 1.0:  # NaN too
            raise ValueError(
                f"max_rate must be a fraction between 0 and 1 (0.05 for 5%), got {max_rate!r}"
            )
        s = self.stats
        if s.rate is None or s.ci_high is None:
            pytest.fail(f"no run had a definite verdict, so there is no rate\n{self.explain()}")
        value = s.ci_high if upper_bound else s.rate
        if not value < max_rate:
            what = "the upper bound of the 95% interval" if upper_bound else "the rate"
            pytest.fail(
                f"{what} ({_pct(value)}) is not below {_pct(max_rate)}\n{self.explain()}",
                pytrace=False,
            )

    def assert_no_flags(self) -> None:
        """Fail the test when any run was flagged (a rate of exactly zero)."""
        __tracebackhide__ = True
        if self.flagged:
            pytest.fail(f"{len(self.flagged)} inputs were flagged\n{self.explain()}", pytrace=False)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:.1f}%"


def _short(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


class AgentEval:
    """Runs an agent over inputs with capture on, then scores the captured runs.

    Args:
        captured: the ``captured_traces`` fixture's object (capture into memory).
        settings: scorer options per agent role (default: :func:`load_settings`).
    """

    def __init__(self, captured: Any, settings: Settings | None = None) -> None:
        self._captured = captured
        self._settings = settings

    def run(
        self,
        agent_fn: Callable[[Any], Any],
        inputs: Iterable[Any],
        *,
        agent: str | None = None,
        scorers: Sequence[str | Scorer] | None = None,
        modes: Iterable[str | FailureMode] | None = None,
        metadata: dict[str, Any] | None = None,
        save_to: Any = None,
    ) -> EvalResult:
        """Call ``agent_fn(input)`` for each input, capture, score, and count.

        Args:
            agent_fn: the agent: a sync or async callable taking one input and returning the
                answer (recorded as the run's output unless the callable sets it itself). An
                async one runs in an event loop of its own, also when called from an async test
                (then in a helper thread, which this call waits for).
            inputs: the fixed inputs.
            agent: the agent role of the runs (selects per-role scorer options and evidence).
            scorers: scorer names or objects; default: the configured ``default_scorers``.
            modes: count only flags in these failure modes.
            metadata: added to every run's metadata (e.g. ``{"release": "v42"}``), the agent's
                own nested runs included (where a key of their own wins).
            save_to: a store (or URL) to also write the runs and their scores to, e.g. for
                ``agentlens gate`` or ``agentlens show`` afterwards. They are stored as runs of
                their own, with new ids and their times moved to now (the test's deterministic
                ids and clock would collide from test to test); the result's cases then name
                the stored ids.

        Raises:
            Whatever the agent raises: a crashing agent fails the test, it is not a score.
        """
        import agentlens
        from agentlens.review import score_finished

        cases: list[EvalCase] = []
        for index, item in enumerate(inputs):
            before = len(self._captured.traces)
            with agentlens.run(agent=agent, input=item, metadata=dict(metadata or {})) as run:
                output = _call(agent_fn, item)
                if run.output is None and output is not None:
                    run.output = output
            new = self._captured.traces[before:]
            outer = [t for t in new if t.id == run.id]
            inner = [
                _with_metadata(t, metadata)
                for t in new
                if t.metadata.get("parent_run_id") == run.id
            ]
            cases.append(EvalCase(index=index, input=item, output=output, traces=inner or outer))
        result = score_finished(
            [t for case in cases for t in case.traces],
            scorers=scorers or None,
            settings=self._settings,
            modes=modes,
        )
        scored = {r.trace.id: r.scores for r in result.runs}
        for case in cases:
            case.scores = {t.id: scored[t.id] for t in case.traces}
            case.outcome = str(result.outcome_of(t.id for t in case.traces))
        if save_to is not None:
            _save(save_to, cases)
        return EvalResult(cases=cases, stats=result.stats)


def _with_metadata(trace: Trace, metadata: dict[str, Any] | None) -> Trace:
    """The agent's own run with the evaluation's ``metadata`` added (the run's own keys win):
    it is the run scored and saved, so it is the one that must carry the release."""
    if not metadata:
        return trace
    return trace.model_copy(update={"metadata": {**metadata, **trace.metadata}})


def _call(agent_fn: Callable[[Any], Any], item: Any) -> Any:
    if inspect.iscoroutinefunction(agent_fn):
        return _run_coroutine(agent_fn(item))
    result = agent_fn(item)
    if inspect.isawaitable(result):
        return _run_coroutine(_await(result))
    return result


def _run_coroutine(coro: Any) -> Any:
    """Run ``coro`` to completion in a loop of its own; inside a running loop (an async test,
    where ``asyncio.run`` refuses), in a helper thread with this thread's context (the open
    ``agentlens.run``), waited for here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    import concurrent.futures
    import contextvars

    context = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agentlens-eval") as pool:
        return pool.submit(context.run, asyncio.run, coro).result()


async def _await(awaitable: Any) -> Any:
    return await awaitable


def _save(target: Any, cases: list[EvalCase]) -> None:
    """Write the cases' runs and scores to ``target``, as runs of their own: each with a new
    id, and its times moved so that the evaluation's first run starts now (the test's capture
    numbers its runs ``run-0001``... from one fixed clock, and ids of another test or session
    would replace each other in a lasting store, outside every time window of ``agentlens
    gate``). The cases then hold the stored runs and scores, so that the ids a failed assertion
    lists are those of the store."""
    from agentlens.store import open_store

    saved = _as_saved([t for c in cases for t in c.traces])
    store = open_store(target) if isinstance(target, str) else target
    try:
        store.put_traces(list(saved.values()))
        for case in cases:
            case.traces = [saved[t.id] for t in case.traces]
            case.scores = {
                saved[run_id].id: [s.model_copy(update={"run_id": saved[run_id].id}) for s in ss]
                for run_id, ss in case.scores.items()
            }
        store.put_scores([s for c in cases for ss in c.scores.values() for s in ss])
    finally:
        if isinstance(target, str):
            store.close()


def _as_saved(traces: list[Trace]) -> dict[str, Trace]:
    """Each of ``traces`` by its id, copied with a new id and its times (the run's and its
    steps') moved by one shift, the same for all, that makes the earliest start now; a
    ``parent_run_id`` of the copies names the parent's new id."""
    from datetime import UTC, datetime, timedelta

    from agentlens._ids import new_id

    starts = [t.started_at for t in traces if t.started_at is not None]
    shift = datetime.now(UTC) - min(starts) if starts else timedelta(0)
    ids: dict[str, str] = {}

    def renamed(old: str, when: datetime | None) -> str:
        if old not in ids:
            ids[old] = new_id(None if when is None else int(when.timestamp() * 1000))
        return ids[old]

    def moved(when: datetime | None) -> datetime | None:
        return None if when is None else when + shift

    out: dict[str, Trace] = {}
    for trace in traces:
        started = moved(trace.started_at)
        metadata = dict(trace.metadata)
        parent = metadata.get("parent_run_id")
        if isinstance(parent, str):
            metadata["parent_run_id"] = renamed(parent, started)
        steps = [
            s.model_copy(update={"started_at": moved(s.started_at), "ended_at": moved(s.ended_at)})
            for s in trace.steps
        ]
        out[trace.id] = trace.model_copy(
            update={
                "id": renamed(trace.id, started),
                "started_at": started,
                "ended_at": moved(trace.ended_at),
                "metadata": metadata,
                "steps": steps,
            }
        )
    return out


@pytest.fixture
def agentlens_eval(captured_traces: Any) -> AgentEval:
    """Run an agent over fixed inputs, capture and score the runs, assert on the rate.

    See :mod:`agentlens.testing`.
    """
    return AgentEval(captured_traces)
