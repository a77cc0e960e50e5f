"""The reading API: ``agentlens.get_trace`` and ``agentlens.query_traces``, over shared stores.

Stores are opened once per URL per process (:func:`shared_store`) and reused, so repeated calls
do not reopen or re-migrate the database.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from agentlens.config import StoreURL, parse_store_url
from agentlens.model import Trace
from agentlens.model._time import resolve_window
from agentlens.store._protocol import RunFilter, TraceStore

__all__ = [
    "close_shared_stores",
    "default_url",
    "get_trace",
    "query_traces",
    "set_default_url",
    "shared_store",
]

_stores: dict[str, TraceStore] = {}
_lock = threading.Lock()
_default: StoreURL | TraceStore | None = None  # set by agentlens.configure(db=...)


def set_default_url(db: str | TraceStore | None) -> None:
    """Make ``db`` (a URL or an open store) the store the reading API uses when given none
    (:func:`agentlens.configure` calls this with its store); ``None`` goes back to the settings.

    Raises:
        ConfigError: the URL is invalid.
    """
    global _default
    _default = (
        db if db is None or not isinstance(db, str) else parse_store_url(db, "configure(db=...)")
    )


def default_url() -> StoreURL:
    """The store URL used when none is named: :func:`set_default_url`'s, else the settings'
    ``db`` (``AGENTLENS_DB``, the configuration file, ``sqlite:///agentlens.db``)."""
    if isinstance(_default, StoreURL):
        return _default
    from agentlens.config import load_settings

    return load_settings().store_url


def _cache_key(url: str) -> str:
    """The same store under different spellings (relative or absolute path) has one key."""
    parsed = parse_store_url(url)
    if parsed.backend != "sqlite":
        return parsed
    path = parsed.sqlite_path
    return "sqlite:///:memory:" if path is None else "sqlite:///" + str(Path(path).resolve())


def shared_store(db: str | TraceStore | None = None) -> TraceStore:
    """The process-wide store for ``db``, opened on first use and reused afterwards.

    Args:
        db: a store URL, a bare SQLite path, a store object (returned as is), or ``None`` for the
            configured store (:func:`agentlens.configure`, ``AGENTLENS_DB``, the configuration
            file, then ``sqlite:///agentlens.db``).

    Raises:
        ConfigError: the URL is invalid.
        StoreError: the store cannot be opened.
    """
    if db is None and _default is not None and not isinstance(_default, str):
        return _default
    if db is not None and not isinstance(db, str):
        return db
    from agentlens.store import open_store

    url = default_url() if db is None else parse_store_url(db)
    key = _cache_key(url)
    with _lock:
        store = _stores.get(key)
        if store is None or getattr(store, "closed", False):
            store = open_store(url)
            _stores[key] = store
        return store


def close_shared_stores() -> None:
    """Close and forget every store :func:`shared_store` opened (tests, shutdown)."""
    with _lock:
        stores = list(_stores.values())
        _stores.clear()
    for store in stores:
        store.close()


def get_trace(run_id: str, *, db: str | TraceStore | None = None) -> Trace:
    """Return one stored run with its steps.

    Args:
        run_id: the run's id.
        db: the store (see :func:`shared_store`); default: the configured store.

    Raises:
        RunNotFoundError: no run has this id.
    """
    return shared_store(db).get_trace(run_id)


def query_traces(
    *,
    since_hours: float | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    agent: str | None = None,
    project: str | None = None,
    has_output: bool | None = None,
    limit: int | None = None,
    newest_first: bool = True,
    db: str | TraceStore | None = None,
) -> Iterator[Trace]:
    """Iterate lazily over stored runs, newest first; the database is read page by page.

    Args:
        since_hours: only runs that started in the ``since_hours`` hours before ``end`` (default:
            now), the window :func:`agentlens.hallucination_rate` takes.
        start: only runs that started at or after this time (naive times are UTC).
        end: only runs that started before this time.
        agent: only runs of this agent role.
        project: only runs of this project.
        has_output: only runs that gave (``True``) or did not give (``False``) a final answer.
        limit: at most this many runs.
        newest_first: order by start time, newest first (default) or oldest first.
        db: the store (see :func:`shared_store`); default: the configured store.

    Raises:
        ConfigError: ``since_hours`` is not a positive number, reaches back before the year 1,
            or is given together with ``start``; the window is empty (see
            :func:`agentlens.analytics.resolve_window`).
    """
    window = resolve_window(since_hours=since_hours, start=start, end=end)
    where = RunFilter(
        start=window.start, end=window.end, agent=agent, project=project, has_output=has_output
    )
    return shared_store(db).query_traces(where, limit=limit, newest_first=newest_first)
