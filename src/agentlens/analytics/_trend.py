"""Comparing two windows: is a change in the rate larger than noise?"""

from __future__ import annotations

import math
from typing import Protocol

from pydantic import BaseModel, ConfigDict

__all__ = ["Counts", "Trend", "trend", "two_proportion_test"]


class Counts(Protocol):
    """Anything with a flagged count and a scored count (a :class:`RateReport`, a group)."""

    @property
    def flagged(self) -> int: ...

    @property
    def scored(self) -> int: ...


class Trend(BaseModel):
    """The change of the rate from a baseline window to the current one."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    current_rate: float
    """Flagged / scored in the current window."""
    baseline_rate: float
    """Flagged / scored in the baseline window."""
    difference: float
    """``current_rate - baseline_rate`` (positive: worse)."""
    relative_change: float | None
    """``difference / baseline_rate``; ``None`` when the baseline rate is 0."""
    z: float
    """The two-proportion z statistic (pooled variance)."""
    p_value: float
    """Two-sided p-value of the hypothesis that both windows share one rate."""
    alpha: float
    """The significance level the verdict uses."""
    significant: bool
    """True when ``p_value < alpha``: the change is larger than noise."""

    @property
    def direction(self) -> str:
        """``up``, ``down`` or ``flat`` (the sign of the difference, whatever its significance)."""
        if self.difference > 0:
            return "up"
        if self.difference < 0:
            return "down"
        return "flat"


def two_proportion_test(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float]:
    """Two-sided pooled two-proportion z-test of ``k1/n1`` against ``k2/n2``.

    Returns:
        ``(z, p_value)``; ``(0.0, 1.0)`` when the pooled rate is 0 or 1 (no variance: the two
        samples cannot be told apart).

    Raises:
        ValueError: a sample is empty or a count is out of range.
    """
    for k, n in ((k1, n1), (k2, n2)):
        if n <= 0 or k < 0 or k > n:
            raise ValueError(f"need 0 <= flagged <= scored and scored > 0, got {k} of {n}")
    pooled = (k1 + k2) / (n1 + n2)
    var = pooled * (1.0 - pooled) * (1.0 / n1 + 1.0 / n2)
    if var <= 0.0:
        return 0.0, 1.0
    z = (k1 / n1 - k2 / n2) / math.sqrt(var)
    p = math.erfc(abs(z) / math.sqrt(2.0))
    return z, min(1.0, p)


def trend(current: Counts, baseline: Counts, *, alpha: float = 0.05) -> Trend:
    """Compare the current window with a baseline window.

    Args:
        current: the current window's counts (``flagged`` of ``scored``).
        baseline: the baseline window's counts.
        alpha: the significance level (default 0.05).

    Raises:
        ValueError: either window has no scored runs (there is nothing to compare).
    """
    if current.scored <= 0 or baseline.scored <= 0:
        which = "current" if current.scored <= 0 else "baseline"
        raise ValueError(f"the {which} window has no scored runs; there is no rate to compare")
    z, p = two_proportion_test(current.flagged, current.scored, baseline.flagged, baseline.scored)
    cur = current.flagged / current.scored
    base = baseline.flagged / baseline.scored
    diff = cur - base
    return Trend(
        current_rate=cur,
        baseline_rate=base,
        difference=diff,
        relative_change=(diff / base) if base > 0 else None,
        z=z,
        p_value=p,
        alpha=alpha,
        significant=p < alpha,
    )
