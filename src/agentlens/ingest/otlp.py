"""OpenTelemetry traces (OTLP) into runs: a pure converter, and the ``otlp-json`` file format.

One OpenTelemetry trace is one run. Spans are first decoded into :class:`OtlpSpan` (plain,
JSON-ready values: ids as lowercase hex at their OpenTelemetry widths, attribute values as
Python values) from either OTLP encoding:

- :func:`spans_from_json`: an ``ExportTraceServiceRequest`` in the OTLP/JSON encoding
  (``resourceSpans[].scopeSpans[].spans[]``; ``lowerCamelCase`` or ``snake_case`` keys; ids in
  hex, or in base64 as the generic protobuf JSON mapping writes them);
- :func:`spans_from_protobuf`: the same request in the binary protobuf encoding (needs
  ``opentelemetry-proto``, the ``server`` extra).

:func:`build_trace` turns the spans of one trace into a :class:`~agentlens.model.Trace`, reading
the OpenTelemetry GenAI semantic conventions (``gen_ai.*``, current and legacy forms) and
OpenInference (``openinference.span.kind``, ``input.value``, ``llm.input_messages.*``...).
:func:`traces_from_spans` groups any spans by trace and builds every run. The mapping, field by
field, is documented in ``docs/otlp.md``; in short:

- run ``id`` = the trace id (32 hex digits); each step's ``id`` = its span id (16 hex digits),
  so a span delivered twice is one step, and the run of a trace is the same whichever spans
  arrive first;
- the root span (no parent) gives the agent, the name, the status, the times and the input;
  the last assistant message of the run is its output;
- a span becomes one step: ``agent`` (``invoke_agent``, ``create_agent``, OpenInference
  ``AGENT``/``CHAIN``, and any other span), ``llm`` (``chat``, ``text_completion``,
  ``generate_content``, ``LLM``), ``tool`` (``execute_tool``, ``TOOL``), ``retrieval``
  (``retrieval``, ``RETRIEVER``); system instructions, user messages and tool calls that only
  appear inside messages become ``system``, ``user`` and ``tool`` steps of their own;
- attributes with no field of their own are kept in the step's ``attributes``.

Nothing here does I/O but :func:`read` (the ``agentlens import --format otlp-json`` reader).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic_core import to_json

from agentlens.errors import FormatError, MissingExtraError
from agentlens.ingest._checks import (
    SURROGATE_REASON,
    check_nonfinite,
    json_error_reason,
    parse_nested_json,
    read_record,
    surrogate_path,
)
from agentlens.model import Step, StepKind, Trace, from_epoch_us

__all__ = [
    "OtlpSpan",
    "SpanRecord",
    "build_trace",
    "read",
    "span_records_from_protobuf",
    "spans_from_json",
    "spans_from_protobuf",
    "traces_from_spans",
]

_STATUS_ERROR = 2
_ZERO_TRACE = bytes(16)
_ZERO_SPAN = bytes(8)
_REMOTE_PARENT = 0x300
"""OTLP span flags: SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK | SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK,
both set when the span's parent is in another process."""
_KIND_NAMES = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}


# -- the decoded span ---------------------------------------------------------------------------


@dataclass(slots=True)
class OtlpSpan:
    """One OTLP span, decoded into plain values (what the server stages until a trace is whole).

    Times are integer nanoseconds since the Unix epoch, as OTLP sends them.
    """

    trace_id: str
    """32 lowercase hex digits."""
    span_id: str
    """16 lowercase hex digits."""
    parent_span_id: str | None
    """16 hex digits, or ``None`` for a root span."""
    name: str
    start_ns: int | None = None
    end_ns: int | None = None
    kind: int = 0
    """The OTLP span kind (1 internal, 2 server, 3 client, 4 producer, 5 consumer)."""
    status_code: int = 0
    """0 unset, 1 ok, 2 error."""
    status_message: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    """Each ``{"name", "time_ns", "attributes"}``."""
    resource: dict[str, Any] = field(default_factory=dict)
    """The attributes of the resource that sent the span (``service.name``...)."""
    scope: str | None = None
    """The instrumentation scope's name."""
    dropped_attributes: int = 0
    """Attributes the sender dropped (its SDK's attribute count limit): the span's
    ``dropped_attributes_count`` and its events'."""
    dropped_events: int = 0
    """Events the sender dropped (``dropped_events_count``)."""
    parent_remote: bool = False
    """The parent is in another process (the trace was continued from an upstream service, a
    ``traceparent`` header): OTLP span flags ``0x100 | 0x200``."""

    @property
    def is_root(self) -> bool:
        """True for a span without a parent, or whose parent is remote (the root of what this
        trace did here: its parent is not sent by this sender)."""
        return self.parent_span_id is None or self.parent_remote

    def to_dict(self) -> dict[str, Any]:
        """The span as a JSON-ready dict (what :meth:`from_dict` reads)."""
        return {
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "parent_span_id": self.parent_span_id,
            "name": self.name,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "kind": self.kind,
            "status_code": self.status_code,
            "status_message": self.status_message,
            "attributes": self.attributes,
            "events": self.events,
            "resource": self.resource,
            "scope": self.scope,
            **({"dropped_attributes": self.dropped_attributes} if self.dropped_attributes else {}),
            **({"dropped_events": self.dropped_events} if self.dropped_events else {}),
            **({"parent_remote": True} if self.parent_remote else {}),
        }

    def record(self) -> SpanRecord:
        """The span as the server stages it (its JSON: :meth:`to_dict`)."""
        return SpanRecord(
            trace_id=self.trace_id,
            span_id=self.span_id,
            root_ended=self.is_root and self.end_ns is not None,
            doc=to_json(self.to_dict()).decode(),
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OtlpSpan:
        """Rebuild a span from :meth:`to_dict`'s output, or from the undecoded form
        :func:`span_records_from_protobuf` stages (``{"otlp_pb": BASE64, "resource", "scope"}``).
        """
        if "otlp_pb" in data:
            return _pb_staged(data)
        return cls(
            trace_id=data["trace_id"],
            span_id=data["span_id"],
            parent_span_id=data.get("parent_span_id"),
            name=data.get("name") or "",
            start_ns=data.get("start_ns"),
            end_ns=data.get("end_ns"),
            kind=data.get("kind") or 0,
            status_code=data.get("status_code") or 0,
            status_message=data.get("status_message") or "",
            attributes=dict(data.get("attributes") or {}),
            events=list(data.get("events") or []),
            resource=dict(data.get("resource") or {}),
            scope=data.get("scope"),
            dropped_attributes=data.get("dropped_attributes") or 0,
            dropped_events=data.get("dropped_events") or 0,
            parent_remote=bool(data.get("parent_remote")),
        )


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """A span as the server stages it until its trace is complete: its keys, whether it is an
    ended root span, and its JSON (what :meth:`OtlpSpan.from_dict` reads back)."""

    trace_id: str
    span_id: str
    root_ended: bool
    doc: str


# -- OTLP/JSON decoding -------------------------------------------------------------------------


def _get(obj: Mapping[str, Any], camel: str, snake: str) -> Any:
    value = obj.get(camel)
    return obj.get(snake) if value is None else value


def _bad(reason: str, where: str) -> FormatError:
    return FormatError(reason, field=where)


def _hex_id(value: Any, width: int, where: str, *, optional: bool = False) -> str | None:
    """An id in hex (the OTLP/JSON encoding) or base64 (protobuf's JSON mapping), as hex."""
    if value is None or value == "":
        if optional:
            return None
        raise _bad("missing id", where)
    if not isinstance(value, str):
        raise _bad(f"an id must be a string, got {type(value).__name__}", where)
    text = value.strip().lower()
    if len(text) == width * 2 and all(c in "0123456789abcdef" for c in text):
        raw = bytes.fromhex(text)
    else:
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) != width:
            raise _bad(f"not a {width}-byte id in hex or base64: {value!r}", where)
    if raw == bytes(width):
        if optional:
            return None
        raise _bad("an id of all zeros is invalid", where)
    return raw.hex()


