"""What scorers say about a run: :class:`ScoreResult`, :class:`Finding`, and the stored :class:`Score`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from functools import partial
from itertools import product
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticSerializationError

from agentlens.model._built import build_model, same_model
from agentlens.model._trace import to_epoch_us

__all__ = [
    "VERDICT_PRECEDENCE",
    "FailureMode",
    "Finding",
    "Score",
    "ScoreResult",
    "ScoreRow",
    "Verdict",
    "worst_verdict",
]


class FailureMode(StrEnum):
    """The kinds of hallucination and struggle agentlens tells apart (DESIGN.md)."""

    FABRICATED_GROUNDING = "fabricated_grounding"
    """The answer cites a reference (id, amount, URL, date...) that appears nowhere in the evidence."""
    PARAMETRIC_LEAKAGE = "parametric_leakage"
    """The answer states a fact that is not in the evidence, even if it happens to be true."""
    UNSUPPORTED_SYNTHESIS = "unsupported_synthesis"
    """Every fact is in the evidence, but the conclusion drawn from them is not."""
    REPEATED_TOOL_CALL = "repeated_tool_call"
    """The same tool called with the same normalised arguments again and again."""
    ALTERNATING_LOOP = "alternating_loop"
    """A, B, A, B, A, B: the agent ping-pongs between calls."""
    ERROR_LOOP = "error_loop"
    """The same call keeps failing with the same error."""
    EXCESSIVE_STEPS = "excessive_steps"
    """More steps than the agent role's budget."""
    NO_PROGRESS = "no_progress"
    """A stretch of steps that adds no new evidence."""
    REPEATED_MESSAGE = "repeated_message"
    """The agent says the same thing again and again with nothing new observed between (a
    monologue)."""


class Verdict(StrEnum):
    """The outcome of one scorer on one run."""

    PASSED = "passed"
    """The check passed."""
    FLAGGED = "flagged"
    """The check found at least one problem."""
    UNVERIFIABLE = "unverifiable"
    """The check could not see the whole evidence (or its judge) and could not confirm a claim."""
    ERROR = "error"
    """The scorer itself failed; ``detail`` holds the exception text."""


VERDICT_PRECEDENCE: tuple[Verdict, ...] = (
    Verdict.FLAGGED,
    Verdict.ERROR,
    Verdict.UNVERIFIABLE,
    Verdict.PASSED,
)
"""The verdict a run with several scores takes: the first of these that any score has. Flagged
beats error (a failed scorer does not hide a flag), error beats unverifiable, and a pass needs
every score to pass. The one statement of this order: the rate rules, the CLI and the SQL
rollup all read it."""


def worst_verdict(verdicts: Iterable[Verdict | str | None]) -> Verdict | None:
    """The verdict of a run with these scores under :data:`VERDICT_PRECEDENCE`; ``None`` when
    there are none (``None`` items are skipped)."""
    seen = {Verdict(v) for v in verdicts if v is not None}
    for verdict in VERDICT_PRECEDENCE:
        if verdict in seen:
            return verdict
    return None


