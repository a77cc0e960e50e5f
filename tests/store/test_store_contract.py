"""The TraceStore contract: every backend in ``conftest.BACKENDS`` must pass all of it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest
from store_factories import T0, make_score, make_trace

from agentlens.errors import RunNotFoundError, StoreError
from agentlens.model import Score, Step, Trace
from agentlens.store import RunFilter, RunSummary, TraceStore


def ids(traces: Iterator[Trace] | Iterator[RunSummary]) -> list[str]:
    return [t.id for t in traces]


def test_is_a_trace_store(store: TraceStore, store_url: str) -> None:
    assert isinstance(store, TraceStore)
    assert store.url == store_url


def test_put_then_get_returns_the_same_run(store: TraceStore) -> None:
    trace = make_trace(1, steps=5, x_unknown={"nested": [1, 2.5, None, True]})
    trace.steps[2] = trace.steps[2].model_copy(update={"error": {"type": "Timeout"}})
    assert store.put_traces([trace]) == 1
    got = store.get_trace(trace.id)
    assert got.to_json() == trace.to_json()
    assert got == trace
    assert [s.id for s in got.steps] == ["s0", "s1", "s2", "s3", "s4"]
    assert got.model_extra == {"x_unknown": {"nested": [1, 2.5, None, True]}}


def test_unknown_fields_on_steps_survive(store: TraceStore) -> None:
    step = Step.model_validate({"id": "a", "kind": "tool", "vendor_span": {"k": [1, "2"]}})
    trace = Trace(id="r1", steps=[step], future_field=7)
    store.put_traces([trace])
    got = store.get_trace("r1")
    assert got.steps[0].model_extra == {"vendor_span": {"k": [1, "2"]}}
    assert got.to_json() == trace.to_json()


def test_get_unknown_run_raises(store: TraceStore) -> None:
    with pytest.raises(RunNotFoundError) as info:
        store.get_trace("nope")
    assert info.value.run_id == "nope"
    assert isinstance(info.value, KeyError)


def test_a_run_without_steps_or_times(store: TraceStore) -> None:
    trace = Trace(id="bare")
    store.put_traces([trace])
    assert store.get_trace("bare").to_json() == trace.to_json()
    assert ids(store.query_traces()) == ["bare"]


def test_replacing_a_run_replaces_its_steps_and_drops_its_scores(store: TraceStore) -> None:
    store.put_traces([make_trace(1, steps=4), make_trace(2)])
    store.put_scores([make_score("r00001"), make_score("r00002")])
    changed = make_trace(1, steps=2, output="a different answer")
    assert store.put_traces([changed]) == 1
    got = store.get_trace("r00001")
    assert got.output == "a different answer"
    assert [s.id for s in got.steps] == ["s0", "s1"]
    assert store.get_scores("r00001") == []
    assert len(store.get_scores("r00002")) == 1
    assert store.count_runs() == 2


def test_putting_the_same_runs_twice_changes_nothing(store: TraceStore) -> None:
    traces = [make_trace(i) for i in range(5)]
    store.put_traces(traces)
    store.put_scores([make_score("r00003")])
    before = [t.to_json() for t in store.query_traces()]
    assert store.put_traces([make_trace(i) for i in range(5)]) == 5
    assert [t.to_json() for t in store.query_traces()] == before
    assert store.count_runs() == 5
    assert [s.run_id for s in store.get_scores("r00003")] == ["r00003"]


def test_the_last_of_two_runs_with_one_id_in_a_call_wins(store: TraceStore) -> None:
    store.put_traces([make_trace(1, output="first"), make_trace(1, output="second")])
    assert store.get_trace("r00001").output == "second"
    assert store.count_runs() == 1


def test_a_large_batch_spans_many_chunks(store: TraceStore) -> None:
    traces = [make_trace(i, steps=2) for i in range(700)]
    assert store.put_traces(iter(traces)) == 700
    assert store.count_runs() == 700
    got = list(store.query_traces(newest_first=False))
    assert [t.to_json() for t in got] == [t.to_json() for t in traces]


class TestAtomicity:
    """A failing put_traces call leaves nothing of itself behind (and keeps what it would replace)."""

    def _setup(self, store: TraceStore) -> str:
        store.put_traces([make_trace(0, output="kept")])
        return store.get_trace("r00000").to_json()

    def _check_untouched(self, store: TraceStore, before: str) -> None:
        assert store.count_runs() == 1
        assert store.get_trace("r00000").to_json() == before

    def test_duplicate_step_id_after_many_runs(self, store: TraceStore) -> None:
        before = self._setup(store)
        bad = make_trace(999)
        bad.steps.append(bad.steps[0].model_copy())
        batch = [make_trace(0, output="replaced"), *(make_trace(i) for i in range(1, 600)), bad]
        with pytest.raises(StoreError, match=r"r00999.*two steps with id 's0'"):
            store.put_traces(batch)
        self._check_untouched(store, before)

    def test_an_item_that_is_not_a_trace(self, store: TraceStore) -> None:
        before = self._setup(store)
        batch: list[object] = [make_trace(1), make_trace(0, output="replaced"), {"id": "r2"}]
        with pytest.raises(StoreError, match=r"item 2 .* dict, not a Trace"):
            store.put_traces(batch)  # type: ignore[arg-type]
        self._check_untouched(store, before)

    def test_an_iterator_that_raises_midway(self, store: TraceStore) -> None:
        before = self._setup(store)

        def runs() -> Iterator[Trace]:
            yield make_trace(0, output="replaced")
            for i in range(1, 300):
                yield make_trace(i)
            raise RuntimeError("the source broke")

        with pytest.raises(RuntimeError, match="the source broke"):
            store.put_traces(runs())
        self._check_untouched(store, before)

    def test_the_store_still_works_after_a_failed_batch(self, store: TraceStore) -> None:
        self._setup(store)
        bad = make_trace(5)
        bad.steps.append(bad.steps[0].model_copy())
        with pytest.raises(StoreError):
            store.put_traces([make_trace(4), bad])
        store.put_traces([make_trace(4)])
        assert store.count_runs() == 2


def test_delete_runs_deletes_steps_and_scores(store: TraceStore) -> None:
    store.put_traces([make_trace(i) for i in range(4)])
    store.put_scores([make_score("r00001"), make_score("r00002")])
    assert store.delete_runs(["r00001", "r00002", "missing", "r00001"]) == 2
    assert ids(store.query_traces(newest_first=False)) == ["r00000", "r00003"]
    assert store.get_scores("r00001") == []
    with pytest.raises(RunNotFoundError):
        store.get_trace("r00002")
    assert store.delete_runs([]) == 0
    # the id can be reused, with no old steps or scores showing through
    store.put_traces([make_trace(1, steps=1)])
    assert [s.id for s in store.get_trace("r00001").steps] == ["s0"]
    assert store.get_scores("r00001") == []


class TestQueries:
    @pytest.fixture
    def filled(self, store: TraceStore) -> TraceStore:
        traces = [
            make_trace(
                i, agent="support" if i % 2 else "writer", output=None if i % 5 == 0 else "a"
            )
            for i in range(48)
        ]
        traces.append(make_trace(100, started=None, agent="support"))
        traces.append(make_trace(101, started=None, agent="support"))
        traces.append(make_trace(60, project="other"))
        store.put_traces(traces)
        return store

    def test_newest_first_then_undated_runs_by_id(self, filled: TraceStore) -> None:
        got = ids(filled.query_traces())
        assert got[:3] == ["r00060", "r00047", "r00046"]
        assert got[-2:] == ["r00101", "r00100"]
        assert len(got) == 51

    def test_oldest_first_starts_with_undated_runs(self, filled: TraceStore) -> None:
        got = ids(filled.query_traces(newest_first=False))
        assert got[:3] == ["r00100", "r00101", "r00000"]
        assert got == list(reversed(ids(filled.query_traces())))

    def test_time_window_is_start_inclusive_end_exclusive(self, filled: TraceStore) -> None:
        where = RunFilter(start=T0 + timedelta(hours=10), end=T0 + timedelta(hours=20))
        assert ids(filled.query_traces(where, newest_first=False)) == [
            f"r{i:05d}" for i in range(10, 20)
        ]
        assert filled.count_runs(where) == 10
        assert [s.id for s in filled.list_runs(where)] == [f"r{i:05d}" for i in range(19, 9, -1)]

    def test_open_ended_windows_exclude_undated_runs(self, filled: TraceStore) -> None:
        assert filled.count_runs(RunFilter(end=T0 + timedelta(hours=3))) == 3
        assert filled.count_runs(RunFilter(start=T0 + timedelta(hours=45))) == 4

    def test_naive_times_are_utc(self, filled: TraceStore) -> None:
        start = (T0 + timedelta(hours=10)).replace(tzinfo=None)
        assert filled.count_runs(RunFilter(start=start, end=start + timedelta(hours=1))) == 1

    def test_filters_combine(self, filled: TraceStore) -> None:
        where = RunFilter(agent="support", has_output=True, end=T0 + timedelta(hours=20))
        expected = [f"r{i:05d}" for i in range(19, -1, -1) if i % 2 and i % 5]
        assert ids(filled.query_traces(where)) == expected
        assert filled.count_runs(RunFilter(has_output=False)) == 10
        assert ids(filled.query_traces(RunFilter(project="other"))) == ["r00060"]
        assert filled.count_runs(RunFilter(agent="nobody")) == 0

    def test_run_ids_filter(self, filled: TraceStore) -> None:
        where = RunFilter(run_ids=["r00003", "r00100", "missing", "r00040"])
        assert ids(filled.query_traces(where)) == ["r00040", "r00003", "r00100"]
        assert filled.count_runs(RunFilter(run_ids=[])) == 0

    def test_run_ids_filters_of_every_size_read_what_they_name(self, store: TraceStore) -> None:
        # A filter on ids is read in one page when it fits (SQLite and PostgreSQL alike): the
        # runs, their order, a limit and repeated ids behave as with any other filter.
        same = T0 + timedelta(days=3)
        store.put_traces(
            [make_trace(i, steps=1, started=same if i % 3 else None) for i in range(600)]
        )
        every = ids(store.query_traces(newest_first=False))
        for n in (0, 1, 31, 33, 200, 511, 512, 513, 600):
            named = [f"r{i:05d}" for i in range(0, 2 * n, 2)] + ["missing"]
            want = [run_id for run_id in every if run_id in set(named)]
            for where in (RunFilter(run_ids=named), RunFilter(run_ids=named + named[::-1])):
                assert ids(store.query_traces(where, newest_first=False)) == want
                assert ids(store.query_traces(where)) == want[::-1]
                assert ids(store.list_runs(where, newest_first=False)) == want
                assert ids(store.query_traces(where, limit=5, newest_first=False)) == want[:5]
                assert list(store.unscored_run_ids("s", "1", where)) == want
                assert list(store.unscored_run_ids("s", "1", where, limit=40)) == want[:40]

    def test_run_ids_filters_order_runs_as_every_query_does(self, store: TraceStore) -> None:
        # Ids beyond ASCII, equal start times and undated runs: a filter on ids (read in one
        # page, and on SQLite sorted outside SQL) orders its runs as the unfiltered query does.
        names = ["z", "é", "e", "ü", "日本", "\U0001f600", "E", "ea", "e\u0301", "\x7f", "~"]
        same = T0 + timedelta(days=1)
        runs = []
        for i, name in enumerate(names):
            run = make_trace(i, steps=1, started=None if i % 4 == 0 else same)
            runs.append(run.model_copy(update={"id": name}))
        store.put_traces(runs)
        for newest_first in (True, False):
            every = ids(store.query_traces(newest_first=newest_first))
            assert sorted(every) == sorted(names)
            named = RunFilter(run_ids=names[::-1])
            assert ids(store.query_traces(named, newest_first=newest_first)) == every
            assert ids(store.list_runs(named, newest_first=newest_first)) == every
            part = RunFilter(run_ids=names[:7])
            assert ids(store.query_traces(part, newest_first=newest_first)) == [
                run_id for run_id in every if run_id in names[:7]
            ]

    def test_limit(self, filled: TraceStore) -> None:
        assert ids(filled.query_traces(limit=3)) == ["r00060", "r00047", "r00046"]
        assert ids(filled.query_traces(limit=0)) == []
        assert len(list(filled.list_runs(limit=50))) == 50
        with pytest.raises(ValueError, match="limit"):
            filled.query_traces(limit=-1)

    def test_pages_do_not_skip_or_repeat_runs_with_equal_times(self, store: TraceStore) -> None:
        # 300 runs with the same start time: pagination must break ties by id.
        same = T0 + timedelta(days=3)
        store.put_traces([make_trace(i, steps=1, started=same) for i in range(300)])
        got = ids(store.query_traces())
        assert got == [f"r{i:05d}" for i in range(299, -1, -1)]
        assert ids(store.query_traces(newest_first=False, limit=250)) == sorted(got)[:250]

    def test_list_runs_gives_summaries(self, filled: TraceStore) -> None:
        summary = next(iter(filled.list_runs(RunFilter(run_ids=["r00007"]))))
        assert summary == RunSummary(
            id="r00007",
            project="default",
            agent="support",
            name="run 7",
            status="ok",
            started_at=T0 + timedelta(hours=7),
            ended_at=T0 + timedelta(hours=7, seconds=30),
            step_count=3,
            has_output=True,
            metadata={"release": "v1", "tenant": "acme"},
        )

    def test_query_is_lazy(self, store: TraceStore) -> None:
        store.put_traces([make_trace(i, steps=1) for i in range(100)])
        it = store.query_traces()
        first = next(it)
        store.delete_runs([f"r{i:05d}" for i in range(50)])  # later pages see the deletion
        rest = ids(it)
        assert first.id == "r00099"
        assert rest[-1] == "r00050"
        assert len(rest) == 49


class TestScores:
    def test_put_and_get(self, store: TraceStore) -> None:
        store.put_traces([make_trace(1)])
        score = make_score("r00001", detail="cites CUST-99999")
        assert store.put_scores([score]) == 1
        (got,) = store.get_scores("r00001")
        assert got == score
        assert got.to_json_line() == score.to_json_line()

    def test_same_key_replaces_other_versions_accumulate(self, store: TraceStore) -> None:
        store.put_traces([make_trace(1)])
        store.put_scores([make_score("r00001", version="1")])
        store.put_scores([make_score("r00001", version="1", passed=True)])
        store.put_scores([make_score("r00001", version="2"), make_score("r00001", scorer="other")])
        got = store.get_scores("r00001")
        assert [(s.scorer, s.version, s.passed) for s in got] == [
            ("no_fabricated_refs", "1", True),
            ("no_fabricated_refs", "2", False),
            ("other", "1", False),
        ]

    def test_scores_are_oldest_first(self, store: TraceStore) -> None:
        store.put_traces([make_trace(1)])
        late = make_score("r00001", scorer="a").model_copy(update={"scored_at": T0})
        early = make_score("r00001", scorer="b").model_copy(
            update={"scored_at": T0 - timedelta(days=1)}
        )
        store.put_scores([late, early])
        assert [s.scorer for s in store.get_scores("r00001")] == ["b", "a"]

    def test_a_score_for_an_unknown_run_writes_nothing(self, store: TraceStore) -> None:
        store.put_traces([make_trace(1)])
        with pytest.raises(RunNotFoundError):
            store.put_scores([make_score("r00001"), make_score("ghost")])
        assert store.get_scores("r00001") == []

    def test_a_score_item_that_is_not_a_score(self, store: TraceStore) -> None:
        store.put_traces([make_trace(1)])
        with pytest.raises(StoreError, match="not a Score"):
            store.put_scores([make_score("r00001"), "oops"])  # type: ignore[list-item]
        assert store.get_scores("r00001") == []

    def test_unknown_run_has_no_scores(self, store: TraceStore) -> None:
        assert store.get_scores("nope") == []

    def test_unscored_run_ids(self, store: TraceStore) -> None:
        store.put_traces([make_trace(i, agent="a" if i < 5 else "b") for i in range(10)])
        store.put_traces([make_trace(50, started=None)])
        store.put_scores(
            [make_score("r00001"), make_score("r00004"), make_score("r00002", version="2")]
        )
        got = list(store.unscored_run_ids("no_fabricated_refs", "1"))
        assert got == ["r00050", "r00000", "r00002", "r00003", *(f"r{i:05d}" for i in range(5, 10))]
        assert list(store.unscored_run_ids("no_fabricated_refs", "1", RunFilter(agent="a"))) == [
            "r00000",
            "r00002",
            "r00003",
        ]
        assert list(store.unscored_run_ids("no_fabricated_refs", "2", limit=2)) == [
            "r00050",
            "r00000",
        ]
        window = RunFilter(start=T0 + timedelta(hours=3), end=T0 + timedelta(hours=6))
        assert list(store.unscored_run_ids("no_fabricated_refs", "1", window)) == [
            "r00003",
            "r00005",
        ]
        assert len(list(store.unscored_run_ids("never_ran", "1"))) == 11

    def test_unscored_while_scoring_as_you_go(self, store: TraceStore) -> None:
        store.put_traces([make_trace(i, steps=1) for i in range(150)])
        seen = []
        for run_id in store.unscored_run_ids("s", "1"):
            store.put_scores([make_score(run_id, scorer="s")])
            seen.append(run_id)
        assert seen == [f"r{i:05d}" for i in range(150)]
        assert list(store.unscored_run_ids("s", "1")) == []


def test_a_writer_thread_and_a_reader_together(store: TraceStore) -> None:
    """Capture's exporter writes from a background thread while the application reads."""
    store.put_traces([make_trace(i, steps=4) for i in range(20)])
    errors: list[BaseException] = []
    done = threading.Event()

    def writer() -> None:
        try:
            for batch in range(30):
                store.put_traces([make_trace(1000 + batch * 5 + k, steps=4) for k in range(5)])
                # replace an old run with a different one, steps and all
                store.put_traces([make_trace(batch % 20, steps=1 + batch % 4, output=f"v{batch}")])
        except BaseException as exc:
            errors.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    reads = 0
    while not done.is_set() or reads == 0:
        for trace in store.query_traces(limit=60):
            # every run read is whole: its steps are the ones written with it
            expected = len(trace.steps)
            assert [s.id for s in trace.steps] == [f"s{j}" for j in range(expected)]
            assert expected == (
                4 if trace.output == "the answer" else 1 + int(trace.output[1:]) % 4
            )
        reads += 1
    thread.join()
    assert errors == []
    assert store.count_runs() == 20 + 150