def _nanos(value: Any, where: str) -> int | None:
    if value is None or value == "" or value == 0 or value == "0":
        return None
    if isinstance(value, bool):
        raise _bad("a time must be an integer of nanoseconds", where)
    try:
        nanos = int(value)
    except (TypeError, ValueError):
        raise _bad(f"a time must be an integer of nanoseconds, got {value!r}", where) from None
    if nanos < 0 or nanos > 2**63:
        raise _bad(f"time out of range: {value!r}", where)
    return nanos


def _enum(value: Any, names: Mapping[str, int], where: str) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        if value in names:
            return names[value]
        if value.isdigit():
            return int(value)
        raise _bad(f"unknown value {value!r}", where)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise _bad(f"expected an enum, got {value!r}", where)


_MAX_DEPTH = 64
"""How deep arrays and kvlists may nest in one OTLP/JSON attribute value. Deeper would not be
read back from the staging row (its JSON parser stops at 200 levels) and would stall the build
of every run; protobuf (at most 100 message levels, 3 a kvlist level) cannot carry it either."""


def _any_value(value: Any, where: str, depth: int = 0) -> Any:
    """An OTLP/JSON ``AnyValue`` as a Python value."""
    if depth > _MAX_DEPTH:
        raise _bad(f"an attribute value nested deeper than {_MAX_DEPTH} levels", where)
    if not isinstance(value, Mapping):
        raise _bad("an attribute value must be an object (AnyValue)", where)
    if not value:
        return None
    for key in ("stringValue", "string_value"):
        if key in value:
            text = value[key]
            if not isinstance(text, str):
                raise _bad("stringValue must be a string", where)
            return text
    for key in ("boolValue", "bool_value"):
        if key in value:
            return bool(value[key])
    for key in ("intValue", "int_value"):
        if key in value:
            try:
                return int(value[key])
            except (TypeError, ValueError):
                raise _bad(f"intValue is not an integer: {value[key]!r}", where) from None
    for key in ("doubleValue", "double_value"):
        if key in value:
            raw = value[key]
            if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
                raise _bad(f"doubleValue is not a number: {raw!r}", where)
            try:
                return _double(float(raw))
            except ValueError:
                raise _bad(f"doubleValue is not a number: {raw!r}", where) from None
    for key in ("arrayValue", "array_value"):
        if key in value:
            items = (value[key] or {}).get("values") or []
            if not isinstance(items, list):
                raise _bad("arrayValue.values must be a list", where)
            return [_any_value(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(items)]
    for key in ("kvlistValue", "kvlist_value"):
        if key in value:
            return _key_values((value[key] or {}).get("values") or [], where, depth + 1)
    for key in ("bytesValue", "bytes_value"):
        if key in value:
            return value[key]  # kept as its base64 text
    raise _bad(f"unknown AnyValue type {sorted(value)!r}", where)


def _double(number: float) -> float | str:
    """A double attribute as stored: NaN and the infinities, which JSON cannot hold (a store
    would write them as null), kept as their OTLP/JSON spellings."""
    if math.isfinite(number):
        return number
    if math.isnan(number):
        return "NaN"
    return "Infinity" if number > 0 else "-Infinity"


def _count(value: Any, where: str) -> int:
    """A ``dropped_*_count`` (uint32: a number, or its decimal string)."""
    if value is None:
        return 0
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _bad("expected a count (a whole number, 0 or more)", where)
    return value


def _key_values(items: Any, where: str, depth: int = 0) -> dict[str, Any]:
    if not isinstance(items, list):
        raise _bad("attributes must be a list of {key, value}", where)
    out: dict[str, Any] = {}
    for i, item in enumerate(items):
        if not isinstance(item, Mapping) or not isinstance(item.get("key"), str):
            raise _bad("an attribute must be an object with a string key", f"{where}[{i}]")
        out[item["key"]] = _any_value(item.get("value") or {}, f"{where}.{item['key']}", depth)
    return out


def spans_from_json(document: Any, rejected: list[FormatError] | None = None) -> list[OtlpSpan]:
    """Decode an OTLP/JSON ``ExportTraceServiceRequest`` (already parsed from JSON).

    Args:
        document: the parsed JSON.
        rejected: when given, a span that cannot be read is left out and its error appended
            here (a partial success) instead of failing the whole request.

    Raises:
        FormatError: the document does not have the OTLP shape; ``field`` is the path of the
            first bad value (``resourceSpans[0].scopeSpans[1].spans[3].traceId``).
    """
    if not isinstance(document, Mapping):
        raise _bad("an OTLP/JSON request must be an object with resourceSpans", "$")
    resource_spans = _get(document, "resourceSpans", "resource_spans")
    if resource_spans is None:  # an empty request (protobuf's JSON mapping leaves it out)
        return []
    if not isinstance(resource_spans, list):
        raise _bad("resourceSpans must be a list", "resourceSpans")
    out: list[OtlpSpan] = []
    for r, rs in enumerate(resource_spans):
        where_r = f"resourceSpans[{r}]"
        if not isinstance(rs, Mapping):
            raise _bad("must be an object", where_r)
        resource = rs.get("resource") or {}
        if not isinstance(resource, Mapping):
            raise _bad("must be an object", f"{where_r}.resource")
        res_attrs = _key_values(resource.get("attributes") or [], f"{where_r}.resource.attributes")
        _no_surrogates(res_attrs, f"{where_r}.resource.attributes")
        scope_spans = _get(rs, "scopeSpans", "scope_spans")
        if scope_spans is None:  # the pre-1.0 name
            scope_spans = _get(rs, "instrumentationLibrarySpans", "instrumentation_library_spans")
        if not isinstance(scope_spans or [], list):
            raise _bad("must be a list", f"{where_r}.scopeSpans")
        for s, ss in enumerate(scope_spans or []):
            where_s = f"{where_r}.scopeSpans[{s}]"
            if not isinstance(ss, Mapping):
                raise _bad("must be an object", where_s)
            scope = ss.get("scope") or _get(ss, "instrumentationLibrary", "instrumentation_library")
            scope_name = scope.get("name") if isinstance(scope, Mapping) else None
            _no_surrogates(scope_name, f"{where_s}.scope.name")
            spans = ss.get("spans") or []
            if not isinstance(spans, list):
                raise _bad("must be a list", f"{where_s}.spans")
            for i, span in enumerate(spans):
                try:
                    out.append(_json_span(span, f"{where_s}.spans[{i}]", res_attrs, scope_name))
                except FormatError as exc:
                    if rejected is None:
                        raise
                    rejected.append(exc)
    return out


def _json_span(span: Any, where: str, resource: dict[str, Any], scope: str | None) -> OtlpSpan:
    if not isinstance(span, Mapping):
        raise _bad("a span must be an object", where)
    name = span.get("name") or ""
    if not isinstance(name, str):
        raise _bad("name must be a string", f"{where}.name")
    status = span.get("status") or {}
    if not isinstance(status, Mapping):
        raise _bad("status must be an object", f"{where}.status")
    events = []
    dropped = _count(
        _get(span, "droppedAttributesCount", "dropped_attributes_count"),
        f"{where}.droppedAttributesCount",
    )
    raw_events = span.get("events") or []
    if not isinstance(raw_events, list):
        raise _bad("events must be a list", f"{where}.events")
    for e, event in enumerate(raw_events):
        where_e = f"{where}.events[{e}]"
        if not isinstance(event, Mapping):
            raise _bad("an event must be an object", where_e)
        dropped += _count(
            _get(event, "droppedAttributesCount", "dropped_attributes_count"),
            f"{where_e}.droppedAttributesCount",
        )
        events.append(
            {
                "name": str(event.get("name") or ""),
                "time_ns": _nanos(_get(event, "timeUnixNano", "time_unix_nano"), where_e),
                "attributes": _key_values(event.get("attributes") or [], f"{where_e}.attributes"),
            }
        )
    message = status.get("message") or ""
    decoded = OtlpSpan(
        trace_id=str(_hex_id(_get(span, "traceId", "trace_id"), 16, f"{where}.traceId")),
        span_id=str(_hex_id(_get(span, "spanId", "span_id"), 8, f"{where}.spanId")),
        parent_span_id=_hex_id(
            _get(span, "parentSpanId", "parent_span_id"), 8, f"{where}.parentSpanId", optional=True
        ),
        name=name,
        start_ns=_nanos(_get(span, "startTimeUnixNano", "start_time_unix_nano"), where),
        end_ns=_nanos(_get(span, "endTimeUnixNano", "end_time_unix_nano"), where),
        kind=_enum(span.get("kind"), _KIND_NAMES, f"{where}.kind"),
        status_code=_enum(status.get("code"), _STATUS_NAMES, f"{where}.status.code"),
        status_message=message if isinstance(message, str) else str(message),
        attributes=_key_values(span.get("attributes") or [], f"{where}.attributes"),
        events=events,
        resource=resource,
        scope=scope if isinstance(scope, str) else None,
        dropped_attributes=dropped,
        dropped_events=_count(
            _get(span, "droppedEventsCount", "dropped_events_count"),
            f"{where}.droppedEventsCount",
        ),
        parent_remote=_count(span.get("flags"), f"{where}.flags") & _REMOTE_PARENT
        == _REMOTE_PARENT,
    )
    _no_surrogates(
        {
            "name": decoded.name,
            "status": {"message": decoded.status_message},
            "attributes": decoded.attributes,
            "events": decoded.events,
        },
        where,
    )
    return decoded


def _no_surrogates(value: Any, where: str) -> None:
    """Refuse a string holding a lone surrogate (JSON can spell ``"\\ud800"``; UTF-8, and so the
    staging row, cannot hold it: the whole request failed with a 500)."""
    path = surrogate_path(value)
    if path is not None:
        raise _bad(SURROGATE_REASON, f"{where}.{path}" if path else where)


# -- protobuf decoding --------------------------------------------------------------------------


def spans_from_protobuf(body: bytes, rejected: list[FormatError] | None = None) -> list[OtlpSpan]:
    """Decode a binary protobuf ``ExportTraceServiceRequest``.

    Raises:
        MissingExtraError: ``opentelemetry-proto`` is not installed (extra ``server``).
        FormatError: the bytes are not a valid request.
    """
    request = _pb_request(body)
    out: list[OtlpSpan] = []
    for r, rs in enumerate(request.resource_spans):
        res_attrs = _pb_key_values(rs.resource.attributes)
        for s, ss in enumerate(rs.scope_spans):
            scope_name = ss.scope.name or None
            for i, span in enumerate(ss.spans):
                where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]"
                try:
                    out.append(_pb_span(span, where, res_attrs, scope_name))
                except FormatError as exc:
                    if rejected is None:
                        raise
                    rejected.append(exc)
    return out


