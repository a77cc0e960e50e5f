"""The transcript analysers' fast paths give exactly what the plain definitions give.

- Calls and results are compared by tokens (:func:`_tokens`): a call whose shape no other call of
  the run has is not masked or fingerprinted at all. Two tokens must be equal exactly when the
  fingerprints are, and the three scorers' results must be those of fingerprinting every call.
- The masker skips what its hints say cannot hold a volatile part (:meth:`Masker._quiet` on the
  JSON text of a value, the hint of each part on each string): held here to a masker with no
  hints at all, which runs every part's expression on every string.
"""

from __future__ import annotations

import itertools
import random
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from _score_rows import row_made_as
from _transcript_runs import score
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentlens.config import Settings
from agentlens.eval import Evidence, get_scorer, run_scorers
from agentlens.eval._normalize import canonical_json, fingerprint, is_empty_result, json_container
from agentlens.eval._volatile import (
    _MAX_DEPTH,
    _SHORTEST,
    _TEXT,
    Masker,
    _field_kind,
    _scalar,
    masker,
)
from agentlens.eval.detectors import _transcript
from agentlens.eval.detectors._transcript import _Call, _calls, _Consider
from agentlens.model import Score, ScoreResult, ScoreRow, Step, StepKind, Trace

# --------------------------------------------------------------------------- the masker


class _PlainMasker:
    """The masker's definition: fields by name, then every part's expression, in order, on every
    string (a string holding JSON parsed first); no hint, no quick test of the whole value."""

    def __init__(self, parts: tuple[str, ...]) -> None:
        self.parts = parts
        self.patterns = [(p, re.compile(_TEXT[p])) for p in parts]

    def walk(self, value: Any, found: dict[str, list[str]] | None, depth: int = 0) -> Any:
        if isinstance(value, str):
            if len(value) < _SHORTEST:
                return value
            parsed = json_container(value.strip()) if depth < _MAX_DEPTH else None
            if parsed is not None:
                return self.walk(parsed, found, depth + 1)
            for part, pattern in self.patterns:
                hits = pattern.findall(value)
                if hits and found is not None:
                    found.setdefault(part, []).extend(hits)
                value = pattern.sub(f"<{part}>", value)
            return value
        if depth >= _MAX_DEPTH:
            return value
        if isinstance(value, dict):
            out = {}
            for key, item in value.items():
                kind = _field_kind(key) if isinstance(key, str) else None
                if kind in self.parts and _scalar(item):
                    if found is not None:
                        found.setdefault(kind, []).append(f"{key}={item}")
                    out[key] = f"<{kind}>"
                else:
                    out[key] = self.walk(item, found, depth + 1)
            return out
        if isinstance(value, list | tuple):
            return [self.walk(item, found, depth + 1) for item in value]
        return value


_PIECES = [
    "pid 4242",
    "PID=17",
    "process 9",
    "2026-12-01T13:41:34.123Z",
    "2026-12-01 13:41",
    "Tue, 01 Dec 2026 13:41:34 GMT",
    "13:41:34.123",
    "06:00:00",
    "10:00",
    "request_id=ab12",
    "X-Request-ID: 77f",
    "trace id: 9a9",
    "req_abcdefgh1234",
    "123e4567-e89b-12d3-a456-426614174000",
    "/tmp/x1",
    "tmpk3j_x9ab",
    "C:\\Users\\me\\AppData\\Local\\Temp\\a.txt",
    "0x7f3a2b1c4d50",
    "0.52s",
    "1.5 ms",
    "took 120 ms",
    "0m1.234s",
    "the 1990s",
    '{"balance":1834.2}',
    '{"pid": 5, "x": "2026-12-01T13:41:34Z"}',
    "[1, 2]",
    "ok",
    "a b",
    " ",
    ":",
    "-",
]
_TEXTS = st.lists(st.sampled_from(_PIECES), min_size=1, max_size=4).map(" ".join) | st.text(
    alphabet="0123456789:.- apmsTZx", max_size=16
)
_KEYS = st.sampled_from(
    ["id", "pid", "timestamp", "duration_ms", "requestId", "x-request-id", "took", "note", "n"]
)
_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5000),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6),
    _TEXTS,
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=4)),
    max_leaves=16,
)


