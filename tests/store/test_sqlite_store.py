"""What is particular to the SQLite backend: URLs, WAL, opening errors, migrations, locking."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from store_factories import make_score, make_trace

from agentlens.errors import ConfigError, SchemaVersionError, StoreError, UnreadableRunError
from agentlens.model import Trace
from agentlens.store import RunFilter, SQLiteStore, open_store
from agentlens.store import _migrations as migrations
from agentlens.store._sqlite import (
    _ROWS_PER_INSERT,
    NO_TIME,
    _insert_rows,
    from_us,
    parse_sqlite_url,
    to_us,
)


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


class TestURLs:
    def test_relative_absolute_and_memory(self) -> None:
        assert parse_sqlite_url("sqlite:///data/a.db") == Path("data/a.db")
        assert parse_sqlite_url("sqlite:////var/a.db") == Path("/var/a.db")
        assert parse_sqlite_url("sqlite:///:memory:") is None
        assert parse_sqlite_url("sqlite://") is None
        assert parse_sqlite_url("SQLITE:///a.db") == Path("a.db")
        assert parse_sqlite_url("sqlite:///~/a.db") == Path.home() / "a.db"

    @pytest.mark.parametrize(
        "url", ["postgresql://x/y", "sqlite://host/a.db", "sqlite:///a.db?mode=ro", "sqlite:///"]
    )
    def test_bad_urls(self, url: str) -> None:
        with pytest.raises(ConfigError):
            parse_sqlite_url(url)

    def test_a_relative_path_is_relative_to_the_working_directory_at_open(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        (tmp_path / "sub").mkdir()
        monkeypatch.chdir(tmp_path)
        with SQLiteStore("sqlite:///sub/runs.db") as store:
            monkeypatch.chdir(tmp_path / "sub")  # later reads still use the same file
            store.put_traces([make_trace(1)])
            assert store.get_trace("r00001").id == "r00001"
        assert (tmp_path / "sub" / "runs.db").is_file()
        assert not (tmp_path / "sub" / "sub").exists()

    def test_a_bare_path_is_a_sqlite_file(self, tmp_path: Path) -> None:
        store = open_store(str(tmp_path / "bare.db"))
        try:
            assert isinstance(store, SQLiteStore)
        finally:
            store.close()
        assert (tmp_path / "bare.db").is_file()

    def test_memory_stores_are_private(self) -> None:
        with SQLiteStore("sqlite:///:memory:") as a, SQLiteStore("sqlite:///:memory:") as b:
            a.put_traces([make_trace(1)])
            assert a.count_runs() == 1
            assert b.count_runs() == 0


def test_times_are_exact_microseconds() -> None:
    t = make_trace(1).started_at
    assert t is not None
    assert from_us(to_us(t)) == t
    assert to_us(None) is None
    assert to_us(t.replace(tzinfo=None)) == to_us(t)


class TestOpening:
    def test_file_store_uses_wal(self, tmp_path: Path) -> None:
        with SQLiteStore(f"sqlite:///{tmp_path}/a.db"):
            assert raw(tmp_path / "a.db").execute("PRAGMA journal_mode").fetchone() == ("wal",)

    def test_a_file_that_is_not_a_database(self, tmp_path: Path) -> None:
        path = tmp_path / "notes.db"
        path.write_text("this is not a database, just some text that is long enough" * 20)
        with pytest.raises(StoreError, match=rf"{path}: cannot open the store: .*not a database"):
            SQLiteStore(f"sqlite:///{path}")

    def test_a_missing_folder(self, tmp_path: Path) -> None:
        path = tmp_path / "nowhere" / "a.db"
        with pytest.raises(StoreError, match=r"nowhere/a\.db: cannot open .*does not exist"):
            SQLiteStore(f"sqlite:///{path}")

    def test_data_survives_close_and_reopen(self, tmp_path: Path) -> None:
        url = f"sqlite:///{tmp_path}/a.db"
        trace = make_trace(1, steps=7)
        with SQLiteStore(url) as store:
            store.put_traces([trace])
            store.put_scores([make_score(trace.id)])
        with SQLiteStore(url) as store:
            assert store.get_trace(trace.id).to_json() == trace.to_json()
            assert len(store.get_scores(trace.id)) == 1


class TestMigrations:
    def test_a_new_store_records_every_migration_once(self, tmp_path: Path) -> None:
        url = f"sqlite:///{tmp_path}/a.db"
        SQLiteStore(url).close()
        with SQLiteStore(url) as store:
            assert store.schema_version == migrations.latest_version()
        rows = raw(tmp_path / "a.db").execute(
            "SELECT version, name FROM _agentlens_migrations ORDER BY version"
        )
        assert [(v, n) for v, n in rows] == [(m.version, m.name) for m in migrations.MIGRATIONS]

    def test_pending_migrations_are_applied_on_open(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        url = f"sqlite:///{tmp_path}/a.db"
        with SQLiteStore(url) as store:
            store.put_traces([make_trace(1)])
        newer = migrations.Migration(
            migrations.latest_version() + 1,
            "runs.reviewed",
            ("ALTER TABLE runs ADD COLUMN reviewed INTEGER NOT NULL DEFAULT 0",),
        )
        monkeypatch.setattr(migrations, "MIGRATIONS", (*migrations.MIGRATIONS, newer))
        with SQLiteStore(url) as store:
            assert store.schema_version == newer.version
            assert store.get_trace("r00001").id == "r00001"
        assert raw(tmp_path / "a.db").execute("SELECT reviewed FROM runs").fetchall() == [(0,)]

    def test_a_failing_migration_leaves_the_store_as_it_was(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        url = f"sqlite:///{tmp_path}/a.db"
        SQLiteStore(url).close()
        broken = migrations.Migration(
            migrations.latest_version() + 1,
            "broken",
            ("CREATE TABLE extra (x INTEGER)", "ALTER TABLE no_such_table ADD COLUMN y"),
        )
        monkeypatch.setattr(migrations, "MIGRATIONS", (*migrations.MIGRATIONS, broken))
        with pytest.raises(StoreError, match="no_such_table"):
            SQLiteStore(url)
        monkeypatch.undo()
        with SQLiteStore(url) as store:
            assert store.schema_version == migrations.latest_version()
        tables = {r[0] for r in raw(tmp_path / "a.db").execute("SELECT name FROM sqlite_master")}
        assert "extra" not in tables

    def test_a_store_from_a_newer_agentlens_is_refused(self, tmp_path: Path) -> None:
        url = f"sqlite:///{tmp_path}/a.db"
        SQLiteStore(url).close()
        future = migrations.latest_version() + 5
        raw(tmp_path / "a.db").execute(
            "INSERT INTO _agentlens_migrations VALUES (?, 'from the future', '2030-01-01')",
            (future,),
        )
        with pytest.raises(SchemaVersionError, match=rf"a\.db: .*schema version {future}.*upgrade"):
            SQLiteStore(url)


class TestSchema:
    """The columns other code (rates, SQL users) relies on are filled in as documented."""

    def test_run_step_and_score_rows(self, tmp_path: Path) -> None:
        with SQLiteStore(f"sqlite:///{tmp_path}/a.db") as store:
            store.put_traces([make_trace(4, steps=2), make_trace(5, started=None, output=None)])
            store.put_scores([make_score("r00004")])
        db = raw(tmp_path / "a.db")
        rows = db.execute(
            "SELECT id, agent, release, has_output, step_count, started_at, sort_at FROM runs"
            " ORDER BY id"
        ).fetchall()
        t4 = make_trace(4).started_at
        assert rows == [
            ("r00004", "support", "v1", 1, 2, to_us(t4), to_us(t4)),
            ("r00005", "support", "v2", 0, 3, None, NO_TIME),
        ]
        doc = db.execute("SELECT doc FROM runs WHERE id = 'r00004'").fetchone()[0]
        assert doc.startswith('{"schema_version":1,"id":"r00004",')
        assert '"steps"' not in doc
        assert db.execute(
            "SELECT json_extract(doc, '$.metadata.tenant') FROM runs WHERE id = 'r00004'"
        ).fetchone() == ("acme",)
        steps = db.execute(
            "SELECT s.key, json_extract(s.value, '$.id'), json_extract(s.value, '$.kind'),"
            " json_extract(s.value, '$.name')"
            " FROM runs r, json_each(r.steps) s WHERE r.id = 'r00004' ORDER BY s.key"
        ).fetchall()
        assert steps == [(0, "s0", "retrieval", "tool_0"), (1, "s1", "tool", "tool_1")]
        score = db.execute(
            "SELECT verdict, passed, finding_count, run_agent, run_release, run_started_at"
            " FROM scores"
        ).fetchall()
        assert score == [("flagged", 0, 1, "support", "v1", to_us(t4))]
        assert db.execute("SELECT mode, findings FROM score_modes").fetchall() == [
            ("fabricated_grounding", 1)
        ]

    def test_rescoring_replaces_the_modes(self, tmp_path: Path) -> None:
        with SQLiteStore(f"sqlite:///{tmp_path}/a.db") as store:
            store.put_traces([make_trace(1)])
            store.put_scores([make_score("r00001")])
            store.put_scores([make_score("r00001", passed=True)])
        assert raw(tmp_path / "a.db").execute("SELECT count(*) FROM score_modes").fetchone() == (0,)


class TestConcurrency:
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[SQLiteStore]:
        with SQLiteStore(f"sqlite:///{tmp_path}/a.db", timeout_s=0.2) as s:
            yield s

    def _hold_a_write_open(self, store: SQLiteStore) -> tuple[threading.Thread, threading.Event]:
        """Start a put_traces on a thread that stops midway, inside its transaction."""
        inside = threading.Event()
        release = threading.Event()

        def runs() -> Iterator[Trace]:
            yield from (make_trace(i) for i in range(100, 400))  # a whole chunk is written
            inside.set()
            assert release.wait(10)
            yield make_trace(999)

        thread = threading.Thread(target=store.put_traces, args=(runs(),))
        thread.start()
        assert inside.wait(10)
        return thread, release

    def test_reads_are_not_blocked_by_an_open_write(self, store: SQLiteStore) -> None:
        store.put_traces([make_trace(1)])
        thread, release = self._hold_a_write_open(store)
        try:
            # the reader neither waits for the writer nor sees its uncommitted runs
            assert store.get_trace("r00001").id == "r00001"
            assert store.count_runs() == 1
            assert [t.id for t in store.query_traces()] == ["r00001"]
        finally:
            release.set()
            thread.join()
        assert store.count_runs() == 302

    def test_a_second_writer_waits_then_fails_clearly(
        self, store: SQLiteStore, tmp_path: Path
    ) -> None:
        thread, release = self._hold_a_write_open(store)
        try:
            with SQLiteStore(f"sqlite:///{tmp_path}/a.db", timeout_s=0.05) as other:
                with pytest.raises(StoreError, match="locked by another writer"):
                    other.put_traces([make_trace(1)])
                assert other.count_runs() == 0  # but it can read
        finally:
            release.set()
            thread.join()


def _corrupt(store: SQLiteStore, run_id: str) -> None:
    store._write(lambda c: c.execute("UPDATE runs SET doc = '{broken' WHERE id = ?", (run_id,)))


def test_an_unreadable_run_is_named_and_can_be_passed_over(tmp_path: Path) -> None:
    with SQLiteStore(f"sqlite:///{tmp_path / 'a.db'}") as store:
        store.put_traces([make_trace(i) for i in range(1, 4)])
        _corrupt(store, "r00002")
        with pytest.raises(UnreadableRunError) as caught:
            store.get_trace("r00002")
        assert caught.value.run_id == "r00002"
        assert "agentlens delete r00002" in str(caught.value)
        with pytest.raises(UnreadableRunError):
            list(store.query_traces())
        skipped: list[UnreadableRunError] = []
        got = [t.id for t in store.query_traces(newest_first=False, on_unreadable=skipped.append)]
        assert got == ["r00001", "r00003"]
        assert [e.run_id for e in skipped] == ["r00002"]
        # A listing still shows it (with no metadata), and it can be deleted.
        assert [r.id for r in store.list_runs(newest_first=False)] == ["r00001", "r00002", "r00003"]
        assert store.delete_runs(["r00002"]) == 1
        assert [t.id for t in store.query_traces()] == ["r00003", "r00001"]


@pytest.mark.parametrize("rows", [0, 1, _ROWS_PER_INSERT, 2 * _ROWS_PER_INSERT + 3])
def test_multi_row_inserts_write_every_row_in_order(rows: int) -> None:
    """``_insert_rows`` (what ``put_scores`` inserts scores with) splits the rows into
    statements at the limit and keeps their order and their values."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (a INTEGER, b TEXT)")
    flat: list[object] = []
    for i in range(rows):
        flat += (i, None if i % 7 == 0 else f"v{i}")
    _insert_rows(conn, "INSERT INTO t (a, b)", flat, 2)
    stored = conn.execute("SELECT a, b FROM t ORDER BY rowid").fetchall()
    assert stored == [(i, None if i % 7 == 0 else f"v{i}") for i in range(rows)]


