"""The runs' content links as rows (``run_links``: SQLite migration 8, PostgreSQL migration 5),
over every backend: written with the run, right after a replace and a delete, filled for an
existing store by the migration, and what ``/api/runs?link=KIND:ID``'s page reads."""

from __future__ import annotations

from typing import Any

import pytest
from store_factories import make_score, make_trace

from agentlens.store import RunFilter, open_store
from agentlens.store._server import list_runs_page


def linked(
    store: Any, kind: str, item: str, where: RunFilter | None = None, **kw: Any
) -> list[str]:
    """Every run id of the link's pages, newest first, following the cursors (pages of 2)."""
    out: list[str] = []
    before = None
    while True:
        page, before = list_runs_page(store, where, before=before, limit=2, link=(kind, item), **kw)
        out += [s.id for s in page]
        if before is None:
            return out


def link_rows(store: Any) -> list[tuple[str, str, str]]:
    """``(kind, item_id, run_id)`` of every stored link row, as the store holds them."""
    if hasattr(store, "write"):  # PostgreSQL
        from agentlens.store._pg_text import dec

        rows = store.read(
            lambda c: c.execute("SELECT kind, item_id, run_id FROM run_links").fetchall()
        )
        return sorted((dec(k), dec(i), dec(r)) for k, i, r in rows)  # type: ignore[misc]
    rows = store._read(
        lambda c: c.execute("SELECT kind, item_id, run_id FROM run_links").fetchall()
    )
    return sorted(tuple(r) for r in rows)


def test_a_links_page_lists_the_items_runs_newest_first(store: Any) -> None:
    store.put_traces(
        [make_trace(i, links={"ticket": "T-1" if i % 3 == 0 else f"T-x{i}", "post": "p"})
         for i in range(1, 13)]
    )  # fmt: skip
    assert linked(store, "ticket", "T-1") == ["r00012", "r00009", "r00006", "r00003"]
    assert linked(store, "ticket", "T-x4") == ["r00004"]
    assert linked(store, "post", "p") == [f"r{i:05d}" for i in range(12, 0, -1)]
    assert linked(store, "ticket", "T-404") == []
    assert linked(store, "post", "T-1") == []  # the kind counts, not only the id
    # with the other filters: a window, an agent, flagged or not
    from datetime import timedelta

    from store_factories import T0

    window = RunFilter(start=T0 + timedelta(hours=4), end=T0 + timedelta(hours=10))
    assert linked(store, "ticket", "T-1", window) == ["r00009", "r00006"]
    assert linked(store, "ticket", "T-1", RunFilter(agent="nobody")) == []
    assert linked(store, "ticket", "T-1", RunFilter(flagged=False)) == [
        "r00012", "r00009", "r00006", "r00003",
    ]  # fmt: skip


def test_a_flagged_filter_and_a_link_together(store: Any) -> None:
    store.put_traces([make_trace(i, links={"ticket": "T-1"}) for i in range(1, 6)])
    store.put_traces([make_trace(9, links={"ticket": "T-2"})])
    store.put_scores([make_score(f"r{i:05d}") for i in (2, 4, 9)])  # flagged scores
    store.put_scores([make_score(f"r{i:05d}", passed=True) for i in (1, 3)])
    assert {s.id for s in store.list_runs(RunFilter(flagged=True))} == {
        "r00002",
        "r00004",
        "r00009",
    }
    assert linked(store, "ticket", "T-1", RunFilter(flagged=True)) == ["r00004", "r00002"]
    assert linked(store, "ticket", "T-2", RunFilter(flagged=True)) == ["r00009"]
    assert linked(store, "ticket", "T-1", RunFilter(flagged=False)) == [
        "r00005", "r00003", "r00001",
    ]  # fmt: skip


def test_replacing_a_run_moves_its_links_and_deleting_it_drops_them(store: Any) -> None:
    store.put_traces([make_trace(1, links={"ticket": "T-1", "post": "A"}), make_trace(2)])
    assert link_rows(store) == [("post", "A", "r00001"), ("ticket", "T-1", "r00001"),
                                ("ticket", "T-2", "r00002")]  # fmt: skip
    store.put_traces([make_trace(1, links={"ticket": "T-1", "post": "A"})])  # identical
    assert linked(store, "post", "A") == ["r00001"]
    store.put_traces([make_trace(1, links={"post": "B"}, output="changed")])  # replaced
    assert linked(store, "post", "A") == [] and linked(store, "ticket", "T-1") == []
    assert linked(store, "post", "B") == ["r00001"]
    store.put_traces([make_trace(1, links={}, output="no links now")])
    assert link_rows(store) == [("ticket", "T-2", "r00002")]
    store.delete_runs(["r00002"])
    assert link_rows(store) == [] and linked(store, "ticket", "T-2") == []


def test_links_hold_any_text(store: Any) -> None:
    odd = {'a"b': "x'y", "kind.with.dots": "1", "nul\x00kind": "v\x00w", "\x01lead": "\x01x"}
    store.put_traces([make_trace(1, links=odd), make_trace(2, links={"n": 7})])
    for kind, item in odd.items():
        assert linked(store, kind, item) == ["r00001"]
    assert linked(store, "n", "7") == ["r00002"]
    assert linked(store, "nul", "v") == [] and linked(store, "a", "x'y") == []


def _drop_links_table(store: Any, version: int) -> None:
    """Make ``store`` look as it did before its links migration (``version``): the later
    migrations run again too (they can)."""
    sql = ("DROP TABLE run_links", f"DELETE FROM _agentlens_migrations WHERE version >= {version}")
    if hasattr(store, "write"):
        store.write(lambda c: [c.execute(s) for s in sql])
    else:
        store._write(lambda c: [c.execute(s) for s in sql])


@pytest.mark.parametrize("backend", ["postgres", "sqlite-file"])  # a memory store cannot reopen
def test_the_migration_fills_the_links_of_stored_runs(store_url: str, backend: str) -> None:
    odd = {"ticket": "T-1", "nul\x00kind": "v\x00w", "\x01lead": "\x01x", 'q"': "1"}
    traces = [make_trace(1, links=odd), make_trace(2, links={"ticket": "T-1"}),
              make_trace(3, links={}), make_trace(4, started=None, links={"post": "P"})]  # fmt: skip
    store: Any = open_store(store_url)
    try:
        store.put_traces(traces)
        written = link_rows(store)
        version = 5 if backend == "postgres" else 8
        assert store.schema_version >= version
        _drop_links_table(store, version)
    finally:
        store.close()
    store = open_store(store_url)  # migrated again: the table filled from the runs' documents
    try:
        assert link_rows(store) == written
        assert len(written) == 6
        assert linked(store, "ticket", "T-1") == ["r00002", "r00001"]
        assert linked(store, "nul\x00kind", "v\x00w") == ["r00001"]
        assert linked(store, "post", "P") == ["r00004"]
    finally:
        store.close()
