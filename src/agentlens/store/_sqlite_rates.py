"""The SQLite store's rates: the rollup's tables, triggers, signature encoding and SQL.

This module owns everything about how SQLite answers :class:`~agentlens.store.RateSource`
queries (:class:`~agentlens.store._sqlite.SQLiteStore` delegates to it): the statements of
migration 2 (the tables and triggers below; :mod:`agentlens.store._migrations` lists them),
the encoding of a signature and its decoding, the SQL of a query, and the constants.

What ``agentlens rate`` counts is a function of each run's scores alone: for every run, the
multiset of (scorer, version, verdict, failure modes) of its scores. Migration 2 keeps that
function in three tables, maintained by triggers on ``scores`` and ``score_modes`` so that every
write path (``put_scores``, ``put_traces`` replacing a run, ``delete_runs``, an ``INSERT OR
REPLACE``, a manual ``UPDATE``) keeps them exact:

- ``rate_sigs``: (id, sig): every distinct *signature* seen: the run's scores, encoded as
                 ``hex(scorer).hex(version).hex(verdict).xhex(mode),xhex(mode)`` joined by ``;``
                 in (scorer, version) order (hex, so any character, NUL included, round-trips).
- ``rate_runs``: one row per run with at least one score: its start time, UTC day number,
                 agent, release, project (copied from its scores) and signature id.
- ``rate_rollup``: (day, agent, release, sig, project) -> n: how many runs of that day, role,
                 release and project have that signature. A rate over whole days reads these
                 rows, not the runs; a project's rate (a server key's) reads its own rows.
                 (The project column came with migration 6, which rebuilt the three tables.)

In both derived tables ``agent``/``release`` are never NULL: a missing value is stored as the
empty blob X'' (never equal to any text), so they can be keys; an undated run has day
-2**63. The trigger bodies never raise a constraint conflict (an outer ``INSERT OR REPLACE``
would impose its own conflict policy on them): they test existence instead.


Migration 9 adds the denominator: ``run_rollup`` (day, agent, release, project) -> n, the runs
(scored or not) of each UTC day, role, release and project, kept by triggers on ``runs`` (see
the section below).

How a query is answered (:func:`rate_counts`): read the rollup rows of the whole days of the
window and group the runs of the partial days at its edges by signature, classify each distinct
(signature, agent) once (:class:`~agentlens.store._rates._Classifier`), and multiply. The
flagged run ids come from the index ``rate_runs (sig, started_at, ...)``, for the flagging
signatures only. The runs of each group (every run of the window, scored or not) come from
``run_rollup`` for the whole days and from ``runs``' indexes for the partial days. So a 90-day
breakdown reads thousands of rollup rows, not a million score rows or a million index entries;
the tests hold the results to a scan over ``scores`` and a count over ``runs``
(``tests/_rate_scan.py``) and to the plain-Python reference.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from agentlens.store._rates import (
    _DAY_US,
    _NO_DAY,
    RateCounts,
    RateQuery,
    _Acc,
    _day_of,
    _group_key,
    _Scored,
    _Tally,
    check_breakdown,
)

__all__ = [
    "BULK_ROLLUP",
    "RATE_ROLLUP_FILL",
    "ROLLUP_SCHEMA",
    "ROLLUP_TRIGGERS",
    "RUN_ROLLUP_FILL",
    "RUN_ROLLUP_SCHEMA",
    "RUN_ROLLUP_TRIGGERS",
    "RUN_ROLLUP_TRIGGER_NAMES",
    "bulk_rollup",
    "project_scorers",
    "rate_counts",
    "rebuild_rate_rollup",
    "rebuild_run_rollup",
    "stored_scorers",
    "stored_versions",
]

_NO_TIME = -(2**63)
"""``runs.sort_at`` of a run without a start time (see :mod:`agentlens.store._sqlite`)."""
_DAY_SQL = (
    f"(CASE WHEN started_at >= 0 THEN started_at / {_DAY_US}"
    f" ELSE (started_at + 1) / {_DAY_US} - 1 END)"
)
"""The UTC day number of ``rate_runs.started_at`` (not NULL), as the triggers compute it."""


# -- the rollup: tables, triggers, bulk fill (migration 2) -------------------------------------


def _day_sql(t: str) -> str:
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
        UPDATE rate_rollup SET n = n - 1 WHERE (day, agent, release, sig, project) =
            (SELECT day, agent, release, sig, project FROM rate_runs WHERE run_id = {run});
        DELETE FROM rate_runs WHERE run_id = {run};
        INSERT INTO rate_sigs (sig) SELECT g FROM (SELECT {_sig_of(run)} AS g)
            WHERE g IS NOT NULL AND NOT EXISTS (SELECT 1 FROM rate_sigs WHERE sig = g);
        INSERT INTO rate_runs (run_id, started_at, day, agent, release, sig, project)
            SELECT r.run_id, r.run_started_at, {_day_sql("r.run_started_at")},
                ifnull(r.run_agent, X''), ifnull(r.run_release, X''),
                (SELECT id FROM rate_sigs WHERE sig = {_sig_of(run)}), ifnull(r.run_project, X'')
            FROM scores r WHERE r.run_id = {run} LIMIT 1;
        UPDATE rate_rollup SET n = n + 1 WHERE (day, agent, release, sig, project) =
            (SELECT day, agent, release, sig, project FROM rate_runs WHERE run_id = {run});
        INSERT INTO rate_rollup (day, agent, release, sig, project, n)
            SELECT x.day, x.agent, x.release, x.sig, x.project, 1 FROM rate_runs x
            WHERE x.run_id = {run} AND NOT EXISTS (SELECT 1 FROM rate_rollup y
                WHERE y.day = x.day AND y.agent = x.agent AND y.release = x.release
                AND y.sig = x.sig AND y.project = x.project);"""


