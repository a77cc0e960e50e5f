"""faithful_synthesis and judged_leakage over real traces."""

from __future__ import annotations

import asyncio

from llm_fakes import FakeLLM, Scripted, openai_reply, verdicts_json

from agentlens.eval import Evidence, get_scorer
from agentlens.eval.detectors._synthesis import ajudged_leakage, judged_leakage
from agentlens.eval.judges import get_judge
from agentlens.model import FailureMode, Step, Trace, Verdict


def trace(**kw: object) -> Trace:
    steps = [
        Step(
            id="s1",
            kind="tool",
            name="get_order",
            input={"id": 12},
            output={"order_id": 12, "status": "shipped", "shipped_on": "May 3", "city": "Lyon"},
        ),
        Step(id="t1", kind="text", output="Order 12 shipped on May 3. The customer is Dana Reyes."),
        Step(
            id="s2",
            kind="tool",
            name="get_customer",
            input={"order": 12},
            output="The customer is Dana Reyes.",
        ),
    ]
    base: dict[str, object] = {
        "input": "Where is order 12?",
        "output": "Order 12 shipped to Lyon on May 3, and it will arrive tomorrow. The customer is Dana Reyes.",
        "steps": steps,
    }
    base.update(kw)
    return Trace(**base)  # type: ignore[arg-type]


def test_each_turn_is_judged_against_the_evidence_before_it() -> None:
    result = get_scorer("faithful_synthesis").score(trace())
    assert result.verdict is Verdict.FLAGGED and not result.passed
    bad = {(f.location, f.text) for f in result.findings}
    # in turn t1 the customer's name came before get_customer ran
    assert ("t1", "The customer is Dana Reyes.") in bad
    assert ("output", "it will arrive tomorrow.") in bad
    assert all(f.failure_mode is FailureMode.UNSUPPORTED_SYNTHESIS for f in result.findings)
    grounded = {(f.location, f.text, f.supported_by) for f in result.grounded}
    assert ("output", "The customer is Dana Reyes.", "s2") in grounded
    assert ("t1", "Order 12 shipped on May 3.", "s1") in grounded
    t = trace()
    for f in result.findings + result.grounded:
        text = t.output if f.location == "output" else t.steps[1].output
        assert f.start is not None and f.end is not None
        assert text[f.start : f.end] == f.text
    finding = next(f for f in result.findings if f.location == "output")
    assert "tomorrow" in finding.detail
    assert finding.attributes["judge"].startswith("offline/")
    assert result.attributes["claims"] == 5 and result.attributes["unsupported"] == 2
    assert result.value == 3 / 5


def test_a_grounded_answer_passes() -> None:
    t = trace(output="Order 12 shipped on May 3.", steps=trace().steps[:1])
    result = get_scorer("faithful_synthesis").score(t)
    assert result.passed and result.verdict is Verdict.PASSED and result.value == 1.0
    assert result.grounded[0].supported_by == "s1"


def test_no_claims_passes() -> None:
    result = get_scorer("faithful_synthesis").score(
        trace(output="Thanks! Let me know if you need more.", steps=[])
    )
    assert result.passed and result.detail == "no checkable claims"


def test_truncated_evidence_makes_findings_unverifiable() -> None:
    steps = [Step(id="s1", kind="tool", output="Order 12 shipped.", attributes={"truncated": True})]
    result = get_scorer("faithful_synthesis").score(trace(output="Order 12 was lost.", steps=steps))
    assert result.verdict is Verdict.UNVERIFIABLE
    assert result.findings[0].unverifiable


def test_a_failing_judge_is_unverifiable_not_a_pass(fake_llm: FakeLLM) -> None:
    fake_llm.push(*[Scripted(500, "down")] * 10)
    judge = get_judge("openai", model="m", base_url=f"{fake_llm.url}/v1", max_retries=0)
    scorer = get_scorer("faithful_synthesis").with_options(judge=judge)
    result = scorer.score(trace(output="Order 12 shipped on May 3.", steps=trace().steps[:1]))
    assert result.verdict is Verdict.UNVERIFIABLE and not result.passed
    assert result.findings and all(f.unverifiable for f in result.findings)
    assert result.grounded == []


def test_llm_judge_cost_lands_on_the_score(fake_llm: FakeLLM) -> None:
    fake_llm.push(openai_reply(verdicts_json("supported"), 1000, 100))
    scorer = get_scorer("faithful_synthesis").with_options(
        judge="openai", model="gpt-4o-mini", base_url=f"{fake_llm.url}/v1"
    )
    result = scorer.score(trace(output="Order 12 shipped on May 3.", steps=trace().steps[:1]))
    assert result.passed
    assert (
        result.attributes["judge"] == "openai" and result.attributes["judge_model"] == "gpt-4o-mini"
    )
    assert result.attributes["input_tokens"] == 1000
    assert result.attributes["cost_usd"] > 0
    # same scorer options, same cached judge: no second request
    again = scorer.score(trace(output="Order 12 shipped on May 3.", steps=trace().steps[:1]))
    assert again.passed and again.attributes["cache_hits"] == 1 and len(fake_llm.requests) == 1


def test_judged_leakage() -> None:
    t = trace()
    findings = judged_leakage(t, Evidence(t), "offline")
    assert {f.text for f in findings} == {"The customer is Dana Reyes.", "it will arrive tomorrow."}
    assert all(f.failure_mode is FailureMode.PARAMETRIC_LEAKAGE for f in findings)

    async def inside_a_loop() -> tuple[int, int]:
        sync = judged_leakage(t, judge="offline")  # a sync caller inside a running loop
        return len(sync), len(await ajudged_leakage(t, judge="offline"))

    assert asyncio.run(inside_a_loop()) == (2, 2)
