"""The PostgreSQL store: :class:`PostgresStore`, for teams and for several processes at once.

URLs: ``postgresql://user:password@host:5432/dbname`` (also ``postgres://`` and
``postgresql+psycopg://``), with any libpq parameter in the query string, plus two of agentlens's
own: ``schema=NAME`` (the schema the tables live in, created if missing; default ``public``) and
``pool_max=N`` (connections this process may open; default 8). Driver: psycopg 3 with
``psycopg_pool`` (``pip install 'agentlens[postgres]'``).

It implements the same :class:`~agentlens.store.TraceStore` contract as
:class:`~agentlens.store.SQLiteStore` and passes the same contract suite (``tests/store/``): the
same time windows (``start <= started_at < end``, undated runs in no window), the same order
(``started_at`` then id, undated runs before every dated run), replace-on-reimport (a changed run
drops its scores; an identical one is left alone), and the same rate counts (:mod:`._pg_rates`).

Concurrency
-----------
Every method is safe from many threads and many processes. Each write is one transaction
(READ COMMITTED), so a ``put_traces`` call is atomic as in SQLite, but writers do not take turns:
two processes ingest at once. Runs are locked by id for the time of a
write (its row of ``run_keys``, one per stored run id), so two writers of the same run id take
turns and never store it twice. Each page of a lazy
query is one statement (one snapshot); rate queries read in one REPEATABLE READ snapshot.

Schema (see :mod:`._pg_migrations`)
-----------------------------------
Times are ``bigint`` microseconds since the epoch, UTC, as in SQLite, so windows are the same
integer comparisons. Text keys use the ``"C"`` collation (byte order, as SQLite). PostgreSQL text
cannot hold a NUL character, which a run id (or any string) may contain: such a value, or one
starting with ``\\x01``, is stored escaped (``\\x01`` + the text with ``\\x01`` → ``\\x01\\x01``
and NUL → ``\\x01\\x02``), so every other value is stored as it is.

``runs`` (partitioned by RANGE of ``sort_at``, one partition per calendar month, UTC, named
    ``runs_yYYYYmMM``, plus ``runs_undated`` for runs without a start time; created as they are
    needed, by ``CREATE TABLE ... (LIKE runs)`` + ``ATTACH PARTITION`` on a side connection, which
    never blocks readers or writers). The SQLite columns, plus ``written_at`` (µs) and ``digest``
    (a hash of the run's JSON, to leave an identical re-import alone without reading it back).
    ``doc`` (the run without ``steps``) and ``steps`` (the JSON array of steps) are ``json``:
    PostgreSQL's JSON operators work on them (``steps::jsonb`` for the ``jsonb`` ones), and the
    text is kept exactly as written, which ``jsonb`` would not do (it reorders object keys,
    rewrites numbers such as ``1e16`` and refuses ``\\u0000``): a run reads back equal to the one
    stored, which the contract requires. Primary key ``(sort_at, id)``; indexes ``(id)``,
    ``(agent, sort_at, id)``, ``(project, sort_at, id)``.
``scores`` (partitioned like ``runs``, by ``run_sort_at``): SQLite's ``scores`` columns, with the
    failure modes of a score in the arrays ``modes``/``mode_findings`` instead of SQLite's
    ``score_modes`` table (dropping a month's partition then drops everything of its scores).
``rate_sigs``, ``rate_runs``, ``rate_rollup``, ``run_rollup``: the rate rollups, kept by
    statement-level triggers (see :mod:`._pg_migrations`).

Retention: :meth:`PostgresStore.drop_months_before` drops whole monthly partitions (no row
deletes, no vacuum), after taking their runs out of the rollups.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from pydantic import ValidationError

from agentlens.errors import (
    ConfigError,
    MissingExtraError,
    RunNotFoundError,
    SchemaVersionError,
    StoreError,
    UnreadableRunError,
)
from agentlens.model import Score, Trace
from agentlens.model._score import ScoreRow
from agentlens.store._copy import TableCopyMixin
from agentlens.store._pg_migrations import HOUR_US, REMOVED_FROM_ROLLUP, migrate_pg
from agentlens.store._pg_prepared import execute_prepared
from agentlens.store._pg_review import PgReviewMixin, _metadata, pg_conn, pg_summary_columns
from agentlens.store._pg_server import PgServerMixin
from agentlens.store._pg_text import dec, enc
from agentlens.store._protocol import RunFilter, RunSummary
from agentlens.store._rates import RateCounts, RateQuery
from agentlens.store._sqlite import (
    NO_TIME,
    _first_page,
    _fresh_scores,
    _in_chunks,
    _parse,
    _rows_of,
    from_us,
    serialise_run,
    to_us,
)

__all__ = ["PgURL", "PostgresStore", "dec", "enc", "parse_pg_url"]

_T = TypeVar("_T")
_WRITE_CHUNK = 256
_SCORE_CHUNK = 1000
"""Scores per round of ``put_scores`` (about fifteen statements a round, each a round trip): a
batch of ``agentlens score`` (200 runs, up to five scores each) is one round, as in SQLite."""
_FIRST_PAGE = 32
_MAX_PAGE = 512
_PARTITION_LOCK = 8319
_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


@dataclass(frozen=True, slots=True)
class PgURL:
    """A parsed ``postgresql://`` store URL."""

    conninfo: str
    """What libpq is given (agentlens's own parameters removed)."""
    schema: str
    pool_max: int
    label: str
    """The URL without its password: what error messages name."""
    host: str


