"""The ASGI app: OTLP/HTTP ingestion, the JSON API, health and metrics (see docs/server.md).

:func:`create_app` builds a FastAPI app over one store, with the dashboard
(:mod:`agentlens.dashboard`) mounted on the paths left free for it (``/``, ``/runs``,
``/content``, ``/review``, ``/trends``, ``/login``, ``/logout``, ``/static``).
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import logging
import math
import re
import time
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from agentlens.errors import AgentlensError, ConfigError, FormatError, RunNotFoundError
from agentlens.ingest._checks import may_be_nonfinite, nonfinite_problem, storable_problem
from agentlens.ingest.otlp import span_records_from_protobuf, spans_from_json
from agentlens.ingest.trace_file import contract_problem, duplicate_step
from agentlens.model import Trace
from agentlens.model._time import parse_since
from agentlens.server._backlog import CachedCount
from agentlens.server._ingest import Ingestor, Metrics, Overloaded, WriteFailed
from agentlens.server._keys import KeyChecker
from agentlens.store import RunFilter, open_store
from agentlens.store._server import list_runs_page

__all__ = ["ApiError", "ServerConfig", "create_app"]

logger = logging.getLogger("agentlens.server")

DEFAULT_MAX_BODY = 16 << 20
"""The default request size limit (after decompression): 16 MiB."""


class ApiError(Exception):
    """An error answered with the one error shape ``{"error": {"code", "message"}}``."""

    def __init__(
        self, status: int, code: str, message: str, *, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


class ErrorDetail(BaseModel):
    """What went wrong."""

    code: str
    """A stable machine-readable code (``invalid_request``, ``unauthorized``, ``not_found``...)."""
    message: str
    """One line for a human, naming what and where."""


class ErrorBody(BaseModel):
    """The body of every 4xx and 5xx response."""

    error: ErrorDetail


_STATUS_CODES = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "overloaded",
    500: "internal_error",
    503: "unavailable",
}
_ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": name.replace("_", " ")}
    for code, name in _STATUS_CODES.items()
    if code != 422
}


def _error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message}}, status_code=status, headers=headers
    )


@dataclass(frozen=True)
class ServerConfig:
    """Options of :func:`create_app` (and ``agentlens serve``)."""

    max_body_bytes: int = DEFAULT_MAX_BODY
    """The largest request body accepted, counted after decompression (413 beyond)."""
    idle_timeout_s: float = 300.0
    """A trace whose root span never arrives is stored after this long without a new span."""
    retention_s: float = 600.0
    """Spans of a built trace are kept this long so that late spans rebuild the run."""
    max_pending_spans: int = 20_000
    """Spans (and runs) waiting for the writer before requests get 429."""
    review: bool = True
    """Run the review pipeline on every run that arrives."""
    background_process: bool = False
    """Build runs from staged spans and review them in a child process over the same store
    (:mod:`agentlens.server._background`) instead of threads of the server's process; needs a
    store another process can open (a file or PostgreSQL). ``agentlens serve`` turns it on for
    such stores."""

    def __post_init__(self) -> None:
        """Raises ConfigError for a limit that makes no sense (a body of -5 bytes at most)."""
        for name in ("max_body_bytes", "max_pending_spans"):
            count = getattr(self, name)
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise ConfigError(f"{name} {count!r}: must be a whole number, 1 or more")
        for name, least in (("idle_timeout_s", "more than 0"), ("retention_s", "0 or more")):
            seconds = getattr(self, name)
            number = isinstance(seconds, int | float) and not isinstance(seconds, bool)
            if not (number and math.isfinite(seconds)) or not (
                seconds > 0 or (seconds == 0 and least == "0 or more")
            ):
                raise ConfigError(f"{name} {seconds!r}: must be a number of seconds, {least}")


# -- request helpers ----------------------------------------------------------------------------


async def _body(request: Request, limit: int) -> bytes:
    """The request body, decompressed when gzip (every member of it: RFC 1952 lets a gzip
    stream hold several, one after the other) or deflate; 413 when it (or its decompressed
    form) is larger than ``limit``."""
    length = request.headers.get("content-length")
    encoding = (request.headers.get("content-encoding") or "identity").strip().lower()
    if length is not None and length.isdigit() and int(length) > limit:
        raise ApiError(413, "too_large", f"the request body is larger than {limit} bytes")
    if encoding not in ("identity", "gzip", "deflate"):
        raise ApiError(
            415, "unsupported_media_type", f"unsupported Content-Encoding {encoding!r}; use gzip"
        )
    wbits = 31 if encoding == "gzip" else 15
    inflater = None if encoding == "identity" else zlib.decompressobj(wbits=wbits)
    out = bytearray()
    received = 0
    try:
        async for chunk in request.stream():
            received += len(chunk)
            if received > limit:
                raise ApiError(413, "too_large", f"the request body is larger than {limit} bytes")
            if inflater is None:
                out += chunk
                continue
            data = chunk
            while data:
                if inflater.eof:  # the member ended: the next begins (deflate has one)
                    if encoding != "gzip":
                        raise ApiError(
                            400, "invalid_request", f"the {encoding} body has data past its end"
                        )
                    inflater = zlib.decompressobj(wbits=wbits)
                out += inflater.decompress(data, limit + 1 - len(out))
                if len(out) > limit or inflater.unconsumed_tail:
                    raise ApiError(
                        413,
                        "too_large",
                        f"the decompressed request body is larger than {limit} bytes",
                    )
                data = inflater.unused_data if inflater.eof else b""
        if inflater is not None:
            out += inflater.flush()
            if len(out) > limit:
                raise ApiError(
                    413, "too_large", f"the decompressed request body is larger than {limit} bytes"
                )
            if not inflater.eof:
                raise ApiError(400, "invalid_request", f"the {encoding} body is truncated")
    except zlib.error as exc:
        raise ApiError(400, "invalid_request", f"the body is not valid {encoding}: {exc}") from None
    return bytes(out)


def _json(body: bytes, what: str) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, "invalid_request", f"{what} is not valid JSON: {exc}") from None
    except RecursionError:  # a permanent fault of the body (a 500 would read as the server's)
        raise ApiError(400, "invalid_request", f"{what} is nested too deeply") from None


def _is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    if host in ("localhost", "testclient"):
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _parse_time(value: str | None, name: str, now: datetime) -> datetime | None:
    """A query parameter that is a duration back from now (``7d``, ``36h``) or an ISO time,
    read by the CLI's parser (:func:`agentlens.model._time.parse_since`)."""
    if value is None or value == "":
        return None
    try:
        return parse_since(value, name, now)
    except ConfigError as exc:
        raise ApiError(400, "invalid_request", str(exc)) from None


