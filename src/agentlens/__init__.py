"""agentlens: capture what a tool-using agent did, and measure how often it hallucinates.

The public API is re-exported here and loaded lazily, so ``import agentlens`` stays cheap and
imports no optional dependency::

    import agentlens

    agentlens.configure(db="sqlite:///agentlens.db")

    @agentlens.tool
    def get_customer(email: str) -> dict: ...

    with agentlens.run(agent="support", input=question) as run:
        customer = get_customer(email)
        run.output = answer
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agentlens import _implicit

__version__ = "0.1.0"

# name -> module that defines it; resolved on first attribute access.
_EXPORTS: dict[str, str] = {
    "AgentlensError": "agentlens.errors",
    "ConfigError": "agentlens.errors",
    "FailureMode": "agentlens.model",
    "Finding": "agentlens.model",
    "FormatError": "agentlens.errors",
    "LoopDetected": "agentlens.errors",
    "RunNotFoundError": "agentlens.errors",
    "Score": "agentlens.model",
    "ScoreResult": "agentlens.model",
    "Step": "agentlens.model",
    "StepKind": "agentlens.model",
    "Trace": "agentlens.model",
    "Verdict": "agentlens.model",
    "configure": "agentlens._oncomplete",
    "current_run": "agentlens.capture",
    "define_scorer": "agentlens.eval",
    "flush": "agentlens.capture",
    "get_trace": "agentlens.store",
    "hallucination_rate": "agentlens.analytics",
    "llm": "agentlens.capture",
    "open_store": "agentlens.store",
    "query_traces": "agentlens.store",
    "retrieval": "agentlens.capture",
    "run": "agentlens.capture",
    "run_scorers": "agentlens.eval",
    "scorer": "agentlens.eval",
    "shutdown": "agentlens.capture",
    "tool": "agentlens.capture",
    "trend": "agentlens.analytics",
}

__all__ = [
    "AgentlensError",
    "ConfigError",
    "FailureMode",
    "Finding",
    "FormatError",
    "LoopDetected",
    "RunNotFoundError",
    "Score",
    "ScoreResult",
    "Step",
    "StepKind",
    "Trace",
    "Verdict",
    "__version__",
    "configure",
    "current_run",
    "define_scorer",
    "flush",
    "get_trace",
    "hallucination_rate",
    "llm",
    "open_store",
    "query_traces",
    "retrieval",
    "run",
    "run_scorers",
    "scorer",
    "shutdown",
    "tool",
    "trend",
]

if TYPE_CHECKING:  # pragma: no cover
    from agentlens._oncomplete import configure
    from agentlens.analytics import hallucination_rate, trend
    from agentlens.capture import current_run, flush, llm, retrieval, run, shutdown, tool
    from agentlens.errors import (
        AgentlensError,
        ConfigError,
        FormatError,
        LoopDetected,
        RunNotFoundError,
    )
    from agentlens.eval import define_scorer, run_scorers, scorer
    from agentlens.model import (
        FailureMode,
        Finding,
        Score,
        ScoreResult,
        Step,
        StepKind,
        Trace,
        Verdict,
    )
    from agentlens.store import get_trace, open_store, query_traces


def _implicit_exporter(url: str) -> Any:
    """Capture's exporter when only ``AGENTLENS_DB`` is set: it stores runs and reviews them in
    the background, as :func:`configure` would (:func:`agentlens._oncomplete.implicit_exporter`)."""
    return importlib.import_module("agentlens._oncomplete").implicit_exporter(url)


_implicit.set_store_exporter(_implicit_exporter)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentlens' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
