"""``agentlens migrate``: SQLite to PostgreSQL and back, lossless and resumable."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from store_factories_cli import scored_runs

from agentlens.analytics import hallucination_rate
from agentlens.cli._migrate import checkpoint_path, copy_store
from agentlens.config import Settings
from agentlens.errors import StoreError
from agentlens.model import Finding, Score, ScoreResult, Trace
from agentlens.store import open_store
from agentlens.store._copy import COPY_TABLES
from agentlens.store._protocol import Delivery
from agentlens.store._server import StagedSpan

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def snapshot(store: Any) -> tuple[list[str], list[str], int]:
    """Every run (as JSON, oldest first) and score (as JSON), and the schema-independent count."""
    runs = [t.to_json() for t in store.query_traces(newest_first=False)]
    scores = [
        s.model_dump_json()
        for t in store.list_runs(newest_first=False)
        for s in store.get_scores(t.id)
    ]
    return runs, scores, store.count_runs()


def every_table(store: Any) -> dict[str, Any]:
    """Runs and scores, every other table row for row (sorted: PostgreSQL orders an id holding
    NUL by its escaped text), and the rate they give."""
    tables: dict[str, Any] = {
        t.name: sorted(store.table_rows(t.name, limit=10**6), key=repr) for t in COPY_TABLES
    }
    tables["runs and scores"] = snapshot(store)
    rate = hallucination_rate(store=store, settings=Settings(), since_hours=24 * 400, now=NOW)
    tables["rate"] = rate.to_json()
    return tables


def fill(store: Any) -> None:
    """Runs and scores, and something in every other table: runs reviewed and pending, a
    verdict, content flags, webhook deliveries (pending and delivered), keys (one revoked),
    staged spans of a built trace and of one still waiting."""
    traces, scores = scored_runs(450)
    linked = Trace(id="linked", started_at=NOW, output="see C-9", links={"blog_post": "123"})
    flagged = ScoreResult(passed=False, value=1.0,
                          findings=[Finding(failure_mode="fabricated_grounding", text="C-9")])  # fmt: skip
    store.put_traces([*traces, linked])
    store.put_scores(
        [*scores, Score.of(flagged, run_id="linked", scorer="no_fabricated_refs", version="2")]
    )
    store.mark_reviewed(store.pending_review(limit=200), at=NOW)
    store.put_verdict("run-00010", "false_positive", finding=1, note="in the CRM", at=NOW)
    store.add_deliveries(
        [Delivery(id=f"d{i}", run_id="linked", url="https://hooks.example/x", body="{}",
                  created_at=NOW) for i in range(3)]
    )  # fmt: skip
    store.record_delivery("d1", ok=True, at=NOW)
    store.record_delivery("d2", ok=False, error="HTTP 500", at=NOW)
    store.create_api_key("k1", "alpha", b"\x00salt", b"\xffhash", 10, "ci")
    store.create_api_key("k2", "beta", b"salt2", b"hash2", 20)
    store.revoke_api_key("k1", 30)
    store.stage_spans([StagedSpan("alpha", "t1", "a", True, '{"span_id": "a"}'),
                       StagedSpan("alpha", "t2", "b", False, '{"span_id": "b"}')], 100)  # fmt: skip
    _, upto = store.staged_spans("alpha", "t1")
    store.commit_built_runs([("alpha", "t1", Trace(id="t1", project="alpha"), upto)], 200)


def test_sqlite_to_postgres_and_back_copies_every_table(
    cli, tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    first = f"sqlite:///{tmp_path / 'first.db'}"
    back = f"sqlite:///{tmp_path / 'back.db'}"
    store = open_store(first)
    fill(store)
    expected = every_table(store)
    store.close()
    assert all(expected[t.name] for t in COPY_TABLES)  # something in every table

    there = cli("migrate", "--from", first, "--to", pg_url)
    assert there.exit_code == 0, there.output
    assert "copied 452 runs and 301 scores" in there.output
    again = cli("migrate", "--from", pg_url, "--to", back)
    assert again.exit_code == 0, again.output
    for url in (pg_url, back):
        copy: Any = open_store(url)
        try:
            assert every_table(copy) == expected
            # the copy goes on working: a new span is numbered after the copied ones
            copy.stage_spans([StagedSpan("alpha", "t2", "c", True, '{"span_id": "c"}')], 300)
            docs, upto = copy.staged_spans("alpha", "t2")
            assert len(docs) == 2 and upto > max(r[0] for r in expected["otlp_spans"])
        finally:
            copy.close()
    assert not list(tmp_path.glob(".agentlens-migrate-*"))


def test_an_interrupted_copy_resumes(
    cli, tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    source_url = f"sqlite:///{tmp_path / 'src.db'}"
    source = open_store(source_url)
    traces, scores = scored_runs(500)
    source.put_traces(traces)
    source.put_scores(scores)
    target = open_store(pg_url)
    checkpoint = checkpoint_path(source_url, pg_url)
    try:
        runs, *_ = copy_store(source, target, checkpoint=checkpoint, batch_size=100, stop_after=200)
        assert runs == 200 and target.count_runs() == 200
        assert checkpoint.exists()
        # another run arrives meanwhile, the newest
        source.put_traces(scored_runs(501)[0][-1:])
    finally:
        target.close()
        source.close()
    seen: list[tuple[int, int]] = []
    source, target = open_store(source_url), open_store(pg_url)
    try:
        runs, *_ = copy_store(
            source, target, checkpoint=checkpoint, progress=lambda d, t: seen.append((d, t))
        )
        assert runs == 301  # only what was not copied yet
        assert seen[0] == (200, 501) and seen[-1] == (501, 501)
        assert snapshot(target) == snapshot(source)
        assert not checkpoint.exists()
    finally:
        target.close()
        source.close()


def test_an_interrupted_table_copy_resumes_at_its_table(tmp_path: Path) -> None:
    a, b = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    checkpoint = checkpoint_path(a, b, tmp_path)
    source, target = open_store(a), open_store(b)
    try:
        fill(source)
        real = target.put_table_rows

        def failing(table: str, rows: Any) -> int:
            if table == "review_verdicts":
                raise StoreError("the disk is full")
            return real(table, rows)

        target.put_table_rows = failing  # type: ignore[attr-defined]
        with pytest.raises(StoreError):
            copy_store(source, target, checkpoint=checkpoint, batch_size=100)
        assert json.loads(checkpoint.read_text())["table"] == "review_verdicts"
        del target.put_table_rows
        runs, scores, rows = copy_store(source, target, checkpoint=checkpoint, batch_size=100)
        names = [t.name for t in COPY_TABLES]
        rest = names[names.index("review_verdicts") :]
        assert (runs, scores) == (0, 0)  # the runs were copied before the interruption
        assert rows == sum(len(source.table_rows(n, limit=10**6)) for n in rest)
        assert every_table(target) == every_table(source)
        assert not checkpoint.exists()
    finally:
        target.close()
        source.close()


def test_resuming_through_the_cli_says_so(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    a, b = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    source, target = open_store(a), open_store(b)
    source.put_traces(scored_runs(300)[0])
    copy_store(source, target, checkpoint=checkpoint_path(a, b), batch_size=100, stop_after=100)
    source.close()
    target.close()
    result = cli("migrate", "--from", a, "--to", b)
    assert result.exit_code == 0, result.output
    assert "copied 200 runs and 0 scores (resumed)" in result.output


def test_bad_arguments_are_one_line(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    same = f"sqlite:///{tmp_path / 'a.db'}"
    open_store(same).close()
    result = cli("migrate", "--from", same, "--to", same)
    assert result.exit_code == 2 and "--from and --to name the same store" in result.output
    result = cli("migrate", "--from", same, "--to", "postgresql://postgres@127.0.0.1:1/x")
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0
    assert "cannot connect to the PostgreSQL server at 127.0.0.1" in result.output


def test_a_source_that_does_not_exist_is_an_error_and_nothing_is_created(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    # A mistyped --from was created as an empty store, copied ("copied 0 runs") and exit 0.
    monkeypatch.chdir(tmp_path)
    result = cli("migrate", "--from", str(tmp_path / "typo.db"), "--to", str(tmp_path / "b.db"))
    assert result.exit_code == 2
    assert result.output.startswith("error: ") and result.output.strip().count("\n") == 0
    assert "--from: no agentlens store at" in result.output
    assert "typo.db (the path does not exist)" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_source_is_only_read(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    with open_store(f"sqlite:///{a}") as source:
        source.put_traces([Trace(id="r1", started_at=NOW, output="INV-7 ✓")])
    before = a.read_bytes()
    result = cli("migrate", "--from", str(a), "--to", str(b))
    assert result.exit_code == 0, result.output
    assert "copied 1 runs" in result.output
    assert a.read_bytes() == before
    with open_store(f"sqlite:///{b}", read_only=True) as target:
        assert target.get_trace("r1").output == "INV-7 ✓"


def test_a_checkpoint_that_cannot_be_written_stops_before_copying(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    # Run from a folder it cannot write (/proc, a read-only checkout), migrate copied the first
    # batch, then failed writing its checkpoint with "error: ....tmp: No such file or
    # directory": a target holding 200 of the 450 runs, and a message that did not say why.
    import agentlens.cli._migrate as migrate_module

    a, b = tmp_path / "a.db", tmp_path / "b.db"
    with open_store(f"sqlite:///{a}") as source:
        source.put_traces([Trace(id=f"r{i:03d}", started_at=NOW) for i in range(450)])
    nowhere = tmp_path / "read-only" / "checkpoint.json"
    monkeypatch.setattr(migrate_module, "checkpoint_path", lambda src, dst: nowhere)
    result = cli("migrate", "--from", str(a), "--to", str(b))
    assert result.exit_code == 2
    assert result.output.startswith("error: cannot write the checkpoint")
    assert str(nowhere) in result.output and "writable folder" in result.output
    assert not b.exists()


def test_resuming_into_a_target_that_lost_the_copy_starts_over(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    # Interrupted, then the half-made target deleted to start afresh: the next migrate trusted
    # the checkpoint, skipped the 200 runs it said were copied, and said "(resumed)".
    monkeypatch.chdir(tmp_path)
    a, b = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    with open_store(a) as source:
        source.put_traces([Trace(id=f"r{i:03d}", started_at=NOW) for i in range(450)])
    source, target = open_store(a), open_store(b)
    copy_store(source, target, checkpoint=checkpoint_path(a, b), stop_after=200)
    source.close()
    target.close()
    for leftover in tmp_path.glob("b.db*"):
        leftover.unlink()
    result = cli("migrate", "--from", a, "--to", b)
    assert result.exit_code == 0, result.output
    assert "copied 450 runs and 0 scores from" in result.output
    with open_store(b, read_only=True) as copy:
        assert copy.count_runs() == 450


def test_one_file_named_two_ways_is_the_same_store(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    # Only the URL text was compared: a.db and ./a.db (or a symbolic link) copied the store
    # into itself.
    monkeypatch.chdir(tmp_path)
    open_store(f"sqlite:///{tmp_path / 'a.db'}").close()
    (tmp_path / "link.db").symlink_to(tmp_path / "a.db")
    for other in ("./a.db", f"sqlite:///{tmp_path / 'a.db'}", "link.db"):
        result = cli("migrate", "--from", "a.db", "--to", other)
        assert result.exit_code == 2, (other, result.output)
        assert "--from and --to name the same store" in result.output
    assert not list(tmp_path.glob(".agentlens-migrate-*"))


def _corrupt(db: Path, run_id: str) -> None:
    store = open_store(f"sqlite:///{db}")
    try:
        store._write(  # type: ignore[attr-defined]
            lambda c: c.execute("UPDATE runs SET doc = '{oops' WHERE id = ?", (run_id,))
        )
    finally:
        store.close()


def test_a_run_that_cannot_be_read_stops_the_copy_unless_skipped(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    source_url, target_url = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    source = open_store(source_url)
    try:
        fill(source)
    finally:
        source.close()
    _corrupt(tmp_path / "a.db", "linked")  # a flagged run, with review rows of its own
    stopped = cli("migrate", "--from", source_url, "--to", target_url, "-q")
    assert stopped.exit_code == 2
    assert "run 'linked' is stored in a form this agentlens cannot read" in stopped.stderr
    skipped = cli("migrate", "--from", source_url, "--to", target_url, "-q", "--skip-unreadable")
    assert skipped.exit_code == 1, skipped.output
    # the batches copied before the stop stay, and the copy goes on after them
    assert skipped.stdout.startswith("copied ") and "(resumed)" in skipped.stdout
    assert "skipped unreadable run 'linked'" in skipped.stderr
    assert "1 run could not be read and was not copied" in skipped.stderr
    target = open_store(target_url)
    source = open_store(source_url, read_only=True)
    try:
        assert target.count_runs() == source.count_runs() - 1
        assert target.get_scores("linked") == [] and source.get_scores("linked") != []
        # the run's review rows (its review state, its flag modes, its verdict) stay out with it
        for spec in COPY_TABLES:
            if "run_id" in spec.columns:
                at = spec.columns.index("run_id")
                rows = target.table_rows(spec.name, limit=10**6)
                assert all(r[at] != "linked" for r in rows), spec.name
                assert len(rows) == sum(
                    r[at] != "linked" for r in source.table_rows(spec.name, limit=10**6)
                ), spec.name
    finally:
        target.close()
        source.close()


def test_runs_left_out_stay_out_after_a_resume(tmp_path: Path) -> None:
    source_url = f"sqlite:///{tmp_path / 'a.db'}"
    source = open_store(source_url)
    try:
        fill(source)
    finally:
        source.close()
    reader = open_store(source_url, read_only=True)
    try:
        first = next(iter(reader.list_runs(newest_first=False))).id
    finally:
        reader.close()
    _corrupt(tmp_path / "a.db", first)
    checkpoint = tmp_path / "checkpoint.json"
    left: list[str] = []
    source, target = (
        open_store(source_url, read_only=True),
        open_store(f"sqlite:///{tmp_path / 'b.db'}"),
    )
    try:
        copy_store(source, target, checkpoint=checkpoint, batch_size=100, stop_after=100,
                   on_unreadable=lambda e: left.append(e.run_id))  # fmt: skip
        assert left == [first] and json.loads(checkpoint.read_text())["left_out"] == [first]
        copy_store(source, target, checkpoint=checkpoint, on_unreadable=lambda e: None)
        assert target.count_runs() == source.count_runs() - 1
        assert all(r[0] != first for r in target.table_rows("run_review", limit=10**6))
    finally:
        target.close()
        source.close()


@pytest.mark.parametrize("memory", ["sqlite://", "sqlite:///:memory:"])
def test_a_store_in_memory_is_refused_either_way(cli, tmp_path: Path, memory: str) -> None:  # type: ignore[no-untyped-def]
    on_disk = f"sqlite:///{tmp_path / 'a.db'}"
    open_store(on_disk).close()
    for flag, source, target in (("--from", memory, on_disk), ("--to", on_disk, memory)):
        result = cli("migrate", "--from", source, "--to", target, "-q")
        assert result.exit_code == 2 and result.stdout == ""
        assert f"{flag}: {memory} is a store in memory" in result.stderr


def test_a_resume_after_a_batch_ending_in_a_run_left_out_goes_on(tmp_path: Path) -> None:
    # the checkpoint's last run is one that could not be read: not in the target, and rightly
    source_url = f"sqlite:///{tmp_path / 'a.db'}"
    source = open_store(source_url)
    try:
        source.put_traces(scored_runs(4)[0])
        ids = [r.id for r in source.list_runs(newest_first=False)]
    finally:
        source.close()
    _corrupt(tmp_path / "a.db", ids[1])
    checkpoint = tmp_path / "checkpoint.json"
    source, target = (
        open_store(source_url, read_only=True),
        open_store(f"sqlite:///{tmp_path / 'b.db'}"),
    )
    try:
        copy_store(source, target, checkpoint=checkpoint, batch_size=2, stop_after=1,
                   on_unreadable=lambda e: None)  # fmt: skip
        assert json.loads(checkpoint.read_text())["last"] == ids[1]
        resumed: list[bool] = []
        runs, *_ = copy_store(source, target, checkpoint=checkpoint, on_unreadable=lambda e: None,
                              on_resume=lambda: resumed.append(True))  # fmt: skip
        assert resumed == [True] and runs == 2  # the two after the checkpoint, not all over
        assert target.count_runs() == 3
    finally:
        target.close()
        source.close()
