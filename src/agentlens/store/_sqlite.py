"""The embedded SQLite store: :class:`SQLiteStore`.

URLs: ``sqlite:///relative/path.db`` (relative to the working directory when opened),
``sqlite:////absolute/path.db``, and ``sqlite:///:memory:`` (or ``sqlite://``) for a private
in-memory store that lives as long as the :class:`SQLiteStore` object.

Concurrency
-----------
File stores run in WAL mode with ``synchronous=NORMAL`` and a busy timeout. There is one writer
connection, guarded by a lock, so writes of one process are serialised (and ``BEGIN IMMEDIATE``
serialises writers of different processes). Reads go through a small pool of separate read-only
connections, so a reader never waits for a writer: capture's background exporter thread can write
while the application reads. Every page of a query is read in one read transaction, so it sees a
consistent snapshot. The lazy iterators (:meth:`~SQLiteStore.query_traces`,
:meth:`~SQLiteStore.list_runs`, :meth:`~SQLiteStore.unscored_run_ids`) page through the database
by key (``sort_at, id``), holding no connection and no transaction between pages. An in-memory
store has a single connection, so there reads and writes take turns.

Writes
------
``put_traces`` is atomic per call: every run of the call is stored, or none is (one transaction,
rows inserted with ``executemany`` in chunks). A run whose id is already stored is replaced: its
scores and score modes are deleted with it. A run identical to the stored one (same JSON,
same steps) is left as it is, so importing a file twice changes nothing, and its scores stay.

Schema (version 2; see :mod:`agentlens.store._migrations`)
-----------------------------------------------------------
Times are integers: microseconds since the Unix epoch, UTC. JSON columns (``doc``) hold compact
JSON text, exactly as the model serialises it, so ``json_extract`` works on them.

``runs`` — one row per run.
    ``id`` TEXT PRIMARY KEY (the run id), ``project``, ``agent``, ``name``, ``status``,
    ``started_at``/``ended_at`` (µs or NULL), ``sort_at`` (``started_at``, or -2**63 when the run
    has no start time, so such runs sort before every dated run and among themselves by id),
    ``has_output`` (0/1), ``step_count``, ``release`` (``metadata.release`` as text, or NULL),
    ``doc`` (the run's JSON without ``steps``), ``steps`` (the JSON array of its steps; the last
    column, so reading the others does not read it). Indexes: ``(sort_at, id)``,
    ``(agent, sort_at, id)``, ``(project, sort_at, id)``. A time window
    ``start <= started_at < end`` is ``sort_at >= :start AND sort_at < :end AND started_at IS NOT
    NULL``. A run is read back as ``doc`` with ``"steps": <steps>`` added (rebuilt without a
    second validation: see :meth:`SQLiteStore._load`). Step-level SQL goes
    through ``json_each(runs.steps)``, e.g. the tools called:
    ``SELECT json_extract(s.value, '$.name') FROM runs, json_each(runs.steps) AS s
    WHERE json_extract(s.value, '$.kind') = 'tool'``.

    Why steps are not rows of their own: measured on this project's benchmark
    (``benchmarks/bench_store.py``, see docs/storage.md), a ``steps`` table (one row and one JSON
    document per step, clustered by run) cost about twice the CPU per ingested step of one JSON
    array per run, and bought nothing on reads, where building the pydantic objects dominates.

``scores`` — one row per (run, scorer, scorer version); primary key ``(run_id, scorer, version)``.
    ``verdict`` (``passed``/``flagged``/``unverifiable``/``error``), ``passed`` (0/1), ``value``,
    ``detail``, ``error``, ``finding_count``, ``scored_at`` (µs), ``doc`` (the Score's JSON), and
    copies of the run's columns for rate queries without a join: ``run_project``, ``run_agent``,
    ``run_release``, ``run_started_at``. They cannot go stale: a score exists only for a stored run
    (``put_scores`` refuses others), and replacing or deleting a run deletes its scores. Indexes:
    ``(scorer, version, run_started_at)``, ``(run_started_at)``.

``score_modes`` — the failure modes each score found, one row per (score, mode).
    ``run_id``, ``scorer``, ``version``, ``mode`` (a :class:`~agentlens.model.FailureMode`
    value), ``findings`` (how many findings of that mode). Primary key
    ``(run_id, scorer, version, mode)``; index ``(scorer, version, mode)``. A rate by mode is a
    join of ``scores`` (window, denominator) with ``score_modes`` on the score's key.

``rate_sigs``, ``rate_runs``, ``rate_rollup`` (migration 2) — what rate queries read.
    ``rate_sigs`` holds each distinct signature (the scorers, versions, verdicts and failure
    modes of all of one run's scores); ``rate_runs`` one row per scored run with its start time,
    UTC day, agent, release and signature; ``rate_rollup`` a count of runs per (day, agent,
    release, signature). Triggers on ``scores`` and ``score_modes`` keep them exact under every
    write (see :mod:`agentlens.store._sqlite_rates`).

``run_links`` (migration 8) — one row per entry of a run's ``links``: ``kind``, ``item_id``,
    ``run_id``, ``sort_at``; primary key in that order, index ``(run_id)``. Written with the run
    by ``put_traces`` (a replaced run's rows are written again) and deleted with it: what a page
    of one content item's runs (``/api/runs?link=KIND:ID``) reads, newest first.

``run_rollup`` (migration 9) — the runs, scored or not, per (UTC day, agent, release, project):
    a rate's denominator and each group's runs, kept by triggers on ``runs`` (with
    ``run_rollup_replaced`` for ``INSERT OR REPLACE``; see :mod:`agentlens.store._sqlite_rates`).

``_agentlens_migrations`` — ``(version, name, applied_at)`` of every applied migration.
"""

