"""Batch scoring of stored runs: incremental, re-scoring on a new version, resume, workers."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from _rate_fixtures import NOW, register, trace
from agentlens.config import AgentSettings, Settings
from agentlens.errors import ConfigError, ScorerError
from agentlens.eval import ScoreResult, define_scorer
from agentlens.eval._runner import ScoringInterrupted, score_runs
from agentlens.model import Score
from agentlens.store import RunFilter, open_store

CFG = Settings()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[object]:
    s = open_store(f"sqlite:///{tmp_path / 'runner.db'}")
    outputs = ["fine", "FAKE ref", "TRUNC", "BOOM", "LEAK"] * 6
    s.put_traces(trace(o, day=i % 9, loop=i % 7 == 0) for i, o in enumerate(outputs))
    yield s
    s.close()


def _all_scores(store) -> dict[tuple[str, str, str], dict]:  # type: ignore[no-untyped-def]
    found = {}
    for run in store.list_runs():
        for s in store.get_scores(run.id):
            found[(s.run_id, s.scorer, s.version)] = s.model_dump(
                mode="json", exclude={"scored_at"}
            )
    return found


def test_scores_everything_then_nothing_new(store) -> None:  # type: ignore[no-untyped-def]
    seen: list[tuple[int, int]] = []
    written: list[Score] = []
    first = score_runs(
        store,
        ["t_refs", "t_loops"],
        settings=CFG,
        progress=lambda d, t: seen.append((d, t)),
        on_scores=written.extend,
        chunk_size=7,
    )
    assert (first.selected, first.examined, first.scored_runs, first.scores_written) == (
        30,
        30,
        30,
        60,
    )
    # t_refs: 6 fine, 12 FAKE/LEAK, 6 TRUNC, 6 BOOM; t_loops: runs 0, 7, 14, 21, 28 loop.
    assert first.verdicts == {"passed": 6 + 25, "flagged": 12 + 5, "unverifiable": 6, "error": 6}
    assert len(written) == 60
    assert seen[-1] == (30, 30) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    second = score_runs(store, ["t_refs", "t_loops"], settings=CFG, chunk_size=7)
    assert (second.scores_written, second.skipped, second.examined) == (0, 30, 30)


def test_verdicts_are_those_of_the_scorers(store) -> None:  # type: ignore[no-untyped-def]
    score_runs(store, ["t_refs"], settings=CFG)
    verdicts = {}
    for run in store.list_runs():
        (s,) = store.get_scores(run.id)
        verdicts[str(store.get_trace(run.id).output)] = str(s.verdict)
    assert verdicts == {
        "fine": "passed",
        "FAKE ref": "flagged",
        "TRUNC": "unverifiable",
        "BOOM": "error",  # a scorer that raises gives an error result; the batch goes on
        "LEAK": "flagged",
    }


def test_a_new_scorer_version_rescores_history(store) -> None:  # type: ignore[no-untyped-def]
    score_runs(store, ["t_refs"], settings=CFG)
    try:
        register(version="2")
        again = score_runs(store, ["t_refs"], settings=CFG)
        assert again.scores_written == 30
        assert all(len(store.get_scores(r.id)) == 2 for r in store.list_runs())  # old results kept
        assert score_runs(store, ["t_refs"], settings=CFG).scores_written == 0
    finally:
        register(version="1")


def test_changed_options_for_one_role_rescore_only_that_role(store) -> None:  # type: ignore[no-untyped-def]
    extra = trace("BILL", day=1, agent="billing")
    store.put_traces([extra])
    score_runs(store, ["t_prefix"], settings=CFG)
    cfg = Settings(agents={"billing": AgentSettings(scorers={"t_prefix": {"prefix": "BILL"}})})
    again = score_runs(store, ["t_prefix"], settings=cfg)
    assert (again.scored_runs, again.scores_written) == (1, 1)
    newest = max(store.get_scores(extra.id), key=lambda s: s.scored_at)
    assert newest.passed and newest.version.startswith("1+")


def test_rescore_forces(store) -> None:  # type: ignore[no-untyped-def]
    score_runs(store, ["t_loops"], settings=CFG)
    forced = score_runs(store, ["t_loops"], settings=CFG, rescore=True)
    assert forced.scores_written == 30
    assert all(len(store.get_scores(r.id)) == 1 for r in store.list_runs())  # replaced, not added


def test_where_selects_runs(store) -> None:  # type: ignore[no-untyped-def]
    window = RunFilter(start=NOW - timedelta(days=3), end=NOW)
    summary = score_runs(store, ["t_loops"], window, settings=CFG)
    assert summary.selected == store.count_runs(window) == summary.scored_runs
    assert 0 < summary.selected < 30


def test_interrupted_batch_resumes_where_it_stopped(store) -> None:  # type: ignore[no-untyped-def]
    order = [r.id for r in store.list_runs(newest_first=False)]
    stop_at = order[17]

    def fragile(*, trace, evidence):  # type: ignore[no-untyped-def]
        if trace.id == stop_at:
            raise KeyboardInterrupt
        return ScoreResult(passed=True)

    define_scorer("t_fragile", fragile)
    with pytest.raises(ScoringInterrupted) as info:
        score_runs(store, ["t_fragile"], settings=CFG, chunk_size=5)
    done = info.value.summary
    assert done.interrupted and done.scores_written == 15  # three whole chunks were stored
    assert len(list(store.unscored_run_ids("t_fragile", "1"))) == 15

    define_scorer("t_fragile", lambda *, trace: ScoreResult(passed=True))
    rest = score_runs(store, ["t_fragile"], settings=CFG, chunk_size=5)
    assert (rest.scores_written, rest.skipped) == (15, 15)
    assert list(store.unscored_run_ids("t_fragile", "1")) == []


def test_two_workers_give_the_same_scores_as_one(tmp_path: Path) -> None:
    urls = [f"sqlite:///{tmp_path / name}" for name in ("one.db", "two.db")]
    runs = [
        trace(o, day=i % 5, loop=i % 4 == 0)
        for i, o in enumerate(["ok", "FAKE", "TRUNC", "BOOM"] * 10)
    ]
    results = []
    orders: list[list[tuple[str, str]]] = []
    for url, workers in zip(urls, (1, 2), strict=True):
        with open_store(url) as s:  # type: ignore[attr-defined]
            s.put_traces(runs)
            order: list[tuple[str, str]] = []
            summary = score_runs(
                s,
                ["t_refs", "t_loops"],
                settings=CFG,
                workers=workers,
                chunk_size=6,
                on_scores=lambda batch, order=order: order.extend(
                    (x.run_id, x.scorer) for x in batch
                ),
            )
            assert summary.scores_written == 80
            results.append(_all_scores(s))
            orders.append(order)
    assert results[0] == results[1]
    assert orders[0] == orders[1]  # reported (and stored) in the runs' order, not as finished


def test_bad_arguments(store) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ScorerError, match=r"unknown scorer 'nope'.*known scorers:.*t_refs"):
        score_runs(store, ["nope"], settings=CFG)
    with pytest.raises(ConfigError, match="workers"):
        score_runs(store, ["t_refs"], settings=CFG, workers=0)
    memory = open_store("sqlite:///:memory:")
    with pytest.raises(ConfigError, match="in-memory"):
        score_runs(memory, ["t_refs"], settings=CFG, workers=2)
    memory.close()


class _Cycle:
    """A piece of cyclic garbage that counts its own collection."""

    collected = 0

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        type(self).collected += 1


def _cycle_scorer(*, trace, evidence) -> ScoreResult:  # type: ignore[no-untyped-def]
    """Leaves one reference cycle behind per run, and records how many were collected so far
    and whether automatic collection was on."""
    _Cycle()
    _cycle_seen.append((_Cycle.collected, gc.isenabled()))
    return ScoreResult(passed=True)


_cycle_seen: list[tuple[int, bool]] = []


def test_the_cycles_of_each_chunk_are_collected_after_it(store) -> None:  # type: ignore[no-untyped-def]
    define_scorer("t_cycles", _cycle_scorer, version="1")
    _Cycle.collected = 0
    _cycle_seen.clear()
    assert gc.isenabled()
    score_runs(store, ["t_cycles"], settings=CFG, chunk_size=5)
    # automatic collection is off while the batch runs, and back on afterwards
    assert [enabled for _, enabled in _cycle_seen] == [False] * 30
    assert gc.isenabled()
    # every chunk's cycles are gone before the next chunk is scored: memory is bounded by one
    # chunk's garbage, not by the batch's
    assert [collected for collected, _ in _cycle_seen[::5]] == [0, 5, 10, 15, 20, 25]
    assert _Cycle.collected == 30


def test_a_disabled_collector_stays_disabled(store) -> None:  # type: ignore[no-untyped-def]
    define_scorer("t_cycles", _cycle_scorer, version="1")
    gc.disable()
    try:
        score_runs(store, ["t_cycles"], settings=CFG)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_workers_scores_are_stored_as_they_came_the_bytes_of_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With workers, the parent stores each score's JSON as the worker wrote it (vouched for by
    dump_exactly) instead of writing it again: the same bytes as one process stores."""
    import random
    import re
    import sqlite3
    import sys

    from agentlens.model import Trace

    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    try:
        from bench_grounding import make_run
    finally:
        sys.path.pop(0)
    rng = random.Random(5)
    runs = [Trace.model_validate(make_run(i, rng)) for i in range(60)]
    dumps = 0
    plain_dump = Score.model_dump_json

    def counted(self: Score, **options: object) -> str:
        nonlocal dumps
        dumps += 1
        return plain_dump(self, **options)  # type: ignore[arg-type]

    docs = []
    for workers in (1, 2):
        db = tmp_path / f"w{workers}.db"
        with open_store(f"sqlite:///{db}") as s:  # type: ignore[attr-defined]
            s.put_traces(runs)
            if workers == 2:  # in this process only: the workers are fresh ones
                monkeypatch.setattr(Score, "model_dump_json", counted)
            summary = score_runs(
                s,
                ["no_fabricated_refs", "parametric_leakage"],
                settings=CFG,
                workers=workers,
                chunk_size=20,
            )
            monkeypatch.undo()
            assert summary.scores_written == 120
        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT run_id, scorer, doc FROM scores ORDER BY 1, 2").fetchall()
        docs.append([(r, n, re.sub(r'"scored_at":"[^"]*"', "", d)) for r, n, d in rows])
    assert docs[0] == docs[1]
    assert any('"failure_mode":"fabricated_grounding"' in d for _, _, d in docs[0])
    assert dumps == 0  # the parent wrote no score's JSON again


