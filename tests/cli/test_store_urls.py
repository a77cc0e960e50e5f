"""``--db`` values that would quietly keep nothing where the user meant: a store URL missing its
``//`` (it named a file called ``sqlite:team.db``), and a store in memory."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentlens.cli import app
from agentlens.config import parse_store_url
from agentlens.errors import ConfigError


@pytest.mark.parametrize("url", ["sqlite:team.db", "SQLite:/abs/team.db", "postgresql:db"])
def test_a_scheme_without_slashes_is_refused(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match="is not a store URL: it has no '//'"):
        parse_store_url(url)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["--db", url, "runs"])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: --db: {url!r} is not a store URL")
    assert list(tmp_path.iterdir()) == []  # no file called sqlite:team.db


@pytest.mark.parametrize("path", ["team.db", "c:/stores/team.db", "data/2026:11.db"])
def test_paths_with_colons_are_still_paths(path: str) -> None:
    assert parse_store_url(path).sqlite_path == Path(path)


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:"])
def test_a_store_in_memory_is_said_to_keep_nothing(url: str, tmp_path: Path) -> None:
    runs = tmp_path / "one.jsonl"
    runs.write_text('{"id": "a", "output": "x", "steps": []}\n')
    result = CliRunner().invoke(app, ["--db", url, "import", str(runs)])
    assert result.exit_code == 0, result.output
    assert f"note: {url} is a store in memory" in result.stderr
    assert "gone when it ends" in result.stderr
    on_file = CliRunner().invoke(
        app, ["--db", f"sqlite:///{tmp_path / 'k.db'}", "import", str(runs)]
    )
    assert "in memory" not in on_file.stderr
