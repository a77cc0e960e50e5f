"""The SWE-agent trajectory importer (``--format swe-agent``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from agentlens.config import Settings
from agentlens.errors import FormatError
from agentlens.eval import run_scorers
from agentlens.ingest import get_reader
from agentlens.ingest.swe_agent import command_name, read
from agentlens.model import StepKind, Trace

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "swe_agent"


def one(path: Path) -> Trace:
    runs = list(read(path))
    assert len(runs) == 1
    return runs[0]


def test_registered_as_format_swe_agent() -> None:
    assert get_reader("swe-agent") is read


def test_golden_trajectory() -> None:
    trace = one(GOLDEN / "calc-1.traj")
    assert trace.input == "ISSUE: add() subtracts."
    assert trace.output == "diff --git a/calc.py b/calc.py\n"
    assert trace.status == "ok"
    assert trace.metadata["exit_status"] == "submitted"
    assert trace.metadata["model_stats"]["api_calls"] == 6
    assert trace.metadata["environment"] == "swe_main"
    assert trace.metadata["omitted"] == ["history", "trajectory[].messages"]
    assert trace.steps[0].kind is StepKind.SYSTEM
    tools = [s for s in trace.steps if s.kind is StepKind.TOOL]
    assert [s.name for s in tools] == ["find_file", "open", "edit", "submit", "submit", "submit"]
    assert tools[0].input == 'find_file "calc.py"\n'
    assert tools[0].output.startswith("Found 1 matches")
    assert tools[0].attributes["duration_s"] == 0.25
    assert tools[0].attributes["state"] == {"open_file": "n/a", "working_dir": "/repo"}
    assert tools[2].error is not None and tools[2].output is None  # refused edit
    assert tools[5].attributes["extra_field"] == 7
    thoughts = [s for s in trace.steps if s.kind is StepKind.THINKING]
    assert len(thoughts) == 5  # the empty thought of the edit turn is not a step
    assert thoughts[0].attributes["response"].startswith("Let's find the file.")


def test_repeated_submit_is_flagged_despite_whitespace_differences() -> None:
    trace = one(GOLDEN / "calc-1.traj")
    result = run_scorers(["repeated_tool_calls"], trace=trace, settings=Settings()).results[
        "repeated_tool_calls"
    ]
    assert [f.attributes["tool"] for f in result.findings] == ["submit"]
    assert result.findings[0].attributes["count"] == 3


def test_history_only_trajectory() -> None:
    trace = one(GOLDEN / "history_only.traj")
    tools = [s for s in trace.steps if s.kind is StepKind.TOOL]
    assert [(s.name, s.output) for s in tools] == [
        ("find_file", "Found 1 matches"),
        ("submit", "diff --git"),
    ]
    assert tools[0].attributes["arguments"] == {"file_name": "calc.py"}
    assert tools[1].attributes["function"] == "submit"  # tool_calls given as a Python repr string
    assert trace.input == "ISSUE: missing colon."


def test_ids_are_deterministic() -> None:
    assert one(GOLDEN / "calc-1.traj").id == one(GOLDEN / "calc-1.traj").id
    assert one(GOLDEN / "calc-1.traj").id != one(GOLDEN / "history_only.traj").id


@pytest.mark.parametrize(
    ("content", "field", "reason"),
    [
        ("[]", None, "JSON object"),
        ("{}", "trajectory", "no 'trajectory'"),
        ('{"trajectory": {}}', "trajectory", "list"),
        ('{"trajectory": [{"observation": "x"}]}', "trajectory[0].action", "action"),
        ('{"trajectory": [3]}', "trajectory[0]", "object"),
        ('{"trajectory": [], "info": []}', "info", "object"),
        ('{"trajectory": [', None, "invalid JSON"),
    ],
)
def test_bad_files(tmp_path: Path, content: str, field: str | None, reason: str) -> None:
    path = tmp_path / "bad.traj"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(FormatError) as info:
        list(read(path))
    assert info.value.field == field
    assert reason in info.value.reason
    assert info.value.source == "bad.traj"


def test_exit_status_other_than_submitted_is_an_error_run(tmp_path: Path) -> None:
    path = tmp_path / "x.traj"
    path.write_text(
        json.dumps({"trajectory": [], "info": {"exit_status": "exit_cost"}}), encoding="utf-8"
    )
    assert one(path).status == "error"


@pytest.mark.parametrize(
    ("action", "name"),
    [
        ('open "setup.py"', "open"),
        ("edit 1:2\nx\nend_of_edit", "edit"),
        ("  python x.py\n", "python"),
        ("", "empty"),
        ("cd /testbed && python reproduce.py", "python"),
        ("cd '/my repo'; pytest -q tests", "pytest"),
        ("cd /a && cd b && git diff", "git"),
        ("PYTHONPATH=src python -m pytest", "python"),
        ("cd /testbed", "cd"),
        ("cd_tool x", "cd_tool"),
    ],
)
def test_command_name(action: str, name: str) -> None:
    assert command_name(action) == name


@pytest.mark.data
def test_real_trajectories_import_and_the_known_loop_is_found(
    data_dir: Callable[[str], Path],
) -> None:
    folder = data_dir("swe_agent")
    paths = sorted(folder.rglob("*.traj"))
    assert paths
    flagged = {}
    for path in paths:
        trace = one(path)
        assert any(s.kind is StepKind.TOOL for s in trace.steps), path
        result = run_scorers(["repeated_tool_calls"], trace=trace, settings=Settings()).results[
            "repeated_tool_calls"
        ]
        if not result.passed:
            flagged[path.stem] = result.findings[0].attributes["count"]
    # The README of the data set: one run repeats an identical action 4 times in a row.
    assert flagged == {"eps": 4}


FAILURES_1X = [
    "Operation 'vim setup.py' is not supported by this environment.",
    "The command 'python loop.py' was cancelled because it took more than 30 seconds. "
    "Please try a different command that completes more quickly.",
    "Your bash command contained syntax errors and was NOT executed. Please fix the syntax "
    "errors and try again.",
    "No replacement was performed, old_str `x = 1` did not appear verbatim in /testbed/a.py.",
    "The path /testbed/missing.py does not exist. Please provide a valid path.",
    "Invalid `view_range`: [1, 2, 3]. It should be a list of two integers.",
    "Your edit was not applied (file not modified): the edit would break the syntax.",
    "EXECUTION TIMED OUT",
]


@pytest.mark.parametrize("observation", FAILURES_1X)
def test_refusals_and_failures_of_1x_tools_are_errors(tmp_path: Path, observation: str) -> None:
    path = tmp_path / "run.traj"
    entries = [
        {"action": "str_replace_editor view /testbed/a.py", "observation": observation},
        {"action": "cd /testbed && python a.py", "observation": "no error here: The path is fine"},
    ]
    history = [
        {"role": "system", "content": "sys", "message_type": "system_prompt"},
        {"role": "assistant", "content": "t", "action": "ls /testbed", "message_type": "action"},
        {"role": "tool", "content": observation, "message_type": "observation"},
    ]
    for data in ({"trajectory": entries, "info": {}}, {"history": history}):
        path.write_text(json.dumps(data), encoding="utf-8")
        tools = [s for s in one(path).steps if s.kind is StepKind.TOOL]
        assert tools[0].error == observation and tools[0].output is None
        if len(tools) > 1:
            assert tools[1].error is None and tools[1].name == "python"
