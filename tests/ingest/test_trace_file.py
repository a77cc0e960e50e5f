"""The trace-format reader and writer: golden files, streaming, and every kind of bad input."""

from __future__ import annotations

import io
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlens.errors import FormatError
from agentlens.ingest import get_reader, trace_file
from agentlens.ingest.trace_file import read, scan, write, write_file
from agentlens.model import SCHEMA_VERSION, StepKind, Trace

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "trace"
HANDWRITTEN = GOLDEN / "handwritten.json"
EXPECTED = GOLDEN / "handwritten.expected.jsonl"
FROZEN = GOLDEN / "v1-frozen.jsonl"


def dump(traces: list[Trace]) -> str:
    buf = io.StringIO()
    write(traces, buf)
    return buf.getvalue()


def error_of(path: Path) -> FormatError:
    with pytest.raises(FormatError) as info:
        list(read(path))
    return info.value


# -- golden files ---------------------------------------------------------------------------


def test_handwritten_file_exports_as_the_expected_golden_bytes() -> None:
    assert dump(list(read(HANDWRITTEN))) == EXPECTED.read_text(encoding="utf-8")


def test_export_form_is_a_fixed_point() -> None:
    text = EXPECTED.read_text(encoding="utf-8")
    assert dump(list(read(EXPECTED))) == text


def test_handwritten_file_keeps_unknown_fields_nesting_and_json_values() -> None:
    first, second = read(HANDWRITTEN)
    assert first.model_extra == {
        "x_vendor": {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "sampled": True},
        "tags": ["golden", "hand-written"],
    }
    assert first.step("s1").model_extra == {"x_span_kind": "INTERNAL"}
    assert first.step("s7").model_extra == {"x_provider": {"region": "eu-west-1"}}
    assert second.step("b").model_extra == {"x_custom": [1, 2.5, "three", None]}
    assert [s.parent_id for s in first.steps] == [
        None,
        None,
        "s1",
        "s1",
        "s1",
        "s4",
        None,
        None,
        None,
    ]
    assert first.step("s2").output["balance"] == -1834.2
    assert first.step("s3").error == {
        "type": "TimeoutError",
        "message": "billing API timed out after 10 s",
    }
    assert first.step("s5").attributes["truncated"] is True
    assert first.links == {"ticket": "T-1042", "conversation": "99812"}
    assert second.output["note"] == "Grüße — ✓"
    assert second.project == "default"


def test_times_are_converted_to_utc_and_naive_times_are_utc() -> None:
    first, second = read(HANDWRITTEN)
    assert first.started_at == datetime(2026, 11, 29, 10, 0, 0, tzinfo=UTC)
    assert first.ended_at == datetime(2026, 11, 29, 10, 0, 41, 250000, tzinfo=UTC)
    assert first.step("s1").started_at == datetime(2026, 11, 29, 10, 0, 1, tzinfo=UTC)
    assert first.step("s7").started_at == datetime(2026, 11, 29, 10, 0, 31, tzinfo=UTC)
    assert second.started_at == datetime(2026, 11, 30, 9, 59, 59, 999999, tzinfo=UTC)
    assert first.step("s1").started_at.tzinfo is UTC


def test_json_array_and_jsonl_of_the_same_runs_read_the_same(tmp_path: Path) -> None:
    traces = list(read(EXPECTED))
    as_array = tmp_path / "runs.json"
    as_array.write_text(json.dumps([t.to_dict() for t in traces], indent=2), encoding="utf-8")
    one_line_array = tmp_path / "one-line.json"
    one_line_array.write_text(json.dumps([t.to_dict() for t in traces]), encoding="utf-8")
    assert list(read(as_array)) == traces
    assert list(read(one_line_array)) == traces


