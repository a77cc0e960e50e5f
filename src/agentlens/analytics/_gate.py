"""The CI gate: is the rate (and its rise over a baseline) within bounds? JUnit XML and Markdown.

:func:`evaluate_gate` is pure: it takes the current window's :class:`RateReport` (and the
baseline's) and the limits, and says which checks pass. :func:`render_junit` and
:func:`render_markdown` turn the outcome, with the flagged runs' findings, into files for CI
(test reporters and GitHub job summaries).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agentlens.analytics._report import RateReport
from agentlens.analytics._trend import Trend, trend
from agentlens.model import Score

__all__ = [
    "FlaggedRun",
    "GateCheck",
    "GateResult",
    "evaluate_gate",
    "render_junit",
    "render_markdown",
]


@dataclass(frozen=True, slots=True)
class GateCheck:
    """One bound the gate checks."""

    name: str
    """``max_rate`` or ``max_increase``."""
    passed: bool
    actual: float
    """The measured value (a rate, or a difference of rates)."""
    limit: float
    message: str
    """One line for a human, e.g. ``rate 3.1% > 2.0%``."""
    measure: str = "rate"
    """What ``actual`` is: ``rate`` (the point estimate), ``upper_bound`` (the upper end of its
    95% Wilson interval) or ``difference`` (of the rates, for ``max_increase``)."""


@dataclass(frozen=True, slots=True)
class GateResult:
    """What the gate decided."""

    current: RateReport
    checks: tuple[GateCheck, ...]
    baseline: RateReport | None = None
    trend: Trend | None = None

    @property
    def passed(self) -> bool:
        """True when every check passed."""
        return all(c.passed for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        """``{"passed", "checks": [...], "current": {...}, "baseline": {...}|null, "trend": ...}``."""
        return {
            "passed": self.passed,
            "checks": [
                {
                    "name": c.name,
                    "passed": c.passed,
                    "actual": c.actual,
                    "limit": c.limit,
                    "message": c.message,
                    "measure": c.measure,
                }
                for c in self.checks
            ],
            "current": self.current.to_json(),
            "baseline": None if self.baseline is None else self.baseline.to_json(),
            "trend": None if self.trend is None else self.trend.model_dump(mode="json"),
        }


@dataclass(frozen=True, slots=True)
class FlaggedRun:
    """A flagged run with the scores that flagged it (for the reports)."""

    run_id: str
    scores: Sequence[Score] = field(default_factory=tuple)
    agent: str | None = None
    started_at: datetime | None = None


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:.2f}%"


def _pts(x: float) -> str:
    return f"{x * 100:+.2f} pts"


def evaluate_gate(
    current: RateReport,
    *,
    max_rate: float,
    baseline: RateReport | None = None,
    max_increase: float | None = None,
    significant_only: bool = False,
    alpha: float = 0.05,
    upper_bound: bool = False,
) -> GateResult:
    """Check the current window's rate against ``max_rate`` and, when given, its increase over
    ``baseline`` against ``max_increase``.

    ``max_rate`` bounds the point estimate (``rate <= max_rate`` passes), or with
    ``upper_bound`` the upper end of its 95% Wilson interval: the gate then passes only when the
    runs show the rate is at most ``max_rate`` (one clean run does not). ``max_increase``
    bounds ``rate - baseline.rate``; with ``significant_only`` an increase above it fails only when
    the two-proportion test also finds it larger than noise at ``alpha``.

    Raises:
        ValueError: a window with no scored runs (never a silent pass), a bound out of range, or
            ``max_increase`` without a ``baseline``.
    """
    if not 0.0 <= max_rate <= 1.0:
        raise ValueError(f"--max-rate must be between 0 and 1, got {max_rate}")
    if max_increase is not None:
        if not max_increase >= 0:  # NaN too
            raise ValueError(f"--max-increase must not be negative, got {max_increase}")
        if baseline is None:  # the check asked for cannot be made: never skipped silently
            raise ValueError("max_increase needs a baseline (the window to compare with)")
    if current.scored == 0 or current.rate is None:
        raise ValueError(
            f"no scored runs in the window ({current.runs} runs, {current.unverifiable} "
            f"unverifiable, {current.errors} errors, {current.unscored} unscored); "
            "score them first with `agentlens score`"
        )
    counted = f"{current.flagged} of {current.scored} scored runs flagged"
    if upper_bound:
        high = current.ci_high if current.ci_high is not None else current.rate
        check = GateCheck(
            name="max_rate",
            passed=high <= max_rate,
            actual=high,
            limit=max_rate,
            message=(
                f"upper bound of the 95% interval {_pct(high)} {'<=' if high <= max_rate else '>'}"
                f" {_pct(max_rate)} (rate {_pct(current.rate)}, {counted})"
            ),
            measure="upper_bound",
        )
    else:
        check = GateCheck(
            name="max_rate",
            passed=current.rate <= max_rate,
            actual=current.rate,
            limit=max_rate,
            message=(
                f"rate {_pct(current.rate)} {'<=' if current.rate <= max_rate else '>'} "
                f"{_pct(max_rate)} ({counted})"
            ),
        )
    checks = [check]
    change: Trend | None = None
    if baseline is not None:
        if baseline.scored == 0 or baseline.rate is None:
            raise ValueError(
                f"no scored runs in the baseline window ({baseline.runs} runs); "
                "a baseline without data cannot be compared"
            )
        change = trend(current, baseline, alpha=alpha)
        if max_increase is not None:
            over = change.difference > max_increase
            failed = over and (change.significant or not significant_only)
            note = f"p = {change.p_value:.3g}, {'significant' if change.significant else 'not significant'}"
            checks.append(
                GateCheck(
                    name="max_increase",
                    passed=not failed,
                    actual=change.difference,
                    limit=max_increase,
                    message=(
                        f"change {_pts(change.difference)} over the baseline "
                        f"({_pct(baseline.rate)}) {'>' if over else '<='} "
                        f"{_pts(max_increase).lstrip('+')} ({note})"
                        + (" — tolerated: not significant" if over and not failed else "")
                    ),
                    measure="difference",
                )
            )
    return GateResult(current=current, checks=tuple(checks), baseline=baseline, trend=change)


def _finding_lines(run: FlaggedRun) -> list[str]:
    lines = []
    for s in run.scores:
        if not s.findings:
            lines.append(f"{s.scorer}@{s.version}: {s.detail or str(s.verdict)}")
        for f in s.findings:
            where = f" at {f.start}-{f.end}" if f.start is not None and f.end is not None else ""
            loc = f" in {f.location}" if f.location and f.location != "output" else ""
            mode = str(f.failure_mode) if f.failure_mode is not None else "finding"
            extra = f" — {f.detail}" if f.detail else ""
            flag = " (unverifiable)" if f.unverifiable else ""
            lines.append(f"{s.scorer}: {mode}{flag}: {f.text!r}{loc}{where}{extra}")
    return lines or ["flagged (no findings recorded)"]


def render_junit(
    result: GateResult | None,
    runs: Sequence[FlaggedRun] = (),
    *,
    error: str | None = None,
    omitted: int = 0,
) -> str:
    """JUnit XML: one testcase for the gate (failure when it failed, error on a data error) and
    one per flagged run, failed, with its findings in the failure message.

    ``omitted`` flagged runs that were not listed are reported in the gate testcase.
    """
    suites = ET.Element("testsuites", name="agentlens")
    suite = ET.SubElement(
        suites, "testsuite", name="agentlens gate", timestamp=datetime.now(UTC).isoformat()
    )
    failures = errors = 0
    if result is not None:
        props = ET.SubElement(suite, "properties")
        cur = result.current
        for key, value in (
            ("rate", cur.rate),
            ("ci_low", cur.ci_low),
            ("ci_high", cur.ci_high),
            ("runs", cur.runs),
            ("scored", cur.scored),
            ("flagged", cur.flagged),
            ("unverifiable", cur.unverifiable),
            ("errors", cur.errors),
            ("unscored", cur.unscored),
        ):
            ET.SubElement(props, "property", name=key, value="" if value is None else str(value))
    gate = ET.SubElement(suite, "testcase", classname="agentlens.gate", name="hallucination rate")
    if error is not None:
        errors += 1
        ET.SubElement(gate, "error", message=error, type="DataError").text = error
    elif result is not None:
        text = "\n".join(c.message for c in result.checks)
        if omitted:
            text += f"\n{omitted} more flagged runs are not listed"
        if not result.passed:
            failures += 1
            failed = "; ".join(c.message for c in result.checks if not c.passed)
            ET.SubElement(gate, "failure", message=failed, type="GateFailed").text = text
        else:
            ET.SubElement(gate, "system-out").text = text
    for run in runs:
        failures += 1
        case = ET.SubElement(suite, "testcase", classname="agentlens.runs", name=run.run_id)
        lines = _finding_lines(run)
        ET.SubElement(case, "failure", message=lines[0], type="flagged").text = "\n".join(lines)
    tests = 1 + len(runs)
    for node in (suites, suite):
        node.set("tests", str(tests))
        node.set("failures", str(failures))
        node.set("errors", str(errors))
    ET.indent(suites)
    xml = ET.tostring(suites, encoding="unicode")
    return '<?xml version="1.0" encoding="utf-8"?>\n' + _NOT_XML.sub(_escape_char, xml) + "\n"


_NOT_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
"""Characters XML 1.0 cannot carry, even as character references (ElementTree writes them
raw, and a reader then rejects the whole file)."""


def _escape_char(match: re.Match[str]) -> str:
    """``\\x1b`` for the character ESC, as :func:`repr` writes it."""
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render_markdown(
    result: GateResult | None,
    runs: Sequence[FlaggedRun] = (),
    *,
    error: str | None = None,
    omitted: int = 0,
    window: str = "",
    baseline_window: str = "",
    max_bytes: int | None = None,
) -> str:
    """A Markdown summary for CI job summaries: the verdict, the rate and its interval, the
    baseline, a by-mode table, and the flagged runs with their findings.

    ``max_bytes``: the most the summary may take in UTF-8 (a GitHub job summary drops the whole
    step's summary past 1 MiB); flagged runs are left out from the end, and counted as not
    listed, until it fits.
    """
    text = _markdown(result, runs, error, omitted, window, baseline_window)
    if max_bytes is None or len(text.encode()) <= max_bytes:
        return text
    low, high = 0, len(runs)  # the most runs that fit: fewer runs, a shorter text
    while low < high:
        mid = (low + high + 1) // 2
        shorter = _markdown(
            result, runs[:mid], error, omitted + len(runs) - mid, window, baseline_window
        )
        if len(shorter.encode()) <= max_bytes:
            low = mid
        else:
            high = mid - 1
    return _markdown(result, runs[:low], error, omitted + len(runs) - low, window, baseline_window)


def _markdown(
    result: GateResult | None,
    runs: Sequence[FlaggedRun],
    error: str | None,
    omitted: int,
    window: str,
    baseline_window: str,
) -> str:
    out: list[str] = []
    if error is not None or result is None:
        out += ["## agentlens gate: ⚠️ error", "", _cell(error or "no result"), ""]
        if window:
            out += [f"Window: {window}", ""]
        if baseline_window:  # the error may be the baseline's: say which window that was
            out += [f"Baseline: {baseline_window}", ""]
        return "\n".join(out)
    cur = result.current
    verdict = "✅ passed" if result.passed else "❌ failed"
    out += [f"## agentlens gate: {verdict}", ""]
    out += ["| | |", "|---|---|"]
    if window:
        out.append(f"| Window | {_cell(window)} |")
    out.append(
        f"| Hallucination rate | **{_pct(cur.rate)}** (95% CI {_pct(cur.ci_low)} – "
        f"{_pct(cur.ci_high)}): {cur.flagged} of {cur.scored} scored runs |"
    )
    for c in result.checks:
        out.append(f"| {'✅' if c.passed else '❌'} `{c.name}` | {_cell(c.message)} |")
    if result.baseline is not None and result.trend is not None:
        base, t = result.baseline, result.trend
        label = f"Baseline ({_cell(baseline_window)})" if baseline_window else "Baseline"
        out.append(
            f"| {label} | {_pct(base.rate)} (95% CI {_pct(base.ci_low)} – {_pct(base.ci_high)}) "
            f"of {base.scored} scored runs; change {_pts(t.difference)}, p = {t.p_value:.3g}"
            f" ({'significant' if t.significant else 'not significant'}) |"
        )
    out.append(f"| Not verifiable (counted apart) | {cur.unverifiable} |")
    out.append(f"| Scorer errors (counted apart) | {cur.errors} |")
    out.append(f"| Not scored yet | {cur.unscored} |")
    out.append(f"| Runs in window | {cur.runs} |")
    if cur.scorers:
        listed = ", ".join(f"`{n}@{'/'.join(v) or '-'}`" for n, v in cur.scorers.items())
        out.append(f"| Scorers | {listed} |")
    out += [
        "",
        "### By failure mode",
        "",
        "| mode | flagged runs | share of scored runs |",
        "|---|---:|---:|",
    ]
    listed_modes = [
        (m, n) for m, n in cur.by_mode.items() if n or (cur.modes is not None and m in cur.modes)
    ]
    for mode, n in sorted(listed_modes, key=lambda kv: (-kv[1], kv[0])):
        share = n / cur.scored if cur.scored else 0.0
        out.append(f"| `{mode}` | {n} | {_pct(share)} |")
    if not listed_modes:
        out.append("| (none) | 0 | 0.00% |")
    out += ["", f"### Flagged runs ({cur.flagged})", ""]
    if not runs:
        out.append("None." if cur.flagged == 0 else "Not listed.")
    for run in runs:
        meta = ", ".join(
            x
            for x in (
                run.agent or "",
                run.started_at.strftime("%Y-%m-%d %H:%M UTC") if run.started_at else "",
            )
            if x
        )
        out.append(f"- `{run.run_id}`" + (f" ({meta})" if meta else ""))
        out.extend(f"  - {_cell(line)}" for line in _finding_lines(run))
    if omitted:
        out += ["", f"… and {omitted} more flagged runs (`agentlens rate --json` lists every id)."]
    out.append("")
    return "\n".join(out)
