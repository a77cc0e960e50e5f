"""The gate: its JUnit XML stays well-formed whatever text the runs carry; its checks are the
ones asked for."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

from agentlens.analytics import FlaggedRun, evaluate_gate, render_junit
from agentlens.model import FailureMode, Finding, Score, Verdict


def test_control_characters_from_a_trace_do_not_break_the_xml() -> None:
    """A run id, a scorer's detail or a finding's location may hold characters XML 1.0 cannot
    carry (an ANSI colour from a tool's output, a NUL): ElementTree wrote them raw, and every
    JUnit reader rejected the whole file (`not well-formed (invalid token)`)."""
    score = Score(
        run_id="run\x01",
        scorer="refs",
        version="1",
        passed=False,
        verdict=Verdict.FLAGGED,
        findings=[
            Finding(
                failure_mode=FailureMode.FABRICATED_GROUNDING,
                text="ID-1",
                location="step\x00",
                detail="\x1b[31mID-1\x1b[0m is not in the evidence\x0c",
            )
        ],
    )
    xml = render_junit(None, [FlaggedRun(run_id="run\x01", scores=[score])], error="bad\x02")
    root = ET.fromstring(xml.encode("utf-8"))
    (case,) = [c for c in root.iter("testcase") if c.get("classname") == "agentlens.runs"]
    assert case.get("name") == "run\\x01"
    failure = case.find("failure")
    assert failure is not None
    assert "\\x1b[31mID-1\\x1b[0m is not in the evidence\\x0c" in (failure.text or "")
    assert "in step\\x00" in (failure.get("message") or "")
    error = root.find("testsuite/testcase/error")
    assert error is not None and error.get("message") == "bad\\x02"


def test_text_xml_can_carry_is_kept_as_it_is() -> None:
    score = Score(
        run_id="r1",
        scorer="refs",
        version="1",
        passed=False,
        verdict=Verdict.FLAGGED,
        findings=[Finding(failure_mode=FailureMode.PARAMETRIC_LEAKAGE, text="Zürich <&> ✓\ttab")],
    )
    root = ET.fromstring(render_junit(None, [FlaggedRun(run_id="r1", scores=[score])]).encode())
    failure = root.find("testsuite/testcase[@name='r1']/failure")
    assert failure is not None and "'Zürich <&> ✓\\ttab'" in (failure.text or "")


def _report(flagged: int, scored: int) -> Any:
    from agentlens.analytics import RateReport
    from agentlens.store import RateCounts

    return RateReport.from_counts(RateCounts(runs=scored, flagged=flagged, passed=scored - flagged))


def test_max_increase_without_a_baseline_is_refused_not_skipped() -> None:
    """evaluate_gate(..., max_increase=0.01) without a baseline passed without the increase
    check it was asked for (only the CLI refused --max-increase without --baseline-since)."""
    with pytest.raises(ValueError, match="max_increase needs a baseline"):
        evaluate_gate(_report(1, 100), max_rate=0.05, max_increase=0.01)
    with pytest.raises(ValueError, match="must not be negative"):
        evaluate_gate(_report(1, 100), max_rate=0.05, baseline=_report(0, 0), max_increase=-0.1)
    checked = evaluate_gate(
        _report(10, 100), max_rate=0.5, baseline=_report(1, 100), max_increase=0.01
    )
    assert [c.name for c in checked.checks] == ["max_rate", "max_increase"]
    assert not checked.passed
