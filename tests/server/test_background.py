"""The background process (:class:`agentlens.server._background.BackgroundProcess`) for real, over
a SQLite file: a signal to it does not stop it (the server does), and the server's ``wake`` and
``stop`` never block on a child that died, was killed, or hangs."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _process import SRC

from agentlens.server._background import BackgroundProcess
from agentlens.store import open_store


@pytest.fixture
def background(tmp_path: Path) -> Iterator[BackgroundProcess]:
    url = f"sqlite:///{tmp_path / 'bg.db'}"
    open_store(url).close()  # migrated before the child opens it
    bg = BackgroundProcess(url, idle_timeout_s=300.0, retention_s=600.0, review=False)
    bg.start()
    try:
        yield bg
    finally:
        pid = bg._process.pid if bg._state != "stopped" else None
        bg.stop(timeout=5)
        if pid is not None:
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)


def _pid(bg: BackgroundProcess) -> int:
    pid = bg._process.pid
    assert pid is not None
    return pid


def _alive(bg: BackgroundProcess) -> bool:
    return bool(bg._process.is_alive())


def _timed(fn: object) -> float:
    started = time.monotonic()
    fn()  # type: ignore[operator]
    return time.monotonic() - started


def test_sigint_and_sigterm_leave_the_child_to_the_server(background: BackgroundProcess) -> None:
    time.sleep(2.0)  # past its start-up: in its loop, signals ignored
    os.kill(_pid(background), signal.SIGTERM)
    os.kill(_pid(background), signal.SIGINT)
    time.sleep(1.0)
    assert _alive(background)
    background.wake()
    assert _timed(background.stop) < 10
    assert background.exitcode == 0
    background.stop()  # a second stop does nothing


def test_wake_and_stop_do_not_block_on_a_killed_child(
    background: BackgroundProcess, caplog: pytest.LogCaptureFixture
) -> None:
    time.sleep(2.0)
    os.kill(_pid(background), signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _alive(background) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(background)
    with caplog.at_level(logging.WARNING, logger="agentlens.server"):
        assert _timed(lambda: [background.wake() for _ in range(100_000)]) < 10  # EPIPE
    gone = [r.getMessage() for r in caplog.records if "has exited" in r.getMessage()]
    assert gone == ["the background process has exited (exit code -9): runs are not built or "
                    "reviewed until the server restarts"]  # fmt: skip
    assert _timed(background.stop) < 2
    assert background.exitcode == -signal.SIGKILL


def test_stop_kills_a_child_that_does_not_stop(background: BackgroundProcess) -> None:
    time.sleep(1.0)
    os.kill(_pid(background), signal.SIGSTOP)  # hangs: it reads nothing any more
    for _ in range(200_000):  # fills the pipe: wake() must still not block
        background.wake()
    assert _timed(lambda: background.stop(timeout=1.0)) < 8
    assert background.exitcode == -signal.SIGKILL


def test_stop_before_start(tmp_path: Path) -> None:
    bg = BackgroundProcess(f"sqlite:///{tmp_path / 'never.db'}", idle_timeout_s=1.0,
                           retention_s=1.0, review=False)  # fmt: skip
    bg.wake()
    bg.stop()
    bg.start()  # stopped: not started again
    assert bg._process.pid is None


def test_an_exit_without_stop_stops_the_child(tmp_path: Path) -> None:
    """A program that started the process and exits without stop() exits (multiprocessing's own
    exit handler would wait forever for a child that ignores its SIGTERM), and so does the
    child."""
    url = f"sqlite:///{tmp_path / 'exit.db'}"
    open_store(url).close()
    pid_file = tmp_path / "child.pid"
    script = (
        "import sys\n"
        "from agentlens.server._background import BackgroundProcess\n"
        "if __name__ == '__main__':\n"
        f"    bg = BackgroundProcess({url!r}, idle_timeout_s=300.0, retention_s=600.0,"
        " review=False)\n"
        "    bg.start()\n"
        f"    open({str(pid_file)!r}, 'w').write(str(bg._process.pid))\n"
        "    import time; time.sleep(2.0)\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    path = tmp_path / "exits.py"
    path.write_text(script)
    try:
        result = subprocess.run([sys.executable, str(path)], env=env, capture_output=True,
                                text=True, timeout=30)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("the program did not exit: it waits for its background process")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _running(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(child)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")
