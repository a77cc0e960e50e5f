"""The ``agentlens_eval`` pytest fixture: run an agent over inputs, capture, score, assert."""

from __future__ import annotations

from typing import Any

import pytest

pytest_plugins = ["pytester"]

_SCORERS = """
from agentlens.eval import define_scorer
from agentlens.model import FailureMode, Finding, ScoreResult


def _refs(*, trace, evidence):
    text = str(trace.output or "")
    if "TRUNC" in text:
        return ScoreResult(passed=False, findings=[
            Finding(failure_mode=FailureMode.FABRICATED_GROUNDING, text="DOC-9", unverifiable=True)])
    known = str([s.output for s in trace.steps])
    bad = [w for w in text.split() if w.startswith("CUST-") and w not in known]
    return ScoreResult(
        passed=not bad,
        findings=[Finding(failure_mode=FailureMode.FABRICATED_GROUNDING, text=w,
                          detail=f"{w} is not in the evidence") for w in bad],
    )


define_scorer("eval_refs", _refs)
"""

_AGENT = """
import agentlens

@agentlens.tool
def lookup(name):
    return {"id": "CUST-1" if name == "ann" else "CUST-2"}

def agent(question):
    customer = lookup(question.split()[0])
    if "invent" in question:
        return "your id is CUST-999"
    if "truncated" in question:
        return "see TRUNC"
    return "your id is " + customer["id"]
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(evalscorers=_SCORERS, evalagent=_AGENT)
    pytester.syspathinsert()
    return pytester


def test_passing_evaluation(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import evalscorers
        from evalagent import agent

        def test_agent(agentlens_eval):
            result = agentlens_eval.run(agent, ["ann a", "bob b", "ann c"], agent="support",
                                        scorers=["eval_refs"])
            assert result.stats.scored == 3 and result.rate == 0.0
            assert [len(c.traces) for c in result.cases] == [1, 1, 1]
            trace = result.cases[0].traces[0]
            assert trace.output == "your id is CUST-1" and trace.agent == "support"
            assert [s.name for s in trace.steps] == ["lookup"]
            result.assert_rate_below(0.05)
            result.assert_no_flags()
        """
    )
    outcome = project.runpytest_subprocess()
    outcome.assert_outcomes(passed=1)


def test_failure_message_lists_flagged_runs_with_findings(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import evalscorers
        from evalagent import agent

        def test_agent(agentlens_eval):
            result = agentlens_eval.run(
                agent, ["ann a", "bob invent", "ann b", "ann truncated"], scorers=["eval_refs"]
            )
            assert (result.stats.flagged, result.stats.scored, result.stats.unverifiable) == (1, 3, 1)
            result.assert_rate_below(0.2)
        """
    )
    outcome = project.runpytest_subprocess()
    outcome.assert_outcomes(failed=1)
    text = outcome.stdout.str()
    assert "the rate (33.3%) is not below 20.0%" in text
    assert "1 unverifiable and 0 errored runs counted apart" in text
    assert "[1] input='bob invent'" in text
    assert "eval_refs: fabricated_grounding: 'CUST-999' — CUST-999 is not in the evidence" in text
    assert "[3] unverifiable" in text


def test_upper_bound_is_stricter_and_nothing_scored_fails(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import pytest
        import evalscorers
        from evalagent import agent

        def test_small_sample(agentlens_eval):
            result = agentlens_eval.run(agent, ["ann a", "ann b"], scorers=["eval_refs"])
            result.assert_rate_below(0.05)
            with pytest.raises(pytest.fail.Exception, match="upper bound of the 95% interval"):
                result.assert_rate_below(0.05, upper_bound=True)

        def test_nothing_verifiable(agentlens_eval):
            result = agentlens_eval.run(agent, ["ann truncated"], scorers=["eval_refs"])
            with pytest.raises(pytest.fail.Exception, match="no run had a definite verdict"):
                result.assert_rate_below(0.5)
        """
    )
    outcome = project.runpytest_subprocess()
    outcome.assert_outcomes(passed=2)


