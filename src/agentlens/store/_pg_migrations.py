"""Numbered schema migrations of the PostgreSQL store (the mirror of :mod:`._migrations`).

The PostgreSQL schema has its own version numbers (1, 2, 3... with no gaps), recorded in the
same ``_agentlens_migrations(version, name, applied_at)`` table, and the same rules as SQLite's:
every open applies what the store has not seen yet, in one transaction, under an advisory lock
(so two processes opening a new store do not both migrate it); a store newer than this agentlens
is refused with :class:`~agentlens.errors.SchemaVersionError`. Never edit a migration that has
been released: add one. What the tables hold is described in :mod:`agentlens.store._postgres`.

Every table, index, function and trigger is created unqualified, so it lives in the schema at
the head of the connection's ``search_path`` (the URL's ``schema=`` parameter, else ``public``).
Functions carry ``SET search_path FROM CURRENT`` so triggers resolve tables in that schema.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from agentlens.errors import SchemaVersionError
from agentlens.store._pg_server import SERVER_TABLES

__all__ = [
    "HOUR_US",
    "MIGRATIONS_TABLE",
    "NO_HOUR",
    "PG_MIGRATIONS",
    "RATE_ROLLUP_FILL",
    "REMOVED_FROM_ROLLUP",
    "PgMigration",
    "latest_pg_version",
    "migrate_pg",
]

MIGRATIONS_TABLE = "_agentlens_migrations"
HOUR_US = 3_600_000_000
NO_HOUR = -(2**63)
"""``hour`` of an undated run in the rollups (and ``sort_at`` of an undated run in ``runs``)."""


@dataclass(frozen=True, slots=True)
class PgMigration:
    """One step of the PostgreSQL schema's history."""

    version: int
    name: str
    statements: tuple[str, ...]
    then: Callable[[Any], None] | None = None
    """Python to run after the statements, in the same transaction (given the connection)."""


def _hour(t: str) -> str:
    """SQL: the hour number (floor of µs / hour) of a µs time; NO_HOUR when NULL."""
    return f"(CASE WHEN {t} IS NULL THEN {NO_HOUR} ELSE floor({t} / {HOUR_US}.0)::bigint END)"


def _hex(t: str) -> str:
    return f"encode(convert_to({t}, 'UTF8'), 'hex')"


_INITIAL = PgMigration(
    1,
    "runs, scores (partitioned by month of started_at)",
    (
        # Run and score text keys use the "C" collation: byte order, as SQLite's BINARY.
        """
        CREATE TABLE runs (
            id         text COLLATE "C" NOT NULL,
            project    text COLLATE "C" NOT NULL,
            agent      text COLLATE "C",
            name       text,
            status     text NOT NULL,
            started_at bigint,
            ended_at   bigint,
            sort_at    bigint NOT NULL,
            has_output boolean NOT NULL,
            step_count integer NOT NULL,
            release    text COLLATE "C",
            written_at bigint NOT NULL,
            digest     bytea NOT NULL,
            doc        json NOT NULL,
            steps      json NOT NULL,
            PRIMARY KEY (sort_at, id)
        ) PARTITION BY RANGE (sort_at)
        """,
        "CREATE INDEX runs_by_id ON runs (id)",
        # One row per stored run id: what a write locks (a row lock, so no limit on how many
        # runs one transaction holds) so that two writers of the same run take turns.
        'CREATE TABLE run_keys (id text COLLATE "C" PRIMARY KEY)',
        "CREATE INDEX runs_by_agent_time ON runs (agent, sort_at, id)",
        "CREATE INDEX runs_by_project_time ON runs (project, sort_at, id)",
        f"CREATE TABLE runs_undated PARTITION OF runs FOR VALUES FROM (MINVALUE) TO ({NO_HOUR + 1})",
        """
        CREATE TABLE scores (
            run_id         text COLLATE "C" NOT NULL,
            scorer         text COLLATE "C" NOT NULL,
            version        text COLLATE "C" NOT NULL,
            verdict        text NOT NULL,
            passed         boolean NOT NULL,
            value          double precision,
            detail         text NOT NULL,
            error          text,
            finding_count  integer NOT NULL,
            scored_at      bigint NOT NULL,
            modes          text[] COLLATE "C" NOT NULL,
            mode_findings  integer[] NOT NULL,
            run_project    text COLLATE "C" NOT NULL,
            run_agent      text COLLATE "C",
            run_release    text COLLATE "C",
            run_started_at bigint,
            run_sort_at    bigint NOT NULL,
            doc            json NOT NULL,
            PRIMARY KEY (run_sort_at, run_id, scorer, version)
        ) PARTITION BY RANGE (run_sort_at)
        """,
        "CREATE INDEX scores_by_run ON scores (run_id)",
        "CREATE INDEX scores_by_scorer_time ON scores (scorer, version, run_started_at)",
        "CREATE INDEX scores_by_time ON scores (run_started_at)",
        f"CREATE TABLE scores_undated PARTITION OF scores FOR VALUES FROM (MINVALUE)"
        f" TO ({NO_HOUR + 1})",
    ),
)

