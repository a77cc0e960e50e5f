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
        ("db = 3", "db must be a string"),
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


# --------------------------------------------------------------------------- the settings table


def test_every_setting_is_one_documented_row() -> None:
    from agentlens.config import SETTINGS

    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names))
    envs = [s.env for s in SETTINGS if s.env]
    assert len(envs) == len(set(envs)) and all(e.startswith("AGENTLENS_") for e in envs)
    doc = (Path(__file__).parents[1] / "docs" / "configuration.md").read_text(encoding="utf-8")
    for row in SETTINGS:
        assert row.doc, row.name
        if row.env:
            assert f"`{row.env}`" in doc, f"{row.env} is not in docs/configuration.md"
        if row.key:
            assert f"`{row.key}`" in doc, f"file key {row.key} is not in docs/configuration.md"


def test_the_settings_table_in_the_docs_is_the_code_s() -> None:
    """docs/configuration.md holds :func:`settings_table` verbatim: every row's argument,
    variable, key, type, default and meaning as :data:`SETTINGS` says (paste it when a row
    changes)."""
    from agentlens.config import settings_table

    doc = (Path(__file__).parents[1] / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert settings_table() in doc


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("0", False), ("1", True), ("false", False), ("TRUE", True), ("off", False), ("yes", True)],
)
def test_booleans_are_parsed_one_way(
    monkeypatch: pytest.MonkeyPatch, raw: str, expected: bool
) -> None:
    from agentlens.config import env_flag

    monkeypatch.setenv("AGENTLENS_DEBUG", raw)
    monkeypatch.setenv("AGENTLENS_DISABLED", raw)
    settings = load_settings()
    assert settings.debug is expected and settings.disabled is expected
    assert env_flag("AGENTLENS_DEBUG") is expected


def test_a_bad_boolean_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLENS_DISABLED", "maybe")
    with pytest.raises(ConfigError, match="AGENTLENS_DISABLED: expected a boolean"):
        load_settings()


def test_the_cli_keeps_tracebacks_hidden_when_debug_is_0(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentlens import cli
    from agentlens.cli import _app

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    cli.register()  # every command registered on the real app first, as a run of the suite has
    monkeypatch.setattr(_app, "app", boom)
    monkeypatch.setenv("AGENTLENS_DEBUG", "0")
    with pytest.raises(SystemExit) as info:
        _app.main([])
    assert info.value.code == 1
    assert "internal error: RuntimeError: a bug" in capsys.readouterr().err
    monkeypatch.setenv("AGENTLENS_DEBUG", "1")
    with pytest.raises(RuntimeError):
        _app.main([])


def test_the_store_url_is_parsed_once_and_keeps_its_backend(tmp_path: Path) -> None:
    import pickle

    from agentlens.config import StoreURL, parse_store_url

    settings = load_settings(db="runs.db")
    assert isinstance(settings.db, StoreURL) and settings.db == "sqlite:///runs.db"
    assert settings.db.backend == "sqlite" and settings.store_url is settings.db
    assert pickle.loads(pickle.dumps(settings)).db.backend == "sqlite"  # to worker processes
    assert parse_store_url("postgresql://u:pw@host/db").backend == "postgresql"
    with pytest.raises(ConfigError, match=r"--db.*unknown store URL scheme 'mysql'"):
        load_settings(db="mysql://u:secret@host/db")
    with pytest.raises(ConfigError) as info:
        load_settings(db="mysql://u:secret@host/db")
    assert "secret" not in str(info.value)
    (tmp_path / "agentlens.toml").write_text('db = "sqlite://host/x.db"\n')
    with pytest.raises(ConfigError, match=r"agentlens.toml: db: .*has no host"):
        load_settings()


def test_origins_say_where_each_value_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "agentlens.toml").write_text('db = "file.db"\n[judge]\nmodel = "m"\n')
    monkeypatch.setenv("AGENTLENS_JUDGE_MODE", "strict")
    s = load_settings(arguments={"judge.backend": "openai"})
    assert s.origin("db").endswith("agentlens.toml: db")
    assert s.origin("judge.mode") == "AGENTLENS_JUDGE_MODE"
    assert s.origin("judge.backend") == "argument"
    assert s.origin("judge.timeout") == "default"
    assert s.judge == {"backend": "openai", "model": "m", "mode": "strict"}
    assert s.judge_from_file("model") and not s.judge_from_file("mode")


def test_a_file_cannot_choose_the_key_variable(tmp_path: Path) -> None:
    (tmp_path / "agentlens.toml").write_text('[judge]\napi_key_env = "AWS_SECRET_ACCESS_KEY"\n')
    with pytest.raises(ConfigError, match=r"agentlens.toml: \[judge\] api_key_env: .*cannot"):
        load_settings()
    (tmp_path / "agentlens.toml").write_text('[judge]\napi_key = "sk-123"\n')
    with pytest.raises(ConfigError, match=r"\[judge\] api_key: .*cannot hold"):
        load_settings()
