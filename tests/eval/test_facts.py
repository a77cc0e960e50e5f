"""What ``extract_facts`` reads as a fact, at its edges: labels, scale words, Unicode."""

from __future__ import annotations

import pytest

from agentlens.eval._facts import extract_facts
from agentlens.eval._references import get_extractor


def facts(text: str) -> list[tuple[str, str]]:
    return [(f.kind, f.text) for f in extract_facts(text, get_extractor().extract(text))]


def test_a_label_must_be_a_whole_word() -> None:
    """``v 2`` is a version label, the ``v`` ending ``Kiev`` is not."""
    assert ("number", "2,500") in facts("Kiev 2,500 people signed.")
    assert ("number", "2,500") not in facts("Use v 2,500 of the tool.")
    assert ("number", "2,500") not in facts("See page 2,500.")


@pytest.mark.parametrize("short", ["mn", "m"])
def test_every_scale_word_widens_the_rounding_allowed(short: str) -> None:
    (fact,) = extract_facts(f"about $5.2{short}", get_extractor().extract(f"about $5.2{short}"))
    assert fact.value == 5_200_000 and fact.tolerance > 50_000


def test_text_whose_lower_case_changes_length() -> None:
    """``İ`` lower-cases to two characters; a word used in lower case elsewhere is still no name."""
    assert facts("İ" * 20 + "\nParis. paris") == []
    assert facts("İ" * 20 + "\nParis. Then Lyon.") == [("name", "Paris"), ("name", "Lyon")]
