"""The trends page's figures: the rate per day per failure mode with its 95 % interval (drawn as
SVG by the template from the coordinates computed here), per role and per release, and two
windows compared with the two-proportion test.

Five rate queries in all. A failure mode's chart is drawn from the all-modes day counts: each
day's runs flagged in that mode out of its scored runs (``by_mode``), not a query per mode; with
``mode=`` the page counts that mode alone (``modes=[mode]``), exactly as ``rate --mode``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from agentlens.analytics import RateGroup, RateReport, Trend, hallucination_rate, rate_breakdown
from agentlens.analytics import trend as compare_windows
from agentlens.store import RateCounts

__all__ = ["COMPARE", "Chart", "Comparison", "TrendsReport", "build", "chart", "every_day"]

COMPARE: dict[str, timedelta] = {
    "1d": timedelta(days=1),
    "7d": timedelta(days=7),
    "14d": timedelta(days=14),
    "30d": timedelta(days=30),
}
"""The lengths of the two windows compared: the last whole days (and today so far), and the
as many days before them."""

MAX_DAYS = 3660
"""The most days a chart gives a place each (ten years)."""
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 640, 180, 44, 12, 10, 24
_SCALES = (0.01, 0.02, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0)
"""The rates at the top of a chart: the smallest that holds every interval."""


@dataclass(frozen=True)
class Point:
    key: str
    x: float
    y: float | None
    low: float | None
    high: float | None
    group: RateGroup


@dataclass
class Chart:
    """One rate-over-time chart: coordinates in a ``WIDTH`` x ``HEIGHT`` box."""

    title: str
    mode: str | None
    points: list[Point]
    scale: float
    """The rate at the top of the chart."""
    band: str = ""
    """The interval band's polygon points."""
    line: str = ""
    ticks: list[tuple[float, str]] = field(default_factory=list)
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    bottom: float = HEIGHT - BOTTOM


@dataclass
class Comparison:
    current: RateReport
    baseline: RateReport
    result: Trend | None
    problem: str | None


@dataclass
class TrendsReport:
    charts: list[Chart]
    by_agent: list[RateGroup]
    by_release: list[RateGroup]
    comparison: Comparison


def chart(title: str, mode: str | None, groups: Sequence[RateGroup]) -> Chart:
    """A chart of ``groups`` (by day, in time order); days without a scored run are gaps."""
    top = max((g.ci_high or 0.0 for g in groups), default=0.0)
    scale = next(s for s in _SCALES if s >= top)
    inner_w = WIDTH - LEFT - RIGHT
    inner_h = HEIGHT - TOP - BOTTOM
    step = inner_w / max(1, len(groups) - 1)

    def y(value: float | None) -> float | None:
        return None if value is None else round(TOP + inner_h * (1 - value / scale), 1)

    points = [
        Point(str(g.key), round(LEFT + i * step, 1), y(g.rate), y(g.ci_low), y(g.ci_high), g)
        for i, g in enumerate(groups)
    ]
    drawn = [p for p in points if p.y is not None]
    upper = [f"{p.x},{p.high}" for p in drawn]
    lower = [f"{p.x},{p.low}" for p in reversed(drawn)]
    ticks = [(y(scale * k / 4) or 0.0, f"{round(scale * k * 25, 2):g}%") for k in range(5)]
    return Chart(
        title=title, mode=mode, points=points, scale=scale, band=" ".join(upper + lower),
        line=" ".join(f"{p.x},{p.y}" for p in drawn), ticks=ticks,
    )  # fmt: skip


def build(
    store: Any,
    settings: Any,
    *,
    start: datetime | None,
    compare: timedelta,
    mode: str | None,
    agent: str | None,
) -> TrendsReport:
    """Everything the trends page shows, for one window (from ``start``), optionally one
    failure mode and one role."""
    common: dict[str, Any] = {
        "start": start, "agent": agent, "store": store, "settings": settings, "flagged_ids": False,
    }  # fmt: skip
    modes = [mode] if mode else None
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    days = every_day(rate_breakdown("day", **common, modes=modes).groups, start, today.date())
    charts = [chart(mode or "every failure mode", mode, days)]
    if mode is None:
        totals: dict[str, int] = {}
        for group in days:
            for name, n in group.by_mode.items():
                totals[name] = totals.get(name, 0) + n
        for name in sorted((m for m, n in totals.items() if n), key=lambda m: -totals[m]):
            charts.append(chart(name, name, [_share(g, name) for g in days]))
    by_agent = rate_breakdown("agent", **common, modes=modes).groups
    by_release = rate_breakdown("release", **common, modes=modes).groups
    # whole UTC days, so both are read from the day rollup: the current window is the last
    # ``compare`` days and today so far (as the runs page's windows), the baseline the
    # ``compare`` days before it
    cut = today - compare
    window: dict[str, Any] = {**common, "modes": modes}
    window.pop("start")
    current = hallucination_rate(**{**window, "flagged_ids": True}, start=cut)
    baseline = hallucination_rate(**window, start=cut - compare, end=cut)
    try:
        result: Trend | None = compare_windows(current, baseline)
        problem = None
    except ValueError as exc:
        result, problem = None, str(exc)
    return TrendsReport(
        charts=charts, by_agent=by_agent, by_release=by_release,
        comparison=Comparison(current, baseline, result, problem),
    )  # fmt: skip


def every_day(groups: Sequence[RateGroup], start: datetime | None, today: date) -> list[RateGroup]:
    """A day breakdown with a group for each day from the window's first day (without a start:
    the first day with a run) to today: the breakdown has only the days with runs, and a chart
    spaces its points evenly, so a day without a scored run is an empty group (a gap), not a
    day left out. Runs without a start time (no day) are not drawn; no day with a run: none.
    Over more than ``MAX_DAYS`` (a run whose clock was centuries off), only the days with runs,
    in order, as a chart of days placed by rank."""
    known = {g.key: g for g in groups if g.key is not None}
    if not known:
        return []
    seen = [date.fromisoformat(k) for k in known]
    first = min([*seen, _utc_date(start)] if start is not None else seen)
    last = max(*seen, today)
    if (last - first).days >= MAX_DAYS:
        return [known[k] for k in sorted(known)]
    out = []
    for i in range((last - first).days + 1):
        key = (first + timedelta(days=i)).isoformat()
        out.append(known.get(key) or RateGroup.from_counts(RateCounts(key=key)))
    return out


def _utc_date(moment: datetime) -> date:
    """The UTC day ``moment`` falls on (a time without an offset is UTC)."""
    if moment.tzinfo is None:
        return moment.date()
    return moment.astimezone(UTC).date()


def _share(day: RateGroup, mode: str) -> RateGroup:
    """The day's runs flagged in ``mode`` out of its scored runs (from the all-modes counts,
    without a query of its own)."""
    flagged = day.by_mode.get(mode, 0)
    counts = RateCounts(
        key=day.key, runs=day.runs, flagged=flagged, passed=day.scored - flagged,
        unverifiable=day.unverifiable, errors=day.errors, by_mode={mode: flagged},
    )  # fmt: skip
    return RateGroup.from_counts(counts)
