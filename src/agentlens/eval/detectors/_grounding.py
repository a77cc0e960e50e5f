"""The deterministic grounding checks: ``no_fabricated_refs`` and ``parametric_leakage``.

Both look at every assistant turn of a run (:attr:`Evidence.turns`) and check what it says
against the evidence that came *before* that turn, never against tool arguments or the model's
own earlier words. A reference or fact that cannot be found while some earlier evidence was
truncated at its source is reported as unverifiable, not as a hallucination.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentlens.errors import ConfigError
from agentlens.eval._evidence import Evidence, EvidenceItem, Turn
from agentlens.eval._facts import FACT_KINDS, Fact, extract_facts, fact_tolerance, name_tokens
from agentlens.eval._index import EvidenceIndex, Match
from agentlens.eval._quantities import MONEY, NUMBER, RATE, claim_kind, operand_kinds
from agentlens.eval._references import Extractor, Reference, get_extractor
from agentlens.eval._scorer import Bound, ScorerFn, WithRow, scorer
from agentlens.model import FailureMode, Finding, ScoreResult, ScoreRow, Trace
from agentlens.model._built import build_model, same_model
from agentlens.model._score import derive_verdict, passed_row

if TYPE_CHECKING:  # pragma: no cover
    from agentlens.eval.judges import Judge

__all__ = ["no_fabricated_refs", "parametric_leakage"]

Patterns = Sequence[str] | Mapping[str, str]


def _patterns_option(patterns: Patterns | str) -> list[str] | dict[str, str]:
    if isinstance(patterns, str):
        return [patterns]
    return dict(patterns) if isinstance(patterns, Mapping) else list(patterns)


def _extractor(patterns: Patterns | str | None, kinds: Iterable[str] | str | None) -> Extractor:
    if isinstance(kinds, str):
        kinds = [kinds]
    if patterns is not None and not isinstance(patterns, str | Sequence | Mapping):
        raise ConfigError("option 'patterns' must be a list of regular expressions or a table")
    return get_extractor(patterns, kinds)


def _index(evidence: Evidence, extractor: Extractor) -> EvidenceIndex:
    base = evidence.memo(("grounding.index",), lambda: EvidenceIndex(evidence.items))
    return base.with_extractor(extractor)


def _refs(evidence: Evidence, extractor: Extractor) -> list[list[Reference]]:
    """The references of every turn (in the order of :attr:`Evidence.turns`), found once per
    run and extractor and shared by both scorers."""
    return evidence.memo(
        ("grounding.refs", id(extractor)),
        lambda: [extractor.extract(t.text) for t in evidence.turns],
    )


def _step_ids(turn: Turn) -> list[str]:
    return [] if turn.location == "output" else [turn.location]


def _where(item: EvidenceItem) -> str:
    if item.source == "input":
        return "the run's input"
    return f"step {item.source}" + (f" {item.name}" if item.name else "")


def _grounded_plain(
    text: str, start: int, end: int, turn: Turn, match: Match, kind: str
) -> Finding:
    """A grounded claim, validated from its values (the definition)."""
    return Finding(**_grounded_values(text, start, end, turn, match, kind))


def _grounded_values(
    text: str, start: int, end: int, turn: Turn, match: Match, kind: str
) -> dict[str, Any]:
    return {
        "failure_mode": None,
        "text": text,
        "start": start,
        "end": end,
        "location": turn.location,
        "step_ids": _step_ids(turn),
        "supported_by": match.item.source,
        "unverifiable": False,
        "detail": "",
        "attributes": {"kind": kind, "derived": match.text} if match.derived else {"kind": kind},
    }


# Built through pydantic's own slots (build_model): a run has dozens of grounded claims, and
# ``model_construct`` (or ``object.__setattr__`` by name) costs more than the claim's check.
_FINDING_FIELDS = frozenset(Finding.model_fields)
_RESULT_FIELDS_SET = frozenset(
    ("passed", "value", "detail", "findings", "grounded", "attributes", "verdict")
)
"""The fields a validated grounding result has set: those given, and the derived verdict."""


def _claim(text: str, start: int, end: int, turn: Turn, match: Match, kind: str) -> dict[str, Any]:
    """:func:`_grounded_values` written out (a run has dozens of claims): a grounded claim's
    fields, every one of :class:`Finding`'s in its declared order, each of its declared type.
    A claim is kept in this form until its score is made (:func:`_result`), or, for a run that
    passed, until its row is (:func:`_row`), which needs no model of it at all."""
    location = turn.location
    return {
        "failure_mode": None,
        "text": text,
        "start": start,
        "end": end,
        "location": location,
        "step_ids": [] if location == "output" else [location],
        "supported_by": match.item.source,
        "unverifiable": False,
        "detail": "",
        "attributes": {"kind": kind, "derived": match.text} if match.derived else {"kind": kind},
    }


def _finding_fast(values: dict[str, Any]) -> Finding:
    """``Finding(**values)`` for a claim's fields (:func:`_claim`), without pydantic's walk over
    the fields: the dict becomes the model's own."""
    return build_model(Finding, values, set(_FINDING_FIELDS))


