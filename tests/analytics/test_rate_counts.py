"""The rate over a real SQLite store: counting rules, modes, breakdowns, versions, and SQL = Python."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _rate_fixtures import NOW, score, trace
from agentlens.analytics import hallucination_rate, python_rate_counts, rate_breakdown
from agentlens.analytics._rate import RateSelection, resolve_selection
from agentlens.analytics._window import Window
from agentlens.config import AgentSettings, Settings
from agentlens.errors import ConfigError
from agentlens.model import FailureMode
from agentlens.store import open_store

CFG = Settings()


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    """A SQLite file store, or a PostgreSQL schema of its own (the same rate tests for both)."""
    drop = None
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'rates.db'}"
    else:
        from pg_support import new_pg_schema

        url, drop = new_pg_schema()
    s = open_store(url)
    yield s
    s.close()
    if drop is not None:
        drop()


def test_unverifiable_and_errors_are_never_passes(store) -> None:  # type: ignore[no-untyped-def]
    runs = [trace(f"r{i}", day=1) for i in range(6)]
    store.put_traces(runs)
    store.put_scores(
        [
            score(runs[0].id, "passed"),
            score(runs[1].id, "flagged", modes=(FailureMode.FABRICATED_GROUNDING,)),
            score(
                runs[2].id,
                "unverifiable",
                modes=(FailureMode.FABRICATED_GROUNDING,),
                unverifiable=True,
            ),
            score(runs[3].id, "error"),
            # error beats unverifiable, flagged beats both
            score(runs[4].id, "unverifiable", unverifiable=True),
            score(runs[4].id, "error", scorer="t_loops"),
            score(runs[5].id, "error"),
            score(runs[5].id, "flagged", scorer="t_loops", modes=(FailureMode.REPEATED_TOOL_CALL,)),
        ]
    )
    r = hallucination_rate(store=store, settings=CFG, since_hours=48, now=NOW)
    assert (r.runs, r.scored, r.flagged, r.passed) == (6, 3, 2, 1)
    assert (r.unverifiable, r.errors, r.unscored) == (1, 2, 0)
    assert r.rate == pytest.approx(2 / 3)
    assert r.ci_low is not None and r.ci_high is not None
    assert 0 <= r.ci_low <= r.rate <= r.ci_high <= 1
    assert r.flagged_run_ids == sorted([runs[1].id, runs[5].id])
    assert r.by_mode["fabricated_grounding"] == 1
    assert r.by_mode["repeated_tool_call"] == 1
    assert set(r.by_mode) == {str(m) for m in FailureMode}


def test_unscored_runs_are_counted_apart(store) -> None:  # type: ignore[no-untyped-def]
    runs = [trace("a", day=1), trace("b", day=1), trace("c", day=1)]
    store.put_traces(runs)
    store.put_scores([score(runs[0].id, "passed")])
    r = hallucination_rate(store=store, settings=CFG, since_hours=48, now=NOW)
    assert (r.runs, r.scored, r.unscored, r.rate) == (3, 1, 2, 0.0)


def test_an_empty_window_has_no_rate(store) -> None:  # type: ignore[no-untyped-def]
    store.put_traces([trace("old", day=30)])
    r = hallucination_rate(store=store, settings=CFG, since_hours=24, now=NOW)
    assert (r.runs, r.scored, r.rate, r.ci_low, r.ci_high) == (0, 0, None, None, None)


def test_window_is_half_open_on_start_time(store) -> None:  # type: ignore[no-untyped-def]
    inside = trace("in", day=1)
    at_end = trace("end", day=0)  # started exactly at NOW: outside [NOW - 2d, NOW)
    before = trace("before", day=3)
    store.put_traces([inside, at_end, before])
    store.put_scores(
        [score(t.id, "flagged", modes=(FailureMode.NO_PROGRESS,)) for t in (inside, at_end, before)]
    )
    r = hallucination_rate(store=store, settings=CFG, start=NOW - timedelta(days=2), end=NOW)
    assert r.flagged_run_ids == [inside.id]
    with pytest.raises(ConfigError, match="not both"):
        hallucination_rate(store=store, settings=CFG, since_hours=2, start=NOW)


def test_modes_select_what_counts_as_flagged(store) -> None:  # type: ignore[no-untyped-def]
    fab, loop, both, clean = (trace(x, day=1) for x in ("fab", "loop", "both", "clean"))
    store.put_traces([fab, loop, both, clean])
    store.put_scores(
        [
            score(fab.id, "flagged", modes=(FailureMode.FABRICATED_GROUNDING,)),
            score(loop.id, "flagged", modes=(FailureMode.REPEATED_TOOL_CALL,)),
            score(
                both.id,
                "flagged",
                modes=(FailureMode.FABRICATED_GROUNDING, FailureMode.PARAMETRIC_LEAKAGE),
            ),
            score(clean.id, "passed"),
        ]
    )
    r = hallucination_rate(
        store=store, settings=CFG, modes=["fabricated_grounding", "parametric-leakage"]
    )
    # The loop-only run passes as far as the grounding modes go.
    assert (r.scored, r.flagged, r.passed) == (4, 2, 2)
    assert r.flagged_run_ids == sorted([fab.id, both.id])
    assert r.by_mode == {"fabricated_grounding": 2, "parametric_leakage": 1}
    assert r.modes == ["fabricated_grounding", "parametric_leakage"]
    with pytest.raises(ConfigError, match="unknown failure mode 'made_up'"):
        hallucination_rate(store=store, settings=CFG, modes=["made_up"])


def test_only_current_versions_count(store) -> None:  # type: ignore[no-untyped-def]
    from _rate_fixtures import register

    run = trace("x", day=1)
    store.put_traces([run])
    store.put_scores(
        [
            score(run.id, "flagged", version="1", modes=(FailureMode.FABRICATED_GROUNDING,)),
            score(run.id, "passed", version="2"),
        ]
    )
    try:
        register(version="2")
        assert hallucination_rate(store=store, settings=CFG, scorers=["t_refs"]).flagged == 0
        register(version="1")
        assert hallucination_rate(store=store, settings=CFG, scorers=["t_refs"]).flagged == 1
        # A pinned version wins over the registered one.
        assert hallucination_rate(store=store, settings=CFG, scorers=["t_refs@2"]).flagged == 0
    finally:
        register(version="1")


def test_unregistered_scorer_counts_at_its_newest_stored_version(store) -> None:  # type: ignore[no-untyped-def]
    run = trace("x", day=1)
    store.put_traces([run])
    old = score(
        run.id, "flagged", scorer="elsewhere", version="a", modes=(FailureMode.NO_PROGRESS,)
    )
    new = score(run.id, "passed", scorer="elsewhere", version="b")
    new = new.model_copy(update={"scored_at": old.scored_at + timedelta(seconds=5)})
    store.put_scores([old, new])
    r = hallucination_rate(store=store, settings=CFG, scorers=["elsewhere"])
    assert (r.flagged, r.passed, r.scorers) == (0, 1, {"elsewhere": ["b"]})
    # Without scorers, every stored scorer counts.
    assert hallucination_rate(store=store, settings=CFG).scorers == {"elsewhere": ["b"]}


def test_agent_options_give_each_role_its_own_current_version(store) -> None:  # type: ignore[no-untyped-def]
    cfg = Settings(agents={"billing": AgentSettings(scorers={"t_prefix": {"prefix": "BILL"}})})
    support, billing = trace("OK", day=1, agent="support"), trace("BILL", day=1, agent="billing")
    store.put_traces([support, billing])
    from agentlens.eval import get_scorer, resolve_scorer

    billing_version = resolve_scorer(get_scorer("t_prefix"), "billing", cfg).stored_version
    assert billing_version != "1"
    store.put_scores(
        [
            score(support.id, "passed", scorer="t_prefix"),
            score(
                billing.id, "flagged", scorer="t_prefix", modes=(FailureMode.NO_PROGRESS,)
            ),  # stale: default version
            score(billing.id, "passed", scorer="t_prefix", version=billing_version),
        ]
    )
    r = hallucination_rate(store=store, settings=cfg, scorers=["t_prefix"])
    assert (r.scored, r.flagged) == (2, 0)
    assert r.scorers == {"t_prefix": ["1", billing_version]}
    billing_only = hallucination_rate(
        store=store, settings=cfg, scorers=["t_prefix"], agent="billing"
    )
    assert (billing_only.runs, billing_only.scored, billing_only.flagged) == (1, 1, 0)


def test_breakdowns(store) -> None:  # type: ignore[no-untyped-def]
    a = trace("a", day=1, release="v1")
    b = trace("b", day=1, hours=2, release="v2", agent="billing")
    c = trace("c", day=8, release="v1")
    unscored = trace("d", day=8)
    store.put_traces([a, b, c, unscored])
    store.put_scores(
        [
            score(a.id, "flagged", modes=(FailureMode.FABRICATED_GROUNDING,)),
            score(b.id, "passed"),
            score(c.id, "unverifiable", unverifiable=True),
            score(c.id, "flagged", scorer="t_loops", modes=(FailureMode.REPEATED_TOOL_CALL,)),
        ]
    )
    day = rate_breakdown("day", store=store, settings=CFG)
    assert [(g.key, g.runs, g.scored, g.flagged) for g in day.groups] == [
        ("2026-03-02", 2, 1, 1),
        ("2026-03-09", 2, 2, 1),
    ]
    week = rate_breakdown("week", store=store, settings=CFG)
    assert [g.key for g in week.groups] == ["2026-03-02", "2026-03-09"]  # Mondays
    agent = rate_breakdown("agent", store=store, settings=CFG)
    assert {g.key: (g.runs, g.flagged) for g in agent.groups} == {
        "billing": (1, 0),
        "support": (3, 2),
    }
    release = rate_breakdown("release", store=store, settings=CFG)
    assert [(g.key, g.runs) for g in release.groups] == [("v1", 2), ("v2", 1), (None, 1)]
    mode = rate_breakdown("mode", store=store, settings=CFG)
    by_key = {g.key: g for g in mode.groups}
    assert by_key["fabricated_grounding"].flagged_run_ids == [a.id]
    assert by_key["repeated_tool_call"].flagged_run_ids == [c.id]
    assert by_key["no_progress"].flagged == 0
    assert all(g.runs == 4 for g in mode.groups)
    # Run c was unverifiable for grounding but flagged for loops: it counts apart in one, not the other.
    assert (by_key["fabricated_grounding"].scored, by_key["fabricated_grounding"].unverifiable) == (
        2,
        1,
    )
    assert (by_key["repeated_tool_call"].scored, by_key["repeated_tool_call"].unverifiable) == (
        3,
        0,
    )
    versions = rate_breakdown("scorer_version", store=store, settings=CFG)
    assert [(g.key, g.scored, g.unverifiable) for g in versions.groups] == [
        ("t_loops@1", 1, 0),
        ("t_refs@1", 2, 1),
    ]
    data = day.to_json()
    assert next(iter(data)) == "groups" and next(iter(data["groups"][0])) == "key"
    with pytest.raises(ConfigError, match="unknown breakdown"):
        rate_breakdown("month", store=store, settings=CFG)


# ---------------------------------------------------------------- SQL against the Python reference

_VERDICTS = ["passed", "flagged", "unverifiable", "error"]
_MODES = [FailureMode.FABRICATED_GROUNDING, FailureMode.PARAMETRIC_LEAKAGE, FailureMode.NO_PROGRESS]

_run_spec = st.tuples(
    st.integers(0, 20),  # days ago
    st.sampled_from(["support", "billing", None]),
    st.sampled_from(["v1", "v2", None]),
    st.lists(
        st.tuples(
            st.sampled_from(["t_refs", "t_loops"]),
            st.sampled_from(["1", "2"]),
            st.sampled_from(_VERDICTS),
            st.sets(st.sampled_from(_MODES), max_size=2),
        ),
        max_size=3,
        unique_by=lambda s: (s[0], s[1]),
    ),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(_run_spec, max_size=25),
    st.sampled_from([None, ("fabricated_grounding",), ("no_progress", "parametric_leakage")]),
    st.sampled_from([None, "support"]),
    st.sampled_from([None, 7, 30]),
)
def test_sql_agrees_with_the_python_reference(specs, modes, agent, days) -> None:  # type: ignore[no-untyped-def]
    store = open_store("sqlite:///:memory:")
    try:
        traces = [
            trace(f"r{i}", day=d, agent=a, release=rel) for i, (d, a, rel, _) in enumerate(specs)
        ]
        store.put_traces(traces)
        store.put_scores(
            score(t.id, v, scorer=name, version=ver, modes=tuple(sorted(ms)))
            for t, (_, _, _, scores) in zip(traces, specs, strict=True)
            for name, ver, v, ms in scores
        )
        window = Window(
            None if days is None else NOW - timedelta(days=days), None if days is None else NOW
        )
        selectors, _ = resolve_selection(store, CFG, window, ["t_refs", "t_loops"])
        query = _query(window, agent, list(modes) if modes else None, selectors)
        for by in (None, "day", "week", "agent", "release", "mode"):
            assert store.rate_counts(query, by) == python_rate_counts(store, query, by), by
        from dataclasses import replace

        every = replace(query, any_version_of=("t_refs", "t_loops"))
        assert store.rate_counts(every, "scorer_version") == python_rate_counts(
            store, every, "scorer_version"
        )
    finally:
        store.close()


def _query(window, agent, modes, selectors):  # type: ignore[no-untyped-def]
    """The store query of a selection (as the rate functions build it)."""
    return RateSelection(window, agent, tuple(modes) if modes else None).query(selectors)
