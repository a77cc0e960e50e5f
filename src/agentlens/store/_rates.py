"""SQL aggregation behind ``agentlens rate``: counts of runs by outcome, per group.

The counting rules (the same as :mod:`agentlens.analytics`'s pure-Python tally, which the tests
hold this module to):

- Only the scores of the selected scorers at their *current* version count: the caller names
  the version per (scorer, agent role) with :class:`VersionSelector`.
- A run is **flagged** when any of those scores has the verdict ``flagged`` and, when failure
  modes are selected, a finding of a selected mode (``score_modes``).
- Otherwise it is **error** when any of its scores is an error, else **unverifiable** when any is
  unverifiable, else **passed** (this includes a run flagged only in modes that were not selected).
- A run in the window with none of those scores is **unscored**.

How (:func:`rate_counts`, schema version 2): what a run counts as depends only on its
*signature*, the list of (scorer, version, verdict, failure modes) of its scores, and on its
agent role. The store keeps, through triggers (see :mod:`agentlens.store._migrations`,
migration 2), one signature per run (``rate_runs``) and how many runs of each (UTC day, agent,
release, signature) there are (``rate_rollup``). A query reads the rollup rows of the whole days
of its window and groups the runs of the partial days at its edges by signature, classifies
each distinct (signature, agent) once in Python, and multiplies. The flagged run ids come from
the index ``rate_runs (sig, started_at, ...)``, for the flagging signatures only. So a 90-day
breakdown reads thousands of rollup rows, not a million score rows, and the results are exactly
those of the scan over ``scores`` (:func:`scan_rate_counts`, kept as a reference).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from typing import Any, NamedTuple, TypeVar

from agentlens.errors import StoreError
from agentlens.model import FailureMode

__all__ = [
    "RateCounts",
    "RateQuery",
    "VersionSelector",
    "rate_counts",
    "rebuild_rate_rollup",
    "scan_rate_counts",
    "stored_scorers",
    "stored_versions",
]

_T = TypeVar("_T")


@dataclass(slots=True)
class RateCounts:
    """How many runs of one group ended how. ``key`` is ``None`` for the whole window."""

    key: str | None = None
    runs: int = 0
    """Runs in the window (scored or not)."""
    flagged: int = 0
    passed: int = 0
    unverifiable: int = 0
    errors: int = 0
    by_mode: dict[str, int] = field(default_factory=dict)
    """Flagged runs per failure mode (a run flagged in two modes counts in both)."""
    flagged_run_ids: list[str] = field(default_factory=list)
    """The flagged runs, in id order (ids sort by time)."""

    @property
    def scored(self) -> int:
        """Runs with a definite verdict: flagged or passed."""
        return self.flagged + self.passed

    @property
    def unscored(self) -> int:
        """Runs in the window that no selected scorer has scored at its current version."""
        return self.runs - self.flagged - self.passed - self.unverifiable - self.errors


@dataclass(frozen=True, slots=True)
class VersionSelector:
    """Which version of a scorer counts, for which agent roles.

    ``agents=None`` means every run *except* those whose agent is in ``exclude_agents`` (runs
    without an agent included); otherwise only runs of the listed agents.
    """

    scorer: str
    version: str
    agents: tuple[str, ...] | None = None
    exclude_agents: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RateQuery:
    """What to count: a window (µs since the epoch, half-open), an agent, scorers, modes."""

    selectors: tuple[VersionSelector, ...] = ()
    """The scorer versions that count (ignored when ``any_version_of`` is given)."""
    any_version_of: tuple[str, ...] | None = None
    """Count every stored version of these scorers, each apart (the scorer_version breakdown)."""
    start_us: int | None = None
    end_us: int | None = None
    agent: str | None = None
    modes: tuple[str, ...] | None = None
    """Selected failure modes; ``None``: all."""
    undated: bool = False
    """Select only runs without a start time (the window must then be open on both sides)."""


_BY = ("day", "week", "agent", "release", "mode", "scorer_version")
"""The breakdowns :func:`rate_counts` knows."""

_ALL_MODES = tuple(str(m) for m in FailureMode)


_NO_TIME = -(2**63)
"""``runs.sort_at`` of a run without a start time (see :mod:`agentlens.store._sqlite`)."""


def _key(by: str | None, t: str, agent: str, release: str) -> str:
    """The SQL expression of a group key over a start time, agent and release column."""
    if by == "day":
        return f"date({t} / 1000000, 'unixepoch')"
    if by == "week":
        return f"date({t} / 1000000, 'unixepoch', 'weekday 0', '-6 days')"
    if by == "agent":
        return agent
    if by == "release":
        return release
    return "NULL"


def _score_where(query: RateQuery) -> tuple[str, list[Any]]:
    """The conditions on ``scores s`` that select the counted scores of the window.

    The scorer and version terms carry a unary ``+`` so that SQLite drives the scan by the window
    (an index on ``run_started_at``) rather than by one index lookup per scorer version: the rows
    then come out in ``(run_started_at, run_id)`` order and group by run without a sort.
    """
    params: list[Any] = []
    if query.any_version_of is not None:
        names = list(query.any_version_of)
        selection = f"+s.scorer IN ({', '.join('?' * len(names))})" if names else "0"
        params.extend(names)
    else:
        parts = []
        for sel in query.selectors:
            part = "(+s.scorer = ? AND +s.version = ?"
            params.extend((sel.scorer, sel.version))
            if sel.agents is not None:
                part += f" AND +s.run_agent IN ({', '.join('?' * len(sel.agents))})"
                params.extend(sel.agents)
            elif sel.exclude_agents:
                part += (
                    " AND (s.run_agent IS NULL OR +s.run_agent NOT IN"
                    f" ({', '.join('?' * len(sel.exclude_agents))}))"
                )
                params.extend(sel.exclude_agents)
            parts.append(part + ")")
        selection = "(" + " OR ".join(parts) + ")" if parts else "0"
    window, window_params = _window_clauses(query, "s.run_started_at", "s.run_agent")
    return " AND ".join([selection, *window]), [*params, *window_params]


def _closed_span(conn: sqlite3.Connection, start: int | None, end: int | None) -> tuple[int, int]:
    """The window with an open side closed at the first or last dated run (µs)."""
    if start is not None and end is not None:
        return start, end
    lo, hi = conn.execute(
        "SELECT min(sort_at), max(sort_at) FROM runs WHERE sort_at > ?", (_NO_TIME,)
    ).fetchone()
    if lo is None:
        lo = hi = 0
    return (lo if start is None else start), (hi + 1 if end is None else end)


def _window_clauses(q: RateQuery, time_col: str, agent_col: str) -> tuple[list[str], list[Any]]:
    """The conditions of ``q``'s window (``start <= t < end``, or undated) and agent role, on the
    given columns, with their parameters."""
    clauses: list[str] = []
    params: list[Any] = []
    if q.start_us is not None:
        clauses.append(f"{time_col} >= ?")
        params.append(q.start_us)
    if q.end_us is not None:
        clauses.append(f"{time_col} < ?")
        params.append(q.end_us)
    if q.agent is not None:
        clauses.append(f"{agent_col} = ?")
        params.append(q.agent)
    if q.undated:
        clauses.append(f"{time_col} IS NULL")
    return clauses, params


def _runs_sql(query: RateQuery, by: str | None) -> tuple[str, list[Any]]:
    """Runs per group in the window, from ``runs`` (its ``(sort_at, id)`` index covers it)."""
    clauses: list[str] = []
    params: list[Any] = []
    if query.start_us is not None:
        # sort_at = started_at for every dated run, and NO_TIME < any start: no NULL check needed.
        clauses.append("r.sort_at >= ?")
        params.append(query.start_us)
    if query.end_us is not None:
        clauses.append("r.sort_at < ?")
        params.append(query.end_us)
        if query.start_us is None:
            clauses.append("r.sort_at > ?")
            params.append(_NO_TIME)
    if query.agent is not None:
        clauses.append("r.agent = ?")
        params.append(query.agent)
    where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
    if by in ("day", "week", "agent", "release"):
        t = "r.sort_at" if clauses else "r.started_at"
        key = _key(by, t, "r.agent", "r.release")
        return f"SELECT {key}, count(*) FROM runs r{where} GROUP BY 1", params
    return f"SELECT NULL, count(*) FROM runs r{where}", params


def _outcome(modes: tuple[str, ...] | None) -> tuple[str, list[Any]]:
    """SQL (on ``scores s``): a score's rank in the outcome order, so that a run's outcome is the
    ``max`` over its scores: 3 flagged (in a selected mode), 2 error, 1 unverifiable, 0 passed."""
    if modes is None:
        flagged, params = "3", []
    else:
        flagged = (
            "CASE WHEN EXISTS (SELECT 1 FROM score_modes m WHERE m.run_id = s.run_id"
            " AND m.scorer = s.scorer AND m.version = s.version"
            f" AND m.mode IN ({', '.join('?' * len(modes))})) THEN 3 ELSE 0 END"
        )
        params = list(modes)
    return (
        f"CASE s.verdict WHEN 'flagged' THEN {flagged} WHEN 'error' THEN 2"
        " WHEN 'unverifiable' THEN 1 ELSE 0 END"
    ), params


_FLAGGED, _ERROR, _UNVERIFIABLE = 3, 2, 1


def _buckets(start_us: int, end_us: int, by: str) -> list[tuple[str, int, int]]:
    """UTC days (or ISO weeks from Monday) covering ``[start, end)``, clipped to it."""
    from datetime import UTC, datetime, timedelta

    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    first = (epoch + timedelta(microseconds=start_us)).date()
    if by == "week":
        first -= timedelta(days=first.weekday())
    step = timedelta(days=7 if by == "week" else 1)
    out: list[tuple[str, int, int]] = []
    day = first
    while True:
        lo = (datetime(day.year, day.month, day.day, tzinfo=UTC) - epoch) // timedelta(
            microseconds=1
        )
        if lo >= end_us:
            return out
        hi = lo + step // timedelta(microseconds=1)
        out.append((day.isoformat(), max(lo, start_us), min(hi, end_us)))
        day += step


def scan_rate_counts(store: Any, query: RateQuery, by: str | None = None) -> list[RateCounts]:
    """:func:`rate_counts` computed by scanning the window's rows of ``scores`` (no rollup).

    The implementation before schema version 2: kept as an independent SQL reference for the
    tests and as the baseline of ``benchmarks/bench_rate.py``. Same arguments and results as
    :func:`rate_counts` (which documents them).

    How: one pass over the window's scores in ``(run_started_at, run_id)`` order groups them by
    run without a sort and ranks each run's outcome with a single ``max``; a day or week
    breakdown runs that pass once per day or week (no sort of the runs by key either). The failure
    modes are then looked up for the flagged runs only. All in one read snapshot.
    """
    if by not in (None, *_BY):
        raise ValueError(f"unknown breakdown {by!r}; choose from {', '.join(_BY)}")
    mode_list = list(dict.fromkeys(query.modes if query.modes is not None else _ALL_MODES))
    rank, rank_params = _outcome(query.modes)

    def main_sql(q: RateQuery, key: str) -> tuple[str, list[Any]]:
        where, params = _score_where(q)
        extra = ""
        if by == "scorer_version":
            # One score per (run, scorer, version): each row is one run of its group.
            inner = (
                f"SELECT s.scorer || '@' || s.version AS k, s.run_id AS run_id, {rank} AS o"
                f" FROM scores s WHERE {where}"
            )
        else:
            if by == "mode":
                extra = ", max(s.verdict = 'error') AS e, max(s.verdict = 'unverifiable') AS u"
            inner = (
                "SELECT s.run_started_at AS t, s.run_id AS run_id, s.run_agent AS a,"
                f" s.run_release AS rel, max({rank}) AS o{extra}"
                f" FROM scores s WHERE {where} GROUP BY s.run_started_at, s.run_id"
            )
        cols = (
            f"count(*), sum(o = {_FLAGGED}), sum(o = {_ERROR}), sum(o = {_UNVERIFIABLE}),"
            f" group_concat(CASE WHEN o = {_FLAGGED} THEN run_id END)"
        )
        if by == "mode":
            cols += (
                ", group_concat(CASE WHEN e THEN run_id END),"
                " group_concat(CASE WHEN u AND NOT e THEN run_id END)"
            )
        group = " GROUP BY 1" if key != "NULL" else ""
        return f"SELECT {key}, {cols} FROM ({inner}){group}", [*rank_params, *params]

    def counts_of(row: Any, runs: int) -> RateCounts:
        k, scored_any, flagged, errors, unverifiable, ids = row[:6]
        counts = RateCounts(
            key=k,
            runs=runs,
            flagged=flagged or 0,
            errors=errors or 0,
            unverifiable=unverifiable or 0,
            flagged_run_ids=_ids(ids),
        )
        counts.passed = (scored_any or 0) - counts.flagged - counts.errors - counts.unverifiable
        return counts

    def work(conn: sqlite3.Connection) -> tuple[list[RateCounts], Any]:
        if by in ("day", "week"):
            groups = _by_time(conn, query, by, main_sql, counts_of)
            return groups, _modes_of_flagged(conn, query, groups, per_version=False)
        if by == "scorer_version":
            key = "k"
        elif by in ("agent", "release"):
            key = _key(by, "t", "a", "rel")
        else:
            key = "NULL"
        sql, args = main_sql(query, key)
        rows = conn.execute(sql, args).fetchall()
        r_sql, r_args = _runs_sql(query, by if by in ("agent", "release") else None)
        runs_by_key: dict[str | None, int] = {k: n for k, n in conn.execute(r_sql, r_args)}
        total = sum(runs_by_key.values())
        if by == "mode":
            return _by_mode(conn, query, rows, total, mode_list), {}
        per_group = by in ("agent", "release")
        found: dict[str | None, RateCounts] = {}
        for row in rows:
            if by is None and not row[1]:
                continue  # an aggregate over no rows
            found[row[0]] = counts_of(row, runs_by_key.get(row[0], 0) if per_group else total)
        if per_group:
            for k, n in runs_by_key.items():
                found.setdefault(k, RateCounts(key=k, runs=n))
        elif by is None and not found:
            found[None] = RateCounts(key=None, runs=total)
        groups = sorted(found.values(), key=lambda c: (c.key is None, c.key or ""))
        return groups, _modes_of_flagged(conn, query, groups, per_version=by == "scorer_version")

    groups, modes_of = _read(store, work)
    if by == "mode":
        return groups
    for counts in groups:
        counts.by_mode = dict.fromkeys(mode_list, 0)
        for run_id in counts.flagged_run_ids:
            key = f"{run_id}\x00{counts.key}" if by == "scorer_version" else run_id
            for m in modes_of.get(key, ()):
                if m in counts.by_mode:
                    counts.by_mode[m] += 1
    return groups


def _modes_of_flagged(
    conn: sqlite3.Connection, query: RateQuery, groups: list[RateCounts], *, per_version: bool
) -> dict[str, set[str]]:
    """The failure modes of the counted flagged scores of the groups' flagged runs.

    Keyed by run id (or ``run_id NUL scorer@version`` with ``per_version``).
    """
    ids = sorted({i for g in groups for i in g.flagged_run_ids})
    found: dict[str, set[str]] = {}
    if not ids:
        return found
    where, params = _score_where(replace(query, start_us=None, end_us=None, undated=False))
    sql = (
        "SELECT s.run_id, s.scorer || '@' || s.version, m.mode FROM scores s"
        " JOIN score_modes m ON m.run_id = s.run_id AND m.scorer = s.scorer"
        " AND m.version = s.version"
        f" WHERE s.run_id IN (SELECT value FROM json_each(?)) AND s.verdict = 'flagged' AND {where}"
    )
    for run_id, version, mode in conn.execute(sql, [json.dumps(ids), *params]):
        key = f"{run_id}\x00{version}" if per_version else run_id
        found.setdefault(key, set()).add(mode)
    return found


def _by_mode(
    conn: sqlite3.Connection, query: RateQuery, rows: list[Any], total: int, mode_list: list[str]
) -> list[RateCounts]:
    """One group per mode: the rate as if only that mode were selected."""
    (row,) = rows
    scored_any = row[1] or 0
    flagged = RateCounts(flagged_run_ids=_ids(row[5]))
    errored, unverifiable = set(_ids(row[6])), set(_ids(row[7]))
    modes_of = _modes_of_flagged(conn, query, [flagged], per_version=False)
    groups = []
    for m in mode_list:
        hit = [i for i in flagged.flagged_run_ids if m in modes_of.get(i, ())]
        counts = RateCounts(
            key=m,
            runs=total,
            flagged=len(hit),
            errors=len(errored.difference(hit)),
            unverifiable=len(unverifiable.difference(hit)),
            by_mode={m: len(hit)},
            flagged_run_ids=hit,
        )
        counts.passed = scored_any - counts.flagged - counts.errors - counts.unverifiable
        groups.append(counts)
    return groups


def _by_time(
    conn: sqlite3.Connection,
    query: RateQuery,
    by: str,
    main_sql: Callable[[RateQuery, str], tuple[str, list[Any]]],
    counts_of: Callable[[Any, int], RateCounts],
) -> list[RateCounts]:
    """The day or week breakdown: one range query per bucket."""
    start, end = _closed_span(conn, query.start_us, query.end_us)
    groups: list[RateCounts] = []
    for label, lo, hi in _buckets(start, end, by) if start < end else []:
        bucket = replace(query, start_us=lo, end_us=hi)
        sql, args = main_sql(bucket, "NULL")
        row = conn.execute(sql, args).fetchone()
        r_sql, r_args = _runs_sql(bucket, None)
        runs = conn.execute(r_sql, r_args).fetchone()[1]
        if runs or row[1]:
            groups.append(counts_of((label, *row[1:]), runs))
    if query.start_us is None and query.end_us is None:
        # Fully open: runs without a start time are a group of their own (key None).
        sql, args = main_sql(replace(query, undated=True), "NULL")
        row = conn.execute(sql, args).fetchone()
        runs = conn.execute(
            "SELECT count(*) FROM runs r WHERE r.sort_at = ?"
            + (" AND r.agent = ?" if query.agent is not None else ""),
            (_NO_TIME, *([query.agent] if query.agent is not None else [])),
        ).fetchone()[0]
        if runs or row[1]:
            groups.append(counts_of((None, *row[1:]), runs))
    return groups


# ---------------------------------------------------------------- from the rollup (schema v2)

_DAY_US = 86_400_000_000
_NO_DAY = -(2**63)
"""``day`` of an undated run in ``rate_runs`` and ``rate_rollup``."""
_EPOCH_DATE = date(1970, 1, 1)
_DAY_SQL = (
    f"(CASE WHEN started_at >= 0 THEN started_at / {_DAY_US}"
    f" ELSE (started_at + 1) / {_DAY_US} - 1 END)"
)
"""The UTC day number of ``rate_runs.started_at`` (not NULL), as the triggers compute it."""


class _Scored(NamedTuple):
    """One score of a signature."""

    scorer: str
    version: str
    verdict: str
    modes: frozenset[str]


def _unhex(text: str) -> str:
    return bytes.fromhex(text).decode("utf-8", "surrogateescape")


def _decode(sig: str) -> tuple[_Scored, ...]:
    """The scores of a ``rate_sigs.sig`` (see migration 2 for the encoding)."""
    out = []
    for part in sig.split(";"):
        scorer, version, verdict, modes = part.split(".")
        out.append(
            _Scored(
                _unhex(scorer),
                _unhex(version),
                _unhex(verdict),
                frozenset(_unhex(m[1:]) for m in modes.split(",") if m),
            )
        )
    return tuple(out)


def _plain(value: Any) -> str | None:
    """A stored ``agent``/``release`` of the rate tables: the empty blob stands for NULL."""
    return None if isinstance(value, bytes) else value


_Part = tuple[str | None, int, frozenset[str]]
"""What a run contributes to one group: (sub-key, outcome rank, failure modes it is counted in)."""


class _Classifier:
    """What a run of a given (signature, agent) counts as under one query, memoised."""

    def __init__(self, query: RateQuery, by: str | None, mode_list: list[str]) -> None:
        self.query = query
        self.by = by
        self.mode_list = mode_list
        self.mode_set = frozenset(mode_list)
        self.wanted = None if query.modes is None else frozenset(query.modes)
        self.sigs: dict[int, tuple[_Scored, ...]] = {}
        self.memo: dict[tuple[int, Any], tuple[_Part, ...]] = {}

    def _selected(self, s: _Scored, agent: str | None) -> bool:
        q = self.query
        if q.any_version_of is not None:
            return s.scorer in q.any_version_of
        for sel in q.selectors:
            if sel.scorer != s.scorer or sel.version != s.version:
                continue
            if sel.agents is not None:
                if agent is not None and agent in sel.agents:
                    return True
            elif agent is None or agent not in sel.exclude_agents:
                return True
        return False

    def _rank(self, s: _Scored) -> int:
        if s.verdict == "flagged":
            return _FLAGGED if self.wanted is None or s.modes & self.wanted else 0
        if s.verdict == "error":
            return _ERROR
        return _UNVERIFIABLE if s.verdict == "unverifiable" else 0

    def parts(self, sig: int, agent: Any) -> tuple[_Part, ...]:
        """The contributions of one run of signature ``sig`` and stored agent ``agent``."""
        key = (sig, agent)
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = self._parts(self.sigs[sig], _plain(agent))
        return found

    def _parts(self, scores: tuple[_Scored, ...], agent: str | None) -> tuple[_Part, ...]:
        chosen = [s for s in scores if self._selected(s, agent)]
        if not chosen:
            return ()
        if self.by == "scorer_version":
            out = []
            for s in chosen:
                rank = self._rank(s)
                hit = s.modes & self.mode_set if rank == _FLAGGED else frozenset()
                out.append((f"{s.scorer}@{s.version}", rank, hit))
            return tuple(out)
        flagged_modes = frozenset().union(*(s.modes for s in chosen if s.verdict == "flagged"))
        if self.by == "mode":
            other = max((self._rank(s) for s in chosen if s.verdict != "flagged"), default=0)
            return tuple(
                (m, _FLAGGED, frozenset((m,))) if m in flagged_modes else (m, other, frozenset())
                for m in self.mode_list
            )
        rank = max(self._rank(s) for s in chosen)
        hit = flagged_modes & self.mode_set if rank == _FLAGGED else frozenset()
        return ((None, rank, hit),)


def _group_key(by: str | None, day: int | None, agent: Any, release: Any) -> str | None:
    if by in ("day", "week"):
        if day is None or day == _NO_DAY:
            return None
        d = _EPOCH_DATE + timedelta(days=day)
        if by == "week":
            d -= timedelta(days=d.weekday())
        return d.isoformat()
    if by == "agent":
        return _plain(agent)
    if by == "release":
        return _plain(release)
    return None


def _day_of(started_at: int | None) -> int | None:
    return None if started_at is None else started_at // _DAY_US


def _window_rows(conn: sqlite3.Connection, q: RateQuery) -> list[tuple[Any, ...]]:
    """``(day, agent, release, sig, runs)`` of the window: rollup rows for its whole UTC days,
    runs grouped by signature for the partial days at its edges."""
    agent_sql = " AND agent = ?" if q.agent is not None else ""
    agent_args: list[Any] = [q.agent] if q.agent is not None else []
    roll = "SELECT day, agent, release, sig, n FROM rate_rollup WHERE n > 0"
    if q.undated:
        return conn.execute(roll + " AND day = ?" + agent_sql, [_NO_DAY, *agent_args]).fetchall()
    start, end = q.start_us, q.end_us
    if start is None and end is None:
        return conn.execute(roll + agent_sql, agent_args).fetchall()
    first = _NO_DAY + 1 if start is None else -(-start // _DAY_US)  # the first whole day
    stop = None if end is None else end // _DAY_US  # the day after the last whole day
    rows: list[tuple[Any, ...]] = []
    partial: list[tuple[int, int]] = []
    if stop is not None and first >= stop:
        if start is not None and start < end:  # type: ignore[operator]
            partial.append((start, end))  # type: ignore[arg-type]
    else:
        sql, args = roll + " AND day >= ?", [first]
        if stop is not None:
            sql += " AND day < ?"
            args.append(stop)
        rows.extend(conn.execute(sql + agent_sql, [*args, *agent_args]))
        if start is not None and start < first * _DAY_US:
            partial.append((start, first * _DAY_US))
        if end is not None and stop is not None and stop * _DAY_US < end:
            partial.append((stop * _DAY_US, end))
    for lo, hi in partial:
        rows.extend(
            conn.execute(
                f"SELECT {_DAY_SQL}, agent, release, sig, count(*) FROM rate_runs"
                f" WHERE started_at >= ? AND started_at < ?{agent_sql} GROUP BY 1, 2, 3, 4",
                [lo, hi, *agent_args],
            )
        )
    return rows


def _load_sigs(conn: sqlite3.Connection, wanted: set[int], into: dict[int, Any]) -> None:
    missing = sorted(wanted.difference(into))
    for at in range(0, len(missing), 500):
        part = missing[at : at + 500]
        sql = f"SELECT id, sig FROM rate_sigs WHERE id IN ({', '.join('?' * len(part))})"
        for sig_id, text in conn.execute(sql, part):
            into[sig_id] = _decode(text)


def _flagged_runs(
    conn: sqlite3.Connection, q: RateQuery, sigs: list[int]
) -> list[tuple[str, int | None, Any, Any, int]]:
    """``(run_id, started_at, agent, release, sig)`` of the window's runs of these signatures."""
    window, args = _window_clauses(q, "started_at", "agent")
    clauses = ["sig = ?", *window]
    sql = (
        "SELECT run_id, started_at, agent, release, sig FROM rate_runs"
        f" INDEXED BY rate_runs_by_sig WHERE {' AND '.join(clauses)}"
    )
    out: list[tuple[str, int | None, Any, Any, int]] = []
    for sig in sigs:
        out.extend(conn.execute(sql, [sig, *args]))
    return out


