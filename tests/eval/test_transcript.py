"""The transcript analysers: repeated_tool_calls, excessive_steps, no_progress."""

from __future__ import annotations

import json
from typing import Any

import pytest
from _transcript_runs import Run, modes, score
from hypothesis import assume, given
from hypothesis import strategies as st

from agentlens.config import AgentSettings, Settings
from agentlens.errors import ConfigError
from agentlens.eval import FailureMode, get_scorer, run_scorers
from agentlens.eval._normalize import canonical, fingerprint, is_empty_result
from agentlens.eval.detectors._transcript import (
    excessive_steps,
    no_progress,
    repeated_tool_calls,
)
from agentlens.model import Step, StepKind, Verdict

QUERY = {"query": "brand voice guidelines"}
DOCS = [{"id": "DOC-1"}, {"id": "DOC-2"}, {"id": "DOC-3"}]


# --------------------------------------------------------------------------- repeated calls


def test_the_seed_example_is_flagged_with_steps_count_and_text() -> None:
    run = Run()
    run.call("search_knowledge", QUERY, DOCS, kind=StepKind.RETRIEVAL)
    run.text("drafting")
    run.call(
        "search_knowledge", {"query": "brand  voice guidelines "}, DOCS, kind=StepKind.RETRIEVAL
    )
    run.call("get_tenant", {"id": 7}, {"name": "acme"})
    run.call("search_knowledge", json.dumps(QUERY), list(DOCS), kind=StepKind.RETRIEVAL)
    result = score("repeated_tool_calls", run.trace())
    assert result.verdict is Verdict.FLAGGED
    assert modes(result) == ["repeated_tool_call"]
    finding = result.findings[0]
    assert finding.text == 'search_knowledge({"query": "brand voice guidelines"}) x3'
    assert finding.step_ids == ["s1", "s3", "s5"]
    assert finding.attributes["count"] == 3
    assert finding.attributes["tool"] == "search_knowledge"
    assert finding.attributes["args"] == QUERY
    assert finding.attributes["wasted_step_ids"] == ["s3", "s5"]
    assert result.value == 2.0
    assert "search_knowledge" in result.detail and "\n" not in result.detail


def test_two_identical_calls_are_below_the_default_threshold() -> None:
    run = Run().call("search", QUERY, DOCS).call("search", QUERY, DOCS)
    result = score("repeated_tool_calls", run.trace())
    assert result.passed and result.value == 0.0


def test_threshold_is_an_option() -> None:
    run = Run().call("search", QUERY, DOCS).call("search", QUERY, DOCS)
    assert modes(score("repeated_tool_calls", run.trace(), max_repeats=2)) == ["repeated_tool_call"]
    run.call("search", QUERY, DOCS)
    assert score("repeated_tool_calls", run.trace(), max_repeats=4).passed


def test_same_arguments_with_different_results_are_not_repeats() -> None:
    run = Run()
    for page in range(4):
        run.call("list_orders", {"customer": "C1"}, [{"order": page}])
    assert score("repeated_tool_calls", run.trace()).passed


def test_polling_until_done_is_not_a_loop() -> None:
    run = Run()
    for _ in range(4):
        run.call("job_status", {"job": "J1"}, {"state": "running"})
    run.call("job_status", {"job": "J1"}, {"state": "done"})
    assert score("repeated_tool_calls", run.trace()).passed
    # Without the polling rule the four identical "running" answers are repeats.
    result = score("repeated_tool_calls", run.trace(), polling=False)
    assert modes(result) == ["repeated_tool_call"]
    assert result.findings[0].attributes["count"] == 4


def test_polling_that_never_changes_is_a_loop() -> None:
    run = Run()
    for _ in range(4):
        run.call("job_status", {"job": "J1"}, {"state": "running"})
    assert modes(score("repeated_tool_calls", run.trace())) == ["repeated_tool_call"]


def test_paging_with_a_cursor_is_not_a_loop() -> None:
    run = Run()
    cursor = None
    for page in range(5):
        run.call("search", {"q": "x", "cursor": cursor}, {"items": [page], "next": f"c{page + 1}"})
        cursor = f"c{page + 1}"
    assert score("repeated_tool_calls", run.trace()).passed
    assert score("no_progress", run.trace()).passed


