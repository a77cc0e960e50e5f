"""Evaluation: the scorer API, evidence, detectors, judges and the runner."""

from agentlens.eval._evidence import Evidence, EvidenceItem, Turn, text_of
from agentlens.eval._history import StepHistory
from agentlens.eval._registry import (
    ENTRY_POINT_GROUP,
    check_settings,
    get_factory,
    get_scorer,
    registered_scorers,
    resolve_scorer,
)
from agentlens.eval._runner import ScoreSummary, ScoringInterrupted, score_runs
from agentlens.eval._scorer import Bound, Scorer, ScorerFactory, ScorerFn, define_scorer, scorer
from agentlens.eval._single import Report, arun_scorers, run_scorers, score_trace
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
    "ENTRY_POINT_GROUP",
    "Bound",
    "Evidence",
    "EvidenceItem",
    "FailureMode",
    "Finding",
    "Report",
    "ScoreResult",
    "ScoreSummary",
    "Scorer",
    "ScorerFactory",
    "ScorerFn",
    "ScoringInterrupted",
    "StepHistory",
    "Turn",
    "Verdict",
    "arun_scorers",
    "check_settings",
    "define_scorer",
    "excessive_steps",
    "faithful_synthesis",
    "get_factory",
    "get_scorer",
    "no_fabricated_refs",
    "no_progress",
    "parametric_leakage",
    "registered_scorers",
    "repeated_tool_calls",
    "resolve_scorer",
    "run_scorers",
    "score_runs",
    "score_trace",
    "scorer",
    "text_of",
]
