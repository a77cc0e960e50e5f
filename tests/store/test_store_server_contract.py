"""The server's store methods (:class:`agentlens.store.ServerStore`), over every backend: API
keys, and the staging of OTLP spans until their trace is built into a run."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentlens.model import Trace
from agentlens.store._server import StagedSpan


def span(trace: str, span_id: str, *, root_ended: bool = False, project: str = "p") -> StagedSpan:
    return StagedSpan(project, trace, span_id, root_ended, f'{{"span_id": "{span_id}"}}')


def test_api_keys(store: Any) -> None:
    assert store.count_active_api_keys() == 0
    store.create_api_key("k1", "alpha", b"salt", b"hash", 10, "ci")
    store.create_api_key("k2", "beta", b"salt2", b"hash2", 20)
    assert store.count_active_api_keys() == 2
    record = store.get_api_key("k1")
    assert (record.project, bytes(record.salt), bytes(record.hash), record.name) == (
        "alpha", b"salt", b"hash", "ci",
    )  # fmt: skip
    assert [r.id for r in store.list_api_keys()] == ["k1", "k2"]
    assert store.revoke_api_key("k1", 30) is True
    assert store.revoke_api_key("k1", 31) is False
    assert store.get_api_key("k1").revoked_at == 30
    assert store.count_active_api_keys() == 1
    assert store.get_api_key("nope") is None


def test_staging_is_idempotent_and_ready_when_the_root_ended(store: Any) -> None:
    assert store.stage_spans([span("t1", "a"), span("t1", "b")], 100) == 2
    assert store.stage_spans([span("t1", "a")], 110) == 0  # a re-sent span: stored once
    assert store.ready_traces(idle_before=0) == []  # no root yet, not idle
    docs, upto = store.staged_spans("p", "t1")
    assert len(docs) == 2 and upto > 0
    assert store.staging_counts().spans == 2 and store.staging_counts().traces == 1
    store.stage_spans([span("t1", "r", root_ended=True)], 120)
    [ready] = store.ready_traces(idle_before=0)
    assert (ready.project, ready.trace_id, ready.complete, ready.purged) == ("p", "t1", True, False)
    docs, upto = store.staged_spans("p", "t1")
    assert len(docs) == 3
    run = Trace(id="t1", project="p", output="x")
    assert store.commit_built_runs([("p", "t1", run, upto)], 130) == 1
    assert store.get_trace("t1").output == "x"
    assert store.ready_traces(idle_before=0) == []
    assert store.staging_counts().spans == 0
    # a late span makes the trace ready again
    store.stage_spans([span("t1", "late")], 140)
    assert [r.trace_id for r in store.ready_traces(idle_before=0)] == ["t1"]


@pytest.mark.parametrize("odd", ['q"uo\\te{,}', "nul\x00in", "\x01lead", "NULL", "", "😀 \\N"])
def test_staged_spans_hold_any_text(store: Any, odd: str) -> None:
    """A span's keys and JSON are staged and read back as they were sent, whatever they hold
    (what an array literal escapes, NUL, the NUL escape's mark, ``NULL``, nothing)."""
    doc = json.dumps({"attributes": {"input.value": json.dumps({"q": odd}), odd: odd}})
    spans = [StagedSpan(odd, f"t{odd}", f"s{odd}", False, doc), span("t", "plain")]
    assert store.stage_spans(spans, 100) == 2
    docs, _ = store.staged_spans(odd, f"t{odd}")
    assert docs == [doc]
    assert store.staged_spans("p", "t")[0] == [spans[1].doc]


def test_idle_traces_and_projects_apart(store: Any) -> None:
    store.stage_spans([span("t2", "a", project="p")], 100)
    store.stage_spans([span("t2", "a", project="q")], 100)  # same ids, another project
    assert store.ready_traces(idle_before=100) == []
    ready = store.ready_traces(idle_before=101)
    assert sorted((r.project, r.complete) for r in ready) == [("p", False), ("q", False)]


def test_purge_keeps_unbuilt_spans(store: Any) -> None:
    store.stage_spans([span("t3", "r", root_ended=True)], 100)
    store.stage_spans([span("t4", "x")], 100)
    _, upto = store.staged_spans("p", "t3")
    store.commit_built_runs([("p", "t3", Trace(id="t3", project="p"), upto)], 200)
    assert store.purge_staged_spans(built_before=150) == 0
    assert store.purge_staged_spans(built_before=300) == 1
    assert store.staged_spans("p", "t3")[0] == []
    assert len(store.staged_spans("p", "t4")[0]) == 1
    store.stage_spans([span("t3", "late")], 400)
    [ready] = [r for r in store.ready_traces(idle_before=0) if r.trace_id == "t3"]
    assert ready.purged is True


def test_run_projects(store: Any) -> None:
    store.put_traces([Trace(id="a", project="x"), Trace(id="b", project="y")])
    assert store.run_projects(["a", "b", "c"]) == {"a": "x", "b": "y"}
    assert store.run_projects([]) == {}
