"""``agentlens worker`` when its store fails for a while: a daemon tries again, it does not exit."""

from __future__ import annotations

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
