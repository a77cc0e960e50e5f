"""The review half of :class:`~agentlens.store._postgres.PostgresStore`: SQLite's review code
(:class:`~agentlens.store._sqlite_review.ReviewMixin`) over PostgreSQL, and review claims.

The review tables (PostgreSQL migration 3) have the columns, keys and partial indexes of SQLite's
migration 3 (booleans stay integers, so the same SQL reads them), plus two columns for claims:
``claimed_by`` and ``lease_until`` of ``run_review``. The mixin's SQL runs through
:class:`PgConn`, which turns SQLite's ``?`` parameters into psycopg's, ``INSERT OR REPLACE`` /
``INSERT OR IGNORE`` into ``ON CONFLICT`` clauses, and escapes text as the store does
(:func:`~agentlens.store._postgres.enc`). What cannot be said the same way in both dialects
(SQLite's ``rowid`` and JSON functions, ``sum`` of a comparison) is overridden here.

Claims (:meth:`PgReviewMixin.claim_review`): several review workers (``agentlens worker``,
``agentlens serve`` processes) share the queue. A worker takes up to N pending runs with
``SELECT ... FOR UPDATE SKIP LOCKED`` (no two workers wait on, or take, the same run) and marks
them claimed for a lease; a run whose lease ran out (its worker died) is claimable again. Marking
a run reviewed ends its claim; a run replaced while claimed is pending again with no claim.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from agentlens.model import Score, Verdict
from agentlens.store._flags import CurrentScore, derive_from_current
from agentlens.store._pg_text import dec, enc
from agentlens.store._protocol import PendingRun, RunSummary, VerdictCount
from agentlens.store._sqlite_filter import _marks
from agentlens.store._sqlite_review import (
    SUMMARY_COLUMNS,
    ReviewMixin,
    _chunks,
    _json_object,
    _limit_sql,
    now_us,
    summary_of,
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


def _enc_params(params: Any) -> Any:
    if params is None:
        return None
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
        return _Cursor(self.raw.execute(_translate(sql), _enc_params(params)))

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

    # -- what SQLite says in its own dialect ---------------------------------------------------

    @staticmethod
    def _prune_content(conn: Any, run_ids: Sequence[str]) -> None:
        """Release the content flags a replaced run held on items it no longer links."""
        for part in _chunks(run_ids):
            held = conn.execute(
                "SELECT c.kind, c.item_id, c.run_id, r.doc::text"
                " FROM content_flags c JOIN runs r ON r.id = c.run_id"
                f" WHERE c.run_id IN {_marks(len(part))}",
                part,
            ).fetchall()
            gone = [
                (kind, item, run_id)
                for kind, item, run_id, doc in held
                if _links(doc).get(kind) != item
            ]
            conn.executemany(
                "DELETE FROM content_flags WHERE kind = ? AND item_id = ? AND run_id = ?", gone
            )

    def _derive_part(
        self, conn: Any, part: Sequence[str], fresh: dict[tuple[str, str, str], Score]
    ) -> None:
        """SQLite's ``_derive_part``, with scores keyed by (run, scorer, version), not rowid."""
        marks = _marks(len(part))
        now = now_us()
        conn.execute(
            "INSERT OR IGNORE INTO run_review (run_id, sort_at, agent, stored_at)"
            f" SELECT id, sort_at, agent, ? FROM runs WHERE id IN {marks}",
            [now, *part],
        )
        rows = conn.execute(
            "SELECT run_id, scorer, version, verdict, scored_at FROM scores"
            f" WHERE run_id IN {marks}",
            part,
        ).fetchall()
        latest: dict[tuple[str, str], tuple[Any, ...]] = {}
        for row in rows:
            key = (row[0], row[1])
            seen = latest.get(key)
            if seen is None or (row[4], row[2]) >= (seen[4], seen[2]):
                latest[key] = row
        docs: dict[tuple[str, str, str], Score] = {}
        flagged = []
        for r in latest.values():
            if r[3] == Verdict.FLAGGED:
                known = fresh.get((r[0], r[1], r[2]))
                if known is not None:
                    docs[(r[0], r[1], r[2])] = known  # just written: not parsed again
                else:
                    flagged.append(r)
        for start in range(0, len(flagged), 500):
            chunk = flagged[start : start + 500]
            for run_id, scorer, version, doc in conn.execute(
                "SELECT run_id, scorer, version, doc::text FROM scores WHERE"
                " (run_id, scorer, version) IN (" + ", ".join("(?, ?, ?)" for _ in chunk) + ")",
                [v for r in chunk for v in r[:3]],
            ):
                docs[(run_id, scorer, version)] = Score.model_validate_json(doc)
        current: dict[str, list[CurrentScore]] = {run_id: [] for run_id in part}
        for run_id, scorer, version, verdict, _ in latest.values():
            score = docs.get((run_id, scorer, version))
            current[run_id].append(
                CurrentScore(
                    scorer,
                    version,
                    Verdict(verdict),
                    score.detail if score else "",
                    tuple(score.findings) if score else (),
                )
            )
        verdicts: dict[str, dict[str, str]] = {}
        for run_id, key, verdict in conn.execute(
            f"SELECT run_id, finding_key, verdict FROM review_verdicts WHERE run_id IN {marks}",
            part,
        ):
            verdicts.setdefault(run_id, {})[key] = verdict
        links = {
            run_id: _links(doc)
            for run_id, doc in conn.execute(
                f"SELECT id, doc::text FROM runs WHERE id IN {marks}", part
            )
        }
        for run_id in part:
            if run_id not in links:
                continue
            flags = derive_from_current(current[run_id])
            self._apply(conn, run_id, flags, verdicts.get(run_id, {}), links[run_id], now)

    def verdict_counts(self, *, since: Any = None) -> list[VerdictCount]:
        """Live verdicts per (scorer, failure mode)."""
        from agentlens.store._sqlite_review import _us

        sql = (
            "SELECT scorer, failure_mode, count(*) FILTER (WHERE verdict = 'confirmed'),"
            " count(*) FILTER (WHERE verdict = 'false_positive') FROM review_verdicts"
            " WHERE live = 1"
        )
        params: list[Any] = []
        if since is not None:
            sql += " AND created_at >= ?"
            params.append(_us(since))
        sql += " GROUP BY scorer, failure_mode ORDER BY scorer, coalesce(failure_mode, '')"
        rows = self._read(lambda c: c.execute(sql, params).fetchall())
        return [VerdictCount(r[0], r[1], int(r[2]), int(r[3])) for r in rows]

    def review_queue(
        self, *, agent: str | None = None, limit: int | None = None, project: str | None = None
    ) -> list[RunSummary]:
        """Flagged runs with a finding that has no live verdict, oldest first."""
        sql = (
            f"SELECT f.sort_at, r.id, {pg_summary_columns()} FROM run_review f"
            " JOIN runs r ON r.id = f.run_id WHERE f.open > 0"
        )
        params: list[Any] = []
        if agent is not None:
            sql += " AND f.agent = ?"
            params.append(agent)
        if project is not None:
            sql += " AND r.project = ?"
            params.append(project)
        sql += " ORDER BY f.sort_at, f.run_id" + _limit_sql(limit)
        rows = self._read(lambda c: c.execute(sql, params).fetchall())
        return [summary_of(r, _metadata) for r in rows]

    # -- claims -------------------------------------------------------------------------------

    def claim_review(
        self, worker: str, *, limit: int = 64, lease_s: float = 300.0
    ) -> list[PendingRun]:
        """Claim up to ``limit`` pending runs (oldest written first) for ``worker``, for
        ``lease_s`` seconds: no other worker gets them until the lease runs out or they are
        marked reviewed (see the module docs). Runs other workers hold are skipped, not
        waited for (``FOR UPDATE SKIP LOCKED``)."""
        _limit_sql(limit)
        now = now_us()
        until = now + int(lease_s * 1_000_000)

        def work(conn: Any) -> list[PendingRun]:
            rows = conn.execute(
                "UPDATE run_review SET claimed_by = ?, lease_until = ? WHERE run_id IN ("
                "SELECT run_id FROM run_review WHERE reviewed_at IS NULL"
                " AND (lease_until IS NULL OR lease_until < ?)"
                " ORDER BY stored_at, run_id LIMIT ? FOR UPDATE SKIP LOCKED)"
                " RETURNING run_id, stored_at",
                (worker, until, now, limit),
            ).fetchall()
            return sorted(
                (PendingRun(r[0], r[1]) for r in rows), key=lambda p: (p.stored_at, p.run_id)
            )

        return self._write(work)

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
