"""The trace format, schema version 1: one :class:`Trace` per agent run, made of :class:`Step`s."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentlens._ids import new_id

__all__ = ["SCHEMA_VERSION", "Step", "StepKind", "Trace", "utc"]

SCHEMA_VERSION = 1
"""The trace-format version this agentlens writes and the newest it reads."""


def utc(value: datetime) -> datetime:
    """Return ``value`` as an aware UTC datetime; a naive time is taken to be UTC."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


class StepKind(StrEnum):
    """What a step is. Which kinds count as evidence is decided in :mod:`agentlens.eval`."""

    USER = "user"
    """A message from the user; its text is in ``output``."""
    SYSTEM = "system"
    """The system prompt or a system message; its text is in ``output``."""
    LLM = "llm"
    """A model call: the messages sent in ``input``, the reply in ``output``."""
    TOOL = "tool"
    """A tool call: arguments in ``input``, raw result in ``output``, failure in ``error``."""
    RETRIEVAL = "retrieval"
    """A retrieval: the query in ``input``, the documents returned in ``output``."""
    TEXT = "text"
    """An assistant message; its text is in ``output``."""
    THINKING = "thinking"
    """The model's reasoning, when the source recorded it; its text is in ``output``."""
    AGENT = "agent"
    """A sub-agent, or any span that groups other steps."""


class _Record(BaseModel):
    # Unknown fields are kept (extra="allow") so that a file written by a newer producer, or
    # carrying fields of its own, survives a load and a save unchanged.
    model_config = ConfigDict(extra="allow", populate_by_name=True, use_attribute_docstrings=True)

    @field_validator("started_at", "ended_at", mode="after", check_fields=False)
    @classmethod
    def _to_utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else utc(value)


class Step(_Record):
    """One thing that happened in a run: a tool call, a retrieval, a model call, a message."""

    id: str = Field(default_factory=lambda: _step_id())
    """Unique within its run. Generated when absent."""
    parent_id: str | None = None
    """The id of the enclosing step (an ``agent`` step, or the tool that called a model)."""
    kind: StepKind
    """What the step is."""
    name: str | None = None
    """The tool, retriever or model name; for messages, the speaker's name if any."""
    input: Any = None
    """Tool or retrieval arguments; the messages sent to a model. JSON."""
    output: Any = None
    """The raw tool or retrieval result; the model's reply; a message's text. JSON."""
    error: Any = None
    """The failure, when the step failed: a message string or a JSON object."""
    started_at: datetime | None = None
    """When the step started (UTC)."""
    ended_at: datetime | None = None
    """When the step ended (UTC)."""
    attributes: dict[str, Any] = Field(default_factory=dict)
    """Model name, token counts, cost, ``truncated``, and anything the source carried that has
    no field of its own."""

    @property
    def duration_s(self) -> float | None:
        """Seconds between start and end, when both are known."""
        if self.started_at is None or self.ended_at is None:
            return None
        return (self.ended_at - self.started_at).total_seconds()


def _step_id() -> str:
    from agentlens._ids import new_step_id

    return new_step_id()


class Trace(_Record):
    """One agent run, with the evidence it saw and the answer it gave."""

    schema_version: int = SCHEMA_VERSION
    """The version of this format the record was written in."""
    id: str = Field(default_factory=new_id)
    """The run id: sortable by time when agentlens made it. Generated when absent."""
    project: str = "default"
    """The project the run belongs to."""
    agent: str | None = None
    """The agent role (``support``, ``blog-writer``): scorer settings are chosen by it."""
    name: str | None = None
    """A human-readable name for the run."""
    status: str = "ok"
    """``ok``, ``error``, or ``running`` while a run is still being captured."""
    started_at: datetime | None = None
    """When the run started (UTC)."""
    ended_at: datetime | None = None
    """When the run ended (UTC)."""
    input: Any = None
    """The user's request: a string or JSON."""
    output: Any = None
    """The final answer: a string or JSON."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Free-form labels: ``release``, ``tenant``, ``model``..."""
    links: dict[str, str] = Field(default_factory=dict)
    """Ids of things the run produced or served in the host application (``blog_post: 123``)."""
    steps: list[Step] = Field(default_factory=list)
    """What happened, in order."""

    @model_validator(mode="before")
    @classmethod
    def _check_version(cls, data: Any) -> Any:
        if isinstance(data, dict):
            version = data.get("schema_version", SCHEMA_VERSION)
            if isinstance(version, bool) or not isinstance(version, int):
                raise ValueError(f"schema_version must be an integer, got {version!r}")
            if version > SCHEMA_VERSION or version < 1:
                raise ValueError(
                    f"unknown schema_version {version}; this agentlens reads 1..{SCHEMA_VERSION}"
                )
        return data

    @field_validator("links", mode="before")
    @classmethod
    def _links_to_str(cls, value: Any) -> Any:
        # Links are ids; numbers are accepted and kept as their text.
        if isinstance(value, dict):
            return {
                k: str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v
                for k, v in value.items()
            }
        return value

    @property
    def has_output(self) -> bool:
        """True when the run gave a final answer."""
        return self.output is not None and self.output != ""

    def step(self, step_id: str) -> Step:
        """Return the step with the given id; :class:`KeyError` when there is none."""
        for s in self.steps:
            if s.id == step_id:
                return s
        raise KeyError(step_id)

    def to_json(self) -> str:
        """This run in the trace format, as one line of JSON."""
        return self.model_dump_json(exclude_none=False)

    def to_dict(self) -> dict[str, Any]:
        """This run in the trace format, as a JSON-ready dict."""
        return self.model_dump(mode="json")

    @classmethod
    def from_json(cls, text: str | bytes) -> Trace:
        """Parse one run from JSON; raises :class:`pydantic.ValidationError` when invalid."""
        return cls.model_validate_json(text)
