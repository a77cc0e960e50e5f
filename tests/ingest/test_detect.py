"""Format detection: every file of the public data detected as what it is, and near misses."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from agentlens.errors import FormatError
from agentlens.ingest import DETECTABLE, detect
from agentlens.ingest.trace_file import read as read_trace

GOLDEN = Path(__file__).resolve().parents[1] / "golden"

# Folder of ../shared/data (or a file suffix in it) -> the format its files are in; None: not a
# log at all (licences, READMEs, JSON Schemas, QA data sets, SWE-agent's predictions and config).
_LOGS = {
    "tau_bench": "openai",
    "who_and_when": "who-and-when",
    "openhands": "openhands",
}


def _expected(rel: Path) -> str | None:
    name = rel.name
    if name in ("LICENSE", "LICENSE.md", "README.md"):
        return None
    top = rel.parts[0]
    if top in _LOGS:
        return _LOGS[top]
    if top == "swe_agent":
        return "swe-agent" if name.endswith(".traj") else None
    if top == "claude_code":
        if name.endswith(".jsonl") or name == "sample_session.json":
            return "claude-code"
        return None  # the session JSON Schemas and the captured tool lists
    return None  # halueval, wice, otel_genai_semconv: not agent logs


@pytest.mark.data
def test_every_public_data_file_is_detected_as_what_it_is(
    data_dir: Callable[[str], Path],
) -> None:
    root = data_dir("tau_bench").parent
    files = sorted(p for p in root.rglob("*") if p.is_file())
    assert len(files) > 250
    seen: dict[str | None, int] = {}
    wrong = []
    for path in files:
        rel = path.relative_to(root)
        want = _expected(rel)
        try:
            got: str | None = detect(path)
        except FormatError as exc:
            got = None
            assert "tried trace, openai, transcript" in str(exc) or "mixed" in str(exc), exc
        if got != want:
            wrong.append(f"{rel}: detected {got}, is {want}")
        seen[want] = seen.get(want, 0) + 1
    assert wrong == []
    assert {k for k in seen if k} == {
        "openai",
        "who-and-when",
        "openhands",
        "swe-agent",
        "claude-code",
    }


@pytest.mark.parametrize(
    ("folder", "fmt"),
    [
        ("trace", "trace"),
        ("transcript", "transcript"),
        ("swe_agent", "swe-agent"),
        ("openhands", "openhands"),
        ("who_and_when", "who-and-when"),
    ],
)
def test_every_golden_file_is_detected(folder: str, fmt: str) -> None:
    paths = [
        path
        for path in sorted((GOLDEN / folder).iterdir())
        if path.suffix in (".json", ".jsonl", ".traj") and ".expected" not in path.name
    ]
    assert paths, f"no golden file in {folder}"  # else the loop below asserts nothing
    for path in paths:
        assert detect(path) == fmt, path


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _jsonl(*records: object) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


MESSAGES = [
    {"role": "user", "content": "Cancel reservation ABC123"},
    {"role": "assistant", "content": "Done."},
]

NEAR = [
    # (file name, content, detected format)
    ("conv.json", json.dumps(MESSAGES), "openai"),
    ("convs.jsonl", _jsonl({"messages": MESSAGES}, {"messages": MESSAGES}), "openai"),
    ("traj.json", json.dumps([{"task_id": 1, "traj": MESSAGES}]), "openai"),
    ("one.json", json.dumps({"id": "c1", "messages": MESSAGES}, indent=2), "openai"),
    (
        "events.jsonl",
        _jsonl({"type": "user", "content": "hi"}, {"type": "text", "content": "hello"}),
        "transcript",
    ),
    (
        "session.jsonl",
        _jsonl(
            {"type": "summary", "summary": "s", "leafUuid": "u1"},
            {"type": "user", "sessionId": "x", "message": {"role": "user", "content": "hi"}},
        ),
        "claude-code",
    ),
    ("otlp.json", json.dumps({"resourceSpans": []}), "otlp-json"),
    ("otlp.jsonl", _jsonl({"resourceSpans": []}, {"resourceSpans": []}), "otlp-json"),
    ("run.jsonl", _jsonl({"id": "r1", "input": "q", "output": "a"}), "trace"),
    ("runs.json", json.dumps([{"id": "r1", "steps": []}]), "trace"),
    ("hands.json", json.dumps([{"id": 1, "action": "run", "args": {}}]), "openhands"),
    ("swe.traj", json.dumps({"trajectory": [{"action": "ls", "observation": ""}]}), "swe-agent"),
    (
        "ww.json",
        json.dumps({"question": "q", "history": [{"role": "user", "content": "x"}]}),
        "who-and-when",
    ),
    # a trace record with only trace keys goes to the trace reader, which says what is wrong
    # messages beside trace fields: an openai conversation with extra fields
    ("conv-with-id.jsonl", _jsonl({"id": "r", "steps": [], "messages": MESSAGES}), "openai"),
    ("bad-trace.jsonl", _jsonl({"id": 1}), "trace"),
    # broken JSON is left to the trace reader, whose errors give line and column
    ("broken.json", '[{"id": "a", "input": "q"},\n{]', "trace"),
]


@pytest.mark.parametrize(("name", "text", "fmt"), NEAR, ids=[n[0] for n in NEAR])
def test_near_misses_are_detected_as_what_they_are(
    tmp_path: Path, name: str, text: str, fmt: str
) -> None:
    assert detect(_write(tmp_path, name, text)) == fmt


REFUSED = [
    (
        "qa.jsonl",
        _jsonl({"question": "q", "answer": "a"}),
        "its first line is an object with keys answer, question",
    ),
    ("schema.json", json.dumps({"$schema": "x", "type": "object"}), "a JSON Schema, not a log"),
    ("claude-ish.jsonl", _jsonl({"type": "assistant", "text": "no message"}), "keys text, type"),
    ("numbers.json", "[1, 2, 3]", "its first item is a JSON number"),
    ("empty-object.json", "{}", "keys (none)"),
    ("text.txt", "hello\n", "not JSON (starts with 'h')"),
    ("empty.jsonl", "\n\n", "empty file"),
    (
        "mixed.jsonl",
        _jsonl({"type": "text", "content": "hi"}, {"id": "r", "input": "q", "steps": []}),
        "mixed formats: line 1 looks like transcript, line 2 like trace",
    ),
    (
        "trace-with-messages.jsonl",
        _jsonl({"id": "r", "steps": [], "history": "h"}),
        "cannot tell the format",
    ),
]


@pytest.mark.parametrize(("name", "text", "message"), REFUSED, ids=[r[0] for r in REFUSED])
def test_what_fits_no_format_is_refused_naming_the_formats_tried(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    path = _write(tmp_path, name, text)
    with pytest.raises(FormatError) as info:
        detect(path)
    text_of = str(info.value)
    assert text_of.startswith(str(path))
    assert message in text_of
    if "mixed" not in message and "empty" not in message:
        assert "tried " + ", ".join(DETECTABLE) in text_of


# -- the trace reader refuses what is not a run -----------------------------------------------


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        (
            {"id": "r", "messages": MESSAGES},
            "'messages' is not a field of the trace format but of openai",
        ),
        ({"id": "r", "input": "q", "trajectory": []}, "of swe-agent"),
        ({"type": "user", "sessionId": "s", "message": {}}, "of claude-code"),
        ({"resourceSpans": []}, "of otlp-json"),
        ({"id": "r"}, "an empty run: no steps, no input and no output"),
        ({"id": "r", "steps": []}, "an empty run"),
    ],
)
def test_trace_reader_refuses_foreign_and_empty_records(
    tmp_path: Path, record: dict[str, object], reason: str
) -> None:
    path = _write(tmp_path, "r.jsonl", _jsonl(record))
    with pytest.raises(FormatError) as info:
        list(read_trace(path))
    assert reason in str(info.value)
    assert str(info.value).startswith(f"{path}:1")


def test_an_exported_empty_run_reads_back(tmp_path: Path) -> None:
    # agentlens export writes schema_version: an empty run it wrote is a run.
    path = _write(tmp_path, "r.jsonl", _jsonl({"schema_version": 1, "id": "r", "steps": []}))
    assert [t.id for t in read_trace(path)] == ["r"]
