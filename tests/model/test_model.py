from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from agentlens.model import (
    FailureMode,
    Finding,
    Score,
    ScoreResult,
    Step,
    StepKind,
    Trace,
    Verdict,
    to_jsonable,
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)


def test_unknown_fields_survive_a_round_trip() -> None:
    raw = {
        "schema_version": 1,
        "id": "r1",
        "agent": "support",
        "vendor_field": {"a": [1, 2]},
        "steps": [
            {"id": "s1", "kind": "tool", "name": "t", "output": {"x": 1}, "span_kind": "CLIENT"}
        ],
    }
    trace = Trace.model_validate(raw)
    again = json.loads(trace.to_json())
    assert again["vendor_field"] == {"a": [1, 2]}
    assert again["steps"][0]["span_kind"] == "CLIENT"
    assert Trace.from_json(trace.to_json()) == trace


def test_times_without_offset_are_utc_and_offsets_are_converted() -> None:
    t = Trace.model_validate(
        {"started_at": "2026-11-29T10:00:00", "ended_at": "2026-11-29T12:00:41+02:00"}
    )
    assert t.started_at == datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
    assert t.ended_at == datetime(2026, 11, 29, 10, 0, 41, tzinfo=UTC)
    assert t.to_dict()["started_at"] == "2026-11-29T10:00:00Z"


def test_ids_are_generated_and_sort_by_time() -> None:
    a, b = Trace(), Trace()
    assert len(a.id) == 26 and a.id != b.id
    from agentlens._ids import new_id

    assert new_id(1_000) < new_id(2_000) < new_id(10**12)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"schema_version": 2}, "schema_version"),
        ({"schema_version": "1"}, "schema_version"),
        ({"steps": [{"name": "no kind"}]}, "kind"),
        ({"steps": [{"kind": "gossip"}]}, "kind"),
        ({"steps": "nope"}, "steps"),
        ({"metadata": []}, "metadata"),
    ],
)
def test_invalid_records_are_rejected(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        Trace.model_validate(raw)
    assert field in str(info.value)


def test_links_accept_numbers_as_ids() -> None:
    assert Trace.model_validate({"links": {"blog_post": 123}}).links == {"blog_post": "123"}


@given(json_values, json_values, json_values)
def test_any_json_values_round_trip(inp: Any, out: Any, extra: Any) -> None:
    trace = Trace(input=inp, output=out, steps=[Step(kind=StepKind.TOOL, output=extra)])
    again = Trace.from_json(trace.to_json())
    assert again.input == inp and again.output == out and again.steps[0].output == extra


def test_verdict_is_derived() -> None:
    assert ScoreResult(passed=True).verdict is Verdict.PASSED
    flagged = ScoreResult(
        passed=False, findings=[Finding(failure_mode=FailureMode.FABRICATED_GROUNDING, text="X")]
    )
    assert flagged.verdict is Verdict.FLAGGED
    unverifiable = ScoreResult(
        passed=False,
        findings=[
            Finding(failure_mode=FailureMode.FABRICATED_GROUNDING, text="X", unverifiable=True)
        ],
    )
    assert unverifiable.verdict is Verdict.UNVERIFIABLE
    assert ScoreResult.from_error(RuntimeError("boom")).verdict is Verdict.ERROR
    # A result cannot claim to pass with a non-passing verdict.
    assert ScoreResult(passed=True, verdict=Verdict.UNVERIFIABLE).passed is False


def test_score_json_line_shape() -> None:
    result = ScoreResult(
        passed=False,
        value=1,
        detail="ungrounded: CUST-1",
        findings=[
            Finding(
                failure_mode="fabricated_grounding", text="CUST-1", start=3, end=9, step_ids=["s1"]
            )
        ],
    )
    line = Score.of(result, run_id="r", scorer="no_fabricated_refs", version="1").to_json_line()
    assert list(line)[:8] == [
        "run_id",
        "scorer",
        "version",
        "verdict",
        "passed",
        "value",
        "detail",
        "findings",
    ]
    assert line["verdict"] == "flagged" and line["passed"] is False
    assert line["findings"][0]["failure_mode"] == "fabricated_grounding"
    assert line["findings"][0]["start"] == 3
    json.dumps(line)


class _Hostile:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


def test_to_jsonable_records_anything_faithfully() -> None:
    from dataclasses import dataclass
    from decimal import Decimal

    @dataclass
    class Point:
        x: int
        y: float

    value = {
        "p": Point(1, 2.5),
        "d": Decimal("1.10"),
        "t": (1, 2),
        "set": {3},
        "when": datetime(2026, 1, 1, tzinfo=UTC),
        "b": b"\xff\x00",
        "obj": object(),
        "nan": float("nan"),
        "hostile": _Hostile(),
    }
    out = to_jsonable(value)
    json.dumps(out)
    assert out["p"] == {"x": 1, "y": 2.5}
    assert out["d"] == "1.10"
    assert out["t"] == [1, 2]
    assert out["b"] == {"type": "bytes", "base64": "/wA="}
    assert out["obj"]["type"] == "object" and out["obj"]["repr"].startswith("<object")
    assert out["nan"] == {"type": "float", "repr": "nan"}
    assert out["hostile"]["repr"].startswith("<unrepresentable")