# -- migration 2: the rate rollups ----------------------------------------------------------------
#
# The mirror of SQLite's migration 2, kept by triggers in the same way, with two differences made
# for many concurrent writers:
#
# - The rollups are *delta* tables: a trigger only ever INSERTs signed counts (never UPDATEs a
#   shared counter row), so concurrent writers never wait for each other's counter rows and never
#   deadlock on them. A query sums the rows of its key; ``agentlens_compact_rollups()`` merges the
#   rows written since the last compaction (``fresh``) into one per key.
# - The rollups count per UTC *hour* (not day), so a window whose edges are not on whole hours
#   reads at most the two edge hours from ``rate_runs``.
#
# ``rate_sigs``   (id uuid = md5(sig), sig): every distinct signature, encoded exactly as SQLite's.
# ``rate_runs``   one row per scored run: start time, hour, agent, release, signature.
# ``rate_rollup`` signed counts per (hour, agent, release, sig).
# ``run_rollup``  signed counts of runs (scored or not) per (hour, agent, release): the
#                 denominator of a rate, so a window never counts the rows of ``runs``.
#
# The store's writers lock the runs they write (rows of ``run_keys``) before writing, so two
# transactions never recompute the same run's signature at once (READ COMMITTED: the second
# then sees the first's committed scores).

_SIG = (
    "string_agg("
    + _hex("s.scorer")
    + " || '.' || "
    + _hex("s.version")
    + " || '.' || "
    + _hex("s.verdict")
    + " || '.' || coalesce((SELECT string_agg('x' || "
    + _hex("m")
    + ", ',' ORDER BY m) FROM unnest(s.modes) AS m), ''), ';' ORDER BY s.scorer, s.version)"
)


def _refresh_body(where: str) -> str:
    """SQL: recompute ``rate_runs`` (and the rollup deltas) of the runs whose scores ``where``
    selects (on ``scores s``); their old rows must be gone already."""
    return f"""
    WITH cur AS (
        SELECT s.run_id, min(s.run_started_at) AS started_at, min(s.run_agent) AS agent,
            min(s.run_release) AS release, {_SIG} AS sig
        FROM scores s WHERE {where} GROUP BY s.run_id),
    sigs AS (
        INSERT INTO rate_sigs (id, sig) SELECT DISTINCT md5(sig)::uuid, sig FROM cur
        ON CONFLICT DO NOTHING),
    ins AS (
        INSERT INTO rate_runs (run_id, started_at, hour, agent, release, sig)
        SELECT run_id, started_at, {_hour("started_at")}, agent, release, md5(sig)::uuid
        FROM cur RETURNING hour, agent, release, sig)
    INSERT INTO rate_rollup (hour, agent, release, sig, n)
        SELECT hour, agent, release, sig, count(*) FROM ins GROUP BY 1, 2, 3, 4"""


# The writers (put_traces, put_scores, delete_runs) lock the rows of ``run_keys`` of the runs
# they write first, so two transactions never refresh the same run at once.
_REFRESH_FN = f"""
CREATE FUNCTION agentlens_rate_refresh(ids text[]) RETURNS void LANGUAGE plpgsql
SET search_path FROM CURRENT AS $fn$
BEGIN
    WITH old AS (DELETE FROM rate_runs WHERE run_id = ANY(ids)
                 RETURNING hour, agent, release, sig)
    INSERT INTO rate_rollup (hour, agent, release, sig, n)
        SELECT hour, agent, release, sig, -count(*) FROM old GROUP BY 1, 2, 3, 4;
    {_refresh_body("s.run_id = ANY(ids)")};
END
$fn$
"""

_SCORES_TRIGGER_FN = """
CREATE FUNCTION agentlens_scores_changed() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $fn$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM agentlens_rate_refresh(ARRAY(SELECT DISTINCT run_id FROM new_rows));
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM agentlens_rate_refresh(ARRAY(SELECT DISTINCT run_id FROM old_rows));
    ELSE
        PERFORM agentlens_rate_refresh(ARRAY(SELECT run_id FROM new_rows
                                             UNION SELECT run_id FROM old_rows));
    END IF;
    RETURN NULL;
END
$fn$
"""

_RUNS_TRIGGER_FN = f"""
CREATE FUNCTION agentlens_runs_changed() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $fn$
BEGIN
    IF TG_OP = 'INSERT' OR TG_OP = 'UPDATE' THEN
        INSERT INTO run_rollup (hour, agent, release, n)
            SELECT {_hour("started_at")}, agent, release, count(*) FROM new_rows GROUP BY 1, 2, 3;
    END IF;
    IF TG_OP = 'DELETE' OR TG_OP = 'UPDATE' THEN
        INSERT INTO run_rollup (hour, agent, release, n)
            SELECT {_hour("started_at")}, agent, release, -count(*) FROM old_rows GROUP BY 1, 2, 3;
    END IF;
    RETURN NULL;
END
$fn$
"""

