"""Evaluation: the scorer API, evidence, detectors, judges and the runner."""

from agentlens.eval._evidence import Evidence, EvidenceItem, Turn, text_of
from agentlens.eval._runner import ScoreSummary, ScoringInterrupted, score_runs
from agentlens.eval._scorer import (
    Report,
    Scorer,
    ScorerFn,
    arun_scorers,
    define_scorer,
    get_scorer,
    registered_scorers,
    resolve_scorer,
    run_scorers,
    scorer,
)
from agentlens.eval.detectors import (
    excessive_steps,
    faithful_synthesis,
    no_fabricated_refs,
    no_progress,
    parametric_leakage,
    repeated_tool_calls,
)
from agentlens.model import FailureMode, Finding, ScoreResult, Verdict

__all__ = [
    "Evidence",
    "EvidenceItem",
    "FailureMode",
    "Finding",
    "Report",
    "ScoreResult",
    "ScoreSummary",
    "Scorer",
    "ScorerFn",
    "ScoringInterrupted",
    "Turn",
    "Verdict",
    "arun_scorers",
    "define_scorer",
    "excessive_steps",
    "faithful_synthesis",
    "get_scorer",
    "no_fabricated_refs",
    "no_progress",
    "parametric_leakage",
    "registered_scorers",
    "repeated_tool_calls",
    "resolve_scorer",
    "run_scorers",
    "score_runs",
    "scorer",
    "text_of",
]
