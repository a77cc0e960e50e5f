"""The judge protocol: claims in, one verdict per claim out.

Every judge, whatever its backend, follows one rule: a claim that is correct but absent from the
evidence is NOT supported. A judge that errors, times out, runs out of budget or returns output
it cannot parse says ``unverifiable`` for the claims concerned, never ``supported``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, runtime_checkable

from agentlens.eval._claims import Claim
from agentlens.eval._evidence import EvidenceItem

__all__ = [
    "RULE",
    "ClaimVerdict",
    "EvidenceSpan",
    "Judge",
    "JudgeUsage",
    "Label",
    "as_claims",
    "unverifiable",
]

RULE = (
    "A claim is SUPPORTED only if the EVIDENCE states it or directly entails it. A claim that is "
    "correct but absent from the evidence (known from general knowledge) is NOT supported. If the "
    "evidence says nothing either way, the claim is unsupported."
)
"""The rule every judge instruction carries."""


class Label(StrEnum):
    """A judge's verdict on one claim."""

    SUPPORTED = "supported"
    """The evidence states or directly entails the claim."""
    UNSUPPORTED = "unsupported"
    """The evidence contradicts the claim, or does not contain it (even when it is true)."""
    UNVERIFIABLE = "unverifiable"
    """The judge could not decide: it failed, timed out, ran out of budget, or its reply was
    malformed. Never counted as supported."""


@dataclass(frozen=True, slots=True)
class EvidenceSpan:
    """Where in the evidence a verdict rests: an evidence item and a span of its text."""

    source: str
    """The evidence item's ``source`` (a step id, or ``"input"``)."""
    start: int
    """Start offset in the item's text."""
    end: int
    """End offset (exclusive) in the item's text."""
    text: str = ""
    """The quoted evidence (may be shortened)."""


@dataclass(frozen=True, slots=True)
class ClaimVerdict:
    """A judge's verdict on one claim."""

    label: Label
    """``supported``, ``unsupported`` or ``unverifiable``."""
    confidence: float
    """How sure the judge is of ``label``, 0 to 1."""
    reason: str
    """One line saying why."""
    evidence_span: EvidenceSpan | None = None
    """The evidence the verdict relied on (the closest evidence, for an unsupported claim)."""
    claim: Claim | None = None
    """The claim judged."""
    judge: str = ""
    """``backend/model`` of the judge that gave the verdict."""
    cached: bool = False
    """True when the verdict came from the cache (no call was made)."""
    input_tokens: int = 0
    """Prompt tokens spent on this claim (a batched call's usage is shared between its claims)."""
    output_tokens: int = 0
    """Completion tokens spent on this claim."""
    cost_usd: float = 0.0
    """Estimated cost of this claim's share of the calls."""
    error: str | None = None
    """What went wrong, for an ``unverifiable`` verdict caused by a failure."""

    @property
    def supported(self) -> bool:
        """True only for ``supported``."""
        return self.label is Label.SUPPORTED


@dataclass
class JudgeUsage:
    """Token, cost and call accounting over a judge's life (or one batch)."""

    calls: int = 0
    """Requests sent (retries included)."""
    retries: int = 0
    """Requests that were retries."""
    failures: int = 0
    """Batches that ended unverifiable because of an error, timeout or malformed reply."""
    cache_hits: int = 0
    """Claims answered from the cache."""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    budget_exhausted: int = 0
    """Claims left unverifiable because the batch budget ran out."""
    latency_s: float = 0.0
    """Wall time spent waiting for replies."""
    errors: list[str] = field(default_factory=list)
    """The distinct errors seen (at most a few)."""

    def as_dict(self) -> dict[str, float | int | list[str]]:
        """A JSON-friendly copy."""
        return {
            "calls": self.calls,
            "retries": self.retries,
            "failures": self.failures,
            "cache_hits": self.cache_hits,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": round(self.cost_usd, 6),
            "budget_exhausted": self.budget_exhausted,
            "latency_s": round(self.latency_s, 3),
            "errors": list(self.errors),
        }

    def note_error(self, text: str) -> None:
        """Remember an error message (the first few distinct ones)."""
        if text not in self.errors and len(self.errors) < 5:
            self.errors.append(text)


@runtime_checkable
class Judge(Protocol):
    """Decides, claim by claim, whether the evidence supports each claim.

    Implementations must return exactly one verdict per claim, in order, and must never turn a
    failure into ``supported``.
    """

    name: str
    """The backend name: ``offline``, ``openai``, ``anthropic``..."""
    model: str
    """The model (or algorithm version) used."""
    prompt_version: str
    """Bumped whenever the instruction changes: it is part of the cache key."""
    usage: JudgeUsage
    """Running accounting of calls, tokens and cost."""

    async def judge(
        self, *, claims: Sequence[Claim | str], evidence: Sequence[EvidenceItem] | str
    ) -> list[ClaimVerdict]:
        """One verdict per claim, in order, against ``evidence``."""
        ...


def as_claims(claims: Sequence[Claim | str]) -> list[Claim]:
    """Claims given as strings become :class:`Claim` spanning the whole string."""
    return [c if isinstance(c, Claim) else Claim(text=c, start=0, end=len(c)) for c in claims]


def unverifiable(
    claim: Claim, reason: str, *, judge: str = "", error: str | None = None
) -> ClaimVerdict:
    """The verdict for a claim the judge could not decide."""
    return ClaimVerdict(
        label=Label.UNVERIFIABLE,
        confidence=0.0,
        reason=reason,
        claim=claim,
        judge=judge,
        error=error,
    )