def _finding_plain(values: dict[str, Any]) -> Finding:
    """A claim's finding, validated from its fields (the definition)."""
    return Finding(**values)


def _result_plain(
    passed: bool,
    value: float,
    detail: str,
    findings: list[Finding],
    grounded: list[Finding],
    attributes: dict[str, Any],
) -> ScoreResult:
    """A grounding scorer's result as validation builds it (the definition)."""
    return ScoreResult(
        passed=passed,
        value=value,
        detail=detail,
        findings=findings,
        grounded=grounded,
        attributes=attributes,
    )


def _result_fast(
    passed: bool,
    value: float,
    detail: str,
    findings: list[Finding],
    grounded: list[Finding],
    attributes: dict[str, Any],
) -> ScoreResult:
    """:func:`_result_plain` from values already of their fields' types (the scorer's own
    findings, a float, a fresh dict): the verdict derived as ``ScoreResult`` derives it,
    without validating every grounded claim again."""
    return build_model(
        ScoreResult,
        {
            "passed": passed,
            "value": value,
            "detail": detail,
            "findings": findings,
            "grounded": grounded,
            "verdict": derive_verdict(passed, None, findings),
            "error": None,
            "attributes": attributes,
        },
        set(_RESULT_FIELDS_SET),
    )


def _pick_fast_paths() -> tuple[Any, Any]:
    """The fast builders when they build exactly what the plain ones build (checked here, once:
    a claim found as such and a derived one, and a result of each verdict), else the plain
    ones."""
    item = EvidenceItem(source="s0", kind="tool", name="t", value=None, text="x", index=0)
    turn = Turn(location="s1", value="x", text="x", index=1, evidence=(item,))
    claims = [
        ("x", 0, 1, turn, Match(item, "x"), "id"),
        ("$3", 2, 4, turn, Match(item, "1 + 2", True), "money"),
    ]
    bad = Finding(failure_mode=FailureMode.FABRICATED_GROUNDING, text="y")
    unsure = Finding(failure_mode=FailureMode.FABRICATED_GROUNDING, text="z", unverifiable=True)
    try:
        for c in claims:
            if list(_claim(*c).items()) != list(_grounded_values(*c).items()) or not same_model(
                _finding_fast(_claim(*c)), _grounded_plain(*c)
            ):
                return _finding_plain, _result_plain  # pragma: no cover
        grounded = [_grounded_plain(*c) for c in claims]
        for passed, findings in ((True, []), (False, [bad, unsure]), (False, [unsure])):
            args = (passed, 1.0, "d", findings, grounded, {"a": 1})
            if not same_model(_result_fast(*args), _result_plain(*args)):
                return _finding_fast, _result_plain  # pragma: no cover
    except Exception:  # pragma: no cover - a pydantic whose internals differ
        return _finding_plain, _result_plain
    return _finding_fast, _result_fast


_finding, _score_result = _pick_fast_paths()


def _summary(findings: list[Finding], label: str) -> str:
    flagged = [f.text for f in findings if not f.unverifiable]
    unverifiable = [f.text for f in findings if f.unverifiable]
    parts = []
    if flagged:
        parts.append(f"{label}: " + ", ".join(dict.fromkeys(flagged)))
    if unverifiable:
        parts.append("unverifiable (truncated evidence): " + ", ".join(dict.fromkeys(unverifiable)))
    return "; ".join(parts)


def _result(
    findings: list[Finding],
    grounded: list[dict[str, Any]],
    label: str,
    noun: str,
    attributes: dict[str, Any] | None = None,
) -> ScoreResult:
    """A grounding scorer's result: passed without findings; the value counts the flagged ones
    (not the unverifiable); the detail names the findings, or how many ``noun``s were grounded.
    ``grounded``: the grounded claims' fields (:func:`_claim`)."""
    flagged = sum(not f.unverifiable for f in findings)
    return _score_result(
        not findings,
        float(flagged),
        _summary(findings, label) or _grounded_detail(grounded, noun),
        findings,
        [_finding(c) for c in grounded],
        attributes or {},
    )


