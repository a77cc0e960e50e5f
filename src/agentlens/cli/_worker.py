"""``agentlens worker``: review and re-score stored runs in the background, without serving HTTP.

Each round: review the pending runs (claimed under this worker's name with a lease, so any number
of workers and ``agentlens serve`` processes share the queue, and the runs of a worker that died
are reviewed by another once its lease runs out), then score what the default scorers at their
current versions have not scored yet (``--no-score`` leaves that out), then merge the rate
rollups' new rows (PostgreSQL). Between rounds with nothing to do it sleeps ``--interval``
seconds. SIGTERM or Ctrl-C stops it after the batch in hand, with a summary (a second Ctrl-C
stops it at once; what a batch stored is kept; runs claimed and not reviewed go back to the
queue when their lease runs out).
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from agentlens.cli._app import app, err_console, state
from agentlens.cli._util import command, command_store
from agentlens.errors import AgentlensError, SchemaVersionError, StoreError

__all__ = ["run_worker", "worker"]

_MAX_BACKOFF = 60.0
"""Seconds between two tries at most while the store keeps failing."""
_RETRIED = (StoreError, sqlite3.Error, OSError)
"""What a failed round raises when the store is unavailable: tried again, not fatal."""


def run_worker(
    store: Any,
    *,
    name: str,
    settings: Any,
    lease_s: float = 300.0,
    batch: int = 64,
    interval_s: float = 2.0,
    score: bool = True,
    stop: threading.Event | None = None,
    idle_exit_s: float | None = None,
    log: Any = None,
) -> dict[str, int]:
    """The worker loop; returns the totals (``reviewed``, ``flagged``, ``scored``, ``rounds``,
    ``failed_rounds``).

    ``stop``: set it to stop after the current round. ``idle_exit_s``: return once nothing was
    to be done for that long (for batch jobs and tests). A round the store fails (a
    :class:`~agentlens.errors.StoreError`, a SQLite or OS error: a dropped connection, a
    database restarting) is logged and tried again after a backoff (from ``interval_s``,
    doubled each time, at most 60 s), not raised; a store migrated by a newer agentlens is, and
    with ``idle_exit_s`` so is a failure that lasted that long. So is a SQLite store whose file
    was removed or replaced while the worker ran (it would review a file nobody sees)."""
    from agentlens.eval._runner import score_runs
    from agentlens.review import review_pending_result, review_settings

    review = review_settings(settings)
    stop = stop or threading.Event()
    totals = {"reviewed": 0, "flagged": 0, "scored": 0, "rounds": 0, "failed_rounds": 0}
    idle_since = time.monotonic()
    failures = 0
    watched = _StoreFile.of(store)
    try:
        while not stop.is_set():
            if watched is not None:
                watched.check()
            try:
                result = review_pending_result(
                    store,
                    settings=settings,
                    review=review,
                    batch_size=batch,
                    worker=name,
                    lease_s=lease_s,
                    deadline_s=max(lease_s / 2, 1.0),
                )
                scored = 0
                if score and not stop.is_set():
                    scored = score_runs(store, None, settings=settings).scored_runs
                compact = getattr(store, "compact_rollups", None)
                if callable(compact):
                    compact()
            except _RETRIED as exc:
                if watched is not None:
                    watched.check()  # a file removed under it: that is the error to report
                # the store went away for a while (PostgreSQL restarted or failed over, a dropped
                # connection, a locked or unreachable file): a worker is a daemon, so it says so
                # and tries again, backing off, instead of exiting; its claims expire meanwhile
                if isinstance(exc, SchemaVersionError):
                    raise  # migrated by a newer agentlens: trying again cannot help
                if idle_exit_s is not None and time.monotonic() - idle_since >= idle_exit_s:
                    raise  # a batch job does not wait for ever on a store that stays away
                failures += 1
                totals["failed_rounds"] += 1
                wait = min(_MAX_BACKOFF, max(interval_s, 0.5) * 2 ** (failures - 1))
                if log is not None:
                    log(f"{name}: round failed, trying again in {wait:g} s: {exc}")
                stop.wait(wait)
                continue
            failures = 0
            totals["rounds"] += 1
            totals["reviewed"] += result.reviewed
            totals["flagged"] += result.flagged
            totals["scored"] += scored
            if result.reviewed or scored:
                idle_since = time.monotonic()
                if log is not None:
                    log(
                        f"{name}: reviewed {result.reviewed} runs ({result.flagged} flagged), scored {scored}"
                    )
                continue
            if idle_exit_s is not None and time.monotonic() - idle_since >= idle_exit_s:
                break
            stop.wait(interval_s)
    finally:
        if watched is not None:
            watched.release()
    return totals


class _StoreFile:
    """The file of a SQLite store, as it was when the worker started.

    A SQLite connection keeps reading and writing a file that was deleted (or replaced by
    another) under its path, and a new connection creates an empty one there: the worker would
    go on reviewing a store nobody else sees, or fail on a file without tables, round after
    round. So each round first checks that the path is still the file it opened, which is held
    open meanwhile (so that its inode number cannot be given to a new file)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd
        found = os.fstat(fd)
        self.identity = (found.st_dev, found.st_ino)

    @classmethod
    def of(cls, store: Any) -> _StoreFile | None:
        url = getattr(store, "url", None)
        if not isinstance(url, str) or not url.startswith("sqlite:"):
            return None
        from agentlens.config import parse_store_url

        try:
            path = parse_store_url(url).sqlite_path
            if path is None:
                return None
            path = path.absolute()
            return cls(path, os.open(path, os.O_RDONLY))
        except (AgentlensError, OSError):
            return None

    def release(self) -> None:
        """Let go of the file held open (not a store: stores are closed by command_store)."""
        os.close(self._fd)

    def check(self) -> None:
        """Raises: StoreError: the file was removed, or another file is at its path."""
        try:
            found = self.path.stat()
        except FileNotFoundError:
            what = "was removed"
        else:
            if (found.st_dev, found.st_ino) == self.identity:
                return
            what = "was replaced by another file"
        raise StoreError(
            f"{self.path}: the store's file {what} while the worker ran; start it again"
        )