def parse_pg_url(url: str) -> PgURL:
    """Parse a PostgreSQL store URL.

    Raises:
        ConfigError: it is not a PostgreSQL URL, or a parameter is invalid (the message names it).
    """
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"{_mask(url)}: not a valid PostgreSQL URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise ConfigError(f"{_mask(url)} is not a PostgreSQL URL; expected postgresql://HOST/DB")
    host = parts.hostname or "localhost"
    user = parts.username
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = "public"
    pool_max = 8
    rest: list[tuple[str, str]] = []
    for key, value in query:
        if key == "schema":
            if not _IDENT.fullmatch(value):
                raise ConfigError(
                    f"{_mask(url)}: schema {value!r} is not a plain SQL name (letters, digits, _)"
                )
            schema = value
        elif key == "pool_max":
            if not value.isdigit() or int(value) < 1:
                raise ConfigError(f"{_mask(url)}: pool_max must be a positive integer")
            pool_max = int(value)
        else:
            rest.append((key, value))
    conninfo = urlunsplit(
        ("postgresql", parts.netloc, parts.path, urlencode(rest, quote_via=quote), "")
    )
    try:
        from psycopg.conninfo import conninfo_to_dict

        conninfo_to_dict(conninfo)
    except ImportError:
        raise MissingExtraError("psycopg", "postgres") from None
    except Exception as exc:
        reason = " ".join(str(exc).split())
        raise ConfigError(f"{_mask(url)}: not a valid PostgreSQL URL: {reason}") from None
    netloc = host if port is None else f"{host}:{port}"
    if user:
        netloc = f"{user}@{netloc}"
    label = urlunsplit(("postgresql", netloc, parts.path, "", ""))
    if schema != "public":
        label += f"?schema={schema}"
    return PgURL(conninfo, schema, pool_max, label, host)


def _mask(url: str) -> str:
    """``url`` with its password replaced by ``***``."""
    return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", url.strip())


_MONTH_RE = re.compile(r"^(runs|scores)_y(\d{4})m(\d{2})$")


def _month_of(sort_at: int) -> int:
    """``year * 12 + month - 1`` of a µs time."""
    t = from_us(sort_at)
    assert t is not None
    return t.year * 12 + t.month - 1


def _month_bounds(month: int) -> tuple[int, int]:
    y, m = divmod(month, 12)
    lo = to_us(datetime(y, m + 1, 1, tzinfo=UTC))
    y2, m2 = divmod(month + 1, 12)
    hi = to_us(datetime(y2, m2 + 1, 1, tzinfo=UTC)) if y2 <= 9999 else 2**63 - 1
    assert lo is not None and hi is not None
    return lo, hi


def _partition(table: str, month: int) -> str:
    """The name of ``table``'s partition of ``month`` (``runs_y2026m03``)."""
    y, m = divmod(month, 12)
    return f"{table}_y{y:04d}m{m + 1:02d}"


@dataclass(slots=True)
class _Prepared:
    row: tuple[Any, ...]
    digest: bytes
    links: dict[str, str]


