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


def _bench_runs(n: int) -> list[object]:
    """``n`` of the end-to-end benchmark's runs (about 1 in 20 with a fabricated reference)."""
    import random
    import sys

    from agentlens.model import Trace

    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    try:
        from bench_grounding import make_run
    finally:
        sys.path.pop(0)
    rng = random.Random(5)
    return [Trace.model_validate(make_run(i, rng)) for i in range(n)]


_DERIVED = {
    # every table a score write fills, without the times of writing
    "scores": "SELECT run_id, scorer, version, verdict, passed, value, detail, error,"
    " finding_count, run_project, run_agent, run_release, run_started_at, doc FROM scores",
    "score_modes": "SELECT * FROM score_modes",
    "run_review": "SELECT run_id, sort_at, agent, flagged, modes FROM run_review",
    "run_flag_modes": "SELECT * FROM run_flag_modes",
    "content_flags": "SELECT * FROM content_flags",
}


def test_a_workers_scores_are_stored_as_they_came_the_bytes_of_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With workers, the parent stores each score's row as the worker made it, its JSON as the
    worker wrote it (vouched for by dump_exactly), instead of writing it again: the same bytes
    as one process stores, in every table a score write fills. And the same bytes whether a
    passed run's row is made without its score (what the grounding scorers give when no score
    is kept) or from the score (with ``on_scores``, which keeps every score)."""
    import re
    import sqlite3

    runs = _bench_runs(60)
    dumps = 0
    plain_dump = Score.model_dump_json

    def counted(self: Score, **options: object) -> str:
        nonlocal dumps
        dumps += 1
        return plain_dump(self, **options)  # type: ignore[arg-type]

    tables = []
    kept: list[Score] = []
    for workers, every in ((1, False), (2, False), (1, True)):
        db = tmp_path / f"w{workers}{every}.db"
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
                on_scores=kept.extend if every else None,
            )
            monkeypatch.undo()
            assert summary.scores_written == 120
        with sqlite3.connect(db) as conn:
            found = {}
            for name, sql in _DERIVED.items():
                rows = sorted(map(repr, conn.execute(sql).fetchall()))
                found[name] = [re.sub(r'"scored_at":"[^"]*"', "", r) for r in rows]
        tables.append(found)
    assert tables[0] == tables[1] == tables[2]
    assert len(kept) == 120 and sum(x.passed for x in kept) > 60
    assert any("fabricated_grounding" in r for r in tables[0]["score_modes"])
    assert tables[0]["run_flag_modes"]  # the flags were derived, from the findings
    assert dumps == 0  # the parent wrote no score's JSON again


@pytest.mark.parametrize("workers", [1, 2])
def test_only_the_scores_something_reads_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """Without ``on_scores``, a row keeps its score only when it did not pass (its findings make
    the run's flags): one process frees the others as they are made, and with workers the
    parent reads back only those. ``on_rows`` gets every row, with its score where one was
    kept. With ``on_scores``, every score is kept, equal to what is stored."""
    runs = _bench_runs(60)
    parsed = 0
    plain_parse = Score.model_validate_json.__func__  # type: ignore[attr-defined]

    def counted(cls: type[Score], *args: object, **options: object) -> Score:
        nonlocal parsed
        parsed += 1
        return plain_parse(cls, *args, **options)  # type: ignore[no-any-return]

    for wanted in (False, True):
        db = tmp_path / f"w{workers}{wanted}.db"
        rows: list[object] = []
        scores: list[Score] = []
        parsed = 0
        with open_store(f"sqlite:///{db}") as s:  # type: ignore[attr-defined]
            s.put_traces(runs)
            monkeypatch.setattr(Score, "model_validate_json", classmethod(counted))
            score_runs(
                s,
                ["no_fabricated_refs", "parametric_leakage"],
                settings=CFG,
                workers=workers,
                chunk_size=20,
                on_rows=rows.extend,
                on_scores=scores.extend if wanted else None,
            )
            monkeypatch.undo()
            stored = {(x.run_id, x.scorer): x for r in runs for x in s.get_scores(r.id)}
        assert len(rows) == 120
        failed = [r for r in rows if r.verdict != "passed"]  # type: ignore[attr-defined]
        assert failed  # the benchmark's runs include fabricated references
        for r in rows:
            held = r.score  # type: ignore[attr-defined]
            if wanted or r.verdict != "passed":  # type: ignore[attr-defined]
                assert held is not None and held == stored[(r.run_id, r.scorer)]  # type: ignore[attr-defined]
                assert r.doc == held.model_dump_json()  # type: ignore[attr-defined]
            else:
                assert held is None
        # one process parses nothing: its scores are its own
        assert parsed == (0 if workers == 1 else 120 if wanted else len(failed))
        if wanted:
            assert [(x.run_id, x.scorer) for x in scores] == [
                (r.run_id, r.scorer)  # type: ignore[attr-defined]
                for r in rows
            ]


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


def test_what_the_parent_builds_of_each_row_a_worker_sent() -> None:
    from agentlens.eval._runner import _received
    from agentlens.model import FailureMode, Finding, ScoreRow, Verdict

    def row(result: ScoreResult) -> ScoreRow:
        score = Score.of(result, run_id="r", scorer="s", version="1")
        return ScoreRow.of(score, score.model_dump_json(), keep=False)

    finding = Finding(failure_mode=FailureMode.REPEATED_TOOL_CALL, text="t")
    passed = row(ScoreResult(passed=True, detail="fine"))
    shown = row(ScoreResult(passed=True, findings=[finding]))  # the table shows its findings
    flagged = row(ScoreResult(passed=False, detail="bad", findings=[finding]))
    got = _received([passed, shown, flagged], [True, True, True], parse_all=False)
    assert got[0] == passed and got[0].score is None
    assert [g.score.findings for g in got[1:]] == [[finding], [finding]]  # type: ignore[union-attr]
    assert [g[:12] for g in got] == [r[:12] for r in (passed, shown, flagged)]
    assert all(g.score is not None for g in _received([passed], [True], parse_all=True))
    # a text not vouched for is read back and written again, as one process stores that score
    odd = passed._replace(doc=passed.doc.replace('"detail":"fine"', '"detail":"fine" '))
    again = _received([odd], [False], parse_all=False)[0]
    assert again.score is not None and again.score.verdict is Verdict.PASSED
    assert again.doc == again.score.model_dump_json() != odd.doc


def test_a_worker_score_of_another_version_than_the_parents_stops_the_batch() -> None:
    """A scorer defined inline (not importable) can differ in a worker: its version is checked
    against the parent's before anything of the chunk is stored."""
    import re

    from agentlens.eval import get_scorer
    from agentlens.eval._runner import _check_version, _Resolver

    resolver = _Resolver([get_scorer("t_refs")], CFG)
    resolver.check()
    version = resolver.get("t_refs", None).stored_version
    _check_version("t_refs", version, resolver)  # the parent's own: fine
    _check_version("t_other", "9", resolver)  # a scorer the parent did not resolve: not checked
    with pytest.raises(
        ScorerError, match=rf"'t_refs' has version 9\+x .* but {re.escape(version)}"
    ):
        _check_version("t_refs", "9+x", resolver)
