"""A key's view of a store that holds several projects: its rates come from the store's rollup
(per project: SQLite's migration 6, PostgreSQL's migration 6) and equal what counting in Python
over the project's runs gives, on both backends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agentlens.analytics import hallucination_rate, rate_breakdown
from agentlens.config import Settings
from agentlens.model import FailureMode, Finding, Score, Step, StepKind, Trace, Verdict
from agentlens.server._scope import ProjectView, project_view
from agentlens.store import open_store

CFG = Settings()
NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


class _NoProjectRates:
    """The store, without saying that it answers rates per project (as a backend that does
    not): the view must count in Python."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        if name in ("rates_by_project", "rate_counts", "stored_scorers", "stored_versions"):
            raise AttributeError(name)
        return getattr(self._store, name)


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A fresh store of each backend: SQLite (a file) and PostgreSQL (a schema of its own)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 's.db'}"
        return
    from pg_support import new_pg_schema

    url, drop = new_pg_schema()
    try:
        yield url
    finally:
        drop()


@pytest.fixture
def store(store_url: str) -> Any:
    opened: Any = open_store(store_url)
    for i in range(24):
        project = ("alpha", "beta", "gamma")[i % 3]
        run = Trace(
            id=f"r{i:02d}", project=project, agent=("support", "billing")[i % 2],
            started_at=NOW - timedelta(hours=5 * i), input="q", output="a",
            metadata={"release": f"v{i % 4}"},
            steps=[Step(kind=StepKind.TOOL, name="t", input={}, output={"ok": True})],
        )  # fmt: skip
        opened.put_traces([run])
        flagged = i % 5 == 0
        mode = (FailureMode.FABRICATED_GROUNDING, FailureMode.NO_PROGRESS)[i % 2]
        opened.put_scores([
            Score(run_id=run.id, scorer="t_refs", version="1", passed=not flagged,
                  value=float(flagged), detail="d",
                  verdict=Verdict.FLAGGED if flagged else Verdict.PASSED,
                  findings=[Finding(failure_mode=mode, text="X")] if flagged else [])
        ])  # fmt: skip
    yield opened
    opened.close()


@pytest.mark.parametrize("by", [None, "day", "agent", "release", "mode", "scorer_version"])
def test_a_projects_rate_from_the_rollup_equals_counting_its_runs(store: Any, by: Any) -> None:
    view = project_view(store, "beta")
    assert isinstance(view, ProjectView) and view._by_project
    slow = ProjectView(_NoProjectRates(store), "beta")
    assert not slow._by_project
    common: dict[str, Any] = {"start": NOW - timedelta(days=4), "end": NOW + timedelta(hours=1),
                              "settings": CFG, "scorers": ["t_refs"]}  # fmt: skip
    if by is None:
        fast, counted = (hallucination_rate(store=v, **common) for v in (view, slow))
        assert fast.runs == 7 and fast.flagged >= 1  # beta (every third run) in 96 h
    else:
        fast, counted = (rate_breakdown(by, store=v, **common) for v in (view, slow))
    assert fast == counted
    whole = hallucination_rate(store=store, **common)
    assert whole.runs == 20  # runs 0-19 started within 96 h


def test_a_project_sees_only_its_scorers(store: Any) -> None:
    other: Any = store
    other.put_traces([Trace(id="z1", project="delta", input="q", output="a", started_at=NOW)])
    other.put_scores([Score(run_id="z1", scorer="z_only", version="3", passed=True, value=0.0,
                            detail="ok")])  # fmt: skip
    assert "z_only" in store.stored_scorers()
    assert project_view(store, "beta").stored_scorers() == ["t_refs"]
    assert project_view(store, "delta").stored_scorers() == ["z_only"]
    assert project_view(store, "delta").stored_versions("z_only")[0][0] == "3"
    assert project_view(store, "beta").stored_versions("z_only") == []


@pytest.mark.parametrize("by", [None, "day", "agent", "mode"])
def test_counts_without_ids_are_the_same_counts(store: Any, by: Any) -> None:
    common: dict[str, Any] = {"start": NOW - timedelta(days=4), "settings": CFG}
    for source in (
        store,
        project_view(store, "alpha"),
        ProjectView(_NoProjectRates(store), "alpha"),
    ):
        if by is None:
            full, bare = (hallucination_rate(store=source, flagged_ids=f, **common)
                          for f in (True, False))  # fmt: skip
            assert full.flagged_run_ids and not bare.flagged_run_ids
            assert full.model_copy(update={"flagged_run_ids": []}) == bare
        else:
            full_b, bare_b = (rate_breakdown(by, store=source, flagged_ids=f, **common)
                              for f in (True, False))  # fmt: skip
            assert any(g.flagged_run_ids for g in full_b.groups)
            assert all(not g.flagged_run_ids for g in bare_b.groups)
            assert [g.model_copy(update={"flagged_run_ids": []}) for g in full_b.groups] == (
                bare_b.groups
            )