_COMPACT_FN = """
CREATE FUNCTION agentlens_compact_rollups() RETURNS bigint LANGUAGE plpgsql
SET search_path FROM CURRENT AS $fn$
DECLARE
    merged bigint := 0;
    k bigint;
BEGIN
    IF NOT pg_try_advisory_xact_lock(8318, hashtext(current_schema())) THEN
        RETURN -1;  -- another compaction is running
    END IF;
    WITH keys AS (SELECT DISTINCT hour, agent, release, sig FROM rate_rollup WHERE fresh),
    gone AS (
        DELETE FROM rate_rollup r USING keys k
        WHERE r.hour = k.hour AND r.agent IS NOT DISTINCT FROM k.agent
          AND r.release IS NOT DISTINCT FROM k.release AND r.sig = k.sig
        RETURNING r.hour, r.agent, r.release, r.sig, r.n),
    ins AS (
        INSERT INTO rate_rollup (hour, agent, release, sig, n, fresh)
        SELECT hour, agent, release, sig, sum(n), false FROM gone GROUP BY 1, 2, 3, 4
        HAVING sum(n) <> 0 RETURNING 1)
    SELECT (SELECT count(*) FROM gone) INTO k;
    merged := merged + k;
    WITH keys AS (SELECT DISTINCT hour, agent, release FROM run_rollup WHERE fresh),
    gone AS (
        DELETE FROM run_rollup r USING keys k
        WHERE r.hour = k.hour AND r.agent IS NOT DISTINCT FROM k.agent
          AND r.release IS NOT DISTINCT FROM k.release
        RETURNING r.hour, r.agent, r.release, r.n),
    ins AS (
        INSERT INTO run_rollup (hour, agent, release, n, fresh)
        SELECT hour, agent, release, sum(n), false FROM gone GROUP BY 1, 2, 3
        HAVING sum(n) <> 0 RETURNING 1)
    SELECT (SELECT count(*) FROM gone) INTO k;
    RETURN merged + k;
END
$fn$
"""

_RATE_ROLLUP_FILL_V1: tuple[str, ...] = (
    "DELETE FROM rate_rollup",
    "DELETE FROM rate_runs",
    "DELETE FROM run_rollup",
    _refresh_body("TRUE"),
    f"INSERT INTO run_rollup (hour, agent, release, n) SELECT {_hour('started_at')}, agent,"
    " release, count(*) FROM runs GROUP BY 1, 2, 3",
    "SELECT agentlens_compact_rollups()",
)
"""Migration 2's statements that filled its rate tables (the current ones: :data:`RATE_ROLLUP_FILL`)."""

_RATE_ROLLUP = PgMigration(
    2,
    "rate rollups: rate_sigs, rate_runs, rate_rollup, run_rollup, kept by triggers",
    (
        "CREATE TABLE rate_sigs (id uuid PRIMARY KEY, sig text NOT NULL)",
        """
        CREATE TABLE rate_runs (
            run_id     text COLLATE "C" PRIMARY KEY,
            started_at bigint,
            hour       bigint NOT NULL,
            agent      text COLLATE "C",
            release    text COLLATE "C",
            sig        uuid NOT NULL
        )
        """,
        # covering: the flagged runs of a window are an index-only scan
        "CREATE INDEX rate_runs_by_sig ON rate_runs (sig, started_at) INCLUDE (run_id, agent, release)",
        "CREATE INDEX rate_runs_by_time ON rate_runs (started_at, agent, release, sig)",
        """
        CREATE TABLE rate_rollup (
            hour    bigint NOT NULL,
            agent   text COLLATE "C",
            release text COLLATE "C",
            sig     uuid NOT NULL,
            n       bigint NOT NULL,
            fresh   boolean NOT NULL DEFAULT true
        )
        """,
        "CREATE INDEX rate_rollup_by_hour ON rate_rollup (hour)",
        "CREATE INDEX rate_rollup_fresh ON rate_rollup (hour) WHERE fresh",
        """
        CREATE TABLE run_rollup (
            hour    bigint NOT NULL,
            agent   text COLLATE "C",
            release text COLLATE "C",
            n       bigint NOT NULL,
            fresh   boolean NOT NULL DEFAULT true
        )
        """,
        "CREATE INDEX run_rollup_by_hour ON run_rollup (hour)",
        "CREATE INDEX run_rollup_fresh ON run_rollup (hour) WHERE fresh",
        _REFRESH_FN,
        _SCORES_TRIGGER_FN,
        _RUNS_TRIGGER_FN,
        _COMPACT_FN,
        "CREATE TRIGGER rate_scores_insert AFTER INSERT ON scores REFERENCING NEW TABLE AS new_rows"
        " FOR EACH STATEMENT EXECUTE FUNCTION agentlens_scores_changed()",
        "CREATE TRIGGER rate_scores_delete AFTER DELETE ON scores REFERENCING OLD TABLE AS old_rows"
        " FOR EACH STATEMENT EXECUTE FUNCTION agentlens_scores_changed()",
        "CREATE TRIGGER rate_scores_update AFTER UPDATE ON scores"
        " REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows"
        " FOR EACH STATEMENT EXECUTE FUNCTION agentlens_scores_changed()",
        "CREATE TRIGGER rate_runs_insert AFTER INSERT ON runs REFERENCING NEW TABLE AS new_rows"
        " FOR EACH STATEMENT EXECUTE FUNCTION agentlens_runs_changed()",
        "CREATE TRIGGER rate_runs_delete AFTER DELETE ON runs REFERENCING OLD TABLE AS old_rows"
        " FOR EACH STATEMENT EXECUTE FUNCTION agentlens_runs_changed()",
        "CREATE TRIGGER rate_runs_update AFTER UPDATE ON runs"
        " REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows"
        " FOR EACH STATEMENT EXECUTE FUNCTION agentlens_runs_changed()",
        *_RATE_ROLLUP_FILL_V1,
    ),
)

