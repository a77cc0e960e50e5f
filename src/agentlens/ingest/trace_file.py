"""agentlens's own trace format (schema version 1): read and write files of runs.

A trace file holds one JSON object per run, either as a JSON array or one per line (JSON Lines).
The reader tells them apart by the first non-blank character (``[`` or ``{``) and streams
both: a JSONL file is read line by line, and a JSON array is decoded record by record from
buffered chunks, so memory stays flat however large the file is. ``-`` reads standard input.

Every problem is reported as a :class:`~agentlens.errors.FormatError` that names the file, the
line and the field (a dotted path such as ``steps[2].kind``), and says what was wrong::

    runs.jsonl:3, field 'steps[2].kind': Input should be 'user', 'system', ... (got 'tol')

:func:`read` stops at the first bad record; :func:`scan` reports each bad record and goes on
where it can (a malformed line in a JSONL file), which ``agentlens import --skip-invalid``
uses. A record that has a key of another format (``messages``, ``trajectory``, ``history``,
``sessionId``...) or holds nothing (no steps, no input, no output, no ``schema_version``) is a
bad record too: a file in another format is refused rather than read as empty runs.
Errors after which nothing more can be read (an empty file, malformed JSON inside an
array, an array that is never closed) are raised by both.

:func:`write` writes JSON Lines, one run per line, in a stable byte form: a file exported,
imported and exported again is byte-identical.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import IO, Any, BinaryIO

from pydantic import ValidationError
from pydantic_core import from_json as _fast_json

from agentlens.errors import FormatError
from agentlens.ingest import _checks
from agentlens.ingest._atomic import write_atomic
from agentlens.ingest._checks import (
    MAX_NESTING,
    OVERFLOW_REASON,
    SURROGATE_REASON,
    deep_path,
    nonfinite_path,
    surrogate_path,
)
from agentlens.ingest._checks import SURROGATE_ESCAPE as _ESCAPE
from agentlens.ingest._detect import foreign_keys, json_value_kind
from agentlens.model import Trace

__all__ = ["Record", "contract_problem", "duplicate_step", "read", "scan", "write", "write_file"]

_CHUNK = 1 << 20
"""Bytes read at a time from a JSON array."""
_BUFFER = 1 << 20
"""Read buffer of a file: JSONL lines of tens of KB are read in fewer, larger reads."""
_NEAR_END = 16
"""A JSON error this close to the end of the buffer may only mean the record goes on."""
_STDIN = "<stdin>"
_WS = re.compile(r"[ \t\r\n]*")
_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class Record:
    """One run read from a trace file, or why it could not be read."""

    line: int
    """The 1-based line where the run starts."""
    trace: Trace | None
    """The run, when it is valid."""
    error: FormatError | None
    """What was wrong, when it is not."""
    run_id: str | None
    """The run's ``id`` as written in the file, when it could be read (also for a bad run)."""
    offset: int
    """Bytes of the file read so far (for progress bars)."""


