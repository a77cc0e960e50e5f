"""Storage: the :class:`TraceStore` protocol and its backends, chosen by URL.

``open_store("sqlite:///agentlens.db")`` opens (and migrates) the embedded SQLite store;
``sqlite:///:memory:`` gives a private in-memory store. A bare path is taken as a SQLite file.

``get_trace(run_id)`` and ``query_traces(since_hours=..., agent=...)`` read from the configured
store (or ``db=``), opened once per process by :func:`shared_store`. The SQLite schema, its
concurrency model and its migrations are described in :mod:`agentlens.store._sqlite`.
"""

from __future__ import annotations

from agentlens.errors import ConfigError
from agentlens.store._api import close_shared_stores, get_trace, query_traces, shared_store
from agentlens.store._protocol import RunFilter, RunSummary, TraceStore
from agentlens.store._sqlite import SQLiteStore

__all__ = [
    "DEFAULT_DB_URL",
    "RunFilter",
    "RunSummary",
    "SQLiteStore",
    "TraceStore",
    "close_shared_stores",
    "get_trace",
    "normalize_url",
    "open_store",
    "query_traces",
    "shared_store",
]

DEFAULT_DB_URL = "sqlite:///agentlens.db"
"""The embedded default: ``agentlens.db`` in the current directory."""


def normalize_url(url: str) -> str:
    """Return a store URL; a bare file path becomes a ``sqlite:///`` URL."""
    url = url.strip()
    if not url:
        raise ConfigError("the store URL is empty")
    if "://" not in url:
        return "sqlite:///" + url
    return url


def open_store(url: str | None = None, *, read_only: bool = False) -> TraceStore:
    """Open the store at ``url`` (default: configuration, then ``sqlite:///agentlens.db``).

    ``read_only=True`` opens an existing store for reading: nothing is created or written (a
    missing file is a :class:`StoreError`), and a store on read-only media can be read.

    Raises:
        ConfigError: the URL's scheme is unknown.
        MissingExtraError: the backend's driver is not installed.
        StoreError: the store cannot be opened.
    """
    if url is None:
        from agentlens.config import load_settings

        url = load_settings().db
    url = normalize_url(url)
    scheme = url.split("://", 1)[0].lower()
    if scheme == "sqlite":
        return SQLiteStore(url, read_only=read_only)
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        raise ConfigError(
            f"{url.split('@')[-1]!r}: the PostgreSQL backend is not available yet; "
            "use a sqlite:/// URL"
        )
    raise ConfigError(f"unknown store URL scheme {scheme!r} in {url!r}; expected sqlite:///PATH")
