"""Evidence's fast paths give exactly what the plain definitions give.

:attr:`Evidence.items` and :attr:`Evidence.turns` build their objects through the slots (not the
frozen dataclasses' ``__init__``) and take a string as its own text without the calls of
:func:`_evidence_text` / :func:`text_of`; the items read each step's fields from its
``__dict__`` and dump a number, or a list led by a dict that is no text block, without
:func:`_text`'s tests; :meth:`Evidence.memo` and :meth:`Evidence.before`
look up with ``get``. Each is held here to the plain definition, written out as it was, on
generated runs.
"""

from __future__ import annotations

import bisect
import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentlens.config import DEFAULT_EVIDENCE
from agentlens.eval import Evidence, EvidenceItem, Turn, text_of
from agentlens.eval._evidence import (
    _KIND_TEXT,
    _TURN_KINDS,
    _evidence_text,
    _make_item,
    _make_turn,
    _reply_of,
)
from agentlens.model import StepKind, Trace


def _plain_items(trace: Trace, sources: frozenset[str]) -> tuple[EvidenceItem, ...]:
    out: list[EvidenceItem] = []
    if "input" in sources and trace.input not in (None, ""):
        out.append(
            EvidenceItem("input", "input", None, trace.input, _evidence_text(trace.input), -1)
        )
    for i, step in enumerate(trace.steps):
        if step.kind not in sources:
            continue
        kind = _KIND_TEXT.get(step.kind) or str(step.kind)
        truncated = bool(step.attributes.get("truncated"))
        if step.output is not None:
            out.append(
                EvidenceItem(
                    step.id, kind, step.name, step.output, _evidence_text(step.output), i, truncated
                )
            )
        if step.error not in (None, "") and kind in ("tool", "retrieval"):
            out.append(
                EvidenceItem(
                    step.id, kind, step.name, step.error, _evidence_text(step.error), i, truncated
                )
            )
    return tuple(out)


def _plain_turns(trace: Trace, items: tuple[EvidenceItem, ...]) -> tuple[Turn, ...]:
    positions = [item.index for item in items]
    turns: list[Turn] = []
    seen: set[str] = set()
    for i, step in enumerate(trace.steps):
        if step.kind not in _TURN_KINDS:
            continue
        value = _reply_of(step.output) if step.kind is StepKind.LLM else step.output
        text = text_of(value)
        if not text.strip() or text in seen:
            continue
        seen.add(text)
        turns.append(Turn(step.id, value, text, i, items[: bisect.bisect_left(positions, i)]))
    text = text_of(trace.output)
    if text.strip() and text not in seen:
        turns.append(Turn("output", trace.output, text, len(trace.steps), items))
    return tuple(turns)


class _Str(str):
    """A str subclass: not ``type(value) is str``, so it takes the plain path."""


_TEXTS = st.sampled_from(["", " ", "CUST-1 is $5", "  \n", "found it", "İ x", "{}"])
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**20), 10**20) | st.floats() | _TEXTS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXTS, inner, max_size=3),
    max_leaves=8,
)
_VALUES = st.one_of(
    _JSON,
    st.builds(lambda t: {"role": "assistant", "content": t}, _TEXTS),
    st.builds(lambda t: [{"type": "text", "text": t}, {"type": "text", "text": "b"}], _TEXTS),
    st.builds(lambda t: {"choices": [{"message": {"content": t}}]}, _TEXTS),
    # lists led by a dict, a text block or not, and mixed lists: the fast path dumps a list
    # whose first element is a dict but no text block, and leaves the rest to _text
    st.lists(
        st.fixed_dictionaries({"type": st.sampled_from(["text", "image"]), "text": _TEXTS})
        | st.dictionaries(_TEXTS, _JSON, max_size=2)
        | _TEXTS,
        min_size=1,
        max_size=3,
    ),
)
_STEPS = st.lists(
    st.fixed_dictionaries(
        {
            "kind": st.sampled_from([str(k) for k in StepKind]),
            "output": _VALUES,
            "error": st.none() | _TEXTS,
            "name": st.none() | st.sampled_from(["get", "search"]),
            "attributes": st.sampled_from([{}, {"truncated": True}, {"truncated": 0}]),
        }
    ),
    max_size=8,
)
_SOURCES = st.sampled_from(
    [
        frozenset(DEFAULT_EVIDENCE),
        frozenset({"tool", "retrieval"}),
        frozenset({"input", "tool", "text"}),
        frozenset(),
    ]
)


