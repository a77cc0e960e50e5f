"""``agentlens demo``: real capture SDK, real store, real scorers, in a temporary folder."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from agentlens.cli import app
from agentlens.store import open_store

Invoke = Callable[..., Result]

pytestmark = pytest.mark.usefixtures("restore_capture")


def run_ids(output: str) -> list[str]:
    return re.findall(r"^   run (\S+)$", output, flags=re.MULTILINE)


def test_demo_in_the_current_folder_twice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTLENS_DB", raising=False)
    monkeypatch.setenv("AGENTLENS_CONFIG", str(tmp_path / "agentlens.toml"))
    (tmp_path / "agentlens.toml").write_text("", encoding="utf-8")
    first = CliRunner().invoke(app, ["demo"])
    assert first.exit_code == 0, first.output
    assert (tmp_path / "agentlens.db").is_file()
    second = CliRunner().invoke(app, ["demo"])
    assert second.exit_code == 0, second.output
    ids = run_ids(first.stdout) + run_ids(second.stdout)
    assert len(ids) == 8 and len(set(ids)) == 8
    store = open_store("sqlite:///agentlens.db")
    try:
        assert store.count_runs() == 8
        trace = store.get_trace(ids[1])
        assert [s.kind for s in trace.steps] == ["system", "tool", "llm"]
        assert trace.steps[1].name == "get_customer"
        assert trace.steps[1].output["id"] == "CUST-48213"
        assert trace.agent == "support-demo"
    finally:
        store.close()


def test_demo_scores_prints_findings_and_a_rate(cli: Invoke, db_url: str) -> None:
    result = cli("demo")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith(f"recording 4 demo runs of a support agent into {db_url}\n")
    ids = run_ids(out)
    assert len(ids) == 4
    # both built-in scorers are there: their findings must be printed (not "if registered")
    assert "CUST-48231 is not in the evidence; closest: CUST-48213 in step" in out
    assert "repeated_tool_call" in out
    assert "not available yet" not in result.stderr
    assert re.search(r"^hallucination rate: \d/4 runs flagged = \d+%  \(95% Wilson", out, re.M)
    assert f"agentlens --db {db_url} show {ids[1]}" in out
    store = open_store(db_url)
    try:
        scores = store.get_scores(ids[1])
        assert scores, "the demo stores its scores"
    finally:
        store.close()
    # What the demo recorded is what `show` shows.
    shown = cli("show", ids[1])
    assert "CUST-48231" in shown.stdout


def test_demo_records_even_when_capture_is_disabled_by_env(
    cli: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTLENS_DISABLED", "1")
    result = cli("demo")
    assert result.exit_code == 0, result.output
    assert len(run_ids(result.stdout)) == 4


def test_demo_with_an_unusable_store_is_one_error_line(cli: Invoke, tmp_path: Path) -> None:
    result = cli("demo", db=f"sqlite:///{tmp_path}/missing/dir/x.db")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ")
    assert result.stderr.count("\n") == 1
