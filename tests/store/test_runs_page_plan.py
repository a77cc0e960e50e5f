"""The runs page of one project (``list_runs_page``) reads the run-count rollup to choose its
plan: an empty page without a query when no run of the project can match, the project's own
index when the project has fewer runs in the window than the role or release. The pages are
the same as with SQLite's own choice, page after page, over random stores and filters."""

from __future__ import annotations

import sqlite3
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlens.model import FailureMode, Finding, Score, Step, StepKind, Trace, Verdict
from agentlens.store import RunFilter, _server, open_store
from agentlens.store._server import _project_plan, list_runs_page

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


def _run(
    i: int, hours: float | None, project: str, agent: str | None, release: str | None
) -> Trace:
    return Trace(
        id=f"01PAGE{i:04d}", project=project, agent=agent, input="q", output="a",
        started_at=None if hours is None else NOW - timedelta(hours=hours),
        metadata={} if release is None else {"release": release},
        steps=[Step(kind=StepKind.TOOL, name="t", input={}, output={"ok": True})],
    )  # fmt: skip


def _pages(store: Any, where: RunFilter, limit: int) -> list[list[str]]:
    out: list[list[str]] = []
    cursor = None
    while True:
        page, cursor = list_runs_page(store, where, before=cursor, limit=limit)
        out.append([r.id for r in page])
        if cursor is None:
            return out


def _both(store: Any, where: RunFilter, limit: int) -> list[list[str]]:
    try:
        _server.PLAN_FROM_ROLLUP = False
        expected = _pages(store, where, limit)
    finally:
        _server.PLAN_FROM_ROLLUP = True
    assert _pages(store, where, limit) == expected, where
    return expected