def _pb_request(body: bytes) -> Any:
    """The parsed ``ExportTraceServiceRequest``."""
    try:
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )
    except ImportError:
        raise MissingExtraError("opentelemetry-proto", "server") from None
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise _bad(f"not a protobuf ExportTraceServiceRequest: {exc}", "$") from None
    return request


def span_records_from_protobuf(
    body: bytes, rejected: list[FormatError] | None = None
) -> list[SpanRecord]:
    """What the server stages from a binary protobuf ``ExportTraceServiceRequest``, without
    decoding the spans' attributes (the cheap part of :func:`spans_from_protobuf`): each span's
    ids are checked as :func:`spans_from_protobuf` checks them (a span it would reject is
    rejected here, with the same error), and its record's JSON holds the span's protobuf bytes
    (base64) with its resource and scope, decoded when its trace is built.

    Raises:
        MissingExtraError: ``opentelemetry-proto`` is not installed (extra ``server``).
        FormatError: the bytes are not a valid request.
    """
    request = _pb_request(body)
    out: list[SpanRecord] = []
    b64 = binascii.b2a_base64
    for r, rs in enumerate(request.resource_spans):
        res_attrs = _pb_key_values(rs.resource.attributes)
        for s, ss in enumerate(rs.scope_spans):
            # The span's context, once per scope: `,"resource":{...},"scope":...}`.
            context = {"resource": res_attrs, "scope": ss.scope.name or None}
            tail = "," + to_json(context).decode()[1:]
            for i, span in enumerate(ss.spans):
                trace_id, span_id, parent = span.trace_id, span.span_id, span.parent_span_id
                if (
                    len(trace_id) != 16 or len(span_id) != 8 or trace_id == _ZERO_TRACE
                    or span_id == _ZERO_SPAN or (parent and len(parent) != 8)
                ):  # fmt: skip
                    try:  # the exact error, as spans_from_protobuf reports it
                        _pb_span(span, f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]", {}, None)
                    except FormatError as exc:
                        if rejected is None:
                            raise
                        rejected.append(exc)
                        continue
                # none, all zeros, or in another process (the trace continued from upstream)
                root = not parent.strip(b"\0") or span.flags & _REMOTE_PARENT == _REMOTE_PARENT
                doc = '{"otlp_pb":"' + b64(span.SerializeToString(), newline=False).decode() + '"'
                out.append(
                    SpanRecord(
                        trace_id.hex(), span_id.hex(), root and span.end_time_unix_nano != 0,
                        doc + tail,
                    )
                )  # fmt: skip
    return out


def _pb_staged(data: Mapping[str, Any]) -> OtlpSpan:
    """A span staged by :func:`span_records_from_protobuf`, decoded."""
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    span = Span.FromString(base64.b64decode(data["otlp_pb"]))
    return _pb_span(span, "staged span", dict(data.get("resource") or {}), data.get("scope"))