# -- migration 3: review state (the mirror of SQLite's migration 3, with review claims) ---------

_REVIEW = PgMigration(
    3,
    "review: run_review (with claims), run_flag_modes, content_flags, review_verdicts,"
    " webhook_deliveries",
    (
        """
        CREATE TABLE run_review (
            run_id      text COLLATE "C" PRIMARY KEY,
            sort_at     bigint NOT NULL,
            agent       text COLLATE "C",
            stored_at   bigint NOT NULL,
            reviewed_at bigint,
            state       text,
            flagged     integer NOT NULL DEFAULT 0,
            reason      text,
            modes       text NOT NULL DEFAULT '[]',
            findings    text NOT NULL DEFAULT '[]',
            open        integer NOT NULL DEFAULT 0,
            claimed_by  text,
            lease_until bigint
        )
        """,
        "CREATE INDEX run_review_pending ON run_review (stored_at, run_id)"
        " WHERE reviewed_at IS NULL",
        "CREATE INDEX run_review_flagged ON run_review (sort_at, run_id) WHERE flagged = 1",
        "CREATE INDEX run_review_flagged_agent ON run_review (agent, sort_at, run_id)"
        " WHERE flagged = 1",
        "CREATE INDEX run_review_queue ON run_review (agent, sort_at, run_id) WHERE open > 0",
        "INSERT INTO run_review (run_id, sort_at, agent, stored_at)"
        " SELECT id, sort_at, agent, (extract(epoch FROM now()) * 1000000)::bigint FROM runs",
        """
        CREATE TABLE run_flag_modes (
            run_id text COLLATE "C" NOT NULL,
            mode   text COLLATE "C" NOT NULL,
            PRIMARY KEY (run_id, mode)
        )
        """,
        """
        CREATE TABLE content_flags (
            kind       text COLLATE "C" NOT NULL,
            item_id    text COLLATE "C" NOT NULL,
            run_id     text COLLATE "C" NOT NULL,
            reason     text,
            flagged_at bigint NOT NULL,
            dismissed  integer NOT NULL DEFAULT 0,
            PRIMARY KEY (kind, item_id, run_id)
        )
        """,
        "CREATE INDEX content_flags_by_run ON content_flags (run_id)",
        "CREATE INDEX content_flags_active ON content_flags (flagged_at) WHERE dismissed = 0",
        """
        CREATE TABLE review_verdicts (
            run_id       text COLLATE "C" NOT NULL,
            finding_key  text COLLATE "C" NOT NULL,
            scorer       text COLLATE "C" NOT NULL,
            failure_mode text COLLATE "C",
            text         text NOT NULL,
            verdict      text NOT NULL,
            note         text,
            author       text,
            scope        text NOT NULL,
            created_at   bigint NOT NULL,
            live         integer NOT NULL,
            PRIMARY KEY (run_id, finding_key)
        )
        """,
        "CREATE INDEX review_verdicts_by_time ON review_verdicts (created_at)",
        """
        CREATE TABLE webhook_deliveries (
            id              text COLLATE "C" PRIMARY KEY,
            run_id          text COLLATE "C" NOT NULL,
            url             text NOT NULL,
            body            text NOT NULL,
            status          text NOT NULL,
            attempts        integer NOT NULL DEFAULT 0,
            next_attempt_at bigint NOT NULL,
            last_error      text,
            created_at      bigint NOT NULL,
            delivered_at    bigint
        )
        """,
        "CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)"
        " WHERE status = 'pending'",
        "CREATE INDEX webhook_deliveries_by_time ON webhook_deliveries (created_at)",
    ),
)

# -- migration 4: the server's tables (SQLite's migration 4; see agentlens.store._pg_server) ----

_SERVER_TABLES = PgMigration(4, "server: api_keys, otlp_spans, otlp_traces", SERVER_TABLES)

