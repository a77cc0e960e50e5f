"""The model's fast paths give exactly what the validated paths give.

``Trace._from_trusted`` / ``Step._from_trusted`` (the store's read path) must build objects equal
to ``model_validate`` in every respect.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError
from pydantic_core import from_json

from agentlens.model import Step, StepKind, Trace
from agentlens.model._trace import _trusted_step, _trusted_trace

# -- trusted constructors ---------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=12,
)


@st.composite
def time_texts(draw: st.DrawFn) -> str:
    """A time as a producer may write it: UTC ``Z``, an offset, or naive; 0-6 fraction digits."""
    moment = draw(st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 12, 31)))
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    digits = draw(st.integers(0, 6))
    if digits:
        text += "." + f"{moment.microsecond:06d}"[:digits]
    suffix = draw(
        st.sampled_from(["Z", "", "+00:00", "-00:00", "+05:30", "-08:00", "+14:00", "-11:45"])
    )
    return text + suffix


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


STEP_FIELDS = set(Step.model_fields)
TRACE_FIELDS = set(Trace.model_fields)
unknown_step_keys = st.text(min_size=1, max_size=8).filter(lambda k: k not in STEP_FIELDS)
unknown_run_keys = st.text(min_size=1, max_size=8).filter(lambda k: k not in TRACE_FIELDS)


@st.composite
def step_records(draw: st.DrawFn, index: int = 0) -> dict[str, Any]:
    record: dict[str, Any] = {"id": f"s{index}-" + draw(st.text(max_size=4))}
    optional: dict[str, st.SearchStrategy[Any]] = {
        "parent_id": maybe(st.text(max_size=6)),
        "name": maybe(st.text(max_size=6)),
        "input": json_values,
        "output": json_values,
        "error": json_values,
        "started_at": maybe(time_texts()),
        "ended_at": maybe(time_texts()),
        "attributes": st.dictionaries(st.text(max_size=6), json_values, max_size=3),
    }
    record["kind"] = draw(st.sampled_from([k.value for k in StepKind]))
    for key, strategy in optional.items():
        if draw(st.booleans()):
            record[key] = draw(strategy)
    record.update(draw(st.dictionaries(unknown_step_keys, json_values, max_size=2)))
    keys = list(record)
    order = draw(st.permutations(keys))
    return {k: record[k] for k in order}


@st.composite
def trace_records(draw: st.DrawFn) -> dict[str, Any]:
    record: dict[str, Any] = {"id": draw(st.text(min_size=1, max_size=10))}
    optional: dict[str, st.SearchStrategy[Any]] = {
        "schema_version": st.just(1),
        "project": st.text(max_size=6),
        "agent": maybe(st.text(max_size=6)),
        "name": maybe(st.text(max_size=6)),
        "status": st.sampled_from(["ok", "error", "running"]),
        "started_at": maybe(time_texts()),
        "ended_at": maybe(time_texts()),
        "input": json_values,
        "output": json_values,
        "metadata": st.dictionaries(st.text(max_size=6), json_values, max_size=3),
        "links": st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=2),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            record[key] = draw(strategy)
    n = draw(st.integers(0, 4))
    if n or draw(st.booleans()):
        record["steps"] = [draw(step_records(i)) for i in range(n)]
    record.update(draw(st.dictionaries(unknown_run_keys, json_values, max_size=2)))
    order = draw(st.permutations(list(record)))
    return {k: record[k] for k in order}


def assert_same(a: BaseModel, b: BaseModel) -> None:
    """Equal as pydantic sees it, and in every detail a caller could observe."""
    assert type(a) is type(b)
    assert a == b
    assert a.model_dump() == b.model_dump()
    assert a.model_dump_json() == b.model_dump_json()
    assert a.model_dump_json(exclude_unset=True) == b.model_dump_json(exclude_unset=True)
    assert a.model_fields_set == b.model_fields_set
    assert a.__pydantic_extra__ == b.__pydantic_extra__
    assert list(a.__pydantic_extra__ or {}) == list(b.__pydantic_extra__ or {})
    assert a.__pydantic_private__ == b.__pydantic_private__
    assert list(a.__dict__) == list(b.__dict__)
    for name, value in a.__dict__.items():
        other = b.__dict__[name]
        assert type(value) is type(other), name
        if isinstance(value, datetime):
            assert value.tzinfo is other.tzinfo is UTC
            assert value.fold == other.fold
    if isinstance(a, Trace) and isinstance(b, Trace):
        for sa, sb in zip(a.steps, b.steps, strict=True):
            assert_same(sa, sb)


SLOW = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@given(trace_records())
@SLOW
def test_trusted_trace_equals_validated_from_python_records(record: dict[str, Any]) -> None:
    assert_same(Trace._from_trusted(record), Trace.model_validate(record))


@given(trace_records())
@SLOW
def test_trusted_trace_equals_validated_from_json(record: dict[str, Any]) -> None:
    # The store's case: the same JSON parser as model_validate_json, then the trusted build.
    text = json.dumps(record)
    assert_same(Trace._from_trusted(from_json(text)), Trace.model_validate_json(text))


@given(trace_records())
@SLOW
def test_stored_form_takes_the_fast_path_and_round_trips(record: dict[str, Any]) -> None:
    validated = Trace.model_validate(record)
    stored = validated.model_dump_json()  # what the store keeps (doc + steps)
    # No fallback: every record this agentlens writes is built without validation.
    fast = _trusted_trace(Trace, from_json(stored))
    assert_same(fast, Trace.model_validate_json(stored))
    assert fast == validated
    assert fast.model_dump_json() == stored


@given(step_records())
@SLOW
def test_trusted_step_equals_validated(record: dict[str, Any]) -> None:
    validated = Step.model_validate(record)
    assert_same(Step._from_trusted(record), validated)
    assert_same(Step._from_trusted(from_json(json.dumps(record))), validated)
    # The stored form (every field present) is built without validation.
    stored = validated.model_dump_json()
    assert_same(_trusted_step(Step, from_json(stored)), Step.model_validate_json(stored))


def test_missing_ids_are_generated_as_validation_does() -> None:
    step = Step._from_trusted({"kind": "tool"})
    trace = Trace._from_trusted({"steps": [{"kind": "user"}]})
    assert step.id and trace.id and trace.steps[0].id
    assert step.model_fields_set == {"kind"}
    assert trace.model_fields_set == {"steps"}
    assert trace.__pydantic_extra__ == {} and step.__pydantic_extra__ == {}
    expected = Trace.model_validate({"id": trace.id, "steps": [{"kind": "user"}]})
    expected.steps[0].id = trace.steps[0].id
    assert trace == expected


def test_naive_and_offset_times_become_utc() -> None:
    trace = Trace._from_trusted(
        {"id": "r", "started_at": "2026-11-29T10:00:00", "ended_at": "2026-11-29T12:00:41+02:00"}
    )
    assert trace.started_at == datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
    assert trace.ended_at == datetime(2026, 11, 29, 10, 0, 41, tzinfo=UTC)
    assert trace.started_at.tzinfo is UTC and trace.ended_at.tzinfo is UTC


coercible_or_invalid = st.sampled_from(
    [
        {"links": {"ticket": 12}},  # a number becomes its text
        {"links": {"ticket": 1.5}},
        {"links": {"ticket": [1]}},
        {"started_at": "2026-11-29"},
        {"started_at": 1_700_000_000},
        {"started_at": "2026-02-30T00:00:00Z"},
        {"started_at": "2026-11-29T24:00:00Z"},
        {"started_at": "2026-11-29 10:00:00"},
        {"started_at": "2026-11-29T10:00:00.1234567Z"},
        {"started_at": "not a time"},
        {"schema_version": 2},
        {"schema_version": True},
        {"schema_version": "1"},
        {"project": None},
        {"status": 3},
        {"agent": 1},
        {"metadata": []},
        {"metadata": {1: "a"}},
        {"steps": ({"id": "s", "kind": "tool"},)},
        {"steps": [{"id": "s", "kind": "tol"}]},
        {"steps": [{"id": 3, "kind": "tool"}]},
        {"steps": [{"id": "s", "kind": "tool", "attributes": None}]},
        {"steps": [{"id": "s", "kind": "tool", "ended_at": "2026-11-29T10:00:00+24:00"}]},
        {"steps": [{"id": "s", "kind": StepKind.TOOL, "name": StepKind.TOOL}]},
        {"steps": ["not a step"]},
        {"steps": [Step(id="x", kind=StepKind.TOOL)]},
        {"id": None},
    ]
)


@given(coercible_or_invalid, trace_records())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_records_the_fast_path_does_not_handle_are_validated(
    change: dict[str, Any], record: dict[str, Any]
) -> None:
    record = {**record, **change}
    try:
        want = Trace.model_validate(record)
    except ValidationError as exc:
        with pytest.raises(ValidationError) as got:
            Trace._from_trusted(record)
        assert got.value.errors(include_context=False) == exc.errors(include_context=False)
        return
    assert_same(Trace._from_trusted(record), want)


@given(trace_records())
@SLOW
def test_owned_stored_records_become_the_steps_as_validation_builds_them(
    record: dict[str, Any],
) -> None:
    # The store's read: the parsed stored JSON is handed over and each step's record becomes
    # its __dict__ in place.
    stored = Trace.model_validate(record).model_dump_json()
    parsed = from_json(stored)
    records = list(parsed.get("steps", []))
    fast = Trace._from_trusted(parsed, owned=True)
    assert_same(fast, Trace.model_validate_json(stored))
    assert fast.model_dump_json() == stored
    for step, rec in zip(fast.steps, records, strict=True):  # unknown fields: built as before
        assert (step.__dict__ is rec) is (len(rec) == len(STEP_FIELDS))


@given(trace_records())
@SLOW
def test_owned_records_in_any_form_build_what_validation_builds(record: dict[str, Any]) -> None:
    # Fields missing, in another order, unknown ones: the owned path builds the same objects.
    assert_same(
        Trace._from_trusted(json.loads(json.dumps(record)), owned=True),
        Trace.model_validate(record),
    )


@given(coercible_or_invalid, trace_records())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_owned_records_the_fast_path_does_not_handle_are_validated(
    change: dict[str, Any], record: dict[str, Any]
) -> None:
    record = {**record, **change}
    try:
        want = Trace.model_validate(record)
    except ValidationError as exc:
        with pytest.raises(ValidationError) as got:
            Trace._from_trusted(dict(record), owned=True)
        assert got.value.errors(include_context=False) == exc.errors(include_context=False)
        return
    assert_same(Trace._from_trusted(dict(record), owned=True), want)


@pytest.mark.parametrize(
    "bad",
    [
        {"ended_at": "2026-11-29T10:00:00+24:00"},  # invalid: the run is a validation error
        {"ended_at": "2026-11-29 10:00:00"},  # coercible: validation reads it
        {"kind": "tol"},
        {"attributes": {"a": 1}, "name": 7},
    ],
)
def test_a_run_given_up_on_after_its_first_steps_is_validated_as_stored(
    bad: dict[str, Any],
) -> None:
    # The first steps are converted in place before the last one is given up on; validating
    # the run then must still give what validating its stored text gives.
    run = Trace(
        id="r",
        started_at=datetime(2026, 11, 29, 10, tzinfo=UTC),
        steps=[
            Step(id=f"s{i}", kind=StepKind.TOOL, started_at=datetime(2026, 11, 29, 10, i))
            for i in range(3)
        ],
    )
    parsed = from_json(run.model_dump_json())
    parsed["steps"][2].update(bad)
    text = json.dumps(parsed)
    try:
        want = Trace.model_validate_json(text)
    except ValidationError as exc:
        with pytest.raises(ValidationError) as got:
            Trace._from_trusted(from_json(text), owned=True)
        assert got.value.errors(include_context=False) == exc.errors(include_context=False)
        return
    assert_same(Trace._from_trusted(from_json(text), owned=True), want)


def test_the_wrong_top_level_type_is_a_validation_error() -> None:
    values: list[Any] = [None, [], "run", 3]
    for value in values:
        with pytest.raises(ValidationError):
            Trace._from_trusted(value)
        with pytest.raises(ValidationError):
            Step._from_trusted(value)


@given(trace_records())
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_trusted_objects_behave_as_validated_ones_after_changes(record: dict[str, Any]) -> None:
    assume(record.get("steps"))
    fast, slow = Trace._from_trusted(record), Trace.model_validate(record)
    for t in (fast, slow):
        t.output = "changed"
        t.steps[0].name = "renamed"
        t.steps.append(Step(id="new", kind=StepKind.TEXT))
    assert_same(fast, slow)
    assert fast.model_copy(deep=True) == slow.model_copy(deep=True)


def test_the_fast_path_knows_every_field_and_validator() -> None:
    # The trusted constructors rebuild by hand what validation makes. A field, alias, validator
    # or config change on Trace or Step must be taught to them: this test fails until it is.
    def shape(cls: type[BaseModel]) -> dict[str, Any]:
        d = cls.__pydantic_decorators__
        return {
            "fields": {n: (str(f.annotation), f.alias) for n, f in cls.model_fields.items()},
            "decorators": {
                kind: sorted(getattr(d, kind))
                for kind in (
                    "validators",
                    "field_validators",
                    "root_validators",
                    "field_serializers",
                    "model_serializers",
                    "model_validators",
                    "computed_fields",
                )
                if getattr(d, kind)
            },
            "config": dict(cls.model_config),
            "private": sorted(cls.__private_attributes__),
            "post_init": cls.__pydantic_post_init__,
        }

    config = {"extra": "allow", "populate_by_name": True, "use_attribute_docstrings": True}
    assert shape(Step) == {
        "fields": {
            "id": ("<class 'str'>", None),
            "parent_id": ("str | None", None),
            "kind": ("<enum 'StepKind'>", None),
            "name": ("str | None", None),
            "input": ("typing.Any", None),
            "output": ("typing.Any", None),
            "error": ("typing.Any", None),
            "started_at": ("datetime.datetime | None", None),
            "ended_at": ("datetime.datetime | None", None),
            "attributes": ("dict[str, typing.Any]", None),
        },
        "decorators": {"field_validators": ["_to_utc"]},
        "config": config,
        "private": [],
        "post_init": None,
    }
    assert shape(Trace) == {
        "fields": {
            "schema_version": ("<class 'int'>", None),
            "id": ("<class 'str'>", None),
            "project": ("<class 'str'>", None),
            "agent": ("str | None", None),
            "name": ("str | None", None),
            "status": ("<class 'str'>", None),
            "started_at": ("datetime.datetime | None", None),
            "ended_at": ("datetime.datetime | None", None),
            "input": ("typing.Any", None),
            "output": ("typing.Any", None),
            "metadata": ("dict[str, typing.Any]", None),
            "links": ("dict[str, str]", None),
            "steps": ("list[agentlens.model._trace.Step]", None),
        },
        "decorators": {
            "field_validators": ["_links_to_str", "_to_utc"],
            "model_validators": ["_check_version"],
        },
        "config": config,
        "private": [],
        "post_init": None,
    }


# -- the import's JSON parser -----------------------------------------------------------------
#
# agentlens import (ingest.trace_file) parses each JSONL line with pydantic's parser and falls
# back to the standard decoder (which words the errors) for whatever that one refuses. So every
# text the fast parser accepts must give exactly what the standard decoder gives.


def identical(a: Any, b: Any) -> bool:
    """Equal, with the same types at every level, floats bit for bit, keys in the same order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a.hex() == b.hex() if a == a else b != b
    if isinstance(a, dict):
        return list(a) == list(b) and all(identical(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(identical(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def standard(text: str) -> tuple[str, Any]:
    from agentlens.ingest.trace_file import _DECODER

    try:
        return "ok", _DECODER.decode(text)
    except (ValueError, RecursionError) as exc:
        return "error", type(exc).__name__


def fast(text: str) -> tuple[str, Any]:
    try:
        return "ok", from_json(text, allow_inf_nan=False)
    except ValueError as exc:
        return "error", type(exc).__name__


def check_parsers_agree(text: str) -> None:
    got = fast(text)
    if got[0] == "ok":  # what the fast parser accepts, the standard one reads alike
        want = standard(text)
        assert want[0] == "ok", (text, want)
        assert identical(got[1], want[1]), text


json_numbers = st.from_regex(
    r"-?(0|[1-9][0-9]{0,30})(\.[0-9]{1,30})?([eE][+-]?[0-9]{1,4})?", fullmatch=True
)
json_texts = st.recursive(
    json_scalars.map(json.dumps) | json_numbers,
    lambda children: (
        st.lists(children, max_size=4).map(lambda xs: "[" + ",".join(xs) + "]")
        | st.dictionaries(st.text(max_size=5).map(json.dumps), children, max_size=4).map(
            lambda d: "{" + ",".join(f"{k}:{v}" for k, v in d.items()) + "}"
        )
    ),
    max_leaves=15,
)


@given(json_values, st.booleans(), st.sampled_from([None, 1]))
@settings(max_examples=300, deadline=None)
def test_fast_json_reads_valid_json_as_the_standard_decoder(
    value: Any, ascii_only: bool, indent: int | None
) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    assert fast(text)[0] == "ok"
    check_parsers_agree(text)


@given(json_texts)
@settings(max_examples=300, deadline=None)
def test_fast_json_reads_numbers_and_nesting_as_the_standard_decoder(text: str) -> None:
    check_parsers_agree(text)


@given(json_texts, st.data())
@settings(max_examples=300, deadline=None)
def test_fast_json_accepts_no_broken_text_the_standard_decoder_refuses(
    text: str, data: st.DataObject
) -> None:
    # Break the text: cut it, or put in a character JSON may forbid there.
    at = data.draw(st.integers(0, len(text)))
    insert = data.draw(
        st.sampled_from(["", ",", "]", "}", '"', "\\", "\x01", "NaN", "Infinity", "-", ".", "e"])
        | st.characters()
    )
    cut = data.draw(st.booleans())
    check_parsers_agree(text[:at] + insert + ("" if cut else text[at:]))


@pytest.mark.parametrize(
    "text",
    [
        '"\\ud800"',  # a lone surrogate: the standard decoder keeps it, the fast one refuses
        '"\\udc00\\ud800"',
        '{"a": 1, "a": 2}',
        '{"a": 1, "b": 2, "a": 3}',
        "1e400",
        "-1e400",
        "1e-400",
        "-0",
        "-0.0",
        "[NaN]",
        "[Infinity]",
        "[-Infinity]",
        "1" * 5000,  # more digits than int() takes
        "0.1000000000000000055511151231257827",
        "2.2250738585072011e-308",
        "4.9406564584124654e-324",
        "1.7976931348623157e308",
        '"\x01"',
        '"\\u0000"',
        "[" * 300 + "]" * 300,
        "[" * 5000 + "]" * 5000,
        '{"a":1}x',
        " {} ",
    ],
)
def test_fast_json_edge_cases(text: str) -> None:
    check_parsers_agree(text)


# -- Score.of ---------------------------------------------------------------------------------


def _results() -> list[Any]:
    from agentlens.model import FailureMode, Finding, ScoreResult

    finding = Finding(failure_mode=FailureMode.FABRICATED_GROUNDING, text="CUST-1", start=0, end=6)
    grounded = Finding(
        failure_mode=None, text="INV-2", supported_by="s1", attributes={"kind": "id"}
    )
    return [
        ScoreResult(passed=True, value=0.0, detail="3 references grounded", grounded=[grounded]),
        ScoreResult(passed=False, value=1.0, findings=[finding], attributes={"steps": 3}),
        ScoreResult.model_construct(passed=True),  # built without validation: defaults missing
        ScoreResult.from_error(ValueError("boom")),
    ]


@pytest.mark.parametrize("result", _results())
def test_score_of_a_plain_result_is_what_model_construct_builds(result: Any) -> None:
    from agentlens.model import Score, _score

    assert _score._attach is _score._attach_plain  # the fast path is taken with this pydantic
    fast = Score.of(result, run_id="r", scorer="s", version="1")
    slow = Score.model_construct(**result.__dict__, run_id="r", scorer="s", version="1")
    assert list(fast.__dict__) == list(slow.__dict__)
    assert {**fast.__dict__, "scored_at": None} == {**slow.__dict__, "scored_at": None}
    assert fast.model_fields_set == slow.model_fields_set
    assert fast.model_extra == slow.model_extra == {}
    assert fast.scored_at.tzinfo is UTC
    assert fast.model_dump_json(exclude={"scored_at"}) == slow.model_dump_json(
        exclude={"scored_at"}
    )
    # the lists are the score's own: appending to them leaves the result as it was
    fast.findings.append(fast.findings[0] if fast.findings else None)  # type: ignore[arg-type]
    assert len(result.findings) == len(slow.findings)


def test_score_of_a_result_with_extras_keeps_them() -> None:
    from agentlens.model import Score, ScoreResult

    result = ScoreResult(passed=True, judge_model="m")  # type: ignore[call-arg]
    score = Score.of(result, run_id="r", scorer="s", version="1")
    assert score.model_extra == {"judge_model": "m"}


def test_score_of_for_a_subclass_of_score_fills_its_own_fields() -> None:
    from agentlens.model import Score, ScoreResult

    class Tagged(Score):
        tag: str = "t"

    score = Tagged.of(ScoreResult(passed=True), run_id="r", scorer="s", version="1")
    assert type(score) is Tagged and score.tag == "t"
