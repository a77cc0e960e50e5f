"""The rate queries of the PostgreSQL store: the same counts as :mod:`agentlens.store._rates`.

The counting rules, the breakdowns and the results are those of SQLite's
:func:`agentlens.store._sqlite_rates.rate_counts` (the tests hold the two to equality on the same
writes); the classification of a signature (:class:`~agentlens.store._rates._Classifier`) is
shared code. What differs is where the counts come from (see :mod:`._pg_migrations`):

- ``rate_rollup`` and ``run_rollup`` hold signed counts per UTC *hour*: a query sums the rows of
  the window's whole hours, and groups the runs of the (at most two) partial hours at its edges
  from ``rate_runs`` and ``runs``. So the work of a 7-day rate is a few thousand rollup rows,
  whatever the number of runs.
- The denominator (runs in the window, scored or not) also comes from a rollup
  (``run_rollup``), not from counting ``runs``.

Everything is read in one REPEATABLE READ snapshot (:meth:`PostgresStore.read`).
"""

from __future__ import annotations

from typing import Any

from agentlens.store._pg_migrations import HOUR_US, NO_HOUR
from agentlens.store._pg_review import pg_conn
from agentlens.store._pg_text import dec, enc
from agentlens.store._rates import (
    _NO_DAY,
    RateCounts,
    RateQuery,
    _Acc,
    _group_key,
    _Scored,
    _Tally,
    check_breakdown,
)
from agentlens.store._sqlite_rates import _decode, stored_scorers, stored_versions

__all__ = ["pg_rate_counts", "pg_stored_scorers", "pg_stored_versions"]


