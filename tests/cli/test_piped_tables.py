"""Tables piped into another program or a file are printed whole, up to 240 columns (docs/cli.md,
Conventions), for every command, even when the command was started from an 80-column terminal:
rich would size them to the terminal it finds on stdin or stderr. Real processes, stdout a pipe,
stdin and stderr an 80-column pseudo-terminal (``agentlens score | awk ...`` in a terminal)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from datetime import UTC, datetime
from pathlib import Path

import pytest

from _cli_process import cli_env
from agentlens.model import Trace
from agentlens.store import open_store

LONG_AGENT = "a-very-long-agent-role-name-for-the-billing-and-refunds-support-team"


def _piped(db: Path, *args: str, columns: int = 80) -> list[str]:
    """The lines ``agentlens --db DB ARGS`` prints into a pipe, started from a terminal of
    ``columns`` columns (its stdin and stderr)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "agentlens", "--db", str(db), *args],
            stdin=follower,
            stdout=subprocess.PIPE,
            stderr=follower,
            env=cli_env(db.parent),
            cwd=db.parent,
            timeout=120,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert proc.returncode == 0
    return proc.stdout.decode().splitlines()


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("piped") / "demo.db"
    _piped(db, "demo")
    return db


@pytest.fixture(scope="module")
def long_agents_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("piped") / "agents.db"
    store = open_store(f"sqlite:///{db}")
    try:
        store.put_traces(
            Trace(
                id=f"r{i:03d}",
                agent=f"{LONG_AGENT}-{i % 3}",
                input="q",
                output="fine",
                started_at=datetime.now(UTC),
            )
            for i in range(30)
        )
    finally:
        store.close()
    _piped(db, "score")
    return db


def test_the_rich_terminal_is_80_columns() -> None:
    # the premise of these tests: rich sizes its console from the pseudo-terminal
    code = "from rich.console import Console; print(Console().width)"
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    try:
        out = subprocess.run(
            [sys.executable, "-c", code],
            stdin=follower,
            stdout=subprocess.PIPE,
            stderr=follower,
            env=cli_env(Path.cwd()),
            timeout=60,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert out.stdout.decode().strip() == "80"


def test_score_prints_its_table_whole(demo_db: Path) -> None:
    lines = _piped(demo_db, "score", "--rescore")
    header = next(i for i, line in enumerate(lines) if line.startswith("run "))
    rows = [line for line in lines[header + 1 :] if line and not line.startswith("scored ")]
    assert rows
    # each (run, scorer) on one line: nothing folded onto a line of its own
    assert all(not line.startswith(" ") for line in rows), "\n".join(lines)
    assert max(len(line) for line in lines) > 80
    assert max(len(line) for line in lines) <= 240
    assert any("no stretch of 5+ steps without new evidence" in line for line in rows)


def test_rate_prints_its_table_whole(long_agents_db: Path) -> None:
    lines = _piped(long_agents_db, "rate", "--by", "agent")
    rows = [line for line in lines if line.startswith(LONG_AGENT)]
    assert len(rows) == 3, "\n".join(lines)
    assert all(row.split()[0] in {f"{LONG_AGENT}-{i}" for i in range(3)} for row in rows)
    header = next(line for line in lines if line.startswith("agent"))
    for column in ("runs", "scored", "flagged", "rate", "95% CI", "apart"):
        assert column in header.split() or column in header, header
    assert all("…" not in line for line in lines)
    assert max(len(line) for line in lines) <= 240


def test_a_terminal_still_gets_its_width(tmp_path: Path) -> None:
    """On a terminal, the terminal's width (the pseudo-terminal as stdout too)."""
    db = tmp_path / "s.db"
    store = open_store(f"sqlite:///{db}")
    try:
        store.put_traces([Trace(id="r1", agent=LONG_AGENT, input="q", output="fine")])
    finally:
        store.close()
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentlens", "--db", str(db), "runs"],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=cli_env(tmp_path),
        cwd=tmp_path,
    )
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal's other end closed: the command is done
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    assert proc.wait(timeout=60) == 0
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.decode())  # the terminal's colours
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines
    assert max(len(line) for line in lines) <= 100
