"""The trace format, schema version 1: one :class:`Trace` per agent run, made of :class:`Step`s."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.json_schema import JsonDict

from agentlens._ids import new_id
from agentlens.model._built import build_model

__all__ = [
    "EPOCH",
    "SCHEMA_VERSION",
    "Step",
    "StepKind",
    "Trace",
    "from_epoch_us",
    "to_epoch_us",
    "utc",
]

_S = TypeVar("_S", bound="Step")
_T = TypeVar("_T", bound="Trace")

SCHEMA_VERSION = 1
"""The trace-format version this agentlens writes and the newest it reads."""


_NOT_BLANK: JsonDict = {"minLength": 1, "pattern": r"\S"}
"""What ``agentlens schema`` says of an id: the importer refuses an empty or blank one (the
model itself takes any string: the store's reads and capture go through it)."""


def utc(value: datetime) -> datetime:
    """Return ``value`` as an aware UTC datetime; a naive time is taken to be UTC.

    Raises:
        ValueError: the time is out of range once converted to UTC (its offset takes it before
            the year 1 or past the year 9999, e.g. ``9999-12-31T23:00:00-05:00``).
    """
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError(
            f"time {value.isoformat()} is out of range in UTC: its offset takes it outside "
            "the years 1 to 9999"
        ) from None


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
"""The Unix epoch, in UTC."""
_US = timedelta(microseconds=1)


def to_epoch_us(value: datetime | None) -> int | None:
    """Microseconds since the Unix epoch of ``value``; a naive time is taken to be UTC.

    The one conversion between times and integers: the store's columns and the capture clock
    (nanoseconds, divided by 1000) go through it and :func:`from_epoch_us`.
    """
    if value is None:
        return None
    if value.tzinfo is not UTC:
        value = utc(value)
    return (value - EPOCH) // _US


def from_epoch_us(value: int | None) -> datetime | None:
    """The UTC datetime ``value`` microseconds after the Unix epoch (inverse of
    :func:`to_epoch_us`)."""
    if value is None:
        return None
    return EPOCH + timedelta(microseconds=value)


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

    id: str = Field(default_factory=lambda: _step_id(), json_schema_extra=_NOT_BLANK)
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

    @classmethod
    def _from_trusted(cls, data: Any) -> Self:
        """Build a step from a JSON-parsed record this agentlens wrote, without validation.

        For the store's read path: the record was validated when it was stored. The result is
        equal to ``cls.model_validate(data)`` in every respect (field values and their types,
        unknown fields kept as extras, ``model_fields_set``); a record the fast path does not
        handle exactly (a value of an unexpected type, a time in another form) goes through
        :meth:`model_validate`, so invalid data still raises :class:`pydantic.ValidationError`.
        """
        try:
            return _trusted_step(cls, data)
        except Exception:  # _Untrusted, or a time fromisoformat rejects: validation decides
            return cls.model_validate(data)


def _step_id() -> str:
    from agentlens._ids import new_step_id

    return new_step_id()


class Trace(_Record):
    """One agent run, with the evidence it saw and the answer it gave."""

    schema_version: int = SCHEMA_VERSION
    """The version of this format the record was written in."""
    id: str = Field(default_factory=new_id, json_schema_extra=_NOT_BLANK)
    """The run id: sortable by time when agentlens made it. Generated when absent."""
    project: str = "default"
    """The project the run belongs to."""
    agent: str | None = None
    """The agent role (``support``, ``blog-writer``): scorer settings are chosen by it."""
    name: str | None = None
    """A human-readable name for the run."""
    status: str = Field("ok", json_schema_extra={"enum": ["ok", "error", "running"]})
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

    @classmethod
    def _from_trusted(cls, data: Any, *, owned: bool = False) -> Self:
        """Build a run from a JSON-parsed record this agentlens wrote, without validation.

        For the store's read path (a run was validated when it was stored): about 40 % less
        CPU than :meth:`model_validate` of the same dict (parsing the JSON costs as much again,
        whichever way), and equal to its result in every respect (field values and their
        types, times as aware UTC datetimes, unknown fields of the run and of its steps kept as
        extras, ``model_fields_set``). A record the fast path does not handle exactly (a value
        of an unexpected type, a time in another form, an unknown ``schema_version``) goes
        through :meth:`model_validate` instead, so invalid data still raises
        :class:`pydantic.ValidationError`.

        ``owned=True``: the caller hands ``data`` over (the store's freshly parsed JSON, which
        nothing else refers to): each step's record in the stored field order becomes that
        step's ``__dict__`` in place, converted where validation converts (kind, times), instead
        of being copied into a new one. The result is the same; ``data`` is not to be used
        afterwards.
        """
        try:
            return _trusted_trace(cls, data, owned=owned)
        except Exception:  # _Untrusted, or a time fromisoformat rejects: validation decides
            return cls.model_validate(data)


# -- the trusted (unvalidated) constructors ------------------------------------------------------
#
# The store reads back runs it wrote from validated Trace objects, so it need not validate them
# again: these functions rebuild the objects validation would make (the same values, types,
# extras and fields set) with less CPU. They check every value's type on the way and give up
# (raise _Untrusted, or any exception) on anything they do not handle exactly as validation
# does; the caller then validates. A step is built in one function with few calls: a Python
# call costs about 0.3 us on a loaded machine, a good part of the whole. Measured (see
# docs/storage.md): JSON parsing and allocating the objects dominate a read, not validation,
# so this saves a fifth to a quarter of the time to build a run, not more.


class _Untrusted(Exception):
    """A record the trusted constructors do not handle exactly: it is validated instead."""


_MISSING: Any = object()
_KINDS: dict[str, StepKind] = {kind.value: kind for kind in StepKind}
_STEP_FIELDS = frozenset(Step.model_fields)
_STEP_FIELD_COUNT = len(_STEP_FIELDS)
_STEP_ORDER = tuple(Step.model_fields)
"""A step's fields in their declared order: the order of its ``__dict__`` after validation and
of its members in the JSON the store writes."""
_TRACE_FIELDS = frozenset(Trace.model_fields)
_ISO_TIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?"
    r"(?:Z|[+-][0-9]{2}:[0-9]{2})?",
    re.ASCII,
)
"""The forms of a time that pydantic and :meth:`datetime.fromisoformat` read alike (other
forms are left to validation)."""
_utc_time = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?Z", re.ASCII
).fullmatch
"""How pydantic serialises an aware UTC time (every time a validated run holds):
:meth:`datetime.fromisoformat` reads it as the same value, already in :data:`datetime.UTC`."""
_fromiso = datetime.fromisoformat


