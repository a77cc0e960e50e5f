"""Confidence intervals for a proportion: the Wilson score interval."""

from __future__ import annotations

import math

__all__ = ["Z_95", "normal_cdf", "wilson_interval"]

Z_95 = 1.959963984540054
"""The two-sided 95% quantile of the standard normal distribution."""


def wilson_interval(flagged: int, scored: int, *, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval for ``flagged`` successes out of ``scored`` trials.

    Unlike the normal ("Wald") interval it stays inside [0, 1], is not degenerate at 0 or n
    successes (0 of 10 gives [0, 0.278], not [0, 0]) and keeps close to its nominal coverage
    for small samples and rates near 0, which is where hallucination rates live.

    Args:
        flagged: how many runs were flagged (0 <= flagged <= scored).
        scored: how many runs had a definite verdict.
        z: the normal quantile; the default gives a 95% interval.

    Returns:
        ``(low, high)`` with ``0 <= low <= flagged/scored <= high <= 1``; ``(0.0, 1.0)`` when
        ``scored`` is 0 (nothing is known).

    Raises:
        ValueError: a negative count, or ``flagged > scored``.
    """
    if scored < 0 or flagged < 0 or flagged > scored:
        raise ValueError(f"need 0 <= flagged <= scored, got flagged={flagged}, scored={scored}")
    if scored == 0:
        return 0.0, 1.0
    n = float(scored)
    p = flagged / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2.0 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denom
    # Clamp the rounding error so the bounds always enclose the estimate exactly.
    low = 0.0 if flagged == 0 else min(p, max(0.0, centre - half))
    high = 1.0 if flagged == scored else max(p, min(1.0, centre + half))
    return low, high


def normal_cdf(x: float) -> float:
    """The standard normal cumulative distribution function."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))
