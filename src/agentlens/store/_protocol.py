"""The :class:`TraceStore` protocol: what every storage backend provides.

Backends are chosen by URL (:func:`agentlens.store.open_store`): ``sqlite:///path`` is the embedded
default; ``postgresql://...`` is planned for teams. Both must pass the contract suite in
``tests/store/test_contract.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from agentlens.errors import UnreadableRunError
from agentlens.model import Score, Trace

__all__ = ["RunFilter", "RunSummary", "TraceStore"]


@dataclass(frozen=True, slots=True)
class RunFilter:
    """Which runs a query selects. Every field is optional; all given fields must match.

    Times select on the run's ``started_at`` (UTC): ``start <= started_at < end``.
    """

    start: datetime | None = None
    end: datetime | None = None
    agent: str | None = None
    project: str | None = None
    has_output: bool | None = None
    run_ids: Sequence[str] | None = None


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One row of ``agentlens runs``: a run without its steps."""

    id: str
    project: str
    agent: str | None
    name: str | None
    status: str
    started_at: datetime | None
    ended_at: datetime | None
    step_count: int
    has_output: bool
    metadata: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class TraceStore(Protocol):
    """Where runs and their scores live.

    Writes of a batch are atomic: either every run of a ``put_traces`` call is stored or none is.
    Storing a run whose id is already stored replaces it, and deletes the old run's scores.
    """

    url: str
    """The URL the store was opened with."""

    def put_traces(self, traces: Iterable[Trace]) -> int:
        """Store (or replace) runs, atomically, in batches. Returns how many were written."""
        ...

    def get_trace(self, run_id: str) -> Trace:
        """Return one run; raises :class:`agentlens.errors.RunNotFoundError` when absent."""
        ...

    def query_traces(
        self,
        where: RunFilter | None = None,
        *,
        limit: int | None = None,
        newest_first: bool = True,
        on_unreadable: Callable[[UnreadableRunError], None] | None = None,
    ) -> Iterator[Trace]:
        """Iterate lazily over the runs that match, with their steps.

        A stored run that cannot be read back raises :class:`UnreadableRunError`; with
        ``on_unreadable`` the error is passed to it instead and the run is left out.
        """
        ...

    def list_runs(
        self, where: RunFilter | None = None, *, limit: int | None = None, newest_first: bool = True
    ) -> Iterator[RunSummary]:
        """Iterate lazily over summaries of the runs that match (no steps loaded)."""
        ...

    def count_runs(self, where: RunFilter | None = None) -> int:
        """How many runs match."""
        ...

    def delete_runs(self, run_ids: Iterable[str]) -> int:
        """Delete runs and their scores. Returns how many were deleted."""
        ...

    def put_scores(self, scores: Iterable[Score]) -> int:
        """Store scores, replacing any earlier score of the same (run, scorer, version)."""
        ...

    def get_scores(self, run_id: str) -> list[Score]:
        """Every stored score of one run (all scorers, all versions), oldest first."""
        ...

    def unscored_run_ids(
        self, scorer: str, version: str, where: RunFilter | None = None, *, limit: int | None = None
    ) -> Iterator[str]:
        """Ids of matching runs that have no score from ``scorer`` at ``version`` yet."""
        ...

    def close(self) -> None:
        """Flush and release the store. Safe to call twice."""
        ...
