"""The review commands end to end through the CLI runner: import reviews, runs --flagged/--mode,
show (reason first), content, review queue/verdict/precision/deliveries/run."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentlens.model import Step, Trace

Invoke = Callable[..., Any]


def _run(run_id: str, order: str, post: str, agent: str = "support") -> Trace:
    return Trace(
        id=run_id,
        agent=agent,
        input="where is my order ORD-1234?",
        output=f"Your order {order} ships on 2026-03-04.",
        links={"blog_post": post},
        started_at=f"2026-03-0{run_id[-1]}T10:00:00Z",
        steps=[
            Step(
                id="s1",
                kind="tool",
                name="get_order",
                input={"id": "ORD-1234"},
                output={"order": "ORD-1234", "ships": "2026-03-04"},
            )
        ],
    )


@pytest.fixture
def runs_file(tmp_path: Path) -> Path:
    path = tmp_path / "runs.jsonl"
    runs = [
        _run("r1", "ORD-9999", "123"),
        _run("r2", "ORD-1234", "124"),
        _run("r3", "ORD-7777", "125", agent="billing"),
    ]
    path.write_text("".join(json.dumps(t.to_dict()) + "\n" for t in runs), encoding="utf-8")
    return path


def _lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_import_reviews_and_the_flags_show_everywhere(cli: Invoke, runs_file: Path) -> None:
    result = cli("import", str(runs_file))
    assert result.exit_code == 0, result.output
    assert "reviewed 3 run(s): 2 flagged" in result.stderr

    flagged = _lines(cli("runs", "--flagged", "--json").stdout)
    assert [r["id"] for r in flagged] == ["r3", "r1"]
    assert flagged[1]["hallucination_detected"] is True
    assert flagged[1]["hallucination_reason"] == (
        "fabricated_grounding: ORD-9999 is not in the evidence"
    )
    assert flagged[1]["failure_modes"] == ["fabricated_grounding"]
    assert flagged[1]["review_pending"] is False
    every = _lines(cli("runs", "--json").stdout)
    clean = next(r for r in every if r["id"] == "r2")
    assert clean["hallucination_detected"] is False and clean["flag_state"] == "clean"
    by_mode = _lines(
        cli("runs", "--mode", "fabricated_grounding", "--agent", "billing", "--json").stdout
    )
    assert [r["id"] for r in by_mode] == ["r3"]
    assert cli("runs", "--mode", "excessive_steps", "--json").stdout == ""
    bad = cli("runs", "--mode", "lying")
    assert bad.exit_code == 2 and "unknown --mode 'lying'" in bad.stderr

    shown = cli("show", "r1").stdout.splitlines()
    assert (
        shown[0] == "HALLUCINATION DETECTED: fabricated_grounding: ORD-9999 is not in the evidence"
    )
    assert shown[1].strip().startswith("1. [fabricated_grounding]")
    doc = json.loads(cli("show", "r1", "--json").stdout)
    assert doc["review"]["hallucination_reason"].startswith("fabricated_grounding")
    assert doc["review"]["findings"][0]["n"] == 1

    (content,) = _lines(cli("content", "blog_post", "123", "--json").stdout)
    assert content["hallucination_suspected"] is True
    assert content["flags"] == ["hallucination_suspected"]
    assert content["runs"][0]["run_id"] == "r1"
    assert "hallucination_suspected" in cli("content", "blog_post", "123").stdout
    (clean_post,) = _lines(cli("content", "blog_post", "124", "--json").stdout)
    assert clean_post["hallucination_suspected"] is False and clean_post["runs"] == []
    listed = _lines(cli("content", "--flagged", "--json").stdout)
    assert {c["id"] for c in listed} == {"123", "125"}

    queue = _lines(cli("review", "queue", "--json").stdout)
    assert [r["id"] for r in queue] == ["r1", "r3"]  # oldest first
    assert [
        r["id"] for r in _lines(cli("review", "queue", "--agent", "billing", "--json").stdout)
    ] == ["r3"]

    done = cli(
        "review",
        "verdict",
        "r1",
        "false_positive",
        "--finding",
        "1",
        "--note",
        "in CRM",
        "--by",
        "ana",
    )
    assert done.exit_code == 0, done.output
    cli("review", "verdict", "r3", "confirmed")
    (content,) = _lines(cli("content", "blog_post", "123", "--json").stdout)
    assert content["hallucination_suspected"] is False and content["runs"][0]["dismissed"] is True
    assert cli("review", "queue", "--json").stdout == ""
    precision = _lines(cli("review", "precision", "--since", "30d", "--json").stdout)
    # --since all: every verdict, as rate and gate take it
    assert _lines(cli("review", "precision", "--since", "all", "--json").stdout) == precision
    scorer = next(p for p in precision if p["by"] == "scorer")
    assert scorer["scorer"] == "no_fabricated_refs"
    assert (scorer["confirmed"], scorer["false_positive"], scorer["precision"]) == (1, 1, 0.5)
    assert 0 < scorer["low"] < 0.5 < scorer["high"] < 1
    assert "verdict: false_positive by ana: in CRM" in cli("show", "r1").stdout


def test_verdict_errors_are_one_line(cli: Invoke, runs_file: Path) -> None:
    cli("import", str(runs_file))
    for args, message in [
        (("r2", "confirmed"), "not flagged"),
        (("r1", "confirmed", "--finding", "5"), "no finding 5"),
        (("nope", "confirmed"), "nope"),
        (("r1", "maybe"), "confirmed or false_positive"),
    ]:
        result = cli("review", "verdict", *args)
        assert result.exit_code == 2 and message in result.stderr, result.output


def test_no_review_leaves_runs_pending_and_review_run_reviews_them(
    cli: Invoke, runs_file: Path
) -> None:
    result = cli("import", "--no-review", str(runs_file))
    assert "reviewed" not in result.stderr
    pending = _lines(cli("runs", "--json").stdout)
    assert all(r["review_pending"] and r["flag_state"] is None for r in pending)
    assert cli("runs", "--flagged", "--json").stdout == ""
    out = cli("review", "run").stdout
    assert "reviewed 3 run(s): 2 flagged" in out and "0 still pending" in out
    assert len(_lines(cli("runs", "--flagged", "--json").stdout)) == 2


def test_content_needs_kind_and_id_or_flagged(cli: Invoke) -> None:
    assert cli("content").exit_code == 2
    assert cli("content", "blog_post").exit_code == 2
    assert cli("content", "blog_post", "1", "--flagged").exit_code == 2
    assert cli("content", "--flagged").stdout.strip() == "no content is flagged"


def test_deliveries_listing(
    cli: Invoke, runs_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "agentlens.toml"
    config.write_text(
        '[review]\nwebhook = "http://127.0.0.1:9/hook"\nwebhook_attempts = 1\n'
        "webhook_timeout = 0.5\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("AGENTLENS_CONFIG", str(config))
    cli("import", str(runs_file))
    rows = _lines(cli("review", "deliveries", "--json").stdout)
    assert len(rows) == 2 and {r["status"] for r in rows} == {"failed"}
    assert all(r["attempts"] == 1 and r["last_error"] for r in rows)
    assert len(_lines(cli("review", "deliveries", "--status", "failed", "--json").stdout)) == 2
    assert "failed" in cli("review", "deliveries").stdout
    assert cli("review", "deliveries", "--status", "lost").exit_code == 2


def test_a_bad_review_config_fails_the_import_before_it_writes(
    cli: Invoke, runs_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "agentlens.toml"
    config.write_text('[review]\nscorers = ["no_such"]\n', encoding="utf-8")
    monkeypatch.setenv("AGENTLENS_CONFIG", str(config))
    result = cli("import", str(runs_file))
    assert result.exit_code == 2
    assert str(config) in result.stderr and "review.scorers" in result.stderr
    monkeypatch.delenv("AGENTLENS_CONFIG")
    assert cli("runs", "--json").stdout == ""


def test_review_run_says_when_webhook_attempts_failed(
    cli: Invoke, runs_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a webhook that refuses, `review run` said "0 webhook delivery(ies) sent" and nothing
    of the two attempts that failed."""
    config = tmp_path / "agentlens.toml"
    config.write_text(
        '[review]\nwebhook = "http://127.0.0.1:9/hook"\nwebhook_timeout = 0.5\n', encoding="utf-8"
    )
    monkeypatch.setenv("AGENTLENS_CONFIG", str(config))
    cli("import", "--no-review", str(runs_file))
    out = cli("review", "run").stdout
    assert "reviewed 3 run(s): 2 flagged; 0 webhook delivery(ies) sent" in out
    assert "(2 attempt(s) failed: agentlens review deliveries)" in out
    assert "0 still pending" in out