class _NonFiniteError(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _NonFiniteError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def read(path: str | os.PathLike[str]) -> Iterator[Trace]:
    """Stream the runs of a trace file (a JSON array or JSONL; ``-`` is standard input).

    Raises:
        FormatError: at the first problem, naming the file, line and field.
    """
    for record in scan(path):
        if record.error is not None:
            raise record.error
        assert record.trace is not None
        yield record.trace


def scan(path: str | os.PathLike[str]) -> Iterator[Record]:
    """Stream every record of a trace file, valid or not, in file order.

    A record that is malformed or does not match the schema comes back as a :class:`Record`
    with ``error`` set, and reading goes on. In a JSON array, malformed JSON ends the file (a
    decoder cannot find the next record after it); in JSONL only that line is lost.

    Raises:
        FormatError: the file cannot be opened, is empty, is neither a JSON array nor JSONL,
            or breaks off in a way that leaves nothing more to read.
    """
    source = _source_name(path)
    stream, close = _open(path, source)
    try:
        prefix, skipped_lines = _head(stream, source)
        first = prefix[:1]
        if first == b"[":
            yield from _scan_array(stream, prefix, skipped_lines, source)
        elif first == b"{":
            yield from _scan_jsonl(stream, prefix, skipped_lines, source)
        else:
            raise FormatError(
                f"not a trace file: {_not_runs(prefix)}",
                source=source,
                line=skipped_lines + 1,
            )
    finally:
        if close:
            stream.close()


def _not_runs(head: bytes) -> str:
    """Why a file starting with ``head`` (its first non-blank bytes) holds no runs: it is JSON of
    another kind (a number, a string...), or not JSON."""
    kind = json_value_kind(head)
    if kind is not None:
        return f"it is {kind}, not a run (a JSON object) or a list of runs (a JSON array)"
    shown = head[:1].decode("utf-8", errors="replace")
    return f"expected a JSON array ('[') or JSON Lines ('{{'), found {shown!r}"


def write(traces: Iterable[Trace], fp: IO[str]) -> int:
    """Write runs to ``fp`` as JSON Lines in the trace format. Returns how many were written."""
    count = 0
    for trace in traces:
        fp.write(trace.to_json())
        fp.write("\n")
        count += 1
    return count


def write_file(traces: Iterable[Trace], path: str | os.PathLike[str]) -> int:
    """Write runs to ``path`` as JSON Lines, atomically (:func:`~agentlens.ingest._atomic.
    write_atomic`): renamed over ``path`` only once every run is written. Returns the count.

    The file keeps the mode of the file it replaces; a new file gets the mode the umask gives
    (as ``open()`` would), not the private mode of a temporary file.

    Raises:
        FormatError: ``path`` cannot be written (a missing folder, a folder, a full disk),
            naming ``path``.
    """
    try:
        return write_atomic(path, partial(write, traces))
    except OSError as exc:
        raise FormatError(f"cannot write: {exc.strerror or exc}", source=str(path)) from None


# -- opening -------------------------------------------------------------------------------


def _source_name(path: str | os.PathLike[str]) -> str:
    text = os.fspath(path)
    return _STDIN if text == "-" else text


def _open(path: str | os.PathLike[str], source: str) -> tuple[BinaryIO, bool]:
    if source == _STDIN:
        return sys.stdin.buffer, False
    try:
        return open(path, "rb", buffering=_BUFFER), True  # closed by scan()
    except FileNotFoundError:
        raise FormatError("cannot read: no such file", source=source) from None
    except IsADirectoryError:
        raise FormatError("cannot read: it is a directory", source=source) from None
    except OSError as exc:
        raise FormatError(f"cannot read: {exc.strerror or exc}", source=source) from None


def _read(stream: BinaryIO, size: int, source: str) -> bytes:
    try:
        return stream.read(size)
    except OSError as exc:
        raise FormatError(f"cannot read: {exc.strerror or exc}", source=source) from None


def _head(stream: BinaryIO, source: str) -> tuple[bytes, int]:
    """Skip leading whitespace. Returns the bytes from the first non-blank one on (at least
    one byte; the rest of that chunk) and how many lines were skipped before it."""
    skipped = 0
    first_chunk = True
    while True:
        chunk = _read(stream, 1 << 16, source)
        if first_chunk and chunk.startswith(_BOM):
            chunk = chunk[len(_BOM) :]
        first_chunk = False
        if not chunk:
            raise FormatError("empty file: no runs", source=source)
        stripped = chunk.lstrip(b" \t\r\n")
        skipped += chunk.count(b"\n", 0, len(chunk) - len(stripped))
        if stripped:
            return stripped, skipped


# -- JSON Lines ----------------------------------------------------------------------------


def _lines(prefix: bytes, stream: BinaryIO, source: str, first: int) -> Iterator[bytes]:
    """The lines of the file, each with its ``\\n`` (the last may lack one); ``first`` is the
    number of the first line.

    Raises:
        FormatError: a line is longer than :data:`~agentlens.ingest._checks.MAX_RECORD_BYTES`.
    """
    limit = _checks.MAX_RECORD_BYTES
    number = first - 1
    parts = prefix.split(b"\n")
    for part in parts[:-1]:
        number += 1
        if len(part) + 1 > limit:
            raise FormatError(
                f"the line is larger than {limit >> 20} MiB, the most one record may hold",
                source=source,
                line=number,
            )
        yield part + b"\n"
    try:
        tail = parts[-1]
        while True:
            line = tail + stream.readline(max(limit + 1 - len(tail), 1))
            tail = b""
            if not line:
                return
            number += 1
            if len(line) > limit:
                raise FormatError(
                    f"the line is larger than {limit >> 20} MiB, the most one record may hold",
                    source=source,
                    line=number,
                )
            yield line
    except OSError as exc:
        raise FormatError(f"cannot read: {exc.strerror or exc}", source=source) from None


def _scan_jsonl(
    stream: BinaryIO, prefix: bytes, skipped_lines: int, source: str
) -> Iterator[Record]:
    offset = 0
    lineno = skipped_lines  # blank lines before the first run were consumed by _head
    for raw in _lines(prefix, stream, source, skipped_lines + 1):
        lineno += 1
        offset += len(raw)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            if not raw.endswith(b"\n") and exc.reason == "unexpected end of data":
                reason = "the file is truncated: the last line ends in the middle of a run"
            else:
                reason = f"not UTF-8 text (byte {exc.start + 1} of the line)"
            err = FormatError(reason, source=source, line=lineno)
            yield Record(lineno, None, err, None, offset)
            continue
        body = text.strip()
        if not body:
            continue
        try:
            # The fast parser (pydantic's, about a third cheaper here) takes every well-formed
            # line, with the same values the standard decoder gives; whatever it refuses goes
            # to the standard decoder, which decides and words the error as it always has.
            obj = _fast_json(body, allow_inf_nan=False)
        except ValueError:
            pass
        else:
            yield _validate(obj, source, lineno, offset, overflow=_checks.may_overflow(raw))
            continue
        column0 = len(text) - len(text.lstrip())
        try:
            obj = _DECODER.decode(body)
        except json.JSONDecodeError as exc:
            if not raw.endswith(b"\n") and _ends_early(exc, body):
                reason = "the file is truncated: the last line ends in the middle of a run"
            elif _ends_early(exc, body):
                reason = (
                    f"malformed JSON: the line ends in the middle of a run ({exc.msg}); "
                    "JSON Lines holds one complete run per line"
                )
            elif exc.msg == "Extra data":
                reason = (
                    f"malformed JSON: extra data after the run at column {column0 + exc.pos + 1}"
                )
            else:
                reason = f"malformed JSON: {exc.msg} at column {column0 + exc.pos + 1}"
            yield Record(
                lineno, None, FormatError(reason, source=source, line=lineno), None, offset
            )
            continue
        except (ValueError, RecursionError) as exc:
            yield Record(lineno, None, _bad_json(exc, source, lineno), None, offset)
            continue
        # Only the standard decoder reads a lone surrogate escape (the fast parser refuses it).
        escapes = _ESCAPE.search(body) is not None
        overflow = _checks.may_overflow(raw)
        yield _validate(obj, source, lineno, offset, escapes=escapes, deep=True, overflow=overflow)


_PARTIAL_TOKEN = re.compile(
    r"(?:t|tr|tru|f|fa|fal|fals|n|nu|nul|N|Na|I|In|Inf|Infi|Infin|Infini|Infinit"
    r"|-|-?\d+\.|-?\d+(?:\.\d+)?[eE][+-]?|\.|[eE][+-]?"
    r"|-I|-In|-Inf|-Infi|-Infin|-Infini|-Infinit)[ \t\r\n]*"
)


def _ends_early(exc: json.JSONDecodeError, text: str) -> bool:
    """True when a decode error means the text stopped before the value was complete: the
    error is at the very end, inside an unterminated string, or on a cut-off literal or number."""
    if exc.pos >= len(text) or exc.msg.startswith("Unterminated string"):
        return True
    return _PARTIAL_TOKEN.fullmatch(text, exc.pos) is not None


def _bad_json(exc: BaseException, source: str, line: int) -> FormatError:
    if isinstance(exc, RecursionError):
        return FormatError("malformed JSON: nested too deeply", source=source, line=line)
    reason = _checks.json_error_reason(exc) if isinstance(exc, ValueError) else str(exc)
    return FormatError(f"malformed JSON: {reason}", source=source, line=line)


# -- JSON array ----------------------------------------------------------------------------


class _ArrayBuffer:
    """Decoded text of a JSON array, read chunk by chunk, with the line number at ``pos``."""

    def __init__(self, stream: BinaryIO, prefix: bytes, line: int, source: str) -> None:
        self.stream = stream
        self.source = source
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.buf = ""
        self.pos = 0
        self.line = line
        self.eof = False
        self.offset = 0
        self.escapes = False
        """True when the last value decoded holds a ``\\uD800``-``\\uDFFF`` escape."""
        self.deep = False
        """True when it may nest more than MAX_NESTING levels deep."""
        self.overflow = False
        """True when the last value decoded holds a number that overflowed a float
        (``1e999``): the decoder's ``parse_float`` tells, at the cost of a call per float."""
        self.json_decoder = json.JSONDecoder(
            parse_constant=_reject_constant, parse_float=self._float
        )
        self._feed(prefix, final=False)

    def _feed(self, data: bytes, *, final: bool) -> None:
        self.offset += len(data)
        try:
            text = self.decoder.decode(data, final=final)
        except UnicodeDecodeError as exc:
            line = self.line + self.buf.count("\n", self.pos) + data.count(b"\n", 0, exc.start)
            if final and exc.reason == "unexpected end of data":
                reason = "the file is truncated: it ends in the middle of a run"
            else:
                reason = "not UTF-8 text"
            raise FormatError(reason, source=self.source, line=line) from None
        if self.pos:
            self.buf = self.buf[self.pos :]
            self.pos = 0
        self.buf += text

    def fill(self, at_least: int = 0) -> None:
        """Read more of the file (at least ``at_least`` bytes, so retries stay linear).

        Raises:
            FormatError: the record being read is already longer than
                :data:`~agentlens.ingest._checks.MAX_RECORD_BYTES`.
        """
        if len(self.buf) - self.pos > _checks.MAX_RECORD_BYTES:
            raise FormatError(
                f"a run is larger than {_checks.MAX_RECORD_BYTES >> 20} MiB, the most one "
                "record may hold",
                source=self.source,
                line=self.line,
            )
        data = _read(self.stream, max(_CHUNK, at_least), self.source)
        if not data:
            self.eof = True
        self._feed(data, final=self.eof)

    def advance(self, to: int) -> None:
        self.line += self.buf.count("\n", self.pos, to)
        self.pos = to

    def skip_ws(self) -> bool:
        """Move past whitespace. False at the end of the file."""
        while True:
            match = _WS.match(self.buf, self.pos)
            assert match is not None
            self.advance(match.end())
            if self.pos < len(self.buf):
                return True
            if self.eof:
                return False
            self.fill()

    def line_at(self, index: int) -> int:
        return self.line + self.buf.count("\n", self.pos, index)

    def column_at(self, index: int) -> int:
        return index - self.buf.rfind("\n", 0, index)

    def _float(self, text: str) -> float:
        value = float(text)  # what the decoder does without parse_float
        if value - value != 0.0:  # an infinity (NaN is refused as a constant)
            self.overflow = True
        return value

    def decode(self) -> Any:
        """Decode the JSON value at ``pos`` (reading more as needed) and move past it."""
        while True:
            self.overflow = False
            try:
                obj, end = self.json_decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                at_end = _ends_early(exc, self.buf)
                if not self.eof and (at_end or exc.pos >= len(self.buf) - _NEAR_END):
                    self.fill(len(self.buf) - self.pos)
                    continue
                if at_end:
                    raise FormatError(
                        "the file is truncated: it ends in the middle of a run",
                        source=self.source,
                        line=self.line_at(min(exc.pos, len(self.buf))),
                    ) from None
                raise FormatError(
                    f"malformed JSON: {exc.msg} at column {self.column_at(exc.pos)}",
                    source=self.source,
                    line=self.line_at(exc.pos),
                ) from None
            except (ValueError, RecursionError) as exc:
                raise _bad_json(exc, self.source, self.line) from None
            if end >= len(self.buf) and not self.eof:
                # A number or literal may go on in the next chunk: read on and decode again.
                self.fill(len(self.buf) - self.pos)
                continue
            self.escapes = _ESCAPE.search(self.buf, self.pos, end) is not None
            opened = self.buf.count("[", self.pos, end) + self.buf.count("{", self.pos, end)
            self.deep = opened > MAX_NESTING
            self.advance(end)
            return obj


def _scan_array(
    stream: BinaryIO, prefix: bytes, skipped_lines: int, source: str
) -> Iterator[Record]:
    buf = _ArrayBuffer(stream, prefix, skipped_lines + 1, source)
    buf.advance(1)  # the "["
    expect_value = True  # right after "[" or ","
    first = True
    while True:
        if not buf.skip_ws():
            raise FormatError(
                "the file is truncated: the JSON array is never closed",
                source=source,
                line=buf.line,
            )
        char = buf.buf[buf.pos]
        if char == "]":
            if expect_value and not first:
                raise FormatError(
                    "malformed JSON: a comma before ']'", source=source, line=buf.line
                )
            buf.advance(buf.pos + 1)
            break
        if not expect_value:
            if char != ",":
                raise FormatError(
                    f"malformed JSON: expected ',' or ']' after a run, found {char!r} "
                    f"at column {buf.column_at(buf.pos)}",
                    source=source,
                    line=buf.line,
                )
            buf.advance(buf.pos + 1)
            expect_value = True
            continue
        line = buf.line
        obj = buf.decode()
        yield _validate(
            obj,
            source,
            line,
            buf.offset,
            escapes=buf.escapes,
            deep=buf.deep,
            overflow=buf.overflow,
        )
        expect_value = False
        first = False
    if buf.skip_ws():
        raise FormatError(
            "malformed JSON: extra data after the closing ']'", source=source, line=buf.line
        )


# -- validation ----------------------------------------------------------------------------


def _validate(
    obj: Any,
    source: str,
    line: int,
    offset: int,
    *,
    escapes: bool = False,
    deep: bool = False,
    overflow: bool = False,
) -> Record:
    """The record of one decoded run.

    ``escapes``: its text has a surrogate escape, so its strings are checked for a lone
    surrogate; ``deep``: it may nest more than :data:`MAX_NESTING` levels, so that is checked.
    Either would make the run one no store can hold (pydantic's parser, which the fast path
    uses, refuses both, so only what the standard decoder read is checked). ``overflow``: its
    text may hold a number literal too large for a float (``1e999``), which both parsers read
    as Infinity and a store would write as null, so its floats are checked.
    """
    if not isinstance(obj, dict):
        err = FormatError(
            f"expected a JSON object (one run), found {_json_type(obj)}", source=source, line=line
        )
        return Record(line, None, err, None, offset)
    raw_id = obj.get("id")
    run_id = raw_id if isinstance(raw_id, str) else None
    if escapes:
        path = surrogate_path(obj)
        if path is not None:
            err = FormatError(SURROGATE_REASON, source=source, line=line, field=path or None)
            return Record(line, None, err, None if path == "id" else run_id, offset)
    if deep:
        path = deep_path(obj)
        if path is not None:
            reason = f"nested more than {MAX_NESTING} levels deep"
            err = FormatError(reason, source=source, line=line, field=path or None)
            return Record(line, None, err, run_id, offset)
    if overflow:
        path = nonfinite_path(obj)
        if path is not None:
            err = FormatError(OVERFLOW_REASON, source=source, line=line, field=path or None)
            return Record(line, None, err, run_id, offset)
    refused = _foreign(obj, source, line)
    if refused is not None:
        return Record(line, None, refused, run_id, offset)
    try:
        trace = Trace.model_validate(obj)
    except ValidationError as exc:
        return Record(line, None, _from_validation(exc, source, line), run_id, offset)
    except RecursionError:
        err = FormatError("nested too deeply", source=source, line=line)
        return Record(line, None, err, run_id, offset)
    broken = contract_problem(obj)
    if broken is not None:
        field, reason = broken
        err = FormatError(reason, source=source, line=line, field=field)
        return Record(line, None, err, run_id or None, offset)
    if (
        not trace.steps
        and trace.input is None
        and trace.output is None
        and "schema_version" not in obj
    ):
        # agentlens export writes schema_version, so an exported empty run reads back.
        err = FormatError(
            "an empty run: no steps, no input and no output (is this file in another format? "
            "leave --format out to detect it)",
            source=source,
            line=line,
        )
        return Record(line, None, err, trace.id, offset)
    twice = duplicate_step(trace)
    if twice is not None:
        err = FormatError(twice[1], source=source, line=line, field=twice[0])
        return Record(line, None, err, trace.id, offset)
    return Record(line, trace, None, trace.id, offset)


def duplicate_step(trace: Trace) -> tuple[str, str] | None:
    """The field and the reason when two steps of ``trace`` have the same id (the second one's
    ``steps[N].id``), else ``None``: the importer's check, which the server's run API uses
    too."""
    seen: dict[str, int] = {}
    for index, step in enumerate(trace.steps):
        first = seen.setdefault(step.id, index)
        if first != index:
            return f"steps[{index}].id", (
                f"step id {step.id!r} is used twice (also by steps[{first}]); "
                "step ids must be unique within a run"
            )
    return None


STATUSES = ("ok", "error", "running")
"""The values of a run's ``status`` (docs/trace-format.md)."""
_TIME_FIELDS = ("started_at", "ended_at")
_NUMERIC_TEXT = re.compile(r"\s*[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*")
"""A string pydantic would read as a Unix timestamp rather than as an ISO 8601 time."""


def contract_problem(obj: dict[str, Any]) -> tuple[str, str] | None:
    """The first field of a run (already validated by the model) that the trace format does
    not allow although the model takes it, with the reason: a blank run or step id, a status
    other than ``ok``, ``error`` and ``running``, a time given as a number.

    The model is lenient on purpose: the store's own records and the capture SDK go through it.
    These checks are the importer's (and the server's ``POST /api/runs``), on the record as
    written (before the model converts it).
    """
    broken = _id_problem(obj, "id", "")
    if broken is not None:
        return broken
    status = obj.get("status", "ok")
    if status not in STATUSES:
        return "status", (f"status must be 'ok', 'error' or 'running' (got {_short(status)})")
    broken = _time_problem(obj, "")
    if broken is not None:
        return broken
    steps = obj.get("steps")
    if type(steps) is list:
        for index, step in enumerate(steps):
            where = f"steps[{index}]."
            broken = _id_problem(step, "id", where) or _time_problem(step, where)
            if broken is not None:
                return broken
    return None


def _id_problem(record: dict[str, Any], key: str, where: str) -> tuple[str, str] | None:
    value = record.get(key)
    if type(value) is str and not value.strip():
        what = "a step id" if where else "a run id"
        return f"{where}{key}", (
            f"{what} must not be empty or blank (got {value!r}); leave the field out and one "
            "is generated"
        )
    return None


def _time_problem(record: dict[str, Any], where: str) -> tuple[str, str] | None:
    for key in _TIME_FIELDS:
        value = record.get(key)
        if value is None or (type(value) is str and _NUMERIC_TEXT.fullmatch(value) is None):
            continue
        if isinstance(value, int | float | str):
            return f"{where}{key}", (
                f"expected an ISO 8601 time such as '2026-11-29T10:00:00Z', got the "
                f"{_json_type(value).removeprefix('a ')} {_short(value)}; the trace format does "
                "not read Unix timestamps"
            )
    return None


def _foreign(obj: dict[str, Any], source: str, line: int) -> FormatError | None:
    """The error for a record holding a key of another format, if it holds one."""
    foreign = foreign_keys(obj)
    if foreign:
        key, fmt = foreign[0]
        return FormatError(
            f"{key!r} is not a field of the trace format but of {fmt}; "
            "import this file with --format NAME (or leave --format out to detect it)",
            source=source,
            line=line,
            field=key,
        )
    return None


def _from_validation(exc: ValidationError, source: str, line: int) -> FormatError:
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = first.get("loc", ())
    field = _dotted(loc)
    message = str(first.get("msg", "invalid"))
    kind = first.get("type", "")
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    if not field and "schema_version" in message:
        field = "schema_version"
    if kind == "missing":
        reason = "required field is missing"
    elif kind in ("model_type", "dict_type", "model_attributes_type") and not loc:
        reason = f"expected a JSON object (one run), found {_json_type(first.get('input'))}"
    elif kind.startswith("value_error") or "schema_version" in message:
        reason = message
    else:
        reason = f"{message} (got {_short(first.get('input'))})"
    more = len(errors) - 1
    if more:
        reason += f" (and {more} more problem{'s' if more > 1 else ''} in this run)"
    return FormatError(reason, source=source, line=line, field=field or None)


def _dotted(loc: tuple[int | str, ...] | Any) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _short(value: Any, limit: int = 60) -> str:
    if isinstance(value, dict | list):
        text = json.dumps(value, ensure_ascii=False, default=str)
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
