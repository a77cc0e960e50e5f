"""The rate rollup (schema migration 2) stays exact under every write path.

After random sequences of writes (runs stored, replaced with another agent, release or start
time, stored again unchanged, deleted; scores added, replaced with another verdict or other
failure modes), the trigger-maintained tables equal a rebuild from scratch, and the rates read
from them equal both the scan over ``scores`` and the plain-Python reference, for every
breakdown and for windows that start and end inside a day, on a day boundary, or are open.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _rate_fixtures import NOW, score
from _rate_scan import scan_rate_counts
from agentlens.analytics import hallucination_rate, python_rate_counts, rate_breakdown
from agentlens.analytics._rate import RateSelection, resolve_selection
from agentlens.analytics._window import Window
from agentlens.config import Settings
from agentlens.model import FailureMode, Score, Step, StepKind, Trace
from agentlens.store import RateQuery, open_store
from agentlens.store._sqlite_rates import rebuild_rate_rollup

CFG = Settings()
BREAKDOWNS = (None, "day", "week", "agent", "release", "mode")
MIDNIGHT = NOW.replace(hour=0)
WINDOWS = [
    Window(None, None),
    Window(NOW - timedelta(days=3, hours=5), NOW - timedelta(hours=7)),  # both edges inside a day
    Window(MIDNIGHT - timedelta(days=2), MIDNIGHT),  # whole days only
    Window(NOW - timedelta(hours=30), None),  # open end
    Window(None, NOW - timedelta(days=1, hours=2)),  # open start
    Window(NOW - timedelta(hours=9), NOW - timedelta(hours=2)),  # inside one day
]
PROJECTS = ("alpha", "beta")
"""A run's project, by its key's parity."""
MODES = [FailureMode.FABRICATED_GROUNDING, FailureMode.PARAMETRIC_LEAKAGE, FailureMode.NO_PROGRESS]


def run(key: int, hours: float | None, agent: str | None, release: str | None) -> Trace:
    """Run ``key`` (a stable id), started ``hours`` before NOW (``None``: no start time)."""
    started = None if hours is None else NOW - timedelta(hours=hours)
    return Trace(
        id=f"01RUN{key:04d}",
        project=PROJECTS[key % 2],
        agent=agent,
        input="q",
        output="a",
        started_at=started,
        metadata={} if release is None else {"release": release},
        steps=[Step(kind=StepKind.TOOL, name="t", input={}, output={"ok": True})],
    )


def _score(run_id: str, scorer: str, version: str, verdict: str, modes: frozenset[str]) -> Score:
    return score(
        run_id,
        verdict,
        scorer=scorer,
        version=version,
        modes=tuple(FailureMode(m) for m in sorted(modes)),
    )


# One write: ("run", key, hours, agent, release) stores or replaces a run (the same values again
# leave it as it is, scores kept); ("score", key, scorer, version, verdict, modes) stores or
# replaces a score of a stored run; ("delete", key) deletes a run.
_hours = st.one_of(st.none(), st.floats(0, 24 * 5, allow_nan=False).map(lambda h: round(h, 2)))
_op = st.one_of(
    st.tuples(
        st.just("run"),
        st.integers(0, 7),
        _hours,
        st.sampled_from(["support", "billing", None]),
        st.sampled_from(["v1", "v2", None]),
    ),
    st.tuples(
        st.just("score"),
        st.integers(0, 7),
        st.sampled_from(["t_refs", "t_loops"]),
        st.sampled_from(["1", "2"]),
        st.sampled_from(["passed", "flagged", "unverifiable", "error"]),
        st.frozensets(st.sampled_from([str(m) for m in MODES]), max_size=2),
    ),
    st.tuples(st.just("delete"), st.integers(0, 7)),
)


def apply(store: Any, ops: list[tuple[Any, ...]]) -> None:
    stored: set[int] = set()
    for op in ops:
        if op[0] == "run":
            _, key, hours, agent, release = op
            store.put_traces([run(key, hours, agent, release)])
            stored.add(key)
        elif op[0] == "score":
            _, key, scorer, version, verdict, modes = op
            if key in stored:
                store.put_scores([_score(f"01RUN{key:04d}", scorer, version, verdict, modes)])
        else:
            store.delete_runs([f"01RUN{op[1]:04d}"])
            stored.discard(op[1])


def rate_tables(store: Any) -> tuple[list[Any], list[Any]]:
    """``rate_runs`` and the non-empty ``rate_rollup`` rows, with signatures as text."""

    def read(conn: sqlite3.Connection) -> tuple[list[Any], list[Any]]:
        runs = conn.execute(
            "SELECT r.run_id, r.started_at, r.day, r.agent, r.release, g.sig, r.project"
            " FROM rate_runs r JOIN rate_sigs g ON g.id = r.sig ORDER BY 1"
        ).fetchall()
        rollup = conn.execute(
            "SELECT r.day, r.agent, r.release, g.sig, r.project, r.n FROM rate_rollup r"
            " JOIN rate_sigs g ON g.id = r.sig WHERE r.n > 0 ORDER BY 1, 2, 3, 4, 5"
        ).fetchall()
        return runs, rollup

    return store.read(read)


def assert_rates_agree(
    store: Any,
    windows: list[Window] = WINDOWS,
    modes_choices: tuple[list[str] | None, ...] = (None, ["fabricated_grounding"]),
    agents: tuple[str | None, ...] = (None, "support"),
    *,
    scorers: list[str] | None = None,
    python: bool = True,
    projects: tuple[str | None, ...] = (None, "alpha"),
) -> None:
    """The rollup's counts equal the scan's and (``python``) the plain-Python reference's,
    over the whole store and one project's runs."""
    for window in windows:
        selectors, _ = resolve_selection(store, CFG, window, scorers or ["t_refs", "t_loops"])
        for modes in modes_choices:
            for agent, project in [(a, p) for a in agents for p in projects]:
                query = replace(_query(window, agent, modes, selectors), project=project)
                every = replace(query, any_version_of=("t_refs", "t_loops"))
                for q, by in [(query, by) for by in BREAKDOWNS] + [(every, "scorer_version")]:
                    expected = scan_rate_counts(store, q, by)
                    where = (window, modes, agent, project, by)
                    assert store.rate_counts(q, by) == expected, where
                    if python:
                        assert python_rate_counts(store, q, by) == expected, where


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(_op, max_size=40),
    st.sampled_from(WINDOWS),
    st.sampled_from([None, ["fabricated_grounding"], ["no_progress", "parametric_leakage"]]),
    st.sampled_from([None, "support"]),
)
def test_the_rollup_stays_exact_under_random_writes(
    ops: list[tuple[Any, ...]], window: Window, modes: list[str] | None, agent: str | None
) -> None:
    store: Any = open_store("sqlite:///:memory:")
    try:
        apply(store, ops)
        kept = rate_tables(store)
        store._write(rebuild_rate_rollup)
        assert rate_tables(store) == kept
        assert_rates_agree(store, [window], (modes,), (agent,))
    finally:
        store.close()


