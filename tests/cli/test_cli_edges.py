"""Smaller edges of the command line, run as real processes where the edge is the process:
a closed pipe, Ctrl-C, --version, export's file mode, an empty --markdown."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import Result

import agentlens
from agentlens.model import Trace
from agentlens.store import open_store

Invoke = Callable[..., Result]
SRC = str(Path(agentlens.__file__).resolve().parents[1])


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("AGENTLENS_DEBUG", None)
    return env


def _seed(db: Path, n: int = 300) -> None:
    store = open_store(f"sqlite:///{db}")
    try:
        store.put_traces(
            [Trace(id=f"r{i:04d}", agent="a", input="q", output="x" * 2000) for i in range(n)]
        )
    finally:
        store.close()


@pytest.mark.parametrize("args", [["runs", "--json"], ["export"], ["runs"]])
def test_a_closed_pipe_is_a_normal_end(tmp_path: Path, args: list[str]) -> None:
    db = tmp_path / "s.db"
    _seed(db)
    cmd = [sys.executable, "-m", "agentlens", "--db", str(db), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # what `| head -1` does
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=60) == 0, err
    assert "Traceback" not in err and "Error" not in err


_STARTER = (
    "import sys; from agentlens.__main__ import main; sys.stderr.write('ready\\n'); "
    "sys.stderr.flush(); sys.argv[0] = 'agentlens'; main()"
)
"""The entry point as the console script runs it, after telling the test that the interpreter
is up and the entry module (``agentlens/__init__`` and ``__main__``, a few milliseconds) is
imported: a Ctrl-C before that lands in Python's own start-up, which no program can catch."""


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15, 0.3])
def test_ctrl_c_early_prints_no_traceback(tmp_path: Path, delay: float) -> None:
    db = tmp_path / "s.db"
    _seed(db, 5)
    cmd = [sys.executable, "-c", _STARTER, "--db", str(db), "runs"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    assert proc.stderr is not None
    assert proc.stderr.readline() == b"ready\n"
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err.decode(), err.decode()
    assert proc.returncode in (0, 130), err.decode()  # 0 when it had already finished


def test_version(cli: Invoke) -> None:
    result = cli("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"agentlens {agentlens.__version__}"


def test_export_to_an_existing_file_keeps_its_mode(
    cli: Invoke, db_url: str, tmp_path: Path
) -> None:
    store = open_store(db_url)
    store.put_traces([Trace(id="r1", input="q", output="a")])
    store.close()
    out = tmp_path / "runs.jsonl"
    out.write_text("old\n")
    out.chmod(0o640)
    assert cli("export", "-o", str(out)).exit_code == 0
    assert out.stat().st_mode & 0o777 == 0o640
    assert json.loads(out.read_text())["id"] == "r1"
    fresh = tmp_path / "new.jsonl"
    old = os.umask(0o022)
    try:
        assert cli("export", "-o", str(fresh)).exit_code == 0
    finally:
        os.umask(old)
    assert fresh.stat().st_mode & 0o777 == 0o644


def test_the_readme_ci_recipe_works_without_github_step_summary(
    cli: Invoke, db_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.chdir(tmp_path)
    store = open_store(db_url)
    store.put_traces([Trace(id="r1", input="q", output="fine", started_at=datetime.now(UTC))])
    store.close()
    assert cli("score", "--since", "1d").exit_code == 0
    # The README's recipe, with "$GITHUB_STEP_SUMMARY" expanded by a shell where it is unset.
    result = cli(
        "gate", "--since", "1d", "--max-rate", "0.05", "--junit", "gate.xml", "--markdown", ""
    )
    assert result.exit_code in (0, 1), result.output
    assert "internal error" not in result.stderr and "Is a directory" not in result.stderr
    assert "no Markdown summary written" in result.stderr
    assert (tmp_path / "gate.xml").exists()


def test_a_ctrl_c_once_the_command_has_finished_is_ignored(tmp_path: Path) -> None:
    # Python's shutdown puts the default SIGINT disposition back for any handler but "ignore":
    # a Ctrl-C in the last milliseconds used to kill a command that had done its work (-2)
    db = tmp_path / "s.db"
    _seed(db, 2)
    code = (
        "import os, signal, sys; from agentlens.__main__ import main; "
        "sys.argv = ['agentlens', '--db', sys.argv[1], 'runs']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "sys.stdout.flush(); os.kill(os.getpid(), signal.SIGINT)\n"
        "print('still here', signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(db)], capture_output=True, text=True, env=_env()
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip().endswith("still here True")
    assert "r0001" in proc.stdout  # the command ran