def _trigger(name: str, event: str, table: str, runs: tuple[str, ...], when: str = "") -> str:
    body = "".join(_refresh(run) for run in runs)
    return f"CREATE TRIGGER {name} AFTER {event} ON {table} FOR EACH ROW{when} BEGIN{body}\nEND"


ROLLUP_SCHEMA: tuple[str, ...] = (
    "CREATE TABLE rate_sigs (id INTEGER PRIMARY KEY, sig TEXT NOT NULL UNIQUE)",
    # agent and release have no declared type: X'' (no value) stays a blob.
    """
        CREATE TABLE rate_runs (
            run_id     TEXT    PRIMARY KEY,
            started_at INTEGER,
            day        INTEGER NOT NULL,
            agent      NOT NULL,
            release    NOT NULL,
            sig        INTEGER NOT NULL,
            project    NOT NULL
        ) WITHOUT ROWID
        """,
    "CREATE INDEX rate_runs_by_sig ON rate_runs (sig, started_at, agent, release, project)",
    "CREATE INDEX rate_runs_by_time ON rate_runs (started_at, agent, release, sig, project)",
    """
        CREATE TABLE rate_rollup (
            day     INTEGER NOT NULL,
            agent   NOT NULL,
            release NOT NULL,
            sig     INTEGER NOT NULL,
            project NOT NULL,
            n       INTEGER NOT NULL,
            PRIMARY KEY (day, agent, release, sig, project)
        ) WITHOUT ROWID
        """,
)
"""The rollup's tables and indexes."""

RATE_ROLLUP_FILL: tuple[str, ...] = (
    f"""
    CREATE TEMP TABLE _rate_fill AS
        SELECT r.run_id AS run_id, r.run_started_at AS started_at,
            {_day_sql("r.run_started_at")} AS day, ifnull(r.run_agent, X'') AS agent,
            ifnull(r.run_release, X'') AS release, {_sig_of("r.run_id")} AS sig,
            ifnull(r.run_project, X'') AS project
        FROM scores r WHERE r.rowid IN (SELECT min(rowid) FROM scores GROUP BY run_id)
    """,
    "INSERT INTO rate_sigs (sig) SELECT DISTINCT sig FROM _rate_fill"
    " WHERE sig NOT IN (SELECT sig FROM rate_sigs)",
    "INSERT INTO rate_runs (run_id, started_at, day, agent, release, sig, project)"
    " SELECT f.run_id, f.started_at, f.day, f.agent, f.release, g.id, f.project"
    " FROM _rate_fill f JOIN rate_sigs g ON g.sig = f.sig",
    "INSERT INTO rate_rollup (day, agent, release, sig, project, n)"
    " SELECT day, agent, release, sig, project, count(*) FROM rate_runs GROUP BY 1, 2, 3, 4, 5",
    "DROP TABLE temp._rate_fill",
)
"""Statements that fill the (empty) rate tables from ``scores`` and ``score_modes`` in bulk: run
by migration 2 on an existing store, and by :func:`rebuild_rate_rollup`
after a bulk load that bypassed the triggers."""

_TRIGGERS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("rate_scores_insert", "INSERT", "scores", ("NEW.run_id",)),
    ("rate_scores_delete", "DELETE", "scores", ("OLD.run_id",)),
    ("rate_scores_update", "UPDATE", "scores", ("OLD.run_id", "NEW.run_id")),
    ("rate_modes_insert", "INSERT", "score_modes", ("NEW.run_id",)),
    ("rate_modes_delete", "DELETE", "score_modes", ("OLD.run_id",)),
    ("rate_modes_update", "UPDATE", "score_modes", ("OLD.run_id", "NEW.run_id")),
)

ROLLUP_TRIGGERS: tuple[str, ...] = tuple(_trigger(*spec) for spec in _TRIGGERS)
"""The triggers on ``scores`` and ``score_modes`` that keep the rollup exact on every write (as
migration 2 made them; :data:`BULK_ROLLUP` guards them)."""

