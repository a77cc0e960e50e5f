"""Rates in the store layer: the query types, the :class:`RateSource` protocol, and the
backend-neutral classification of a run's scores that both SQL backends share.

The counting rules (the same as :mod:`agentlens.analytics`'s pure-Python tally, which the tests
hold every backend to):

- Only the scores of the selected scorers at their *current* version count: the caller names
  the version per (scorer, agent role) with :class:`VersionSelector`.
- A run is **flagged** when any of those scores has the verdict ``flagged`` and, when failure
  modes are selected, a finding of a selected mode.
- Otherwise it is **error** when any of its scores is an error, else **unverifiable** when any is
  unverifiable, else **passed** (this includes a run flagged only in modes that were not selected);
  the order is :data:`agentlens.model.VERDICT_PRECEDENCE`.
- A run in the window with none of those scores is **unscored**.

What a run counts as depends only on its *signature*, the list of (scorer, version, verdict,
failure modes) of its scores (:class:`_Scored`), and on its agent role: :class:`_Classifier`
classifies a signature once per query, :class:`_Acc` sums a group. How the SQLite store keeps
and reads its signatures is :mod:`agentlens.store._sqlite_rates`; PostgreSQL has its own module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any, NamedTuple, Protocol, runtime_checkable

from agentlens.model import VERDICT_PRECEDENCE, FailureMode, Verdict

__all__ = [
    "BREAKDOWNS",
    "RateCounts",
    "RateQuery",
    "RateSource",
    "VersionSelector",
]


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
    flagged_ids: bool = True
    """List the flagged run ids; ``False`` leaves ``flagged_run_ids`` empty and skips reading
    them (the counts alone, for a chart or a summary)."""
    project: str | None = None
    """Only this project's runs. A source answers it only when it says so with a true
    ``rates_by_project`` attribute (the SQLite store); the server's per-key view
    (:class:`agentlens.server._scope.ProjectView`) counts in Python over a source that does
    not."""


BREAKDOWNS: tuple[str, ...] = ("day", "week", "agent", "mode", "release", "scorer_version")
"""The groupings :meth:`RateSource.rate_counts` knows (``None`` is the whole window)."""
_BY = BREAKDOWNS


def check_breakdown(by: str | None) -> None:
    """Raise ``ValueError`` for a grouping :data:`BREAKDOWNS` does not name."""
    if by not in (None, *BREAKDOWNS):
        raise ValueError(f"unknown breakdown {by!r}; choose from {', '.join(BREAKDOWNS)}")


@runtime_checkable
class RateSource(Protocol):
    """A store that answers rate queries itself, beside :class:`~agentlens.store.TraceStore`.

    The SQLite and PostgreSQL stores implement it; :mod:`agentlens.analytics` calls it (and
    counts in Python, through the same protocol, for a store that does not). Every
    implementation gives exactly the counts of the plain-Python reference (the tests hold them
    to it).
    """

    def rate_counts(self, query: RateQuery, by: str | None = None) -> list[RateCounts]:
        """Count runs by outcome over ``query``'s window, for the whole window or per group.

        Args:
            query: the window, agent, scorer versions and modes.
            by: ``None`` for one :class:`RateCounts` (key ``None``) over the window, or one of
                :data:`BREAKDOWNS`: ``day`` (UTC date), ``week`` (the Monday, UTC, that starts
                the ISO week), ``agent``, ``release`` (``metadata.release``), ``mode`` (one group
                per failure mode: the rate as if only that mode were selected) or
                ``scorer_version`` (``scorer@version``, every stored version of the selected
                scorers apart).

        Returns:
            The groups in key order (``None`` keys last; for ``mode``, the modes' order).
        """
        ...

    def stored_scorers(self) -> list[str]:
        """Every scorer name with at least one stored score, sorted."""
        ...

    def stored_versions(
        self, scorer: str, start_us: int | None = None, end_us: int | None = None
    ) -> list[tuple[str, int]]:
        """The versions of ``scorer`` with scores of runs started in ``[start_us, end_us)``,
        each with its latest ``scored_at`` (µs since the epoch), newest first."""
        ...


_ALL_MODES = tuple(str(m) for m in FailureMode)

_RANK: dict[str, int] = {
    str(v): len(VERDICT_PRECEDENCE) - 1 - i for i, v in enumerate(VERDICT_PRECEDENCE)
}
"""A verdict's rank in the outcome order, so that a run's outcome is the ``max`` over its
scores: 3 flagged, 2 error, 1 unverifiable, 0 passed."""
_FLAGGED, _ERROR, _UNVERIFIABLE = (
    _RANK[Verdict.FLAGGED],
    _RANK[Verdict.ERROR],
    _RANK[Verdict.UNVERIFIABLE],
)

_DAY_US = 86_400_000_000
"""Microseconds in a day: a rollup's days are UTC day numbers, ``started_at // _DAY_US``."""
_NO_DAY = -(2**63)
"""``day`` of an undated run in the rollups."""
_EPOCH_DATE = date(1970, 1, 1)


class _Scored(NamedTuple):
    """One score of a signature."""

    scorer: str
    version: str
    verdict: str
    modes: frozenset[str]


def _plain(value: Any) -> str | None:
    """A stored ``agent``/``release`` of a rollup: the empty blob (bytes) stands for NULL."""
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
        return _RANK.get(s.verdict, 0)

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


class _Tally:
    """The counts of a window while its rows are summed, per group: what both backends do with
    the rows their SQL returns (the rows' agent and release already decoded)."""

    def __init__(self, query: RateQuery, by: str | None) -> None:
        self.by = by
        self.by_part = by in ("mode", "scorer_version")
        self.mode_list = list(dict.fromkeys(query.modes if query.modes is not None else _ALL_MODES))
        self.classify = _Classifier(query, by, self.mode_list)
        self.accs: dict[str | None, _Acc] = {}
        self.flagging: set[Any] = set()
        """The signatures that flag a run under the query: whose runs' ids are listed."""

    def add(self, day: int | None, agent: Any, release: Any, sig: Any, n: int) -> None:
        """``n`` scored runs of one signature in one (day, agent, release)."""
        parts = self.classify.parts(sig, agent)
        if not parts:
            return
        row_key = None if self.by_part else _group_key(self.by, day, agent, release)
        for sub, rank, hit in parts:
            key = sub if self.by_part else row_key
            acc = self.accs.get(key)
            if acc is None:
                acc = self.accs[key] = _Acc()
            acc.scored_any += n
            if rank == _FLAGGED:
                acc.flagged += n
                self.flagging.add(sig)
                for m in hit:
                    acc.by_mode[m] = acc.by_mode.get(m, 0) + n
            elif rank == _ERROR:
                acc.errors += n
            elif rank == _UNVERIFIABLE:
                acc.unverifiable += n

    def add_ids(
        self, day: int | None, agent: Any, release: Any, sig: Any, run_ids: list[str]
    ) -> None:
        """The ids of runs of a flagging signature, to the groups they are flagged in."""
        key = None if self.by_part else _group_key(self.by, day, agent, release)
        for sub, rank, _ in self.classify.parts(sig, agent):
            if rank == _FLAGGED:
                self.accs[sub if self.by_part else key].ids.extend(run_ids)

    def grouped(self, runs_by_key: dict[str | None, int]) -> list[RateCounts]:
        """The groups of any breakdown but ``day``/``week``, in key order, given the runs of
        each group (``by`` agent or release; else one total under ``None``)."""
        accs, mode_list = self.accs, self.mode_list
        total = sum(runs_by_key.values())
        if self.by == "mode":
            out = []
            for m in mode_list:
                counts = accs.get(m, _Acc()).counts(m, total, [])
                counts.by_mode = {m: counts.flagged}
                out.append(counts)
            return out
        if self.by in ("agent", "release"):
            keys = {k for k, n in runs_by_key.items() if n} | set(accs)
            found = [accs.get(k, _Acc()).counts(k, runs_by_key.get(k, 0), mode_list) for k in keys]
        elif self.by == "scorer_version":
            found = [acc.counts(k, total, mode_list) for k, acc in accs.items()]
        else:
            found = [accs.get(None, _Acc()).counts(None, total, mode_list)]
        return sorted(found, key=lambda c: (c.key is None, c.key or ""))