class PostgresStore(PgReviewMixin, PgServerMixin, TableCopyMixin):
    """The team store: PostgreSQL through a psycopg connection pool.

    Implements :class:`agentlens.store.TraceStore` (and the rate queries of
    :mod:`agentlens.store._pg_rates`). Thread-safe and safe to share between processes. The
    schema is documented in this module's docstring.

    Args:
        url: ``postgresql://user@host:port/db`` (see the module docs for the parameters).
        connect_timeout_s: how long to wait for the server when connecting.

    Raises:
        ConfigError: the URL is invalid.
        MissingExtraError: psycopg or psycopg_pool is not installed.
        StoreError: the server cannot be reached or refused the login (the message names the
            host), or the schema cannot be migrated.
        SchemaVersionError: the store was written by a newer agentlens.
    """

    def __init__(self, url: str, *, connect_timeout_s: float = 10.0) -> None:
        self.url = url
        parsed = parse_pg_url(url)
        try:
            import psycopg
            import psycopg_pool
        except ImportError as exc:
            raise MissingExtraError(exc.name or "psycopg", "postgres") from None
        self._psycopg = psycopg
        self._parsed = parsed
        self._label = parsed.label
        self._schema = parsed.schema
        self._timeout = connect_timeout_s
        self._closed = False
        self._lock = threading.Lock()
        self._months: set[int] = set()
        self._kwargs: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": max(1, int(connect_timeout_s)),
            "options": _options(parsed.conninfo, parsed.schema),
            "application_name": "agentlens",
        }
        conn = self._connect()
        try:
            migrate_pg(conn, parsed.schema, self._label)
            self._load_months(conn)
            self.read_only = bool(
                conn.execute(
                    "SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'"
                ).fetchone()[0]
            )
            """True on a read replica (a hot standby) or a read-only session: reads only."""
        except SchemaVersionError:
            conn.close()
            raise
        except psycopg.Error as exc:
            conn.close()
            raise StoreError(f"{self._label}: cannot open the store: {_reason(exc)}") from None
        conn.close()
        self._pool = psycopg_pool.ConnectionPool(
            parsed.conninfo,
            kwargs=self._kwargs,
            min_size=1,
            max_size=parsed.pool_max,
            timeout=60.0,
            open=True,
            name="agentlens",
        )
        if not self.read_only:  # this month's and the next one's partitions, ahead of writes
            now = _month_of(to_us(datetime.now(UTC)) or 0)
            self._ensure_months({now, now + 1})

    # -- connections --------------------------------------------------------------------------

    def _connect(self) -> Any:
        """A new autocommit connection (not from the pool): one-line errors naming the host."""
        try:
            return self._psycopg.connect(self._parsed.conninfo, **self._kwargs)
        except self._psycopg.Error as exc:
            raise StoreError(
                f"{self._label}: cannot connect to the PostgreSQL server at "
                f"{self._parsed.host}: {_reason(exc)}"
            ) from None

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self._label}: the store is closed")

    def _error(self, exc: Exception) -> StoreError:
        return StoreError(f"{self._label}: {_reason(exc)}")

    def read(self, work: Callable[[Any], _T]) -> _T:
        """Run ``work(connection)`` in one REPEATABLE READ, READ ONLY transaction (one snapshot).
        PostgreSQL-specific (not part of :class:`TraceStore`): the rate queries use it."""
        # one BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY (no SET TRANSACTION)
        return self._transaction(
            work, isolation_level=self._psycopg.IsolationLevel.REPEATABLE_READ, read_only=True
        )

    def _query(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        """One statement on a pooled connection (autocommit: its own snapshot)."""
        self._check_open()
        try:
            with self._pool.connection() as conn:
                return conn.execute(sql, params).fetchall()
        except self._psycopg.Error as exc:
            raise self._error(exc) from None

    def write(self, work: Callable[[Any], _T]) -> _T:
        """Run ``work(connection)`` in one READ COMMITTED transaction: all of it, or none.

        Its statements are not prepared on the server but for those ``_pg_prepared`` allows,
        so that each sees a monthly partition another connection attached meanwhile (prepared,
        replacing a run by one of a new month was refused, "no partition of relation "runs"
        found for row", and a chunk of ``put_scores`` missed a run stored meanwhile in a new
        month: ``tests/store/test_pg_store.py``).
        """
        return self._transaction(work, prepare_threshold=None)

    def _transaction(self, work: Callable[[Any], _T], **settings: Any) -> _T:
        """``work(connection)`` in one transaction on a pooled connection, with the
        connection's attributes ``settings`` set for it and restored after."""
        self._check_open()
        try:
            with self._pool.connection() as conn:
                saved = {name: getattr(conn, name) for name in settings}
                for name, value in settings.items():
                    setattr(conn, name, value)
                try:
                    with conn.transaction():
                        return work(conn)
                finally:
                    for name, value in saved.items():
                        setattr(conn, name, value)
        except self._psycopg.Error as exc:
            raise self._error(exc) from None

    # -- partitions ---------------------------------------------------------------------------

    def _load_months(self, conn: Any) -> None:
        rows = conn.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " JOIN pg_class p ON p.oid = i.inhparent JOIN pg_namespace n ON n.oid = p.relnamespace"
            " WHERE n.nspname = %s AND p.relname = 'scores'",
            (self._schema,),
        ).fetchall()
        for (name,) in rows:
            found = _MONTH_RE.match(name)
            if found:
                self._months.add(int(found[2]) * 12 + int(found[3]) - 1)

    def _ensure_months(self, months: set[int]) -> None:
        """Create the monthly partitions of ``runs`` and ``scores`` that are missing.

        On a connection of its own (committed at once), with ``LIKE`` + ``ATTACH PARTITION``,
        which takes only a SHARE UPDATE EXCLUSIVE lock on the parent: the caller's own open write
        transaction (and everyone's reads and writes) go on meanwhile.
        """
        with self._lock:
            missing = months - self._months
        if not missing:
            return
        conn = self._connect()
        try:
            with conn.transaction():
                conn.execute(
                    "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                    (_PARTITION_LOCK, self._schema),
                )
                self._load_months(conn)
                for month in sorted(missing - self._months):
                    lo, hi = _month_bounds(month)
                    for table in ("runs", "scores"):
                        name = _partition(table, month)
                        conn.execute(
                            f"CREATE TABLE {name} (LIKE {table} INCLUDING DEFAULTS"
                            " INCLUDING CONSTRAINTS)"
                        )
                        conn.execute(
                            f"ALTER TABLE {table} ATTACH PARTITION {name}"
                            f" FOR VALUES FROM ({lo}) TO ({hi})"
                        )
            with self._lock:
                self._months |= missing
        except self._psycopg.Error as exc:
            raise StoreError(
                f"{self._label}: cannot create a monthly partition: {_reason(exc)}"
            ) from None
        finally:
            conn.close()

    def months(self) -> list[str]:
        """The monthly partitions that exist, oldest first, as ``YYYY-MM``."""
        conn = self._connect()
        try:
            self._load_months(conn)
        finally:
            conn.close()
        return [f"{m // 12:04d}-{m % 12 + 1:02d}" for m in sorted(self._months)]

    def drop_months_before(self, before: datetime) -> list[str]:
        """Drop the monthly partitions (runs and scores) wholly before ``before``'s month.

        Their runs are first taken out of the rate rollups (and ``run_keys``), in the same
        transaction, so rates stay exact; the runs and scores themselves go with their
        partitions (``DROP TABLE``: no row deletes, nothing to vacuum). Returns the months
        dropped (``YYYY-MM``).
        """
        limit = _month_of(to_us(before) or 0)
        conn = self._connect()
        dropped: list[str] = []
        try:
            with conn.transaction():
                conn.execute(
                    "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                    (_PARTITION_LOCK, self._schema),
                )
                self._months.clear()
                self._load_months(conn)
                for month in sorted(m for m in self._months if m < limit):
                    lo, hi = _month_bounds(month)
                    part = _partition("runs", month)
                    conn.execute(
                        "WITH old AS (DELETE FROM rate_runs WHERE started_at >= %s"
                        " AND started_at < %s"
                        " RETURNING run_id, hour, agent, release, project, flags, sig)"
                        + REMOVED_FROM_ROLLUP,
                        (lo, hi),
                    )
                    conn.execute(
                        "INSERT INTO run_rollup (hour, agent, release, project, n)"
                        f" SELECT floor(started_at / {HOUR_US}.0)::bigint, agent, release,"
                        f" project, -count(*) FROM {part} GROUP BY 1, 2, 3, 4"
                    )
                    conn.execute(f"DELETE FROM run_keys k USING {part} r WHERE k.id = r.id")
                    for table in (
                        "run_links",
                        "run_review",
                        "run_flag_modes",
                        "content_flags",
                        "review_verdicts",
                    ):
                        conn.execute(f"DELETE FROM {table} x USING {part} r WHERE x.run_id = r.id")
                    for table in ("runs", "scores"):
                        conn.execute(f"DROP TABLE {_partition(table, month)}")
                    self._months.discard(month)
                    dropped.append(f"{month // 12:04d}-{month % 12 + 1:02d}")
        except self._psycopg.Error as exc:
            raise self._error(exc) from None
        finally:
            conn.close()
        return dropped

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close the connection pool. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._pool.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresStore({self._label!r})"

    @property
    def schema_version(self) -> int:
        (row,) = self._query("SELECT coalesce(max(version), 0) FROM _agentlens_migrations")
        return int(row[0])

    def compact_rollups(self) -> int:
        """Merge the rate rollups' delta rows written since the last compaction (see
        :mod:`._pg_migrations`); -1 when another process is compacting. Rates are the same
        before and after: this only keeps the rollups small."""
        return int(
            self.write(lambda c: c.execute("SELECT agentlens_compact_rollups()").fetchone())[0]
        )

    def rebuild_rate_rollup(self) -> None:
        """Recompute the rate tables from ``runs`` and ``scores`` (the triggers keep them exact;
        this is for checking them, and after a bulk load with the triggers disabled)."""
        from agentlens.store._pg_migrations import RATE_ROLLUP_FILL

        def work(conn: Any) -> None:
            for statement in RATE_ROLLUP_FILL:
                conn.execute(statement)

        self.write(work)

    # -- runs ---------------------------------------------------------------------------------

    def put_traces(self, traces: Iterable[Trace]) -> int:
        """Store (or replace) runs, atomically: every run of the call is stored, or none is.

        Same results as :meth:`agentlens.store.SQLiteStore.put_traces`.
        """
        result = self.write(lambda conn: self._put_all(conn, traces))
        self._maybe_compact(result)
        return result

    def _put_all(self, conn: Any, traces: Iterable[Trace]) -> int:
        """:meth:`put_traces` inside the caller's write transaction."""
        return _in_chunks(traces, partial(self._put_chunk, conn), _WRITE_CHUNK)

    def _put_chunk(self, conn: Any, chunk: list[Trace], offset: int) -> None:
        prepared: dict[str, _Prepared] = {}
        for index, trace in enumerate(chunk, offset):
            if not isinstance(trace, Trace):
                raise StoreError(
                    f"{self._label}: item {index} given to put_traces is a "
                    f"{type(trace).__name__}, not a Trace; nothing was written"
                )
            prepared[trace.id] = self._prepare(trace)
        keys = [enc(i) for i in prepared]
        _lock_runs(conn, keys, create=True)
        replaced: list[str] = []
        for run_id, digest in conn.execute(
            "SELECT id, digest FROM runs WHERE id = ANY(%s)", (keys,)
        ).fetchall():
            plain = dec(run_id)
            assert plain is not None
            if bytes(digest) == prepared[plain].digest:
                del prepared[plain]  # identical: nothing to do, and its scores stay
            else:
                replaced.append(run_id)
        if replaced:
            self._delete(conn, replaced, replacing=True)
        if not prepared:
            if replaced:
                self._prune_content(pg_conn(conn), [dec(k) or "" for k in replaced])
            return
        months = {_month_of(p.row[7]) for p in prepared.values() if p.row[7] != NO_TIME}
        self._ensure_months(months)
        columns = list(zip(*(p.row for p in prepared.values()), strict=True))
        _see_partitions(conn, "runs", months)
        # the text arrays in binary (%b), as put_scores sends them: as text, psycopg escapes
        # every quote of every run's JSON with a regular expression in Python.
        execute_prepared(
            conn,
            "INSERT INTO runs (id, project, agent, name, status, started_at, ended_at, sort_at,"
            " has_output, step_count, release, written_at, digest, doc, steps)"
            " SELECT id, project, agent, name, status, started_at, ended_at, sort_at, has_output,"
            " step_count, release, written_at, digest, doc::json, steps::json FROM unnest("
            "%b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %s::bigint[],"
            " %s::bigint[], %s::bigint[], %s::boolean[], %s::integer[], %b::text[],"
            " %s::bigint[], %s::bytea[], %b::text[], %b::text[]) AS u(id, project, agent, name,"
            " status, started_at, ended_at, sort_at, has_output, step_count, release, written_at,"
            " digest, doc, steps)",
            [list(c) for c in columns],
        )
        links = [
            (enc(kind), enc(item), p.row[0], p.row[7])
            for p in prepared.values()
            for kind, item in p.links.items()
        ]
        if links:
            conn.execute(
                "INSERT INTO run_links (kind, item_id, run_id, sort_at) SELECT * FROM unnest("
                "%s::text[], %s::text[], %s::text[], %s::bigint[])",
                [list(c) for c in zip(*links, strict=True)],
            )
        self._review_rows_for_new_runs(
            pg_conn(conn), [(dec(p.row[0]), p.row[7], dec(p.row[2])) for p in prepared.values()]
        )
        if replaced:
            self._prune_content(pg_conn(conn), [dec(k) or "" for k in replaced])

    def _prepare(self, trace: Trace) -> _Prepared:
        doc, steps, release = serialise_run(trace, self._label)
        digest = hashlib.blake2b(f"{doc}\x00{steps}".encode(), digest_size=16).digest()
        started = to_us(trace.started_at)
        row = (
            enc(trace.id),
            enc(trace.project),
            enc(trace.agent),
            enc(trace.name),
            enc(trace.status),
            started,
            to_us(trace.ended_at),
            NO_TIME if started is None else started,
            bool(trace.has_output),
            len(trace.steps),
            enc(release),
            time.time_ns() // 1000,
            digest,
            doc,
            steps,
        )
        return _Prepared(row=row, digest=digest, links=dict(trace.links))

    def _delete(
        self, conn: Any, keys: list[str], *, forget: bool = False, replacing: bool = False
    ) -> int:
        """Delete runs (by stored id) with their scores and review state; the rate triggers
        follow. ``forget``: also their ``run_keys`` rows. ``replacing``: they are about to be
        written again (verdicts and content flags kept, as in SQLite)."""
        conn.execute("DELETE FROM scores WHERE run_id = ANY(%s)", (keys,))
        conn.execute("DELETE FROM run_links WHERE run_id = ANY(%s)", (keys,))
        deleted = int(conn.execute("DELETE FROM runs WHERE id = ANY(%s)", (keys,)).rowcount)
        if forget:
            conn.execute("DELETE FROM run_keys WHERE id = ANY(%s)", (keys,))
        self._forget_review(pg_conn(conn), [dec(k) or "" for k in keys], replacing=replacing)
        return deleted

    def get_trace(self, run_id: str) -> Trace:
        """Return one run with its steps; raises :class:`RunNotFoundError` when absent."""
        rows = self._query(
            "SELECT doc::text, steps::text FROM runs WHERE id = %s", (enc(_one_id(run_id)),)
        )
        if not rows:
            raise RunNotFoundError(run_id)
        return self._load(run_id, rows[0][0], rows[0][1])

    def _load(self, run_id: str, doc: str, steps: str) -> Trace:
        try:
            data = _parse(doc)
            if type(data) is dict:
                data["steps"] = _parse(steps)
            return Trace._from_trusted(data, owned=True)
        except ValidationError as exc:
            reason = exc.errors()[0]["msg"] if exc.errors() else str(exc)
        except (ValueError, RecursionError) as exc:
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
        """Iterate lazily over the runs that match, with their steps (order as SQLite's).

        A run that cannot be read back raises :class:`UnreadableRunError`, or with
        ``on_unreadable`` is passed to it and left out (as in SQLite).
        """
        _check_limit(limit)
        filt = _filter(where)

        def iterate() -> Iterator[Trace]:
            for page in self._pages(filt, "r.doc::text, r.steps::text", limit, newest_first):
                for _, run_id, doc, steps in page:
                    try:
                        trace = self._load(dec(run_id) or "", doc, steps)
                    except UnreadableRunError as exc:
                        if on_unreadable is None:
                            raise
                        on_unreadable(exc)
                        continue
                    yield trace

        return iterate()

    def list_runs(
        self, where: RunFilter | None = None, *, limit: int | None = None, newest_first: bool = True
    ) -> Iterator[RunSummary]:
        """Iterate lazily over summaries of the runs that match (no steps read)."""
        from agentlens.store._sqlite_review import summary_of

        _check_limit(limit)
        filt = _filter(where).with_review()
        columns = pg_summary_columns()

        def iterate() -> Iterator[RunSummary]:
            for page in self._pages(filt, columns, limit, newest_first):
                for row in page:
                    plain = [dec(v) if isinstance(v, str) else v for v in row]
                    yield summary_of(plain, _metadata)

        return iterate()

    def runs_page(
        self,
        where: RunFilter | None,
        *,
        before: tuple[int, str] | None,
        limit: int,
        link: tuple[str, str] | None = None,
    ) -> tuple[list[RunSummary], tuple[int, str] | None]:
        """One page of run summaries, newest first, after the key cursor ``before``: what
        :func:`agentlens.store._server.list_runs_page` returns, in PostgreSQL's SQL."""
        from agentlens.store._sqlite_review import summary_of

        filt = _filter(where).with_review()
        if link is not None:  # the item's rows of run_links (PostgreSQL migration 5)
            filt = _Filter(
                (*filt.clauses, "l.kind = %s", "l.item_id = %s"),
                (*filt.params, enc(link[0]), enc(link[1])),
                " JOIN run_links l ON l.sort_at = r.sort_at AND l.run_id = r.id" + filt.join,
            )
        clauses, params = filt.sql()
        if before is not None:
            clauses.append("(r.sort_at, r.id) < (%s, %s)")
            params.extend((before[0], enc(before[1])))
        sql = (
            f"SELECT r.sort_at, r.id, {pg_summary_columns()} FROM runs r"
            + filt.join
            + _where(clauses)
            + " ORDER BY r.sort_at DESC, r.id DESC LIMIT %s"
        )
        rows = self._query(sql, [*params, limit + 1])
        page = [
            summary_of([dec(v) if isinstance(v, str) else v for v in row], _metadata)
            for row in rows[:limit]
        ]
        cursor = (rows[limit - 1][0], dec(rows[limit - 1][1]) or "") if len(rows) > limit else None
        return page, cursor

    def run_keys(
        self, where: RunFilter | None = None, *, newest_first: bool = True
    ) -> Iterator[tuple[str, str | None]]:
        """``(id, agent)`` of the runs that match, in :meth:`list_runs`'s order (as SQLite's)."""
        filt = _filter(where)

        def iterate() -> Iterator[tuple[str, str | None]]:
            for page in self._pages(filt, "r.agent", None, newest_first):
                for row in page:
                    yield dec(row[1]) or "", dec(row[2])

        return iterate()

    def score_keys(self, run_ids: Sequence[str]) -> dict[str, set[tuple[str, str]]]:
        """The ``(scorer, version)`` of every stored score of each stored run among these (as
        SQLite's)."""
        keys = [enc(i) for i in _as_ids(run_ids)]
        if not keys:
            return {}
        found: dict[str, set[tuple[str, str]]] = {}
        for run_id, scorer, version in self._query(
            "SELECT r.id, s.scorer, s.version FROM runs r LEFT JOIN scores s"
            " ON s.run_sort_at = r.sort_at AND s.run_id = r.id WHERE r.id = ANY(%s::text[])",
            (keys,),
        ):
            have = found.setdefault(dec(run_id) or "", set())
            if scorer is not None:
                have.add((dec(scorer) or "", dec(version) or ""))
        return found

    def count_runs(self, where: RunFilter | None = None) -> int:
        filt = _filter(where)
        clauses, params = filt.sql()
        sql = "SELECT count(*) FROM runs r" + filt.join + _where(clauses)
        return int(self._query(sql, params)[0][0])

    def delete_runs(self, run_ids: Iterable[str]) -> int:
        """Delete runs with their steps and scores. Returns how many runs were deleted."""
        keys = [enc(i) for i in dict.fromkeys(_as_ids(run_ids))]
        if not keys:
            return 0

        def work(conn: Any) -> int:
            _lock_runs(conn, keys)
            return self._delete(conn, keys, forget=True)  # type: ignore[arg-type]

        return self.write(work)

    def _pages(
        self, filt: _Filter, columns: str, limit: int | None, newest_first: bool
    ) -> Iterator[list[tuple[Any, ...]]]:
        """Keyset pagination over ``runs`` by ``(sort_at, id)``; one statement per page."""
        order = "DESC" if newest_first else "ASC"
        op = "<" if newest_first else ">"
        after: tuple[int, str] | None = None
        remaining, size = _first_page(limit, filt.most, _FIRST_PAGE, _MAX_PAGE)
        while remaining is None or remaining > 0:
            n = size if remaining is None else min(size, remaining)
            clauses, params = filt.sql()
            if after is not None:
                clauses.append(f"(r.sort_at, r.id) {op} (%s, %s)")
                params.extend(after)
            sql = (
                f"SELECT r.sort_at, r.id, {columns} FROM runs r"
                + filt.join
                + _where(clauses)
                + f" ORDER BY r.sort_at {order}, r.id {order} LIMIT %s"
            )
            rows = self._query(sql, [*params, n])
            if rows:
                yield rows
            if len(rows) < n:
                return
            after = (rows[-1][0], rows[-1][1])
            if remaining is not None:
                remaining -= len(rows)
            size = min(size * 2, _MAX_PAGE)

    # -- scores -------------------------------------------------------------------------------

    def put_scores(self, scores: Iterable[Score]) -> int:
        """Store scores, replacing any earlier score of the same (run, scorer, version).

        Atomic like :meth:`put_traces`. Raises :class:`RunNotFoundError` (nothing written) for a
        score of a run that is not stored.
        """
        return self._put_score_rows(_rows_of(scores, self._label))

    def _put_score_rows(self, rows: Iterable[ScoreRow]) -> int:
        """:meth:`put_scores` of scores in the form it writes them (:class:`ScoreRow`, each
        with the score's own stored JSON): what ``agentlens score --workers`` stores."""
        result = self.write(
            lambda conn: _in_chunks(rows, partial(self._put_row_chunk, conn), _SCORE_CHUNK)
        )
        self._maybe_compact(result)
        return result

    def _put_row_chunk(self, conn: Any, chunk: list[ScoreRow], offset: int) -> None:
        run_ids = list(dict.fromkeys(r.run_id for r in chunk))
        keys = [enc(i) for i in run_ids]
        _lock_runs(conn, keys)
        runs = {
            dec(row[0]): row[1:]
            for row in conn.execute(
                "SELECT id, project, agent, release, started_at, sort_at FROM runs"
                " WHERE id = ANY(%s)",
                (keys,),
            ).fetchall()
        }
        for row in chunk:
            if row.run_id not in runs:
                raise RunNotFoundError(row.run_id)
        latest: dict[tuple[str, str, str], ScoreRow] = {}
        for row in chunk:
            latest[(row.run_id, row.scorer, row.version)] = row
        rows = []
        for (run_id, scorer, version), entry in latest.items():
            project, agent, release, started_at, sort_at = runs[run_id]
            counts = dict(entry.modes)
            modes = sorted(m for m in counts if m)
            rows.append(
                (
                    enc(run_id),
                    enc(scorer),
                    enc(version),
                    entry.verdict,
                    bool(entry.passed),
                    entry.value,
                    enc(entry.detail),
                    enc(entry.error),
                    entry.finding_count,
                    entry.scored_at,
                    json.dumps([enc(m) for m in modes]),
                    json.dumps([counts[m] for m in modes]),
                    project,
                    agent,
                    release,
                    started_at,
                    sort_at,
                    entry.doc,
                )
            )
        columns = [list(c) for c in zip(*rows, strict=True)]
        # the text arrays in binary (%b): as text, psycopg writes each array in Python, escaping
        # every quote and backslash of every element with a regular expression (the documents'
        # JSON is full of quotes): most of the client's time. Binary elements are their bytes.
        # A scores partition attached while this transaction ran is seen without a lock: the
        # read of the runs above, unprepared, read the catalog's changes (a statement does as
        # it is parsed), and a month's runs and scores partitions are attached together.
        execute_prepared(
            conn,
            "INSERT INTO scores (run_id, scorer, version, verdict, passed, value, detail, error,"
            " finding_count, scored_at, modes, mode_findings, run_project, run_agent, run_release,"
            " run_started_at, run_sort_at, doc)"
            " SELECT run_id, scorer, version, verdict, passed, value, detail, error,"
            " finding_count, scored_at, ARRAY(SELECT json_array_elements_text(modes::json)),"
            " ARRAY(SELECT json_array_elements_text(mode_findings::json)::integer), run_project,"
            " run_agent, run_release, run_started_at, run_sort_at, doc::json FROM unnest("
            "%b::text[], %b::text[], %b::text[], %b::text[], %s::boolean[],"
            " %s::double precision[], %b::text[], %b::text[], %s::integer[], %s::bigint[],"
            " %b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %s::bigint[],"
            " %s::bigint[], %b::text[]) AS u(run_id, scorer, version, verdict, passed, value,"
            " detail, error, finding_count, scored_at, modes, mode_findings, run_project,"
            " run_agent, run_release, run_started_at, run_sort_at, doc)"
            " ON CONFLICT (run_sort_at, run_id, scorer, version) DO UPDATE SET"
            " verdict = EXCLUDED.verdict, passed = EXCLUDED.passed, value = EXCLUDED.value,"
            " detail = EXCLUDED.detail, error = EXCLUDED.error,"
            " finding_count = EXCLUDED.finding_count, scored_at = EXCLUDED.scored_at,"
            " modes = EXCLUDED.modes, mode_findings = EXCLUDED.mode_findings, doc = EXCLUDED.doc",
            columns,
        )
        self._derive(pg_conn(conn), run_ids, _fresh_scores(latest))

    def get_scores(self, run_id: str) -> list[Score]:
        """Every stored score of one run, oldest first (an unknown run has none)."""
        rows = self._query(
            "SELECT doc::text FROM scores WHERE run_id = %s ORDER BY scored_at, scorer, version",
            (enc(_one_id(run_id)),),
        )
        return [Score.model_validate_json(doc) for (doc,) in rows]

    def unscored_run_ids(
        self, scorer: str, version: str, where: RunFilter | None = None, *, limit: int | None = None
    ) -> Iterator[str]:
        """Ids of matching runs with no score from ``scorer`` at ``version``, oldest first."""
        _check_limit(limit)
        filt = _filter(where).plus(
            "NOT EXISTS (SELECT 1 FROM scores s WHERE s.run_sort_at = r.sort_at"
            " AND s.run_id = r.id AND s.scorer = %s AND s.version = %s)",
            enc(scorer),
            enc(version),
        )

        def iterate() -> Iterator[str]:
            for page in self._pages(filt, "1", limit, False):
                for row in page:
                    yield dec(row[1]) or ""

        return iterate()

    def _copied(self, table: str) -> None:
        """After spans were copied in with their ``seq``: new spans are numbered after them."""
        if table == "otlp_spans":
            self.write(
                lambda c: c.execute(
                    "SELECT setval(pg_get_serial_sequence('otlp_spans', 'seq'),"
                    " (SELECT coalesce(max(seq), 0) + 1 FROM otlp_spans), false)"
                )
            )

    # -- RateSource (the SQL is agentlens.store._pg_rates's) ------------------------------------

    def rate_counts(self, query: RateQuery, by: str | None = None) -> list[RateCounts]:
        """Count runs by outcome over ``query``'s window (see :class:`RateSource`), from the
        hourly rollups, in one read snapshot (see :mod:`._pg_rates`)."""
        from agentlens.store._pg_rates import pg_rate_counts

        return pg_rate_counts(self, query, by)

    rates_by_project = True
    """:meth:`rate_counts` answers a query's ``project`` from the rollups (PostgreSQL
    migration 6), so a server key's rate is not counted in Python."""

    def stored_scorers(self, project: str | None = None) -> list[str]:
        """Every scorer name with at least one stored score (of a run of ``project``)."""
        from agentlens.store._pg_rates import pg_stored_scorers

        return pg_stored_scorers(self, project)

    def stored_versions(
        self,
        scorer: str,
        start_us: int | None = None,
        end_us: int | None = None,
        project: str | None = None,
    ) -> list[tuple[str, int]]:
        """The versions of ``scorer`` scored in the window (on runs of ``project``), with their
        latest ``scored_at``."""
        from agentlens.store._pg_rates import pg_stored_versions

        return pg_stored_versions(self, scorer, start_us, end_us, project)

    _writes = 0

    def _maybe_compact(self, written: int) -> None:
        """Every so many writes of this process, merge the rollups' fresh delta rows."""
        if written <= 0:
            return
        with self._lock:
            self._writes += 1
            due = self._writes % 32 == 0
        if due:
            self.compact_rollups()


