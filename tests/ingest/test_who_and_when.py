"""The Who&When log importer (``--format who-and-when``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agentlens.config import Settings
from agentlens.errors import FormatError
from agentlens.eval import run_scorers
from agentlens.ingest import get_reader
from agentlens.ingest.who_and_when import read
from agentlens.model import StepKind, Trace

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "who_and_when"


def one(path: Path) -> Trace:
    runs = list(read(path))
    assert len(runs) == 1
    return runs[0]


def test_registered_as_format_who_and_when() -> None:
    assert get_reader("who-and-when") is read


def test_algorithm_generated_terminal_messages_are_tool_steps() -> None:
    trace = one(GOLDEN / "algorithm_42.json")
    assert trace.input == "What is 6 times 7?"
    assert trace.output == "The answer is 43."  # a bare TERMINATE is not the answer
    assert trace.metadata["mistake_agent"] == "Math_Expert"
    assert trace.metadata["system_prompt"] == {"Math_Expert": "You are a math expert."}
    tools = [s for s in trace.steps if s.kind is StepKind.TOOL]
    assert [s.name for s in tools] == ["Computer_terminal"] * 3
    assert tools[0].input == "print(6 * 7)" and "Code output: 42" in tools[0].output
    assert (
        tools[1].input == "print(6 * x)\n\necho done" and tools[1].error and tools[1].output is None
    )
    assert tools[2].input is None and tools[2].attributes["no_code"] is True
    texts = [s for s in trace.steps if s.kind is StepKind.TEXT]
    assert texts[0].name == "Math_Expert" and texts[0].attributes["history_index"] == 0


def test_hand_crafted_instructions_pair_with_the_sub_agent_reply() -> None:
    trace = one(GOLDEN / "handcrafted_museum.json")
    assert trace.steps[0].kind is StepKind.USER
    tools = [s for s in trace.steps if s.kind is StepKind.TOOL]
    assert [(s.name, s.attributes.get("unpaired", False)) for s in tools] == [
        ("WebSurfer", False),
        ("WebSurfer", True),
        ("FileSurfer", False),
    ]
    assert tools[0].input == "Please search for the museum's opening hours."
    assert tools[0].output.startswith("I typed")
    assert tools[0].attributes["caller"] == "Orchestrator"
    thinking = [s for s in trace.steps if s.kind is StepKind.THINKING]
    assert {s.name for s in thinking} == {"Orchestrator"}
    assert trace.output == "The museum is open 9-17."
    assert trace.steps[-1].name == "Orchestrator"


def test_ids_are_deterministic() -> None:
    assert one(GOLDEN / "algorithm_42.json").id == one(GOLDEN / "algorithm_42.json").id


@pytest.mark.parametrize(
    ("content", "field", "reason"),
    [
        ("[]", None, "JSON object"),
        ('{"question": "q"}', "history", "history"),
        ('{"history": [1]}', "history[0]", "object"),
        ('{"history": [{"content": "x"}]}', "history[0].role", "role"),
        ('{"history": [', None, "invalid JSON"),
    ],
)
def test_bad_input(tmp_path: Path, content: str, field: str | None, reason: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(FormatError) as info:
        list(read(path))
    assert info.value.field == field and reason in info.value.reason


@pytest.mark.data
def test_real_logs_import(data_dir: Callable[[str], Path]) -> None:
    folder = data_dir("who_and_when")
    paths = sorted(folder.rglob("*.json"))
    assert len(paths) == 184
    runs = [one(p) for p in paths]
    assert len({t.id for t in runs}) == 184
    tools = [s for t in runs for s in t.steps if s.kind is StepKind.TOOL]
    assert {s.name for s in tools} >= {"Computer_terminal", "WebSurfer", "FileSurfer"}
    flagged = [
        t.name
        for t in runs
        if not run_scorers(["repeated_tool_calls"], trace=t, settings=Settings())
        .results["repeated_tool_calls"]
        .passed
    ]
    # 19 and 56: the terminal's "no code to execute" x3; 28 and 35: the browsing expert showing
    # the same page again and again (repeated_message, docs/transcript-analysers.md)
    assert sorted(flagged) == [
        "Algorithm-Generated/19",
        "Algorithm-Generated/28",
        "Algorithm-Generated/35",
        "Algorithm-Generated/56",
    ]