_runs = st.lists(
    st.tuples(
        st.one_of(st.none(), st.integers(-10, 24 * 8).map(float)),
        st.sampled_from(["big", "big", "big", "small", "tiny"]),
        st.sampled_from(["support", "billing", None]),
        st.sampled_from(["v1", "v2", None]),
        st.booleans(),
    ),
    max_size=40,
)
_edge = st.one_of(st.none(), st.integers(-12, 24 * 9).map(lambda h: NOW - timedelta(hours=h)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    _runs,
    st.lists(
        st.tuples(
            st.sampled_from(["big", "small", "tiny", "nobody", None]),
            st.sampled_from(["support", "billing", None]),
            st.sampled_from(["v1", "v2", None]),
            st.sampled_from([None, True, False]),
            _edge,
            _edge,
        ),
        min_size=1,
        max_size=6,
    ),
    st.integers(1, 7),
)
def test_the_pages_are_the_planners_pages(
    runs: list[tuple[Any, ...]], filters: list[tuple[Any, ...]], limit: int
) -> None:
    with tempfile.TemporaryDirectory(prefix="agentlens-page-plan-") as folder:
        store: Any = open_store(f"sqlite:///{Path(folder) / 'p.db'}")
        try:
            store.put_traces([_run(i, *spec[:4]) for i, spec in enumerate(runs)])
            flagged = [f"01PAGE{i:04d}" for i, spec in enumerate(runs) if spec[4]]
            store.put_scores(
                [
                    Score(run_id=run_id, scorer="t_refs", version="1", passed=False,
                          verdict=Verdict.FLAGGED,
                          findings=[Finding(failure_mode=FailureMode.FABRICATED_GROUNDING, text="X")])
                    for run_id in flagged
                ]
            )  # fmt: skip
            store.refresh_flags(flagged)
            for project, agent, release, is_flagged, start, end in filters:
                where = RunFilter(
                    project=project, agent=agent, release=release, flagged=is_flagged,
                    start=start, end=end,
                )  # fmt: skip
                _both(store, where, limit)
        finally:
            store.close()


def test_a_small_project_is_read_from_its_own_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store: Any = open_store(f"sqlite:///{tmp_path / 'p.db'}")
    try:
        runs = [_run(i, i / 10, "big", ("support", "billing")[i % 2], "v1") for i in range(300)]
        runs += [_run(1000 + i, i * 3.0, "tiny", "support", "v1") for i in range(4)]
        store.put_traces(runs)

        def plan(where: RunFilter, by_flagged: bool = False) -> str:
            return str(store.read(lambda c: _project_plan(c, where, by_flagged=by_flagged)))

        start = NOW - timedelta(days=2)
        assert plan(RunFilter(project="tiny", agent="support", start=start)) == "project"
        assert plan(RunFilter(project="big", agent="support", start=start)) == "planner"
        assert plan(RunFilter(project="tiny", agent="billing", start=start)) == "empty"
        assert plan(RunFilter(project="nobody", start=start)) == "empty"
        assert plan(RunFilter(project="tiny", release="v1")) == "project"
        # a flagged filter: a project of at most _SMALL_PROJECT runs in the window reads its own
        assert plan(RunFilter(project="big", flagged=True), by_flagged=True) == "project"
        assert plan(RunFilter(project="big", flagged=True)) == "planner"
        monkeypatch.setattr(_server, "_SMALL_PROJECT", 100)
        assert plan(RunFilter(project="big", flagged=True), by_flagged=True) == "planner"
        assert plan(RunFilter(project="tiny", flagged=True), by_flagged=True) == "project"
        # windows whose edges cut the day of the tiny project's runs (03:00 to 12:00 of NOW's)
        for lo, hi in ((NOW - timedelta(hours=10), None), (None, NOW - timedelta(hours=7)),
                       (NOW - timedelta(hours=10), NOW - timedelta(hours=7))):  # fmt: skip
            where = RunFilter(project="tiny", agent="support", start=lo, end=hi)
            assert plan(where) == "project", (lo, hi)
            assert _both(store, where, 10)[0]
        # outside the days of the tiny project's runs: nothing can match
        long_ago = NOW - timedelta(days=30)
        assert plan(
            RunFilter(project="tiny", start=long_ago, end=long_ago + timedelta(days=1))
        ) == ("empty")
        assert _both(store, RunFilter(project="tiny", agent="support", start=start), 3) == [
            ["01PAGE1000", "01PAGE1001", "01PAGE1002"],
            ["01PAGE1003"],
        ]
        # the chosen plan is the one SQLite runs
        sql = "EXPLAIN QUERY PLAN SELECT 1 FROM runs r INDEXED BY runs_by_project_time WHERE 0"
        assert store.read(lambda c: c.execute(sql).fetchall())
    finally:
        store.close()


@pytest.mark.parametrize("flag", [True, False])
def test_an_empty_page_of_a_project_without_runs(tmp_path: Path, flag: bool) -> None:
    store: Any = open_store(f"sqlite:///{tmp_path / 'p.db'}")
    try:
        store.put_traces([_run(i, i, "big", "support", "v1") for i in range(20)])
        _server.PLAN_FROM_ROLLUP = flag
        page, cursor = list_runs_page(
            store, RunFilter(project="nobody", agent="support"), before=None, limit=5
        )
        assert (page, cursor) == ([], None)
        page, cursor = list_runs_page(store, RunFilter(project="big"), before=None, limit=5)
        assert len(page) == 5 and cursor is not None
    finally:
        _server.PLAN_FROM_ROLLUP = True
        store.close()


def test_runs_written_by_hand_still_count(tmp_path: Path) -> None:
    """The plan reads the rollup the triggers keep: a run inserted with SQL of another program
    is found on its project's page."""
    store: Any = open_store(f"sqlite:///{tmp_path / 'p.db'}")
    try:
        store.put_traces([_run(1, 2, "big", "support", "v1")])

        def copy(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO runs SELECT '01PAGE9999', 'other', agent, name, status, started_at,"
                " ended_at, sort_at, has_output, step_count, release, doc, steps FROM runs"
            )
            conn.execute(
                "INSERT INTO run_review (run_id, sort_at, agent, stored_at)"
                " SELECT '01PAGE9999', sort_at, agent, 0 FROM runs WHERE id = '01PAGE0001'"
            )

        store._write(copy)
        page, _ = list_runs_page(
            store, RunFilter(project="other", agent="support"), before=None, limit=5
        )
        assert [r.id for r in page] == ["01PAGE9999"]
    finally:
        store.close()


def test_the_review_queue_of_a_project_without_runs_is_empty_at_once(tmp_path: Path) -> None:
    store: Any = open_store(f"sqlite:///{tmp_path / 'p.db'}")
    try:
        runs = [_run(i, i, ("big", "small")[i % 2], ("support", "billing")[i % 3 % 2], "v1")
                for i in range(12)]  # fmt: skip
        store.put_traces(runs)
        store.put_scores(
            [Score(run_id=t.id, scorer="t_refs", version="1", passed=False,
                   verdict=Verdict.FLAGGED,
                   findings=[Finding(failure_mode=FailureMode.FABRICATED_GROUNDING, text="X")])
             for t in runs]
        )  # fmt: skip
        store.refresh_flags([t.id for t in runs])
        for project in ("big", "small", "nobody", None):
            for agent in ("support", "billing", "ops", None):
                store._queue_from_rollup = False
                expected = store.review_queue(project=project, agent=agent)
                store._queue_from_rollup = True
                assert store.review_queue(project=project, agent=agent) == expected
                assert bool(expected) == (project != "nobody" and agent != "ops")
    finally:
        store.close()
