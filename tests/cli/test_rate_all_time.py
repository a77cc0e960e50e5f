"""``--since all``: runs without a start time (as imported logs often are) can be rated."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from agentlens.model import Step, StepKind, Trace

Invoke = Callable[..., Result]  # the `cli` fixture of tests/cli/conftest.py


def _undated(run_id: str, answer: str) -> Trace:
    return Trace(
        id=run_id,
        agent="support",
        input="what is my customer id?",
        output=answer,
        steps=[Step(id="s1", kind=StepKind.TOOL, name="get_customer", output={"id": "CUST-48213"})],
    )


@pytest.fixture
def undated_store(cli: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    runs = [_undated("r-ok", "It is CUST-48213."), _undated("r-bad", "It is CUST-48231.")]
    path.write_text("".join(t.to_json() + "\n" for t in runs))
    assert cli("import", str(path)).exit_code == 0
    assert cli("score", "--scorer", "no_fabricated_refs").exit_code == 0


@pytest.mark.usefixtures("undated_store")
def test_undated_runs_are_outside_every_window_but_counted_with_since_all(cli: Invoke) -> None:
    windowed = cli("rate", "--json")
    assert json.loads(windowed.stdout)["scored"] == 0
    everything = json.loads(cli("rate", "--since", "all", "--json").stdout)
    assert (everything["runs"], everything["scored"], everything["flagged"]) == (2, 2, 1)
    assert everything["flagged_run_ids"] == ["r-bad"]


@pytest.mark.usefixtures("undated_store")
def test_the_empty_window_message_points_at_since_all(cli: Invoke) -> None:
    assert "--since all" in cli("rate").stderr


@pytest.mark.usefixtures("undated_store")
def test_gate_over_all_time(cli: Invoke) -> None:
    assert cli("gate", "--since", "all", "--max-rate", "0.6").exit_code == 0
    assert cli("gate", "--since", "all", "--max-rate", "0.4").exit_code == 1
    refused = cli(
        "gate",
        "--since",
        "all",
        "--max-rate",
        "0.4",
        "--baseline-since",
        "7d",
        "--max-increase",
        "0.1",
    )
    assert refused.exit_code == 2
    assert "not --since all" in refused.stderr
    mixed = cli("rate", "--since", "all", "--from", "2026-01-01")
    assert mixed.exit_code == 2 and "cannot be combined" in mixed.stderr