def test_instrumented_agent_runs_are_scored_and_can_be_saved(project: pytest.Pytester) -> None:
    db = project.path / "eval.db"
    project.makepyfile(
        f"""
        import agentlens
        import evalscorers
        from evalagent import agent

        def instrumented(question):
            with agentlens.run(agent="inner", input=question) as run:
                run.output = agent(question)

        def test_agent(agentlens_eval):
            result = agentlens_eval.run(instrumented, ["bob invent", "ann a"], scorers=["eval_refs"],
                                        save_to="sqlite:///{db}")
            (case, ok) = result.cases
            assert [t.agent for t in case.traces] == ["inner"]
            assert case.outcome == "flagged" and ok.outcome == "passed"
        """
    )
    outcome = project.runpytest_subprocess()
    outcome.assert_outcomes(passed=1)
    from agentlens.store import open_store

    with open_store(f"sqlite:///{db}") as store:  # type: ignore[attr-defined]
        runs = list(store.list_runs())
        assert [r.agent for r in runs] == ["inner", "inner"]
        assert sorted(str(s.verdict) for r in runs for s in store.get_scores(r.id)) == [
            "flagged",
            "passed",
        ]


def test_saved_runs_of_two_tests_are_all_kept_and_dated_now(project: pytest.Pytester) -> None:
    """Each test's capture numbers its runs run-0001... from one fixed clock: saved as they are,
    the second test's runs replaced the first's, and none was in `gate`'s default window."""
    db = project.path / "eval.db"
    ids = project.path / "ids.txt"
    project.makepyfile(
        f"""
        import agentlens
        import evalscorers
        from evalagent import agent

        def instrumented(question):
            with agentlens.run(agent="inner", input=question) as run:
                run.output = agent(question)

        def _save(result):
            with open({str(ids)!r}, "a") as out:
                for case in result.cases:
                    for t in case.traces:
                        out.write(t.id + " " + t.metadata.get("parent_run_id", "-") + "\\n")
                        assert list(case.scores) == [t.id]
                        assert all(s.run_id == t.id for s in case.scores[t.id])

        def test_a(agentlens_eval):
            result = agentlens_eval.run(agent, ["ann a", "bob invent"], agent="a",
                                        scorers=["eval_refs"], save_to="sqlite:///{db}")
            _save(result)

        def test_b(agentlens_eval):
            result = agentlens_eval.run(agent, ["ann b"], agent="b", scorers=["eval_refs"],
                                        save_to="sqlite:///{db}")
            _save(result)

        def test_c(agentlens_eval):
            result = agentlens_eval.run(instrumented, ["ann c"], scorers=["eval_refs"],
                                        save_to="sqlite:///{db}")
            _save(result)
        """
    )
    project.runpytest_subprocess().assert_outcomes(passed=3)
    from datetime import UTC, datetime, timedelta

    from agentlens.store import open_store

    listed = [line.split() for line in ids.read_text().splitlines()]
    with open_store(f"sqlite:///{db}") as store:  # type: ignore[attr-defined]
        runs = {r.id: r for r in store.list_runs()}
        assert sorted(runs) == sorted(run_id for run_id, _ in listed)  # all four kept
        assert sorted(r.agent or "" for r in runs.values()) == ["a", "a", "b", "inner"]
        assert sorted(parent != "-" for _, parent in listed) == [False, False, False, True]
        now = datetime.now(UTC)
        for run_id, parent in listed:
            trace = store.get_trace(run_id)
            assert trace.started_at is not None
            assert now - timedelta(minutes=5) < trace.started_at <= now
            assert all(s.started_at and s.started_at >= trace.started_at for s in trace.steps)
            assert trace.metadata.get("parent_run_id", "-") == parent and parent not in runs
            assert [s.run_id for s in store.get_scores(run_id)] == [run_id]
    from typer.testing import CliRunner

    from agentlens.cli import app

    gate = CliRunner().invoke(app, ["--db", f"sqlite:///{db}", "gate", "--max-rate", "0.9"])
    assert gate.exit_code == 0, gate.output  # the default window (7 days) holds them
    assert "4 runs" in gate.output or "4 scored" in gate.output, gate.output