def _encode_cursor(cursor: tuple[int, str] | None) -> str | None:
    if cursor is None:
        return None
    raw = json.dumps([cursor[0], cursor[1]], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(text: str | None) -> tuple[int, str] | None:
    if not text:
        return None
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        value = json.loads(raw)
        if (
            isinstance(value, list)
            and len(value) == 2
            and isinstance(value[0], int)
            and -(2**63) <= value[0] < 2**63  # a time the store can compare with
            and isinstance(value[1], str)
        ):
            return value[0], value[1]
    except (ValueError, binascii.Error, UnicodeDecodeError):
        pass
    raise ApiError(400, "invalid_request", "cursor: not a cursor this server returned")


# -- response models (for the OpenAPI document) -------------------------------------------------


class RunSummaryOut(BaseModel):
    """A run without its steps, with its review flags."""

    id: str
    project: str
    agent: str | None
    name: str | None
    status: str
    started_at: datetime | None
    ended_at: datetime | None
    step_count: int
    has_output: bool
    metadata: dict[str, Any]
    hallucination_detected: bool
    """True when the run's current scores flag it."""
    hallucination_reason: str | None
    """The most important finding's one-line detail, when flagged."""
    failure_modes: list[str]
    """The failure modes behind the flag, most important first."""
    flag_state: str | None
    """``flagged``, ``clean``, ``unverifiable``, ``error``; ``None`` while not scored."""
    reviewed_at: datetime | None
    """When the review pipeline reviewed the run; ``None`` while pending review."""


class RunsPage(BaseModel):
    """One page of runs, newest first; ``next`` is the cursor of the next page (``None`` at
    the end)."""

    runs: list[RunSummaryOut]
    next: str | None


class RunDetail(BaseModel):
    """A run in the trace format, with its scores (findings inside) and flags."""

    run: dict[str, Any]
    scores: list[dict[str, Any]]
    flags: dict[str, Any]


class RunsWritten(BaseModel):
    """What ``POST /api/runs`` stored."""

    stored: int
    ids: list[str]
    rejected: list[dict[str, Any]]


class VerdictIn(BaseModel):
    """A human verdict on a flagged run (every finding) or on its finding ``finding``."""

    verdict: Literal["confirmed", "false_positive"]
    finding: int | None = None
    """The finding's number (from 1), as the run's ``flags.findings`` number them."""
    note: str | None = None
    by: str | None = None
    """Who gives it."""


class VerdictsOut(BaseModel):
    verdicts: list[dict[str, Any]]


class ContentOut(BaseModel):
    """The quality flags of one content item (an entry of runs' ``links``)."""

    kind: str
    item_id: str
    flags: list[str]
    hallucination_suspected: bool
    runs: list[dict[str, Any]]
    """The flagged runs linked to the item (dismissed ones included)."""


class QueueOut(BaseModel):
    """Flagged runs with a finding no human has judged yet, oldest first."""

    runs: list[RunSummaryOut]


class PrecisionOut(BaseModel):
    """What ``agentlens review precision --json`` prints: one row per scorer, then per mode."""

    precision: list[dict[str, Any]]


class Health(BaseModel):
    status: str
    version: str


# -- the app ------------------------------------------------------------------------------------


@dataclass
class _Principal:
    project: str | None
    """The key's project; ``None`` for a loopback client of a server with no key (every
    project)."""

    def owns(self, project: str) -> bool:
        return self.project is None or self.project == project

    def write_project(self) -> str:
        return self.project or "default"


class _State:
    def __init__(self, store: Any, config: ServerConfig, owns_store: bool) -> None:
        self.store = store
        self.config = config
        self.owns_store = owns_store
        self.metrics = Metrics()
        self.keys = KeyChecker(store)
        self.reviewer: Any = None
        self.background: Any = None
        if config.background_process:
            from agentlens.server._background import BackgroundProcess

            self.background = BackgroundProcess(
                store.url, idle_timeout_s=config.idle_timeout_s,
                retention_s=config.retention_s, review=config.review,
            )  # fmt: skip
        self.ingestor = Ingestor(
            store,
            max_pending_spans=config.max_pending_spans,
            idle_timeout_s=config.idle_timeout_s,
            retention_s=config.retention_s,
            metrics=self.metrics,
            on_stored=self._stored,
            on_staged=self.background.wake if self.background is not None else None,
        )
        self.staging: CachedCount[Any] = CachedCount(store.staging_counts)
        self.review_backlog: CachedCount[Any] = CachedCount(store.review_lag)
        self.started = time.time()

    def _stored(self, run_ids: list[str]) -> None:
        if self.background is not None:
            self.background.wake()
        elif self.reviewer is not None:
            self.reviewer.notify()

    def runs_built(self) -> tuple[int, int]:
        """(runs built from OTLP traces, runs refused) since the server started."""
        built, refused = self.metrics.runs_built, self.metrics.runs_rejected
        if self.background is not None:
            more_built, more_refused = self.background.counts()
            built, refused = built + more_built, refused + more_refused
        return built, refused

    def start(self) -> None:
        if self.background is not None:
            if not self.ingestor._threads:
                self.background.start()
                self.ingestor.start(assembler=False)
            return
        if self.config.review and self.reviewer is None:
            from agentlens.server._background import start_reviewer

            self.reviewer = start_reviewer(self.store)
        self.ingestor.start()

    def close(self) -> None:
        self.ingestor.shutdown()
        if self.background is not None:
            self.background.stop()
        if self.reviewer is not None:
            try:
                self.reviewer.shutdown()
            except Exception:
                logger.exception("stopping the reviewer failed")
            self.reviewer = None
        if self.owns_store:
            self.store.close()


def create_app(
    store: str | Any | None = None, *, config: ServerConfig | None = None, **options: Any
) -> FastAPI:
    """The agentlens server as an ASGI app.

    Args:
        store: a store URL, an open store, or ``None`` for the configured one.
        config: the server options; keyword ``options`` override its fields.

    The writer, assembler and reviewer threads start with the app's lifespan (or on the first
    request that needs them); ``app.state.agentlens.close()`` stops them.
    """
    config = config or ServerConfig()
    if options:
        config = ServerConfig(**{**config.__dict__, **options})
    owns = store is None or isinstance(store, str)
    if owns:
        assert store is None or isinstance(store, str)
    opened: Any = open_store(store) if owns else store
    for method in ("stage_spans", "create_api_key", "commit_built_runs"):
        if not callable(getattr(opened, method, None)):
            raise ConfigError(f"the store {opened.url!r} cannot serve: it has no {method}()")
    state = _State(opened, config, owns)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        state.start()
        try:
            yield
        finally:
            state.close()

    app = FastAPI(
        title="agentlens",
        version=_version(),
        description="Capture agent runs over OTLP or JSON; read runs, rates and review flags.",
        lifespan=lifespan,
        responses=_ERROR_RESPONSES,
        docs_url=None,
        redoc_url=None,
    )
    app.state.agentlens = state
    _install_errors(app)

    async def principal(request: Request) -> _Principal:
        header = request.headers.get("authorization")
        keys = state.keys
        if header is None:
            client = request.client.host if request.client else None
            if not keys.any_keys() and _is_loopback(client):
                return _Principal(None)
            raise ApiError(
                401,
                "unauthorized",
                "an API key is required: send Authorization: Bearer KEY"
                if keys.any_keys()
                else "this server accepts only loopback clients until an API key is created",
                headers={"WWW-Authenticate": "Bearer"},
            )
        scheme, _, token = header.partition(" ")
        project = keys.project_of(token.strip()) if scheme.lower() == "bearer" else None
        if project is None:
            raise ApiError(
                401, "unauthorized", "invalid or revoked API key",
                headers={"WWW-Authenticate": "Bearer"},
            )  # fmt: skip
        return _Principal(project)

    def started() -> None:
        if not state.ingestor._threads:
            state.start()

    # -- OTLP ---------------------------------------------------------------------------------

    @app.post(
        "/v1/traces",
        summary="OTLP/HTTP trace export (protobuf or JSON, gzip accepted)",
        response_model=None,
        responses={200: {"description": "ExportTraceServiceResponse (partial_success)"}},
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {
                    "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
                    "application/json": {"schema": {"type": "object"}},
                },
            }
        },
    )
    async def otlp_traces(request: Request, who: _Principal = Depends(principal)) -> Response:
        started()
        ctype = _otlp_ctype(request)
        if ctype not in (*_OTLP_PROTOBUF, "application/json"):
            raise ApiError(
                415,
                "unsupported_media_type",
                f"Content-Type {ctype or 'missing'!r}: send application/x-protobuf or "
                "application/json",
            )
        body = await _body(request, config.max_body_bytes)
        rejected: list[FormatError] = []
        try:
            if ctype == "application/json":
                decoded = spans_from_json(_json(body, "the OTLP/JSON body"), rejected)
                spans = [span.record() for span in decoded]
            else:
                spans = span_records_from_protobuf(body, rejected)
        except FormatError as exc:
            state.metrics.add(spans_rejected=1)
            raise ApiError(400, "invalid_request", f"malformed OTLP request: {exc}") from None
        state.metrics.add(spans_received=len(spans) + len(rejected), spans_rejected=len(rejected))
        if spans:
            await _write(state.ingestor.stage(who.write_project(), spans))
        return _otlp_response(ctype, rejected)

    # -- the JSON API ---------------------------------------------------------------------------

    @app.post(
        "/api/runs",
        response_model=RunsWritten,
        summary="Store runs in the trace format (one object or a list)",
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "oneOf": [
                                {"type": "object"},
                                {"type": "array", "items": {"type": "object"}},
                            ]
                        }
                    }
                },
            }
        },
    )
    async def post_runs(request: Request, who: _Principal = Depends(principal)) -> RunsWritten:
        started()
        body = await _body(request, config.max_body_bytes)
        data = _json(body, "the body")
        items = data if isinstance(data, list) else [data]
        # NaN, Infinity and 1e999 (read as Infinity) would be stored as null: the importer's
        # checks refuse them, as they refuse blank ids, unknown statuses and numeric times.
        suspect = may_be_nonfinite(body)
        literal = suspect and b"Infinity" in body
        traces: list[Trace] = []
        positions: list[int] = []
        rejected: list[dict[str, Any]] = []
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                rejected.append({"index": index, "error": "a run must be a JSON object"})
                continue
            if who.project is not None:
                given = item.get("project", who.project)
                if given != who.project:
                    rejected.append(
                        {"index": index, "error": f"project {given!r} is not this key's project"}
                    )
                    continue
                item = {**item, "project": who.project}
            broken = nonfinite_problem(item, literal=literal) if suspect else None
            if broken is None:  # what no store can hold: the store would refuse the batch
                broken = storable_problem(item, body)
            if broken is not None:
                rejected.append({"index": index, "error": _refusal(*broken)})
                continue
            try:
                trace = Trace.model_validate(item)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first.get("loc", ()))
                rejected.append(
                    {"index": index, "error": f"{where or 'run'}: {first.get('msg', exc)}"}
                )
                continue
            broken = contract_problem(item) or duplicate_step(trace)
            if broken is not None:
                rejected.append({"index": index, "error": _refusal(*broken)})
                continue
            traces.append(trace)
            positions.append(index)
        state.metrics.add(runs_received=len(items))
        if not traces:
            state.metrics.add(runs_rejected=len(rejected))
            detail = "; ".join(f"[{r['index']}] {r['error']}" for r in rejected[:5])
            raise ApiError(400, "invalid_request", f"no valid run in the body: {detail}")
        state.metrics.add(runs_rejected=len(rejected))
        verdicts = await _write(state.ingestor.put_runs(who.project, traces))
        ids = []
        for index, trace, verdict in zip(positions, traces, verdicts, strict=True):
            if verdict is None:
                ids.append(trace.id)
            else:
                rejected.append({"index": index, "error": verdict})
        rejected.sort(key=lambda r: r["index"])
        return RunsWritten(stored=len(ids), ids=ids, rejected=rejected)

    @app.get("/api/runs", response_model=RunsPage, summary="List runs, newest first")
    def get_runs(
        who: _Principal = Depends(principal),
        agent: str | None = Query(None, description="Only this agent role."),
        since: str | None = Query(None, description="Started in the last 7d, 36h... or since an ISO time."),
        until: str | None = Query(None, description="Started before this ISO time or duration ago."),
        flagged: bool | None = Query(None, description="Only runs a check flagged (or not)."),
        failure_mode: str | None = Query(None, description="Only runs with a finding of this mode."),
        link: str | None = Query(None, description="Only runs that produced this content: KIND:ID."),
        project: str | None = Query(None, description="Only this project (keyless local use)."),
        limit: int = Query(50, ge=1, le=500),
        cursor: str | None = Query(None, description="The `next` of the previous page."),
    ) -> RunsPage:  # fmt: skip
        now = datetime.now(UTC)
        where_project = who.project if who.project is not None else project
        if who.project is not None and project not in (None, who.project):
            return RunsPage(runs=[], next=None)
        link_key: tuple[str, str] | None = None
        if link is not None:
            kind, sep, ident = link.partition(":")
            if not sep or not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", kind) or not ident:
                raise ApiError(400, "invalid_request", "link: expected KIND:ID, e.g. blog_post:123")
            link_key = (kind, ident)
        if failure_mode is not None:
            from agentlens.model import FailureMode

            if failure_mode not in {str(m) for m in FailureMode}:
                raise ApiError(
                    400, "invalid_request", f"failure_mode: unknown mode {failure_mode!r}"
                )
        where = RunFilter(
            start=_parse_time(since, "since", now),
            end=_parse_time(until, "until", now),
            agent=agent,
            project=where_project,
            flagged=flagged,
            failure_mode=failure_mode,
        )
        page, nxt = list_runs_page(
            state.store, where, before=_decode_cursor(cursor), limit=limit, link=link_key
        )
        return RunsPage(runs=[_summary(s) for s in page], next=_encode_cursor(nxt))

    @app.get("/api/runs/{run_id:path}", response_model=RunDetail, summary="One run, in full")
    def get_run(run_id: str, who: _Principal = Depends(principal)) -> RunDetail:
        trace = _owned_run(state.store, run_id, who)
        scores = state.store.get_scores(run_id)
        return RunDetail(
            run=trace.to_dict(),
            scores=[s.model_dump(mode="json") for s in scores],
            flags=_flags(state.store, run_id),
        )

    @app.get("/api/rate", summary="The hallucination rate (what `agentlens rate --json` prints)")
    def get_rate(
        who: _Principal = Depends(principal),
        since: str | None = Query(None, description="30m, 36h, 7d (default 7d), an ISO time, or all."),
        from_: str | None = Query(None, alias="from", description="Started at or after (ISO)."),
        to: str | None = Query(None, description="Started before (ISO)."),
        agent: str | None = Query(None),
        mode: list[str] | None = Query(None, description="Count only flags in this failure mode."),
        scorer: list[str] | None = Query(None, description="NAME or NAME@VERSION."),
        by: str | None = Query(None, description="day, week, agent, mode, release, scorer_version."),
    ) -> dict[str, Any]:  # fmt: skip
        return _rate(state.store, who, since, from_, to, agent, mode, scorer, by)

    @app.get(
        "/api/content/{kind}/{item_id:path}",
        response_model=ContentOut,
        summary="A content item's quality flags (hallucination_suspected)",
    )
    def get_content(kind: str, item_id: str, who: _Principal = Depends(principal)) -> ContentOut:
        from agentlens.review import content_flags

        found = content_flags(kind, item_id, db=state.store)
        runs = list(found.runs)
        if who.project is not None and runs:
            owners = state.store.run_projects([r.run_id for r in runs])
            runs = [r for r in runs if owners.get(r.run_id) == who.project]
        return ContentOut(
            kind=found.kind,
            item_id=found.item_id,
            flags=["hallucination_suspected"] if any(not r.dismissed for r in runs) else [],
            hallucination_suspected=any(not r.dismissed for r in runs),
            runs=[
                {"run_id": r.run_id, "reason": r.reason,
                 "flagged_at": r.flagged_at.isoformat(), "dismissed": r.dismissed}
                for r in runs
            ],
        )  # fmt: skip

    @app.get("/api/review/queue", response_model=QueueOut, summary="Flagged runs to judge")
    def get_queue(
        who: _Principal = Depends(principal),
        agent: str | None = Query(None),
        limit: int = Query(100, ge=1, le=1000),
    ) -> QueueOut:
        from agentlens.review import review_queue

        runs = review_queue(agent=agent, limit=limit, project=who.project, db=state.store)
        return QueueOut(runs=[_summary(r) for r in runs])

    @app.post(
        "/api/runs/{run_id:path}/verdict",
        response_model=VerdictsOut,
        summary="Record a human verdict on a flagged run or one of its findings",
    )
    def post_verdict(
        run_id: str, body: VerdictIn, who: _Principal = Depends(principal)
    ) -> VerdictsOut:
        from agentlens.errors import StoreError
        from agentlens.review import set_verdict

        _owned_run(state.store, run_id, who)
        try:
            records = set_verdict(
                run_id, body.verdict, finding=body.finding, note=body.note,
                by=body.by or (f"key:{who.project}" if who.project else None), db=state.store,
            )  # fmt: skip
        except RunNotFoundError:
            raise ApiError(404, "not_found", f"no run with id {run_id!r}") from None
        except StoreError as exc:
            raise ApiError(409, "conflict", str(exc)) from None
        return VerdictsOut(verdicts=[_verdict_json(v) for v in records])

    @app.get(
        "/api/review/precision",
        response_model=PrecisionOut,
        summary="Each detector's precision, from human verdicts",
    )
    def get_precision(
        who: _Principal = Depends(principal),
        since: str | None = Query(None, description="Verdicts given since (7d, ISO time, all)."),
    ) -> PrecisionOut:
        from agentlens.review import precision
        from agentlens.server._scope import project_view

        every = since is not None and since.strip().lower() == "all"  # as /api/rate takes it
        start = None if every else _parse_time(since, "since", datetime.now(UTC))
        view = project_view(state.store, who.project)
        return PrecisionOut(precision=[p.to_json() for p in precision(since=start, db=view)])

    @app.get("/healthz", response_model=Health, summary="Liveness (no key needed)")
    def healthz() -> Health:
        return Health(status="ok", version=_version())

    @app.get(
        "/metrics",
        response_class=Response,
        summary="Prometheus metrics",
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
    )
    def metrics(_: _Principal = Depends(principal)) -> Response:
        return Response(_prometheus(state), media_type="text/plain; version=0.0.4; charset=utf-8")

    _mount_dashboard(app, state)
    return app


