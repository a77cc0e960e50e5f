"""Read commands open the store read-only: they never create one, refuse another application's
SQLite file untouched, and read a store on read-only media."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import Result

from agentlens.errors import StoreError
from agentlens.model import Trace
from agentlens.store import SQLiteStore, open_store

Invoke = Callable[..., Result]
READS = [["runs"], ["runs", "--json"], ["show", "r1"], ["export"], ["rate"]]


@pytest.mark.parametrize("args", READS, ids=lambda a: " ".join(a))
def test_a_read_on_a_mistyped_path_creates_nothing(
    cli: Invoke, tmp_path: Path, args: list[str]
) -> None:
    missing = tmp_path / "typo.db"
    result = cli(*args, db=str(missing))
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and "does not exist" in result.stderr
    assert str(missing) in result.stderr
    assert not missing.exists()
    assert list(tmp_path.iterdir()) == []


def _foreign(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.execute("INSERT INTO invoices (total) VALUES (12.5)")
    conn.commit()
    conn.close()


def _schema(path: Path) -> tuple[list[str], str]:
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master ORDER BY name")]
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        return tables, mode
    finally:
        conn.close()


@pytest.mark.parametrize(
    "args", [*READS, ["score"], ["import", "IN"], ["delete", "r1"]], ids=lambda a: " ".join(a)
)
def test_another_applications_sqlite_file_is_refused_untouched(
    cli: Invoke, tmp_path: Path, args: list[str]
) -> None:
    other = tmp_path / "app.db"
    _foreign(other)
    before = _schema(other)
    runs = tmp_path / "in.jsonl"
    runs.write_text('{"id": "r1", "input": "q", "output": "a"}\n')
    result = cli(*[str(runs) if a == "IN" else a for a in args], db=str(other))
    assert result.exit_code == 2
    assert "not an agentlens store" in result.stderr and "invoices" in result.stderr
    assert _schema(other) == before == (["invoices"], "delete")


def test_an_empty_database_is_not_read_as_a_store(cli: Invoke, tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    result = cli("runs", db=str(empty))
    assert result.exit_code == 2 and "not an agentlens store" in result.stderr
    assert empty.stat().st_size == 0
    assert cli("import", "-", input='{"id": "r1", "input": "q"}\n', db=str(empty)).exit_code == 0


def test_the_store_api_refuses_a_foreign_file_and_read_only_creates_nothing(
    tmp_path: Path,
) -> None:
    other = tmp_path / "app.db"
    _foreign(other)
    with pytest.raises(StoreError, match="not an agentlens store"):
        open_store(f"sqlite:///{other}")
    with pytest.raises(StoreError, match="does not exist"):
        open_store(f"sqlite:///{tmp_path / 'none.db'}", read_only=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


@pytest.fixture
def read_only_store(tmp_path: Path) -> Iterator[Path]:
    """A store whose file and folder this process cannot write (read-only media): made
    immutable with chattr when running as root (root ignores file modes), else by chmod."""
    folder = tmp_path / "media"
    folder.mkdir()
    path = folder / "agentlens.db"
    with SQLiteStore(f"sqlite:///{path}") as store:
        store.put_traces([Trace(id="r1", agent="a", input="q", output="the answer")])
    root = os.geteuid() == 0
    if root:
        made = subprocess.run(["chattr", "+i", str(path), str(folder)], capture_output=True)
        if made.returncode != 0:
            pytest.skip(f"cannot make a read-only file as root here: {made.stderr!r}")
    else:
        path.chmod(0o444)
        folder.chmod(0o555)
    try:
        yield path
    finally:
        if root:
            subprocess.run(["chattr", "-i", str(path), str(folder)], check=True)
        else:
            folder.chmod(0o755)
            path.chmod(0o644)


def test_a_store_on_read_only_media_is_readable(cli: Invoke, read_only_store: Path) -> None:
    db = str(read_only_store)
    listed = cli("runs", "--json", db=db)
    assert listed.exit_code == 0, listed.output
    assert '"id": "r1"' in listed.stdout
    assert "the answer" in cli("show", "r1", db=db).stdout
    assert cli("export", db=db).exit_code == 0
    written = cli("score", db=db)
    assert written.exit_code == 2 and written.stderr.count("\n") == 1
    assert sorted(p.name for p in read_only_store.parent.iterdir()) == ["agentlens.db"]
