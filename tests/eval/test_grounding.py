"""The grounding scorers end to end: no_fabricated_refs and parametric_leakage."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentlens.config import AgentSettings, Settings, load_settings
from agentlens.errors import ConfigError, ScorerError
from agentlens.eval import get_scorer, run_scorers
from agentlens.eval.detectors import _grounding
from agentlens.model import FailureMode, ScoreResult, Trace, Verdict

no_fabricated_refs = _grounding.no_fabricated_refs
parametric_leakage = _grounding.parametric_leakage


def trace(steps: list[dict[str, Any]], output: Any = None, **fields: Any) -> Trace:
    return Trace.model_validate({"steps": steps, "output": output, **fields})


def tool(sid: str, output: Any, name: str = "lookup", **fields: Any) -> dict[str, Any]:
    return {"id": sid, "kind": "tool", "name": name, "output": output, **fields}


def text(sid: str, content: str) -> dict[str, Any]:
    return {"id": sid, "kind": "text", "output": content}


def refs_result(t: Trace, **options: Any) -> ScoreResult:
    return no_fabricated_refs(**options).score(t)


def leak_result(t: Trace, **options: Any) -> ScoreResult:
    return parametric_leakage(**options).score(t)


def leaked(answer: str, *evidence: Any) -> list[str]:
    steps = [tool(f"s{i}", e) for i, e in enumerate(evidence)]
    result = leak_result(trace(steps, answer))
    assert result.error is None, result.error
    return [f.text for f in result.findings]


# --------------------------------------------------------------------------- no_fabricated_refs


def test_fabricated_id_is_flagged_with_span_and_closest() -> None:
    t = trace(
        [tool("s1", {"id": "CUST-48213", "balance": 1834.2}, name="get_customer")],
        "Customer CUST-48231 owes $1,834.20.",
    )
    result = refs_result(t)
    assert result.verdict is Verdict.FLAGGED and result.value == 1
    (f,) = result.findings
    assert f.failure_mode is FailureMode.FABRICATED_GROUNDING
    assert (f.text, f.start, f.end, f.location) == ("CUST-48231", 9, 19, "output")
    assert f.attributes["closest"] == {
        "text": "CUST-48213",
        "step_id": "s1",
        "step_name": "get_customer",
    }
    assert "closest: CUST-48213 in step s1 get_customer" in f.detail
    assert result.detail == "ungrounded: CUST-48231"
    assert [(g.text, g.supported_by) for g in result.grounded] == [("$1,834.20", "s1")]


def test_all_grounded_passes() -> None:
    t = trace([tool("s1", {"id": "CUST-48213", "total": 12500.0})], "CUST-48213: $12,500.00")
    result = refs_result(t)
    assert result.passed and result.value == 0 and len(result.grounded) == 2


def test_tool_arguments_are_not_evidence() -> None:
    t = trace(
        [tool("s1", {"status": "ok"}, input={"customer": "CUST-99999"})], "Updated CUST-99999."
    )
    assert [f.text for f in refs_result(t).findings] == ["CUST-99999"]


def test_model_words_are_not_evidence() -> None:
    t = trace([text("s1", "I think it is CUST-11111."), tool("s2", "nothing")], "It is CUST-11111.")
    result = refs_result(t)
    assert [(f.text, f.location) for f in result.findings] == [
        ("CUST-11111", "s1"),
        ("CUST-11111", "output"),
    ]


def test_each_turn_checked_against_evidence_before_it() -> None:
    t = trace(
        [
            {"id": "u1", "kind": "user", "output": "find my booking"},
            text("a1", "Your booking is ZK3P9Q."),  # before the tool said so
            tool("t1", {"booking": "ZK3P9Q"}),
            text("a2", "Confirmed: ZK3P9Q."),
        ]
    )
    result = refs_result(t)
    assert [(f.text, f.location, f.step_ids) for f in result.findings] == [("ZK3P9Q", "a1", ["a1"])]
    assert [(g.location, g.supported_by) for g in result.grounded] == [("a2", "t1")]


def test_user_input_and_system_prompt_are_evidence() -> None:
    t = trace(
        [
            {"id": "sys", "kind": "system", "output": "Support email: help@acme.io"},
            {"id": "u1", "kind": "user", "output": "my order is ORD-20240"},
        ],
        "Order ORD-20240: write to help@acme.io",
        input="hello",
    )
    assert refs_result(t).passed


def test_truncated_evidence_makes_missing_refs_unverifiable() -> None:
    t = trace([tool("s1", "... first 4 KB ...", attributes={"truncated": True})], "See INV-7781.")
    result = refs_result(t)
    assert result.verdict is Verdict.UNVERIFIABLE and not result.passed
    assert result.findings[0].unverifiable and result.value == 0


def test_structured_json_answer_is_checked_value_by_value() -> None:
    answer = {"customer": "CUST-12345", "invoice": "INV-5510", "amount": "$99.00"}
    t = trace(
        [tool("s1", {"customer": "CUST-12345", "invoices": ["INV-551"], "amount": 99})], answer
    )
    result = refs_result(t)
    assert [f.text for f in result.findings] == ["INV-5510"]
    answer_text = json.dumps(answer, ensure_ascii=False)
    f = result.findings[0]
    assert answer_text[f.start : f.end] == "INV-5510"


def test_markdown_links() -> None:
    t = trace(
        [{"id": "r1", "kind": "retrieval", "output": [{"url": "https://docs.acme.io/guide/"}]}],
        "Read [the guide](https://docs.acme.io/guide). Also [this](https://docs.acme.io/faq).",
    )
    assert [f.text for f in refs_result(t).findings] == ["https://docs.acme.io/faq"]


def test_patterns_option_and_kinds() -> None:
    t = trace([tool("s1", {"ticket": "T9-0042"})], "Tickets T9-0042 and T9-0043; CUST-00001.")
    flagged = [f.text for f in refs_result(t, patterns=[r"T9-\d{4}"], kinds=["money"]).findings]
    assert flagged == ["T9-0043"]


def test_a_single_pattern_string_is_one_pattern() -> None:
    t = trace([tool("s1", {"x": 1})], "Ticket T9-0043.")
    assert [f.text for f in refs_result(t, patterns=r"T9-\d{4}").findings] == ["T9-0043"]


def test_per_agent_patterns_from_settings(tmp_path: Path) -> None:
    config = tmp_path / "agentlens.toml"
    config.write_text(
        """
