"""``agentlens migrate``: SQLite to PostgreSQL and back, lossless and resumable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from store_factories_cli import scored_runs

from agentlens.cli._migrate import checkpoint_path, copy_store
from agentlens.store import open_store


def snapshot(store: Any) -> tuple[list[str], list[str], int]:
    """Every run (as JSON, oldest first) and score (as JSON), and the schema-independent count."""
    runs = [t.to_json() for t in store.query_traces(newest_first=False)]
    scores = [
        s.model_dump_json()
        for t in store.list_runs(newest_first=False)
        for s in store.get_scores(t.id)
    ]
    return runs, scores, store.count_runs()


def test_sqlite_to_postgres_and_back_is_lossless(
    cli, tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    first = f"sqlite:///{tmp_path / 'first.db'}"
    back = f"sqlite:///{tmp_path / 'back.db'}"
    store = open_store(first)
    traces, scores = scored_runs(450)
    store.put_traces(traces)
    store.put_scores(scores)
    expected = snapshot(store)
    store.close()

    there = cli("migrate", "--from", first, "--to", pg_url)
    assert there.exit_code == 0, there.output
    assert "copied 450 runs and 300 scores" in there.output
    again = cli("migrate", "--from", pg_url, "--to", back)
    assert again.exit_code == 0, again.output
    for url in (pg_url, back):
        copy = open_store(url)
        try:
            assert snapshot(copy) == expected
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
        runs, _ = copy_store(source, target, checkpoint=checkpoint, batch_size=100, stop_after=200)
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
        runs, _ = copy_store(
            source, target, checkpoint=checkpoint, progress=lambda d, t: seen.append((d, t))
        )
        assert runs == 301  # only what was not copied yet
        assert seen[0] == (200, 501) and seen[-1] == (501, 501)
        assert snapshot(target) == snapshot(source)
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
    result = cli("migrate", "--from", same, "--to", same)
    assert result.exit_code == 2 and "--from and --to name the same store" in result.output
    result = cli("migrate", "--from", same, "--to", "postgresql://postgres@127.0.0.1:1/x")
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0
    assert "cannot connect to the PostgreSQL server at 127.0.0.1" in result.output
