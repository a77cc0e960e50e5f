"""The window of ``rate`` and ``gate`` when only ``--to`` is given: the default start (7 days
ago) still applies, and an end before it is an error that says so."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import Result

from agentlens.store import open_store

Invoke = Callable[..., Result]  # the `cli` fixture of tests/cli/conftest.py


@pytest.mark.parametrize("command", [["rate"], ["gate", "--max-rate", "0.5"]])
def test_to_before_the_default_start_names_the_default(cli: Invoke, command: list[str]) -> None:
    result = cli(*command, "--to", "2020-01-01")
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("error: empty time window: --to '2020-01-01' is not after the start")
    assert "7d ago when neither --since nor --from is given" in line


def test_to_after_the_default_start_ends_the_last_seven_days(cli: Invoke, db_url: str) -> None:
    open_store(db_url).close()  # an empty store
    end = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%d")
    report = json.loads(cli("rate", "--to", end, "--json").stdout)
    start = datetime.fromisoformat(report["start"].replace("Z", "+00:00"))
    assert timedelta(days=6.9) < datetime.now(UTC) - start < timedelta(days=7.1)
    assert report["end"].startswith(end)