def test_rereading_a_file_after_editing_it_is_not_a_repeat() -> None:
    run = Run()
    for version in range(3):
        run.call("open", "open app.py", f"[File: app.py]\n1: x = {version}")
        run.call("edit", f"edit 1:1\nx = {version + 1}\nend_of_edit", "edited")
    assert score("repeated_tool_calls", run.trace()).passed


def test_exempt_tools_are_ignored() -> None:
    run = Run()
    for _ in range(4):
        run.call("health_check", {}, "ok")
    assert modes(score("repeated_tool_calls", run.trace())) == ["repeated_tool_call"]
    assert score("repeated_tool_calls", run.trace(), exempt_tools=["health_check"]).passed


def test_kinds_setting_decides_which_steps_count() -> None:
    run = Run()
    for _ in range(3):
        run.call("search", QUERY, DOCS, kind=StepKind.RETRIEVAL)
    assert not score("repeated_tool_calls", run.trace()).passed
    assert score("repeated_tool_calls", run.trace(), kinds=["tool"]).passed


def test_error_loop() -> None:
    run = Run()
    for _ in range(3):
        run.call("deploy", {"env": "prod"}, error="permission denied: role viewer")
    result = score("repeated_tool_calls", run.trace())
    assert modes(result) == ["error_loop"]
    finding = result.findings[0]
    assert finding.text.startswith('deploy({"env": "prod"}) failed x3')
    assert finding.attributes["error"] == "permission denied: role viewer"


def test_different_errors_not_in_a_row_or_fewer_failures_are_not_an_error_loop() -> None:
    run = Run()
    for n in range(3):
        run.call("deploy", {"env": "prod"}, error=f"quota exceeded: {n} left")
        run.call("edit_config", {"n": n}, "saved")
    assert score("repeated_tool_calls", run.trace()).passed
    run = (
        Run()
        .call("deploy", {"env": "prod"}, error="denied")
        .call("deploy", {"env": "prod"}, error="denied")
    )
    assert score("repeated_tool_calls", run.trace()).passed
    assert not score("repeated_tool_calls", run.trace(), max_errors=2).passed


def test_error_loop_is_flagged_even_when_the_call_later_succeeds() -> None:
    run = Run()
    for _ in range(3):
        run.call("fetch", {"url": "u"}, error="503")
    run.call("fetch", {"url": "u"}, "body")
    assert modes(score("repeated_tool_calls", run.trace())) == ["error_loop"]


def test_alternating_loop() -> None:
    run = Run()
    for _ in range(3):
        run.call("open", {"path": "a.py"}, "A")
        run.call("open", {"path": "b.py"}, "B")
    result = score("repeated_tool_calls", run.trace())
    assert modes(result) == ["alternating_loop"]
    finding = result.findings[0]
    assert finding.attributes["count"] == 3
    assert finding.step_ids == [f"s{i}" for i in range(1, 7)]
    assert finding.attributes["wasted_step_ids"] == ["s3", "s4", "s5", "s6"]
    assert " <-> " in finding.text and finding.text.endswith("x3")
    assert result.value == 4.0


def test_two_cycles_is_not_an_alternating_loop_by_default() -> None:
    run = Run()
    for _ in range(2):
        run.call("open", {"path": "a.py"}, "A")
        run.call("open", {"path": "b.py"}, "B")
    assert score("repeated_tool_calls", run.trace()).passed
    assert modes(score("repeated_tool_calls", run.trace(), min_cycles=2)) == ["alternating_loop"]


def test_alternation_with_changing_results_is_legitimate() -> None:
    run = Run()
    for i in range(4):
        run.call("edit", {"path": "a.py"}, f"edited v{i}")
        run.call("run_tests", {}, f"{4 - i} failures")
    assert score("repeated_tool_calls", run.trace()).passed


