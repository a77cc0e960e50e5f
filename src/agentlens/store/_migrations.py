"""Numbered schema migrations of the SQLite store, tracked in the ``_agentlens_migrations`` table.

Each :class:`Migration` has a version (1, 2, 3... with no gaps), a name and the SQL statements
that bring a store from the previous version to this one. :func:`migrate` runs on every open:
it applies, in one transaction, every migration the store has not seen yet and records each in
``_agentlens_migrations(version, name, applied_at)``. A store whose highest recorded version is
newer than the newest migration known here was written by a newer agentlens and is refused with
:class:`~agentlens.errors.SchemaVersionError`, rather than being read wrongly.

Never edit a released migration: add a new one. See :mod:`agentlens.store._sqlite` for what the
tables hold.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime

from agentlens.errors import SchemaVersionError

__all__ = [
    "MIGRATIONS",
    "MIGRATIONS_TABLE",
    "RATE_ROLLUP_FILL",
    "Migration",
    "current_version",
    "latest_version",
    "migrate",
]

MIGRATIONS_TABLE = "_agentlens_migrations"
"""The table that records which migrations a store has had."""


@dataclass(frozen=True, slots=True)
class Migration:
    """One step of the schema's history."""

    version: int
    """The schema version this migration brings the store to."""
    name: str
    """A short description, recorded with the version."""
    statements: tuple[str, ...]
    """The SQL statements to run, in order, inside the migration transaction."""


_INITIAL = Migration(
    1,
    "runs, scores, score_modes",
    (
        # Runs: one row per run: the run's JSON without its steps in ``doc``, the JSON array of
        # its steps in ``steps`` (last, so that reading the other columns skips it).
        """
        CREATE TABLE runs (
            id         TEXT    PRIMARY KEY,
            project    TEXT    NOT NULL,
            agent      TEXT,
            name       TEXT,
            status     TEXT    NOT NULL,
            started_at INTEGER,
            ended_at   INTEGER,
            sort_at    INTEGER NOT NULL,
            has_output INTEGER NOT NULL,
            step_count INTEGER NOT NULL,
            release    TEXT,
            doc        TEXT    NOT NULL,
            steps      TEXT    NOT NULL
        )
        """,
        "CREATE INDEX runs_by_time ON runs (sort_at, id)",
        "CREATE INDEX runs_by_agent_time ON runs (agent, sort_at, id)",
        "CREATE INDEX runs_by_project_time ON runs (project, sort_at, id)",
        # Scores: one row per (run, scorer, scorer version), with run columns copied in for
        # rate queries that need no join.
        """
        CREATE TABLE scores (
            run_id         TEXT    NOT NULL,
            scorer         TEXT    NOT NULL,
            version        TEXT    NOT NULL,
            verdict        TEXT    NOT NULL,
            passed         INTEGER NOT NULL,
            value          REAL,
            detail         TEXT    NOT NULL,
            error          TEXT,
            finding_count  INTEGER NOT NULL,
            scored_at      INTEGER NOT NULL,
            run_project    TEXT    NOT NULL,
            run_agent      TEXT,
            run_release    TEXT,
            run_started_at INTEGER,
            doc            TEXT    NOT NULL,
            PRIMARY KEY (run_id, scorer, version)
        )
        """,
        "CREATE INDEX scores_by_scorer_time ON scores (scorer, version, run_started_at)",
        "CREATE INDEX scores_by_time ON scores (run_started_at)",
        # The failure modes a score found: one row per (score, mode).
        """
        CREATE TABLE score_modes (
            run_id   TEXT    NOT NULL,
            scorer   TEXT    NOT NULL,
            version  TEXT    NOT NULL,
            mode     TEXT    NOT NULL,
            findings INTEGER NOT NULL,
            PRIMARY KEY (run_id, scorer, version, mode)
        ) WITHOUT ROWID
        """,
        "CREATE INDEX score_modes_by_scorer_mode ON score_modes (scorer, version, mode)",
    ),
)

