"""Trace and score factories for the store tests (imported by name: tests/store is on sys.path)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from agentlens.model import Finding, Score, ScoreResult, Step, Trace

T0 = datetime(2026, 3, 1, tzinfo=UTC)
"""Runs made by ``make_trace(i)`` start at ``T0 + i hours``."""


def make_trace(
    i: int,
    *,
    steps: int = 3,
    agent: str = "support",
    project: str = "default",
    output: Any = "the answer",
    started: datetime | bool | None = True,
    **extra: Any,
) -> Trace:
    """Run ``r0000i``, started ``i`` hours after T0 (or at ``started``), with ``steps`` steps."""
    start = T0 + timedelta(hours=i) if started is True else (started or None)
    links = extra.pop("links", {"ticket": f"T-{i}"})
    return Trace(
        id=f"r{i:05d}",
        agent=agent,
        project=project,
        name=f"run {i}",
        started_at=start,
        ended_at=None if start is None else start + timedelta(seconds=30),
        input={"question": f"q{i}"},
        output=output,
        metadata={"release": f"v{i % 3}", "tenant": "acme"},
        links=links,
        steps=[
            Step(
                id=f"s{j}",
                parent_id=None if j == 0 else "s0",
                kind="tool" if j % 2 else "retrieval",
                name=f"tool_{j}",
                input={"q": j},
                output=[{"id": f"DOC-{i}-{j}", "text": "x" * 50}],
                started_at=start,
                attributes={"tokens": j},
            )
            for j in range(steps)
        ],
        **extra,
    )


def make_score(
    run_id: str, scorer: str = "no_fabricated_refs", version: str = "1", **kw: Any
) -> Score:
    """A flagged score with one ``fabricated_grounding`` finding, unless ``passed=True``."""
    passed = kw.pop("passed", False)
    findings = [] if passed else [Finding(failure_mode="fabricated_grounding", text="CUST-99999")]
    result = ScoreResult(passed=passed, value=float(len(findings)), findings=findings, **kw)
    return Score.of(result, run_id=run_id, scorer=scorer, version=version)
