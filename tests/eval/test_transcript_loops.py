"""Issue 18's loop rules: volatile parts of observations, the same call failing again and again,
monologues, bookkeeping events. Each rule has a test that fires and a near miss that does not."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from _transcript_runs import T0, Run, modes, score

from agentlens.config import Settings, load_settings
from agentlens.errors import ConfigError
from agentlens.eval import StepHistory, get_scorer, run_scorers, score_runs
from agentlens.eval._volatile import VOLATILE_PARTS, masker
from agentlens.model import FailureMode, StepKind, Trace, Verdict
from agentlens.review import review_pending
from agentlens.store import open_store

# --------------------------------------------------------------------------- volatile parts

# (part, two results that differ only in that part)
VOLATILE = [
    ("pid", "worker started, pid 4242", "worker started, pid 4317"),
    ("pid", '{"status": "up", "pid": 11}', '{"status": "up", "pid": 12}'),
    (
        "timestamp",
        "build failed at 2026-12-01T13:41:34.120Z: missing header",
        "build failed at 2026-12-01T13:42:02.981Z: missing header",
    ),
    ("timestamp", "Date: Tue, 01 Dec 2026 13:41:34 GMT\nno change", "Date: Tue, 01 Dec 2026 13:45:00 GMT\nno change"),
    ("timestamp", "[13:41:34.120] queue empty", "[13:41:39.554] queue empty"),
    ("timestamp", {"state": "queued", "timestamp": 1764596494}, {"state": "queued", "timestamp": 1764596501}),
    ("request_id", "503 Service Unavailable (request_id=ab12cd)", "503 Service Unavailable (request_id=ef34gh)"),
    ("request_id", "X-Request-ID: 7f1c-22\nrate limited", "X-Request-ID: 9a0b-31\nrate limited"),
    ("request_id", {"error": "throttled", "traceId": "t-1"}, {"error": "throttled", "traceId": "t-2"}),
    (
        "uuid",
        "created job 123e4567-e89b-12d3-a456-426614174000",
        "created job 9b2f0c1e-3d4a-4f5b-8c6d-7e8f9a0b1c2d",
    ),
    (
        "temp_path",
        "Traceback: File \"/tmp/tmpa1b2c3d4/main.py\", line 3\nNameError: x",
        "Traceback: File \"/tmp/tmpz9y8x7w6/main.py\", line 3\nNameError: x",
    ),
    ("address", "<Session object at 0x7f3a2b1c4d50>", "<Session object at 0x7f3a2b9e0010>"),
    ("duration", "3 failed, 1 passed in 0.52s", "3 failed, 1 passed in 0.61s"),
    ("duration", "You previously visited this page 9 seconds ago.", "You previously visited this page 14 seconds ago."),
    ("duration", {"rows": [], "elapsed_ms": 12}, {"rows": [], "elapsed_ms": 15}),
]  # fmt: skip


@pytest.mark.parametrize(("part", "first", "second"), VOLATILE)
def test_results_that_differ_only_in_a_volatile_part_are_the_same(
    part: str, first: Any, second: Any
) -> None:
    run = Run()
    for output in (first, second, first):
        run.call("status", {"service": "api"}, output)
    result = score("repeated_tool_calls", run.trace())
    assert modes(result) == ["repeated_tool_call"]
    finding = result.findings[0]
    assert finding.attributes["ignored"] == [part]
    assert f"(ignoring {part})" in finding.detail
    # the near miss: without that part in ``volatile`` the results differ
    others = [p for p in VOLATILE_PARTS if p != part]
    assert score("repeated_tool_calls", run.trace(), volatile=others).passed


# (two results that differ in something that looks volatile but is data)
NOT_VOLATILE = [
    ("flight HAT001 departs 06:00:00", "flight HAT001 departs 07:00:00"),  # a clock time is data
    ("reservation on 2026-12-01", "reservation on 2026-12-02"),  # a date is data
    ("music of the 1980s", "music of the 1990s"),  # a decade, not a duration
    ("opcode 0x1f2", "opcode 0x1f3"),  # too short for an address
    ("order 4242 shipped", "order 4243 shipped"),  # a number without "pid"
    ("total 5s", "total 6s"),  # a whole number of seconds without a longer unit
    ('{"time": "06:00", "seat": "1A"}', '{"time": "07:00", "seat": "1A"}'),  # "time" is data
    ("see /tmpfiles/a", "see /tmpfiles/b"),  # not the temporary folder
]


@pytest.mark.parametrize(("first", "second"), NOT_VOLATILE)
def test_results_that_differ_in_data_are_not_the_same(first: str, second: str) -> None:
    run = Run()
    for output in (first, second, first):
        run.call("lookup", {"id": 1}, output)
    assert score("repeated_tool_calls", run.trace()).passed
    assert masker().mask(first) != masker().mask(second)


def test_volatile_parts_in_errors_make_an_error_loop() -> None:
    run = Run()
    for rid in ("a1b2", "c3d4", "e5f6"):
        run.call("charge", {"amount": 10}, error=f"card declined (request-id: {rid})")
        run.call("log", {"rid": rid}, "ok")
    result = score("repeated_tool_calls", run.trace())
    assert modes(result) == ["error_loop"]
    assert result.findings[0].attributes["ignored"] == ["request_id"]


def test_no_progress_ignores_volatile_parts_and_says_so() -> None:
    run = Run().call("open", {"url": "a"}, "page A (loaded in 9.5 ms)")
    for i in range(5):
        run.call("open", {"url": f"a?v={i}"}, f"page A (loaded in {i}.5 ms)")
    result = score("no_progress", run.trace())
    assert modes(result) == ["no_progress"]
    assert result.findings[0].attributes["ignored"] == ["duration"]
    assert score("no_progress", run.trace(), volatile=[]).passed


def test_a_constant_volatile_part_is_not_reported_as_ignored() -> None:
    run = Run()
    for _ in range(3):
        run.call("status", {}, "up since 2026-12-01T10:00:00Z")
    finding = score("repeated_tool_calls", run.trace()).findings[0]
    assert "ignored" not in finding.attributes
    assert "ignoring" not in finding.detail


def test_volatile_parts_are_configured_per_role(tmp_path: Path) -> None:
    config = tmp_path / "agentlens.toml"
    config.write_text(
        '[agents.ops.scorers.repeated_tool_calls]\nvolatile = ["uuid"]\n', encoding="utf-8"
    )
    settings = load_settings(config_file=config)
    run = Run(agent="ops")
    for pid in (1, 2, 3):
        run.call("status", {}, f"pid {pid}")
    report = run_scorers(["repeated_tool_calls"], trace=run.trace(), settings=settings)
    assert report.results["repeated_tool_calls"].passed  # pid is not volatile for ops
    run.agent = "web"
    other = run_scorers(["repeated_tool_calls"], trace=run.trace(), settings=settings)
    assert not other.results["repeated_tool_calls"].passed


def test_an_unknown_volatile_part_is_refused_when_bound() -> None:
    with pytest.raises(ConfigError, match="unknown volatile part 'ip'"):
        get_scorer("repeated_tool_calls").with_options(volatile=["ip"])


def test_the_masker_says_what_it_found() -> None:
    found = masker().found({"log": "pid 7 at 2026-12-01T10:00:00Z", "took": 3})
    assert found == {
        "pid": ("pid 7",),
        "timestamp": ("2026-12-01T10:00:00Z",),
        "duration": ("took=3",),
    }
    assert masker([]).mask("pid 7") == "pid 7"


# --------------------------------------------------------------------------- failing again


def test_the_same_call_failing_in_a_row_with_changing_errors_is_an_error_loop() -> None:
    run = Run()
    for error in ("connection reset", "TLS handshake failed", "connection refused"):
        run.call("fetch", {"url": "https://api.example/x"}, error=error)
    result = score("repeated_tool_calls", run.trace())
    assert modes(result) == ["error_loop"]
    finding = result.findings[0]
    assert finding.step_ids == ["s1", "s2", "s3"]
    assert finding.attributes["varied"] == {
        "error": ["connection reset", "TLS handshake failed", "connection refused"]
    }
    assert "in a row" in finding.text
    assert result.value == 2.0


def test_failures_with_changing_errors_not_in_a_row_are_not_an_error_loop() -> None:
    run = Run()
    for n in range(3):  # run the tests, edit, run again: each failure different
        run.call("pytest", {"path": "tests"}, error=f"{3 - n} failed")
        run.call("edit", {"line": n}, "edited")
    assert score("repeated_tool_calls", run.trace()).passed
    two = Run().call("fetch", {"u": 1}, error="reset").call("fetch", {"u": 1}, error="refused")
    assert score("repeated_tool_calls", two.trace()).passed
    assert modes(score("repeated_tool_calls", two.trace(), max_failures=2)) == ["error_loop"]


def _book(run: Run, flight: str, error: str) -> None:
    run.call(
        "book_reservation",
        {"user": "mia_li_3668", "flight_number": flight, "cabin": "economy"},
        error=error,
    )


def test_one_argument_varying_with_the_same_error_is_an_error_loop_after_more_attempts() -> None:
    run = Run()
    flights = ["HAT001", "HAT002", "HAT003", "HAT004", "HAT005"]
    for flight in flights:
        _book(run, flight, f"Error: flight {flight} not available on 2024-05-20")
        run.call("search_flights", {"after": flight}, [{"flight": flight}])
    result = score("repeated_tool_calls", run.trace())
    assert modes(result) == ["error_loop"]
    finding = result.findings[0]
    assert finding.attributes["varied"] == {"flight_number": flights}
    assert finding.attributes["count"] == 5
    assert "flight_number" in finding.text and "flight_number" in finding.detail
    # four attempts: not yet (the identical case needs three; this one needs more)
    fewer = Run()
    for flight in flights[:4]:
        _book(fewer, flight, f"Error: flight {flight} not available on 2024-05-20")
    assert score("repeated_tool_calls", fewer.trace()).passed
    assert not score("repeated_tool_calls", fewer.trace(), max_varied_errors=4).passed


def test_two_arguments_varying_or_different_errors_are_not_a_varied_error_loop() -> None:
    run = Run()
    for i in range(6):
        run.call(
            "book_reservation",
            {"flight_number": f"HAT00{i}", "cabin": ["economy", "business"][i % 2]},
            error="Error: not available",
        )
    run.call("x", {}, "ok")
    assert score("repeated_tool_calls", run.trace()).passed
    other = Run()
    for i in range(6):
        _book(other, f"HAT00{i}", f"Error: seat map {i} differs")
        other.call("x", {"i": i}, "ok")
    assert score("repeated_tool_calls", other.trace()).passed


# --------------------------------------------------------------------------- monologue


def test_the_same_message_three_times_without_new_observations_is_a_repeated_message() -> None:
    run = Run()
    run.call("search", {"q": "refund policy"}, "Refunds within 30 days.")
    for spacing in ("I will check the refund policy.", "I will  check the\nrefund policy. "):
        run.text(spacing)
        run.call("search", {"q": "refund policy"}, "Refunds within 30 days.")  # nothing new
    run.text("I will check the refund policy.")
    result = score("repeated_tool_calls", run.trace(), max_repeats=10)
    assert modes(result) == ["repeated_message"]
    finding = result.findings[0]
    assert finding.failure_mode is FailureMode.REPEATED_MESSAGE
    assert finding.step_ids == ["s2", "s4", "s6"]
    assert finding.attributes["message"] == "I will check the refund policy."
    assert finding.attributes["wasted_step_ids"] == ["s4", "s6"]


def test_a_repeated_message_with_new_observations_between_is_not_a_monologue() -> None:
    run = Run()
    for page in range(3):
        run.text("Let me look at the next page.")
        run.call("list", {"page": page}, [f"item {page}"])
    assert score("repeated_tool_calls", run.trace()).passed
    user = Run().text("Anything else?").user("yes").text("Anything else?").user("no")
    user.text("Anything else?")
    assert score("repeated_tool_calls", user.trace()).passed


def test_an_llm_reply_echoed_as_text_is_one_message() -> None:
    run = Run()
    for _ in range(2):
        run.llm({"role": "assistant", "content": "Checking the order."})
        run.text("Checking the order.")
    assert score("repeated_tool_calls", run.trace()).passed
    run.llm({"role": "assistant", "content": "Checking the order."})
    result = score("repeated_tool_calls", run.trace())
    assert modes(result) == ["repeated_message"]
    assert result.findings[0].step_ids == ["s1", "s3", "s5"]
    assert score("repeated_tool_calls", run.trace(), max_messages=4).passed


# --------------------------------------------------------------------------- bookkeeping


def test_bookkeeping_events_are_not_repeated_calls_nor_steps() -> None:
    run = Run()
    for i in range(16):
        run.call("think", {"thought": "plan"}, "")
        run.call("condensation", {"forgotten": [1, 2]}, "summary")
        run.call("lookup", {"i": i}, f"r{i}")
    assert score("repeated_tool_calls", run.trace()).passed
    steps = score("excessive_steps", run.trace())
    assert steps.attributes["steps"] == 16
    assert not steps.passed  # 16 real steps over 15
    assert score("excessive_steps", run.trace(), max_steps=16).passed
    # the near miss: with no bookkeeping list the same events are repeats and steps
    strict = score("repeated_tool_calls", run.trace(), bookkeeping=[])
    assert modes(strict)[:2] == ["repeated_tool_call", "repeated_tool_call"]
    assert score("excessive_steps", run.trace(), bookkeeping=[]).attributes["steps"] == 48


def test_bookkeeping_events_do_not_break_or_extend_a_stretch() -> None:
    run = Run().call("search", {"q": "a"}, "A")
    for i in range(5):
        run.call("search", {"q": f"a{i}"}, [])
        run.call("Think", {"thought": f"try {i}"}, f"a new thought {i}")
    assert modes(score("no_progress", run.trace())) == ["no_progress"]
    assert score("no_progress", run.trace(), bookkeeping=[]).passed


def test_bookkeeping_is_configured_per_role(tmp_path: Path) -> None:
    config = tmp_path / "agentlens.toml"
    config.write_text(
        '[agents.coder.scorers.repeated_tool_calls]\nbookkeeping = ["todo_write"]\n',
        encoding="utf-8",
    )
    settings = load_settings(config_file=config)
    run = Run(agent="coder")
    for _ in range(3):
        run.call("todo_write", {"items": ["a"]}, "saved", kind=StepKind.TOOL)
    trace = run.trace()
    assert run_scorers(["repeated_tool_calls"], trace=trace, settings=settings).passed
    trace.agent = None
    assert not run_scorers(["repeated_tool_calls"], trace=trace, settings=settings).passed


def test_a_result_nested_too_deeply_to_parse_is_compared_as_text() -> None:
    run = Run()
    for _ in range(3):
        run.call("dump", {}, "[" * 5000)
    assert modes(score("repeated_tool_calls", run.trace())) == ["repeated_tool_call"]


# --------------------------------------------------------------------------- budgets per role


def _coder_run(run_id: str, steps: int, minute: int, agent: str = "coder") -> Trace:
    run = Run(agent=agent)
    for i in range(steps):
        run.call("bash", {"cmd": f"step {i}"}, f"out {i}")
    run.call("think", {"thought": "bookkeeping is not counted"}, "")
    trace = run.trace()
    return trace.model_copy(update={"id": run_id, "started_at": T0 + timedelta(minutes=minute)})


@pytest.fixture
def history_store(tmp_path: Path) -> Iterator[Any]:
    """A SQLite file with 40 runs of role ``coder`` taking 20 to 39 tool steps."""
    with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:  # type: ignore[attr-defined]
        store.put_traces(_coder_run(f"h{i:02d}", 20 + i % 20, i) for i in range(40))
        yield store


def _auto(trace: Trace, store: Any = None, **options: Any) -> Any:
    scorer = get_scorer("excessive_steps").with_options(max_steps="auto", **options)
    return run_scorers([scorer], trace=trace, store=store, settings=Settings()).results[
        "excessive_steps"
    ]


def test_auto_budget_is_the_roles_95th_percentile_of_its_stored_runs(history_store: Any) -> None:
    # 40 runs of 20..39 steps: the nearest-rank 95th percentile of 40 values is the 38th, 38
    result = _auto(_coder_run("new", 41, 99), history_store)
    assert not result.passed
    finding = result.findings[0]
    assert finding.attributes["budget"] == 38
    assert finding.attributes["excess"] == 3
    assert finding.attributes["budget_set"] == {
        "method": "auto",
        "percentile": 95.0,
        "runs": 40,
        "window": 200,
        "min_runs": 20,
    }
    assert "over the budget of 38 (p95 of the role's last 40 runs" in finding.detail
    # the near miss: 30 steps is usual for this role (the fixed budget of 15 would flag it)
    usual = _auto(_coder_run("usual", 30, 99), history_store)
    assert usual.passed and usual.attributes["budget"] == 38
    assert not score("excessive_steps", _coder_run("usual", 30, 99)).passed


def test_auto_budget_uses_the_window_and_percentile(history_store: Any) -> None:
    # the 10 most recent runs (minutes 30..39) took 30..39 steps; their median is 34
    result = _auto(_coder_run("new", 35, 99), history_store, window=10, min_runs=5, percentile=50)
    assert result.attributes["budget"] == 34
    assert result.findings[0].attributes["excess"] == 1


def test_auto_budget_is_the_fixed_one_until_there_is_enough_history(
    history_store: Any,
) -> None:
    few = _auto(_coder_run("new", 16, 99), history_store, min_runs=41)
    assert few.findings[0].attributes["budget"] == 15
    assert few.findings[0].attributes["budget_set"] == {
        "method": "fallback",
        "min_runs": 41,
        "window": 200,
        "runs": 40,
    }
    assert "fixed until the role has 41 runs of history (40 stored)" in few.detail
    other_role = _auto(_coder_run("new", 16, 99, agent="writer"), history_store)
    assert other_role.findings[0].attributes["budget_set"]["runs"] == 0
    alone = _auto(_coder_run("new", 16, 99))  # no store: nothing to learn from
    assert alone.findings[0].attributes["budget_set"]["runs"] is None
    assert "no stored history" in alone.detail
    assert _auto(_coder_run("new", 15, 99)).passed


def test_auto_budget_is_learnt_once_per_batch(history_store: Any) -> None:
    scorer = get_scorer("excessive_steps").with_options(max_steps="auto")
    history_store.put_traces([_coder_run("big", 60, 100), _coder_run("small", 25, 101)])
    summary = score_runs(history_store, [scorer], settings=Settings())
    assert summary.scores_written == 42
    flagged = sorted(
        r.id
        for r in history_store.list_runs()
        for s in history_store.get_scores(r.id)
        if s.verdict is Verdict.FLAGGED
    )
    # one budget for the batch, learnt from the 42 stored runs (p95 = 39): only the 60-step run
    assert flagged == ["big"]


def test_auto_is_part_of_the_stored_version_and_checked() -> None:
    auto = get_scorer("excessive_steps").with_options(max_steps="auto")
    assert auto.stored_version.startswith("2+")
    assert auto.stored_version != get_scorer("excessive_steps").stored_version
    assert auto.stored_version != auto.with_options(window=50).stored_version
    with pytest.raises(ConfigError, match="max_steps"):
        get_scorer("excessive_steps").with_options(max_steps="learned")
    with pytest.raises(ConfigError, match="percentile"):
        get_scorer("excessive_steps").with_options(max_steps="auto", percentile=0)


def test_auto_budget_is_configured_per_role(tmp_path: Path, history_store: Any) -> None:
    config = tmp_path / "agentlens.toml"
    config.write_text(
        '[agents.coder.scorers.excessive_steps]\nmax_steps = "auto"\n', encoding="utf-8"
    )
    settings = load_settings(config_file=config)
    report = run_scorers(
        ["excessive_steps"], trace=_coder_run("new", 30, 99), store=history_store,
        settings=settings,
    )  # fmt: skip
    assert report.results["excessive_steps"].passed


def test_the_history_learns_each_value_once(history_store: Any) -> None:
    history = StepHistory(history_store)
    calls: list[int] = []

    def learn() -> int:
        calls.append(1)
        return sum(1 for _ in history.recent("coder", 5))

    assert history.memo("k", learn) == 5
    assert history.memo("k", learn) == 5
    assert calls == [1]
    assert [t.id for t in history.recent("coder", 3)] == ["h39", "h38", "h37"]
    assert list(history.recent("nobody", 3)) == []


def test_review_learns_the_auto_budget_from_its_store(tmp_path: Path, history_store: Any) -> None:
    config = tmp_path / "agentlens.toml"
    config.write_text(
        '[review]\nscorers = ["excessive_steps"]\n'
        '[agents.coder.scorers.excessive_steps]\nmax_steps = "auto"\n',
        encoding="utf-8",
    )
    history_store.put_traces([_coder_run("new", 45, 99)])
    review_pending(history_store, settings=load_settings(config_file=config), deliver=False)
    (score,) = history_store.get_scores("new")
    assert score.verdict is Verdict.FLAGGED
    finding = score.findings[0]
    assert finding.attributes["budget_set"]["method"] == "auto"
    # learnt from the 41 stored runs, the new one included: the 39th of 41 values is 39
    assert finding.attributes["budget"] == 39 and finding.attributes["excess"] == 6


def test_the_turns_of_a_repeated_call_are_that_loops_not_a_monologue() -> None:
    run = Run()
    for _ in range(4):
        run.llm({"role": "assistant", "content": "calling search"})
        run.call("search", {"q": "INV-1"}, {"hits": ["INV-1 paid"]})
    result = score("repeated_tool_calls", run.trace())
    assert modes(result) == ["repeated_tool_call"]  # one finding: the llm turns are its waste
    assert result.findings[0].attributes["waste"]["llm_steps"] == 3
    # the near miss of the rule: below the repeat threshold the messages are the finding
    assert modes(score("repeated_tool_calls", run.trace(), max_repeats=5)) == ["repeated_message"]
