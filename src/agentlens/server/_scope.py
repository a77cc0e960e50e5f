"""A store seen through one project: what a key may read.

When the store holds runs of more than one project, a key reads through :class:`ProjectView`,
a :class:`~agentlens.store.TraceStore` that shows only that project's runs and scores. Its rate
queries (:class:`~agentlens.store.RateSource`) go to the store with the project set when the
store answers per project from its rollup (``rates_by_project``: the SQLite store); otherwise
they are counted in Python over the project's runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any

from agentlens.analytics._rate import PythonRateSource, python_rate_counts
from agentlens.errors import RunNotFoundError, StoreError, UnreadableRunError
from agentlens.model import Score, Trace
from agentlens.store import RateCounts, RateQuery, RunFilter, RunSummary

__all__ = ["ProjectView", "project_view"]


def project_view(store: Any, project: str | None) -> Any:
    """``store`` itself when every stored run is in ``project`` (or ``project`` is ``None``),
    else a :class:`ProjectView`."""
    if project is None:
        return store
    has_other_projects = getattr(store, "has_other_projects", None)
    if has_other_projects is not None and not has_other_projects(project):
        return store
    return ProjectView(store, project)


class ProjectView:
    """The runs and scores of one project of ``store``, read-only."""

    def __init__(self, store: Any, project: str) -> None:
        self._store = store
        self.project = project
        self.url = store.url
        self._by_project = bool(getattr(store, "rates_by_project", False))

    def _where(self, where: RunFilter | None) -> RunFilter:
        if where is None:
            return RunFilter(project=self.project)
        if where.project not in (None, self.project):
            return replace(where, project=self.project, run_ids=[])
        return replace(where, project=self.project)

    def list_runs(
        self, where: RunFilter | None = None, *, limit: int | None = None, newest_first: bool = True
    ) -> Iterator[RunSummary]:
        result: Iterator[RunSummary] = self._store.list_runs(
            self._where(where), limit=limit, newest_first=newest_first
        )
        return result

    def query_traces(
        self,
        where: RunFilter | None = None,
        *,
        limit: int | None = None,
        newest_first: bool = True,
        on_unreadable: Callable[[UnreadableRunError], None] | None = None,
    ) -> Iterator[Trace]:
        result: Iterator[Trace] = self._store.query_traces(
            self._where(where), limit=limit, newest_first=newest_first, on_unreadable=on_unreadable
        )
        return result

    def count_runs(self, where: RunFilter | None = None) -> int:
        return int(self._store.count_runs(self._where(where)))

    def get_trace(self, run_id: str) -> Trace:
        trace: Trace = self._store.get_trace(run_id)
        if trace.project != self.project:
            raise RunNotFoundError(run_id)
        return trace

    def get_scores(self, run_id: str) -> list[Score]:
        owners = self._store.run_projects([run_id])
        if owners.get(run_id) != self.project:
            return []
        scores: list[Score] = self._store.get_scores(run_id)
        return scores

    def unscored_run_ids(
        self, scorer: str, version: str, where: RunFilter | None = None, *, limit: int | None = None
    ) -> Iterator[str]:
        result: Iterator[str] = self._store.unscored_run_ids(
            scorer, version, self._where(where), limit=limit
        )
        return result

    def _as_store(self) -> Any:
        """This view, for the Python counting that reads any store (the view has the read
        methods it uses)."""
        return self

    def rate_counts(self, query: RateQuery, by: str | None = None) -> list[RateCounts]:
        """The project's rate counts (see :class:`~agentlens.store.RateSource`): the store's,
        when it answers per project, else counted in Python over this view."""
        scoped = replace(query, project=self.project)
        if self._by_project:
            found: list[RateCounts] = self._store.rate_counts(scoped, by)
            return found
        return python_rate_counts(self._as_store(), scoped, by)

    def stored_scorers(self) -> list[str]:
        """Scorers with a stored score of one of the project's runs."""
        if self._by_project:
            return list(self._store.stored_scorers(project=self.project))
        return PythonRateSource(self._as_store()).stored_scorers()

    def stored_versions(
        self, scorer: str, start_us: int | None = None, end_us: int | None = None
    ) -> list[tuple[str, int]]:
        """The versions of ``scorer`` scored on the project's runs in the window, newest
        first."""
        if self._by_project:
            return list(self._store.stored_versions(scorer, start_us, end_us, project=self.project))
        return PythonRateSource(self._as_store()).stored_versions(scorer, start_us, end_us)

    def verdict_counts(self, *, since: Any = None) -> list[Any]:
        """Live verdicts per (scorer, failure mode) on this project's runs."""
        result: list[Any] = self._store.verdict_counts(since=since, project=self.project)
        return result

    def put_traces(self, traces: Iterable[Trace]) -> int:
        raise StoreError("a project view is read-only")

    def put_scores(self, scores: Iterable[Score]) -> int:
        raise StoreError("a project view is read-only")

    def delete_runs(self, run_ids: Iterable[str]) -> int:
        raise StoreError("a project view is read-only")

    def close(self) -> None:
        """Nothing to close: the underlying store is not the view's."""