def test_an_async_agent_from_an_async_test(project: pytest.Pytester) -> None:
    """Called from an async test (anyio, pytest-asyncio), where a loop is running, the fixture's
    asyncio.run raised 'cannot be called from a running event loop' and left the agent's
    coroutine never awaited; it runs in a loop of its own, with the run's context."""
    project.makepyfile(
        """
        import asyncio

        import pytest

        import evalscorers
        from evalagent import agent

        async def async_agent(question):
            await asyncio.sleep(0)
            return agent(question)

        @pytest.mark.anyio
        @pytest.mark.parametrize("anyio_backend", ["asyncio"])
        async def test_agent(agentlens_eval, anyio_backend):
            result = agentlens_eval.run(async_agent, ["ann a", "bob invent"], agent="support",
                                        scorers=["eval_refs"])
            assert [c.outcome for c in result.cases] == ["passed", "flagged"]
            assert [[s.name for s in c.traces[0].steps] for c in result.cases] == [
                ["lookup"], ["lookup"]]
        """
    )
    outcome = project.runpytest_subprocess("-p", "no:cacheprovider", "-W", "error")
    outcome.assert_outcomes(passed=1)


@pytest.mark.parametrize("limit", [5, 50.0, -0.01, float("nan")])
def test_a_limit_that_is_no_fraction_is_refused_not_passed(limit: float) -> None:
    """assert_rate_below(5), meant as 5 %, passed every evaluation, 100 % flagged included;
    agentlens gate refuses such a --max-rate, and so does the assertion now."""
    from agentlens.analytics import RateStats
    from agentlens.store import RateCounts
    from agentlens.testing import EvalResult

    stats = RateStats.of(RateCounts(runs=4, flagged=4, passed=0))
    result = EvalResult(cases=[], stats=stats)
    with pytest.raises(ValueError, match="a fraction between 0 and 1"):
        result.assert_rate_below(limit)
    with pytest.raises(ValueError, match="a fraction between 0 and 1"):
        result.assert_rate_below(limit, upper_bound=True)
    with pytest.raises(pytest.fail.Exception, match=r"the rate \(100.0%\) is not below 5.0%"):
        result.assert_rate_below(0.05)


def test_metadata_is_added_to_the_agents_own_runs_too(agentlens_eval: Any) -> None:
    """`metadata` ("added to every run's metadata") reached only the harness's run: an
    instrumented agent's own runs, the ones scored and saved, had no release, so
    `agentlens rate --by release` over saved evaluations put them under null."""
    import agentlens

    def instrumented(question: str) -> None:
        with agentlens.run(agent="inner", input=question, metadata={"tenant": "acme"}) as run:
            run.output = "ok"

    def plain(question: str) -> str:
        return "ok"

    own = agentlens_eval.run(
        instrumented, ["a"], scorers=["no_fabricated_refs"], metadata={"release": "v42"}
    )
    (trace,) = own.cases[0].traces
    assert trace.agent == "inner"
    assert trace.metadata["release"] == "v42" and trace.metadata["tenant"] == "acme"
    assert isinstance(trace.metadata["parent_run_id"], str)
    mine = agentlens_eval.run(
        plain, ["b"], scorers=["no_fabricated_refs"], metadata={"release": "v42"}
    )
    assert mine.cases[0].traces[0].metadata["release"] == "v42"
    kept = agentlens_eval.run(
        instrumented, ["c"], scorers=["no_fabricated_refs"], metadata={"tenant": "other"}
    )
    assert kept.cases[0].traces[0].metadata["tenant"] == "acme"  # the run's own value wins


def test_one_scorer_name_as_a_string_is_that_scorer(agentlens_eval: Any) -> None:
    """scorers="no_fabricated_refs" (a str is a sequence of str) was read letter by letter:
    `unknown scorer 'n'`."""

    def agent(question: str) -> str:
        return "your id is CUST-999"

    result = agentlens_eval.run(agent, ["a"], scorers="no_fabricated_refs")
    (case,) = result.cases
    assert [s.scorer for s in case.scores[case.traces[0].id]] == ["no_fabricated_refs"]
    assert case.outcome == "flagged"