def test_waste_counts_tokens_time_money_and_the_llm_turns_that_chose_the_calls() -> None:
    run = Run()
    for _ in range(3):
        run.llm(usage={"prompt_tokens": 1000, "completion_tokens": 50}, cost_usd=0.01)
        run.call("search", QUERY, DOCS, seconds=2.0, input_tokens=7)
    result = score("repeated_tool_calls", run.trace())
    waste = result.findings[0].attributes["waste"]
    assert waste == {
        "steps": 2,
        "llm_steps": 2,
        "input_tokens": 2 * 1000 + 2 * 7,
        "output_tokens": 100,
        "total_tokens": 2114,
        "duration_s": 4.0,
        "cost_usd": 0.02,
    }
    assert result.attributes["waste"] == waste


def test_waste_without_cost_data_reports_only_steps() -> None:
    run = Run()
    run.steps = [
        Step(id=f"s{i}", kind=StepKind.TOOL, name="t", input={}, output="x") for i in range(3)
    ]
    result = score("repeated_tool_calls", run.trace())
    assert result.findings[0].attributes["waste"] == {"steps": 2, "llm_steps": 0}


def test_waste_reads_other_attribute_spellings() -> None:
    run = Run()
    for _ in range(3):
        attributes: dict[str, Any] = {
            "gen_ai.usage.input_tokens": 10,
            "cost": "0.5",
            "duration_ms": 250,
        }
        run.call("t", {}, "x", **attributes)
    waste = score("repeated_tool_calls", run.trace()).findings[0].attributes["waste"]
    assert waste["input_tokens"] == 20 and waste["cost_usd"] == 1.0
    assert waste["duration_s"] == 2.0  # step times win over duration_ms


def test_per_agent_settings_from_config() -> None:
    settings = Settings(
        agents={
            "poller": AgentSettings(
                scorers={"repeated_tool_calls": {"max_repeats": 5, "exempt_tools": ["status"]}}
            )
        }
    )
    for agent, flagged in (("poller", False), ("writer", True)):
        run = Run(agent=agent)
        for _ in range(4):
            run.call("status", {}, "same")
            run.call("search", {"q": agent}, "same result")
        # Interleaving keeps the alternation detector out of it: results differ between tools
        # only by name, so make the pattern A A B B instead.
        run.steps.sort(key=lambda s: (s.name, s.id))
        result = score("repeated_tool_calls", run.trace(), settings=settings)
        assert result.passed is not flagged, agent


def test_settings_from_an_agentlens_toml(tmp_path: Any) -> None:
    from agentlens.config import load_settings

    config = tmp_path / "agentlens.toml"
    config.write_text(
        "[agents.support.scorers.excessive_steps]\nmax_steps = 3\n"
        "[agents.support.scorers.no_progress]\nmin_stretch = 2\n",
        encoding="utf-8",
    )
    settings = load_settings(config_file=config)
    run = Run(agent="support")
    for i in range(4):
        run.call("lookup", {"i": i}, None)
    report = run_scorers(["excessive_steps", "no_progress"], trace=run.trace(), settings=settings)
    assert report.results["excessive_steps"].verdict is Verdict.FLAGGED
    assert report.results["no_progress"].verdict is Verdict.FLAGGED
    default = run_scorers(
        ["excessive_steps", "no_progress"], trace=run.trace(), settings=Settings()
    )
    assert default.results["excessive_steps"].passed and default.results["no_progress"].passed


def test_factories_bind_options_and_keep_the_version_for_defaults() -> None:
    assert repeated_tool_calls().stored_version == "2"
    bound = repeated_tool_calls(max_repeats=5, exempt_tools=("poll",))
    assert bound.name == "repeated_tool_calls"
    assert bound.options == {"max_repeats": 5, "exempt_tools": ["poll"]}
    assert bound.stored_version.startswith("2+")
    assert excessive_steps(max_steps=30).options == {"max_steps": 30}
    assert no_progress(min_stretch=8).options == {"min_stretch": 8}
    with pytest.raises(ConfigError, match="max_repeats"):
        repeated_tool_calls(max_repeats=1)


def test_bad_option_values_are_refused_when_bound_not_scored_as_errors() -> None:
    with pytest.raises(ConfigError, match="'max_repeats' must be an integer, got '3'"):
        get_scorer("repeated_tool_calls").with_options(max_repeats="3")


