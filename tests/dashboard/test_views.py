"""The pieces the pages are built from: highlights, the step tree, findings, charts."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from agentlens.analytics import RateGroup
from agentlens.dashboard._trends import chart
from agentlens.dashboard._views import Segment, highlight, step_tree
from agentlens.model import Step, Trace


def test_a_claim_is_highlighted_where_it_stands() -> None:
    text = "Order ORD-1 ships; ORD-2 too."
    assert highlight(text, [(1, 6, 11, "ORD-1"), (2, 19, 24, "ORD-2")]) == [
        Segment("Order "), Segment("ORD-1", 1), Segment(" ships; "), Segment("ORD-2", 2),
        Segment(" too."),
    ]  # fmt: skip


def test_a_span_that_does_not_hold_the_claim_falls_back_to_its_text() -> None:
    assert highlight("a ORD-1 b", [(1, 0, 3, "ORD-1")]) == [
        Segment("a "), Segment("ORD-1", 1), Segment(" b"),
    ]  # fmt: skip
    assert highlight("a b", [(1, 5, 9, "zzz")]) == [Segment("a b")]
    assert highlight("", []) == [Segment("")]


def test_overlapping_claims_keep_the_first() -> None:
    segments = highlight("abcdef", [(2, 2, 5, "cde"), (1, 1, 4, "bcd")])
    assert segments == [Segment("a"), Segment("bcd", 1), Segment("ef")]


def test_the_step_tree_follows_parent_ids_and_survives_odd_ones() -> None:
    trace = Trace(
        steps=[
            Step(id="a", kind="agent"),
            Step(id="b", kind="tool", parent_id="a"),
            Step(id="c", kind="tool", parent_id="b"),
            Step(id="d", kind="tool", parent_id="missing"),
            Step(id="e", kind="tool", parent_id="e"),
            Step(id="f", kind="tool", parent_id="g"),  # a parent recorded later
            Step(id="g", kind="tool"),
        ]
    )
    roots = step_tree(trace, [])
    assert [r.step.id for r in roots] == ["a", "d", "e", "f", "g"]
    assert [c.step.id for c in roots[0].children] == ["b"]
    assert roots[0].children[0].children[0].depth == 2


def test_a_chart_draws_the_band_and_leaves_gaps_for_unscored_days() -> None:
    def day(key: str, flagged: int, scored: int) -> RateGroup:
        from agentlens.store import RateCounts

        return RateGroup.from_counts(
            RateCounts(key=key, runs=scored, flagged=flagged, passed=scored - flagged)
        )

    drawn = chart("x", None, [day("d1", 1, 10), day("d2", 0, 0), day("d3", 3, 10)])
    assert [p.y is None for p in drawn.points] == [False, True, False]
    assert len(drawn.line.split()) == 2 and len(drawn.band.split()) == 4
    assert drawn.scale == 0.8  # the smallest scale above the highest upper bound (0.61)
    assert [label for _, label in drawn.ticks] == ["0%", "20%", "40%", "60%", "80%"]


def test_the_trend_chart_has_a_place_for_every_day_of_the_window(store: Any) -> None:
    # the test runs are 8 to 20 days old and of today: the 7 days between them have no run;
    # the chart spaced the days it was given evenly, so today sat next to 8 days ago
    from agentlens.config import load_settings
    from agentlens.dashboard._pages import window_start
    from agentlens.dashboard._trends import build

    now = datetime.now(UTC)
    start = window_start("30d", now)
    assert start is not None
    report = build(store, load_settings(), start=start, compare=timedelta(days=7), mode=None,
                   agent=None)  # fmt: skip
    for drawn in report.charts:
        days = [p.key for p in drawn.points]
        first = start.date()
        assert days == [(first + timedelta(days=i)).isoformat() for i in range(31)]
        assert days[-1] == now.date().isoformat()
        by_day = {p.key: p for p in drawn.points}
        quiet = [(now.date() - timedelta(days=i)).isoformat() for i in range(1, 8)]
        assert all(by_day[d].y is None for d in quiet), drawn.title
        steps = {round(b.x - a.x, 1) for a, b in itertools.pairwise(drawn.points)}
        assert max(steps) - min(steps) <= 0.2  # one day is one step along the axis
    # the window before the first run's day: empty places too, not a shorter axis
    old = build(store, load_settings(), start=start - timedelta(days=60),
                compare=timedelta(days=7), mode="fabricated_grounding", agent=None)  # fmt: skip
    assert len(old.charts[0].points) == 91


def test_a_run_dated_centuries_away_does_not_fill_the_chart_with_empty_days(store: Any) -> None:
    # one run with a clock centuries off (imported as it was recorded) made every chart of
    # /trends?since=all a point for each of the ~100,000 days between
    from dashboard_data import fabricated

    from agentlens.config import load_settings
    from agentlens.dashboard._trends import build
    from agentlens.review import review_pending

    # within the limit every day has its place
    near = build(store, load_settings(), start=datetime.now(UTC) - timedelta(days=400),
                 compare=timedelta(days=7), mode=None, agent=None)  # fmt: skip
    assert len(near.charts[0].points) == 401

    far = fabricated("far-future")
    far.started_at, far.ended_at = datetime(2300, 1, 1, tzinfo=UTC), None
    store.put_traces([far])
    review_pending(store)
    report = build(store, load_settings(), start=None, compare=timedelta(days=7), mode=None,
                   agent=None)  # fmt: skip
    days = [p.key for p in report.charts[0].points]
    assert len(days) <= 3660  # ten years of days at most
    assert days[-1] == "2300-01-01" and days == sorted(days)
