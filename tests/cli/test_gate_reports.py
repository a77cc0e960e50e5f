"""``agentlens gate``'s report files as a CI job writes them: folders that do not exist yet,
text from traces that XML cannot carry."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

from _rate_fixtures import trace
from agentlens.config import Settings
from agentlens.eval._runner import score_runs
from agentlens.store import open_store

NOW = datetime.now(UTC)


def _seed(db_url: str, outputs: list[str]) -> list[str]:
    runs = [trace(o, day=i % 6, hours=1, now=NOW) for i, o in enumerate(outputs)]
    with open_store(db_url) as store:  # type: ignore[attr-defined]
        store.put_traces(runs)
        score_runs(store, ["t_refs"], settings=Settings())
    return [r.id for r in runs]


def test_reports_go_into_folders_that_do_not_exist_yet(
    cli, db_url, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """docs/rates.md's GitHub Actions job writes --junit reports/agentlens.xml in a fresh
    checkout: the gate failed with exit 2 (`reports/agentlens.xml: No such file or directory`)
    and no verdict, where pytest's --junitxml creates the folder."""
    _seed(db_url, ["fine"] * 3 + ["FAKE"])
    monkeypatch.chdir(tmp_path)
    result = cli(
        "gate",
        "--max-rate",
        "10%",
        "--junit",
        "reports/agentlens.xml",
        "--markdown",
        str(tmp_path / "summaries" / "a" / "gate.md"),
    )
    assert result.exit_code == 1, result.output
    assert "gate FAILED" in result.stdout
    root = ET.parse(tmp_path / "reports" / "agentlens.xml").getroot()
    assert root.get("failures") == "2"
    text = (tmp_path / "summaries" / "a" / "gate.md").read_text(encoding="utf-8")
    assert text.startswith("## agentlens gate: ❌ failed")