def _mount_dashboard(app: FastAPI, state: _State) -> None:
    """The dashboard at ``/``, with this server's keys and project isolation."""
    from agentlens.dashboard import Access, mount_dashboard
    from agentlens.server._scope import project_view

    def local(request: Request) -> bool:
        return not state.keys.any_keys() and _is_loopback(
            request.client.host if request.client else None
        )

    mount_dashboard(
        app,
        Access(state.store, state.keys, local, lambda project: project_view(state.store, project)),
    )


_INDEX = re.compile(r"\[(\d+)\]")


def _refusal(field: str, reason: str) -> str:
    """A run refused by the trace format's checks (the importer's), worded as the API words a
    validation error: the field as a dotted path (``steps.2.output``), then why."""
    where = _INDEX.sub(r".\1", field).lstrip(".")
    # a key holding a lone surrogate is named escaped: the answer must be UTF-8
    where = where.encode("utf-8", "backslashreplace").decode("utf-8")
    return f"{where or 'run'}: {reason}"


async def _write(awaitable: Any) -> Any:
    try:
        return await awaitable
    except Overloaded as exc:
        raise ApiError(
            429 if exc.retry_after <= 1 else 503,
            "overloaded" if exc.retry_after <= 1 else "unavailable",
            f"the server cannot keep up with the writes: retry after {exc.retry_after} s",
            headers={"Retry-After": str(exc.retry_after)},
        ) from None
    except WriteFailed as exc:
        raise ApiError(
            503, "unavailable", f"the store could not commit the write: {exc}",
            headers={"Retry-After": "2"},
        ) from None  # fmt: skip


