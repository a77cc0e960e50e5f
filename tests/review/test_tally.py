"""``score_finished``: score runs that just finished, then count them under the rate's rules."""

from __future__ import annotations

import pytest
from review_factories import fabricated

from agentlens.analytics import Outcome, worst_outcome
from agentlens.config import Settings
from agentlens.model import Verdict, worst_verdict
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
