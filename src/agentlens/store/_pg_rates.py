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
from agentlens.store._pg_text import dec, enc
from agentlens.store._rates import (
    _ALL_MODES,
    _ERROR,
    _FLAGGED,
    _NO_DAY,
    _UNVERIFIABLE,
    RateCounts,
    RateQuery,
    _Acc,
    _Classifier,
    _group_key,
    _Scored,
    check_breakdown,
)
from agentlens.store._sqlite_rates import _decode

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


def _agent(q: RateQuery, column: str = "agent") -> tuple[str, list[Any]]:
    return (f" AND {column} = %s", [enc(q.agent)]) if q.agent is not None else ("", [])


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


def _window_rows(conn: Any, q: RateQuery, by: str | None) -> list[tuple[int, Any, Any, Any, int]]:
    """``(day, agent, release, sig, runs)`` of the scored runs of the window (``day`` and
    ``release`` only when the breakdown needs them)."""
    agent_sql, agent_args = _agent(q)
    whole, partial = _edges(q)
    rows: list[tuple[int, Any, Any, Any, int]] = []
    day, release = _keys(by, None)
    for cond, args in whole:
        rows.extend(
            conn.execute(
                f"SELECT {day}, agent, {release}, sig::text, sum(n)::bigint FROM rate_rollup"
                f" WHERE {cond}{agent_sql} GROUP BY 1, 2, 3, 4 HAVING sum(n) <> 0",
                [*args, *agent_args],
            ).fetchall()
        )
    day, release = _keys(by, "started_at")
    for lo, hi in partial:
        rows.extend(
            conn.execute(
                f"SELECT {day}, agent, {release}, sig::text, count(*) FROM rate_runs"
                f" WHERE started_at >= %s AND started_at < %s{agent_sql} GROUP BY 1, 2, 3, 4",
                [lo, hi, *agent_args],
            ).fetchall()
        )
    return rows


def _run_rows(conn: Any, q: RateQuery, by: str | None) -> list[tuple[int, Any, Any, int]]:
    """``(day, agent, release, runs)`` of every run of the window (scored or not)."""
    agent_sql, agent_args = _agent(q)
    whole, partial = _edges(q)
    rows: list[tuple[int, Any, Any, int]] = []
    day, release = _keys(by, None)
    agent = "agent" if by == "agent" else "NULL::text"
    for cond, args in whole:
        rows.extend(
            conn.execute(
                f"SELECT {day}, {agent}, {release}, sum(n)::bigint FROM run_rollup"
                f" WHERE {cond}{agent_sql} GROUP BY 1, 2, 3 HAVING sum(n) <> 0",
                [*args, *agent_args],
            ).fetchall()
        )
    day, release = _keys(by, "sort_at")
    for lo, hi in partial:
        rows.extend(
            conn.execute(
                f"SELECT {day}, {agent}, {release}, count(*) FROM runs"
                f" WHERE sort_at >= %s AND sort_at < %s{agent_sql} GROUP BY 1, 2, 3",
                [lo, hi, *agent_args],
            ).fetchall()
        )
    return rows


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
    mode_list = list(dict.fromkeys(query.modes if query.modes is not None else _ALL_MODES))
    classify = _Classifier(query, by, mode_list)
    by_part = by in ("mode", "scorer_version")

    def work(conn: Any) -> list[RateCounts]:
        rows = _window_rows(conn, query, by)
        _load_sigs(conn, {row[3] for row in rows}, classify.sigs)
        accs: dict[str | None, _Acc] = {}
        flagging: set[Any] = set()
        for day, agent, release, sig, n in rows:
            agent = dec(agent)
            parts = classify.parts(sig, agent)
            if not parts:
                continue
            row_key = None if by_part else _group_key(by, day, agent, dec(release))
            for sub, rank, hit in parts:
                key = sub if by_part else row_key
                acc = accs.get(key)
                if acc is None:
                    acc = accs[key] = _Acc()
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
        if flagging and query.flagged_ids:
            agent_sql, agent_args = _agent(query)
            clauses, args = [], []
            if query.start_us is not None:
                clauses.append("started_at >= %s")
                args.append(query.start_us)
            if query.end_us is not None:
                clauses.append("started_at < %s")
                args.append(query.end_us)
            if query.undated:
                clauses.append("started_at IS NULL")
            extra = "".join(f" AND {c}" for c in clauses)
            # the flagged runs grouped in the server by what the breakdown tells apart: a row
            # per (signature, agent, day or release) with its run ids, not a row per run
            day_col = (
                f"floor(started_at / {24 * HOUR_US}.0)::bigint"
                if by in ("day", "week")
                else "NULL::bigint"
            )
            r_col = "release" if by == "release" else "NULL::text"
            for sig, agent, day, release, run_ids in conn.execute(
                f"SELECT sig::text, agent, {day_col}, {r_col}, array_agg(run_id) FROM rate_runs"
                f" WHERE sig = ANY(%s::uuid[]){extra}{agent_sql} GROUP BY 1, 2, 3, 4",
                [sorted(flagging), *args, *agent_args],
            ).fetchall():
                agent = dec(agent)
                day = _NO_DAY if day is None else day
                key = None if by_part else _group_key(by, day, agent, dec(release))
                plain: list[str] = [(dec(i) or "") if i[:1] == "\x01" else i for i in run_ids]
                for sub, rank, _ in classify.parts(sig, agent):
                    if rank == _FLAGGED:
                        accs[sub if by_part else key].ids.extend(plain)
        return _assemble(conn, query, by, accs, mode_list)

    return store.read(work)


