"""The reference scan of the SQLite store's rates: :func:`scan_rate_counts` counts by scanning
the window's rows of ``scores``, without the rollup.

It is the implementation before schema version 2, kept as an independent SQL reference: the
tests hold :meth:`SQLiteStore.rate_counts` (the rollup) to it, and ``benchmarks/bench_rate.py``
uses it as the baseline. It reads the store through ``store.read`` (SQLite only).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from agentlens.store._rates import (
    _ALL_MODES,
    _ERROR,
    _FLAGGED,
    _UNVERIFIABLE,
    RateCounts,
    RateQuery,
    check_breakdown,
)
from agentlens.store._sqlite_rates import (
    _NO_TIME,
    _buckets,
    _closed_span,
    _key,
    _runs_sql,
    _who,
    _window_clauses,
)

__all__ = ["scan_rate_counts"]


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
    window, window_params = _window_clauses(
        query, "s.run_started_at", "s.run_agent", "s.run_project"
    )
    return " AND ".join([selection, *window]), [*params, *window_params]


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
    check_breakdown(by)
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

    groups, modes_of = store.read(work)
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
        who, who_args = _who(query, "r.")
        runs = conn.execute(
            "SELECT count(*) FROM runs r WHERE r.sort_at = ?" + who, (_NO_TIME, *who_args)
        ).fetchone()[0]
        if runs or row[1]:
            groups.append(counts_of((None, *row[1:]), runs))
    return groups


def _ids(text: str | None) -> list[str]:
    return sorted(text.split(",")) if text else []
