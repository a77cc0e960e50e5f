"""Fuzz the agent-log importers with malformed input: they yield valid runs or raise FormatError.

Covers ``transcript``, ``swe-agent``, ``openhands`` and ``who-and-when`` (the ``trace`` and
``openai`` readers have their own fuzz tests). Inputs are random bytes, invalid UTF-8, the
hand-written golden fixtures cut at random offsets or with one value replaced by a random JSON
value, JSON documents of the wrong shape, and deeply nested values.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

from agentlens.cli import app
from agentlens.errors import FormatError
from agentlens.ingest import get_reader
from agentlens.model import Trace
from agentlens.store import SQLiteStore

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


@dataclass(frozen=True)
class _Format:
    name: str
    folder: str
    suffix: str

    @property
    def fixtures(self) -> list[bytes]:
        return [p.read_bytes() for p in sorted((GOLDEN / self.folder).iterdir()) if p.is_file()]

    @property
    def read(self) -> Callable[[Path], Iterator[Trace]]:
        return get_reader(self.name)


FORMATS = [
    _Format("transcript", "transcript", ".jsonl"),
    _Format("swe-agent", "swe_agent", ".traj"),
    _Format("openhands", "openhands", ".json"),
    _Format("who-and-when", "who_and_when", ".json"),
]
IDS = [f.name for f in FORMATS]

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.sampled_from(
        [
            "",
            "tool_use",
            "tool_result",
            "text",
            "run",
            "message",
            "Computer_terminal",
            "2026-11-29T10:00:00Z",
            "exitcode: 1",
            "1e400",
            "-5",
            "\ud800",
            "a\udfffb",
            "9999-12-31T23:00:00-05:00",
            "0001-01-01T00:00:00+01:00",
            "[",
            "{",
        ]
    )
)
_REPARSED = st.sampled_from(
    [
        "{[]: 1}",
        "[{[]: 1}]",
        "{1, [2]}",
        "{" + "[" * 300,
        "[" * 3000 + "]" * 3000,
        '{"a": ' * 3000 + "1" + "}" * 3000,
        "{'a': " + "(" * 300 + ")" * 300 + "}",
        "{'a': 1}",
        "{}",
        '{"a": "\\ud800"}',
        "{'a': '\\ud800'}",
        "{'a': " + "1" * 5000 + "}",
        '{"a": ' + "1" * 5000 + "}",
    ]
)
"""Strings the importers parse again (tool arguments, SWE-agent ``state`` and ``tool_calls``)."""
_REPARSED_KEYS = st.sampled_from(["state", "args", "arguments", "tool_calls", "content", "result"])
_JSON = st.recursive(
    _SCALARS,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
    max_leaves=12,
)
_KEYS = st.sampled_from(
    [
        "type",
        "content",
        "metadata",
        "timestamp",
        "toolName",
        "args",
        "result",
        "isError",
        "error",
        "trajectory",
        "history",
        "info",
        "action",
        "observation",
        "thought",
        "state",
        "execution_time",
        "exit_status",
        "submission",
        "role",
        "name",
        "tool_calls",
        "cause",
        "id",
        "extras",
        "tool_call_metadata",
        "source",
        "instance_id",
        "issue",
        "question",
        "exit_code",
    ]
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (of keys and indices) to a value inside ``value``, the root included."""
    out = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            out.extend(_paths(child, (*prefix, key)))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            out.extend(_paths(child, (*prefix, i)))
    return out


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)
    return copy


def _documents(fixture: bytes) -> tuple[list[Any], bool]:
    """The fixture's JSON documents, and whether it is JSON Lines."""
    text = fixture.decode("utf-8")
    try:
        return [json.loads(text)], False
    except ValueError:
        return [json.loads(line) for line in text.splitlines() if line.strip()], True


@st.composite
def _mutated(draw: st.DrawFn, fmt: _Format) -> bytes:
    """A golden fixture with one value (or one key's value) replaced by a random JSON value."""
    docs, lines = _documents(draw(st.sampled_from(fmt.fixtures)))
    which = draw(st.integers(0, len(docs) - 1))
    doc = docs[which]
    path = draw(st.sampled_from(_paths(doc)))
    new = draw(_JSON)
    if draw(st.booleans()):
        doc = _replace(doc, path, new)
    else:  # set a known key at that place (when it is an object)
        target = _at(doc, path)
        if isinstance(target, dict):
            doc = _replace(doc, path, {**target, draw(_KEYS): new})
        else:
            doc = _replace(doc, path, new)
    docs[which] = doc
    if lines:
        return "\n".join(json.dumps(d) for d in docs).encode("utf-8")
    return json.dumps(doc).encode("utf-8")