def test_a_run_without_tool_steps_passes_everything() -> None:
    trace = Run().text("hello").trace()
    for name in ("repeated_tool_calls", "excessive_steps", "no_progress"):
        assert score(name, trace).passed


# --------------------------------------------------------------------------- excessive_steps


def test_excessive_steps_over_budget() -> None:
    run = Run()
    for i in range(17):
        run.llm(output_tokens=10)
        run.call("lookup", {"i": i}, f"r{i}")
    result = score("excessive_steps", run.trace())
    assert modes(result) == ["excessive_steps"]
    assert result.value == 17.0
    finding = result.findings[0]
    assert finding.text == "17 tool steps (budget 15)"
    assert finding.step_ids == ["s32", "s34"]
    assert finding.attributes["waste"]["steps"] == 2
    assert finding.attributes["waste"]["output_tokens"] == 20
    assert finding.attributes["by_tool"] == {"lookup": 17}


def test_excessive_steps_at_budget_passes_and_budget_is_configurable() -> None:
    run = Run()
    for i in range(15):
        run.call("lookup", {"i": i}, f"r{i}")
    assert score("excessive_steps", run.trace()).passed
    assert not score("excessive_steps", run.trace(), max_steps=10).passed
    assert score("excessive_steps", run.trace(), max_steps=10, exempt_tools=["lookup"]).passed


def test_excessive_steps_ignores_llm_and_text_steps() -> None:
    run = Run()
    for _ in range(20):
        run.llm().text("thinking aloud")
    assert score("excessive_steps", run.trace()).passed


# --------------------------------------------------------------------------- no_progress


@pytest.mark.parametrize(
    "empty", [None, "", "   ", [], {}, "No results found.", {"results": [], "total": 0}, "[]"]
)
def test_no_progress_with_empty_results(empty: Any) -> None:
    run = Run().call("search", {"q": "first"}, DOCS)
    for i in range(5):
        run.call("search", {"q": f"variant {i}"}, empty)
    result = score("no_progress", run.trace())
    assert modes(result) == ["no_progress"]
    finding = result.findings[0]
    assert finding.step_ids == ["s2", "s3", "s4", "s5", "s6"]
    assert finding.attributes["empty"] == 5
    assert result.value == 5.0


def test_no_progress_with_results_identical_to_earlier_ones() -> None:
    run = Run()
    run.call("search", {"q": "a"}, DOCS)
    run.call("search", {"q": "b"}, ["other"])
    for i in range(5):
        run.call("search", {"q": f"c{i}"}, DOCS if i % 2 else ["other"])
    result = score("no_progress", run.trace())
    assert modes(result) == ["no_progress"]
    assert result.findings[0].attributes["repeated"] == 5


def test_a_new_result_breaks_the_stretch() -> None:
    run = Run().call("search", {"q": "a"}, DOCS)
    for i in range(8):
        run.call("search", {"q": f"b{i}"}, None if i != 4 else ["new fact"])
    assert score("no_progress", run.trace()).passed
    assert not score("no_progress", run.trace(), min_stretch=4).passed


def test_no_progress_ignores_steps_between_that_are_not_tools() -> None:
    run = Run()
    for i in range(5):
        run.call("search", {"q": str(i)}, [])
        run.text("hmm")
    assert not score("no_progress", run.trace()).passed


def test_no_progress_treats_polling_as_waiting() -> None:
    run = Run()
    for _ in range(6):
        run.call("job_status", {"job": "J1"}, {"state": "running"})
    run.call("job_status", {"job": "J1"}, {"state": "done"})
    assert score("no_progress", run.trace()).passed
    assert not score("no_progress", run.trace(), polling=False).passed


def test_the_three_scorers_together_on_one_run() -> None:
    run = Run()
    for _ in range(6):
        run.call("search", QUERY, [])
    report = run_scorers(
        ["repeated_tool_calls", "excessive_steps", "no_progress"],
        trace=run.trace(),
        settings=Settings(),
    )
    assert report.results["repeated_tool_calls"].failure_modes == [FailureMode.REPEATED_TOOL_CALL]
    assert report.results["excessive_steps"].passed
    # The first empty result is already "no new evidence".
    assert report.results["no_progress"].findings[0].attributes["count"] == 6


