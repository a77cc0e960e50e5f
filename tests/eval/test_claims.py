"""Claim extraction: sentences, clauses, non-claims, and exact spans."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentlens.eval._claims import extract_claims, split_sentences


def texts(answer: str) -> list[str]:
    return [c.text for c in extract_claims(answer)]


def test_spans_point_into_the_answer() -> None:
    answer = "Hi there! Dr. Smith paid $3.50 on Jan. 5, e.g. for coffee. See https://example.com/a.b for details."
    claims = extract_claims(answer)
    assert [c.text for c in claims] == [
        "Dr. Smith paid $3.50 on Jan. 5, e.g. for coffee.",
        "See https://example.com/a.b for details.",
    ]
    for c in claims:
        assert answer[c.start : c.end] == c.text
    assert claims[0].start == answer.index("Dr.")


def test_abbreviations_decimals_initials_and_urls_do_not_split() -> None:
    assert texts("J. R. R. Tolkien wrote The Hobbit. He was born in 1892.") == [
        "J. R. R. Tolkien wrote The Hobbit.",
        "He was born in 1892.",
    ]
    assert texts("The U.S. economy grew 2.1% in 2023.") == ["The U.S. economy grew 2.1% in 2023."]
    assert texts("The flight departs at 3 p.m. tomorrow.") == [
        "The flight departs at 3 p.m. tomorrow."
    ]


def test_independent_clauses_are_split_conservatively() -> None:
    assert texts("The order shipped on May 3, and it arrived on May 5.") == [
        "The order shipped on May 3",
        "it arrived on May 5.",
    ]
    assert texts("The refund was approved; the customer was notified.") == [
        "The refund was approved",
        "the customer was notified.",
    ]
    assert texts("Paris is the capital of France and it has 2.1 million residents.") == [
        "Paris is the capital of France",
        "it has 2.1 million residents.",
    ]
    # a list of nouns joined by "and" is one claim
    assert texts("Alice and Bob signed the contract.") == ["Alice and Bob signed the contract."]
    assert texts("He bought apples, pears, and plums.") == ["He bought apples, pears, and plums."]


def test_clauses_can_be_kept_whole() -> None:
    answer = "The order shipped on May 3, and it arrived on May 5."
    assert [c.text for c in extract_claims(answer, clauses=False)] == [answer]


def test_markdown_lists_headings_and_code_blocks() -> None:
    answer = (
        "Here is what I found:\n\n- **Revenue** was $5.2M in Q3.\n- Costs fell 3%.\n\n"
        "## Summary\n1. The API returns 200 OK.\n\n```python\nx = 1. \n```\nProfit rose."
    )
    claims = extract_claims(answer)
    assert [c.text for c in claims] == [
        "Revenue** was $5.2M in Q3.",
        "Costs fell 3%.",
        "The API returns 200 OK.",
        "Profit rose.",
    ]
    for c in claims:
        assert answer[c.start : c.end] == c.text


def test_non_claims_are_skipped() -> None:
    answer = (
        "Hello! Is that what you meant? Thanks for asking. The invoice total is $42. "
        "Let me know if you need anything else. I hope this helps! Yes."
    )
    assert texts(answer) == ["The invoice total is $42."]
    assert texts("Would you like me to book it?") == []
    assert texts("Feel free to reach out.") == []


def test_a_trailing_one_letter_fragment_is_no_claim_of_its_own() -> None:
    answer = "The office is at 5th Ave. N."
    assert [c.text for c in extract_claims(answer)] == [answer]
    # near misses: a one-letter word inside a sentence, a two-letter sentence, and a letter on
    # a line of its own (a list item)
    assert [c.text for c in extract_claims("The winner was Team B. It won twice.")] == [
        "The winner was Team B. It won twice."
    ]
    assert [c.text for c in extract_claims("It is at 5th Ave. NW.")] == ["It is at 5th Ave.", "NW."]
    assert [c.text for c in extract_claims("Pick one:\n- It is plan A.\n- B")][-1] == "B"


def test_sentence_indices_group_clauses() -> None:
    claims = extract_claims("A was approved; B was denied. C shipped.")
    assert [c.sentence for c in claims] == [0, 0, 1]


@given(st.text(max_size=300))
def test_spans_are_always_exact(answer: str) -> None:
    for c in extract_claims(answer):
        assert answer[c.start : c.end] == c.text
        assert c.text.strip() == c.text
    for s, e in split_sentences(answer):
        assert 0 <= s < e <= len(answer)