class _Acc:
    """Counts of one group while they are summed."""

    __slots__ = ("by_mode", "errors", "flagged", "ids", "scored_any", "unverifiable")

    def __init__(self) -> None:
        self.scored_any = self.flagged = self.errors = self.unverifiable = 0
        self.by_mode: dict[str, int] = {}
        self.ids: list[str] = []

    def counts(self, key: str | None, runs: int, mode_list: list[str]) -> RateCounts:
        by_mode = dict.fromkeys(mode_list, 0)
        for m, n in self.by_mode.items():
            by_mode[m] = by_mode.get(m, 0) + n
        return RateCounts(
            key=key,
            runs=runs,
            flagged=self.flagged,
            passed=self.scored_any - self.flagged - self.errors - self.unverifiable,
            unverifiable=self.unverifiable,
            errors=self.errors,
            by_mode=by_mode,
            flagged_run_ids=sorted(self.ids),
        )


def rate_counts(store: Any, query: RateQuery, by: str | None = None) -> list[RateCounts]:
    """Count runs by outcome over ``query``'s window, for the whole window or per group.

    Args:
        store: an open :class:`~agentlens.store._sqlite.SQLiteStore` (schema version 2 or later).
        query: the window, agent, scorer versions and modes.
        by: ``None`` for one :class:`RateCounts` (key ``None``) over the window, or one of
            ``day`` (UTC date), ``week`` (the Monday, UTC, that starts the ISO week), ``agent``,
            ``release`` (``metadata.release``), ``mode`` (one group per failure mode: the rate as
            if only that mode were selected) or ``scorer_version`` (``scorer@version``, every
            stored version of the selected scorers apart).

    Returns:
        The groups in key order (``None`` keys last; for ``mode``, the modes' order).

    How: see the module docs. All in one read snapshot.
    """
    if by not in (None, *_BY):
        raise ValueError(f"unknown breakdown {by!r}; choose from {', '.join(_BY)}")
    mode_list = list(dict.fromkeys(query.modes if query.modes is not None else _ALL_MODES))
    classify = _Classifier(query, by, mode_list)
    by_part = by in ("mode", "scorer_version")

    def work(conn: sqlite3.Connection) -> list[RateCounts]:
        rows = _window_rows(conn, query)
        _load_sigs(conn, {row[3] for row in rows}, classify.sigs)
        accs: dict[str | None, _Acc] = {}
        flagging: set[int] = set()
        for day, agent, release, sig, n in rows:
            parts = classify.parts(sig, agent)
            if not parts:
                continue
            row_key = None if by_part else _group_key(by, day, agent, release)
            for sub, rank, hit in parts:
                acc = accs.get(sub if by_part else row_key)
                if acc is None:
                    acc = accs[sub if by_part else row_key] = _Acc()
                acc.scored_any += n
                if rank == _FLAGGED:
                    acc.flagged += n
                    flagging.add(sig)
                    for m in hit:
                        acc.by_mode[m] = acc.by_mode.get(m, 0) + n
                elif rank == _ERROR:
                    acc.errors += n
                elif rank == _UNVERIFIABLE:
                    acc.unverifiable += n
        for run_id, started_at, agent, release, sig in _flagged_runs(conn, query, sorted(flagging)):
            key = None if by_part else _group_key(by, _day_of(started_at), agent, release)
            for sub, rank, _ in classify.parts(sig, agent):
                if rank == _FLAGGED:
                    accs[sub if by_part else key].ids.append(run_id)
        return _assemble(conn, query, by, accs, mode_list)

    return _read(store, work)


