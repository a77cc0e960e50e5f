"""A builder of traces for the transcript analysers' tests, and the helpers that score them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from agentlens.config import Settings
from agentlens.eval import get_scorer, run_scorers
from agentlens.model import ScoreResult, Step, StepKind, Trace

T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


class Run:
    """Builds a trace step by step, with deterministic ids and a clock."""

    def __init__(self, agent: str | None = None) -> None:
        self.steps: list[Step] = []
        self.agent = agent
        self.clock = T0

    def _id(self) -> str:
        return f"s{len(self.steps) + 1}"

    def call(
        self,
        name: str,
        args: Any,
        output: Any = None,
        *,
        error: Any = None,
        kind: StepKind = StepKind.TOOL,
        seconds: float = 1.0,
        **attributes: Any,
    ) -> Run:
        start = self.clock
        self.clock += timedelta(seconds=seconds)
        self.steps.append(
            Step(
                id=self._id(),
                kind=kind,
                name=name,
                input=args,
                output=output,
                error=error,
                started_at=start,
                ended_at=self.clock,
                attributes=attributes,
            )
        )
        return self

    def llm(self, output: Any = None, **attributes: Any) -> Run:
        self.steps.append(
            Step(
                id=self._id(), kind=StepKind.LLM, name="model", output=output, attributes=attributes
            )
        )
        return self

    def user(self, content: str) -> Run:
        self.steps.append(Step(id=self._id(), kind=StepKind.USER, output=content))
        return self

    def text(self, content: str) -> Run:
        self.steps.append(Step(id=self._id(), kind=StepKind.TEXT, output=content))
        return self

    def trace(self) -> Trace:
        return Trace(id="run-1", agent=self.agent, steps=self.steps, output="done")


def score(name: str, trace: Trace, settings: Settings | None = None, **options: Any) -> ScoreResult:
    scorer = get_scorer(name)
    if options:
        scorer = scorer.with_options(**options)
    report = run_scorers([scorer], trace=trace, settings=settings or Settings())
    result = report.results[name]
    assert result.error is None, result.error
    return result


def modes(result: ScoreResult) -> list[str]:
    return [str(f.failure_mode) for f in result.findings]