def test_each_run_is_freed_before_the_next_is_read(store) -> None:  # type: ignore[no-untyped-def]
    """A chunk is scored run by run: when a run is scored, no earlier run's trace or evidence
    is alive any more (freed by reference counting, with the collector off)."""
    import weakref

    alive: list[int] = []
    earlier: list[weakref.ref[object]] = []

    def watch(*, trace, evidence):  # type: ignore[no-untyped-def]
        alive.append(sum(1 for ref in earlier if ref() is not None))
        earlier.extend((weakref.ref(trace), weakref.ref(evidence)))
        return ScoreResult(passed=True)

    define_scorer("t_watch", watch)
    summary = score_runs(store, ["t_watch", "t_loops"], settings=CFG, chunk_size=7)
    assert summary.scores_written == 60
    assert alive == [0] * 30


def test_sync_and_async_runs_of_one_chunk_keep_the_runs_order(store) -> None:  # type: ignore[no-untyped-def]
    """In a chunk where some runs need an async scorer and others do not, every score is that
    scorer's result on that run, and the scores come in the runs' order, each run's in the
    batch's order of scorers (what scoring every pair in that order gives)."""

    async def slow(*, trace, evidence):  # type: ignore[no-untyped-def]
        return ScoreResult(passed="FAKE" not in str(trace.output), value=len(trace.id))

    define_scorer("t_slow", slow)
    order = [r.id for r in store.list_runs(newest_first=False)]
    first = RunFilter(run_ids=order[::3])
    score_runs(store, ["t_slow"], first, settings=CFG)  # a third only need the sync scorer
    got: list[tuple[str, str, bool, float | None]] = []
    score_runs(
        store,
        ["t_refs", "t_slow"],
        settings=CFG,
        chunk_size=8,
        on_scores=lambda batch: got.extend((s.run_id, s.scorer, s.passed, s.value) for s in batch),
    )
    expected = []
    for i, run_id in enumerate(order):
        output = str(store.get_trace(run_id).output)
        if "BOOM" in output:
            expected.append((run_id, "t_refs", False, None))
        else:
            refs = sum(word in output for word in ("FAKE", "LEAK", "TRUNC"))
            expected.append((run_id, "t_refs", not refs, float(refs)))
        if i % 3:
            expected.append((run_id, "t_slow", "FAKE" not in output, float(len(run_id))))
    assert got == expected
