"""Rates, confidence intervals, trends and breakdowns: aggregates over stored scores.

Per-run scorers live in :mod:`agentlens.eval`; what is computed over many runs lives here::

    from agentlens.analytics import hallucination_rate, trend

    now = hallucination_rate(since_hours=7 * 24)
    before = hallucination_rate(start=now.start - timedelta(days=7), end=now.start)
    print(f"{now.rate:.1%} [{now.ci_low:.1%}, {now.ci_high:.1%}]", trend(now, before).significant)

See ``docs/rates.md`` for exactly what is counted how.
"""

from agentlens.analytics._gate import (
    FlaggedRun,
    GateCheck,
    GateResult,
    evaluate_gate,
    render_junit,
    render_markdown,
)
from agentlens.analytics._interval import Z_95, wilson_interval
from agentlens.analytics._outcome import (
    OUTCOME_PRECEDENCE,
    Outcome,
    ScoreFacts,
    classify_run,
    facts_of,
    tally,
    worst_outcome,
)
from agentlens.analytics._rate import (
    BREAKDOWNS,
    PythonRateSource,
    RateOptions,
    RateSelection,
    hallucination_rate,
    python_rate_counts,
    rate_breakdown,
    rate_source,
    resolve_selection,
)
from agentlens.analytics._report import Breakdown, RateGroup, RateReport, RateStats
from agentlens.analytics._trend import Trend, trend, two_proportion_test
from agentlens.analytics._window import Window, parse_time, resolve_window

__all__ = [
    "BREAKDOWNS",
    "OUTCOME_PRECEDENCE",
    "Z_95",
    "Breakdown",
    "FlaggedRun",
    "GateCheck",
    "GateResult",
    "Outcome",
    "PythonRateSource",
    "RateGroup",
    "RateOptions",
    "RateReport",
    "RateSelection",
    "RateStats",
    "ScoreFacts",
    "Trend",
    "Window",
    "classify_run",
    "evaluate_gate",
    "facts_of",
    "hallucination_rate",
    "parse_time",
    "python_rate_counts",
    "rate_breakdown",
    "rate_source",
    "render_junit",
    "render_markdown",
    "resolve_selection",
    "resolve_window",
    "tally",
    "trend",
    "two_proportion_test",
    "wilson_interval",
    "worst_outcome",
]