def _time(value: Any) -> datetime | None:
    """A time in any form :data:`_ISO_TIME` allows, as validation makes it."""
    if value is None:
        return None
    if type(value) is str and _ISO_TIME.fullmatch(value) is not None:
        try:
            return utc(_fromiso(value))
        except ValueError:
            pass
    raise _Untrusted


def _str_dict(value: Any, *, values_str: bool = False) -> dict[str, Any]:
    """A copy of a ``dict[str, Any]`` (or ``dict[str, str]``) field, as validation makes it."""
    if value is _MISSING:
        return {}
    if type(value) is not dict:
        raise _Untrusted
    for key, item in value.items():
        if type(key) is not str or (values_str and type(item) is not str):
            raise _Untrusted
    return dict(value)


def _step_values(data: dict[str, Any]) -> tuple[StepKind, datetime | None, datetime | None]:
    """A stored step's kind and times as validation makes them, once its ids, name and the keys
    of its attributes are checked to be strings (raises :class:`_Untrusted` otherwise, and
    ``KeyError`` for a missing field, which is then validated): what both trusted builds of a
    step check and convert."""
    kind = _KINDS[data["kind"]]
    parent_id = data["parent_id"]
    name = data["name"]
    attributes = data["attributes"]
    if (
        type(data["id"]) is not str
        or (parent_id is not None and type(parent_id) is not str)
        or (name is not None and type(name) is not str)
        or type(attributes) is not dict
    ):
        raise _Untrusted
    for key in attributes:
        if type(key) is not str:
            raise _Untrusted
    started = data["started_at"]
    if started is not None:
        started = (
            _fromiso(started) if type(started) is str and _utc_time(started) else _time(started)
        )
    ended = data["ended_at"]
    if ended is not None:
        ended = _fromiso(ended) if type(ended) is str and _utc_time(ended) else _time(ended)
    return kind, started, ended