def test_frozen_v1_file_still_reads() -> None:
    blog, running = read(FROZEN)
    assert blog.schema_version == 1
    assert blog.agent == "blog-writer"
    assert blog.links == {"blog_post": "123"}
    assert [s.kind for s in blog.steps] == [StepKind.RETRIEVAL, StepKind.LLM]
    assert blog.steps[0].output == [{"id": "DOC-1a2b3c4d", "text": "Our voice is warm and plain."}]
    assert blog.steps[1].attributes == {
        "model": "claude-sonnet",
        "input_tokens": 412,
        "output_tokens": 57,
    }
    assert running.status == "running"
    assert running.steps == []


@pytest.mark.skipif(SCHEMA_VERSION != 1, reason="the frozen file is migrated, not rewritten as-is")
def test_frozen_v1_file_is_what_this_version_writes() -> None:
    assert dump(list(read(FROZEN))) == FROZEN.read_text(encoding="utf-8")


def test_registered_as_the_trace_format() -> None:
    assert get_reader("trace") is read


def test_missing_ids_are_generated_and_missing_schema_version_is_1(tmp_path: Path) -> None:
    path = tmp_path / "bare.jsonl"
    path.write_text('{"steps": [{"kind": "user", "output": "hi"}]}\n', encoding="utf-8")
    (trace,) = read(path)
    assert trace.schema_version == 1
    assert len(trace.id) == 26
    assert trace.steps[0].id


# -- streaming ------------------------------------------------------------------------------