def test_replacing_and_deleting_move_the_counts(tmp_path: Path) -> None:
    store: Any = open_store(f"sqlite:///{tmp_path / 'r.db'}")
    try:
        a, b = run(1, 2, "support", "v1"), run(2, 30, "support", "v1")
        store.put_traces([a, b])
        store.put_scores([_score(a.id, "t_refs", "1", "flagged", frozenset({"no_progress"}))])
        store.put_scores([_score(b.id, "t_refs", "1", "passed", frozenset())])
        first = hallucination_rate(store=store, settings=CFG, scorers=["t_refs"])
        assert (first.runs, first.flagged, first.passed) == (2, 1, 1)
        assert first.by_mode["no_progress"] == 1 and first.flagged_run_ids == [a.id]
        # re-scored: the same (run, scorer, version) now passes
        store.put_scores([_score(a.id, "t_refs", "1", "passed", frozenset())])
        again = hallucination_rate(store=store, settings=CFG, scorers=["t_refs"])
        assert (again.flagged, again.passed, again.flagged_run_ids) == (0, 2, [])
        # the run replaced by a different one (another agent, a day earlier): its scores go
        store.put_traces([run(1, 26, "billing", "v2")])
        replaced = rate_breakdown("agent", store=store, settings=CFG, scorers=["t_refs"])
        assert {g.key: (g.runs, g.scored) for g in replaced.groups} == {
            "billing": (1, 0),
            "support": (1, 1),
        }
        store.delete_runs([b.id])
        gone = hallucination_rate(store=store, settings=CFG, scorers=["t_refs"])
        assert (gone.runs, gone.scored) == (1, 0)
        assert rate_tables(store) == ([], [])
    finally:
        store.close()


