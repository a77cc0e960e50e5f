"""Storage: the :class:`TraceStore` protocol and its backends, chosen by URL.

``open_store("sqlite:///agentlens.db")`` opens (and migrates) the embedded SQLite store;
``sqlite:///:memory:`` gives a private in-memory store. A bare path is taken as a SQLite file.
``open_store("postgresql://user@host/db")`` opens the PostgreSQL store (:mod:`._postgres`, the
``postgres`` extra), imported only when such a URL is opened.

``get_trace(run_id)`` and ``query_traces(since_hours=..., agent=...)`` read from the configured
store (or ``db=``), opened once per process by :func:`shared_store`. The SQLite schema, its
concurrency model and its migrations are described in :mod:`agentlens.store._sqlite`.
"""

from __future__ import annotations

from agentlens.config import DEFAULT_DB_URL, parse_store_url
from agentlens.store._api import (
    close_shared_stores,
    default_url,
    get_trace,
    query_traces,
    set_default_url,
    shared_store,
)
from agentlens.store._protocol import RunFilter, RunSummary, ServerStore, TraceStore
from agentlens.store._rates import BREAKDOWNS, RateCounts, RateQuery, RateSource, VersionSelector
from agentlens.store._sqlite import SQLiteStore

__all__ = [
    "BREAKDOWNS",
    "DEFAULT_DB_URL",
    "RateCounts",
    "RateQuery",
    "RateSource",
    "RunFilter",
    "RunSummary",
    "SQLiteStore",
    "ServerStore",
    "TraceStore",
    "VersionSelector",
    "close_shared_stores",
    "default_url",
    "get_trace",
    "normalize_url",
    "open_store",
    "query_traces",
    "set_default_url",
    "shared_store",
]


def normalize_url(url: str) -> str:
    """Return a store URL; a bare file path becomes a ``sqlite:///`` URL.

    Raises:
        ConfigError: an empty URL or a scheme the store does not accept.
    """
    return parse_store_url(url)


def open_store(url: str | None = None, *, read_only: bool = False) -> TraceStore:
    """Open the store at ``url`` (default: :func:`agentlens.configure`'s store, then the
    settings: ``AGENTLENS_DB``, the configuration file, ``sqlite:///agentlens.db``).

    ``read_only=True`` opens an existing store for reading: nothing is created or written (a
    missing file is a :class:`StoreError`), and a store on read-only media can be read.

    Raises:
        ConfigError: the URL's scheme is unknown.
        MissingExtraError: the backend's driver is not installed.
        StoreError: the store cannot be opened.
    """
    parsed = parse_store_url(url) if url is not None else default_url()
    if parsed.backend == "sqlite":
        return SQLiteStore(parsed, read_only=read_only)
    from agentlens.store._postgres import PostgresStore

    return PostgresStore(str(parsed))
