"""What kind of quantity a number is, so that only plausible derivations ground a claim.

A computed amount is grounded when it is simple arithmetic on evidence numbers
(:class:`agentlens.eval._index._NumberPool`), but only arithmetic that means something: sums and
differences of numbers of one kind (money with money, counts with counts), products and
quotients only with a count or a rate found in the evidence. This module says which kind each
number is:

- ``money``: after a currency sign or code, before a currency word, or under a JSON key that
  names an amount (``price``, ``amount``, ``fee``, ``balance``...; ``total`` when nothing more
  specific is said);
- ``count``: a whole number before a counted noun (``3 passengers``, ``2 checked bags``), under a
  key that names a count (``count``, ``quantity``, ``seats``, ``total_baggages``...), a spelled
  count before such a noun (``two passengers``), or the length of a JSON list of two or more
  (a reservation's ``passengers``);
- ``rate``: before ``per``, ``/``, ``each`` or ``%`` (``$50 per passenger``), or under a key
  that names one (``rate``, ``per_night``, ``unit_price``);
- ``number``: anything else (no word says what it is).

A number can be of several kinds (``$50 per passenger`` is money and a rate). The rules are in
``docs/grounding.md``.
"""

from __future__ import annotations

import re
from collections.abc import Set
from functools import lru_cache
from typing import Any

from agentlens.eval._references import _NUM_TAIL

__all__ = [
    "COUNT",
    "MONEY",
    "NUMBER",
    "RATE",
    "STANDALONE",
    "Quantities",
    "claim_kind",
    "operand_kinds",
    "quantities",
]

MONEY = "money"
COUNT = "count"
RATE = "rate"
NUMBER = "number"

_COUNTED = (
    r"(?:passengers?|people|persons?|travell?ers?|guests?|adults?|child(?:ren)?|infants?|"
    r"bags?|baggages?|suitcases?|luggage|seats?|tickets?|nights?|days?|weeks?|months?|years?|"
    r"hours?|minutes?|items?|units?|pieces?|rooms?|flights?|segments?|legs?|stops?|"
    r"members?|users?|orders?|licen[cs]es?|copies|boxes|times)"
)
# A counted noun after a whole number, with at most one word between ("2 checked bags").
_COUNT_AFTER = re.compile(rf"\s+(?:[a-z-]+\s+)?{_COUNTED}\b", re.IGNORECASE)
_RATE_AFTER = re.compile(r"\s*(?:per\b|/\s?[a-z]|each\b|every\b|%|a\s+(?:night|day|month|year)\b)")
_CURRENCY_AFTER = re.compile(
    r"\s?(?:dollars?|euros?|pounds?|yen|usd|eur|gbp|cad|aud|jpy|chf)\b", re.IGNORECASE
)
_CURRENCY_BEFORE = re.compile(
    r"(?:[$€£¥]|\b(?:usd|eur|gbp|cad|aud|nzd|jpy|chf|cny|inr|us\$|a\$|c\$))\s?-?$", re.IGNORECASE
)
_SPELLED = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}
_SPELLED_COUNT = re.compile(
    rf"\b(two|three|four|five|six|seven|eight)\s+(?:[a-z-]+\s+)?{_COUNTED}\b", re.IGNORECASE
)
_SPELLED_WORDS = tuple(_SPELLED)
"""The words of _SPELLED, looked for in a lower-case text with ``in``: a C search per word,
where one expression of them (``two|three|...``) stops at every t, f, s and e of the text."""
STANDALONE = re.compile(rf"[\d.](?<![\w.,/:#-].){_NUM_TAIL}(?![\w/:-]|[.,]\d)")
r"""A stand-alone number of a text: not the digits of a word, an id, a date, a time or a path.
(``(?<![\w.,/:#-]){_NUM}(?![\w/:-]|[.,]\d)``, led by its first character: see
``_references._NUM_TAIL``.)"""

_RATE_KEY = re.compile(r"rate|per_|_per|^per|each|unit_|percent|pct|ratio")
_COUNT_KEY = re.compile(
    r"count|number_of|num_|^num|quantity|qty|passengers|baggages|bags|seats|nights|tickets|"
    r"guests|people|persons|adults|children|items|units|pieces|rooms|days|stops"
)
_MONEY_KEY = re.compile(
    r"price|cost|amount|fee|fare|balance|refund|paid|payment|charge|tax|compensation|salary|"
    r"revenue|spend|deposit|dollars|usd|eur|budget|owed|due"
)
_WEAK_MONEY_KEY = re.compile(r"total|subtotal|sum")


class Quantities:
    """The kinds of the numbers of one evidence item, and the counts it holds.

    ``kinds`` maps a number's value to its kinds; ``counts`` are whole numbers that count
    something (``count`` numbers, spelled counts, and the lengths of JSON lists of two or more),
    usable as a factor or a divisor.
    """

    __slots__ = ("counts", "kinds")

    def __init__(self) -> None:
        self.kinds: dict[float, set[str]] = {}
        self.counts: set[float] = set()

    def add(self, value: float, kinds: Set[str]) -> None:
        self.kinds.setdefault(value, set()).update(kinds)
        if COUNT in kinds and value.is_integer():
            self.counts.add(value)


