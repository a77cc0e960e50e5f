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
from datetime import UTC, datetime, timedelta
from typing import Any

from agentlens.analytics._outcome import facts_of, mode_keys, tally
from agentlens.analytics._report import Breakdown, RateGroup, RateReport
from agentlens.analytics._window import Window, resolve_window
from agentlens.config import Settings
from agentlens.errors import ConfigError, ScorerError
from agentlens.model import FailureMode, Score
from agentlens.store import RunFilter, RunSummary
from agentlens.store._rates import (
    RateCounts,
    RateQuery,
    VersionSelector,
    rate_counts,
    stored_scorers,
    stored_versions,
)

__all__ = [
    "BREAKDOWNS",
    "hallucination_rate",
    "python_rate_counts",
    "rate_breakdown",
    "resolve_selection",
]

BREAKDOWNS = ("day", "week", "agent", "mode", "release", "scorer_version")
"""What :func:`rate_breakdown` can group by."""


def hallucination_rate(
    *,
    since_hours: float | None = None,
    start: datetime | str | None = None,
    end: datetime | str | None = None,
    agent: str | None = None,
    modes: Iterable[str | FailureMode] | None = None,
    scorers: Iterable[str] | None = None,
    store: Any = None,
    settings: Settings | None = None,
    now: datetime | None = None,
) -> RateReport:
    """The hallucination rate of the runs that started in a window.

    Args:
        since_hours: the window is the last this many hours (up to ``end``, default now).
        start: the window's start (inclusive; a datetime or an ISO string; naive is UTC).
        end: the window's end (exclusive); default: open (or now, with ``since_hours``).
        agent: count only this agent role's runs.
        modes: count only flags in these failure modes (default: any).
        scorers: scorer names (``"name@version"`` pins a version); default: every stored scorer.
        store: an open store; default: the configured one (opened and closed here).
        settings: scorer options per agent role (default: :func:`load_settings`).
        now: the current time (for tests).

    Returns:
        A :class:`RateReport` (``rate`` is ``None`` when nothing in the window was scored).

    Raises:
        ConfigError: conflicting window options or an unknown failure mode.
    """
    window = resolve_window(since_hours=since_hours, start=start, end=end, now=now)
    return _with_store(
        store, settings, lambda st, cfg: _rate(st, cfg, window, agent, modes, scorers)
    )


def rate_breakdown(
    by: str,
    *,
    since_hours: float | None = None,
    start: datetime | str | None = None,
    end: datetime | str | None = None,
    agent: str | None = None,
    modes: Iterable[str | FailureMode] | None = None,
    scorers: Iterable[str] | None = None,
    store: Any = None,
    settings: Settings | None = None,
    now: datetime | None = None,
) -> Breakdown:
    """The rate broken down by ``day``, ``week``, ``agent``, ``mode``, ``release`` or
    ``scorer_version``; the other arguments are those of :func:`hallucination_rate`.

    ``day`` keys are UTC dates; ``week`` keys are the Monday (UTC) that starts the ISO week;
    ``release`` is ``metadata.release``; ``mode`` gives each failure mode's rate as if only it
    were selected; ``scorer_version`` gives each stored version of each selected scorer apart
    (``name@version``), which is how an old and a new version compare on the same runs.

    Raises:
        ConfigError: an unknown breakdown, conflicting window options, an unknown mode.
    """
    if by not in BREAKDOWNS:
        raise ConfigError(f"unknown breakdown {by!r}; choose from {', '.join(BREAKDOWNS)}")
    window = resolve_window(since_hours=since_hours, start=start, end=end, now=now)

    def work(st: Any, cfg: Settings) -> Breakdown:
        mode_list = _modes(modes)
        selectors, versions = resolve_selection(st, cfg, window, scorers)
        query = _query(window, agent, mode_list, selectors)
        if by == "scorer_version":
            query = RateQuery(
                any_version_of=tuple(versions),
                start_us=query.start_us,
                end_us=query.end_us,
                agent=agent,
                modes=query.modes,
            )
        groups = _counts(st, query, by)
        return Breakdown(
            by=by,
            groups=[RateGroup.from_counts(c) for c in groups],
            start=window.start,
            end=window.end,
            agent=agent,
            modes=mode_list,
            scorers=versions,
        )

    return _with_store(store, settings, work)


def _with_store(store: Any, settings: Settings | None, work: Callable[[Any, Settings], Any]) -> Any:
    cfg = settings
    if cfg is None:
        from agentlens.config import load_settings

        cfg = load_settings()
    if store is not None:
        return work(store, cfg)
    from agentlens.store import open_store

    opened = open_store(cfg.db)
    try:
        return work(opened, cfg)
    finally:
        opened.close()


