"""The review half of :class:`~agentlens.store.SQLiteStore`: the review queue, run flags, content
flags, verdicts and webhook deliveries (tables of migration 3; contracts in
:mod:`agentlens.store._protocol`).

``run_review`` (one row per run, written and deleted with it)
    ``stored_at`` (µs, when this version of the run was written), ``reviewed_at`` (NULL: pending
    review), ``sort_at`` and ``agent`` (copied from the run, for the indexes), and the flags
    derived from the run's current scores: ``state`` (NULL while unscored), ``flagged`` (0/1),
    ``reason``, ``modes`` and ``findings`` (JSON arrays), ``open`` (findings without a live
    verdict). Partial indexes: pending runs by ``(stored_at, run_id)``; flagged runs by
    ``(sort_at, run_id)``; runs with open findings by ``(agent, sort_at, run_id)``.
``run_flag_modes`` (run_id, mode)
    The failure modes of each flagged run: ``runs --mode MODE``.
``content_flags`` (kind, item_id, run_id) -> reason, flagged_at, dismissed
    One row per (content item, flagged run linked to it).
``review_verdicts`` (run_id, finding_key) -> verdict, note, author, scope, created_at, live
    The latest human verdict per finding; ``live`` while a current score reports the finding.
``webhook_deliveries`` (id) -> run_id, url, body, status, attempts, next_attempt_at, ...
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import TypeAdapter

from agentlens.errors import RunNotFoundError, StoreError
from agentlens.model import Finding, Score, Verdict, from_epoch_us, to_epoch_us
from agentlens.store._flags import (
    VERDICTS,
    CurrentScore,
    FlaggedFinding,
    FlagState,
    RunFlags,
    derive_from_current,
)
from agentlens.store._protocol import (
    ContentFlag,
    ContentFlagRun,
    Delivery,
    PendingRun,
    ReviewLag,
    RunSummary,
    VerdictCount,
    VerdictRecord,
)
from agentlens.store._sqlite_filter import _marks

__all__ = ["ReviewMixin", "now_us"]

_T = TypeVar("_T")
_BATCH = 500
_FINDINGS: TypeAdapter[list[Finding]] = TypeAdapter(list[Finding])

_clock_lock = threading.Lock()
_last_us = 0


def now_us() -> int:
    """The current time in µs since the epoch, strictly increasing within the process (so a
    run written twice in a row gets two different ``stored_at`` tokens)."""
    global _last_us
    now = to_epoch_us(datetime.now(UTC)) or 0
    with _clock_lock:
        _last_us = max(now, _last_us + 1)
        return _last_us


def _us(value: datetime | None) -> int:
    return now_us() if value is None else int(to_epoch_us(value) or 0)


def _dt(value: int | None) -> datetime | None:
    return from_epoch_us(value)


def _chunks(ids: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(ids), _BATCH):
        yield ids[start : start + _BATCH]


def _limit_sql(limit: int | None) -> str:
    if limit is None:
        return ""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        from agentlens.errors import ConfigError

        raise ConfigError(f"limit must be a non-negative integer, got {limit!r}")
    return f" LIMIT {int(limit)}"


SUMMARY_COLUMNS = (
    "r.project, r.agent, r.name, r.status, r.started_at, r.ended_at, r.step_count,"
    " r.has_output, CASE WHEN json_valid(r.doc) THEN json_extract(r.doc, '$.metadata') END,"
    " f.state, f.flagged, f.reason, f.modes, f.reviewed_at"
)
"""The columns :func:`summary_of` reads, after ``sort_at, id`` (``runs r``, ``run_review f``)."""


def _json_object(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def summary_of(
    row: Sequence[Any], metadata: Callable[[str | None], dict[str, Any]] = _json_object
) -> RunSummary:
    """A :class:`RunSummary` from a row of ``sort_at, id,`` :data:`SUMMARY_COLUMNS`
    (``metadata`` parses the metadata column)."""
    return RunSummary(
        id=row[1],
        project=row[2],
        agent=row[3],
        name=row[4],
        status=row[5],
        started_at=_dt(row[6]),
        ended_at=_dt(row[7]),
        step_count=row[8],
        has_output=bool(row[9]),
        metadata=metadata(row[10]),
        flag_state=row[11],
        hallucination_detected=bool(row[12]),
        hallucination_reason=row[13],
        failure_modes=tuple(json.loads(row[14])) if row[14] else (),
        reviewed_at=_dt(row[15]),
    )


def _verdict_record(row: Sequence[Any]) -> VerdictRecord:
    return VerdictRecord(
        run_id=row[0],
        finding_key=row[1],
        scorer=row[2],
        failure_mode=row[3],
        text=row[4],
        verdict=row[5],
        note=row[6],
        author=row[7],
        scope=row[8],
        created_at=_dt(row[9]) or datetime.now(UTC),
        live=bool(row[10]),
    )


_VERDICT_COLUMNS = (
    "run_id, finding_key, scorer, failure_mode, text, verdict, note, author, scope,"
    " created_at, live"
)
_DELIVERY_COLUMNS = (
    "id, run_id, url, body, status, attempts, next_attempt_at, last_error, created_at, delivered_at"
)


def _delivery(row: Sequence[Any]) -> Delivery:
    return Delivery(
        id=row[0],
        run_id=row[1],
        url=row[2],
        body=row[3],
        status=row[4],
        attempts=row[5],
        next_attempt_at=_dt(row[6]),
        last_error=row[7],
        created_at=_dt(row[8]),
        delivered_at=_dt(row[9]),
    )


_CLEAN = RunFlags(FlagState.CLEAN)
"""The flags of a run whose current scores all passed (what :func:`derive_from_current` gives)."""


class _FlagWrites:
    """The rows that re-deriving the flags of a part's runs writes, collected run by run and
    written with one statement per kind of row for the whole part (each run's rows are its own,
    keyed by its id, so the order of the statements across runs does not change what is
    stored)."""

    __slots__ = (
        "clean",
        "content",
        "derived",
        "flag_modes",
        "live",
        "now",
        "reviews",
    )

    _CLEAN_REVIEW = (
        "UPDATE run_review SET state = ?, flagged = 0, reason = NULL, modes = '[]',"
        " findings = '[]', open = 0 WHERE run_id IN "
    )
    """What a clean run's review row becomes (a clean run has no findings): one statement for
    all the part's clean runs, not one per run."""

    def __init__(self, now: int) -> None:
        self.now = now
        self.derived: list[str] = []
        """Runs whose flag modes are replaced."""
        self.live: list[tuple[int, str, str]] = []
        self.reviews: list[tuple[Any, ...]] = []
        self.flag_modes: list[tuple[str, str]] = []
        self.content: list[tuple[Any, ...]] = []
        self.clean: list[str] = []
        """Clean runs, whose content flags are released."""

    def add(
        self,
        run_id: str,
        flags: RunFlags | None,
        verdicts: dict[str, str],
        links: dict[str, str],
    ) -> None:
        """The rows of one run: its review row, its verdicts' liveness, its flag modes and the
        content flags it holds."""
        if flags is _CLEAN:  # no findings: its review row is the same for every clean run
            self.live.extend((0, run_id, k) for k in verdicts)
            self.derived.append(run_id)
            self.clean.append(run_id)
            return
        findings = flags.findings if flags is not None else ()
        keys = {f.key for f in findings}
        live = {k: v for k, v in verdicts.items() if k in keys}
        open_count = sum(1 for f in findings if f.key not in live)
        dismissed = bool(findings) and all(live.get(f.key) == "false_positive" for f in findings)
        self.live.extend((int(k in keys), run_id, k) for k in verdicts)
        self.reviews.append(
            (
                None if flags is None else str(flags.state),
                int(flags is not None and flags.hallucination_detected),
                None if flags is None else flags.reason,
                json.dumps(list(flags.failure_modes)) if flags and flags.failure_modes else "[]",
                json.dumps([f.to_json() for f in findings], ensure_ascii=False)
                if findings
                else "[]",
                open_count,
                run_id,
            )
        )
        self.derived.append(run_id)
        if flags is None:
            return
        if flags.state is FlagState.FLAGGED:
            self.flag_modes.extend((run_id, mode) for mode in flags.failure_modes)
            self.content.extend(
                (kind, str(item), run_id, flags.reason, self.now, int(dismissed))
                for kind, item in links.items()
            )
        elif flags.state is FlagState.CLEAN:
            self.clean.append(run_id)
        # unverifiable, error: neither flagged nor cleared; what the run held stays.

    def flush(self, conn: sqlite3.Connection) -> None:
        """Write the collected rows (inside the caller's write transaction)."""
        if self.live:
            conn.executemany(
                "UPDATE review_verdicts SET live = ? WHERE run_id = ? AND finding_key = ?",
                self.live,
            )
        if self.reviews:
            conn.executemany(
                "UPDATE run_review SET state = ?, flagged = ?, reason = ?, modes = ?,"
                " findings = ?, open = ? WHERE run_id = ?",
                self.reviews,
            )
        if self.clean:
            conn.execute(
                self._CLEAN_REVIEW + _marks(len(self.clean)), [str(FlagState.CLEAN), *self.clean]
            )
        if self.derived:
            conn.execute(
                f"DELETE FROM run_flag_modes WHERE run_id IN {_marks(len(self.derived))}",
                self.derived,
            )
        if self.flag_modes:
            conn.executemany(
                "INSERT INTO run_flag_modes (run_id, mode) VALUES (?, ?)", self.flag_modes
            )
        if self.clean:
            conn.execute(
                f"DELETE FROM content_flags WHERE run_id IN {_marks(len(self.clean))}", self.clean
            )
        if self.content:
            conn.executemany(
                "INSERT INTO content_flags (kind, item_id, run_id, reason, flagged_at, dismissed)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (kind, item_id, run_id) DO UPDATE SET"
                " reason = excluded.reason, dismissed = excluded.dismissed",
                self.content,
            )


