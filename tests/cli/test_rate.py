"""``agentlens rate``: the JSON shapes exactly, breakdowns, the table and chart."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from _rate_fixtures import trace
from agentlens.cli._rate import forest_bar, parse_fraction, sparkline
from agentlens.config import Settings
from agentlens.eval._runner import score_runs
from agentlens.store import open_store

NOW = datetime.now(UTC)
FIELDS = [
    "runs",
    "scored",
    "flagged",
    "unverifiable",
    "rate",
    "ci_low",
    "ci_high",
    "by_mode",
    "flagged_run_ids",
]


def _seed(db_url: str) -> dict[str, str]:
    runs = {
        "fine": trace("fine", day=1, release="v1", now=NOW),
        "fake": trace("FAKE x", day=2, release="v2", now=NOW),
        "leak": trace("LEAK", day=2, hours=1, agent="billing", now=NOW),
        "trunc": trace("TRUNC", day=3, now=NOW),
        "boom": trace("BOOM", day=3, now=NOW),
        "loop": trace("fine", day=4, loop=True, now=NOW),
        "old": trace("FAKE", day=20, now=NOW),
    }
    with open_store(db_url) as store:  # type: ignore[attr-defined]
        store.put_traces(runs.values())
        score_runs(store, ["t_refs", "t_loops"], settings=Settings())
    return {k: v.id for k, v in runs.items()}


def test_json_is_one_object_with_the_documented_fields(cli, db_url) -> None:  # type: ignore[no-untyped-def]
    ids = _seed(db_url)
    result = cli("rate", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    for name in FIELDS:
        assert name in data
    assert (data["runs"], data["scored"], data["flagged"], data["unverifiable"]) == (6, 4, 3, 1)
    assert data["errors"] == 1
    assert data["rate"] == 0.75
    assert 0 <= data["ci_low"] <= 0.75 <= data["ci_high"] <= 1
    assert data["flagged_run_ids"] == sorted([ids["fake"], ids["leak"], ids["loop"]])
    assert data["by_mode"]["fabricated_grounding"] == 1
    assert data["by_mode"]["repeated_tool_call"] == 1


def test_mode_agent_and_scorer_filters(cli, db_url) -> None:  # type: ignore[no-untyped-def]
    ids = _seed(db_url)
    modes = json.loads(
        cli("rate", "--json", "--mode", "fabricated_grounding", "-m", "parametric_leakage").stdout
    )
    assert modes["flagged_run_ids"] == sorted([ids["fake"], ids["leak"]])
    assert modes["by_mode"] == {"fabricated_grounding": 1, "parametric_leakage": 1}
    billing = json.loads(cli("rate", "--json", "--agent", "billing").stdout)
    assert (billing["runs"], billing["flagged_run_ids"]) == (1, [ids["leak"]])
    loops = json.loads(cli("rate", "--json", "--scorer", "t_loops", "--since", "30d").stdout)
    assert (loops["scored"], loops["flagged_run_ids"]) == (7, [ids["loop"]])
    bad = cli("rate", "--mode", "lies")
    assert bad.exit_code == 2 and "unknown failure mode 'lies'" in bad.stderr


def test_by_gives_groups_with_the_same_fields(cli, db_url) -> None:  # type: ignore[no-untyped-def]
    ids = _seed(db_url)
    for by in ("day", "week", "agent", "mode", "release", "scorer_version"):
        result = cli("rate", "--by", by, "--json")
        assert result.exit_code == 0, (by, result.output)
        data = json.loads(result.stdout)
        assert next(iter(data)) == "groups"
        for group in data["groups"]:
            assert next(iter(group)) == "key"
            for name in FIELDS:
                assert name in group
    agents = json.loads(cli("rate", "--by", "agent", "--json").stdout)["groups"]
    assert [(g["key"], g["runs"], g["flagged"]) for g in agents] == [
        ("billing", 1, 1),
        ("support", 5, 2),
    ]
    releases = json.loads(cli("rate", "--by", "release", "--json").stdout)["groups"]
    assert [(g["key"], g["flagged_run_ids"]) for g in releases][:2] == [
        ("v1", []),
        ("v2", [ids["fake"]]),
    ]
    assert releases[-1]["key"] is None
    bad = cli("rate", "--by", "month")
    assert bad.exit_code == 2


def test_table_and_chart(cli, db_url) -> None:  # type: ignore[no-untyped-def]
    _seed(db_url)
    plain = cli("rate")
    assert plain.exit_code == 0
    assert "75.00%" in plain.stdout and "3 of 4 scored runs" in plain.stdout
    assert "1 (counted apart)" in plain.stdout
    by_day = cli("rate", "--by", "day")
    assert by_day.exit_code == 0
    assert "●" in by_day.stdout and "trend" in by_day.stdout


def test_empty_window_reports_no_rate(cli, db_url) -> None:  # type: ignore[no-untyped-def]
    _seed(db_url)
    result = cli("rate", "--from", "2001-01-01", "--to", "2001-01-02", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert (data["runs"], data["rate"], data["ci_low"], data["ci_high"]) == (0, None, None, None)


def test_chart_helpers() -> None:
    assert sparkline([0.0, 0.5, 1.0, None]) == "▁▅█ "
    bar = forest_bar(0.5, 0.25, 0.75, 1.0, width=9)
    assert bar == "  ├─●─┤  "
    assert forest_bar(None, None, None, 1.0, width=4) == "    "
    assert parse_fraction("5%", "--max-rate") == 0.05
    assert parse_fraction("0.2", "--max-rate") == 0.2