def _lock_runs(conn: Any, keys: list[str | None], *, create: bool = False) -> None:
    """Lock the runs ``keys`` (their rows of ``run_keys``, in id order) until the transaction
    ends: two writers of the same run take turns, and the second then reads what the first
    committed. Row locks, not advisory locks, so a transaction may hold any number of them.
    ``create``: insert the rows of runs not stored yet (``put_traces``)."""
    ordered = sorted({k for k in keys if k is not None})
    if create:
        execute_prepared(
            conn,
            "INSERT INTO run_keys (id) SELECT k FROM unnest(%s::text[]) AS k ORDER BY k"
            " ON CONFLICT (id) DO UPDATE SET id = EXCLUDED.id",
            (ordered,),
        )
    else:
        execute_prepared(
            conn,
            "SELECT 1 FROM run_keys WHERE id = ANY(%s::text[]) ORDER BY id FOR UPDATE",
            (ordered,),
        )


def _see_partitions(conn: Any, table: str, months: set[int]) -> None:
    """Lock the monthly partitions of ``table`` that a prepared insert is about to write
    into (the ROW EXCLUSIVE lock the insert takes anyway), so that the transaction reads the
    catalog's changes first. A backend reads them as it parses a statement or takes a lock it
    does not hold yet; a prepared statement on a table the transaction holds does neither, and
    a partition ``_ensure_months`` (or another writer) attached since was missing for it. The
    undated partition exists from the start.
    """
    if months:
        names = ", ".join(_partition(table, m) for m in sorted(months))
        conn.execute(f"LOCK TABLE {names} IN ROW EXCLUSIVE MODE")


