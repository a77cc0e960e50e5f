"""The reading API: ``agentlens.get_trace`` / ``agentlens.query_traces`` and shared stores."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from store_factories import make_trace

import agentlens
from agentlens.errors import ConfigError, RunNotFoundError
from agentlens.store import (
    SQLiteStore,
    _api,
    close_shared_stores,
    get_trace,
    open_store,
    query_traces,
    set_default_url,
    shared_store,
)


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Work in tmp_path with no store configured by environment, file or configure()."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTLENS_DB", raising=False)
    monkeypatch.setenv("AGENTLENS_CONFIG", str(tmp_path / "agentlens.toml"))
    (tmp_path / "agentlens.toml").write_text("")
    saved = _api._default
    set_default_url(None)
    try:
        yield tmp_path
    finally:
        _api._default = saved


def fill(url: str, *traces: object) -> None:
    store = open_store(url)
    try:
        store.put_traces(traces or [make_trace(i) for i in range(5)])  # type: ignore[arg-type]
    finally:
        store.close()


def test_top_level_names_are_the_store_api() -> None:
    assert agentlens.get_trace is get_trace
    assert agentlens.query_traces is query_traces


def test_default_is_agentlens_db_in_the_working_directory(in_tmp: Path) -> None:
    fill(f"sqlite:///{in_tmp}/agentlens.db")
    assert get_trace("r00002").id == "r00002"
    assert [t.id for t in query_traces(limit=2)] == ["r00004", "r00003"]


def test_environment_then_configure_choose_the_store(
    in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(f"sqlite:///{in_tmp}/env.db", make_trace(1))
    fill(f"sqlite:///{in_tmp}/configured.db", make_trace(2))
    monkeypatch.setenv("AGENTLENS_DB", "env.db")
    assert [t.id for t in query_traces()] == ["r00001"]
    set_default_url("sqlite:///configured.db")
    assert [t.id for t in query_traces()] == ["r00002"]
    with pytest.raises(RunNotFoundError):
        get_trace("r00001")


def test_db_argument_takes_a_url_or_a_store(in_tmp: Path) -> None:
    fill("sqlite:///given.db")
    assert get_trace("r00001", db="sqlite:///given.db").id == "r00001"
    with SQLiteStore("sqlite:///:memory:") as store:
        store.put_traces([make_trace(7)])
        assert get_trace("r00007", db=store).id == "r00007"
        assert [t.id for t in query_traces(db=store)] == ["r00007"]


def test_stores_are_opened_once_per_file(in_tmp: Path) -> None:
    a = shared_store("sqlite:///one.db")
    assert shared_store(str(in_tmp / "one.db")) is a
    assert shared_store(f"sqlite:///{in_tmp}/sub/../one.db") is a
    assert shared_store("sqlite:///two.db") is not a
    a.close()
    b = shared_store("sqlite:///one.db")
    assert b is not a
    close_shared_stores()
    assert getattr(b, "closed", False)


def test_query_traces_filters(in_tmp: Path) -> None:
    now = datetime.now(UTC)
    fill(
        "sqlite:///agentlens.db",
        make_trace(1, started=now - timedelta(hours=1), agent="support"),
        make_trace(2, started=now - timedelta(hours=2), agent="writer", output=None),
        make_trace(3, started=now - timedelta(hours=30), agent="support"),
        make_trace(4, started=None, agent="support", project="p2"),
    )
    assert [t.id for t in query_traces(since_hours=24)] == ["r00001", "r00002"]
    assert [t.id for t in query_traces(since_hours=24, has_output=True)] == ["r00001"]
    assert [t.id for t in query_traces(agent="support")] == ["r00001", "r00003", "r00004"]
    assert [t.id for t in query_traces(project="p2")] == ["r00004"]
    window = {"start": now - timedelta(hours=40), "end": now - timedelta(hours=1, minutes=30)}
    assert [t.id for t in query_traces(**window)] == ["r00002", "r00003"]  # type: ignore[arg-type]
    assert [t.id for t in query_traces(newest_first=False, limit=2)] == ["r00004", "r00003"]


def test_query_traces_is_lazy(in_tmp: Path) -> None:
    fill("sqlite:///agentlens.db")
    it = query_traces()
    assert not isinstance(it, list)
    assert next(it).id == "r00004"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"since_hours": 0}, "since_hours must be a positive number"),
        ({"since_hours": -3}, "since_hours must be a positive number"),
        ({"since_hours": 1, "start": datetime(2026, 1, 1, tzinfo=UTC)}, "not both"),
        ({"since_hours": True}, "since_hours must be a positive number"),
        ({"since_hours": "3"}, "since_hours must be a positive number"),
        ({"since_hours": float("nan")}, "since_hours must be a positive number"),
        ({"start": datetime(2026, 1, 2), "end": datetime(2026, 1, 1)}, "the window is empty"),
        ({"limit": -1}, "limit must be a non-negative integer"),
    ],
)
def test_bad_arguments(in_tmp: Path, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        query_traces(**kwargs)  # type: ignore[arg-type]


def test_query_traces_window_is_the_rate_window(in_tmp: Path) -> None:
    """``since_hours`` counts back from ``end`` (default now), as ``hallucination_rate`` does:
    both go through the one :func:`~agentlens.analytics.resolve_window`."""
    from agentlens.analytics import resolve_window

    now = datetime.now(UTC)
    fill(
        "sqlite:///agentlens.db",
        make_trace(1, started=now - timedelta(minutes=90)),
        make_trace(2, started=now - timedelta(minutes=150)),
        make_trace(3, started=now - timedelta(minutes=200)),
    )
    end = now - timedelta(hours=1)
    window = resolve_window(since_hours=2, end=end)
    assert window.start == end - timedelta(hours=2)
    got = [t.id for t in query_traces(since_hours=2, end=end)]
    assert got == ["r00001", "r00002"]