# -- migration 2: the rate rollup ---------------------------------------------------------------
#
# What ``agentlens rate`` counts is a function of each run's scores alone: for every run, the
# multiset of (scorer, version, verdict, failure modes) of its scores. Migration 2 keeps that
# function in three tables, maintained by triggers on ``scores`` and ``score_modes`` so that every
# write path (``put_scores``, ``put_traces`` replacing a run, ``delete_runs``, an ``INSERT OR
# REPLACE``, a manual ``UPDATE``) keeps them exact:
#
# ``rate_sigs``    (id, sig): every distinct *signature* seen: the run's scores, encoded as
#                  ``hex(scorer).hex(version).hex(verdict).xhex(mode),xhex(mode)`` joined by ``;``
#                  in (scorer, version) order (hex, so any character, NUL included, round-trips).
# ``rate_runs``    one row per run with at least one score: its start time, UTC day number,
#                  agent, release (copied from its scores) and signature id.
# ``rate_rollup``  (day, agent, release, sig) -> n: how many runs of that day, role and release
#                  have that signature. A rate over whole days reads these rows, not the runs.
#
# In both derived tables ``agent``/``release`` are never NULL: a missing value is stored as the
# empty blob X'' (never equal to any text), so they can be keys; an undated run has day
# -2**63. The trigger bodies never raise a constraint conflict (an outer ``INSERT OR REPLACE``
# would impose its own conflict policy on them): they test existence instead.

_DAY_US = 86_400_000_000


def _day_of(t: str) -> str:
    """SQL: the UTC day number (floor of µs / day) of a start time, -2**63 when NULL."""
    return (
        f"(CASE WHEN {t} IS NULL THEN -9223372036854775808 WHEN {t} >= 0 THEN {t} / {_DAY_US}"
        f" ELSE ({t} + 1) / {_DAY_US} - 1 END)"
    )


def _sig_of(run: str) -> str:
    """SQL: the signature of run ``run`` from its current scores (NULL when it has none).

    ``run`` must not refer to a table aliased ``s`` or ``m`` (the subquery's own aliases)."""
    return (
        "(SELECT group_concat(hex(s.scorer) || '.' || hex(s.version) || '.' || hex(s.verdict)"
        " || '.' || ifnull((SELECT group_concat('x' || hex(m.mode), ',') FROM score_modes m"
        " WHERE m.run_id = s.run_id AND m.scorer = s.scorer AND m.version = s.version), ''), ';')"
        f" FROM scores s WHERE s.run_id = {run})"
    )


def _refresh(run: str) -> str:
    """Trigger statements that recompute run ``run``'s row of ``rate_runs`` and move its count
    in ``rate_rollup`` from its old (day, agent, release, sig) to its new one."""
    return f"""
        UPDATE rate_rollup SET n = n - 1 WHERE (day, agent, release, sig) =
            (SELECT day, agent, release, sig FROM rate_runs WHERE run_id = {run});
        DELETE FROM rate_runs WHERE run_id = {run};
        INSERT INTO rate_sigs (sig) SELECT g FROM (SELECT {_sig_of(run)} AS g)
            WHERE g IS NOT NULL AND NOT EXISTS (SELECT 1 FROM rate_sigs WHERE sig = g);
        INSERT INTO rate_runs (run_id, started_at, day, agent, release, sig)
            SELECT r.run_id, r.run_started_at, {_day_of("r.run_started_at")},
                ifnull(r.run_agent, X''), ifnull(r.run_release, X''),
                (SELECT id FROM rate_sigs WHERE sig = {_sig_of(run)})
            FROM scores r WHERE r.run_id = {run} LIMIT 1;
        UPDATE rate_rollup SET n = n + 1 WHERE (day, agent, release, sig) =
            (SELECT day, agent, release, sig FROM rate_runs WHERE run_id = {run});
        INSERT INTO rate_rollup (day, agent, release, sig, n)
            SELECT x.day, x.agent, x.release, x.sig, 1 FROM rate_runs x WHERE x.run_id = {run}
            AND NOT EXISTS (SELECT 1 FROM rate_rollup y WHERE y.day = x.day
                AND y.agent = x.agent AND y.release = x.release AND y.sig = x.sig);"""