def _grounded_detail(grounded: list[dict[str, Any]], noun: str) -> str:
    return f"{len(grounded)} {noun}{'s' if len(grounded) != 1 else ''} grounded"


def _row(
    findings: list[Finding],
    grounded: list[dict[str, Any]],
    label: str,
    noun: str,
    attributes: dict[str, Any],
    key: tuple[str, str, str],
) -> ScoreRow | ScoreResult:
    """What :class:`~agentlens.eval._scorer.WithRow` gives for :func:`_result`'s result: for a run
    that passed, its stored row (``key``: run id, scorer, stored version), made from the
    claims' fields without a model of the score or of any claim; otherwise (or when a value is
    not one :func:`~agentlens.model._score.passed_row` writes) the result."""
    if not findings:
        row = passed_row(
            *key,
            value=0.0,
            detail=_grounded_detail(grounded, noun),
            grounded=grounded,
            attributes=attributes,
        )
        if row is not None:
            return row
    return _result(findings, grounded, label, noun, attributes)


# --------------------------------------------------------------------------- no_fabricated_refs


@scorer(name="no_fabricated_refs", version="4", register=False)
def no_fabricated_refs(
    *, patterns: Patterns | str | None = None, kinds: Sequence[str] | str | None = None
) -> ScorerFn:
    """Every reference in an answer (id, code, amount, date, URL...) is in the evidence before it.

    Fails when any reference in an assistant turn is absent from the evidence available at that
    point. Each finding names the exact token, its span, and the closest evidence token.

    Args:
        patterns: extra reference shapes as regular expressions (a list, or a table of
            kind name -> expression), e.g. ``[r"CUST-\\d{5}", r"DOC-[a-f0-9]{8}"]``.
        kinds: the built-in kinds to check (default all): ``id``, ``code``, ``uuid``,
            ``money``, ``percent``, ``date``, ``url``, ``email``, ``citation``.
    """
    extractor = _extractor(patterns, kinds)  # a bad pattern or kind fails here, not per run

    def score(*, trace: Trace, evidence: Evidence) -> ScoreResult:
        return _no_fabricated_refs(evidence, extractor)

    def row(evidence: Evidence, run_id: str, name: str, version: str) -> ScoreRow | ScoreResult:
        findings, grounded = _check_refs(evidence, extractor)
        key = (run_id, name, version)
        return _row(findings, grounded, "ungrounded", "reference", {}, key)

    return WithRow(score, row)


def _no_fabricated_refs(evidence: Evidence, extractor: Extractor) -> ScoreResult:
    """``no_fabricated_refs``'s result for a run."""
    return _result(*_check_refs(evidence, extractor), "ungrounded", "reference")


def _check_refs(
    evidence: Evidence, extractor: Extractor
) -> tuple[list[Finding], list[dict[str, Any]]]:
    """The findings of ``no_fabricated_refs`` on a run, and its grounded claims' fields."""
    index = _index(evidence, extractor)
    findings: list[Finding] = []
    grounded: list[dict[str, Any]] = []
    for turn, refs in zip(evidence.turns, _refs(evidence, extractor), strict=True):
        # amounts this turn already grounded, with their kinds: operands for the next
        amounts: list[tuple[float, str]] = []
        for ref in refs:
            match = index.find(ref, turn.index, amounts)
            if match is not None:
                grounded.append(_claim(ref.text, ref.start, ref.end, turn, match, ref.kind))
                if ref.kind in ("money", "percent"):
                    quantity = MONEY if ref.kind == "money" else RATE
                    value = float(ref.key)
                    amounts += [(value, k) for k in operand_kinds(quantity, turn.text, ref.end)]
                continue
            findings.append(_fabricated(ref, turn, index))
    return findings, grounded


def _fabricated(ref: Reference, turn: Turn, index: EvidenceIndex) -> Finding:
    unverifiable = index.truncated_before(turn.index)
    attributes: dict[str, Any] = {"kind": ref.kind, "key": ref.key}
    detail = f"{ref.text} is not in the evidence"
    if unverifiable:
        detail += " (some evidence before it was truncated, so it cannot be confirmed)"
    closest = index.closest(ref, turn.index)
    if closest is not None:
        text, item = closest
        attributes["closest"] = {"text": text, "step_id": item.source, "step_name": item.name}
        detail += f"; closest: {text} in {_where(item)}"
    return Finding(
        failure_mode=FailureMode.FABRICATED_GROUNDING,
        text=ref.text,
        start=ref.start,
        end=ref.end,
        location=turn.location,
        step_ids=_step_ids(turn),
        unverifiable=unverifiable,
        detail=detail,
        attributes=attributes,
    )