def _pb_id(raw: bytes, width: int, where: str, *, optional: bool = False) -> str | None:
    if not raw or raw == bytes(len(raw)):
        if optional:
            return None
        raise _bad("missing id", where)
    if len(raw) != width:
        raise _bad(f"an id must be {width} bytes, got {len(raw)}", where)
    return raw.hex()


def _pb_value(value: Any) -> Any:
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_pb_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return _pb_key_values(value.kvlist_value.values)
    if which == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    if which == "double_value":
        return _double(value.double_value)
    return getattr(value, which)


def _pb_key_values(items: Any) -> dict[str, Any]:
    return {kv.key: _pb_value(kv.value) for kv in items}


def _pb_span(span: Any, where: str, resource: dict[str, Any], scope: str | None) -> OtlpSpan:
    return OtlpSpan(
        trace_id=str(_pb_id(span.trace_id, 16, f"{where}.traceId")),
        span_id=str(_pb_id(span.span_id, 8, f"{where}.spanId")),
        parent_span_id=_pb_id(span.parent_span_id, 8, f"{where}.parentSpanId", optional=True),
        name=span.name,
        start_ns=span.start_time_unix_nano or None,
        end_ns=span.end_time_unix_nano or None,
        kind=int(span.kind),
        status_code=int(span.status.code),
        status_message=span.status.message,
        attributes=_pb_key_values(span.attributes),
        events=[
            {
                "name": event.name,
                "time_ns": event.time_unix_nano or None,
                "attributes": _pb_key_values(event.attributes),
            }
            for event in span.events
        ],
        resource=resource,
        scope=scope,
        dropped_attributes=span.dropped_attributes_count
        + sum(event.dropped_attributes_count for event in span.events),
        dropped_events=span.dropped_events_count,
        parent_remote=span.flags & _REMOTE_PARENT == _REMOTE_PARENT,
    )


# -- building runs ------------------------------------------------------------------------------


def traces_from_spans(
    spans: Iterable[OtlpSpan], *, project: str = "default", complete: bool | None = None
) -> list[Trace]:
    """Group spans by trace id and build one run per trace, in order of first appearance.

    Args:
        spans: spans of any number of traces, in any order; a span given twice counts once.
        project: the project of every run.
        complete: passed to :func:`build_trace`.
    """
    groups: dict[str, dict[str, OtlpSpan]] = {}
    for span in spans:
        groups.setdefault(span.trace_id, {})[span.span_id] = span
    return [
        build_trace(list(group.values()), project=project, complete=complete)
        for group in groups.values()
    ]


def _time(nanos: int | None) -> datetime | None:
    return None if nanos is None else from_epoch_us(nanos // 1000)


def _maybe_json(value: Any) -> Any:
    """A JSON string parsed (objects and arrays only); anything else as it is."""
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("{", "[") and text[-1:] in ("}", "]"):
            try:
                return parse_nested_json(text)
            except ValueError:
                return value
    return value


def _unflatten(attrs: Mapping[str, Any], prefix: str) -> Any:
    """``prefix.0.a.b = v`` style flat keys (OpenInference, OpenLLMetry) as nested values:
    integer segments become list positions (in numeric order)."""
    tree: dict[str, Any] = {}
    plen = len(prefix) + 1
    for key, value in attrs.items():
        if not key.startswith(prefix + "."):
            continue
        node = tree
        parts = key[plen:].split(".")
        for part in parts[:-1]:
            nxt = node.get(part)
            if not isinstance(nxt, dict):
                nxt = node[part] = {}
            node = nxt
        node[parts[-1]] = value
    return _lists(tree) if tree else None


def _lists(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    if node and all(k.isdigit() for k in node):
        return [_lists(node[k]) for k in sorted(node, key=int)]
    return {k: _lists(v) for k, v in node.items()}


# A message, normalised: {"role", "content" (text or None), "tool_calls": [{"id", "name",
# "arguments"}], "tool_call_id", "response", "name", "finish_reason", "parts"}.


def _part_text(part: Any) -> str | None:
    if isinstance(part, str):
        return part
    if isinstance(part, Mapping):
        kind = part.get("type")
        if kind in (None, "text", "output_text", "input_text"):
            content = part.get("content", part.get("text"))
            return content if isinstance(content, str) else None
    return None


def _norm_message(raw: Any) -> dict[str, Any] | None:
    """A message from any of the forms the conventions used, normalised (see above)."""
    raw = _maybe_json(raw)
    if isinstance(raw, str):
        return {"role": None, "content": raw, "tool_calls": []}
    if not isinstance(raw, Mapping):
        return None
    message: dict[str, Any] = {"role": raw.get("role"), "content": None, "tool_calls": []}
    # OpenInference: {"message": {"role", "content", "tool_calls": [{"tool_call": {...}}]}}
    if isinstance(raw.get("message"), Mapping) and "role" not in raw:
        inner = _norm_message(raw["message"])
        if inner is not None and raw.get("finish_reason") is not None:
            inner["finish_reason"] = raw.get("finish_reason")
        return inner
    texts: list[str] = []
    reasoning: list[str] = []
    parts = raw.get("parts")
    if isinstance(parts, list):  # the current convention: typed parts
        for part in parts:
            if not isinstance(part, Mapping):
                continue
            kind = part.get("type")
            if kind == "tool_call":
                message["tool_calls"].append(
                    {
                        "id": part.get("id"),
                        "name": part.get("name"),
                        "arguments": _maybe_json(part.get("arguments")),
                    }
                )
            elif kind == "tool_call_response":
                message["tool_call_id"] = part.get("id")
                message["response"] = _maybe_json(part.get("response"))
                message.setdefault("responses", []).append(
                    (part.get("id"), _maybe_json(part.get("response")))
                )
            elif kind == "server_tool_call":  # a built-in tool the provider ran (web search)
                payload = _maybe_json(part.get("server_tool_call"))
                name = part.get("name")
                if name is None and isinstance(payload, Mapping):
                    name = payload.get("type")
                message["tool_calls"].append({"id": part.get("id"), "name": name,
                                              "arguments": payload})  # fmt: skip
                message.setdefault("server_calls", []).append(str(part.get("id")))
            elif kind == "server_tool_call_response":  # its result, shown to the model
                message.setdefault("responses", []).append(
                    (part.get("id"), _maybe_json(part.get("server_tool_call_response")))
                )
            elif kind == "reasoning":
                if isinstance(part.get("content"), str):
                    reasoning.append(part["content"])
            else:
                text = _part_text(part)
                if text is not None:
                    texts.append(text)
                elif kind is not None:
                    message.setdefault("other_parts", []).append(kind)
    content = raw.get("content")
    if content is None:
        content = raw.get("message.content")
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):  # OpenAI-style content parts, or OpenInference contents
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("message_content"), Mapping):
                part = part["message_content"]
            text = _part_text(part)
            if text is not None:
                texts.append(text)
    elif content is not None and not isinstance(content, Mapping):
        texts.append(str(content))
    elif isinstance(content, Mapping):
        texts.append(json.dumps(content, sort_keys=True))
    contents = raw.get("contents")  # OpenInference message.contents.N.message_content.text
    if isinstance(contents, list):
        for part in contents:
            if isinstance(part, Mapping):
                inner = part.get("message_content", part)
                text = _part_text(inner) if isinstance(inner, Mapping) else None
                if text is not None:
                    texts.append(text)
    if texts:
        message["content"] = "\n".join(texts)
    if reasoning:
        message["reasoning"] = "\n".join(reasoning)
    for call in raw.get("tool_calls") or []:
        if isinstance(call, Mapping):
            inner = call.get("tool_call", call)
            function = inner.get("function") if isinstance(inner, Mapping) else None
            if not isinstance(inner, Mapping):
                continue
            if isinstance(function, Mapping):
                name, arguments = function.get("name"), function.get("arguments")
            else:
                name, arguments = inner.get("name"), inner.get("arguments")
            message["tool_calls"].append(
                {"id": inner.get("id"), "name": name, "arguments": _maybe_json(arguments)}
            )
    tool_call_id = raw.get("tool_call_id") or (raw.get("id") if raw.get("role") == "tool" else None)
    if tool_call_id is not None and "tool_call_id" not in message:
        message["tool_call_id"] = tool_call_id
        message["response"] = message["content"]
    for key in ("name", "finish_reason"):
        if raw.get(key) is not None:
            message[key] = raw[key]
    return message


