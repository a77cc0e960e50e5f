"""What a rate query returns: :class:`RateReport`, and :class:`Breakdown` of :class:`RateGroup`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentlens.analytics._interval import wilson_interval
from agentlens.store import RateCounts

__all__ = ["Breakdown", "RateGroup", "RateReport", "RateStats"]


class RateStats(BaseModel):
    """The counts and the rate of one window or group.

    ``runs = scored + unverifiable + errors + unscored`` and ``scored = flagged + passed``: runs a
    check could not verify, and runs a scorer failed on, are counted apart and never as passes.
    ``rate = flagged / scored``, with a 95% Wilson interval.
    """

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    runs: int
    """Runs in the window, scored or not."""
    scored: int
    """Runs with a definite verdict (flagged or passed): the denominator of the rate."""
    flagged: int
    """Runs flagged by at least one selected scorer (in a selected mode)."""
    unverifiable: int
    """Runs not flagged, but which a check could not verify (truncated evidence, no judge)."""
    errors: int
    """Runs not flagged on which a scorer failed (an error beats unverifiable)."""
    passed: int
    """Runs every selected scorer passed (or flagged only in modes that were not selected)."""
    unscored: int
    """Runs in the window that no selected scorer has scored at its current version yet."""
    rate: float | None
    """``flagged / scored``; ``None`` when nothing was scored."""
    ci_low: float | None
    """Lower bound of the 95% Wilson interval of the rate."""
    ci_high: float | None
    """Upper bound of the 95% Wilson interval of the rate."""
    by_mode: dict[str, int] = Field(default_factory=dict)
    """Flagged runs per failure mode (a run flagged in two modes counts in both)."""
    flagged_run_ids: list[str] = Field(default_factory=list)
    """The flagged runs, in id order (run ids sort by time)."""

    @staticmethod
    def _fields(counts: RateCounts) -> dict[str, Any]:
        scored = counts.scored
        if scored:
            low, high = wilson_interval(counts.flagged, scored)
            rate: float | None = counts.flagged / scored
            ci_low: float | None = low
            ci_high: float | None = high
        else:
            rate = ci_low = ci_high = None
        return {
            "runs": counts.runs,
            "scored": scored,
            "flagged": counts.flagged,
            "unverifiable": counts.unverifiable,
            "errors": counts.errors,
            "passed": counts.passed,
            "unscored": counts.unscored,
            "rate": rate,
            "ci_low": ci_low,
            "ci_high": ci_high,
            "by_mode": dict(counts.by_mode),
            "flagged_run_ids": list(counts.flagged_run_ids),
        }

    def to_json(self) -> dict[str, Any]:
        """The public JSON shape (``agentlens rate --json``)."""
        return self.model_dump(mode="json")

    @classmethod
    def of(cls, counts: RateCounts) -> RateStats:
        """The stats of raw counts: adds the rate and its 95% Wilson interval."""
        return RateStats(**RateStats._fields(counts))


class RateReport(RateStats):
    """The hallucination rate over one window, with what was selected."""

    start: datetime | None = None
    """Start of the window (inclusive, UTC); ``None``: open."""
    end: datetime | None = None
    """End of the window (exclusive, UTC); ``None``: open."""
    agent: str | None = None
    """The agent role selected, if any."""
    modes: list[str] | None = None
    """The failure modes selected; ``None``: all."""
    scorers: dict[str, list[str]] = Field(default_factory=dict)
    """The scorers counted, each with the version(s) counted as current."""

    @classmethod
    def from_counts(cls, counts: RateCounts, **meta: Any) -> RateReport:
        """Build a report from counts; ``meta`` fills the selection fields."""
        return cls(**cls._fields(counts), **meta)


class RateGroup(RateStats):
    """One group of a breakdown: a day, a week, an agent role, a mode, a release..."""

    key: str | None
    """The group's key (``None`` for runs without one, e.g. no ``metadata.release``)."""

    @classmethod
    def from_counts(cls, counts: RateCounts) -> RateGroup:
        """Build a group from counts (``counts.key`` is the key)."""
        return cls(key=counts.key, **cls._fields(counts))

    def to_json(self) -> dict[str, Any]:
        """``{"key": ..., <the fields of a rate>}``."""
        data = self.model_dump(mode="json")
        return {"key": data.pop("key"), **data}


class Breakdown(BaseModel):
    """A rate broken down into groups (``agentlens rate --by ...``)."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    by: str
    """What the runs are grouped by: day, week, agent, mode, release or scorer_version."""
    groups: list[RateGroup]
    """The groups, in key order (time order for day and week)."""
    start: datetime | None = None
    """Start of the window (inclusive, UTC)."""
    end: datetime | None = None
    """End of the window (exclusive, UTC)."""
    agent: str | None = None
    """The agent role selected, if any."""
    modes: list[str] | None = None
    """The failure modes selected; ``None``: all."""
    scorers: dict[str, list[str]] = Field(default_factory=dict)
    """The scorers counted, each with the version(s) counted as current."""

    def to_json(self) -> dict[str, Any]:
        """``{"groups": [{"key": ..., ...}], "by": ..., ...}``."""
        data = self.model_dump(mode="json", exclude={"groups"})
        return {"groups": [g.to_json() for g in self.groups], **data}
