"""The review half of the TraceStore contract (queue, flags, content flags, verdicts, webhook
deliveries): every backend in ``conftest.BACKENDS`` must pass all of it."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from store_factories import make_score, make_trace

from agentlens.errors import RunNotFoundError, StoreError
from agentlens.model import Finding, Score, ScoreResult
from agentlens.store import RunFilter, TraceStore
from agentlens.store._flags import FlagState, derive_flags
from agentlens.store._protocol import Delivery

LATER = datetime(2030, 1, 1, tzinfo=UTC)


def scored(
    run_id: str,
    scorer: str = "no_fabricated_refs",
    *,
    at: datetime | None = None,
    findings: list[Finding] | None = None,
    passed: bool = False,
    version: str = "1",
    **kw: object,
) -> Score:
    if findings is None and not passed:
        findings = [
            Finding(
                failure_mode="fabricated_grounding",
                text="CUST-99999",
                detail="CUST-99999 is not in the evidence",
                step_ids=["s1"],
            )
        ]
    result = ScoreResult(passed=passed, findings=findings or [], **kw)  # type: ignore[arg-type]
    score = Score.of(result, run_id=run_id, scorer=scorer, version=version)
    if at is not None:
        score = score.model_copy(update={"scored_at": at})
    return score


def test_new_runs_are_pending_oldest_first_and_marked_reviewed(store: TraceStore) -> None:
    store.put_traces([make_trace(2)])
    store.put_traces([make_trace(1)])
    pending = store.pending_review()
    assert [p.run_id for p in pending] == ["r00002", "r00001"]  # by when they were written
    assert [p.run_id for p in store.pending_review(limit=1)] == ["r00002"]
    lag = store.review_lag()
    assert lag.pending == 2 and lag.oldest_stored_at is not None and lag.lag_s >= 0
    assert store.mark_reviewed(pending[:1]) == 1
    assert [p.run_id for p in store.pending_review()] == ["r00001"]
    summary = next(iter(store.list_runs(RunFilter(run_ids=["r00002"]))))
    assert summary.reviewed_at is not None and not summary.review_pending
    assert store.mark_reviewed(store.pending_review()) == 1
    assert store.pending_review() == []
    assert store.review_lag().pending == 0
    assert store.review_lag().lag_s == 0.0


def test_a_replaced_run_is_pending_again_an_identical_one_is_not(store: TraceStore) -> None:
    store.put_traces([make_trace(1), make_trace(2)])
    store.mark_reviewed(store.pending_review())
    store.put_traces([make_trace(1)])  # identical: nothing changes
    assert store.pending_review() == []
    store.put_traces([make_trace(2, output="a different answer")])
    assert [p.run_id for p in store.pending_review()] == ["r00002"]


def test_a_run_replaced_after_listing_stays_pending(store: TraceStore) -> None:
    store.put_traces([make_trace(1)])
    listed = store.pending_review()
    store.put_traces([make_trace(1, output="changed while being reviewed")])
    assert store.mark_reviewed(listed) == 0
    assert [p.run_id for p in store.pending_review()] == ["r00001"]


def test_put_scores_derives_the_flags(store: TraceStore) -> None:
    store.put_traces([make_trace(1), make_trace(2)])
    assert store.get_flags("r00001") is None
    loops = Finding(failure_mode="repeated_tool_call", text="search x3", detail="search 3 times")
    store.put_scores(
        [
            scored("r00001", "repeated_tool_calls", findings=[loops]),
            scored("r00001"),
            scored("r00002", passed=True),
        ]
    )
    flags = store.get_flags("r00001")
    assert flags is not None and flags.hallucination_detected
    assert flags.state is FlagState.FLAGGED
    # the fabricated reference is the most important finding, whatever the scorer order
    assert flags.reason == "fabricated_grounding: CUST-99999 is not in the evidence"
    assert flags.failure_modes == ("fabricated_grounding", "repeated_tool_call")
    assert [(f.n, f.scorer) for f in flags.findings] == [
        (1, "no_fabricated_refs"),
        (2, "repeated_tool_calls"),
    ]
    clean = store.get_flags("r00002")
    assert clean is not None and clean.state is FlagState.CLEAN
    assert not clean.hallucination_detected and clean.reason is None
    with pytest.raises(RunNotFoundError):
        store.get_flags("missing")


def test_listing_flagged_runs_and_by_mode(store: TraceStore) -> None:
    store.put_traces([make_trace(i) for i in range(6)])
    loops = Finding(failure_mode="repeated_tool_call", text="x")
    store.put_scores(
        [scored("r00001"), scored("r00003", "repeated_tool_calls", findings=[loops])]
        + [scored(f"r0000{i}", passed=True) for i in (0, 2, 4)]
    )
    assert [r.id for r in store.list_runs(RunFilter(flagged=True))] == ["r00003", "r00001"]
    assert [r.id for r in store.list_runs(RunFilter(flagged=True), newest_first=False)] == [
        "r00001",
        "r00003",
    ]
    assert store.count_runs(RunFilter(flagged=True)) == 2
    assert [r.id for r in store.list_runs(RunFilter(failure_mode="repeated_tool_call"))] == [
        "r00003"
    ]
    assert [r.id for r in store.list_runs(RunFilter(flagged=False))] == [
        "r00005",
        "r00004",
        "r00002",
        "r00000",
    ]
    window = RunFilter(flagged=True, start=make_trace(2).started_at, agent="support")
    assert [r.id for r in store.list_runs(window)] == ["r00003"]
    assert [t.id for t in store.query_traces(RunFilter(flagged=True), limit=1)] == ["r00003"]
    summary = next(iter(store.list_runs(RunFilter(run_ids=["r00001"]))))
    assert summary.hallucination_detected
    assert summary.hallucination_reason == "fabricated_grounding: CUST-99999 is not in the evidence"
    assert summary.failure_modes == ("fabricated_grounding",)
    assert summary.flag_state == "flagged"
    unscored = next(iter(store.list_runs(RunFilter(run_ids=["r00005"]))))
    assert unscored.flag_state is None and not unscored.hallucination_detected


def test_flagged_listing_pages_through_many_runs(store: TraceStore) -> None:
    store.put_traces([make_trace(i) for i in range(100)])
    store.put_scores([scored(f"r{i:05d}") for i in range(0, 100, 3)])
    got = [r.id for r in store.list_runs(RunFilter(flagged=True))]
    assert got == [f"r{i:05d}" for i in reversed(range(0, 100, 3))]


def test_rescoring_updates_the_flags_unverifiable_neither_flags_nor_clears(
    store: TraceStore,
) -> None:
    store.put_traces([make_trace(1)])
    t = datetime(2026, 5, 1, tzinfo=UTC)
    store.put_scores([scored("r00001", at=t)])
    assert store.content_flags("ticket", "T-1").hallucination_suspected
    unverifiable = Finding(failure_mode="fabricated_grounding", text="X", unverifiable=True)
    store.put_scores(
        [scored("r00001", version="2", at=t + timedelta(hours=1), findings=[unverifiable])]
    )
    flags = store.get_flags("r00001")
    assert flags is not None and flags.state is FlagState.UNVERIFIABLE
    assert not flags.hallucination_detected
    assert store.count_runs(RunFilter(flagged=True)) == 0
    assert store.content_flags("ticket", "T-1").hallucination_suspected  # not cleared
    store.put_scores([scored("r00001", version="3", at=t + timedelta(hours=2), passed=True)])
    flags = store.get_flags("r00001")
    assert flags is not None and flags.state is FlagState.CLEAN
    assert not store.content_flags("ticket", "T-1").hallucination_suspected


def test_an_older_score_does_not_override_a_newer_one(store: TraceStore) -> None:
    store.put_traces([make_trace(1)])
    t = datetime(2026, 5, 1, tzinfo=UTC)
    store.put_scores([scored("r00001", version="2", at=t, passed=True)])
    store.put_scores([scored("r00001", version="1", at=t - timedelta(days=1))])
    flags = store.get_flags("r00001")
    assert flags is not None and flags.state is FlagState.CLEAN


def test_the_flags_of_a_batch_are_derive_flags_of_each_runs_scores(store: TraceStore) -> None:
    """Batches of scores of many runs, every verdict mixed in one run and across runs, later
    batches replacing some (a newer version, an older one that must not win, the same key
    again): each run's stored flags are :func:`derive_flags` of its stored scores, and a run
    is counted as flagged exactly when they say so."""
    rng = random.Random(19)
    n = 40
    store.put_traces([make_trace(i) for i in range(1, n + 1)])
    t = datetime(2026, 5, 1, tzinfo=UTC)
    unverifiable = Finding(failure_mode="fabricated_grounding", text="X", unverifiable=True)
    loop = Finding(failure_mode="repeated_tool_call", text="search(q)", step_ids=["s1", "s2"])

    def one(run: int, scorer: str, version: str, hours: int) -> Score:
        at = t + timedelta(hours=hours)
        kind = rng.choice(["passed", "passed", "flagged", "loop", "unverifiable", "error"])
        if kind == "passed":
            return scored(f"r{run:05d}", scorer, version=version, at=at, passed=True)
        if kind == "error":
            return scored(f"r{run:05d}", scorer, version=version, at=at, error="boom")
        findings = {"flagged": None, "loop": [loop], "unverifiable": [unverifiable]}[kind]
        return scored(f"r{run:05d}", scorer, version=version, at=at, findings=findings)

    scorers = ["no_fabricated_refs", "parametric_leakage", "repeated_tool_calls"]
    for batch in range(4):
        scores = [
            one(run, scorer, rng.choice(["1", "2"]), rng.randint(-2, 3) + batch)
            for run in rng.sample(range(1, n + 1), 30)
            for scorer in rng.sample(scorers, rng.randint(1, 3))
        ]
        store.put_scores(scores)
        flagged = 0
        for run in range(1, n + 1):
            run_id = f"r{run:05d}"
            expected = derive_flags(store.get_scores(run_id))
            assert store.get_flags(run_id) == expected, (batch, run_id)
            flagged += expected is not None and expected.hallucination_detected
        assert store.count_runs(RunFilter(flagged=True)) == flagged


def test_refresh_flags_rederives(store: TraceStore) -> None:
    store.put_traces([make_trace(1)])
    store.put_scores([scored("r00001")])
    assert store.refresh_flags(["r00001", "missing"]) == 1
    flags = store.get_flags("r00001")
    assert flags is not None and flags.hallucination_detected


def test_content_flag_holds_while_any_linked_run_is_flagged(store: TraceStore) -> None:
    a = make_trace(1, links={"blog_post": "123"})
    b = make_trace(2, links={"blog_post": "123", "ticket": "T-9"})
    store.put_traces([a, b])
    assert store.content_flags("blog_post", "123").runs == ()
    assert not store.content_flags("blog_post", "123").hallucination_suspected
    t = datetime(2026, 5, 1, tzinfo=UTC)
    store.put_scores([scored("r00001", at=t), scored("r00002", at=t)])
    flag = store.content_flags("blog_post", "123")
    assert flag.hallucination_suspected and flag.flags == ["hallucination_suspected"]
    assert [r.run_id for r in flag.runs] == ["r00001", "r00002"]
    assert flag.runs[0].reason == "fabricated_grounding: CUST-99999 is not in the evidence"
    listed = store.flagged_content()
    assert {(c.kind, c.item_id) for c in listed} == {("blog_post", "123"), ("ticket", "T-9")}
    assert len(store.flagged_content(limit=1)) == 1
    store.put_scores([scored("r00001", version="2", at=t + timedelta(hours=1), passed=True)])
    flag = store.content_flags("blog_post", "123")
    assert flag.hallucination_suspected and [r.run_id for r in flag.runs] == ["r00002"]
    store.put_scores([scored("r00002", version="2", at=t + timedelta(hours=1), passed=True)])
    assert not store.content_flags("blog_post", "123").hallucination_suspected
    assert store.flagged_content() == []


def test_replacing_a_run_keeps_content_flags_only_on_links_it_still_has(store: TraceStore) -> None:
    store.put_traces([make_trace(1, links={"blog_post": "1", "ticket": "T"})])
    store.put_scores([scored("r00001")])
    store.put_traces([make_trace(1, links={"blog_post": "1"}, output="changed")])
    assert store.content_flags("blog_post", "1").hallucination_suspected
    assert not store.content_flags("ticket", "T").hallucination_suspected
    assert store.get_flags("r00001") is None  # its scores went with the old version


def test_deleting_a_run_drops_its_review_state(store: TraceStore) -> None:
    store.put_traces([make_trace(1, links={"blog_post": "1"})])
    store.put_scores([scored("r00001")])
    store.put_verdict("r00001", "confirmed")
    store.delete_runs(["r00001"])
    assert store.pending_review() == []
    assert not store.content_flags("blog_post", "1").hallucination_suspected
    assert store.get_verdicts("r00001") == []
    assert store.verdict_counts() == []


def test_verdicts_survive_rescoring_while_the_finding_is_there(store: TraceStore) -> None:
    store.put_traces([make_trace(1, links={"blog_post": "123"})])
    t = datetime(2026, 5, 1, tzinfo=UTC)
    store.put_scores([scored("r00001", at=t)])
    assert [r.id for r in store.review_queue()] == ["r00001"]
    records = store.put_verdict(
        "r00001", "false_positive", finding=1, note="it is in the CRM", author="ana", at=t
    )
    assert [(r.verdict, r.scope, r.note, r.author) for r in records] == [
        ("false_positive", "finding", "it is in the CRM", "ana")
    ]
    assert store.review_queue() == []
    flag = store.content_flags("blog_post", "123")
    assert not flag.hallucination_suspected and flag.runs[0].dismissed
    assert store.verdict_counts() == [
        store.verdict_counts()[0].__class__("no_fabricated_refs", "fabricated_grounding", 0, 1)
    ]
    run_project = store.get_trace("r00001").project
    assert store.verdict_counts(project=run_project) == store.verdict_counts()
    assert store.verdict_counts(project=run_project + "-other") == []
    # a new scorer version reports the same finding: the verdict still holds
    store.put_scores([scored("r00001", version="2", at=t + timedelta(hours=1))])
    assert store.get_verdicts("r00001")[0].live
    assert not store.content_flags("blog_post", "123").hallucination_suspected
    # a re-score that no longer reports it: the verdict no longer counts
    other = Finding(failure_mode="fabricated_grounding", text="CUST-11111", step_ids=["s1"])
    store.put_scores([scored("r00001", version="3", at=t + timedelta(hours=2), findings=[other])])
    assert not store.get_verdicts("r00001")[0].live
    assert store.verdict_counts() == []
    assert store.content_flags("blog_post", "123").hallucination_suspected
    assert [r.id for r in store.review_queue()] == ["r00001"]


def test_a_run_verdict_covers_every_finding_and_counts_by_scorer_and_mode(
    store: TraceStore,
) -> None:
    store.put_traces([make_trace(1, agent="a"), make_trace(2, agent="b")])
    loops = Finding(failure_mode="repeated_tool_call", text="x")
    store.put_scores(
        [
            scored("r00001"),
            scored("r00001", "repeated_tool_calls", findings=[loops]),
            scored("r00002"),
        ]
    )
    assert [r.id for r in store.review_queue(agent="b")] == ["r00002"]
    assert [r.id for r in store.review_queue()] == ["r00001", "r00002"]
    assert [r.id for r in store.review_queue(limit=1)] == ["r00001"]
    assert len(store.put_verdict("r00001", "confirmed")) == 2
    store.put_verdict("r00002", "false_positive", at=datetime(2020, 1, 1, tzinfo=UTC))
    counts = {
        (c.scorer, c.failure_mode): (c.confirmed, c.false_positive) for c in store.verdict_counts()
    }
    assert counts == {
        ("no_fabricated_refs", "fabricated_grounding"): (1, 1),
        ("repeated_tool_calls", "repeated_tool_call"): (1, 0),
    }
    recent = store.verdict_counts(since=datetime(2021, 1, 1, tzinfo=UTC))
    assert sum(c.false_positive for c in recent) == 0
    # a later verdict on the same finding replaces the earlier one
    store.put_verdict("r00001", "false_positive", finding=2)
    counts = {
        (c.scorer, c.failure_mode): (c.confirmed, c.false_positive) for c in store.verdict_counts()
    }
    assert counts[("repeated_tool_calls", "repeated_tool_call")] == (0, 1)


def test_bad_verdicts_write_nothing(store: TraceStore) -> None:
    store.put_traces([make_trace(1), make_trace(2)])
    store.put_scores([scored("r00001"), scored("r00002", passed=True)])
    with pytest.raises(StoreError, match="maybe"):
        store.put_verdict("r00001", "maybe")
    with pytest.raises(StoreError, match="no finding 2"):
        store.put_verdict("r00001", "confirmed", finding=2)
    with pytest.raises(StoreError, match="not flagged"):
        store.put_verdict("r00002", "confirmed")
    with pytest.raises(RunNotFoundError):
        store.put_verdict("missing", "confirmed")
    assert store.get_verdicts("r00001") == []


def test_webhook_deliveries(store: TraceStore) -> None:
    t = datetime(2026, 5, 1, tzinfo=UTC)
    d = Delivery(id="d1", run_id="r1", url="http://x/hook", body='{"a":1}', created_at=t)
    assert store.add_deliveries([d, d]) == 1
    assert store.add_deliveries([d]) == 0
    assert [x.id for x in store.due_deliveries(now=t)] == ["d1"]
    assert store.due_deliveries(now=t - timedelta(seconds=1)) == []
    store.record_delivery(
        "d1", ok=False, error="HTTP 500", next_attempt_at=t + timedelta(seconds=2)
    )
    assert store.due_deliveries(now=t + timedelta(seconds=1)) == []
    (again,) = store.due_deliveries(now=t + timedelta(seconds=3))
    assert again.attempts == 1 and again.last_error == "HTTP 500" and again.body == '{"a":1}'
    store.record_delivery("d1", ok=True, at=t + timedelta(seconds=3))
    (done,) = store.list_deliveries()
    assert done.status == "delivered" and done.attempts == 2 and done.delivered_at is not None
    store.add_deliveries([Delivery(id="d2", run_id="r1", url="u", body="{}", created_at=t)])
    store.record_delivery("d2", ok=False, error="timed out")
    assert [x.id for x in store.list_deliveries(status="failed")] == ["d2"]
    assert store.due_deliveries(now=LATER) == []
    assert [x.id for x in store.list_deliveries(limit=1)] == ["d2"]


def test_make_score_fixture_still_flags(store: TraceStore) -> None:
    store.put_traces([make_trace(1)])
    store.put_scores([make_score("r00001")])
    assert store.count_runs(RunFilter(flagged=True)) == 1


def test_the_review_queue_of_one_project(store: TraceStore) -> None:
    store.put_traces([make_trace(1), make_trace(2, project="acme"), make_trace(3)])
    store.put_scores([scored("r00001"), scored("r00002"), scored("r00003")])
    assert [r.id for r in store.review_queue(project="default")] == ["r00001", "r00003"]
    assert [r.id for r in store.review_queue(project="acme")] == ["r00002"]
    assert [r.id for r in store.review_queue(project="default", limit=1)] == ["r00001"]
    assert store.review_queue(project="nobody") == []