from __future__ import annotations

import json
import operator
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError, from_json

from agentlens.config import parse_store_url
from agentlens.errors import (
    ConfigError,
    RunNotFoundError,
    SchemaVersionError,
    StoreError,
    UnreadableRunError,
)
from agentlens.model import MAX_INT_DIGITS, Score, Step, Trace, from_epoch_us, to_epoch_us
from agentlens.model._score import ScoreRow
from agentlens.store import _sqlite_rates
from agentlens.store._copy import TableCopyMixin
from agentlens.store._migrations import (
    MIGRATIONS_TABLE,
    current_version,
    latest_version,
    migrate,
)
from agentlens.store._protocol import RunFilter, RunSummary
from agentlens.store._rates import RateCounts, RateQuery, check_breakdown
from agentlens.store._server import ServerTablesMixin
from agentlens.store._sqlite_filter import _as_ids, _filter_sql, _FilterSQL, _marks, _where_clause
from agentlens.store._sqlite_review import SUMMARY_COLUMNS, ReviewMixin, summary_of

__all__ = ["NO_TIME", "SQLiteStore", "from_us", "parse_sqlite_url", "to_us"]

_T = TypeVar("_T")

NO_TIME = -(2**63)
"""``runs.sort_at`` of a run without ``started_at``: before every real time."""

_STEPS: TypeAdapter[list[Step]] = TypeAdapter(list[Step])
_WRITE_CHUNK = 256
"""Runs prepared and inserted per ``executemany`` round inside a write transaction."""
_SCORE_CHUNK = 1000
"""Scores prepared and written per round of ``put_scores``: each round reads the chunk's runs,
stored failure modes and current scores and writes its flags with about fifteen statements,
so a batch of ``agentlens score`` (200 runs, up to five scores each) is one round."""
_FIRST_PAGE = 32
"""Runs in the first page of a lazy query: small, so the first result comes quickly."""
_MAX_PAGE = 512
"""Pages double in size up to this many runs."""
_MAX_IDLE_READERS = 4
_ID_BATCH = 500
"""Run ids bound per statement when a write handles a list of ids."""
_PAGE_SIZE = 16384
"""SQLite page size of a new store: a run's row (tens of KB with its steps) needs fewer overflow
pages; measured about 20 % less ingest CPU than 4 KiB, for a file about 8 % larger."""


to_us = to_epoch_us
"""Microseconds since the Unix epoch (UTC) of a time: the encoding of every time column."""
from_us = from_epoch_us
"""The UTC datetime of a microsecond timestamp written by :func:`to_us`."""


def _in_chunks(
    items: Iterable[_T], put: Callable[[list[_T], int], None], size: int = _WRITE_CHUNK
) -> int:
    """Hand ``items`` to ``put(chunk, offset)`` ``size`` at a time (``offset``: the position of
    the chunk's first item, for error messages); return how many there were. The one batching
    loop of ``put_traces`` and ``put_scores``."""
    written = 0
    chunk: list[_T] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            put(chunk, written)
            written += len(chunk)
            chunk = []
    if chunk:
        put(chunk, written)
        written += len(chunk)
    return written


def _rows_of(scores: Iterable[Score], label: str) -> Iterator[ScoreRow]:
    """The :class:`ScoreRow` of each of ``scores``, for ``put_scores``; an item that is not a
    :class:`Score` stops the write (its transaction is rolled back: nothing is written)."""
    for index, score in enumerate(scores):
        if not isinstance(score, Score):
            raise StoreError(
                f"{label}: item {index} given to put_scores is a "
                f"{type(score).__name__}, not a Score; nothing was written"
            )
        yield ScoreRow.of(score)


def _fresh_scores(
    latest: dict[tuple[str, str, str], ScoreRow],
) -> dict[tuple[str, str, str], Score]:
    """The scores at hand among rows just written, by (run, scorer, version): the review's
    derivation reads the findings of the others back from the store."""
    return {key: row.score for key, row in latest.items() if row.score is not None}


_ROWS_PER_INSERT = 500
"""Rows per multi-row ``INSERT``: at most 15 columns, so at most 7,500 parameters."""


def _insert_rows(conn: sqlite3.Connection, head: str, values: list[Any], width: int) -> None:
    """``head VALUES (...), (...), ...``: the rows whose ``width`` values follow each other in
    ``values``, inserted in order, up to :data:`_ROWS_PER_INSERT` per statement.

    One statement for many rows rather than ``executemany``: a table with triggers makes every
    statement open a statement journal, which copies each page the row touches (16 KiB pages:
    the table's and each index's) before changing it. Per row that was half the cost of storing
    a score (9.5 against 5.0 µs per row on the benchmark's scores)."""
    row = "(" + ", ".join("?" * width) + ")"
    step = _ROWS_PER_INSERT * width
    for start in range(0, len(values), step):
        part = values[start : start + step]
        conn.execute(f"{head} VALUES {', '.join([row] * (len(part) // width))}", part)


