"""Small scorers and traces for the rate, runner and CLI tests (importable by worker processes)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from agentlens.eval import Evidence, define_scorer
from agentlens.model import FailureMode, Finding, Score, ScoreResult, Step, StepKind, Trace, Verdict

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
"""The fixed "now" of the tests."""


def check_refs(*, trace: Trace, evidence: Evidence) -> ScoreResult:
    """Flags outputs containing FAKE; TRUNC makes it unverifiable; BOOM makes it raise."""
    text = str(trace.output or "")
    if "BOOM" in text:
        raise RuntimeError("scorer exploded")
    findings = []
    if "FAKE" in text:
        at = text.index("FAKE")
        findings.append(
            Finding(
                failure_mode=FailureMode.FABRICATED_GROUNDING,
                text="FAKE-1",
                start=at,
                end=at + 4,
                detail="FAKE-1 is not in the evidence",
            )
        )
    if "LEAK" in text:
        findings.append(Finding(failure_mode=FailureMode.PARAMETRIC_LEAKAGE, text="1912"))
    if "TRUNC" in text:
        findings.append(
            Finding(failure_mode=FailureMode.FABRICATED_GROUNDING, text="DOC-9", unverifiable=True)
        )
    return ScoreResult(passed=not findings, value=float(len(findings)), findings=findings)


def check_loops(*, trace: Trace, evidence: Evidence) -> ScoreResult:
    """Flags runs whose metadata says loop=true."""
    if trace.metadata.get("loop"):
        return ScoreResult(
            passed=False,
            findings=[Finding(failure_mode=FailureMode.REPEATED_TOOL_CALL, text="search x3")],
        )
    return ScoreResult(passed=True)


def check_prefix(*, trace: Trace, evidence: Evidence, prefix: str = "OK") -> ScoreResult:
    """An option-taking scorer: passes when the output starts with ``prefix``."""
    ok = str(trace.output or "").startswith(prefix)
    return ScoreResult(
        passed=ok,
        findings=[] if ok else [Finding(failure_mode=FailureMode.NO_PROGRESS, text=prefix)],
    )


def register(version: str = "1") -> None:
    """(Re-)register the test scorers; ``version`` is t_refs's version."""
    define_scorer("t_refs", check_refs, version=version)
    define_scorer("t_loops", check_loops, version="1")
    define_scorer("t_prefix", check_prefix, version="1")


register()


def trace(
    output: str,
    *,
    day: int = 0,
    hours: float = 0.0,
    agent: str | None = "support",
    release: str | None = None,
    loop: bool = False,
    run_id: str | None = None,
    now: datetime | None = None,
) -> Trace:
    """A small run that started ``day`` days (and ``hours`` hours) before ``now`` (default NOW)."""
    metadata: dict[str, Any] = {}
    if release is not None:
        metadata["release"] = release
    if loop:
        metadata["loop"] = True
    started = (now or NOW) - timedelta(days=day, hours=hours)
    kwargs: dict[str, Any] = {"id": run_id} if run_id else {}
    return Trace(
        agent=agent,
        input="what is the status of my order?",
        output=output,
        started_at=started,
        ended_at=started + timedelta(seconds=3),
        metadata=metadata,
        steps=[
            Step(kind=StepKind.TOOL, name="get_order", input={"id": 1}, output={"id": "ORD-1"}),
        ],
        **kwargs,
    )


def score(
    run_id: str,
    verdict: str,
    *,
    scorer: str = "t_refs",
    version: str = "1",
    modes: tuple[FailureMode, ...] = (),
    unverifiable: bool = False,
) -> Score:
    """A stored score of ``run_id`` with this verdict, one finding per failure mode."""
    findings = [Finding(failure_mode=m, text="x", unverifiable=unverifiable) for m in modes]
    error = "RuntimeError: boom" if verdict == "error" else None
    return Score(
        run_id=run_id,
        scorer=scorer,
        version=version,
        passed=verdict == "passed",
        verdict=Verdict(verdict),
        findings=findings,
        error=error,
    )