@settings(max_examples=1500, deadline=None)
@given(_VALUES)
@example("0m0s")  # time's minutes and seconds without a fraction: once missed by the hints
@example({"t": ["took 12m5s"]})
def test_the_masker_masks_and_finds_what_its_definition_does(value: Any) -> None:
    fast = masker()
    plain = _PlainMasker(fast.parts)
    # compared in canonical form: the masker leaves a quiet value's JSON strings unparsed,
    # which the canonical form (what is fingerprinted) parses anyway
    assert canonical_json(fast.mask(value)) == canonical_json(plain.walk(value, None))
    found: dict[str, list[str]] = {}
    plain.walk(value, found)
    assert fast.found(value) == {p: tuple(found[p]) for p in fast.parts if p in found}


def test_a_json_number_after_its_key_is_no_hint_of_a_time() -> None:
    # the compact JSON text of this value holds ":1834" and ":12": neither is a clock time
    value = {"balance": 1834.2, "items": [{"qty": 12, "price": 3.5}]}
    assert masker()._quiet(value)
    assert not masker()._quiet({"at": "10:00"})  # a clock time in a string still is a hint


# --------------------------------------------------------------------------- tokens of calls

_ARGS = st.one_of(
    st.none(),
    st.sampled_from([{"q": "x"}, {"q": "y"}, {" q": "x"}, {"q": "x", "page": 2}, ["x"], 3, 3.0]),
    st.sampled_from(['{"q": "x"}', "x", " x "]),
)
_OUTPUTS = st.one_of(
    _VALUES,
    st.sampled_from(
        [
            {"id": 1, "tier": "gold"},
            {"id": 2, "tier": "gold"},
            {"tier": "gold", "id": 1},
            [{"id": 1}, {"id": 2}],
            [{"id": 1}, {"id": 3}],
            [{"sku": 1}, {"sku": 2}],
            '[{"id": 1}, {"id": 2}]',
            ["C:\\Users\\me\\Temp\\a"],
            '["C:\\Users\\me\\Temp\\a"]',
            {"at": "2026-12-01T13:41:34Z", "n": 1},
            {"at": "2026-12-01T13:41:35Z", "n": 1},
            [],
            {},
            1.0,
            1,
            True,
        ]
    ),
)
_CALLS = st.lists(
    st.tuples(
        st.sampled_from(["search", "lookup", " search", "{}"]),
        _ARGS,
        _OUTPUTS,
        st.sampled_from([None, None, None, "boom", "pid 4242 died", {"code": 1}]),
    ),
    max_size=10,
)


def _trace(calls: list[tuple[str, Any, Any, Any]]) -> Trace:
    steps = [
        Step(id=f"s{i}", kind=StepKind.TOOL, name=name, input=args, output=output, error=error)
        for i, (name, args, output, error) in enumerate(calls)
    ]
    return Trace(id="r", steps=steps, output="done")


@given(st.lists(st.one_of(st.integers(-3, 3), st.sampled_from(["a", "b", 1.0, True, None]))))
def test_alone_is_its_definition(values: list[Any]) -> None:
    counts = Counter(values)
    assert _transcript._alone(values) == [counts[v] == 1 for v in values]


def _plain_tokens(shapes: Any, fingerprint_of: Any, n: int) -> list[Any]:
    return [fingerprint_of(k) for k in range(n)]


@settings(max_examples=600, deadline=None)
@given(_CALLS)
# a text holding JSON, and a text that becomes JSON once masked, equal to an array of records
@example([("a", None, '[{"id": 1}, {"id": 2}]', None), ("a", None, [{"id": 1}, {"id": 2}], None)])
@example([("a", None, ["<temp_path>"], None), ("a", None, '["C:\\Users\\me\\Temp\\a"]', None)])
# arguments equal once canonical: a key with spaces, a float that is an integer, JSON text
@example([("a", {" q": "x"}, 1, None), ("a", {"q": "x"}, 2, None), ("a", '{"q": "x"}', 3, None)])
@example([("a", 3.0, 1, None), ("a", 3, 2, None), (" a", 3, 3, None)])
# arguments whose canonical text is past the length kept as a token (then its digest)
@example([("a", "x" * 600, 1, None), ("a", "x" * 600 + " ", 2, None), ("a", "x" * 601, 3, None)])
@example([("a", "y" * 504, 1, None), ("a", "y" * 505, 2, None), ("a", "y" * 504, 3, None)])
def test_tokens_are_equal_exactly_when_the_fingerprints_are(
    calls: list[tuple[str, Any, Any, Any]],
) -> None:
    trace = _trace(calls)
    consider = _Consider.of(["tool", "retrieval"], (), ())
    mask = consider.masker.mask
    found = _calls(trace, Evidence(trace), consider)
    fps = [
        (
            fingerprint([c.tool, c.step.input]),
            fingerprint([mask(c.step.output), mask(c.step.error) if c.failed else None]),
        )
        for c in found
    ]
    for (a, fa), (b, fb) in itertools.combinations(zip(found, fps, strict=True), 2):
        assert (a.call_fp == b.call_fp) == (fa[0] == fb[0])
        assert (a.result_fp == b.result_fp) == (fa[1] == fb[1])
        if a.call_fp == b.call_fp:  # outcomes are compared only between equal calls
            assert (a.outcome == b.outcome) == (fa[1] == fb[1])


