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
from agentlens.eval.judges._offline import RULES

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
    """Regression guard for the cross-validated figures in docs/judges.md."""
    data_dir("halueval")
    data = data_dir("wice").parent
    import json

    script = Path(__file__).resolve().parents[3] / "benchmarks" / "judge_accuracy.py"
    proc = subprocess.run(
        [sys.executable, str(script), str(data), "--no-ablation", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    out = json.loads(proc.stdout)
    assert out["folds"] == 5
    res = out["results"]
    # the default beats the coverage baseline (threshold chosen on the other folds) on both
    # sets, fold by fold
    for dataset in ("halueval", "wice"):
        judged, baseline = res[dataset]["balanced"]["folds"], res[dataset]["baseline"]["folds"]
        assert len(judged) == 5
        assert all(j > b for j, b in zip(judged, baseline, strict=True))
    # the HaluEval target (0.95) is met on every fold
    assert res["halueval"]["balanced"]["min"] >= 0.95
    assert res["halueval"]["strict"]["mean"] >= 0.95
    # WiCE: the 0.76 aim is met on the folds' mean in the default mode (docs/judges.md)
    assert res["wice"]["balanced"]["mean"] >= 0.76
    assert res["wice"]["lenient"]["mean"] >= 0.78


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


def test_a_name_matches_its_demonym_in_a_paraphrase_only() -> None:
    ev = (
        "TORONTO (August 22, 2017) - Canada Basketball is pleased to announce the final roster "
        "for the FIBA AmeriCup, with Richard Amardi selected to the senior men's team."
    )
    long = (
        "On August 22, 2017, Richard Amardi was selected for the Canadian senior men's team "
        "for the FIBA AmeriCup."
    )
    assert verdict(long, ev) is Label.SUPPORTED
    # near misses: another demonym; a short claim, which must be restated word for word
    assert verdict(long.replace("Canadian", "Argentine"), ev) is Label.UNSUPPORTED
    assert verdict("Amardi is Canadian.", "Amardi plays in Canada.") is Label.UNSUPPORTED
    assert verdict(long, ev, rules=_all_but("demonyms")) is Label.UNSUPPORTED


def test_a_scaled_number_matches_by_its_value() -> None:
    ev = "Togo covers 57,000 km2, with a population of approximately 8 million."
    assert verdict("Togo has a population of about 8 million.", ev) is Label.SUPPORTED
    assert verdict("Togo has a population of about 8,000,000.", ev) is Label.SUPPORTED
    # "2" is in the evidence ("km2"), but "2 million" is not
    assert verdict("Togo has a population of about 2 million.", ev) is Label.UNSUPPORTED


def test_one_negation_list_the_stop_words_exclude() -> None:
    from agentlens.eval.judges._text import _STOP_WORDS, NEGATIONS

    # "without" is the one negation that is also a stop word (a plain preposition too)
    assert {"without"} == _STOP_WORDS & NEGATIONS
    assert {"nor", "no", "not", "never"}.isdisjoint(_STOP_WORDS)


# -- reading fixes (offline-5): each with its near misses -------------------------------------


def test_inflected_forms_match_their_base() -> None:
    ev = "The actor dies in 2003 in Rome. The team wins the cup. She writes songs."
    assert verdict("The actor died in 2003 in Rome.", ev) is Label.SUPPORTED
    assert verdict("The actor died in Rome.", "The actor died in Rome.") is Label.SUPPORTED
    assert verdict("The team won the cup.", ev) is Label.SUPPORTED
    assert verdict("She wrote songs.", ev) is Label.SUPPORTED
    # near misses: another verb, another base
    assert verdict("The actor lived in 2003 in Rome.", ev) is Label.UNSUPPORTED
    assert verdict("The team lost the cup.", ev) is Label.UNSUPPORTED
    assert verdict("She sang songs.", ev) is Label.UNSUPPORTED
    # without the rule, "died" and "dies" are two words
    assert (
        verdict("The actor died in 2003 in Rome.", ev, rules=_all_but("inflections"))
        is Label.UNSUPPORTED
    )


def test_a_negation_matches_its_equivalent_phrasing() -> None:
    unable = "The committee was unable to approve the budget."
    cannot = "The committee cannot approve the budget."
    failed = "The committee had failed to approve the budget."
    assert verdict(cannot, unable) is Label.SUPPORTED
    assert verdict(unable, cannot) is Label.SUPPORTED
    assert verdict("The committee failed to approve the budget.", failed) is Label.SUPPORTED
    assert verdict("The committee did not approve the budget.", failed) is Label.SUPPORTED
    # near misses: the negation on one side only, in either direction
    assert verdict("The committee approved the budget.", unable) is Label.UNSUPPORTED
    assert verdict(unable, "The committee approved the budget.") is Label.UNSUPPORTED
    assert verdict("The committee failed.", "The committee succeeded.") is Label.UNSUPPORTED
    assert (
        verdict(cannot, unable, rules=_all_but("negation-forms")) is Label.UNSUPPORTED
    )  # "unable" was no negation


def test_not_only_is_no_negation() -> None:
    ev = "The fossils showed that Antarctica was warm and that it was joined to Africa."
    claim = "The fossils showed not only that Antarctica was warm but that it was joined to Africa."
    assert verdict(claim, ev) is Label.SUPPORTED
    # near misses: a plain "not", and "no, only" (an answer's "no")
    assert verdict("The fossils showed that Antarctica was not warm.", ev) is Label.UNSUPPORTED
    assert verdict("No, only Antarctica was warm.", ev) is Label.UNSUPPORTED


def test_a_compound_matches_split_or_joined() -> None:
    joined = "The story was first reported by TechCrunch in May."
    split = "The story was first reported by Tech Crunch in May."
    assert verdict(split, joined) is Label.SUPPORTED
    assert verdict(joined, split) is Label.SUPPORTED
    assert verdict("The spinoff was announced in May.", "The spin-off was announced in May.") is (
        Label.SUPPORTED
    )
    # near misses: one half of the compound only, or another compound sharing a half
    other = "The story was first reported by Tech Review in May."
    assert verdict(joined, other) is Label.UNSUPPORTED
    assert verdict(split, other) is Label.UNSUPPORTED
    assert verdict("The story was first reported by Crunch in May.", joined) is Label.UNSUPPORTED
    assert verdict(split, joined, rules=_all_but("compounds")) is Label.UNSUPPORTED


def test_a_bare_count_word_is_not_a_missing_number() -> None:
    ev = (
        "Mark Williams won the last frames of the evening session and holds a 10-7 lead over "
        "John Higgins going into the second day of the final in Sheffield."
    )
    claim = "Williams won the final three frames of the evening session to take a 10-7 lead over Higgins."
    judged = OfflineJudge().judge_sync(claims=[claim], evidence=ev)[0]
    assert judged.label is Label.SUPPORTED
    # near misses: a digit is a number; a measurement ("three weeks") is one too; a count
    # the evidence contradicts by value is not found
    assert verdict(claim.replace("three", "3"), ev) is Label.UNSUPPORTED
    weeks = "Williams won the evening session three weeks before the final in Sheffield against Higgins."
    assert "'3'" in OfflineJudge().judge_sync(claims=[weeks], evidence=ev)[0].reason
    assert verdict(claim, ev, rules=_all_but("count-words")) is Label.UNSUPPORTED
    # a short claim still has to be restated, but it is not failed for a missing number
    short = OfflineJudge().judge_sync(
        claims=["She starred in two films."], evidence="She starred in Alpha and Beta."
    )[0]
    assert short.label is Label.UNSUPPORTED and "names or numbers" not in short.reason


def test_a_decade_is_a_span_of_years() -> None:
    ev = "The band formed in 1994 in Leeds and split in the 2000s."
    assert verdict("The band formed in Leeds in the 1990s.", ev) is Label.SUPPORTED
    assert verdict("The band formed in Leeds in the '90s.", ev) is Label.SUPPORTED
    # near misses: another decade, and a year inside a decade the evidence only names
    assert verdict("The band formed in Leeds in the 1980s.", ev) is Label.UNSUPPORTED
    assert verdict("The band split in 2000.", ev) is Label.UNSUPPORTED
    assert verdict("The band split in the 2000s.", ev) is Label.SUPPORTED
    assert (
        verdict("The band formed in Leeds in the 1990s.", ev, rules=_all_but("decades"))
        is Label.UNSUPPORTED
    )


def test_a_one_letter_fragment_is_not_a_claim() -> None:
    ev = "The office is at 5th Ave. N. in Fargo."
    judged = OfflineJudge().judge_sync(claims=["N."], evidence=ev)[0]
    assert judged.label is Label.UNVERIFIABLE
    # near misses: two letters with a sign between ("R&B") and a one-letter name in a claim
    assert verdict("R&B", "R&B is a genre.") is Label.SUPPORTED
    assert verdict("The vitamin is K.", "The vitamin is D.") is Label.UNSUPPORTED


def test_rules_can_be_left_out_for_ablation() -> None:
    judge = OfflineJudge(rules=_all_but("decades", "request"))
    assert judge.model == "lexical-balanced-0.5-6-without-request+decades"
    assert OfflineJudge().rules == frozenset(RULES)
    with pytest.raises(ConfigError, match="unknown rule 'nope'"):
        OfflineJudge(rules=["nope"])


def _all_but(*names: str) -> frozenset[str]:
    return frozenset(RULES) - set(names)


# -- reading fixes (offline-6) ----------------------------------------------------------------


def test_a_numeric_date_reads_as_its_year_month_and_day() -> None:
    ev = (
        "(meta data) PUBLISHED DATETIME: 2018-06-30T07:00:00Z\n"
        "The inquiry into the warehouse fire in Leeds is still open."
    )
    claim = "The inquiry into the warehouse fire in Leeds was still open in June 2018."
    assert verdict(claim, ev) is Label.SUPPORTED
    assert verdict(claim, ev.replace("2018-06-30", "2018/06/30")) is Label.SUPPORTED
    assert verdict(claim, ev.replace("2018-06-30", "30/06/2018")) is Label.SUPPORTED
    assert verdict(claim, ev.replace("2018-06-30", "30.06.2018")) is Label.SUPPORTED
    # a date in the claim is found by the same date written out
    assert verdict("The inquiry opened on 2018-06-30.", "The inquiry opened on 30 June 2018.") is (
        Label.SUPPORTED
    )
    # near misses: another month; a day and month in an unknown order give no month; a
    # month's number is not a count; a score or a code is no date
    assert verdict(claim, ev.replace("2018-06-30", "2018-07-30")) is Label.UNSUPPORTED
    assert verdict(claim, ev.replace("2018-06-30", "06/07/2018")) is Label.UNSUPPORTED
    assert verdict("The inquiry opened 6 times.", "The inquiry opened on 2018-06-30.") is (
        Label.UNSUPPORTED
    )
    assert verdict("The inquiry opened in June 2018.", "The inquiry opened, code 2018-6.") is (
        Label.UNSUPPORTED
    )
    assert verdict(claim, ev, rules=_all_but("dates")) is Label.UNSUPPORTED


def test_a_short_year_range_is_two_years() -> None:
    ev = "The new name will be used in full from the 2018-2019 academic year."
    claim = "The new name will be used in full from the 2018–19 academic year."
    assert verdict(claim, ev) is Label.SUPPORTED
    assert verdict(claim.replace("2018–19", "2018/19"), ev) is Label.SUPPORTED
    assert verdict("The new name will be used in full in 2019.", claim) is Label.SUPPORTED
    # near misses: another range; two numbers that count down are no range of years
    assert verdict(claim.replace("2018–19", "2018–20"), ev) is Label.UNSUPPORTED
    assert verdict("The code was set in 1985.", "The code was set to 1990-85.") is (
        Label.UNSUPPORTED
    )
    assert verdict(claim, ev, rules=_all_but("dates")) is Label.UNSUPPORTED


def test_a_name_written_out_matches_its_acronym() -> None:
    ev = "The case went before the U.S. District Court in Kansas and later the UN assembly."
    assert verdict("The case went before the United States District Court in Kansas.", ev) is (
        Label.SUPPORTED
    )
    assert verdict("The case went before the USA District Court in Kansas.", ev) is (
        Label.SUPPORTED
    )
    assert verdict("The case later went before the United Nations assembly.", ev) is (
        Label.SUPPORTED
    )
    assert (
        verdict(
            "The case went before the U.S. District Court in Kansas.",
            ("The case went before the United States District Court in Kansas."),
        )
        is Label.SUPPORTED
    )
    # near misses: another country written out; a word of the name alone
    assert verdict("The case went before the United Kingdom District Court in Kansas.", ev) is (
        Label.UNSUPPORTED
    )
    assert verdict("The case went before the United District Court in Kansas.", ev) is (
        Label.UNSUPPORTED
    )
    assert (
        verdict(
            "The case went before the United States District Court in Kansas.",
            ev,
            rules=_all_but("initialisms"),
        )
        is Label.UNSUPPORTED
    )


def test_a_negation_is_matched_in_any_sentence_that_negates_the_same_words() -> None:
    ev = (
        "Ojeda, a state senator from Logan County, voted for Trump in 2016 and now regrets that "
        'vote. "Because he hasn\'t done anything," Ojeda said.'
    )
    # the closest sentence is the first; the negation is in the second
    claim = (
        "Ojeda, a state senator from Logan County, regrets his 2016 vote for Trump because he "
        "hasn't done anything."
    )
    assert verdict(claim, ev) is Label.SUPPORTED
    # near misses: a negation of other words, in the claim or in the evidence; a negation the
    # evidence does not make at all
    assert verdict(claim.replace("done anything", "kept his word"), ev) is Label.UNSUPPORTED
    assert verdict(claim, ev.replace("done anything", "visited Logan")) is Label.UNSUPPORTED
    contradicts = (
        "Ojeda, a state senator from Logan County, voted for Trump in 2016 and does not regret "
        "that vote."
    )
    assert verdict(contradicts, ev) is Label.UNSUPPORTED
    assert verdict(claim, ev, rules=_all_but("negation-anywhere")) is Label.UNSUPPORTED