# --------------------------------------------------------------------------- parametric_leakage


@scorer(name="parametric_leakage", version="5", register=False)
def parametric_leakage(
    *,
    patterns: Patterns | str | None = None,
    kinds: Sequence[str] | str | None = None,
    facts: Sequence[str] | str | None = None,
    allow: Sequence[str] | str | None = None,
    judge: str | None = None,
    model: str | None = None,
    settings: Any = None,
) -> Bound:
    """Every specific fact in an answer (number, date, year, name) is in the evidence.

    Fails when an answer states a specific fact (a number, amount, percentage, date, year,
    decade, the last digits of a number, time of day, or a person's, organisation's or place's
    name) that the evidence before it does not contain, even if the fact is true. Rounding and
    plausible arithmetic on evidence numbers (money with money, a product only with a count or
    a rate of the evidence) are accepted as derived (see ``docs/grounding.md``).

    Args:
        patterns: the same extra reference shapes as ``no_fabricated_refs``: their matches
            belong to that scorer and are not checked again here.
        kinds: the built-in reference kinds, as for ``no_fabricated_refs``.
        facts: the fact kinds to check (default all): ``number``, ``money``, ``percent``,
            ``year``, ``decade``, ``last_digits``, ``date``, ``time``, ``name``.
        allow: names that are always accepted (the company's own name, its products): a name
            whose words are all among these is not checked.
        judge: also run the judged half with this judge backend (``offline``, ``openai``,
            ``anthropic``): claims the judge finds absent from the evidence are findings too,
            unless they overlap a fact the deterministic half already reported. The rest of the
            judge's configuration (model, endpoint, mode...) comes from ``[judge]``. Default:
            the deterministic half only.
        model: the judge's model, for the network backends (used only with ``judge``).
    """
    from agentlens.eval.detectors._synthesis import build_judge, judge_identity, judge_rules

    extractor = _extractor(patterns, kinds)
    wanted = None if facts is None else frozenset([facts] if isinstance(facts, str) else facts)
    if wanted is not None and not wanted <= FACT_KINDS:
        bad = sorted(wanted - FACT_KINDS)[0]
        raise ConfigError(f"unknown fact kind {bad!r}; choose from {', '.join(sorted(FACT_KINDS))}")
    allowed = frozenset(
        w for a in ([allow] if isinstance(allow, str) else allow or ()) for w in name_tokens(a)
    )
    the_judge = (
        None
        if judge is None
        else build_judge(judge, {"model": model}, settings, backend_from_settings=False)
    )
    version: dict[str, Any] = {} if patterns is None else {"patterns": _patterns_option(patterns)}
    for key, names in (("kinds", kinds), ("facts", facts), ("allow", allow)):
        if names is not None:
            version[key] = [names] if isinstance(names, str) else list(names)
    if the_judge is not None:
        version.update(judge_identity(the_judge))
        if "judge" not in version:  # the offline judge: its half still changes the verdicts
            version["judge"] = "offline"
    label = None if judge is None else (judge if model is None else f"{judge}:{model}")

    def score(*, trace: Trace, evidence: Evidence) -> ScoreResult:
        return _parametric_leakage(evidence, extractor, wanted, allowed, the_judge, label)

    if the_judge is not None:
        return Bound(score, version, version_tag=judge_rules(the_judge))

    def row(evidence: Evidence, run_id: str, name: str, version: str) -> ScoreRow | ScoreResult:
        findings, grounded = _check_facts(evidence, extractor, wanted, allowed)
        key = (run_id, name, version)
        return _row(findings, grounded, "not in the evidence", "fact", {}, key)

    return Bound(WithRow(score, row), version)


def _parametric_leakage(
    evidence: Evidence,
    extractor: Extractor,
    wanted: frozenset[str] | None,
    allowed: frozenset[str],
    judge: Judge | None,
    label: str | None,
) -> ScoreResult:
    """``parametric_leakage``'s result for a run (with the judged half when ``judge``)."""
    findings, grounded = _check_facts(evidence, extractor, wanted, allowed)
    attributes: dict[str, Any] = {}
    if judge is not None:
        findings.extend(_judged_half(evidence, findings, judge, label or "", attributes))
    return _result(findings, grounded, "not in the evidence", "fact", attributes)


