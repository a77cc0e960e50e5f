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
import re
from typing import Any

import pytest
from _transcript_runs import score
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentlens.eval import Evidence
from agentlens.eval._normalize import canonical_json, fingerprint, json_container
from agentlens.eval._volatile import _MAX_DEPTH, _SHORTEST, _TEXT, _field_kind, _scalar, masker
from agentlens.eval.detectors import _transcript
from agentlens.eval.detectors._transcript import _calls, _Consider
from agentlens.model import Step, StepKind, Trace

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


@settings(max_examples=300, deadline=None)
@given(_CALLS)
def test_the_analysers_give_what_fingerprinting_every_call_gives(
    calls: list[tuple[str, Any, Any, Any]],
) -> None:
    names = ("repeated_tool_calls", "no_progress", "excessive_steps")
    options = {"repeated_tool_calls": {"max_repeats": 2, "min_cycles": 2}, "no_progress": {}}
    exclude = {"scored_at"}
    fast = [
        score(n, _trace(calls), **options.get(n, {})).model_dump(exclude=exclude) for n in names
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_transcript, "_tokens", _plain_tokens)
        slow = [
            score(n, _trace(calls), **options.get(n, {})).model_dump(exclude=exclude) for n in names
        ]
    assert fast == slow


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
    # only the two pages of invoices (same shape: two records with the same keys) are compared
    # by fingerprint; every call's arguments differ in their keys or tool
    assert len(fingerprinted) == 2
    assert calls[1].result_fp != calls[2].result_fp
    assert len({c.call_fp for c in calls}) == 4
