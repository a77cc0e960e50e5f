"""``score_finished``: score runs that just finished, then count them under the rate's rules."""

from __future__ import annotations

from typing import Any

import pytest
from review_factories import fabricated

from agentlens.analytics import Outcome, worst_outcome
from agentlens.config import Settings
from agentlens.model import Trace, Verdict, worst_verdict
from agentlens.review import score_finished
from agentlens.store import TraceStore

SETTINGS = Settings()


def test_scores_in_memory_and_tallies() -> None:
    runs = [fabricated("r1"), fabricated("r2", order="ORD-1234"), fabricated("r3")]
    result = score_finished(runs, scorers=["no_fabricated_refs"], settings=SETTINGS)
    assert [r.outcome for r in result.runs] == [Outcome.FLAGGED, Outcome.PASSED, Outcome.FLAGGED]
    assert [[s.scorer for s in r.scores] for r in result.runs] == [["no_fabricated_refs"]] * 3
    counts = result.counts
    assert (counts.runs, counts.flagged, counts.passed) == (3, 2, 1)
    assert counts.flagged_run_ids == ["r1", "r3"]
    assert counts.by_mode["fabricated_grounding"] == 2
    assert result.stats.rate == pytest.approx(2 / 3)
    assert result.outcome_of(["r1", "r2"]) is Outcome.FLAGGED
    assert result.outcome_of(["r2"]) is Outcome.PASSED
    assert result.outcome_of([]) is Outcome.UNSCORED


def test_modes_select_what_counts_as_flagged() -> None:
    result = score_finished(
        [fabricated("r1")],
        scorers=["no_fabricated_refs"],
        settings=SETTINGS,
        modes=["repeated_tool_call"],
    )
    assert result.runs[0].outcome is Outcome.PASSED  # flagged only in another mode
    assert result.counts.by_mode == {"repeated_tool_call": 0}


def test_with_a_store_the_scores_are_written(store: TraceStore) -> None:
    store.put_traces([fabricated("r1")])
    result = score_finished(
        [fabricated("r1")], scorers=["no_fabricated_refs"], settings=SETTINGS, store=store
    )
    stored = store.get_scores("r1")
    assert [(s.scorer, s.verdict) for s in stored] == [("no_fabricated_refs", Verdict.FLAGGED)]
    assert stored[0].version == result.runs[0].scores[0].version


def test_no_scorers_leaves_every_run_unscored() -> None:
    result = score_finished([fabricated("r1")], scorers=[], settings=SETTINGS)
    assert result.runs[0].outcome is Outcome.UNSCORED and result.counts.runs == 1


def test_one_order_of_verdicts_and_outcomes() -> None:
    assert worst_verdict(["passed", "unverifiable", "error"]) is Verdict.ERROR
    assert worst_verdict([Verdict.ERROR, Verdict.FLAGGED]) is Verdict.FLAGGED
    assert worst_verdict(["passed", "unverifiable"]) is Verdict.UNVERIFIABLE
    assert worst_verdict([None, "passed"]) is Verdict.PASSED
    assert worst_verdict([]) is None
    assert worst_outcome(["unscored", "passed"]) is Outcome.PASSED
    assert worst_outcome(["unverifiable", "error", "passed"]) is Outcome.ERROR
    assert worst_outcome([]) is Outcome.UNSCORED


def test_every_roll_up_of_verdicts_follows_the_one_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's verdict in a ``Report``, the run flags, the rate's outcome and the CLI's
    summary all rank verdicts through :func:`worst_verdict`: reorder
    :data:`VERDICT_PRECEDENCE` (error above flagged) and each of them follows."""
    from agentlens.analytics._outcome import ScoreFacts, classify_run
    from agentlens.cli._runs import verdict_summary
    from agentlens.eval import Report
    from agentlens.model import Finding, Score
    from agentlens.model import _score as score_module
    from agentlens.store._flags import CurrentScore, FlagState, derive_from_current

    monkeypatch.setattr(
        score_module,
        "VERDICT_PRECEDENCE",
        (Verdict.ERROR, Verdict.FLAGGED, Verdict.UNVERIFIABLE, Verdict.PASSED),
    )
    finding = Finding(failure_mode="fabricated_grounding", text="ORD-9")
    flagged = Score(
        run_id="r", scorer="a", version="1", passed=False, verdict="flagged", findings=[finding]
    )
    failed = Score(run_id="r", scorer="b", version="1", passed=False, verdict="error")
    scores = [flagged, failed]
    assert Report("r", {s.scorer: s for s in scores}).verdict is Verdict.ERROR
    current = [CurrentScore(s.scorer, s.version, Verdict(s.verdict), s.detail) for s in scores]
    flags = derive_from_current(current)
    assert flags is not None and flags.state is FlagState.ERROR
    outcome, _ = classify_run([ScoreFacts(str(s.verdict), frozenset()) for s in scores])
    assert outcome is Outcome.ERROR
    assert verdict_summary(scores)[0] is Verdict.ERROR


def test_missing_only_scores_what_the_store_has_no_result_of(store: TraceStore) -> None:
    store.put_traces([fabricated("r1"), fabricated("r2", agent="writer")])
    first = score_finished(
        [fabricated("r1")], scorers=["no_fabricated_refs"], settings=SETTINGS, store=store
    )
    assert [s.scorer for s in first.runs[0].scores] == ["no_fabricated_refs"]

    def per_role(agent: str | None) -> list[str]:
        return ["no_fabricated_refs", "excessive_steps"] if agent == "support" else ["no_progress"]

    again = score_finished(
        [fabricated("r1"), fabricated("r2", agent="writer")],
        scorers=per_role,
        settings=SETTINGS,
        store=store,
        missing_only=True,
    )
    assert [[s.scorer for s in r.scores] for r in again.runs] == [
        ["excessive_steps"],  # no_fabricated_refs is stored at its version already
        ["no_progress"],  # the writer role's own scorers
    ]
    stored = sorted((s.run_id, s.scorer) for r in ("r1", "r2") for s in store.get_scores(r))
    assert stored == [
        ("r1", "excessive_steps"),
        ("r1", "no_fabricated_refs"),
        ("r2", "no_progress"),
    ]
    nothing = score_finished(
        [fabricated("r1")], scorers=per_role, settings=SETTINGS, store=store, missing_only=True
    )
    assert nothing.runs[0].scores == [] and nothing.runs[0].outcome is Outcome.UNSCORED


def test_review_scores_through_score_finished(
    store: TraceStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The review pipeline has no scoring loop of its own: it is score_finished's."""
    from agentlens.review import _pipeline, review_pending

    calls: list[list[str]] = []

    def spy(traces: list[Trace], **kwargs: Any) -> Any:
        calls.append([t.id for t in traces])
        assert kwargs["missing_only"] is True and kwargs["store"] is store
        return score_finished(traces, **kwargs)

    monkeypatch.setattr(_pipeline, "score_finished", spy)
    store.put_traces([fabricated("r1"), fabricated("r2", order="ORD-1234")])
    assert review_pending(store, settings=SETTINGS) == 2
    assert calls == [["r1", "r2"]]
    flags = store.get_flags("r1")
    assert flags is not None and flags.hallucination_detected