def _edges(q: RateQuery) -> tuple[list[tuple[str, list[Any]]], list[tuple[int, int]]]:
    """The window as rollup conditions on ``hour`` (whole hours) and partial µs ranges."""
    if q.undated:
        return [("hour = %s", [NO_HOUR])], []
    start, end = q.start_us, q.end_us
    if start is None and end is None:
        return [("TRUE", [])], []
    first = NO_HOUR + 1 if start is None else -(-start // HOUR_US)  # the first whole hour
    stop = None if end is None else end // HOUR_US  # the hour after the last whole one
    partial: list[tuple[int, int]] = []
    if stop is not None and first >= stop:
        if start is not None and end is not None and start < end:
            partial.append((start, end))
        return [], partial
    cond, args = "hour >= %s", [first]
    if stop is not None:
        cond += " AND hour < %s"
        args.append(stop)
    if start is not None and start < first * HOUR_US:
        partial.append((start, first * HOUR_US))
    if end is not None and stop is not None and stop * HOUR_US < end:
        partial.append((stop * HOUR_US, end))
    return [(cond, args)], partial


def _agent(q: RateQuery) -> tuple[str, list[Any]]:
    """SQL (each condition after `` AND``) for ``q``'s agent role and project, on columns
    ``agent`` and ``project`` (every rate table has both), and its parameters."""
    sql, args = "", []
    if q.agent is not None:
        sql += " AND agent = %s"
        args.append(enc(q.agent))
    if q.project is not None:
        sql += " AND project = %s"
        args.append(enc(q.project))
    return sql, args


def _keys(by: str | None, time_sql: str | None) -> tuple[str, str]:
    """SQL of the day and release columns a breakdown needs (``NULL`` for the others), so the
    rows are grouped in the server to what the breakdown tells apart (always agent and
    signature: what a run counts as depends on them). ``time_sql``: the hour number (rollups,
    ``None``) or a µs column."""
    day = "NULL::bigint"
    if by in ("day", "week"):
        if time_sql is None:
            day = f"(CASE WHEN hour = {NO_HOUR} THEN {NO_HOUR} ELSE floor(hour / 24.0)::bigint END)"
        else:
            day = f"floor({time_sql} / {24 * HOUR_US}.0)::bigint"
    release = "release" if by == "release" else "NULL::text"
    return day, release


def _count_rows(
    conn: Any, q: RateQuery, by: str | None
) -> tuple[list[tuple[int, Any, Any, Any, int]], list[tuple[int, Any, Any, int]]]:
    """In one statement: ``(day, agent, release, sig, runs)`` of the scored runs of the window,
    and ``(day, agent, release, runs)`` of every run of it, scored or not (``day``, ``release``
    and, for every run, ``agent`` only when the breakdown needs them). Whole hours come from
    the rollups, the partial hours at the window's edges from ``rate_runs`` and ``runs``."""
    agent_sql, agent_args = _agent(q)
    whole, partial = _edges(q)
    parts: list[str] = []
    params: list[Any] = []
    day, release = _keys(by, None)
    agent = "agent" if by == "agent" else "NULL::text"
    for cond, args in whole:
        parts.append(
            f"SELECT 's', {day}, agent, {release}, sig, sum(n)::bigint FROM rate_rollup"
            f" WHERE {cond}{agent_sql} GROUP BY 2, 3, 4, 5 HAVING sum(n) <> 0"
        )
        parts.append(
            f"SELECT 'r', {day}, {agent}, {release}, NULL::uuid, sum(n)::bigint FROM run_rollup"
            f" WHERE {cond}{agent_sql} GROUP BY 2, 3, 4 HAVING sum(n) <> 0"
        )
        params += [*args, *agent_args, *args, *agent_args]
    for lo, hi in partial:
        day, release = _keys(by, "started_at")
        parts.append(
            f"SELECT 's', {day}, agent, {release}, sig, count(*) FROM rate_runs"
            f" WHERE started_at >= %s AND started_at < %s{agent_sql} GROUP BY 2, 3, 4, 5"
        )
        day, release = _keys(by, "sort_at")
        parts.append(
            f"SELECT 'r', {day}, {agent}, {release}, NULL::uuid, count(*) FROM runs"
            f" WHERE sort_at >= %s AND sort_at < %s{agent_sql} GROUP BY 2, 3, 4"
        )
        params += [lo, hi, *agent_args, lo, hi, *agent_args]
    scored: list[tuple[int, Any, Any, Any, int]] = []
    runs: list[tuple[int, Any, Any, int]] = []
    if not parts:
        return scored, runs
    sql = (
        "SELECT k, d, a, r, s::text, n FROM ("
        + " UNION ALL ".join(f"({part})" for part in parts)
        + ") AS u(k, d, a, r, s, n)"
    )
    for kind, d, a, r, sig, n in conn.execute(sql, params).fetchall():
        if kind == "s":
            scored.append((d, a, r, sig, n))
        else:
            runs.append((d, a, r, n))
    return scored, runs


def _load_sigs(conn: Any, wanted: set[Any], into: dict[Any, tuple[_Scored, ...]]) -> None:
    missing = sorted(wanted.difference(into), key=str)
    if not missing:
        return
    for sig_id, text in conn.execute(
        "SELECT id::text, sig FROM rate_sigs WHERE id = ANY(%s::uuid[])", (missing,)
    ).fetchall():
        into[sig_id] = tuple(
            _Scored(
                dec(s.scorer) or "",
                dec(s.version) or "",
                s.verdict,
                frozenset(dec(m) or "" for m in s.modes),
            )
            for s in _decode(text)
        )


def pg_rate_counts(store: Any, query: RateQuery, by: str | None = None) -> list[RateCounts]:
    """:func:`agentlens.store._sqlite_rates.rate_counts` for a :class:`PostgresStore` (same
    arguments, same results)."""
    check_breakdown(by)
    tally = _Tally(query, by)

    def work(conn: Any) -> list[RateCounts]:
        rows, run_rows = _count_rows(conn, query, by)
        _load_sigs(conn, {row[3] for row in rows}, tally.classify.sigs)
        for day, agent, release, sig, n in rows:
            tally.add(day, dec(agent), dec(release), sig, n)
        if tally.flagging and query.flagged_ids:
            _add_flagged_ids(conn, query, by, tally)
        runs_by_key: dict[str | None, int] = {}
        for day, agent, release, n in run_rows:
            key = _group_key(by, day, dec(agent), dec(release))
            runs_by_key[key] = runs_by_key.get(key, 0) + n
        if by in ("day", "week"):
            labels = {k for k, n in runs_by_key.items() if n} | set(tally.accs)
            ordered = sorted(labels, key=lambda k: (k is None, k or ""))
            return [
                tally.accs.get(k, _Acc()).counts(k, runs_by_key.get(k, 0), tally.mode_list)
                for k in ordered
            ]
        return tally.grouped(runs_by_key)

    return store.read(work)


def _add_flagged_ids(conn: Any, query: RateQuery, by: str | None, tally: _Tally) -> None:
    """The ids of the window's runs of the flagging signatures: for its whole hours, the arrays
    of ``rate_rollup.run_ids`` (PostgreSQL migration 6), for its partial hours the rows of
    ``rate_runs``, grouped in the server; each handed to the tally once per (signature, agent,
    and day or release when the breakdown tells them apart)."""
    agent_sql, agent_args = _agent(query)
    whole, partial = _edges(query)
    flagging = sorted(tally.flagging)
    by_day = by in ("day", "week")
    by_release = by == "release"
    groups: dict[tuple[Any, Any, Any, Any], list[str]] = {}
    r_col = "release" if by_release else "NULL::text"
    for cond, args in whole:
        rows = conn.execute(*_whole_hours_ids(query, cond, args, flagging), binary=True).fetchall()
        # A key's rows are one merged row (its ids sorted) unless it has fresh delta rows, whose
        # ids are added (positive rows) or removed (negative rows): those keys are netted here
        # (in one pass: a key is looked up only when some row is fresh).
        dirty: dict[tuple[Any, ...], list[tuple[int, list[str]]]] = {
            row[1:6]: [] for row in rows if row[0]
        }
        for _, sig, agent, hour, release, project, n, run_ids in rows:
            if dirty:
                deltas = dirty.get((sig, agent, hour, release, project))
                if deltas is not None:
                    deltas.append((n, run_ids or []))
                    continue
            day = (_NO_DAY if hour == NO_HOUR else hour // 24) if by_day else None
            key = (sig, agent, day, release if by_release else None)
            found = groups.get(key)
            if found is None:
                groups[key] = found = []
            found += run_ids
        for (sig, agent, hour, release, _), deltas in dirty.items():
            day = (_NO_DAY if hour == NO_HOUR else hour // 24) if by_day else None
            key = (sig, agent, day, release if by_release else None)
            groups.setdefault(key, []).extend(_net(deltas))
    day_col = f"floor(started_at / {24 * HOUR_US}.0)::bigint" if by_day else "NULL::bigint"
    for lo, hi in partial:
        for sig, agent, day, release, run_ids in conn.execute(
            f"SELECT sig::text, agent, {day_col}, {r_col}, array_agg(run_id) FROM rate_runs"
            f" WHERE sig = ANY(%s::uuid[]) AND started_at >= %s AND started_at < %s{agent_sql}"
            " GROUP BY 1, 2, 3, 4",
            [flagging, lo, hi, *agent_args],
            binary=True,
        ).fetchall():
            groups.setdefault((sig, agent, day, release), []).extend(run_ids)
    for (sig, agent, day, release), run_ids in groups.items():
        tally.add_ids(
            _NO_DAY if day is None else day, dec(agent), dec(release), sig, _plain(run_ids)
        )


def _whole_hours_ids(
    query: RateQuery, cond: str, args: list[Any], flagging: list[Any]
) -> tuple[str, list[Any]]:
    """SQL of the flagged ids of the window's whole hours: rows ``(fresh, sig, agent, hour,
    release, project, n, run_ids)``. The whole UTC days among them come from ``rate_day_ids``
    (PostgreSQL migration 7: one row per day instead of 24, ``hour`` the day's first), unless a
    day is stale or has fresh rows of these signatures: those days, and the hours of the partial
    days at the edges, come from ``rate_rollup``."""
    agent_sql, agent_args = _agent(query)
    hourly = (
        "SELECT fresh, sig::text, agent, hour, release, project, n, run_ids FROM rate_rollup"
        f" WHERE {cond} AND sig = ANY(%s::uuid[]){agent_sql}"
    )
    start, end = query.start_us, query.end_us
    if query.undated or start is None or end is None:
        return hourly, [*args, flagging, *agent_args]
    first, stop = -(-start // HOUR_US), end // HOUR_US  # the whole hours: [first, stop)
    d0, d1 = -(-first // 24), stop // 24  # the whole days among them: [d0, d1)
    if d0 >= d1:
        return hourly, [*args, flagging, *agent_args]
    sigs = [flagging, *agent_args]
    sql = (
        "WITH dirty AS (SELECT day FROM rate_day_stale WHERE day >= %s AND day < %s"
        " UNION SELECT floor(hour / 24.0)::bigint FROM rate_rollup WHERE fresh"
        f" AND hour >= %s AND hour < %s AND sig = ANY(%s::uuid[]){agent_sql})"
        " SELECT false, sig::text, agent, day * 24, release, project, 1::bigint, run_ids"
        " FROM rate_day_ids WHERE day >= %s AND day < %s"
        f" AND sig = ANY(%s::uuid[]){agent_sql} AND day NOT IN (SELECT day FROM dirty)"
        f" UNION ALL {hourly} AND (hour < %s OR hour >= %s"
        " OR floor(hour / 24.0)::bigint IN (SELECT day FROM dirty))"
    )
    params = [d0, d1, d0 * 24, d1 * 24, *sigs, d0, d1, *sigs, *args, *sigs, d0 * 24, d1 * 24]
    return sql, params


def _net(deltas: list[tuple[int, list[str]]]) -> list[str]:
    """The ids one key's delta rows hold: those of its positive rows, less its negative ones'."""
    held: dict[str, int] = {}
    for n, run_ids in deltas:
        step = 1 if n > 0 else -1
        for run_id in run_ids:
            held[run_id] = held.get(run_id, 0) + step
    return [run_id for run_id, k in held.items() if k > 0]


def _plain(run_ids: list[str]) -> list[str]:
    """Stored run ids as they were given (:func:`dec`): an escaped one starts with ``\\x01``,
    which most lists do not hold anywhere (one ``in`` over their text, not a loop)."""
    if "\x01" not in "".join(run_ids):
        return run_ids
    return [(dec(i) or "") if i[:1] == "\x01" else i for i in run_ids]


def pg_stored_scorers(store: Any, project: str | None = None) -> list[str]:
    """:func:`agentlens.store._sqlite_rates.stored_scorers`'s SQL, on PostgreSQL; a project's
    scorers from the rate rollup (:func:`pg_project_scorers`)."""
    if project is not None:
        return pg_project_scorers(store, project)
    return list(store.read(lambda c: stored_scorers(pg_conn(c), project)))


def pg_project_scorers(store: Any, project: str) -> list[str]:
    """:func:`agentlens.store._sqlite_rates.project_scorers` on PostgreSQL: the scorers named
    in the signatures the project's rollup rows count (net of unmerged delta rows), which are
    the current scores of its runs. Looking for one score of each scorer of the project in
    ``scores`` (no index on ``run_project``) reads every score row of the scorer when the
    project has none."""

    def work(conn: Any) -> list[str]:
        sig_ids = [
            sig
            for (sig,) in conn.execute(
                "SELECT sig::text FROM rate_rollup WHERE project = %s GROUP BY sig"
                " HAVING sum(n) > 0",
                (enc(project),),
            ).fetchall()
        ]
        sigs: dict[Any, tuple[_Scored, ...]] = {}
        _load_sigs(conn, set(sig_ids), sigs)
        return sorted({s.scorer for scores in sigs.values() for s in scores})

    return list(store.read(work))


def pg_stored_versions(
    store: Any,
    scorer: str,
    start_us: int | None = None,
    end_us: int | None = None,
    project: str | None = None,
) -> list[tuple[str, int]]:
    """:func:`agentlens.store._sqlite_rates.stored_versions`'s SQL, on PostgreSQL."""
    return list(
        store.read(lambda c: stored_versions(pg_conn(c), scorer, start_us, end_us, project))
    )
