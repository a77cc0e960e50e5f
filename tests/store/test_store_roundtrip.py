"""Property: any JSON value in any JSON-valued field, or in an unknown field, survives put/get."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlens.model import Step, StepKind, Trace
from agentlens.store import TraceStore, open_store

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=8,
)
# unknown field names: anything that is not a declared field
extra_names = st.text(min_size=1, max_size=12).map(lambda s: "x_" + s)
extras = st.dictionaries(extra_names, json_values, max_size=3)

steps = st.builds(
    lambda sid, kind, name, inp, out, err, attrs, extra: Step.model_validate(
        {
            "id": sid,
            "kind": kind,
            "name": name,
            "input": inp,
            "output": out,
            "error": err,
            "attributes": attrs,
            **extra,
        }
    ),
    st.text(min_size=1, max_size=8),
    st.sampled_from(list(StepKind)),
    st.none() | st.text(max_size=10),
    json_values,
    json_values,
    json_values,
    st.dictionaries(st.text(max_size=8), json_values, max_size=3),
    extras,
)


@st.composite
def traces(draw: st.DrawFn) -> Trace:
    step_list = draw(st.lists(steps, max_size=4, unique_by=lambda s: s.id))
    data: dict[str, Any] = {
        "id": draw(st.text(min_size=1, max_size=30)),
        "agent": draw(st.none() | st.text(max_size=10)),
        "name": draw(st.none() | st.text(max_size=10)),
        "status": draw(st.sampled_from(["ok", "error", "running"])),
        "started_at": draw(st.none() | st.datetimes(timezones=st.just(None))),
        "input": draw(json_values),
        "output": draw(json_values),
        "metadata": draw(st.dictionaries(st.text(max_size=8), json_values, max_size=3)),
        "links": draw(st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=2)),
        **draw(extras),
    }
    return Trace.model_validate({**data, "steps": step_list})


@pytest.fixture(params=["file", "memory"])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TraceStore]:
    url = f"sqlite:///{tmp_path / 'p.db'}" if request.param == "file" else "sqlite:///:memory:"
    store = open_store(url)
    try:
        yield store
    finally:
        store.close()


@settings(
    max_examples=75, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(trace=traces())
def test_round_trip_is_exact(shared: TraceStore, trace: Trace) -> None:
    shared.put_traces([trace])
    got = shared.get_trace(trace.id)
    assert got.to_json() == trace.to_json()
    assert got.to_dict() == trace.to_dict()
    (listed,) = shared.query_traces(_only(trace.id))
    assert listed.to_json() == trace.to_json()


def _only(run_id: str) -> Any:
    from agentlens.store import RunFilter

    return RunFilter(run_ids=[run_id])