# -- migration 5: the runs' content links as rows (SQLite's migration 8) ------------------------
#
# ``run_links`` (kind, item_id, run_id, sort_at), text escaped as every column (``enc``): one row
# per entry of a run's ``links``, written with the run and deleted with it, so
# ``/api/runs?link=KIND:ID`` reads the item's runs from the primary key, newest first. Filled from
# the stored runs in SQL, except documents holding a NUL (PostgreSQL's JSON functions refuse to
# turn ``\u0000`` into text), which are read in Python.

_NUL_JSON = "\\u0000"
"""A NUL character as the stored JSON text writes it."""


def _enc_sql(v: str) -> str:
    """SQL: :func:`agentlens.store._pg_text.enc` of a text that holds no NUL."""
    return f"(CASE WHEN left({v}, 1) = chr(1) THEN chr(1) || replace({v}, chr(1), chr(1) || chr(1)) ELSE {v} END)"


def _fill_links_with_nul(conn: Any) -> None:
    from agentlens.store._pg_text import enc

    rows = conn.execute(
        "SELECT id, sort_at, doc::text FROM runs WHERE strpos(doc::text, %s) > 0", (_NUL_JSON,)
    ).fetchall()
    for run_id, sort_at, doc in rows:
        try:
            links = json.loads(doc).get("links")
        except (ValueError, AttributeError):
            continue
        if isinstance(links, dict) and links:
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO run_links (kind, item_id, run_id, sort_at) VALUES (%s, %s, %s, %s)"
                    " ON CONFLICT DO NOTHING",
                    [(enc(k), enc(str(v)), run_id, sort_at) for k, v in links.items()],
                )


_RUN_LINKS = PgMigration(
    5,
    "run_links: the runs' content links, for /api/runs?link=",
    (
        """
        CREATE TABLE IF NOT EXISTS run_links (
            kind    text COLLATE "C" NOT NULL,
            item_id text COLLATE "C" NOT NULL,
            run_id  text COLLATE "C" NOT NULL,
            sort_at bigint NOT NULL,
            PRIMARY KEY (kind, item_id, sort_at, run_id)
        )
        """,
        "CREATE INDEX IF NOT EXISTS run_links_by_run ON run_links (run_id)",
        # a CASE, not a WHERE: its branches are tried in order (the planner may reorder quals),
        # so a document holding a NUL never reaches a JSON operator
        "INSERT INTO run_links (kind, item_id, run_id, sort_at)"
        f" SELECT {_enc_sql('l.key')}, {_enc_sql('l.value')}, r.id, r.sort_at FROM runs r,"
        f" json_each_text(CASE WHEN strpos(r.doc::text, '{_NUL_JSON}') > 0 THEN NULL"
        " WHEN json_typeof(r.doc -> 'links') = 'object' THEN r.doc -> 'links' END) AS l"
        " ON CONFLICT DO NOTHING",
    ),
    _fill_links_with_nul,
)

# -- migration 6: the rate rollups by project, with the flagged runs' ids ------------------------
#
# The rate tables of migration 2, made again with two more things in them:
#
# - ``project`` (of ``rate_runs``, and part of the key of ``rate_rollup`` and ``run_rollup``), so
#   a server key's rate (one project's) is read from the rollups, as on SQLite (its migration 6),
#   instead of being counted in Python over the project's runs.
# - ``rate_rollup.run_ids``: the ids of the runs a delta row counts, when their signature holds a
#   ``flagged`` verdict (``rate_runs.flags``; ``NULL`` otherwise). A rate lists its flagged runs
#   (every id is in the JSON of ``agentlens rate``): with the ids in the rollup, that is reading
#   the window's compacted rows (one array per hour, role, release, project and signature) instead
#   of an index scan of every flagged run and an ``array_agg`` of them. A delta row of a removal
#   carries the removed ids: the ids of a key are those of its positive rows less those of its
#   negative ones, which is what ``agentlens_compact_rollups()`` merges them to (sorted) and what
#   a reader does with a key's rows that are not merged yet.
#
# The old tables are dropped and filled again from ``scores`` and ``runs`` (``rate_sigs`` is
# kept: a signature's id is the md5 of its text).


def _refresh_body_v2(where: str) -> str:
    """:func:`_refresh_body` of migration 6 (with ``project``, ``flags`` and the flagged ids)."""
    return f"""
    WITH cur AS (
        SELECT s.run_id, min(s.run_started_at) AS started_at, min(s.run_agent) AS agent,
            min(s.run_release) AS release, min(s.run_project) AS project,
            bool_or(s.verdict = 'flagged') AS flags, {_SIG} AS sig
        FROM scores s WHERE {where} GROUP BY s.run_id),
    sigs AS (
        INSERT INTO rate_sigs (id, sig) SELECT DISTINCT md5(sig)::uuid, sig FROM cur
        ON CONFLICT DO NOTHING),
    ins AS (
        INSERT INTO rate_runs (run_id, started_at, hour, agent, release, project, flags, sig)
        SELECT run_id, started_at, {_hour("started_at")}, agent, release, project, flags,
            md5(sig)::uuid
        FROM cur RETURNING run_id, hour, agent, release, project, flags, sig)
    INSERT INTO rate_rollup (hour, agent, release, project, sig, n, run_ids)
        SELECT hour, agent, release, project, sig, count(*),
            array_agg(run_id) FILTER (WHERE flags)
        FROM ins GROUP BY 1, 2, 3, 4, 5"""


