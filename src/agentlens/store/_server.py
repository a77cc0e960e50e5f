"""What the server keeps in the SQLite store besides runs: API keys, and OTLP spans staged until
their trace is complete. Mixed into :class:`~agentlens.store.SQLiteStore`; the methods are
documented in :mod:`agentlens.store._protocol` (:class:`ServerStore`).

Tables (migration 4, see :mod:`agentlens.store._migrations`):

``api_keys`` — one row per key: ``id`` (the public key id, part of the key), ``project``,
    ``name``, ``salt`` and ``hash`` (scrypt of the secret; the key itself is never stored),
    ``created_at``, ``revoked_at`` (µs or NULL).
``otlp_spans`` — every span received, once: ``seq`` (arrival order), ``project``,
    ``trace_id``, ``span_id`` (unique together: a span delivered twice is stored once),
    ``received_at`` (µs), ``doc`` (the decoded span's JSON,
    :meth:`agentlens.ingest.otlp.OtlpSpan.to_dict`).
``otlp_traces`` — one row per (project, trace): ``first_seen``/``last_seen`` (µs), ``root_ended``
    (1 once a root span with an end time arrived), ``max_seq`` (the newest span's seq),
    ``built_seq`` (the newest span included in the stored run), ``built_at`` (µs),
    ``purged`` (1 once the spans of a built trace were deleted after the retention time).

A trace is *ready* when it has spans not yet in its run (``max_seq > built_seq``) and either its
root has ended or it has been idle (no new span) for the idle time.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from agentlens.model import Trace, to_epoch_us
from agentlens.store._rates import _DAY_US
from agentlens.store._sqlite_filter import _filter_sql, _FilterSQL, _where_clause
from agentlens.store._sqlite_review import SUMMARY_COLUMNS, summary_of

__all__ = [
    "ApiKeyRecord",
    "ReadyTrace",
    "ServerTablesMixin",
    "StagedSpan",
    "StagingCounts",
    "list_runs_page",
]

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class StagedSpan:
    """A span to stage: its keys, whether it is an ended root span, and its JSON."""

    project: str
    trace_id: str
    span_id: str
    root_ended: bool
    doc: str


@dataclass(frozen=True, slots=True)
class ReadyTrace:
    """A trace whose run should be (re)built now."""

    project: str
    trace_id: str
    complete: bool
    """True when its root span has ended; False when it is built because it went idle."""
    purged: bool
    """True when spans of an earlier build were purged: merge into the stored run."""


@dataclass(frozen=True, slots=True)
class StagingCounts:
    """How much staged work there is (for ``/metrics``)."""

    spans: int
    """Staged spans not yet in a run."""
    traces: int
    """Traces with spans not yet in a run."""


@dataclass(frozen=True, slots=True)
class ApiKeyRecord:
    """A stored API key (without its secret)."""

    id: str
    project: str
    name: str | None
    salt: bytes
    hash: bytes
    created_at: int
    """µs since the epoch."""
    revoked_at: int | None


class ServerTablesMixin:
    """The server's store methods for :class:`~agentlens.store.SQLiteStore` (see the module)."""

    _write: Callable[..., Any]
    _read: Callable[..., Any]
    put_traces: Callable[..., int]

    # -- API keys -----------------------------------------------------------------------------

    def create_api_key(
        self, key_id: str, project: str, salt: bytes, digest: bytes, created_at: int,
        name: str | None = None,
    ) -> None:  # fmt: skip
        """Store a new key's id, project and hash."""
        self._write(
            lambda c: c.execute(
                "INSERT INTO api_keys (id, project, name, salt, hash, created_at, revoked_at)"
                " VALUES (?, ?, ?, ?, ?, ?, NULL)",
                (key_id, project, name, salt, digest, created_at),
            )
        )

    def get_api_key(self, key_id: str) -> ApiKeyRecord | None:
        """The key with this id (revoked or not), or ``None``."""
        row = self._read(
            lambda c: c.execute(
                "SELECT id, project, name, salt, hash, created_at, revoked_at FROM api_keys"
                " WHERE id = ?",
                (key_id,),
            ).fetchone()
        )
        return None if row is None else ApiKeyRecord(*row)

    def list_api_keys(self) -> list[ApiKeyRecord]:
        """Every key, oldest first (revoked ones too)."""
        rows = self._read(
            lambda c: c.execute(
                "SELECT id, project, name, salt, hash, created_at, revoked_at FROM api_keys"
                " ORDER BY created_at, id"
            ).fetchall()
        )
        return [ApiKeyRecord(*row) for row in rows]

    def revoke_api_key(self, key_id: str, revoked_at: int) -> bool:
        """Revoke a key; False when there is no such active key."""
        n = self._write(
            lambda c: (
                c.execute(
                    "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                    (revoked_at, key_id),
                ).rowcount
            )
        )
        return bool(n)

    def count_active_api_keys(self) -> int:
        """How many keys are not revoked."""
        return int(
            self._read(
                lambda c: c.execute(
                    "SELECT count(*) FROM api_keys WHERE revoked_at IS NULL"
                ).fetchone()[0]
            )
        )

    # -- OTLP span staging --------------------------------------------------------------------

    def stage_spans(self, spans: Sequence[StagedSpan], received_at: int) -> int:
        """Stage spans, atomically; a span already staged (same project, trace, span id) is
        ignored. Returns how many spans were new."""

        def work(conn: sqlite3.Connection) -> int:
            before = conn.total_changes
            conn.executemany(
                "INSERT OR IGNORE INTO otlp_spans (project, trace_id, span_id, received_at, doc)"
                " VALUES (?, ?, ?, ?, ?)",
                [(s.project, s.trace_id, s.span_id, received_at, s.doc) for s in spans],
            )
            new = conn.total_changes - before
            traces: dict[tuple[str, str], bool] = {}
            for s in spans:
                key = (s.project, s.trace_id)
                traces[key] = traces.get(key, False) or s.root_ended
            conn.executemany(
                "INSERT INTO otlp_traces (project, trace_id, first_seen, last_seen, root_ended,"
                " max_seq, built_seq, built_at, purged) VALUES (?1, ?2, ?3, ?3, ?4,"
                " (SELECT ifnull(max(seq), 0) FROM otlp_spans WHERE project = ?1"
                " AND trace_id = ?2), 0, NULL, 0)"
                " ON CONFLICT (project, trace_id) DO UPDATE SET last_seen = excluded.last_seen,"
                " root_ended = max(root_ended, excluded.root_ended), max_seq = excluded.max_seq",
                [
                    (project, trace_id, received_at, int(ended))
                    for (project, trace_id), ended in traces.items()
                ],
            )
            return new

        return int(self._write(work))

    def ready_traces(self, *, idle_before: int, limit: int = 256) -> list[ReadyTrace]:
        """Traces to build now: spans not in their run yet, and the root ended or no span
        since ``idle_before`` (µs). Oldest activity first."""
        rows = self._read(
            lambda c: c.execute(
                "SELECT project, trace_id, root_ended, purged FROM otlp_traces"
                " WHERE max_seq > built_seq AND (root_ended = 1 OR last_seen < ?)"
                " ORDER BY last_seen LIMIT ?",
                (idle_before, limit),
            ).fetchall()
        )
        return [ReadyTrace(p, t, bool(r), bool(g)) for p, t, r, g in rows]

    def staged_spans(self, project: str, trace_id: str) -> tuple[list[str], int]:
        """The staged spans' JSON of one trace, and the newest seq among them."""
        rows = self._read(
            lambda c: c.execute(
                "SELECT seq, doc FROM otlp_spans WHERE project = ? AND trace_id = ? ORDER BY seq",
                (project, trace_id),
            ).fetchall()
        )
        return [doc for _, doc in rows], max((seq for seq, _ in rows), default=0)

    def commit_built_runs(
        self, built: Sequence[tuple[str, str, Trace | None, int]], built_at: int
    ) -> int:
        """Store the runs built from staged traces and record, in the same transaction, which
        spans each includes: items are ``(project, trace_id, run or None, upto_seq)`` (``None``:
        nothing to store, e.g. a trace refused). Returns how many runs were stored."""

        def work(conn: sqlite3.Connection) -> int:
            runs = [run for _, _, run, _ in built if run is not None]
            if runs:
                self.put_traces(runs)
            conn.executemany(
                "UPDATE otlp_traces SET built_seq = max(built_seq, ?), built_at = ?"
                " WHERE project = ? AND trace_id = ?",
                [(upto, built_at, project, trace_id) for project, trace_id, _, upto in built],
            )
            return len(runs)

        return int(self._write(work))

    def purge_staged_spans(self, *, built_before: int) -> int:
        """Delete the spans of traces fully built before ``built_before`` (µs) whose root has
        ended; a span arriving later is merged into the stored run. Returns spans deleted."""

        def work(conn: sqlite3.Connection) -> int:
            done = conn.execute(
                "SELECT project, trace_id FROM otlp_traces WHERE built_seq >= max_seq"
                " AND built_at < ? AND purged = 0 AND root_ended = 1 LIMIT 5000",
                (built_before,),
            ).fetchall()
            deleted = 0
            for project, trace_id in done:
                deleted += conn.execute(
                    "DELETE FROM otlp_spans WHERE project = ? AND trace_id = ?",
                    (project, trace_id),
                ).rowcount
            conn.executemany(
                "UPDATE otlp_traces SET purged = 1 WHERE project = ? AND trace_id = ?", done
            )
            return deleted

        return int(self._write(work))

    def staging_counts(self) -> StagingCounts:
        """Staged spans and traces not yet in a run."""

        def work(conn: sqlite3.Connection) -> StagingCounts:
            (traces,) = conn.execute(
                "SELECT count(*) FROM otlp_traces WHERE max_seq > built_seq"
            ).fetchone()
            # Per pending trace (the partial index), its spans newer than its build: the cost
            # is the backlog's, not the table's (built spans stay for the retention time).
            pending = conn.execute(
                "SELECT ifnull(sum((SELECT count(*) FROM otlp_spans s WHERE s.project = t.project"
                " AND s.trace_id = t.trace_id AND s.seq > t.built_seq)), 0) FROM otlp_traces t"
                " WHERE t.max_seq > t.built_seq"
            ).fetchone()[0]
            return StagingCounts(spans=int(pending), traces=int(traces))

        result: StagingCounts = self._read(work)
        return result

    def run_projects(self, run_ids: Sequence[str]) -> dict[str, str]:
        """The project of each of these runs that is stored."""
        if not run_ids:
            return {}
        ids = list(run_ids)
        out: dict[str, str] = {}
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            marks = "(" + ", ".join("?" * len(part)) + ")"
            rows = self._read(
                lambda c, part=part, marks=marks: c.execute(
                    f"SELECT id, project FROM runs WHERE id IN {marks}", part
                ).fetchall()
            )
            out.update(dict(rows))
        return out

    def has_other_projects(self, project: str) -> bool:
        """Whether a run of another project than ``project`` is stored (two index probes)."""
        found = self._read(
            lambda c: c.execute(
                "SELECT 1 FROM runs WHERE project < ? OR project > ? LIMIT 1", (project, project)
            ).fetchone()
        )
        return found is not None


