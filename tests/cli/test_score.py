"""``agentlens score``: JSON Lines shape, table, incremental runs, usage errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from _rate_fixtures import trace
from agentlens.model import Score
from agentlens.store import open_store

NOW = datetime.now(UTC)

JSON_FIELDS = ["run_id", "scorer", "version", "verdict", "passed", "value", "detail", "findings"]


def _seed(db_url: str) -> list[str]:
    runs = [trace(o, day=i % 3, now=NOW) for i, o in enumerate(["fine", "FAKE x", "TRUNC", "BOOM"])]
    runs.append(trace("old FAKE", day=30, now=NOW))
    with open_store(db_url) as store:  # type: ignore[attr-defined]
        store.put_traces(runs)
    return [r.id for r in runs]


def test_json_lines_one_per_run_and_scorer(cli, db_url) -> None:  # type: ignore[no-untyped-def]
    ids = _seed(db_url)
    result = cli("score", "--scorer", "t_refs", "-s", "t_loops", "--since", "7d", "--json")
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == 8
    assert {(d["run_id"], d["scorer"]) for d in lines} == {
        (i, s) for i in ids[:4] for s in ("t_refs", "t_loops")
    }
    for d in lines:
        assert list(d)[: len(JSON_FIELDS)] == JSON_FIELDS
        assert d["passed"] is (d["verdict"] == "passed")
    fake = next(d for d in lines if d["run_id"] == ids[1] and d["scorer"] == "t_refs")
    assert fake["verdict"] == "flagged"
    assert fake["findings"][0]["failure_mode"] == "fabricated_grounding"
    assert {"text", "start", "end", "step_ids"} <= set(fake["findings"][0])
    # exactly Score.to_json_line()
    with open_store(db_url) as store:  # type: ignore[attr-defined]
        stored = {(s.run_id, s.scorer): s for i in ids for s in store.get_scores(i)}
    assert all(d == Score.to_json_line(stored[(d["run_id"], d["scorer"])]) for d in lines)
    verdicts = {d["run_id"]: d["verdict"] for d in lines if d["scorer"] == "t_refs"}
    assert verdicts == {
        ids[0]: "passed",
        ids[1]: "flagged",
        ids[2]: "unverifiable",
        ids[3]: "error",
    }


def test_second_run_scores_nothing_new(cli, db_url) -> None:  # type: ignore[no-untyped-def]
    _seed(db_url)
    first = cli("score", "-s", "t_refs")
    assert first.exit_code == 0
    assert "scored 5 runs (5 scores: 1 error, 2 flagged, 1 passed, 1 unverifiable)" in first.stdout
    assert "FAKE-1" in first.stdout  # the table shows findings when there is no detail
    second = cli("score", "-s", "t_refs", "--json")
    assert second.exit_code == 0 and second.stdout == ""
    again = cli("score", "-s", "t_refs", "--rescore", "--agent", "support", "--json")
    assert len(again.stdout.splitlines()) == 5


def test_flagged_runs_still_exit_zero_and_empty_selection_is_fine(cli, db_url) -> None:  # type: ignore[no-untyped-def]
    _seed(db_url)
    assert cli("score", "-s", "t_refs", "--from", "2001-01-01", "--to", "2001-02-01").exit_code == 0


def test_unknown_scorer_is_a_usage_error_naming_known_ones(cli, db_url) -> None:  # type: ignore[no-untyped-def]
    _seed(db_url)
    result = cli("score", "--scorer", "no_such")
    assert result.exit_code == 2
    assert "unknown scorer 'no_such'" in result.stderr
    assert "t_refs" in result.stderr and "Traceback" not in result.stderr


def test_judge_options_go_only_to_scorers_that_take_them(cli, db_url) -> None:  # type: ignore[no-untyped-def]
    _seed(db_url)
    result = cli("score", "-s", "t_refs", "--judge", "offline")
    assert result.exit_code == 2
    assert "--judge" in result.stderr and "none of t_refs" in result.stderr


def test_bad_window_is_a_usage_error(cli, db_url) -> None:  # type: ignore[no-untyped-def]
    _seed(db_url)
    result = cli("score", "-s", "t_refs", "--since", "7d", "--from", "2026-01-01")
    assert result.exit_code == 2 and "not both" in result.stderr


def _config(tmp_path: Path, monkeypatch, text: str) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "agentlens.toml").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)


def _scores(db_url: str) -> int:
    with open_store(db_url) as store:  # type: ignore[attr-defined]
        return sum(len(store.get_scores(r.id)) for r in store.list_runs(None))


def test_an_unknown_judge_stops_before_any_run_is_scored(cli, db_url) -> None:  # type: ignore[no-untyped-def]
    _seed(db_url)
    result = cli("score", "-s", "faithful_synthesis", "-s", "t_refs", "--judge", "nope")
    assert result.exit_code == 2, result.output
    assert "unknown judge backend 'nope'" in result.stderr and len(result.stderr.splitlines()) == 1
    assert _scores(db_url) == 0


def test_model_without_a_network_judge_is_a_usage_error(cli, db_url, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _seed(db_url)
    _config(tmp_path, monkeypatch, "")
    result = cli("score", "-s", "faithful_synthesis", "--model", "gpt-4o-mini")
    assert result.exit_code == 2 and "--model" in result.stderr and "offline" in result.stderr
    assert _scores(db_url) == 0


def test_a_bad_option_in_the_file_is_one_line_naming_the_file_and_key(  # type: ignore[no-untyped-def]
    cli, db_url, tmp_path, monkeypatch
) -> None:
    _seed(db_url)
    _config(tmp_path, monkeypatch, '[scorers.repeated_tool_calls]\nmax_repeats = "three"\n')
    result = cli("score", "-s", "t_refs")  # checked when loaded, whatever the command runs
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert "agentlens.toml: scorers.repeated_tool_calls.max_repeats" in line and "three" in line
    assert _scores(db_url) == 0


def test_judge_settings_from_the_file_apply_to_a_scorers_judge(  # type: ignore[no-untyped-def]
    cli, db_url, tmp_path, monkeypatch
) -> None:
    _seed(db_url)
    _config(
        tmp_path,
        monkeypatch,
        '[judge]\nmodel = "gpt-test"\nbase_url = "http://127.0.0.1:9/v1"\nmax_retries = 0\n'
        '[scorers.parametric_leakage]\njudge = "openai"\n',
    )
    refused = cli("score", "-s", "parametric_leakage")  # the file's endpoint needs the opt-in
    assert refused.exit_code == 2 and "ALLOW_FILE_BASE_URL" in refused.stderr
    monkeypatch.setenv("AGENTLENS_JUDGE_ALLOW_FILE_BASE_URL", "1")
    result = cli("score", "-s", "parametric_leakage", "--json")
    assert result.exit_code == 0, result.stderr  # the [judge] model is used: no "needs a model"
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines and all(d["verdict"] != "error" for d in lines)


def test_settings_are_loaded_once_per_command(cli, db_url, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from agentlens import config

    _seed(db_url)
    calls: list[int] = []
    real = config.load_settings

    def counting(**kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(**kwargs)

    monkeypatch.setattr(config, "load_settings", counting)
    assert cli("score", "-s", "t_refs", "-s", "faithful_synthesis").exit_code == 0
    assert len(calls) == 1
    calls.clear()
    assert cli("rate", "--since", "7d").exit_code == 0
    assert len(calls) == 1


def test_the_table_with_workers_is_the_table_of_one_process(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """With --workers the table is made from the rows the workers send (a score is built back
    only where the table shows its findings): the same rows, details and counts as one
    process shows, past the table's limit too."""
    outputs = ["fine", "FAKE x", "TRUNC", "BOOM"] * 30  # 240 scores: past the 100 rows shown
    runs = [trace(o, day=i % 3, now=NOW) for i, o in enumerate(outputs)]
    tables = []
    for workers in ("1", "2"):
        url = f"sqlite:///{tmp_path / f'w{workers}.db'}"
        with open_store(url) as store:  # type: ignore[attr-defined]
            store.put_traces(runs)
        result = cli("score", "-s", "t_refs", "-s", "t_loops", "--workers", workers, db=url)
        assert result.exit_code == 0, result.output
        # the elapsed seconds of the last line differ
        tables.append(result.stdout.rsplit(";", 1)[0])
    assert tables[0] == tables[1]
    assert "FAKE-1" in tables[0]  # findings shown for a score without a detail
    assert "more scores not shown" in tables[0]