def serialise_run(trace: Trace, label: str) -> tuple[str, str, str | None]:
    """A run as every backend stores it: its JSON without steps, its steps' JSON array, and
    its release (``metadata.release``) as text.

    Raises:
        StoreError: two steps share an id, or the run cannot be serialised (``label`` names
            the store); nothing was written.
    """
    if len({step.id for step in trace.steps}) != len(trace.steps):
        seen: set[str] = set()
        for step in trace.steps:
            if step.id in seen:
                raise StoreError(
                    f"{label}: run {trace.id!r} has two steps with id {step.id!r}; "
                    "nothing was written"
                )
            seen.add(step.id)
    try:
        doc = trace.model_dump_json(exclude={"steps"})
        steps = _STEPS.dump_json(trace.steps).decode()
    except PydanticSerializationError as exc:
        raise StoreError(
            f"{label}: run {trace.id!r} cannot be serialised: {exc}; nothing was written"
        ) from None
    release = trace.metadata.get("release")
    if release is not None and not isinstance(release, str):
        release = json.dumps(release) if not isinstance(release, int | float) else str(release)
    return doc, steps, release


def parse_sqlite_url(url: str) -> Path | None:
    """The file path a ``sqlite:`` URL names, or ``None`` for an in-memory store.

    ``sqlite:///a/b.db`` is the relative path ``a/b.db``; ``sqlite:////a/b.db`` is ``/a/b.db``;
    ``sqlite:///:memory:`` and ``sqlite://`` are in memory; ``~`` is expanded. The URL is parsed
    by :func:`agentlens.config.parse_store_url`, the one parser of store URLs.

    Raises:
        ConfigError: the URL is not a ``sqlite://`` URL, or has a host or query part.
    """
    return parse_store_url(url).sqlite_path