def test_migration_2_fills_the_rollup_of_an_existing_store(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store: Any = open_store(f"sqlite:///{path}")
    try:
        apply(
            store,
            [
                ("run", 1, 3.5, "support", "v1"),
                ("run", 2, 40.0, None, None),
                ("run", 3, None, "billing", "v2"),
                ("run", 4, 80.25, "billing", None),
                ("score", 1, "t_refs", "1", "flagged", frozenset({"fabricated_grounding"})),
                ("score", 1, "t_loops", "1", "unverifiable", frozenset()),
                ("score", 2, "t_refs", "1", "error", frozenset()),
                ("score", 3, "t_refs", "1", "flagged", frozenset({"no_progress"})),
                ("score", 4, "t_refs", "2", "passed", frozenset()),
            ],
        )
        expected = rate_tables(store)
    finally:
        store.close()
    # Make it a schema-1 store again, as an older agentlens left it.
    conn = sqlite3.connect(path, isolation_level=None)
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    schema_1 = {"runs", "scores", "score_modes", "_agentlens_migrations", "sqlite_sequence"}
    tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    for (table,) in tables:  # migration 2's tables, and those of every later migration
        if table not in schema_1:
            conn.execute(f"DROP TABLE {table}")
    conn.execute("DELETE FROM _agentlens_migrations WHERE version >= 2")
    conn.close()
    store = open_store(f"sqlite:///{path}")
    try:
        assert store.schema_version >= 2
        assert rate_tables(store) == expected
        assert_rates_agree(store)
    finally:
        store.close()


def test_days_before_1970_and_odd_names_round_trip() -> None:
    store: Any = open_store("sqlite:///:memory:")
    try:
        old = Trace(
            id="01OLD",
            agent="a;b.c",
            input="q",
            output="a",
            started_at=datetime(1969, 12, 31, 23, 30, tzinfo=UTC),
            metadata={"release": "r.1;x"},
        )
        store.put_traces([old])
        store.put_scores(
            [_score(old.id, "odd.name;x", "1.0", "flagged", frozenset({"no_progress"}))]
        )
        query = RateQuery(
            any_version_of=("odd.name;x",),
            start_us=None,
            end_us=None,
        )
        for by in (*BREAKDOWNS, "scorer_version"):
            assert store.rate_counts(query, by) == python_rate_counts(store, query, by), by
        (day,) = store.rate_counts(query, "day")
        assert day.key == "1969-12-31" and day.flagged_run_ids == [old.id]
    finally:
        store.close()


@pytest.mark.parametrize("verdict", ["flagged", "passed"])
def test_insert_or_replace_and_manual_updates_keep_it_exact(verdict: str) -> None:
    store: Any = open_store("sqlite:///:memory:")
    try:
        t = run(5, 10, "support", "v1")
        store.put_traces([t])
        store.put_scores([_score(t.id, "t_refs", "1", "error", frozenset())])

        def edit(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE scores SET verdict = ? WHERE run_id = ?", (verdict, t.id))
            conn.execute(
                "INSERT OR REPLACE INTO score_modes VALUES (?, 't_refs', '1', 'no_progress', 1)",
                (t.id,),
            )

        store._write(edit)
        kept = rate_tables(store)
        store._write(rebuild_rate_rollup)
        assert rate_tables(store) == kept
        # The JSON documents still say "error": only the SQL columns changed, so the rollup is
        # held to the scan over those columns.
        assert_rates_agree(store, scorers=["t_refs"], python=False)
    finally:
        store.close()


def _query(window, agent, modes, selectors):  # type: ignore[no-untyped-def]
    """The store query of a selection (as the rate functions build it)."""
    return RateSelection(window, agent, tuple(modes) if modes else None).query(selectors)


_score_op = st.tuples(
    st.integers(0, 7),
    st.sampled_from(["t_refs", "t_loops"]),
    st.sampled_from(["1", "2"]),
    st.sampled_from(["passed", "flagged", "unverifiable", "error"]),
    st.frozensets(st.sampled_from([str(m) for m in MODES]), max_size=2),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(_hours, st.sampled_from(["support", None])), min_size=8, max_size=8),
    st.lists(st.lists(_score_op, max_size=12), max_size=5),
)
def test_put_scores_refreshes_the_rollup_in_bulk_exactly(
    runs: list[tuple[float | None, str | None]], batches: list[list[tuple[Any, ...]]]
) -> None:
    """Batches of scores of several runs (a run scored twice in one batch, scores replaced by
    later batches) leave the tables ``put_scores`` refreshes in bulk (migration 7) equal to a
    rebuild; a write outside ``put_scores`` still fires the triggers."""
    store: Any = open_store("sqlite:///:memory:")
    try:
        store.put_traces([run(k, hours, agent, "v1") for k, (hours, agent) in enumerate(runs)])
        for batch in batches:
            store.put_scores([_score(f"01RUN{k:04d}", *rest) for k, *rest in batch])
            kept = rate_tables(store)
            store._write(rebuild_rate_rollup)
            assert rate_tables(store) == kept
        assert store.read(lambda c: c.execute("SELECT count(*) FROM rate_bulk").fetchone()) == (0,)
        assert_rates_agree(store, WINDOWS[:2], (None,), (None,))
        store._write(lambda c: c.execute("UPDATE scores SET verdict = 'flagged'"))  # by hand
        kept = rate_tables(store)
        store._write(rebuild_rate_rollup)
        assert rate_tables(store) == kept
    finally:
        store.close()


def test_put_scores_changes_no_schema_after_its_first_batch(tmp_path: Path) -> None:
    """The bulk refresh's temporary tables are made once per connection and emptied after each
    batch: a change to any schema (the temporary one included) would expire every statement
    the writer has prepared, and each batch would compile them all again."""
    store: Any = open_store(f"sqlite:///{tmp_path / 'r.db'}")

    def versions(conn: sqlite3.Connection) -> tuple[int, int]:
        main = conn.execute("PRAGMA main.schema_version").fetchone()[0]
        return main, conn.execute("PRAGMA temp.schema_version").fetchone()[0]

    try:
        store.put_traces([run(k, 2.0 * k, "support", "v1") for k in range(4)])
        seen = []
        for verdict in ("passed", "flagged", "passed"):
            store.put_scores(
                [_score(f"01RUN{k:04d}", "t_refs", "1", verdict, frozenset()) for k in range(4)]
            )
            seen.append(store._write(versions))
        assert seen[1] == seen[0] and seen[2] == seen[0]
        left = "SELECT (SELECT count(*) FROM _rate_new) + (SELECT count(*) FROM _rate_batch)"
        assert store._write(lambda c: c.execute(left).fetchone()[0]) == 0
        assert_rates_agree(store, WINDOWS[:2], (None,), (None,))
    finally:
        store.close()


def test_a_failed_put_scores_keeps_the_rollup_and_its_triggers(tmp_path: Path) -> None:
    store: Any = open_store(f"sqlite:///{tmp_path / 'r.db'}")
    try:
        store.put_traces([run(1, 2, "support", "v1")])
        store.put_scores([_score("01RUN0001", "t_refs", "1", "passed", frozenset())])
        kept = rate_tables(store)
        with pytest.raises(Exception, match="01RUN0009"):
            store.put_scores(
                [
                    _score("01RUN0001", "t_refs", "1", "flagged", frozenset()),
                    _score("01RUN0009", "t_refs", "1", "flagged", frozenset()),
                ]
            )
        assert rate_tables(store) == kept
        store._write(lambda c: c.execute("DELETE FROM scores"))
        assert rate_tables(store) == ([], [])
    finally:
        store.close()


@pytest.mark.parametrize("by", [None, "day", "agent", "mode"])
def test_counts_without_the_flagged_ids(by: str | None) -> None:
    from agentlens.analytics import hallucination_rate, rate_breakdown
    from agentlens.analytics._rate import PythonRateSource
    from agentlens.store import open_store

    store = open_store("sqlite:///:memory:")
    try:
        store.put_traces([run(k, k * 7.0, ("support", "billing")[k % 2], "v1") for k in range(6)])
        verdicts = ["flagged", "passed", "flagged", "unverifiable", "flagged", "passed"]
        modes = frozenset({"fabricated_grounding"})
        store.put_scores(
            [_score(f"01RUN{k:04d}", "t_refs", "1", v, modes) for k, v in enumerate(verdicts)]
        )
        for source in (store, PythonRateSource(store)):
            options: dict[str, Any] = {"since_hours": 24 * 30, "store": source, "now": NOW}
            if by is None:
                full = hallucination_rate(**options)
                bare = hallucination_rate(**options, flagged_ids=False)
                pairs = [(full, bare)]
            else:
                pairs = list(
                    zip(
                        rate_breakdown(by, **options).groups,
                        rate_breakdown(by, **options, flagged_ids=False).groups,
                        strict=True,
                    )
                )
            assert any(full.flagged_run_ids for full, _ in pairs)
            for full, bare in pairs:
                assert bare.flagged_run_ids == []
                assert bare.model_dump(exclude={"flagged_run_ids"}) == full.model_dump(
                    exclude={"flagged_run_ids"}
                )
    finally:
        store.close()
