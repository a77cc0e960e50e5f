"""Transcript analysers: loops, error loops, step budgets and stretches without progress.

These scorers read only the transcript, with no model call (the Reflexion heuristics, Shinn et
al., 2023): an agent that struggles repeats an action with identical arguments and receives an
identical observation, or takes many steps that add nothing new.

- ``repeated_tool_calls``: the same call (tool + normalised arguments) returning the same result
  ``max_repeats`` times (``repeated_tool_call``); A, B, A, B, A, B (``alternating_loop``); the
  same call failing with the same error ``max_errors`` times (``error_loop``).
- ``excessive_steps``: more tool and retrieval steps than the role's budget (``excessive_steps``).
- ``no_progress``: ``min_stretch`` consecutive steps that add no new evidence (``no_progress``).

Only steps of the kinds in ``kinds`` (``tool`` and ``retrieval`` by default) are considered;
tools named in ``exempt_tools`` are ignored altogether. Each finding names its steps, the call
and how many times it was made, and what the wasted steps cost (``attributes.waste``); see
``docs/transcript-analysers.md`` for how cost is attributed.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, TypeVar

import orjson

from agentlens.errors import ConfigError
from agentlens.eval._evidence import Evidence, _reply_of, text_of
from agentlens.eval._normalize import (
    canonical,
    canonical_json,
    fingerprint,
    fingerprint_of_text,
    is_empty_result,
)
from agentlens.eval._scorer import ScorerFn, WithRow, scorer
from agentlens.eval._volatile import VOLATILE_PARTS, Masker, masker
from agentlens.model import FailureMode, Finding, ScoreResult, Step, StepKind, Trace, Verdict
from agentlens.model._built import build_model, same_model
from agentlens.model._score import ScoreRow, passed_row

__all__ = [
    "DEFAULT_BOOKKEEPING",
    "DEFAULT_KINDS",
    "LoopRule",
    "excessive_steps",
    "loop_rule",
    "no_progress",
    "repeated_tool_calls",
    "waste_of",
]

DEFAULT_KINDS: tuple[str, ...] = ("tool", "retrieval")
"""The step kinds the analysers consider by default."""

_ARGS_SHOWN = 160
"""Characters of a call's arguments shown in a finding's ``text`` (``attributes.args`` is whole)."""


# --------------------------------------------------------------------------- calls


@dataclass(slots=True)
class _Call:
    """One considered step, reduced to what the analysers compare."""

    pos: int
    """Position among the considered calls."""
    index: int
    """Position of the step in ``trace.steps``."""
    step: Step
    tool: str
    call_fp: Hashable
    """Equal for calls with equal fingerprints of (tool, normalised arguments): the fingerprint,
    or a shape no other call of the run has (see :func:`_tokens`)."""
    failed: bool
    results: _Results
    """The run's result tokens, computed when first asked for."""

    @property
    def result_fp(self) -> Hashable:
        """Equal for calls with equal fingerprints of (normalised output, normalised error)."""
        return self.results.token(self.pos)

    @property
    def empty(self) -> bool:
        """The call succeeded and returned nothing (:func:`is_empty_result`)."""
        return self.results.empty(self.pos)

    @property
    def outcome(self) -> Hashable:
        """Equal for two equal calls (equal ``call_fp``) exactly when their ``result_fp`` are:
        to be compared only between equal calls."""
        return self.results.outcome(self.pos)

    @property
    def key(self) -> tuple[Hashable, Hashable]:
        return (self.call_fp, self.result_fp)


def _same(a: _Call, b: _Call) -> bool:
    """``a.key == b.key``, the results compared only when the calls are equal."""
    return a.call_fp == b.call_fp and a.outcome == b.outcome


def _passed_plain(value: float, detail: str, attributes: dict[str, Any]) -> ScoreResult:
    return ScoreResult(passed=True, value=value, detail=detail, attributes=attributes)


def _passed_direct(value: float, detail: str, attributes: dict[str, Any]) -> ScoreResult:
    """:func:`_passed_plain` without validation: a passing result is most of what the analysers
    return (three per run), and its values are the analysers' own."""
    return build_model(
        ScoreResult,
        {
            "passed": True,
            "value": value,
            "detail": detail,
            "findings": [],
            "grounded": [],
            "verdict": Verdict.PASSED,
            "error": None,
            "attributes": attributes,
        },
        set(_PASSED_FIELDS),
    )


_PASSED_FIELDS = frozenset(_passed_plain(0.0, "", {}).__pydantic_fields_set__)
"""The fields a validated passing result has set."""


def _pick_passed() -> Callable[[float, str, dict[str, Any]], ScoreResult]:
    """:func:`_passed_direct` when it builds exactly what validation builds (the same
    ``__dict__`` in the same order, fields set, extras and private state), else
    :func:`_passed_plain`."""
    try:
        slow = _passed_plain(2.0, "d", {"steps": 2, "waste": {}})
        fast = _passed_direct(2.0, "d", {"steps": 2, "waste": {}})
        if same_model(fast, slow):
            return _passed_direct
    except Exception:  # pragma: no cover - a pydantic whose internals differ
        pass
    return _passed_plain  # pragma: no cover


_passed = _pick_passed()

_Passed = TypeVar("_Passed", ScoreResult, ScoreResult | ScoreRow)
"""What an analyser gives for a run that passed: the result (:func:`_passed`, for
:meth:`~agentlens.eval.Scorer.score`) or, asked for the stored row (:class:`WithRow`), the row
(:func:`_passed_row`)."""


def _passed_row(
    key: tuple[str, str, str], value: float, detail: str, attributes: dict[str, Any]
) -> ScoreResult | ScoreRow:
    """The stored row of a passing result (``key``: run id, scorer, stored version), made
    without the result or its score: three per run, none of which anything reads once its row
    is stored. The result when :func:`~agentlens.model._score.passed_row` declines. The values
    are the analysers' own: a float, a text, and attributes of counts, names and the budget's
    settings."""
    row = passed_row(*key, value=value, detail=detail, grounded=[], attributes=attributes)
    return _passed(value, detail, attributes) if row is None else row


def _analyser(analyse: Callable[..., Any], options: dict[str, Any]) -> WithRow:
    """An analyser's scoring function from its ``_score_*`` function and bound options: the
    result of a run (:meth:`~agentlens.eval.Scorer.score`) or, asked for it, a passed run's
    stored row (:class:`WithRow`)."""

    def score(*, trace: Trace, evidence: Evidence) -> ScoreResult:
        result: ScoreResult = analyse(trace=trace, evidence=evidence, passed=_passed, **options)
        return result

    def row(evidence: Evidence, run_id: str, name: str, version: str) -> ScoreRow | ScoreResult:
        passed = partial(_passed_row, (run_id, name, version))
        given: ScoreRow | ScoreResult = analyse(
            trace=evidence.trace, evidence=evidence, passed=passed, **options
        )
        return given

    return WithRow(score, row)


def _steps(n: int) -> str:
    """``1 tool step``, ``3 tool steps``."""
    return f"{n} tool step" if n == 1 else f"{n} tool steps"


def _is_error(error: Any) -> bool:
    return error is not None and error != "" and error != {} and error != []


def _tuple(value: Any, option: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Iterable):
        items = tuple(value)
        if all(isinstance(v, str) for v in items):
            return items
    raise ConfigError(f"option {option!r} must be a list of names, got {value!r}")