def _assemble(
    conn: Any, query: RateQuery, by: str | None, accs: dict[str | None, _Acc], mode_list: list[str]
) -> list[RateCounts]:
    runs_by_key: dict[str | None, int] = {}
    for day, agent, release, n in _run_rows(conn, query, by):
        key = _group_key(by, day, dec(agent), dec(release))
        runs_by_key[key] = runs_by_key.get(key, 0) + n
    total = sum(runs_by_key.values())
    if by in ("day", "week"):
        labels = {k for k, n in runs_by_key.items() if n} | set(accs)
        ordered = sorted(labels, key=lambda k: (k is None, k or ""))
        return [accs.get(k, _Acc()).counts(k, runs_by_key.get(k, 0), mode_list) for k in ordered]
    if by == "mode":
        out = []
        for m in mode_list:
            counts = accs.get(m, _Acc()).counts(m, total, [])
            counts.by_mode = {m: counts.flagged}
            out.append(counts)
        return out
    if by in ("agent", "release"):
        keys = {k for k, n in runs_by_key.items() if n} | set(accs)
        found = [accs.get(k, _Acc()).counts(k, runs_by_key.get(k, 0), mode_list) for k in keys]
    elif by == "scorer_version":
        found = [acc.counts(k, total, mode_list) for k, acc in accs.items()]
    else:
        found = [accs.get(None, _Acc()).counts(None, total, mode_list)]
    return sorted(found, key=lambda c: (c.key is None, c.key or ""))


def pg_stored_scorers(store: Any) -> list[str]:
    """Every scorer name with a stored score (a skip-scan of the scorer index)."""
    sql = (
        "WITH RECURSIVE n(name) AS (SELECT min(scorer) FROM scores UNION ALL"
        " SELECT (SELECT min(scorer) FROM scores WHERE scorer > n.name) FROM n"
        " WHERE n.name IS NOT NULL) SELECT name FROM n WHERE name IS NOT NULL"
    )
    rows = store.read(lambda c: c.execute(sql).fetchall())
    return [dec(name) or "" for (name,) in rows]


def pg_stored_versions(
    store: Any, scorer: str, start_us: int | None = None, end_us: int | None = None
) -> list[tuple[str, int]]:
    """The versions of ``scorer`` with scores of runs in the window, each with its latest
    ``scored_at`` (µs), newest first (as :func:`agentlens.store._sqlite_rates.stored_versions`)."""
    versions_sql = (
        "WITH RECURSIVE v(version) AS (SELECT min(version) FROM scores WHERE scorer = %(s)s"
        " UNION ALL SELECT (SELECT min(version) FROM scores WHERE scorer = %(s)s"
        " AND version > v.version) FROM v WHERE v.version IS NOT NULL)"
        " SELECT version FROM v WHERE version IS NOT NULL"
    )
    window = ""
    args: dict[str, Any] = {"s": enc(scorer)}
    if start_us is not None:
        window += " AND run_started_at >= %(a)s"
        args["a"] = start_us
    if end_us is not None:
        window += " AND run_started_at < %(b)s"
        args["b"] = end_us
    latest_sql = (
        f"SELECT max(scored_at) FROM scores WHERE scorer = %(s)s AND version = %(v)s{window}"
    )

    def work(conn: Any) -> list[tuple[str, int]]:
        found = []
        for (version,) in conn.execute(versions_sql, {"s": enc(scorer)}).fetchall():
            (latest,) = conn.execute(latest_sql, {**args, "v": version}).fetchone()
            if latest is not None:
                found.append((dec(version) or "", int(latest)))
        return sorted(found, key=lambda item: (-item[1], item[0]))

    return store.read(work)