BULK_ROLLUP: tuple[str, ...] = (
    "CREATE TABLE IF NOT EXISTS rate_bulk (id INTEGER PRIMARY KEY CHECK (id = 1))",
    *(f"DROP TRIGGER IF EXISTS {spec[0]}" for spec in _TRIGGERS),
    *(_trigger(*spec, when=" WHEN NOT EXISTS (SELECT 1 FROM rate_bulk)") for spec in _TRIGGERS),
)
"""Migration 7: the same triggers, skipped while ``rate_bulk`` holds its row. Only
:func:`bulk_rollup` writes that row, inside a write transaction that also refreshes the rollup
of every run it touched, in bulk, before it commits: no other connection ever sees the row,
and every other write path still fires the triggers."""

_BATCH_RUNS = "(SELECT run_id FROM temp._rate_batch)"

_BULK_REFRESH: tuple[str, ...] = (
    # the batch's runs leave the rollup rows they were counted in
    f"""
    UPDATE rate_rollup SET n = n - (SELECT count(*) FROM rate_runs x
        WHERE x.run_id IN {_BATCH_RUNS} AND x.day = rate_rollup.day
        AND x.agent = rate_rollup.agent AND x.release = rate_rollup.release
        AND x.sig = rate_rollup.sig AND x.project = rate_rollup.project)
    WHERE (day, agent, release, sig, project) IN
        (SELECT day, agent, release, sig, project FROM rate_runs WHERE run_id IN {_BATCH_RUNS})
    """,
    f"DELETE FROM rate_runs WHERE run_id IN {_BATCH_RUNS}",
    # their signatures from their current scores, as the triggers compute them
    f"""
    INSERT INTO temp._rate_new (run_id, started_at, day, agent, release, sig, project)
        SELECT r.run_id AS run_id, r.run_started_at AS started_at,
            {_day_sql("r.run_started_at")} AS day, ifnull(r.run_agent, X'') AS agent,
            ifnull(r.run_release, X'') AS release, {_sig_of("r.run_id")} AS sig,
            ifnull(r.run_project, X'') AS project
        FROM scores r WHERE r.rowid IN
            (SELECT min(rowid) FROM scores WHERE run_id IN {_BATCH_RUNS} GROUP BY run_id)
    """,
    "INSERT INTO rate_sigs (sig) SELECT DISTINCT sig FROM temp._rate_new"
    " WHERE sig IS NOT NULL AND sig NOT IN (SELECT sig FROM rate_sigs)",
    "INSERT INTO rate_runs (run_id, started_at, day, agent, release, sig, project)"
    " SELECT f.run_id, f.started_at, f.day, f.agent, f.release, g.id, f.project"
    " FROM temp._rate_new f JOIN rate_sigs g ON g.sig = f.sig",
    f"""
    INSERT INTO rate_rollup (day, agent, release, sig, project, n)
        SELECT day, agent, release, sig, project, count(*) FROM rate_runs
        WHERE run_id IN {_BATCH_RUNS} GROUP BY 1, 2, 3, 4, 5
    ON CONFLICT (day, agent, release, sig, project) DO UPDATE SET n = n + excluded.n
    """,
    "DELETE FROM temp._rate_new",
    "DELETE FROM temp._rate_batch",
)

_BULK_TABLES: tuple[str, ...] = (
    "CREATE TEMP TABLE IF NOT EXISTS _rate_batch (run_id TEXT PRIMARY KEY) WITHOUT ROWID",
    # no declared types: each value is stored as the SELECT gives it (X'' stays a blob)
    "CREATE TEMP TABLE IF NOT EXISTS _rate_new (run_id, started_at, day, agent, release, sig,"
    " project)",
)
"""The temporary tables of :data:`_BULK_REFRESH`, made once per connection and emptied after
each batch. Not made and dropped per batch: a change to the schema, the temporary one
included, expires every statement the connection has prepared, so each batch compiled its
statements again (the multi-row ``INSERT`` of the scores with the rollup triggers' programs:
about 1 ms per statement of 250 rows)."""


@contextmanager
def bulk_rollup(conn: sqlite3.Connection) -> Iterator[set[str]]:
    """Inside the caller's write transaction: turn the rollup triggers off, yield a set to add
    the id of every run whose scores are written to, then recompute those runs' rollup rows in
    bulk (a few statements for the whole batch instead of a full recomputation of a run's
    signature per score and per failure-mode row) and turn the triggers back on.

    On an exception nothing is recomputed: the caller's transaction is rolled back, the guard
    row with it.
    """
    conn.execute("INSERT INTO rate_bulk (id) VALUES (1)")
    touched: set[str] = set()
    yield touched
    if touched:
        for statement in _BULK_TABLES:
            conn.execute(statement)
        conn.executemany(
            "INSERT INTO temp._rate_batch (run_id) VALUES (?)", [(r,) for r in touched]
        )
        for statement in _BULK_REFRESH:
            conn.execute(statement)
    conn.execute("DELETE FROM rate_bulk")