_OTLP_PROTOBUF = ("application/x-protobuf", "application/protobuf")

# The google.rpc.Code of an OTLP error (OTLP/HTTP leaves Status.code to the server; clients act
# on the HTTP status alone and may log the code).
_GRPC_CODES = {400: 3, 401: 16, 403: 7, 404: 5, 405: 12, 413: 8, 415: 12, 429: 8, 503: 14}


def _otlp_ctype(request: Request) -> str:
    """The media type of a request (no parameters, lower case)."""
    return (request.headers.get("content-type") or "").split(";")[0].strip().lower()


def _otlp_error(
    request: Request, status: int, message: str, headers: dict[str, str] | None = None
) -> Response | None:
    """An error of ``POST /v1/traces`` to a protobuf request, as OTLP/HTTP wants it: a
    protobuf ``google.rpc.Status`` with the request's Content-Type (None for any other request:
    it gets the API's error shape, which a JSON request's exporter logs as it is)."""
    ctype = _otlp_ctype(request)
    if request.scope.get("path") != "/v1/traces" or ctype not in _OTLP_PROTOBUF:
        return None
    return Response(
        _status_pb(_GRPC_CODES.get(status, 13 if status >= 500 else 2), message),
        status_code=status,
        headers=headers,
        media_type=ctype,
    )


