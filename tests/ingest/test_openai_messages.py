"""The OpenAI chat-message importer (format ``openai``)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlens.errors import FormatError
from agentlens.ingest import get_reader
from agentlens.ingest.openai_messages import read
from agentlens.model import StepKind

CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You are an airline agent."},
    {"role": "user", "content": "Cancel reservation ZK3P9Q please."},
    {
        "role": "assistant",
        "content": "Let me look.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_reservation", "arguments": '{"id": "ZK3P9Q"}'},
            }
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "call_1",
        "name": "get_reservation",
        "content": '{"id": "ZK3P9Q", "total": 1834.2}',
    },
    {
        "role": "assistant",
        "content": [{"type": "text", "text": "Cancelled ZK3P9Q; refund $1,834.20."}],
    },
]


def write(tmp_path: Path, name: str, data: str) -> Path:
    path = tmp_path / name
    path.write_text(data, encoding="utf-8")
    return path


def test_one_conversation_as_a_list_of_messages(tmp_path: Path) -> None:
    (run,) = read(write(tmp_path, "c.json", json.dumps(CONVERSATION)))
    kinds = [s.kind for s in run.steps]
    assert kinds == [StepKind.SYSTEM, StepKind.USER, StepKind.TEXT, StepKind.TOOL, StepKind.TEXT]
    call = run.steps[3]
    assert call.name == "get_reservation"
    assert call.input == {"id": "ZK3P9Q"}
    assert call.output == {"id": "ZK3P9Q", "total": 1834.2}
    assert call.attributes["tool_call_id"] == "call_1"
    assert run.input == "Cancel reservation ZK3P9Q please."
    assert run.output == "Cancelled ZK3P9Q; refund $1,834.20."
    assert run.metadata["source_format"] == "openai"


def test_tau_bench_shape_keeps_other_fields_in_metadata(tmp_path: Path) -> None:
    data = [{"task_id": 7, "trial": 1, "reward": 1.0, "info": {"a": 1}, "traj": CONVERSATION}]
    (run,) = read(write(tmp_path, "t.json", json.dumps(data)))
    assert run.metadata["reward"] == 1.0 and run.metadata["task_id"] == 7
    assert run.metadata["info"] == {"a": 1}
    assert run.name == "task 7 trial 1"


def test_jsonl_is_streamed_and_ids_are_deterministic(tmp_path: Path) -> None:
    lines = "\n".join(json.dumps({"messages": CONVERSATION, "n": i}) for i in range(3)) + "\n"
    path = write(tmp_path, "c.jsonl", lines)
    first = [r.id for r in read(path)]
    second = [r.id for r in get_reader("openai")(path)]
    assert len(first) == 3 and first == second and len(set(first)) == 3


def test_explicit_id_agent_and_time(tmp_path: Path) -> None:
    conv = {
        "id": "conv-1",
        "agent": "airline",
        "created_at": "2026-03-05T10:00:00Z",
        "messages": CONVERSATION,
    }
    (run,) = read(write(tmp_path, "c.json", json.dumps(conv, indent=2)))
    assert run.id == "conv-1" and run.agent == "airline"
    assert run.started_at is not None and run.started_at.year == 2026


def test_tool_output_that_is_not_json_stays_text_and_unanswered_results_are_kept(
    tmp_path: Path,
) -> None:
    conv = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "function": {"name": "calc", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "Error: nope"},
        {"role": "tool", "tool_call_id": "zzz", "name": "orphan", "content": "42"},
    ]
    (run,) = read(write(tmp_path, "c.json", json.dumps(conv)))
    assert run.steps[1].output is None and run.steps[1].error == "Error: nope"
    assert run.steps[2].name == "orphan" and run.steps[2].output == 42
    assert run.output is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("", "empty file"),
        ("hello", "not JSON"),
        ('[{"role": "user", "content": "x"}, 3]', "a conversation must be"),
        ('[{"role": "robot", "content": "x"}]', "unknown role"),
        (
            '{"messages": [{"role": "assistant", "tool_calls": [{"function": {}}]}]}',
            "function name",
        ),
        ('{"messages": 3}', "a conversation must be a list"),
        ('{"messages": [{"role": "user", "content": 5}]}', "content must be"),
    ],
)
def test_bad_input_names_file_and_field(tmp_path: Path, data: str, message: str) -> None:
    with pytest.raises(FormatError, match=message) as info:
        list(read(write(tmp_path, "bad.json", data)))
    assert "bad.json" in str(info.value)


def test_bad_jsonl_line_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.jsonl", json.dumps({"messages": CONVERSATION}) + "\n{oops\n")
    with pytest.raises(FormatError, match=r"bad.jsonl:2"):
        list(read(path))


@settings(max_examples=60, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
        max_leaves=10,
    )
)
def test_fuzz_never_raises_anything_but_format_error(
    tmp_path_factory: pytest.TempPathFactory, doc: Any
) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "f.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with contextlib.suppress(FormatError):
        list(read(path))


@pytest.mark.data
def test_reads_tau_bench(data_dir: Callable[[str], Path]) -> None:
    folder = data_dir("tau_bench")
    runs = [r for p in sorted(folder.glob("*.json")) for r in read(p)]
    assert len(runs) == 100
    tools = [s for r in runs for s in r.steps if s.kind is StepKind.TOOL]
    assert tools and all(s.name for s in tools)
    assert sum(s.output is None and s.error is None for s in tools) == 0  # every call answered
    assert all(r.output for r in runs) and all("reward" in r.metadata for r in runs)


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ("Error: payment method not found", "Error: payment method not found"),
        ("error: bad id", "error: bad id"),
        ("Traceback (most recent call last):\n  ...", "Traceback (most recent call last):\n  ..."),
        ('{"error": "no such user"}', "no such user"),
    ],
)
def test_a_tool_result_reporting_a_failure_is_the_steps_error(
    tmp_path: Path, content: str, error: str
) -> None:
    path = tmp_path / "conv.json"
    path.write_text(
        json.dumps(
            [
                {"role": "user", "content": "pay"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "pay", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": content},
                {"role": "tool", "tool_call_id": "zz", "content": content},
            ]
        ),
        encoding="utf-8",
    )
    (trace,) = read(path)
    tools = [s for s in trace.steps if s.kind is StepKind.TOOL]
    assert [(s.error, s.output) for s in tools] == [(error, None), (error, None)]


def test_a_result_that_mentions_an_error_later_is_a_result(tmp_path: Path) -> None:
    path = tmp_path / "conv.json"
    path.write_text(
        json.dumps([{"role": "tool", "content": "No error: all 3 seats booked"}]), encoding="utf-8"
    )
    (trace,) = read(path)
    assert trace.steps[0].error is None and trace.steps[0].output.startswith("No error")


@pytest.mark.data
def test_tau_bench_error_results_are_errors(data_dir: Callable[[str], Path]) -> None:
    runs = list(read(data_dir("tau_bench") / "gpt-4o-airline.dev.json"))
    failed = [s for r in runs for s in r.steps if s.error is not None]
    assert len(failed) == 21
    assert all(s.kind is StepKind.TOOL and s.output is None for s in failed)
    assert all(str(s.error).startswith("Error: ") for s in failed)
