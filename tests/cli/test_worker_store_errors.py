"""``agentlens worker`` as a daemon: a store that fails for a while is tried again; Ctrl-C stops it
after the round, as SIGTERM does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from typing import Any

import pytest
from test_runs import support_run

from agentlens.cli._worker import run_worker
from agentlens.config import Settings
from agentlens.errors import SchemaVersionError, StoreError
from agentlens.store import TraceStore, open_store


class _Flaky:
    """A store whose first ``failures`` claims raise ``error`` (a dropped connection)."""

    def __init__(self, store: TraceStore, failures: int, error: Exception) -> None:
        self._store = store
        self.failures = failures
        self.error = error
        self.claims = 0

    def claim_review(self, *args: Any, **kwargs: Any) -> Any:
        self.claims += 1
        if self.claims <= self.failures:
            raise self.error
        return self._store.claim_review(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@pytest.fixture
def store(tmp_path: Any) -> Any:
    s = open_store(f"sqlite:///{tmp_path / 'w.db'}")
    s.put_traces([support_run(f"w-{i}") for i in range(3)])
    yield s
    s.close()


def test_a_store_that_fails_for_a_while_is_tried_again(store: TraceStore) -> None:
    """A PostgreSQL restart (a terminated connection: StoreError) ended every worker with
    exit 2; the worker logs the failed round and tries again, backing off."""
    flaky = _Flaky(store, 2, StoreError("postgresql://db: terminating connection"))
    lines: list[str] = []
    stop = threading.Event()

    def log(line: str) -> None:
        lines.append(line)
        if "reviewed 3 runs" in line:
            stop.set()

    totals = run_worker(
        flaky, name="w", settings=Settings(), interval_s=0.0, score=False, stop=stop, log=log
    )
    assert totals["reviewed"] == 3 and totals["failed_rounds"] == 2
    assert flaky.claims >= 3
    assert store.pending_review() == []
    failed = [line for line in lines if "round failed" in line]
    assert len(failed) == 2 and "terminating connection" in failed[0]
    assert "trying again in 0.5 s" in failed[0] and "trying again in 1 s" in failed[1]


def test_a_store_that_stays_away_ends_a_batch_job_after_idle_exit(store: TraceStore) -> None:
    flaky = _Flaky(store, 10**6, StoreError("gone"))
    with pytest.raises(StoreError, match="gone"):
        run_worker(flaky, name="w", settings=Settings(), interval_s=0.0, idle_exit_s=0.0)


def test_a_store_of_a_newer_schema_is_not_tried_again(store: TraceStore) -> None:
    flaky = _Flaky(store, 10**6, SchemaVersionError("schema 99 is newer than this agentlens"))
    with pytest.raises(SchemaVersionError):
        run_worker(flaky, name="w", settings=Settings(), interval_s=0.0)
    assert flaky.claims == 1


def test_ctrl_c_stops_after_the_round_with_the_summary(tmp_path: Any) -> None:
    """Ctrl-C raised KeyboardInterrupt wherever the worker was (mid-batch) and the summary
    docs/cli.md promises was never printed; like SIGTERM it now stops after the batch."""
    db = f"sqlite:///{tmp_path / 'w.db'}"
    with open_store(db) as s:  # type: ignore[attr-defined]
        s.put_traces([support_run(f"w-{i}") for i in range(2)])
    env = {k: v for k, v in os.environ.items() if k != "AGENTLENS_DB"}
    command = [sys.executable, "-c", "from agentlens.cli import main; main()", "--db", db]
    proc = subprocess.Popen(
        [*command, "worker", "--name", "t3", "--interval", "0.2", "--no-score"],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # the round that reviewed the runs: signals are set
        assert "t3: reviewed 2 runs" in first
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert "t3: stopped after reviewing 2 runs" in err
    assert "Traceback" not in err


class _Deleting:
    """A SQLite store whose file is removed (or replaced) during the first claim."""

    def __init__(self, store: TraceStore, path: Any, replace: bool) -> None:
        self._store = store
        self._path = path
        self._replace = replace
        self.claims = 0

    def claim_review(self, *args: Any, **kwargs: Any) -> Any:
        self.claims += 1
        found = self._store.claim_review(*args, **kwargs)
        if self.claims == 1:
            for suffix in ("", "-wal", "-shm"):
                self._path.with_name(self._path.name + suffix).unlink(missing_ok=True)
            if self._replace:
                open_store(f"sqlite:///{self._path}").close()
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@pytest.mark.parametrize("replace", [False, True])
def test_a_sqlite_file_removed_under_the_worker_ends_it(tmp_path: Any, replace: bool) -> None:
    """SQLite goes on with a file deleted under its path (and a new connection makes an empty
    one there): the worker kept reviewing a store nobody saw, or failed round after round on a
    file without tables, while new runs went to a file it never looked at."""
    path = tmp_path / "w.db"
    store = open_store(f"sqlite:///{path}")
    try:
        store.put_traces([support_run(f"w-{i}") for i in range(2)])
        deleting = _Deleting(store, path, replace)
        lines: list[str] = []
        with pytest.raises(StoreError, match=r"the store's file was (removed|replaced by another)"):
            run_worker(
                deleting,
                name="w",
                settings=Settings(),
                interval_s=0.0,
                idle_exit_s=1.0,
                log=lines.append,
            )
        assert not any("round failed" in line for line in lines)
    finally:
        store.close()