@given(chunk=st.integers(min_value=1, max_value=64))
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_array_reads_the_same_whatever_the_chunk_size(
    chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = list(read(HANDWRITTEN))
    monkeypatch.setattr(trace_file, "_CHUNK", chunk)
    assert list(read(HANDWRITTEN)) == expected


def test_numbers_split_across_chunks_are_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "numbers.json"
    path.write_text('[{"id": "n", "output": 123456789012345678}, 7]', encoding="utf-8")
    monkeypatch.setattr(trace_file, "_CHUNK", 3)
    records = list(scan(path))
    assert records[0].trace is not None and records[0].trace.output == 123456789012345678
    assert records[1].error is not None
    assert records[1].error.reason == "expected a JSON object (one run), found a number"


def test_a_large_array_is_not_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.json"
    run = {"id": "r", "steps": [{"kind": "tool", "output": "x" * 1000}]}
    path.write_text(json.dumps([run] * 4000), encoding="utf-8")
    monkeypatch.setattr(trace_file, "_CHUNK", 1 << 14)
    records = scan(path)
    first = next(records)
    assert first.trace is not None
    assert first.offset < path.stat().st_size // 40
    records.close()


def test_a_large_jsonl_file_is_not_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    line = json.dumps({"id": "r", "output": "x" * 1000}) + "\n"
    path.write_text(line * 5000, encoding="utf-8")
    records = scan(path)
    first = next(records)
    assert first.offset < path.stat().st_size // 50
    records.close()


def test_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    data = EXPECTED.read_bytes()
    monkeypatch.setattr(sys, "stdin", SimpleNamespace(buffer=io.BytesIO(data)))
    assert dump(list(read("-"))) == data.decode("utf-8")


def test_stdin_errors_name_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", SimpleNamespace(buffer=io.BytesIO(b'{"id": 1}\n')))
    with pytest.raises(FormatError) as info:
        list(read("-"))
    assert str(info.value).startswith("<stdin>:1, field 'id': ")


def test_byte_order_mark_and_crlf_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "windows.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"id": "a", "input": "q"}\r\n{"id": "b", "input": "q"}\r\n')
    assert [t.id for t in read(path)] == ["a", "b"]


# -- bad input: file, line, field and reason ------------------------------------------------

BAD_CASES = [
    pytest.param(
        "bad.jsonl",
        '{"id": "a", "input": "q"}\n{"id": "b",, "steps": []}\n',
        "bad.jsonl:2: malformed JSON: Expecting property name enclosed in double quotes at column 12",
        id="malformed-jsonl",
    ),
    pytest.param(
        "bad.jsonl",
        '{"id": "a", "input": "q"}\n\n{"id": "b", "steps": [{"kind": "tool"}, {"kind": "tool"}, {"kind": "tol"}]}\n',
        "bad.jsonl:3, field 'steps[2].kind': Input should be 'user', 'system', 'llm', 'tool', "
        "'retrieval', 'text', 'thinking' or 'agent' (got 'tol')",
        id="wrong-enum",
    ),
    pytest.param(
        "bad.jsonl",
        '{"id": "a", "steps": [{"id": "s1", "name": "lookup"}]}\n',
        "bad.jsonl:1, field 'steps[0].kind': required field is missing",
        id="missing-required",
    ),
    pytest.param(
        "bad.jsonl",
        '{"id": "a", "started_at": "yesterday"}\n',
        "bad.jsonl:1, field 'started_at': Input should be a valid datetime or date, "
        "input is too short (got 'yesterday')",
        id="bad-datetime",
    ),
    pytest.param(
        "bad.jsonl",
        '{"id": "a", "metadata": ["not", "a", "map"]}\n',
        'bad.jsonl:1, field \'metadata\': Input should be a valid dictionary (got ["not", "a", "map"])',
        id="wrong-type",
    ),
    pytest.param(
        "bad.jsonl",
        '{"id": "a", "input": "q"}\n{"id": "b", "schema_version": 7}\n',
        "bad.jsonl:2, field 'schema_version': unknown schema_version 7; this agentlens reads 1..1",
        id="unknown-schema-version",
    ),
    pytest.param(
        "bad.jsonl",
        '{"id": "a", "input": "q"}\n{"id": "b", "steps": [{"kind": "us',
        "bad.jsonl:2: the file is truncated: the last line ends in the middle of a run",
        id="truncated-jsonl",
    ),
    pytest.param(
        "bad.jsonl",
        '{"id": "a", "steps": [\n{"kind": "user"}]}\n',
        "bad.jsonl:1: malformed JSON: the line ends in the middle of a run (Expecting value); "
        "JSON Lines holds one complete run per line",
        id="pretty-printed-jsonl",
    ),
    pytest.param(
        "bad.jsonl",
        '{"id": "a", "input": "q"} {"id": "b", "input": "q"}\n',
        "bad.jsonl:1: malformed JSON: extra data after the run at column 27",
        id="two-runs-one-line",
    ),
    pytest.param(
        "bad.jsonl",
        '{"id": "a", "output": NaN}\n',
        "bad.jsonl:1: malformed JSON: NaN is not valid JSON",
        id="nan",
    ),
    pytest.param(
        "bad.jsonl",
        '{"id": "a", "input": "q"}\n["b"]\n',
        "bad.jsonl:2: expected a JSON object (one run), found an array",
        id="jsonl-not-object",
    ),
    pytest.param(
        "bad.json",
        '[\n  {"id": "a", "input": "q"},\n  {"id": "b",\n   "steps": [{"kind": "tool"}, {"kind": 3}]}\n]\n',
        "bad.json:3, field 'steps[1].kind': Input should be 'user', 'system', 'llm', 'tool', "
        "'retrieval', 'text', 'thinking' or 'agent' (got 3)",
        id="array-field",
    ),
    pytest.param(
        "bad.json",
        '[\n  {"id": "a", "input": "q"},\n  {"id": "b", "steps": [}\n]\n',
        "bad.json:3: malformed JSON: Expecting value at column 23",
        id="array-malformed",
    ),
    pytest.param(
        "bad.json",
        '[\n  {"id": "a", "input": "q"},\n  {"id": "b", "steps": [',
        "bad.json:3: the file is truncated: it ends in the middle of a run",
        id="array-truncated-mid-run",
    ),
    pytest.param(
        "bad.json",
        '[\n  {"id": "a", "input": "q"},\n  {"id": "b", "input": "q"}\n',
        "bad.json:4: the file is truncated: the JSON array is never closed",
        id="array-never-closed",
    ),
    pytest.param(
        "bad.json",
        '[{"id": "a", "input": "q"},]',
        "bad.json:1: malformed JSON: a comma before ']'",
        id="array-trailing-comma",
    ),
    pytest.param(
        "bad.json",
        '[{"id": "a", "input": "q"}\n {"id": "b", "input": "q"}]',
        "bad.json:2: malformed JSON: expected ',' or ']' after a run, found '{' at column 2",
        id="array-missing-comma",
    ),
    pytest.param(
        "bad.json",
        '[{"id": "a", "input": "q"}]\n[{"id": "b", "input": "q"}]\n',
        "bad.json:2: malformed JSON: extra data after the closing ']'",
        id="array-extra-data",
    ),
    pytest.param(
        "bad.json",
        "[1, 2]",
        "bad.json:1: expected a JSON object (one run), found a number",
        id="array-of-numbers",
    ),
    pytest.param(
        "bad.jsonl",
        '{"id": "a", "steps": [{"id": "s1", "kind": "tool"}, {"id": "s1", "kind": "user"}]}\n',
        "bad.jsonl:1, field 'steps[1].id': step id 's1' is used twice (also by steps[0]); "
        "step ids must be unique within a run",
        id="duplicate-step-id",
    ),
    pytest.param("empty.jsonl", "", "empty.jsonl: empty file: no runs", id="empty"),
    pytest.param("blank.jsonl", " \n\n\t\n", "blank.jsonl: empty file: no runs", id="blank"),
    pytest.param(
        "notes.txt",
        "\n\nhello\n",
        "notes.txt:3: not a trace file: expected a JSON array ('[') or JSON Lines ('{'), found 'h'",
        id="not-json",
    ),
]


@pytest.mark.parametrize(("name", "content", "message"), BAD_CASES)
def test_bad_input_names_file_line_field_and_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, content: str, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    Path(name).write_text(content, encoding="utf-8")
    err = error_of(Path(name))
    assert str(err) == message
    assert "\n" not in str(err)


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"id": "a", "input": "q"}\n{"id": "caf\xe9"}\n')
    err = error_of(path)
    assert (err.line, err.reason) == (2, "not UTF-8 text (byte 12 of the line)")


