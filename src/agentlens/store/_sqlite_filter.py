"""A :class:`~agentlens.store.RunFilter` as SQL on SQLite's ``runs r`` (joined with
``run_review f`` when the filter needs it): what :class:`~agentlens.store.SQLiteStore`'s queries
and the server's run pages (:mod:`agentlens.store._server`) both build their ``WHERE`` from.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from agentlens.errors import StoreError
from agentlens.model import to_epoch_us
from agentlens.store._protocol import RunFilter

__all__ = ["_FilterSQL", "_as_ids", "_filter_sql", "_marks", "_where_clause"]

_MAX_BOUND_IDS = 30000
"""A ``run_ids`` filter up to this size is bound as parameters (SQLite allows 32766)."""


def _marks(n: int) -> str:
    """``(?, ?, ...)`` with ``n`` parameters (``(NULL)`` when ``n`` is 0: matches nothing)."""
    return "(" + ", ".join("?" * n) + ")" if n else "(NULL)"


def _as_ids(run_ids: Iterable[str]) -> list[str]:
    if isinstance(run_ids, str):
        return [run_ids]
    ids = list(run_ids)
    for run_id in ids:
        if not isinstance(run_id, str):
            raise StoreError(f"a run id must be a string, got {type(run_id).__name__}")
    return ids


def _where_clause(clauses: list[str]) -> str:
    return " WHERE " + " AND ".join(clauses) if clauses else ""


@dataclass(frozen=True, slots=True)
class _FilterSQL:
    """A :class:`RunFilter` as SQL on ``runs r``: the time bounds (µs) apart from the rest, so
    that a page query can replace the bound its key cursor makes redundant."""

    low: int | None
    high: int | None
    clauses: tuple[str, ...]
    params: tuple[Any, ...]
    join: str = ""
    """A join of ``run_review f`` when the filter or the columns need it."""
    key: tuple[str, str] = ("r.sort_at", "r.id")
    """The (time, id) columns pages are ordered and cut by: ``run_review``'s for a filter on
    flagged runs, so the flagged-runs index drives the query."""
    most: int | None = None
    """The most runs the filter can match: the number of distinct ids of a ``run_ids`` filter
    (``None``: no such bound). A lazy query reads them in one page."""

    def sql(self, *, low: bool = True, high: bool = True) -> tuple[list[str], list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        if self.low is not None and low:
            clauses.append(f"{self.key[0]} >= ?")
            params.append(self.low)
        if self.high is not None and high:
            clauses.append(f"{self.key[0]} < ?")
            params.append(self.high)
        if self.low is not None or self.high is not None:
            clauses.append("r.started_at IS NOT NULL")
        return [*clauses, *self.clauses], [*params, *self.params]

    def plus(self, clause: str, *params: Any) -> _FilterSQL:
        return replace(self, clauses=(*self.clauses, clause), params=(*self.params, *params))

    def with_review(self) -> _FilterSQL:
        """The same filter, with ``run_review f`` joined (for its columns)."""
        return self if self.join else replace(self, join=_LEFT_JOIN_REVIEW)


_LEFT_JOIN_REVIEW = " LEFT JOIN run_review f ON f.run_id = r.id"
_JOIN_REVIEW = " JOIN run_review f ON f.run_id = r.id"


def _filter_sql(where: RunFilter | None) -> _FilterSQL:
    """The SQL of a :class:`RunFilter` (``start <= started_at < end`` and equalities)."""
    if where is None:
        return _FilterSQL(None, None, (), ())
    clauses: list[str] = []
    params: list[Any] = []
    join = ""
    key = ("r.sort_at", "r.id")
    if where.flagged or where.failure_mode is not None:
        join, key = _JOIN_REVIEW, ("f.sort_at", "f.run_id")
        clauses.append("f.flagged = 1")
        if where.failure_mode is not None:
            clauses.append(
                "EXISTS (SELECT 1 FROM run_flag_modes m WHERE m.run_id = f.run_id AND m.mode = ?)"
            )
            params.append(str(where.failure_mode))
    elif where.flagged is False:
        join = _LEFT_JOIN_REVIEW
        clauses.append("ifnull(f.flagged, 0) = 0")
    if where.agent is not None:
        clauses.append("f.agent = ?" if key[0] == "f.sort_at" else "r.agent = ?")
        params.append(where.agent)
    if where.project is not None:
        clauses.append("r.project = ?")
        params.append(where.project)
    if where.release is not None:
        clauses.append("r.release = ?")
        params.append(where.release)
    if where.has_output is not None:
        clauses.append("r.has_output = ?")
        params.append(int(where.has_output))
    most = None
    if where.run_ids is not None:
        run_ids = _as_ids(where.run_ids)
        most = len(set(run_ids))
        if len(run_ids) <= _MAX_BOUND_IDS:
            clauses.append(f"r.id IN {_marks(len(run_ids))}")
            params.extend(run_ids)
        else:  # too many to bind one by one (ids with a NUL character cannot match here)
            clauses.append("r.id IN (SELECT value FROM json_each(?))")
            params.append(json.dumps(run_ids))
    return _FilterSQL(
        to_epoch_us(where.start),
        to_epoch_us(where.end),
        tuple(clauses),
        tuple(params),
        join,
        key,
        most,
    )
