"""The pieces the pages are built from: highlights, the step tree, findings, charts."""

from __future__ import annotations

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