def _trigger(name: str, event: str, table: str, runs: tuple[str, ...]) -> str:
    body = "".join(_refresh(run) for run in runs)
    return f"CREATE TRIGGER {name} AFTER {event} ON {table} FOR EACH ROW BEGIN{body}\nEND"


RATE_ROLLUP_FILL: tuple[str, ...] = (
    f"""
    CREATE TEMP TABLE _rate_fill AS
        SELECT r.run_id AS run_id, r.run_started_at AS started_at,
            {_day_of("r.run_started_at")} AS day, ifnull(r.run_agent, X'') AS agent,
            ifnull(r.run_release, X'') AS release, {_sig_of("r.run_id")} AS sig
        FROM scores r WHERE r.rowid IN (SELECT min(rowid) FROM scores GROUP BY run_id)
    """,
    "INSERT INTO rate_sigs (sig) SELECT DISTINCT sig FROM _rate_fill"
    " WHERE sig NOT IN (SELECT sig FROM rate_sigs)",
    "INSERT INTO rate_runs (run_id, started_at, day, agent, release, sig)"
    " SELECT f.run_id, f.started_at, f.day, f.agent, f.release, g.id"
    " FROM _rate_fill f JOIN rate_sigs g ON g.sig = f.sig",
    "INSERT INTO rate_rollup (day, agent, release, sig, n)"
    " SELECT day, agent, release, sig, count(*) FROM rate_runs GROUP BY 1, 2, 3, 4",
    "DROP TABLE temp._rate_fill",
)
"""Statements that fill the (empty) rate tables from ``scores`` and ``score_modes`` in bulk: run
by migration 2 on an existing store, and by :func:`agentlens.store._rates.rebuild_rate_rollup`
after a bulk load that bypassed the triggers."""

_RATE_ROLLUP = Migration(
    2,
    "rate rollup: rate_sigs, rate_runs, rate_rollup, kept by triggers",
    (
        "CREATE TABLE rate_sigs (id INTEGER PRIMARY KEY, sig TEXT NOT NULL UNIQUE)",
        # agent and release have no declared type: X'' (no value) stays a blob.
        """
        CREATE TABLE rate_runs (
            run_id     TEXT    PRIMARY KEY,
            started_at INTEGER,
            day        INTEGER NOT NULL,
            agent      NOT NULL,
            release    NOT NULL,
            sig        INTEGER NOT NULL
        ) WITHOUT ROWID
        """,
        "CREATE INDEX rate_runs_by_sig ON rate_runs (sig, started_at, agent, release)",
        "CREATE INDEX rate_runs_by_time ON rate_runs (started_at, agent, release, sig)",
        """
        CREATE TABLE rate_rollup (
            day     INTEGER NOT NULL,
            agent   NOT NULL,
            release NOT NULL,
            sig     INTEGER NOT NULL,
            n       INTEGER NOT NULL,
            PRIMARY KEY (day, agent, release, sig)
        ) WITHOUT ROWID
        """,
        *RATE_ROLLUP_FILL,
        _trigger("rate_scores_insert", "INSERT", "scores", ("NEW.run_id",)),
        _trigger("rate_scores_delete", "DELETE", "scores", ("OLD.run_id",)),
        _trigger("rate_scores_update", "UPDATE", "scores", ("OLD.run_id", "NEW.run_id")),
        _trigger("rate_modes_insert", "INSERT", "score_modes", ("NEW.run_id",)),
        _trigger("rate_modes_delete", "DELETE", "score_modes", ("OLD.run_id",)),
        _trigger("rate_modes_update", "UPDATE", "score_modes", ("OLD.run_id", "NEW.run_id")),
    ),
)

