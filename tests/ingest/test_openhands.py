"""The OpenHands event-stream importer (``--format openhands``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from agentlens.config import Settings
from agentlens.errors import FormatError
from agentlens.eval import run_scorers
from agentlens.ingest import get_reader
from agentlens.ingest.openhands import read
from agentlens.model import StepKind

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "openhands"


def test_registered_as_format_openhands() -> None:
    assert get_reader("openhands") is read


def test_event_array() -> None:
    [trace] = list(read(GOLDEN / "rename.json"))
    assert trace.input == "Rename a.py to b.py"
    assert trace.output == "a.py does not exist, nothing to rename."
    assert trace.metadata["agent_states"] == ["loading"]
    kinds = [str(s.kind) for s in trace.steps]
    assert kinds == [
        "user",
        "thinking",
        "tool",
        "tool",
        "thinking",
        "tool",
        "tool",
        "thinking",
        "text",
    ]
    read_step = trace.steps[2]
    assert read_step.name == "read"
    assert read_step.input == {"path": "/workspace", "start": 0, "end": -1}  # thought split off
    assert trace.steps[1].output == "Let me look first."
    assert read_step.output == "a.py"
    assert read_step.duration_s == 1.0
    assert (
        read_step.attributes["input_tokens"] == 900 and read_step.attributes["output_tokens"] == 30
    )
    mv = trace.steps[3]
    assert mv.output == "mv: cannot stat 'a.py'" and mv.error == "exit code 1"
    edit = trace.steps[5]
    assert edit.output is None and edit.error.startswith("ERROR:")
    stray = trace.steps[6]
    assert stray.name == "error" and stray.attributes["unpaired"] is True and stray.error


def test_output_lines_one_run_each() -> None:
    runs = list(read(GOLDEN / "outputs.jsonl"))
    assert [r.name for r in runs] == ["demo__repo-1", "acme/web#7"]
    first, second = runs
    assert first.input == "Fix the bug in calc.py" and first.output == "The bug is a subtraction."
    assert first.steps[0].kind is StepKind.SYSTEM
    assert (
        first.steps[1].kind is StepKind.RETRIEVAL
        and first.steps[1].output == "Added workspace context"
    )
    assert first.metadata["metrics"] == {"accumulated_cost": 0.5}
    assert first.status == "ok" and second.status == "error"
    # Older flattened events, paired in order.
    assert second.steps[0].kind is StepKind.USER
    tools = [s for s in second.steps if s.kind is StepKind.TOOL]
    assert [(s.name, s.input) for s in tools] == [
        ("run", {"command": "touch LICENSE"}),
        ("run_ipython", {"code": "print(open('LICENSE').read())"}),
    ]
    assert tools[0].output.strip().startswith("root@host")
    assert first.id != second.id


def test_repeated_command_is_flagged() -> None:
    first = next(iter(read(GOLDEN / "outputs.jsonl")))
    result = run_scorers(["repeated_tool_calls"], trace=first, settings=Settings()).results[
        "repeated_tool_calls"
    ]
    assert result.findings[0].text == 'run({"command": "cat calc.py"}) x3'


def test_ids_are_deterministic() -> None:
    assert [r.id for r in read(GOLDEN / "outputs.jsonl")] == [
        r.id for r in read(GOLDEN / "outputs.jsonl")
    ]


def test_a_pretty_printed_output_object(tmp_path: Path) -> None:
    line = (GOLDEN / "outputs.jsonl").read_text().splitlines()[0]
    path = tmp_path / "one.json"
    path.write_text(json.dumps(json.loads(line), indent=2), encoding="utf-8")
    [trace] = list(read(path))
    assert trace.name == "demo__repo-1"


@pytest.mark.parametrize(
    ("content", "line", "field", "reason"),
    [
        ('{"history": 3}\n', 1, "history", "history"),
        ('{"history": []}\n{"nope": 1}\n', 2, "history", "history"),
        ('{"history": [{"id": 1}]}\n', 1, "history[0]", "'action' or 'observation'"),
        ('{"history": [{"action": 5}]}\n', 1, "history[0].action", "string"),
        ('{"history": [{"action": "run", "args": []}]}\n', 1, "history[0].args", "object"),
        (
            '{"history": [{"action": "run", "args": {}, "timestamp": "soon"}]}\n',
            1,
            "history[0].timestamp",
            "ISO",
        ),
        ('{"history": []}\n{"history": [\n', 2, None, "invalid JSON"),
        ("[1, 2]", None, "history[0]", "object"),
    ],
)
def test_bad_input(
    tmp_path: Path, content: str, line: int | None, field: str | None, reason: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(FormatError) as info:
        list(read(path))
    assert (info.value.line, info.value.field) == (line, field)
    assert reason in info.value.reason


@pytest.mark.data
def test_real_event_streams_import(data_dir: Callable[[str], Path]) -> None:
    folder = data_dir("openhands")
    paths = sorted([*folder.rglob("*.json"), *folder.rglob("*.jsonl")])
    runs = [t for p in paths for t in read(p)]
    assert len(runs) == 9
    assert all(t.steps for t in runs)
    tools = [s for t in runs for s in t.steps if s.kind is StepKind.TOOL]
    assert len(tools) > 100
    unpaired = [s for s in tools if s.attributes.get("unpaired")]
    assert len(unpaired) <= 5  # runtime error observations only
    report = [run_scorers(["repeated_tool_calls"], trace=t, settings=Settings()) for t in runs]
    modes = sorted(str(m) for r in report for m in r.results["repeated_tool_calls"].failure_modes)
    assert modes == ["error_loop", "repeated_tool_call"]
