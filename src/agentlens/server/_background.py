"""The server's background stage in a process of its own: the assembler and the reviewer.

Request handlers and the writer thread only stage what they acknowledge (a cheap, durable
append). Building runs from the staged spans and reviewing them is most of the CPU a span
costs, so ``agentlens serve`` runs that part in a child process over the same store (SQLite's
WAL lets both processes write, one transaction at a time; PostgreSQL claims rows): the two
share the machine's cores instead of one interpreter lock, and the child runs at a lower
scheduling priority (``nice`` +19, the lowest), so under a burst the request path keeps its
throughput and the review lag grows instead (it is reported on ``/metrics``; the staged spans wait on disk).

The child stops when the server stops (an event), or within half a second when the server
died (its parent process changed); whatever it had not built yet is built by the next process
that assembles the store (the build of a run and the mark of its spans are one transaction).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import time
from dataclasses import dataclass
from typing import Any

from agentlens.server._ingest import Ingestor, Metrics

__all__ = ["BackgroundProcess", "start_reviewer"]

logger = logging.getLogger("agentlens.server")

NICE = 19
"""How much lower the child's scheduling priority is than the server's."""


@dataclass(frozen=True)
class _Options:
    url: str
    idle_timeout_s: float
    retention_s: float
    review: bool


class BackgroundProcess:
    """The assembler and reviewer of ``url`` in a child process (see the module docstring).

    :meth:`wake` says spans or runs were committed; :meth:`counts` is what the child built
    (``runs_built``, ``runs_rejected``) for ``/metrics``.
    """

    def __init__(
        self, url: str, *, idle_timeout_s: float, retention_s: float, review: bool
    ) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._wake = ctx.Event()
        self._stop = ctx.Event()
        self._counts = ctx.Array("q", 2)
        self._options = _Options(url, idle_timeout_s, retention_s, review)
        self._process = ctx.Process(
            target=_child,
            args=(self._options, self._wake, self._stop, self._counts, os.getpid()),
            name="agentlens-background",
            daemon=True,
        )

    def start(self) -> None:
        self._process.start()

    def wake(self) -> None:
        """Never blocks, never raises."""
        with contextlib.suppress(Exception):  # must never break the writer
            self._wake.set()

    def counts(self) -> tuple[int, int]:
        """(runs built, runs refused) by the child since it started."""
        return int(self._counts[0]), int(self._counts[1])

    def stop(self, timeout: float = 30.0) -> None:
        """Have the child finish its batch (and build what is ready, briefly) and wait for it."""
        if self._process.pid is None:
            return
        self._stop.set()
        self._wake.set()
        self._process.join(timeout)
        if self._process.is_alive():
            logger.warning("the background process did not stop in %g s; terminating it", timeout)
            self._process.terminate()
            self._process.join(5)


def start_reviewer(store: Any) -> Any:
    """The review pipeline's background reviewer over ``store``, started. It claims the runs it
    reviews (under this process's name), so several servers (and ``agentlens worker``
    processes) on one store share the queue: no run is reviewed twice, and the runs of a
    process that died are reviewed by another after the lease (``review.lease``, 300 s)."""
    import os
    import socket

    from agentlens.review import Reviewer, review_settings

    worker = f"serve:{socket.gethostname()}:{os.getpid()}"
    lease = review_settings().lease  # review.lease, AGENTLENS_REVIEW_LEASE
    return Reviewer(store, interval=1.0, worker=worker, lease_s=lease).start()


def _child(options: _Options, wake: Any, stop: Any, counts: Any, parent: int) -> None:
    """The child's main loop."""
    from agentlens.store import open_store

    with contextlib.suppress(OSError):  # not allowed here: run at the same priority
        os.nice(NICE)
    store: Any = open_store(options.url)
    reviewer: Any = None
    if options.review:
        reviewer = start_reviewer(store)
    metrics = Metrics()
    ingestor = Ingestor(
        store,
        idle_timeout_s=options.idle_timeout_s,
        retention_s=options.retention_s,
        metrics=metrics,
        on_stored=(lambda _ids: reviewer.notify()) if reviewer is not None else None,
    )
    ingestor.start(writer=False)
    try:
        while not stop.is_set() and os.getppid() == parent:
            if wake.wait(0.5):
                wake.clear()
                ingestor.wake()
                if reviewer is not None:
                    reviewer.notify()
            counts[0], counts[1] = metrics.runs_built, metrics.runs_rejected
    finally:
        started = time.monotonic()
        ingestor.shutdown(timeout=10.0)
        counts[0], counts[1] = metrics.runs_built, metrics.runs_rejected
        if reviewer is not None:
            reviewer.shutdown(timeout=max(1.0, 20.0 - (time.monotonic() - started)))
        store.close()