class ReviewMixin:
    """Review methods of :class:`~agentlens.store.SQLiteStore` (see the module docstring)."""

    _label: str

    def _read(self, work: Callable[[sqlite3.Connection], _T]) -> _T:  # pragma: no cover
        raise NotImplementedError

    def _write(self, work: Callable[[sqlite3.Connection], _T]) -> _T:  # pragma: no cover
        raise NotImplementedError

    # -- hooks called by the run and score write paths ---------------------------------------

    @staticmethod
    def _review_rows_for_new_runs(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
        """Each new or replaced run becomes pending review, unflagged. ``rows`` are
        ``(run_id, sort_at, agent)``."""
        conn.executemany(
            "INSERT OR REPLACE INTO run_review (run_id, sort_at, agent, stored_at)"
            " VALUES (?, ?, ?, ?)",
            [(*row, now_us()) for row in rows],
        )

    @staticmethod
    def _forget_review(
        conn: sqlite3.Connection, run_ids: Sequence[str], *, replacing: bool
    ) -> None:
        """Drop the review state of deleted runs; of replaced ones, keep their verdicts (not
        live until a re-score reports the finding again) and their content flags (pruned to the
        new links by :meth:`_prune_content`)."""
        for part in _chunks(run_ids):
            marks = _marks(len(part))
            conn.execute(f"DELETE FROM run_review WHERE run_id IN {marks}", part)
            conn.execute(f"DELETE FROM run_flag_modes WHERE run_id IN {marks}", part)
            if replacing:
                conn.execute(f"UPDATE review_verdicts SET live = 0 WHERE run_id IN {marks}", part)
            else:
                conn.execute(f"DELETE FROM review_verdicts WHERE run_id IN {marks}", part)
                conn.execute(f"DELETE FROM content_flags WHERE run_id IN {marks}", part)

    # -- what the two dialects say differently (PostgreSQL's in _pg_review) -------------------

    _SKIP_LOCKED = ""
    """What a claim's ``SELECT`` of pending runs ends with (PostgreSQL: skip rows another
    transaction holds; SQLite's writers take turns anyway)."""

    @staticmethod
    def _json_text(column: str) -> str:
        """SQL: a JSON column as its text."""
        return column

    @staticmethod
    def _summary_sql() -> tuple[str, Callable[[str | None], dict[str, Any]]]:
        """:data:`SUMMARY_COLUMNS` in this dialect, and how :func:`summary_of` parses the
        metadata column."""
        return SUMMARY_COLUMNS, _json_object

    @staticmethod
    def _run_links(conn: sqlite3.Connection, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The ``links`` of each of these runs that is stored (at most :data:`_BATCH` ids)."""
        return {
            run_id: _json_object(text)
            for run_id, text in conn.execute(
                "SELECT id, CASE WHEN json_valid(doc) THEN json_extract(doc, '$.links') END"
                f" FROM runs WHERE id IN {_marks(len(run_ids))}",
                list(run_ids),
            )
        }

    # -- the content flags of replaced runs -----------------------------------------------------

    def _prune_content(self, conn: sqlite3.Connection, run_ids: Sequence[str]) -> None:
        """Release the content flags a replaced run held on items it no longer links."""
        for part in _chunks(run_ids):
            held = conn.execute(
                "SELECT kind, item_id, run_id FROM content_flags"
                f" WHERE run_id IN {_marks(len(part))}",
                part,
            ).fetchall()
            if not held:
                continue
            links = self._run_links(conn, part)
            gone = [
                (kind, item, run_id)
                for kind, item, run_id in held
                if links.get(run_id, {}).get(kind) != item
            ]
            conn.executemany(
                "DELETE FROM content_flags WHERE kind = ? AND item_id = ? AND run_id = ?", gone
            )

    def _derive(
        self,
        conn: sqlite3.Connection,
        run_ids: Sequence[str],
        fresh: dict[tuple[str, str, str], Score] | None = None,
    ) -> None:
        """Re-derive the flags, failure modes, verdict liveness and content flags of these runs
        from their stored scores (inside the caller's write transaction). ``fresh``: scores just
        written, by (run, scorer, version), so their documents need not be parsed again."""
        for part in _chunks(list(dict.fromkeys(run_ids))):
            self._derive_part(conn, part, fresh or {})

    def _derive_part(
        self,
        conn: sqlite3.Connection,
        part: Sequence[str],
        fresh: dict[tuple[str, str, str], Score],
    ) -> None:
        marks = _marks(len(part))
        now = now_us()
        # the stored runs, and those without a review row (none, unless written by hand): both
        # read from the two primary keys' indexes, not from the runs' rows
        stored: set[str] = set()
        unreviewed: list[str] = []
        for run_id, reviewed in conn.execute(
            "SELECT r.id, f.run_id FROM runs r LEFT JOIN run_review f ON f.run_id = r.id"
            f" WHERE r.id IN {marks}",
            part,
        ):
            stored.add(run_id)
            if reviewed is None:
                unreviewed.append(run_id)
        if unreviewed:
            conn.execute(
                "INSERT OR IGNORE INTO run_review (run_id, sort_at, agent, stored_at)"
                f" SELECT id, sort_at, agent, ? FROM runs WHERE id IN {_marks(len(unreviewed))}",
                [now, *unreviewed],
            )
        rows = conn.execute(
            f"SELECT run_id, scorer, version, verdict, scored_at FROM scores WHERE run_id IN {marks}",
            part,
        ).fetchall()
        latest: dict[tuple[str, str], tuple[Any, ...]] = {}
        for row in rows:
            key = (row[0], row[1])
            seen = latest.get(key)
            if seen is None or (row[4], row[2]) >= (seen[4], seen[2]):
                latest[key] = row
        # the findings of the current flagged scores: those just written are at hand
        docs: dict[tuple[str, str, str], Score] = {}
        wanted: set[tuple[str, str, str]] = set()
        for run_id, scorer, version, verdict, _ in latest.values():
            if verdict == Verdict.FLAGGED:
                known = fresh.get((run_id, scorer, version))
                if known is not None:
                    docs[(run_id, scorer, version)] = known
                else:
                    wanted.add((run_id, scorer, version))
        if wanted:
            for run_id, scorer, version, doc in conn.execute(
                f"SELECT run_id, scorer, version, {self._json_text('doc')} FROM scores"
                f" WHERE run_id IN {marks} AND verdict = 'flagged'",
                part,
            ):
                if (run_id, scorer, version) in wanted:
                    docs[(run_id, scorer, version)] = Score.model_validate_json(doc)
        # a run whose current scores all passed is clean: only the others are derived in full
        scored = {row[0] for row in latest.values()}
        mixed = {row[0] for row in latest.values() if row[3] != Verdict.PASSED}
        current: dict[str, list[CurrentScore]] = {run_id: [] for run_id in mixed}
        for run_id, scorer, version, verdict, _ in latest.values():
            if run_id not in mixed:
                continue
            score = docs.get((run_id, scorer, version))
            current[run_id].append(
                CurrentScore(
                    scorer,
                    version,
                    Verdict(verdict),
                    score.detail if score else "",
                    tuple(score.findings) if score else (),
                )
            )
        verdicts: dict[str, dict[str, str]] = {}
        for run_id, key, verdict in conn.execute(
            f"SELECT run_id, finding_key, verdict FROM review_verdicts WHERE run_id IN {marks}",
            part,
        ):
            verdicts.setdefault(run_id, {})[key] = verdict
        # only a run with a score that did not pass can be flagged and hold content flags
        derived = [run_id for run_id in part if run_id in mixed and run_id in stored]
        links = self._run_links(conn, derived) if derived else {}
        writes = _FlagWrites(now)
        for run_id in part:
            if run_id not in stored:
                continue
            if run_id in mixed:
                flags = derive_from_current(current[run_id])
            else:
                flags = _CLEAN if run_id in scored else None
            writes.add(run_id, flags, verdicts.get(run_id, {}), links.get(run_id, {}))
        writes.flush(conn)

    # -- the queue ----------------------------------------------------------------------------

    def pending_review(self, *, limit: int | None = None) -> list[PendingRun]:
        """Runs waiting for review, oldest written first (partial index on pending runs)."""
        sql = (
            "SELECT run_id, stored_at FROM run_review WHERE reviewed_at IS NULL"
            " ORDER BY stored_at, run_id" + _limit_sql(limit)
        )
        return self._read(lambda c: [PendingRun(r[0], r[1]) for r in c.execute(sql)])

    def claim_review(
        self, worker: str, *, limit: int = 64, lease_s: float = 300.0
    ) -> list[PendingRun]:
        """Claim up to ``limit`` pending runs (oldest written first) for ``worker``, for
        ``lease_s`` seconds (see :meth:`agentlens.store.TraceStore.claim_review`): no other
        worker gets them until the lease runs out or they are marked reviewed. One write
        transaction; on PostgreSQL runs another worker is claiming are skipped, not waited for
        (``FOR UPDATE SKIP LOCKED``)."""
        _limit_sql(limit)
        now = now_us()
        until = now + int(lease_s * 1_000_000)
        sql = (
            "UPDATE run_review SET claimed_by = ?, lease_until = ? WHERE run_id IN ("
            "SELECT run_id FROM run_review WHERE reviewed_at IS NULL"
            " AND (lease_until IS NULL OR lease_until < ?)"
            f" ORDER BY stored_at, run_id LIMIT ?{self._SKIP_LOCKED}) RETURNING run_id, stored_at"
        )

        def work(conn: sqlite3.Connection) -> list[PendingRun]:
            rows = conn.execute(sql, (worker, until, now, limit)).fetchall()
            return sorted(
                (PendingRun(r[0], r[1]) for r in rows), key=lambda p: (p.stored_at, p.run_id)
            )

        return self._write(work)

    def mark_reviewed(self, runs: Iterable[PendingRun], *, at: datetime | None = None) -> int:
        """Record runs reviewed; a run replaced since it was listed stays pending."""
        items = [(r.run_id, r.stored_at) for r in runs]
        if not items:
            return 0
        when = _us(at)

        def work(conn: sqlite3.Connection) -> int:
            marked = 0
            for run_id, stored_at in items:
                marked += conn.execute(
                    "UPDATE run_review SET reviewed_at = ? WHERE run_id = ? AND stored_at = ?",
                    (when, run_id, stored_at),
                ).rowcount
            return marked

        return self._write(work)

    def review_lag(self, *, now: datetime | None = None) -> ReviewLag:
        """Pending runs and the age of the oldest."""
        row = self._read(
            lambda c: c.execute(
                "SELECT count(*), min(stored_at) FROM run_review WHERE reviewed_at IS NULL"
            ).fetchone()
        )
        count, oldest = int(row[0]), row[1]
        if not count or oldest is None:
            return ReviewLag(pending=count, oldest_stored_at=None, lag_s=0.0)
        reference = _us(now) if now is not None else now_us()
        return ReviewLag(
            pending=count, oldest_stored_at=_dt(oldest), lag_s=max(0.0, (reference - oldest) / 1e6)
        )

    # -- flags --------------------------------------------------------------------------------

    def get_flags(self, run_id: str) -> RunFlags | None:
        """The run's derived flags (``None`` while it has no score)."""

        def work(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            row = conn.execute(
                "SELECT f.state, f.reason, f.modes, f.findings, r.id FROM runs r"
                " LEFT JOIN run_review f ON f.run_id = r.id WHERE r.id = ?",
                (run_id,),
            ).fetchone()
            return None if row is None else tuple(row)

        row = self._read(work)
        if row is None:
            raise RunNotFoundError(run_id)
        state, reason, modes, findings, _ = row
        if state is None:
            return None
        return RunFlags(
            state=FlagState(state),
            reason=reason,
            failure_modes=tuple(json.loads(modes or "[]")),
            findings=tuple(FlaggedFinding.from_json(f) for f in json.loads(findings or "[]")),
        )

    def refresh_flags(self, run_ids: Iterable[str]) -> int:
        """Re-derive flags from stored scores; returns how many runs exist among ``run_ids``."""
        ids = list(dict.fromkeys(run_ids))
        if not ids:
            return 0

        def work(conn: sqlite3.Connection) -> int:
            found = 0
            for part in _chunks(ids):
                found += conn.execute(
                    f"SELECT count(*) FROM runs WHERE id IN {_marks(len(part))}", part
                ).fetchone()[0]
            self._derive(conn, ids)
            return found

        return self._write(work)

    # -- content flags ------------------------------------------------------------------------

    def content_flags(self, kind: str, item_id: str) -> ContentFlag:
        """The flags of one content item."""
        rows = self._read(
            lambda c: c.execute(
                "SELECT run_id, reason, flagged_at, dismissed FROM content_flags"
                " WHERE kind = ? AND item_id = ? ORDER BY flagged_at, run_id",
                (kind, str(item_id)),
            ).fetchall()
        )
        return ContentFlag(
            kind=kind,
            item_id=str(item_id),
            runs=tuple(
                ContentFlagRun(r[0], r[1], _dt(r[2]) or datetime.now(UTC), bool(r[3])) for r in rows
            ),
        )

    def flagged_content(self, *, limit: int | None = None) -> list[ContentFlag]:
        """Content items flagged now, most recently flagged first."""
        sql = (
            "SELECT kind, item_id, run_id, reason, flagged_at FROM content_flags"
            " WHERE dismissed = 0 ORDER BY flagged_at DESC, kind, item_id, run_id"
        )

        def work(conn: sqlite3.Connection) -> list[ContentFlag]:
            items: dict[tuple[str, str], list[ContentFlagRun]] = {}
            for kind, item, run_id, reason, at in conn.execute(sql):
                key = (kind, item)
                if key not in items and limit is not None and len(items) >= limit:
                    continue
                items.setdefault(key, []).append(
                    ContentFlagRun(run_id, reason, _dt(at) or datetime.now(UTC))
                )
            return [
                ContentFlag(kind, item, tuple(sorted(runs, key=lambda r: r.flagged_at)))
                for (kind, item), runs in items.items()
            ]

        if limit is not None:
            _limit_sql(limit)
        return self._read(work)

    # -- verdicts -----------------------------------------------------------------------------

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
        """Record a verdict on one finding (``finding``, from 1) or on every current finding."""
        if verdict not in VERDICTS:
            raise StoreError(
                f"verdict must be one of {', '.join(VERDICTS)}, got {verdict!r}; nothing was written"
            )
        when = _us(at)

        def work(conn: sqlite3.Connection) -> list[VerdictRecord]:
            row = conn.execute(
                "SELECT f.flagged, f.findings, r.id FROM runs r"
                " LEFT JOIN run_review f ON f.run_id = r.id WHERE r.id = ?",
                (run_id,),
            ).fetchone()
            if row is None:
                raise RunNotFoundError(run_id)
            findings = [FlaggedFinding.from_json(f) for f in json.loads(row[1] or "[]")]
            if not row[0] or not findings:
                raise StoreError(
                    f"run {run_id!r} is not flagged: there is nothing to give a verdict on"
                )
            if finding is not None:
                if not 1 <= finding <= len(findings):
                    raise StoreError(
                        f"run {run_id!r} has {len(findings)} finding"
                        f"{'s' if len(findings) != 1 else ''}; there is no finding {finding}"
                    )
                chosen = [findings[finding - 1]]
            else:
                chosen = findings
            scope = "run" if finding is None else "finding"
            records = [
                (
                    run_id,
                    f.key,
                    f.scorer,
                    f.failure_mode,
                    f.text,
                    verdict,
                    note,
                    author,
                    scope,
                    when,
                    1,
                )
                for f in chosen
            ]
            conn.executemany(
                f"INSERT OR REPLACE INTO review_verdicts ({_VERDICT_COLUMNS})"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                records,
            )
            self._derive(conn, [run_id])
            return [_verdict_record(r) for r in records]

        return self._write(work)

    def get_verdicts(self, run_id: str) -> list[VerdictRecord]:
        """Every verdict on the run's findings, oldest first."""
        rows = self._read(
            lambda c: c.execute(
                f"SELECT {_VERDICT_COLUMNS} FROM review_verdicts WHERE run_id = ?"
                " ORDER BY created_at, finding_key",
                (run_id,),
            ).fetchall()
        )
        return [_verdict_record(r) for r in rows]

    def verdict_counts(
        self, *, since: datetime | None = None, project: str | None = None
    ) -> list[VerdictCount]:
        """Live verdicts per (scorer, failure mode); ``project``: on that project's runs only."""
        sql = (
            "SELECT v.scorer, v.failure_mode, count(*) FILTER (WHERE v.verdict = 'confirmed'),"
            " count(*) FILTER (WHERE v.verdict = 'false_positive') FROM review_verdicts v"
        )
        clauses: list[str] = ["v.live = 1"]
        params: list[Any] = []
        if project is not None:
            sql += " JOIN runs r ON r.id = v.run_id"
            clauses.append("r.project = ?")
            params.append(project)
        if since is not None:
            clauses.append("v.created_at >= ?")
            params.append(_us(since))
        sql += " WHERE " + " AND ".join(clauses)
        sql += " GROUP BY v.scorer, v.failure_mode ORDER BY v.scorer, ifnull(v.failure_mode, '')"
        rows = self._read(lambda c: c.execute(sql, params).fetchall())
        return [VerdictCount(r[0], r[1], int(r[2]), int(r[3])) for r in rows]

    def review_queue(
        self, *, agent: str | None = None, limit: int | None = None, project: str | None = None
    ) -> list[RunSummary]:
        """Flagged runs with a finding that has no live verdict, oldest first."""
        columns, metadata = self._summary_sql()
        sql = (
            f"SELECT f.sort_at, r.id, {columns} FROM run_review f"
            " JOIN runs r ON r.id = f.run_id WHERE f.open > 0"
        )
        params: list[Any] = []
        if agent is not None:
            sql += " AND f.agent = ?"
            params.append(agent)
        if project is not None:
            sql += " AND r.project = ?"
            params.append(project)
        sql += " ORDER BY f.sort_at, f.run_id" + _limit_sql(limit)

        def work(conn: sqlite3.Connection) -> list[Any]:
            # A project with no runs (its key's first visit) has an empty queue: known from the
            # run-count rollup (migration 9) at once, where the query would check the open
            # runs of every project one by one.
            if project is not None and self._queue_from_rollup:
                who = [project] if agent is None else [project, agent]
                cond = " AND project = ?" + ("" if agent is None else " AND agent = ?")
                if not conn.execute(
                    f"SELECT 1 FROM run_rollup WHERE n > 0{cond} LIMIT 1", who
                ).fetchone():
                    return []
            return conn.execute(sql, params).fetchall()

        rows = self._read(work)
        return [summary_of(r, metadata) for r in rows]

    _queue_from_rollup = True
    """``False``: :meth:`review_queue` of a project always runs its query (the benchmarks'
    baseline)."""

    # -- webhook deliveries -------------------------------------------------------------------

    def add_deliveries(self, deliveries: Iterable[Delivery]) -> int:
        """Store new deliveries; an id already stored is left as it is."""
        rows = []
        for d in deliveries:
            created = _us(d.created_at)
            rows.append(
                (
                    d.id,
                    d.run_id,
                    d.url,
                    d.body,
                    d.status,
                    d.attempts,
                    _us(d.next_attempt_at) if d.next_attempt_at else created,
                    d.last_error,
                    created,
                    None,
                )
            )
        if not rows:
            return 0

        def work(conn: sqlite3.Connection) -> int:
            n = 0
            for row in rows:
                n += conn.execute(
                    f"INSERT OR IGNORE INTO webhook_deliveries ({_DELIVERY_COLUMNS})"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    row,
                ).rowcount
            return n

        return self._write(work)

    def due_deliveries(
        self, *, now: datetime | None = None, limit: int | None = None
    ) -> list[Delivery]:
        """Pending deliveries whose next attempt is due, earliest first."""
        sql = (
            f"SELECT {_DELIVERY_COLUMNS} FROM webhook_deliveries WHERE status = 'pending'"
            " AND next_attempt_at <= ? ORDER BY next_attempt_at, id" + _limit_sql(limit)
        )
        when = _us(now)
        return self._read(lambda c: [_delivery(r) for r in c.execute(sql, (when,))])

    def record_delivery(
        self,
        delivery_id: str,
        *,
        ok: bool,
        error: str | None = None,
        next_attempt_at: datetime | None = None,
        at: datetime | None = None,
    ) -> None:
        """Record one attempt of a delivery."""
        when = _us(at)
        if ok:
            sql = (
                "UPDATE webhook_deliveries SET status = 'delivered', attempts = attempts + 1,"
                " delivered_at = ?, last_error = NULL WHERE id = ?"
            )
            params: tuple[Any, ...] = (when, delivery_id)
        elif next_attempt_at is not None:
            sql = (
                "UPDATE webhook_deliveries SET attempts = attempts + 1, last_error = ?,"
                " next_attempt_at = ? WHERE id = ?"
            )
            params = (error, _us(next_attempt_at), delivery_id)
        else:
            sql = (
                "UPDATE webhook_deliveries SET status = 'failed', attempts = attempts + 1,"
                " last_error = ? WHERE id = ?"
            )
            params = (error, delivery_id)
        self._write(lambda c: c.execute(sql, params).rowcount)

    def list_deliveries(
        self, *, status: str | None = None, limit: int | None = None
    ) -> list[Delivery]:
        """Deliveries, newest first."""
        sql = f"SELECT {_DELIVERY_COLUMNS} FROM webhook_deliveries"
        params: list[Any] = []
        if status is not None:
            sql += " WHERE status = ?"
            params.append(status)
        sql += " ORDER BY created_at DESC, id DESC" + _limit_sql(limit)
        return self._read(lambda c: [_delivery(r) for r in c.execute(sql, params)])
