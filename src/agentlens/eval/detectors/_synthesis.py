"""``faithful_synthesis``: every claim of every assistant turn must be supported by the evidence
that came before it, as decided by a judge; and :func:`judged_leakage`, the judged half of
``parametric_leakage``.

The judge is ``offline`` unless the scorer's options or the ``[judge]`` table say otherwise. A
claim the judge could not decide (failure, timeout, budget) is reported as an ``unverifiable``
finding, never as a pass; so is an unsupported claim when the evidence was truncated at its source.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from agentlens.eval._evidence import Evidence, Turn
from agentlens.eval._scorer import VERSION_TAG, Bound, scorer
from agentlens.model import FailureMode, Finding, ScoreResult, Trace

if TYPE_CHECKING:  # pragma: no cover
    from agentlens.eval._claims import Claim
    from agentlens.eval.judges import Judge, OfflineJudge
    from agentlens.eval.judges._protocol import ClaimVerdict

# The judges (and the claim splitter) are imported when a judge is first needed: registering
# this scorer, or scoring with the others, does not need them.

__all__ = [
    "ajudged_leakage",
    "build_judge",
    "faithful_synthesis",
    "judge_identity",
    "judge_rules",
    "judged_leakage",
    "resolve_judge",
]

_JUDGES: dict[tuple[Any, ...], Judge] = {}
_LOCK = threading.Lock()


def resolve_judge(judge: Judge | str | None = None, **options: Any) -> Judge:
    """A judge instance: ``judge`` itself, a backend name built with ``options``, or (``None``)
    the configured one (``[judge]`` table, ``AGENTLENS_JUDGE_*``, default ``offline``).

    Built judges are kept per configuration, so their verdict cache lives across runs.
    """
    if judge is not None and not isinstance(judge, str):
        return judge
    opts = {k: v for k, v in options.items() if v is not None}
    key = (judge, tuple(sorted((k, repr(v)) for k, v in opts.items())))
    from agentlens.eval.judges import get_judge, judge_from_settings

    with _LOCK:
        found = _JUDGES.get(key)
        if found is None:
            found = judge_from_settings(**opts) if judge is None else get_judge(judge, **opts)
            _JUDGES[key] = found
        return found


async def _judge_turn(judge: Judge, turn: Turn) -> list[tuple[Claim, ClaimVerdict]]:
    from agentlens.eval._claims import extract_claims
    from agentlens.eval.judges._protocol import ClaimVerdict, Label

    claims = extract_claims(turn.text)
    if not claims:
        return []
    verdicts = await judge.judge(claims=claims, evidence=turn.evidence)
    if len(verdicts) != len(claims):  # a judge that breaks the protocol decides nothing
        return [
            (
                c,
                ClaimVerdict(
                    Label.UNVERIFIABLE,
                    0.0,
                    "the judge returned the wrong number of verdicts",
                    claim=c,
                    judge=getattr(judge, "name", ""),
                ),
            )
            for c in claims
        ]
    return list(zip(claims, verdicts, strict=True))


def _finding(
    mode: FailureMode | None,
    claim: Claim,
    verdict: ClaimVerdict,
    turn: Turn,
    *,
    unverifiable: bool = False,
    reason: str | None = None,
) -> Finding:
    span = verdict.evidence_span
    attrs: dict[str, Any] = {
        "confidence": verdict.confidence,
        "judge": verdict.judge,
        "label": str(verdict.label),
    }
    if span is not None:
        attrs["evidence"] = {
            "source": span.source,
            "start": span.start,
            "end": span.end,
            "text": span.text,
        }
    if verdict.cached:
        attrs["cached"] = True
    if verdict.error:
        attrs["error"] = verdict.error
    return Finding(
        failure_mode=mode,
        text=claim.text,
        start=claim.start,
        end=claim.end,
        location=turn.location,
        step_ids=[] if turn.location == "output" else [turn.location],
        supported_by=span.source if (mode is None and span is not None) else None,
        unverifiable=unverifiable,
        detail=reason or verdict.reason,
        attributes=attrs,
    )


def _classify(
    mode: FailureMode, turn: Turn, claim: Claim, verdict: ClaimVerdict
) -> tuple[str, Finding]:
    from agentlens.eval.judges._protocol import Label

    if verdict.label is Label.SUPPORTED:
        return "supported", _finding(None, claim, verdict, turn)
    if verdict.label is Label.UNVERIFIABLE:
        return "unverifiable", _finding(mode, claim, verdict, turn, unverifiable=True)
    if turn.truncated:
        return "unverifiable", _finding(
            mode,
            claim,
            verdict,
            turn,
            unverifiable=True,
            reason=f"not found, but the evidence was truncated at its source: {verdict.reason}",
        )
    return "unsupported", _finding(mode, claim, verdict, turn)


def judge_rules(judge: Judge) -> str | None:
    """The judge's rules as they are shown in a scorer's stored version: its ``prompt_version``
    (``offline-6``, ``llm-1``), which changes whenever its verdicts may, so that a new judge
    re-scores history. ``None`` for a judge without one, or with one that is not a plain token
    (letters, digits, ``.``, ``_``, ``-``: :func:`judge_identity` hashes that one instead)."""
    rules = getattr(judge, "prompt_version", None)
    return rules if isinstance(rules, str) and VERSION_TAG.fullmatch(rules) else None


def judge_identity(judge: Judge) -> dict[str, Any]:
    """What else of a judge changes its verdicts, as it is hashed into a scorer's stored version:
    its backend and model, or for the offline judge its mode and threshold; nothing for the
    default offline judge (whose scorers' version is then the declared one and
    :func:`judge_rules`: ``1+offline-6``). A ``prompt_version`` that cannot be shown as it is
    (not a plain token) is hashed here."""
    identity = _identity(judge)
    rules = getattr(judge, "prompt_version", None)
    if rules is not None and judge_rules(judge) is None:
        identity["prompt_version"] = str(rules)
    return identity


def _identity(judge: Judge) -> dict[str, Any]:
    name = str(getattr(judge, "name", type(judge).__qualname__))
    if name != "offline":
        return {"judge": name, "model": str(getattr(judge, "model", ""))}
    identity: dict[str, Any] = {}
    default = _default_offline()
    if getattr(judge, "mode", default.mode) != default.mode:
        identity["mode"] = judge.mode  # type: ignore[attr-defined]
    if getattr(judge, "min_coverage", default.min_coverage) != default.min_coverage:
        identity["min_coverage"] = judge.min_coverage  # type: ignore[attr-defined]
    if getattr(judge, "model", default.model) != default.model and not identity:
        identity["model"] = judge.model
    return identity


@cache
def _default_offline() -> OfflineJudge:
    """The offline judge with its defaults (what an unconfigured judge is compared with)."""
    from agentlens.eval.judges import OfflineJudge

    return OfflineJudge()


def build_judge(
    judge: Judge | str | None,
    options: Mapping[str, Any],
    settings: Any,
    *,
    backend_from_settings: bool,
) -> Judge | None:
    """The judge a scorer uses, built now so that a bad backend, a missing model or a refused
    endpoint is an error when the scorer is made, not an ``error`` score on every run.

    The settings' judge configuration (``[judge]``, ``AGENTLENS_JUDGE_*``) gives the defaults,
    the scorer's own options win; its backend applies only when ``backend_from_settings``
    (``faithful_synthesis``; ``parametric_leakage`` uses a judge only when its own ``judge``
    option names one). Without settings and without a backend: ``None``, the configured judge
    is resolved when the scorer first runs.

    Raises:
        ConfigError: an unknown backend or option, a missing model, or a ``base_url`` from the
            configuration file without the opt-in.
    """
    if judge is not None and not isinstance(judge, str):
        return judge
    given = {k: v for k, v in options.items() if v is not None}
    if settings is None:
        return None if judge is None else resolve_judge(judge, **given)
    from agentlens.eval.judges import check_file_base_url, judge_options

    table = judge_options(getattr(settings, "judge", None) or {})
    configured = table.pop("backend", None)
    backend = judge or (configured if backend_from_settings else None) or "offline"
    if "base_url" not in given:
        check_file_base_url(settings, backend, table.get("base_url"))
    return resolve_judge(backend, **{**table, **given})


@scorer(name="faithful_synthesis", version="1", register=False)
def faithful_synthesis(
    *,
    judge: Any = None,
    model: str | None = None,
    base_url: str | None = None,
    mode: str | None = None,
    timeout: float | None = None,
    max_concurrency: int | None = None,
    budget_usd: float | None = None,
    cache: str | None = None,
    settings: Any = None,
) -> Bound:
    """Every claim of every assistant turn is supported by the evidence before it (judged).

    Fails when any claim of an assistant turn is not supported by the evidence before it, as
    judged claim by claim.

    Args:
        judge: ``offline`` (default unless configured), ``openai``, ``anthropic``, or a Judge.
        model, base_url, timeout, max_concurrency, budget_usd, cache: passed to the judge.
        mode: the offline judge's mode: ``balanced`` (default), ``strict`` or ``lenient``.
    """
    options = dict(
        model=model,
        base_url=base_url,
        mode=mode,
        timeout=timeout,
        max_concurrency=max_concurrency,
        budget_usd=budget_usd,
        cache=cache,
    )
    built = build_judge(judge, options, settings, backend_from_settings=True)

    async def score(*, trace: Trace, evidence: Evidence) -> ScoreResult:
        the_judge = built if built is not None else resolve_judge(None, **options)
        return await _faithful_synthesis(evidence, the_judge)

    if built is not None:
        identity, rules = judge_identity(built), judge_rules(built)
    else:  # the configured judge, resolved at the first run: what was given is what is known
        # (and the default judge's rules: `agentlens score` and the review pipeline always bind
        # with the settings, so what they store names the judge they use)
        identity = {k: v for k, v in (("model", model), ("mode", mode)) if v is not None}
        if identity.get("mode") == _default_offline().mode:
            del identity["mode"]
        rules = judge_rules(_default_offline())
    return Bound(score, identity, version_tag=rules)


async def _faithful_synthesis(evidence: Evidence, the_judge: Judge) -> ScoreResult:
    import asyncio  # (imported when used: with ssl and sockets, about 20 ms)

    turns = evidence.turns
    results = await asyncio.gather(*(_judge_turn(the_judge, t) for t in turns))
    findings: list[Finding] = []
    grounded: list[Finding] = []
    counts = {"supported": 0, "unsupported": 0, "unverifiable": 0}
    tokens_in = tokens_out = cached = 0
    cost = 0.0
    for turn, pairs in zip(turns, results, strict=True):
        for claim, verdict in pairs:
            kind, finding = _classify(FailureMode.UNSUPPORTED_SYNTHESIS, turn, claim, verdict)
            counts[kind] += 1
            (grounded if kind == "supported" else findings).append(finding)
            tokens_in += verdict.input_tokens
            tokens_out += verdict.output_tokens
            cost += verdict.cost_usd
            cached += verdict.cached
    total = sum(counts.values())
    who = f"{the_judge.name}/{the_judge.model}"
    if total == 0:
        detail = "no checkable claims"
    else:
        detail = f"{counts['supported']} of {total} claims supported"
        extra = [f"{counts[k]} {k}" for k in ("unsupported", "unverifiable") if counts[k]]
        if extra:
            detail += "; " + ", ".join(extra)
        detail += f" (judge {who})"
    return ScoreResult(
        passed=not findings,
        value=counts["supported"] / total if total else 1.0,
        detail=detail,
        findings=findings,
        grounded=grounded,
        attributes={
            "judge": the_judge.name,
            "judge_model": the_judge.model,
            "prompt_version": getattr(the_judge, "prompt_version", None),
            "claims": total,
            **counts,
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "cost_usd": round(cost, 6),
            "cache_hits": cached,
        },
    )


async def ajudged_leakage(
    trace: Trace, evidence: Evidence | None = None, judge: Judge | str | None = None, **options: Any
) -> list[Finding]:
    """The judged half of ``parametric_leakage``: claims of each assistant turn that the judge
    finds absent from the evidence before it, as ``parametric_leakage`` findings. A claim the
    judge could not decide gives a finding with ``unverifiable=True``."""
    import asyncio  # (imported when used: with ssl and sockets, about 20 ms)

    ev = evidence if evidence is not None else Evidence(trace)
    the_judge = resolve_judge(judge, **options)
    turns = ev.turns
    results = await asyncio.gather(*(_judge_turn(the_judge, t) for t in turns))
    out: list[Finding] = []
    for turn, pairs in zip(turns, results, strict=True):
        for claim, verdict in pairs:
            kind, finding = _classify(FailureMode.PARAMETRIC_LEAKAGE, turn, claim, verdict)
            if kind != "supported":
                out.append(finding)
    return out


def judged_leakage(
    trace: Trace, evidence: Evidence | None = None, judge: Judge | str | None = None, **options: Any
) -> list[Finding]:
    """Synchronous :func:`ajudged_leakage`; safe to call from a sync scorer even when an event
    loop is running in this thread (the judge then runs in a worker thread)."""
    import asyncio  # (imported when used: with ssl and sockets, about 20 ms)

    coro_args: tuple[Trace, Evidence | None, Judge | str | None] = (trace, evidence, judge)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(ajudged_leakage(*coro_args, **options))
    box: list[Any] = []

    def work() -> None:
        try:
            box.append(asyncio.run(ajudged_leakage(*coro_args, **options)))
        except BaseException as exc:
            box.append(exc)

    worker = threading.Thread(target=work, name="agentlens-judge")
    worker.start()
    worker.join()
    if isinstance(box[0], BaseException):
        raise box[0]
    result: list[Finding] = box[0]
    return result
