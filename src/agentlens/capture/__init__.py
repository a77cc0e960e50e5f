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
queue to a background thread (:class:`BatchProcessor`); what cannot be written is counted
(:func:`stats`) and logged through ``logging.getLogger("agentlens")``.

The pipeline is the OpenTelemetry SDK's: when a run's block ends, a :class:`Processor` receives
the :class:`Run` (``on_end``); the default :class:`BatchProcessor` queues it, converts it with
:meth:`Run.to_trace` on its thread and hands batches to an :class:`Exporter`
(:class:`StoreExporter`, :class:`InMemoryExporter`, or your own). ``configure(processor=...,
clock=..., id_generator=...)`` installs another processor and the hooks tests need;
:func:`reset` goes back to the unconfigured state.
"""

from agentlens.capture._decorators import llm, retrieval, tool
from agentlens.capture._export import Exporter, ExportResult, InMemoryExporter, StoreExporter
from agentlens.capture._guard import LoopEvent, LoopGuard, RoleGuard
from agentlens.capture._http import HttpExporter
from agentlens.capture._processor import BatchProcessor, CaptureStats, Processor, SimpleProcessor
from agentlens.capture._run import ActiveStep, Run, current_run, run
from agentlens.capture._state import configure, flush, is_enabled, reset, shutdown, stats

__all__ = [
    "ActiveStep",
    "BatchProcessor",
    "CaptureStats",
    "ExportResult",
    "Exporter",
    "HttpExporter",
    "InMemoryExporter",
    "LoopEvent",
    "LoopGuard",
    "Processor",
    "RoleGuard",
    "Run",
    "SimpleProcessor",
    "StoreExporter",
    "configure",
    "current_run",
    "flush",
    "is_enabled",
    "llm",
    "reset",
    "retrieval",
    "run",
    "shutdown",
    "stats",
    "tool",
]
