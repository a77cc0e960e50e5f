"""The trends page's figures: the rate per day per failure mode with its 95 % interval (drawn as
SVG by the template from the coordinates computed here), per role and per release, and two
windows compared with the two-proportion test."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from agentlens.analytics import RateGroup, RateReport, Trend, hallucination_rate, rate_breakdown
from agentlens.analytics import trend as compare_windows

__all__ = ["COMPARE", "Chart", "Comparison", "TrendsReport", "build", "chart"]

COMPARE: dict[str, timedelta] = {
    "1d": timedelta(days=1),
    "7d": timedelta(days=7),
    "14d": timedelta(days=14),
    "30d": timedelta(days=30),
}
"""The lengths of the two windows compared: the last whole days (and today so far), and the
as many days before them."""

WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 640, 180, 44, 12, 10, 24


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
    scale = max(0.05, math.ceil(top * 20) / 20)
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
    ticks = [(y(scale * k / 4) or 0.0, f"{scale * k / 4 * 100:.0f}%") for k in range(5)]
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
    charts = [chart(mode or "every failure mode", mode, _days(common, modes))]
    if mode is None:
        per_mode = rate_breakdown("mode", **common).groups
        for group in per_mode:
            if group.flagged and group.key is not None:
                charts.append(chart(group.key, group.key, _days(common, [group.key])))
    by_agent = rate_breakdown("agent", **common, modes=modes).groups
    by_release = rate_breakdown("release", **common, modes=modes).groups
    # whole UTC days, so both are read from the day rollup: the current window is the last
    # ``compare`` days and today so far (as the runs page's windows), the baseline the
    # ``compare`` days before it
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
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


def _days(common: dict[str, Any], modes: list[str] | None) -> list[RateGroup]:
    return rate_breakdown("day", **common, modes=modes).groups