def test_close_is_idempotent_and_closes(store_url: str) -> None:
    from agentlens.store import open_store

    s = open_store(store_url)
    s.put_traces([make_trace(1)])
    s.close()
    s.close()
    with pytest.raises(StoreError, match="closed"):
        s.get_trace("r00001")


def test_scores_keep_their_findings(store: TraceStore) -> None:
    store.put_traces([make_trace(1)])
    score = make_score("r00001")
    store.put_scores([score])
    (got,) = store.get_scores("r00001")
    assert isinstance(got, Score)
    assert [f.failure_mode for f in got.findings] == ["fabricated_grounding"]
    assert got.scored_at == score.scored_at


_ODD_TEXTS = ['q"uo\\te{,}', "nul\x00in", "\x01lead", "NULL", "", "ünïcødé 😀 \\N", "x" * 3000]


@pytest.mark.parametrize("odd", _ODD_TEXTS)
def test_scores_with_any_text_are_stored_as_they_are(store: TraceStore, odd: str) -> None:
    """Every text of a score (scorer, version, detail, error, a finding's text and detail, the
    document) is stored and read back as it is, whatever it holds: quotes, backslashes, braces
    and commas (what an array literal escapes), NUL, a leading ``\\x01`` (the NUL escape's
    mark), ``NULL``, nothing; mixed with NULLs in the same batch."""
    from agentlens.model import Finding, ScoreResult

    store.put_traces([make_trace(1), make_trace(2)])
    finding = Finding(failure_mode="fabricated_grounding", text=odd, detail=odd, step_ids=[odd])
    flagged = ScoreResult(passed=False, detail=odd, findings=[finding])
    failed = ScoreResult(passed=False, error=odd)
    scores = [
        Score.of(flagged, run_id="r00001", scorer=f"s{odd}", version=odd),
        Score.of(ScoreResult(passed=True), run_id="r00002", scorer="plain", version="1"),
        Score.of(failed, run_id="r00002", scorer="other", version="1"),
    ]
    store.put_scores(scores)
    assert store.get_scores("r00001") == [scores[0]]
    assert sorted(store.get_scores("r00002"), key=lambda s: s.scorer) == [scores[2], scores[1]]
    flags = store.get_flags("r00001")
    assert flags is not None and flags.hallucination_detected
    assert [(f.text, f.scorer) for f in flags.findings] == [(odd, f"s{odd}")]


