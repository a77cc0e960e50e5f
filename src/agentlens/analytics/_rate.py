"""The hallucination rate over a window: :func:`hallucination_rate` and :func:`rate_breakdown`.

Which scores count
------------------
For every selected scorer, only its **current** version counts:

- a scorer registered in this process (the built-ins, or one your code defined) counts at the
  version ``resolve_scorer(name, agent, settings).stored_version`` gives for the run's agent
  role: its declared version, plus a hash of the options configured for that role. That is the
  version ``agentlens score`` writes, so a rate never mixes an old scorer with a new one;
- a scorer not registered here (defined in code the CLI does not import) counts at the newest
  version stored for runs in the window (the one most recently written);
- ``"name@version"`` pins a version explicitly (e.g. the results of ``score --judge ...``,
  whose options give them a version of their own).

Without ``scorers``, every scorer that has stored scores counts.

How runs are counted
--------------------
See :class:`~agentlens.analytics.RateStats`: a run is flagged when any counted score flagged it
(in a selected mode); runs a check could not verify, and runs a scorer failed on, are counted
apart and never as passes; ``rate = flagged / scored`` with ``scored = flagged + passed``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, TypedDict, TypeVar, Unpack

from agentlens.analytics._outcome import facts_of, mode_keys, tally
from agentlens.analytics._report import Breakdown, RateGroup, RateReport
from agentlens.analytics._window import Window, resolve_window
from agentlens.config import Settings
from agentlens.errors import ConfigError, ScorerError
from agentlens.model import FailureMode, Score, from_epoch_us, to_epoch_us, utc
from agentlens.store import (
    BREAKDOWNS,
    RateCounts,
    RateQuery,
    RateSource,
    RunFilter,
    RunSummary,
    TraceStore,
    VersionSelector,
)
from agentlens.store._rates import check_breakdown

__all__ = [
    "BREAKDOWNS",
    "PythonRateSource",
    "RateOptions",
    "RateSelection",
    "hallucination_rate",
    "python_rate_counts",
    "rate_breakdown",
    "rate_source",
    "resolve_selection",
]

_T = TypeVar("_T")


class RateOptions(TypedDict, total=False):
    """The keyword arguments of :func:`hallucination_rate` and :func:`rate_breakdown`: which
    runs and scores count, and where they are. Stated once, here."""

    since_hours: float | None
    """The window is the last this many hours (up to ``end``, default now)."""
    start: datetime | str | None
    """The window's start (inclusive; a datetime or an ISO string; naive is UTC)."""
    end: datetime | str | None
    """The window's end (exclusive); default: open (or now, with ``since_hours``)."""
    agent: str | None
    """Count only this agent role's runs."""
    modes: Iterable[str | FailureMode] | None
    """Count only flags in these failure modes (default: any)."""
    scorers: Iterable[str] | None
    """Scorer names (``"name@version"`` pins a version); default: every stored scorer."""
    store: TraceStore | None
    """An open store; default: the configured one (opened and closed here)."""
    settings: Settings | None
    """Scorer options per agent role (default: :func:`load_settings`)."""
    now: datetime | None
    """The current time (for tests)."""
    flagged_ids: bool
    """List the flagged run ids (default ``True``); ``False``: the counts only, faster on big
    windows (``flagged_run_ids`` is then empty)."""


