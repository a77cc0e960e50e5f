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

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
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


_BY = ("day", "week", "agent", "release", "mode", "scorer_version")
"""The breakdowns :func:`rate_counts` knows."""

_ALL_MODES = tuple(str(m) for m in FailureMode)


def _score_key(by: str | None) -> str:
    return {
        None: "NULL",
        "mode": "NULL",
        "day": "date(s.run_started_at / 1000000, 'unixepoch')",
        "week": "date(s.run_started_at / 1000000, 'unixepoch', 'weekday 0', '-6 days')",
        "agent": "s.run_agent",
        "release": "s.run_release",
        "scorer_version": "s.scorer || '@' || s.version",
    }[by]


def _run_key(by: str | None) -> str | None:
    return {
        "day": "date(r.started_at / 1000000, 'unixepoch')",
        "week": "date(r.started_at / 1000000, 'unixepoch', 'weekday 0', '-6 days')",
        "agent": "r.agent",
        "release": "r.release",
    }.get(by or "")


def _score_where(query: RateQuery) -> tuple[str, list[Any]]:
    params: list[Any] = []
    if query.any_version_of is not None:
        names = list(query.any_version_of)
        selection = f"s.scorer IN ({', '.join('?' * len(names))})" if names else "0"
        params.extend(names)
    else:
        parts = []
        for sel in query.selectors:
            part = "(s.scorer = ? AND s.version = ?"
            params.extend((sel.scorer, sel.version))
            if sel.agents is not None:
                part += f" AND s.run_agent IN ({', '.join('?' * len(sel.agents))})"
                params.extend(sel.agents)
            elif sel.exclude_agents:
                part += (
                    " AND (s.run_agent IS NULL OR s.run_agent NOT IN"
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
    return " AND ".join(clauses), params


def _runs_where(query: RateQuery) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if query.start_us is not None:
        clauses.append("r.sort_at >= ?")
        params.append(query.start_us)
    if query.end_us is not None:
        clauses.append("r.sort_at < ?")
        params.append(query.end_us)
    if query.start_us is not None or query.end_us is not None:
        clauses.append("r.started_at IS NOT NULL")
    if query.agent is not None:
        clauses.append("r.agent = ?")
        params.append(query.agent)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


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
    """
    if by not in (None, *_BY):
        raise ValueError(f"unknown breakdown {by!r}; choose from {', '.join(_BY)}")
    modes = query.modes if query.modes is not None else _ALL_MODES
    mode_list = list(dict.fromkeys(str(m) for m in modes))
    where, params = _score_where(query)
    key = _score_key(by)
    # One bit per mode: which of the listed modes a flagged score found.
    mask_case = " ".join(f"WHEN '{m}' THEN {1 << j}" for j, m in enumerate(mode_list))
    mask = (
        "CASE WHEN s.verdict = 'flagged' THEN (SELECT ifnull(sum(CASE m.mode "
        f"{mask_case} ELSE 0 END), 0) FROM score_modes m WHERE m.run_id = s.run_id"
        " AND m.scorer = s.scorer AND m.version = s.version) ELSE 0 END"
        if mode_list
        else "0"
    )
    flag = "verdict = 'flagged'" if query.modes is None else "mask != 0"
    mode_cols = ", ".join(f"max((mask >> {j}) & 1) AS m{j}" for j in range(len(mode_list)))
    per_run = (
        f"SELECT run_id, k, max({flag}) AS f, max(verdict = 'error') AS e,"
        f" max(verdict = 'unverifiable') AS u{', ' + mode_cols if mode_cols else ''}"
        f" FROM (SELECT s.run_id AS run_id, {key} AS k, s.verdict AS verdict, {mask} AS mask"
        f" FROM scores s WHERE {where}) GROUP BY run_id, k"
    )
    if by == "mode":
        cols = []
        for j in range(len(mode_list)):
            cols.append(
                f"sum(m{j}), sum(m{j} = 0 AND e), sum(m{j} = 0 AND e = 0 AND u),"
                f" group_concat(CASE WHEN m{j} THEN run_id END)"
            )
        sql = f"SELECT count(*), {', '.join(cols)} FROM ({per_run})"
    else:
        by_mode_cols = "".join(f", sum(m{j})" for j in range(len(mode_list)))
        sql = (
            "SELECT k, count(*), sum(f), sum(f = 0 AND e), sum(f = 0 AND e = 0 AND u),"
            f" group_concat(CASE WHEN f THEN run_id END){by_mode_cols}"
            f" FROM ({per_run}) GROUP BY k"
        )
    run_key = _run_key(by)
    runs_where, runs_params = _runs_where(query)
    runs_sql = (
        f"SELECT {run_key}, count(*) FROM runs r{runs_where} GROUP BY 1"
        if run_key is not None
        else f"SELECT NULL, count(*) FROM runs r{runs_where}"
    )

    def work(conn: sqlite3.Connection) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        return (
            conn.execute(sql, params).fetchall(),
            conn.execute(runs_sql, runs_params).fetchall(),
        )

    rows, run_rows = _read(store, work)
    runs_by_key: dict[str | None, int] = {k: n for k, n in run_rows}
    total_runs = sum(runs_by_key.values())
    if by == "mode":
        (row,) = rows
        scored_any = row[0]
        groups = []
        for j, m in enumerate(mode_list):
            flagged, errors, unverifiable, ids = row[1 + 4 * j : 5 + 4 * j]
            counts = RateCounts(
                key=m,
                runs=total_runs,
                flagged=flagged or 0,
                errors=errors or 0,
                unverifiable=unverifiable or 0,
                by_mode={m: flagged or 0},
                flagged_run_ids=_ids(ids),
            )
            counts.passed = scored_any - counts.flagged - counts.errors - counts.unverifiable
            groups.append(counts)
        return groups
    found: dict[str | None, RateCounts] = {}
    for row in rows:
        k, scored_any, flagged, errors, unverifiable, ids = row[:6]
        counts = RateCounts(
            key=k,
            runs=total_runs if run_key is None else runs_by_key.get(k, 0),
            flagged=flagged or 0,
            errors=errors or 0,
            unverifiable=unverifiable or 0,
            by_mode={m: row[6 + j] or 0 for j, m in enumerate(mode_list)},
            flagged_run_ids=_ids(ids),
        )
        counts.passed = scored_any - counts.flagged - counts.errors - counts.unverifiable
        found[k] = counts
    if run_key is not None:
        for k, n in runs_by_key.items():
            if k not in found:
                found[k] = RateCounts(key=k, runs=n, by_mode=dict.fromkeys(mode_list, 0))
    elif by is None and not found:
        found[None] = RateCounts(key=None, runs=total_runs, by_mode=dict.fromkeys(mode_list, 0))
    return sorted(found.values(), key=lambda c: (c.key is None, c.key or ""))


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