REMOVED_FROM_ROLLUP = """
    INSERT INTO rate_rollup (hour, agent, release, project, sig, n, run_ids)
        SELECT hour, agent, release, project, sig, -count(*), array_agg(run_id) FILTER (WHERE flags)
        FROM old GROUP BY 1, 2, 3, 4, 5"""
"""SQL after a CTE ``old`` of deleted ``rate_runs`` rows: their negative delta rows."""

_REFRESH_FN_V2 = f"""
CREATE OR REPLACE FUNCTION agentlens_rate_refresh(ids text[]) RETURNS void LANGUAGE plpgsql
SET search_path FROM CURRENT AS $fn$
BEGIN
    WITH old AS (DELETE FROM rate_runs WHERE run_id = ANY(ids)
                 RETURNING run_id, hour, agent, release, project, flags, sig)
    {REMOVED_FROM_ROLLUP};
    {_refresh_body_v2("s.run_id = ANY(ids)")};
END
$fn$
"""

_RUNS_TRIGGER_FN_V2 = f"""
CREATE OR REPLACE FUNCTION agentlens_runs_changed() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $fn$
BEGIN
    IF TG_OP = 'INSERT' OR TG_OP = 'UPDATE' THEN
        INSERT INTO run_rollup (hour, agent, release, project, n)
            SELECT {_hour("started_at")}, agent, release, project, count(*) FROM new_rows
            GROUP BY 1, 2, 3, 4;
    END IF;
    IF TG_OP = 'DELETE' OR TG_OP = 'UPDATE' THEN
        INSERT INTO run_rollup (hour, agent, release, project, n)
            SELECT {_hour("started_at")}, agent, release, project, -count(*) FROM old_rows
            GROUP BY 1, 2, 3, 4;
    END IF;
    RETURN NULL;
END
$fn$
"""

_SAME_KEY = (
    "{a}.hour = {b}.hour AND {a}.agent IS NOT DISTINCT FROM {b}.agent"
    " AND {a}.release IS NOT DISTINCT FROM {b}.release AND {a}.project = {b}.project"
)

_COMPACT_FN_V2 = f"""
CREATE OR REPLACE FUNCTION agentlens_compact_rollups() RETURNS bigint LANGUAGE plpgsql
SET search_path FROM CURRENT AS $fn$
DECLARE
    merged bigint := 0;
    k bigint;
BEGIN
    IF NOT pg_try_advisory_xact_lock(8318, hashtext(current_schema())) THEN
        RETURN -1;  -- another compaction is running
    END IF;
    WITH keys AS (SELECT DISTINCT hour, agent, release, project, sig FROM rate_rollup WHERE fresh),
    gone AS (
        DELETE FROM rate_rollup r USING keys k
        WHERE {_SAME_KEY.format(a="r", b="k")} AND r.sig = k.sig
        RETURNING r.hour, r.agent, r.release, r.project, r.sig, r.n, r.run_ids),
    sums AS (
        SELECT hour, agent, release, project, sig, sum(n) AS n FROM gone
        GROUP BY 1, 2, 3, 4, 5 HAVING sum(n) <> 0),
    held AS (  -- the ids of each key: added by its positive rows, not removed by a negative one
        SELECT hour, agent, release, project, sig, array_agg(i ORDER BY i COLLATE "C") AS ids
        FROM (SELECT hour, agent, release, project, sig, i FROM gone, unnest(gone.run_ids) AS i
              GROUP BY 1, 2, 3, 4, 5, 6
              HAVING sum(CASE WHEN n > 0 THEN 1 ELSE -1 END) > 0) AS x
        GROUP BY 1, 2, 3, 4, 5),
    ins AS (
        INSERT INTO rate_rollup (hour, agent, release, project, sig, n, run_ids, fresh)
        SELECT s.hour, s.agent, s.release, s.project, s.sig, s.n, h.ids, false
        FROM sums s LEFT JOIN held h ON {_SAME_KEY.format(a="h", b="s")} AND h.sig = s.sig
        RETURNING 1)
    SELECT (SELECT count(*) FROM gone) INTO k;
    merged := merged + k;
    WITH keys AS (SELECT DISTINCT hour, agent, release, project FROM run_rollup WHERE fresh),
    gone AS (
        DELETE FROM run_rollup r USING keys k WHERE {_SAME_KEY.format(a="r", b="k")}
        RETURNING r.hour, r.agent, r.release, r.project, r.n),
    ins AS (
        INSERT INTO run_rollup (hour, agent, release, project, n, fresh)
        SELECT hour, agent, release, project, sum(n), false FROM gone GROUP BY 1, 2, 3, 4
        HAVING sum(n) <> 0 RETURNING 1)
    SELECT (SELECT count(*) FROM gone) INTO k;
    RETURN merged + k;
END
$fn$
"""

