"""The review half of :class:`~agentlens.store._postgres.PostgresStore`: SQLite's review code
(:class:`~agentlens.store._sqlite_review.ReviewMixin`) over PostgreSQL, and review claims.

The review tables (PostgreSQL migration 3) have the columns, keys and partial indexes of SQLite's
migration 3 (booleans stay integers, so the same SQL reads them), plus two columns for claims:
``claimed_by`` and ``lease_until`` of ``run_review``. The review code is written once, in
SQLite's dialect (:class:`~agentlens.store._sqlite_review.ReviewMixin`); this module is its
dialect layer for PostgreSQL: :class:`PgConn` turns SQLite's ``?`` (and ``:name``) parameters
into psycopg's, ``INSERT OR REPLACE`` / ``INSERT OR IGNORE`` into ``ON CONFLICT`` clauses and
``ifnull`` into ``coalesce``, and escapes text as the store does
(:func:`~agentlens.store._postgres.enc`); the few hooks the mixin leaves to the dialect are
answered here (a JSON column as text, a run's links and metadata read in Python, claims that
skip locked rows).

Claims (:meth:`~agentlens.store._sqlite_review.ReviewMixin.claim_review`): several review
workers (``agentlens worker``, ``agentlens serve`` processes) share the queue. A worker takes
up to N pending runs with ``SELECT ... FOR UPDATE SKIP LOCKED`` (no two workers wait on, or take,
the same run) and marks them claimed for a lease; a run whose lease ran out (its worker died) is claimable again. Marking
a run reviewed ends its claim; a run replaced while claimed is pending again with no claim.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from agentlens.store._pg_text import dec, enc
from agentlens.store._sqlite_filter import _marks
from agentlens.store._sqlite_review import (
    SUMMARY_COLUMNS,
    ReviewMixin,
    _chunks,
    _json_object,
)

__all__ = ["PgConn", "PgReviewMixin", "pg_conn", "pg_summary_columns"]

_T = TypeVar("_T")

_KEYS = {
    "run_review": ("run_id",),
    "review_verdicts": ("run_id", "finding_key"),
    "webhook_deliveries": ("id",),
    "content_flags": ("kind", "item_id", "run_id"),
    "run_flag_modes": ("run_id", "mode"),
}
"""Primary keys, for turning ``INSERT OR REPLACE`` into an upsert."""
_RESET = {
    "run_review": {
        "reviewed_at": "NULL",
        "state": "NULL",
        "flagged": "DEFAULT",
        "reason": "NULL",
        "modes": "DEFAULT",
        "findings": "DEFAULT",
        "open": "DEFAULT",
        "claimed_by": "NULL",
        "lease_until": "NULL",
    }
}
"""Columns an ``INSERT OR REPLACE`` that does not name them resets (SQLite replaces the row)."""

_INSERT = re.compile(r"^\s*INSERT OR (REPLACE|IGNORE) INTO (\w+) \(([^)]*)\)", re.S)


def _translate(sql: str) -> str:
    """SQLite's SQL of the review mixin as PostgreSQL's."""
    found = _INSERT.match(sql)
    suffix = ""
    if found:
        how, table, cols = found.groups()
        sql = f"INSERT INTO {table} ({cols})" + sql[found.end() :]
        if how == "IGNORE":
            suffix = " ON CONFLICT DO NOTHING"
        else:
            names = [c.strip() for c in cols.split(",")]
            keys = _KEYS[table]
            sets = [f"{c} = EXCLUDED.{c}" for c in names if c not in keys]
            sets += [f"{c} = {v}" for c, v in _RESET.get(table, {}).items() if c not in names]
            suffix = f" ON CONFLICT ({', '.join(keys)}) DO " + (
                "UPDATE SET " + ", ".join(sets) if sets else "NOTHING"
            )
    sql = sql.replace("ifnull(", "coalesce(").replace("%", "%%").replace("?", "%s")
    return sql + suffix


_NAMED = re.compile(r"(?<![:\w]):(\w+)")


def _enc_params(params: Any) -> Any:
    if params is None:
        return None
    if isinstance(params, dict):
        return {k: enc(p) if isinstance(p, str) else p for k, p in params.items()}
    return [enc(p) if isinstance(p, str) else p for p in params]


class _Cursor:
    """A psycopg cursor whose text results are decoded (:func:`dec`)."""

    def __init__(self, cur: Any) -> None:
        self._cur = cur
        self.rowcount = cur.rowcount

    @staticmethod
    def _row(row: Any) -> tuple[Any, ...] | None:
        if row is None:
            return None
        return tuple(dec(v) if isinstance(v, str) else v for v in row)

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._row(self._cur.fetchone()) if self._cur.description else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        if not self._cur.description:
            return []
        return [r for r in map(self._row, self._cur.fetchall()) if r is not None]

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.fetchall())


class PgConn:
    """A psycopg connection that speaks the review mixin's SQLite SQL (see the module docs)."""

    def __init__(self, conn: Any) -> None:
        self.raw = conn

    def execute(self, sql: str, params: Any = None) -> _Cursor:
        sql = _translate(sql)
        if isinstance(params, dict):  # SQLite's :name parameters
            sql = _NAMED.sub(r"%(\1)s", sql)
        return _Cursor(self.raw.execute(sql, _enc_params(params)))

    def executemany(self, sql: str, rows: Sequence[Any]) -> None:
        rows = list(rows)
        if rows:
            with self.raw.cursor() as cur:
                cur.executemany(_translate(sql), [_enc_params(r) for r in rows])


