"""Volatile parts of tool observations: what changes from one call to the next without saying
anything new.

Two tool results (or errors) that differ only in a process id, a timestamp, a request or trace
id, a UUID, a temporary path, a memory address or a duration are the same observation: the
agent learnt nothing from the second. :class:`Masker` replaces each such part by a placeholder
(``<timestamp>``, ``<uuid>``...) before results are fingerprinted, and says which parts it found
so that a finding can name what it ignored.

The parts (:data:`VOLATILE_PARTS`), recognised by their form in text and by the name of the
field that holds them in JSON:

- ``pid``: ``pid 4242``, ``PID=4242``, ``process 4242``; fields ``pid``, ``process_id``;
- ``timestamp``: ISO 8601 date-times (``2026-12-01T13:41:34.123Z``, ``2026-12-01 13:41``),
  RFC 1123 and ``date`` output (``Tue, 01 Dec 2026 13:41:34 GMT``, ``Tue Dec  1 13:41:34 UTC
  2026``), clock times with a fraction (``13:41:34.123``); fields named ``timestamp``;
  a bare clock time (``06:00:00``) is *not* volatile: a flight's departure is data;
- ``request_id``: ``request_id=...``, ``X-Request-ID: ...``, ``trace id: ...``,
  ``correlation-id ...`` (request, req, trace, span, correlation and transaction ids), Stripe
  and OpenAI style ``req_...`` ids, W3C ``traceparent`` values; fields ``request_id``,
  ``trace_id``, ``span_id``, ``correlation_id`` (any spelling: ``requestId``, ``x-request-id``);
- ``uuid``: ``123e4567-e89b-12d3-a456-426614174000`` (any version, any case);
- ``temp_path``: paths under ``/tmp``, ``/var/tmp``, ``/var/folders``, ``/private/var/folders``,
  ``/dev/shm``, a Windows ``...\\Temp\\...``, and Python ``tempfile`` names (``tmpk3j_x9ab``);
- ``address``: ``0x`` and at least 6 hex digits (``<object at 0x7f3a2b1c4d50>``);
- ``duration``: a decimal number of seconds or smaller units (``0.52s``, ``1.5 ms``),
  a whole number of ``ms`` / ``us`` / ``µs`` / ``ns`` / ``sec`` / ``seconds`` (``took 120 ms``),
  ``time``'s ``0m1.234s``; fields ``duration``, ``elapsed``, ``latency``, ``took``,
  ``execution_time`` (with a unit suffix: ``duration_ms``, ``elapsed_s``...). A bare ``5s``
  is not one (``the 1990s``).

Every expression runs in time linear in its input: no quantified group is followed by anything
that can match what it matched (possessive quantifiers, and bounded repetitions), and every
expression starts at a boundary its own first characters cannot continue
(``tests/eval/test_linear_extractors.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic_core import to_json

from agentlens.errors import ConfigError
from agentlens.eval._normalize import json_container

__all__ = ["VOLATILE_PARTS", "Masker", "masker"]

VOLATILE_PARTS: tuple[str, ...] = (
    "pid",
    "timestamp",
    "request_id",
    "uuid",
    "temp_path",
    "address",
    "duration",
)
"""Every volatile part the masker knows, in the order a finding lists them."""

_MONTH = "(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_HEX = "[0-9A-Fa-f]"
_UNIT = "(?:ms|us|µs|ns|secs?|seconds?|msecs?)"

# Each expression starts with a character class or a literal and checks what comes before it
# with a fixed-width lookbehind *after* that first character: a lookbehind first would be tried
# at every position of the text (ten times slower on tool outputs, measured).
_TEXT: dict[str, str] = {
    "uuid": rf"{_HEX}(?<![0-9A-Za-z-].){_HEX}{{7}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}"
    r"(?![0-9A-Za-z-])",
    "timestamp": (
        r"[0-9](?<![0-9].)[0-9]{3}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2})?"
        r"(?:[.,][0-9]{1,9})?(?:Z|[+-][0-9]{2}:?[0-9]{2})?(?![0-9])"
        r"|[MTWFS](?<![\w].)(?:on|ue|ed|hu|ri|at|un),?[ ]{1,3}(?:[0-9]{1,2}[ ]{1,3})?"
        rf"{_MONTH}[ ]{{1,3}}(?:[0-9]{{1,2}}[ ]{{1,3}})?(?:[0-9]{{4}}[ ]{{1,3}})?"
        r"[0-9]{2}:[0-9]{2}:[0-9]{2}(?:[ ]{1,3}[A-Z]{3,4})?(?:[ ]{1,3}[0-9]{4})?(?![0-9])"
        r"|[0-9](?<![0-9:].)[0-9]:[0-9]{2}:[0-9]{2}[.,][0-9]{3,9}(?![0-9])"
    ),
    "request_id": (  # gated by its hint (the words), so it may start with a boundary
        r"(?i:\b(?:x-)?(?:request|req|trace|span|correlation|transaction)[-_ ]?id\b)"
        r"[\"']?[ \t]{0,3}[=:][ \t]{0,3}[\"']?[\w.:/+-]++"
        r"|(?i:\b(?:request|trace|correlation)[-_ ]id[ \t]{1,3})"
        r"(?=[A-Za-z_.:/+-]*+[0-9])[\w.:/+-]++"
        r"|r(?<![\w].)eq_[A-Za-z0-9]{8,}+"
        r"|[0-9a-f](?<![0-9a-f-].)[0-9a-f]-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(?![0-9a-f-])"
    ),
    "temp_path": (
        r"/(?<![\w/]/)(?:private/)?(?:tmp|var/tmp|var/folders|dev/shm)(?![\w.-])"
        r"(?:/[^\s'\"`<>|,;:()\[\]{}]*+)?"
        r"|(?i:[A-Z](?<![\w].):\\(?:[^\s\\'\"]{1,64}\\){0,6}Temp\\)[^\s'\"`<>|,;()\[\]{}]*+"
        r"|t(?<![\w].)mp[a-z0-9_]{8}(?![A-Za-z0-9_])"
    ),
    "address": r"0(?<![\w].)x[0-9a-fA-F]{6,}+\b",
    "pid": r"(?i:[pP](?<![\w].)(?:id|rocess)\b)[ \t]{0,3}[=:#]?[ \t]{0,3}[0-9]++\b",
    "duration": (
        r"[0-9](?<![\w.].)[0-9]*+m[0-9]++(?:\.[0-9]++)?s\b"
        rf"|[0-9](?<![\w.].)[0-9]*+\.[0-9]++[ \t]?(?:{_UNIT[3:-1]}|s)(?![\w])"
        rf"|[0-9](?<![\w.].)[0-9]*+[ \t]?{_UNIT}(?![\w])"
    ),
}
"""Each part's expression in text (see the module docstring for what each recognises)."""


