"""The grounding misreads found on real answers (issue 18, items 7-10): each rule fires, and
its near misses do not."""

from __future__ import annotations

from typing import Any

import pytest

from agentlens.eval._facts import extract_facts
from agentlens.eval._references import get_extractor
from agentlens.eval.detectors import _grounding
from agentlens.model import ScoreResult, Trace


def trace(steps: list[dict[str, Any]], output: Any = None) -> Trace:
    return Trace.model_validate({"steps": steps, "output": output})


def tool(sid: str, output: Any, name: str = "lookup") -> dict[str, Any]:
    return {"id": sid, "kind": "tool", "name": name, "output": output}


def leak(answer: str, *evidence: Any) -> ScoreResult:
    steps = [tool(f"s{i}", e) for i, e in enumerate(evidence)]
    result = _grounding.parametric_leakage().score(trace(steps, answer))
    assert result.error is None, result.error
    return result


def leaked(answer: str, *evidence: Any) -> list[str]:
    return [f.text for f in leak(answer, *evidence).findings]


def refs(answer: str, *evidence: Any) -> ScoreResult:
    steps = [tool(f"s{i}", e) for i, e in enumerate(evidence)]
    result = _grounding.no_fabricated_refs().score(trace(steps, answer))
    assert result.error is None, result.error
    return result


def facts(text: str) -> list[tuple[str, str]]:
    return [(f.kind, f.text) for f in extract_facts(text, get_extractor().extract(text))]


# --------------------------------------------------------------------------- 7. sentence starts


@pytest.mark.parametrize(
    "answer",
    [
        "It is done. Fortunately, the refund went through.",
        "That is against the policy. Removing a passenger is not possible.",
        "Your seat is confirmed. Additionally, a meal is included.",
        "It costs $5. Naturally, taxes apply.",
        "Wait... Hopefully that helps.",
        "1. Removing a passenger\n2. Changing a flight",
        "Options:\n2) Cancelling the trip",
    ],
)
def test_an_adverb_or_gerund_after_a_full_stop_opens_a_sentence(answer: str) -> None:
    assert [k for k, _ in facts(answer) if k == "name"] == []


@pytest.mark.parametrize(
    ("answer", "name"),
    [
        # a name is still a name after a full stop
        ("It is done. Kowalski approved it.", "Kowalski"),
        # a full stop after a title or an initial ends no sentence: "Harding" names someone
        ("Please call Dr. Harding tomorrow.", "Harding"),
        ("Ask Mr. Fielding.", "Fielding"),
        ("It was signed by J. Harding.", "Harding"),
        # several words are a name wherever they stand
        ("It is done. Removing Castle approved it.", "Removing Castle"),
        # a list number mid-line is no list marker, and no full stop after a letter either
        ("see item 2) Harding", "Harding"),
    ],
)
def test_near_misses_of_a_sentence_start_stay_names(answer: str, name: str) -> None:
    assert ("name", name) in facts(answer)


def test_a_sentence_start_is_grounded_or_leaks_as_before() -> None:
    assert leaked("It is done. Fortunately, it works.", {"x": 1}) == []
    assert leaked("It is done. Nakamura approved it.", {"x": 1}) == ["Nakamura"]
    assert leaked("It is done. Nakamura approved it.", {"agent": "K. Nakamura"}) == []


# --------------------------------------------------------------------------- 9. decades


@pytest.mark.parametrize(
    ("answer", "text", "key"),
    [
        ("It grew in the 1990s.", "1990s", "1990s"),
        ("It grew in the 2000's.", "2000's", "2000s"),
        ("It grew in the mid-80s.", "mid-80s", "80s"),
        ("It grew in the '90s.", "'90s", "90s"),
        ("It grew in the 80's.", "80's", "80s"),
        ("It grew in the early 70s.", "70s", "70s"),
        ("It grew in the late-1970s.", "late-1970s", "1970s"),
    ],
)
def test_decades_are_facts_of_their_own(answer: str, text: str, key: str) -> None:
    (fact,) = extract_facts(answer, get_extractor().extract(answer))
    assert (fact.kind, fact.text, fact.key, fact.value) == ("decade", text, key, None)


@pytest.mark.parametrize(
    "answer",
    [
        "They are in their 80s.",  # two digits after neither "the" nor a modifier: an age
        "Model X-1990s is out.",  # a hyphen after no modifier: part of a name
        "It has 1990 seats.",  # a number, no decade
        "Flight HAT1990s is late.",  # inside a word
    ],
)
def test_near_misses_of_a_decade(answer: str) -> None:
    assert all(kind != "decade" for kind, _ in facts(answer))


def test_a_decade_is_grounded_by_a_year_of_it() -> None:
    result = leak("Sales peaked in the 1990s.", {"peak": "1994-06-01"})
    assert result.passed
    (g,) = result.grounded
    assert g.attributes == {"kind": "decade", "derived": "1994, in the 1990s"}
    assert leaked("Sales peaked in the mid-80s.", {"peak_year": 1986}) == []
    assert leaked("Sales peaked in the '20s.", {"peak_year": 2024}) == []  # 1920s or 2020s
    assert leaked("Sales peaked in the 1990s.", {"note": "the '90s were good"}) == []
    assert leaked("Built in the 1900s.", {"built": 1957}) == []  # a round century: the century


def test_a_decade_with_no_year_of_it_in_the_evidence_leaks() -> None:
    assert leaked("Sales peaked in the 1990s.", {"peak": "2001-06-01"}) == ["1990s"]
    assert leaked("Sales peaked in the 1990s.", {"founded": 1989, "sold": 2000}) == ["1990s"]
    assert leaked("Sales peaked in the 2000's.", {"code": "HAT2004"}) == ["2000's"]
    assert leaked("Sales peaked in the mid-80s.", {"count": 85}) == ["mid-80s"]
    assert leaked("Built in the 1950s.", {"built": 1957}) == []
    assert leaked("Built in the 1960s.", {"built": 1957}) == ["1960s"]


def test_a_decade_after_the_turn_does_not_ground_it() -> None:
    t = trace(
        [{"id": "a", "kind": "text", "output": "It peaked in the 1990s."}, tool("s1", 1994)],
    )
    assert [f.text for f in _grounding.parametric_leakage().score(t).findings] == ["1990s"]


def test_a_decade_with_a_modifier_is_no_reference() -> None:
    assert refs("Sales peaked in the mid-80s and pre-1990s.", {"x": 1}).passed
    assert not refs("Merchant MID-48213 approved it.", {"x": 1}).passed
