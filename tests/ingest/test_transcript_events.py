"""The transcript-event importer (``--format transcript``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentlens.config import Settings
from agentlens.errors import FormatError
from agentlens.eval import run_scorers
from agentlens.ingest import get_reader
from agentlens.ingest.transcript import read
from agentlens.model import StepKind, Trace

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "transcript"


def one(path: Path) -> Trace:
    runs = list(read(path))
    assert len(runs) == 1
    return runs[0]


def write_events(path: Path, events: list[Any]) -> Path:
    path.write_text(
        "\n".join(e if isinstance(e, str) else json.dumps(e) for e in events) + "\n",
        encoding="utf-8",
    )
    return path


def test_registered_as_format_transcript() -> None:
    assert get_reader("transcript") is read


def test_golden_blog_writer_run() -> None:
    trace = one(GOLDEN / "blog_writer.jsonl")
    kinds = [str(s.kind) for s in trace.steps]
    assert kinds == ["thinking", "tool", "text", "tool", "tool", "tool", "text"]
    first = trace.steps[1]
    assert first.name == "search_knowledge"
    assert first.input == {"query": "brand voice guidelines"}  # JSON args parsed
    assert json.loads(first.output)[0]["id"] == "DOC-1a2b3c4d"  # metadata.result wins over content
    assert first.attributes["result_content"] == "3 results"
    assert first.duration_s == 1.0
    second = trace.steps[3]
    assert second.output == trace.steps[4].output  # result from content when metadata has none
    assert second.attributes["requestId"] == "r-2"  # unknown fields kept
    assert trace.steps[4].attributes["usage"] == {"input_tokens": 1200, "output_tokens": 40}
    failed = trace.steps[5]
    assert failed.name == "publish" and failed.input == "draft-7"
    assert failed.error == "quota exceeded" and failed.output is None
    assert trace.output == "Here is the post, in the tenant's voice."
    assert trace.steps[-1].attributes["line"] == 12  # blank line 11 skipped, lines still counted
    assert (
        trace.started_at is not None and trace.started_at.isoformat() == "2026-11-29T10:00:00+00:00"
    )
    assert trace.ended_at is not None and trace.ended_at.isoformat() == "2026-11-29T10:00:15+00:00"
    assert trace.metadata["source_format"] == "transcript"


def test_the_seed_example_is_flagged_after_import() -> None:
    trace = one(GOLDEN / "blog_writer.jsonl")
    report = run_scorers(["repeated_tool_calls"], trace=trace, settings=Settings())
    result = report.results["repeated_tool_calls"]
    assert [f.text for f in result.findings] == [
        'search_knowledge({"query": "brand voice guidelines"}) x3'
    ]
    assert result.findings[0].step_ids == ["s2", "s4", "s5"]
    waste = result.findings[0].attributes["waste"]
    assert waste["input_tokens"] == 1200 and waste["duration_s"] == 2.0


def test_unpaired_tool_use_and_orphan_result() -> None:
    trace = one(GOLDEN / "unpaired.jsonl")
    a, b, orphan = trace.steps[:3]
    assert a.output == "page a" and "unpaired" not in a.attributes
    assert b.output is None and b.attributes["unpaired"] is True
    assert orphan.name == "lookup" and orphan.input is None and orphan.output == "orphan"
    assert orphan.attributes["unpaired"] is True


def test_results_pair_by_tool_name_then_in_order(tmp_path: Path) -> None:
    path = write_events(
        tmp_path / "t.jsonl",
        [
            {"type": "tool_use", "metadata": {"toolName": "a", "args": "1"}},
            {"type": "tool_use", "metadata": {"toolName": "b", "args": "2"}},
            {"type": "tool_result", "metadata": {"toolName": "b", "result": "B"}},
            {"type": "tool_result", "content": "A"},
        ],
    )
    trace = one(path)
    assert [(s.name, s.input, s.output) for s in trace.steps] == [("a", 1, "A"), ("b", 2, "B")]


def test_plain_string_args_stay_strings(tmp_path: Path) -> None:
    path = write_events(
        tmp_path / "t.jsonl",
        [{"type": "tool_use", "metadata": {"toolName": "sh", "args": "ls -la"}}],
    )
    assert one(path).steps[0].input == "ls -la"


def test_importing_twice_gives_the_same_ids(tmp_path: Path) -> None:
    first = one(GOLDEN / "blog_writer.jsonl")
    again = one(GOLDEN / "blog_writer.jsonl")
    assert first.id == again.id and [s.id for s in first.steps] == [s.id for s in again.steps]
    assert len(first.id) == 26
    copy = tmp_path / "other.jsonl"
    copy.write_bytes((GOLDEN / "blog_writer.jsonl").read_bytes() + b"\n")
    assert one(copy).id != first.id


def test_a_json_array_of_events_is_accepted(tmp_path: Path) -> None:
    events = [
        json.loads(line)
        for line in (GOLDEN / "blog_writer.jsonl").read_text().splitlines()
        if line.strip()
    ]
    path = tmp_path / "events.json"
    path.write_text(json.dumps(events, indent=2), encoding="utf-8")
    trace = one(path)
    assert [s.kind for s in trace.steps] == [
        s.kind for s in one(GOLDEN / "blog_writer.jsonl").steps
    ]


def test_user_and_system_events_are_accepted(tmp_path: Path) -> None:
    path = write_events(
        tmp_path / "t.jsonl",
        [
            {"type": "system", "content": "be brief"},
            {"type": "user", "content": "hi"},
            {"type": "text", "content": "hello"},
        ],
    )
    trace = one(path)
    assert [s.kind for s in trace.steps] == [StepKind.SYSTEM, StepKind.USER, StepKind.TEXT]
    assert trace.input == "hi" and trace.output == "hello"


@pytest.mark.parametrize(
    ("line", "field", "reason"),
    [
        ('{"type": "tool_use", "metadata": {"args": "{}"}}', "metadata.toolName", "toolName"),
        ('{"type": "picture", "content": "x"}', "type", "unknown event type"),
        ('{"content": "x"}', "type", "event type"),
        ('{"type": "text", "metadata": [1]}', "metadata", "JSON object"),
        ('{"type": "text", "timestamp": "yesterday"}', "timestamp", "ISO 8601"),
        ('{"type": "tool_use", "metadata": {"toolName": 3}}', "metadata.toolName", "string"),
        ("[1, 2", None, "invalid JSON"),
        ('{"type": "text", "content": "x"', None, "invalid JSON"),
        ("42", None, "JSON object"),
    ],
)
def test_bad_events_name_file_line_and_field(
    tmp_path: Path, line: str, field: str | None, reason: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"type": "text", "content": "ok"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(FormatError) as info:
        list(read(path))
    err = info.value
    assert err.source == "bad.jsonl"
    assert reason in err.reason
    assert err.line == 2
    assert "bad.jsonl:2" in str(err)
    assert err.field == field


def test_empty_and_missing_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(FormatError, match="no events"):
        list(read(empty))
    with pytest.raises(FormatError, match="cannot read"):
        list(read(tmp_path / "absent.jsonl"))


def test_epoch_timestamps(tmp_path: Path) -> None:
    path = write_events(
        tmp_path / "t.jsonl",
        [
            {"type": "text", "content": "a", "timestamp": 1764410400},
            {"type": "text", "content": "b", "timestamp": 1764410401500},
        ],
    )
    trace = one(path)
    assert trace.steps[1].started_at is not None and trace.steps[0].started_at is not None
    assert (trace.steps[1].started_at - trace.steps[0].started_at).total_seconds() == 1.5