_RATE_ROLLUP_FILL_V2: tuple[str, ...] = (
    "DELETE FROM rate_rollup",
    "DELETE FROM rate_runs",
    "DELETE FROM run_rollup",
    _refresh_body_v2("TRUE"),
    f"INSERT INTO run_rollup (hour, agent, release, project, n) SELECT {_hour('started_at')},"
    " agent, release, project, count(*) FROM runs GROUP BY 1, 2, 3, 4",
    "SELECT agentlens_compact_rollups()",
)
"""Migration 6's statements that filled its rate tables (the current ones: :data:`RATE_ROLLUP_FILL`)."""

RATE_ROLLUP_SCHEMA_V2: tuple[str, ...] = (
    """
    CREATE TABLE rate_runs (
        run_id     text COLLATE "C" PRIMARY KEY,
        started_at bigint,
        hour       bigint NOT NULL,
        agent      text COLLATE "C",
        release    text COLLATE "C",
        project    text COLLATE "C" NOT NULL,
        flags      boolean NOT NULL,
        sig        uuid NOT NULL
    )
    """,
    "CREATE INDEX rate_runs_by_sig ON rate_runs (sig, started_at)"
    " INCLUDE (run_id, agent, release, project)",
    "CREATE INDEX rate_runs_by_time ON rate_runs (started_at, agent, release, project, sig)",
    """
    CREATE TABLE rate_rollup (
        hour    bigint NOT NULL,
        agent   text COLLATE "C",
        release text COLLATE "C",
        project text COLLATE "C" NOT NULL,
        sig     uuid NOT NULL,
        n       bigint NOT NULL,
        run_ids text[] COLLATE "C",
        fresh   boolean NOT NULL DEFAULT true
    )
    """,
    "CREATE INDEX rate_rollup_by_hour ON rate_rollup (hour)",
    "CREATE INDEX rate_rollup_fresh ON rate_rollup (hour) WHERE fresh",
    """
    CREATE TABLE run_rollup (
        hour    bigint NOT NULL,
        agent   text COLLATE "C",
        release text COLLATE "C",
        project text COLLATE "C" NOT NULL,
        n       bigint NOT NULL,
        fresh   boolean NOT NULL DEFAULT true
    )
    """,
    "CREATE INDEX run_rollup_by_hour ON run_rollup (hour)",
    "CREATE INDEX run_rollup_fresh ON run_rollup (hour) WHERE fresh",
)

_ROLLUP_BY_PROJECT = PgMigration(
    6,
    "rate rollups by project, with the flagged runs' ids (rate_rollup.run_ids)",
    (
        "DROP TABLE rate_rollup",
        "DROP TABLE rate_runs",
        "DROP TABLE run_rollup",
        *RATE_ROLLUP_SCHEMA_V2,
        _REFRESH_FN_V2,
        _RUNS_TRIGGER_FN_V2,
        _COMPACT_FN_V2,
        *_RATE_ROLLUP_FILL_V2,
    ),
)

# -- migration 7: the flagged runs' ids per whole day -------------------------------------------
#
# ``rate_day_ids (day, agent, release, project, sig, run_ids)``: for each UTC day, the ids that
# day's merged (not fresh) rows of ``rate_rollup`` hold, per key without the hour, sorted. A rate
# over several whole days reads one array per day and key instead of 24 (7 days: a few hundred
# rows instead of 2,000). Written by compaction only, in its transaction: a day whose rows it
# merged goes to ``rate_day_stale``, and the stale days that are over (before the current UTC
# day) are built again from their merged rows, so the day being written is never rebuilt at
# every compaction. A reader takes a day's arrays only when the day is not stale and has no
# fresh row of the signatures it reads; otherwise it reads that day by the hour.

_DAY_OF_HOUR = "floor(hour / 24.0)::bigint"

_DAY_IDS_BUILD = f"""
    INSERT INTO rate_day_ids (day, agent, release, project, sig, run_ids)
    SELECT {_DAY_OF_HOUR}, agent, release, project, sig, array_agg(i ORDER BY i COLLATE "C")
    FROM rate_rollup r, unnest(r.run_ids) AS i
    WHERE NOT r.fresh AND r.hour <> {NO_HOUR} AND {{where}}
    GROUP BY 1, 2, 3, 4, 5"""