def pg_conn(conn: Any) -> Any:
    """``conn`` as a :class:`PgConn`, typed to stand where the mixin expects a sqlite3
    connection."""
    return PgConn(conn)


def pg_summary_columns() -> str:
    """:data:`SUMMARY_COLUMNS` for PostgreSQL: the run's document whole (its metadata is read in
    Python: PostgreSQL's JSON operators refuse a document holding ``\\u0000``)."""
    return SUMMARY_COLUMNS.replace(
        "CASE WHEN json_valid(r.doc) THEN json_extract(r.doc, '$.metadata') END", "r.doc::text"
    )


def _metadata(doc: str | None) -> dict[str, Any]:
    """The ``metadata`` of a run's stored document (read in Python: PostgreSQL's JSON operators
    refuse a document holding ``\u0000`` anywhere)."""
    from agentlens.store._sqlite import _parse

    try:
        data = _parse(doc) if doc else None
    except (ValueError, RecursionError):
        return {}
    found = data.get("metadata") if isinstance(data, dict) else None
    return found if isinstance(found, dict) else {}


def _links(doc: str | None) -> dict[str, str]:
    from agentlens.store._sqlite import _parse

    try:
        data = _parse(doc) if doc else None
    except (ValueError, RecursionError):
        return {}
    found = data.get("links") if isinstance(data, dict) else None
    return _json_object(json.dumps(found)) if isinstance(found, dict) else {}


class PgReviewMixin(ReviewMixin):
    """:class:`ReviewMixin` over PostgreSQL, and review claims."""

    def read(self, work: Callable[[Any], _T]) -> _T:  # pragma: no cover - PostgresStore's
        raise NotImplementedError

    def write(self, work: Callable[[Any], _T]) -> _T:  # pragma: no cover - PostgresStore's
        raise NotImplementedError

    def _read(self, work: Callable[[Any], _T]) -> _T:
        return self.read(lambda conn: work(PgConn(conn)))

    def _write(self, work: Callable[[Any], _T]) -> _T:
        return self.write(lambda conn: work(PgConn(conn)))

    # -- what PostgreSQL says in its own dialect -----------------------------------------------

    _SKIP_LOCKED = " FOR UPDATE SKIP LOCKED"

    @staticmethod
    def _json_text(column: str) -> str:
        return f"{column}::text"

    @staticmethod
    def _summary_sql() -> tuple[str, Callable[[str | None], dict[str, Any]]]:
        return pg_summary_columns(), _metadata

    @staticmethod
    def _run_links(conn: Any, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The runs' ``links``, read from their documents in Python (PostgreSQL's JSON
        operators refuse a document holding ``\\u0000``)."""
        return {
            run_id: _links(doc)
            for run_id, doc in conn.execute(
                f"SELECT id, doc::text FROM runs WHERE id IN {_marks(len(run_ids))}",
                list(run_ids),
            )
        }

    # -- claims -------------------------------------------------------------------------------

    def mark_reviewed(self, runs: Any, *, at: Any = None) -> int:
        """Record runs reviewed (ending their claims); a run replaced since stays pending."""
        from agentlens.store._sqlite_review import _us

        items = [(r.run_id, r.stored_at) for r in runs]
        if not items:
            return 0
        when = _us(at)

        def work(conn: Any) -> int:
            marked = 0
            for part in _chunks(items):  # type: ignore[arg-type]
                marked += conn.execute(
                    "UPDATE run_review SET reviewed_at = ?, claimed_by = NULL, lease_until = NULL"
                    " WHERE (run_id, stored_at) IN (" + ", ".join("(?, ?)" for _ in part) + ")",
                    [when, *(v for item in part for v in item)],
                ).rowcount
            return marked

        return self._write(work)
