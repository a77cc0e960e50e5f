"""The grounding checks' fast paths give exactly what the plain definitions give.

Each speed-up in ``_references`` / ``_evidence`` has a plain reference here (the unguarded
expression, ``json.dumps``, the filtered evidence list, an uncached look-up) and a differential
test against it on generated and real text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentlens.eval import Evidence
from agentlens.eval._evidence import text_of
from agentlens.eval._index import EvidenceIndex
from agentlens.eval._references import _GUARD, get_extractor
from agentlens.model import Trace

_HEAD = r"(?:(?<!\w)|(?=\[))"

# Pieces that build references and near-misses: shapes, separators, white space of every kind.
_PIECES = [
    *"aAbBcCdDeEfFxXzZ0123456789 -_.,:;@$€£¥[]()/%\n\t\u2003\xa0",
    "March ",
    "May ",
    "Sept. ",
    "Jan",
    "USD",
    "US$",
    "A$",
    " dollars",
    " euros",
    "http://",
    "https://",
    "www.",
    "ftp://",
    "percent",
    " per cent",
    "INV-",
    "CUST-",
    "DOC-",
    "2026-03-05",
    "T10:00Z",
    "k ",
    " million",
    "bn",
    "deadbeef-dead-beef-dead-beefdeadbeef",
    "a@b.co",
    "1,834.20",
    "ZK3P9Q",
    "HAT117",
    "[smith2020]",
    "[3]",
    "5th of ",
    "-$",
    "sha-256",
    "12 ",
    ", 2026",
    "7 ",
]


def _unguarded(pattern: re.Pattern[str]) -> re.Pattern[str]:
    """The extractor's expression without the look-ahead guard: the plain definition."""
    text = pattern.pattern
    assert text.startswith(_HEAD + _GUARD)
    return re.compile(_HEAD + text[len(_HEAD + _GUARD) :])


def _spans(pattern: re.Pattern[str], text: str) -> list[tuple[int, int, str | None, str]]:
    return [(m.start(), m.end(), m.lastgroup, m.group(0)) for m in pattern.finditer(text)]


@pytest.mark.parametrize("kinds", [None, ["date", "money"], ["id", "code"], ["url", "uuid"]])
@settings(max_examples=400, deadline=None)
@given(parts=st.lists(st.sampled_from(_PIECES), max_size=30))
def test_guard_changes_no_match(kinds: list[str] | None, parts: list[str]) -> None:
    text = "".join(parts)
    guarded = get_extractor(kinds=kinds)._builtin
    assert guarded is not None
    assert _spans(guarded, text) == _spans(_unguarded(guarded), text)


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.characters(codec="utf-8"), max_size=80))
def test_guard_changes_no_match_on_any_text(text: str) -> None:
    guarded = get_extractor()._builtin
    assert guarded is not None
    assert _spans(guarded, text) == _spans(_unguarded(guarded), text)


def test_guard_keeps_shapes_whose_digits_are_in_the_next_word() -> None:
    ex = get_extractor()
    found = {(r.kind, r.text) for r in ex.extract("Paid USD 12.50 on March  5, 2026 and $ 7.")}
    assert found == {("money", "USD 12.50"), ("date", "March  5, 2026"), ("money", "$ 7")}
    uuid = "deadbeef-dead-beef-dead-beefdeadbeef"
    assert [r.kind for r in ex.extract(f"see {uuid} (run 1)")] == ["uuid"]


