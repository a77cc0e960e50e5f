"""A worker's score JSON is stored as it came only when it is the JSON of the score read back.

``dump_exactly`` writes ``model_dump_json()`` and vouches for it when pydantic, reading it back,
builds a score whose ``model_dump_json()`` is the same text; a :class:`ScoreRow` carries a
score's stored columns with that text (or ``stored_json``, the store's own dump).
"""

from __future__ import annotations

import math
from collections import namedtuple
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from enum import Enum, IntEnum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import PydanticSerializationError

from agentlens.model import FailureMode, Finding, Score, ScoreResult, ScoreRow, Verdict, to_epoch_us
from agentlens.model._score import dump_exactly, passed_row, plain_json, stored_json


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


def findings_of(attributes: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[Finding]:
    """Findings with every field generated, ``attributes`` from the strategy given."""
    return st.builds(
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


def results_of(
    findings: st.SearchStrategy[Finding], attributes: st.SearchStrategy[dict[str, Any]]
) -> st.SearchStrategy[ScoreResult]:
    """Results with every field generated, of the findings and attributes given."""
    return st.builds(
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


findings = findings_of(attributes)
results = results_of(findings, attributes)
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


def _grounded_id(**attributes: Any) -> Finding:
    """A grounded claim as ``no_fabricated_refs`` writes one: an id found in step ``s2``."""
    return Finding(
        failure_mode=None,
        text="CUST-12345",
        start=3,
        end=13,
        location="s4",
        step_ids=["s4"],
        supported_by="s2",
        attributes={"kind": "id", **attributes},
    )


def _fabricated_amount(detail: str = "") -> Finding:
    """A fabricated amount with its closest evidence: a float key and text JSON escapes."""
    return Finding(
        failure_mode=FailureMode.FABRICATED_GROUNDING,
        text="$1.5e16",
        detail=detail,
        attributes={"kind": "money", "key": 1.5e16, "closest": {"text": "ü\u2028\x01"}},
    )


def test_a_plain_score_of_each_grounding_shape_is_vouched_for() -> None:
    grounded = _grounded_id(derived="1 + 2")
    bad = _fabricated_amount()
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


def test_a_row_holds_the_columns_a_store_writes_of_its_score() -> None:
    findings = [
        Finding(failure_mode=FailureMode.PARAMETRIC_LEAKAGE, text="a"),
        Finding(failure_mode=FailureMode.FABRICATED_GROUNDING, text="b"),
        Finding(failure_mode=None, text="not counted"),
        Finding(failure_mode=FailureMode.PARAMETRIC_LEAKAGE, text="c"),
    ]
    result = ScoreResult(passed=False, value=2.5, detail="d", findings=findings)
    score = Score.of(result, run_id="r", scorer="s", version="3")
    row = ScoreRow.of(score)
    assert row[:10] == (
        "r",
        "s",
        "3",
        "flagged",
        False,
        2.5,
        "d",
        None,
        4,
        to_epoch_us(score.scored_at),
    )
    # in order of first appearance, as text: what the failure-mode columns hold
    assert row.modes == (("parametric_leakage", 2), ("fabricated_grounding", 1))
    assert all(type(mode) is str for mode, _ in row.modes)
    assert row.doc == stored_json(score) == score.model_dump_json()
    assert row.score is score
    sent = ScoreRow.of(score, "VOUCHED", keep=False)
    assert sent.doc == "VOUCHED" and sent.score is None and sent[:11] == row[:11]
    error = ScoreRow.of(
        Score.of(ScoreResult.from_error(ValueError("x")), run_id="r", scorer="s", version="1")
    )
    assert (error.verdict, error.passed, error.error, error.modes) == (
        "error",
        False,
        "ValueError: x",
        (),
    )


# ---------------------------------------------------------------- the plain writer (orjson)


class Shade(IntEnum):
    DARK = 1


class Pair(Enum):
    AB = ("a", 1)


class Label(str):
    pass


Named = namedtuple("Named", "a b")

# what orjson writes itself as pydantic does (most scores: the writer's own path)...
plain_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats()
    | st.text(max_size=8)
    | st.uuids()
    | st.sampled_from([Shade.DARK, Pair.AB, FailureMode.NO_PROGRESS, Verdict.PASSED])
)
plain_values = st.recursive(
    plain_leaves,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
# ...and what it must leave to pydantic, or write as pydantic does though pydantic warns
odd_leaves = (
    leaves
    | plain_leaves
    | st.integers(min_value=-(2**64), max_value=2**65)
    | st.text(max_size=3).map(Label)
    | st.tuples(st.integers(), st.text(max_size=2)).map(lambda t: Named(*t))
    | st.frozensets(st.integers(0, 3), max_size=2)
    | st.just(complex(1, 2))
    | st.text(max_size=3).map(lambda t: t + "\ud800")  # a lone surrogate: pydantic refuses too
)
odd_values = st.recursive(
    odd_leaves,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=4) | st.integers(0, 9), inner, max_size=3)
        | st.dictionaries(st.text(max_size=2).map(Label), inner, max_size=2)
    ),
    max_leaves=6,
)
odd_attributes = st.dictionaries(st.text(max_size=5), plain_values, max_size=3)
odd_findings = findings_of(odd_attributes)
odd_results = results_of(odd_findings, odd_attributes)
any_moment = st.datetimes(
    timezones=st.just(UTC)
    | st.just(UTC)
    | st.just(UTC)
    | st.none()
    | st.just(timezone(timedelta(0)))
    | st.just(timezone(timedelta(hours=-3)))
    | st.just(timezone(timedelta(seconds=30)))
)


