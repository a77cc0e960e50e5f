"""A configuration file that is not UTF-8 is a user error naming the file, not an internal one."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentlens.config import find_config_file, load_settings
from agentlens.errors import ConfigError


@pytest.mark.parametrize(
    ("content", "where"),
    [
        (b"\xff\xfe", "line 1, column 1"),
        (b'db = "sqlite:///x.db"\n# caf\xe9\n', "line 2, column 6"),
    ],
)
def test_a_config_file_that_is_not_utf8_names_the_file_and_the_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes, where: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_bytes(content)
    monkeypatch.setenv("AGENTLENS_CONFIG", str(path))
    with pytest.raises(ConfigError) as info:
        load_settings()
    text = str(info.value)
    assert text.startswith(f"{path}: not UTF-8 text")
    assert where in text and "\n" not in text


def test_a_found_agentlens_toml_that_is_not_utf8_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTLENS_CONFIG", raising=False)
    (tmp_path / "agentlens.toml").write_bytes(b"\xc3(")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"agentlens\.toml: not UTF-8 text"):
        load_settings()


def test_a_pyproject_toml_that_is_not_utf8_is_not_taken_for_a_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another tool's file: skipped, as a pyproject.toml that is not valid TOML is.
    monkeypatch.delenv("AGENTLENS_CONFIG", raising=False)
    (tmp_path / "pyproject.toml").write_bytes(b"[tool.agentlens]\n# \xff\n")
    (tmp_path / "sub").mkdir()
    assert find_config_file(tmp_path / "sub") is None


def test_the_cli_exits_2_with_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentlens import cli
    from agentlens.cli import _app

    path = tmp_path / "bad6.toml"
    path.write_bytes(b"\xff\xfe")
    monkeypatch.setenv("AGENTLENS_CONFIG", str(path))
    monkeypatch.setenv("AGENTLENS_DEBUG", "0")
    cli.register()
    with pytest.raises(SystemExit) as info:
        _app.main(["--db", f"sqlite:///{tmp_path / 'x.db'}", "runs"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "internal error" not in err and "UnicodeDecodeError" not in err
    assert f"{path}: not UTF-8 text" in err
