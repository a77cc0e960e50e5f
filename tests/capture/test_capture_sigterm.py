"""SIGTERM (``docker stop``, Kubernetes) writes the queued runs before the process ends, and
chains to the handler the host installed (issue 12 item 7). Each case runs in a subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentlens.model import Trace
from agentlens.store import open_store

_SRC = str(Path(__file__).resolve().parents[2] / "src")

_AGENT = textwrap.dedent(
    """
    import signal, sys, threading, time
    import agentlens

    mode, url, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if mode == "host-handler":
        def host(signum, frame):
            print("host handler ran", flush=True)
            sys.exit(3)
        signal.signal(signal.SIGTERM, host)
    elif mode == "ignored":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # a long interval and big batches: nothing is exported before the signal
    agentlens.configure(db=url, flush_interval=3600, batch_size=count, max_queue=count + 10)
    for i in range(count):
        with agentlens.run(agent="a", input=i) as run:
            run.output = "x"
    print("ready", flush=True)
    time.sleep(60 if mode != "ignored" else 3)
    print("still running", flush=True)
    """
)


def _agent(mode: str, url: str, count: int) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLENS_")}
    env["PYTHONPATH"] = _SRC
    proc = subprocess.Popen(
        [sys.executable, "-c", _AGENT, mode, url, str(count)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _count(db: Path) -> int:
    """Runs kept: written to the store, or spilled next to it (sent by the next start) when
    the handler's time ran out before the store took them all."""
    store = open_store(f"sqlite:///{db}")
    try:
        ids = {t.id for t in store.query_traces(limit=100_000)}
    finally:
        store.close()
    for spilled in Path(f"{db}-spill").glob("*.jsonl"):
        ids.update(Trace.from_json(line).id for line in spilled.read_text().splitlines())
    return len(ids)


@pytest.mark.timeout(120)
def test_sigterm_exports_the_queued_runs_then_ends_as_killed_by_it(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    proc = _agent("default", f"sqlite:///{db}", 3000)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == -signal.SIGTERM  # the default action, as without agentlens
    assert proc.stdout is not None and proc.stdout.read() == ""
    proc.stdout.close()
    assert _count(db) == 3000


@pytest.mark.timeout(120)
def test_sigterm_chains_to_the_host_handler_after_flushing(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    proc = _agent("host-handler", f"sqlite:///{db}", 500)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 3
    assert proc.stdout is not None and "host handler ran" in proc.stdout.read()
    proc.stdout.close()
    assert _count(db) == 500


@pytest.mark.timeout(120)
def test_an_ignored_sigterm_stays_ignored_but_flushes(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    proc = _agent("ignored", f"sqlite:///{db}", 200)
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "still running"
    assert proc.wait(60) == 0
    proc.stdout.close()
    assert _count(db) == 200


def test_configuring_from_another_thread_installs_nothing_and_raises_nothing() -> None:
    code = textwrap.dedent(
        """
        import signal, threading, agentlens
        t = threading.Thread(target=lambda: agentlens.configure(db="sqlite:///:memory:"))
        t.start(); t.join()
        print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLENS_")}
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "PYTHONPATH": _SRC},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"
