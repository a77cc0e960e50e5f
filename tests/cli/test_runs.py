"""``agentlens runs`` and ``agentlens show`` end to end, on a real SQLite file."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import Result

from agentlens.model import FailureMode, Finding, Score, Step, StepKind, Trace, Verdict
from agentlens.store import open_store

Invoke = Callable[..., Result]

ANSWER = "Your customer ID is CUST-48231. Invoice INV-7781 is paid."
TOKEN_START = ANSWER.index("CUST-48231")


def support_run(run_id: str = "run-show", started: datetime | None = None) -> Trace:
    start = started or datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    return Trace(
        id=run_id,
        agent="support",
        name="customer id",
        started_at=start,
        ended_at=start + timedelta(seconds=3),
        input="What is my customer id? I'm jane.doe@acme.io",
        output=ANSWER,
        steps=[
            Step(id="a1", kind=StepKind.AGENT, name="lookup-agent"),
            Step(
                id="s1",
                parent_id="a1",
                kind=StepKind.TOOL,
                name="get_customer",
                input={"email": "jane.doe@acme.io"},
                output={"id": "CUST-48213", "name": "Jane Doe"},
            ),
            Step(
                id="s2",
                parent_id="a1",
                kind=StepKind.TOOL,
                name="get_invoice",
                input={"invoice_id": "INV-7781"},
                error="timeout",
            ),
            Step(
                id="s3",
                parent_id="s2",
                kind=StepKind.RETRIEVAL,
                name="search",
                output=["x"],
                attributes={"truncated": True},
            ),
            Step(id="s4", kind=StepKind.TEXT, output=ANSWER),
        ],
    )


def fabricated_score(run_id: str = "run-show") -> Score:
    return Score(
        run_id=run_id,
        scorer="no_fabricated_refs",
        version="1",
        passed=False,
        detail="ungrounded: CUST-48231",
        findings=[
            Finding(
                failure_mode=FailureMode.FABRICATED_GROUNDING,
                text="CUST-48231",
                start=TOKEN_START,
                end=TOKEN_START + 10,
                location="output",
                attributes={
                    "closest": {"text": "CUST-48213", "step_id": "s1", "step_name": "get_customer"}
                },
            )
        ],
    )


@pytest.fixture
def stored(db_url: str) -> None:
    store = open_store(db_url)
    try:
        store.put_traces(
            [
                support_run(),
                support_run("run-other", datetime(2026, 3, 2, tzinfo=UTC)).model_copy(
                    update={"agent": "billing", "name": "other"}
                ),
            ]
        )
        store.put_scores(
            [
                fabricated_score(),
                Score(run_id="run-show", scorer="repeated_tool_calls", version="1", passed=True),
                Score(run_id="run-other", scorer="repeated_tool_calls", version="1", passed=True),
            ]
        )
    finally:
        store.close()


# -- runs -----------------------------------------------------------------------------------


@pytest.mark.usefixtures("stored")
def test_runs_table(cli: Invoke) -> None:
    result = cli("runs")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "id",
        "┃",
        "agent",
        "┃",
        "name",
        "┃",
        "started",
        "┃",
        "steps",
        "┃",
        "status",
        "┃",
        "verdict",
        "┃",
        "reason",
    ]
    assert lines[2].split("│")[0].strip() == "run-other"  # newest first
    assert "passed (1)" in lines[2]
    assert lines[3].split("│")[0].strip() == "run-show"
    assert "2026-03-01 10:00:00Z" in lines[3]
    assert "flagged: no_fabricated_refs" in lines[3]


@pytest.mark.usefixtures("stored")
def test_runs_json_lines(cli: Invoke) -> None:
    result = cli("runs", "--json")
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["id"] for r in rows] == ["run-other", "run-show"]
    show = rows[1]
    assert show == {
        "id": "run-show",
        "project": "default",
        "agent": "support",
        "name": "customer id",
        "status": "ok",
        "started_at": "2026-03-01T10:00:00Z",
        "ended_at": "2026-03-01T10:00:03Z",
        "step_count": 5,
        "has_output": True,
        "metadata": {},
        "verdict": "flagged",
        "scores": {"no_fabricated_refs": "flagged", "repeated_tool_calls": "passed"},
        "hallucination_detected": True,
        "hallucination_reason": "fabricated_grounding: 'CUST-48231'",
        "failure_modes": ["fabricated_grounding"],
        "flag_state": "flagged",
        "review_pending": True,
        "reviewed_at": None,
    }


@pytest.mark.usefixtures("stored")
def test_runs_filters(cli: Invoke) -> None:
    def ids(*args: str) -> list[str]:
        return [json.loads(x)["id"] for x in cli("runs", "--json", *args).stdout.splitlines()]

    assert ids("--agent", "support") == ["run-show"]
    assert ids("--limit", "1") == ["run-other"]
    assert ids("--from", "2026-03-01T12:00:00Z") == ["run-other"]
    assert ids("--to", "2026-03-01T12:00:00Z") == ["run-show"]
    assert ids("--since", "1h") == []


def test_runs_on_an_empty_store(cli: Invoke, db_url: str) -> None:
    open_store(db_url).close()  # a read command never creates the store
    result = cli("runs")
    assert (result.exit_code, result.stdout) == (0, "no runs match\n")
    assert cli("runs", "--json").stdout == ""


def test_runs_bad_since(cli: Invoke) -> None:
    result = cli("runs", "--since", "soon")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: bad --since 'soon'")


def test_unscored_run_has_no_verdict(cli: Invoke, db_url: str) -> None:
    store = open_store(db_url)
    try:
        store.put_traces([support_run()])
    finally:
        store.close()
    (row,) = [json.loads(x) for x in cli("runs", "--json").stdout.splitlines()]
    assert (row["verdict"], row["scores"]) == (None, {})


# -- show -----------------------------------------------------------------------------------


@pytest.mark.usefixtures("stored")
def test_show_tree_answer_and_findings_in_place(cli: Invoke) -> None:
    result = cli("show", "run-show")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "HALLUCINATION DETECTED: fabricated_grounding: 'CUST-48231'"  # reason first
    assert lines[1].strip().startswith("1. [fabricated_grounding]")
    assert lines[2] == "run run-show"
    steps = lines[lines.index("steps (5)") + 1 : lines.index("answer")]
    assert [line.split(" ", 1)[0] for line in (s.strip(" │├└─") for s in steps)] == [
        "a1",
        "s1",
        "s2",
        "s3",
        "s4",
    ]
    assert steps[0].startswith("  ├─ a1 agent lookup-agent")
    assert steps[1].startswith('  │  ├─ s1 tool get_customer  in: {"email": "jane.doe@acme.io"}')
    assert steps[2].startswith("  │  └─ s2 tool get_invoice")
    assert "error: timeout" in steps[2]
    assert steps[3].startswith("  │     └─ s3 retrieval search")
    assert "(output truncated)" in steps[3]
    assert steps[4].startswith("  └─ s4 text")
    assert lines[lines.index("answer") + 1] == f"  {ANSWER}"
    assert (
        "      • fabricated_grounding: CUST-48231 is not in the evidence; "
        "closest: CUST-48213 in step s1 get_customer"
    ) in lines
    assert (
        f"        in the answer, chars {TOKEN_START}-{TOKEN_START + 10}: "
        "Your customer ID is »CUST-48231«. Invoice INV-7781 is paid."
    ) in lines
    assert "  ✗ no_fabricated_refs v1: flagged — ungrounded: CUST-48231" in lines
    assert "  ✓ repeated_tool_calls v1: passed" in lines


@pytest.mark.usefixtures("stored")
def test_show_json(cli: Invoke) -> None:
    result = cli("show", "run-show", "--json")
    doc = json.loads(result.stdout)
    scores = doc.pop("scores")
    review = doc.pop("review")
    assert review["hallucination_detected"] is True
    assert [f["text"] for f in review["findings"]] == ["CUST-48231"]
    assert Trace.model_validate(doc) == support_run()
    assert {s["scorer"]: s["verdict"] for s in scores} == {
        "no_fabricated_refs": "flagged",
        "repeated_tool_calls": "passed",
    }
    (finding,) = next(s for s in scores if s["scorer"] == "no_fabricated_refs")["findings"]
    assert finding["text"] == "CUST-48231"
    assert finding["attributes"]["closest"]["text"] == "CUST-48213"


def test_show_unscored_run(cli: Invoke, db_url: str) -> None:
    store = open_store(db_url)
    try:
        store.put_traces([support_run()])
    finally:
        store.close()
    result = cli("show", "run-show")
    assert "  not scored yet (run `agentlens score`)" in result.stdout.splitlines()


def test_show_unknown_run(cli: Invoke, db_url: str) -> None:
    open_store(db_url).close()
    result = cli("show", "nope")
    assert result.exit_code == 2
    assert result.stderr == "error: no run with id 'nope'\n"


def test_show_survives_odd_traces(cli: Invoke, db_url: str) -> None:
    # A parent cycle, a self-parent, a missing parent, an empty answer and a finding whose
    # span does not fit the answer: all shown, nothing crashes.
    odd = Trace(
        id="odd",
        output=None,
        steps=[
            Step(id="x", parent_id="y", kind=StepKind.TOOL),
            Step(id="y", parent_id="x", kind=StepKind.TOOL),
            Step(
                id="z", parent_id="z", kind=StepKind.TEXT, output="[bold]not markup[/bold] :smile:"
            ),
            Step(id="w", parent_id="gone", kind=StepKind.USER, output="hi"),
        ],
    )
    store = open_store(db_url)
    try:
        store.put_traces([odd])
        store.put_scores(
            [
                Score(
                    run_id="odd",
                    scorer="s",
                    version="1",
                    passed=False,
                    verdict=Verdict.UNVERIFIABLE,
                    findings=[
                        Finding(
                            failure_mode=FailureMode.PARAMETRIC_LEAKAGE,
                            text="42",
                            start=500,
                            end=502,
                            unverifiable=True,
                        )
                    ],
                )
            ]
        )
    finally:
        store.close()
    result = cli("show", "odd")
    assert result.exit_code == 0
    out = result.stdout
    for step_id in ("x", "y", "z", "w"):
        assert f" {step_id} " in out
    assert "[bold]not markup[/bold] :smile:" in out
    assert "  (no answer)" in out
    assert "? parametric_leakage: 42 could not be confirmed in the evidence" in out
