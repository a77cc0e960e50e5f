"""PostgreSQL's rates equal SQLite's: the same random writes on both stores, every breakdown,
every kind of window; the trigger-kept rollups equal a rebuild; compaction changes nothing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_rollup import BREAKDOWNS, CFG, WINDOWS, _op, _query, _score, apply

from agentlens.analytics import hallucination_rate, python_rate_counts
from agentlens.analytics._rate import resolve_selection
from agentlens.analytics._window import Window
from agentlens.model import Trace
from agentlens.store import RateSource, open_store
from agentlens.store._rates import RateQuery


@pytest.fixture
def pg(pg_url: str) -> Iterator[Any]:
    store = open_store(pg_url)
    try:
        yield store
    finally:
        store.close()


def _nulls_first(row: tuple[Any, ...]) -> list[tuple[bool, Any]]:
    """A rollup row's key as it sorts with its NULLs (no agent, no release) first: a NULL and a
    text in the same column do not compare in Python."""
    return [(value is not None, value) for value in row[:5]]


def pg_tables(store: Any) -> tuple[list[Any], list[Any], list[Any]]:
    """``rate_runs``, and the rollups summed per key (what a query reads), each key of
    ``rate_rollup`` with the run ids its rows hold (added less removed), which must be the ids of
    its runs in ``rate_runs`` when their signature holds a flagged verdict."""

    def read(conn: Any) -> tuple[list[Any], list[Any], list[Any]]:
        runs = conn.execute(
            "SELECT r.run_id, r.started_at, r.hour, r.agent, r.release, r.project, r.flags, g.sig"
            " FROM rate_runs r JOIN rate_sigs g ON g.id = r.sig ORDER BY 1"
        ).fetchall()
        rows = conn.execute(
            "SELECT r.hour, r.agent, r.release, r.project, g.sig, r.n, r.run_ids"
            " FROM rate_rollup r JOIN rate_sigs g ON g.id = r.sig"
        ).fetchall()
        keyed: dict[tuple[Any, ...], list[Any]] = {}
        for *key, n, ids in rows:
            total, held = keyed.setdefault(tuple(key), [0, Counter()])
            keyed[tuple(key)][0] = total + n
            for i in ids or []:
                held[i] += 1 if n > 0 else -1
        rollup = sorted(
            (
                (*key, total, sorted(i for i, k in held.items() if k > 0))
                for key, (total, held) in keyed.items()
                if total
            ),
            key=_nulls_first,
        )
        expected_ids: dict[tuple[Any, ...], list[str]] = {}
        for run_id, _, hour, agent, release, project, flags, sig in runs:
            if flags:
                expected_ids.setdefault((hour, agent, release, project, sig), []).append(run_id)
        assert {tuple(k[:5]): k[6] for k in rollup if k[6]} == {
            k: sorted(v) for k, v in expected_ids.items()
        }
        run_rollup = conn.execute(
            "SELECT hour, agent, release, project, sum(n) FROM run_rollup GROUP BY 1, 2, 3, 4"
            " HAVING sum(n) <> 0 ORDER BY 1, 2, 3, 4"
        ).fetchall()
        return runs, rollup, run_rollup

    return store.read(read)  # type: ignore[no-any-return]


def assert_same_rates(pg: Any, lite: Any, windows: list[Window], *, light: bool = False) -> None:
    """Every query and breakdown gives the same counts on both (``light``: a few of them)."""
    for window in windows:
        selectors, _ = resolve_selection(lite, CFG, window, ["t_refs", "t_loops"])
        assert resolve_selection(pg, CFG, window, ["t_refs", "t_loops"])[0] == selectors
        for modes in (None,) if light else (None, ["fabricated_grounding"]):
            for agent, project in [(a, p) for a in (None, "support") for p in (None, "alpha")]:
                query = replace(_query(window, agent, modes, selectors), project=project)
                every = replace(query, any_version_of=("t_refs", "t_loops"))
                pairs = [(query, by) for by in BREAKDOWNS] + [(every, "scorer_version")]
                for q, by in pairs[:2] if light else pairs:
                    expected = lite.rate_counts(q, by)
                    assert pg.rate_counts(q, by) == expected, (window, modes, agent, project, by)


def _clear(store: Any) -> None:
    store.delete_runs([r.id for r in store.list_runs()])


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.lists(_op, max_size=30))
def test_the_same_writes_give_the_same_rates(pg: Any, ops: list[tuple[Any, ...]]) -> None:
    _clear(pg)
    lite: Any = open_store("sqlite:///:memory:")
    try:
        apply(pg, ops)
        apply(lite, ops)
        assert sorted(r.id for r in pg.list_runs()) == sorted(r.id for r in lite.list_runs())
        kept = pg_tables(pg)
        # before compaction (the flagged ids read from delta rows), then after (merged rows)
        assert_same_rates(pg, lite, WINDOWS, light=True)
        assert pg.compact_rollups() >= 0
        assert pg_tables(pg) == kept
        assert_same_rates(pg, lite, WINDOWS)
        pg.rebuild_rate_rollup()
        assert pg_tables(pg) == kept
    finally:
        lite.close()


def test_the_rate_through_the_analytics_api(pg: Any) -> None:
    from test_rollup import run

    assert isinstance(pg, RateSource)  # the analytics count in the database, not in Python

    a, b, c = run(1, 2, "support", "v1"), run(2, 30, "support", "v1"), run(3, None, None, None)
    pg.put_traces([a, b, c])
    pg.put_scores([_score(a.id, "t_refs", "1", "flagged", frozenset({"no_progress"}))])
    pg.put_scores([_score(b.id, "t_refs", "1", "passed", frozenset())])
    r = hallucination_rate(store=pg, settings=CFG, scorers=["t_refs"])
    assert (r.runs, r.flagged, r.passed, r.flagged_run_ids) == (3, 1, 1, [a.id])
    assert r.by_mode["no_progress"] == 1
    pg.put_traces([run(1, 26, "billing", "v2")])  # replaced: its score goes
    again = hallucination_rate(store=pg, settings=CFG, scorers=["t_refs"])
    assert (again.runs, again.flagged, again.passed) == (3, 0, 1)
    pg.delete_runs([a.id, b.id, c.id])
    assert pg_tables(pg) == ([], [], [])


def test_times_before_1970_nul_and_odd_names(pg: Any) -> None:
    old = Trace(
        id="01\x00OLD",
        agent="a;b\x00c",
        input="q",
        output="a",
        started_at=datetime(1969, 12, 31, 23, 30, tzinfo=UTC),
        metadata={"release": "\x01r.1;x"},
    )
    pg.put_traces([old])
    pg.put_scores([_score(old.id, "odd.name;x", "1.0", "flagged", frozenset({"no_progress"}))])
    query = RateQuery(any_version_of=("odd.name;x",))
    for by in (*BREAKDOWNS, "scorer_version"):
        assert pg.rate_counts(query, by) == python_rate_counts(pg, query, by), by
    (day,) = pg.rate_counts(query, "day")
    assert day.key == "1969-12-31" and day.flagged_run_ids == [old.id]
    (group,) = pg.rate_counts(query, "release")
    assert group.key == "\x01r.1;x"
    assert pg.stored_scorers() == ["odd.name;x"]
    assert [v for v, _ in pg.stored_versions("odd.name;x")] == ["1.0"]
    assert pg.months()[0] == "1969-12"


def test_dropping_old_months_keeps_the_rates_exact(pg: Any) -> None:
    from datetime import timedelta

    old = [
        Trace(
            id=f"old{i}",
            agent="support",
            started_at=datetime(2025, 1, 3, tzinfo=UTC) + timedelta(days=i),
        )
        for i in range(3)
    ]
    new = [
        Trace(id=f"new{i}", agent="support", started_at=datetime(2026, 2, 3, tzinfo=UTC))
        for i in range(2)
    ]
    pg.put_traces([*old, *new])
    pg.put_scores(
        [_score(t.id, "t_refs", "1", "flagged", frozenset({"no_progress"})) for t in old + new[:1]]
    )
    assert "2025-01" in pg.months()
    assert pg.drop_months_before(datetime(2026, 1, 1, tzinfo=UTC)) == ["2025-01"]
    assert "2025-01" not in pg.months()
    assert sorted(r.id for r in pg.list_runs()) == ["new0", "new1"]
    r = hallucination_rate(store=pg, settings=CFG, scorers=["t_refs"])
    assert (r.runs, r.flagged, r.flagged_run_ids) == (2, 1, ["new0"])
    kept = pg_tables(pg)
    pg.rebuild_rate_rollup()
    assert pg_tables(pg) == kept
    pg.put_traces(old[:1])  # the id is free again
    assert pg.count_runs() == 3


def test_counts_without_the_flagged_ids(pg: Any) -> None:
    from test_rollup import run

    from agentlens.analytics import rate_breakdown

    a, b = run(1, 2, "support", "v1"), run(2, 30, "billing", "v1")
    pg.put_traces([a, b])
    pg.put_scores([_score(a.id, "t_refs", "1", "flagged", frozenset({"no_progress"}))])
    pg.put_scores([_score(b.id, "t_refs", "1", "flagged", frozenset({"no_progress"}))])
    for by in ("day", "agent"):
        full = rate_breakdown(by, store=pg, settings=CFG, scorers=["t_refs"]).groups
        bare = rate_breakdown(by, store=pg, settings=CFG, scorers=["t_refs"], flagged_ids=False)
        assert sorted(i for g in full for i in g.flagged_run_ids) == [a.id, b.id]
        assert [g.flagged_run_ids for g in bare.groups] == [[] for _ in bare.groups]
        assert [g.model_dump(exclude={"flagged_run_ids"}) for g in bare.groups] == [
            g.model_dump(exclude={"flagged_run_ids"}) for g in full
        ]


def test_migration_6_rebuilds_the_rollups_of_a_filled_store(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store written at schema 5 (rollups without project or ids) reads the same rates once
    migration 6 has rebuilt them, per project too."""
    from test_rollup import run

    from agentlens.store import _pg_migrations

    assert _pg_migrations.PG_MIGRATIONS[5].version == 6
    monkeypatch.setattr(_pg_migrations, "PG_MIGRATIONS", _pg_migrations.PG_MIGRATIONS[:5])
    old: Any = open_store(pg_url)
    traces = [run(k, 2 + 7 * k, ["support", "billing"][k % 2], "v1") for k in range(8)]
    try:
        assert old.schema_version == 5
        old.put_traces(traces)
        flagged = frozenset({"no_progress"})
        old.put_scores(
            [_score(t.id, "t_refs", "1", "passed", frozenset()) if k % 3 == 0
             else _score(t.id, "t_refs", "1", "flagged", flagged) for k, t in enumerate(traces)]
        )  # fmt: skip
    finally:
        old.close()
    monkeypatch.undo()
    new: Any = open_store(pg_url)
    lite: Any = open_store("sqlite:///:memory:")
    try:
        assert new.schema_version == _pg_migrations.latest_pg_version()
        lite.put_traces(traces)
        lite.put_scores([s for t in traces for s in new.get_scores(t.id)])
        kept = pg_tables(new)
        assert kept[1] and any(row[6] for row in kept[1])  # flagged ids in the rollup
        assert_same_rates(new, lite, WINDOWS)
        new.rebuild_rate_rollup()
        assert pg_tables(new) == kept
    finally:
        lite.close()
        new.close()