def _trusted_step(cls: type[_S], data: Any) -> _S:
    # Every field is present in what the store wrote; a missing one (KeyError) is validated.
    if type(data) is not dict:
        raise _Untrusted
    kind, started, ended = _step_values(data)
    attributes = dict(data["attributes"])  # validation copies a dict too
    step_id = data["id"]
    parent_id = data["parent_id"]
    name = data["name"]
    values = {
        "id": step_id,
        "parent_id": parent_id,
        "kind": kind,
        "name": name,
        "input": data["input"],
        "output": data["output"],
        "error": data["error"],
        "started_at": started,
        "ended_at": ended,
        "attributes": attributes,
    }
    if len(data) == _STEP_FIELD_COUNT:  # every field and nothing else
        return build_model(cls, values, set(_STEP_FIELDS))
    extra = {k: v for k, v in data.items() if k not in _STEP_FIELDS}
    return build_model(cls, values, set(data), extra)


def _stored_step(cls: type[_S], data: Any) -> _S:
    """:func:`_trusted_step` of a record the caller owns: when it holds exactly the step's fields
    in their declared order (how the store writes a step), it becomes the step's ``__dict__``,
    its ``kind`` and times converted in place, and its ``attributes`` dict kept (a new one
    either way: validation copies the caller's, the parser made this one). Every check and
    conversion happens before the first change, so a record given up on is left as it was."""
    if type(data) is not dict or len(data) != _STEP_FIELD_COUNT or tuple(data) != _STEP_ORDER:
        return _trusted_step(cls, data)
    kind, started, ended = _step_values(data)
    data["kind"] = kind
    data["started_at"] = started
    data["ended_at"] = ended
    return build_model(cls, data, set(_STEP_FIELDS))


def _trusted_trace(cls: type[_T], data: Any, *, owned: bool = False) -> _T:
    if type(data) is not dict:
        raise _Untrusted
    get = data.get
    version = get("schema_version", SCHEMA_VERSION)
    if type(version) is not int or not 1 <= version <= SCHEMA_VERSION:
        raise _Untrusted
    run_id = get("id", _MISSING)
    if type(run_id) is not str:
        if run_id is not _MISSING:
            raise _Untrusted
        run_id = new_id()
    project = get("project", "default")
    status = get("status", "ok")
    agent = get("agent")
    name = get("name")
    if (
        type(project) is not str
        or type(status) is not str
        or (agent is not None and type(agent) is not str)
        or (name is not None and type(name) is not str)
    ):
        raise _Untrusted
    started = _time(get("started_at"))
    ended = _time(get("ended_at"))
    metadata = _str_dict(get("metadata", _MISSING))
    links = _str_dict(get("links", _MISSING), values_str=True)
    # the run's own fields are checked before any step is built (an owned step is built in
    # place, so a run given up on after its steps would be validated from converted records)
    steps = get("steps", _MISSING)
    if type(steps) is list:
        build = _stored_step if owned else _trusted_step
        steps = [build(Step, s) for s in steps]
    elif steps is _MISSING:
        steps = []
    else:
        raise _Untrusted
    values = {
        "schema_version": version,
        "id": run_id,
        "project": project,
        "agent": agent,
        "name": name,
        "status": status,
        "started_at": started,
        "ended_at": ended,
        "input": get("input"),
        "output": get("output"),
        "metadata": metadata,
        "links": links,
        "steps": steps,
    }
    fields_set = set(data)
    extra = (
        None
        if fields_set <= _TRACE_FIELDS
        else {k: v for k, v in data.items() if k not in _TRACE_FIELDS}
    )
    return build_model(cls, values, fields_set, extra)
