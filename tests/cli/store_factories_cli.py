"""Runs with scores for the migrate tests (imported by name: tests/cli is on sys.path)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agentlens.eval import get_scorer
from agentlens.model import Finding, Score, ScoreResult, Step, StepKind, Trace

REFS_VERSION = get_scorer("no_fabricated_refs").version
"""The current version: the rate counts scores of the current versions only."""

T0 = datetime(2026, 1, 20, tzinfo=UTC)


def scored_runs(n: int) -> tuple[list[Trace], list[Score]]:
    """``n`` runs over about three months (some undated, odd ids and values among them), and a
    score for two runs in three (flagged every fifth)."""
    traces = []
    for i in range(n):
        started = None if i % 97 == 0 else T0 + timedelta(hours=5 * i, microseconds=i)
        traces.append(
            Trace(
                id=f"run-{i:05d}" if i % 50 else f"run-{i:05d}-\u00fcnic\u00f8de \x00 {i}",
                agent=["support", "billing", None][i % 3],
                started_at=started,
                input={"q": i, "z": [1.5e16, None, True], "a": "first key order kept"},
                output=f"answer {i}",
                metadata={"release": f"v{i % 4}", "n": 10**30},
                steps=[
                    Step(
                        id="s0",
                        kind=StepKind.TOOL,
                        name="lookup",
                        input={"b": 2, "a": 1},
                        output={"id": f"C-{i}"},
                    ),
                    Step(id="s1", kind=StepKind.LLM, name="answer", output="x" * (i % 7)),
                ],
            )
        )
    scores = []
    for i, t in enumerate(traces):
        if i % 3 == 2:
            continue
        findings = (
            [Finding(failure_mode="fabricated_grounding", text=f"C-{i + 1}")] if i % 5 == 0 else []
        )
        result = ScoreResult(passed=not findings, value=float(len(findings)), findings=findings)
        scores.append(
            Score.of(result, run_id=t.id, scorer="no_fabricated_refs", version=REFS_VERSION)
        )
    return traces, scores
