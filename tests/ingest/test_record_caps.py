"""No importer holds more than ``MAX_RECORD_BYTES`` of one record: a longer line or document is
a format error naming the file (and the line), not unbounded memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentlens.errors import FormatError
from agentlens.ingest import _checks, get_reader
from agentlens.ingest.trace_file import read as read_trace

LIMIT = 4096


@pytest.fixture(autouse=True)
def _small_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_checks, "MAX_RECORD_BYTES", LIMIT)


BIG = "x" * (LIMIT * 2)


def _jsonl(tmp_path: Path, name: str, records: list[object]) -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_trace_jsonl_line_too_large_names_the_line(tmp_path: Path) -> None:
    small = {"id": "a", "input": "q", "output": "x"}
    path = _jsonl(tmp_path, "runs.jsonl", [small, small, {"id": "b", "input": "q", "output": BIG}])
    with pytest.raises(FormatError) as caught:
        list(read_trace(path))
    assert (caught.value.source, caught.value.line) == (str(path), 3)
    assert "larger than" in caught.value.reason
    fine = _jsonl(tmp_path, "ok.jsonl", [small] * 100)  # the cap is per record, not per file
    assert len(list(read_trace(fine))) == 100


def test_trace_array_record_too_large_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.json"
    path.write_text(json.dumps([{"id": "b", "input": "q", "output": BIG * 200}]))
    with pytest.raises(FormatError, match="larger than"):
        list(read_trace(path))


@pytest.mark.parametrize(
    ("fmt", "name", "content"),
    [
        ("openai", "c.jsonl", json.dumps({"messages": [{"role": "user", "content": BIG}]}) + "\n"),
        ("transcript", "t.jsonl", json.dumps({"type": "text", "content": BIG}) + "\n"),
        ("swe-agent", "r.traj", json.dumps({"trajectory": [{"action": "ls", "observation": BIG}]})),
        ("openhands", "o.json", json.dumps([{"action": "message", "args": {"content": BIG}}])),
        ("who-and-when", "w.json", json.dumps({"history": [{"role": "a", "content": BIG}]})),
        ("otlp-json", "s.json", json.dumps({"resourceSpans": [], "pad": BIG})),
    ],
)
def test_converters_refuse_a_record_over_the_cap(
    tmp_path: Path, fmt: str, name: str, content: str
) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(FormatError, match="larger than") as caught:
        list(get_reader(fmt)(path))
    assert caught.value.source is not None and name in caught.value.source
