"""Turning a finished :class:`~agentlens.capture.Run` into a :class:`~agentlens.model.Trace`.

This runs on the export thread. Every value was already copied into JSON form when it was
recorded, so nothing here reads objects the agent may still be changing.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from agentlens.model import Step, Trace, json_str

if TYPE_CHECKING:  # pragma: no cover
    from agentlens.capture._run import ActiveStep, Run

__all__ = ["run_to_trace"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _time(ns: int | None) -> datetime | None:
    if ns is None:
        return None
    return _EPOCH + timedelta(microseconds=ns // 1000)


def _text(value: Any) -> str | None:
    """A name or id as text a store can hold (a lone surrogate becomes U+FFFD)."""
    if value is None:
        return None
    return json_str(value if isinstance(value, str) else str(value))


def _step(step: ActiveStep) -> Step:
    # Attributes were copied into JSON form when the run ended (Run._finish).
    attributes: dict[str, Any] = dict(step._attributes) if step._attributes else {}
    if step._ended_ns is None:
        attributes["incomplete"] = True
    return Step.model_construct(
        id=json_str(step.id),
        parent_id=step.parent_id,
        kind=step.kind,
        name=_text(step.name),
        input=step._input,
        output=step._output,
        error=step._error,
        started_at=_time(step._started_ns),
        ended_at=_time(step._ended_ns),
        attributes=attributes,
    )


def run_to_trace(run: Run) -> Trace:
    """The trace of a finished run. Steps still open when the run ended are marked
    ``attributes.incomplete = true``; steps are in the order they started."""
    steps = [_step(s) for s in list(run.steps)]
    return Trace.model_construct(
        schema_version=1,
        id=json_str(run.id),
        project=_text(run.project) or "default",
        agent=_text(run.agent),
        name=_text(run.name),
        status=run.status,
        started_at=_time(run.started_ns),
        ended_at=_time(run.ended_ns),
        input=run.input,
        output=run._output,
        metadata=run.metadata if isinstance(run.metadata, dict) else {"metadata": run.metadata},
        links={json_str(k): json_str(v) for k, v in run.links.items()}
        if isinstance(run.links, dict)
        else {},
        steps=steps,
    )
