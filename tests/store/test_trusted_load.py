"""The SQLite store reads runs back without validating them again, and gets the same objects.

Runs are validated when they are stored; ``get_trace`` and ``query_traces`` rebuild them with
``Trace._from_trusted``. What they return must be equal in every detail to validating the
stored JSON (``Trace.model_validate_json``), and a row this agentlens cannot read must still
raise ``StoreError``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from store_factories import make_trace

from agentlens.errors import StoreError
from agentlens.model import Step, StepKind, Trace
from agentlens.store import RunFilter, SQLiteStore


def assert_same(a: BaseModel, b: BaseModel) -> None:
    assert type(a) is type(b)
    assert a == b
    assert a.model_dump() == b.model_dump()
    assert a.model_dump_json() == b.model_dump_json()
    assert a.model_fields_set == b.model_fields_set
    assert list((a.__pydantic_extra__ or {}).items()) == list((b.__pydantic_extra__ or {}).items())
    assert list(a.__dict__) == list(b.__dict__)
    for name, value in a.__dict__.items():
        assert type(value) is type(b.__dict__[name]), name
        if isinstance(value, datetime):
            assert value.tzinfo is UTC and b.__dict__[name].tzinfo is UTC
    if isinstance(a, Trace) and isinstance(b, Trace):
        for sa, sb in zip(a.steps, b.steps, strict=True):
            assert_same(sa, sb)


def stored_json(store: SQLiteStore, run_id: str) -> str:
    """The run as the store holds it, as one JSON document (doc with its steps)."""
    path = store._path
    assert path is not None
    with sqlite3.connect(path) as conn:
        doc, steps = conn.execute("SELECT doc, steps FROM runs WHERE id = ?", (run_id,)).fetchone()
    return f'{doc[:-1]},"steps":{steps}}}'


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def no_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make validation fail loudly, to prove the read path does not use it."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the read path validated a stored run")

    monkeypatch.setattr(Trace, "model_validate", refuse)
    monkeypatch.setattr(Trace, "model_validate_json", refuse)
    monkeypatch.setattr(Step, "model_validate", refuse)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=10,
)
zones: st.SearchStrategy[Any] = st.sampled_from(
    [None, UTC, timezone(timedelta(hours=5, minutes=30))]
)
times = st.none() | st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1), timezones=zones
)
unknown = st.dictionaries(
    st.sampled_from(["vendor", "span_kind", "x-trace", "ü", ""]), json_values, max_size=2
)


@st.composite
def traces(draw: st.DrawFn, run_id: str) -> Trace:
    steps = []
    for j in range(draw(st.integers(0, 3))):
        step = Step(
            id=f"s{j}",
            kind=draw(st.sampled_from(list(StepKind))),
            name=draw(st.none() | st.text(max_size=5)),
            input=draw(json_values),
            output=draw(json_values),
            error=draw(st.none() | json_values),
            started_at=draw(times),
            attributes=draw(st.dictionaries(st.text(max_size=5), json_values, max_size=2)),
            **draw(unknown),
        )
        # A time assigned after validation is kept as given (naive or in another zone) and
        # stored in that form: reading it back must still give UTC, as validation would.
        step.ended_at = draw(times)
        steps.append(step)
    trace = Trace(
        id=run_id,
        agent=draw(st.none() | st.sampled_from(["support", "billing"])),
        started_at=draw(times),
        input=draw(json_values),
        output=draw(json_values),
        metadata=draw(st.dictionaries(st.text(max_size=5), json_values, max_size=2)),
        links=draw(st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2)),
        steps=steps,
        **draw(unknown),
    )
    trace.ended_at = draw(times)
    return trace


@given(st.lists(traces("r"), min_size=1, max_size=1), st.data())
@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_runs_read_back_equal_their_validated_json(
    store: SQLiteStore, runs: list[Trace], data: st.DataObject
) -> None:
    more = [data.draw(traces(f"r{i}")) for i in range(3)]
    store.put_traces([*runs, *more])
    for original in [*runs, *more]:
        got = store.get_trace(original.id)
        assert_same(got, Trace.model_validate_json(stored_json(store, original.id)))
        assert got == Trace.model_validate_json(original.model_dump_json())
    by_query = {t.id: t for t in store.query_traces()}
    assert sorted(by_query) == sorted(t.id for t in [*runs, *more])
    for run_id, trace in by_query.items():
        assert_same(trace, store.get_trace(run_id))


def test_reads_use_no_validation(store: SQLiteStore, no_validation: None) -> None:
    runs = [make_trace(i, vendor={"a": [1]}) for i in range(40)]
    runs[0].steps[0].ended_at = datetime(2026, 3, 1, 12, 0)  # naive, as assigned
    store.put_traces(runs)
    got = list(store.query_traces(RunFilter(agent="support")))
    assert len(got) == 40
    assert store.get_trace("r00000").steps[0].ended_at == datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    assert got[-1].__pydantic_extra__ == {"vendor": {"a": [1]}}
    assert {t.id: t for t in got if t.id != "r00000"} == {t.id: t for t in runs[1:]}


def corrupt(store: SQLiteStore, column: str, value: str) -> None:
    path = store._path
    assert path is not None
    with sqlite3.connect(path) as conn:
        conn.execute(f"UPDATE runs SET {column} = ? WHERE id = 'r00001'", (value,))


@pytest.mark.parametrize(
    ("column", "value", "reason"),
    [
        ("doc", '{"id": "r00001", "project": ', "Invalid JSON"),
        ("steps", "[{]", "Invalid JSON"),
        ("steps", '[{"id": "s0", "kind": "bogus"}]', "Input should be 'user'"),
        ("doc", '{"id": "r00001", "schema_version": 9}', "unknown schema_version 9"),
        ("doc", '{"id": "r00001", "started_at": "yesterday"}', "Input should be a valid datetime"),
        ("doc", "[]", "valid dictionary"),
    ],
)
def test_a_row_this_agentlens_cannot_read_is_a_store_error(
    store: SQLiteStore, column: str, value: str, reason: str
) -> None:
    store.put_traces([make_trace(0), make_trace(1)])
    corrupt(store, column, value)
    with pytest.raises(StoreError, match="run 'r00001' is stored in a form") as exc:
        store.get_trace("r00001")
    assert reason in str(exc.value)
    with pytest.raises(StoreError, match=reason):
        list(store.query_traces())
    assert store.get_trace("r00000") == make_trace(0)


def test_a_row_in_a_form_the_fast_path_leaves_to_validation_still_loads(
    store: SQLiteStore,
) -> None:
    # Written by hand (or by another tool): a number as a link, a time with a space. Validation
    # accepts both; the trusted constructor hands them to it.
    store.put_traces([make_trace(1)])
    corrupt(store, "doc", '{"id": "r00001", "links": {"n": 7}, "started_at": "2026-03-01 10:00"}')
    got = store.get_trace("r00001")
    assert got.links == {"n": "7"}
    assert got.started_at == datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    assert_same(got, Trace.model_validate_json(stored_json(store, "r00001")))


def test_values_nested_deeper_than_pydantics_parser_takes_read_back(store: SQLiteStore) -> None:
    # pydantic serialises a value nested 250 deep, but its JSON parser stops at 200 levels:
    # such a run is read back with the standard parser instead of being unreadable.
    deep: Any = "leaf"
    for _ in range(250):
        deep = [deep]
    run = make_trace(1, vendor=deep)
    run.steps[0].output = {"nested": deep}
    store.put_traces([run])
    got = store.get_trace("r00001")
    assert got == run
    assert got.model_dump_json() == run.model_dump_json()
    assert list(store.query_traces()) == [run]