def rebuild_rate_rollup(conn: sqlite3.Connection) -> None:
    """Recompute ``rate_sigs``, ``rate_runs`` and ``rate_rollup`` from ``scores`` in bulk, on a
    writable connection: inside the caller's transaction if one is open (e.g. in
    ``SQLiteStore._write``), else in a transaction of its own (autocommit connections).

    The triggers keep these tables exact on every write, so this is only needed after rows were
    written with the triggers dropped (a bulk load), or to check the triggers (the tests compare
    the two).
    """
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN IMMEDIATE")
    try:
        for table in ("rate_rollup", "rate_runs", "rate_sigs"):
            conn.execute(f"DELETE FROM {table}")
        for statement in RATE_ROLLUP_FILL:
            conn.execute(statement)
        if own:
            conn.execute("COMMIT")
    except BaseException:
        if own and conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


# -- the run-count rollup (migration 9) ---------------------------------------------------------
#
# ``run_rollup``: (day, agent, release, project) -> n, the number of runs (scored or not) of that
# UTC day, role, release and project: the denominator of a rate and the runs of each group of a
# breakdown, read for the whole days of a window instead of counting ``runs``. ``day`` is the UTC
# day number of ``runs.sort_at`` (-2**63 for an undated run), ``agent``/``release`` are X'' for
# NULL, as in ``rate_rollup``. Kept by triggers on ``runs``: an insert counts the new row, a
# delete uncounts the old one, an update of a grouped column moves it. ``INSERT OR REPLACE``
# deletes the row it replaces without firing the delete trigger (unless recursive triggers are
# on), so a BEFORE INSERT trigger notes the group of the row the insert may replace in
# ``run_rollup_replaced`` and the AFTER INSERT trigger uncounts it: when the insert is ignored or
# fails, nothing was counted twice (the note is dropped by the next insert or delete of that
# id, and it never moves a count without the AFTER INSERT that follows a replacement).


def _run_group(row: str, names: tuple[str, ...] = ("", "", "", "")) -> str:
    """SQL: ``day, agent, release, project`` of a ``runs`` row (``NEW``, ``OLD`` or an alias),
    each ``AS`` the given name when there is one."""
    parts = (
        _day_sql(f"nullif({row}.sort_at, {_NO_TIME})"),
        f"ifnull({row}.agent, X'')",
        f"ifnull({row}.release, X'')",
        f"{row}.project",
    )
    return ", ".join(
        f"{sql} AS {name}" if name else sql for sql, name in zip(parts, names, strict=True)
    )


def _count_in(row: str) -> str:
    """Trigger statements that count ``runs`` row ``row`` in ``run_rollup``."""
    return f"""
        UPDATE run_rollup SET n = n + 1 WHERE (day, agent, release, project) =
            (SELECT {_run_group(row)});
        INSERT INTO run_rollup (day, agent, release, project, n)
            SELECT g.d, g.a, g.r, g.p, 1 FROM (SELECT {_run_group(row, ("d", "a", "r", "p"))}) g
            WHERE NOT EXISTS (SELECT 1 FROM run_rollup y WHERE y.day = g.d AND y.agent = g.a
                AND y.release = g.r AND y.project = g.p);"""


def _count_out(row: str) -> str:
    """Trigger statement that uncounts ``runs`` row ``row``."""
    return f"""
        UPDATE run_rollup SET n = n - 1 WHERE (day, agent, release, project) =
            (SELECT {_run_group(row)});"""


RUN_ROLLUP_SCHEMA: tuple[str, ...] = (
    # agent and release have no declared type: X'' (no value) stays a blob.
    """
        CREATE TABLE IF NOT EXISTS run_rollup (
            day     INTEGER NOT NULL,
            agent   NOT NULL,
            release NOT NULL,
            project NOT NULL,
            n       INTEGER NOT NULL,
            PRIMARY KEY (day, agent, release, project)
        ) WITHOUT ROWID
        """,
    """
        CREATE TABLE IF NOT EXISTS run_rollup_replaced (
            run_id  TEXT PRIMARY KEY,
            day     INTEGER NOT NULL,
            agent   NOT NULL,
            release NOT NULL,
            project NOT NULL
        ) WITHOUT ROWID
        """,
)
"""The run-count rollup's tables."""

RUN_ROLLUP_FILL: tuple[str, ...] = (
    "DELETE FROM run_rollup",
    "DELETE FROM run_rollup_replaced",
    # runs_project_groups (project, sort_at, agent, release) covers it: the index, not the rows
    f"INSERT INTO run_rollup (day, agent, release, project, n)"
    f" SELECT {_run_group('r')}, count(*) FROM runs r INDEXED BY runs_project_groups"
    " GROUP BY 1, 2, 3, 4",
)
"""Statements that recompute ``run_rollup`` from ``runs`` in bulk (migration 9, and
:func:`rebuild_run_rollup` after a bulk load that bypassed the triggers)."""

