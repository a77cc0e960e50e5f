"""A closed pipe is a normal end for every command (docs/cli.md, Conventions): `agentlens show ID
| head -1` exits 0 and prints nothing more, whether the command prints through rich (tables,
trees) or writes JSON itself. Real processes and real pipes: one whose reader is gone before the
command prints anything, and one whose reader takes a line and goes (``| head -1``)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from _cli_process import cli_env
from agentlens.model import Step, Trace
from agentlens.store import open_store

_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with one long run (``big``: hundreds of steps) and 150 small ones, scored."""
    db = tmp_path_factory.mktemp("pipe") / "s.db"
    big = Trace(
        id="big",
        agent="a",
        input="q",
        output="the invoice INV-1 is paid",
        steps=[
            Step(id=f"s{i}", kind="tool", name="get_invoice", input={"n": i}, output={"id": i})
            for i in range(400)
        ],
    )
    small = [
        Trace(id=f"r{i:04d}", agent="a", input="q", output=f"customer CUST-{i:05d} is fine")
        for i in range(150)
    ]
    s = open_store(f"sqlite:///{db}")
    try:
        s.put_traces([big, *small])
    finally:
        s.close()
    subprocess.run(
        [sys.executable, "-m", "agentlens", "--db", str(db), "score"],
        env=cli_env(db.parent),
        cwd=db.parent,
        capture_output=True,
        check=True,
        timeout=120,
    )
    return db


_COMMANDS = [
    ["show", "big"],
    ["rate", "--by", "mode"],
    ["rate"],
    ["score", "--rescore"],
    ["demo"],
    ["runs"],
    ["runs", "--json"],
    ["export"],
    ["schema"],
    ["review", "queue"],
]


def _cmd(db: Path, args: list[str]) -> list[str]:
    return [sys.executable, "-m", "agentlens", "--db", str(db), *args]


@pytest.mark.parametrize("args", _COMMANDS, ids=" ".join)
def test_a_reader_gone_before_any_output(store: Path, tmp_path: Path, args: list[str]) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone: the command's first write meets a closed pipe
    try:
        proc = subprocess.run(
            _cmd(store, args),
            stdout=write,
            stderr=subprocess.PIPE,
            env=cli_env(tmp_path),
            cwd=tmp_path,
            timeout=120,
        )
    finally:
        os.close(write)
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "Error" not in err and "error" not in err, err


def _read_line(fd: int) -> bytes:
    """One line, read a byte at a time (nothing more is taken from the pipe)."""
    line = b""
    while not line.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            break
        line += byte
    return line


@pytest.mark.parametrize(
    "args", [["show", "big"], ["score", "--rescore"], ["runs"], ["export"]], ids=" ".join
)
def test_a_reader_that_takes_one_line_and_goes(
    store: Path, tmp_path: Path, args: list[str]
) -> None:
    """`| head -1`: the pipe (made as small as Linux allows) fills while the reader takes its
    line; the reader then closes it, and the command's next write meets the closed pipe."""
    read, write = os.pipe()
    with contextlib.suppress(OSError):  # not Linux: the default pipe is still too small
        fcntl.fcntl(write, _F_SETPIPE_SZ, 4096)
    proc = subprocess.Popen(
        _cmd(store, args), stdout=write, stderr=subprocess.PIPE, env=cli_env(tmp_path), cwd=tmp_path
    )
    os.close(write)
    try:
        assert _read_line(read)  # the command printed its first line
    finally:
        os.close(read)
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 0, err
    assert "Traceback" not in err and "Error" not in err, err


def test_the_store_is_written_whole_when_the_reader_goes(tmp_path: Path) -> None:
    """A command that writes the store does its work to the end when its reader goes: the demo
    records its four runs with nowhere to print."""
    db = tmp_path / "demo.db"
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            _cmd(db, ["demo"]),
            stdout=write,
            stderr=subprocess.PIPE,
            env=cli_env(tmp_path),
            cwd=tmp_path,
            timeout=120,
        )
    finally:
        os.close(write)
    assert proc.returncode == 0, proc.stderr.decode()
    s = open_store(f"sqlite:///{db}", read_only=True)
    try:
        assert len(list(s.list_runs())) == 4
    finally:
        s.close()