class _EagerResults:
    """The plain definition of :class:`_transcript._Results`: every result masked and
    fingerprinted, every emptiness computed, at once."""

    def __init__(
        self, steps: list[Step], failed: list[bool], mask: Masker, call_tokens: list[Any]
    ) -> None:
        self.repeated = list(range(len(steps)))  # every call's result compared with the others'
        self.n = len(steps)
        self.tokens = [
            fingerprint([mask.mask(s.output), mask.mask(s.error) if f else None])
            for s, f in zip(steps, failed, strict=True)
        ]
        self.empties = [
            not f and is_empty_result(s.output) for s, f in zip(steps, failed, strict=True)
        ]

    def __len__(self) -> int:
        return self.n

    def token(self, k: int) -> str:
        return self.tokens[k]

    def outcome(self, k: int) -> str:
        return self.tokens[k]

    def shared(self, k: int) -> bool:
        return True

    def empty(self, k: int) -> bool:
        return self.empties[k]


def _plain_alternations(calls: list[_Call], min_cycles: int) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    n = len(calls)
    i = 2
    while i < n:
        if calls[i].key == calls[i - 2].key and calls[i].key != calls[i - 1].key:
            start, end = i - 2, i
            while end + 1 < n and calls[end + 1].key == calls[end - 1].key:
                end += 1
            if (end - start + 1) // 2 >= min_cycles:
                found.append((start, end))
            i = end + 1
        else:
            i += 1
    return found


def _plain_groups(calls: list[_Call], covered: set[int]) -> list[list[_Call]]:
    """Every call not covered, grouped by (call, result), singletons included."""
    groups: dict[Any, list[_Call]] = {}
    for call in calls:
        if call.pos not in covered:
            groups.setdefault(call.key, []).append(call)
    return list(groups.values())


def _plain_polling(calls: list[_Call]) -> set[int]:
    later: dict[Any, set[Any]] = {}
    polling: set[int] = set()
    for call in reversed(calls):
        results = later.setdefault(call.call_fp, set())
        if not call.failed and (len(results) > 1 or (results and call.result_fp not in results)):
            polling.add(call.pos)
        results.add(call.result_fp)
    return polling


def _plain(patch: pytest.MonkeyPatch) -> None:
    """The analysers as defined: every call and result fingerprinted, compared everywhere, no
    early answer."""
    patch.setattr(_transcript, "_tokens", _plain_tokens)
    patch.setattr(_transcript, "_Results", _EagerResults)
    patch.setattr(_transcript, "_alternations", _plain_alternations)
    patch.setattr(_transcript, "_groups", _plain_groups)
    patch.setattr(_transcript, "_polling", _plain_polling)
    patch.setattr(_transcript, "_may_stall", lambda calls, min_stretch: True)
    patch.setattr(_transcript, "_may_repeat", lambda trace, min_messages: True)


_MESSAGES = st.sampled_from(["Let me check.", "Let me  check. ", "ok", "", "Done: {}"])
_STEPS = st.lists(
    st.one_of(
        _CALLS.map(lambda calls: ("calls", calls)),
        st.tuples(st.sampled_from(["text", "llm", "user"]), _MESSAGES),
    ),
    max_size=8,
)


def _steps_trace(parts: list[tuple[str, Any]]) -> Trace:
    steps: list[Step] = []
    for kind, value in parts:
        if kind == "calls":
            for name, args, output, error in value:
                steps.append(
                    Step(
                        id=f"s{len(steps)}",
                        kind=StepKind.TOOL,
                        name=name,
                        input=args,
                        output=output,
                        error=error,
                        attributes={"duration_ms": 10 * len(steps), "cost_usd": 0.001},
                    )
                )
        else:
            steps.append(Step(id=f"s{len(steps)}", kind=StepKind(kind), output=value))
    return Trace(id="r", steps=steps, output="done")


