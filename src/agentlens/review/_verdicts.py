"""Human verdicts, the precision they measure, content flags and the review queue.

A verdict is ``confirmed`` (the finding is a real problem) or ``false_positive``, on one finding
of a flagged run (``finding=N``, numbered as ``agentlens show`` lists them) or on each of its
findings. It stays attached to the finding (same scorer, failure mode, token and steps) across
re-scoring, and stops counting when a re-score no longer reports it.

Precision of a detector = confirmed / (confirmed + false positive) over its live verdicts, per
scorer and per failure mode, with a 95 % Wilson interval (the same interval the rates use).
"""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from datetime import datetime

from agentlens.analytics import wilson_interval
from agentlens.store import RunSummary, TraceStore, shared_store
from agentlens.store._protocol import ContentFlag, VerdictRecord

__all__ = [
    "Precision",
    "content_flags",
    "precision",
    "review_queue",
    "set_verdict",
]


@dataclass(frozen=True, slots=True)
class Precision:
    """The measured precision of one scorer, or of one failure mode (across scorers)."""

    by: str
    """``scorer`` or ``failure_mode``."""
    key: str | None
    """The scorer name or the failure mode."""
    confirmed: int
    false_positive: int

    @property
    def judged(self) -> int:
        """Findings with a verdict."""
        return self.confirmed + self.false_positive

    @property
    def precision(self) -> float | None:
        """confirmed / judged; ``None`` before any verdict."""
        return self.confirmed / self.judged if self.judged else None

    @property
    def interval(self) -> tuple[float, float]:
        """The 95 % Wilson interval of the precision."""
        return wilson_interval(self.confirmed, self.judged)

    def to_json(self) -> dict[str, object]:
        """The JSON shape of ``agentlens review precision --json``."""
        low, high = self.interval
        return {
            "by": self.by,
            self.by: self.key,
            "confirmed": self.confirmed,
            "false_positive": self.false_positive,
            "judged": self.judged,
            "precision": self.precision,
            "low": low,
            "high": high,
        }


def _store(db: str | TraceStore | None) -> TraceStore:
    return shared_store(db)


def set_verdict(
    run_id: str,
    verdict: str,
    *,
    finding: int | None = None,
    note: str | None = None,
    by: str | None = None,
    db: str | TraceStore | None = None,
) -> list[VerdictRecord]:
    """Record a human verdict on a flagged run (every finding) or on its finding ``finding``.

    Args:
        run_id: the flagged run.
        verdict: ``confirmed`` or ``false_positive``.
        finding: the finding's number (from 1), as ``agentlens show`` lists them.
        note: why, for the next reader.
        by: who gave it (default: the login name).
        db: the store (default: the configured one).

    Raises:
        RunNotFoundError: no such run.
        StoreError: the run is not flagged, no such finding, or an unknown verdict.
    """
    author = by if by is not None else _login()
    return _store(db).put_verdict(run_id, verdict, finding=finding, note=note, author=author)


def _login() -> str | None:
    try:
        return getpass.getuser()
    except Exception:  # no login name (a container without USER)
        return None


def precision(
    *, since: datetime | None = None, db: str | TraceStore | None = None
) -> list[Precision]:
    """The precision of each scorer, then of each failure mode, from live verdicts given at or
    after ``since``."""
    counts = _store(db).verdict_counts(since=since)
    by_scorer: dict[str, list[int]] = {}
    by_mode: dict[str | None, list[int]] = {}
    for c in counts:
        for row in (
            by_scorer.setdefault(c.scorer, [0, 0]),
            by_mode.setdefault(c.failure_mode, [0, 0]),
        ):
            row[0] += c.confirmed
            row[1] += c.false_positive
    out = [Precision("scorer", k, *v) for k, v in sorted(by_scorer.items())]
    out += [
        Precision("failure_mode", k, *v)
        for k, v in sorted(by_mode.items(), key=lambda kv: kv[0] or "")
    ]
    return out


def content_flags(kind: str, item_id: str, *, db: str | TraceStore | None = None) -> ContentFlag:
    """The quality flags of one content item (an entry of runs' ``links``).

    ``content_flags("blog_post", "123").hallucination_suspected`` is True while a flagged run
    linked to the post holds the flag; ``.runs`` says which, with their reasons.
    """
    return _store(db).content_flags(kind, str(item_id))


def review_queue(
    *,
    agent: str | None = None,
    limit: int | None = None,
    project: str | None = None,
    db: str | TraceStore | None = None,
) -> list[RunSummary]:
    """Flagged runs with a finding no human has judged yet, oldest first (of one ``project``,
    when given)."""
    return _store(db).review_queue(agent=agent, limit=limit, project=project)