class _StoreFailure(StoreError):
    """A :class:`StoreError` from SQLite; ``reason`` is the message without the path."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(slots=True)
class _Prepared:
    """A run turned into its row, ready to insert."""

    row: tuple[Any, ...]
    doc: str
    steps: str
    links: dict[str, str]


class SQLiteStore(ReviewMixin, ServerTablesMixin, TableCopyMixin):
    """The embedded store: a SQLite file (WAL, one writer, pooled readers) or a private memory DB.

    Implements :class:`agentlens.store.TraceStore`. Thread-safe. The schema is documented in
    this module's docstring.

    Args:
        url: ``sqlite:///path``, ``sqlite:////abs/path`` or ``sqlite:///:memory:``.
        timeout_s: how long a write waits for another process's write lock before failing.
        read_only: open an existing store for reading only: nothing is created (a missing
            file is an error), nothing is written, and a store on read-only media (or a file
            this process may not write) can be read. Ignored for an in-memory store.

    Raises:
        ConfigError: the URL is not a SQLite URL.
        StoreError: the file cannot be opened, is not a SQLite database, or is a SQLite database
            of another application (refused untouched), or, read-only, does not exist (the
            message names it).
        SchemaVersionError: the store was written by a newer agentlens.
    """

    def __init__(self, url: str, *, timeout_s: float = 5.0, read_only: bool = False) -> None:
        self.url = url
        path = parse_sqlite_url(url)
        self._memory = path is None
        self._path = None if path is None else path.absolute()
        self._label = "sqlite:///:memory:" if self._path is None else str(self._path)
        self._timeout_s = timeout_s
        self._write_lock = threading.RLock()
        self._pool_lock = threading.Lock()
        self._idle: list[sqlite3.Connection] = []
        self._closed = False
        self._read_only = read_only and self._path is not None
        self._immutable = False
        self._writer: sqlite3.Connection = None  # type: ignore[assignment]  # read-only: none
        if self._read_only:
            self._open_read_only()
            return
        self._writer = self._connect(write=True)
        try:
            migrate(self._writer, self._label)
        except SchemaVersionError:
            self._writer.close()
            raise
        except sqlite3.Error as exc:
            self._writer.close()
            err = self._error(exc)
            raise StoreError(f"{self._label}: cannot open the store: {err.reason}") from None

    # -- connections --------------------------------------------------------------------------

    def _open_read_only(self) -> None:
        """Check that the file is an agentlens store this agentlens reads, without writing.

        A store that still needs a migration is migrated when the file can be written (as any
        open would); on read-only media it is refused, naming the versions.
        """
        assert self._path is not None
        if not self._path.is_file():
            what = "is a folder" if self._path.is_dir() else "does not exist"
            raise StoreError(
                f"{self._label}: no agentlens store here (the path {what}); check --db or "
                "AGENTLENS_DB (read commands never create a store)"
            )
        conn = self._connect(write=False)
        try:
            current = current_version(conn)
        except sqlite3.Error as exc:
            conn.close()
            raise StoreError(f"{self._label}: cannot open the store: {exc}") from None
        self._release(conn)
        newest = latest_version()
        if current == 0:
            raise StoreError(
                f"{self._label}: not an agentlens store (an empty database); check --db or "
                "AGENTLENS_DB (read commands never create a store)"
            )
        if current > newest:
            raise SchemaVersionError(
                f"{self._label}: the store has schema version {current}, newer than the "
                f"{newest} this agentlens knows; upgrade agentlens to read it"
            )
        if current < newest:
            if self._immutable or not os.access(self._path, os.W_OK):
                raise StoreError(
                    f"{self._label}: the store has schema version {current} and this agentlens "
                    f"reads {newest}; it is read-only here, so it cannot be upgraded: open it "
                    "once with a command that writes (e.g. agentlens score) where it is writable"
                )
            with SQLiteStore(self.url, timeout_s=self._timeout_s):
                pass  # migrates, then closes

    def _ro_uri(self) -> str:
        assert self._path is not None
        uri = "file:" + urllib.parse.quote(str(self._path)) + "?mode=ro"
        return uri + "&immutable=1" if self._immutable else uri

    def _connect(self, *, write: bool) -> sqlite3.Connection:
        if self._read_only:
            return self._connect_read_only()
        target = ":memory:" if self._path is None else str(self._path)
        conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(
                target, isolation_level=None, check_same_thread=False, timeout=self._timeout_s
            )
            conn.execute(f"PRAGMA busy_timeout = {int(self._timeout_s * 1000)}")
            if write and not self._memory:
                _refuse_foreign(conn, self._label)
                conn.execute(f"PRAGMA page_size = {_PAGE_SIZE}")  # only applies to a new file
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA temp_store = MEMORY")
            conn.execute(f"PRAGMA cache_size = {-65536 if write else -32768}")  # KiB
            if not write:
                conn.execute("PRAGMA query_only = ON")
        except sqlite3.Error as exc:
            if conn is not None:
                conn.close()
            hint = ""
            if self._path is not None and not self._path.parent.is_dir():
                hint = f" (the folder {self._path.parent} does not exist)"
            raise StoreError(f"{self._label}: cannot open the store: {exc}{hint}") from None
        return conn

    def _connect_read_only(self) -> sqlite3.Connection:
        """A connection that cannot write (``mode=ro``). A WAL store on read-only media, where
        SQLite cannot create the ``-shm`` file it reads through, is opened ``immutable``: read
        as it is on disk (nothing can be writing to it there)."""
        conn: sqlite3.Connection | None = None
        for attempt in range(2):
            try:
                conn = sqlite3.connect(
                    self._ro_uri(),
                    uri=True,
                    isolation_level=None,
                    check_same_thread=False,
                    timeout=self._timeout_s,
                )
                conn.execute(f"PRAGMA busy_timeout = {int(self._timeout_s * 1000)}")
                conn.execute("PRAGMA temp_store = MEMORY")
                conn.execute("PRAGMA cache_size = -32768")
                _refuse_foreign(conn, self._label)
                return conn
            except sqlite3.OperationalError as exc:
                if conn is not None:
                    conn.close()
                conn = None
                cannot_open = "unable to open" in str(exc) or "readonly" in str(exc)
                if attempt == 0 and cannot_open and not self._immutable:
                    self._immutable = True
                    continue
                raise StoreError(f"{self._label}: cannot open the store: {exc}") from None
            except sqlite3.Error as exc:
                if conn is not None:
                    conn.close()
                raise StoreError(f"{self._label}: cannot open the store: {exc}") from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self._label}: the store is closed")

    def _error(self, exc: sqlite3.Error) -> _StoreFailure:
        text = str(exc)
        if "locked" in text or "busy" in text:
            text = f"the store is locked by another writer (waited {self._timeout_s:g} s)"
        return _StoreFailure(f"{self._label}: {text}", text)

    def _acquire(self) -> sqlite3.Connection:
        with self._pool_lock:
            self._check_open()
            if self._idle:
                return self._idle.pop()
        return self._connect(write=False)

    def _release(self, conn: sqlite3.Connection) -> None:
        with self._pool_lock:
            if not self._closed and len(self._idle) < _MAX_IDLE_READERS:
                self._idle.append(conn)
                return
        conn.close()

    def read(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``work(connection)`` in one read transaction: a consistent snapshot, on a pooled
        read-only connection, never blocked by a writer. SQLite-specific (not part of
        :class:`TraceStore`), for tests and benchmarks that query the tables directly."""
        return self._read(work)

    # -- RateSource (the SQL is agentlens.store._sqlite_rates's) --------------------------------

    rates_by_project = True
    """:meth:`rate_counts` answers ``RateQuery.project`` (from the rollup's project column),
    :meth:`stored_scorers` and :meth:`stored_versions` take ``project``."""

    _runs_from_rollup = True
    """``False``: :meth:`rate_counts` counts each group's runs from ``runs`` instead of the
    run-count rollup (as before migration 9), for the benchmarks' baseline."""

    def rate_counts(self, query: RateQuery, by: str | None = None) -> list[RateCounts]:
        """Count runs by outcome over ``query``'s window (see :class:`RateSource`), from the
        rate rollup and the run-count rollup, in one read snapshot."""
        check_breakdown(by)
        rollup = self._runs_from_rollup
        return self._read(
            lambda conn: _sqlite_rates.rate_counts(conn, query, by, run_rollup=rollup)
        )

    _scorers_from_rollup = True
    """``False``: :meth:`stored_scorers` of a project looks for each scorer's scores in
    ``scores`` (as before), for the benchmarks' baseline."""

    def stored_scorers(self, *, project: str | None = None) -> list[str]:
        """Every scorer name with at least one stored score (of a run of ``project``, when
        given): an index skip-scan; a project's, from the rate rollup's signatures."""
        if project is not None and self._scorers_from_rollup:
            return self._read(lambda conn: _sqlite_rates.project_scorers(conn, project))
        return self._read(lambda conn: _sqlite_rates.stored_scorers(conn, project))

    def stored_versions(
        self, scorer: str, start_us: int | None = None, end_us: int | None = None, *,
        project: str | None = None,
    ) -> list[tuple[str, int]]:  # fmt: skip
        """The versions of ``scorer`` with scores of runs in the window (of ``project``, when
        given), each with its latest ``scored_at`` (µs), newest first."""
        return self._read(
            lambda conn: _sqlite_rates.stored_versions(conn, scorer, start_us, end_us, project)
        )

    def _read(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``work`` in one read transaction (a consistent snapshot)."""
        if self._memory:
            with self._write_lock:
                self._check_open()
                return self._in_read_tx(self._writer, work)
        conn = self._acquire()
        try:
            return self._in_read_tx(conn, work)
        finally:
            self._release(conn)

    def _in_read_tx(self, conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], _T]) -> _T:
        own = not conn.in_transaction  # a read from inside a write of this thread (memory store)
        try:
            if own:
                conn.execute("BEGIN")
            try:
                return work(conn)
            finally:
                if own and conn.in_transaction:
                    conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def _write(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``work`` in one write transaction: all of it is kept, or none of it."""
        with self._write_lock:
            self._check_open()
            if self._read_only:
                raise StoreError(f"{self._label}: the store was opened read-only")
            conn = self._writer
            nested = conn.in_transaction
            try:
                conn.execute("SAVEPOINT agentlens_write" if nested else "BEGIN IMMEDIATE")
                try:
                    result = work(conn)
                except BaseException:
                    if nested:
                        conn.execute("ROLLBACK TO agentlens_write")
                        conn.execute("RELEASE agentlens_write")
                    elif conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("RELEASE agentlens_write" if nested else "COMMIT")
                return result
            except sqlite3.Error as exc:
                raise self._error(exc) from None

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        """Close every connection (a file store checkpoints its WAL). Safe to call twice."""
        with self._write_lock:
            if self._closed:
                return
            with self._pool_lock:
                self._closed = True
                idle, self._idle = self._idle, []
            for conn in idle:
                conn.close()
            if self._writer is not None:
                self._writer.close()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.url!r})"

    @property
    def schema_version(self) -> int:
        """The schema version the store is at (the highest applied migration)."""
        return self._read(
            lambda c: int(
                c.execute("SELECT ifnull(max(version), 0) FROM _agentlens_migrations").fetchone()[0]
            )
        )

    # -- runs ---------------------------------------------------------------------------------

    def put_traces(self, traces: Iterable[Trace]) -> int:
        """Store (or replace) runs, atomically: every run of the call is stored, or none is.

        Returns how many traces the call stored (one per item; an item identical to the stored
        run counts, though nothing is rewritten and its scores stay).

        Raises:
            StoreError: an item is not a :class:`Trace`, a run has two steps with the same id, a
                value cannot be serialised, or the database failed. Nothing of the call is kept.
        """

        return self._write(lambda conn: _in_chunks(traces, partial(self._put_chunk, conn)))

    def _put_chunk(self, conn: sqlite3.Connection, chunk: list[Trace], offset: int) -> None:
        prepared: dict[str, _Prepared] = {}
        for index, trace in enumerate(chunk, offset):
            if not isinstance(trace, Trace):
                raise StoreError(
                    f"{self._label}: item {index} given to put_traces is a "
                    f"{type(trace).__name__}, not a Trace; nothing was written"
                )
            prepared[trace.id] = self._prepare(trace)
        ids = list(prepared)
        existing = conn.execute(
            f"SELECT id, doc, steps FROM runs WHERE id IN {_marks(len(ids))}", ids
        ).fetchall()
        replaced: list[str] = []
        for run_id, doc, steps in existing:
            new = prepared[run_id]
            if doc == new.doc and steps == new.steps:
                del prepared[run_id]  # identical: nothing to do, and its scores stay
            else:
                replaced.append(run_id)
        if replaced:
            self._delete(conn, replaced, replacing=True)
        if prepared:
            conn.executemany(
                "INSERT INTO runs (id, project, agent, name, status, started_at, ended_at,"
                " sort_at, has_output, step_count, release, doc, steps)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [item.row for item in prepared.values()],
            )
            conn.executemany(
                "INSERT INTO run_links (kind, item_id, run_id, sort_at) VALUES (?, ?, ?, ?)",
                [
                    (kind, item, p.row[0], p.row[7])
                    for p in prepared.values()
                    for kind, item in p.links.items()
                ],
            )
            self._review_rows_for_new_runs(
                conn, [(item.row[0], item.row[7], item.row[2]) for item in prepared.values()]
            )
        if replaced:
            self._prune_content(conn, replaced)

    def _prepare(self, trace: Trace) -> _Prepared:
        doc, steps, release = serialise_run(trace, self._label)
        started = to_us(trace.started_at)
        row = (
            trace.id,
            trace.project,
            trace.agent,
            trace.name,
            trace.status,
            started,
            to_us(trace.ended_at),
            NO_TIME if started is None else started,
            int(trace.has_output),
            len(trace.steps),
            release,
            doc,
            steps,
        )
        return _Prepared(row=row, doc=doc, steps=steps, links=dict(trace.links))

    @classmethod
    def _delete(
        cls, conn: sqlite3.Connection, run_ids: list[str], *, replacing: bool = False
    ) -> int:
        """Delete runs with their scores and review state; return how many runs there were.

        ``replacing``: the runs are about to be written again (their verdicts and content flags
        are kept, see :meth:`ReviewMixin._forget_review`).

        Ids are bound as parameters, never passed through ``json_each``: a run id may hold any
        character, NUL included, and SQLite's JSON functions cut text at a NUL.
        """
        deleted = 0
        for start in range(0, len(run_ids), _ID_BATCH):
            part = run_ids[start : start + _ID_BATCH]
            marks = _marks(len(part))
            conn.execute(f"DELETE FROM score_modes WHERE run_id IN {marks}", part)
            conn.execute(f"DELETE FROM scores WHERE run_id IN {marks}", part)
            conn.execute(f"DELETE FROM run_links WHERE run_id IN {marks}", part)
            deleted += conn.execute(f"DELETE FROM runs WHERE id IN {marks}", part).rowcount
        cls._forget_review(conn, run_ids, replacing=replacing)
        return deleted

    def get_trace(self, run_id: str) -> Trace:
        """Return one run with its steps.

        Raises:
            RunNotFoundError: no run has this id.
        """

        def work(conn: sqlite3.Connection) -> tuple[str, str] | None:
            row = conn.execute("SELECT doc, steps FROM runs WHERE id = ?", (run_id,)).fetchone()
            return None if row is None else (row[0], row[1])

        row = self._read(work)
        if row is None:
            raise RunNotFoundError(run_id)
        return self._load(run_id, *row)

    def _load(self, run_id: str, doc: str, steps: str) -> Trace:
        """A stored run as a :class:`Trace`.

        The run was validated when it was stored, so it is rebuilt with the trusted constructor
        (equal to what validation makes, with less CPU), from the JSON parser that
        ``model_validate_json`` uses. Anything the trusted constructor does not handle exactly
        is validated, so a row this agentlens cannot read still raises.

        Raises:
            UnreadableRunError: the stored form cannot be read back (the message names the run).
        """
        try:
            data = _parse(doc)
            if type(data) is dict:
                data["steps"] = _parse(steps)
            return Trace._from_trusted(data, owned=True)
        except ValidationError as exc:
            reason = exc.errors()[0]["msg"] if exc.errors() else str(exc)
        except (ValueError, RecursionError) as exc:  # malformed JSON
            reason = f"Invalid JSON: {exc}"
        raise UnreadableRunError(
            f"{self._label}: run {run_id!r} is stored in a form this agentlens cannot read: "
            f"{reason} (`agentlens delete {run_id}` removes it)",
            run_id=run_id,
            reason=reason,
        )

    def query_traces(
        self,
        where: RunFilter | None = None,
        *,
        limit: int | None = None,
        newest_first: bool = True,
        on_unreadable: Callable[[UnreadableRunError], None] | None = None,
    ) -> Iterator[Trace]:
        """Iterate lazily over the runs that match, with their steps.

        Order: by ``started_at`` (then id), newest first unless ``newest_first=False``; runs
        without ``started_at`` sort before every dated run (so last when newest first). Pages of
        runs are read one at a time (32 runs first, doubling up to 512), each in one snapshot.

        A stored run that cannot be read back raises :class:`UnreadableRunError`, unless
        ``on_unreadable`` is given: then the error is passed to it, the run is left out, and the
        iteration goes on (``limit`` counts the runs left out too).
        """
        _check_limit(limit)
        filter_sql = _filter_sql(where)

        def fetch(_: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
            return rows

        def iterate() -> Iterator[Trace]:
            for page in self._pages(filter_sql, "r.doc, r.steps", fetch, limit, newest_first):
                for _, run_id, doc, steps in page:
                    if on_unreadable is None:
                        yield self._load(run_id, doc, steps)
                        continue
                    try:
                        trace = self._load(run_id, doc, steps)
                    except UnreadableRunError as exc:
                        on_unreadable(exc)
                        continue
                    yield trace
                    del trace  # not kept while the next run is read

        return iterate()

    def list_runs(
        self, where: RunFilter | None = None, *, limit: int | None = None, newest_first: bool = True
    ) -> Iterator[RunSummary]:
        """Iterate lazily over summaries of the runs that match (no steps loaded).

        Same order as :meth:`query_traces`.
        """
        _check_limit(limit)
        filter_sql = _filter_sql(where).with_review()

        def fetch(_: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> list[RunSummary]:
            return [summary_of(row, _metadata) for row in rows]

        def iterate() -> Iterator[RunSummary]:
            for page in self._pages(filter_sql, SUMMARY_COLUMNS, fetch, limit, newest_first):
                yield from page

        return iterate()

    def run_keys(
        self, where: RunFilter | None = None, *, newest_first: bool = True
    ) -> Iterator[tuple[str, str | None]]:
        """Iterate lazily over ``(id, agent)`` of the runs that match, in :meth:`list_runs`'s
        order: what ``agentlens score`` plans its chunks from, without building a
        :class:`RunSummary` per run (not part of :class:`TraceStore`; the runner falls back to
        :meth:`list_runs` without it)."""
        filter_sql = _filter_sql(where)

        def fetch(_: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
            return [(row[1], row[2]) for row in rows]

        def iterate() -> Iterator[tuple[str, str | None]]:
            for page in self._pages(filter_sql, "r.agent", fetch, None, newest_first):
                yield from page

        return iterate()

    def score_keys(self, run_ids: Sequence[str]) -> dict[str, set[tuple[str, str]]]:
        """The ``(scorer, version)`` of every stored score of each of these runs that is stored
        (a run without scores maps to an empty set; an id not stored is left out): which
        scorers each run of a chunk still needs, in one statement instead of one
        :meth:`unscored_run_ids` per scorer (not part of :class:`TraceStore`)."""
        ids = _as_ids(run_ids)

        def work(conn: sqlite3.Connection) -> dict[str, set[tuple[str, str]]]:
            keys: dict[str, set[tuple[str, str]]] = {}
            for start in range(0, len(ids), _ID_BATCH):
                part = ids[start : start + _ID_BATCH]
                for run_id, scorer, version in conn.execute(
                    "SELECT r.id, s.scorer, s.version FROM runs r"
                    " LEFT JOIN scores s ON s.run_id = r.id"
                    f" WHERE r.id IN {_marks(len(part))}",
                    part,
                ):
                    have = keys.setdefault(run_id, set())
                    if scorer is not None:
                        have.add((scorer, version))
            return keys

        return self._read(work) if ids else {}

    def count_runs(self, where: RunFilter | None = None) -> int:
        """How many runs match."""
        filter_sql = _filter_sql(where)
        clauses, params = filter_sql.sql()
        sql = "SELECT count(*) FROM runs r" + filter_sql.join + _where_clause(clauses)
        return int(self._read(lambda c: c.execute(sql, params).fetchone()[0]))

    def delete_runs(self, run_ids: Iterable[str]) -> int:
        """Delete runs with their steps and scores. Returns how many runs were deleted."""
        ids = list(dict.fromkeys(_as_ids(run_ids)))

        def work(conn: sqlite3.Connection) -> int:
            return self._delete(conn, ids)

        return self._write(work) if ids else 0

    def _pages(
        self,
        filter_sql: _FilterSQL,
        columns: str,
        fetch: Callable[[sqlite3.Connection, list[tuple[Any, ...]]], list[_T]],
        limit: int | None,
        newest_first: bool,
    ) -> Iterator[list[_T]]:
        """Keyset pagination over ``runs`` by ``(sort_at, id)``; one read transaction per page.

        Each row handed to ``fetch`` starts with ``sort_at, id`` followed by ``columns``. A
        filter on at most :data:`_MAX_PAGE` run ids is read in one page (``agentlens score``
        reads each chunk's runs so, and asks which of them each scorer still needs); when every
        run it names is wanted (no smaller ``limit``), its rows are read unordered and sorted
        here by their keys, which is the order ``ORDER BY`` gives (integers, then ids compared
        as UTF-8 bytes, which is their code points' order): SQLite's sorter would copy every
        row whole, steps included, into a temporary b-tree (30 µs per run of the benchmark's).
        """
        order = "DESC" if newest_first else "ASC"
        after_op = "<" if newest_first else ">"
        sort_col, id_col = filter_sql.key
        after: tuple[int, str] | None = None
        remaining, size = _first_page(limit, filter_sql.most)
        whole = remaining is not None and remaining == filter_sql.most and remaining <= _MAX_PAGE
        while remaining is None or remaining > 0:
            n = size if remaining is None else min(size, remaining)
            # After the first page the key cursor replaces the window bound it makes redundant,
            # so the index range starts at the cursor instead of re-skipping earlier pages.
            page_clauses, page_params = filter_sql.sql(
                low=after is None or newest_first, high=after is None or not newest_first
            )
            if after is not None:
                page_clauses.append(f"({sort_col}, {id_col}) {after_op} (?, ?)")
                page_params.extend(after)
            sql = (
                f"SELECT {sort_col}, {id_col}, {columns} FROM runs r"
                + filter_sql.join
                + _where_clause(page_clauses)
                + f" ORDER BY {sort_col} {order}, {id_col} {order} LIMIT ?"
            )
            page_params.append(n)
            unordered = (
                f"SELECT {sort_col}, {id_col}, {columns} FROM runs r"
                + filter_sql.join
                + _where_clause(page_clauses)
                if whole
                else None
            )

            def work(
                conn: sqlite3.Connection,
                sql: str = sql,
                page_params: list[Any] = page_params,
                unordered: str | None = unordered,
            ) -> tuple[list[tuple[Any, ...]], list[_T]]:
                if unordered is None:
                    rows = conn.execute(sql, page_params).fetchall()
                    return rows, fetch(conn, rows)
                rows = conn.execute(unordered, page_params[:-1]).fetchall()
                try:
                    rows.sort(key=_page_key, reverse=newest_first)
                except TypeError:  # a key of another type (a row written by hand): SQL's order
                    rows = conn.execute(sql, page_params).fetchall()
                return rows, fetch(conn, rows)

            rows, items = self._read(work)
            if items:
                yield items
            if len(rows) < n:
                return
            after = (rows[-1][0], rows[-1][1])
            if remaining is not None:
                remaining -= len(rows)
            size = min(size * 2, _MAX_PAGE)

    # -- scores -------------------------------------------------------------------------------

    def put_scores(self, scores: Iterable[Score]) -> int:
        """Store scores, replacing any earlier score of the same (run, scorer, version).

        Atomic like :meth:`put_traces`. Returns how many scores were written.

        Raises:
            RunNotFoundError: a score is for a run that is not stored (nothing was written).
            StoreError: an item is not a :class:`Score`, or the database failed.
        """
        return self._put_score_rows(_rows_of(scores, self._label))

    def _put_score_rows(self, rows: Iterable[ScoreRow]) -> int:
        """:meth:`put_scores` of scores in the form it writes them (:class:`ScoreRow`, each
        with the score's own stored JSON): what ``agentlens score --workers`` stores."""

        def write(conn: sqlite3.Connection) -> int:
            with _sqlite_rates.bulk_rollup(conn) as touched:
                return _in_chunks(rows, partial(self._put_row_chunk, conn, touched), _SCORE_CHUNK)

        return self._write(write)

    def _put_row_chunk(
        self, conn: sqlite3.Connection, touched: set[str], chunk: list[ScoreRow], offset: int
    ) -> None:
        run_ids = list(dict.fromkeys(r.run_id for r in chunk))
        runs = {
            row[0]: row[1:]
            for row in conn.execute(
                "SELECT id, project, agent, release, started_at FROM runs"
                f" WHERE id IN {_marks(len(run_ids))}",
                run_ids,
            )
        }
        for run_id in run_ids:
            if run_id not in runs:
                raise RunNotFoundError(run_id)
        touched.update(run_ids)
        latest: dict[tuple[str, str, str], ScoreRow] = {}
        for row in chunk:  # a later score of the same key in the call wins
            latest[(row.run_id, row.scorer, row.version)] = row
        score_rows: list[Any] = []
        mode_rows: list[tuple[Any, ...]] = []
        for key, row in latest.items():
            project, agent, release, started_at = runs[row.run_id]
            score_rows += (
                *key,
                row.verdict,
                int(row.passed),
                row.value,
                row.detail,
                row.error,
                row.finding_count,
                row.scored_at,
                project,
                agent,
                release,
                started_at,
                row.doc,
            )
            if row.modes:
                mode_rows.extend((*key, mode, n) for mode, n in row.modes)
        # only the keys stored before have failure-mode rows to replace
        stored = set(
            conn.execute(
                "SELECT run_id, scorer, version FROM score_modes"
                f" WHERE run_id IN {_marks(len(run_ids))}",
                run_ids,
            )
        )
        stale = [key for key in latest if key in stored]
        if stale:
            conn.executemany(
                "DELETE FROM score_modes WHERE run_id = ? AND scorer = ? AND version = ?", stale
            )
        _insert_rows(
            conn,
            "INSERT OR REPLACE INTO scores (run_id, scorer, version, verdict, passed, value,"
            " detail, error, finding_count, scored_at, run_project, run_agent, run_release,"
            " run_started_at, doc)",
            score_rows,
            15,
        )
        conn.executemany(
            "INSERT INTO score_modes (run_id, scorer, version, mode, findings)"
            " VALUES (?, ?, ?, ?, ?)",
            mode_rows,
        )
        self._derive(conn, run_ids, _fresh_scores(latest))

    def get_scores(self, run_id: str) -> list[Score]:
        """Every stored score of one run (all scorers, all versions), oldest first.

        An unknown run has no scores (an empty list).
        """
        docs = self._read(
            lambda c: c.execute(
                "SELECT doc FROM scores WHERE run_id = ? ORDER BY scored_at, scorer, version",
                (run_id,),
            ).fetchall()
        )
        return [Score.model_validate_json(doc) for (doc,) in docs]

    def unscored_run_ids(
        self, scorer: str, version: str, where: RunFilter | None = None, *, limit: int | None = None
    ) -> Iterator[str]:
        """Ids of matching runs with no score from ``scorer`` at ``version``, oldest first.

        Lazy, paged like :meth:`query_traces`; each page is an index scan over the window with
        an anti-join (``NOT EXISTS``) on the scores' primary key.
        """
        _check_limit(limit)
        filter_sql = _filter_sql(where).plus(
            "NOT EXISTS (SELECT 1 FROM scores s"
            " WHERE s.run_id = r.id AND s.scorer = ? AND s.version = ?)",
            scorer,
            version,
        )

        def iterate() -> Iterator[str]:
            for page in self._pages(
                filter_sql, "1", lambda _, rows: [r[1] for r in rows], limit, False
            ):
                yield from page

        return iterate()


def _refuse_foreign(conn: sqlite3.Connection, label: str) -> None:
    """Refuse, before anything is written to it, a SQLite database of another application: one
    with tables but without agentlens's migrations table.

    Raises:
        StoreError: naming the file and some of its tables.
    """
    tables = [
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
            " AND name NOT LIKE 'sqlite%' ORDER BY name"
        )
    ]
    if tables and MIGRATIONS_TABLE not in tables:
        shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
        raise StoreError(
            f"{label}: a SQLite database, but not an agentlens store (it has {shown}); "
            "it was left untouched. Point --db (or AGENTLENS_DB) at an agentlens store or a new file"
        )


def _parse(text: str) -> Any:
    """Stored JSON as Python values: pydantic's parser, or for what it refuses (values nested
    more than 200 deep, which the model can store; integers of more than 4,300 digits) the
    standard one, which reads them alike. An integer too long for Python's integer-string
    conversion (a run stored by an earlier agentlens, or built in Python and stored through the
    API) is read as ``{"type": "int", "repr": "<its decimal digits>"}``, the form capture records
    such a number in, so that no stored run becomes unreadable.

    Only the keys go through pydantic's cache of short strings: caching every string value too
    (its default) cost a third of the parse on the benchmark's runs (38-46 against 27-30 µs per
    run), for equal values (only which equal strings are one object differs)."""
    try:
        return from_json(text, cache_strings="keys")
    except ValueError:
        return json.loads(text, parse_int=_parse_int)


def _metadata(text: str | None) -> dict[str, Any]:
    """A run's ``metadata`` from its stored JSON; ``{}`` when absent or unreadable (a listing
    shows the run; reading it whole reports what is wrong)."""
    if not text:
        return {}
    try:
        value = _parse(text)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _parse_int(text: str) -> Any:
    if len(text) - text.startswith("-") <= MAX_INT_DIGITS:
        return int(text)
    return {"type": "int", "repr": text}


_page_key = operator.itemgetter(0, 1)
"""A page row's ``(sort_at, id)``."""


def _first_page(
    limit: int | None, most: int | None, first: int = _FIRST_PAGE, largest: int = _MAX_PAGE
) -> tuple[int | None, int]:
    """``(rows left to read, size of the first page)`` of a lazy query with ``limit`` over a
    filter that matches at most ``most`` runs (``None``: unbounded), whose pages start at
    ``first`` rows and double up to ``largest``: a bounded filter's runs are read in one page
    when they fit in ``largest``, and no page is read after the last of them."""
    if most is None:
        return limit, first
    remaining = most if limit is None else min(limit, most)
    return remaining, max(first, min(remaining, largest))


def _check_limit(limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ConfigError(f"limit must be a non-negative integer, got {limit!r}")