def _ill_typed(score: Score, how: str) -> None:
    """Values of a type other than the declared one (assignments are not validated)."""
    some = (score.findings or score.grounded or [None])[0]
    if how == "int value":
        score.value = 3  # type: ignore[assignment]
    elif how == "bool start" and some is not None:
        some.start = True  # type: ignore[assignment]
    elif how == "text mode" and some is not None:
        some.failure_mode = "fabricated_grounding"  # type: ignore[assignment]
    elif how == "int step id" and some is not None:
        some.step_ids = ["s1", 2]  # type: ignore[list-item]
    elif how == "label text" and some is not None:
        some.text = Label("x")
    elif how == "tuple steps" and some is not None:
        some.step_ids = ("s1",)  # type: ignore[assignment]
    elif how == "finding extra" and some is not None:
        some.note = "n"  # type: ignore[attr-defined]
    elif how == "score extra":
        score.judge = "m"  # type: ignore[attr-defined]
    elif how == "fields reordered" and some is not None:
        object.__setattr__(some, "__dict__", dict(reversed(list(some.__dict__.items()))))
    elif how == "field missing" and some is not None:
        del some.__dict__["detail"]
    elif how == "stray key" and some is not None:
        some.__dict__["stray"] = 1
    elif how == "subclass finding":
        score.findings.append(_Marked(failure_mode=None, text="m"))
    elif how == "naive time":
        score.scored_at = score.scored_at.replace(tzinfo=None)


class _Marked(Finding):
    mark: int = 1


@given(
    odd_results,
    any_moment,
    st.sampled_from(
        [
            "",
            "int value",
            "bool start",
            "text mode",
            "int step id",
            "label text",
            "tuple steps",
            "finding extra",
            "score extra",
            "fields reordered",
            "field missing",
            "stray key",
            "subclass finding",
            "naive time",
            "any field",
            "any field",
            "any field",
            "odd attribute",
            "odd attribute",
        ]
    ),
    st.sampled_from(sorted(Finding.model_fields)),
    odd_values,
)
@settings(max_examples=400, deadline=None)
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")
def test_the_plain_writer_writes_what_pydantic_writes_or_nothing(
    result: ScoreResult, when: datetime, how: str, field: str, value: Any
) -> None:
    score = Score.of(result, run_id="r1", scorer="s", version="2")
    score.scored_at = when
    _ill_typed(score, how)
    some = (score.findings or score.grounded or [None])[0]
    if how == "any field" and some is not None:
        some.__dict__[field] = value  # any value in any field (assignment is not validated)
    if how == "odd attribute":
        (some.attributes if some is not None else score.attributes)["odd"] = value
    try:
        expected: str | None = score.model_dump_json()
    except PydanticSerializationError:
        expected = None
    doc = plain_json(score)
    if how == "" and when.utcoffset() == timedelta(0):
        assert doc is not None  # a plain score at UTC: the writer's own
    if doc is not None:
        assert doc == expected
        assert stored_json(score) == doc
    elif expected is not None:
        assert stored_json(score) == expected
    if how in ("bool start", "label text", "subclass finding", "finding extra") and some:
        assert doc is None
    if how in ("int value", "score extra", "naive time", "stray key", "field missing"):
        assert doc is None or (how in ("stray key", "field missing") and some is None)


