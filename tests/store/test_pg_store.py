"""PostgreSQL specifics: partitions, reading from a read-only session (as on a read replica)."""

from __future__ import annotations

from typing import Any

from store_factories import make_score, make_trace

from agentlens.analytics import hallucination_rate
from agentlens.config import Settings
from agentlens.store import open_store


def test_runs_land_in_monthly_partitions(pg_url: str) -> None:
    store: Any = open_store(pg_url)
    try:
        store.put_traces([make_trace(i) for i in range(3)])  # March 2026
        assert "2026-03" in store.months()
        rows = store.read(
            lambda c: c.execute(
                "SELECT tableoid::regclass::text, count(*) FROM runs GROUP BY 1"
            ).fetchall()
        )
        assert dict(rows) == {"runs_y2026m03": 3}
    finally:
        store.close()


def test_a_read_only_session_reads_an_up_to_date_store(pg_url: str) -> None:
    store: Any = open_store(pg_url)
    store.put_traces([make_trace(i) for i in range(4)])
    store.put_scores([make_score("r00001")])
    store.close()
    replica: Any = open_store(pg_url + "&options=-c%20default_transaction_read_only%3Don")
    try:
        assert replica.read_only
        assert replica.count_runs() == 4
        assert replica.get_trace("r00002") == make_trace(2)
        report = hallucination_rate(
            store=replica, settings=Settings(), scorers=["no_fabricated_refs@1"]
        )
        assert (report.runs, report.flagged) == (4, 1)
    finally:
        replica.close()