@settings(max_examples=200, deadline=None)
@given(
    value=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=12,
    )
)
@example(value={"role": "user", "content": "hi"})
@example(value={"role": "assistant", "content": [{"type": "text", "text": "a"}, "b", 3]})
@example(value=[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
@example(value=[{"type": "text"}, {"type": "text", "text": "b"}])
@example(value={"role": "user", "content": "hi", "extra": 1})
@example(value=[{"type": "text", "text": "a"}, 1])
def test_text_of_dumps_like_json_dumps(value: Any) -> None:
    assert text_of(value) == _expected_text(value)


_CHAT_KEYS = {"role", "content", "name", "type"}


def _blocks(blocks: list[Any]) -> str:
    return "\n".join(
        b if isinstance(b, str) else b["text"]
        for b in blocks
        if isinstance(b, str) or (isinstance(b, dict) and isinstance(b.get("text"), str))
    )


def _expected_text(value: Any) -> str:
    """The documented rule, written out: chat messages and text blocks are read by their
    content; every other value is ``json.dumps``'d (a string is itself, ``None`` is empty)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and set(value) <= _CHAT_KEYS:
        content = value.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return _blocks(content)
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, dict) and v.get("type") == "text" for v in value)
    ):
        return _blocks(value)
    return json.dumps(value, ensure_ascii=False)


def _trace(n: int) -> Trace:
    steps: list[dict[str, Any]] = []
    for i in range(n):
        kind = ["tool", "text", "user", "llm", "retrieval", "thinking"][i % 6]
        step: dict[str, Any] = {"id": f"s{i}", "kind": kind, "output": f"out {i} INV-{i:04d}"}
        if kind == "tool" and i % 4 == 0:
            step["error"] = "timeout"
        steps.append(step)
    return Trace.model_validate({"id": "r", "input": "hi", "steps": steps, "output": "done"})


def test_before_is_the_evidence_produced_earlier() -> None:
    ev = Evidence(_trace(40))
    for index in range(-2, 45):
        expected = tuple(item for item in ev.items if item.index < index)
        assert ev.before(index) == expected
        assert ev.before(index) == expected  # cached
    for turn in ev.turns:
        assert turn.evidence == tuple(i for i in ev.items if i.index < turn.index) or (
            turn.location == "output" and turn.evidence == ev.items
        )


def test_cached_lookups_answer_as_a_fresh_index() -> None:
    ev = Evidence(_trace(30))
    shared = EvidenceIndex(ev.items)
    for needle in ("inv-0000", "inv-0006", "inv-0012", "inv-0024", "out", "0012", "12", "nope"):
        for index in (0, 5, 13, 25, 31):
            for kw in (
                {"lower": True},
                {"lower": False, "number": True},
                {"lower": False, "amount": True},
            ):
                fresh = EvidenceIndex(ev.items)._first(needle, index, **kw)
                cached = shared._first(needle, index, **kw)
                assert fresh == cached, (needle, index, kw)


def test_a_time_is_supported_by_the_same_step_in_every_process() -> None:
    """Both readings of a time without am/pm are tried in a fixed order (as written first)."""
    t = Trace.model_validate(
        {
            "id": "r",
            "steps": [
                {"id": "s1", "kind": "tool", "output": {"arrives": "23:00"}},
                {"id": "s2", "kind": "tool", "output": {"departs": "11:00"}},
            ],
            "output": "It leaves at 11:00.",
        }
    )
    index = EvidenceIndex(Evidence(t).items)
    match = index.find_time("11:00?", 99)
    assert match is not None and match.item.source == "s2"


def test_an_amount_is_supported_by_the_same_step_in_every_process() -> None:
    """The written forms of an amount are tried in a fixed order (as the key first), so the
    supporting step does not depend on the hash seed when two steps hold different forms."""
    t = Trace.model_validate(
        {
            "id": "r",
            "steps": [
                {"id": "s1", "kind": "tool", "output": "Total: 12,500.00 USD"},
                {"id": "s2", "kind": "tool", "output": {"total": 12500}},
            ],
            "output": "The total is $12,500.",
        }
    )
    index = EvidenceIndex(Evidence(t).items)
    match = index.find_value(12500.0, 99)
    assert match is not None and match.item.source == "s2"


@pytest.mark.parametrize("prefix", ["plain", "İ" * 12])
def test_lookups_after_text_whose_lower_case_changes_length(prefix: str) -> None:
    """ "İ" lower-cases to two characters: offsets in the lower-cased evidence shift, and every
    look-up must still name the right step and respect the turn order."""
    t = Trace.model_validate(
        {
            "id": "r",
            "steps": [
                {"id": "s1", "kind": "tool", "output": f"{prefix} [KB-3] ACC-7731"},
                {"id": "s2", "kind": "retrieval", "output": "See [DOC-7] for CUST-12345."},
                {"id": "s3", "kind": "text", "output": "x"},
                {"id": "s4", "kind": "tool", "output": {"id": "INV-4410", "note": "[REF-9]"}},
            ],
            "output": "done",
        }
    )
    ev = Evidence(t)
    index = EvidenceIndex(ev.items)
    extract = get_extractor().extract
    for text, at, source in (
        ("ACC-7731", 99, "s1"),
        ("[KB-3]", 99, "s1"),
        ("ACC-7731", 0, None),
        ("CUST-12345", 99, "s2"),
        ("[DOC-7]", 99, "s2"),
        ("[REF-9]", 99, "s4"),
        ("INV-4410", 99, "s4"),
        ("[REF-9]", 2, None),
        ("INV-4410", 2, None),
        ("[DOC-7]", 1, None),
    ):
        (ref,) = extract(text)
        match = index.find(ref, at)
        assert (match and match.item.source) == source, (text, at)
    (near,) = extract("INV-4401")
    closest = index.closest(near, 99)
    assert closest is not None and closest[0] == "INV-4410" and closest[1].source == "s4"
    assert index.closest(near, 2) is None


@pytest.mark.data
def test_guard_changes_no_match_on_real_runs(data_dir: Callable[[str], Path]) -> None:
    folder = data_dir("tau_bench")
    from agentlens.ingest.openai_messages import read

    guarded = get_extractor()._builtin
    assert guarded is not None
    plain = _unguarded(guarded)
    texts = 0
    for path in sorted(folder.glob("*.json")):
        for trace in read(path):
            ev = Evidence(trace)
            for text in [t.text for t in ev.turns] + [i.text for i in ev.items]:
                assert _spans(guarded, text) == _spans(plain, text)
                texts += 1
    assert texts > 1000
