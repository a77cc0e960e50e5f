"""Evidence: what the agent was allowed to claim, and the turns in which it claimed things.

By default the evidence is the run's ``input`` and the outputs (and errors) of ``user``,
``system``, ``tool`` and ``retrieval`` steps: never the model's own words (``llm``, ``text``,
``thinking``) and never tool *arguments*, which a model can make up. Each assistant turn (a
``text`` step, an ``llm`` step's reply, and the run's final ``output``) is checked against the
evidence that came before it.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, fields
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic_core import to_json

from agentlens.config import DEFAULT_EVIDENCE
from agentlens.model import StepKind, Trace

if TYPE_CHECKING:  # pragma: no cover
    from agentlens.eval._history import StepHistory

__all__ = ["Evidence", "EvidenceItem", "Turn", "text_of"]

_TURN_KINDS = (StepKind.TEXT, StepKind.LLM)
_KIND_TEXT = {kind: str(kind) for kind in StepKind}
_T = TypeVar("_T")
# One encoder for every dump: ``json.dumps`` with non-default arguments builds a new encoder per
# call, which costs as much as dumping a small tool output. Same output as
# ``json.dumps(value, ensure_ascii=False)``.
_ENCODE = json.JSONEncoder(ensure_ascii=False).encode
_NUMBERS = (int, float, bool)
"""Shapes :func:`_text` dumps without a test of their content."""
_UNSET: Any = object()
"""Marks a key not computed yet in :meth:`Evidence.memo`."""


@dataclass(frozen=True, slots=True)
class EvidenceItem:
    """One piece of evidence: a step's output (or the run's input), as raw value and as text."""

    source: str
    """The step id, or ``"input"`` for the run's input."""
    kind: str
    """``"input"`` or the step kind."""
    name: str | None
    """The tool or retriever name, when a step has one."""
    value: Any
    """The raw JSON value."""
    text: str
    """The value as searchable text: a string as it is, chat content by its text, other JSON
    dumped with keys and values both included, one member or element per line."""
    index: int
    """Position of the step in ``trace.steps``; ``-1`` for the run's input."""
    truncated: bool = False
    """True when the source says this output was cut short (``attributes.truncated``)."""


@dataclass(frozen=True, slots=True)
class Turn:
    """One assistant turn to check: its text, where it is, and the evidence before it."""

    location: str
    """``"output"`` for the run's final answer, else the step id."""
    value: Any
    """The raw answer (a string, or JSON for structured output)."""
    text: str
    """The answer as text; finding spans are offsets into this string."""
    index: int
    """Position in ``trace.steps``; ``len(trace.steps)`` for the final output."""
    evidence: tuple[EvidenceItem, ...]
    """The evidence available when the turn was produced."""

    @property
    def truncated(self) -> bool:
        """True when any evidence this turn could see was truncated."""
        return any(item.truncated for item in self.evidence)


def _makers() -> tuple[
    Callable[[str, str, str | None, Any, str, int, bool], EvidenceItem],
    Callable[[str, Any, str, int, tuple[EvidenceItem, ...]], Turn],
]:
    """Positional constructors of :class:`EvidenceItem` and :class:`Turn` (every field, in
    order) that set the slots through their descriptors: a frozen dataclass's ``__init__`` goes
    through ``object.__setattr__`` by name for each field, which costs about twice as much (the
    trick is ``_references._reference_maker``'s). The result is the same object: same class,
    fields, equality, hash and immutability (tests/eval/test_evidence_fastpath.py)."""
    new = object.__new__
    item_slots = [vars(EvidenceItem)[f.name].__set__ for f in fields(EvidenceItem)]
    i_source, i_kind, i_name, i_value, i_text, i_index, i_truncated = item_slots
    turn_slots = [vars(Turn)[f.name].__set__ for f in fields(Turn)]
    t_location, t_value, t_text, t_index, t_evidence = turn_slots

    def item(
        source: str,
        kind: str,
        name: str | None,
        value: Any,
        text: str,
        index: int,
        truncated: bool,
    ) -> EvidenceItem:
        obj = new(EvidenceItem)
        i_source(obj, source)
        i_kind(obj, kind)
        i_name(obj, name)
        i_value(obj, value)
        i_text(obj, text)
        i_index(obj, index)
        i_truncated(obj, truncated)
        return obj

    def turn(
        location: str, value: Any, text: str, index: int, evidence: tuple[EvidenceItem, ...]
    ) -> Turn:
        obj = new(Turn)
        t_location(obj, location)
        t_value(obj, value)
        t_text(obj, text)
        t_index(obj, index)
        t_evidence(obj, evidence)
        return obj

    return item, turn


_make_item, _make_turn = _makers()


def text_of(value: Any) -> str:
    """The text of a value: strings as they are, chat messages by their content, JSON dumped."""
    return _text(value, _ENCODE)


def _compact(value: Any) -> str:
    """JSON dumped by pydantic-core's serialiser, about three times faster than the standard
    library's on a typical tool output, with the same keys, values and number formats. With
    ``indent=0`` every member and element starts a line and ``": "`` separates keys from values,
    so a number is never glued to the ``,`` or ``:`` before it: ``[1500,2500]`` would read as one
    number with a thousands separator, and ``"total":30`` as the minutes of a time."""
    try:
        return to_json(value, indent=0).decode()
    except ValueError:  # not JSON data (an object without a serialiser)
        return _ENCODE(value)


def _dumped(value: Any, dump: Callable[[Any], str]) -> str:
    """What :func:`_text` gives a value it dumps: ``dump(value)``, or ``str(value)`` when it is
    not JSON data."""
    try:
        return dump(value)
    except (TypeError, ValueError):
        return str(value)


