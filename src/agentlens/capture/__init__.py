"""The capture SDK: record what an agent run did, step by step, without ever getting in its way.

::

    import agentlens

    agentlens.configure(db="sqlite:///agentlens.db")     # or AGENTLENS_DB; else a no-op

    @agentlens.tool
    def get_customer(email: str) -> dict: ...

    with agentlens.run(agent="support", input=question) as run:
        customer = get_customer(email)
        run.output = answer

Capture never raises into the agent and never blocks it: finished runs go through a bounded
queue to a background thread (:class:`BatchExporter`); what cannot be written is counted
(:func:`stats`) and logged through ``logging.getLogger("agentlens")``.
"""

from agentlens.capture._decorators import llm, retrieval, tool
from agentlens.capture._export import (
    BatchExporter,
    CaptureStats,
    Exporter,
    ExportResult,
    InMemoryExporter,
    StoreExporter,
)
from agentlens.capture._http import HttpExporter
from agentlens.capture._run import ActiveStep, Run, current_run, run
from agentlens.capture._state import configure, flush, is_enabled, shutdown, stats

__all__ = [
    "ActiveStep",
    "BatchExporter",
    "CaptureStats",
    "ExportResult",
    "Exporter",
    "HttpExporter",
    "InMemoryExporter",
    "Run",
    "StoreExporter",
    "configure",
    "current_run",
    "flush",
    "is_enabled",
    "llm",
    "retrieval",
    "run",
    "shutdown",
    "stats",
    "tool",
]