# --------------------------------------------------------------------------- normalisation

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


def _shuffled(value: Any, rnd: Any) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rnd.shuffle(items)
        return {k: _shuffled(v, rnd) for k, v in items}
    if isinstance(value, list):
        return [_shuffled(v, rnd) for v in value]
    return value


@given(value=json_values, rnd=st.randoms(use_true_random=False))
def test_fingerprint_ignores_key_order(value: Any, rnd: Any) -> None:
    assert fingerprint(_shuffled(value, rnd)) == fingerprint(value)


def test_fingerprint_of_keys_equal_once_stripped_ignores_their_order() -> None:
    """The keys " id" and "id" (or "" and a lone NEL, which strip() removes) become one; which
    value it keeps must not depend on the order the keys came in (found by hypothesis)."""
    assert fingerprint({"": None, "\x85": []}) == fingerprint({"\x85": [], "": None})
    assert fingerprint({"id": 1, " id": 2}) == fingerprint({" id": 2, "id": 1})


@given(
    value=json_values,
    indent=st.sampled_from([None, 0, 2, 4]),
    sep=st.sampled_from([(",", ":"), (", ", ": ")]),
)
def test_fingerprint_ignores_json_formatting(
    value: Any, indent: int | None, sep: tuple[str, str]
) -> None:
    assume(isinstance(value, dict | list))
    text = json.dumps(value, indent=indent, separators=sep)
    assert fingerprint(f"  {text}\n") == fingerprint(value)


@given(
    words=st.lists(st.text(alphabet="abcxyz:0", min_size=1, max_size=6), min_size=1, max_size=6),
    gaps=st.lists(st.sampled_from([" ", "  ", "\t", " \t "]), min_size=6, max_size=6),
    pad=st.sampled_from(["", " ", "\n", "\r\n", "\t "]),
)
def test_fingerprint_ignores_whitespace_inside_a_line(
    words: list[str], gaps: list[str], pad: str
) -> None:
    plain = " ".join(words)
    spaced = pad + "".join(w + g for w, g in zip(words, gaps, strict=False)).rstrip() + pad
    assert fingerprint({"q": spaced}) == fingerprint({"q": plain})


@given(lines=st.lists(st.text(alphabet="ab =()", max_size=10), min_size=2, max_size=5))
def test_line_endings_and_trailing_spaces_do_not_matter(lines: list[str]) -> None:
    unix = "\n".join(lines)
    windows = "\r\n".join(line + "  " for line in lines)
    assert canonical(unix) == canonical(windows)


@given(n=st.integers(-(2**52), 2**52))
def test_integral_floats_equal_ints(n: int) -> None:
    assert fingerprint({"n": float(n)}) == fingerprint({"n": n})
    assert fingerprint(f'{{"n": {n}.0}}') == fingerprint({"n": n})


def test_indentation_inside_code_is_kept() -> None:
    assert fingerprint("x = 1\n  y = 2") != fingerprint("x = 1\ny = 2")


def test_different_values_have_different_fingerprints() -> None:
    assert fingerprint({"q": "a"}) != fingerprint({"q": "b"})
    assert fingerprint({"n": 1}) != fingerprint({"n": True})
    assert fingerprint({"n": 1}) != fingerprint({"n": "1"})
    assert fingerprint([1, 2]) != fingerprint([2, 1])


@pytest.mark.parametrize(
    ("value", "empty"),
    [
        (None, True),
        ("", True),
        ("No results found.", True),
        ("0 matches", True),
        ({"items": [], "count": 0}, True),
        ("[]", True),
        ("No such file or directory", False),
        ("ok", False),
        ({"count": 0, "status": "ok"}, False),
        (False, False),
        (0, False),
        (["x"], False),
    ],
)
def test_is_empty_result(value: Any, empty: bool) -> None:
    assert is_empty_result(value) is empty