def _status_pb(code: int, message: str) -> bytes:
    """A ``google.rpc.Status {code, message}`` in the protobuf wire format (written here: the
    message is two fields, and its generated class is not a dependency of the server)."""

    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            low, n = n & 0x7F, n >> 7
            out.append(low | (0x80 if n else 0))
            if not n:
                return bytes(out)

    text = message.encode("utf-8", "backslashreplace")
    return b"\x08" + varint(code) + b"\x12" + varint(len(text)) + text


def _otlp_response(ctype: str, rejected: list[FormatError]) -> Response:
    message = "; ".join(str(e) for e in rejected[:5])
    if ctype == "application/json":
        body: dict[str, Any] = {}
        if rejected:
            body["partialSuccess"] = {"rejectedSpans": str(len(rejected)), "errorMessage": message}
        return JSONResponse(body)
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    response = ExportTraceServiceResponse()
    if rejected:
        response.partial_success.rejected_spans = len(rejected)
        response.partial_success.error_message = message
    return Response(response.SerializeToString(), media_type=ctype)


def _verdict_json(v: Any) -> dict[str, Any]:
    return {
        "run_id": v.run_id,
        "finding_key": v.finding_key,
        "scorer": v.scorer,
        "failure_mode": v.failure_mode,
        "text": v.text,
        "verdict": v.verdict,
        "note": v.note,
        "author": v.author,
        "created_at": v.created_at.isoformat(),
        "scope": v.scope,
        "live": v.live,
    }