@pytest.mark.parametrize("odd", _ODD_TEXTS)
def test_runs_with_any_text_are_stored_as_they_are(store: TraceStore, odd: str) -> None:
    """Every text column of a run (id, project, agent, name, release) and its documents (the
    run's JSON and its steps') hold any text, as the scores' do; mixed in one batch with a run
    whose texts are plain."""
    odd_run = make_trace(1, agent=odd, project=odd, output=odd, links={odd: odd})
    odd_run = odd_run.model_copy(
        update={
            "id": f"r{odd}",
            "name": odd,
            "metadata": {"release": odd, odd: odd},
            "steps": [
                s.model_copy(update={"name": odd, "output": {odd: [odd]}}) for s in odd_run.steps
            ],
        }
    )
    plain = make_trace(2)
    store.put_traces([odd_run, plain])
    assert store.get_trace(odd_run.id) == odd_run
    assert store.get_trace(plain.id) == plain
    assert ids(store.query_traces(RunFilter(agent=odd))) == [odd_run.id]
    assert [r.id for r in store.list_runs(RunFilter(release=odd))] == [odd_run.id]


@pytest.mark.parametrize("run_id", ["a\x00b", "ünïcødé 😀", "x" * 500, "1", "with 'quotes\" and ,"])
def test_any_string_is_a_run_id(store: TraceStore, run_id: str) -> None:
    trace = Trace(id=run_id, output="first")
    store.put_traces([trace])
    store.put_scores([make_score(run_id)])
    store.put_traces([trace.model_copy(update={"output": "second"})])  # replace: found by id
    assert store.get_trace(run_id).output == "second"
    assert store.get_scores(run_id) == []
    assert ids(store.query_traces(RunFilter(run_ids=[run_id]))) == [run_id]
    assert list(store.unscored_run_ids("no_fabricated_refs", "1")) == [run_id]
    assert store.delete_runs([run_id]) == 1
    assert store.count_runs() == 0


