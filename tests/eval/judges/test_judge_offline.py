"""The offline judge: alignment, coverage, numbers, names, negations; and its accuracy on data."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from agentlens.errors import ConfigError
from agentlens.eval._claims import Claim
from agentlens.eval._evidence import EvidenceItem
from agentlens.eval.judges import Judge, Label, OfflineJudge, get_judge

EVIDENCE = (
    "Order 4417 was placed on 3 March 2024 by Dana Reyes. The total was $1,250.00. "
    "The package was not delivered; the carrier reported a damaged label."
)


def verdict(claim: str, evidence: str | list[EvidenceItem] = EVIDENCE, **kw: object) -> Label:
    judge = OfflineJudge(**kw)  # type: ignore[arg-type]
    return judge.judge_sync(claims=[claim], evidence=evidence)[0].label


def test_is_a_judge() -> None:
    assert isinstance(OfflineJudge(), Judge)
    assert isinstance(get_judge("offline"), OfflineJudge)


def test_restated_facts_are_supported() -> None:
    assert verdict("Order 4417 was placed by Dana Reyes.") is Label.SUPPORTED
    assert verdict("The total was $1250.") is Label.SUPPORTED  # 1,250.00 == 1250
    assert verdict("The carrier reported a damaged label.") is Label.SUPPORTED


def test_numbers_dates_and_names_must_agree() -> None:
    assert verdict("Order 4418 was placed by Dana Reyes.") is Label.UNSUPPORTED
    assert verdict("The total was $1,300.") is Label.UNSUPPORTED
    assert verdict("Order 4417 was placed on 4 March 2024.") is Label.UNSUPPORTED
    assert verdict("Order 4417 was placed by Sam Reyes.") is Label.UNSUPPORTED


def test_negation_mismatch_is_unsupported() -> None:
    assert verdict("The package was delivered.") is Label.UNSUPPORTED
    assert verdict("The package was not delivered.") is Label.SUPPORTED


def test_correct_but_absent_is_not_supported() -> None:
    # true in the world, absent from the evidence
    assert verdict("Paris is the capital of France.") is Label.UNSUPPORTED


def test_a_question_in_the_evidence_supports_nothing() -> None:
    ev = [
        EvidenceItem(
            "input", "input", None, "Was order 77 refunded?", "Was order 77 refunded?", -1
        ),
    ]
    assert verdict("Order 77 was refunded.", ev) is Label.UNSUPPORTED


def test_json_records_are_aligned_as_units() -> None:
    value = '[{"id": "A-1", "status": "shipped", "city": "Lyon"}, {"id": "A-2", "status": "lost", "city": "Oslo"}]'
    ev = [EvidenceItem("s1", "tool", "orders", value, value, 0)]
    judge = OfflineJudge()
    ok, mixed = judge.judge_sync(
        claims=["A-2 was lost in Oslo.", "A-1 was lost in Lyon."], evidence=ev
    )
    assert ok.label is Label.SUPPORTED
    assert ok.evidence_span is not None and ok.evidence_span.source == "s1"
    assert value[ok.evidence_span.start : ok.evidence_span.end].startswith('{"id": "A-2"')
    assert mixed.label is Label.UNSUPPORTED


def test_verdicts_keep_order_claims_and_spans() -> None:
    claims: list[Claim | str] = [Claim("The total was $1,250.00.", 10, 34), "Nothing about it."]
    out = OfflineJudge().judge_sync(claims=claims, evidence=EVIDENCE)
    assert [v.claim.text for v in out if v.claim] == [
        "The total was $1,250.00.",
        "Nothing about it.",
    ]
    assert out[0].claim is not None and out[0].claim.start == 10
    assert out[0].evidence_span is not None
    assert (
        EVIDENCE[out[0].evidence_span.start : out[0].evidence_span.end]
        == "The total was $1,250.00."
    )
    assert 0.0 <= out[1].confidence <= 1.0 and out[1].reason


def test_no_evidence_and_no_content() -> None:
    assert verdict("Order 4417 shipped.", "") is Label.UNSUPPORTED
    assert verdict("It is.") is Label.UNVERIFIABLE


def test_lenient_mode_tolerates_paraphrase_but_not_new_names() -> None:
    ev = "The Royal Society asked Canadians to choose a national bird online in 2015."
    claim = (
        "In 2015 the Royal Society ran an online poll asking Canadians to choose a national bird."
    )
    # strict: "poll", "ran" are not in the evidence
    assert verdict(claim, ev, mode="strict") is Label.UNSUPPORTED
    assert verdict(claim, ev, mode="lenient") is Label.SUPPORTED
    assert (
        verdict("In 2016 the Royal Society asked Canadians.", ev, mode="lenient")
        is Label.UNSUPPORTED
    )
    assert verdict("The Audubon Society asked Canadians.", ev, mode="lenient") is Label.UNSUPPORTED


def test_default_mode_is_balanced() -> None:
    judge = OfflineJudge()
    assert judge.mode == "balanced" and judge.model == "lexical-balanced-0.5-6"
    assert get_judge("offline", mode="strict").model == "lexical-strict"
    with pytest.raises(ConfigError, match="mode must be one of balanced, strict, lenient"):
        OfflineJudge(mode="loose")  # type: ignore[arg-type]


def test_balanced_mode_lets_long_claims_paraphrase_common_words_only() -> None:
    ev = "The Royal Society asked Canadians to choose a national bird online in 2015."
    # a long paraphrase: "ran", "poll" are new, every name and number is in the evidence
    long = (
        "In 2015 the Royal Society ran an online poll asking Canadians to choose a national bird."
    )
    assert verdict(long, ev) is Label.SUPPORTED
    # the same paraphrase with one name or number changed is not
    assert verdict(long.replace("2015", "2016"), ev) is Label.UNSUPPORTED
    assert verdict(long.replace("Royal", "Audubon"), ev) is Label.UNSUPPORTED
    # a short claim must be restated: one new word in three is not a paraphrase
    assert verdict("The Royal Society ran a poll.", ev) is Label.UNSUPPORTED
    assert verdict("The Royal Society asked Canadians.", ev) is Label.SUPPORTED
    # a negation on one side only fails however long the claim
    negated = "In 2015 the Royal Society did not ask Canadians to choose a national bird online."
    assert verdict(negated, ev) is Label.UNSUPPORTED
    # mostly new content fails even with its names and numbers present
    thin = (
        "In 2015 the Royal Society hosted lavish banquets celebrating famous explorers, "
        "painters, poets and inventors."
    )
    assert verdict(thin, ev) is Label.UNSUPPORTED


def test_normalisation_numbers_diacritics_acronyms() -> None:
    ev = "Aarón Galindo played three seasons in the U.S. and was noted for his speed."
    assert verdict("Aaron Galindo played 3 seasons in the US.", ev) is Label.SUPPORTED
    assert verdict("Aaron Galindo played 0 seasons in the USA.", ev) is Label.UNSUPPORTED
    # "noted" is not a negation
    assert verdict("Galindo was noted for his speed.", ev, mode="strict") is Label.SUPPORTED
    assert verdict("Galindo played twelve seasons.", ev) is Label.UNSUPPORTED


def test_async_api_matches_sync() -> None:
    judge = OfflineJudge()
    a = asyncio.run(judge.judge(claims=["The total was $1,250.00."], evidence=EVIDENCE))
    b = judge.judge_sync(claims=["The total was $1,250.00."], evidence=EVIDENCE)
    assert a == b


@pytest.mark.data
def test_accuracy_targets_on_public_data(data_dir: Callable[[str], Path]) -> None:
    """Regression guard for the figures in docs/judges.md (holdout half included)."""
    data_dir("halueval")
    data = data_dir("wice").parent
    import json

    script = Path(__file__).resolve().parents[3] / "benchmarks" / "judge_accuracy.py"
    out = {}
    for mode in ("balanced", "strict", "lenient"):
        proc = subprocess.run(
            [sys.executable, str(script), str(data), "--mode", mode, "--json"],
            capture_output=True,
            text=True,
            check=True,
        )
        out[mode] = json.loads(proc.stdout)["results"]
    # the default: clearly above the coverage baseline on both sets, holdout included
    for dataset in ("halueval", "wice"):
        for split in ("holdout", "all"):
            pair = out["balanced"][dataset][split]
            assert pair["judge"]["balanced_accuracy"] > pair["baseline"]["balanced_accuracy"] + 0.02
    # the HaluEval target (0.95) is met on the held-out half too; WiCE is just under its 0.75
    assert out["balanced"]["halueval"]["all"]["judge"]["balanced_accuracy"] >= 0.95
    assert out["balanced"]["halueval"]["holdout"]["judge"]["balanced_accuracy"] >= 0.95
    assert out["balanced"]["wice"]["all"]["judge"]["balanced_accuracy"] >= 0.74
    # the single-purpose modes keep their figures
    assert out["strict"]["halueval"]["all"]["judge"]["balanced_accuracy"] >= 0.95
    assert out["strict"]["halueval"]["holdout"]["judge"]["balanced_accuracy"] >= 0.95
    assert out["lenient"]["wice"]["all"]["judge"]["balanced_accuracy"] >= 0.75


def _question_and_knowledge(question: str, knowledge: str) -> list[EvidenceItem]:
    return [
        EvidenceItem("input", "input", None, question, question, -1),
        EvidenceItem("s1", "retrieval", "search", knowledge, knowledge, 0),
    ]


def test_words_repeated_from_the_question_do_not_make_a_claim_long() -> None:
    ev = _question_and_knowledge(
        "Which airport serves Albany, Georgia?",
        "Southwest Georgia Regional Airport is a public airport located in Albany, Georgia. "
        "It is served by Delta Connection flights to Atlanta.",
    )
    # restating the evidence is supported
    assert (
        verdict("Southwest Georgia Regional Airport is located in Albany, Georgia.", ev)
        is Label.SUPPORTED
    )
    # six words are found, but four only repeat the question: what the answer adds
    # ("the busy Southwest Georgia Regional hub") is a short claim of its own, not restated
    echo = "The airport that serves Albany, Georgia is the busy Southwest Georgia Regional hub."
    judged = OfflineJudge().judge_sync(claims=[echo], evidence=ev)[0]
    assert judged.label is Label.UNSUPPORTED
    assert "repeats from the question" in judged.reason
    # the same evidence given as tool output (no question) lets the long paraphrase through
    plain = [EvidenceItem("s1", "tool", "search", item.text, item.text, 0) for item in ev]
    assert verdict(echo, plain) is Label.SUPPORTED


def test_words_of_one_family_match() -> None:
    ev = (
        "A native of Vandergrift, the young singer discovered her voice at a young age and "
        "learned guitar in her teenage years. She now performs in the Norwegian league of choirs."
    )
    # "singing" ~ "singer" (a derivational suffix), "Norway" ~ "Norwegian" (the same start)
    claim = "She began singing at a young age, and learned guitar in her teenage years."
    assert verdict(claim, ev) is Label.SUPPORTED
    assert verdict(claim.replace("singing", "dancing"), ev) is Label.UNSUPPORTED
    assert (
        verdict("She performs in the choir league of Norway.", ev, mode="strict") is Label.SUPPORTED
    )
    assert verdict("She performs in the choir league of Sweden.", ev) is Label.UNSUPPORTED


def test_a_scaled_number_matches_by_its_value() -> None:
    ev = "Togo covers 57,000 km2, with a population of approximately 8 million."
    assert verdict("Togo has a population of about 8 million.", ev) is Label.SUPPORTED
    assert verdict("Togo has a population of about 8,000,000.", ev) is Label.SUPPORTED
    # "2" is in the evidence ("km2"), but "2 million" is not
    assert verdict("Togo has a population of about 2 million.", ev) is Label.UNSUPPORTED


def test_each_clause_of_a_paraphrase_must_be_grounded() -> None:
    ev = "The Royal Society asked Canadians to choose a national bird online in 2015."
    reworded = (
        "In 2015, the Royal Society ran an online poll, asking Canadians to choose a national bird."
    )
    assert verdict(reworded, ev) is Label.SUPPORTED
    # long enough to paraphrase, names and number all found, but one clause is its own
    added = (
        "In 2015 the Royal Society asked Canadians online to choose a national bird, "
        "hoping to boost tourism revenue."
    )
    judged = OfflineJudge().judge_sync(claims=[added], evidence=ev)[0]
    assert judged.label is Label.UNSUPPORTED
    assert "hoping to boost tourism revenue" in judged.reason
    # lenient keeps judging the claim as a whole
    assert verdict(added, ev, mode="lenient") is Label.SUPPORTED


def test_one_negation_list_the_stop_words_exclude() -> None:
    from agentlens.eval.judges._text import _STOP_WORDS, NEGATIONS

    # "without" is the one negation that is also a stop word (a plain preposition too)
    assert {"without"} == _STOP_WORDS & NEGATIONS
    assert {"nor", "no", "not", "never"}.isdisjoint(_STOP_WORDS)
