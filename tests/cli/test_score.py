"""``agentlens score``: JSON Lines shape, table, incremental runs, usage errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime

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