RUN_ROLLUP_TRIGGERS: tuple[str, ...] = (
    f"""CREATE TRIGGER run_rollup_before_insert BEFORE INSERT ON runs FOR EACH ROW BEGIN
        DELETE FROM run_rollup_replaced WHERE run_id = NEW.id;
        INSERT INTO run_rollup_replaced (run_id, day, agent, release, project)
            SELECT o.id, {_run_group("o")} FROM runs o WHERE o.id = NEW.id;
END""",
    f"""CREATE TRIGGER run_rollup_insert AFTER INSERT ON runs FOR EACH ROW BEGIN
        UPDATE run_rollup SET n = n - 1 WHERE (day, agent, release, project) =
            (SELECT day, agent, release, project FROM run_rollup_replaced WHERE run_id = NEW.id);
        DELETE FROM run_rollup_replaced WHERE run_id = NEW.id;{_count_in("NEW")}
END""",
    f"""CREATE TRIGGER run_rollup_delete AFTER DELETE ON runs FOR EACH ROW BEGIN{_count_out("OLD")}
        DELETE FROM run_rollup_replaced WHERE run_id = OLD.id;
END""",
    f"""CREATE TRIGGER run_rollup_update AFTER UPDATE OF sort_at, agent, release, project ON runs
FOR EACH ROW BEGIN{_count_out("OLD")}{_count_in("NEW")}
END""",
)
"""The triggers on ``runs`` that keep ``run_rollup`` exact on every write."""

RUN_ROLLUP_TRIGGER_NAMES: tuple[str, ...] = (
    "run_rollup_before_insert",
    "run_rollup_insert",
    "run_rollup_delete",
    "run_rollup_update",
)


def rebuild_run_rollup(conn: sqlite3.Connection) -> None:
    """Recompute ``run_rollup`` from ``runs`` in bulk, on a writable connection (inside the
    caller's transaction if one is open, else in one of its own): after rows were written with
    the triggers dropped, or to check the triggers (the tests compare the two)."""
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in RUN_ROLLUP_FILL:
            conn.execute(statement)
        if own:
            conn.execute("COMMIT")
    except BaseException:
        if own and conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


# -- signatures ----------------------------------------------------------------------------


def _unhex(text: str) -> str:
    return bytes.fromhex(text).decode("utf-8", "surrogateescape")


def _decode(sig: str) -> tuple[_Scored, ...]:
    """The scores of a ``rate_sigs.sig`` (see migration 2 for the encoding)."""
    out = []
    for part in sig.split(";"):
        scorer, version, verdict, modes = part.split(".")
        out.append(
            _Scored(
                _unhex(scorer),
                _unhex(version),
                _unhex(verdict),
                frozenset(_unhex(m[1:]) for m in modes.split(",") if m),
            )
        )
    return tuple(out)


# -- queries -----------------------------------------------------------------------------------


def _key(by: str | None, t: str, agent: str, release: str) -> str:
    """The SQL expression of a group key over a start time, agent and release column."""
    if by == "day":
        return f"date({t} / 1000000, 'unixepoch')"
    if by == "week":
        return f"date({t} / 1000000, 'unixepoch', 'weekday 0', '-6 days')"
    if by == "agent":
        return agent
    if by == "release":
        return release
    return "NULL"


def _closed_span(conn: sqlite3.Connection, start: int | None, end: int | None) -> tuple[int, int]:
    """The window with an open side closed at the first or last dated run (µs)."""
    if start is not None and end is not None:
        return start, end
    lo, hi = conn.execute(
        "SELECT min(sort_at), max(sort_at) FROM runs WHERE sort_at > ?", (_NO_TIME,)
    ).fetchone()
    if lo is None:
        lo = hi = 0
    return (lo if start is None else start), (hi + 1 if end is None else end)


def _window_clauses(
    q: RateQuery, time_col: str, agent_col: str, project_col: str = "project"
) -> tuple[list[str], list[Any]]:
    """The conditions of ``q``'s window (``start <= t < end``, or undated), agent role and
    project, on the given columns, with their parameters."""
    clauses: list[str] = []
    params: list[Any] = []
    if q.start_us is not None:
        clauses.append(f"{time_col} >= ?")
        params.append(q.start_us)
    if q.end_us is not None:
        clauses.append(f"{time_col} < ?")
        params.append(q.end_us)
    if q.agent is not None:
        clauses.append(f"{agent_col} = ?")
        params.append(q.agent)
    if q.project is not None:
        clauses.append(f"{project_col} = ?")
        params.append(q.project)
    if q.undated:
        clauses.append(f"{time_col} IS NULL")
    return clauses, params


def _runs_sql(query: RateQuery, by: str | None) -> tuple[str, list[Any]]:
    """Runs per group in the window, from ``runs`` (its ``(sort_at, id)`` index covers it)."""
    clauses: list[str] = []
    params: list[Any] = []
    if query.start_us is not None:
        # sort_at = started_at for every dated run, and NO_TIME < any start: no NULL check needed.
        clauses.append("r.sort_at >= ?")
        params.append(query.start_us)
    if query.end_us is not None:
        clauses.append("r.sort_at < ?")
        params.append(query.end_us)
        if query.start_us is None:
            clauses.append("r.sort_at > ?")
            params.append(_NO_TIME)
    timed = bool(clauses)
    who, who_args = _who(query, "r.")
    params.extend(who_args)
    where = " WHERE 1" + "".join(f" AND {c}" for c in clauses) + who
    if by in ("day", "week", "agent", "release"):
        t = "r.sort_at" if timed else "r.started_at"
        key = _key(by, t, "r.agent", "r.release")
        # One project's runs per role or release: counted from its covering index (the planner
        # would rather skip-scan the agent or release index and read every row).
        runs = (
            "runs r INDEXED BY runs_project_groups"
            if query.project is not None and by in ("agent", "release")
            else "runs r"
        )
        return f"SELECT {key}, count(*) FROM {runs}{where} GROUP BY 1", params
    return f"SELECT NULL, count(*) FROM runs r{where}", params