def test_a_filter_on_ids_is_read_in_one_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # agentlens score reads each chunk's runs (200) by id, and asks each scorer which of them it
    # still needs: one statement each, not pages of 32, 64 and 128.
    store = SQLiteStore(f"sqlite:///{tmp_path / 'runs.db'}")
    store.put_traces([make_trace(i, steps=1) for i in range(700)])
    reads: list[int] = []
    read = SQLiteStore._read

    def counted(self: SQLiteStore, work: Callable[[sqlite3.Connection], Any]) -> Any:
        reads.append(1)
        return read(self, work)

    monkeypatch.setattr(SQLiteStore, "_read", counted)

    def pages(n: int, limit: int | None = None) -> list[int]:
        where = RunFilter(run_ids=[f"r{i:05d}" for i in range(n)])
        counts = []
        for query in (
            lambda: store.query_traces(where, limit=limit),
            lambda: store.list_runs(where, limit=limit),
            lambda: store.unscored_run_ids("s", "1", where, limit=limit),
        ):
            reads.clear()
            assert len(list(query())) == (n if limit is None else min(n, limit))
            counts.append(len(reads))
        return counts

    assert pages(200) == [1, 1, 1]
    assert pages(512) == [1, 1, 1]
    assert pages(513) == [2, 2, 2]
    assert pages(0) == [0, 0, 0]
    assert pages(200, limit=10) == [1, 1, 1]
    reads.clear()
    assert len(list(store.query_traces())) == 700  # unbounded: pages of 32, 64, ... 512
    assert len(reads) == 5
    store.close()


def test_a_hand_written_key_of_another_type_is_ordered_by_sqlite(tmp_path: Path) -> None:
    # A filter on ids is sorted outside SQL; a row whose sort_at is not an integer (written by
    # hand) cannot be, and the page is read in SQL's order instead.
    path = tmp_path / "runs.db"
    store = SQLiteStore(f"sqlite:///{path}")
    store.put_traces([make_trace(i, steps=1) for i in range(5)])
    with raw(path) as conn:
        conn.execute("UPDATE runs SET sort_at = 'later' WHERE id = 'r00002'")
    where = RunFilter(run_ids=[f"r{i:05d}" for i in range(5)])
    got = [t.id for t in store.query_traces(where, newest_first=False)]
    assert got == ["r00000", "r00001", "r00003", "r00004", "r00002"]  # text after integers
    assert [t.id for t in store.query_traces(where)] == got[::-1]
    store.close()
