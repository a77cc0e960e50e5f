"""The grounding scorers build their claims and results without pydantic's validation: they must
build exactly what validation builds.

``_finding_fast`` of ``_claim`` against ``_grounded_plain`` (``Finding(**values)``) and
``_result_fast`` against ``_result_plain`` (``ScoreResult(...)``), on generated values and
through both scorers on the benchmark's runs: the same class, fields in the same order with
equal values, fields set, extras, private state, and JSON. And a passed run's row, which the
scorers give without building its score, against the row of that score.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest
from _score_rows import row_made_as
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from agentlens.eval import Evidence, get_scorer
from agentlens.eval._evidence import EvidenceItem, Turn
from agentlens.eval._index import Match
from agentlens.eval.detectors import _grounding
from agentlens.model import FailureMode, Finding, Score, ScoreResult, ScoreRow, Trace


def same(a: BaseModel, b: BaseModel) -> None:
    assert type(a) is type(b)
    assert list(a.__dict__.items()) == list(b.__dict__.items())
    assert a.__pydantic_fields_set__ == b.__pydantic_fields_set__
    assert a.__pydantic_extra__ == b.__pydantic_extra__
    assert a.__pydantic_private__ == b.__pydantic_private__
    assert a.model_dump_json() == b.model_dump_json()
    assert a.model_dump() == b.model_dump()
    assert a == b
    assert repr(a) == repr(b)
    for name in ("findings", "grounded"):
        for x, y in zip(getattr(a, name, []), getattr(b, name, []), strict=True):
            same(x, y)


def test_the_fast_paths_are_the_ones_in_use() -> None:
    assert _grounding._finding is _grounding._finding_fast
    assert _grounding._score_result is _grounding._result_fast


ids = st.text(max_size=6)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)


@given(
    text=st.text(max_size=12),
    start=st.integers(min_value=0, max_value=2**40),
    width=st.integers(min_value=0, max_value=40),
    location=st.sampled_from(["output"]) | ids,
    source=st.sampled_from(["input"]) | ids,
    found=st.text(max_size=12),
    derived=st.booleans(),
    kind=st.sampled_from(["id", "money", "percent", "date", "name", "number"]) | ids,
)
@settings(max_examples=300, deadline=None)
def test_a_grounded_claim_is_what_validation_builds(
    text: str,
    start: int,
    width: int,
    location: str,
    source: str,
    found: str,
    derived: bool,
    kind: str,
) -> None:
    item = EvidenceItem(source=source, kind="tool", name=None, value=None, text="", index=0)
    turn = Turn(location=location, value="", text="", index=1, evidence=(item,))
    args = (text, start, start + width, turn, Match(item, found, derived), kind)
    assert list(_grounding._claim(*args).items()) == list(
        _grounding._grounded_values(*args).items()
    )
    same(_grounding._finding_fast(_grounding._claim(*args)), _grounding._grounded_plain(*args))


findings = st.builds(
    Finding,
    failure_mode=st.sampled_from(FailureMode),
    text=st.text(max_size=6),
    unverifiable=st.booleans(),
    attributes=st.dictionaries(st.text(max_size=4), json_values, max_size=2),
)


@given(
    passed=st.booleans(),
    value=st.floats(allow_nan=False),
    detail=st.text(max_size=20),
    found=st.lists(findings, max_size=4),
    grounded=st.lists(findings, max_size=3),
    attributes=st.dictionaries(st.text(max_size=4), json_values, max_size=3),
)
@settings(max_examples=300, deadline=None)
def test_a_result_is_what_validation_builds(
    passed: bool,
    value: float,
    detail: str,
    found: list[Finding],
    grounded: list[Finding],
    attributes: dict[str, Any],
) -> None:
    fast = _grounding._result_fast(passed, value, detail, list(found), list(grounded), attributes)
    plain = _grounding._result_plain(passed, value, detail, list(found), list(grounded), attributes)
    same(fast, plain)


def _bench_traces() -> list[Trace]:
    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    try:
        from bench_grounding import make_run
    finally:
        sys.path.pop(0)
    rng = random.Random(7)
    return [Trace.model_validate(make_run(i, rng)) for i in range(80)]


def test_both_scorers_give_what_the_validated_paths_give(monkeypatch: pytest.MonkeyPatch) -> None:
    traces = _bench_traces()
    scorers = [get_scorer("no_fabricated_refs"), get_scorer("parametric_leakage")]

    def results() -> list[Any]:
        return [s.score(t, Evidence(t)) for t in traces for s in scorers]

    fast = results()
    monkeypatch.setattr(_grounding, "_finding", _grounding._finding_plain)
    monkeypatch.setattr(_grounding, "_score_result", _grounding._result_plain)
    plain = results()
    assert sum(len(r.grounded) for r in fast) > 20 * len(traces)  # dozens of claims per run
    assert any(r.findings for r in fast) and any(not r.findings for r in fast)
    for a, b in zip(fast, plain, strict=True):
        same(a, b)


def test_a_passed_runs_row_is_the_row_of_its_score() -> None:
    """Asked for a row (as batch scoring asks when it keeps no score nothing reads), both
    scorers give a passed run's stored row, made without the score: the row of the score they
    give otherwise, to the byte. A run that did not pass gets its result, the same one."""
    traces = _bench_traces()
    scorers = [get_scorer("no_fabricated_refs"), get_scorer("parametric_leakage")]
    rows = 0
    for t in traces:
        for s in scorers:
            given = s._score_or_row(t, Evidence(t), s.stored_version)
            result = s.score(t, Evidence(t))
            if not result.passed:
                assert isinstance(given, ScoreResult)
                same(given, result)
                continue
            assert type(given) is ScoreRow
            rows += 1
            score = Score.of(result, run_id=t.id, scorer=s.name, version=s.stored_version)
            assert given == row_made_as(score, given)
    assert rows > len(traces)  # most runs pass both


def test_a_row_the_fast_writer_refuses_is_left_to_the_score() -> None:
    """A turn whose step id holds a lone surrogate (a stored run's JSON may hold one, escaped):
    orjson cannot write its claims' location, so the scorer gives its result, and the row is
    made from the score as ever."""
    trace = Trace.model_validate(
        {
            "id": "r1",
            "steps": [
                {"id": "s1", "kind": "tool", "name": "lookup", "output": {"id": "CUST-12345"}},
                {"id": "s2\ud800", "kind": "text", "output": "Found CUST-12345."},
            ],
        }
    )
    s = get_scorer("no_fabricated_refs")
    given = s._score_or_row(trace, Evidence(trace), s.stored_version)
    assert isinstance(given, ScoreResult) and given.passed
    assert [g.text for g in given.grounded] == ["CUST-12345"]
    assert given == s.score(trace, Evidence(trace))  # (pydantic cannot write it either)


def test_a_scorer_that_raises_in_its_row_gives_an_error_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("index exploded")

    monkeypatch.setattr(_grounding, "_index", broken)
    trace = _bench_traces()[0]
    s = get_scorer("no_fabricated_refs")
    given = s._score_or_row(trace, Evidence(trace), s.stored_version)
    assert isinstance(given, ScoreResult)
    assert given.verdict == "error" and given.error == "RuntimeError: index exploded"
