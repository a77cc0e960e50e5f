"""Capture configuration: where finished runs go, and the hooks for the clock and run ids.

Resolution follows the house rule: an argument to :func:`configure`, then the environment
(``AGENTLENS_DB``, ``AGENTLENS_DISABLED``), then nothing: with no ``configure()`` call and no
``AGENTLENS_DB``, capture is a no-op (like OpenTelemetry's no-op tracer provider). With only
``AGENTLENS_DB``, runs go to the exporter the top level registered in :mod:`agentlens._implicit`
(it stores them and reviews them in the background, as ``agentlens.configure()`` does).

The resolved configuration is one immutable :class:`Pipeline`; a :class:`~agentlens.capture.Run`
keeps the one that was current when it was created, so its clock, ids and processor do not
change under it when :func:`configure` is called again.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentlens import _implicit
from agentlens._ids import new_id
from agentlens.capture._export import Exporter, StoreExporter
from agentlens.capture._guard import LoopGuard
from agentlens.capture._processor import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_FLUSH_INTERVAL,
    DEFAULT_MAX_QUEUE,
    BatchProcessor,
    CaptureStats,
    Processor,
)
from agentlens.config import parse_bool, parse_store_url
from agentlens.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from agentlens.store import TraceStore

__all__ = ["configure", "flush", "is_enabled", "reset", "shutdown", "stats"]

logger = logging.getLogger("agentlens")


def _env_disabled() -> bool:
    return parse_bool(os.environ.get("AGENTLENS_DISABLED", ""), "AGENTLENS_DISABLED")


@dataclass(frozen=True, slots=True)
class Pipeline:
    """The resolved capture configuration (internal)."""

    enabled: bool
    processor: Processor | None = None
    project: str | None = None
    clock: Callable[[], int] = field(default=time.time_ns)
    """The wall clock, in nanoseconds since the epoch."""
    id_generator: Callable[[], str] = field(default=new_id)
    """Makes a run id when the caller gave none."""
    guard: LoopGuard | None = None
    """The loop guard of the runs captured (``None``: off)."""


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
            disabled = _env_disabled()
            url = os.environ.get("AGENTLENS_DB", "").strip()
            if disabled or not url:
                pipeline = Pipeline(enabled=False)
            else:
                store_url = parse_store_url(url, "AGENTLENS_DB")
                pipeline = Pipeline(enabled=True, processor=_batch(_implicit_exporter(store_url)))
                _register_atexit()
        except Exception as exc:  # never raise into the agent
            logger.warning("agentlens: capture disabled, bad environment: %s", exc)
            pipeline = Pipeline(enabled=False)
        _pipeline = pipeline
        return pipeline


def _implicit_exporter(url: str) -> Exporter:
    """The exporter of the implicit configuration: the one the top level registered (it reviews
    what it stores, see :mod:`agentlens._implicit`), or a plain :class:`StoreExporter`."""
    factory = _implicit.store_exporter()
    if factory is not None:
        try:
            exporter = factory(url)
            if isinstance(exporter, Exporter):
                return exporter
            logger.warning("agentlens: the implicit exporter is not an Exporter; storing only")
        except Exception as exc:  # never raise into the agent: store the runs, unreviewed
            logger.warning("agentlens: review on capture is off: %s: %s", type(exc).__name__, exc)
    return StoreExporter(url)


def _batch(
    exporter: Exporter,
    max_queue: int = DEFAULT_MAX_QUEUE,
    batch_size: int = DEFAULT_BATCH_SIZE,
    flush_interval: float = DEFAULT_FLUSH_INTERVAL,
) -> BatchProcessor:
    return BatchProcessor(
        exporter, max_queue=max_queue, batch_size=batch_size, flush_interval=flush_interval
    )


def configure(
    db: str | TraceStore | None = None,
    *,
    exporter: Exporter | None = None,
    endpoint: str | None = None,
    api_key: str | None = None,
    processor: Processor | None = None,
    project: str | None = None,
    enabled: bool | None = None,
    max_queue: int = DEFAULT_MAX_QUEUE,
    batch_size: int = DEFAULT_BATCH_SIZE,
    flush_interval: float = DEFAULT_FLUSH_INTERVAL,
    clock: Callable[[], int] | None = None,
    id_generator: Callable[[], str] | None = None,
    guard: LoopGuard | None = None,
) -> None:
    """Say where captured runs go. Call it once, at start-up (or in a test, see below).

    The destination is ``processor`` if given, else ``exporter`` (behind a
    :class:`~agentlens.capture.BatchProcessor`), else the store ``db`` (a URL such as
    ``sqlite:///agentlens.db``, a bare SQLite path, or an open store), else the server at
    ``endpoint`` (or ``AGENTLENS_ENDPOINT``; see :class:`~agentlens.capture.HttpExporter`),
    else ``AGENTLENS_DB``, else the configuration file's ``db`` (default
    ``sqlite:///agentlens.db``). The store is
    opened lazily on the background thread: a store that cannot be opened does not raise here;
    its runs are counted as failed (:func:`stats`) and logged.

    The previous processor is shut down (its queued runs exported, up to 5 seconds).

    ``processor``, ``clock`` and ``id_generator`` are the test hooks (``agentlens.testing``
    uses them): a :class:`~agentlens.capture.SimpleProcessor` over an
    :class:`~agentlens.capture.InMemoryExporter` keeps runs in memory as they end, and a fixed
    clock and id generator make them reproducible. :func:`reset` undoes it.

    Args:
        db: the store URL or an open store.
        exporter: a custom :class:`~agentlens.capture.Exporter` instead of a store.
        endpoint: an agentlens server (``http://host:6660``) to send runs to, batched and
            gzip-compressed (an :class:`~agentlens.capture.HttpExporter` behind the batching
            processor), instead of a local store.
        api_key: the server's API key (default ``AGENTLENS_API_KEY``).
        processor: a :class:`~agentlens.capture.Processor` that receives each run as it ends,
            instead of the default batching one (``max_queue``, ``batch_size`` and
            ``flush_interval`` then do not apply).
        project: the project of runs that do not name one (default ``"default"``).
        enabled: force capture on or off; ``None`` reads ``AGENTLENS_DISABLED``.
        max_queue: finished runs that may wait for export before new ones are dropped.
        batch_size: runs per export call (one store transaction).
        flush_interval: seconds before a partial batch is exported.
        clock: the wall clock, nanoseconds since the epoch (default :func:`time.time_ns`).
        id_generator: makes the id of a run that was given none (default: time-sortable ids).
        guard: the online loop guard (:class:`~agentlens.capture.LoopGuard`), built by
            :func:`agentlens.configure` from ``loop_guard=`` and the configuration; ``None``:
            off.

    Raises:
        ConfigError: an argument is invalid (more than one of ``db``, ``exporter`` and
            ``processor``, a non-positive size, an unknown URL scheme, an unreadable
            configuration file, a hook that is not callable).
    """
    global _pipeline
    given = [
        name
        for name, value in (
            ("db", db),
            ("exporter", exporter),
            ("processor", processor),
            ("endpoint", endpoint),
        )
        if value is not None
    ]
    if len(given) > 1:
        raise ConfigError(
            f"configure(): give one of db, exporter, processor and endpoint, not {given}"
        )
    if not given or (endpoint is not None and api_key is None):
        from agentlens.config import load_settings

        settings = load_settings()  # AGENTLENS_ENDPOINT / AGENTLENS_API_KEY / the file
        if not given:
            endpoint = settings.endpoint
        if api_key is None:
            api_key = settings.api_key
    if endpoint is not None:
        from agentlens.capture._http import HttpExporter

        exporter = HttpExporter(endpoint, api_key)
    check_options(
        max_queue=max_queue, batch_size=batch_size, flush_interval=flush_interval,
        clock=clock, id_generator=id_generator,
    )  # fmt: skip
    if exporter is not None and not callable(getattr(exporter, "export", None)):
        raise ConfigError(f"configure(): exporter {exporter!r} has no export() method")
    if processor is not None and not callable(getattr(processor, "on_end", None)):
        raise ConfigError(f"configure(): processor {processor!r} has no on_end() method")

    if enabled is None:
        enabled = not _env_disabled()

    if processor is None and exporter is None and (enabled or db is not None):
        url: str | None = None
        if db is None or isinstance(db, str):
            url = _resolve_url(db)
            exporter = StoreExporter(url)
        else:
            exporter = StoreExporter(db)
        from agentlens.store import set_default_url

        set_default_url(url or db)  # the reading API (get_trace, query_traces) reads there too

    if not enabled:
        processor = None
    elif processor is None and exporter is not None:
        processor = _batch(exporter, max_queue, batch_size, flush_interval)
    pipeline = Pipeline(
        enabled=bool(enabled) and processor is not None,
        processor=processor,
        project=project,
        clock=clock if clock is not None else time.time_ns,
        id_generator=id_generator if id_generator is not None else new_id,
        guard=guard,
    )
    _install(pipeline)


def check_options(
    *,
    max_queue: Any = 1,
    batch_size: Any = 1,
    flush_interval: Any = 1.0,
    clock: Any = None,
    id_generator: Any = None,
    **_: Any,
) -> None:
    """Raise :class:`ConfigError` for a bad value of :func:`configure`'s queue options or hooks
    (what :func:`agentlens.configure` checks before it starts a reviewer); other keywords are
    not looked at."""
    if not isinstance(max_queue, int) or max_queue < 1:
        raise ConfigError(f"configure(): max_queue must be a positive integer, got {max_queue!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"configure(): batch_size must be a positive integer, got {batch_size!r}")
    if not isinstance(flush_interval, int | float) or flush_interval <= 0:
        raise ConfigError(
            f"configure(): flush_interval must be a positive number, got {flush_interval!r}"
        )
    for name, hook in (("clock", clock), ("id_generator", id_generator)):
        if hook is not None and not callable(hook):
            raise ConfigError(f"configure(): {name} must be callable, got {hook!r}")


def reset(timeout: float | None = 5.0) -> None:
    """Forget the configuration: shut the processor down (exporting what is queued, up to
    ``timeout`` seconds) and go back to the unconfigured state, resolved from the environment
    again at the next run. What a test calls to leave capture as it found it."""
    _install(None, timeout)
    if "agentlens.store" in sys.modules:  # nothing to forget if the store was never imported
        from agentlens.store import set_default_url

        set_default_url(None)


def _install(pipeline: Pipeline | None, timeout: float | None = 5.0) -> None:
    global _pipeline
    if pipeline is not None and pipeline.processor is not None:
        _register_atexit()
    with _lock:
        previous, _pipeline = _pipeline, pipeline
    if previous is not None and previous.processor is not None:
        try:
            previous.processor.shutdown(timeout)
        except Exception as exc:  # a processor of the user's: never raise from here
            logger.warning("agentlens: processor shutdown failed: %s", exc)


def _resolve_url(db: str | None) -> str:
    if db is not None:
        return parse_store_url(db, "configure(db=...)")
    from agentlens.config import load_settings

    return load_settings().store_url


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
    try:
        return bool(pipeline.processor.flush(timeout))
    except Exception as exc:  # a processor of the user's: never raise from here
        logger.warning("agentlens: processor flush failed: %s", exc)
        return False


def shutdown(timeout: float | None = 30.0) -> bool:
    """Export what is queued and stop the background thread. Runs after this are dropped.

    Registered with :mod:`atexit`, so a normal interpreter exit loses nothing.

    Returns:
        True when everything queued was exported (or failed) within ``timeout`` seconds.
    """
    pipeline = _pipeline
    if pipeline is None or pipeline.processor is None:
        return True
    try:
        return bool(pipeline.processor.shutdown(timeout))
    except Exception as exc:  # a processor of the user's: never raise from here
        logger.warning("agentlens: processor shutdown failed: %s", exc)
        return False


def stats() -> CaptureStats:
    """Counters of the current pipeline: runs exported, dropped and failed, and pending."""
    pipeline = _pipeline
    if pipeline is None or pipeline.processor is None:
        return CaptureStats()
    try:
        return pipeline.processor.stats()
    except Exception:  # a processor of the user's that keeps no counters
        return CaptureStats()


def _register_atexit() -> None:
    """Export what is queued at a normal exit (atexit) and on SIGTERM (a handler that chains to
    the host's, installed from the main thread only: see :mod:`agentlens.capture._signals`)."""
    global _atexit_registered
    if not _atexit_registered:
        _atexit_registered = True
        atexit.register(_at_exit)
    try:
        from agentlens.capture._signals import install_sigterm_handler

        install_sigterm_handler(flush, shutdown)
    except Exception:  # pragma: no cover - never raise into the agent
        pass


def _at_exit() -> None:
    with contextlib.suppress(Exception):
        shutdown(5.0)
