"""PostgreSQL specifics: partitions (attached while writes are under way too), reading from a
read-only session (as on a read replica)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from store_factories import make_score, make_trace

from agentlens.analytics import hallucination_rate
from agentlens.config import Settings
from agentlens.model import Score, Trace
from agentlens.store import open_store
from agentlens.store._postgres import _SCORE_CHUNK, _WRITE_CHUNK


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


# -- a month's partition attached while a write is under way ----------------------------------
#
# A write transaction's statements must see a monthly partition another connection attaches
# while the transaction runs. A statement psycopg had prepared on the server (after five runs on
# a connection) did not, once the transaction held the table: an insert refused the new month's
# rows, a read missed the rows stored there. Each test first has psycopg prepare them.

_PREPARED = 6
"""Writes enough for psycopg to prepare, on the store's one connection, what it prepares (a
statement run five times)."""


def _prepare_inserts(store: Any) -> None:
    for i in range(_PREPARED):
        store.put_traces([make_trace(900 + i)])
        store.put_scores([make_score(f"r{900 + i:05d}")])


def test_a_run_replaced_by_one_of_a_month_not_yet_partitioned(pg_url: str) -> None:
    store: Any = open_store(pg_url)
    try:
        _prepare_inserts(store)
        store.put_traces([make_trace(1)])  # March 2026
        moved = make_trace(1, started=datetime(2024, 7, 2, tzinfo=UTC))
        assert store.put_traces([moved]) == 1  # the old row deleted first, then the new month
        assert store.get_trace("r00001").started_at == moved.started_at
        assert "2024-07" in store.months()
    finally:
        store.close()


def test_a_month_another_writer_adds_during_a_write(pg_url: str) -> None:
    store: Any = open_store(pg_url)
    other: Any = open_store(pg_url)
    try:
        _prepare_inserts(store)
        first = [make_trace(i) for i in range(_WRITE_CHUNK)]

        def runs() -> Iterator[Trace]:
            yield from first  # the first chunk is written, runs' parent locked...
            # ...then another writer attaches May 2024 and stores a run there
            other.put_traces([make_trace(5000, started=datetime(2024, 5, 1, tzinfo=UTC))])
            yield make_trace(5001, started=datetime(2024, 5, 2, tzinfo=UTC))

        assert store.put_traces(runs()) == _WRITE_CHUNK + 1
        scored = [make_trace(i) for i in range(_SCORE_CHUNK)]
        store.put_traces(scored)
        store.put_scores([make_score(t.id) for t in scored])

        def scores() -> Iterator[Score]:
            yield from (make_score(t.id, version="2") for t in scored)  # the first chunk
            other.put_traces([make_trace(6000, started=datetime(2023, 9, 1, tzinfo=UTC))])
            yield make_score("r06000")

        assert store.put_scores(scores()) == _SCORE_CHUNK + 1
        assert [s.run_id for s in store.get_scores("r06000")] == ["r06000"]
        assert store.get_trace("r05001").id == "r05001"
    finally:
        other.close()
        store.close()