@dataclass(frozen=True, slots=True)
class RateSelection:
    """Which runs and scores a rate counts, checked: a window, an agent role, failure modes and
    scorer names. Built from :class:`RateOptions` by :meth:`of`."""

    window: Window
    agent: str | None = None
    modes: tuple[str, ...] | None = None
    """Known failure modes, normalised and without repeats; ``None``: all."""
    scorers: tuple[str, ...] | None = None
    """``None``: every stored scorer."""
    flagged_ids: bool = True

    @classmethod
    def of(cls, options: RateOptions) -> RateSelection:
        """Check the options (the window's, the failure modes).

        Raises:
            ConfigError: conflicting window options or an unknown failure mode.
        """
        window = resolve_window(
            since_hours=options.get("since_hours"),
            start=options.get("start"),
            end=options.get("end"),
            now=options.get("now"),
        )
        modes = _modes(options.get("modes"))
        scorers = options.get("scorers")
        return cls(
            window=window,
            agent=options.get("agent"),
            modes=None if modes is None else tuple(modes),
            scorers=None if scorers is None else tuple(scorers),
            flagged_ids=options.get("flagged_ids", True),
        )

    @property
    def mode_list(self) -> list[str] | None:
        """:attr:`modes` as a list (as the reports carry it)."""
        return None if self.modes is None else list(self.modes)

    def query(self, selectors: list[VersionSelector]) -> RateQuery:
        """The store query of this selection, counting the given scorer versions."""
        return RateQuery(
            selectors=tuple(selectors),
            start_us=to_epoch_us(self.window.start),
            end_us=to_epoch_us(self.window.end),
            agent=self.agent,
            modes=self.modes,
            flagged_ids=self.flagged_ids,
        )


def hallucination_rate(**options: Unpack[RateOptions]) -> RateReport:
    """The hallucination rate of the runs that started in a window.

    The options (:class:`RateOptions`): ``since_hours``, ``start``, ``end``, ``agent``,
    ``modes``, ``scorers``, ``store``, ``settings``, ``now``, ``flagged_ids``.

    Returns:
        A :class:`RateReport` (``rate`` is ``None`` when nothing in the window was scored).

    Raises:
        ConfigError: conflicting window options or an unknown failure mode.
    """
    selection = RateSelection.of(options)

    def work(source: RateSource, cfg: Settings) -> RateReport:
        selectors, versions = resolve_selection(source, cfg, selection.window, selection.scorers)
        (counts,) = source.rate_counts(selection.query(selectors), None)
        return RateReport.from_counts(
            counts,
            start=selection.window.start,
            end=selection.window.end,
            agent=selection.agent,
            modes=selection.mode_list,
            scorers=versions,
        )

    return _with_source(options, work)


def rate_breakdown(by: str, **options: Unpack[RateOptions]) -> Breakdown:
    """The rate broken down by ``day``, ``week``, ``agent``, ``mode``, ``release`` or
    ``scorer_version``; the options are those of :func:`hallucination_rate`.

    ``day`` keys are UTC dates; ``week`` keys are the Monday (UTC) that starts the ISO week;
    ``release`` is ``metadata.release``; ``mode`` gives each failure mode's rate as if only it
    were selected; ``scorer_version`` gives each stored version of each selected scorer apart
    (``name@version``), which is how an old and a new version compare on the same runs.

    Raises:
        ConfigError: an unknown breakdown, conflicting window options, an unknown mode.
    """
    if by not in BREAKDOWNS:
        raise ConfigError(f"unknown breakdown {by!r}; choose from {', '.join(BREAKDOWNS)}")
    selection = RateSelection.of(options)

    def work(source: RateSource, cfg: Settings) -> Breakdown:
        selectors, versions = resolve_selection(source, cfg, selection.window, selection.scorers)
        query = selection.query(selectors)
        if by == "scorer_version":
            query = replace(query, selectors=(), any_version_of=tuple(versions))
        groups = source.rate_counts(query, by)
        return Breakdown(
            by=by,
            groups=[RateGroup.from_counts(c) for c in groups],
            start=selection.window.start,
            end=selection.window.end,
            agent=selection.agent,
            modes=selection.mode_list,
            scorers=versions,
        )

    return _with_source(options, work)


def rate_source(store: TraceStore) -> RateSource:
    """The store's own rate queries when it has them (SQLite, PostgreSQL), else the same
    counts computed in Python (:class:`PythonRateSource`)."""
    return store if isinstance(store, RateSource) else PythonRateSource(store)


def _with_source(options: RateOptions, work: Callable[[RateSource, Settings], _T]) -> _T:
    cfg = options.get("settings")
    if cfg is None:
        from agentlens.config import load_settings

        cfg = load_settings()
    store = options.get("store")
    if store is not None:
        return work(rate_source(store), cfg)
    from agentlens.store import open_store

    opened = open_store(cfg.db)
    try:
        return work(rate_source(opened), cfg)
    finally:
        opened.close()


