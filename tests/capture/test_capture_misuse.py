"""Misuse of a run or a step never raises into the agent and never loses another run (issue 12
item 8): each case is refused, recorded or ignored, with a warning."""

from __future__ import annotations

import logging

import pytest

import agentlens
from agentlens.capture import InMemoryExporter, SimpleProcessor


@pytest.fixture
def exported(fresh_capture: None) -> InMemoryExporter:
    exporter = InMemoryExporter()
    agentlens.configure(processor=SimpleProcessor(exporter))
    return exporter


@agentlens.tool
def lookup(n: int) -> int:
    return n * 2


def test_entering_an_ended_run_again_leaves_no_run_current_and_loses_no_other(
    exported: InMemoryExporter, caplog: pytest.LogCaptureFixture
) -> None:
    first = agentlens.run(agent="a")
    with first:
        lookup(1)
    with first:  # misuse: the run already ended and was exported
        lookup(2)
    assert "already ended" in caplog.text
    assert agentlens.current_run() is None  # not current for good
    with agentlens.run(agent="b") as later:
        lookup(3)
    traces = {t.id: t for t in exported.traces}
    assert set(traces) == {first.id, later.id}
    assert "parent_run_id" not in traces[later.id].metadata
    assert [s.input for s in traces[later.id].steps] == [{"n": 3}]
    assert [s.input for s in traces[first.id].steps] == [{"n": 1}]


def test_entering_an_ended_run_inside_another_does_not_take_its_steps(
    exported: InMemoryExporter,
) -> None:
    done = agentlens.run(agent="a")
    with done:
        pass
    with agentlens.run(agent="outer") as outer:
        with done:
            lookup(5)  # recorded nowhere: not into the outer run
        lookup(6)
    traces = {t.id: t for t in exported.traces}
    assert [s.input for s in traces[outer.id].steps] == [{"n": 6}]


def test_links_or_metadata_set_to_none_are_recorded_empty_with_a_warning(
    exported: InMemoryExporter, caplog: pytest.LogCaptureFixture
) -> None:
    with agentlens.run(agent="a") as run:
        run.links = None  # type: ignore[assignment]
        run.output = "kept"
    with pytest.raises(ValueError), agentlens.run(agent="b") as failing:
        failing.metadata = None  # type: ignore[assignment]
        raise ValueError("boom")
    with agentlens.run(agent="c") as odd:
        odd.links = "T-1"  # type: ignore[assignment]
    traces = {t.id: t for t in exported.traces}
    assert traces[run.id].links == {} and traces[run.id].output == "kept"
    assert traces[failing.id].metadata["error"]["message"] == "boom"
    assert traces[odd.id].links == {"link": "T-1"}
    assert "links = None; recorded as empty" in caplog.text
    assert "links must be a dict, got str" in caplog.text


def test_step_attributes_set_to_none_or_a_non_dict_never_raise(
    exported: InMemoryExporter, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="agentlens"), agentlens.run(agent="a") as run:
        step = run.step("tool", "t", output=1)
        step.attributes = None  # type: ignore[assignment]
        other = run.step("tool", "u", output=2)
        other.attributes = ["not", "a", "dict"]  # type: ignore[assignment]
        other.attributes["more"] = 1
    (trace,) = exported.traces
    assert trace.id == run.id
    assert trace.steps[0].attributes == {}
    assert trace.steps[1].attributes == {"value": ["not", "a", "dict"], "more": 1}
    assert "attributes = None" in caplog.text and "must be a dict, got list" in caplog.text