# -- migration 3: review state, flags, content flags, verdicts, webhook deliveries -------------
#
# ``run_review`` is one row per run (written by put_traces with the run, deleted with it): when
# this version of the run was stored, when it was reviewed (NULL: pending review, so the store
# is the review queue), and the flags derived from its current scores. It is a table of its own,
# not columns of ``runs``, so that marking a run reviewed or re-deriving its flags never rewrites
# the run's (large) row. Existing runs become pending, so the review pipeline derives their
# flags.

_NOW_US = "CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)"

_REVIEW = Migration(
    3,
    "review: run_review, run_flag_modes, content_flags, review_verdicts, webhook_deliveries",
    (
        """
        CREATE TABLE run_review (
            run_id      TEXT    PRIMARY KEY,
            sort_at     INTEGER NOT NULL,
            agent       TEXT,
            stored_at   INTEGER NOT NULL,
            reviewed_at INTEGER,
            state       TEXT,
            flagged     INTEGER NOT NULL DEFAULT 0,
            reason      TEXT,
            modes       TEXT    NOT NULL DEFAULT '[]',
            findings    TEXT    NOT NULL DEFAULT '[]',
            open        INTEGER NOT NULL DEFAULT 0
        )
        """,
        "CREATE INDEX run_review_pending ON run_review (stored_at, run_id)"
        " WHERE reviewed_at IS NULL",
        "CREATE INDEX run_review_flagged ON run_review (sort_at, run_id) WHERE flagged = 1",
        "CREATE INDEX run_review_flagged_agent ON run_review (agent, sort_at, run_id)"
        " WHERE flagged = 1",
        "CREATE INDEX run_review_queue ON run_review (agent, sort_at, run_id) WHERE open > 0",
        f"INSERT INTO run_review (run_id, sort_at, agent, stored_at)"
        f" SELECT id, sort_at, agent, {_NOW_US} FROM runs",
        """
        CREATE TABLE run_flag_modes (
            run_id TEXT NOT NULL,
            mode   TEXT NOT NULL,
            PRIMARY KEY (run_id, mode)
        ) WITHOUT ROWID
        """,
        """
        CREATE TABLE content_flags (
            kind       TEXT    NOT NULL,
            item_id    TEXT    NOT NULL,
            run_id     TEXT    NOT NULL,
            reason     TEXT,
            flagged_at INTEGER NOT NULL,
            dismissed  INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (kind, item_id, run_id)
        ) WITHOUT ROWID
        """,
        "CREATE INDEX content_flags_by_run ON content_flags (run_id)",
        "CREATE INDEX content_flags_active ON content_flags (flagged_at) WHERE dismissed = 0",
        """
        CREATE TABLE review_verdicts (
            run_id       TEXT    NOT NULL,
            finding_key  TEXT    NOT NULL,
            scorer       TEXT    NOT NULL,
            failure_mode TEXT,
            text         TEXT    NOT NULL,
            verdict      TEXT    NOT NULL,
            note         TEXT,
            author       TEXT,
            scope        TEXT    NOT NULL,
            created_at   INTEGER NOT NULL,
            live         INTEGER NOT NULL,
            PRIMARY KEY (run_id, finding_key)
        )
        """,
        "CREATE INDEX review_verdicts_by_time ON review_verdicts (created_at)",
        """
        CREATE TABLE webhook_deliveries (
            id              TEXT    PRIMARY KEY,
            run_id          TEXT    NOT NULL,
            url             TEXT    NOT NULL,
            body            TEXT    NOT NULL,
            status          TEXT    NOT NULL,
            attempts        INTEGER NOT NULL DEFAULT 0,
            next_attempt_at INTEGER NOT NULL,
            last_error      TEXT,
            created_at      INTEGER NOT NULL,
            delivered_at    INTEGER
        )
        """,
        "CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)"
        " WHERE status = 'pending'",
        "CREATE INDEX webhook_deliveries_by_time ON webhook_deliveries (created_at)",
    ),
)