def test_the_flagged_ids_of_whole_days_stay_exact_today_and_before(pg: Any) -> None:
    """``rate_day_ids`` (migration 7): the days that are over are built again when compaction
    merges their rows, today's stays stale (read by the hour); every way of reading gives the
    counts and ids of a count in Python, before and after compaction, after more writes to both
    days, and after a rebuild."""
    from datetime import timedelta

    from agentlens.analytics._rate import PythonRateSource

    midnight = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    flagged = frozenset({"no_progress"})

    def put(ids: range, verdict: str) -> None:
        runs = [
            Trace(id=f"d{i:03d}", agent=("support", "billing")[i % 2], input="q", output="a",
                  started_at=midnight - timedelta(hours=30) + timedelta(minutes=37 * i))
            for i in ids
        ]  # fmt: skip
        pg.put_traces(runs)
        pg.put_scores([_score(t.id, "t_refs", "1", verdict, flagged if verdict == "flagged"
                              else frozenset()) for t in runs])  # fmt: skip

    def check() -> None:
        for start, end in [
            (midnight - timedelta(days=2), midnight + timedelta(days=1)),  # whole days
            (midnight - timedelta(hours=29, minutes=10), midnight + timedelta(hours=5)),
        ]:
            for by in (None, "day", "agent"):
                query = RateQuery(any_version_of=("t_refs",), start_us=int(start.timestamp() * 1e6),
                                  end_us=int(end.timestamp() * 1e6))  # fmt: skip
                assert pg.rate_counts(query, by) == PythonRateSource(pg).rate_counts(query, by)

    put(range(0, 60), "flagged")  # 30 hours before midnight to 7 hours after
    check()
    pg.compact_rollups()
    days = pg.read(lambda c: c.execute("SELECT DISTINCT day FROM rate_day_ids").fetchall())
    stale = pg.read(lambda c: c.execute("SELECT day FROM rate_day_stale").fetchall())
    today = int(midnight.timestamp()) // 86400
    assert (today - 1,) in days and (today,) in stale and (today - 1,) not in stale
    check()
    put(range(10, 50, 3), "passed")  # replaced: ids leave yesterday's and today's rows
    put(range(60, 70), "flagged")
    check()
    pg.compact_rollups()
    check()
    pg.delete_runs([f"d{i:03d}" for i in range(0, 60, 7)])
    check()
    pg.rebuild_rate_rollup()
    check()
    pg.compact_rollups()
    check()
