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

__all__ = ["RunFilter", "RunSummary", "ServerStore", "TraceStore"]


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


@runtime_checkable
class ServerStore(TraceStore, Protocol):
    """What ``agentlens serve`` needs of a store besides :class:`TraceStore`: API keys, and OTLP
    spans staged until their trace is complete. SQLite implements it in
    :mod:`agentlens.store._server` (tables and semantics documented there); a PostgreSQL backend
    mirrors the same tables and methods. Times are integers, µs since the Unix epoch (UTC).

    Staging contract: ``stage_spans`` is atomic and idempotent per (project, trace id, span id),
    so a span delivered twice is stored once; once it returns, the spans are durable.
    ``ready_traces`` lists traces that have spans not yet in their run and whose root span ended
    (or that have been idle since ``idle_before``); ``commit_built_runs`` stores the built runs
    and records which spans they include in one transaction, so a crash between the two never
    loses or duplicates a span.
    """

    def create_api_key(
        self,
        key_id: str,
        project: str,
        salt: bytes,
        digest: bytes,
        created_at: int,
        name: str | None = None,
    ) -> None:
        """Store a new key: its public id, project, salt and slow hash (never the key)."""
        ...

    def get_api_key(self, key_id: str) -> Any:
        """The :class:`~agentlens.store._server.ApiKeyRecord` with this id, or ``None``."""
        ...

    def list_api_keys(self) -> list[Any]:
        """Every key record, oldest first, revoked ones included."""
        ...

    def revoke_api_key(self, key_id: str, revoked_at: int) -> bool:
        """Revoke an active key; False when there is none with this id."""
        ...

    def count_active_api_keys(self) -> int:
        """How many keys are not revoked (none: the server serves loopback clients only)."""
        ...

    def stage_spans(self, spans: Sequence[Any], received_at: int) -> int:
        """Stage :class:`~agentlens.store._server.StagedSpan` s atomically; duplicates are
        ignored. Returns how many were new."""
        ...

    def ready_traces(self, *, idle_before: int, limit: int = 256) -> list[Any]:
        """:class:`~agentlens.store._server.ReadyTrace` s to build now, oldest activity first."""
        ...

    def staged_spans(self, project: str, trace_id: str) -> tuple[list[str], int]:
        """The staged spans' JSON of one trace and the newest arrival seq among them."""
        ...

    def commit_built_runs(self, built: Sequence[tuple[str, str, Any, int]], built_at: int) -> int:
        """Store built runs (``(project, trace_id, Trace | None, upto_seq)``) and mark their
        spans built, in one transaction. Returns how many runs were stored."""
        ...

    def purge_staged_spans(self, *, built_before: int) -> int:
        """Delete the spans of traces built before ``built_before`` whose root ended."""
        ...

    def staging_counts(self) -> Any:
        """:class:`~agentlens.store._server.StagingCounts`: staged spans and traces pending."""
        ...

    def run_projects(self, run_ids: Sequence[str]) -> dict[str, str]:
        """The project of each stored run among ``run_ids``."""
        ...
