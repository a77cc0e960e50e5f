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
from agentlens.store._flags import RunFlags

__all__ = [
    "ContentFlag",
    "ContentFlagRun",
    "Delivery",
    "PendingRun",
    "ReviewLag",
    "RunFilter",
    "RunSummary",
    "ServerStore",
    "TraceStore",
    "VerdictCount",
    "VerdictRecord",
]


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
    flagged: bool | None = None
    """``True``: only runs whose flags say ``hallucination_detected``; ``False``: only others.
    A backend answers ``flagged=True`` from an index over the flagged runs, not by re-scoring."""
    failure_mode: str | None = None
    """Only flagged runs with a finding of this failure mode (implies ``flagged=True``)."""
    release: str | None = None
    """Only runs whose ``metadata.release`` is this (as text)."""


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
    hallucination_detected: bool = False
    """True when the run's current scores flag it (see :mod:`agentlens.store._flags`)."""
    hallucination_reason: str | None = None
    """The one-line detail of the run's most important finding, when flagged."""
    failure_modes: tuple[str, ...] = ()
    """The failure modes of the findings behind the flag, most important first."""
    flag_state: str | None = None
    """``flagged``, ``clean``, ``unverifiable`` or ``error``; ``None`` while the run has no
    scores."""
    reviewed_at: datetime | None = None
    """When the review pipeline last reviewed the run; ``None`` while it is pending review."""

    @property
    def review_pending(self) -> bool:
        """True while the run waits for the review pipeline."""
        return self.reviewed_at is None


@dataclass(frozen=True, slots=True)
class PendingRun:
    """A run waiting for review, as :meth:`TraceStore.pending_review` lists it."""

    run_id: str
    stored_at: int
    """When this version of the run was written (µs since the epoch): the token
    :meth:`TraceStore.mark_reviewed` checks, so a run replaced meanwhile stays pending."""


@dataclass(frozen=True, slots=True)
class ReviewLag:
    """How far review is behind: :meth:`TraceStore.review_lag`."""

    pending: int
    """Runs waiting for review."""
    oldest_stored_at: datetime | None
    """When the oldest of them was written; ``None`` when none waits."""
    lag_s: float
    """Seconds between ``oldest_stored_at`` and now (0 when none waits)."""


@dataclass(frozen=True, slots=True)
class ContentFlagRun:
    """One flagged run that flags a content item."""

    run_id: str
    reason: str | None
    """The run's ``hallucination_reason`` when it flagged the item."""
    flagged_at: datetime
    """When the run first flagged the item."""
    dismissed: bool = False
    """True when a reviewer marked every finding of the run a false positive: the run no
    longer holds the item's flag."""


@dataclass(frozen=True, slots=True)
class ContentFlag:
    """The quality flags of one content item (``kind``, ``item_id``: an entry of a run's
    ``links``)."""

    kind: str
    item_id: str
    runs: tuple[ContentFlagRun, ...] = ()
    """The flagged runs linked to the item, oldest flag first (dismissed ones included)."""

    @property
    def hallucination_suspected(self) -> bool:
        """True while at least one linked run flags the item and is not dismissed."""
        return any(not r.dismissed for r in self.runs)

    @property
    def flags(self) -> list[str]:
        """The item's quality flags: ``["hallucination_suspected"]`` or ``[]``."""
        return ["hallucination_suspected"] if self.hallucination_suspected else []


@dataclass(frozen=True, slots=True)
class VerdictRecord:
    """A human verdict on one finding of a flagged run."""

    run_id: str
    finding_key: str
    """The finding's identity (:func:`agentlens.store._flags.finding_key`)."""
    scorer: str
    failure_mode: str | None
    text: str
    """The finding's text when the verdict was given."""
    verdict: str
    """``confirmed`` or ``false_positive``."""
    note: str | None
    author: str | None
    created_at: datetime
    scope: str = "finding"
    """``finding`` (given with ``--finding N``) or ``run`` (given on the whole run)."""
    live: bool = True
    """True while a current score of the run still reports the finding."""


@dataclass(frozen=True, slots=True)
class VerdictCount:
    """Live verdicts on the findings of one (scorer, failure mode)."""

    scorer: str
    failure_mode: str | None
    confirmed: int
    false_positive: int


