"""The server's background stage in a process of its own: the assembler and the reviewer.

Request handlers and the writer thread only stage what they acknowledge (a cheap, durable
append). Building runs from the staged spans and reviewing them is most of the CPU a span
costs, so ``agentlens serve`` runs that part in a child process over the same store (SQLite's
WAL lets both processes write, one transaction at a time; PostgreSQL claims rows): the two
share the machine's cores instead of one interpreter lock, and the child runs at a lower
scheduling priority (``nice`` +19, the lowest), so under a burst the request path keeps its
throughput and the review lag grows instead (it is reported on ``/metrics``; the staged spans wait on disk).

The child's lifetime is the server's. It ignores SIGINT and SIGTERM, so that a signal sent to
the whole process group (Ctrl-C in a terminal, ``timeout``, ``kill -- -PGID``, systemd's
``KillMode=control-group``) stops the server, which then stops the child in order: the server
wakes the child through a pipe and stops it by closing the pipe's end (so the child also stops
at once when the server died, however it died); the child finishes its batch, builds what is
ready (briefly) and exits. Nothing is shared that a dying process could leave locked: the
server's writes to the pipe never block, its stop waits a bounded time and then kills the child,
and no semaphore is created (none to leak, none for multiprocessing's resource tracker to
report at exit). Whatever the child had not built yet is built by the next process that
assembles the store (the build of a run and the mark of its spans are one transaction).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import multiprocessing
import os
import signal
import threading
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
    (``runs_built``, ``runs_rejected``) for ``/metrics``; :meth:`stop` stops it.
    """

    def __init__(
        self, url: str, *, idle_timeout_s: float, retention_s: float, review: bool
    ) -> None:
        ctx = multiprocessing.get_context("spawn")
        # A pipe, not a multiprocessing Event: an Event's set() waits, without a timeout, for
        # every process counted as waiting on it to wake up, so a child killed while it waited
        # (a SIGTERM to the process group) blocked the server's stop forever. A write to a
        # non-blocking pipe cannot block, and closing it is the stop: the child reads EOF.
        self._wake_r, self._wake_w = ctx.Pipe(duplex=False)
        os.set_blocking(self._wake_w.fileno(), False)
        self._lock = threading.Lock()  # wake() (the writer thread) against stop()'s close
        self._gone = False  # the child is gone: said once
        self._counts = ctx.Array("q", 2, lock=False)  # written by the child only: no semaphore
        self._options = _Options(url, idle_timeout_s, retention_s, review)
        self._process = ctx.Process(
            target=_child,
            args=(self._options, self._wake_r, self._counts, os.getpid()),
            name="agentlens-background",
            daemon=True,
        )
        self._state = "new"  # -> "started" -> "stopped"
        self.exitcode: int | None = None
        """The child's exit code once :meth:`stop` returned (negative: the signal it died of)."""

    def start(self) -> None:
        if self._state != "new":
            return
        self._process.start()
        self._state = "started"
        self._wake_r.close()  # the child has its own copy
        # At an exit without stop() (an app never closed), stop the child in order before
        # multiprocessing's own exit handler (atexit runs the last registered first): that one
        # sends SIGTERM, which the child ignores, then would wait for it forever.
        atexit.register(self.stop)

    def wake(self) -> None:
        """Never blocks, never raises."""
        with self._lock:
            if self._wake_w.closed:
                return
            try:
                os.write(self._wake_w.fileno(), b"w")
            except BlockingIOError:
                pass  # the pipe is full of wake-ups the child has not read yet: it is awake
            except OSError:  # must never break the writer; EPIPE: the child is gone
                if not self._gone:
                    self._gone = True
                    logger.warning(
                        "the background process has exited (exit code %s): runs are not "
                        "built or reviewed until the server restarts", self._process.exitcode,
                    )  # fmt: skip

    def counts(self) -> tuple[int, int]:
        """(runs built, runs refused) by the child since it started."""
        return int(self._counts[0]), int(self._counts[1])

    def stop(self, timeout: float = 30.0) -> None:
        """Have the child finish its batch (and build what is ready, briefly) and wait for it,
        ``timeout`` seconds at most: then it is killed. Returns at once when the child is
        already gone; a second call does nothing."""
        with self._lock:
            self._wake_w.close()  # the child reads EOF: stop
        if self._state != "started":
            self._wake_r.close()
            self._state = "stopped"
            return
        self._state = "stopped"
        atexit.unregister(self.stop)
        self._process.join(timeout)
        if self._process.is_alive():
            # It ignores SIGTERM (the server tells it when to stop), so SIGKILL.
            logger.warning("the background process did not stop in %g s; killing it", timeout)
            self._process.kill()
            self._process.join(5)
        self.exitcode = self._process.exitcode


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


def _child(options: _Options, wake: Any, counts: Any, parent: int) -> None:
    """The child's main loop."""
    # The server stops this process (by closing the pipe) when a signal stops the server: a
    # SIGINT or SIGTERM sent to the whole process group must not kill it in the middle.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
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
        while os.getppid() == parent:  # the parent changed: the server died
            if wake.poll(0.5):
                if not os.read(wake.fileno(), 65536):
                    break  # EOF: the server closed its end (it stops, or it died)
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
        wake.close()