def _owned_run(store: Any, run_id: str, who: _Principal) -> Trace:
    try:
        trace = store.get_trace(run_id)
    except RunNotFoundError:
        trace = None
    if trace is None or not who.owns(trace.project):
        raise ApiError(404, "not_found", f"no run with id {run_id!r}")
    return trace


def _flags(store: Any, run_id: str) -> dict[str, Any]:
    """A run's review flags (derived from its current scores by the review pipeline)."""
    flags = store.get_flags(run_id)
    if flags is None:
        return {"state": None, "hallucination_detected": False, "hallucination_reason": None,
                "failure_modes": [], "findings": []}  # fmt: skip
    return {
        "state": str(flags.state),
        "hallucination_detected": flags.hallucination_detected,
        "hallucination_reason": flags.reason,
        "failure_modes": list(flags.failure_modes),
        "findings": [f.to_json() for f in flags.findings],
    }


def _summary(summary: Any) -> RunSummaryOut:
    return RunSummaryOut(
        id=summary.id,
        project=summary.project,
        agent=summary.agent,
        name=summary.name,
        status=summary.status,
        started_at=summary.started_at,
        ended_at=summary.ended_at,
        step_count=summary.step_count,
        has_output=summary.has_output,
        metadata=summary.metadata,
        hallucination_detected=summary.hallucination_detected,
        hallucination_reason=summary.hallucination_reason,
        failure_modes=list(summary.failure_modes),
        flag_state=summary.flag_state,
        reviewed_at=summary.reviewed_at,
    )