@dataclass(frozen=True, slots=True)
class _Hint:
    """What a text must contain for a part's expression to be worth running: words (searched
    in the lower-cased text) or short expressions that start with a literal character (which
    the ``re`` module finds as fast as a substring). Each costs a fraction of the part's own
    expression, and most tool outputs hold no volatile part at all."""

    words: tuple[str, ...] = ()
    patterns: tuple[re.Pattern[str], ...] = ()

    def __call__(self, text: str, low: str) -> bool:
        return any(w in low for w in self.words) or any(p.search(text) for p in self.patterns)


_HINTS: dict[str, _Hint] = {
    "uuid": _Hint(patterns=(re.compile(rf"-{_HEX}{{4}}-{_HEX}{{4}}-"),)),
    # a digit before the colon: every shape has one, and a JSON number's key does not
    # (``"balance":1834.2`` in the compact JSON text that :meth:`Masker._quiet` searches)
    "timestamp": _Hint(patterns=(re.compile(r"[0-9]:[0-9]{2}"),)),
    "request_id": _Hint(
        words=("req", "trace", "span", "correlation", "transaction"),
        patterns=(re.compile(r"-[0-9a-f]{32}-"),),
    ),
    "temp_path": _Hint(words=("tmp", "temp\\", "/var/folders", "/dev/shm")),
    "address": _Hint(words=("0x",)),
    "pid": _Hint(words=("pid", "process")),
    "duration": _Hint(
        patterns=(
            re.compile(r"\.[0-9]++[ \t]?[mnu\xb5s]"),
            # time's 0m5s and 0m12s (with a fraction, 0m1.234s, the pattern above finds it)
            re.compile(r"s(?:(?<=[0-9 ][mnu\xb5]s)|(?<=[0-9 m]s)(?=ec)|(?<=[m0-9][0-9]s))"),
        )
    ),
}
_SHORTEST = 3
"""No volatile part is shorter than this (``1ms``)."""

_FIELDS: dict[str, str] = {
    "pid": "pid processid",
    "timestamp": "timestamp",
    "request_id": "requestid xrequestid reqid traceid spanid correlationid xcorrelationid "
    "transactionid",
    "duration": "duration elapsed latency took executiontime",
}
_UNIT_SUFFIXES = ("", "ms", "s", "sec", "secs", "seconds", "us", "ns")
_FIELD_KIND: dict[str, str] = {
    name + (suffix if kind == "duration" else ""): kind
    for kind, names in _FIELDS.items()
    for name in names.split()
    for suffix in _UNIT_SUFFIXES
}
"""Field names (lower case, without ``-`` and ``_``) whose scalar value is a volatile part."""
_FIELD_WORDS = (
    "pid",
    "process",
    "timestamp",
    "req",
    "trace",
    "span",
    "correlation",
    "transaction",
    "duration",
    "elapsed",
    "latency",
    "took",
    "execution",
)
"""A volatile field's lower-cased name holds one of these (so a text without any of them has no
volatile field)."""

_MAX_DEPTH = 64


_KEYS: dict[str, str | None] = {}
"""Field names seen, and their part (``None``: not volatile); bounded."""


def _field_kind(key: str) -> str | None:
    try:
        return _KEYS[key]
    except KeyError:
        pass
    low = key.lower()
    kind = _FIELD_KIND.get(low.replace("_", "").replace("-", ""))
    if kind is not None and not any(w in low for w in _FIELD_WORDS):
        kind = None  # spelt so that a text search for the field words would not find it
    if len(_KEYS) < 4096:
        _KEYS[key] = kind
    return kind


