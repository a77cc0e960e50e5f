"""Values the importers refuse rather than store changed: numbers that overflow a float, NaN in
the other formats, integers too long to read, and (in the trace format) what the format does
not allow: empty ids, unknown statuses, numeric times, a file that is JSON but not runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentlens.errors import FormatError
from agentlens.ingest import detect, get_reader
from agentlens.ingest._checks import parse_nested_json
from agentlens.ingest.trace_file import read, scan
from agentlens.model import Trace


def _error(path: Path, fmt: str = "trace") -> FormatError:
    with pytest.raises(FormatError) as info:
        list(get_reader(fmt)(path))
    return info.value


def _one_line(exc: FormatError) -> str:
    text = str(exc)
    assert "\n" not in text and "Traceback" not in text
    return text


# -- numbers that overflow a float ----------------------------------------------------------

OVERFLOW = "a number too large for a 64-bit float"


@pytest.mark.parametrize(
    "literal", ["1e999", "-1e999", "1E+400", "1e0400", "1" + "0" * 400 + ".0", "-2.5e308"]
)
def test_an_overflowing_number_in_a_jsonl_run_is_refused_naming_the_field(
    tmp_path: Path, literal: str
) -> None:
    path = tmp_path / "float.jsonl"
    path.write_text(
        '{"id": "ok", "output": "x", "steps": [{"kind": "tool", "output": 1.5e300}]}\n'
        f'{{"id": "flt", "output": "x", "steps": [{{"kind": "tool", "output": {literal}}}]}}\n',
        encoding="utf-8",
    )
    exc = _error(path)
    assert _one_line(exc).startswith(f"{path}:2, field 'steps[0].output': {OVERFLOW}")
    assert (exc.line, exc.field) == (2, "steps[0].output")


def test_an_overflowing_number_in_a_json_array_is_refused_naming_line_and_field(
    tmp_path: Path,
) -> None:
    path = tmp_path / "float.json"
    path.write_text(
        '[\n {"id": "a", "output": "x"},\n {"id": "b", "output": "x",\n'
        '  "metadata": {"cost": [1, -1e999]}}\n]\n',
        encoding="utf-8",
    )
    exc = _error(path)
    assert (exc.line, exc.field) == (3, "metadata.cost[1]")
    assert OVERFLOW in exc.reason


def test_an_overflowing_number_on_a_line_the_standard_decoder_reads_is_refused(
    tmp_path: Path,
) -> None:
    # A lone surrogate escape elsewhere sends the line to the standard decoder, not the fast one.
    path = tmp_path / "mixed.jsonl"
    path.write_text('{"id": "a", "output": "\\ud83d\\ude00", "input": 1e999}\n', encoding="utf-8")
    exc = _error(path)
    assert (exc.line, exc.field) == (1, "input")


def test_skip_invalid_keeps_the_other_runs_of_a_file_with_an_overflowing_number(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_text(
        '{"id": "a", "output": "x"}\n{"id": "b", "output": 1e999}\n{"id": "c", "output": "y"}\n',
        encoding="utf-8",
    )
    records = list(scan(path))
    assert [r.run_id for r in records] == ["a", "b", "c"]
    assert [r.error is None for r in records] == [True, False, True]


@pytest.mark.parametrize(
    "text",
    [
        '{"id": "a", "output": "E999 and e+1000 and 1e999 in a string"}',
        '{"id": "a", "output": "' + "7" * 500 + '"}',
        '{"id": "a", "output": 1e308, "input": 1e-999}',
        '{"id": "a", "output": ' + "1" * 400 + "}",  # an integer: kept exactly
    ],
)
def test_what_only_looks_like_an_overflowing_number_is_read_as_before(
    tmp_path: Path, text: str
) -> None:
    path = tmp_path / "fine.jsonl"
    path.write_text(text + "\n", encoding="utf-8")
    (run,) = read(path)
    assert run == Trace.model_validate(json.loads(text))


@pytest.mark.parametrize(
    ("fmt", "name", "text"),
    [
        (
            "openai",
            "chats.jsonl",
            '{"messages": [{"role": "user", "content": "hi"}], "metadata": {"k": 1e999}}\n',
        ),
        (
            "openai",
            "chats.jsonl",
            '{"messages": [{"role": "user", "content": "hi"}], "metadata": {"k": NaN}}\n',
        ),
        (
            "transcript",
            "t.jsonl",
            '{"type": "tool_result", "content": "x", "metadata": {"score": -Infinity}}\n',
        ),
        (
            "otlp-json",
            "spans.json",
            '{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": '
            '"0123456789abcdef0123456789abcdef", "spanId": "0123456789abcdef", "name": "x", '
            '"attributes": [{"key": "a", "value": {"doubleValue": 1e999}}]}]}]}]}\n',
        ),
    ],
)
def test_the_other_formats_refuse_nan_infinity_and_overflowing_numbers(
    tmp_path: Path, fmt: str, name: str, text: str
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    exc = _error(path, fmt)
    assert exc.line == 1 and exc.field is not None
    assert "Infinity" in exc.reason
    _one_line(exc)


def test_a_document_names_the_line_of_the_overflowing_number(tmp_path: Path) -> None:
    path = tmp_path / "run.traj"
    path.write_text(
        '{\n "trajectory": [\n  {"action": "ls", "observation": "a"},\n'
        '  {"action": "cat", "observation": "b", "cost": 1e999}\n ]\n}\n',
        encoding="utf-8",
    )
    exc = _error(path, "swe-agent")
    assert (exc.line, exc.field) == (4, "trajectory[1].cost")


def test_nested_json_text_with_nan_or_overflow_is_not_parsed() -> None:
    for text in ('{"a": NaN}', '{"a": [1e999]}', '{"a": -Infinity}'):
        with pytest.raises(ValueError):
            parse_nested_json(text)
    assert parse_nested_json('{"a": 1e300, "b": "NaN"}') == {"a": 1e300, "b": "NaN"}


def test_may_overflow_misses_no_overflowing_literal() -> None:
    from agentlens.ingest._checks import may_overflow

    for literal in ("1e309", "1E309", "1e+309", "1e0309", "9" * 309 + ".0", "9" * 210 + "e99"):
        assert float(literal) == float("inf")
        assert may_overflow(f'{{"a": {literal}}}'.encode())


# -- integers too long, JSON that is not runs -----------------------------------------------

HUGE_INT = "1" + "0" * 5000


@pytest.mark.parametrize("name", ["big.jsonl", "big.json"])
def test_an_integer_too_long_is_a_one_line_error_without_a_python_hint(
    tmp_path: Path, name: str
) -> None:
    path = tmp_path / name
    record = '{"id": "a", "output": "x", "steps": [{"kind": "tool", "output": ' + HUGE_INT + "}]}"
    path.write_text((f"[\n{record}\n]" if name.endswith(".json") else record) + "\n", "utf-8")
    exc = _error(path)
    text = _one_line(exc)
    assert "sys.set_int_max_str_digits" not in text
    assert text.endswith("an integer of 5,001 digits is too long to read: the most is 4,300 digits")
    assert exc.line == (2 if name.endswith(".json") else 1)


def test_an_integer_too_long_in_another_format_is_worded_alike(tmp_path: Path) -> None:
    path = tmp_path / "chats.jsonl"
    path.write_text(
        '{"messages": [{"role": "user", "content": "hi"}], "n": ' + HUGE_INT + "}\n", "utf-8"
    )
    text = _one_line(_error(path, "openai"))
    assert "sys.set_int_max_str_digits" not in text and "too long to read" in text


@pytest.mark.parametrize(
    ("content", "kind"),
    [("42", "a JSON number"), ('"str"', "a JSON string"), ("true", "a JSON boolean"),
     ("null", "JSON null"), ("-1.5\n", "a JSON number")],
)  # fmt: skip
def test_a_file_of_json_that_is_not_runs_says_what_it_is(
    tmp_path: Path, content: str, kind: str
) -> None:
    path = tmp_path / "answer.json"
    path.write_text(content + "\n", encoding="utf-8")
    with pytest.raises(FormatError) as info:
        detect(path)
    assert f"it is {kind}, not a run or a list of runs" in info.value.reason
    assert "not JSON" not in info.value.reason
    exc = _error(path)
    assert exc.reason == (
        f"not a trace file: it is {kind}, not a run (a JSON object) or a list of runs "
        "(a JSON array)"
    )


def test_a_file_that_is_not_json_still_says_so(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello\n", encoding="utf-8")
    with pytest.raises(FormatError, match=r"not JSON \(starts with 'h'\)"):
        detect(path)


# -- what the trace format allows that the model would take ----------------------------------


@pytest.mark.parametrize(
    ("record", "field", "reason"),
    [
        ('{"id": "", "output": "x"}', "id", "a run id must not be empty or blank (got '')"),
        ('{"id": " \\t", "output": "x"}', "id", "a run id must not be empty or blank"),
        (
            '{"id": "r", "output": "x", "steps": [{"kind": "tool"}, {"id": "", "kind": "tool"}]}',
            "steps[1].id",
            "a step id must not be empty or blank (got '')",
        ),
        (
            '{"id": "r", "output": "x", "status": "weird"}',
            "status",
            "status must be 'ok', 'error' or 'running' (got 'weird')",
        ),
        (
            '{"id": "r", "output": "x", "status": "OK"}',
            "status",
            "status must be 'ok', 'error' or 'running' (got 'OK')",
        ),
        (
            '{"id": "r", "output": "x", "started_at": 1700000000}',
            "started_at",
            "expected an ISO 8601 time such as '2026-11-29T10:00:00Z', got the number "
            "1700000000; the trace format does not read Unix timestamps",
        ),
        (
            '{"id": "r", "output": "x", "ended_at": 1700000000123.5}',
            "ended_at",
            "got the number 1700000000123.5",
        ),
        (
            '{"id": "r", "output": "x", "steps": [{"kind": "tool", "started_at": "1700000000"}]}',
            "steps[0].started_at",
            "got the string '1700000000'",
        ),
    ],
)
@pytest.mark.parametrize("layout", ["jsonl", "json"])
def test_the_importer_refuses_what_the_trace_format_does_not_allow(
    tmp_path: Path, record: str, field: str, reason: str, layout: str
) -> None:
    path = tmp_path / f"runs.{layout}"
    good = '{"id": "fine", "output": "x"}'
    path.write_text(
        f"{good}\n{record}\n" if layout == "jsonl" else f"[{good},\n{record}]\n", "utf-8"
    )
    exc = _error(path)
    assert (exc.line, exc.field) == (2, field)
    assert reason in exc.reason
    _one_line(exc)
    # --skip-invalid leaves out that run alone
    assert [r.error is None for r in scan(path)] == [True, False]


def test_what_the_trace_format_allows_is_read_as_before(tmp_path: Path) -> None:
    records = [
        {"id": "a", "status": "running", "output": "x", "started_at": "2026-11-29T10:00:00Z"},
        {"id": "b", "status": "error", "output": "x", "started_at": "2026-11-29T10:00:00+01:00"},
        {"output": "x", "ended_at": None, "steps": [{"kind": "tool", "ended_at": "2026-11-29"}]},
        {"id": " padded ", "output": "x", "steps": [{"id": "s 1", "kind": "user"}]},
    ]
    path = tmp_path / "fine.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    runs = list(read(path))
    assert [r.status for r in runs] == ["running", "error", "ok", "ok"]
    assert runs[0] == Trace.model_validate(records[0])
    assert runs[3].id == " padded " and runs[3].steps[0].id == "s 1"
    assert runs[2].id  # generated


@pytest.mark.parametrize(
    ("content", "kind"), [("[42, 43]", "a JSON number"), ('["a"]', "a JSON string")]
)
def test_an_array_of_json_values_that_are_not_records_says_what_they_are(
    tmp_path: Path, content: str, kind: str
) -> None:
    path = tmp_path / "values.json"
    path.write_text(content + "\n", encoding="utf-8")
    with pytest.raises(FormatError, match=f"its first item is {kind}; tried"):
        detect(path)