def _rate(
    store: Any,
    who: _Principal,
    since: str | None,
    start: str | None,
    end: str | None,
    agent: str | None,
    mode: list[str] | None,
    scorer: list[str] | None,
    by: str | None,
) -> dict[str, Any]:
    from agentlens.analytics import hallucination_rate, rate_breakdown
    from agentlens.server._scope import project_view

    now = datetime.now(UTC)
    if since is not None and since.strip().lower() == "all":
        if start or end:
            raise ApiError(400, "invalid_request", "since=all cannot be combined with from/to")
        lower: datetime | None = None
        upper: datetime | None = None
    else:
        if since is not None and start is not None:
            raise ApiError(400, "invalid_request", "give since or from, not both")
        lower = (
            _parse_time(start, "from", now) if start else _parse_time(since or "7d", "since", now)
        )
        upper = _parse_time(end, "to", now)
        if lower is not None and upper is not None and upper <= lower:
            raise ApiError(400, "invalid_request", "the window is empty: to must be after from")
    view = project_view(store, who.project)
    common: dict[str, Any] = {
        "start": lower,
        "end": upper,
        "agent": agent,
        "modes": mode or None,
        "scorers": scorer or None,
        "store": view,
    }
    try:
        if by is not None:
            return dict(rate_breakdown(by, **common).to_json())
        return dict(hallucination_rate(**common).to_json())
    except (ValueError, AgentlensError) as exc:
        raise ApiError(400, "invalid_request", str(exc)) from None