def _options(conninfo: str, schema: str) -> str:
    """The URL's own ``options`` (if any) with the schema's ``search_path`` added."""
    from psycopg.conninfo import conninfo_to_dict

    given = str(conninfo_to_dict(conninfo).get("options") or "")
    return f"{given} -c search_path={schema}".strip()


def _reason(exc: Exception) -> str:
    """A driver error in one line."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _one_id(run_id: str) -> str:
    if not isinstance(run_id, str):
        raise StoreError(f"a run id must be a string, got {type(run_id).__name__}")
    return run_id


def _as_ids(run_ids: Iterable[str]) -> list[str]:
    if isinstance(run_ids, str):
        return [run_ids]
    ids = list(run_ids)
    for run_id in ids:
        _one_id(run_id)
    return ids


def _check_limit(limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ConfigError(f"limit must be a non-negative integer, got {limit!r}")


def _where(clauses: list[str]) -> str:
    return " WHERE " + " AND ".join(clauses) if clauses else ""


_LEFT_JOIN_REVIEW = " LEFT JOIN run_review f ON f.run_id = r.id"


@dataclass(frozen=True, slots=True)
class _Filter:
    clauses: tuple[str, ...]
    params: tuple[Any, ...]
    join: str = ""
    """A join of ``run_review f`` when the filter or the columns need it."""
    most: int | None = None
    """The most runs the filter can match (the distinct ids of a ``run_ids`` filter), as in
    SQLite's ``_FilterSQL.most``."""

    def sql(self) -> tuple[list[str], list[Any]]:
        return list(self.clauses), list(self.params)

    def plus(self, clause: str, *params: Any) -> _Filter:
        return replace(self, clauses=(*self.clauses, clause), params=(*self.params, *params))

    def with_review(self) -> _Filter:
        return self if self.join else replace(self, join=_LEFT_JOIN_REVIEW)