def _messages(value: Any) -> list[dict[str, Any]]:
    value = _maybe_json(value)
    if isinstance(value, Mapping):
        value = value.get("messages", [value])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    out = []
    for raw in value:
        message = _norm_message(raw)
        if message is not None:
            out.append(message)
    return out


_EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


def _event_message(event: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """A legacy message event (``gen_ai.user.message``, ``gen_ai.choice``...): which side of
    the call it belongs to (``input``/``output``) and the message."""
    name = event.get("name")
    attrs = event.get("attributes") or {}
    body: Any = None
    for key in ("gen_ai.event.content", "body", "event.body"):
        if key in attrs:
            body = _maybe_json(attrs[key])
            break
    if body is None:
        body = {k: v for k, v in attrs.items() if not k.startswith("gen_ai.system")}
    if name in _EVENT_ROLES:
        raw = dict(body) if isinstance(body, Mapping) else {"content": body}
        raw.setdefault("role", _EVENT_ROLES[str(name)])
        message = _norm_message(raw)
        return None if message is None else ("input", message)
    if name == "gen_ai.choice":
        raw = body.get("message", body) if isinstance(body, Mapping) else {"content": body}
        raw = dict(raw) if isinstance(raw, Mapping) else {"content": raw}
        raw.setdefault("role", "assistant")
        message = _norm_message(raw)
        if message is not None and isinstance(body, Mapping) and body.get("finish_reason"):
            message["finish_reason"] = body["finish_reason"]
        return None if message is None else ("output", message)
    return None


@dataclass(slots=True)
class _Read:
    """What one span says, read from all the conventions (the attributes used are consumed)."""

    kind: StepKind
    name: str | None
    input: Any = None
    output: Any = None
    error: Any = None
    in_messages: list[dict[str, Any]] = field(default_factory=list)
    out_messages: list[dict[str, Any]] = field(default_factory=list)
    system: list[str] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)
    agent: str | None = None
    call_id: str | None = None
    has_args: bool = False
    has_result: bool = False


_OPERATION_KINDS = {
    "invoke_agent": StepKind.AGENT,
    "create_agent": StepKind.AGENT,
    "invoke_workflow": StepKind.AGENT,
    "chat": StepKind.LLM,
    "text_completion": StepKind.LLM,
    "generate_content": StepKind.LLM,
    "completion": StepKind.LLM,
    "execute_tool": StepKind.TOOL,
    "retrieval": StepKind.RETRIEVAL,
}
_OPENINFERENCE_KINDS = {
    "AGENT": StepKind.AGENT,
    "CHAIN": StepKind.AGENT,
    "LLM": StepKind.LLM,
    "TOOL": StepKind.TOOL,
    "RETRIEVER": StepKind.RETRIEVAL,
    "RERANKER": StepKind.RETRIEVAL,
}
_TRACELOOP_KINDS = {
    "workflow": StepKind.AGENT,
    "agent": StepKind.AGENT,
    "task": StepKind.AGENT,
    "tool": StepKind.TOOL,
}

_TOKENS = (
    (
        "input_tokens",
        (
            "gen_ai.usage.input_tokens",
            "gen_ai.usage.prompt_tokens",
            "llm.token_count.prompt",
            "llm.usage.prompt_tokens",
        ),
    ),
    (
        "output_tokens",
        (
            "gen_ai.usage.output_tokens",
            "gen_ai.usage.completion_tokens",
            "llm.token_count.completion",
            "llm.usage.completion_tokens",
        ),
    ),
    (
        "total_tokens",
        ("gen_ai.usage.total_tokens", "llm.usage.total_tokens", "llm.token_count.total"),
    ),
    (
        "cache_read_tokens",
        (
            "gen_ai.usage.cache_read.input_tokens",
            "gen_ai.usage.cache_read_input_tokens",
            "llm.token_count.prompt_details.cache_read",
        ),
    ),
    (
        "cache_write_tokens",
        (
            "gen_ai.usage.cache_creation.input_tokens",
            "gen_ai.usage.cache_write.input_tokens",
            "gen_ai.usage.cache_creation_input_tokens",
            "llm.token_count.prompt_details.cache_write",
        ),
    ),
    (
        "reasoning_tokens",
        (
            "gen_ai.usage.reasoning.output_tokens",
            "gen_ai.usage.reasoning_tokens",
            "llm.token_count.completion_details.reasoning",
        ),
    ),
)


def _pop(attrs: dict[str, Any], *keys: str) -> Any:
    """The first present value among ``keys`` (all of them are consumed)."""
    found: Any = None
    for key in keys:
        if key in attrs:
            value = attrs.pop(key)
            if found is None:
                found = value
    return found


def _pop_prefix(attrs: dict[str, Any], prefix: str) -> Any:
    value = _unflatten(attrs, prefix)
    if value is not None:
        for key in [k for k in attrs if k.startswith(prefix + ".")]:
            del attrs[key]
    return value


def _kind_of(span: OtlpSpan, attrs: Mapping[str, Any]) -> StepKind:
    operation = attrs.get("gen_ai.operation.name")
    if isinstance(operation, str) and operation in _OPERATION_KINDS:
        return _OPERATION_KINDS[operation]
    oi = attrs.get("openinference.span.kind")
    if isinstance(oi, str) and oi.upper() in _OPENINFERENCE_KINDS:
        return _OPENINFERENCE_KINDS[oi.upper()]
    tl = attrs.get("traceloop.span.kind")
    if isinstance(tl, str) and tl in _TRACELOOP_KINDS:
        return _TRACELOOP_KINDS[tl]
    if attrs.get("llm.request.type") in ("chat", "completion"):
        return StepKind.LLM
    if "gen_ai.tool.name" in attrs:
        return StepKind.TOOL
    if (
        "gen_ai.retrieval.documents" in attrs
        or "gen_ai.retrieval.query.text" in attrs
        or any(k.startswith("retrieval.documents.") for k in attrs)
    ):  # documents without the kind (an SDK at its attribute limit drops the oldest first)
        return StepKind.RETRIEVAL
    if any(k.startswith(("gen_ai.prompt.", "gen_ai.input.messages")) for k in attrs) or (
        "gen_ai.request.model" in attrs
    ):
        return StepKind.LLM
    return StepKind.AGENT