def test_missing_file_and_directory(tmp_path: Path) -> None:
    assert error_of(tmp_path / "nope.jsonl").reason == "cannot read: no such file"
    assert error_of(tmp_path).reason == "cannot read: it is a directory"


def test_error_attributes(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('\n\n{"id": "a", "steps": [{"kind": "tool", "attributes": 5}]}\n')
    err = error_of(path)
    assert (err.source, err.line, err.field) == (str(path), 3, "steps[0].attributes")
    assert err.reason == "Input should be a valid dictionary (got 5)"


def test_several_problems_in_one_run_are_counted(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"id": 5, "steps": [{"kind": "nope"}], "links": []}\n')
    err = error_of(path)
    assert err.field == "id"
    assert err.reason.endswith("(and 2 more problems in this run)")


# -- scan: going on past bad records --------------------------------------------------------


def test_scan_reports_each_bad_record_and_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        '{"id": "a", "input": "q"}\n'
        '{"id": "b", "steps": [{"kind": "bogus"}]}\n'
        "not json\n"
        '{"id": "d", "input": "q"}\n'
        '{"id": "e", "ste',
        encoding="utf-8",
    )
    records = list(scan(path))
    assert [(r.line, r.run_id, r.trace is not None) for r in records] == [
        (1, "a", True),
        (2, "b", False),
        (3, None, False),
        (4, "d", True),
        (5, None, False),
    ]
    assert records[1].error is not None and records[1].error.field == "steps[0].kind"
    assert records[4].error is not None and "truncated" in records[4].error.reason
    assert records[-1].offset == path.stat().st_size