def _trace(run_input: Any, steps: list[dict[str, Any]], output: Any) -> Trace:
    return Trace.model_validate(
        {
            "input": run_input,
            "output": output,
            "steps": [{"id": f"s{n}", **step} for n, step in enumerate(steps)],
        }
    )


def _fields(obj: Any) -> list[Any]:
    return [type(obj), *(getattr(obj, f.name) for f in dataclasses.fields(obj))]


@settings(max_examples=400, deadline=None)
@given(_VALUES, _STEPS, _VALUES, _SOURCES)
def test_items_and_turns_are_those_of_the_plain_definition(
    run_input: Any, steps: list[dict[str, Any]], output: Any, sources: frozenset[str]
) -> None:
    trace = _trace(run_input, steps, output)
    evidence = Evidence(trace, sources)
    plain = _plain_items(trace, frozenset(sources))
    assert evidence.items == plain
    assert [_fields(i) for i in evidence.items] == [_fields(i) for i in plain]
    assert [hash(i) for i in evidence.items if _hashable(i)] == [
        hash(i) for i in plain if _hashable(i)
    ]
    turns = _plain_turns(trace, plain)
    assert evidence.turns == turns
    assert [_fields(t) for t in evidence.turns] == [_fields(t) for t in turns]
    for n in range(-1, len(trace.steps) + 2):
        assert evidence.before(n) == evidence.before(n) == _plain_before(plain, n)


def _plain_before(items: tuple[EvidenceItem, ...], index: int) -> tuple[EvidenceItem, ...]:
    return items[: bisect.bisect_left([i.index for i in items], index)]


def _hashable(item: EvidenceItem) -> bool:
    try:
        hash(item)
    except TypeError:
        return False
    return True


def test_a_string_subclass_takes_the_plain_path() -> None:
    trace = _trace(None, [{"kind": "tool", "output": "x"}, {"kind": "text", "output": "y"}], "z")
    object.__setattr__(trace.steps[0], "output", _Str("CUST-1"))
    evidence = Evidence(trace)
    assert evidence.items == _plain_items(trace, frozenset(DEFAULT_EVIDENCE))
    assert type(evidence.items[0].text) is _Str  # as _text returns it: the value itself


def test_the_makers_build_what_the_constructors_build() -> None:
    made = _make_item("s1", "tool", "get", {"a": 1}, "x", 3, True)
    built = EvidenceItem("s1", "tool", "get", {"a": 1}, "x", 3, True)
    assert made == built and _fields(made) == _fields(built) and repr(made) == repr(built)
    item = EvidenceItem("s0", "input", None, "q", "q", -1)
    turn = _make_turn("output", "a", "a", 2, (item,))
    assert turn == Turn("output", "a", "a", 2, (item,)) and hash(turn) == hash(
        Turn("output", "a", "a", 2, (item,))
    )
    try:
        made.text = "y"  # type: ignore[misc]
    except dataclasses.FrozenInstanceError:
        pass
    else:  # pragma: no cover
        raise AssertionError("an item made through its slots must stay frozen")


def test_the_memo_computes_once_per_key_even_a_none() -> None:
    evidence = Evidence(_trace(None, [], "z"))
    calls: list[int] = []

    def factory() -> None:
        calls.append(1)

    assert evidence.memo("k", factory) is None
    assert evidence.memo("k", factory) is None
    assert calls == [1]