def _read_span(span: OtlpSpan) -> _Read:
    attrs = dict(span.attributes)
    for event in span.events:  # the newer "operation details" event carries message attributes
        for key, value in (event.get("attributes") or {}).items():
            if key in (
                "gen_ai.input.messages",
                "gen_ai.output.messages",
                "gen_ai.system_instructions",
            ):
                attrs.setdefault(key, value)
    kind = _kind_of(span, attrs)
    read = _Read(kind=kind, name=None)
    # -- names
    agent = _pop(attrs, "gen_ai.agent.name", "agent.name")
    read.agent = agent if isinstance(agent, str) else None
    if kind is StepKind.TOOL:
        read.name = _pop(attrs, "gen_ai.tool.name", "tool.name", "traceloop.entity.name")
    elif kind is StepKind.LLM:
        read.name = _pop(attrs, "gen_ai.request.model", "llm.model_name", "gen_ai.response.model")
    elif kind is StepKind.AGENT:
        read.name = read.agent or _pop(attrs, "traceloop.entity.name")
    if not isinstance(read.name, str) or not read.name:
        read.name = span.name or None
    # -- messages, every form
    read.in_messages = _messages(_pop(attrs, "gen_ai.input.messages"))
    read.out_messages = _messages(_pop(attrs, "gen_ai.output.messages"))
    for prefix, target in (
        ("gen_ai.prompt", read.in_messages),
        ("gen_ai.completion", read.out_messages),
        ("llm.input_messages", read.in_messages),
        ("llm.output_messages", read.out_messages),
    ):
        nested = _pop_prefix(attrs, prefix)
        if isinstance(nested, list):
            target.extend(m for m in (_norm_message(x) for x in nested if x) if m)
    legacy_prompt = _pop(attrs, "gen_ai.prompt")  # an old single JSON attribute
    if legacy_prompt is not None and not read.in_messages:
        read.in_messages = _messages(legacy_prompt)
    legacy_completion = _pop(attrs, "gen_ai.completion")
    if legacy_completion is not None and not read.out_messages:
        read.out_messages = _messages(legacy_completion)
    for event in span.events:
        found = _event_message(event)
        if found is not None:
            (read.in_messages if found[0] == "input" else read.out_messages).append(found[1])
    system = _pop(attrs, "gen_ai.system_instructions")
    for message in _messages(system) if system is not None else []:
        if message.get("content"):
            read.system.append(message["content"])
    for message in read.in_messages:
        if message.get("role") in ("system", "developer") and message.get("content"):
            read.system.append(message["content"])
    # -- input / output values (OpenInference, Traceloop)
    value_in = _pop(attrs, "input.value", "traceloop.entity.input")
    value_out = _pop(attrs, "output.value", "traceloop.entity.output")
    if attrs.get("input.mime_type") == "application/json" or not isinstance(value_in, str):
        value_in = _maybe_json(value_in)
    if attrs.get("output.mime_type") == "application/json" or not isinstance(value_out, str):
        value_out = _maybe_json(value_out)
    # -- per kind
    if kind is StepKind.TOOL:
        args = _pop(
            attrs, "gen_ai.tool.call.arguments", "tool.parameters", "tool_call.function.arguments"
        )
        result = _pop(attrs, "gen_ai.tool.call.result")
        read.call_id = _pop(attrs, "gen_ai.tool.call.id", "tool_call.id")
        read.has_args = args is not None or value_in is not None
        read.has_result = result is not None or value_out is not None
        read.input = _maybe_json(args) if args is not None else value_in
        read.output = _maybe_json(result) if result is not None else value_out
    elif kind is StepKind.RETRIEVAL:
        query = _pop(attrs, "gen_ai.retrieval.query.text")
        read.input = {"query": query} if query is not None else value_in
        docs = _maybe_json(_pop(attrs, "gen_ai.retrieval.documents"))
        oi_docs = _pop_prefix(attrs, "retrieval.documents")
        documents: list[Any] = []
        if isinstance(docs, list):
            documents.extend(docs)
        if isinstance(oi_docs, list):
            for doc in oi_docs:
                doc = doc.get("document", doc) if isinstance(doc, Mapping) else doc
                documents.append(doc)
        if documents:
            read.output = documents
            missing = [
                d
                for d in documents
                if isinstance(d, Mapping)
                and not any(d.get(k) not in (None, "") for k in ("content", "text", "page_content"))
            ]
            if missing:
                read.attrs["truncated"] = True
                read.attrs["truncated_reason"] = (
                    f"{len(missing)} of {len(documents)} retrieved documents were sent without "
                    "their content (ids and scores only): claims from them cannot be verified"
                )
        else:
            read.output = value_out
    elif kind is StepKind.LLM:
        read.input = [_public(m) for m in read.in_messages] or value_in
        reply = _assistant(read.out_messages)
        if reply is not None:
            out: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
            if reply.get("tool_calls"):
                out["tool_calls"] = reply["tool_calls"]
            read.output = out
        else:
            read.output = value_out
    else:
        read.input = (
            value_in if value_in is not None else [_public(m) for m in read.in_messages] or None
        )
        reply = _assistant(read.out_messages)
        read.output = reply.get("content") if reply is not None else value_out
    # -- usage and model details
    for token_key, names in _TOKENS:
        count = _pop(attrs, *names)
        if isinstance(count, int | float) and not isinstance(count, bool):
            read.attrs[token_key] = int(count)
    if "total_tokens" not in read.attrs and {"input_tokens", "output_tokens"} <= read.attrs.keys():
        read.attrs["total_tokens"] = read.attrs["input_tokens"] + read.attrs["output_tokens"]
    model = _pop(attrs, "gen_ai.response.model", "llm.model_name")
    if kind is StepKind.LLM:
        read.attrs["model"] = model or read.name
    elif model is not None:
        read.attrs["model"] = model
    provider = _pop(attrs, "gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")
    if provider is not None:
        read.attrs["provider"] = provider
    reasons = _pop(attrs, "gen_ai.response.finish_reasons", "llm.response.finish_reason")
    reason_list: list[Any] = (
        list(reasons) if isinstance(reasons, list) else [] if reasons is None else [reasons]
    )
    for message in read.out_messages:
        if message.get("finish_reason") is not None:
            reason_list.append(message["finish_reason"])
    if reason_list:
        read.attrs["finish_reasons"] = list(dict.fromkeys(str(r) for r in reason_list))
    # -- error
    error_type = _pop(attrs, "error.type")
    if span.status_code == _STATUS_ERROR:
        read.error = span.status_message or error_type or "error"
        for event in span.events:
            if event.get("name") == "exception":
                e_attrs = event.get("attributes") or {}
                e_message = e_attrs.get("exception.message")
                e_type = e_attrs.get("exception.type")
                if e_message or e_type:
                    read.error = ": ".join(str(x) for x in (e_type, e_message) if x)
                    break
    elif error_type is not None:
        read.error = str(error_type)
    for key in ("input.mime_type", "output.mime_type"):
        attrs.pop(key, None)
    read.attrs.update(attrs)
    lost = _dropped(span)
    if lost:
        earlier = read.attrs.get("truncated_reason")
        read.attrs["truncated"] = True
        read.attrs["truncated_reason"] = f"{earlier}; {lost}" if earlier else lost
    return read


