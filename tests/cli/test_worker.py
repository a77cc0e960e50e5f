"""``agentlens worker``: reviews and scores pending runs without HTTP; stops cleanly on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from test_runs import support_run

from agentlens.store import open_store


def test_worker_reviews_and_scores_then_exits_when_idle(cli, db_url: str) -> None:  # type: ignore[no-untyped-def]
    store = open_store(db_url)
    store.put_traces([support_run(f"w-{i}") for i in range(5)])
    store.close()
    result = cli("worker", "--name", "t1", "--interval", "0.1", "--idle-exit", "0.5")
    assert result.exit_code == 0, result.output
    assert "t1: stopped after reviewing 5 runs" in result.output
    store = open_store(db_url)
    try:
        assert store.pending_review() == []
        # scored by the review scorers: flags derived
        assert all(store.get_flags(f"w-{i}") is not None for i in range(5))
    finally:
        store.close()


def test_worker_stops_on_sigterm(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'w.db'}"
    env = {k: v for k, v in os.environ.items() if k != "AGENTLENS_DB"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from agentlens.cli import main; main()",
            "--db",
            db,
            "worker",
            "--name",
            "t2",
            "--interval",
            "0.2",
        ],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (tmp_path / "w.db").exists():
            time.sleep(0.1)
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert "t2: stopped after reviewing 0 runs" in err
