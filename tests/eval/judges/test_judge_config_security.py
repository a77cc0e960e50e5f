"""A configuration file must not choose which secret is sent where (issue 12, item 9)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from llm_fakes import FakeLLM, openai_reply, verdicts_json

from agentlens.config import load_settings
from agentlens.errors import ConfigError
from agentlens.eval.judges import get_judge, judge_from_settings
from agentlens.eval.judges._llm import LLMJudge


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in (
        "AGENTLENS_CONFIG",
        "AGENTLENS_JUDGE_BASE_URL",
        "AGENTLENS_JUDGE_API_KEY",
        "AGENTLENS_JUDGE_API_KEY_ENV",
        "AGENTLENS_JUDGE_ALLOW_FILE_BASE_URL",
        "OPENAI_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)


def _file(tmp_path: Path, text: str) -> None:
    (tmp_path / "agentlens.toml").write_text(text, encoding="utf-8")


def test_the_file_cannot_name_the_key_variable(tmp_path: Path) -> None:
    _file(tmp_path, '[judge]\nbackend = "openai"\nmodel = "m"\napi_key_env = "AWS_SECRET"\n')
    with pytest.raises(ConfigError, match=r"agentlens.toml: \[judge\] api_key_env"):
        load_settings()


def test_the_key_is_the_backends_own_variable_unless_the_environment_says_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("AWS_SECRET", "aws-secret")
    _file(tmp_path, '[judge]\nbackend = "openai"\nmodel = "m"\n')
    judge = judge_from_settings(load_settings())
    assert isinstance(judge, LLMJudge) and judge.api_key == "sk-openai"
    monkeypatch.setenv("AGENTLENS_JUDGE_API_KEY_ENV", "AWS_SECRET")  # the user's own choice
    judge = judge_from_settings(load_settings())
    assert isinstance(judge, LLMJudge) and judge.api_key == "aws-secret"


def test_a_base_url_from_the_file_needs_an_opt_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_llm: FakeLLM
) -> None:
    url = f"{fake_llm.url}/v1"
    _file(tmp_path, f'[judge]\nbackend = "openai"\nmodel = "m"\nbase_url = "{url}"\n')
    with pytest.raises(ConfigError, match=r"agentlens.toml: judge.base_url: .*ALLOW_FILE_BASE_URL"):
        judge_from_settings(load_settings())
    assert fake_llm.requests == []  # nothing was sent anywhere
    monkeypatch.setenv("AGENTLENS_JUDGE_ALLOW_FILE_BASE_URL", "1")
    judge = judge_from_settings(load_settings())
    assert isinstance(judge, LLMJudge) and judge.base_url == url
    monkeypatch.setenv("AGENTLENS_JUDGE_ALLOW_FILE_BASE_URL", "0")
    with pytest.raises(ConfigError, match="ALLOW_FILE_BASE_URL"):
        judge_from_settings(load_settings())
    # set by the user (environment): no opt-in needed
    monkeypatch.setenv("AGENTLENS_JUDGE_BASE_URL", url)
    assert judge_from_settings(load_settings()).base_url == url  # type: ignore[attr-defined]


def test_the_default_endpoint_or_the_offline_judge_need_no_opt_in(tmp_path: Path) -> None:
    _file(
        tmp_path,
        '[judge]\nbackend = "openai"\nmodel = "m"\nbase_url = "https://api.openai.com/v1/"\n',
    )
    assert judge_from_settings(load_settings()).name == "openai"
    _file(tmp_path, '[judge]\nbase_url = "https://elsewhere.example/v1"\n')
    assert judge_from_settings(load_settings()).name == "offline"


@pytest.mark.parametrize(
    "url",
    ["http://evil.example/v1", "http://10.0.0.8:8000/v1", "ftp://127.0.0.1/v1", "localhost:11434"],
)
def test_plain_http_only_to_loopback(url: str) -> None:
    with pytest.raises(ConfigError, match=r"base_url|plain http"):
        get_judge("openai", model="m", base_url=url)


@pytest.mark.parametrize(
    "url", ["http://localhost:11434/v1", "http://127.0.0.1:8000/v1", "http://[::1]:8000/v1"]
)
def test_loopback_http_and_https_are_fine(url: str) -> None:
    assert get_judge("openai", model="m", base_url=url).base_url == url  # type: ignore[attr-defined]
    assert get_judge("anthropic", model="m", base_url="https://gw.example").name == "anthropic"


def test_an_opted_in_file_endpoint_gets_the_backends_key_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_llm: FakeLLM
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("AGENTLENS_JUDGE_ALLOW_FILE_BASE_URL", "yes")
    _file(
        tmp_path,
        f'[judge]\nbackend = "openai"\nmodel = "m"\nbase_url = "{fake_llm.url}/v1"\n'
        "max_retries = 0\n",
    )
    fake_llm.push(openai_reply(verdicts_json("supported")))
    judge = judge_from_settings(load_settings())
    asyncio.run(judge.judge(claims=["x"], evidence="x"))
    (request,) = fake_llm.requests
    assert request["headers"].get("authorization") == "Bearer sk-openai"
