"""Which statements the PostgreSQL store prepares on the server.

psycopg prepares a statement once it has run five times on a connection. A prepared statement
is not parsed again, and parsing is where a backend reads the catalog's changes (as it does
when it takes a lock it does not hold yet): in a transaction that already held ``runs``, a
prepared statement missed a monthly partition another connection had attached meanwhile.

So a write transaction (:meth:`~agentlens.store.PostgresStore.write`) runs its statements
unprepared, but for those given to :func:`execute_prepared`: a statement on tables that are not
partitioned, and a bulk insert into a partitioned table once the transaction has read the
catalog's changes since its partitions were attached (``runs``: a lock of them first,
``_see_partitions`` in ``_postgres.py``; ``scores``: the chunk's unprepared read of its runs,
whose partitions are attached with the scores'). Unprepared, PostgreSQL plans a bulk insert
again at every run with its arrays (megabytes of runs, scores or spans) as constants: 23% more
time per run written and 30% per span staged (``benchmarks/bench_pg_writes.py``). Reads keep
psycopg's preparing: each is one snapshot, which a partition attached during it holds no rows
of.
"""

from __future__ import annotations

from typing import Any

__all__ = ["execute_prepared"]


def execute_prepared(conn: Any, sql: str, params: Any) -> Any:
    """Run one statement prepared on the server, in a write transaction whose other
    statements are not (see the module for which may be)."""
    threshold = conn.prepare_threshold
    conn.prepare_threshold = 0
    try:
        return conn.execute(sql, params, prepare=True)
    finally:
        conn.prepare_threshold = threshold