@dataclass(frozen=True, slots=True)
class Delivery:
    """One webhook delivery of a flagged run's summary."""

    id: str
    """The delivery id, sent with every attempt so the receiver can drop duplicates."""
    run_id: str
    url: str
    body: str
    """The exact JSON body (what is signed)."""
    status: str = "pending"
    """``pending`` (to be tried at ``next_attempt_at``), ``delivered`` or ``failed`` (gave up
    after the last retry; kept and listed, never dropped)."""
    attempts: int = 0
    next_attempt_at: datetime | None = None
    last_error: str | None = None
    created_at: datetime | None = None
    delivered_at: datetime | None = None


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

    # -- review: the store is the queue ---------------------------------------------------------
    #
    # Every run written by put_traces (new, or replacing a different stored run) is pending
    # review, with its flags reset, until mark_reviewed records it. A run identical to the
    # stored one is left as it is (still reviewed if it was). delete_runs deletes a run's
    # review state, flags, content flags and verdicts with it; replacing a run keeps its
    # verdicts (they become live again when a re-score reports the same finding) and keeps its
    # content flags on the links it still has.

    def pending_review(self, *, limit: int | None = None) -> list[PendingRun]:
        """Runs waiting for review, the oldest written first; at most ``limit`` of them.

        An index scan (pending runs only), never a scan of every run."""
        ...

    def claim_review(
        self, worker: str, *, limit: int = 64, lease_s: float = 300.0
    ) -> list[PendingRun]:
        """Claim up to ``limit`` pending runs, oldest written first, for ``worker`` (any name
        unique among the workers) for ``lease_s`` seconds: what several review workers or
        server processes call instead of :meth:`pending_review` to share the queue.

        A claimed run is not handed to another worker until its lease runs out (its worker
        died or hung: it is then claimed again, so no run is forgotten) or it is marked
        reviewed (which ends the claim). A run replaced while claimed is pending again,
        unclaimed. PostgreSQL takes the runs with ``FOR UPDATE SKIP LOCKED`` (workers never
        wait for each other); SQLite's writes take turns anyway. The review pipeline uses it
        when given a worker name (:func:`agentlens.review.review_pending`)."""
        ...

    def mark_reviewed(self, runs: Iterable[PendingRun], *, at: datetime | None = None) -> int:
        """Record runs as reviewed (at ``at``, default now). A run that was replaced (or deleted)
        since ``pending_review`` listed it is left pending. Returns how many were marked."""
        ...

    def review_lag(self, *, now: datetime | None = None) -> ReviewLag:
        """How many runs wait for review and the age of the oldest one."""
        ...

    def get_flags(self, run_id: str) -> RunFlags | None:
        """The run's flags, derived from its current scores; ``None`` while it has no score.

        Flags are derived state: every ``put_scores`` re-derives the flags of the runs it wrote
        scores for (:func:`agentlens.store._flags.derive_flags`), updates the run's failure
        modes, its verdicts' liveness and its content flags, in the same transaction.

        Raises:
            RunNotFoundError: no run has this id."""
        ...

    def refresh_flags(self, run_ids: Iterable[str]) -> int:
        """Re-derive the flags (and content flags) of these runs from their stored scores, as
        ``put_scores`` does. Unknown ids are skipped. Returns how many runs were refreshed."""
        ...

    def content_flags(self, kind: str, item_id: str) -> ContentFlag:
        """The flags of one content item. Content flags follow the runs linked to the item:

        - a run whose flags become ``flagged`` flags every item of its ``links`` (with its
          reason); a run re-scored ``clean`` releases them; a run that becomes
          ``unverifiable`` or ``error`` keeps what it held (not flagged, not cleared);
        - a run whose every finding has a live ``false_positive`` verdict is dismissed: it no
          longer holds the flag (it holds it again if a re-score reports a new finding);
        - an item is ``hallucination_suspected`` while at least one run holds its flag.

        An item no run flagged has no runs (``hallucination_suspected`` is False)."""
        ...

    def flagged_content(self, *, limit: int | None = None) -> list[ContentFlag]:
        """Every content item that is ``hallucination_suspected`` now, most recently flagged
        first (dismissed runs are not listed in ``runs``)."""
        ...

    def put_verdict(
        self,
        run_id: str,
        verdict: str,
        *,
        finding: int | None = None,
        note: str | None = None,
        author: str | None = None,
        at: datetime | None = None,
    ) -> list[VerdictRecord]:
        """Record a human verdict (``confirmed`` or ``false_positive``) on finding number
        ``finding`` (from 1, as :meth:`get_flags` numbers them) of a flagged run, or on each
        of its current findings when ``finding`` is ``None``. A later verdict on the same
        finding replaces the earlier one. Content flags are re-derived (a false positive on
        every finding of the run releases the content it flagged).

        Raises:
            RunNotFoundError: no run has this id.
            StoreError: the run is not flagged, ``finding`` is out of range, or ``verdict`` is
                not one of the two values (nothing is written)."""
        ...

    def get_verdicts(self, run_id: str) -> list[VerdictRecord]:
        """Every verdict on the run's findings (live or not), oldest first."""
        ...

    def verdict_counts(
        self, *, since: datetime | None = None, project: str | None = None
    ) -> list[VerdictCount]:
        """Live verdicts given at or after ``since`` (on runs of ``project``, when given),
        counted per (scorer, failure mode), in (scorer, failure mode) order: the input of a
        detector's measured precision."""
        ...

    def review_queue(
        self, *, agent: str | None = None, limit: int | None = None, project: str | None = None
    ) -> list[RunSummary]:
        """Flagged runs with at least one current finding without a live verdict, oldest
        (``started_at``) first: what a human should look at next (of one ``project``, when
        given)."""
        ...

    def add_deliveries(self, deliveries: Iterable[Delivery]) -> int:
        """Store new webhook deliveries (an id already stored is left as it is)."""
        ...

    def due_deliveries(
        self, *, now: datetime | None = None, limit: int | None = None
    ) -> list[Delivery]:
        """Pending deliveries whose ``next_attempt_at`` has come, the earliest first."""
        ...

    def record_delivery(
        self,
        delivery_id: str,
        *,
        ok: bool,
        error: str | None = None,
        next_attempt_at: datetime | None = None,
        at: datetime | None = None,
    ) -> None:
        """Record one attempt: ``ok`` marks it delivered; otherwise the error is kept and the
        delivery is retried at ``next_attempt_at``, or marked ``failed`` when that is
        ``None`` (given up: kept, listed, never dropped)."""
        ...

    def list_deliveries(
        self, *, status: str | None = None, limit: int | None = None
    ) -> list[Delivery]:
        """Deliveries (of one status, or all), newest first."""
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

    def has_other_projects(self, project: str) -> bool:
        """Whether a run of another project than ``project`` is stored."""
        ...
