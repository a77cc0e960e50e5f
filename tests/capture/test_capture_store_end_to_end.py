"""Capture into a real SQLite file through the public API, and read the runs back."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import agentlens
from agentlens.model import StepKind
from agentlens.store import TraceStore, open_store
from agentlens.testing import CapturedTraces


@agentlens.tool
def get_customer(email: str) -> dict[str, str]:
    return {"id": "CUST-00042", "email": email}


@agentlens.retrieval
async def search(query: str, k: int = 2) -> list[dict[str, str]]:
    await asyncio.sleep(0)
    return [{"id": f"DOC-{i}", "text": f"{query} {i}"} for i in range(k)]


def test_runs_captured_to_sqlite_read_back_identically(fresh_capture: None, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/agentlens.db"
    agentlens.configure(db=url)

    async def agent(question: str) -> str:
        async with agentlens.run(agent="support", input=question, links={"ticket": "T-1"}) as run:
            customer = get_customer("a@example.com")
            docs = await search(question)
            run.output = f"{customer['id']}: {docs[0]['id']}"
            return run.output

    assert asyncio.run(agent("refund policy")) == "CUST-00042: DOC-0"
    with pytest.raises(ValueError), agentlens.run(agent="support", input="boom") as failed:
        raise ValueError("boom")
    assert agentlens.flush(30)
    assert agentlens.capture.stats().exported == 2

    store = open_store(url)
    try:
        runs = list(store.query_traces())
        assert len(runs) == 2
        ok = next(t for t in runs if t.status == "ok")
        assert (ok.agent, ok.input, ok.output) == ("support", "refund policy", "CUST-00042: DOC-0")
        assert ok.links == {"ticket": "T-1"}
        assert [(s.id, s.kind, s.name) for s in ok.steps] == [
            ("s1", StepKind.TOOL, "get_customer"),
            ("s2", StepKind.RETRIEVAL, "search"),
        ]
        assert ok.steps[1].input == {"query": "refund policy", "k": 2}
        assert ok.steps[1].output == [
            {"id": "DOC-0", "text": "refund policy 0"},
            {"id": "DOC-1", "text": "refund policy 1"},
        ]
        bad = store.get_trace(failed.id)
        assert bad.status == "error"
        assert bad.metadata["error"] == {"type": "ValueError", "message": "boom"}
    finally:
        store.close()


def test_captured_traces_can_be_stored_in_the_in_memory_store(
    captured_traces: CapturedTraces,
    agentlens_store: TraceStore,
) -> None:
    with agentlens.run(agent="support") as run:
        get_customer("a@example.com")
        run.output = "done"
    assert agentlens_store.put_traces(captured_traces.traces) == 1
    stored = agentlens_store.get_trace("run-0001")
    assert stored.model_dump() == captured_traces.one().model_dump()


@pytest.mark.usefixtures("fresh_capture")
def test_capture_into_memory_is_visible_to_the_reading_api() -> None:
    from agentlens.store import close_shared_stores

    agentlens.configure(db="sqlite:///:memory:")
    try:
        with agentlens.run(agent="mem", input="q") as run:
            run.output = "a"
        assert agentlens.flush(10.0)
        assert agentlens.get_trace(run.id).output == "a"
    finally:
        close_shared_stores()