_SERVER_TABLES = Migration(
    4,
    "server: api_keys, otlp_spans, otlp_traces",
    (
        """
        CREATE TABLE api_keys (
            id         TEXT    PRIMARY KEY,
            project    TEXT    NOT NULL,
            name       TEXT,
            salt       BLOB    NOT NULL,
            hash       BLOB    NOT NULL,
            created_at INTEGER NOT NULL,
            revoked_at INTEGER
        )
        """,
        """
        CREATE TABLE otlp_spans (
            seq         INTEGER PRIMARY KEY AUTOINCREMENT,
            project     TEXT    NOT NULL,
            trace_id    TEXT    NOT NULL,
            span_id     TEXT    NOT NULL,
            received_at INTEGER NOT NULL,
            doc         TEXT    NOT NULL,
            UNIQUE (project, trace_id, span_id)
        )
        """,
        """
        CREATE TABLE otlp_traces (
            project    TEXT    NOT NULL,
            trace_id   TEXT    NOT NULL,
            first_seen INTEGER NOT NULL,
            last_seen  INTEGER NOT NULL,
            root_ended INTEGER NOT NULL,
            max_seq    INTEGER NOT NULL,
            built_seq  INTEGER NOT NULL,
            built_at   INTEGER,
            purged     INTEGER NOT NULL,
            PRIMARY KEY (project, trace_id)
        ) WITHOUT ROWID
        """,
        "CREATE INDEX otlp_traces_ready ON otlp_traces (last_seen) WHERE max_seq > built_seq",
    ),
)
"""The server's tables: see :mod:`agentlens.store._server`."""

MIGRATIONS: tuple[Migration, ...] = (_INITIAL, _RATE_ROLLUP, _REVIEW, _SERVER_TABLES)
"""Every migration, oldest first. Versions are 1..N without gaps."""


def latest_version(migrations: tuple[Migration, ...] | None = None) -> int:
    """The schema version a fully migrated store has."""
    migrations = MIGRATIONS if migrations is None else migrations
    return migrations[-1].version if migrations else 0


def current_version(conn: sqlite3.Connection) -> int:
    """The highest migration recorded in the store (0 for a new or foreign database)."""
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (MIGRATIONS_TABLE,)
    ).fetchone()
    if found is None:
        return 0
    (version,) = conn.execute(f"SELECT ifnull(max(version), 0) FROM {MIGRATIONS_TABLE}").fetchone()
    return int(version)


def _check_not_newer(current: int, newest: int, where: str) -> None:
    if current > newest:
        raise SchemaVersionError(
            f"{where}: the store has schema version {current}, newer than the {newest} this "
            "agentlens knows; upgrade agentlens to read it"
        )


def migrate(
    conn: sqlite3.Connection, where: str, migrations: tuple[Migration, ...] | None = None
) -> int:
    """Bring the store behind ``conn`` up to date, in one transaction; return its version.

    An up-to-date store is only read (no write lock is taken), so opening a store never waits
    for another process's long write. ``conn`` must be in autocommit mode
    (``isolation_level=None``) and not in a transaction. ``migrations`` defaults to
    :data:`MIGRATIONS`.

    Raises:
        SchemaVersionError: the store was written by a newer agentlens (``where`` names it).
        sqlite3.Error: a migration failed; nothing of it was kept.
    """
    migrations = MIGRATIONS if migrations is None else migrations
    newest = latest_version(migrations)
    current = current_version(conn)
    _check_not_newer(current, newest, where)
    if current == newest:
        return newest
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} ("
            "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        current = current_version(conn)  # another process may have migrated meanwhile
        _check_not_newer(current, newest, where)
        for migration in migrations:
            if migration.version <= current:
                continue
            for statement in migration.statements:
                conn.execute(statement)
            conn.execute(
                f"INSERT INTO {MIGRATIONS_TABLE} (version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, datetime.now(UTC).isoformat()),
            )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return newest