def _buckets(start_us: int, end_us: int, by: str) -> list[tuple[str, int, int]]:
    """UTC days (or ISO weeks from Monday) covering ``[start, end)``, clipped to it."""
    from datetime import UTC, datetime, timedelta

    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    first = (epoch + timedelta(microseconds=start_us)).date()
    if by == "week":
        first -= timedelta(days=first.weekday())
    step = timedelta(days=7 if by == "week" else 1)
    out: list[tuple[str, int, int]] = []
    day = first
    while True:
        lo = (datetime(day.year, day.month, day.day, tzinfo=UTC) - epoch) // timedelta(
            microseconds=1
        )
        if lo >= end_us:
            return out
        hi = lo + step // timedelta(microseconds=1)
        out.append((day.isoformat(), max(lo, start_us), min(hi, end_us)))
        day += step


def _who(q: RateQuery, table: str = "") -> tuple[str, list[Any]]:
    """SQL conditions (each after `` AND``) for ``q``'s agent role and project, and their
    parameters, on columns ``agent`` and ``project`` (of ``table``, e.g. ``"r."``)."""
    sql = ""
    args: list[Any] = []
    if q.agent is not None:
        sql += f" AND {table}agent = ?"
        args.append(q.agent)
    if q.project is not None:
        sql += f" AND {table}project = ?"
        args.append(q.project)
    return sql, args


