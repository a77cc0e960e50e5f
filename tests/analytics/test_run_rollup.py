"""The run-count rollup (schema migration 9) stays exact, and the rates read from it equal a
direct count over ``runs``.

``run_rollup`` holds the runs (scored or not) per UTC day, role, release and project, kept by
triggers on ``runs``. After random writes (runs stored, re-imported changed or unchanged,
deleted; scores written; and the paths a person or another tool could take by hand:
``INSERT OR REPLACE``, ``INSERT OR IGNORE``, a failed ``INSERT``, ``UPDATE`` of a grouped
column, with recursive triggers off and on), the table equals a rebuild from ``runs``, and
every breakdown over random windows (edges inside a day, on midnights, open, empty) equals the
same query with the runs counted from ``runs`` (as before migration 9), the scan over ``scores``
(``tests/_rate_scan.py``) and, where the JSON documents were not edited by hand, the
plain-Python reference. A project's scorers, read from the rate rollup's signatures, equal
those found in ``scores``.
"""

from __future__ import annotations

import sqlite3
import tempfile
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_rollup import BREAKDOWNS, CFG, MIDNIGHT, WINDOWS, _op, _query, _score, apply, run

from _rate_fixtures import NOW
from _rate_scan import scan_rate_counts
from agentlens.analytics import python_rate_counts, rate_breakdown
from agentlens.analytics._rate import resolve_selection
from agentlens.analytics._window import Window
from agentlens.store import open_store
from agentlens.store._sqlite_rates import rate_counts, rebuild_run_rollup, stored_scorers


def run_table(store: Any) -> tuple[list[Any], list[Any]]:
    """The non-empty rows of ``run_rollup``, and ``run_rollup_replaced`` (empty between
    statements that went through)."""

    def read(conn: sqlite3.Connection) -> tuple[list[Any], list[Any]]:
        rows = conn.execute(
            "SELECT day, agent, release, project, n FROM run_rollup WHERE n <> 0 ORDER BY 1, 2, 3, 4"
        ).fetchall()
        return rows, conn.execute("SELECT * FROM run_rollup_replaced").fetchall()

    return store.read(read)  # type: ignore[no-any-return]


def assert_run_rollup_exact(store: Any) -> None:
    """What the triggers kept equals a rebuild from ``runs`` (and counts every run once)."""
    kept, _ = run_table(store)
    store._write(rebuild_run_rollup)
    assert run_table(store) == (kept, [])
    assert all(n > 0 for *_, n in kept)
    assert sum(n for *_, n in kept) == store.count_runs()


def assert_counts_agree(
    store: Any,
    windows: list[Window],
    *,
    agents: tuple[str | None, ...] = (None, "support"),
    projects: tuple[str | None, ...] = (None, "alpha"),
    modes_choices: tuple[list[str] | None, ...] = (None,),
    python: bool = True,
) -> None:
    """Every breakdown over each window: the rollup's counts equal the direct count over
    ``runs``, the scan and (``python``) the plain-Python reference."""
    for window in windows:
        selectors, _ = resolve_selection(store, CFG, window, ["t_refs", "t_loops"])
        for modes in modes_choices:
            for agent, project in [(a, p) for a in agents for p in projects]:
                query = replace(_query(window, agent, modes, selectors), project=project)
                every = replace(query, any_version_of=("t_refs", "t_loops"))
                for q, by in [(query, by) for by in BREAKDOWNS] + [(every, "scorer_version")]:
                    where = (window, modes, agent, project, by)
                    got = store.rate_counts(q, by)
                    direct = store.read(
                        lambda c, q=q, by=by: rate_counts(c, q, by, run_rollup=False)
                    )
                    assert got == direct, where
                    assert got == scan_rate_counts(store, q, by), where
                    if python:
                        assert got == python_rate_counts(store, q, by), where


