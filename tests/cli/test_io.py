"""``agentlens import`` and ``agentlens export`` end to end, on a real SQLite file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from agentlens.model import FailureMode, Finding, Score
from agentlens.store import RunFilter, open_store

Invoke = Callable[..., Result]
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "trace"
HANDWRITTEN = GOLDEN / "handwritten.json"
EXPECTED = GOLDEN / "handwritten.expected.jsonl"


def count(db_url: str) -> int:
    store = open_store(db_url)
    try:
        return store.count_runs()
    finally:
        store.close()


def run_line(i: int, agent: str = "support", day: int = 1) -> str:
    return json.dumps(
        {
            "id": f"run-{i:05d}",
            "agent": agent,
            "started_at": f"2026-03-{day:02d}T10:00:{i % 60:02d}Z",
            "output": f"answer {i}",
            "steps": [{"id": "s1", "kind": "tool", "name": "lookup", "output": {"n": i}}],
        }
    )


# -- import ---------------------------------------------------------------------------------


def test_import_reports_runs_and_steps(cli: Invoke, db_url: str) -> None:
    result = cli("import", str(HANDWRITTEN))
    assert result.exit_code == 0
    assert result.stdout == (
        f"imported 2 runs (11 steps) from {HANDWRITTEN} [trace, detected]\n"
        "summary: 2 runs (11 steps) from 1 file\n"
        "  trace: 2 runs (11 steps) from 1 file\n"
    )
    assert count(db_url) == 2


def test_round_trip_export_import_export_is_byte_identical(cli: Invoke, tmp_path: Path) -> None:
    assert cli("import", str(HANDWRITTEN)).exit_code == 0
    first = cli("export")
    assert first.exit_code == 0
    assert first.stdout_bytes == EXPECTED.read_bytes()
    assert first.stderr == "exported 2 runs to stdout\n"

    exported = tmp_path / "exported.jsonl"
    exported.write_bytes(first.stdout_bytes)
    other = f"sqlite:///{tmp_path / 'other.db'}"
    assert cli("import", str(exported), db=other).exit_code == 0
    assert cli("export", db=other).stdout_bytes == first.stdout_bytes


def test_import_twice_changes_nothing(cli: Invoke, db_url: str) -> None:
    cli("import", str(HANDWRITTEN))
    store = open_store(db_url)
    try:
        store.put_scores(
            [Score(run_id="01JDGOLDEN0000000000000001", scorer="x", version="1", passed=True)]
        )
        scores_before = store.get_scores("01JDGOLDEN0000000000000001")
    finally:
        store.close()
    before = cli("export").stdout_bytes
    again = cli("import", str(HANDWRITTEN))
    assert again.exit_code == 0
    assert cli("export").stdout_bytes == before
    assert count(db_url) == 2
    store = open_store(db_url)
    try:  # the identical runs were left as they were: their scores (the first review's and x)
        scores = store.get_scores("01JDGOLDEN0000000000000001")
        assert scores == scores_before and "x" in {s.scorer for s in scores}
    finally:
        store.close()


def test_import_replaces_a_changed_run_by_id(cli: Invoke, db_url: str, tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_text(run_line(1) + "\n", encoding="utf-8")
    cli("import", str(path))
    path.write_text(run_line(1).replace("answer 1", "corrected") + "\n", encoding="utf-8")
    cli("import", str(path))
    store = open_store(db_url)
    try:
        assert store.get_trace("run-00001").output == "corrected"
        assert store.count_runs() == 1
    finally:
        store.close()


def test_import_from_stdin(cli: Invoke, db_url: str) -> None:
    result = cli("import", "-", input=EXPECTED.read_bytes())
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0] == "imported 2 runs (11 steps) from <stdin> [trace]"
    assert cli("export").stdout_bytes == EXPECTED.read_bytes()


def test_import_several_files_prints_a_summary(cli: Invoke) -> None:
    result = cli("import", str(HANDWRITTEN), str(GOLDEN / "v1-frozen.jsonl"))
    assert result.exit_code == 0
    assert result.stdout.splitlines()[-2:] == [
        "summary: 4 runs (13 steps) from 2 files",
        "  trace: 4 runs (13 steps) from 2 files",
    ]


BAD = [
    pytest.param(
        [*(run_line(i) for i in range(600)), '{"id": "bad", "steps": [{"kind": "tol"}]}'],
        "runs.jsonl:601, field 'steps[0].kind': Input should be 'user', 'system', 'llm', "
        "'tool', 'retrieval', 'text', 'thinking' or 'agent' (got 'tol')",
        id="wrong-type-after-600-good-runs",
    ),
    pytest.param(
        [run_line(1), '{"id": "x", "steps": [{"id": "s1"}]}'],
        "runs.jsonl:2, field 'steps[0].kind': required field is missing",
        id="missing-field",
    ),
    pytest.param(
        [run_line(1), '{"id": "x",, }'],
        "runs.jsonl:2: malformed JSON: Expecting property name enclosed in double quotes "
        "at column 12",
        id="malformed",
    ),
    pytest.param(
        [run_line(1), '{"id": "x", "schema_version": 2}'],
        "runs.jsonl:2, field 'schema_version': unknown schema_version 2; this agentlens reads 1..1",
        id="schema-version",
    ),
    pytest.param(
        [*(run_line(i) for i in range(300)), run_line(300)[:40]],
        "runs.jsonl:301: the file is truncated: the last line ends in the middle of a run",
        id="truncated",
    ),
    pytest.param([], "runs.jsonl: empty file: no runs", id="empty"),
]


@pytest.mark.parametrize(("lines", "message"), BAD)
def test_bad_file_is_one_error_line_exit_2_and_nothing_imported(
    cli: Invoke,
    db_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    lines: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    text = "\n".join(lines) + ("\n" if lines and "truncated" not in message else "")
    Path("runs.jsonl").write_text(text, encoding="utf-8")
    result = cli("import", "runs.jsonl")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == f"error: {message}; nothing was imported from this file\n"
    assert count(db_url) == 0


def test_truncated_json_array_imports_nothing(cli: Invoke, db_url: str, tmp_path: Path) -> None:
    path = tmp_path / "runs.json"
    runs = ",\n".join(run_line(i) for i in range(700))
    path.write_text("[\n" + runs + "\n", encoding="utf-8")
    result = cli("import", str(path))
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: {path}:702: the file is truncated: the JSON array is never closed; "
        "nothing was imported from this file\n"
    )
    assert count(db_url) == 0


def test_second_bad_file_keeps_the_first(cli: Invoke, db_url: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1}\n', encoding="utf-8")
    result = cli("import", str(HANDWRITTEN), str(bad))
    assert result.exit_code == 2
    assert result.stdout.startswith("imported 2 runs (11 steps) from ")
    assert result.stderr.startswith(f"error: {bad}:1, field 'id': Input should be a valid string")
    assert count(db_url) == 2


def test_skip_invalid_imports_the_rest_and_names_each_skipped_run(
    cli: Invoke, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("mixed.jsonl").write_text(
        "\n".join(
            [
                run_line(1),
                '{"id": "run-b", "steps": [{"kind": "bogus"}]}',
                "this is not json",
                run_line(4),
                '{"id": "run-e", "status": 5}',
                run_line(6)[:30],
            ]
        ),
        encoding="utf-8",
    )
    result = cli("import", "--skip-invalid", "--no-review", "mixed.jsonl")
    assert result.exit_code == 1
    assert (
        result.stdout.splitlines()[0]
        == "imported 2 runs (2 steps) from mixed.jsonl [trace, detected]"
    )
    assert result.stdout.splitlines()[3].startswith("  skipped 4 runs of mixed.jsonl: field ")
    assert result.stderr.splitlines() == [
        "skipped run 'run-b' at mixed.jsonl:2: field 'steps[0].kind': Input should be 'user', "
        "'system', 'llm', 'tool', 'retrieval', 'text', 'thinking' or 'agent' (got 'bogus')",
        "skipped run at mixed.jsonl:3: malformed JSON: Expecting value at column 1",
        "skipped run 'run-e' at mixed.jsonl:5: field 'status': Input should be a valid string "
        "(got 5)",
        "skipped run at mixed.jsonl:6: the file is truncated: the last line ends in the middle "
        "of a run",
    ]
    store = open_store(db_url)
    try:
        assert sorted(r.id for r in store.list_runs()) == ["run-00001", "run-00004"]
    finally:
        store.close()


def test_skip_invalid_with_an_unreadable_array_keeps_the_runs_before(
    cli: Invoke, db_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "cut.json"
    path.write_text("[" + run_line(1) + ",\n" + run_line(2) + ",\n{]", encoding="utf-8")
    result = cli("import", "--skip-invalid", "--no-review", str(path))
    assert result.exit_code == 1
    assert (
        result.stdout.splitlines()[0] == f"imported 2 runs (2 steps) from {path} [trace, detected]"
    )
    assert result.stdout.splitlines()[-1] == (
        f"  skipped the rest of {path}: malformed JSON: Expecting property name enclosed in "
        "double quotes at column 2"
    )
    assert result.stderr == (
        f"stopped reading {path}: {path}:3: malformed JSON: Expecting property name enclosed "
        "in double quotes at column 2; the runs before it were imported\n"
    )
    assert count(db_url) == 2


def test_skip_invalid_with_nothing_wrong_exits_0(cli: Invoke) -> None:
    assert cli("import", "--skip-invalid", str(HANDWRITTEN)).exit_code == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["import", "missing.jsonl"], "missing.jsonl: cannot read: no such file"),
        (["import", "--format", "nope", "x"], "unknown format 'nope'; known formats: "),
        (["export", "--since", "7 parsecs"], "bad --since '7 parsecs': use a duration"),
        (["export", "--since", "7d", "--from", "2026-01-01"], "give --since or --from, not both"),
        (["export", "--from", "yesterday"], "bad --from 'yesterday': use an ISO 8601 date"),
        (["export", "--from", "2026-02-01", "--to", "2026-01-01"], "empty time window"),
        (["export", "--out", "no/such/dir/out.jsonl"], "no/such/dir/out.jsonl: cannot write"),
    ],
)
def test_user_errors_are_one_line_and_exit_2(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    cli("import", str(HANDWRITTEN))  # export reads an existing store (it never creates one)
    result = cli(*args)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {message}")
    assert result.stderr.count("\n") == 1


def test_unopenable_store_is_one_line_and_exit_2(cli: Invoke, tmp_path: Path) -> None:
    for db in (f"sqlite:///{tmp_path}/no/such/dir/x.db", str(tmp_path)):
        result = cli("export", db=db)
        assert result.exit_code == 2
        assert result.stderr.startswith("error: ")
        assert result.stderr.count("\n") == 1


def test_a_corrupt_store_is_one_line_and_exit_2(cli: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "corrupt.db"
    path.write_bytes(b"this is not a database" * 100)
    result = cli("runs", db=str(path))
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ")
    assert result.stderr.count("\n") == 1


# -- export ---------------------------------------------------------------------------------


@pytest.fixture
def many(cli: Invoke, tmp_path: Path) -> None:
    lines = [run_line(i, agent="support" if i % 2 else "billing", day=1 + i) for i in range(10)]
    path = tmp_path / "many.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert cli("import", str(path)).exit_code == 0


def exported_ids(result_stdout: str) -> list[str]:
    return [json.loads(line)["id"] for line in result_stdout.splitlines()]


@pytest.mark.usefixtures("many")
def test_export_is_oldest_first_and_filters(cli: Invoke) -> None:
    assert exported_ids(cli("export").stdout) == [f"run-{i:05d}" for i in range(10)]
    assert exported_ids(cli("export", "--agent", "billing").stdout) == [
        f"run-{i:05d}" for i in (0, 2, 4, 6, 8)
    ]
    window = cli("export", "--from", "2026-03-03", "--to", "2026-03-05T00:00:00+00:00")
    assert exported_ids(window.stdout) == ["run-00002", "run-00003"]
    assert exported_ids(cli("export", "--limit", "3").stdout) == [
        "run-00007",
        "run-00008",
        "run-00009",
    ]
    assert exported_ids(cli("export", "--since", "2026-03-09").stdout) == [
        "run-00008",
        "run-00009",
    ]
    assert cli("export", "--agent", "nobody").stdout == ""


@pytest.mark.usefixtures("many")
def test_export_of_runs_named_by_id(cli: Invoke, tmp_path: Path) -> None:
    # oldest first whatever the order given, each once, whatever their time or role
    result = cli("export", "run-00007", "run-00002", "run-00007")
    assert result.exit_code == 0, result.output
    assert exported_ids(result.stdout) == ["run-00002", "run-00007"]
    assert result.stderr == "exported 2 runs to stdout\n"
    # an id that is not stored: an error naming it, and nothing written
    out = tmp_path / "one.jsonl"
    missing = cli("export", "run-00003", "nope", "-o", str(out))
    assert missing.exit_code == 1
    assert missing.stdout == ""
    assert missing.stderr == "error: no run with id 'nope'; nothing exported\n"
    assert not out.exists()
    # ids and a filter together are refused, before the store is read
    both = cli("export", "run-00003", "--agent", "support")
    assert both.exit_code == 2 and both.stdout == ""
    assert "give run ids or a filter" in both.stderr


@pytest.mark.usefixtures("many")
def test_export_since_a_duration_is_relative_to_now(cli: Invoke) -> None:
    # The runs are from March 2026; "the last hour" selects none of them unless now is then.
    result = cli("export", "--since", "1h")
    assert result.exit_code == 0
    assert exported_ids(result.stdout) == []


@pytest.mark.usefixtures("many")
def test_export_to_a_file_is_atomic_and_complete(cli: Invoke, tmp_path: Path) -> None:
    out = tmp_path / "out" / "export.jsonl"
    out.parent.mkdir()
    result = cli("export", "--out", str(out), "--agent", "support")
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr == f"exported 5 runs to {out}\n"
    assert exported_ids(out.read_text(encoding="utf-8")) == [
        f"run-{i:05d}" for i in (1, 3, 5, 7, 9)
    ]
    assert [p.name for p in out.parent.iterdir()] == ["export.jsonl"]


def test_export_of_an_empty_store(cli: Invoke, db_url: str) -> None:
    open_store(db_url).close()  # export reads an existing store; it never creates one
    result = cli("export")
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr == "exported 0 runs to stdout\n"


def test_exported_scores_do_not_leak_into_the_trace_format(cli: Invoke, db_url: str) -> None:
    cli("import", str(HANDWRITTEN))
    store = open_store(db_url)
    try:
        finding = Finding(failure_mode=FailureMode.FABRICATED_GROUNDING, text="X-1")
        store.put_scores(
            [
                Score(
                    run_id="01JDGOLDEN0000000000000001",
                    scorer="no_fabricated_refs",
                    version="1",
                    passed=False,
                    findings=[finding],
                )
            ]
        )
        assert store.count_runs(RunFilter(agent="support")) == 2
    finally:
        store.close()
    assert cli("export").stdout_bytes == EXPECTED.read_bytes()


def test_progress_bar_on_a_terminal(
    cli: Invoke, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentlens.cli import _app, _io

    monkeypatch.setattr(_io, "_PROGRESS_MIN_BYTES", 0)
    monkeypatch.setattr(_app.err_console, "_force_terminal", True)
    result = cli("import", str(HANDWRITTEN))
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0] == (
        f"imported 2 runs (11 steps) from {HANDWRITTEN} [trace, detected]"
    )
    assert count(db_url) == 2


def test_another_format_fails_or_skips_as_a_whole_file(
    cli: Invoke, db_url: str, tmp_path: Path
) -> None:
    bad = tmp_path / "garbage.txt"
    bad.write_text("garbage\n", encoding="utf-8")
    result = cli("import", "--format", "transcript", str(bad))
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and "garbage.txt:1" in result.stderr
    assert result.stderr.endswith("; nothing was imported from this file\n")
    skipped = cli("import", "--format", "transcript", "--skip-invalid", str(bad))
    assert skipped.exit_code == 1
    assert skipped.stdout.splitlines()[0] == f"imported 0 runs (0 steps) from {bad} [transcript]"
    assert skipped.stdout.splitlines()[-1].startswith(f"  skipped all of {bad}: ")
    assert skipped.stderr.startswith("skipped the whole file: ")
    assert count(db_url) == 0


def test_stdin_needs_the_trace_format(cli: Invoke) -> None:
    result = cli("import", "--format", "transcript", "-", input="{}")
    assert result.exit_code == 2
    assert result.stderr == (
        "error: <stdin>: standard input can only be read with --format trace; save it to a "
        "file first; nothing was imported from this file\n"
    )
