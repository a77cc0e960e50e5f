"""The CLI on a PostgreSQL store: ``--db`` and ``AGENTLENS_DB`` take a postgresql:// URL, and a bad
URL or an unreachable server is one line naming the host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_runs import support_run

from agentlens.store import open_store


def test_import_then_runs_on_postgres(cli, pg_url: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "runs.jsonl"
    path.write_text(support_run("pg-1").to_json() + "\n" + support_run("pg-2").to_json() + "\n")
    result = cli("import", str(path), db=pg_url)
    assert result.exit_code == 0, result.output
    listed = cli("runs", "--json", db=pg_url)
    assert listed.exit_code == 0, listed.output
    assert sorted(json.loads(line)["id"] for line in listed.output.splitlines()) == ["pg-1", "pg-2"]
    store = open_store(pg_url)
    try:
        assert store.get_trace("pg-1") == support_run("pg-1")
    finally:
        store.close()


def test_agentlens_db_takes_a_postgres_url(
    cli, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    store = open_store(pg_url)
    store.put_traces([support_run("from-env")])
    store.close()
    monkeypatch.setenv("AGENTLENS_DB", pg_url)
    from typer.testing import CliRunner

    from agentlens.cli import app

    result = CliRunner().invoke(app, ["runs", "--json"])
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["id"] for line in result.output.splitlines()] == ["from-env"]


def test_configure_takes_a_postgres_url(pg_url: str, restore_capture: None) -> None:
    import agentlens

    agentlens.configure(db=pg_url)
    with agentlens.run(name="configured", agent="support") as r:
        r.output = "done"
    assert agentlens.flush(10)
    store = open_store(pg_url)
    try:
        (summary,) = store.list_runs()
        assert (summary.name, summary.agent) == ("configured", "support")
    finally:
        store.close()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "postgresql://postgres@127.0.0.1:1/test",
            "error: postgresql://postgres@127.0.0.1:1/test: cannot connect to the PostgreSQL"
            " server at 127.0.0.1: ",
        ),
        (
            "postgresql://bob:s3cret@nosuchhost.invalid/test",
            "error: postgresql://bob@nosuchhost.invalid/test: cannot connect to the PostgreSQL"
            " server at nosuchhost.invalid: ",
        ),
        (
            "postgresql://h:99999/test",
            "error: postgresql://h:99999/test: not a valid PostgreSQL URL",
        ),
        ("postgresql://h/test?schema=a-b", "schema 'a-b' is not a plain SQL name"),
        ("postgresql://h/test?pool_max=0", "pool_max must be a positive integer"),
    ],
)
def test_a_bad_url_or_unreachable_server_is_one_line(cli, url: str, expected: str) -> None:  # type: ignore[no-untyped-def]
    result = cli("runs", db=url)
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert expected in lines[0]
    assert "s3cret" not in result.output