# By hand, on the store's own connection: ("sql_replace", key, hours, agent, release, project)
# rewrites a stored run's row with INSERT OR REPLACE ("sql_upsert": with INSERT ... ON CONFLICT
# DO UPDATE); ("sql_ignore", key) inserts it again with INSERT OR IGNORE (ignored),
# ("sql_ignore_new", key) a copy of it under a new id (inserted); ("sql_fail", key) with a plain INSERT (refused: the id is taken);
# ("sql_update", key, column, value) changes one grouped column; ("recursive", on) turns
# recursive triggers on or off (with them on, REPLACE fires the delete trigger too).
_hours = st.one_of(st.none(), st.integers(-6, 24 * 5 * 4).map(lambda q: q / 4))
_manual = st.one_of(
    st.tuples(
        st.sampled_from(["sql_replace", "sql_upsert"]),
        st.integers(0, 7),
        _hours,
        st.sampled_from(["support", "billing", None]),
        st.sampled_from(["v1", "v2", None]),
        st.sampled_from(["alpha", "beta"]),
    ),
    st.tuples(st.just("sql_ignore"), st.integers(0, 7)),
    st.tuples(st.just("sql_ignore_new"), st.integers(0, 7)),
    st.tuples(st.just("sql_fail"), st.integers(0, 7)),
    st.tuples(
        st.just("sql_update"),
        st.integers(0, 7),
        st.one_of(
            st.tuples(st.sampled_from(["agent", "release"]), st.sampled_from(["ops", "v1", None])),
            st.tuples(st.just("project"), st.sampled_from(["alpha", "beta"])),
            st.tuples(st.just("sort_at"), _hours),
        ),
    ),
    st.tuples(st.just("recursive"), st.booleans()),
)

_COPY = (
    "SELECT id, project, agent, name, status, started_at, ended_at, sort_at, has_output,"
    " step_count, release, doc, steps FROM runs WHERE id = ?"
)