[agents.airline.scorers.no_fabricated_refs]
patterns = ['\\b[A-Z]{6}\\b']
""",
        encoding="utf-8",
    )
    settings = load_settings(config_file=config)
    steps = [tool("s1", {"reservations": ["IFOYYZ"]})]
    for agent, expected in (("airline", ["ABCDEF"]), ("other", [])):
        t = trace(steps, "Reservations IFOYYZ and ABCDEF.", agent=agent)
        report = run_scorers(["no_fabricated_refs"], trace=t, settings=settings)
        assert [f.text for f in report.results["no_fabricated_refs"].findings] == expected


def test_evidence_sources_per_agent() -> None:
    settings = Settings(agents={"strict": AgentSettings(evidence=("tool",))})
    steps = [{"id": "u1", "kind": "user", "output": "id CUST-12345"}]
    t = trace(steps, "CUST-12345", agent="strict")
    report = run_scorers(["no_fabricated_refs"], trace=t, settings=settings)
    assert not report.passed


def test_registered_names_and_bad_options() -> None:
    assert get_scorer("no_fabricated_refs").version == "4"
    assert get_scorer("parametric_leakage").version == "5"
    assert get_scorer("parametric_leakage").name == "parametric_leakage"
    with pytest.raises(ScorerError):
        get_scorer("no_fabricated_refs").with_options(patternz=["x"])
    # a bad value is refused when the option is bound, not an error score on every run
    with pytest.raises(ConfigError, match="bad reference pattern"):
        get_scorer("no_fabricated_refs").with_options(patterns=["("])


def test_repeated_text_turn_checked_once() -> None:
    t = trace([text("a1", "Booking ZZ9ZZ9.")], "Booking ZZ9ZZ9.")
    assert [f.location for f in refs_result(t).findings] == ["a1"]


# --------------------------------------------------------------------------- parametric_leakage


def test_numbers_not_in_evidence_leak() -> None:
    assert leaked("Revenue was 8,804,190 last year.", {"revenue": 8804190}) == []
    assert leaked("Revenue was 9,250,000 last year.", {"revenue": 8804190}) == ["9,250,000"]


@pytest.mark.parametrize(
    "answer",
    [
        "Revenue was 8.8 million.",
        "Revenue was about 9 million.",
        "Revenue was $8.8M.",
        "Revenue was 8,804 thousand.",
    ],
)
def test_rounding_is_derived(answer: str) -> None:
    assert leaked(answer, {"revenue": 8804190}) == []


@pytest.mark.parametrize("answer", ["Revenue was 9 billion.", "Revenue was 7.8 million."])
def test_wrong_rounding_leaks(answer: str) -> None:
    assert leaked(answer, {"revenue": 8804190}) != []


@pytest.mark.parametrize(
    ("answer", "evidence"),
    [
        ("Sales rose 20% from 10 to 12.", {"before": 10, "after": 12}),
        ("Sales fell by 25%.", {"before": 40, "after": 30}),
        ("The total is $305.", {"a": 152, "b": 103, "c": 50}),
        ("That leaves $49.", {"a": 152, "b": 103}),
        ("Each costs $64.", {"total": 320, "count": 5}),
        ("A 3 x 517 = $1,551 total.", {"price": 517, "passengers": 3}),
        ("Share: 25%.", {"part": 30, "whole": 120}),
        ("$500 + $250 = $750; with $129 that is $879.", {"a": 500, "b": 250, "c": 129, "d": 1}),
    ],
)
def test_simple_arithmetic_is_derived(answer: str, evidence: dict[str, Any]) -> None:
    assert leaked(answer, evidence) == []


def test_arithmetic_that_does_not_add_up_leaks() -> None:
    assert leaked("The total is $310.", {"a": 152, "b": 103, "c": 50}) == ["$310"]


@pytest.mark.parametrize(
    "answer",
    [
        "I found 3 results and two options.",
        "1. First\n2. Second\n3. Third",
        "This is the 2nd time; see step 14 and option 12.",
        "Here are 10 flights.",
    ],
)
def test_counts_ordinals_and_numbering_are_not_facts(answer: str) -> None:
    assert leaked(answer, {"x": "nothing"}) == []


def test_dates_years_and_times() -> None:
    evidence = {"when": "2024-05-20T06:00:00", "note": "policy since 2019"}
    assert leaked("It leaves May 20, 2024 at 6:00 AM; policy since 2019.", evidence) == []
    assert leaked("It leaves May 21, 2024.", evidence) == ["May 21, 2024"]
    assert leaked("Founded in 1998.", evidence) == ["1998"]
    assert leaked("It leaves at 7:30 PM.", evidence) == ["7:30 PM"]


def test_bare_numbers_may_be_parts_of_ids_but_amounts_may_not() -> None:
    evidence = {"payment_id": "certificate_7504069", "when": "2024-05-15"}
    assert leaked("Certificate 7504069 covers it, as of 2024.", evidence) == []
    assert leaked("That costs $7,504,069.", evidence) == ["$7,504,069"]


def test_names_person_and_organisation() -> None:
    evidence = {"owner": "Jane Smith", "company": "Acme Corporation"}
    assert leaked("Dr. Jane Smith at Acme Corporation approved it.", evidence) == []
    assert leaked("Smith approved it.", evidence) == []  # a surname alone matches
    assert leaked("JANE SMITH approved.", evidence) == []  # case-insensitive
    assert leaked("Bob Jones from Globex approved it.", evidence) == ["Bob Jones", "Globex"]


def test_a_name_at_sentence_start_is_still_a_name() -> None:
    assert leaked("Nakamura approved the refund.", {"x": 1}) == ["Nakamura"]
    assert leaked("Hello! Nakamura approved it.", {"x": 1}) == ["Nakamura"]


@pytest.mark.parametrize(
    "answer",
    [
        "Thank You for contacting Customer Support.",
        "Best Regards,\nThe Support Team",
        "Unfortunately, that is not possible. Additionally, fees apply.",
        "See you on Monday in March!",
        "**Departure:** soon\n**Total Price:** pending",
        "### Booking Summary\nAll done.",
        "Certainly! Sounds good.",
        "Dear Mr. Customer, thanks.",
    ],
)
def test_capitalised_phrases_that_name_nothing(answer: str) -> None:
    assert leaked(answer, {"x": 1}) == []


def test_ids_belong_to_no_fabricated_refs_not_leakage() -> None:
    t = trace([tool("s1", {"x": 1})], "Invoice INV-7781 for 2,500 units.")
    assert [f.text for f in leak_result(t).findings] == ["2,500"]
    assert [f.text for f in refs_result(t).findings] == ["INV-7781"]


def test_leakage_options() -> None:
    t = trace([tool("s1", {"x": 1})], "Acme Rockets sold 4,000 units.")
    assert [f.text for f in leak_result(t, facts=["number"]).findings] == ["4,000"]
    assert [f.text for f in leak_result(t, allow=["Acme Rockets"]).findings] == ["4,000"]
    judged = leak_result(t, judge="offline")
    assert judged.attributes["judge"] == "offline"
    # The judged claim overlaps the facts already reported: not reported twice.
    assert [f.text for f in judged.findings] == [f.text for f in leak_result(t).findings]
    with pytest.raises(ConfigError, match="unknown fact kind 'colour'"):
        get_scorer("parametric_leakage").with_options(facts=["colour"])


def test_the_judged_half_finds_claims_without_specific_facts() -> None:
    t = trace(
        [tool("s1", {"plan": "basic", "warranty": "covers screen repairs only"})],
        "Your warranty also covers water damage and theft.",
    )
    assert leak_result(t).passed  # no number, date or name: nothing for the deterministic half
    judged = leak_result(t, judge="offline")
    assert judged.verdict is Verdict.FLAGGED
    (finding,) = judged.findings
    assert finding.failure_mode == "parametric_leakage"
    assert "water damage" in finding.text
    assert finding.start is not None and finding.location == "output"


def test_leakage_truncated_is_unverifiable() -> None:
    t = trace([tool("s1", "...", attributes={"truncated": True})], "Founded in 1998.")
    assert leak_result(t).verdict is Verdict.UNVERIFIABLE


# --------------------------------------------------------------------------- real data


@pytest.mark.data
def test_tau_bench_flags_injected_fabrications_and_little_else(
    data_dir: Callable[[str], Path],
) -> None:
    folder = data_dir("tau_bench")
    from agentlens.ingest.openai_messages import read

    runs = [t for path in sorted(folder.glob("*.json")) for t in read(path)]
    clean = sum(not refs_result(t).passed for t in runs)
    assert clean <= len(runs) * 0.05  # the real runs are almost all grounded
    # Inject a fabricated reservation id and amount into the final answer of each run.
    hits = 0
    for t in runs[:20]:
        t.output = "Your new reservation is QQ7ZZ1 and the total is $8,765.43."
        found = {f.text for f in refs_result(t).findings}
        hits += {"QQ7ZZ1", "$8,765.43"} <= found
    assert hits == 20