def _fraction(value: Any, option: str) -> float:
    """A percentile: a number above 0 and at most 100."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 100:
        raise ConfigError(
            f"option {option!r} must be a number above 0 and at most 100, got {value!r}"
        )
    return float(value)


def _positive(value: Any, option: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"option {option!r} must be an integer >= {minimum}, got {value!r}")
    return value


DEFAULT_BOOKKEEPING: tuple[str, ...] = (
    "think",
    "condensation",
    "condensation_request",
    "empty",
    "null",
    "noop",
    "no_op",
)
"""Events some agents log as tool calls that are memory management or bookkeeping, not work:
a ``think`` tool, OpenHands' condensation of its history, SWE-agent's ``empty`` (no command) and
no-op actions. They neither repeat, nor count against a budget, nor break or extend a stretch."""


@dataclass(frozen=True, slots=True)
class _Consider:
    """Which steps the analysers consider, and how their results are compared."""

    kinds: tuple[str, ...]
    skip: tuple[str, ...]
    """``exempt_tools`` and ``bookkeeping`` names, lower case."""
    volatile: tuple[str, ...]
    """The volatile parts masked in results before they are compared."""

    @classmethod
    def of(
        cls, kinds: Any, exempt_tools: Any, bookkeeping: Any, volatile: Any = VOLATILE_PARTS
    ) -> _Consider:
        skip = (*_tuple(exempt_tools, "exempt_tools"), *_tuple(bookkeeping, "bookkeeping"))
        parts = _tuple(volatile, "volatile")
        masker(parts)  # an unknown part is refused when the options are bound
        return cls(
            kinds=_tuple(kinds, "kinds"),
            skip=tuple(sorted({name.lower() for name in skip})),
            volatile=parts,
        )

    @property
    def masker(self) -> Masker:
        return masker(self.volatile)


def _calls(trace: Trace, evidence: Evidence | None, consider: _Consider) -> list[_Call]:
    """The considered calls of a run, cached on the evidence object so that the three scorers,
    run together on one run, fingerprint each output once.

    Normalisation is two steps: the volatile parts of each result are masked
    (:mod:`agentlens.eval._volatile`), then the result is fingerprinted
    (:func:`~agentlens.eval._normalize.fingerprint`). Only calls that could be equal to another
    call of the run are normalised at all (:func:`_tokens`), and results only when an analyser
    compares them (:class:`_Results`)."""
    cache: dict[Any, list[_Call]] | None = None
    if evidence is not None and evidence.trace is trace:
        cache = vars(evidence).setdefault("_agentlens_transcript_calls", {})
        hit = cache.get(consider)
        if hit is not None:
            return hit
    wanted = frozenset(consider.kinds)  # a StepKind is equal to its value, and hashes alike
    skip = frozenset(consider.skip)
    indexes: list[int] = []
    steps: list[Step] = []
    tools: list[str] = []
    failed: list[bool] = []
    for i, step in enumerate(trace.steps):
        kind = step.kind
        if kind not in wanted:
            continue
        tool = step.name or str(kind)
        if tool.lower() in skip:
            continue
        error = step.error
        indexes.append(i)
        steps.append(step)
        tools.append(tool)
        failed.append(error is not None and _is_error(error))
    known = _TOOLS
    texts = [known.get(tool) or _tool_text(tool) for tool in tools]
    alone = _alone(texts)

    def call_shapes(nested: bool) -> list[Hashable]:
        # a call of a tool no other call of the run made is told apart by the tool alone
        return [
            text if own else (text, _shape(s.input, nested))
            for s, text, own in zip(steps, texts, alone, strict=True)
        ]

    def call_fp(k: int) -> str:
        # the canonical JSON text itself while it is short (its digest is what costs), else its
        # fingerprint: either is equal to another call's exactly when the fingerprints are (a
        # text starts with "[", a fingerprint is hexadecimal)
        text = canonical_json([tools[k], steps[k].input])
        if len(text) <= _KEY_TEXT_MAX:
            return text
        return fingerprint_of_text(text)

    call_fps = _tokens(call_shapes, call_fp, len(steps))
    results = _Results(steps, failed, consider.masker, call_fps)
    calls = [
        _Call(pos, i, step, tool, call, fail, results)
        for pos, (i, step, tool, call, fail) in enumerate(
            zip(indexes, steps, tools, call_fps, failed, strict=True)
        )
    ]
    if cache is not None:
        cache[consider] = calls
    return calls


_TOOLS: dict[str, str] = {}
"""Tool names seen, and their canonical JSON (a part of the calls' shapes); bounded."""


def _tool_text(tool: str) -> str:
    text = canonical_json(tool)
    if len(_TOOLS) < 4096:
        _TOOLS[tool] = text
    return text


_UNSET: Any = object()


class _Results:
    """The result tokens of a run's considered calls, each computed when first asked for.

    Two kinds of token, each equal to another's exactly when the results' fingerprints are
    (what :func:`_tokens` gives, over a set of results): :meth:`token` over all the results of
    the run (what ``no_progress`` compares), :meth:`outcome` over the results of equal calls
    only (what the loop rules and polling compare, always between equal calls). In most runs
    most calls are distinct, so most results are never masked nor fingerprinted, and the shapes
    of all of them are read only when a token of the first kind is asked for.

    It lives as long as the run's evidence, as plain lists: a batch keeps every run of a chunk
    in memory, and each object it keeps is walked by the garbage collector.
    """

    __slots__ = (
        "_calls",
        "_empty",
        "_failed",
        "_fingerprints",
        "_mask",
        "_outcomes",
        "_steps",
        "_tokens",
        "_unique",
        "repeated",
    )

    def __init__(
        self, steps: list[Step], failed: list[bool], mask: Masker, call_tokens: list[Hashable]
    ) -> None:
        self.repeated: list[int] = []
        """The positions of the calls equal to another call of the run (by ``call_tokens``)."""
        if len(set(call_tokens)) < len(call_tokens):
            self.repeated = [k for k, own in enumerate(_alone(call_tokens)) if not own]
        self._calls = call_tokens
        self._steps = steps
        self._failed = failed
        self._mask = mask.mask
        n = len(steps)
        self._tokens: list[Hashable] = [_UNSET] * n
        self._outcomes: list[Hashable] = [_UNSET] * n
        self._fingerprints: list[str | None] = [None] * n
        self._empty: list[bool | None] = [None] * n
        self._unique: list[bool] | None = _UNSET

    def __len__(self) -> int:
        return len(self._steps)

    def _own_shapes(self, positions: Sequence[int]) -> list[bool] | None:
        """For each result at ``positions``, whether no other of them has its shape; ``None``
        when one has no shape."""
        steps, failed = self._steps, self._failed
        for nested in (True, False):
            try:
                shapes = [_result_shape(steps[k], failed[k], nested) for k in positions]
            except _NoShape:
                continue
            return _alone(shapes)
        return None

    def _fingerprint(self, k: int) -> str:
        found = self._fingerprints[k]
        if found is None:
            step = self._steps[k]
            mask = self._mask
            error = mask(step.error) if self._failed[k] else None
            found = self._fingerprints[k] = fingerprint([mask(step.output), error])
        return found

    def token(self, k: int) -> Hashable:
        """The token of result ``k`` among all the results of the run."""
        token = self._tokens[k]
        if token is _UNSET:
            unique = self._run_shapes()
            token = self._tokens[k] = (
                k if unique is not None and unique[k] else self._fingerprint(k)
            )
        return token

    def outcome(self, k: int) -> Hashable:
        """The token of result ``k`` among the results of the calls equal to call ``k``."""
        outcome = self._outcomes[k]
        if outcome is _UNSET:
            call = self._calls[k]
            group = [j for j in self.repeated if self._calls[j] == call] or [k]
            unique = self._own_shapes(group) if len(group) > 1 else [True]
            for j, own in zip(group, unique or [False] * len(group), strict=True):
                self._outcomes[j] = j if own else _SHARED
            outcome = self._outcomes[k]
        if outcome is _SHARED:
            outcome = self._outcomes[k] = self._fingerprint(k)
        return outcome

    def shared(self, k: int) -> bool:
        """False when result ``k`` is equal to no other result of the run (its shape is its own)."""
        unique = self._run_shapes()
        return unique is None or not unique[k]

    def _run_shapes(self) -> list[bool] | None:
        """:meth:`_own_shapes` over every result of the run, computed once."""
        unique = self._unique
        if unique is _UNSET:
            unique = self._unique = self._own_shapes(range(len(self._steps)))
        return unique

    def empty(self, k: int) -> bool:
        """True when call ``k`` succeeded and returned nothing."""
        empty = self._empty[k]
        if empty is None:
            empty = self._empty[k] = not self._failed[k] and is_empty_result(self._steps[k].output)
        return empty


_SHARED: Any = object()
"""An outcome not computed yet, of a result whose shape another result of an equal call has."""


class _NoShape(Exception):
    """A value whose canonical form's shape cannot be told without computing it."""


def _shape(value: Any, nested: bool = True) -> Hashable:
    """The shape of ``value``'s canonical form (:func:`~agentlens.eval._normalize.canonical`),
    masked or not: ``None``, a boolean and its value, a number, an object and its keys (as
    ``canonical`` strips them), an array and its length (and, ``nested``, the shape of its first
    element). Two values of different shapes have different canonical forms, hence different
    fingerprints (as long as every value of a run is given the same ``nested``).

    Raises:
        _NoShape: a string (it may hold JSON, which ``canonical`` parses, or become JSON once
            masked), or any other type.
    """
    kind = type(value)
    if value is None:
        return 0
    if kind is bool:
        return (1, value)
    if kind is int or kind is float:
        return 2  # nan and infinities become strings: any string makes the run _NoShape
    if kind is dict:
        return (3, frozenset([str(k).strip() for k in value]))
    if kind is list or kind is tuple:
        if nested and value:
            return (4, len(value), _shape(value[0], False))
        return (4, len(value))
    raise _NoShape


def _alone(values: Sequence[Hashable]) -> list[bool]:
    """For each of ``values``, whether no other of them is equal to it (a ``Counter`` costs
    twice as much on the few values of a run)."""
    repeated: dict[Hashable, bool] = {}
    for value in values:
        repeated[value] = value in repeated
    return [not repeated[value] for value in values]


def _result_shape(step: Step, failed: bool, nested: bool) -> Hashable:
    if failed:
        raise _NoShape  # the error is part of the result: usually a string
    return _shape(step.output, nested)


def _tokens(
    shapes: Callable[[bool], list[Hashable]], fingerprint_of: Callable[[int], str], n: int
) -> list[Hashable]:
    """For each value, a token equal to another's exactly when their fingerprints are equal,
    without fingerprinting the values that cannot be equal to any other.

    Two values of different :func:`_shape` have different fingerprints, so a value whose shape
    no other value of the run has is equal to none of them: its token is its position (an
    integer, never equal to a fingerprint, a string, and not an object the garbage collector
    tracks). The others get their fingerprint, and so does every value when one of them has no
    shape. Masking the volatile parts of a result and
    fingerprinting it is most of the analysers' time, and in most runs most calls are distinct.
    The shapes look into the first element of arrays when they can for every value (lists of
    records of different kinds), else not.
    """
    try:
        found = shapes(True)
    except _NoShape:
        try:
            found = shapes(False)
        except _NoShape:
            return [fingerprint_of(k) for k in range(n)]
    return [k if own else fingerprint_of(k) for k, own in enumerate(_alone(found))]


def _ignored(consider: _Consider, calls: Sequence[_Call]) -> list[str]:
    """The volatile parts that differed between the results of ``calls`` (and were ignored)."""
    mask = consider.masker
    seen = [mask.found([c.step.output, c.step.error if c.failed else None]) for c in calls]
    return [p for p in mask.parts if len({found.get(p, ()) for found in seen}) > 1]


def _repeated(calls: Sequence[_Call]) -> list[_Call]:
    """The calls of ``calls`` (a run's, or some of them) equal to another of them, in order: the
    only ones whose results :func:`_polling` and the loop rules compare with others'."""
    if not calls:
        return []
    results = calls[0].results
    if len(calls) == len(results):  # all of them
        return [calls[k] for k in results.repeated]
    counts = Counter(c.call_fp for c in calls)
    return [c for c in calls if counts[c.call_fp] > 1]


def _polling(calls: Sequence[_Call]) -> set[int]:
    """Positions of successful calls that were polling: an identical call made later returned a
    different result (a job that finished, a page that moved), so the wait was not a loop."""
    later: dict[Hashable, set[Hashable]] = defaultdict(set)
    polling: set[int] = set()
    for call in reversed(_repeated(calls)):
        results = later[call.call_fp]
        if not call.failed and (len(results) > 1 or (results and call.outcome not in results)):
            polling.add(call.pos)
        results.add(call.outcome)
    return polling


# --------------------------------------------------------------------------- cost


_INPUT_KEYS = (
    "input_tokens",
    "prompt_tokens",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.token_count.prompt",
)
_OUTPUT_KEYS = (
    "output_tokens",
    "completion_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
)
_TOTAL_KEYS = ("total_tokens", "llm.token_count.total")
_COST_KEYS = ("cost_usd", "cost", "gen_ai.usage.cost", "llm.cost.total")


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _first(attrs: dict[str, Any], keys: Sequence[str]) -> float | None:
    for key in keys:
        if key in attrs:
            number = _number(attrs[key])
            if number is not None:
                return number
    return None


def _step_cost(step: Step) -> dict[str, float]:
    """Tokens, seconds and money a step's attributes (or times) say it cost."""
    attrs = step.attributes
    usage = attrs.get("usage")
    sources = [attrs, usage] if isinstance(usage, dict) else [attrs]
    out: dict[str, float] = {}
    for source in sources:
        for name, keys in (
            ("input_tokens", _INPUT_KEYS),
            ("output_tokens", _OUTPUT_KEYS),
            ("total_tokens", _TOTAL_KEYS),
            ("cost_usd", _COST_KEYS),
        ):
            if name not in out:
                number = _first(source, keys)
                if number is not None:
                    out[name] = number
    if "total_tokens" not in out and ("input_tokens" in out or "output_tokens" in out):
        out["total_tokens"] = out.get("input_tokens", 0.0) + out.get("output_tokens", 0.0)
    duration = step.duration_s
    if duration is None:
        duration = _number(attrs.get("duration_s"))
    if duration is None and _number(attrs.get("duration_ms")) is not None:
        duration = float(attrs["duration_ms"]) / 1000.0
    if duration is not None:
        out["duration_s"] = duration
    return out


def _llm_before(trace: Trace, calls: Sequence[_Call]) -> dict[int, list[int]]:
    """For each call position, the ``llm`` steps between the previous considered call and this
    one: the model turn(s) that decided on this call, whose cost a wasted call also wasted."""
    out: dict[int, list[int]] = {}
    prev = -1
    steps = trace.steps
    for call in calls:
        llm = [i for i in range(prev + 1, call.index) if steps[i].kind is StepKind.LLM]
        if llm:
            out[call.pos] = llm
        prev = call.index
    return out


def waste_of(
    trace: Trace, step_indexes: Iterable[int], *, llm_steps: Iterable[int] = ()
) -> dict[str, Any]:
    """What the steps at ``step_indexes`` (positions in ``trace.steps``) cost, with the ``llm``
    steps attributed to them: ``steps``, ``llm_steps`` and, when any step carried them,
    ``input_tokens``, ``output_tokens``, ``total_tokens``, ``duration_s`` and ``cost_usd``."""
    indexes = sorted(set(step_indexes))
    llm = sorted(set(llm_steps) - set(indexes))
    totals: dict[str, float] = {}
    for i in (*indexes, *llm):
        for key, value in _step_cost(trace.steps[i]).items():
            totals[key] = totals.get(key, 0.0) + value
    out: dict[str, Any] = {"steps": len(indexes), "llm_steps": len(llm)}
    for key in ("input_tokens", "output_tokens", "total_tokens"):
        if key in totals:
            out[key] = int(totals[key])
    if "duration_s" in totals:
        out["duration_s"] = round(totals["duration_s"], 3)
    if "cost_usd" in totals:
        out["cost_usd"] = round(totals["cost_usd"], 6)
    return out


def _waste(trace: Trace, calls: Sequence[_Call], wasted: Sequence[_Call]) -> dict[str, Any]:
    attributed = _llm_before(trace, calls)
    llm = [i for c in wasted for i in attributed.get(c.pos, ())]
    return waste_of(trace, (c.index for c in wasted), llm_steps=llm)


def _sum_waste(parts: Iterable[dict[str, Any]]) -> dict[str, Any]:
    total: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            total[key] = total.get(key, 0) + value
    for key in ("duration_s", "cost_usd"):
        if key in total:
            total[key] = round(total[key], 6 if key == "cost_usd" else 3)
    return total


# --------------------------------------------------------------------------- display


def _args_text(value: Any) -> str:
    canon = canonical(value)
    if isinstance(canon, str):
        text = json.dumps(canon, ensure_ascii=False)
    else:
        text = json.dumps(
            canon, ensure_ascii=False, sort_keys=True, separators=(", ", ": "), default=repr
        )
    if len(text) > _ARGS_SHOWN:
        text = text[: _ARGS_SHOWN - 1] + "…"
    return text


def _call_text(call: _Call) -> str:
    if call.step.input is None:
        return f"{call.tool}()"
    return f"{call.tool}({_args_text(call.step.input)})"


def _first_line(value: Any, limit: int = 160) -> str:
    """The start of a value's text on one line (whitespace collapsed), at most ``limit`` chars."""
    text = " ".join(text_of(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _detail(findings: Sequence[Finding], wasted: int, what: str) -> str:
    shown = "; ".join(f.text for f in findings[:3])
    more = f" (+{len(findings) - 3} more)" if len(findings) > 3 else ""
    return f"{wasted} wasted {what}: {shown}{more}"


# --------------------------------------------------------------------------- repeated_tool_calls


def _alternations(calls: Sequence[_Call], min_cycles: int) -> list[tuple[int, int]]:
    """Maximal stretches (first, last position) of A, B, A, B... with at least ``min_cycles``
    cycles, where A and B are calls with their results."""
    found: list[tuple[int, int]] = []
    n = len(calls)
    i = 2
    while i < n:
        if _same(calls[i], calls[i - 2]) and not _same(calls[i], calls[i - 1]):
            start, end = i - 2, i
            while end + 1 < n and _same(calls[end + 1], calls[end - 1]):
                end += 1
            if (end - start + 1) // 2 >= min_cycles:
                found.append((start, end))
            i = end + 1
        else:
            i += 1
    return found


def _groups(calls: Sequence[_Call], covered: set[int]) -> list[list[_Call]]:
    """The calls not ``covered`` grouped by call and result, groups of two or more, in the order
    of their first calls (the results compared only between equal calls)."""
    by_call: dict[Hashable, list[_Call]] = defaultdict(list)
    for call in _repeated(calls):
        if call.pos not in covered:
            by_call[call.call_fp].append(call)
    groups: list[list[_Call]] = []
    for same_call in by_call.values():
        if len(same_call) < 2:
            continue
        by_result: dict[Hashable, list[_Call]] = defaultdict(list)
        for call in same_call:
            by_result[call.outcome].append(call)
        groups.extend(group for group in by_result.values() if len(group) > 1)
    groups.sort(key=lambda group: group[0].pos)
    return groups


def _failing_in_a_row(
    calls: Sequence[_Call], min_failures: int, covered: set[int]
) -> list[list[_Call]]:
    """Stretches of ``min_failures`` or more consecutive calls of one call (tool + arguments),
    every one failed, the error changing (an unchanged error is the same-error rule's)."""
    found: list[list[_Call]] = []
    i, n = 0, len(calls)
    while i < n:
        first = calls[i]
        j = i
        if first.failed and first.pos not in covered:
            while (
                j + 1 < n
                and calls[j + 1].failed
                and calls[j + 1].call_fp == first.call_fp
                and calls[j + 1].pos not in covered
            ):
                j += 1
            stretch = list(calls[i : j + 1])
            if len(stretch) >= min_failures and len({c.outcome for c in stretch}) > 1:
                found.append(stretch)
        i = j + 1
    return found


def _without(text: str, token: str) -> str:
    """``text`` with each whole occurrence of ``token`` (not inside a longer word or number)
    replaced by ``<arg>``: an error that quotes the argument that varied."""
    if not token or token not in text:
        return text
    parts: list[str] = []
    start, size = 0, len(token)
    i = text.find(token)
    while i != -1:
        before = text[i - 1] if i > 0 else ""
        after = text[i + size] if i + size < len(text) else ""
        if before.isalnum() or after.isalnum():
            i = text.find(token, i + 1)
            continue
        parts.append(text[start:i])
        parts.append("<arg>")
        start = i + size
        i = text.find(token, start)
    parts.append(text[start:])
    return "".join(parts)


def _varied_errors(
    calls: Sequence[_Call], min_attempts: int, covered: set[int], mask: Masker
) -> list[tuple[str, list[_Call]]]:
    """Failed calls of one tool with the same error (and output) while one argument changes, the
    others equal: ``(argument, calls)`` for each such group of ``min_attempts`` or more. The
    argument's own value is not part of the error compared (``flight HAT001 not available``)."""
    groups: dict[tuple[str, str, str, str], list[_Call]] = defaultdict(list)
    for call in calls:
        if not call.failed or call.pos in covered:
            continue
        args = canonical(call.step.input)
        if not isinstance(args, dict):
            continue
        error = text_of(mask.mask([call.step.output, call.step.error]))
        for key, value in args.items():
            if isinstance(value, dict | list) or value is None:
                continue
            rest = fingerprint({k: v for k, v in args.items() if k != key})
            groups[(call.tool, key, rest, _without(error, str(value)))].append(call)
    found: list[tuple[str, list[_Call]]] = []
    taken: set[int] = set()
    for (_, key, _, _), group in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        group = [c for c in group if c.pos not in taken]
        values = {fingerprint(canonical(c.step.input)[key]) for c in group}
        if len(group) >= min_attempts and len(values) > 1:
            found.append((key, group))
            taken.update(c.pos for c in group)
    found.sort(key=lambda kv: kv[1][0].pos)
    return found


def _positions(calls: Sequence[_Call], step_ids: Iterable[str]) -> set[int]:
    wanted = set(step_ids)
    return {c.pos for c in calls if c.step.id in wanted}


def _new_observations(calls: Sequence[_Call]) -> set[int]:
    """Step indexes of the calls whose result was new in the run (and not empty)."""
    seen: set[Hashable] = set()
    new: set[int] = set()
    for call in calls:
        if call.result_fp not in seen and not call.empty:
            new.add(call.index)
        seen.add(call.result_fp)
    return new


def _message(step: Step) -> str:
    """An assistant message's text, whitespace collapsed (``""`` for other steps)."""
    if step.kind is StepKind.TEXT:
        value = step.output
    elif step.kind is StepKind.LLM:
        value = _reply_of(step.output)
    else:
        return ""
    return _collapsed(value if type(value) is str else text_of(value))


def _turns_of(calls: Sequence[_Call], chosen: set[int]) -> set[int]:
    """Step indexes of the turns that chose the calls at positions ``chosen``: the steps between
    the previous considered call and each of them."""
    owned: set[int] = set()
    previous = -1
    for call in calls:
        if call.pos in chosen:
            owned.update(range(previous + 1, call.index))
        previous = call.index
    return owned


_TEXT_KIND = StepKind.TEXT
_LLM_KIND = StepKind.LLM


def _collapsed(text: str) -> str:
    """``" ".join(text.split())``: the text itself when it is printable (whose only white space
    is the space) with no space at either end and no double space."""
    if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text
    return " ".join(text.split())


def _may_repeat(trace: Trace, min_messages: int) -> bool:
    """False when no assistant message of the run is said ``min_messages`` times at all, so
    :func:`_monologues` finds none, told without comparing any result."""
    said = [
        _message(step) for step in trace.steps if step.kind is _TEXT_KIND or step.kind is _LLM_KIND
    ]
    if len(said) - len(set(said)) < min_messages - 1:
        return False  # no message (nor the empty one) is said min_messages times
    counts = Counter(said)
    counts.pop("", None)
    return bool(counts) and max(counts.values()) >= min_messages


def _monologues(
    trace: Trace, calls: Sequence[_Call], min_messages: int, looped: set[int]
) -> list[list[int]]:
    """Step indexes of each message the agent repeated ``min_messages`` or more times with no new
    observation (a new, non-empty tool result, or a ``user`` step) between them. A ``text`` step
    that echoes the ``llm`` reply just before it is that reply, not a second message. Messages of
    the turns that chose calls already in a loop finding (positions ``looped``) are that loop's
    (its waste), not a monologue: each wasted step is counted once."""
    if not _may_repeat(trace, min_messages):
        return []
    observed = _new_observations(calls)
    owned = _turns_of(calls, looped)
    found: list[list[int]] = []
    said: dict[str, list[int]] = {}

    def close() -> None:
        found.extend(ix for ix in said.values() if len(ix) >= min_messages)
        said.clear()

    previous = ""
    for i, step in enumerate(trace.steps):
        if i in observed or step.kind is StepKind.USER:
            close()
            previous = ""
            continue
        text = "" if i in owned else _message(step)
        if text and not (
            step.kind is StepKind.TEXT
            and previous == text
            and trace.steps[i - 1].kind is StepKind.LLM
        ):
            said.setdefault(text, []).append(i)
        if step.kind in (StepKind.TEXT, StepKind.LLM):
            previous = text
    close()
    found.sort(key=lambda ix: ix[0])
    return found


@dataclass
class _Findings:
    """The findings of one scorer on one run, with what each wasted."""

    trace: Trace
    calls: Sequence[_Call]
    consider: _Consider
    findings: list[Finding] = field(default_factory=list)
    wastes: list[dict[str, Any]] = field(default_factory=list)
    wasted: int = 0

    def add(self, finding: Finding, waste: dict[str, Any], wasted: int) -> None:
        self.findings.append(finding)
        self.wastes.append(waste)
        self.wasted += wasted

    def loop(
        self,
        mode: FailureMode,
        group: Sequence[_Call],
        text: str,
        detail: str,
        **attributes: Any,
    ) -> None:
        """A finding on calls of one call (tool + arguments) of which all but the first were
        wasted; it names the volatile parts that differed between their results."""
        first = group[0]
        wasted = list(group[1:])
        waste = _waste(self.trace, self.calls, wasted)
        ignored = _ignored(self.consider, group)
        if ignored:
            detail += f" (ignoring {', '.join(ignored)})"
        self.add(
            Finding(
                failure_mode=mode,
                text=text,
                location=first.step.id,
                step_ids=[c.step.id for c in group],
                detail=detail,
                attributes={
                    "count": len(group),
                    "tool": first.tool,
                    "args": canonical(first.step.input),
                    **attributes,
                    **({"ignored": ignored} if ignored else {}),
                    "wasted_step_ids": [c.step.id for c in wasted],
                    "waste": waste,
                },
            ),
            waste,
            len(wasted),
        )


def _score_repeated(
    *,
    trace: Trace,
    evidence: Evidence,
    consider: _Consider,
    passed: Callable[[float, str, dict[str, Any]], _Passed],
    max_repeats: int = 3,
    max_errors: int = 3,
    max_failures: int = 3,
    max_varied_errors: int = 5,
    max_messages: int = 3,
    min_cycles: int = 3,
    polling: bool = True,
) -> ScoreResult | _Passed:
    """Flags the same call repeated with the same result, A-B-A-B loops, repeated failures and
    repeated messages."""
    calls = _calls(trace, evidence, consider)
    out = _Findings(trace, calls, consider)
    covered: set[int] = set()

    for start, end in _alternations(calls, min_cycles):
        stretch = calls[start : end + 1]
        a, b = stretch[0], stretch[1]
        cycles = len(stretch) // 2
        wasted = list(stretch[2:])
        waste = _waste(trace, calls, wasted)
        covered.update(c.pos for c in stretch)
        out.add(
            Finding(
                failure_mode=FailureMode.ALTERNATING_LOOP,
                text=f"{_call_text(a)} <-> {_call_text(b)} x{cycles}",
                location=a.step.id,
                step_ids=[c.step.id for c in stretch],
                detail=(
                    f"alternated between {a.tool} and {b.tool} {cycles} times "
                    "with the same arguments and results"
                ),
                attributes={
                    "count": cycles,
                    "tool": [a.tool, b.tool],
                    "args": [canonical(a.step.input), canonical(b.step.input)],
                    "wasted_step_ids": [c.step.id for c in wasted],
                    "waste": waste,
                },
            ),
            waste,
            len(wasted),
        )

    for stretch in _failing_in_a_row(calls, max_failures, covered):
        covered.update(c.pos for c in stretch)
        errors = list(dict.fromkeys(_first_line(c.step.error) for c in stretch))
        first = stretch[0]
        out.loop(
            FailureMode.ERROR_LOOP,
            stretch,
            f"{_call_text(first)} failed x{len(stretch)} in a row: {' | '.join(errors[:3])}",
            f"{first.tool} failed {len(stretch)} times in a row with the same arguments, "
            f"the error changing ({len(errors)} different errors)",
            error=_first_line(first.step.error, 500),
            varied={"error": [_first_line(c.step.error, 500) for c in stretch]},
        )

    skip = _polling(calls) if polling else set()
    for group in _groups(calls, covered):
        first = group[0]
        if first.failed:
            if len(group) < max_errors:
                continue
            covered.update(c.pos for c in group)
            error = _first_line(first.step.error)
            out.loop(
                FailureMode.ERROR_LOOP,
                group,
                f"{_call_text(first)} failed x{len(group)}: {error}",
                f"{first.tool} failed {len(group)} times with the same arguments and error",
                error=_first_line(first.step.error, 500),
            )
            continue
        group = [c for c in group if c.pos not in skip]
        if len(group) < max_repeats:
            continue
        out.loop(
            FailureMode.REPEATED_TOOL_CALL,
            group,
            f"{_call_text(first)} x{len(group)}",
            f"{first.tool} called {len(group)} times with the same arguments and result",
        )

    for key, group in _varied_errors(calls, max_varied_errors, covered, consider.masker):
        first = group[0]
        values = list(dict.fromkeys(_args_text(canonical(c.step.input)[key]) for c in group))
        shown = ", ".join(values[:4]) + (", …" if len(values) > 4 else "")
        out.loop(
            FailureMode.ERROR_LOOP,
            group,
            f"{first.tool} failed x{len(group)} with {key} = {shown}: "
            f"{_first_line(first.step.error)}",
            f"{first.tool} failed {len(group)} times with the same error while only {key!r} "
            f"changed ({len(values)} values)",
            error=_first_line(first.step.error, 500),
            varied={key: [canonical(c.step.input)[key] for c in group]},
        )

    looped = {pos for f in out.findings for pos in _positions(calls, f.step_ids)}
    for indexes in _monologues(trace, calls, max_messages, looped):
        message = _message(trace.steps[indexes[0]])
        wasted_ix = indexes[1:]
        waste = waste_of(trace, wasted_ix)
        shown = message if len(message) <= 120 else message[:119] + "…"
        out.add(
            Finding(
                failure_mode=FailureMode.REPEATED_MESSAGE,
                text=f"{json.dumps(shown, ensure_ascii=False)} x{len(indexes)}",
                location=trace.steps[indexes[0]].id,
                step_ids=[trace.steps[i].id for i in indexes],
                detail=(
                    f"the same message {len(indexes)} times with no new observation between them"
                ),
                attributes={
                    "count": len(indexes),
                    "message": message[:500],
                    "wasted_step_ids": [trace.steps[i].id for i in wasted_ix],
                    "waste": waste,
                },
            ),
            waste,
            len(wasted_ix),
        )

    findings = out.findings
    if len(findings) > 1:
        order = {step.id: i for i, step in enumerate(trace.steps)}
        findings = sorted(findings, key=lambda f: order.get(f.step_ids[0], -1))
    attributes = {"steps": len(calls), "wasted_steps": out.wasted, "waste": _sum_waste(out.wastes)}
    if not findings:
        return passed(0.0, f"no repeated calls in {_steps(len(calls))}", attributes)
    return ScoreResult(
        passed=False,
        value=float(out.wasted),
        detail=_detail(findings, out.wasted, "steps"),
        findings=findings,
        attributes=attributes,
    )


# --------------------------------------------------------------------------- excessive_steps


@dataclass(frozen=True, slots=True)
class _Auto:
    """How ``max_steps = "auto"`` learns a role's budget."""

    window: int
    """The role's most recent runs looked at."""
    min_runs: int
    """Fewer runs of history than this: the fixed budget."""
    percentile: float
    fallback: int
    """The fixed budget used until there is enough history."""


@dataclass(frozen=True, slots=True)
class _Budget:
    steps: int
    how: dict[str, Any]
    """How it was set: ``method`` (``fixed``, ``auto`` or ``fallback``), and for a learned one the
    percentile, the runs it was learned from, the window and the minimum."""

    @property
    def text(self) -> str:
        how = self.how
        if how["method"] == "auto":
            return (
                f"p{how['percentile']:g} of the role's last {how['runs']} runs "
                f"(window {how['window']})"
            )
        if how["method"] == "fallback":
            return (
                f"fixed until the role has {how['min_runs']} runs of history ({how['runs']} stored)"
                if how["runs"] is not None
                else "fixed: no stored history to learn from"
            )
        return "fixed"


def _count_steps(trace: Trace, consider: _Consider) -> int:
    """The considered steps of a run (what :func:`_calls` would list), without fingerprints."""
    wanted = frozenset(consider.kinds)
    skip = frozenset(consider.skip)
    return sum(
        1
        for step in trace.steps
        if str(step.kind) in wanted and (step.name or str(step.kind)).lower() not in skip
    )


def _percentile(values: Sequence[int], percentile: float) -> int:
    """The nearest-rank percentile of ``values`` (not empty)."""
    ordered = sorted(values)
    rank = math.ceil(round(percentile * len(ordered) / 100, 9))
    return ordered[min(max(rank, 1), len(ordered)) - 1]


def _learned_budget(evidence: Evidence, consider: _Consider, auto: _Auto) -> _Budget:
    """The role's own percentile of tool steps over its recent stored runs, learnt once per batch
    (:class:`~agentlens.eval._history.StepHistory`); the fixed fallback until there is enough."""
    history = evidence.history
    fallback = {"method": "fallback", "min_runs": auto.min_runs, "window": auto.window}
    if history is None:
        return _Budget(auto.fallback, {**fallback, "runs": None})
    agent = evidence.trace.agent

    def learn() -> list[int]:
        return [_count_steps(t, consider) for t in history.recent(agent, auto.window)]

    counts = history.memo(("excessive_steps", agent, consider, auto.window), learn)
    if len(counts) < auto.min_runs:
        return _Budget(auto.fallback, {**fallback, "runs": len(counts)})
    return _Budget(
        _percentile(counts, auto.percentile),
        {
            "method": "auto",
            "percentile": auto.percentile,
            "runs": len(counts),
            "window": auto.window,
            "min_runs": auto.min_runs,
        },
    )


def _score_excessive(
    *,
    trace: Trace,
    evidence: Evidence,
    consider: _Consider,
    passed: Callable[[float, str, dict[str, Any]], _Passed],
    max_steps: int = 15,
    auto: _Auto | None = None,
) -> ScoreResult | _Passed:
    """Flags a run with more tool and retrieval steps than its role's budget."""
    calls = _calls(trace, evidence, consider)
    budget = (
        _Budget(max_steps, {"method": "fixed"})
        if auto is None
        else _learned_budget(evidence, consider, auto)
    )
    limit = budget.steps
    n = len(calls)
    attributes: dict[str, Any] = {"steps": n, "budget": limit, "budget_set": budget.how}
    if n <= limit:
        return passed(
            float(n), f"{_steps(n)}, within the budget of {limit} ({budget.text})", attributes
        )
    excess = list(calls[limit:])
    waste = _waste(trace, calls, excess)
    by_tool = dict(Counter(c.tool for c in calls).most_common())
    finding = Finding(
        failure_mode=FailureMode.EXCESSIVE_STEPS,
        text=f"{n} tool steps (budget {limit})",
        location=excess[0].step.id,
        step_ids=[c.step.id for c in excess],
        detail=f"{n - limit} steps over the budget of {limit} ({budget.text})",
        attributes={
            "count": n,
            "budget": limit,
            "budget_set": budget.how,
            "excess": n - limit,
            "by_tool": by_tool,
            "waste": waste,
        },
    )
    attributes["waste"] = waste
    return ScoreResult(
        passed=False,
        value=float(n),
        detail=f"{n} tool steps, {n - limit} over the budget of {limit} ({budget.text})",
        findings=[finding],
        attributes=attributes,
    )


# --------------------------------------------------------------------------- no_progress


def _may_stall(calls: Sequence[_Call], min_stretch: int) -> bool:
    """False when no ``min_stretch`` consecutive calls can all be stale (:func:`_stretches`),
    told without fingerprinting: a call is stale only when it is empty or its result is equal to
    an earlier one, so one that is not empty and whose result's shape is its own breaks every
    stretch through it. Any ``min_stretch`` consecutive calls hold one of those at positions
    ``min_stretch - 1``, ``2 * min_stretch - 1``... so those are looked at first."""
    n = len(calls)
    if n < min_stretch:
        return False
    results = calls[0].results

    def stale(k: int) -> bool:
        return results.shared(k) or results.empty(k)

    for probe in range(min_stretch - 1, n, min_stretch):
        if not stale(probe):
            continue
        low = high = probe  # the stale calls around it, until there are min_stretch of them
        while low > 0 and probe - low < min_stretch - 1 and stale(low - 1):
            low -= 1
        while high + 1 < n and high - low + 1 < min_stretch and stale(high + 1):
            high += 1
        if high - low + 1 >= min_stretch:
            return True
    return False


def _stretches(calls: Sequence[_Call], min_stretch: int, polling: bool) -> list[list[_Call]]:
    """Stretches of ``min_stretch`` or more consecutive calls that are stale: empty, or whose
    result is equal to an earlier one, unless the call was polling (:func:`_polling`)."""
    waiting = _polling(calls) if polling else set()
    seen: set[Hashable] = set()
    stretches: list[list[_Call]] = []
    current: list[_Call] = []
    for call in calls:
        stale = call.pos not in waiting and (call.empty or call.result_fp in seen)
        seen.add(call.result_fp)
        if stale:
            current.append(call)
            continue
        if len(current) >= min_stretch:
            stretches.append(current)
        current = []
    if len(current) >= min_stretch:
        stretches.append(current)
    return stretches


def _score_no_progress(
    *,
    trace: Trace,
    evidence: Evidence,
    consider: _Consider,
    passed: Callable[[float, str, dict[str, Any]], _Passed],
    min_stretch: int = 5,
    polling: bool = True,
) -> ScoreResult | _Passed:
    """Flags stretches of consecutive tool steps whose results add no new evidence."""
    calls = _calls(trace, evidence, consider)
    stretches = _stretches(calls, min_stretch, polling) if _may_stall(calls, min_stretch) else []

    findings: list[Finding] = []
    wastes: list[dict[str, Any]] = []
    for stretch in stretches:
        empty = sum(1 for c in stretch if c.empty)
        tools = dict(Counter(c.tool for c in stretch).most_common())
        names = ", ".join(tools)
        waste = _waste(trace, calls, stretch)
        ignored = _ignored(consider, stretch)
        findings.append(
            Finding(
                failure_mode=FailureMode.NO_PROGRESS,
                text=f"{len(stretch)} steps without new evidence ({names})",
                location=stretch[0].step.id,
                step_ids=[c.step.id for c in stretch],
                detail=(
                    f"{len(stretch)} consecutive steps returned nothing new: "
                    f"{empty} empty, {len(stretch) - empty} repeating earlier results"
                    + (f" (ignoring {', '.join(ignored)})" if ignored else "")
                ),
                attributes={
                    "count": len(stretch),
                    "empty": empty,
                    "repeated": len(stretch) - empty,
                    "tool": tools,
                    **({"ignored": ignored} if ignored else {}),
                    "waste": waste,
                },
            )
        )
        wastes.append(waste)
    wasted = sum(len(s) for s in stretches)
    attributes = {"steps": len(calls), "wasted_steps": wasted, "waste": _sum_waste(wastes)}
    if not findings:
        return passed(
            0.0,
            f"no stretch of {min_stretch}+ steps without new evidence in {_steps(len(calls))}",
            attributes,
        )
    return ScoreResult(
        passed=False,
        value=float(wasted),
        detail=_detail(findings, wasted, "steps"),
        findings=findings,
        attributes=attributes,
    )


# --------------------------------------------------------------------------- the factories

Names = Sequence[str] | str
"""A list of names; one name alone is a list of one."""


@scorer(name="repeated_tool_calls", version="2", register=False)
def repeated_tool_calls(
    *,
    max_repeats: int = 3,
    max_errors: int = 3,
    max_failures: int = 3,
    max_varied_errors: int = 5,
    max_messages: int = 3,
    min_cycles: int = 3,
    exempt_tools: Names = (),
    bookkeeping: Names = DEFAULT_BOOKKEEPING,
    kinds: Names = DEFAULT_KINDS,
    volatile: Names = VOLATILE_PARTS,
    polling: bool = True,
) -> ScorerFn:
    """Flags the same call repeated with the same result, A-B-A-B loops, repeated failures and
    repeated messages.

    Args:
        max_repeats: flag a call (tool + normalised arguments) that returned the same result this
            many times in a run, consecutive or not.
        max_errors: flag a call that failed with the same error this many times.
        max_failures: flag a call that failed this many times in a row, whatever the errors.
        max_varied_errors: flag a tool that failed with the same error this many times while
            only one argument changed.
        max_messages: flag the same assistant message repeated this many times with no new
            observation between (``repeated_message``).
        min_cycles: flag A, B, A, B... alternation of two calls (with their results) repeated this
            many cycles.
        exempt_tools: tool names never flagged (health checks, status polls).
        bookkeeping: tool names that are bookkeeping, not work (``think``, condensation...):
            ignored like ``exempt_tools``.
        kinds: the step kinds considered.
        volatile: the volatile parts of results ignored when comparing them (``pid``,
            ``timestamp``, ``request_id``, ``uuid``, ``temp_path``, ``address``, ``duration``).
        polling: when true, identical calls whose result later changes (a job polled until done,
            a page that moved) are not counted as repeats.
    """
    options: dict[str, Any] = dict(
        consider=_Consider.of(kinds, exempt_tools, bookkeeping, volatile),
        max_repeats=_positive(max_repeats, "max_repeats", 2),
        max_errors=_positive(max_errors, "max_errors", 2),
        max_failures=_positive(max_failures, "max_failures", 2),
        max_varied_errors=_positive(max_varied_errors, "max_varied_errors", 2),
        max_messages=_positive(max_messages, "max_messages", 2),
        min_cycles=_positive(min_cycles, "min_cycles", 2),
        polling=polling,
    )

    return _analyser(_score_repeated, options)


@scorer(name="excessive_steps", version="2", register=False)
def excessive_steps(
    *,
    max_steps: int | Literal["auto"] = 15,
    window: int = 200,
    min_runs: int = 20,
    percentile: float = 95.0,
    fallback_steps: int = 15,
    exempt_tools: Names = (),
    bookkeeping: Names = DEFAULT_BOOKKEEPING,
    kinds: Names = DEFAULT_KINDS,
) -> ScorerFn:
    """Flags a run with more tool and retrieval steps than its role's budget.

    Args:
        max_steps: the budget of tool and retrieval steps per run; ``"auto"``: the role's own
            ``percentile`` of steps over its last ``window`` stored runs, learnt once per scoring
            batch (``fallback_steps`` until the role has ``min_runs`` runs of history).
        window: with ``"auto"``, how many of the role's most recent runs it learns from.
        min_runs: with ``"auto"``, the history needed before the budget is learnt.
        percentile: with ``"auto"``, the percentile of the role's steps that is its budget.
        fallback_steps: with ``"auto"``, the fixed budget until there is enough history.
        exempt_tools: tool names not counted against the budget.
        bookkeeping: tool names that are bookkeeping, not work: not counted either.
        kinds: the step kinds counted.
    """
    if max_steps != "auto":
        max_steps = _positive(max_steps, "max_steps", 0)
    auto = (
        _Auto(
            window=_positive(window, "window", 1),
            min_runs=_positive(min_runs, "min_runs", 1),
            percentile=_fraction(percentile, "percentile"),
            fallback=_positive(fallback_steps, "fallback_steps", 0),
        )
        if max_steps == "auto"
        else None
    )
    options: dict[str, Any] = dict(
        # the default volatile parts (unused for a count): shares the calls of the other two
        consider=_Consider.of(kinds, exempt_tools, bookkeeping),
        max_steps=max_steps if auto is None else 0,
        auto=auto,
    )

    return _analyser(_score_excessive, options)


@scorer(name="no_progress", version="2", register=False)
def no_progress(
    *,
    min_stretch: int = 5,
    exempt_tools: Names = (),
    bookkeeping: Names = DEFAULT_BOOKKEEPING,
    kinds: Names = DEFAULT_KINDS,
    volatile: Names = VOLATILE_PARTS,
    polling: bool = True,
) -> ScorerFn:
    """Flags stretches of consecutive tool steps whose results add no new evidence.

    Args:
        min_stretch: flag this many consecutive steps whose results are empty or identical to
            an earlier result.
        exempt_tools: tool names ignored (neither progress nor waste).
        bookkeeping: tool names that are bookkeeping, not work: ignored like ``exempt_tools``.
        kinds: the step kinds considered.
        volatile: the volatile parts of results ignored when comparing them.
        polling: when true, a repeated result of a call whose result later changes is waiting,
            not a step without progress.
    """
    options: dict[str, Any] = dict(
        consider=_Consider.of(kinds, exempt_tools, bookkeeping, volatile),
        min_stretch=_positive(min_stretch, "min_stretch", 2),
        polling=polling,
    )

    return _analyser(_score_no_progress, options)


# --------------------------------------------------------------------------- the online guard


@dataclass(frozen=True, slots=True)
class LoopRule:
    """The rule of ``repeated_tool_calls`` for the online loop guard
    (:class:`agentlens.capture.RoleGuard`): its threshold, the tools it never counts, and how it
    compares calls and results."""

    repeats: int
    skip: frozenset[str]
    call_key: Callable[[str, Any], Hashable]
    result_key: Callable[[Any, Any], Hashable]


_KEY_TEXT_MAX = 512
"""A call key keeps the arguments' canonical JSON text up to this size, a digest of it above."""


def _canonical_text(text: str) -> bool:
    """True when compact JSON text (``orjson``'s, keys sorted) is already the text of its value's
    :func:`canonical` form, told from the text alone: read as JSON, nothing in it is what
    :func:`canonical` rewrites. Every test errs on the side of ``False`` (the full normalisation,
    never a wrong key):

    - ASCII only and no escape (``orjson`` escapes the control characters, ``"`` and ``\\``),
      hence no white space but the space, which a string may hold, once at a time, and neither
      first nor last (compact JSON has no space outside strings, and every ``"`` delimits one:
      ``" `` opens a string with a space, `` "`` closes one with it);
    - no string that starts with ``{`` or ``[`` (``"{``, ``"[``: nothing else puts a bracket
      right after a quote), which may hold JSON to parse;
    - no integral float (``10.0``, ``-0.0``, ``1e+16``), which becomes an integer.

    Substring tests on ``str``, not ``bytes``: several times faster on short texts (measured).
    """
    if not text.isascii() or "\\" in text or "e+" in text:
        return False
    if " " in text and ('" ' in text or ' "' in text or "  " in text):
        return False
    if '"{' in text or '"[' in text:
        return False
    return ".0" not in text or not (
        ".0," in text or ".0}" in text or ".0]" in text or text.endswith(".0")
    )


def _canonical_args(args: Any) -> str:
    """The compact JSON text, keys sorted, of the canonical form of ``args`` (JSON data as
    capture records it): one ``orjson`` call when the arguments are already canonical (the
    common case, told by :func:`_canonical_text`), else :func:`canonical` first. Equal for
    arguments whose canonical forms are equal, and only for them."""
    try:
        text = orjson.dumps(args, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # an integer past 64 bits, a lone surrogate, a key that is not text
        text = None
    if text is not None and _canonical_text(text):
        return text
    canon = canonical(args)
    try:
        return orjson.dumps(canon, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return json.dumps(
            canon, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=repr
        )


def _call_key(tool: str, args: Any) -> Hashable:
    """Equal for calls with the same tool and the same normalised arguments (the equality of
    ``repeated_tool_calls``' call fingerprints): the tool and the canonical text of the
    arguments (:func:`_canonical_args`), or a digest of a long one."""
    text = _canonical_args(args)
    if len(text) <= _KEY_TEXT_MAX:
        return (tool, text)
    return (tool, hashlib.sha1(text.encode("utf-8", "surrogatepass")).digest(), len(text))


def loop_rule(options: Mapping[str, Any]) -> LoopRule:
    """The online guard's rule from ``repeated_tool_calls``' options (as configured for a role;
    the defaults for those not given): ``max_repeats``, the volatile parts, the bookkeeping
    events and exempt tools.

    Raises:
        ConfigError: a bad option value.
    """
    merged = {**repeated_tool_calls.defaults, **options}
    consider = _Consider.of(
        merged["kinds"], merged["exempt_tools"], merged["bookkeeping"], merged["volatile"]
    )
    mask = consider.masker.mask

    def result_key(output: Any, error: Any) -> Hashable:
        return fingerprint([mask(output), mask(error) if _is_error(error) else None])

    return LoopRule(
        repeats=_positive(merged["max_repeats"], "max_repeats", 2),
        skip=frozenset(consider.skip),
        call_key=_call_key,
        result_key=result_key,
    )