def _filter(where: RunFilter | None) -> _Filter:
    """A :class:`RunFilter` as SQL on ``runs r`` (``start <= started_at < end``, equalities)."""
    if where is None:
        return _Filter((), ())
    clauses: list[str] = []
    params: list[Any] = []
    if where.start is not None:
        clauses.append("r.sort_at >= %s")
        params.append(to_us(where.start))
    if where.end is not None:
        clauses.append("r.sort_at < %s")
        params.append(to_us(where.end))
    if where.start is not None or where.end is not None:
        clauses.append("r.started_at IS NOT NULL")
    if where.agent is not None:
        clauses.append("r.agent = %s")
        params.append(enc(where.agent))
    if where.project is not None:
        clauses.append("r.project = %s")
        params.append(enc(where.project))
    if where.release is not None:
        clauses.append("r.release = %s")
        params.append(enc(where.release))
    if where.has_output is not None:
        clauses.append("r.has_output = %s")
        params.append(bool(where.has_output))
    most = None
    if where.run_ids is not None:
        run_ids = _as_ids(where.run_ids)
        clauses.append("r.id = ANY(%s::text[])")
        params.append([enc(i) for i in run_ids])
        most = len(set(run_ids))
    join = ""
    if where.flagged or where.failure_mode is not None:
        join = " JOIN run_review f ON f.run_id = r.id"
        clauses.append("f.flagged = 1")
        if where.failure_mode is not None:
            clauses.append(
                "EXISTS (SELECT 1 FROM run_flag_modes m WHERE m.run_id = f.run_id AND m.mode = %s)"
            )
            params.append(enc(str(where.failure_mode)))
    elif where.flagged is False:
        join = _LEFT_JOIN_REVIEW
        clauses.append("coalesce(f.flagged, 0) = 0")
    return _Filter(tuple(clauses), tuple(params), join, most)