def _assemble(
    conn: sqlite3.Connection,
    query: RateQuery,
    by: str | None,
    accs: dict[str | None, _Acc],
    mode_list: list[str],
) -> list[RateCounts]:
    """The groups of a breakdown, with their runs, in order."""
    if by in ("day", "week"):
        out = []
        for label, runs in _time_buckets(conn, query, by):
            acc = accs.get(label)
            if runs or acc is not None:
                out.append((acc or _Acc()).counts(label, runs, mode_list))
        return out
    r_sql, r_args = _runs_sql(query, by if by in ("agent", "release") else None)
    runs_by_key: dict[str | None, int] = {k: n for k, n in conn.execute(r_sql, r_args)}
    total = sum(runs_by_key.values())
    if by == "mode":
        out = []
        for m in mode_list:
            counts = accs.get(m, _Acc()).counts(m, total, [])
            counts.by_mode = {m: counts.flagged}
            out.append(counts)
        return out
    if by in ("agent", "release"):
        keys = set(runs_by_key) | set(accs)
        found = [accs.get(k, _Acc()).counts(k, runs_by_key.get(k, 0), mode_list) for k in keys]
    elif by == "scorer_version":
        found = [acc.counts(k, total, mode_list) for k, acc in accs.items()]
    else:
        found = [accs.get(None, _Acc()).counts(None, total, mode_list)]
    return sorted(found, key=lambda c: (c.key is None, c.key or ""))


