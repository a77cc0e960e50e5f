"""Values real agents produce that no store can hold as given, fed to every importer.

Each importer either yields runs that a real SQLite store stores and reads back, or raises a
:class:`FormatError` naming the file (and the line and field where it can): never another
error, never a run that fails at the store (which would name the database, not the input).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlens.errors import FormatError
from agentlens.ingest import get_reader
from agentlens.ingest._pyliteral import MAX_LITERAL_CHARS, parse_literal
from agentlens.model import Trace
from agentlens.store import SQLiteStore

HUGE_INT = "1" + "0" * 5000
"""A JSON number no JSON reader reads back by default (more than 4,300 digits)."""

_HOSTILE = st.sampled_from(
    [
        '"\\ud800"',
        '"a\\udfffb"',
        '"\\ud83d\\ude00"',  # a proper pair: fine
        HUGE_INT,
        "-" + HUGE_INT,
        '"9999-12-31T23:00:00-05:00"',
        '"0001-01-01T00:00:00+01:00"',
        "5",
        "[" * 300 + "]" * 300,
        json.dumps("[" * 3000 + "]" * 3000),
        json.dumps('{"a": "\\ud800"}'),
        json.dumps("{'a': " + "(" * 300 + ")" * 300 + "}"),
        json.dumps("{'a': '\\ud800', 'b': 1e999, 'c': [1, 2]}"),
        json.dumps("{'a': __import__('os')}"),
        "1e999",
    ]
)
_SLOT = "__HOSTILE__"


def _openai(slot: str) -> Any:
    return {
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": slot},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": slot}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": slot},
            {"role": "assistant", "content": "done"},
        ],
        "metadata": {"k": slot},
    }


def _trace(slot: str) -> Any:
    return {
        "id": "r1",
        "agent": "a",
        "input": slot,
        "output": "x",
        "started_at": slot,
        "steps": [{"id": "s1", "kind": "tool", "name": "t", "input": {"q": slot}, "output": slot}],
    }


def _transcript(slot: str) -> Any:
    return {"type": "tool_use", "metadata": {"toolName": "t", "args": slot}, "content": slot}


def _swe(slot: str) -> Any:
    return {
        "trajectory": [
            {"action": "ls", "observation": slot, "thought": "t", "state": slot},
            {"action": "submit", "observation": "ok", "state": "{'open_file': 'a.py'}"},
        ],
        "history": [
            {"role": "user", "content": slot},
            {"role": "assistant", "content": "x", "tool_calls": slot},
        ],
        "info": {"exit_status": "submitted", "submission": slot},
    }


TEMPLATES = {
    "trace": (_trace, ".jsonl"),
    "openai": (_openai, ".jsonl"),
    "transcript": (_transcript, ".jsonl"),
    "swe-agent": (_swe, ".traj"),
}


def _render(doc: Any, slots: list[str]) -> str:
    text = json.dumps(doc)
    for value in slots:
        text = text.replace(json.dumps(_SLOT), value, 1)
    return text.replace(json.dumps(_SLOT), '"plain"')


def _check(fmt: str, path: Path) -> None:
    try:
        runs = list(get_reader(fmt)(path)) if fmt != "trace" else _read_trace(path)
    except FormatError as exc:
        assert exc.source is not None and path.name in exc.source, str(exc)
        return
    with SQLiteStore("sqlite:///:memory:") as store:
        store.put_traces(runs)
        for run in runs:
            back = store.get_trace(run.id)
            assert isinstance(back, Trace)
            json.loads(back.to_json())


def _read_trace(path: Path) -> list[Trace]:
    from agentlens.ingest.trace_file import read

    return list(read(path))


@pytest.mark.parametrize("fmt", sorted(TEMPLATES))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_hostile_values_make_runs_a_store_holds_or_a_format_error(
    fmt: str, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    template, suffix = TEMPLATES[fmt]
    slots = data.draw(st.lists(_HOSTILE, min_size=1, max_size=4), label="values")
    path = tmp_path_factory.mktemp("hostile") / f"input{suffix}"
    path.write_text(_render(template(_SLOT), slots) + "\n", encoding="utf-8")
    _check(fmt, path)


def _write(tmp_path: Path, name: str, lines: list[Any]) -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def test_openai_surrogate_names_file_line_and_field(tmp_path: Path) -> None:
    good = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a"}]}
    bad = {"messages": [{"role": "user", "content": "hi \ud800"}]}
    path = _write(tmp_path, "chats.jsonl", [good, bad])
    with pytest.raises(FormatError) as caught:
        list(get_reader("openai")(path))
    assert (caught.value.source, caught.value.line) == ("chats.jsonl", 2)
    assert caught.value.field == "messages[0].content"
    assert "surrogate" in caught.value.reason


def test_openai_non_string_role_is_a_format_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "role.jsonl", [{"messages": [{"role": 5, "content": "hi"}]}])
    with pytest.raises(FormatError, match="role"):
        list(get_reader("openai")(path))


@pytest.mark.parametrize(
    "arguments", ["[" * 5000 + "]" * 5000, '{"a": "\\ud800"}', '{"n": ' + HUGE_INT + "}"]
)
def test_openai_unreadable_tool_arguments_are_kept_as_text(tmp_path: Path, arguments: str) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
    conv = {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
        ]
    }
    (run,) = get_reader("openai")(_write(tmp_path, "deep.jsonl", [conv]))
    tool = next(s for s in run.steps if s.kind == "tool")
    assert tool.input == arguments
    with SQLiteStore("sqlite:///:memory:") as store:
        store.put_traces([run])
        assert store.get_trace(run.id).steps == run.steps


def test_swe_agent_state_is_read_without_literal_eval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("ast.literal_eval must not read state strings")

    monkeypatch.setattr(ast, "literal_eval", refuse)
    state = "{'open_file': '/repo/a.py', 'working_dir': '/repo', 'n': (1, 2), 'ok': True}"
    traj = {"trajectory": [{"action": "ls", "observation": "a.py", "state": state}]}
    path = tmp_path / "run.traj"
    path.write_text(json.dumps(traj), encoding="utf-8")
    (run,) = get_reader("swe-agent")(path)
    assert run.steps[-1].attributes["state"] == {
        "open_file": "/repo/a.py",
        "working_dir": "/repo",
        "n": [1, 2],
        "ok": True,
    }


def test_swe_agent_huge_or_deep_state_is_kept_as_text(tmp_path: Path) -> None:
    huge = "{'a': '" + "x" * (MAX_LITERAL_CHARS + 10) + "'}"
    deep = "{'a': " + "(" * 300 + ")" * 300 + "}"
    traj = {
        "trajectory": [
            {"action": "ls", "observation": "1", "state": huge},
            {"action": "ls", "observation": "2", "state": deep},
        ]
    }
    path = tmp_path / "big.traj"
    path.write_text(json.dumps(traj), encoding="utf-8")
    (run,) = get_reader("swe-agent")(path)
    states = [s.attributes.get("state") for s in run.steps if "state" in s.attributes]
    assert states == [huge, deep]
    with SQLiteStore("sqlite:///:memory:") as store:
        store.put_traces([run])


@pytest.mark.parametrize(
    "text",
    [
        "{'a': 1, 'b': [1.5, None, False], 'c': ('x',), 'd': {'e': -2}}",
        "{'s': 'it\\'s', 'u': '\\u00e9', 'r': r'\\n', 'hex': 0x1f, 'big': 1_000}",
        "[{'id': 'c1', 'function': {'name': 'f', 'arguments': '{\"a\": 1}'}}]",
        "{'a': 'b' 'c', 'e': {}}",
    ],
)
def test_bounded_literal_parse_reads_what_literal_eval_reads(text: str) -> None:
    expected = ast.literal_eval(text)
    got = parse_literal(text)
    assert json.loads(json.dumps(got)) == json.loads(json.dumps(expected))


@pytest.mark.parametrize(
    "text", ["{'a': foo}", "__import__('os')", "{'a': 1", "[1,,2]", "{'a': 1, 2}", "1j", "[" * 300]
)
def test_bounded_literal_parse_refuses_what_is_not_a_plain_literal(text: str) -> None:
    with pytest.raises(ValueError):
        parse_literal(text)