_DAY_IDS_REBUILD = f"""
    -- the days whose rows were merged are stale; those that are over are built again
    IF touched IS NOT NULL THEN
        INSERT INTO rate_day_stale (day) SELECT unnest(touched) ON CONFLICT DO NOTHING;
    END IF;
    WITH done AS (DELETE FROM rate_day_stale
                  WHERE day < floor(extract(epoch FROM now()) / 86400)::bigint RETURNING day)
    SELECT array_agg(day), min(day), max(day) INTO past, lo, hi FROM done;
    IF past IS NOT NULL THEN
        DELETE FROM rate_day_ids WHERE day = ANY(past);
        {_DAY_IDS_BUILD.format(where=f"r.hour >= lo * 24 AND r.hour < hi * 24 + 24 AND {_DAY_OF_HOUR} = ANY(past)")};
    END IF;"""

_COMPACT_FN_V3 = _COMPACT_FN_V2.replace(
    "    k bigint;\n",
    "    k bigint;\n    touched bigint[];\n    past bigint[];\n    lo bigint;\n    hi bigint;\n",
    1,
).replace(
    "        RETURNING 1)\n    SELECT (SELECT count(*) FROM gone) INTO k;\n    merged := merged + k;",
    "        RETURNING 1)\n    SELECT (SELECT count(*) FROM gone),"
    f" (SELECT array_agg(DISTINCT {_DAY_OF_HOUR}) FROM keys WHERE hour <> {NO_HOUR})"
    " INTO k, touched;\n    merged := merged + k;" + _DAY_IDS_REBUILD,
    1,
)
"""Migration 2's compaction (as migration 6 made it) that also keeps ``rate_day_ids``."""
assert "rate_day_stale" in _COMPACT_FN_V3 and "past bigint[]" in _COMPACT_FN_V3

RATE_ROLLUP_FILL: tuple[str, ...] = (
    *_RATE_ROLLUP_FILL_V2,
    "DELETE FROM rate_day_ids",
    "DELETE FROM rate_day_stale",
    _DAY_IDS_BUILD.format(where="TRUE"),
)
"""Statements that recompute the rate tables from ``runs`` and ``scores`` (for a bulk load that
bypassed the triggers, and for the tests that check the triggers)."""

_DAY_IDS = PgMigration(
    7,
    "rate_day_ids: the flagged runs' ids per whole day, kept by compaction; rate_day_stale",
    (
        """
        CREATE TABLE IF NOT EXISTS rate_day_ids (
            day     bigint NOT NULL,
            agent   text COLLATE "C",
            release text COLLATE "C",
            project text COLLATE "C" NOT NULL,
            sig     uuid NOT NULL,
            run_ids text[] COLLATE "C" NOT NULL
        )
        """,
        "CREATE INDEX IF NOT EXISTS rate_day_ids_by_day ON rate_day_ids (day)",
        "CREATE TABLE IF NOT EXISTS rate_day_stale (day bigint PRIMARY KEY)",
        _COMPACT_FN_V3,
        "SELECT agentlens_compact_rollups()",
        "DELETE FROM rate_day_ids",
        "DELETE FROM rate_day_stale",
        _DAY_IDS_BUILD.format(where="TRUE"),
    ),
)

PG_MIGRATIONS: tuple[PgMigration, ...] = (
    _INITIAL,
    _RATE_ROLLUP,
    _REVIEW,
    _SERVER_TABLES,
    _RUN_LINKS,
    _ROLLUP_BY_PROJECT,
    _DAY_IDS,
)
"""Every PostgreSQL migration, oldest first. Versions are 1..N without gaps."""


def latest_pg_version() -> int:
    return PG_MIGRATIONS[-1].version


def migrate_pg(conn: Any, schema: str, where: str) -> int:
    """Bring the schema behind ``conn`` (autocommit off, no transaction open) up to date.

    Raises:
        SchemaVersionError: the store was written by a newer agentlens.
        psycopg.Error: a migration failed; nothing of it was kept.
    """
    newest = latest_pg_version()
    with conn.transaction():
        # An up-to-date store is only read: a read replica (or a read-only role) opens it.
        found = conn.execute(
            "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = %s",
            (schema, MIGRATIONS_TABLE),
        ).fetchone()
        if found is not None:
            (current,) = conn.execute(
                f"SELECT coalesce(max(version), 0) FROM {MIGRATIONS_TABLE}"
            ).fetchone()
            if current == newest:
                return newest
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(8316, hashtext(%s))", (schema,))
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} ("
            "version integer PRIMARY KEY, name text NOT NULL, applied_at text NOT NULL)"
        )
        (current,) = conn.execute(
            f"SELECT coalesce(max(version), 0) FROM {MIGRATIONS_TABLE}"
        ).fetchone()
        if current > newest:
            raise SchemaVersionError(
                f"{where}: the store has schema version {current}, newer than the {newest} this "
                "agentlens knows; upgrade agentlens to read it"
            )
        for migration in PG_MIGRATIONS:
            if migration.version <= current:
                continue
            for statement in migration.statements:
                conn.execute(statement)
            if migration.then is not None:
                migration.then(conn)
            conn.execute(
                f"INSERT INTO {MIGRATIONS_TABLE} (version, name, applied_at) VALUES (%s, %s, %s)",
                (migration.version, migration.name, datetime.now(UTC).isoformat()),
            )
    return newest
