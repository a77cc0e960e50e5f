"""The server's tables in PostgreSQL: API keys, and OTLP spans staged until their trace is built
(the mirror of :mod:`agentlens.store._server`, PostgreSQL migration 4). Mixed into
:class:`~agentlens.store._postgres.PostgresStore`; the methods and their contract are
:class:`~agentlens.store.ServerStore`'s, the tables' columns those of SQLite's migration 4.

Several ``agentlens serve`` processes may stage and build at once, so the staging is safe for
concurrent writers, which SQLite (one writer at a time) never has to be:

- ``stage_spans`` first upserts the rows of its traces in ``otlp_traces`` (in key order), which
  locks them until it commits, and only then inserts the spans. Two stagings of one trace take
  turns, so within a trace the spans' ``seq`` (an identity column) are committed in increasing
  order: a builder that has read every committed span up to ``seq`` N never misses one below N.
- ``commit_built_runs`` locks the builds' trace rows and stores a run only when no build that
  includes more spans was committed meanwhile (by another process's assembler), so a slower
  build never replaces a fuller one.
- ``purge_staged_spans`` locks the traces it purges (skipping those being written), and
  re-checks them under the lock: a span staged meanwhile keeps its trace's spans.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from agentlens.model import Trace
from agentlens.store._pg_text import dec, enc
from agentlens.store._server import ApiKeyRecord, ReadyTrace, StagedSpan, StagingCounts

__all__ = ["SERVER_TABLES", "PgServerMixin"]

_T = TypeVar("_T")

SERVER_TABLES: tuple[str, ...] = (
    """
    CREATE TABLE api_keys (
        id         text COLLATE "C" PRIMARY KEY,
        project    text COLLATE "C" NOT NULL,
        name       text,
        salt       bytea NOT NULL,
        hash       bytea NOT NULL,
        created_at bigint NOT NULL,
        revoked_at bigint
    )
    """,
    """
    CREATE TABLE otlp_spans (
        seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        project     text COLLATE "C" NOT NULL,
        trace_id    text COLLATE "C" NOT NULL,
        span_id     text COLLATE "C" NOT NULL,
        received_at bigint NOT NULL,
        doc         text NOT NULL,
        UNIQUE (project, trace_id, span_id)
    )
    """,
    """
    CREATE TABLE otlp_traces (
        project    text COLLATE "C" NOT NULL,
        trace_id   text COLLATE "C" NOT NULL,
        first_seen bigint NOT NULL,
        last_seen  bigint NOT NULL,
        root_ended integer NOT NULL,
        max_seq    bigint NOT NULL,
        built_seq  bigint NOT NULL,
        built_at   bigint,
        purged     integer NOT NULL,
        PRIMARY KEY (project, trace_id)
    )
    """,
    "CREATE INDEX otlp_traces_ready ON otlp_traces (last_seen) WHERE max_seq > built_seq",
)
"""PostgreSQL migration 4: the tables of SQLite's migration 4, in PostgreSQL's types."""

_KEY_COLUMNS = "id, project, name, salt, hash, created_at, revoked_at"


def _key(row: Sequence[Any]) -> ApiKeyRecord:
    return ApiKeyRecord(
        dec(row[0]) or "", dec(row[1]) or "", dec(row[2]), bytes(row[3]), bytes(row[4]),
        int(row[5]), row[6],
    )  # fmt: skip


class PgServerMixin:
    """:class:`~agentlens.store.ServerStore`'s methods for PostgreSQL (see the module)."""

    read: Callable[..., Any]
    write: Callable[..., Any]
    _query: Callable[..., list[tuple[Any, ...]]]
    _put_all: Callable[..., int]

    # -- API keys -----------------------------------------------------------------------------

    def create_api_key(
        self, key_id: str, project: str, salt: bytes, digest: bytes, created_at: int,
        name: str | None = None,
    ) -> None:  # fmt: skip
        """Store a new key's id, project and hash."""
        self.write(
            lambda c: c.execute(
                f"INSERT INTO api_keys ({_KEY_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, NULL)",
                (enc(key_id), enc(project), enc(name), salt, digest, created_at),
            )
        )

    def get_api_key(self, key_id: str) -> ApiKeyRecord | None:
        """The key with this id (revoked or not), or ``None``."""
        rows = self._query(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE id = %s", (enc(key_id),))
        return _key(rows[0]) if rows else None

    def list_api_keys(self) -> list[ApiKeyRecord]:
        """Every key, oldest first (revoked ones too)."""
        rows = self._query(f"SELECT {_KEY_COLUMNS} FROM api_keys ORDER BY created_at, id")
        return [_key(row) for row in rows]

    def revoke_api_key(self, key_id: str, revoked_at: int) -> bool:
        """Revoke a key; False when there is no such active key."""
        n = self.write(
            lambda c: (
                c.execute(
                    "UPDATE api_keys SET revoked_at = %s WHERE id = %s AND revoked_at IS NULL",
                    (revoked_at, enc(key_id)),
                ).rowcount
            )
        )
        return bool(n)

    def count_active_api_keys(self) -> int:
        """How many keys are not revoked."""
        return int(self._query("SELECT count(*) FROM api_keys WHERE revoked_at IS NULL")[0][0])

    # -- OTLP span staging --------------------------------------------------------------------

    def stage_spans(self, spans: Sequence[StagedSpan], received_at: int) -> int:
        """Stage spans, atomically; a span already staged (same project, trace, span id) is
        ignored. Returns how many spans were new (see the module for concurrent stagings)."""
        traces: dict[tuple[str | None, str | None], bool] = {}
        for s in spans:
            key = (enc(s.project), enc(s.trace_id))
            traces[key] = traces.get(key, False) or s.root_ended
        if not traces:
            return 0
        ordered = sorted(traces.items(), key=lambda item: (item[0][0] or "", item[0][1] or ""))

        def work(conn: Any) -> int:
            conn.execute(
                "INSERT INTO otlp_traces (project, trace_id, first_seen, last_seen, root_ended,"
                " max_seq, built_seq, built_at, purged)"
                " SELECT p, t, %s, %s, e, 0, 0, NULL, 0"
                " FROM unnest(%s::text[], %s::text[], %s::integer[]) WITH ORDINALITY AS u(p, t, e, i)"
                " ORDER BY i ON CONFLICT (project, trace_id) DO UPDATE SET"
                " last_seen = EXCLUDED.last_seen,"
                " root_ended = greatest(otlp_traces.root_ended, EXCLUDED.root_ended)",
                (
                    received_at,
                    received_at,
                    [p for (p, _), _ in ordered],
                    [t for (_, t), _ in ordered],
                    [int(e) for _, e in ordered],
                ),
            )
            (new,) = conn.execute(
                "WITH new AS (INSERT INTO otlp_spans (project, trace_id, span_id, received_at,"
                " doc) SELECT p, t, s, %s, d FROM unnest(%s::text[], %s::text[], %s::text[],"
                " %s::text[]) AS u(p, t, s, d) ON CONFLICT DO NOTHING"
                " RETURNING project, trace_id, seq),"
                " upd AS (UPDATE otlp_traces x SET max_seq = greatest(x.max_seq, n.top)"
                " FROM (SELECT project, trace_id, max(seq) AS top FROM new GROUP BY 1, 2) n"
                " WHERE x.project = n.project AND x.trace_id = n.trace_id)"
                " SELECT count(*) FROM new",
                (
                    received_at,
                    [enc(s.project) for s in spans],
                    [enc(s.trace_id) for s in spans],
                    [enc(s.span_id) for s in spans],
                    [enc(s.doc) for s in spans],
                ),
            ).fetchone()
            return int(new)

        return int(self.write(work))

    def ready_traces(self, *, idle_before: int, limit: int = 256) -> list[ReadyTrace]:
        """Traces to build now: spans not in their run yet, and the root ended or no span
        since ``idle_before`` (µs). Oldest activity first."""
        rows = self._query(
            "SELECT project, trace_id, root_ended, purged FROM otlp_traces"
            " WHERE max_seq > built_seq AND (root_ended = 1 OR last_seen < %s)"
            " ORDER BY last_seen LIMIT %s",
            (idle_before, limit),
        )
        return [ReadyTrace(dec(p) or "", dec(t) or "", bool(r), bool(g)) for p, t, r, g in rows]

    def staged_spans(self, project: str, trace_id: str) -> tuple[list[str], int]:
        """The staged spans' JSON of one trace, and the newest seq among them."""
        rows = self._query(
            "SELECT seq, doc FROM otlp_spans WHERE project = %s AND trace_id = %s ORDER BY seq",
            (enc(project), enc(trace_id)),
        )
        return [dec(doc) or "" for _, doc in rows], max((seq for seq, _ in rows), default=0)

    def commit_built_runs(
        self, built: Sequence[tuple[str, str, Trace | None, int]], built_at: int
    ) -> int:
        """Store the runs built from staged traces and record, in the same transaction, which
        spans each includes (a build older than one already committed is not stored)."""
        if not built:
            return 0
        keys = sorted({(enc(p) or "", enc(t) or "") for p, t, _, _ in built})

        def work(conn: Any) -> int:
            rows = conn.execute(
                "SELECT x.project, x.trace_id, x.built_seq FROM otlp_traces x"
                " JOIN unnest(%s::text[], %s::text[]) AS u(p, t)"
                " ON x.project = u.p AND x.trace_id = u.t"
                " ORDER BY x.project, x.trace_id FOR UPDATE OF x",
                ([p for p, _ in keys], [t for _, t in keys]),
            ).fetchall()
            done = {(dec(p), dec(t)): int(seq) for p, t, seq in rows}
            runs = [
                run
                for project, trace_id, run, upto in built
                if run is not None and done.get((project, trace_id), 0) < upto
            ]
            if runs:
                self._put_all(conn, runs)
            conn.execute(
                "UPDATE otlp_traces x SET built_seq = greatest(x.built_seq, u.upto),"
                " built_at = %s FROM unnest(%s::text[], %s::text[], %s::bigint[]) AS u(p, t, upto)"
                " WHERE x.project = u.p AND x.trace_id = u.t",
                (
                    built_at,
                    [enc(p) for p, _, _, _ in built],
                    [enc(t) for _, t, _, _ in built],
                    [upto for _, _, _, upto in built],
                ),
            )
            return len(runs)

        return int(self.write(work))

    def purge_staged_spans(self, *, built_before: int) -> int:
        """Delete the spans of traces fully built before ``built_before`` (µs) whose root has
        ended; a span arriving later is merged into the stored run. Returns spans deleted."""

        def work(conn: Any) -> int:
            (deleted,) = conn.execute(
                "WITH done AS (SELECT project, trace_id FROM otlp_traces"
                " WHERE built_seq >= max_seq AND built_at < %s AND purged = 0 AND root_ended = 1"
                " ORDER BY project, trace_id LIMIT 5000 FOR UPDATE SKIP LOCKED),"
                " marked AS (UPDATE otlp_traces x SET purged = 1 FROM done"
                " WHERE x.project = done.project AND x.trace_id = done.trace_id),"
                " gone AS (DELETE FROM otlp_spans s USING done"
                " WHERE s.project = done.project AND s.trace_id = done.trace_id RETURNING 1)"
                " SELECT count(*) FROM gone",
                (built_before,),
            ).fetchone()
            return int(deleted)

        return int(self.write(work))

    def staging_counts(self) -> StagingCounts:
        """Staged spans and traces not yet in a run."""

        def work(conn: Any) -> StagingCounts:
            (traces,) = conn.execute(
                "SELECT count(*) FROM otlp_traces WHERE max_seq > built_seq"
            ).fetchone()
            (pending,) = conn.execute(
                "SELECT count(*) FROM otlp_spans s JOIN otlp_traces t"
                " ON t.project = s.project AND t.trace_id = s.trace_id"
                " WHERE t.max_seq > t.built_seq AND s.seq > t.built_seq"
            ).fetchone()
            return StagingCounts(spans=int(pending), traces=int(traces))

        result: StagingCounts = self.read(work)
        return result

    def run_projects(self, run_ids: Sequence[str]) -> dict[str, str]:
        """The project of each of these runs that is stored."""
        if not run_ids:
            return {}
        rows = self._query(
            "SELECT id, project FROM runs WHERE id = ANY(%s::text[])",
            ([enc(i) for i in run_ids],),
        )
        return {dec(i) or "": dec(p) or "" for i, p in rows}

    def has_other_projects(self, project: str) -> bool:
        """Whether a run of another project than ``project`` is stored (two index probes)."""
        return bool(
            self._query(
                "SELECT 1 FROM runs WHERE project < %s OR project > %s LIMIT 1",
                (enc(project), enc(project)),
            )
        )