def _time_buckets(
    conn: sqlite3.Connection, query: RateQuery, by: str
) -> list[tuple[str | None, int]]:
    """``(label, runs)`` of each day or week of the window (then the undated runs, when the
    window is open on both sides), counted on ``runs``' time index."""
    start, end = query.start_us, query.end_us
    agent_sql = " AND r.agent = ?" if query.agent is not None else ""
    agent_args: list[Any] = [query.agent] if query.agent is not None else []
    out: list[tuple[str | None, int]] = []
    if not query.undated:
        start, end = _closed_span(conn, start, end)
        sql = f"SELECT count(*) FROM runs r WHERE r.sort_at >= ? AND r.sort_at < ?{agent_sql}"
        for label, lo, hi in _buckets(start, end, by) if start < end else []:
            out.append((label, conn.execute(sql, [lo, hi, *agent_args]).fetchone()[0]))
    if query.undated or (query.start_us is None and query.end_us is None):
        sql = f"SELECT count(*) FROM runs r WHERE r.sort_at = ?{agent_sql}"
        out.append((None, conn.execute(sql, [_NO_TIME, *agent_args]).fetchone()[0]))
    return out


def rebuild_rate_rollup(conn: sqlite3.Connection) -> None:
    """Recompute ``rate_sigs``, ``rate_runs`` and ``rate_rollup`` from ``scores`` in bulk, on a
    writable connection: inside the caller's transaction if one is open (e.g. in
    ``SQLiteStore._write``), else in a transaction of its own (autocommit connections).

    The triggers keep these tables exact on every write, so this is only needed after rows were
    written with the triggers dropped (a bulk load), or to check the triggers (the tests compare
    the two).
    """
    from agentlens.store._migrations import RATE_ROLLUP_FILL

    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN IMMEDIATE")
    try:
        for table in ("rate_rollup", "rate_runs", "rate_sigs"):
            conn.execute(f"DELETE FROM {table}")
        for statement in RATE_ROLLUP_FILL:
            conn.execute(statement)
        if own:
            conn.execute("COMMIT")
    except BaseException:
        if own and conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _ids(text: str | None) -> list[str]:
    return sorted(text.split(",")) if text else []


