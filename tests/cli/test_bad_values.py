"""Bad values on the command line and in imported files: one line naming the field, never an
internal error; ``import --skip-invalid`` leaves out the bad run alone."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from agentlens.store import open_store

Invoke = Callable[..., Result]


def _runs(db_url: str) -> list[str]:
    store = open_store(db_url)
    try:
        return sorted(r.id for r in store.list_runs())
    finally:
        store.close()


BAD_LINES = [
    ({"id": "sur", "input": "q", "output": "a\ud800"}, "output", "surrogate"),
    ({"id": "late", "input": "q", "started_at": "9999-12-31T23:00:00-05:00"}, "started_at", "UTC"),
    ({"id": "early", "input": "q", "ended_at": "0001-01-01T00:00:00+01:00"}, "ended_at", "UTC"),
    ({"id": "deep", "input": "q", "output": json.loads("[" * 300 + "]" * 300)}, "output", "deep"),
]


@pytest.mark.parametrize("as_array", [False, True], ids=["jsonl", "array"])
def test_one_bad_run_costs_only_itself_and_is_named_by_line(
    cli: Invoke, db_url: str, tmp_path: Path, as_array: bool
) -> None:
    records = [{"id": "ok1", "input": "q", "output": "a"}]
    records += [record for record, _, _ in BAD_LINES]
    records.append({"id": "ok2", "input": "q", "output": "b"})
    path = tmp_path / ("runs.json" if as_array else "runs.jsonl")
    if as_array:
        path.write_text("[\n" + ",\n".join(json.dumps(r) for r in records) + "\n]\n")
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
    strict = cli("import", str(path))
    assert strict.exit_code == 2
    assert strict.stderr.count("\n") == 1
    first_bad = 3 if as_array else 2
    assert f"{path}:{first_bad}, field 'output'" in strict.stderr
    assert "internal error" not in strict.stderr and str(db_url) not in strict.stderr
    assert _runs(db_url) == []

    lenient = cli("import", "--skip-invalid", str(path))
    assert lenient.exit_code == 1
    assert _runs(db_url) == ["ok1", "ok2"]
    for offset, (record, field, words) in enumerate(BAD_LINES):
        line = first_bad + offset
        expected = f"skipped run {record['id']!r} at {path}:{line}: field '{field}"
        assert expected in lenient.stderr, lenient.stderr
        assert words in lenient.stderr


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--since", "99999999999d"], "--since"),
        (["--since", "3000000d"], "--since"),
        (["--since", "99999999999999999999s"], "--since"),
        (["--since", "9999-12-31T23:00:00-05:00"], "--since"),
        (["--from", "0001-01-01T00:00:00+01:00"], "--from"),
        (["--to", "9999-12-31T23:00:00-05:00"], "--to"),
    ],
)
@pytest.mark.parametrize("command", ["runs", "export", "score", "rate", "delete"])
def test_windows_out_of_range_are_one_line_naming_the_option(
    cli: Invoke, command: str, args: list[str], option: str
) -> None:
    result = cli(command, *args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: bad {option} "), result.stderr
    assert result.stderr.count("\n") == 1
    assert "internal error" not in result.stderr


def test_gate_baseline_out_of_range_is_one_line(cli: Invoke) -> None:
    result = cli("gate", "--since", "7d", "--max-rate", "0.5", "--baseline-since", "3000000d")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: bad --baseline-since ")


@pytest.mark.parametrize("hours", [1e20, 24 * 3_000_000])
def test_python_api_windows_out_of_range_are_config_errors(hours: float) -> None:
    from agentlens import hallucination_rate, query_traces
    from agentlens.errors import ConfigError
    from agentlens.store import SQLiteStore

    with SQLiteStore("sqlite:///:memory:") as store:
        with pytest.raises(ConfigError):
            list(query_traces(since_hours=hours, db=store))
        with pytest.raises(ConfigError):
            hallucination_rate(since_hours=hours, store=store)