@st.composite
def _reparsed(draw: st.DrawFn, fmt: _Format) -> bytes:
    """A golden fixture with a field that is parsed again set to nasty text in one object."""
    docs, lines = _documents(draw(st.sampled_from(fmt.fixtures)))
    which = draw(st.integers(0, len(docs) - 1))
    objects = [p for p in _paths(docs[which]) if isinstance(_at(docs[which], p), dict)]
    path = draw(st.sampled_from(objects))
    target = _at(docs[which], path)
    docs[which] = _replace(docs[which], path, {**target, draw(_REPARSED_KEYS): draw(_REPARSED)})
    if lines:
        return "\n".join(json.dumps(d) for d in docs).encode("utf-8")
    return json.dumps(docs[which]).encode("utf-8")


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        value = value[part]
    return value


@st.composite
def _truncated(draw: st.DrawFn, fmt: _Format) -> bytes:
    fixture = draw(st.sampled_from(fmt.fixtures))
    return fixture[: draw(st.integers(0, len(fixture)))]


@st.composite
def _invalid_utf8(draw: st.DrawFn, fmt: _Format) -> bytes:
    fixture = draw(st.sampled_from(fmt.fixtures))
    at = draw(st.integers(0, len(fixture)))
    bad = draw(
        st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80", b"\xf8\x88\x80\x80\x80"])
    )
    return fixture[:at] + bad + fixture[at:]


@st.composite
def _deep(draw: st.DrawFn) -> bytes:
    depth = draw(st.integers(1, 5000))
    opener, closer = draw(
        st.sampled_from([("[", "]"), ("[[", ",{}]]"), ('{"history": [', "]}"), ('{"a":', "}")])
    )
    inner = draw(st.sampled_from(["1", "null", "{}", "[]"]))
    return (opener * depth + inner + closer * depth).encode("ascii")


def _wrong_shape() -> st.SearchStrategy[bytes]:
    docs = (
        _JSON
        | st.lists(st.integers(), max_size=5)
        | st.dictionaries(_KEYS, _JSON, max_size=4)
        | st.lists(st.dictionaries(_KEYS, _JSON, max_size=4), max_size=4)
        | st.dictionaries(
            _KEYS, st.lists(st.dictionaries(_KEYS, _JSON, max_size=4), max_size=3), max_size=3
        )
    )
    as_lines = st.lists(docs, min_size=1, max_size=4).map(
        lambda ds: "\n".join(json.dumps(d) for d in ds)
    )
    return (docs.map(json.dumps) | as_lines).map(lambda s: s.encode("utf-8"))


def malformed(fmt: _Format) -> st.SearchStrategy[bytes]:
    """Malformed (or barely valid) content for a file of format ``fmt``."""
    return st.one_of(
        st.binary(max_size=200),
        _invalid_utf8(fmt),
        _truncated(fmt),
        _mutated(fmt),
        _reparsed(fmt),
        _wrong_shape(),
        _deep(),
    )


def check(fmt: _Format, path: Path) -> None:
    """``read(path)`` yields valid Traces or raises a FormatError naming the file; nothing else."""
    try:
        runs = list(fmt.read(path))
    except FormatError as exc:
        assert exc.source is not None and path.name in exc.source, str(exc)
        assert exc.reason
        return
    for run in runs:
        assert isinstance(run, Trace)
        Trace.model_validate(run.model_dump())
    # What an importer yields, a store holds and reads back (no error naming the database).
    with SQLiteStore("sqlite:///:memory:") as store:
        store.put_traces(runs)
        assert [store.get_trace(r.id).id for r in runs] == [r.id for r in runs]


