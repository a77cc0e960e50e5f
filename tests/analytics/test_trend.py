"""Trend: the two-proportion test says whether a change is larger than noise."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentlens.analytics import trend, two_proportion_test


@dataclass
class C:
    flagged: int
    scored: int


def test_a_large_change_on_many_runs_is_significant() -> None:
    t = trend(C(31, 1000), C(18, 1000))
    assert t.difference == pytest.approx(0.013)
    assert t.direction == "up"
    # z = 0.013 / sqrt(p(1-p)(2/1000)), p = 0.0245 -> z ~ 1.88, p ~ 0.060: not significant.
    assert t.z == pytest.approx(1.8813, abs=1e-3)
    assert t.p_value == pytest.approx(0.0599, abs=1e-3)
    assert t.significant is False
    big = trend(C(310, 10_000), C(180, 10_000))
    assert big.significant is True
    assert big.p_value < 1e-8
    assert big.relative_change == pytest.approx(130 / 180)


def test_the_same_rate_is_not_significant() -> None:
    t = trend(C(5, 100), C(50, 1000))
    assert t.difference == pytest.approx(0.0)
    assert t.p_value == pytest.approx(1.0)
    assert not t.significant
    assert t.direction == "flat"


def test_a_drop_is_significant_too() -> None:
    t = trend(C(10, 1000), C(60, 1000))
    assert t.direction == "down"
    assert t.z < 0
    assert t.significant


def test_no_variance_gives_p_one() -> None:
    assert two_proportion_test(0, 10, 0, 50) == (0.0, 1.0)
    assert two_proportion_test(10, 10, 50, 50) == (0.0, 1.0)
    assert trend(C(0, 10), C(0, 50)).relative_change is None


def test_an_empty_window_cannot_be_compared() -> None:
    with pytest.raises(ValueError, match="baseline window has no scored runs"):
        trend(C(1, 10), C(0, 0))
    with pytest.raises(ValueError, match="current window"):
        trend(C(0, 0), C(1, 10))


def test_alpha_sets_the_verdict() -> None:
    t = trend(C(31, 1000), C(18, 1000), alpha=0.1)
    assert t.significant is True


@given(st.integers(1, 500), st.integers(1, 500), st.data())
def test_p_value_is_symmetric_and_in_range(n1: int, n2: int, data: st.DataObject) -> None:
    k1 = data.draw(st.integers(0, n1))
    k2 = data.draw(st.integers(0, n2))
    z, p = two_proportion_test(k1, n1, k2, n2)
    z2, p2 = two_proportion_test(k2, n2, k1, n1)
    assert 0.0 <= p <= 1.0
    assert p == pytest.approx(p2)
    assert z == pytest.approx(-z2)


def test_one_window_gives_its_label_its_baseline_and_unpacks() -> None:
    from datetime import UTC, datetime, timedelta

    from agentlens.analytics import Window, parse_time
    from agentlens.errors import ConfigError

    start, end = datetime(2026, 3, 1, 10, tzinfo=UTC), datetime(2026, 3, 8, 10, tzinfo=UTC)
    window = Window(start, end)
    assert window.label() == "2026-03-01 10:00 → 2026-03-08 10:00 UTC"
    assert Window(None, None).label() == "the first run → now UTC"
    base = window.preceding(timedelta(days=14))
    assert (base.start, base.end) == (start - timedelta(days=14), start)
    lower, upper = window
    assert (lower, upper) == (start, end)
    with pytest.raises(ConfigError, match="needs a current window with a start"):
        Window(None, end).preceding(timedelta(days=1))
    with pytest.raises(ConfigError, match="before the year 1"):
        window.preceding(timedelta(days=800_000), "bad --baseline-since '800000d'")
    assert parse_time("2026-03-01T12:00:00+02:00") == datetime(2026, 3, 1, 10, tzinfo=UTC)
    with pytest.raises(ConfigError, match="bad --to 'noon': use an ISO 8601 date or time"):
        parse_time("noon", "--to")