_LOOSE = {
    "repeated_tool_calls": {
        "max_repeats": 2,
        "max_errors": 2,
        "max_failures": 2,
        "max_varied_errors": 2,
        "max_messages": 2,
        "min_cycles": 2,
    },
    "no_progress": {"min_stretch": 2},
    "excessive_steps": {"max_steps": 3},
}


def _both(trace: Trace, options: dict[str, dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    names = ("repeated_tool_calls", "no_progress", "excessive_steps")
    exclude = {"scored_at"}
    fast = [score(n, trace, **options.get(n, {})).model_dump(exclude=exclude) for n in names]
    with pytest.MonkeyPatch.context() as patch:
        _plain(patch)
        slow = [score(n, trace, **options.get(n, {})).model_dump(exclude=exclude) for n in names]
    return fast, slow


@settings(max_examples=300, deadline=None)
@given(_CALLS)
def test_the_analysers_give_what_fingerprinting_every_call_gives(
    calls: list[tuple[str, Any, Any, Any]],
) -> None:
    options = {"repeated_tool_calls": {"max_repeats": 2, "min_cycles": 2}, "no_progress": {}}
    fast, slow = _both(_trace(calls), options)
    assert fast == slow


_FLAGGED: dict[str, int] = {}


@settings(max_examples=500, deadline=None)
@given(_STEPS, st.sampled_from([{}, _LOOSE]))
# a loop of a call with its result, A-B-A-B, a stretch of empty results, a repeated message
@example([("calls", [("a", 1, 2, None)] * 3)], {})
@example([("calls", [("a", 1, 2, None), ("b", 1, 2, None)] * 3)], {})
@example([("calls", [("a", 1, [], None), ("b", 2, "", None), ("c", 3, None, None)] * 2)], {})
@example([("text", "Let me check."), ("llm", "Let me  check. "), ("text", "Let me check.")], {})
# polling: the same call, its result changing at last
@example([("calls", [("a", 1, 2, None)] * 5 + [("a", 1, 3, None)])], {})
def _differential(parts: list[tuple[str, Any]], options: dict[str, dict[str, Any]]) -> None:
    fast, slow = _both(_steps_trace(parts), options)
    assert fast == slow
    names = ("repeated_tool_calls", "no_progress", "excessive_steps")
    for result, name in zip(fast, names, strict=True):
        if not result["passed"]:
            _FLAGGED[name] = _FLAGGED.get(name, 0) + 1


def test_the_analysers_give_their_plain_definitions_results() -> None:
    _FLAGGED.clear()
    _differential()
    # flagged results are compared too, not only passes
    assert set(_FLAGGED) == {"repeated_tool_calls", "no_progress", "excessive_steps"}
    assert min(_FLAGGED.values()) >= 20, _FLAGGED


def test_a_run_of_distinct_calls_compares_no_result(monkeypatch: pytest.MonkeyPatch) -> None:
    """The end-to-end benchmark's run: two equal calls of different results' shapes, two pages
    of invoices of one shape but different calls. No result is masked nor fingerprinted."""
    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    try:
        from bench_grounding import make_run
    finally:
        sys.path.pop(0)
    fingerprinted: list[Any] = []
    real, real_json = _transcript.fingerprint, _transcript.canonical_json

    def counting(value: Any) -> str:
        fingerprinted.append(value)
        return real(value)

    def counting_json(value: Any) -> str:
        if isinstance(value, list):  # a call's [tool, arguments] (not a tool's name alone)
            fingerprinted.append(value)
        return real_json(value)

    monkeypatch.setattr(_transcript, "fingerprint", counting)
    monkeypatch.setattr(_transcript, "canonical_json", counting_json)
    trace = Trace.model_validate(make_run(0, random.Random(0)))
    names = ("repeated_tool_calls", "no_progress", "excessive_steps")
    report = run_scorers([get_scorer(n) for n in names], trace=trace, settings=Settings())
    assert all(report.results[n].passed for n in names)
    # the arguments of the two get_customer calls, and nothing else
    assert [value[0] for value in fingerprinted] == ["get_customer", "get_customer"]


def test_distinct_calls_are_not_fingerprinted(monkeypatch: pytest.MonkeyPatch) -> None:
    fingerprinted: list[Any] = []
    real = _transcript.fingerprint

    def counting(value: Any) -> str:
        fingerprinted.append(value)
        return real(value)

    monkeypatch.setattr(_transcript, "fingerprint", counting)
    trace = _trace(
        [
            ("get_customer", {"id": "C1"}, {"id": "C1", "name": "Jane"}, None),
            ("list_invoices", {"customer": "C1"}, [{"id": "I1"}, {"id": "I2"}], None),
            ("list_invoices", {"customer": "C1", "page": 2}, [{"id": "I3"}, {"id": "I4"}], None),
            ("search_docs", {"q": "refunds"}, [{"doc": "D1"}, {"doc": "D2"}], None),
        ]
    )
    consider = _Consider.of(["tool", "retrieval"], (), ())
    calls = _calls(trace, Evidence(trace), consider)
    # no result is fingerprinted until one is asked for; then only the two pages of invoices
    # (same shape: two records with the same keys) are compared by fingerprint; every call's
    # arguments differ in their keys or tool
    assert fingerprinted == []
    assert calls[1].result_fp != calls[2].result_fp
    assert calls[0].result_fp != calls[3].result_fp
    assert len(fingerprinted) == 2
    assert len({c.call_fp for c in calls}) == 4


@settings(max_examples=1000, deadline=None)
@given(st.text() | st.text(alphabet=" \t\n\xa0\u2003ab.", max_size=12))
@example("a  b")
@example(" a")
@example("a\u3000b")
def test_a_collapsed_message_is_its_definition(text: str) -> None:
    assert _transcript._collapsed(text) == " ".join(text.split())


_ROWS: dict[str, int] = {}


@settings(max_examples=300, deadline=None)
@given(_STEPS, st.sampled_from([{}, _LOOSE, {"excessive_steps": {"max_steps": "auto"}}]))
@example([("calls", [("a", 1, 2, None)] * 3)], _LOOSE)
@example([("calls", [("a", 1, 2, None)])], {})
def _rows(parts: list[tuple[str, Any]], options: dict[str, dict[str, Any]]) -> None:
    trace = _steps_trace(parts)
    for name in ("repeated_tool_calls", "no_progress", "excessive_steps"):
        s = get_scorer(name)
        if name in options:
            s = s.with_options(**options[name])
        given = s._score_or_row(trace, Evidence(trace), s.stored_version)
        result = s.score(trace, Evidence(trace))
        if not result.passed:
            assert type(given) is ScoreResult
            assert given == result
            continue
        assert type(given) is ScoreRow
        _ROWS[name] = _ROWS.get(name, 0) + 1
        score = Score.of(result, run_id=trace.id, scorer=s.name, version=s.stored_version)
        assert given == row_made_as(score, given)


def test_a_passed_runs_row_is_the_row_of_its_score() -> None:
    """Asked for a row (as batch scoring asks when it keeps no score nothing reads), each
    analyser gives a passed run's stored row, made without the result or its score: the row of
    the score it gives otherwise, to the byte (the learnt budget's settings included). A run
    that did not pass gets its result, the same one."""
    _ROWS.clear()
    _rows()
    assert set(_ROWS) == {"repeated_tool_calls", "no_progress", "excessive_steps"}
    assert min(_ROWS.values()) >= 50, _ROWS


@pytest.mark.parametrize(
    ("value", "detail", "attributes"),
    [
        (0.0, "no repeated calls in 8 tool steps", {"steps": 8, "wasted_steps": 0, "waste": {}}),
        (3.0, "3 tool steps, within the budget of 15 (fixed)", {"budget_set": {"method": "x"}}),
        (0.0, "", {}),
    ],
)
def test_a_passing_result_is_what_validation_builds(
    value: float, detail: str, attributes: dict[str, Any]
) -> None:
    assert _transcript._passed is _transcript._passed_direct
    fast = _transcript._passed_direct(value, detail, dict(attributes))
    slow = ScoreResult(passed=True, value=value, detail=detail, attributes=dict(attributes))
    assert list(fast.__dict__.items()) == list(slow.__dict__.items())
    assert fast.__pydantic_fields_set__ == slow.__pydantic_fields_set__
    assert fast.__pydantic_extra__ == slow.__pydantic_extra__
    assert fast.model_dump_json() == slow.model_dump_json()
    assert fast == slow
