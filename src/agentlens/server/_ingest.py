"""The server's write path: one writer thread with group commit, and the trace assembler.

Request handlers never write: they hand a job (spans to stage, or runs to store) to the
:class:`Ingestor` and wait for it. The writer thread takes every job waiting, writes them in one
transaction, and only then completes them, so a 2xx is sent only for what is committed. When
more spans wait than ``max_pending_spans``, a new job is refused at once with
:class:`Overloaded` (the server answers 429 with ``Retry-After``): nothing is dropped silently.

The assembler thread builds runs from staged spans: a trace is built when its root span has
ended, or when no span of it arrived for ``idle_timeout_s`` (the run is then marked
``metadata.otel_incomplete``); spans that arrive later rebuild it. Each build is stored with the
mark of the spans it includes in one transaction (:meth:`~agentlens.store.ServerStore.
commit_built_runs`), so a crash at any point loses nothing that was acknowledged and stores no
span twice: after a restart the assembler finds what is still unbuilt.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import from_json

from agentlens.errors import RunNotFoundError, StoreError
from agentlens.ingest.otlp import OtlpSpan, SpanRecord, build_trace
from agentlens.model import Trace
from agentlens.store._server import StagedSpan

__all__ = ["Ingestor", "Metrics", "Overloaded"]

logger = logging.getLogger("agentlens.server")


class Overloaded(Exception):
    """The writer has more work waiting than it accepts: retry after ``retry_after`` seconds."""

    def __init__(self, retry_after: int = 1) -> None:
        super().__init__("the server is busy: retry later")
        self.retry_after = retry_after


class WriteFailed(Exception):
    """The store could not commit a job (the server answers 503)."""


@dataclass
class Metrics:
    """Counters since the server started (for ``/metrics``)."""

    spans_received: int = 0
    spans_stored: int = 0
    spans_duplicate: int = 0
    spans_rejected: int = 0
    runs_received: int = 0
    runs_stored: int = 0
    runs_rejected: int = 0
    runs_built: int = 0
    requests_refused: int = 0
    write_failures: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **counts: int) -> None:
        with self.lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)


@dataclass
class _Job:
    kind: str  # "spans" or "runs"
    project: str
    items: list[Any]
    size: int
    future: concurrent.futures.Future[Any] = field(default_factory=concurrent.futures.Future)


def _now_us() -> int:
    return int(time.time() * 1_000_000)


class Ingestor:
    """The writer and assembler threads over one store (see the module docstring).

    Args:
        store: a :class:`agentlens.store.ServerStore`.
        max_pending_spans: spans (or runs) waiting for the writer before new work is refused.
        idle_timeout_s: a trace whose root never arrives is built after this long without a
            new span (and marked incomplete).
        retention_s: spans of a built trace are kept this long (a late span then rebuilds the
            run exactly), then purged (a later span is merged into the stored run).
        on_stored: called with the ids of runs stored (the review pipeline's notification),
            on the writer or assembler thread; exceptions are logged.
        on_staged: called on the writer thread after spans were committed, when the assembler
            runs elsewhere (:mod:`agentlens.server._background`); default: wake this
            assembler.
    """

    def __init__(
        self,
        store: Any,
        *,
        max_pending_spans: int = 20_000,
        idle_timeout_s: float = 300.0,
        retention_s: float = 600.0,
        on_stored: Callable[[list[str]], None] | None = None,
        metrics: Metrics | None = None,
        on_staged: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self.max_pending = max_pending_spans
        self.idle_timeout_s = idle_timeout_s
        self.retention_s = retention_s
        self.on_stored = on_stored
        self.metrics = metrics or Metrics()
        self._jobs: deque[_Job] = deque()
        self._pending = 0
        self._cond = threading.Condition()
        self._assemble = threading.Event()
        self._on_staged = on_staged or self._assemble.set
        self._stop = False
        self._threads: list[threading.Thread] = []
        self._writer_thread: threading.Thread | None = None
        self._last_purge = 0.0
        self._drain_s = 8.0

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self, *, writer: bool = True, assembler: bool = True) -> None:
        """Start the writer and assembler threads, or one of them (idempotent)."""
        if self._threads:
            return
        self._stop = False
        threads = (("writer", self._writer, writer), ("assembler", self._assembler, assembler))
        for name, target, wanted in threads:
            if not wanted:
                continue
            thread = threading.Thread(target=target, name=f"agentlens-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)
            if name == "writer":
                self._writer_thread = thread

    def shutdown(self, timeout: float = 10.0) -> None:
        """Finish the jobs already accepted, build what is ready (for at most about
        ``timeout`` seconds), and stop the threads."""
        self._drain_s = timeout * 0.8
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._assemble.set()
        for thread in self._threads:
            thread.join(timeout)
        self._threads = []

    def wake(self) -> None:
        """Have the assembler look for ready traces now."""
        self._assemble.set()

    @property
    def pending(self) -> int:
        """Spans and runs waiting for the writer."""
        return self._pending

    # -- submitting ---------------------------------------------------------------------------

    def _submit(self, job: _Job) -> concurrent.futures.Future[Any]:
        with self._cond:
            if self._stop:
                raise Overloaded(5)
            if self._pending and self._pending + job.size > self.max_pending:
                self.metrics.add(requests_refused=1)
                raise Overloaded(1)
            self._pending += job.size
            self._jobs.append(job)
            self._cond.notify()
        return job.future

    async def stage(self, project: str, spans: Sequence[SpanRecord]) -> int:
        """Stage spans durably; returns how many there were. Raises :class:`Overloaded` or
        :class:`WriteFailed`."""
        rows = [StagedSpan(project, s.trace_id, s.span_id, s.root_ended, s.doc) for s in spans]
        future = self._submit(_Job("spans", project, rows, len(rows)))
        return int(await asyncio.wrap_future(future))

    async def put_runs(self, project: str | None, traces: Sequence[Trace]) -> list[str | None]:
        """Store runs; per run ``None`` when stored, else why it was refused (a run of another
        project has this id). ``project`` ``None`` means no project is enforced."""
        future = self._submit(_Job("runs", project or "", list(traces), max(1, len(traces))))
        result: list[str | None] = await asyncio.wrap_future(future)
        return result

    # -- the writer ---------------------------------------------------------------------------

    def _writer(self) -> None:
        while True:
            with self._cond:
                while not self._jobs and not self._stop:
                    self._cond.wait(0.5)
                if not self._jobs and self._stop:
                    return
                jobs = list(self._jobs)
                self._jobs.clear()
            try:
                self._write(jobs)
            finally:
                with self._cond:
                    self._pending -= sum(j.size for j in jobs)

    def _write(self, jobs: list[_Job]) -> None:
        span_jobs = [j for j in jobs if j.kind == "spans"]
        if span_jobs:
            rows = [row for job in span_jobs for row in job.items]
            try:
                new = self.store.stage_spans(rows, _now_us())
            except Exception as exc:
                logger.error("staging %d spans failed: %s", len(rows), exc)
                self.metrics.add(write_failures=1)
                for job in span_jobs:
                    job.future.set_exception(WriteFailed(str(exc)))
            else:
                self.metrics.add(spans_stored=new, spans_duplicate=len(rows) - new)
                # Per job, "new" is not known exactly when jobs share a transaction: report
                # the job's own span count (a duplicate is still acknowledged).
                for job in span_jobs:
                    job.future.set_result(len(job.items))
                self._staged()
        for job in jobs:
            if job.kind == "runs":
                self._write_runs(job)

    def _staged(self) -> None:
        try:
            self._on_staged()
        except Exception:
            logger.exception("the on_staged callback failed")

    def _write_runs(self, job: _Job) -> None:
        traces: list[Trace] = job.items
        try:
            owners = self.store.run_projects([t.id for t in traces])
            verdicts: list[str | None] = []
            keep: list[Trace] = []
            for trace in traces:
                owner = owners.get(trace.id)
                if owner is not None and owner != trace.project:
                    verdicts.append(f"run id {trace.id!r} belongs to another project")
                else:
                    verdicts.append(None)
                    keep.append(trace)
            if keep:
                self.store.put_traces(keep)
        except Exception as exc:
            logger.error("storing %d runs failed: %s", len(traces), exc)
            self.metrics.add(write_failures=1)
            job.future.set_exception(WriteFailed(str(exc)))
            return
        self.metrics.add(runs_stored=len(keep), runs_rejected=len(traces) - len(keep))
        job.future.set_result(verdicts)
        self._notify([t.id for t in keep])

    def _notify(self, run_ids: list[str]) -> None:
        if run_ids and self.on_stored is not None:
            try:
                self.on_stored(run_ids)
            except Exception:
                logger.exception("the on_stored callback failed")

    # -- the assembler ------------------------------------------------------------------------

    def _assembler(self) -> None:
        while True:
            self._assemble.wait(0.25)
            self._assemble.clear()
            try:
                for _ in range(64):  # bounded: then purge, and look at stop
                    if self._stop or not self.assemble_once():
                        break
                self._maybe_purge()
            except Exception:
                logger.exception("building runs from staged spans failed; retrying")
                time.sleep(0.5)
            writer = self._writer_thread
            if self._stop and (writer is None or not writer.is_alive()):
                self._drain()
                return

    def _drain(self) -> None:
        """At shutdown: build what is ready, for at most ``drain_s`` seconds (a restart
        builds the rest)."""
        deadline = time.monotonic() + self._drain_s
        try:
            while time.monotonic() < deadline and self.assemble_once():
                pass
        except Exception:
            logger.exception("building runs at shutdown failed")

    def assemble_once(self, limit: int = 256) -> int:
        """Build and store the runs of up to ``limit`` ready traces; returns how many."""
        now = _now_us()
        ready = self.store.ready_traces(
            idle_before=now - int(self.idle_timeout_s * 1_000_000), limit=limit
        )
        if not ready:
            return 0
        built: list[tuple[str, str, Trace | None, int]] = []
        for item in ready:
            docs, upto = self.store.staged_spans(item.project, item.trace_id)
            run: Trace | None = None
            if docs:
                try:  # a trace that cannot be read or built is logged, and the others built
                    spans = [OtlpSpan.from_dict(from_json(doc)) for doc in docs]
                    run = build_trace(spans, project=item.project, complete=item.complete)
                    if item.purged:
                        run = self._merge(run)
                except Exception as exc:
                    logger.error("trace %s cannot be built: %s", item.trace_id, exc)
                    run = None
            built.append((item.project, item.trace_id, run, upto))
        owners = self.store.run_projects([r.id for _, _, r, _ in built if r is not None])
        checked: list[tuple[str, str, Trace | None, int]] = []
        refused = 0
        for project, trace_id, run, upto in built:
            if run is not None and owners.get(run.id, project) != project:
                logger.warning("trace %s: its run id belongs to another project", trace_id)
                refused += 1
                run = None
            checked.append((project, trace_id, run, upto))
        try:
            stored = self.store.commit_built_runs(checked, _now_us())
        except StoreError as exc:
            logger.error("storing %d built runs failed: %s", len(checked), exc)
            raise
        self.metrics.add(runs_built=stored, runs_rejected=refused)
        self._notify([r.id for _, _, r, _ in checked if r is not None])
        return len(ready)

    def _merge(self, run: Trace) -> Trace:
        """A run built from late spans (the earlier spans purged): add its steps to the stored
        run, replacing steps with the same id."""
        try:
            stored = self.store.get_trace(run.id)
        except RunNotFoundError:
            return run
        new_ids = {s.id for s in run.steps}
        steps = [s for s in stored.steps if s.id not in new_ids] + run.steps
        steps.sort(key=lambda s: (s.started_at is None, s.started_at or 0))
        merged = stored.model_copy(update={"steps": steps})
        if not stored.has_output and run.has_output:
            merged = merged.model_copy(update={"output": run.output})
        return merged

    def _maybe_purge(self) -> None:
        now = time.monotonic()
        if now - self._last_purge < 5.0:
            return
        self._last_purge = now
        self.store.purge_staged_spans(built_before=_now_us() - int(self.retention_s * 1_000_000))