def test_the_plain_writer_takes_the_scores_the_scorers_make() -> None:
    grounded = _grounded_id()
    bad = _fabricated_amount(detail="not in the evidence")
    loop = Finding(
        failure_mode=FailureMode.REPEATED_TOOL_CALL,
        text="search(q)",
        step_ids=["s1", "s2", "s3"],
        attributes={"repeats": 3, "wasted_tokens": 120, "cost": 0.25, "calls": [[1, "a"]]},
    )
    for result in (
        ScoreResult(passed=True, value=0.0, detail="1 reference grounded", grounded=[grounded]),
        ScoreResult(passed=False, value=1.0, findings=[bad], grounded=[grounded] * 3),
        ScoreResult(passed=False, value=3.0, findings=[loop], attributes={"steps": 9}),
        ScoreResult.from_error(ValueError("boom")),
    ):
        score = Score.of(result, run_id="r", scorer="s", version="1")
        doc = plain_json(score)
        assert doc is not None and doc == score.model_dump_json()
        back = Score.model_validate_json(doc)
        assert plain_json(back) == doc  # read back (pydantic's UTC): the same text again


# a grounded claim's fields as the grounding scorers make them: every field, of its type
plain_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats()
    | st.text(max_size=6),  # lone surrogates included: refused, then pydantic writes the score
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)
claims = st.fixed_dictionaries(
    {
        "failure_mode": st.none(),
        "text": st.text(max_size=10),
        "start": st.integers(0, 2**40),
        "end": st.integers(0, 2**40),
        "location": st.text(max_size=4),
        "step_ids": st.lists(st.text(max_size=3), max_size=1),
        "supported_by": st.text(max_size=3),
        "unverifiable": st.just(False),
        "detail": st.just(""),
        "attributes": st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
    }
)


@given(
    grounded=st.lists(claims, max_size=4),
    value=st.floats(),
    detail=st.text(max_size=12),
    attributes=st.dictionaries(st.text(max_size=5), plain_json_values, max_size=3),
    when=st.datetimes(timezones=st.just(UTC)),
)
@settings(max_examples=300, deadline=None)
def test_a_passed_row_made_without_its_score_is_the_row_of_the_score(
    grounded: list[dict[str, Any]],
    value: float,
    detail: str,
    attributes: dict[str, Any],
    when: datetime,
) -> None:
    grounded = [{name: c[name] for name in Finding.model_fields} for c in grounded]  # in order
    result = ScoreResult(
        passed=True,
        value=value,
        detail=detail,
        grounded=[Finding(**c) for c in grounded],
        attributes=attributes,
    )
    score = Score(**result.model_dump(), run_id="r1", scorer="s", version="2", scored_at=when)
    row = passed_row(
        "r1",
        "s",
        "2",
        value=value,
        detail=detail,
        grounded=[dict(c) for c in grounded],
        attributes=attributes,
        scored_at=when,
    )
    if plain_json(score) is None:  # a value orjson does not write as pydantic does
        assert row is None
    else:
        assert row == ScoreRow.of(score, keep=False)
        assert row is not None and row.doc == score.model_dump_json()


def test_a_passed_row_is_refused_for_a_time_not_at_utc() -> None:
    made = {"value": 0.0, "detail": "d", "grounded": [], "attributes": {}}
    at_utc = datetime(2026, 3, 1, 12, tzinfo=UTC)
    assert passed_row("r", "s", "1", **made, scored_at=at_utc) is not None  # type: ignore[arg-type]
    paris = at_utc.astimezone(timezone(timedelta(hours=1)))
    assert passed_row("r", "s", "1", **made, scored_at=paris) is None  # type: ignore[arg-type]


def test_a_passed_row_is_refused_for_a_text_orjson_does_not_write() -> None:
    """A lone surrogate (which a stored run's JSON may hold, escaped): orjson refuses it, so the
    row is left to the score's own path, which writes what pydantic writes."""
    claim = {**_grounded_id().__dict__, "text": "CUST-1\ud800"}
    made = {"value": 0.0, "detail": "d", "attributes": {}}
    assert passed_row("r", "s", "1", grounded=[claim], **made) is None  # type: ignore[arg-type]
    assert passed_row("r", "s", "1", grounded=[_grounded_id().__dict__], **made) is not None  # type: ignore[arg-type]
