"""Copying a store's tables besides runs and scores, row for row, between backends (what
``agentlens migrate`` uses after the runs and their scores).

:data:`COPY_TABLES` lists them, with the columns copied and the primary key: both backends have
these tables with the same columns (SQLite's migrations 3-5, PostgreSQL's 3-4), so one SQL text,
in SQLite's dialect, serves both (PostgreSQL's through :class:`~agentlens.store._pg_review.PgConn`).
Rows are read in key order, a page at a time after a key (keyset pagination, so a copy resumes
after the last key it copied), and written as upserts: copying a row again changes nothing.

Not copied: ``run_review``'s claims (``claimed_by``, ``lease_until``: a worker's lease on one
store means nothing on another), and what each store derives on its own: the rate rollups, and
PostgreSQL's ``run_keys``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["COPY_TABLES", "CopyTable", "TableCopyMixin"]

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class CopyTable:
    """A table :meth:`TableCopyMixin.table_rows` reads and :meth:`put_table_rows` writes."""

    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]
    """The primary key: the order rows are read in, and what an upsert matches."""


def _spec(name: str, columns: str, key: str) -> CopyTable:
    return CopyTable(name, tuple(columns.split()), tuple(key.split()))


COPY_TABLES: tuple[CopyTable, ...] = (
    _spec(
        "run_review",
        "run_id sort_at agent stored_at reviewed_at state flagged reason modes findings open",
        "run_id",
    ),
    _spec("run_flag_modes", "run_id mode", "run_id mode"),
    _spec(
        "content_flags",
        "kind item_id run_id reason flagged_at dismissed",
        "kind item_id run_id",
    ),
    _spec(
        "review_verdicts",
        "run_id finding_key scorer failure_mode text verdict note author scope created_at live",
        "run_id finding_key",
    ),
    _spec(
        "webhook_deliveries",
        "id run_id url body status attempts next_attempt_at last_error created_at delivered_at",
        "id",
    ),
    _spec("api_keys", "id project name salt hash created_at revoked_at", "id"),
    _spec(
        "otlp_traces",
        "project trace_id first_seen last_seen root_ended max_seq built_seq built_at purged",
        "project trace_id",
    ),
    _spec("otlp_spans", "seq project trace_id span_id received_at doc", "seq"),
)
"""Every table copied, in the order they are copied (runs and scores come first)."""

_BY_NAME = {t.name: t for t in COPY_TABLES}


def _table(name: str) -> CopyTable:
    from agentlens.errors import StoreError

    found = _BY_NAME.get(name)
    if found is None:
        raise StoreError(f"{name!r} is not a table that can be copied")
    return found


class TableCopyMixin:
    """``table_rows`` / ``put_table_rows`` over a store's ``_read`` / ``_write`` (SQLite SQL)."""

    def _read(self, work: Callable[[sqlite3.Connection], _T]) -> _T:  # pragma: no cover
        raise NotImplementedError

    def _write(self, work: Callable[[sqlite3.Connection], _T]) -> _T:  # pragma: no cover
        raise NotImplementedError

    def table_rows(
        self, table: str, *, after: Sequence[Any] | None = None, limit: int = 500
    ) -> list[tuple[Any, ...]]:
        """Up to ``limit`` rows of ``table`` (its :data:`COPY_TABLES` columns), in key order,
        after the key ``after`` (the key columns of the last row of the previous page)."""
        spec = _table(table)
        key = ", ".join(spec.key)
        sql = f"SELECT {', '.join(spec.columns)} FROM {spec.name}"
        params: list[Any] = []
        if after is not None:
            sql += f" WHERE ({key}) > ({', '.join('?' * len(spec.key))})"
            params.extend(after)
        sql += f" ORDER BY {key} LIMIT ?"
        params.append(int(limit))
        rows = self._read(lambda c: c.execute(sql, params).fetchall())
        return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in rows]

    def put_table_rows(self, table: str, rows: Sequence[Sequence[Any]]) -> int:
        """Write rows read by :meth:`table_rows` (of this store or another), replacing the rows
        with the same key, in one transaction. Returns how many rows were given."""
        spec = _table(table)
        if not rows:
            return 0
        sets = ", ".join(f"{c} = excluded.{c}" for c in spec.columns if c not in spec.key)
        sql = (
            f"INSERT INTO {spec.name} ({', '.join(spec.columns)})"
            f" VALUES ({', '.join('?' * len(spec.columns))})"
            f" ON CONFLICT ({', '.join(spec.key)}) DO "
            + (f"UPDATE SET {sets}" if sets else "NOTHING")
        )
        self._write(lambda c: c.executemany(sql, [tuple(r) for r in rows]))
        self._copied(table)
        return len(rows)

    def _copied(self, table: str) -> None:
        """Called after rows of ``table`` were written (PostgreSQL moves its span sequence on)."""