def _evidence_text(value: Any) -> str:
    """:func:`text_of` for evidence, which is searched and never shown whole: JSON compact."""
    return _text(value, _compact)


def _text(value: Any, dump: Callable[[Any], str]) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        content = value.get("content")
        if isinstance(content, str) and set(value) <= {"role", "content", "name", "type"}:
            return content
        if isinstance(content, list) and set(value) <= {"role", "content", "name", "type"}:
            return _blocks_text(content)
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, dict) and v.get("type") == "text" for v in value)
    ):
        return _blocks_text(value)
    return _dumped(value, dump)


def _blocks_text(blocks: Sequence[Any]) -> str:
    parts = []
    for block in blocks:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif isinstance(block, str):
            parts.append(block)
    return "\n".join(parts)


def _reply_of(value: Any) -> Any:
    """An ``llm`` step's reply: the assistant message content when the output is a message or an
    OpenAI-style completion, else the output itself."""
    if isinstance(value, dict):
        choices = value.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            message = choices[0].get("message")
            if isinstance(message, dict):
                return message.get("content")
        if value.get("role") == "assistant" and "content" in value:
            return value.get("content")
    return value


class Evidence:
    """The evidence of one run, and its assistant turns, for a given set of evidence sources."""

    def __init__(
        self,
        trace: Trace,
        sources: Iterable[str] = DEFAULT_EVIDENCE,
        *,
        history: StepHistory | None = None,
    ) -> None:
        self.trace = trace
        self.sources = frozenset(sources)
        self.history = history
        """The stored history of the batch scoring this run (``None``: none, e.g. a run scored
        on its own); see :mod:`agentlens.eval._history`."""
        self._memo: dict[Hashable, Any] = {}
        self._before: dict[int, tuple[EvidenceItem, ...]] = {}

    def memo(self, key: Hashable, factory: Callable[[], _T]) -> _T:
        """A value computed once per run and shared by the scorers that score it (an index of
        the evidence, the references in each turn): ``factory()`` on first use of ``key``."""
        memo = self._memo
        value: _T = memo.get(key, _UNSET)
        if value is _UNSET:
            value = memo[key] = factory()
        return value

    @cached_property
    def items(self) -> tuple[EvidenceItem, ...]:
        """Every evidence item of the run, in order; the run's input first."""
        out: list[EvidenceItem] = []
        trace = self.trace
        sources = self.sources
        make = _make_item
        if "input" in sources and trace.input not in (None, ""):
            value = trace.input
            text = value if type(value) is str else _text(value, _compact)
            out.append(make("input", "input", None, value, text, -1, False))
        for i, step in enumerate(trace.steps):
            # a model's fields are in its ``__dict__``: read there, each costs a dict look-up
            # instead of ``BaseModel``'s attribute hook (six fields per step)
            record = step.__dict__
            step_kind = record["kind"]
            if step_kind not in sources:  # a StepKind is a str: it hashes and compares as one
                continue
            kind = _KIND_TEXT.get(step_kind) or str(step_kind)
            truncated = bool(record["attributes"].get("truncated"))
            output = record["output"]
            if output is not None:
                # a string is its own text, and a number, a dict without "content" or a list
                # not of text blocks (told by its first element) its dump: what _evidence_text
                # gives them, without its tests
                shape = type(output)
                if shape is str:
                    text = output
                elif (
                    (shape is dict and "content" not in output)
                    or (
                        shape is list
                        and (
                            not output
                            or type(output[0]) is not dict
                            or output[0].get("type") != "text"
                        )
                    )
                    or shape in _NUMBERS
                ):
                    text = _dumped(output, _compact)
                else:
                    text = _text(output, _compact)
                out.append(make(record["id"], kind, record["name"], output, text, i, truncated))
            error = record["error"]
            if error not in (None, "") and kind in ("tool", "retrieval"):
                text = error if type(error) is str else _text(error, _compact)
                out.append(make(record["id"], kind, record["name"], error, text, i, truncated))
        return tuple(out)

    def before(self, index: int) -> tuple[EvidenceItem, ...]:
        """The evidence produced before position ``index`` in the step list (computed once per
        position: every turn of a run asks, and the items are in step order)."""
        out = self._before.get(index)
        if out is None:
            items = self.items
            n = bisect.bisect_left(self._positions, index)
            out = self._before[index] = items if n == len(items) else items[:n]
        return out

    @cached_property
    def _positions(self) -> list[int]:
        return [item.index for item in self.items]

    @cached_property
    def turns(self) -> tuple[Turn, ...]:
        """The assistant turns to check, in order. A turn whose text repeats an earlier turn's
        exactly (an ``llm`` reply echoed as a ``text`` step and as the final output) is checked
        once, where it first appeared."""
        turns: list[Turn] = []
        seen: set[str] = set()
        steps = self.trace.steps
        make = _make_turn
        for i, step in enumerate(steps):
            if step.kind not in _TURN_KINDS:
                continue
            value = _reply_of(step.output) if step.kind is StepKind.LLM else step.output
            # a string is its own text (what text_of gives it, without the calls)
            text = value if type(value) is str else _text(value, _ENCODE)
            if not text.strip() or text in seen:
                continue
            seen.add(text)
            turns.append(make(step.id, value, text, i, self.before(i)))
        output = self.trace.output
        text = output if type(output) is str else _text(output, _ENCODE)
        if text.strip() and text not in seen:
            turns.append(make("output", output, text, len(steps), self.items))
        return tuple(turns)

    @cached_property
    def text(self) -> str:
        """All evidence as one string (the naive view; detectors should use :attr:`items`)."""
        return "\n".join(item.text for item in self.items)

    @property
    def truncated(self) -> bool:
        """True when any evidence item was truncated at its source."""
        return any(item.truncated for item in self.items)
