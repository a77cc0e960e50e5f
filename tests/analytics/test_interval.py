"""The Wilson interval: known values and invariants."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentlens.analytics import Z_95, wilson_interval


@pytest.mark.parametrize(
    ("flagged", "scored", "low", "high"),
    [
        # Reference values (Wilson 1927; the same as R's prop.test(correct=FALSE)).
        (0, 10, 0.0, 0.277533),
        (5, 10, 0.236593, 0.763407),
        (1, 1000, 0.000177, 0.005643),
        (10, 10, 0.722467, 1.0),
    ],
)
def test_known_values(flagged: int, scored: int, low: float, high: float) -> None:
    got_low, got_high = wilson_interval(flagged, scored)
    assert got_low == pytest.approx(low, abs=5e-6)
    assert got_high == pytest.approx(high, abs=5e-6)


@given(
    st.integers(1, 10_000).flatmap(
        lambda n: st.tuples(st.integers(1, n - 1) if n > 1 else st.just(0), st.just(n))
    )
)
def test_bounds_solve_the_score_test(counts: tuple[int, int]) -> None:
    # Wilson's bounds are the rates p0 at which the score test is exactly at z:
    # |k/n - p0| = z * sqrt(p0 (1 - p0) / n).
    flagged, scored = counts
    p_hat = flagged / scored
    for bound in wilson_interval(flagged, scored):
        if bound in (0.0, 1.0):
            continue
        lhs = abs(p_hat - bound)
        rhs = Z_95 * math.sqrt(bound * (1.0 - bound) / scored)
        assert lhs == pytest.approx(rhs, rel=1e-9, abs=1e-12)


def test_nothing_scored_is_the_whole_range() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize(("flagged", "scored"), [(-1, 10), (11, 10), (0, -1)])
def test_bad_counts_are_refused(flagged: int, scored: int) -> None:
    with pytest.raises(ValueError, match="flagged"):
        wilson_interval(flagged, scored)


@given(st.integers(1, 100_000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_interval_encloses_the_rate(counts: tuple[int, int]) -> None:
    flagged, scored = counts
    low, high = wilson_interval(flagged, scored)
    assert 0.0 <= low <= flagged / scored <= high <= 1.0


@given(st.integers(2, 5_000).flatmap(lambda n: st.tuples(st.integers(0, n - 1), st.just(n))))
def test_bounds_rise_with_flagged(counts: tuple[int, int]) -> None:
    flagged, scored = counts
    low1, high1 = wilson_interval(flagged, scored)
    low2, high2 = wilson_interval(flagged + 1, scored)
    assert low2 > low1 or (low1 == 0.0 and low2 >= low1)
    assert high2 >= high1


@given(st.integers(1, 200))
def test_interval_narrows_with_more_runs(k: int) -> None:
    # The same rate over ten times the runs gives a narrower interval.
    low1, high1 = wilson_interval(k, 4 * k)
    low2, high2 = wilson_interval(10 * k, 40 * k)
    assert high2 - low2 < high1 - low1