def _prometheus(state: _State) -> str:
    m = state.metrics
    staged, staged_age = state.staging.get()
    review, review_age = state.review_backlog.get()
    lines: list[str] = []

    def metric(name: str, kind: str, help_: str, value: float) -> None:
        lines.append(f"# HELP agentlens_{name} {help_}")
        lines.append(f"# TYPE agentlens_{name} {kind}")
        lines.append(f"agentlens_{name} {value:g}")

    metric("spans_received_total", "counter", "Spans received over OTLP.", m.spans_received)
    metric("spans_stored_total", "counter", "Spans committed (new).", m.spans_stored)
    metric("spans_duplicate_total", "counter", "Spans received again (stored once).",
           m.spans_duplicate)  # fmt: skip
    metric("spans_rejected_total", "counter", "Spans refused as malformed.", m.spans_rejected)
    metric("runs_received_total", "counter", "Runs received over the JSON API.", m.runs_received)
    metric("runs_stored_total", "counter", "Runs stored from the JSON API.", m.runs_stored)
    built, refused = state.runs_built()
    metric("runs_built_total", "counter", "Runs built from OTLP traces.", built)
    metric("runs_rejected_total", "counter", "Runs refused.", refused)
    metric("requests_refused_total", "counter", "Requests answered 429 (writer busy).",
           m.requests_refused)  # fmt: skip
    metric("write_failures_total", "counter", "Store writes that failed (503).", m.write_failures)
    metric("writer_queue_depth", "gauge", "Spans and runs waiting for the writer.",
           state.ingestor.pending)  # fmt: skip
    metric("staged_spans", "gauge", "Spans staged, not yet in a run.", staged.spans)
    metric("staged_traces", "gauge", "Traces waiting for their root span.", staged.traces)
    metric("review_queue_depth", "gauge", "Complete runs not yet reviewed.", review.pending)
    metric("review_lag_seconds", "gauge", "Age of the oldest run not yet reviewed.",
           review.lag_s)  # fmt: skip
    metric("backlog_age_seconds", "gauge",
           "Age of the oldest of the four backlog counts above (recounted in the background when slow).",
           max(staged_age, review_age))  # fmt: skip
    return "\n".join(lines) + "\n"


def _version() -> str:
    import agentlens

    return agentlens.__version__


def _install_errors(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> Response:
        otlp = _otlp_error(request, exc.status, exc.message, exc.headers)
        return otlp or _error_response(exc.status, exc.code, exc.message, exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        code = _STATUS_CODES.get(exc.status_code, "error")
        message = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
        headers = dict(exc.headers or {})
        otlp = _otlp_error(request, exc.status_code, message, headers)
        return otlp or _error_response(exc.status_code, code, message, headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p not in ("query", "path"))
        return _error_response(
            400, "invalid_request", f"{where or 'request'}: {first.get('msg', 'invalid')}"
        )

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> Response:
        logger.exception("internal error")
        message = f"internal error: {type(exc).__name__}"
        return _otlp_error(request, 500, message) or _error_response(500, "internal_error", message)