@command(app)
def worker(
    name: Annotated[
        str | None,
        typer.Option(
            "--name", help="This worker's name in claims (default: HOST:PID).", metavar="NAME"
        ),
    ] = None,
    lease: Annotated[
        float,
        typer.Option(
            "--lease",
            help="Seconds a claim holds before another worker may take the runs.",
            min=1.0,
        ),
    ] = 300.0,
    batch: Annotated[int, typer.Option("--batch", help="Runs claimed per round.", min=1)] = 64,
    interval: Annotated[
        float,
        typer.Option("--interval", help="Seconds to sleep when there is nothing to do.", min=0.0),
    ] = 2.0,
    score: Annotated[
        bool,
        typer.Option("--score/--no-score", help="Also score what the default scorers have not."),
    ] = True,
    idle_exit: Annotated[
        float | None,
        typer.Option(
            "--idle-exit", help="Exit after this many seconds with nothing to do.", metavar="S"
        ),
    ] = None,
) -> None:
    """Review and re-score stored runs until stopped (SIGTERM or Ctrl-C), without HTTP.

    Any number of workers (and `agentlens serve` processes) can share one store: each claims its
    runs for --lease seconds, so no run is reviewed twice and the runs of a worker that died are
    reviewed by another after the lease.
    """
    settings = state.settings()
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        if signum == signal.SIGINT and stop.is_set():
            raise KeyboardInterrupt  # a second Ctrl-C: stop now, not after the batch
        stop.set()

    who = name or f"{socket.gethostname()}:{os.getpid()}"
    with command_store() as store:
        # Ctrl-C as SIGTERM: stop after the batch in hand, with the summary
        previous = signal.signal(signal.SIGTERM, on_signal)
        previous_int = signal.signal(signal.SIGINT, on_signal)
        try:
            totals = run_worker(
                store,
                name=who,
                settings=settings,
                lease_s=lease,
                batch=batch,
                interval_s=interval,
                score=score,
                stop=stop,
                idle_exit_s=idle_exit,
                log=lambda line: err_console.print(line, markup=False),
            )
        except KeyboardInterrupt:
            totals = None
        finally:
            signal.signal(signal.SIGTERM, previous)
            signal.signal(signal.SIGINT, previous_int)
    if totals is not None:
        err_console.print(
            f"{who}: stopped after reviewing {totals['reviewed']} runs"
            f" ({totals['flagged']} flagged) and scoring {totals['scored']}",
            markup=False,
        )
