"""Evidence: what counts, in which order, and the per-run memo the detectors share."""

from __future__ import annotations

from agentlens.eval import Evidence
from agentlens.model import Trace


def make() -> Trace:
    return Trace.model_validate(
        {
            "input": "find CUST-1",
            "steps": [
                {"id": "sys", "kind": "system", "output": "be nice"},
                {
                    "id": "t1",
                    "kind": "tool",
                    "input": {"q": "ARG-ONLY"},
                    "output": {"id": "CUST-1"},
                },
                {"id": "a1", "kind": "text", "output": "found it"},
                {
                    "id": "t2",
                    "kind": "tool",
                    "output": None,
                    "error": "boom",
                    "attributes": {"truncated": True},
                },
                {"id": "th", "kind": "thinking", "output": "hmm"},
                {
                    "id": "l1",
                    "kind": "llm",
                    "output": {"choices": [{"message": {"content": "done"}}]},
                },
            ],
            "output": "done",
        }
    )


def test_items_are_outputs_never_arguments_or_model_words() -> None:
    ev = Evidence(make())
    assert [(i.source, i.kind) for i in ev.items] == [
        ("input", "input"),
        ("sys", "system"),
        ("t1", "tool"),
        ("t2", "tool"),
    ]
    assert "ARG-ONLY" not in ev.text
    assert ev.items[3].truncated and ev.truncated


def test_turns_see_only_earlier_evidence_and_echoes_are_checked_once() -> None:
    ev = Evidence(make())
    assert [(t.location, t.text) for t in ev.turns] == [("a1", "found it"), ("l1", "done")]
    first, second = ev.turns
    assert [i.source for i in first.evidence] == ["input", "sys", "t1"]
    assert not first.truncated and second.truncated


def test_sources_are_configurable() -> None:
    ev = Evidence(make(), sources=("tool",))
    assert [i.source for i in ev.items] == ["t1", "t2"]


def test_memo_computes_once_per_key() -> None:
    ev = Evidence(make())
    calls: list[int] = []

    def factory() -> int:
        calls.append(1)
        return len(calls)

    assert ev.memo("k", factory) == 1
    assert ev.memo("k", factory) == 1
    assert ev.memo(("k", 2), factory) == 2
    assert len(calls) == 2
    assert Evidence(make()).memo("k", factory) == 3  # per run, not global
