"""SQLite specifics of the review tables: index use, and migration 3 on an existing store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from store_factories import make_score, make_trace

from agentlens.store import RunFilter, SQLiteStore
from agentlens.store import _migrations as migrations
from agentlens.store._sqlite import _filter_sql


def _plan(store: SQLiteStore, where: RunFilter) -> str:
    f = _filter_sql(where).with_review()
    clauses, params = f.sql()
    sql = (
        f"SELECT {f.key[0]}, {f.key[1]} FROM runs r{f.join} WHERE {' AND '.join(clauses)}"
        f" ORDER BY {f.key[0]} DESC, {f.key[1]} DESC LIMIT 10"
    )
    rows = store.read(lambda c: c.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall())
    return " | ".join(str(r[3]) for r in rows)


@pytest.mark.parametrize(
    ("where", "index"),
    [
        (RunFilter(flagged=True), "run_review_flagged"),
        (RunFilter(flagged=True, agent="support"), "run_review_flagged_agent"),
        (RunFilter(failure_mode="fabricated_grounding"), "run_review_flagged"),
    ],
)
def test_listing_flagged_runs_scans_the_flagged_index(
    tmp_path: Path, where: RunFilter, index: str
) -> None:
    with SQLiteStore(f"sqlite:///{tmp_path}/a.db") as store:
        store.put_traces([make_trace(i) for i in range(50)])
        plan = _plan(store, where)
    assert f"USING INDEX {index}" in plan
    assert "SCAN r" not in plan


def test_pending_review_scans_the_pending_index(tmp_path: Path) -> None:
    with SQLiteStore(f"sqlite:///{tmp_path}/a.db") as store:
        plan = store.read(
            lambda c: c.execute(
                "EXPLAIN QUERY PLAN SELECT run_id, stored_at FROM run_review"
                " WHERE reviewed_at IS NULL ORDER BY stored_at, run_id LIMIT 5"
            ).fetchall()
        )
    assert "run_review_pending" in str(plan)


def test_migration_3_makes_existing_runs_pending(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/a.db"
    with SQLiteStore(url) as store:
        store.put_traces([make_trace(1), make_trace(2)])
        store.put_scores([make_score("r00001")])
    conn = sqlite3.connect(tmp_path / "a.db", isolation_level=None)
    for table in (
        "run_review",
        "run_flag_modes",
        "content_flags",
        "review_verdicts",
        "webhook_deliveries",
        "api_keys",  # and migration 4's (the server's)
        "otlp_spans",
        "otlp_traces",
    ):
        conn.execute(f"DROP TABLE {table}")
    conn.execute(f"DELETE FROM {migrations.MIGRATIONS_TABLE} WHERE version >= 3")
    conn.close()
    with SQLiteStore(url) as store:
        assert store.schema_version == migrations.latest_version()
        assert sorted(p.run_id for p in store.pending_review()) == ["r00001", "r00002"]
        assert store.get_flags("r00001") is None  # derived when reviewed (or refreshed)
        store.refresh_flags(["r00001"])
        flags = store.get_flags("r00001")
        assert flags is not None and flags.hallucination_detected


def test_put_scores_gives_a_run_without_a_review_row_one(tmp_path: Path) -> None:
    """A run whose review row is missing (deleted by hand) gets one, pending and with its
    flags, when it is scored; the runs that have one keep theirs (``put_scores`` looks for
    missing rows instead of inserting one for every run)."""
    url = f"sqlite:///{tmp_path}/a.db"
    with SQLiteStore(url) as store:
        store.put_traces([make_trace(1), make_trace(2), make_trace(3)])
        store.mark_reviewed(store.pending_review())
        conn = sqlite3.connect(tmp_path / "a.db", isolation_level=None)
        conn.execute("DELETE FROM run_review WHERE run_id IN ('r00001', 'r00003')")
        conn.close()
        store.put_scores(
            [
                make_score("r00001"),
                make_score("r00002", passed=True),
                make_score("r00003", passed=True),
            ]
        )
        assert [p.run_id for p in store.pending_review()] == ["r00001", "r00003"]
        flagged = store.get_flags("r00001")
        assert flagged is not None and flagged.hallucination_detected
        for run_id in ("r00002", "r00003"):
            clean = store.get_flags(run_id)
            assert clean is not None and clean.state == "clean" and not clean.findings
        assert store.count_runs(RunFilter(flagged=True)) == 1