def _rate(
    store: Any,
    cfg: Settings,
    window: Window,
    agent: str | None,
    modes: Iterable[str | FailureMode] | None,
    scorers: Iterable[str] | None,
) -> RateReport:
    mode_list = _modes(modes)
    selectors, versions = resolve_selection(store, cfg, window, scorers)
    (counts,) = _counts(store, _query(window, agent, mode_list, selectors), None)
    return RateReport.from_counts(
        counts, start=window.start, end=window.end, agent=agent, modes=mode_list, scorers=versions
    )


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


def _us(value: datetime | None) -> int | None:
    if value is None:
        return None
    return (value - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def _query(
    window: Window, agent: str | None, modes: list[str] | None, selectors: list[VersionSelector]
) -> RateQuery:
    return RateQuery(
        selectors=tuple(selectors),
        start_us=_us(window.start),
        end_us=_us(window.end),
        agent=agent,
        modes=tuple(modes) if modes is not None else None,
    )


def resolve_selection(
    store: Any, settings: Settings, window: Window, scorers: Iterable[str] | None
) -> tuple[list[VersionSelector], dict[str, list[str]]]:
    """The scorer versions that count (see the module docs), and ``{scorer: [versions]}``."""
    from agentlens.eval import get_scorer, resolve_scorer

    names = list(scorers) if scorers is not None else _stored_scorers(store)
    selectors: list[VersionSelector] = []
    versions: dict[str, list[str]] = {}
    for item in names:
        name, _, pinned = item.partition("@")
        name = name.strip()
        if not name:
            raise ConfigError(f"bad scorer {item!r}: expected NAME or NAME@VERSION")
        if pinned:
            selectors.append(VersionSelector(name, pinned))
            versions.setdefault(name, []).append(pinned)
            continue
        try:
            base = get_scorer(name)
        except ScorerError:
            base = None
        if base is None:
            found = _stored_versions(store, name, window)
            if found:
                selectors.append(VersionSelector(name, found[0]))
                versions.setdefault(name, []).append(found[0])
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


def _is_sql(store: Any) -> bool:
    # SQL stores answer rate queries in the database; any other TraceStore is counted in Python.
    return callable(getattr(store, "read", None))


def _native(store: Any) -> bool:
    # A store with rate methods of its own (PostgreSQL) answers them itself.
    return callable(getattr(store, "rate_counts", None))


def _stored_scorers(store: Any) -> list[str]:
    if _native(store):
        return list(store.stored_scorers())
    if _is_sql(store):
        return stored_scorers(store)
    names: set[str] = set()
    for run in store.list_runs(None):
        names.update(s.scorer for s in store.get_scores(run.id))
    return sorted(names)


def _stored_versions(store: Any, name: str, window: Window) -> list[str]:
    if _native(store):
        return [v for v, _ in store.stored_versions(name, _us(window.start), _us(window.end))]
    if _is_sql(store):
        return [v for v, _ in stored_versions(store, name, _us(window.start), _us(window.end))]
    latest: dict[str, datetime] = {}
    for run in store.list_runs(RunFilter(start=window.start, end=window.end)):
        for s in store.get_scores(run.id):
            if s.scorer == name and (s.version not in latest or s.scored_at > latest[s.version]):
                latest[s.version] = s.scored_at
    return [v for v, _ in sorted(latest.items(), key=lambda item: item[1], reverse=True)]


def _counts(store: Any, query: RateQuery, by: str | None) -> list[RateCounts]:
    if _native(store):
        return list(store.rate_counts(query, by))
    if _is_sql(store):
        return rate_counts(store, query, by)
    return python_rate_counts(store, query, by)


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
        day = run.started_at.astimezone(UTC).date()
        if by == "week":
            day -= timedelta(days=day.weekday())
        return day.isoformat()
    if by == "agent":
        return run.agent
    if by == "release":
        release = run.metadata.get("release")
        return None if release is None else str(release)
    return None


def python_rate_counts(store: Any, query: RateQuery, by: str | None = None) -> list[RateCounts]:
    """:func:`agentlens.store._rates.rate_counts` for any store, in plain Python.

    It reads every run of the window and its scores, so it is slow on big stores; it is the
    reference the SQL is tested against, the fallback for stores without SQL, and the baseline
    of ``benchmarks/bench_rate.py``.
    """
    from agentlens.store._rates import _BY

    if by not in (None, *_BY):
        raise ValueError(f"unknown breakdown {by!r}; choose from {', '.join(_BY)}")
    start = (
        None
        if query.start_us is None
        else datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=query.start_us)
    )
    end = (
        None
        if query.end_us is None
        else datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=query.end_us)
    )
    selected = _selected(query)
    modes = list(query.modes) if query.modes is not None else None
    groups: dict[str | None, list[tuple[str, list[Any]]]] = {}
    per_version: dict[str, list[tuple[str, list[Any]]]] = {}
    all_runs: list[tuple[str, list[Any]]] = []
    for run in store.list_runs(RunFilter(start=start, end=end, agent=query.agent)):
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
