"""Storage: the :class:`TraceStore` protocol and its backends, chosen by URL.

``open_store("sqlite:///agentlens.db")`` opens (and migrates) the embedded SQLite store;
``sqlite:///:memory:`` gives a private in-memory store. A bare path is taken as a SQLite file.
"""

from __future__ import annotations

from agentlens.errors import ConfigError
from agentlens.store._protocol import RunFilter, RunSummary, TraceStore

__all__ = ["DEFAULT_DB_URL", "RunFilter", "RunSummary", "TraceStore", "normalize_url", "open_store"]

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


def open_store(url: str | None = None) -> TraceStore:
    """Open the store at ``url`` (default: configuration, then ``sqlite:///agentlens.db``).

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
        from agentlens.store._sqlite import SQLiteStore

        return SQLiteStore(url)
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        raise ConfigError(
            f"{url.split('@')[-1]!r}: the PostgreSQL backend is not available yet; "
            "use a sqlite:/// URL"
        )
    raise ConfigError(f"unknown store URL scheme {scheme!r} in {url!r}; expected sqlite:///PATH")