def list_runs_page(
    store: Any,
    where: Any,
    *,
    before: tuple[int, str] | None,
    limit: int,
    link: tuple[str, str] | None = None,
) -> tuple[list[Any], tuple[int, str] | None]:
    """One page of run summaries (with their review flags), newest first, after the key cursor
    ``before`` (the ``(sort_at, id)`` the previous page returned); returns the page and the next
    cursor (``None`` on the last page). ``where`` is a :class:`~agentlens.store.RunFilter`
    (``flagged`` and ``failure_mode`` included); ``link``: only runs whose ``links[kind] == id``.
    """
    runs_page = getattr(store, "runs_page", None)
    if runs_page is not None:  # PostgreSQL: the same page, in its own SQL
        own: tuple[list[Any], tuple[int, str] | None] = runs_page(
            where, before=before, limit=limit, link=link
        )
        return own
    base = _filter_sql(where).with_review()
    if link is not None:
        base = _with_link(base, link)

    def work(conn: sqlite3.Connection) -> list[Any]:
        plan = _project_plan(conn, where, by_flagged=base.key != ("r.sort_at", "r.id"))
        if plan == "empty":
            return []
        runs, filter_sql = "runs r", base
        if plan == "project" and link is None:
            # the project's runs newest first (a flagged filter's rows of run_review are then
            # joined run by run: the same rows, the same (sort_at, id) keys)
            runs = "runs r INDEXED BY runs_by_project_time"
            filter_sql = replace(base, key=("r.sort_at", "r.id"))
        sort_col, id_col = filter_sql.key
        clauses, params = filter_sql.sql()
        if before is not None:
            clauses.append(f"({sort_col}, {id_col}) < (?, ?)")
            params.extend(before)
        sql = (
            f"SELECT {sort_col}, {id_col}, {SUMMARY_COLUMNS} FROM {runs}"
            + filter_sql.join
            + _where_clause(clauses)
            + f" ORDER BY {sort_col} DESC, {id_col} DESC LIMIT ?"
        )
        return conn.execute(sql, [*params, limit + 1]).fetchall()

    rows = store.read(work)
    page = [summary_of(row) for row in rows[:limit]]
    cursor = (rows[limit - 1][0], rows[limit - 1][1]) if len(rows) > limit else None
    return page, cursor


