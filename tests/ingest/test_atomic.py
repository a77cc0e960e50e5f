"""The atomic writer of ``export -o`` and ``gate``'s reports: all or nothing, the mode kept, and
every error naming the file the user gave, not the temporary file."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TextIO

import pytest

from agentlens.cli._rate import write_atomic as write_report
from agentlens.ingest._atomic import write_atomic


def _write(text: str):  # type: ignore[no-untyped-def]
    def write(fp: TextIO) -> int:
        fp.write(text)
        return len(text)

    return write


def test_writes_and_keeps_the_replaced_files_mode(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    assert write_atomic(target, _write("one\n")) == 4
    target.chmod(0o600)
    write_atomic(target, _write("two\n"))
    assert target.read_text() == "two\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert os.listdir(tmp_path) == ["out.txt"]


@pytest.mark.parametrize("where", ["missing folder", "a folder"])
def test_errors_name_the_target_not_the_temporary_file(tmp_path: Path, where: str) -> None:
    target = tmp_path / "no" / "out.txt" if where == "missing folder" else tmp_path
    with pytest.raises(OSError) as raised:
        write_atomic(target, _write("x"))
    assert raised.value.filename == str(target)
    assert sorted(os.listdir(tmp_path)) == []


def test_a_failing_write_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")

    def failing(fp: TextIO) -> None:
        fp.write("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left") as raised:
        write_atomic(target, failing)
    assert raised.value.filename == str(target)
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["out.txt"]


def test_a_report_appended_to_keeps_the_old_bytes(tmp_path: Path) -> None:
    """The step summary another step wrote need not be UTF-8: it is kept as it was."""
    summary = tmp_path / "summary.md"
    summary.write_bytes(b"caf\xe9 earlier\n")
    write_report(summary, "## agentlens gate", append=True)
    assert summary.read_bytes() == b"caf\xe9 earlier\n\n## agentlens gate"
    with pytest.raises(IsADirectoryError) as raised:
        write_report(tmp_path, "x")
    assert raised.value.filename == str(tmp_path)