class Finding(BaseModel):
    """One thing a scorer found: an ungrounded token, a loop, a blown budget, or a grounded claim."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    failure_mode: FailureMode | None
    """The failure mode; ``None`` only in ``ScoreResult.grounded`` (a claim that is supported)."""
    text: str
    """The offending text: the exact token, the claim, or a short description of the call."""
    start: int | None = None
    """Start of ``text`` (character offset) in the checked text, when it came from one."""
    end: int | None = None
    """End (exclusive) of ``text`` in the checked text."""
    location: str = "output"
    """Where ``text`` was found: ``output`` (the run's final answer) or a step id."""
    step_ids: list[str] = Field(default_factory=list)
    """The steps involved: the repeated calls, the turn the claim was made in."""
    supported_by: str | None = None
    """For a grounded claim, the step whose output supports it."""
    unverifiable: bool = False
    """True when the claim could not be confirmed because the evidence was incomplete
    (a truncated tool output, an unavailable judge) rather than shown to be absent."""
    detail: str = ""
    """One line for a human: why this is a finding, and the closest evidence when there is one."""
    attributes: dict[str, Any] = Field(default_factory=dict)
    """Anything else worth keeping: the closest evidence, repeat counts, wasted tokens and cost."""


def derive_verdict(passed: bool, error: str | None, findings: Sequence[Finding]) -> Verdict:
    """The verdict of a result that gives none: ``error`` when the scorer failed, ``passed``,
    ``unverifiable`` when every finding is unverifiable, otherwise ``flagged``."""
    if error is not None:
        return Verdict.ERROR
    if passed:
        return Verdict.PASSED
    if findings and all(f.unverifiable for f in findings):
        return Verdict.UNVERIFIABLE
    return Verdict.FLAGGED


class ScoreResult(BaseModel):
    """What one scorer says about one run."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    passed: bool
    """True only when the check passed."""
    value: float | None = None
    """A number for the check: the count of ungrounded references, a fraction of supported claims..."""
    detail: str = ""
    """One line for a human."""
    findings: list[Finding] = Field(default_factory=list)
    """The problems found; each names one failure mode."""
    grounded: list[Finding] = Field(default_factory=list)
    """Claims that were checked and found in the evidence, with the step that supports each."""
    verdict: Verdict | None = None
    """Derived when not given: ``passed``; ``unverifiable`` when every finding is unverifiable;
    otherwise ``flagged``."""
    error: str | None = None
    """The exception text when the scorer failed (then ``verdict`` is ``error``)."""
    attributes: dict[str, Any] = Field(default_factory=dict)
    """Cost, tokens, timings, judge model... recorded with the score."""

    @model_validator(mode="after")
    def _derive_verdict(self) -> ScoreResult:
        if self.verdict is None:
            self.verdict = derive_verdict(self.passed, self.error, self.findings)
        if self.verdict is not Verdict.PASSED:
            self.passed = False
        return self

    @classmethod
    def from_error(cls, exc: BaseException) -> ScoreResult:
        """The result of a scorer that raised."""
        text = f"{type(exc).__name__}: {exc}"
        return cls(passed=False, detail=text, error=text, verdict=Verdict.ERROR)

    @property
    def failure_modes(self) -> list[FailureMode]:
        """The distinct failure modes of the findings, in order of first appearance."""
        seen: dict[FailureMode, None] = {}
        for f in self.findings:
            if f.failure_mode is not None:
                seen.setdefault(f.failure_mode, None)
        return list(seen)


class Score(ScoreResult):
    """A :class:`ScoreResult` as stored: which run, which scorer and version, and when."""

    run_id: str
    """The run that was scored."""
    scorer: str
    """The scorer's registered name."""
    version: str
    """The scorer's version: a changed scorer re-scores history."""
    scored_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    """When the score was computed (UTC)."""

    @classmethod
    def of(cls, result: ScoreResult, *, run_id: str, scorer: str, version: str) -> Score:
        """Attach a result to the run and scorer it belongs to.

        A plain :class:`ScoreResult` is attached as it is, without validating its findings a
        second time (its lists are copied; the findings are shared): a run's score holds
        dozens of grounded claims, and validating them again cost more than the check. Any
        other result (a subclass, whose fields become extras) is dumped and validated.
        """
        if type(result) is ScoreResult:
            if cls is Score and not result.__pydantic_extra__ and _attach is not None:
                return _attach(cls, result, run_id, scorer, version)
            values = dict(result.__dict__)
            values["findings"] = list(result.findings)
            values["grounded"] = list(result.grounded)
            values["attributes"] = dict(result.attributes)
            return cls.model_construct(
                **values,
                **(result.__pydantic_extra__ or {}),
                run_id=run_id,
                scorer=scorer,
                version=version,
            )
        data = result.model_dump()
        return cls(**data, run_id=run_id, scorer=scorer, version=version)

    def to_json_line(self) -> dict[str, Any]:
        """The public JSON shape of ``agentlens score --json``: one object per (run, scorer)."""
        return {
            "run_id": self.run_id,
            "scorer": self.scorer,
            "version": self.version,
            "verdict": str(self.verdict),
            "passed": self.passed,
            "value": self.value,
            "detail": self.detail,
            "findings": [f.model_dump(mode="json") for f in self.findings],
            "grounded": [f.model_dump(mode="json") for f in self.grounded],
            "error": self.error,
            "attributes": self.attributes,
        }


def _attach_plain(
    cls: type[Score], result: ScoreResult, run_id: str, scorer: str, version: str
) -> Score:
    """:meth:`Score.of` for a plain result without extras: what ``model_construct`` builds from
    the same values, without its per-field walk over aliases and defaults (a batch attaches
    five results per run)."""
    values = dict(result.__dict__)
    values["findings"] = list(result.findings)
    values["grounded"] = list(result.grounded)
    values["attributes"] = dict(result.attributes)
    values["run_id"] = run_id
    values["scorer"] = scorer
    values["version"] = version
    fields_set = set(values)
    values["scored_at"] = _scored_at()
    return build_model(cls, values, fields_set)


_scored_at: Any = Score.model_fields["scored_at"].default_factory


def _pick_attach() -> Any:
    """:func:`_attach_plain` when it builds exactly what ``model_construct`` builds (the same
    ``__dict__`` in the same order, fields set, extras and private state), else ``None``."""
    result = ScoreResult(
        passed=False, value=1.0, detail="d", findings=[Finding(failure_mode=None, text="x")]
    )
    try:
        fast = _attach_plain(Score, result, run_id="r", scorer="s", version="1")
        slow = Score.model_construct(**result.__dict__, run_id="r", scorer="s", version="1")
        # the same time, set as model_construct set its own (not as a field set by assignment)
        object.__setattr__(slow, "__dict__", {**slow.__dict__, "scored_at": fast.scored_at})
        if same_model(fast, slow):
            return _attach_plain
    except Exception:  # pragma: no cover - a pydantic whose internals differ
        pass
    return None  # pragma: no cover


_attach = _pick_attach()


# ---------------------------------------------------------------- a score's JSON, written once


_FINDING_FIELDS = len(Finding.model_fields)
_SCORE_KEYS = tuple(Score.model_fields)
_NONE = type(None)
_SCORE_TYPES = frozenset(
    product(
        *[(bool,), (float, _NONE), (str,), (list,), (list,), (Verdict, _NONE), (str, _NONE)],
        *[(dict,), (str,), (str,), (str,), (datetime,)],
    )
)
"""The types of a score's fields, in order, that :func:`plain_json` writes itself: exactly those
of the declarations (pydantic writes an integer or a boolean ``value`` as a float)."""
_ZERO = timedelta(0)
_dumps: Any = None
"""``orjson.dumps`` with the options :func:`plain_json` needs, once it has been imported (not
before a score is written: ``import agentlens.model`` stays without it)."""


class _NotPlain(Exception):
    """A value :func:`plain_json` leaves to pydantic."""


def _finding_dict(value: Any) -> dict[str, Any]:
    """orjson's ``default``: a :class:`Finding` without extras as its ``__dict__``, which
    pydantic writes as orjson does (every field, in the dict's order) with one exception,
    refused here: ``True`` in ``start`` or ``end`` (pydantic writes ``1``). A value of another
    type than its field's is written by pydantic as by inference, which is what orjson writes
    (or refuses). Anything else orjson does not write itself is refused."""
    if type(value) is Finding and not value.__pydantic_extra__:
        fields = value.__dict__
        # every field and nothing else (a deleted field is missing; a new attribute goes to
        # the extras: no stray key reaches ``__dict__`` through the model's own methods)
        if (
            len(fields) == _FINDING_FIELDS
            and type(fields["start"]) is not bool
            and type(fields["end"]) is not bool
        ):
            return fields
    raise _NotPlain


def plain_json(score: Score) -> str | None:
    """``score.model_dump_json()``, written by orjson from the score's and its findings' own
    ``__dict__``s, or ``None`` when a value is not one this writer renders as pydantic does.

    It renders a score whose own fields hold exactly their declared types (no extras,
    ``scored_at`` an aware time at UTC: pydantic writes an integer ``value`` as a float) and
    whose findings are plain :class:`Finding`s (see :func:`_finding_dict`), where every value
    is one orjson writes as pydantic does: text, integers of 64 bits, floats (NaN and the
    infinities as ``null``), booleans, ``None``, lists, tuples, dicts with text keys, UUIDs,
    enums of those. Anything else (a subclass of a builtin, a time, a ``Decimal``, a model, a
    large integer, a text with a lone surrogate...) is refused (``None``), and the caller asks
    pydantic, which also warns of values of the wrong type (this writer does not).
    ``tests/model/test_score_dumps.py`` holds it to pydantic's text on generated scores, ill
    typed ones included.
    """
    if type(score) is not Score or score.__pydantic_extra__:
        return None
    fields = score.__dict__
    if tuple(fields) != _SCORE_KEYS or tuple(map(type, fields.values())) not in _SCORE_TYPES:
        return None
    when = fields["scored_at"]
    if when.utcoffset() != _ZERO:
        return None
    fields = dict(fields)
    fields["scored_at"] = when.isoformat()[:-6] + "Z"
    try:
        return (_dumps or _load_dumps())(fields).decode()
    except TypeError:  # orjson.JSONEncodeError: whatever default raised, or orjson refused
        return None


def _load_dumps() -> Any:
    global _dumps
    import orjson

    # a subclass of str, int, dict or list, a time and a dataclass go to default (refused):
    # pydantic writes them by rules of its own
    option = (
        orjson.OPT_PASSTHROUGH_SUBCLASS
        | orjson.OPT_PASSTHROUGH_DATETIME
        | orjson.OPT_PASSTHROUGH_DATACLASS
    )
    _dumps = partial(orjson.dumps, default=_finding_dict, option=option)
    return _dumps


def dump_exactly(score: Score) -> tuple[str, bool]:
    """``score.model_dump_json()``, and whether that text is also the JSON of the score that
    ``Score.model_validate_json`` reads back from it (so the process that stores it may store
    it as it came, and read it back only where it needs the score: see :class:`ScoreRow`).

    It is when every value is of its field's declared type (pydantic's serializer checks each
    and would warn otherwise: a text where an integer belongs is written as it is and read back
    as a number) and the verdict needs no derivation (a verdict is given, and a score that is
    not passed is not marked passed): pydantic writes such values back as it read them. One
    exception: a dict in ``attributes`` whose keys collide once written (``1`` and ``"1"``) is
    read back with one of them; the vouched text is then still what a single process stores
    for the score, so storing it keeps ``--workers`` results those of one process. Otherwise
    the JSON is written again as before, with its warnings, and ``False``.
    """
    try:
        doc = score.model_dump_json(warnings="error")
    except PydanticSerializationError:
        return score.model_dump_json(), False
    verdict = score.verdict
    return doc, verdict is not None and (verdict is Verdict.PASSED or not score.passed)


def stored_json(score: Score) -> str:
    """The JSON a store keeps for ``score``: ``score.model_dump_json()``, written by
    :func:`plain_json` where it can."""
    doc = plain_json(score)
    return score.model_dump_json() if doc is None else doc


class ScoreRow(NamedTuple):
    """A score in the form a store writes it: the columns it keeps of the score, its findings
    per failure mode, its stored JSON, and the score itself when one is at hand.

    ``agentlens score --workers`` sends these from each worker to the parent, which stores them
    as they came and builds a :class:`Score` only where one is needed (a score that did not
    pass, whose findings the review derives flags from; ``on_scores``): parsing every score
    back was most of the parent's work."""

    run_id: str
    scorer: str
    version: str
    verdict: str
    """``str(score.verdict)``."""
    passed: bool
    value: float | None
    detail: str
    error: str | None
    finding_count: int
    scored_at: int | None
    """Microseconds since the Unix epoch (:func:`~agentlens.model.to_epoch_us`)."""
    modes: tuple[tuple[str, int], ...]
    """How many findings name each failure mode, in order of first appearance."""
    doc: str
    """The stored JSON: :func:`stored_json` of the score, or the text a worker vouched for."""
    score: Score | None = None
    """The score, when at hand."""

    @classmethod
    def of(cls, score: Score, doc: str | None = None, *, keep: bool = True) -> ScoreRow:
        """The row of ``score``, whose stored JSON is ``doc`` (default: :func:`stored_json`),
        with the score kept in it unless ``keep`` is false (a row to send to another process)."""
        counts: dict[str, int] = {}
        for finding in score.findings:
            mode = finding.failure_mode
            if mode is not None:
                counts[mode] = counts.get(mode, 0) + 1
        return cls(
            score.run_id,
            score.scorer,
            score.version,
            str(score.verdict),
            score.passed,
            score.value,
            score.detail,
            score.error,
            len(score.findings),
            to_epoch_us(score.scored_at),
            tuple((str(mode), n) for mode, n in counts.items()),
            stored_json(score) if doc is None else doc,
            score if keep else None,
        )


_passed_rows_checked: bool | None = None
"""Whether :func:`passed_row` gives what the scores' own path gives (checked on first use)."""


def passed_row(
    run_id: str,
    scorer: str,
    version: str,
    *,
    value: float,
    detail: str,
    grounded: list[dict[str, Any]],
    attributes: dict[str, Any],
    scored_at: datetime | None = None,
) -> ScoreRow | None:
    """The row of a passed score without findings, made without the score: the row
    ``ScoreRow.of(score, keep=False)`` gives for ``Score.of(ScoreResult(passed=True,
    value=value, detail=detail, grounded=[Finding(**g) for g in grounded],
    attributes=attributes), ...)``, without building the score, its grounded claims' models or
    their copies (a passed run of the grounding scorers has a dozen claims, and nothing reads
    its score once the row is made: ``agentlens score`` stores the row and frees the rest).

    The caller vouches for the values: each of ``grounded`` is a claim's fields, every field of
    :class:`Finding` in its declared order and of its declared type; ``value`` is a float;
    ``attributes`` is JSON data. ``None`` when a value is not one orjson writes as pydantic
    does (a lone surrogate in a text, a subclass of a builtin): the caller then builds the
    score. Checked on first use against the row of the score built through pydantic
    (``None`` from then on if they ever differ); ``tests/model/test_score_dumps.py`` holds it
    to that row on generated claims."""
    global _passed_rows_checked
    if _passed_rows_checked is None:
        _passed_rows_checked = True  # for the check's own call, which is the first
        _passed_rows_checked = _check_passed_row()
    if not _passed_rows_checked:
        return None  # pragma: no cover - a pydantic that writes scores otherwise
    when = _scored_at() if scored_at is None else scored_at
    if when.utcoffset() != _ZERO:
        return None
    # the score's fields in their declared order (_SCORE_KEYS), as plain_json writes them
    fields = {
        "passed": True,
        "value": value,
        "detail": detail,
        "findings": [],
        "grounded": grounded,
        "verdict": Verdict.PASSED,
        "error": None,
        "attributes": attributes,
        "run_id": run_id,
        "scorer": scorer,
        "version": version,
        "scored_at": when.isoformat()[:-6] + "Z",
    }
    try:
        doc = (_dumps or _load_dumps())(fields).decode()
    except TypeError:  # orjson.JSONEncodeError: a value orjson refuses or leaves to default
        return None
    return ScoreRow(
        run_id,
        scorer,
        version,
        "passed",
        True,
        value,
        detail,
        None,
        0,
        to_epoch_us(when),
        (),
        doc,
        None,
    )


def _check_passed_row() -> bool:
    """:func:`passed_row` gives the row of the score that pydantic builds from the same values
    (a plain claim and a derived one, attributes of each JSON type)."""
    attributes = {"a": 1, "b": [1.5, None, True], "c": {"d": "é"}}
    when = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    try:
        claim = Finding(failure_mode=None, text="CUST-1", start=3, end=9, location="s2")
        claims = [
            {**claim.__dict__, "step_ids": ["s2"], "supported_by": "s1", "attributes": {"k": "id"}},
            {**claim.__dict__, "supported_by": "input", "attributes": {"k": "m", "derived": "1"}},
        ]
        result = ScoreResult(
            passed=True,
            value=0.0,
            detail="2 claims grounded",
            grounded=[Finding(**c) for c in claims],
            attributes=attributes,
        )
        score = Score(**result.model_dump(), run_id="r", scorer="s", version="1", scored_at=when)
        fast = passed_row(
            "r",
            "s",
            "1",
            value=0.0,
            detail="2 claims grounded",
            grounded=claims,
            attributes=attributes,
            scored_at=when,
        )
        return fast == ScoreRow.of(score, keep=False) and fast is not None
    except Exception:  # pragma: no cover - a pydantic whose internals differ
        return False
