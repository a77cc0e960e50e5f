from __future__ import annotations

import asyncio
import logging

import pytest

from agentlens.config import AgentSettings, Settings
from agentlens.errors import ScorerError
from agentlens.eval import (
    Evidence,
    ScoreResult,
    Verdict,
    arun_scorers,
    define_scorer,
    get_scorer,
    run_scorers,
    scorer,
)
from agentlens.eval._scorer import WithRow
from agentlens.model import Step, StepKind, Trace


def _trace(agent: str | None = "support") -> Trace:
    return Trace(
        id="run-1",
        agent=agent,
        input="where is my order?",
        output="It ships tomorrow.",
        steps=[Step(id="s1", kind=StepKind.TOOL, name="get_order", output={"eta": "tomorrow"})],
    )


def test_decorated_scorers_are_registered_with_name_and_version() -> None:
    @scorer(name="t_has_output", version="3")
    def has_output(*, trace: Trace) -> ScoreResult:
        return ScoreResult(passed=trace.has_output, value=1.0)

    assert get_scorer("t_has_output") is has_output
    report = run_scorers(["t_has_output"], trace=_trace(), settings=Settings())
    score = report.results["t_has_output"]
    assert (score.run_id, score.scorer, score.version, score.verdict) == (
        "run-1",
        "t_has_output",
        "3",
        Verdict.PASSED,
    )
    assert report.passed


def test_a_scorer_that_raises_gives_an_error_result_and_the_batch_goes_on() -> None:
    def boom(*, trace: Trace, evidence: Evidence) -> ScoreResult:
        raise ValueError("bad day")

    def fine(*, evidence: Evidence) -> ScoreResult:
        return ScoreResult(passed=True)

    broken, ok = define_scorer("t_boom", boom), define_scorer("t_fine", fine)
    report = run_scorers([broken, ok], trace=_trace(), settings=Settings())
    assert report.results["t_boom"].verdict is Verdict.ERROR
    assert report.results["t_boom"].error == "ValueError: bad day"
    assert report.results["t_fine"].verdict is Verdict.PASSED
    assert not report.passed
    assert report.verdict is Verdict.ERROR


@pytest.mark.parametrize("entry", ["score", "ascore", "row"])
def test_a_failure_is_logged_with_its_traceback_at_debug_level(
    entry: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Each entry point (sync, async, and the stored row's that batch scoring uses) gives the
    error result and logs the failure with the exception that caused it."""

    def boom(*, trace: Trace, evidence: Evidence) -> ScoreResult:
        raise ValueError("bad day")

    def row(evidence: Evidence, run_id: str, name: str, version: str) -> ScoreResult:
        raise ValueError("bad day")

    fn = WithRow(boom, row) if entry == "row" else boom
    s = define_scorer(f"t_logged_{entry}", fn)
    trace = _trace()
    with caplog.at_level(logging.DEBUG, logger="agentlens"):
        if entry == "score":
            result = s.score(trace)
        elif entry == "ascore":
            result = asyncio.run(s.ascore(trace))
        else:
            given = s._score_or_row(trace, Evidence(trace), s.stored_version)
            assert isinstance(given, ScoreResult)
            result = given
    assert result.verdict is Verdict.ERROR and result.error == "ValueError: bad day"
    [record] = [r for r in caplog.records if "failed on run" in r.getMessage()]
    assert record.getMessage() == f"scorer t_logged_{entry} failed on run run-1"
    assert record.exc_info is not None and str(record.exc_info[1]) == "bad day"


def test_async_scorers_run_sync_and_async() -> None:
    @scorer(name="t_async")
    async def slow(*, trace: Trace) -> ScoreResult:
        await asyncio.sleep(0)
        return ScoreResult(passed=False, detail="nope")

    assert (
        run_scorers([slow], trace=_trace(), settings=Settings()).results["t_async"].detail == "nope"
    )
    report = asyncio.run(arun_scorers([slow], trace=_trace(), settings=Settings()))
    assert report.results["t_async"].verdict is Verdict.FLAGGED


def test_returning_the_wrong_type_is_an_error_result() -> None:
    bad = define_scorer("t_wrong", lambda *, trace: "yes")
    score = run_scorers([bad], trace=_trace(), settings=Settings()).results["t_wrong"]
    assert score.verdict is Verdict.ERROR and "not a ScoreResult" in (score.error or "")


def test_score_dispatches_every_kind_of_result_as_its_definition() -> None:
    """``Scorer.score`` returns a plain result as it is and gives everything else to the
    checks: a subclass kept, a boolean turned into a result, an awaitable awaited, a coroutine
    function told by ``is_async`` (cached) as ``inspect.iscoroutinefunction`` tells it."""
    import inspect

    class Sub(ScoreResult):
        pass

    plain, sub = ScoreResult(passed=True), Sub(passed=False)

    async def later(*, trace: Trace) -> ScoreResult:
        return plain

    cases = {
        "t_plain": (lambda *, trace: plain, lambda r: r is plain),
        "t_sub": (lambda *, trace: sub, lambda r: r is sub),
        "t_bool": (lambda *, trace: False, lambda r: r.verdict is Verdict.FLAGGED),
        "t_awaitable": (lambda *, trace: later(trace=trace), lambda r: r is plain),
        "t_coroutine": (later, lambda r: r is plain),
    }
    for name, (fn, check) in cases.items():
        made = define_scorer(name, fn)
        assert made.is_async is inspect.iscoroutinefunction(made.fn)
        assert check(made.score(_trace())), name


def test_options_bind_per_agent_and_change_the_stored_version() -> None:
    @scorer(name="t_budget", version="2")
    def budget(*, trace: Trace, max_steps: int = 15) -> ScoreResult:
        return ScoreResult(passed=len(trace.steps) <= max_steps, value=max_steps)

    settings = Settings(agents={"support": AgentSettings(scorers={"t_budget": {"max_steps": 0}})})
    score = run_scorers(["t_budget"], trace=_trace(), settings=settings).results["t_budget"]
    assert score.value == 0 and score.verdict is Verdict.FLAGGED
    assert score.version.startswith("2+") and len(score.version) == len("2+") + 8
    other = run_scorers(["t_budget"], trace=_trace(agent=None), settings=settings).results[
        "t_budget"
    ]
    assert other.value == 15 and other.version == "2"
    with pytest.raises(ScorerError, match="has no option 'max_stepz'; its options are max_steps"):
        budget.with_options(max_stepz=1)


def test_unknown_scorer_names_the_known_ones() -> None:
    with pytest.raises(ScorerError, match="unknown scorer 'nope'; known scorers: "):
        get_scorer("nope")


def test_bad_definitions_are_refused() -> None:
    with pytest.raises(ScorerError, match="bad scorer name"):
        define_scorer("has space", lambda *, trace: True)
    with pytest.raises(ScorerError, match="must accept the keyword argument"):
        define_scorer("t_noargs", lambda: True)
    with pytest.raises(ScorerError, match="exactly one of"):
        run_scorers([], settings=Settings())
