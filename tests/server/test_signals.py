"""``agentlens serve`` stopped by a signal, as ``timeout``, ``kill -- -PGID`` and systemd's
``KillMode=control-group`` send it: to the whole process group (the server and its background
child alike), or to the server alone. The whole group exits in a bounded time, by the signal
it got (uvicorn re-raises a SIGTERM once it has stopped; a SIGINT is a normal end, status 0),
with nothing on stderr (no leaked-semaphore warning from multiprocessing's resource
tracker), and the write acknowledged just before the signal is in the store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from _process import SRC, free_port

from _otlp_fixtures import request, span
from agentlens.store import open_store

pytestmark = pytest.mark.e2e

STOP_WITHIN_S = 20.0


def _group(pgid: int) -> list[tuple[int, str]]:
    """(pid, state) of the live processes of process group ``pgid`` (zombies left out: they
    have exited, and nobody may reap a zombie reparented to this sandbox's init)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # state ppid pgrp ...
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            found.append((int(entry), fields[0]))
    return found


def _trace() -> tuple[str, dict]:
    trace_id = "5e" * 16
    root = "7a" * 8
    spans = [
        span(trace_id, root, None, "invoke_agent a", 0, 50,
             {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "sig"}),
        span(trace_id, "7b" * 8, root, "execute_tool t", 1, 2,
             {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}),
    ]  # fmt: skip
    return trace_id, request(spans)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize(
    ("sig", "to_group", "status"),
    [
        (signal.SIGTERM, True, -signal.SIGTERM),
        (signal.SIGTERM, False, -signal.SIGTERM),
        (signal.SIGINT, True, 0),  # uvicorn: a Ctrl-C is a normal end
    ],
    ids=["sigterm-group", "sigterm-server", "sigint-group"],
)
def test_signal_stops_the_whole_group_after_the_accepted_writes(
    tmp_path: Path, sig: signal.Signals, to_group: bool, status: int
) -> None:
    db = f"sqlite:///{tmp_path / 'sig.db'}"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYTHONWARNINGS", None)
    err_path = tmp_path / "serve.err"
    with err_path.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", "from agentlens.cli import main; main()", "--db", db,
             "serve", "--port", str(port)],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
            start_new_session=True,  # a process group of its own, as under setsid
        )  # fmt: skip
    pgid = proc.pid
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, err_path.read_text()
            assert time.monotonic() < deadline, "agentlens serve did not start"
            try:
                if httpx.get(url + "/healthz", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        deadline = time.monotonic() + 30
        while len(_group(pgid)) < 2:  # the background child is up (it starts with the app)
            assert time.monotonic() < deadline, _group(pgid)
            time.sleep(0.1)
        time.sleep(1.0)  # the child is in its loop, waiting to be woken

        trace_id, doc = _trace()
        r = httpx.post(url + "/v1/traces", content=json.dumps(doc),
                       headers={"Content-Type": "application/json"}, timeout=10)  # fmt: skip
        assert r.status_code == 200, r.text
        assert not r.json().get("partialSuccess"), r.text

        if to_group:
            os.killpg(pgid, sig)
        else:
            os.kill(proc.pid, sig)
        stopped = time.monotonic() + STOP_WITHIN_S
        try:
            returncode = proc.wait(STOP_WITHIN_S)
        except subprocess.TimeoutExpired:
            returncode = None
        while _group(pgid) and time.monotonic() < stopped:
            time.sleep(0.1)
        left = _group(pgid)
        assert returncode is not None and not left, (
            f"not stopped within {STOP_WITHIN_S} s: server exit {returncode}, "
            f"left in the group {left}; stderr: {err_path.read_text()}"
        )
    finally:
        if _group(pgid):
            os.killpg(pgid, signal.SIGKILL)
        if proc.poll() is None:
            proc.wait(10)

    stderr = err_path.read_text()
    assert "leaked" not in stderr and "Traceback" not in stderr, stderr
    assert returncode == status, (returncode, stderr)
    assert stderr.strip() == "", stderr

    store = open_store(db)
    try:
        rows = store.read(lambda c: c.execute(
            "SELECT span_id FROM otlp_spans WHERE trace_id = ?", (trace_id,)).fetchall())  # fmt: skip
    finally:
        store.close()
    assert sorted(r[0] for r in rows) == ["7a" * 8, "7b" * 8]
