"""The trace model: runs, steps and scores, and their JSON form (schema version 1).

This package is the leaf of agentlens: it imports nothing else of the package but ids.
"""

from agentlens.model._score import (
    VERDICT_PRECEDENCE,
    FailureMode,
    Finding,
    Score,
    ScoreResult,
    ScoreRow,
    Verdict,
    worst_verdict,
)
from agentlens.model._trace import (
    EPOCH,
    SCHEMA_VERSION,
    Step,
    StepKind,
    Trace,
    from_epoch_us,
    to_epoch_us,
    utc,
)
from agentlens.model._values import MAX_INT_DIGITS, json_int, json_str, to_jsonable

__all__ = [
    "EPOCH",
    "MAX_INT_DIGITS",
    "SCHEMA_VERSION",
    "VERDICT_PRECEDENCE",
    "FailureMode",
    "Finding",
    "Score",
    "ScoreResult",
    "ScoreRow",
    "Step",
    "StepKind",
    "Trace",
    "Verdict",
    "from_epoch_us",
    "json_int",
    "json_str",
    "to_epoch_us",
    "to_jsonable",
    "utc",
    "worst_verdict",
]
