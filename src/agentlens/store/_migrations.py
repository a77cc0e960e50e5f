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

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from agentlens.errors import SchemaVersionError
from agentlens.store._sqlite_rates import (
    BULK_ROLLUP,
    RATE_ROLLUP_FILL,
    ROLLUP_SCHEMA,
    ROLLUP_TRIGGERS,
    RUN_ROLLUP_FILL,
    RUN_ROLLUP_SCHEMA,
    RUN_ROLLUP_TRIGGER_NAMES,
    RUN_ROLLUP_TRIGGERS,
)

__all__ = [
    "MIGRATIONS",
    "MIGRATIONS_TABLE",
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
    then: Callable[[sqlite3.Connection], None] | None = None
    """Python to run after the statements, in the same transaction (what SQL cannot do
    exactly, such as reading JSON text that holds a NUL)."""


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
# -- migration 2: the rate rollup (its SQL is :mod:`agentlens.store._sqlite_rates`'s) ------------

_RATE_ROLLUP = Migration(
    2,
    "rate rollup: rate_sigs, rate_runs, rate_rollup, kept by triggers",
    (*ROLLUP_SCHEMA, *RATE_ROLLUP_FILL, *ROLLUP_TRIGGERS),
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


# -- migration 5: review claims ----------------------------------------------------------------
#
# ``claimed_by`` / ``lease_until`` (µs) of ``run_review``: a review worker claims pending runs for
# a lease (:meth:`SQLiteStore.claim_review`), so several workers (processes) share the queue and
# a run whose worker died is claimed again once its lease has run out. ``INSERT OR REPLACE`` of a
# new version of the run resets both (the new version is unclaimed).

_CLAIMS = Migration(
    5,
    "review claims: run_review.claimed_by, run_review.lease_until",
    (
        "ALTER TABLE run_review ADD COLUMN claimed_by TEXT",
        "ALTER TABLE run_review ADD COLUMN lease_until INTEGER",
    ),
)

# -- migration 6: read paths at a million runs --------------------------------------------------
#
# The rate rollup gains a ``project`` column (``rate_runs.project``, part of ``rate_rollup``'s
# key), so a server key's rate (one project's) is read from the rollup instead of counted in
# Python over the project's runs. The three tables and their triggers are dropped and made
# again from ``scores`` in bulk (migration 2's statements are the rollup's current definition,
# kept in :mod:`agentlens.store._sqlite_rates`: a new store gets the same tables either way).
# Indexes for the dashboard: runs of one release newest first; one project's runs per role or
# release in a window, counted from the index alone (a project's rate by agent or release); and
# the review queue of every role (``run_review_queue`` serves one role) oldest first.

_ROLLUP_BY_PROJECT = Migration(
    6,
    "rate rollup by project; runs_by_release, runs_project_groups, run_review_open",
    (
        *(f"DROP TRIGGER IF EXISTS rate_{t}_{e}" for t in ("scores", "modes")
          for e in ("insert", "delete", "update")),
        "DROP TABLE rate_rollup",
        "DROP TABLE rate_runs",
        "DROP TABLE rate_sigs",
        *ROLLUP_SCHEMA,
        *RATE_ROLLUP_FILL,
        *ROLLUP_TRIGGERS,
        "CREATE INDEX IF NOT EXISTS runs_by_release ON runs (release, sort_at, id)",
        "CREATE INDEX IF NOT EXISTS runs_project_groups ON runs (project, sort_at, agent, release)",
        "CREATE INDEX IF NOT EXISTS run_review_open ON run_review (sort_at, run_id) WHERE open > 0",
    ),
)  # fmt: skip

# -- migration 7: the rollup refreshed in bulk by put_scores -------------------------------------
#
# ``rate_bulk`` (at most one row) and the rollup triggers of migration 2 made again with ``WHEN NOT
# EXISTS (SELECT 1 FROM rate_bulk)``: ``put_scores`` sets the row inside its write transaction,
# writes the batch, recomputes the rollup rows of the batch's runs in bulk and clears the row
# before it commits (:func:`agentlens.store._sqlite_rates.bulk_rollup`). Every other write path,
# another process's or a manual one, still fires the triggers.

_BULK_ROLLUP = Migration(
    7,
    "rate rollup refreshed in bulk by put_scores: rate_bulk, guarded triggers",
    BULK_ROLLUP,
)

# -- migration 8: the runs' content links as rows ------------------------------------------------
#
# ``run_links`` (kind, item_id, run_id, sort_at): one row per entry of a run's ``links``, written
# with the run by ``put_traces`` and deleted with it (a replaced run's rows are written again), so
# ``/api/runs?link=KIND:ID`` reads the item's runs from the primary key, newest first, instead of
# scanning ``json_extract(doc, '$.links...')`` run after run. Filled here from the stored runs:
# in SQL for documents without a NUL character (SQLite's JSON functions cut text at a NUL), in
# Python for the others.

_NUL_JSON = "\\u0000"
"""A NUL character as the stored JSON text writes it."""


def _fill_links_with_nul(conn: sqlite3.Connection) -> None:
    rows = conn.execute(
        "SELECT id, sort_at, doc FROM runs WHERE instr(doc, ?) > 0", (_NUL_JSON,)
    ).fetchall()
    for run_id, sort_at, doc in rows:
        try:
            links = json.loads(doc).get("links")
        except (ValueError, AttributeError):
            continue
        if isinstance(links, dict):
            conn.executemany(
                "INSERT OR IGNORE INTO run_links (kind, item_id, run_id, sort_at)"
                " VALUES (?, ?, ?, ?)",
                [(k, str(v), run_id, sort_at) for k, v in links.items()],
            )


RUN_LINKS_SCHEMA: tuple[str, ...] = (
    """
    CREATE TABLE IF NOT EXISTS run_links (
        kind    TEXT    NOT NULL,
        item_id TEXT    NOT NULL,
        run_id  TEXT    NOT NULL,
        sort_at INTEGER NOT NULL,
        PRIMARY KEY (kind, item_id, sort_at, run_id)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX IF NOT EXISTS run_links_by_run ON run_links (run_id)",
)

_RUN_LINKS = Migration(
    8,
    "run_links: the runs' content links, for /api/runs?link=",
    (
        *RUN_LINKS_SCHEMA,
        "INSERT OR IGNORE INTO run_links (kind, item_id, run_id, sort_at)"
        " SELECT l.key, CAST(l.value AS TEXT), r.id, r.sort_at"
        " FROM runs r, json_each(r.doc, '$.links') l"
        f" WHERE instr(r.doc, '{_NUL_JSON}') = 0 AND json_valid(r.doc)"
        " AND json_type(r.doc, '$.links') = 'object'",
    ),
    _fill_links_with_nul,
)

# -- migration 9: the run-count rollup -----------------------------------------------------------
#
# ``run_rollup`` (day, agent, release, project) -> runs, and ``run_rollup_replaced`` (the group
# of a row an ``INSERT OR REPLACE`` is replacing), kept by triggers on ``runs``: a rate's
# denominator and the runs of each group of a breakdown are read from it for the whole days of
# a window instead of counted from ``runs`` (see :mod:`agentlens.store._sqlite_rates`). Filled
# from the covering index ``runs_project_groups``.

_RUN_ROLLUP = Migration(
    9,
    "run-count rollup: run_rollup, run_rollup_replaced, kept by triggers on runs",
    (
        # a store made again from an older schema by hand may still hold them (as the tests do)
        *(f"DROP TRIGGER IF EXISTS {name}" for name in RUN_ROLLUP_TRIGGER_NAMES),
        *RUN_ROLLUP_SCHEMA,
        *RUN_ROLLUP_FILL,
        *RUN_ROLLUP_TRIGGERS,
    ),
)

MIGRATIONS: tuple[Migration, ...] = (
    _INITIAL, _RATE_ROLLUP, _REVIEW, _SERVER_TABLES, _CLAIMS, _ROLLUP_BY_PROJECT, _BULK_ROLLUP,
    _RUN_LINKS, _RUN_ROLLUP,
)  # fmt: skip
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
            if migration.then is not None:
                migration.then(conn)
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