def _fuzz(fmt: _Format, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory) -> None:
    content = data.draw(malformed(fmt), label="content")
    path = tmp_path_factory.mktemp("fuzz") / f"input{fmt.suffix}"
    path.write_bytes(content)
    check(fmt, path)


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_malformed_input_yields_runs_or_format_error(
    fmt: _Format, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _fuzz(fmt, data, tmp_path_factory)


# --- the CLI: one error line naming the file, exit 2, no traceback ---------------------------

Invoke = Callable[..., Result]


@pytest.fixture
def cli(tmp_path: Path) -> Invoke:
    """Run ``agentlens --db <tmp db> ARGS...``; a crash (not a clean exit) fails the test."""

    def invoke(*args: str) -> Result:
        result = CliRunner().invoke(app, ["--db", f"sqlite:///{tmp_path / 'test.db'}", *args])
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise AssertionError(f"agentlens {' '.join(args)} crashed") from result.exception
        assert "Traceback" not in result.output
        return result

    return invoke


CLI_BAD = {
    "transcript": b'{"type": "tool_use", "metadata": {"toolName": 3}}\n',
    "swe-agent": b'{"trajectory": [{"action": 7}]}',
    "openhands": b'[{"action": "run", "args": [1, 2]}]',
    "who-and-when": b'{"history": [{"role": null, "content": "hi"}]}',
}


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
def test_cli_reports_a_malformed_file_in_one_line(
    cli: Invoke, tmp_path: Path, fmt: _Format
) -> None:
    path = tmp_path / f"bad{fmt.suffix}"
    path.write_bytes(CLI_BAD[fmt.name])
    result = cli("import", "--format", fmt.name, str(path))
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and path.name in lines[0]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
def test_cli_reports_invalid_utf8_in_one_line(cli: Invoke, tmp_path: Path, fmt: _Format) -> None:
    path = tmp_path / f"bad{fmt.suffix}"
    path.write_bytes(b'{"x": "\xff"}\n')
    result = cli("import", "--format", fmt.name, str(path))
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and path.name in result.stderr
    assert len(result.stderr.splitlines()) == 1


# --- regressions: the crashes the fuzzer found, each as its minimal example ------------------

_DEEP = "[" * 3000 + "]" * 3000


def _write(tmp_path: Path, name: str, content: str) -> Path:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("fmt", "suffix"),
    [
        ("transcript", ".jsonl"),
        ("swe-agent", ".traj"),
        ("openhands", ".json"),
        ("who-and-when", ".json"),
    ],
)
def test_json_nested_too_deeply_is_a_format_error(tmp_path: Path, fmt: str, suffix: str) -> None:
    path = _write(tmp_path, f"deep{suffix}", '{"history": ' + _DEEP + "}\n")
    with pytest.raises(FormatError, match="nested too deeply") as caught:
        list(get_reader(fmt)(path))
    assert caught.value.source == path.name


def test_transcript_deep_line_names_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "t.jsonl", '{"type": "text", "content": "hi"}\n' + _DEEP + "\n")
    with pytest.raises(FormatError, match="nested too deeply") as caught:
        list(get_reader("transcript")(path))
    assert caught.value.line == 2


def test_openhands_non_string_observation_is_a_format_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "o.json", '[{"observation": []}]')
    with pytest.raises(FormatError, match="observation must be a string") as caught:
        list(get_reader("openhands")(path))
    assert caught.value.field == "history[0].observation"


def test_openhands_unhashable_model_response_id_is_read(tmp_path: Path) -> None:
    meta = {"model_response": {"id": [1], "usage": {"prompt_tokens": 5, "completion_tokens": 2}}}
    events = [{"action": "run", "args": {"command": "ls"}, "tool_call_metadata": meta}] * 2
    path = _write(tmp_path, "o.json", json.dumps(events))
    (run,) = get_reader("openhands")(path)
    tools = [s for s in run.steps if s.name == "run"]
    assert tools[0].attributes["input_tokens"] == 5
    assert "input_tokens" not in tools[1].attributes  # same response: counted once


@pytest.mark.parametrize("state", ["{[]: 1}", "{1: " + _DEEP + "}", '{"a": ' + _DEEP + "}"])
def test_swe_agent_unparsable_state_is_kept_as_text(tmp_path: Path, state: str) -> None:
    path = _write(
        tmp_path, "s.traj", json.dumps({"trajectory": [{"action": "ls", "state": state}]})
    )
    (run,) = get_reader("swe-agent")(path)
    assert run.steps[0].attributes["state"] == state


def test_swe_agent_unparsable_tool_calls_and_arguments_are_ignored(tmp_path: Path) -> None:
    history = [
        {"role": "assistant", "action": "ls", "tool_calls": "[{[]: 1}]"},
        {
            "role": "assistant",
            "action": "ls",
            "tool_calls": [{"function": {"name": "f", "arguments": _DEEP}}],
        },
    ]
    path = _write(tmp_path, "h.traj", json.dumps({"history": history}))
    (run,) = get_reader("swe-agent")(path)
    first, second = (s for s in run.steps if s.kind.value == "tool")
    assert "function" not in first.attributes
    assert second.attributes["arguments"] == _DEEP


def test_transcript_deep_tool_arguments_are_kept_as_text(tmp_path: Path) -> None:
    event = {"type": "tool_use", "metadata": {"toolName": "x", "args": _DEEP}}
    path = _write(tmp_path, "t.jsonl", json.dumps(event) + "\n")
    (run,) = get_reader("transcript")(path)
    assert run.steps[0].input == _DEEP


def test_openhands_first_json_line_gets_the_checks_of_every_line(tmp_path: Path) -> None:
    # Found by the fuzzer: the first line of an OpenHands JSON Lines file was decoded without
    # the lone-surrogate check, so the store refused the run instead of the importer.
    path = _write(tmp_path, "o.jsonl", '{"history": [], "": [{"": "\\ud800"}]}\n')
    with pytest.raises(FormatError, match="lone surrogate") as caught:
        list(get_reader("openhands")(path))
    assert caught.value.line == 1
