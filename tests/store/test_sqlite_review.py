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


def _review_state(store: SQLiteStore) -> list[list[tuple[object, ...]]]:
    queries = (
        "SELECT run_id, state, flagged, reason, modes, findings, open FROM run_review"
        " ORDER BY run_id",
        "SELECT run_id, mode FROM run_flag_modes ORDER BY 1, 2",
        "SELECT kind, item_id, run_id, reason, dismissed FROM content_flags ORDER BY 1, 2, 3",
        "SELECT run_id, finding_key, live FROM review_verdicts ORDER BY 1, 2",
    )
    return store.read(lambda c: [c.execute(q).fetchall() for q in queries])


def test_put_scores_derives_what_reading_the_scores_back_derives(tmp_path: Path) -> None:
    """The flags ``put_scores`` derives with what it has at hand (the documents of the scores
    it just wrote, the clean runs' review rows in one statement, links only of runs that can
    be flagged) are those ``refresh_flags`` derives from the stored scores alone: over batches
    of every verdict, replacing scores of other calls, with versions that must not win."""
    import random
    from datetime import UTC, datetime, timedelta

    from agentlens.model import Finding, Score, ScoreResult

    rng = random.Random(7)
    runs = 120
    t = datetime(2026, 5, 1, tzinfo=UTC)
    with SQLiteStore(f"sqlite:///{tmp_path}/a.db") as store:
        store.put_traces(
            [make_trace(i, links={"ticket": f"T-{i % 7}"}) for i in range(1, runs + 1)]
        )
        ids = [f"r{i:05d}" for i in range(1, runs + 1)]
        for batch in range(5):
            scores = []
            for run_id in rng.sample(ids, 90):
                for scorer in rng.sample(["a", "b", "c", "d", "e"], rng.randint(1, 5)):
                    kind = rng.choice(["passed", "passed", "passed", "flagged", "unsure", "error"])
                    findings = []
                    if kind in ("flagged", "unsure"):
                        findings = [
                            Finding(
                                failure_mode="fabricated_grounding",
                                text=f"CUST-{rng.randint(1, 3)}",
                                unverifiable=kind == "unsure",
                            )
                        ]
                    result = ScoreResult(
                        passed=kind == "passed",
                        findings=findings,
                        error="boom" if kind == "error" else None,
                    )
                    score = Score.of(
                        result, run_id=run_id, scorer=scorer, version=rng.choice(["1", "2"])
                    )
                    at = t + timedelta(hours=batch + rng.randint(-3, 3))
                    scores.append(score.model_copy(update={"scored_at": at}))
            store.put_scores(scores)
            written = _review_state(store)
            assert any(row[2] for row in written[0]), "no run flagged: the test checks nothing"
            store.refresh_flags(ids)
            assert _review_state(store) == written, batch
