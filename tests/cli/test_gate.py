"""``agentlens gate``: exit codes 0/1/2, the baseline window, JUnit XML and Markdown reports."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

import pytest

from _rate_fixtures import trace
from agentlens.cli._rate import write_atomic
from agentlens.config import Settings
from agentlens.eval._runner import score_runs
from agentlens.store import open_store

NOW = datetime.now(UTC)


def _seed(db_url: str, *, current: list[str], baseline: list[str] = ()) -> list[str]:  # type: ignore[assignment]
    # current: the last 7 days; baseline: 7 to 21 days ago.
    runs = [trace(o, day=i % 6, hours=1, now=NOW) for i, o in enumerate(current)]
    runs += [trace(o, day=8 + i % 12, now=NOW) for i, o in enumerate(baseline)]
    with open_store(db_url) as store:  # type: ignore[attr-defined]
        store.put_traces(runs)
        score_runs(store, ["t_refs"], settings=Settings())
    return [r.id for r in runs]


def test_within_bounds_exits_zero(cli, db_url) -> None:  # type: ignore[no-untyped-def]
    _seed(db_url, current=["fine"] * 19 + ["FAKE"])
    result = cli("gate", "--max-rate", "0.06")
    assert result.exit_code == 0, result.output
    assert "gate passed" in result.stdout and "5.00% <= 6.00%" in result.stdout


def test_above_the_limit_exits_one(cli, db_url) -> None:  # type: ignore[no-untyped-def]
    _seed(db_url, current=["fine"] * 18 + ["FAKE", "LEAK"])
    result = cli("gate", "--max-rate", "5%", "--json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["passed"] is False
    assert data["checks"][0]["name"] == "max_rate" and data["checks"][0]["actual"] == 0.1
    assert data["current"]["flagged"] == 2


def test_upper_bound_passes_only_when_the_runs_show_the_rate_is_within(cli, db_url) -> None:  # type: ignore[no-untyped-def]
    # 20 clean runs: a rate of 0%, but a 95% interval up to 16%: not shown to be under 5%
    _seed(db_url, current=["fine"] * 20)
    assert cli("gate", "--max-rate", "5%").exit_code == 0
    result = cli("gate", "--max-rate", "5%", "--upper-bound", "--json")
    assert result.exit_code == 1, result.output
    (check,) = json.loads(result.stdout)["checks"]
    assert check["name"] == "max_rate" and check["measure"] == "upper_bound"
    assert 0.15 < check["actual"] < 0.17 and check["limit"] == 0.05
    assert check["message"].startswith("upper bound of the 95% interval 16.")
    assert "(rate 0.00%, 0 of 20 scored runs flagged)" in check["message"]
    assert cli("gate", "--max-rate", "20%", "--upper-bound").exit_code == 0
    plain = json.loads(cli("gate", "--max-rate", "5%", "--json").stdout)["checks"][0]
    assert plain["measure"] == "rate" and plain["actual"] == 0.0


def test_empty_window_is_an_error_not_a_pass(cli, db_url, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _seed(db_url, current=["fine"])
    junit = tmp_path / "new" / "gate.xml"  # the error's report goes into a new folder too
    result = cli(
        "gate",
        "--max-rate",
        "0.5",
        "--from",
        "2001-01-01",
        "--to",
        "2001-02-01",
        "--junit",
        str(junit),
    )
    assert result.exit_code == 2
    assert "no scored runs in the window" in result.stderr
    root = ET.parse(junit).getroot()
    assert root.get("errors") == "1"
    assert root.find("testsuite/testcase/error") is not None


def test_only_unverifiable_runs_is_an_error_too(cli, db_url) -> None:  # type: ignore[no-untyped-def]
    _seed(db_url, current=["TRUNC", "BOOM"])
    result = cli("gate", "--max-rate", "0.5")
    assert result.exit_code == 2
    assert "1 unverifiable, 1 errors" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-rate", "1.5"], "between 0 and 1"),
        (["--max-rate", "x"], "bad --max-rate"),
        (["--max-rate", "0.1", "--max-increase", "0.01"], "needs --baseline-since"),
        (["--max-rate", "0.1", "--significant-only"], "applies to --max-increase"),
        (["--max-rate", "0.1", "--since", "7d", "--from", "2026-01-01"], "not both"),
        (["--max-rate", "0.1", "--baseline-since", "soon"], "bad duration"),
    ],
)
def test_usage_errors_exit_two(cli, db_url, args: list[str], message: str) -> None:  # type: ignore[no-untyped-def]
    _seed(db_url, current=["fine"])
    result = cli("gate", *args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_increase_over_the_baseline_window(cli, db_url) -> None:  # type: ignore[no-untyped-def]
    # Baseline (7-21 days ago): 2 of 100; current (last 7 days): 20 of 100.
    _seed(db_url, current=["fine"] * 80 + ["FAKE"] * 20, baseline=["fine"] * 98 + ["FAKE"] * 2)
    ok = cli(
        "gate", "--max-rate", "0.5", "--baseline-since", "14d", "--max-increase", "0.25", "--json"
    )
    assert ok.exit_code == 0, ok.output
    data = json.loads(ok.stdout)
    assert data["baseline"]["scored"] == 100 and data["baseline"]["rate"] == 0.02
    assert data["trend"]["difference"] == pytest.approx(0.18)
    assert data["trend"]["significant"] is True
    # The baseline window ends where the current one starts.
    assert data["baseline"]["end"] == data["current"]["start"]
    worse = cli("gate", "--max-rate", "0.5", "--baseline-since", "14d", "--max-increase", "5%")
    assert worse.exit_code == 1
    assert "✗ change +18.00 pts over the baseline (2.00%) > 5.00 pts" in worse.stdout
    # A baseline of a week only overlaps the oldest baseline runs.
    short = cli("gate", "--max-rate", "0.5", "--baseline-since", "1d", "--max-increase", "5%")
    assert short.exit_code == 2 and "no scored runs in the baseline window" in short.stderr


def test_a_noisy_increase_is_tolerated_with_significant_only(cli, db_url) -> None:  # type: ignore[no-untyped-def]
    _seed(db_url, current=["fine"] * 9 + ["FAKE"], baseline=["fine"] * 10)
    args = ["gate", "--max-rate", "0.5", "--baseline-since", "14d", "--max-increase", "0.05"]
    assert cli(*args).exit_code == 1
    tolerated = cli(*args, "--significant-only")
    assert tolerated.exit_code == 0
    assert "tolerated: not significant" in tolerated.stdout


def test_junit_and_markdown_list_flagged_runs_with_findings(cli, db_url, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ids = _seed(
        db_url,
        current=["fine"] * 7 + ["FAKE here", "LEAK", "TRUNC"],
        baseline=["fine"] * 5 + ["FAKE"],
    )
    junit, md = tmp_path / "out" / "gate.xml", tmp_path / "summary.md"
    junit.parent.mkdir()
    result = cli(
        "gate",
        "--max-rate",
        "0.1",
        "--baseline-since",
        "14d",
        "--junit",
        str(junit),
        "--markdown",
        str(md),
    )
    assert result.exit_code == 1
    root = ET.parse(junit).getroot()
    suite = root.find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("3", "3", "0")
    gate_case = cases[0]
    assert gate_case.get("classname") == "agentlens.gate"
    failure = gate_case.find("failure")
    assert failure is not None and "rate 22.22% > 10.00%" in (failure.get("message") or "")
    run_cases = {c.get("name"): c for c in cases[1:]}
    assert set(run_cases) == {ids[7], ids[8]}
    fake = run_cases[ids[7]].find("failure")
    assert fake is not None
    assert "fabricated_grounding" in (fake.get("message") or "") and "FAKE-1" in (fake.text or "")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["flagged"] == "2" and props["unverifiable"] == "1"

    text = md.read_text(encoding="utf-8")
    assert text.startswith("## agentlens gate: ❌ failed")
    assert "**22.22%** (95% CI" in text
    assert "| Baseline (" in text and "16.67%" in text
    assert "| `fabricated_grounding` | 1 | 11.11% |" in text
    assert "| `parametric_leakage` | 1 | 11.11% |" in text
    assert f"- `{ids[7]}`" in text and "FAKE-1 is not in the evidence" in text
    assert "| Not verifiable (counted apart) | 1 |" in text
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind


def test_markdown_appends_to_the_github_step_summary(
    cli, db_url, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    _seed(db_url, current=["fine"] * 3)
    summary = tmp_path / "step_summary.md"
    summary.write_text("# earlier step output\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert cli("gate", "--max-rate", "0", "--markdown", str(summary)).exit_code == 0
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("# earlier step output\n") and "## agentlens gate: ✅ passed" in text
    other = tmp_path / "other.md"
    other.write_text("old", encoding="utf-8")
    assert cli("gate", "--max-rate", "0", "--markdown", str(other)).exit_code == 0
    assert other.read_text(encoding="utf-8").startswith("## agentlens gate")


def test_write_atomic_keeps_the_old_file_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "report.xml"
    target.write_text("old", encoding="utf-8")

    with pytest.raises(TypeError):
        write_atomic(target, 42)  # type: ignore[arg-type]
    assert target.read_text(encoding="utf-8") == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.xml"]
    write_atomic(target, "new")
    assert target.read_text(encoding="utf-8") == "new"