def _modes(modes: Iterable[str | FailureMode] | None) -> list[str] | None:
    if modes is None:
        return None
    known = {str(m) for m in FailureMode}
    chosen = []
    for m in modes:
        name = str(m).strip().lower().replace("-", "_")
        if name not in known:
            raise ConfigError(f"unknown failure mode {m!r}; choose from {', '.join(sorted(known))}")
        if name not in chosen:
            chosen.append(name)
    return chosen or None


def resolve_selection(
    source: RateSource, settings: Settings, window: Window, scorers: Iterable[str] | None
) -> tuple[list[VersionSelector], dict[str, list[str]]]:
    """The scorer versions that count (see the module docs), and ``{scorer: [versions]}``."""
    from agentlens.eval import get_scorer, resolve_scorer

    names = list(scorers) if scorers is not None else source.stored_scorers()
    selectors: list[VersionSelector] = []
    versions: dict[str, list[str]] = {}
    for item in names:
        name, _, pinned = item.partition("@")
        name = name.strip()
        if not name:
            raise ConfigError(f"bad scorer {item!r}: expected NAME or NAME@VERSION")
        if pinned:
            if scorers is not None:
                _check_stored_version(source, name, pinned)
            selectors.append(VersionSelector(name, pinned))
            versions.setdefault(name, []).append(pinned)
            continue
        try:
            base = get_scorer(name)
        except ScorerError as exc:
            base = None
            unknown = str(exc)
        if base is None:
            found = [
                v
                for v, _ in source.stored_versions(
                    name, to_epoch_us(window.start), to_epoch_us(window.end)
                )
            ]
            if found:
                selectors.append(VersionSelector(name, found[0]))
                versions.setdefault(name, []).append(found[0])
            elif scorers is not None and name not in source.stored_scorers():
                raise ConfigError(_not_stored(name, unknown))
            else:
                versions.setdefault(name, [])
            continue
        default = resolve_scorer(base, None, settings).stored_version
        own: dict[str, str] = {}
        for role in settings.agents:
            version = resolve_scorer(base, role, settings).stored_version
            if version != default:
                own[role] = version
        selectors.append(VersionSelector(name, default, exclude_agents=tuple(sorted(own))))
        listed = [default]
        for role, version in sorted(own.items()):
            selectors.append(VersionSelector(name, version, agents=(role,)))
            if version not in listed:
                listed.append(version)
        versions.setdefault(name, []).extend(v for v in listed if v not in versions[name])
    return selectors, versions


def _not_stored(name: str, reason: str) -> str:
    """Why ``name`` counts nothing: no score of it is stored and no scorer has that name (or
    its entry point failed to load: ``reason``)."""
    from agentlens.eval import registered_scorers

    if not reason.startswith("unknown scorer"):
        return f"{reason}; and no score of {name!r} is stored"
    known = ", ".join(registered_scorers())
    return (
        f"unknown scorer {name!r}: no scorer has that name and no score of it is stored;"
        f" known scorers: {known}"
    )


def _check_stored_version(source: RateSource, name: str, version: str) -> None:
    """Refuse ``NAME@VERSION`` when no score of that version is stored, in any window (a
    mistyped version would count nothing and look like runs not scored yet)."""
    stored = [v for v, _ in source.stored_versions(name)]
    if version not in stored:
        listed = ", ".join(stored[:10]) if stored else "none"
        raise ConfigError(
            f"no score of {name}@{version} is stored; stored versions of {name!r}: {listed}"
        )


# ---------------------------------------------------------------- any store, in Python


def _selected(query: RateQuery) -> Callable[[Score, str | None], bool]:
    if query.any_version_of is not None:
        wanted = set(query.any_version_of)
        return lambda s, agent: s.scorer in wanted

    def counts(score: Score, agent: str | None) -> bool:
        for sel in query.selectors:
            if sel.scorer != score.scorer or sel.version != score.version:
                continue
            if sel.agents is not None:
                if agent in sel.agents:
                    return True
            elif agent is None or agent not in sel.exclude_agents:
                return True
        return False

    return counts


