"""The grounding misreads found on real answers (issue 18, items 7-10): each rule fires, and
its near misses do not."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
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


# --------------------------------------------------------------------------- 10. sentence openers
# (version 5: found on real plans and change summaries, Who&When and Claude Code)


@pytest.mark.parametrize(
    "answer",
    [
        "1. Collect information from the manager.\n2. Verify the totals.",
        "## Plan\n- Identify the pitchers\n- Calculate the averages",
        "Thus, the figure stands.",
        "Despite the delay, it shipped.",
        "- Kept the old files\n- Ran the tests",
        "RUN pip install -r requirements.txt",
        "It failed. Retry later.",
    ],
)
def test_an_imperative_or_connective_opening_a_sentence_is_no_name(answer: str) -> None:
    assert [t for k, t in facts(answer) if k == "name"] == []


@pytest.mark.parametrize(
    ("answer", "name"),
    [
        # a name an opener begins is read without it
        ("Locate Emily in the list.", "Emily"),
        ("- Deleted Python test files", "Python"),
        ("Former CEO of Avon Products Inc, she left.", "Avon Products Inc"),
        ("2. Verify Eliud Kipchoge first", "Eliud Kipchoge"),
    ],
)
def test_a_name_after_an_opener_is_the_rest_of_it(answer: str, name: str) -> None:
    assert [t for k, t in facts(answer) if k == "name"] == [name]


@pytest.mark.parametrize(
    ("answer", "name"),
    [
        # an opener only opens a sentence: elsewhere it stays as it was
        ("I will ask Collect about it.", "Collect"),
        ("She met Kowalski. Verify Kowalski's badge.", "Kowalski"),
        # a first name that is no opener stays the start of the name
        ("Mark Twain wrote it.", "Mark Twain"),
        ("United Airlines flew it.", "United Airlines"),
    ],
)
def test_near_misses_of_an_opener(answer: str, name: str) -> None:
    assert ("name", name) in facts(answer)


def test_a_name_after_an_opener_is_grounded_or_leaks_by_its_own_words() -> None:
    assert leaked("- Deleted Python test files\n- Kept the Justfile", "python 3.12") == ["Justfile"]
    assert leaked("Locate Emily in the list.", {"people": ["Emily Ross"]}) == []
    assert leaked("Locate Emily in the list.", {"people": ["Ross"]}) == ["Emily"]


def test_a_coding_agents_acronyms_name_nothing() -> None:
    # version 5: file formats and programming terms, in a coding agent's answers
    assert facts("The JSONL file feeds the SQL query over REST, with OCR.") == []
    assert ("name", "NASA") in facts("The data is from NASA.")
    assert ("name", "Tesseract") in facts("It uses Tesseract OCR.")


# --------------------------------------------------------------------------- 11. possessives
# (version 5: a name in the possessive was no name at all)


@pytest.mark.parametrize(
    ("answer", "names"),
    [
        ("See Eliud Kipchoge's time.", ["Eliud Kipchoge"]),
        ("It was Harding’s call.", ["Harding"]),
        ("IBM's Watson won.", ["IBM", "Watson"]),
        ("the O'Brien's house", ["O'Brien"]),
    ],
)
def test_a_name_in_the_possessive_is_the_name(answer: str, names: list[str]) -> None:
    assert [t for k, t in facts(answer) if k == "name"] == names


@pytest.mark.parametrize(
    "answer",
    [
        "It's done. Let's go. That's all, and here's why.",  # common words stay common
        "Kipchoge'sx",  # no possessive: an apostrophe inside a word
    ],
)
def test_near_misses_of_a_possessive(answer: str) -> None:
    assert [t for k, t in facts(answer) if k == "name"] == []


def test_a_name_in_the_possessive_is_grounded_or_leaks() -> None:
    assert leaked("Kipchoge's time was the record.", {"runner": "Eliud Kipchoge"}) == []
    assert leaked("Kipchoge's record stands.", {"runner": "Kenenisa Bekele"}) == ["Kipchoge"]


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


# --------------------------------------------------------------------------- 8. last digits


@pytest.mark.parametrize(
    "answer",
    [
        "Paid with the card ending in 4321.",
        "Paid with the Visa ending with 4321.",
        "The last four digits of your card are 4321.",
        "Last 4 digits: 4321.",
        "Charged to card **** 4321.",
        "Paid with the card ending in 2024.",  # a year's digits, but a card's
    ],
)
def test_the_last_digits_of_a_number_are_a_fact_of_their_own(answer: str) -> None:
    (fact,) = [f for f in extract_facts(answer, get_extractor().extract(answer))]
    assert (fact.kind, fact.key, fact.value) == ("last_digits", fact.text, None)


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        ("The fiscal year ending in 2024 was good.", "year"),  # no card or account word
        ("The war ended in 1945.", "year"),
        ("It has 4321 seats.", "number"),
        ("Call 555-4321.", None),  # a phone number's part: no fact
    ],
)
def test_near_misses_of_last_digits(answer: str, kind: str | None) -> None:
    kinds = [k for k, _ in facts(answer)]
    assert "last_digits" not in kinds
    assert kind is None or kind in kinds


@pytest.mark.parametrize(
    ("evidence", "how"),
    [
        ({"payment_method_id": "gift_card_7654321"}, "the last digits of gift_card_7654321"),
        ({"card": "**** 4321"}, "the last digits of **** 4321"),
        ({"card": "XXXX-4321"}, "the last digits of XXXX-4321"),
        ({"card": "xxxx4321"}, "the last digits of xxxx4321"),
        ({"account": "DE44500105175407324321"}, "the last digits of DE44500105175407324321"),
        ({"account": 12345674321}, "the last digits of 12345674321"),
        ({"card": {"brand": "visa", "last_four": "4321"}}, "4321, given as last digits"),
        ("My card ending in 4321 was charged twice.", "4321, given as last digits"),
    ],
)
def test_last_digits_are_grounded_by_the_end_of_an_id_card_or_account(
    evidence: Any, how: str
) -> None:
    result = leak("I refunded the card ending in 4321.", evidence)
    assert result.passed
    (g,) = result.grounded
    assert g.attributes == {"kind": "last_digits", "derived": how}


@pytest.mark.parametrize(
    "evidence",
    [
        {"price": 14321},  # a number that merely ends in them
        {"quantity": 4321},  # the digits alone, not said to be last digits
        {"amount": "4321.50"},  # a number with decimals
        {"total": "1,004,321"},  # a thousands group
        {"rate": 1.4321},  # decimals
        {"flight": "HAT4321"},  # a code's digits, with no separator or mask
        {"ref": "4321-99"},  # the start of something else
        {"card": "**** 5432"},  # other digits
        {"card": "gift_card_76543210"},  # the digits inside, not at the end
    ],
)
def test_last_digits_are_not_grounded_by_numbers_that_merely_hold_them(evidence: Any) -> None:
    assert leaked("I refunded the card ending in 4321.", evidence) == ["4321"]


def test_last_digits_seen_only_after_the_turn_are_ungrounded() -> None:
    t = trace([{"id": "a", "kind": "text", "output": "Card ending in 4321."}, tool("s1", "x_4321")])
    assert [f.text for f in _grounding.parametric_leakage().score(t).findings] == ["4321"]


# --------------------------------------------------------------------------- 10. derivations


def derived(answer: str, *evidence: Any) -> dict[str, str | None]:
    """Each grounded claim of the answer and its derivation (``None``: found as written)."""
    result = refs(answer, *evidence) if "$" in answer else leak(answer, *evidence)
    assert result.passed, [f.detail for f in result.findings]
    return {g.text: g.attributes.get("derived") for g in result.grounded}


@pytest.mark.parametrize(
    ("answer", "evidence", "how"),
    [
        # sums and differences of money with money
        ("The total is $261.", {"prices": {"economy": 158}, "return": {"price": 103}}, "103 + 158"),
        ("You pay $38 more.", {"old_fare": {"price": 174}, "new_fare": {"price": 136}}, "174 - 136"),
        ("It comes to $305.", {"flights": [{"price": 152}, {"price": 103}, {"price": 50}]},
         "103 + 152 + 50"),
        # counts with counts
        ("That is 42 bags in all.", {"checked_bags": 25, "carry_on_bags": 17}, "17 + 25"),
        # a product with a count of the evidence: a list of two passengers
        ("Two tickets cost $348.",
         {"price": 174, "passengers": [{"name": "Ann"}, {"name": "Bo"}]}, "2 × 174"),
        ("Three nights cost $360.", {"nights": 3, "nightly": {"price": 120}}, "3 × 120"),
        # a product with a rate of the evidence
        ("Compensation: $150.", "The compensation is $50 per passenger.", "3 × 50"),
        # a quotient by a count of the evidence
        ("That is $2,210 per passenger.",
         {"amount": 4420, "passengers": [{"name": "Ann"}, {"name": "Bo"}]}, "4420 / 2"),
        ("Each costs $64.", {"total": 320, "count": 5}, "320 / 5"),
    ],
)  # fmt: skip
def test_plausible_derivations_ground_and_show_how(answer: str, evidence: Any, how: str) -> None:
    assert how in derived(answer, evidence).values()


def test_the_turns_own_numbers_are_the_operands_first() -> None:
    evidence = {"fares": [{"price": 1625}, {"price": 1327}, {"price": 198}, {"price": 100}]}
    assert derived("$1,625 - $1,327 = $298.", evidence)["$298"] == "1625 - 1327"
    evidence = {"x": "3 passengers at $50 per passenger", "y": 100}
    said = derived("It is $50 per passenger, $150 in all.", evidence)
    assert said["$150"] == "3 × 50"


@pytest.mark.parametrize(
    ("answer", "evidence"),
    [
        # a price plus a count is no amount
        ("The total is $199.", {"price": 196, "available_seats": 3}),
        ("The total is $199.", {"price": 189, "available_seats": {"economy": 10}}),
        # money with a number nothing describes is no sum of one kind
        ("The total is $199.", {"price": 99, "flight_number": "HAT100", "note": "gate 100"}),
        # a product needs a count or a rate of the evidence: 9 and 24 are neither
        ("The total is $216.", {"price": 24, "id": "HAT009", "row": 9}),
        # a count only the answer states is no count of the evidence
        ("A 3 x 517 = $1,551 total.", {"price": 517}),
        # two prices are no count and no rate: no product
        ("The total is $2,400.", {"price": 24, "fee": 100}),
        # a quotient needs a count of the evidence: a price over a price is none
        ("That is $5 each.", {"price": 75, "fee": 15}),
        # a duration is no price over a count (the "2.5" derived as 75 / 30)
        ("The delay was 2.5 hours.", {"price": 75, "seats_left": 30}),
        # counts with money: "12 bags" is no sum of a price and a count
        ("That is 110 bags in all.", {"price": 100, "checked_bags": 10}),
    ],
)
def test_implausible_derivations_do_not_ground(answer: str, evidence: Any) -> None:
    result = refs(answer, evidence) if "$" in answer else leak(answer, evidence)
    assert not result.passed, [g.attributes for g in result.grounded]


def test_numbers_nothing_describes_are_still_summed_with_each_other() -> None:
    # "value" says nothing: two such numbers are of one (unknown) kind
    assert derived("The total is $305.", {"a": 152, "b": 103, "c": 50})["$305"] == "103 + 152 + 50"
    assert derived("That leaves 49.", {"x": "152 and 103"})["49"] == "152 - 103"


@pytest.mark.data
def test_tau_bench_random_amounts_are_rarely_derived_by_chance(
    data_dir: Callable[[str], Path],
) -> None:
    """A made-up fee appended to every assistant turn of the real runs is accepted as a
    derivation by chance in at most 20% of the turns (22-23% before the kinds were required,
    13-16% with them: sums of two and three prices still cover much of the range)."""
    from agentlens.ingest.openai_messages import read

    rng = random.Random(7)
    scorer = _grounding.no_fabricated_refs()
    turns = accepted = 0
    for path in sorted(data_dir("tau_bench").glob("*.json")):
        for t in read(path):
            injected: dict[str, int] = {}
            for step in t.steps:
                if step.kind == "text" and isinstance(step.output, str):
                    step.output += f"\n\nAn extra fee of ${rng.randint(20, 3000)} applies."
                    injected[step.id] = step.output.rindex("$")
            grounded = {(g.location, g.start) for g in scorer.score(t).grounded}
            turns += len(injected)
            accepted += sum((sid, at) in grounded for sid, at in injected.items())
    assert turns > 500
    assert accepted <= 0.2 * turns, f"{accepted} of {turns}"