def _split_days(
    start: int | None, end: int | None
) -> tuple[tuple[str, list[int]] | None, list[tuple[int, int]]]:
    """A window (µs, either end open, not both) as the rollups read it: the SQL condition on
    ``day`` (after `` AND``) and its parameters for its whole UTC days (``None`` when it has
    none), and the ``(lo, hi)`` ranges of the partial days at its edges, to count run by run."""
    first = _NO_DAY + 1 if start is None else -(-start // _DAY_US)  # the first whole day
    stop = None if end is None else end // _DAY_US  # the day after the last whole day
    if stop is not None and first >= stop:
        inside = start is not None and end is not None and start < end
        return None, [(start, end)] if inside else []  # type: ignore[list-item]
    cond, args = " AND day >= ?", [first]
    if stop is not None:
        cond += " AND day < ?"
        args.append(stop)
    partial: list[tuple[int, int]] = []
    if start is not None and start < first * _DAY_US:
        partial.append((start, first * _DAY_US))
    if end is not None and stop is not None and stop * _DAY_US < end:
        partial.append((stop * _DAY_US, end))
    return (cond, args), partial


def _window_rows(conn: sqlite3.Connection, q: RateQuery) -> list[tuple[Any, ...]]:
    """``(day, agent, release, sig, runs)`` of the window: rollup rows for its whole UTC days,
    runs grouped by signature for the partial days at its edges."""
    agent_sql, agent_args = _who(q)
    roll = "SELECT day, agent, release, sig, n FROM rate_rollup WHERE n > 0"
    if q.undated:
        return conn.execute(roll + " AND day = ?" + agent_sql, [_NO_DAY, *agent_args]).fetchall()
    if q.start_us is None and q.end_us is None:
        return conn.execute(roll + agent_sql, agent_args).fetchall()
    days, partial = _split_days(q.start_us, q.end_us)
    rows: list[tuple[Any, ...]] = []
    if days is not None:
        cond, args = days
        rows.extend(conn.execute(roll + cond + agent_sql, [*args, *agent_args]))
    for lo, hi in partial:
        rows.extend(
            conn.execute(
                f"SELECT {_DAY_SQL}, agent, release, sig, count(*) FROM rate_runs"
                f" WHERE started_at >= ? AND started_at < ?{agent_sql} GROUP BY 1, 2, 3, 4",
                [lo, hi, *agent_args],
            )
        )
    return rows


def _load_sigs(conn: sqlite3.Connection, wanted: set[int], into: dict[int, Any]) -> None:
    missing = sorted(wanted.difference(into))
    for at in range(0, len(missing), 500):
        part = missing[at : at + 500]
        sql = f"SELECT id, sig FROM rate_sigs WHERE id IN ({', '.join('?' * len(part))})"
        for sig_id, text in conn.execute(sql, part):
            into[sig_id] = _decode(text)


def _flagged_runs(
    conn: sqlite3.Connection, q: RateQuery, sigs: list[int]
) -> list[tuple[str, int | None, Any, Any, int]]:
    """``(run_id, started_at, agent, release, sig)`` of the window's runs of these signatures."""
    window, args = _window_clauses(q, "started_at", "agent")
    clauses = ["sig = ?", *window]
    sql = (
        "SELECT run_id, started_at, agent, release, sig FROM rate_runs"
        f" INDEXED BY rate_runs_by_sig WHERE {' AND '.join(clauses)}"
    )
    out: list[tuple[str, int | None, Any, Any, int]] = []
    for sig in sigs:
        out.extend(conn.execute(sql, [sig, *args]))
    return out


def _run_rows(conn: sqlite3.Connection, q: RateQuery, by: str | None) -> list[tuple[Any, ...]]:
    """``(day, agent, release, runs)`` of every run of the window, scored or not, grouped by
    what ``by`` tells apart (the other columns NULL): ``run_rollup`` rows for its whole UTC
    days, ``runs`` counted from its indexes for the partial days at its edges."""
    day = "day" if by in ("day", "week") else "NULL"
    agent = "agent" if by == "agent" else "NULL"
    release = "release" if by == "release" else "NULL"
    who, who_args = _who(q)
    roll = (
        f"SELECT {day}, {agent}, {release}, sum(n) FROM run_rollup WHERE n > 0{{cond}}{who}"
        " GROUP BY 1, 2, 3"
    )
    if q.undated:
        return conn.execute(roll.format(cond=" AND day = ?"), [_NO_DAY, *who_args]).fetchall()
    if q.start_us is None and q.end_us is None:
        return conn.execute(roll.format(cond=""), who_args).fetchall()
    days, partial = _split_days(q.start_us, q.end_us)
    rows: list[tuple[Any, ...]] = []
    if days is not None:
        cond, args = days
        rows.extend(conn.execute(roll.format(cond=cond), [*args, *who_args]))
    # the partial days are dated (sort_at = started_at); one project's runs are counted from
    # its covering index, as _runs_sql does
    columns = ", ".join(
        (
            _day_sql("r.sort_at") if day != "NULL" else "NULL",
            "r.agent" if agent != "NULL" else "NULL",
            "r.release" if release != "NULL" else "NULL",
        )
    )
    runs = "runs r INDEXED BY runs_project_groups" if q.project is not None else "runs r"
    who_r, _ = _who(q, "r.")
    for lo, hi in partial:
        rows.extend(
            conn.execute(
                f"SELECT {columns}, count(*) FROM {runs}"
                f" WHERE r.sort_at >= ? AND r.sort_at < ?{who_r} GROUP BY 1, 2, 3",
                [lo, hi, *who_args],
            )
        )
    return rows


def _run_counts(conn: sqlite3.Connection, q: RateQuery, by: str | None) -> dict[str | None, int]:
    """The window's runs (scored or not) per group of ``by`` (``day``, ``week``, ``agent``,
    ``release``; anything else: one total under ``None``), from the run-count rollup."""
    grouping = by if by in ("day", "week", "agent", "release") else None
    out: dict[str | None, int] = {}
    for day, agent, release, n in _run_rows(conn, q, grouping):
        key = _group_key(grouping, day, agent, release)
        out[key] = out.get(key, 0) + n
    return out


def rate_counts(
    conn: sqlite3.Connection,
    query: RateQuery,
    by: str | None = None,
    *,
    run_rollup: bool = True,
) -> list[RateCounts]:
    """Count runs by outcome over ``query``'s window, for the whole window or per group.

    Args:
        conn: a connection to the store (schema version 2 or later), inside one read snapshot.
        query: the window, agent, scorer versions and modes.
        by: ``None`` for one :class:`RateCounts` (key ``None``) over the window, or one of
            ``day`` (UTC date), ``week`` (the Monday, UTC, that starts the ISO week), ``agent``,
            ``release`` (``metadata.release``), ``mode`` (one group per failure mode: the rate as
            if only that mode were selected) or ``scorer_version`` (``scorer@version``, every
            stored version of the selected scorers apart).

    Returns:
        The groups in key order (``None`` keys last; for ``mode``, the modes' order).

    How: see the module docs. ``run_rollup=False`` counts the runs of each group from
    ``runs`` instead of ``run_rollup`` (as before migration 9: the baseline of the benchmarks).
    """
    check_breakdown(by)
    tally = _Tally(query, by)
    rows = _window_rows(conn, query)
    _load_sigs(conn, {row[3] for row in rows}, tally.classify.sigs)
    for row in rows:
        tally.add(*row)
    listed = sorted(tally.flagging) if query.flagged_ids else []
    # the ids grouped by what decides their groups (the day only for a breakdown by time), so
    # each group's list is added at once, not run by run (tens of thousands over 30 days)
    by_time = by in ("day", "week")
    ids: dict[tuple[Any, ...], list[str]] = {}
    for run_id, started_at, agent, release, sig in _flagged_runs(conn, query, listed):
        ids.setdefault((_day_of(started_at) if by_time else None, agent, release, sig), []).append(
            run_id
        )
    for (day, agent, release, sig), run_ids in ids.items():
        tally.add_ids(day, agent, release, sig, run_ids)
    if run_rollup:
        runs_by_key = _run_counts(conn, query, by)
        if by not in ("day", "week"):
            return tally.grouped(runs_by_key)
        labels = {k for k, n in runs_by_key.items() if n} | set(tally.accs)
        return [
            tally.accs.get(k, _Acc()).counts(k, runs_by_key.get(k, 0), tally.mode_list)
            for k in sorted(labels, key=lambda k: (k is None, k or ""))
        ]
    if by in ("day", "week"):
        out = []
        for label, runs in _time_buckets(conn, query, by):
            acc = tally.accs.get(label)
            if runs or acc is not None:
                out.append((acc or _Acc()).counts(label, runs, tally.mode_list))
        return out
    r_sql, r_args = _runs_sql(query, by if by in ("agent", "release") else None)
    return tally.grouped({k: n for k, n in conn.execute(r_sql, r_args)})


def _time_buckets(
    conn: sqlite3.Connection, query: RateQuery, by: str
) -> list[tuple[str | None, int]]:
    """``(label, runs)`` of each day or week of the window (then the undated runs, when the
    window is open on both sides), counted on ``runs``' time index."""
    start, end = query.start_us, query.end_us
    agent_sql, agent_args = _who(query, "r.")
    out: list[tuple[str | None, int]] = []
    if not query.undated:
        start, end = _closed_span(conn, start, end)
        sql = f"SELECT count(*) FROM runs r WHERE r.sort_at >= ? AND r.sort_at < ?{agent_sql}"
        for label, lo, hi in _buckets(start, end, by) if start < end else []:
            out.append((label, conn.execute(sql, [lo, hi, *agent_args]).fetchone()[0]))
    if query.undated or (query.start_us is None and query.end_us is None):
        sql = f"SELECT count(*) FROM runs r WHERE r.sort_at = ?{agent_sql}"
        out.append((None, conn.execute(sql, [_NO_TIME, *agent_args]).fetchone()[0]))
    return out


def stored_scorers(conn: sqlite3.Connection, project: str | None = None) -> list[str]:
    """Every scorer name with at least one stored score (of a run of ``project``, when given):
    an index skip-scan, not a table scan."""
    sql = (
        "WITH RECURSIVE n(name) AS (SELECT min(scorer) FROM scores UNION ALL"
        " SELECT (SELECT min(scorer) FROM scores WHERE scorer > n.name) FROM n"
        " WHERE n.name IS NOT NULL) SELECT name FROM n WHERE name IS NOT NULL"
    )
    names = [name for (name,) in conn.execute(sql).fetchall()]
    if project is None:
        return names
    used = "SELECT 1 FROM scores WHERE scorer = ? AND run_project = ? LIMIT 1"
    return [n for n in names if conn.execute(used, (n, project)).fetchone() is not None]


def project_scorers(conn: sqlite3.Connection, project: str) -> list[str]:
    """:func:`stored_scorers` of one project, read from the rate rollup (SQLite only): the
    scorers named in the signatures of the project's rollup rows, which are the current
    scores of its runs. A few thousand rollup rows, where looking for one score of each scorer
    of the project in ``scores`` (no index on ``run_project``) reads every score row of the
    scorer when the project has none."""
    sig_ids = [
        sig
        for (sig,) in conn.execute(
            "SELECT DISTINCT sig FROM rate_rollup WHERE project = ? AND n > 0", (project,)
        )
    ]
    sigs: dict[int, tuple[_Scored, ...]] = {}
    _load_sigs(conn, set(sig_ids), sigs)
    return sorted({s.scorer for scores in sigs.values() for s in scores})


def stored_versions(
    conn: sqlite3.Connection,
    scorer: str,
    start_us: int | None = None,
    end_us: int | None = None,
    project: str | None = None,
) -> list[tuple[str, int]]:
    """The versions of ``scorer`` with scores of runs in the window (of ``project``, when
    given), each with its latest ``scored_at`` (µs), newest first."""
    versions_sql = (
        "WITH RECURSIVE v(version) AS (SELECT min(version) FROM scores WHERE scorer = :s"
        " UNION ALL SELECT (SELECT min(version) FROM scores WHERE scorer = :s"
        " AND version > v.version) FROM v WHERE v.version IS NOT NULL)"
        " SELECT version FROM v WHERE version IS NOT NULL"
    )
    window = ""
    args: dict[str, Any] = {"s": scorer}
    if start_us is not None:
        window += " AND run_started_at >= :a"
        args["a"] = start_us
    if end_us is not None:
        window += " AND run_started_at < :b"
        args["b"] = end_us
    if project is not None:
        window += " AND run_project = :p"
        args["p"] = project
    latest_sql = f"SELECT max(scored_at) FROM scores WHERE scorer = :s AND version = :v{window}"

    def work(conn: sqlite3.Connection) -> list[tuple[str, int]]:
        found = []
        for (version,) in conn.execute(versions_sql, {"s": scorer}).fetchall():
            (latest,) = conn.execute(latest_sql, {**args, "v": version}).fetchone()
            if latest is not None:
                found.append((version, int(latest)))
        return sorted(found, key=lambda item: (-item[1], item[0]))

    return work(conn)
