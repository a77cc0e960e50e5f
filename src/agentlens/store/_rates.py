"""SQL aggregation behind ``agentlens rate``: counts of runs by outcome, per group, in one pass.

The counting rules (the same as :mod:`agentlens.analytics`'s pure-Python tally, which the tests
hold this module to):

- Only the scores of the selected scorers at their *current* version count: the caller names
  the version per (scorer, agent role) with :class:`VersionSelector`.
- A run is **flagged** when any of those scores has the verdict ``flagged`` and, when failure
  modes are selected, a finding of a selected mode (``score_modes``).
- Otherwise it is **error** when any of its scores is an error, else **unverifiable** when any is
  unverifiable, else **passed** (this includes a run flagged only in modes that were not selected).
- A run in the window with none of those scores is **unscored**.

Everything is computed inside SQLite over the denormalised columns of ``scores`` (``run_agent``,
``run_release``, ``run_started_at``) and the ``(scorer, version, run_started_at)`` index: one
``GROUP BY run_id`` pass turns score rows into one outcome per run, a second ``GROUP BY`` counts
them per group. The only rows sent back to Python are the per-group counts and the flagged ids.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from agentlens.errors import StoreError
from agentlens.model import FailureMode

__all__ = [
    "RateCounts",
    "RateQuery",
    "VersionSelector",
    "rate_counts",
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
    clauses = [selection]
    if query.start_us is not None:
        clauses.append("s.run_started_at >= ?")
        params.append(query.start_us)
    if query.end_us is not None:
        clauses.append("s.run_started_at < ?")
        params.append(query.end_us)
    if query.agent is not None:
        clauses.append("s.run_agent = ?")
        params.append(query.agent)
    if query.undated:
        clauses.append("s.run_started_at IS NULL")
    return " AND ".join(clauses), params


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


def rate_counts(store: Any, query: RateQuery, by: str | None = None) -> list[RateCounts]:
    """Count runs by outcome over ``query``'s window, for the whole window or per group.

    Args:
        store: an open :class:`~agentlens.store._sqlite.SQLiteStore`.
        query: the window, agent, scorer versions and modes.
        by: ``None`` for one :class:`RateCounts` (key ``None``) over the window, or one of
            ``day`` (UTC date), ``week`` (the Monday, UTC, that starts the ISO week), ``agent``,
            ``release`` (``metadata.release``), ``mode`` (one group per failure mode: the rate as
            if only that mode were selected) or ``scorer_version`` (``scorer@version``, every
            stored version of the selected scorers apart).

    Returns:
        The groups in key order (``None`` keys last).

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
    start, end = query.start_us, query.end_us
    if start is None or end is None:
        # An open side: the window ends at the first or last dated run.
        lo, hi = conn.execute(
            "SELECT min(sort_at), max(sort_at) FROM runs WHERE sort_at > ?", (_NO_TIME,)
        ).fetchone()
        if lo is None:
            lo = hi = 0
        start = lo if start is None else start
        end = hi + 1 if end is None else end
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
    read = getattr(store, "read", None) or getattr(store, "_read", None)
    if read is None:
        raise StoreError(
            f"{type(store).__name__} does not support rate queries; use a sqlite:/// store"
        )
    return read(work)