class Masker:
    """Replaces the volatile parts of a JSON-like value by placeholders; built by :func:`masker`.

    Args:
        parts: the parts to mask (a subset of :data:`VOLATILE_PARTS`).
    """

    __slots__ = ("_fields", "_hint_patterns", "_hint_words", "_patterns", "parts")

    def __init__(self, parts: Iterable[str]) -> None:
        chosen = tuple(parts)
        unknown = [p for p in chosen if p not in _TEXT]
        if unknown:
            raise ConfigError(
                f"unknown volatile part {unknown[0]!r}; choose from {', '.join(VOLATILE_PARTS)}"
            )
        self.parts = tuple(p for p in VOLATILE_PARTS if p in chosen)
        self._patterns = tuple((p, _HINTS[p], re.compile(_TEXT[p])) for p in self.parts)
        self._fields = frozenset(self.parts)
        hints = [_HINTS[p] for p in self.parts]
        fields = _FIELD_WORDS if self._fields & set(_FIELDS) else ()
        self._hint_words = tuple(dict.fromkeys([w for h in hints for w in h.words] + [*fields]))
        self._hint_patterns = tuple(p for h in hints for p in h.patterns)

    def mask(self, value: Any) -> Any:
        """``value`` with every volatile part replaced by ``<part>``. A string holding a JSON
        object or array is parsed first (so that its fields are masked by name). Never raises."""
        if not self.parts or (isinstance(value, dict | list | tuple) and self._quiet(value)):
            return value
        return self._walk(value, None, 0)

    def _quiet(self, value: Any) -> bool:
        """True when nothing in a JSON value can be volatile: no part's hint in its JSON text (a
        superset of its strings' texts), no volatile field. One scan of the text instead of one
        per string: most tool outputs hold no volatile part at all."""
        try:
            text = to_json(value).decode()
        except ValueError:  # not JSON data, or nested too deeply
            return False
        low = text.lower()
        for word in self._hint_words:
            if word in low:
                return not self._has_field(value, 0) and not any(
                    hint(text, low) for _, hint, _ in self._patterns
                )
        return not any(pattern.search(text) for pattern in self._hint_patterns)

    def _has_field(self, value: Any, depth: int) -> bool:
        """True when ``value`` has a volatile field (or text that may hold JSON with one)."""
        if isinstance(value, str):
            return value.lstrip()[:1] in ("{", "[")
        if depth >= _MAX_DEPTH:
            return False
        if isinstance(value, dict):
            return any(
                (isinstance(k, str) and _field_kind(k) in self._fields)
                or self._has_field(v, depth + 1)
                for k, v in value.items()
            )
        if isinstance(value, list | tuple):
            return any(self._has_field(v, depth + 1) for v in value)
        return False

    def found(self, value: Any) -> dict[str, tuple[str, ...]]:
        """The volatile parts in ``value``: part -> the texts found, in order."""
        out: dict[str, list[str]] = {}
        if self.parts and not (isinstance(value, dict | list | tuple) and self._quiet(value)):
            self._walk(value, out, 0)
        return {part: tuple(out[part]) for part in self.parts if part in out}

    def _walk(self, value: Any, found: dict[str, list[str]] | None, depth: int) -> Any:
        if isinstance(value, str):
            return self._string(value, found, depth)
        if depth >= _MAX_DEPTH:
            return value
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            for key, item in value.items():
                kind = _field_kind(key) if isinstance(key, str) else None
                if kind in self._fields and _scalar(item):
                    if found is not None:
                        found.setdefault(kind, []).append(f"{key}={item}")
                    out[key] = f"<{kind}>"
                else:
                    out[key] = self._walk(item, found, depth + 1)
            return out
        if isinstance(value, list | tuple):
            return [self._walk(item, found, depth + 1) for item in value]
        return value

    def _string(self, text: str, found: dict[str, list[str]] | None, depth: int) -> Any:
        if len(text) < _SHORTEST:
            return text
        parsed = json_container(text.strip()) if depth < _MAX_DEPTH else None
        if parsed is not None:
            return self._walk(parsed, found, depth + 1)
        low = text.lower()
        for part, hint, pattern in self._patterns:
            if not hint(text, low):
                continue
            placeholder = f"<{part}>"
            if found is None:
                text = pattern.sub(placeholder, text)
            else:
                hits = pattern.findall(text)
                if hits:
                    found.setdefault(part, []).extend(hits)
                    text = pattern.sub(placeholder, text)
        return text


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)


_CACHE: dict[tuple[str, ...], Masker] = {}


def masker(parts: Iterable[str] = VOLATILE_PARTS) -> Masker:
    """The (shared) masker of ``parts``.

    Raises:
        ConfigError: a part that is not in :data:`VOLATILE_PARTS`.
    """
    key = tuple(parts)
    found = _CACHE.get(key)
    if found is None:
        found = _CACHE[key] = Masker(key)
    return found
