"""The network judges against a real HTTP server on 127.0.0.1 with scripted replies.

Whatever goes wrong (malformed JSON, 429, 500, timeouts, budget), no claim ever comes back
``supported``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from llm_fakes import FakeLLM, Scripted, anthropic_reply, openai_reply, verdicts_json

from agentlens.errors import ConfigError, MissingExtraError
from agentlens.eval._evidence import EvidenceItem
from agentlens.eval.judges import (
    Judge,
    Label,
    VerdictCache,
    get_judge,
    judge_from_settings,
    judge_options,
)
from agentlens.eval.judges._llm import LLMJudge, estimate_cost, parse_verdicts

EVIDENCE = [
    EvidenceItem("s1", "tool", "get_order", None, "Order 12 shipped on May 3 to Lyon.", 0),
    EvidenceItem("s2", "tool", "get_customer", None, "The customer is Dana Reyes.", 1),
]
CLAIMS = ["Order 12 shipped on May 3.", "The customer is a VIP."]
BACKENDS = ["openai", "anthropic"]


def make(backend: str, fake: FakeLLM, **kw: Any) -> LLMJudge:
    kw.setdefault("model", "test-model")
    kw.setdefault("api_key", "sk-test")
    kw.setdefault("timeout", 5.0)
    kw.setdefault("backoff", 0.0)
    base = f"{fake.url}/v1"
    judge = get_judge(backend, base_url=base, **kw)
    assert isinstance(judge, LLMJudge)
    delays: list[float] = []

    async def record(delay: float) -> None:
        delays.append(delay)

    judge._sleep = record
    judge.delays = delays  # type: ignore[attr-defined]
    return judge


def reply(backend: str, text: str, tokens_in: int = 100, tokens_out: int = 20) -> Scripted:
    return (openai_reply if backend == "openai" else anthropic_reply)(text, tokens_in, tokens_out)


def run(judge: Judge, claims: list[str] = CLAIMS) -> list[Any]:
    return asyncio.run(judge.judge(claims=claims, evidence=EVIDENCE))


@pytest.mark.parametrize("backend", BACKENDS)
def test_valid_verdicts_and_request_shape(backend: str, fake_llm: FakeLLM) -> None:
    fake_llm.push(
        reply(backend, verdicts_json("supported", "unsupported", evidence="shipped on May 3"))
    )
    judge = make(backend, fake_llm)
    out = run(judge)
    assert [v.label for v in out] == [Label.SUPPORTED, Label.UNSUPPORTED]
    assert out[0].evidence_span is not None and out[0].evidence_span.source == "s1"
    span = out[0].evidence_span
    assert EVIDENCE[0].text[span.start : span.end] == "shipped on May 3"
    assert out[1].reason == "claim 2 is unsupported"
    (req,) = fake_llm.requests
    body = req["body"]
    if backend == "openai":
        assert req["path"] == "/v1/chat/completions"
        assert req["headers"]["authorization"] == "Bearer sk-test"
        assert body["response_format"]["type"] == "json_schema"
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    else:
        assert req["path"] == "/v1/messages"
        assert req["headers"]["x-api-key"] == "sk-test"
        assert req["headers"]["anthropic-version"]
        system, user = body["system"], body["messages"][0]["content"]
    assert "correct but absent from the evidence" in system and "NOT supported" in system
    assert "1. Order 12 shipped on May 3." in user and "2. The customer is a VIP." in user
    assert "[s1]" in user and "Dana Reyes" in user
    assert body["model"] == "test-model" and body["temperature"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_tolerant_parsing_of_fenced_json_with_prose(backend: str, fake_llm: FakeLLM) -> None:
    text = (
        "Sure, here you go:\n```json\n"
        + verdicts_json("unsupported", "supported")
        + "\n```\nHope it helps."
    )
    fake_llm.push(reply(backend, text))
    out = run(make(backend, fake_llm))
    assert [v.label for v in out] == [Label.UNSUPPORTED, Label.SUPPORTED]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "text",
    [
        "not json at all",
        '{"verdicts": [{"id": 1, "label": "supp',
        '{"verdicts": "supported"}',
        '{"verdicts": [{"id": 1, "label": "maybe"}, {"id": 2, "label": 7}]}',
        "[]",
    ],
)
def test_malformed_replies_are_unverifiable(backend: str, text: str, fake_llm: FakeLLM) -> None:
    fake_llm.push(reply(backend, text))
    out = run(make(backend, fake_llm))
    assert [v.label for v in out] == [Label.UNVERIFIABLE, Label.UNVERIFIABLE]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_partial_reply_leaves_the_rest_unverifiable(backend: str, fake_llm: FakeLLM) -> None:
    fake_llm.push(
        reply(
            backend, json.dumps({"verdicts": [{"id": 2, "label": "supported", "confidence": 0.8}]})
        )
    )
    out = run(make(backend, fake_llm))
    assert [v.label for v in out] == [Label.UNVERIFIABLE, Label.SUPPORTED]


@pytest.mark.parametrize("backend", BACKENDS)
def test_429_is_retried_honouring_retry_after(backend: str, fake_llm: FakeLLM) -> None:
    fake_llm.push(
        Scripted(429, {"error": "rate limited"}, {"retry-after": "7"}),
        reply(backend, verdicts_json("supported", "unsupported")),
    )
    judge = make(backend, fake_llm, max_backoff=30)
    out = run(judge)
    assert [v.label for v in out] == [Label.SUPPORTED, Label.UNSUPPORTED]
    assert judge.delays == [7.0]  # type: ignore[attr-defined]
    assert judge.usage.calls == 2 and judge.usage.retries == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_5xx_retries_with_growing_backoff_then_gives_up(backend: str, fake_llm: FakeLLM) -> None:
    fake_llm.push(*[Scripted(500, {"error": "boom"})] * 4)
    judge = make(backend, fake_llm, max_retries=3, backoff=1.0)
    out = run(judge)
    assert all(v.label is Label.UNVERIFIABLE for v in out)
    assert "HTTP 500" in (out[0].error or "")
    assert len(fake_llm.requests) == 4
    delays = judge.delays  # type: ignore[attr-defined]
    assert len(delays) == 3
    for attempt, d in enumerate(delays):  # base * 2**attempt, jittered by 0.5x to 1.5x
        assert 0.5 * 2**attempt <= d <= 1.5 * 2**attempt


@pytest.mark.parametrize("backend", BACKENDS)
def test_500_then_success(backend: str, fake_llm: FakeLLM) -> None:
    fake_llm.push(
        Scripted(503, "overloaded"), reply(backend, verdicts_json("supported", "supported"))
    )
    out = run(make(backend, fake_llm))
    assert [v.label for v in out] == [Label.SUPPORTED, Label.SUPPORTED]


@pytest.mark.parametrize("backend", BACKENDS)
def test_client_errors_are_not_retried(backend: str, fake_llm: FakeLLM) -> None:
    fake_llm.push(Scripted(401, {"error": "bad key"}))
    out = run(make(backend, fake_llm))
    assert all(v.label is Label.UNVERIFIABLE for v in out)
    assert "HTTP 401" in (out[0].error or "")
    assert len(fake_llm.requests) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_slow_reply_times_out_as_unverifiable(backend: str, fake_llm: FakeLLM) -> None:
    fake_llm.push(Scripted(200, {}, slow=True))
    judge = make(backend, fake_llm, timeout=0.3, max_retries=0)
    out = run(judge)
    assert all(v.label is Label.UNVERIFIABLE for v in out)
    assert "TimeoutError" in (out[0].error or "")
    assert judge.usage.failures == 1


def test_timeouts_are_retried(fake_llm: FakeLLM) -> None:
    fake_llm.push(
        Scripted(200, {}, slow=True), reply("openai", verdicts_json("supported", "unsupported"))
    )
    judge = make("openai", fake_llm, timeout=0.3, max_retries=1)
    out = run(judge)
    assert [v.label for v in out] == [Label.SUPPORTED, Label.UNSUPPORTED]
    assert judge.usage.retries == 1


def test_structured_output_falls_back_when_rejected(fake_llm: FakeLLM) -> None:
    fake_llm.push(
        Scripted(400, {"error": {"message": "response_format json_schema is not supported"}}),
        openai_reply(verdicts_json("supported", "unsupported")),
    )
    judge = make("openai", fake_llm)
    out = run(judge)
    assert [v.label for v in out] == [Label.SUPPORTED, Label.UNSUPPORTED]
    assert "response_format" in fake_llm.requests[0]["body"]
    assert "response_format" not in fake_llm.requests[1]["body"]


def test_claims_are_batched_with_bounded_concurrency(fake_llm: FakeLLM) -> None:
    claims = [f"Order {i} shipped." for i in range(5)]
    fake_llm.push(*[openai_reply(verdicts_json("unsupported", "unsupported"))] * 3)
    judge = make("openai", fake_llm, batch_size=2, max_concurrency=2)
    out = run(judge, claims)
    assert len(out) == 5 and all(v.label is Label.UNSUPPORTED for v in out)
    assert len(fake_llm.requests) == 3
    users = [r["body"]["messages"][1]["content"] for r in fake_llm.requests]
    assert sorted(u.count("\n1. ") + u.count("\n2. ") for u in users) == [1, 2, 2]


def test_cost_and_tokens_are_accounted(fake_llm: FakeLLM) -> None:
    fake_llm.push(openai_reply(verdicts_json("supported", "unsupported"), 1000, 200))
    judge = make("openai", fake_llm, model="gpt-4o-mini")
    out = run(judge)
    expected = (1000 * 0.15 + 200 * 0.60) / 1_000_000
    assert judge.usage.cost_usd == pytest.approx(expected)
    assert judge.usage.input_tokens == 1000 and judge.usage.output_tokens == 200
    assert sum(v.cost_usd for v in out) == pytest.approx(expected)
    assert sum(v.input_tokens for v in out) == 1000


def test_price_override_and_unknown_models() -> None:
    assert estimate_cost("my-local-llama", 10, 10) is None
    assert estimate_cost("my-local-llama", 1_000_000, 0, {"my-local": (2.0, 4.0)}) == pytest.approx(
        2.0
    )
    assert estimate_cost("gpt-4o-2024-08-06", 1_000_000, 0) == pytest.approx(2.5)  # longest prefix
    assert estimate_cost("gpt-4o-mini-2024-07-18", 1_000_000, 0) == pytest.approx(0.15)


def test_budget_stops_calls_before_they_are_made(fake_llm: FakeLLM) -> None:
    judge = make("openai", fake_llm, prices={"test-model": (1000.0, 1000.0)}, budget_usd=0.001)
    out = run(judge)
    assert all(v.label is Label.UNVERIFIABLE for v in out)
    assert out[0].error == "budget"
    assert fake_llm.requests == []
    assert judge.usage.budget_exhausted == 2


def test_budget_spent_by_one_batch_stops_the_next(fake_llm: FakeLLM) -> None:
    fake_llm.push(openai_reply(verdicts_json("supported"), 10_000, 10))
    judge = make(
        "openai",
        fake_llm,
        prices={"test-model": (100.0, 100.0)},
        budget_usd=0.5,
        batch_size=1,
        max_concurrency=1,
    )
    out = run(judge)
    assert [v.label for v in out] == [Label.SUPPORTED, Label.UNVERIFIABLE]
    assert len(fake_llm.requests) == 1
    assert judge.usage.cost_usd == pytest.approx((10_000 * 100 + 10 * 100) / 1e6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_second_call_hits_the_cache(backend: str, fake_llm: FakeLLM) -> None:
    fake_llm.push(reply(backend, verdicts_json("supported", "unsupported")))
    judge = make(backend, fake_llm)
    first = run(judge)
    second = run(judge)
    assert len(fake_llm.requests) == 1
    assert [v.label for v in second] == [v.label for v in first]
    assert all(v.cached for v in second) and not any(v.cached for v in first)
    assert judge.usage.cache_hits == 2


def test_failures_are_not_cached(fake_llm: FakeLLM) -> None:
    fake_llm.push(
        reply("openai", "garbage"), reply("openai", verdicts_json("supported", "supported"))
    )
    judge = make("openai", fake_llm)
    assert all(v.label is Label.UNVERIFIABLE for v in run(judge))
    assert all(v.label is Label.SUPPORTED for v in run(judge))
    assert len(fake_llm.requests) == 2


def test_sqlite_cache_survives_the_judge(fake_llm: FakeLLM, tmp_path: Path) -> None:
    path = tmp_path / "judge.sqlite"
    fake_llm.push(reply("openai", verdicts_json("supported", "unsupported", evidence="Dana Reyes")))
    run(make("openai", fake_llm, cache=str(path)))
    again = make("openai", fake_llm, cache=str(path))
    out = run(again)
    assert len(fake_llm.requests) == 1
    assert [v.label for v in out] == [Label.SUPPORTED, Label.UNSUPPORTED] and out[0].cached
    assert out[0].evidence_span is not None and out[0].evidence_span.source == "s2"
    # a different model or different evidence is a different key
    other = make("openai", fake_llm, cache=VerdictCache(path), model="other-model")
    fake_llm.push(reply("openai", verdicts_json("unsupported", "unsupported")))
    assert [v.label for v in run(other)] == [Label.UNSUPPORTED, Label.UNSUPPORTED]
    assert len(fake_llm.requests) == 2


def test_truncated_evidence_never_yields_unsupported(fake_llm: FakeLLM) -> None:
    fake_llm.push(reply("openai", verdicts_json("supported", "unsupported")))
    judge = make("openai", fake_llm, max_evidence_chars=20)
    out = run(judge)
    assert [v.label for v in out] == [Label.SUPPORTED, Label.UNVERIFIABLE]


@pytest.mark.parametrize(
    "script",
    [
        [Scripted(500, "x")] * 2,
        [Scripted(429, "x", {"retry-after": "0"})] * 2,
        [Scripted(200, "not even json")],
        [Scripted(200, {"choices": []})],
        [Scripted(200, {}, slow=True)],
        [Scripted(404, "no such model")],
    ],
)
@pytest.mark.parametrize("backend", BACKENDS)
def test_no_failure_ever_turns_into_supported(
    backend: str, script: list[Scripted], fake_llm: FakeLLM
) -> None:
    fake_llm.push(*script)
    judge = make(backend, fake_llm, max_retries=1, timeout=0.3)
    out = run(judge)
    assert [v.label for v in out] == [Label.UNVERIFIABLE, Label.UNVERIFIABLE]
    assert all(not v.supported and v.confidence == 0.0 for v in out)


def test_connection_refused_is_unverifiable() -> None:
    judge = get_judge(
        "openai", model="m", base_url="http://127.0.0.1:9/v1", max_retries=0, timeout=2
    )
    out = run(judge)
    assert all(v.label is Label.UNVERIFIABLE for v in out)


def test_parse_verdicts_reads_ids_and_labels() -> None:
    text = 'Result: {"verdicts": [{"id": "2", "label": "Not supported"}, {"id": 1, "label": "SUPPORTED", "confidence": 3}]} done'
    a, b = parse_verdicts(text, 2)
    assert a is not None and a["label"] is Label.SUPPORTED and a["confidence"] == 1.0
    assert b is not None and b["label"] is Label.UNSUPPORTED


def test_configuration(monkeypatch: pytest.MonkeyPatch, fake_llm: FakeLLM) -> None:
    monkeypatch.setenv("AGENTLENS_JUDGE_TIMEOUT", "12.5")
    opts = judge_options({"backend": "openai", "model": "gpt-4o-mini", "max_concurrency": 2})
    assert opts == {
        "backend": "openai",
        "model": "gpt-4o-mini",
        "max_concurrency": 2,
        "timeout": 12.5,
    }
    with pytest.raises(ConfigError, match="unknown key 'colour'"):
        judge_options({"colour": "red"})
    with pytest.raises(ConfigError, match="max_concurrency"):
        judge_options({"max_concurrency": "many"})

    class S:
        def __init__(self) -> None:
            self.judge = {
                "backend": "openai",
                "model": "gpt-4o-mini",
                "base_url": f"{fake_llm.url}/v1",
                "api_key_env": "MY_KEY",
                "mode": "strict",
            }

    monkeypatch.setenv("MY_KEY", "sk-from-env")
    judge = judge_from_settings(S())
    assert isinstance(judge, LLMJudge) and judge.name == "openai" and judge.timeout == 12.5
    assert judge.api_key == "sk-from-env"
    assert judge_from_settings(S(), backend="offline").name == "offline"
    with pytest.raises(ConfigError, match="unknown judge backend"):
        get_judge("gemini")
    with pytest.raises(ConfigError, match="unknown option 'temperature'"):
        get_judge("openai", model="m", temperature=1)


def test_a_model_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTLENS_JUDGE_MODEL", raising=False)
    with pytest.raises(ConfigError, match="needs a model"):
        get_judge("anthropic")


def test_missing_httpx_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "httpx", None)
    with pytest.raises(MissingExtraError, match=r"agentlens\[openai\]"):
        get_judge("openai", model="m")