def test_a_huge_integer_stored_through_the_api_is_read_back_marked(store: TraceStore) -> None:
    # Python writes 10**5000 as a JSON number no JSON reader reads back by default: the run
    # must stay readable (the number comes back as its marked decimal text).
    big = make_trace(1, output={"total": 10**5000}, x_big=-(10**4301))
    store.put_traces([big, make_trace(2)])
    got = store.get_trace(big.id)
    assert got.output == {"total": {"type": "int", "repr": "1" + "0" * 5000}}
    assert got.model_extra == {"x_big": {"type": "int", "repr": "-1" + "0" * 4301}}
    assert ids(store.query_traces(newest_first=False)) == [big.id, "r00002"]
    assert [r.metadata for r in store.list_runs(RunFilter(run_ids=[big.id]))] == [big.metadata]
    assert store.delete_runs([big.id]) == 1


def test_query_traces_passes_over_unreadable_runs_when_asked(store: TraceStore) -> None:
    store.put_traces([make_trace(i) for i in range(1, 4)])
    assert store.query_traces(on_unreadable=lambda exc: None) is not None
    assert ids(store.query_traces(newest_first=False, on_unreadable=lambda exc: None)) == [
        "r00001",
        "r00002",
        "r00003",
    ]


def test_runs_by_release(store: TraceStore) -> None:
    store.put_traces([make_trace(i) for i in range(1, 7)])  # releases v1, v2, v0, v1, v2, v0
    assert [r.id for r in store.list_runs(RunFilter(release="v1"), newest_first=False)] == [
        "r00001",
        "r00004",
    ]
    assert store.count_runs(RunFilter(release="v0", agent="support")) == 2
    assert store.count_runs(RunFilter(release="v9")) == 0