def _lost(span: OtlpSpan) -> dict[str, Any]:
    """The truncation attributes of a step made from a span's messages (a system or user step)
    when the span's sender dropped some of what it held."""
    lost = _dropped(span)
    return {"truncated": True, "truncated_reason": lost} if lost else {}


def _dropped(span: OtlpSpan) -> str | None:
    """Why a span's step is incomplete when its sender dropped attributes or events."""
    lost = [
        f"{n} {what}{'' if n == 1 else 's'}"
        for n, what in ((span.dropped_attributes, "attribute"), (span.dropped_events, "event"))
        if n
    ]
    if not lost:
        return None
    return (
        f"the sender dropped {' and '.join(lost)} of this span (its SDK's limits, e.g. 128 "
        "attributes a span): claims from what they held cannot be verified"
    )


def _public(message: Mapping[str, Any]) -> dict[str, Any]:
    """A normalised message as a step shows it: no empty or internal keys."""
    return {
        k: v
        for k, v in message.items()
        if k not in ("responses", "server_calls")
        and not (k == "tool_calls" and not v)
        and not (k == "response" and message.get("content") == v)
    }


def _assistant(messages: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The last assistant (or role-less) message of a list."""
    for message in reversed(messages):
        if message.get("role") in (None, "assistant", "model"):
            return message
    return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def build_trace(
    spans: Sequence[OtlpSpan], *, project: str = "default", complete: bool | None = None
) -> Trace:
    """Build the run of one trace from its spans (in any order; duplicates by span id count once).

    Args:
        spans: spans of a single trace.
        project: the run's project.
        complete: ``False`` marks a run built before its root span arrived (the server does
            this after its idle time): ``metadata.otel_incomplete = true``. ``None`` (the
            default), or ``True`` when no span of the trace is a root, marks it when there is
            no root.

    Raises:
        ValueError: ``spans`` is empty or holds spans of more than one trace.
    """
    if not spans:
        raise ValueError("no spans")
    unique = {span.span_id: span for span in spans}
    trace_ids = {span.trace_id for span in unique.values()}
    if len(trace_ids) != 1:
        raise ValueError("spans of more than one trace")
    trace_id = next(iter(trace_ids))

    def order(span: OtlpSpan) -> tuple[int, int, str]:
        depth = 0
        seen = {span.span_id}
        parent = span.parent_span_id
        while parent is not None and parent in unique and parent not in seen:
            seen.add(parent)
            depth += 1
            parent = unique[parent].parent_span_id
        return (span.start_ns if span.start_ns is not None else 0, depth, span.span_id)

    ordered = sorted(unique.values(), key=order)
    roots = [s for s in ordered if s.parent_span_id is None] or [
        s for s in ordered if s.parent_remote and s.parent_span_id not in unique
    ]
    root = roots[0] if roots else None
    if complete is None or root is None:  # (a remote-parented span ended, its parent here)
        complete = root is not None
    top = root or ordered[0]
    reads = {span.span_id: _read_span(span) for span in ordered}

    # Tool calls that appear in messages: arguments and responses by call id.
    call_args: dict[str, dict[str, Any]] = {}
    call_results: dict[str, Any] = {}
    for span in ordered:
        r = reads[span.span_id]
        for message in [*r.in_messages, *r.out_messages]:
            for call in message.get("tool_calls") or []:
                if call.get("id"):
                    call_args.setdefault(str(call["id"]), call)
            for call_id, response in message.get("responses") or []:
                if call_id is not None:
                    call_results.setdefault(str(call_id), response)
            if message.get("role") == "tool" and message.get("tool_call_id") is not None:
                call_results.setdefault(str(message["tool_call_id"]), message.get("response"))
    tool_span_calls = {
        str(reads[s.span_id].call_id) for s in ordered if reads[s.span_id].call_id is not None
    }

    seen_calls: set[str] = set()

    def message_calls(span: OtlpSpan, r: _Read, *, server: bool) -> list[Step]:
        """Tool steps of the calls in a model's reply that no execute_tool span recorded and
        whose result is in a message: the provider's own (``server``) or the client's."""
        parent = span.parent_span_id if span.parent_span_id in unique else None
        if server:  # run inside the model call
            parent = span.span_id
        out: list[Step] = []
        for message in r.out_messages:
            server_calls = message.get("server_calls") or ()
            for call in message.get("tool_calls") or []:
                call_id = str(call.get("id")) if call.get("id") is not None else None
                if call_id is None or call_id in tool_span_calls or call_id in seen_calls:
                    continue
                if call_id not in call_results or (call_id in server_calls) != server:
                    continue
                seen_calls.add(call_id)
                attributes: dict[str, Any] = {"tool_call_id": call_id, "result_from": "message"}
                if server:
                    attributes["server_tool"] = True
                attributes.update(_lost(span))
                out.append(
                    Step(
                        id=f"{span.span_id}.call.{call_id}",
                        parent_id=parent,
                        kind=StepKind.TOOL,
                        name=call.get("name"),
                        input=call.get("arguments"),
                        output=call_results[call_id],
                        started_at=_time(span.start_ns if server else span.end_ns),
                        attributes=attributes,
                    )
                )
        return out

    reply_calls = {
        str(call["id"])
        for s in ordered
        for message in reads[s.span_id].out_messages
        for call in message.get("tool_calls") or []
        if call.get("id") is not None
    }
    unnamed_tools = [  # execute_tool spans without a call id: (name, result)
        (reads[s.span_id].name, reads[s.span_id].output)
        for s in ordered
        if reads[s.span_id].kind is StepKind.TOOL and reads[s.span_id].call_id is None
    ]

    def history_calls(span: OtlpSpan, r: _Read) -> list[Step]:
        """Tool steps of the results a model was shown in its input whose call no span of the
        trace made (an earlier turn of the conversation, sent again as its history)."""
        calls: dict[str, Mapping[str, Any]] = {}
        for message in r.in_messages:
            for call in message.get("tool_calls") or []:
                if call.get("id") is not None:
                    calls.setdefault(str(call["id"]), call)
        out: list[Step] = []
        for message in r.in_messages:
            pairs = list(message.get("responses") or [])
            if not pairs and message.get("role") == "tool":
                pairs = [(message.get("tool_call_id"), message.get("response"))]
            for raw_id, response in pairs:
                call_id = None if raw_id is None else str(raw_id)
                if call_id is None or call_id in tool_span_calls or call_id in seen_calls:
                    continue
                if call_id in reply_calls:  # a span's reply made it: a step after that span
                    continue
                call = calls.get(call_id) or {}
                name = call.get("name") or message.get("name")
                if (name, response) in unnamed_tools:  # recorded by a span, without its id
                    continue
                seen_calls.add(call_id)
                attributes: dict[str, Any] = {
                    "tool_call_id": call_id,
                    "result_from": "message",
                    "from_history": True,
                    **_lost(span),
                }
                out.append(
                    Step(
                        id=f"{span.span_id}.call.{call_id}",
                        parent_id=span.span_id,
                        kind=StepKind.TOOL,
                        name=name,
                        input=call.get("arguments"),
                        output=response,
                        started_at=_time(span.start_ns),
                        attributes=attributes,
                    )
                )
        return out

    steps: list[Step] = []
    seen_system: set[str] = set()
    seen_user: set[str] = set()
    run_input: Any = None
    root_read = reads[top.span_id]
    for span in ordered:
        r = reads[span.span_id]
        parent = span.parent_span_id if span.parent_span_id in unique else None
        start, end = _time(span.start_ns), _time(span.end_ns)
        for text in r.system:
            if text not in seen_system:
                seen_system.add(text)
                steps.append(
                    Step(
                        id=f"{span.span_id}.system{len(seen_system)}",
                        parent_id=span.span_id,
                        kind=StepKind.SYSTEM,
                        output=text,
                        started_at=start,
                        attributes=_lost(span),
                    )
                )
        if r.kind is StepKind.LLM:
            for message in r.in_messages:
                user_text = message.get("content")
                if message.get("role") == "user" and user_text and user_text not in seen_user:
                    seen_user.add(user_text)
                    if run_input is None:
                        run_input = user_text
                    steps.append(
                        Step(
                            id=f"{span.span_id}.user{len(seen_user)}",
                            parent_id=span.span_id,
                            kind=StepKind.USER,
                            name=message.get("name"),
                            output=user_text,
                            started_at=start,
                            attributes=_lost(span),
                        )
                    )
        if r.kind is StepKind.TOOL and r.call_id is not None:
            seen_calls.add(str(r.call_id))
            if not r.has_args and str(r.call_id) in call_args:
                r.input = call_args[str(r.call_id)].get("arguments")
                r.attrs["arguments_from"] = "message"
            if not r.has_result and str(r.call_id) in call_results:
                r.output = call_results[str(r.call_id)]
                r.attrs["result_from"] = "message"
            r.attrs["tool_call_id"] = r.call_id
        if r.kind is StepKind.LLM:
            steps.extend(history_calls(span, r))
            steps.extend(message_calls(span, r, server=True))
        attributes = dict(r.attrs)
        if span.kind:
            attributes.setdefault("otel_span_kind", span.kind)
        if span.scope:
            attributes.setdefault("otel_scope", span.scope)
        attributes["otel_span_name"] = span.name
        steps.append(
            Step(
                id=span.span_id,
                parent_id=parent,
                kind=r.kind,
                name=r.name,
                input=r.input,
                output=r.output,
                error=r.error,
                started_at=start,
                ended_at=end,
                attributes=attributes,
            )
        )
        # Tool calls this model asked for that no execute_tool span recorded: after the
        # call (their results are in a later request); a built-in tool the provider ran in this
        # call (server_tool_call) before it, as the reply it ends with was written after it.
        if r.kind is StepKind.LLM:
            steps.extend(message_calls(span, r, server=False))

    # Run fields.
    agent = root_read.agent
    if agent is None:
        agent = next((reads[s.span_id].agent for s in ordered if reads[s.span_id].agent), None)
    if agent is None and root_read.kind is StepKind.AGENT and root_read.name != top.name:
        agent = root_read.name  # a name of its own (traceloop.entity.name), not the span's
    if agent is None:
        agent = top.resource.get("service.name")
    if root_read.input is not None and root_read.kind is not StepKind.LLM:
        run_input = root_read.input
        if isinstance(run_input, list) and run_input and isinstance(run_input[0], dict):
            users = [m.get("content") for m in run_input if m.get("role") == "user"]
            run_input = users[-1] if users else _text(run_input)
    output: Any = root_read.output if root_read.kind is not StepKind.LLM else None
    if output in (None, ""):
        for step in reversed(steps):
            if step.kind is StepKind.LLM and isinstance(step.output, dict):
                content = step.output.get("content")
                if content not in (None, ""):
                    output = content
                    break
            if step.kind is StepKind.AGENT and step.output not in (None, ""):
                output = step.output
                break
    metadata: dict[str, Any] = {"otel_trace_id": trace_id}
    links: dict[str, str] = {}
    for source in (top.resource, top.attributes):
        for key, value in source.items():
            if key.startswith("agentlens.link."):
                links[key[len("agentlens.link.") :]] = str(value)
            elif key.startswith("agentlens.metadata."):
                metadata[key[len("agentlens.metadata.") :]] = value
    release = top.resource.get("service.version") or top.attributes.get("agentlens.release")
    if release is not None:
        metadata.setdefault("release", str(release))
    if top.resource.get("service.name") is not None:
        metadata.setdefault("service", top.resource["service.name"])
    conversation = top.attributes.get("gen_ai.conversation.id") or top.attributes.get("session.id")
    if conversation is not None:
        metadata.setdefault("conversation_id", conversation)
    if not complete:
        metadata["otel_incomplete"] = True
    starts = [s.start_ns for s in ordered if s.start_ns is not None]
    ends = [s.end_ns for s in ordered if s.end_ns is not None]
    started = top.start_ns if top.start_ns is not None else (min(starts) if starts else None)
    ended = (root.end_ns if root is not None else None) or (max(ends) if ends else None)
    failed = top.status_code == _STATUS_ERROR
    return Trace(
        id=trace_id,
        project=project,
        agent=agent if isinstance(agent, str) else None,
        name=top.name or None,
        status="error" if failed else "ok",
        started_at=_time(started),
        ended_at=_time(ended),
        input=run_input,
        output=output,
        metadata=metadata,
        links=links,
        steps=steps,
    )


# -- the otlp-json file format ------------------------------------------------------------------


def read(path: Path) -> Iterator[Trace]:
    """Read an OTLP/JSON file: one ``ExportTraceServiceRequest`` document, or JSON Lines of them
    (what the OpenTelemetry Collector's file exporter writes). The spans of each trace, wherever
    they are in the file, become one run; runs come out in order of their first span.

    Raises:
        FormatError: the file cannot be read or is not OTLP/JSON (the message names the file,
            line and field).
    """
    from agentlens.ingest._agentlog import open_binary, source_name

    path = Path(path)
    name = source_name(path)
    spans: list[OtlpSpan] = []
    with open_binary(path) as handle:
        data = read_record(handle, name)
    try:
        text = data.decode("utf-8").lstrip("\ufeff")
    except UnicodeDecodeError as exc:
        raise FormatError(f"not UTF-8 text: {exc}", source=name) from None
    documents: list[tuple[int | None, Any, str | bytes]]
    try:
        documents = [(None, json.loads(text), data)]
    except ValueError:
        if "\n" not in text.strip():
            raise FormatError(
                "not JSON (an OTLP/JSON request, or JSON Lines of them)", source=name
            ) from None
        documents = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                documents.append((number, json.loads(line), line))
            except ValueError as exc:
                raise FormatError(
                    f"not JSON: {json_error_reason(exc)}", source=name, line=number
                ) from None
    for line_number, document, raw_doc in documents:
        check_nonfinite(document, raw_doc, source=name, line=line_number)
        items = document if isinstance(document, list) else [document]
        for item in items:
            try:
                spans.extend(spans_from_json(item))
            except FormatError as exc:
                raise FormatError(
                    exc.reason, source=name, line=line_number, field=exc.field
                ) from None
    yield from traces_from_spans(spans)