def stored_scorers(store: Any) -> list[str]:
    """Every scorer name with at least one stored score (an index skip-scan, not a table scan)."""
    sql = (
        "WITH RECURSIVE n(name) AS (SELECT min(scorer) FROM scores UNION ALL"
        " SELECT (SELECT min(scorer) FROM scores WHERE scorer > n.name) FROM n"
        " WHERE n.name IS NOT NULL) SELECT name FROM n WHERE name IS NOT NULL"
    )
    return [name for (name,) in _read(store, lambda c: c.execute(sql).fetchall())]


def stored_versions(
    store: Any, scorer: str, start_us: int | None = None, end_us: int | None = None
) -> list[tuple[str, int]]:
    """The versions of ``scorer`` with scores of runs in the window, each with its latest
    ``scored_at`` (µs), newest first."""
    versions_sql = (
        "WITH RECURSIVE v(version) AS (SELECT min(version) FROM scores WHERE scorer = :s"
        " UNION ALL SELECT (SELECT min(version) FROM scores WHERE scorer = :s"
        " AND version > v.version) FROM v WHERE v.version IS NOT NULL)"
        " SELECT version FROM v WHERE version IS NOT NULL"
    )
    window = ""
    args: dict[str, Any] = {"s": scorer}
    if start_us is not None:
        window += " AND run_started_at >= :a"
        args["a"] = start_us
    if end_us is not None:
        window += " AND run_started_at < :b"
        args["b"] = end_us
    latest_sql = f"SELECT max(scored_at) FROM scores WHERE scorer = :s AND version = :v{window}"

    def work(conn: sqlite3.Connection) -> list[tuple[str, int]]:
        found = []
        for (version,) in conn.execute(versions_sql, {"s": scorer}).fetchall():
            (latest,) = conn.execute(latest_sql, {**args, "v": version}).fetchone()
            if latest is not None:
                found.append((version, int(latest)))
        return sorted(found, key=lambda item: (-item[1], item[0]))

    return _read(store, work)


def _read(store: Any, work: Callable[[sqlite3.Connection], _T]) -> _T:
    """Run ``work`` in one read snapshot of the store (its pooled read-only connections)."""
    read = getattr(store, "read", None)
    if read is None:
        raise StoreError(
            f"{type(store).__name__} does not support rate queries; use a sqlite:/// store"
        )
    return read(work)
