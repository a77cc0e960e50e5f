"""``agentlens import`` without ``--format``: the format told per file, and the summary."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from agentlens.store import open_store

Invoke = Callable[..., Result]
GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _runs(db_url: str) -> list[tuple[str, int]]:
    store = open_store(db_url)
    try:
        return [
            (str(t.metadata.get("source_format", "trace")), len(t.steps))
            for t in store.query_traces()
        ]
    finally:
        store.close()


@pytest.mark.data
def test_tau_bench_without_format_is_read_as_openai(
    cli: Invoke, db_url: str, data_dir: Callable[[str], Path]
) -> None:
    path = data_dir("tau_bench") / "gpt-4o-airline.dev.json"
    result = cli("import", str(path))
    assert result.exit_code == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert first.startswith("imported 100 runs (")
    assert first.endswith(f"from {path} [openai, detected]")
    runs = _runs(db_url)
    assert len(runs) == 100
    assert all(fmt == "openai" and steps > 0 for fmt, steps in runs)


def test_summary_counts_runs_and_steps_per_format(cli: Invoke, db_url: str) -> None:
    files = [
        GOLDEN / "trace" / "handwritten.json",
        GOLDEN / "transcript" / "blog_writer.jsonl",
        GOLDEN / "who_and_when" / "algorithm_42.json",
        GOLDEN / "who_and_when" / "handcrafted_museum.json",
    ]
    result = cli("import", *map(str, files))
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].endswith("handwritten.json [trace, detected]")
    assert lines[1].endswith("blog_writer.jsonl [transcript, detected]")
    assert lines[4].startswith("summary: 5 runs (")
    assert lines[4].endswith("from 4 files")
    formats = [line.split(":")[0].strip() for line in lines[5:]]
    assert formats == ["trace", "transcript", "who-and-when"]
    assert lines[-1].endswith("from 2 files")
    steps = {fmt: 0 for fmt in formats}
    for fmt, n in _runs(db_url):
        steps[fmt.replace("_", "-") if fmt != "trace" else fmt] = (
            steps.get(fmt.replace("_", "-"), 0) + n
        )
    for line in lines[5:]:
        fmt = line.split(":")[0].strip()
        assert f"({steps[fmt]:,} step" in line


def test_a_file_of_no_known_format_is_refused_in_one_line(
    cli: Invoke, db_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_text(json.dumps({"question": "q", "answer": "a"}) + "\n", encoding="utf-8")
    result = cli("import", str(path))
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: {path}: cannot tell the format: its first line is an object with keys answer, "
        "question; tried trace, openai, transcript, swe-agent, openhands, who-and-when, "
        "claude-code, otlp-json; give --format NAME; nothing was imported from this file\n"
    )
    assert _runs(db_url) == []


def test_skip_invalid_names_the_file_it_could_not_tell_in_the_summary(
    cli: Invoke, db_url: str, tmp_path: Path
) -> None:
    bad = tmp_path / "qa.json"
    bad.write_text(json.dumps([{"question": "q"}]), encoding="utf-8")
    good = GOLDEN / "transcript" / "blog_writer.jsonl"
    result = cli("import", "--skip-invalid", str(bad), str(good))
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].endswith("blog_writer.jsonl [transcript, detected]")
    assert (
        lines[1] == "summary: 1 run (" + lines[0].split("(", 1)[1].split(")")[0] + ") from 2 files"
    )
    assert lines[-1].startswith(f"  skipped all of {bad}: cannot tell the format: its first item")
    assert len(_runs(db_url)) == 1


def test_openai_messages_given_as_trace_are_an_error_not_empty_runs(
    cli: Invoke, db_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "conv.jsonl"
    path.write_text(
        json.dumps({"id": "c1", "messages": [{"role": "user", "content": "hi"}]}) + "\n",
        encoding="utf-8",
    )
    result = cli("import", "--format", "trace", str(path))
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f"error: {path}:1, field 'messages': 'messages' is not a field of the trace format but "
        "of openai"
    )
    assert _runs(db_url) == []
    detected = cli("import", str(path))
    assert detected.exit_code == 0
    assert detected.stdout.splitlines()[0].endswith("[openai, detected]")


def test_an_otlp_json_file_is_detected_and_converted(cli: Invoke, db_url: str) -> None:
    path = GOLDEN / "otlp" / "genai_and_openinference.json"
    result = cli("import", str(path))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0].endswith("[otlp-json, detected]")
    runs = _runs(db_url)
    assert runs and all(steps > 0 for _, steps in runs)


def test_a_claude_code_session_is_detected_and_can_be_split_per_prompt(
    cli: Invoke, db_url: str, tmp_path: Path
) -> None:
    path = GOLDEN / "claude_code" / "refund_session.jsonl"
    result = cli("import", str(path))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == (
        f"imported 1 run (14 steps) from {path} [claude-code, detected]"
    )
    other = f"sqlite:///{tmp_path / 'split.db'}"
    split = cli("import", "--per-prompt", str(path), db=other)
    assert split.exit_code == 0, split.stderr
    assert split.stdout.splitlines()[0].startswith("imported 2 runs (14 steps)")
    refused = cli("import", "--per-prompt", str(GOLDEN / "trace" / "handwritten.json"), db=other)
    assert refused.exit_code == 2
    assert "--per-prompt applies to claude-code sessions; this file is trace" in refused.stderr
