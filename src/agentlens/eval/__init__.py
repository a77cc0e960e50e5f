"""Evaluation: the scorer API, evidence, detectors, judges and the runner."""

from agentlens.eval._evidence import Evidence, EvidenceItem, Turn, text_of
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
from agentlens.model import FailureMode, Finding, ScoreResult, Verdict

__all__ = [
    "Evidence",
    "EvidenceItem",
    "FailureMode",
    "Finding",
    "Report",
    "ScoreResult",
    "Scorer",
    "ScorerFn",
    "Turn",
    "Verdict",
    "arun_scorers",
    "define_scorer",
    "get_scorer",
    "registered_scorers",
    "resolve_scorer",
    "run_scorers",
    "scorer",
    "text_of",
]