def _key(run: RunSummary, by: str | None) -> str | None:
    if by in ("day", "week"):
        if run.started_at is None:
            return None
        day = utc(run.started_at).date()
        if by == "week":
            day -= timedelta(days=day.weekday())
        return day.isoformat()
    if by == "agent":
        return run.agent
    if by == "release":
        release = run.metadata.get("release")
        return None if release is None else str(release)
    return None


class PythonRateSource:
    """:class:`~agentlens.store.RateSource` for any :class:`~agentlens.store.TraceStore`, in
    plain Python: it reads every run of the window and its scores.

    Slow on big stores; it is the reference the SQL backends are tested against, the rate
    source of a store without rate queries of its own, and the baseline of
    ``benchmarks/bench_rate.py``.
    """

    def __init__(self, store: TraceStore) -> None:
        self.store = store

    def rate_counts(self, query: RateQuery, by: str | None = None) -> list[RateCounts]:
        """The counts of :meth:`RateSource.rate_counts`, from the runs and their scores."""
        return python_rate_counts(self.store, query, by)

    def stored_scorers(self) -> list[str]:
        """Every scorer with a stored score, from every run's scores."""
        names: set[str] = set()
        for run in self.store.list_runs(None):
            names.update(s.scorer for s in self.store.get_scores(run.id))
        return sorted(names)

    def stored_versions(
        self, scorer: str, start_us: int | None = None, end_us: int | None = None
    ) -> list[tuple[str, int]]:
        """The versions of ``scorer`` in the window, newest ``scored_at`` first."""
        where = RunFilter(start=from_epoch_us(start_us), end=from_epoch_us(end_us))
        latest: dict[str, datetime] = {}
        for run in self.store.list_runs(where):
            for s in self.store.get_scores(run.id):
                if s.scorer == scorer and (
                    s.version not in latest or s.scored_at > latest[s.version]
                ):
                    latest[s.version] = s.scored_at
        ordered = sorted(latest.items(), key=lambda item: item[1], reverse=True)
        return [(version, to_epoch_us(at) or 0) for version, at in ordered]


def python_rate_counts(
    store: TraceStore, query: RateQuery, by: str | None = None
) -> list[RateCounts]:
    """:meth:`RateSource.rate_counts` for any store, in plain Python (see
    :class:`PythonRateSource`)."""
    counts = _python_counts(store, query, by)
    if not query.flagged_ids:
        for c in counts:
            c.flagged_run_ids = []
    return counts


def _python_counts(store: TraceStore, query: RateQuery, by: str | None) -> list[RateCounts]:
    check_breakdown(by)
    start, end = from_epoch_us(query.start_us), from_epoch_us(query.end_us)
    selected = _selected(query)
    modes = list(query.modes) if query.modes is not None else None
    groups: dict[str | None, list[tuple[str, list[Any]]]] = {}
    per_version: dict[str, list[tuple[str, list[Any]]]] = {}
    all_runs: list[tuple[str, list[Any]]] = []
    where = RunFilter(start=start, end=end, agent=query.agent, project=query.project)
    for run in store.list_runs(where):
        scores = [s for s in store.get_scores(run.id) if selected(s, run.agent)]
        if by == "scorer_version":
            for s in scores:
                per_version.setdefault(f"{s.scorer}@{s.version}", []).append(
                    (run.id, [facts_of(s)])
                )
            all_runs.append((run.id, []))
            continue
        entry = (run.id, [facts_of(s) for s in scores])
        all_runs.append(entry)
        groups.setdefault(_key(run, by), []).append(entry)
    if by == "mode":
        return [_with_runs(tally(all_runs, [m], key=m), len(all_runs)) for m in mode_keys(modes)]
    if by == "scorer_version":
        return [
            _with_runs(tally(entries, modes, key=k), len(all_runs))
            for k, entries in sorted(per_version.items())
        ]
    if by is None:
        return [tally(all_runs, modes)]
    return sorted(
        (tally(entries, modes, key=k) for k, entries in groups.items()),
        key=lambda c: (c.key is None, c.key or ""),
    )


def _with_runs(counts: RateCounts, runs: int) -> RateCounts:
    # In the mode and scorer_version breakdowns every group shares the window's runs.
    counts.runs = runs
    return counts