def _us(hours: float | None) -> int | None:
    if hours is None:
        return None
    return (NOW - timedelta(hours=hours) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(
        microseconds=1
    )


def apply_manual(store: Any, op: tuple[Any, ...]) -> None:
    """One write by hand (see ``_manual``)."""
    kind, *rest = op
    if kind == "recursive":
        with store._write_lock:
            store._writer.execute(f"PRAGMA recursive_triggers = {'ON' if rest[0] else 'OFF'}")
        return
    run_id = f"01RUN{rest[0]:04d}"

    def write(conn: sqlite3.Connection) -> None:
        row = conn.execute(_COPY, (run_id,)).fetchone()
        if row is None:
            return
        values = list(row)
        if kind in ("sql_replace", "sql_upsert"):
            _, hours, agent, release, project = rest
            started = _us(hours)
            values[1], values[2], values[10] = project, agent, release
            values[5], values[7] = started, -(2**63) if started is None else started
            if kind == "sql_upsert":  # the conflict turns the insert into an UPDATE
                conn.execute(
                    f"INSERT INTO runs VALUES ({', '.join('?' * len(values))}) ON CONFLICT (id)"
                    " DO UPDATE SET project = excluded.project, agent = excluded.agent,"
                    " release = excluded.release, started_at = excluded.started_at,"
                    " sort_at = excluded.sort_at",
                    values,
                )
                return
            verb = "INSERT OR REPLACE"
        elif kind == "sql_ignore_new":  # a copy under a new id: inserted, OR IGNORE
            values[0] = f"{run_id}-copy"
            verb = "INSERT OR IGNORE"
        elif kind == "sql_update":
            _, (column, value) = rest
            if column == "sort_at":  # a run's start time moved (both columns, as put_traces)
                started = _us(value)
                at = -(2**63) if started is None else started
                conn.execute(
                    "UPDATE runs SET started_at = ?, sort_at = ? WHERE id = ?",
                    (started, at, run_id),
                )
            else:
                conn.execute(f"UPDATE runs SET {column} = ? WHERE id = ?", (value, run_id))
            return
        else:
            verb = "INSERT OR IGNORE" if kind == "sql_ignore" else "INSERT"
        marks = ", ".join("?" * len(values))
        try:
            conn.execute(f"{verb} INTO runs VALUES ({marks})", values)
        except sqlite3.IntegrityError:
            assert kind == "sql_fail"

    store._write(write)


_window_edge = st.one_of(
    st.none(),
    st.integers(-8, 24 * 6 * 4).map(lambda q: NOW - timedelta(minutes=15 * q)),
    st.integers(-1, 6).map(lambda d: MIDNIGHT - timedelta(days=d)),
)


def backdrop(store: Any) -> None:
    """Runs every few hours over the six days before NOW (and after it, and undated), of both
    projects, two roles and releases, some scored: every edge of a window has runs around it,
    whatever the random writes on top (keys 0-7) leave."""
    roles, releases = ("support", "billing", None), ("v1", "v2", None)
    runs = [
        run(100 + k, None if k % 11 == 10 else k * 4.75 - 9, roles[k % 3], releases[k // 2 % 3])
        for k in range(32)
    ]
    store.put_traces(runs)
    store.put_scores(
        [_score(t.id, "t_refs", "1", ("flagged", "passed")[k % 2], frozenset({"no_progress"}))
         for k, t in enumerate(runs) if k % 3]
    )  # fmt: skip


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.one_of(_op, _op, _manual), max_size=30),
    st.lists(st.tuples(_window_edge, _window_edge), min_size=1, max_size=3),
    st.sampled_from([None, "support", "billing"]),
    st.sampled_from([None, "alpha", "beta"]),
)
def test_the_run_rollup_equals_a_direct_count_under_random_writes(
    ops: list[tuple[Any, ...]],
    edges: list[tuple[datetime | None, datetime | None]],
    agent: str | None,
    project: str | None,
) -> None:
    with tempfile.TemporaryDirectory(prefix="agentlens-run-rollup-") as folder:
        store: Any = open_store(f"sqlite:///{Path(folder) / 'r.db'}")
        try:
            backdrop(store)
            by_hand = False
            for op in ops:
                if op[0] == "score":
                    _, key, scorer, version, verdict, modes = op
                    run_id = f"01RUN{key:04d}"
                    if store.read(lambda c, r=run_id: c.execute(_COPY, (r,)).fetchone()):
                        store.put_scores([_score(run_id, scorer, version, verdict, modes)])
                elif op[0] in ("run", "delete"):
                    apply(store, [op])
                else:
                    apply_manual(store, op)
                    by_hand = True
            assert_run_rollup_exact(store)
            for name in ("alpha", "beta", "nobody"):  # a project's scorers, from the rollup
                in_scores = store.read(lambda c, p=name: stored_scorers(c, p))
                assert store.stored_scorers(project=name) == in_scores, name
            # the fixed windows of every kind, and random ones
            windows = [*WINDOWS, *(Window(start, end) for start, end in edges)]
            assert_counts_agree(
                store, windows, agents=(agent,), projects=(project,), python=not by_hand
            )
        finally:
            store.close()


@pytest.mark.parametrize("recursive", [False, True])
def test_reimport_replace_ignore_update_and_delete_move_the_counts(
    tmp_path: Path, recursive: bool
) -> None:
    store: Any = open_store(f"sqlite:///{tmp_path / 'r.db'}")
    try:
        with store._write_lock:
            store._writer.execute(f"PRAGMA recursive_triggers = {'ON' if recursive else 'OFF'}")
        store.put_traces([run(1, 2, "support", "v1"), run(2, 30, "support", "v1")])
        store.put_traces([run(3, None, None, None)])
        assert_run_rollup_exact(store)

        def per_agent() -> dict[str | None, int]:
            groups = rate_breakdown("agent", store=store, settings=CFG, scorers=["t_refs"])
            return {g.key: g.runs for g in groups.groups}

        assert per_agent() == {"support": 2, None: 1}
        store.put_traces([run(1, 26, "billing", "v2")])  # re-imported, changed
        store.put_traces([run(1, 26, "billing", "v2")])  # again, unchanged: nothing moves
        assert per_agent() == {"support": 1, "billing": 1, None: 1}
        assert_run_rollup_exact(store)
        apply_manual(store, ("sql_replace", 2, 50.0, "ops", "v9", "beta"))
        assert per_agent() == {"ops": 1, "billing": 1, None: 1}
        apply_manual(store, ("sql_ignore", 2))
        apply_manual(store, ("sql_fail", 2))
        assert per_agent() == {"ops": 1, "billing": 1, None: 1}
        assert_run_rollup_exact(store)
        apply_manual(store, ("sql_update", 3, ("agent", "ops")))
        apply_manual(store, ("sql_update", 1, ("sort_at", 24 * 365 * 56.0)))  # to 1970
        apply_manual(store, ("sql_update", 1, ("project", "beta")))
        assert per_agent() == {"ops": 2, "billing": 1}
        assert_run_rollup_exact(store)
        assert_counts_agree(store, [Window(None, None), Window(NOW - timedelta(days=3), None)],
                            projects=(None, "beta"), python=False)  # fmt: skip
        store.delete_runs(["01RUN0001", "01RUN0002", "01RUN0003"])
        assert run_table(store) == ([], [])
    finally:
        store.close()


def test_migration_8_fills_the_run_rollup_of_an_existing_store(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store: Any = open_store(f"sqlite:///{path}")
    try:
        apply(
            store,
            [
                ("run", 1, 3.5, "support", "v1"),
                ("run", 2, 40.0, None, None),
                ("run", 3, None, "billing", "v2"),
                ("run", 4, 80.25, "billing", None),
                ("run", 5, 24 * 365 * 60.0, "support", "v1"),  # before 1970
                ("score", 1, "t_refs", "1", "flagged", frozenset({"fabricated_grounding"})),
                ("score", 4, "t_refs", "2", "passed", frozenset()),
            ],
        )
        expected = run_table(store)
        assert expected[0] and store.schema_version >= 9
    finally:
        store.close()
    # Make it a schema-8 store again, as the agentlens before migration 9 left it.
    conn = sqlite3.connect(path, isolation_level=None)
    for name in ("before_insert", "insert", "delete", "update"):
        conn.execute(f"DROP TRIGGER run_rollup_{name}")
    conn.execute("DROP TABLE run_rollup")
    conn.execute("DROP TABLE run_rollup_replaced")
    conn.execute("DELETE FROM _agentlens_migrations WHERE version >= 9")
    conn.close()
    store = open_store(f"sqlite:///{path}")
    try:
        assert run_table(store) == expected
        store.put_traces([run(6, 1.0, "ops", "v1")])  # and the triggers are there
        assert_run_rollup_exact(store)
        assert_counts_agree(store, [Window(None, None), Window(NOW - timedelta(days=2), None)])
    finally:
        store.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_projects_scorers_come_from_its_current_scores(tmp_path: Path, backend: str) -> None:
    drop = None
    if backend == "postgres":
        from pg_support import new_pg_schema

        url, drop = new_pg_schema()
    else:
        url = f"sqlite:///{tmp_path / 'r.db'}"
    store: Any = open_store(url)
    try:
        store.put_traces([run(1, 2, "support", "v1"), run(2, 3, "support", "v1")])  # beta, alpha
        store.put_scores([_score("01RUN0001", "t_loops", "1", "flagged", frozenset())])
        store.put_scores([_score("01RUN0002", "t_refs", "1", "passed", frozenset())])
        assert store.stored_scorers(project="beta") == ["t_loops"]
        assert store.stored_scorers(project="alpha") == ["t_refs"]
        assert store.stored_scorers(project="nobody") == []
        store.delete_runs(["01RUN0001"])  # its rollup row stays, counting 0
        assert store.stored_scorers(project="beta") == []
        store.put_traces([run(2, 3, "billing", "v1")])  # replaced: its scores go
        assert store.stored_scorers(project="alpha") == []
        assert store.stored_scorers() == []
    finally:
        store.close()
        if drop is not None:
            drop()