def quantities(value: Any, text: str) -> Quantities:
    """The kinds of the numbers of an evidence item (its raw JSON ``value``, or its ``text``
    when the value is a string)."""
    out = Quantities()
    if isinstance(value, str) or value is None:
        _text_kinds(text, out)
    else:
        _walk(value, out)
    return out


def claim_kind(text: str, start: int, end: int) -> str:
    """The kind of the number a claim writes at ``text[start:end]``: ``money`` with a
    currency, ``rate`` before ``per``, ``count`` before a counted noun (``2.5 hours``,
    ``3 bags``), else ``number``."""
    kinds = _kinds_at(text, start, end, whole=True)
    return next((k for k in (MONEY, RATE, COUNT) if k in kinds), NUMBER)


def operand_kinds(quantity: str, text: str, end: int) -> list[str]:
    """The kinds a grounded claim of the kind ``quantity`` ending at ``end`` has as an operand
    of the turn's later arithmetic: its own, and a rate when ``per``, ``each``... follows
    (``$50 per passenger``)."""
    if quantity != RATE and _RATE_AFTER.match(text, end):
        return [quantity, RATE]
    return [quantity]


def _kinds_at(text: str, start: int, end: int, *, whole: bool) -> set[str]:
    """The kinds the words around a number in a text give it (``$50 per passenger``: money
    and a rate); ``number`` when they say nothing."""
    kinds = set()
    if _CURRENCY_BEFORE.search(text, max(0, start - 5), start) or _CURRENCY_AFTER.match(text, end):
        kinds.add(MONEY)
    if _RATE_AFTER.match(text, end):
        kinds.add(RATE)
    elif whole and _COUNT_AFTER.match(text, end):
        kinds.add(COUNT)
    return kinds or {NUMBER}


def _text_kinds(text: str, out: Quantities) -> None:
    for m in STANDALONE.finditer(text):
        start, end = m.span()
        value = float(m.group(0).replace(",", ""))
        out.add(value, _kinds_at(text, start, end, whole=value.is_integer()))
    # Ignoring case, an ASCII text holds a spelled count's word only if its lower case does (a
    # long s, "ſix", is not ASCII): most texts hold none, and skip the search.
    if text.isascii():
        lower = text.lower()
        for word in _SPELLED_WORDS:
            if word in lower:
                break
        else:
            return
    for m in _SPELLED_COUNT.finditer(text):
        out.counts.add(float(_spelled_value(m.group(1))))


def _spelled_value(word: str) -> int:
    """The count a spelled word of _SPELLED_COUNT stands for (``Six`` -> 6). Ignoring case, the
    expression also matches a word written with a letter whose lower case is not ASCII (``ſix``
    with a long s), which the table does not hold: that one is matched word by word."""
    value = _SPELLED.get(word.lower())
    if value is None:
        value = next(v for w, v in _SPELLED.items() if re.fullmatch(w, word, re.IGNORECASE))
    return value


def _walk(value: Any, out: Quantities) -> None:
    """The numbers of a JSON value with the keys above them (the nearest four), and the lengths
    of its lists; iteratively, so that no nesting depth overflows the stack."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(value, ())]
    while stack:
        item, keys = stack.pop()
        if isinstance(item, bool) or item is None:
            continue
        if isinstance(item, int | float):
            out.add(float(abs(item)), _key_kinds(keys))
        elif isinstance(item, str):
            _text_kinds(item, out)
        elif isinstance(item, dict):
            stack.extend((v, (*keys[-3:], str(k).lower())) for k, v in item.items())
        elif isinstance(item, list | tuple):
            if len(item) >= 2:
                out.counts.add(float(len(item)))
            stack.extend((v, keys) for v in item)


@lru_cache(maxsize=4096)
def _key_kinds(keys: tuple[str, ...]) -> frozenset[str]:
    """The kinds a number's JSON keys give it: the nearest key that says anything decides
    (``"prices": {"economy": 103}`` is money, ``"available_seats": {"economy": 10}`` a count).
    Cached: the same keys recur in every output of a tool, and from run to run."""
    for key in reversed(keys):
        kinds = set()
        if _RATE_KEY.search(key):
            kinds.add(RATE)
        if _COUNT_KEY.search(key):
            kinds.add(COUNT)
        if _MONEY_KEY.search(key):
            kinds.add(MONEY)
        if not kinds and _WEAK_MONEY_KEY.search(key):
            kinds.add(MONEY)
        if kinds:
            return frozenset(kinds)
    return _JUST_NUMBER


_JUST_NUMBER = frozenset({NUMBER})