PLAN_FROM_ROLLUP = True
"""``False``: :func:`list_runs_page` leaves the choice of index to SQLite's planner (as before
the run-count rollup), for the tests and the benchmarks' baseline."""


_SMALL_PROJECT = 20_000
"""A project with at most this many runs in a window reads a flagged filter's page from its
own runs (at most that many index entries, each joined to its review row), not from the
flagged runs of every project."""


def _project_plan(conn: sqlite3.Connection, where: Any, *, by_flagged: bool = False) -> str:
    """How to read one project's page, from the run-count rollup (``run_rollup``, SQLite
    migration 9): ``"empty"`` when no run of the project has the filter's role and release in
    the days of the window (so no run can match); ``"project"`` when the project has fewer runs
    in those days than the role or release the planner would walk (its index, ``(agent,
    sort_at, id)`` or ``(release, sort_at, id)``, holds every project's runs: for a small
    project in a big store that is a scan that finds nothing), or, for a filter on flagged
    runs (``by_flagged``: the planner walks the flagged runs of every project), at most
    :data:`_SMALL_PROJECT`; else ``"planner"``.

    The days counted cover the window (its partial days whole), so an empty count is exact.
    """
    if not PLAN_FROM_ROLLUP or where is None or where.project is None or where.run_ids is not None:
        return "planner"
    start, end = to_epoch_us(where.start), to_epoch_us(where.end)
    days, args = "", []
    if start is not None or end is not None:
        days = " AND day >= ?"  # dated runs only, as the window's own clause
        args.append(-(2**63) + 1 if start is None else start // _DAY_US)
        if end is not None:
            days += " AND day <= ?"
            args.append((end - 1) // _DAY_US)

    def count(**equal: Any) -> int:
        cond = "".join(f" AND {column} = ?" for column in equal)
        sql = f"SELECT ifnull(sum(n), 0) FROM run_rollup WHERE n > 0{cond}{days}"
        return int(conn.execute(sql, [*equal.values(), *args]).fetchone()[0])

    others = {
        k: v for k, v in (("agent", where.agent), ("release", where.release)) if v is not None
    }
    if count(project=where.project, **others) == 0:
        return "empty"
    own = count(project=where.project)
    if by_flagged and own <= _SMALL_PROJECT:
        return "project"
    if not others:
        return "planner"  # the project's own index is the planner's choice already
    narrowest = min(count(**{k: v}) for k, v in others.items())
    return "project" if own < narrowest else "planner"


def _with_link(filter_sql: _FilterSQL, link: tuple[str, str]) -> _FilterSQL:
    """``filter_sql`` narrowed to the runs that link ``link`` (``run_links``, SQLite migration
    8). Unless another table already orders the page (the flagged runs'), the item's rows of
    ``run_links`` do, newest first from its primary key: a few index entries for an item with
    few runs, not a scan of ``runs``."""
    if filter_sql.key != ("r.sort_at", "r.id"):
        return filter_sql.plus(
            "r.id IN (SELECT run_id FROM run_links WHERE kind = ? AND item_id = ?)", *link
        )
    joined = replace(
        filter_sql,
        join=" JOIN run_links l ON l.run_id = r.id" + filter_sql.join,
        key=("l.sort_at", "l.run_id"),
    )
    return joined.plus("l.kind = ? AND l.item_id = ?", *link)