def test_scan_of_an_array_goes_on_past_invalid_runs(tmp_path: Path) -> None:
    path = tmp_path / "mixed.json"
    path.write_text(
        '[{"id": "a", "input": "q"}, {"id": "b", "status": 3}, {"id": "c", "input": "q"}]',
        encoding="utf-8",
    )
    assert [(r.run_id, r.error is None) for r in scan(path)] == [
        ("a", True),
        ("b", False),
        ("c", True),
    ]


# -- writing --------------------------------------------------------------------------------


def test_write_file_is_atomic(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    target.write_text("previous export\n", encoding="utf-8")
    traces = list(read(EXPECTED))

    def broken() -> object:
        yield traces[0]
        raise RuntimeError("store went away")

    with pytest.raises(RuntimeError):
        write_file(broken(), target)  # type: ignore[arg-type]
    assert target.read_text(encoding="utf-8") == "previous export\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]
    assert write_file(traces, target) == 2
    assert target.read_text(encoding="utf-8") == EXPECTED.read_text(encoding="utf-8")


def test_write_file_into_a_missing_folder_is_a_format_error(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="cannot write"):
        write_file([], tmp_path / "no" / "such" / "out.jsonl")


# -- fuzzing: never anything but FormatError ------------------------------------------------


def _drain(path: Path) -> None:
    try:
        for record in scan(path):
            assert (record.trace is None) != (record.error is None)
    except FormatError as exc:
        assert "\n" not in str(exc)


VALID = EXPECTED.read_bytes()
VALID_ARRAY = HANDWRITTEN.read_bytes()


@given(data=st.binary(max_size=400))
@settings(max_examples=300, deadline=None)
def test_fuzz_random_bytes(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "f"
    path.write_bytes(data)
    _drain(path)


@given(
    text=st.text(
        alphabet=st.sampled_from(list('[]{}",:\n 0123456789.-eEtrufalsnNI\\"abkind')), max_size=300
    )
)
@settings(max_examples=300, deadline=None)
def test_fuzz_json_like_text(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    for prefix in ("[", "{", ""):
        path = tmp_path_factory.mktemp("fuzz") / "f"
        path.write_text(prefix + text, encoding="utf-8")
        _drain(path)


@given(
    source=st.sampled_from([VALID, VALID_ARRAY]),
    cut=st.integers(min_value=0, max_value=len(VALID_ARRAY)),
    junk=st.binary(max_size=8),
    chunk=st.integers(min_value=1, max_value=4096),
)
@settings(max_examples=300, deadline=None)
def test_fuzz_cut_and_corrupted_valid_files(
    tmp_path_factory: pytest.TempPathFactory, source: bytes, cut: int, junk: bytes, chunk: int
) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "f"
    cut = min(cut, len(source))
    path.write_bytes(source[:cut] + junk + source[cut + len(junk) :])
    original = trace_file._CHUNK
    trace_file._CHUNK = chunk
    try:
        _drain(path)
    finally:
        trace_file._CHUNK = original


@given(cut=st.integers(min_value=1, max_value=len(VALID) - 2))
@settings(max_examples=200, deadline=None)
def test_a_cut_jsonl_file_is_reported_as_truncated_or_reads_whole_runs(
    tmp_path_factory: pytest.TempPathFactory, cut: int
) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "f.jsonl"
    path.write_bytes(VALID[:cut])
    try:
        runs = list(read(path))
    except FormatError as exc:
        assert exc.reason == "the file is truncated: the last line ends in the middle of a run"
        assert exc.line == VALID[:cut].count(b"\n") + 1
    else:
        # Only a cut at the end of a line leaves whole runs, and then exactly those.
        assert VALID[cut - 1 : cut] in (b"\n", b"}")
        assert runs == list(read(EXPECTED))[: len(runs)]
        assert len(runs) == len(VALID[:cut].rstrip(b"\n").split(b"\n"))
