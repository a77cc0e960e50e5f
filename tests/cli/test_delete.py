"""``agentlens delete``, and ``score``/``export`` going on past a run the store cannot read."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from typer.testing import Result

from agentlens.model import Trace
from agentlens.store import SQLiteStore, open_store

Invoke = Callable[..., Result]
T0 = datetime.now(UTC) - timedelta(days=3)


def _seed(db_url: str, *, corrupt: str | None = None) -> None:
    store = open_store(db_url)
    try:
        store.put_traces(
            [
                Trace(id="a1", agent="alpha", started_at=T0, output="one", input="q"),
                Trace(id="a2", agent="alpha", started_at=T0 + timedelta(days=2), output="two"),
                Trace(id="b1", agent="beta", started_at=T0 + timedelta(hours=1), output="three"),
            ]
        )
        if corrupt is not None:
            assert isinstance(store, SQLiteStore)
            store._write(
                lambda c: c.execute("UPDATE runs SET doc = '{oops' WHERE id = ?", (corrupt,))
            )
    finally:
        store.close()


def _ids(db_url: str) -> list[str]:
    store = open_store(db_url)
    try:
        return sorted(r.id for r in store.list_runs())
    finally:
        store.close()


def test_delete_by_id_removes_runs_and_names_unknown_ids(cli: Invoke, db_url: str) -> None:
    _seed(db_url)
    result = cli("delete", "a1", "nope", "b1")
    assert result.exit_code == 1
    assert "deleted 2 runs" in result.stdout
    assert "no run with id 'nope'" in result.stderr
    assert _ids(db_url) == ["a2"]


def test_delete_by_filter_asks_first(cli: Invoke, db_url: str) -> None:
    _seed(db_url)
    refused = cli("delete", "--agent", "alpha", input="n\n")
    assert refused.exit_code == 1
    assert "delete 2 runs (--agent alpha)" in refused.stderr
    assert _ids(db_url) == ["a1", "a2", "b1"]
    agreed = cli("delete", "--agent", "alpha", "--since", "2d", input="y\n")
    assert agreed.exit_code == 0, agreed.output
    assert "deleted 1 run" in agreed.stdout
    assert _ids(db_url) == ["a1", "b1"]
    assert cli("delete", "--to", (T0 + timedelta(hours=2)).isoformat(), "--yes").exit_code == 0
    assert _ids(db_url) == []


def test_delete_needs_ids_or_a_filter_not_both(cli: Invoke, db_url: str) -> None:
    _seed(db_url)
    assert cli("delete").exit_code == 2
    assert cli("delete", "a1", "--agent", "alpha").exit_code == 2
    assert _ids(db_url) == ["a1", "a2", "b1"]


def test_export_and_score_report_an_unreadable_run_and_go_on(cli: Invoke, db_url: str) -> None:
    _seed(db_url, corrupt="a2")
    exported = cli("export")
    assert exported.exit_code == 1
    assert [json.loads(line)["id"] for line in exported.stdout.splitlines()] == ["a1", "b1"]
    assert "skipped unreadable run 'a2'" in exported.stderr
    scored = cli("score", "--scorer", "no_fabricated_refs", "--json")
    assert scored.exit_code == 1
    assert sorted(json.loads(line)["run_id"] for line in scored.stdout.splitlines()) == [
        "a1",
        "b1",
    ]
    assert "skipped unreadable run 'a2'" in scored.stderr
    shown = cli("show", "a2")
    assert shown.exit_code == 2 and "agentlens delete a2" in shown.stderr
    assert cli("delete", "a2").exit_code == 0
    assert cli("export").exit_code == 0