def _check_facts(
    evidence: Evidence, extractor: Extractor, wanted: frozenset[str] | None, allowed: frozenset[str]
) -> tuple[list[Finding], list[dict[str, Any]]]:
    """The deterministic half's findings on a run, and its grounded claims' fields."""
    index = _index(evidence, extractor)
    findings: list[Finding] = []
    grounded: list[dict[str, Any]] = []
    for turn, refs in zip(evidence.turns, _refs(evidence, extractor), strict=True):
        # numbers this turn already grounded, with their kinds: operands for the next
        numbers: list[tuple[float, str]] = []
        # the tolerances are read only for the numbers that need arithmetic (_find_fact)
        for fact in extract_facts(turn.text, refs, tolerances=False):
            if wanted is not None and fact.kind not in wanted:
                continue
            if fact.kind == "name" and allowed and set(fact.key.split()) <= allowed:
                continue
            quantity = _quantity(fact, turn.text)
            match = _find_fact(fact, turn.text, turn.index, index, numbers, quantity)
            if match is not None:
                grounded.append(_claim(fact.text, fact.start, fact.end, turn, match, fact.kind))
                if fact.value is not None:
                    value = abs(fact.value)
                    numbers += [(value, k) for k in operand_kinds(quantity, turn.text, fact.end)]
                continue
            unverifiable = index.truncated_before(turn.index)
            findings.append(
                Finding(
                    failure_mode=FailureMode.PARAMETRIC_LEAKAGE,
                    text=fact.text,
                    start=fact.start,
                    end=fact.end,
                    location=turn.location,
                    step_ids=_step_ids(turn),
                    unverifiable=unverifiable,
                    detail=f"{fact.kind} {fact.text!r} is not in the evidence"
                    + (" (some evidence was truncated)" if unverifiable else ""),
                    attributes={"kind": fact.kind, "key": fact.key},
                )
            )
    return findings, grounded


def _judged_half(
    evidence: Evidence,
    found: list[Finding],
    judge: Judge,
    label: str,
    attributes: dict[str, Any],
) -> list[Finding]:
    """The judged half: claims the judge finds absent from the evidence before them. A claim
    that overlaps a fact the deterministic half already reported is not reported twice."""
    from agentlens.eval.detectors._synthesis import judged_leakage

    judged = judged_leakage(evidence.trace, evidence, judge)
    taken = [
        (f.location, f.start, f.end) for f in found if f.start is not None and f.end is not None
    ]

    def overlaps(f: Finding) -> bool:
        if f.start is None or f.end is None:
            return False
        return any(
            loc == f.location and f.start < end and start < f.end for loc, start, end in taken
        )

    new = [f for f in judged if not overlaps(f)]
    attributes["judge"] = label
    attributes["judged_claims_unsupported"] = len(judged)
    return new


def _quantity(fact: Fact, text: str) -> str:
    """What a numeric fact is, for plausible arithmetic: an amount is money, a percentage a
    rate, a bare number what the words after it say ("3 bags": a count)."""
    if fact.kind == "money":
        return MONEY
    if fact.kind == "percent":
        return RATE
    if fact.kind == "number":
        return claim_kind(text, fact.start, fact.end)
    return NUMBER


def _find_fact(
    fact: Fact,
    text: str,
    index_pos: int,
    index: EvidenceIndex,
    numbers: Sequence[tuple[float, str]],
    quantity: str,
) -> Match | None:
    """Where ``fact`` (of the turn ``text``, extracted without its tolerance) is found in the
    evidence before ``index_pos``."""
    kind = fact.kind
    if kind in ("number", "money", "percent"):
        value = fact.value
        assert value is not None
        percent = kind == "percent"
        strict = kind != "number"  # a bare number may be part of an id ("certificate 7504069")
        # index.find_value(value, ..., tolerance=fact_tolerance(fact, text), ...), the
        # tolerance read only for the arithmetic
        match = index.find_written(value, index_pos, percent=percent, strict=strict)
        if match is not None:
            return match
        return index.derive(
            abs(value),
            index_pos,
            percent=percent,
            tolerance=fact_tolerance(fact, text),
            extra=numbers,
            quantity=quantity,
        )
    if kind == "year":
        return index.find_value(float(fact.key), index_pos, arithmetic=False, strict=False)
    if kind == "date":
        return index.find_date(fact.key, index_pos)
    if kind == "decade":
        return index.find_decade(fact.key, index_pos)
    if kind == "last_digits":
        return index.find_last_digits(fact.key, index_pos)
    if kind == "time":
        return index.find_time(fact.key, index_pos)
    return index.find_words(fact.key.split(), index_pos, fact.text)
