"""A worker's score JSON is stored as it came only when it is the JSON of the score read back.

``dump_exactly`` writes ``model_dump_json()`` and vouches for it when pydantic, reading it back,
builds a score whose ``model_dump_json()`` is the same text; ``stored_json`` gives that text for
the very scores ``known_dumps`` names, and a new dump for every other.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from enum import Enum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlens.model import FailureMode, Finding, Score, ScoreResult, Verdict
from agentlens.model._score import dump_exactly, known_dumps, stored_json


class Colour(Enum):
    RED = "red"


# what a scorer may keep in ``attributes``: JSON, and what pydantic writes as JSON by inference
leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats()  # NaN and the infinities included: written as null
    | st.text(max_size=8)  # control characters, non-ASCII, U+2028...
    | st.datetimes(timezones=st.none() | st.just(UTC))
    | st.decimals(allow_nan=False, allow_infinity=False, places=3)
    | st.binary(max_size=4).map(lambda b: b.hex().encode())
    | st.just(Colour.RED)
)
values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=4) | st.integers(0, 9), inner, max_size=3)
    ),
    max_leaves=10,
)
attributes = st.dictionaries(st.text(max_size=5), values, max_size=3)
findings = st.builds(
    Finding,
    failure_mode=st.none() | st.sampled_from(FailureMode),
    text=st.text(max_size=10),
    start=st.none() | st.integers(0, 2**40),
    end=st.none() | st.integers(0, 2**40),
    location=st.text(max_size=4),
    step_ids=st.lists(st.text(max_size=3), max_size=2),
    supported_by=st.none() | st.text(max_size=3),
    unverifiable=st.booleans(),
    detail=st.text(max_size=10),
    attributes=attributes,
)
results = st.builds(
    ScoreResult,
    passed=st.booleans(),
    value=st.none() | st.floats(),
    detail=st.text(max_size=10),
    findings=st.lists(findings, max_size=3),
    grounded=st.lists(findings, max_size=3),
    verdict=st.none() | st.sampled_from(Verdict),
    error=st.none() | st.text(max_size=5),
    attributes=attributes,
)
moments = st.datetimes(
    min_value=datetime(1970, 1, 2), timezones=st.just(UTC) | st.just(timezone(timedelta(hours=5)))
)


# Ways a scorer's result may differ from what validation would build (assignments are not
# validated): each is written as pydantic writes it, and must not be vouched for unless it
# reads back the same.
def _untyped(result: ScoreResult, how: str) -> None:
    if how == "int value":
        result.value = 3  # type: ignore[assignment]
    elif how == "text start" and (result.findings or result.grounded):
        (result.findings or result.grounded)[0].start = "7"  # type: ignore[assignment]
    elif how == "passed but flagged":
        result.verdict, result.passed = Verdict.FLAGGED, True
    elif how == "no verdict":
        result.verdict = None
    elif how == "text mode" and result.findings:
        result.findings[0].failure_mode = "fabricated_grounding"  # type: ignore[assignment]
    elif how == "extra":
        result.judge_model = "m"  # type: ignore[attr-defined]
    elif how == "bool value":
        result.value = True  # type: ignore[assignment]


@given(
    results,
    moments,
    st.sampled_from(
        [
            "",
            "int value",
            "text start",
            "passed but flagged",
            "no verdict",
            "text mode",
            "extra",
            "bool value",
        ]
    ),
)
@settings(max_examples=500, deadline=None)
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")
def test_a_vouched_dump_is_the_json_of_the_score_read_back(
    result: ScoreResult, when: datetime, how: str
) -> None:
    _untyped(result, how)
    score = Score.of(result, run_id="r1", scorer="s", version="2")
    score.scored_at = when
    doc, same = dump_exactly(score)
    assert doc == score.model_dump_json()  # always what the store wrote before
    if same and not _colliding_keys(result):
        assert Score.model_validate_json(doc).model_dump_json() == doc
    consistent = result.verdict is Verdict.PASSED or (
        result.verdict is not None and not result.passed
    )
    if how in ("", "extra", "int value"):
        assert same == consistent  # an ordinary score is vouched for
    if how in ("passed but flagged", "no verdict") or (
        how == "text start" and (result.findings or result.grounded)
    ):
        assert not same


def _colliding_keys(result: ScoreResult) -> bool:
    """A dict among the result's attributes with keys that are equal once written (1, "1")."""

    def collides(value: Any) -> bool:
        if isinstance(value, dict):
            return len({str(k) for k in value}) < len(value) or any(map(collides, value.values()))
        if isinstance(value, list | tuple):
            return any(map(collides, value))
        return False

    every = [result.attributes, *(f.attributes for f in [*result.findings, *result.grounded])]
    return any(map(collides, every))


def test_colliding_keys_are_stored_as_one_process_stores_them() -> None:
    score = Score.of(
        ScoreResult(passed=True, attributes={"a": {1: "x", "1": "y"}}),
        run_id="r",
        scorer="s",
        version="1",
    )
    doc, same = dump_exactly(score)
    assert same and doc == score.model_dump_json()
    assert '{"1":"x","1":"y"}' in doc
    assert Score.model_validate_json(doc).model_dump_json() != doc  # read back with one key


def test_a_plain_score_of_each_grounding_shape_is_vouched_for() -> None:
    grounded = Finding(
        failure_mode=None,
        text="CUST-12345",
        start=3,
        end=13,
        location="s4",
        step_ids=["s4"],
        supported_by="s2",
        attributes={"kind": "id", "derived": "1 + 2"},
    )
    bad = Finding(
        failure_mode=FailureMode.FABRICATED_GROUNDING,
        text="$1.5e16",
        attributes={"kind": "money", "key": 1.5e16, "closest": {"text": "ü\u2028\x01"}},
    )
    for result in (
        ScoreResult(passed=True, value=0.0, detail="1 reference grounded", grounded=[grounded]),
        ScoreResult(passed=False, value=1.0, findings=[bad], grounded=[grounded] * 3),
        ScoreResult(passed=False, value=math.nan, attributes={"d": Decimal("1.10")}),
        ScoreResult.from_error(ValueError("boom")),
    ):
        score = Score.of(result, run_id="r", scorer="s", version="1")
        doc, same = dump_exactly(score)
        assert same and doc == score.model_dump_json()
        assert Score.model_validate_json(doc).model_dump_json() == doc


def test_the_stored_json_is_the_known_dump_only_for_those_very_scores() -> None:
    score = Score.of(ScoreResult(passed=True), run_id="r", scorer="s", version="1")
    twin = score.model_copy()
    assert twin == score
    with known_dumps([score, twin], ["KNOWN", None]):
        assert stored_json(score) == "KNOWN"
        assert stored_json(twin) == twin.model_dump_json()
        assert stored_json(score.model_copy()) == score.model_dump_json()
    assert stored_json(score) == score.model_dump_json()
    with pytest.raises(RuntimeError), known_dumps([score], ["KNOWN"]):
        raise RuntimeError
    assert stored_json(score) == score.model_dump_json()  # forgotten on the way out too