def test_a_report_path_under_a_file_is_one_error_line(cli, db_url, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _seed(db_url, ["fine"])
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    result = cli("gate", "--max-rate", "0.5", "--junit", str(tmp_path / "afile" / "gate.xml"))
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and "afile" in result.stderr


def test_a_data_error_of_the_rate_query_is_in_the_reports_too(cli, db_url, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A --scorer that counts nothing (or a pinned version without scores) exited 2 before the
    reports were written, so the CI job had no JUnit file and no summary to show why; the
    reports say it, as for an empty window."""
    _seed(db_url, ["fine", "FAKE"])
    junit, md = tmp_path / "gate.xml", tmp_path / "gate.md"
    for scorer, message in (
        ("bogus", "unknown scorer 'bogus'"),
        ("t_refs@9", "no score of t_refs@9 is stored"),
    ):
        args = ["--max-rate", "5%", "--scorer", scorer, "--junit", str(junit)]
        result = cli("gate", *args, "--markdown", str(md))
        assert result.exit_code == 2
        assert result.stderr.startswith(f"error: {message}")
        root = ET.parse(junit).getroot()
        assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("1", "0", "1")
        error = root.find("testsuite/testcase/error")
        assert error is not None and message in (error.get("message") or "")
        text = md.read_text(encoding="utf-8")
        assert text.startswith("## agentlens gate: ⚠️ error") and message in text


def test_a_store_that_is_not_there_is_in_the_reports(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A CI job whose store was not restored (a missing cache or artifact)."""
    junit = tmp_path / "gate.xml"
    missing = f"sqlite:///{tmp_path / 'missing.db'}"
    result = cli("gate", "--max-rate", "5%", "--junit", str(junit), db=missing)
    assert result.exit_code == 2 and "no agentlens store here" in result.stderr
    error = ET.parse(junit).getroot().find("testsuite/testcase/error")
    assert error is not None and "no agentlens store here" in (error.get("message") or "")
    assert not (tmp_path / "missing.db").exists()


def test_the_baseline_counts_the_version_the_current_window_counts(cli, db_url) -> None:  # type: ignore[no-untyped-def]
    """A scorer this process does not register counts at the newest version stored in the
    window: the baseline window counted version 1 where the current window counted version 2,
    and the gate failed on the rise of one version's rate over another's."""
    from _rate_fixtures import score

    current = [trace("x", day=i % 6, hours=1, now=NOW) for i in range(10)]
    older = [trace("x", day=8 + i % 6, now=NOW) for i in range(10)]
    with open_store(db_url) as store:  # type: ignore[attr-defined]
        store.put_traces(current + older)
        store.put_scores(
            [
                score(t.id, "flagged" if i < 5 else "passed", scorer="ext", version="2")
                for i, t in enumerate(current)
            ]
            + [score(t.id, "passed", scorer="ext", version="1") for t in older]
        )
    args = ["--max-rate", "60%", "--baseline-since", "14d", "--max-increase", "1%"]
    result = cli("gate", *args)
    assert result.exit_code == 2, result.output
    assert "no scored runs in the baseline window (10 runs)" in result.stderr
    with open_store(db_url) as store:  # type: ignore[attr-defined]  # the baseline at version 2
        store.put_scores(
            [
                score(t.id, "flagged" if i < 5 else "passed", scorer="ext", version="2")
                for i, t in enumerate(older)
            ]
        )
        store.put_scores([score(t.id, "passed", scorer="ext", version="1") for t in older])
    passed = cli("gate", *args, "--json")
    assert passed.exit_code == 0, passed.output
    data = json.loads(passed.stdout)
    assert data["baseline"]["scorers"] == {"ext": ["2"]} and data["baseline"]["rate"] == 0.5
    assert data["current"]["scorers"] == {"ext": ["2"]}


def test_an_empty_baseline_names_its_window_in_the_summary(cli, db_url, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The summary of 'no scored runs in the baseline window' named the current window only."""
    _seed(db_url, ["fine", "FAKE"])
    md = tmp_path / "gate.md"
    result = cli("gate", "--max-rate", "60%", "--baseline-since", "14d", "--markdown", str(md))
    assert result.exit_code == 2
    text = md.read_text(encoding="utf-8")
    assert "no scored runs in the baseline window" in text
    (line,) = [x for x in text.splitlines() if x.startswith("Baseline: ")]
    assert "→" in line and "now" not in line  # the 14 days before the current window


def test_the_github_step_summary_stays_within_its_1_mib(
    cli, db_url, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """GitHub drops a step's whole job summary past 1 MiB; 200 flagged runs with long findings
    made more than that, so the job page showed no summary at all. Runs are left out from the
    end, counted as not listed, until it fits (with what the step wrote before)."""
    from agentlens.model import FailureMode, Finding, Score, Verdict

    runs = [trace("x", day=i % 6, hours=1, now=NOW) for i in range(200)]
    long = [
        Finding(failure_mode=FailureMode.PARAMETRIC_LEAKAGE, text=f"name {k}", detail="é" * 900)
        for k in range(4)
    ]
    with open_store(db_url) as store:  # type: ignore[attr-defined]
        store.put_traces(runs)
        store.put_scores(
            [
                Score(
                    run_id=t.id,
                    scorer="ext",
                    version="1",
                    passed=False,
                    verdict=Verdict.FLAGGED,
                    findings=long,
                )
                for t in runs
            ]
        )
    summary = tmp_path / "step_summary.md"
    summary.write_text("# earlier step output\n" + "x" * 100_000 + "\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert cli("gate", "--max-rate", "5%", "--markdown", str(summary)).exit_code == 1
    data = summary.read_bytes()
    assert len(data) <= 1024 * 1024
    text = data.decode("utf-8")
    assert text.startswith("# earlier step output\n") and "## agentlens gate: ❌ failed" in text
    listed = text.count("\n- `")
    assert 0 < listed < 200
    assert f"… and {200 - listed} more flagged runs" in text
    other = tmp_path / "report.md"  # not the job summary: no limit
    cli("gate", "--max-rate", "5%", "--markdown", str(other))
    assert other.read_text(encoding="utf-8").count("\n- `") == 200
