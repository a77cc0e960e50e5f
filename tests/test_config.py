from __future__ import annotations

from pathlib import Path

import pytest

from agentlens.config import DEFAULT_EVIDENCE, DEFAULT_SCORERS, find_config_file, load_settings
from agentlens.errors import ConfigError


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("AGENTLENS_DB", raising=False)
    monkeypatch.delenv("AGENTLENS_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)


def test_defaults_without_a_file() -> None:
    s = load_settings()
    assert s.db == "sqlite:///agentlens.db"
    assert s.default_scorers == DEFAULT_SCORERS
    assert s.for_agent("anything").evidence == DEFAULT_EVIDENCE
    assert s.source is None


def test_argument_beats_environment_beats_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "agentlens.toml").write_text('db = "sqlite:///file.db"\n')
    assert load_settings().db == "sqlite:///file.db"
    monkeypatch.setenv("AGENTLENS_DB", "sqlite:///env.db")
    assert load_settings().db == "sqlite:///env.db"
    assert load_settings(db="sqlite:///arg.db").db == "sqlite:///arg.db"


def test_pyproject_tool_table_and_agent_overrides(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        """
[project]
name = "x"

[tool.agentlens]
default_scorers = ["no_fabricated_refs"]
evidence = ["input", "tool"]

[tool.agentlens.scorers.no_fabricated_refs]
patterns = ['CUST-\\d{5}']

[tool.agentlens.agents.support]
evidence = ["input", "tool", "retrieval"]

[tool.agentlens.agents.support.scorers.no_fabricated_refs]
kinds = ["id"]
"""
    )
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    assert find_config_file(nested) == tmp_path / "pyproject.toml"
    s = load_settings()
    assert s.default_scorers == ("no_fabricated_refs",)
    assert s.default.evidence == ("input", "tool")
    support = s.for_agent("support")
    assert support.evidence == ("input", "tool", "retrieval")
    # Role options merge over the global ones.
    assert support.scorer_options("no_fabricated_refs") == {
        "patterns": ["CUST-\\d{5}"],
        "kinds": ["id"],
    }
    assert s.for_agent("other").scorer_options("no_fabricated_refs") == {
        "patterns": ["CUST-\\d{5}"]
    }


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("db = 3", "'db' must be a string"),
        ("colour = 'red'", "unknown key 'colour'"),
        ("evidence = ['tool', 'gossip']", "unknown evidence source 'gossip'"),
        ("[agents.x]\nbudget = 3", "agents.x: unknown key 'budget'"),
        ("db = ", "invalid TOML"),
    ],
)
def test_bad_files_name_the_file_and_the_key(tmp_path: Path, text: str, needle: str) -> None:
    (tmp_path / "agentlens.toml").write_text(text)
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert needle in str(info.value)
    assert "agentlens.toml" in str(info.value)


def test_agentlens_config_env_must_exist(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLENS_CONFIG", "/nonexistent/agentlens.toml")
    with pytest.raises(ConfigError, match="no such file"):
        load_settings()
