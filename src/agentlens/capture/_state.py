"""Capture configuration: where finished runs go, and the hooks for the clock and run ids.

Resolution follows the house rule: an argument to :func:`configure`, then the environment
(``AGENTLENS_DB``, ``AGENTLENS_DISABLED``), then nothing: with no ``configure()`` call and no
``AGENTLENS_DB``, capture is a no-op (like OpenTelemetry's no-op tracer provider).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentlens._ids import new_id
from agentlens.capture._export import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_FLUSH_INTERVAL,
    DEFAULT_MAX_QUEUE,
    BatchExporter,
    CaptureStats,
    Exporter,
    StoreExporter,
)
from agentlens.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from agentlens.store import TraceStore

__all__ = ["configure", "flush", "is_enabled", "shutdown", "stats"]

logger = logging.getLogger("agentlens")

_TRUE = frozenset({"1", "true", "yes", "on"})


@dataclass(slots=True)
class Pipeline:
    """The resolved capture configuration (internal)."""

    enabled: bool
    processor: BatchExporter | None = None
    project: str | None = None


# Hooks replaced by agentlens.testing for deterministic ids and clocks.
now_ns: Callable[[], int] = time.time_ns
"""The wall clock, in nanoseconds since the epoch."""
new_run_id: Callable[[], str] = new_id
"""Makes a run id when the caller gave none."""

_pipeline: Pipeline | None = None  # None: not resolved yet (resolved at the first run)
_lock = threading.Lock()
_atexit_registered = False


def current() -> Pipeline:
    """The active configuration, resolved from the environment on first use."""
    pipeline = _pipeline
    if pipeline is not None:
        return pipeline
    return _resolve_default()


def _resolve_default() -> Pipeline:
    global _pipeline
    with _lock:
        if _pipeline is not None:
            return _pipeline
        try:
            disabled = os.environ.get("AGENTLENS_DISABLED", "").strip().lower() in _TRUE
            url = os.environ.get("AGENTLENS_DB", "").strip()
            if disabled or not url:
                pipeline = Pipeline(enabled=False)
            else:
                pipeline = Pipeline(enabled=True, processor=_processor(StoreExporter(url)))
        except Exception as exc:  # never raise into the agent
            logger.warning("agentlens: capture disabled, bad environment: %s", exc)
            pipeline = Pipeline(enabled=False)
        _pipeline = pipeline
        return pipeline


def _processor(
    exporter: Exporter,
    max_queue: int = DEFAULT_MAX_QUEUE,
    batch_size: int = DEFAULT_BATCH_SIZE,
    flush_interval: float = DEFAULT_FLUSH_INTERVAL,
) -> BatchExporter:
    from agentlens.capture._convert import run_to_trace

    _register_atexit()
    return BatchExporter(
        exporter,
        convert=run_to_trace,
        max_queue=max_queue,
        batch_size=batch_size,
        flush_interval=flush_interval,
    )


def configure(
    db: str | TraceStore | None = None,
    *,
    exporter: Exporter | None = None,
    endpoint: str | None = None,
    api_key: str | None = None,
    project: str | None = None,
    enabled: bool | None = None,
    max_queue: int = DEFAULT_MAX_QUEUE,
    batch_size: int = DEFAULT_BATCH_SIZE,
    flush_interval: float = DEFAULT_FLUSH_INTERVAL,
) -> None:
    """Say where captured runs go. Call it once, at start-up.

    The destination is ``exporter`` if given, else the store ``db`` (a URL such as
    ``sqlite:///agentlens.db``, a bare SQLite path, or an open store), else the server at
    ``endpoint`` (or ``AGENTLENS_ENDPOINT``; see :class:`~agentlens.capture.HttpExporter`),
    else ``AGENTLENS_DB``, else the configuration file's ``db`` (default
    ``sqlite:///agentlens.db``). The store is
    opened lazily on the background thread: a store that cannot be opened does not raise here;
    its runs are counted as failed (:func:`stats`) and logged.

    Runs queued for an earlier destination are exported there first (up to 5 seconds).

    Args:
        db: the store URL or an open store.
        exporter: a custom :class:`~agentlens.capture.Exporter` instead of a store.
        endpoint: an agentlens server (``http://host:6660``) to send runs to, batched and
            gzip-compressed, instead of a local store.
        api_key: the server's API key (default ``AGENTLENS_API_KEY``).
        project: the project of runs that do not name one (default ``"default"``).
        enabled: force capture on or off; ``None`` reads ``AGENTLENS_DISABLED``.
        max_queue: finished runs that may wait for export before new ones are dropped.
        batch_size: runs per export call (one store transaction).
        flush_interval: seconds before a partial batch is exported.

    Raises:
        ConfigError: an argument is invalid (both ``db`` and ``exporter``, a non-positive size,
            an unknown URL scheme, an unreadable configuration file).
    """
    global _pipeline
    if db is not None and exporter is not None:
        raise ConfigError("configure(): give either db or exporter, not both")
    if endpoint is not None and (db is not None or exporter is not None):
        raise ConfigError("configure(): give one of db, exporter or endpoint")
    if endpoint is None and db is None and exporter is None:
        endpoint = os.environ.get("AGENTLENS_ENDPOINT", "").strip() or None
    if endpoint is not None:
        from agentlens.capture._http import HttpExporter

        if api_key is None:
            api_key = os.environ.get("AGENTLENS_API_KEY", "").strip() or None
        exporter = HttpExporter(endpoint, api_key)
    if not isinstance(max_queue, int) or max_queue < 1:
        raise ConfigError(f"configure(): max_queue must be a positive integer, got {max_queue!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"configure(): batch_size must be a positive integer, got {batch_size!r}")
    if not isinstance(flush_interval, int | float) or flush_interval <= 0:
        raise ConfigError(
            f"configure(): flush_interval must be a positive number, got {flush_interval!r}"
        )
    if exporter is not None and not callable(getattr(exporter, "export", None)):
        raise ConfigError(f"configure(): exporter {exporter!r} has no export() method")

    if enabled is None:
        enabled = os.environ.get("AGENTLENS_DISABLED", "").strip().lower() not in _TRUE

    from agentlens.config import set_configured_db

    if exporter is None and (enabled or db is not None):
        if db is None or isinstance(db, str):
            url = _resolve_url(db)
            set_configured_db(url)
            exporter = StoreExporter(url)
        else:
            set_configured_db(getattr(db, "url", None))
            exporter = StoreExporter(db)

    processor = (
        _processor(exporter, max_queue, batch_size, flush_interval)
        if enabled and exporter is not None
        else None
    )
    with _lock:
        previous, _pipeline = (
            _pipeline,
            Pipeline(enabled=bool(enabled), processor=processor, project=project),
        )
    if previous is not None and previous.processor is not None:
        previous.processor.shutdown(5.0)


def _resolve_url(db: str | None) -> str:
    from agentlens.store import normalize_url

    if db is None:
        db = os.environ.get("AGENTLENS_DB", "").strip() or None
    if db is None:
        from agentlens.config import load_settings

        db = load_settings().db
    url = normalize_url(db)
    scheme = url.split("://", 1)[0].lower()
    if scheme not in ("sqlite", "postgresql", "postgres", "postgresql+psycopg"):
        raise ConfigError(f"configure(): unknown store URL scheme {scheme!r} in {url!r}")
    return url


def is_enabled() -> bool:
    """True when runs are being recorded (a destination is configured and not disabled)."""
    return current().enabled


def flush(timeout: float | None = 30.0) -> bool:
    """Wait until every finished run so far is exported (or failed).

    Returns:
        True when done within ``timeout`` seconds; also True when capture is a no-op.
    """
    pipeline = _pipeline
    if pipeline is None or pipeline.processor is None:
        return True
    return pipeline.processor.flush(timeout)


def shutdown(timeout: float | None = 30.0) -> None:
    """Export what is queued and stop the background thread. Runs after this are dropped.

    Registered with :mod:`atexit`, so a normal interpreter exit loses nothing.
    """
    pipeline = _pipeline
    if pipeline is not None and pipeline.processor is not None:
        pipeline.processor.shutdown(timeout)


def stats() -> CaptureStats:
    """Counters of the current pipeline: runs exported, dropped and failed, and pending."""
    pipeline = _pipeline
    if pipeline is None or pipeline.processor is None:
        return CaptureStats()
    return pipeline.processor.stats()


def swap(
    pipeline: Pipeline | None,
    clock: Callable[[], int] | None = None,
    run_ids: Callable[[], str] | None = None,
) -> tuple[Pipeline | None, Callable[[], int], Callable[[], str]]:
    """Install a pipeline and hooks; return the previous ones (for :mod:`agentlens.testing`)."""
    global _pipeline, now_ns, new_run_id
    with _lock:
        previous = (_pipeline, now_ns, new_run_id)
        _pipeline = pipeline
        now_ns = clock if clock is not None else time.time_ns
        new_run_id = run_ids if run_ids is not None else new_id
    return previous


def restore(state: tuple[Pipeline | None, Callable[[], int], Callable[[], str]]) -> None:
    """Undo :func:`swap`."""
    global _pipeline, now_ns, new_run_id
    with _lock:
        _pipeline, now_ns, new_run_id = state


def _register_atexit() -> None:
    global _atexit_registered
    if not _atexit_registered:
        _atexit_registered = True
        atexit.register(_at_exit)


def _at_exit() -> None:
    with contextlib.suppress(Exception):
        shutdown(5.0)
