"""The per-run evidence index: was this reference (or fact) in the evidence before turn *i*?

:class:`EvidenceIndex` answers that for one run. All the evidence is joined into one string
(and its lower-cased twin) so that a look-up is one C-speed ``find`` over the run followed by a
token-boundary check, cached per run and shared by every scorer and turn. What cannot be looked
up as written (dates in words, URLs loosely compared, amounts derived by arithmetic) is indexed
lazily per evidence item and only for the kinds that are asked about, so a run whose answers
contain no references costs almost nothing. The rules are in ``docs/grounding.md``.
"""

from __future__ import annotations

import bisect
import datetime as _dt
import re
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from itertools import accumulate
from typing import Any, NamedTuple

from agentlens.eval._evidence import EvidenceItem
from agentlens.eval._facts import _LAST_DIGITS_LEAD
from agentlens.eval._quantities import (
    COUNT,
    MONEY,
    NUMBER,
    RATE,
    STANDALONE,
    Quantities,
    quantities,
)
from agentlens.eval._references import (
    _BUILTIN,
    _MONTH,
    _NUM_TAIL,
    _NUMERIC_KINDS,
    _SCHEME,
    KINDS,
    Extractor,
    Reference,
    _date_from_words,
    _trim_url,
    date_key,
    distance_within,
    get_extractor,
    number_key,
    parse_number,
    url_key,
    written_tolerance,
)

__all__ = ["EvidenceIndex", "Match"]


class Match(NamedTuple):
    """Where a reference was found in the evidence."""

    item: EvidenceItem
    """The evidence item (step output, or the run's input) that holds it."""
    text: str
    """What was found there, as it appears (or the derivation, for computed amounts)."""
    derived: bool = False
    """True when the value is computed from evidence numbers rather than found as such."""


_RAW_NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")
_ISO_DATE = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")
_ISO_TEXT = re.compile(r"(?<!\d)\d{4}-\d{2}-\d{2}(?!\d)")
_ISO_TEXT_LED = re.compile(r"\d(?<!\d\d)\d{3}-\d{2}-\d{2}(?!\d)")
"""_ISO_TEXT led by its first digit, the look-behind then reading it and the character before
it: the same matches, but the search skips to the next digit in C instead of trying the
look-behind at every offset of the evidence (tests/eval/test_index_fastpath.py)."""
_WORD_DATE = re.compile(f"{_BUILTIN['mdy']}|{_BUILTIN['dmy']}")
_URL = re.compile(_BUILTIN["url"])
_EMAIL = re.compile(_BUILTIN["email"])
_NUMBER_WITH_SCALE = re.compile(
    rf"[\d.](?<![\w.].){_NUM_TAIL}\s?(?:thousand|million|billion|trillion|bn|[kKmMbB])\b"
)
r"""A number with a scale word (``12.5 million``): ``(?<![\w.]){_NUM}\s?(?:...)\b`` led by its
first character (see ``_references._NUM_TAIL``)."""
_YEAR = re.compile(r"(?<![\w.,])(?:1[89]|20)\d\d(?!\w|[.,]\d)")
"""A year standing alone or in a date: not inside a word, a code or a longer number."""
_DECADE_TEXT = re.compile(r"(?<![\w.,])['’]?(1[89]|20)?(\d0)['’]?s(?!\w)")
_MASK = frozenset("*•xX")
_LONG_NUMBER = 8
"""Digits in a run of at least this many are a card or account number's."""
_LAST_DIGITS_KEY = re.compile(r'"[^"\n]*(?:last|ending|suffix|mask)[^"\n]*":\s*"?$', re.IGNORECASE)
_TOKEN_SPAN = 64
_MAX_ARITH = 200
_MAX_TRIPLE = 80
_MIN_OPERAND = 10.0


@lru_cache(maxsize=4096)
def _number_variants(key: str) -> tuple[str, ...]:
    """The ways a canonical number is commonly written: ``1834.2`` -> ``1834.2``, ``1834.20``,
    ``1,834.2``, ``1,834.20``."""
    neg = key.startswith("-")
    body = key[1:] if neg else key
    whole, _, frac = body.partition(".")
    # In a fixed order, as written first: the first variant found names the supporting step,
    # which must not depend on the interpreter's hash seed (as a set's order would).
    wholes = [whole]
    if len(whole) > 3:
        wholes.append(f"{int(whole):,}")
    fracs = [frac] if frac else ["", "0", "00"]
    if len(frac) == 1:
        fracs.append(frac + "0")
    out = []
    for w in wholes:
        for f in fracs:
            out.append(f"{w}.{f}" if f else w)
    return tuple(out)


@lru_cache(maxsize=1024)
def _word_candidates(head: str, has_digit: bool, ascii_text: bool) -> tuple[re.Pattern[str], bool]:
    r"""The words :meth:`EvidenceIndex.closest` suggests for an id, a code or a citation key:
    ``(?i)(?<![\w-]){head}{digit}[\w-]*`` (``head`` the reference's first two characters,
    ``digit`` a look-ahead for a digit when the reference holds one); and whether the
    expression is to search the lower-cased evidence rather than the evidence.

    That expression starts with a look-behind, which the search tries at every offset of the
    evidence. When both the evidence and the head are ASCII, the lower-cased evidence has the
    same offsets, and ignoring case there means only matching the head in lower case: so the
    head, lower-cased, leads the expression as a literal (the look-behind after it, reading it
    and the character before it), and the search skips in C from one occurrence of the head to
    the next. The same matches, at the same offsets (tests/eval/test_index_fastpath.py holds
    one to the other); their text is the evidence's."""
    digit = r"(?=[\w-]*\d)" if has_digit else ""
    if not (head and ascii_text and head.isascii()):
        return re.compile(rf"(?i)(?<![\w-]){re.escape(head)}{digit}[\w-]*"), False
    lower = re.escape(head.lower())
    return re.compile(rf"{lower}(?<![\w-]{lower}){digit}[\w-]*"), True


class _ItemIndex:
    """What one evidence item contains, computed lazily per family of kinds."""

    __slots__ = (
        "_dates",
        "_emails",
        "_lower",
        "_numbers",
        "_quantities",
        "_times",
        "_urls",
        "_values",
        "item",
    )

    def __init__(self, item: EvidenceItem) -> None:
        self.item = item
        self._lower: str | None = None
        self._numbers: frozenset[str] | None = None
        self._values: list[float] | None = None
        self._dates: frozenset[str] | None = None
        self._urls: frozenset[str] | None = None
        self._emails: frozenset[str] | None = None
        self._times: frozenset[str] | None = None
        self._quantities: Quantities | None = None

    @property
    def quantities(self) -> Quantities:
        """The kinds of its numbers (money, count, rate) and its counts, for plausible
        arithmetic (:mod:`agentlens.eval._quantities`)."""
        if self._quantities is None:
            self._quantities = quantities(self.item.value, self.item.text)
        return self._quantities

    @property
    def lower(self) -> str:
        if self._lower is None:
            self._lower = self.item.text.lower()
        return self._lower

    @property
    def numbers(self) -> frozenset[str]:
        """Every digit run as written (``1,834.20``, ``1834.2``, ``05``)."""
        if self._numbers is None:
            self._numbers = frozenset(_RAW_NUMBER.findall(self.item.text))
        return self._numbers

    @property
    def values(self) -> list[float]:
        """Every stand-alone number as a value, including scaled ones (``12.5 million``), for
        arithmetic: not the digits of a date, a time, an id or a code (``10`` of ``10:00`` is no
        amount to add to a price)."""
        if self._values is None:
            vals = {float(n.replace(",", "")) for n in STANDALONE.findall(self.item.text)}
            for m in _NUMBER_WITH_SCALE.finditer(self.item.text):
                v = parse_number(m.group(0))
                if v is not None:
                    vals.add(v)
            self._values = sorted(vals)
        return self._values

    @property
    def dates(self) -> frozenset[str]:
        """Dates as ``YYYY-MM-DD`` and ``--MM-DD`` keys, from ISO and worded forms; a date
        written without its year also as ``?--MM-DD``."""
        if self._dates is None:
            keys: set[str] = set()
            for y, mo, d in _ISO_DATE.findall(self.item.text):
                k = date_key(int(y), int(mo), int(d))
                if k:
                    keys.add(k)
                    keys.add("--" + k[5:])
            if _HAS_MONTH.search(self.item.text):
                for m in _WORD_DATE.finditer(self.item.text):
                    k = _date_from_words(m.group(0))
                    if k:
                        keys.add(k)
                        keys.add("--" + k[-5:])
                        if k.startswith("--"):
                            keys.add("?" + k)  # written without its year
            self._dates = frozenset(keys)
        return self._dates

    @property
    def times(self) -> frozenset[str]:
        """Times of day as ``HH:MM``."""
        if self._times is None:
            self._times = frozenset(
                [f"{int(h):02d}:{mi}" for h, mi in _CLOCK.findall(self.item.text) if int(h) < 24]
                + [_clock12(h, mi, ap) for h, mi, ap in _CLOCK12.findall(self.item.text)]
            )
        return self._times

    @property
    def urls(self) -> frozenset[str]:
        if self._urls is None:
            self._urls = frozenset(url_key(_trim_url(u)) for u in _URL.findall(self.item.text))
        return self._urls

    @property
    def emails(self) -> frozenset[str]:
        if self._emails is None:
            self._emails = frozenset(e.lower() for e in _EMAIL.findall(self.item.text))
        return self._emails


_HAS_MONTH = re.compile(_MONTH)
_RELATIVE_DAY = re.compile(
    r"(?i)\b(?:next|following|previous|prior) day\b|\bday (?:after|before|later|earlier)\b"
    r"|\b(?:by|in) (?:one|a|1) day\b|\btomorrow\b|\byesterday\b|\d:\d\d(?::\d\d)?\+1\b"
)


def _shift_day(key: str) -> set[str]:
    """The dates one day before and after ``YYYY-MM-DD``."""
    try:
        day = _dt.date.fromisoformat(key)
    except ValueError:
        return set()
    one = _dt.timedelta(days=1)
    return {(day - one).isoformat(), (day + one).isoformat()}


_CLOCK = re.compile(r"(?<![\d:])(\d{1,2}):([0-5]\d)(?!\d)")
_CLOCK12 = re.compile(r"(?<![\d:])(1[0-2]|0?[1-9])(?::([0-5]\d))?\s?([AaPp])\.?[Mm]\b")


def _clock12(hour: str, minute: str, ap: str) -> str:
    h = int(hour) % 12 + (12 if ap in "Pp" else 0)
    return f"{h:02d}:{minute or '00'}"


class EvidenceIndex:
    """Look references up in one run's evidence, respecting the order of steps.

    Args:
        items: the run's evidence items in order (:attr:`Evidence.items`).
        extractor: used for custom patterns and to suggest the closest evidence token.
    """

    def __init__(self, items: Sequence[EvidenceItem], extractor: Extractor | None = None) -> None:
        self._evidence = tuple(items)
        # The per-item entries (:attr:`items`) are made on first use: a look-up in the joined
        # text needs only the items, and most runs ask nothing else.
        self._entries: list[tuple[_ItemIndex, ...]] = []
        self.extractor = extractor or get_extractor()
        self._positions = [item.index for item in self._evidence]
        self._pool_cache: dict[int, _NumberPool] = {}
        self._shared: dict[str, tuple[str, list[int], str, list[int]]] = {}
        self._hits: dict[tuple[str, bool, int], EvidenceItem | None] = {}
        self._read: dict[str, int] = {}
        self._runs: dict[tuple[str, int], _RunIndex] = {}
        self._decades: dict[str, Match | None] = {}
        self._last_digits: dict[str, Match | None] = {}
        self._derived: dict[
            tuple[float, int, bool, float, str, tuple[tuple[float, str], ...]], Match | None
        ] = {}
        self._written: dict[tuple[float, int, bool, bool], Match | None] = {}

    @property
    def items(self) -> tuple[_ItemIndex, ...]:
        """One entry per evidence item, in order: what each contains, computed lazily."""
        entries = self._entries
        if not entries:
            entries.append(tuple(_ItemIndex(i) for i in self._evidence))
        return entries[0]

    def _texts(self) -> tuple[str, list[int], str, list[int]]:
        """All evidence as one string (and lower-cased), with each item's start offset, so that
        a look-up is one C-speed ``find`` over the run rather than one per item."""
        joined = self._shared.get("joined")
        if joined is None:
            raw_parts = [item.text for item in self._evidence]
            raw = _SEP.join(raw_parts)
            starts = _offsets(raw_parts)
            low = raw.lower()
            if len(low) == len(raw):  # no character changed length ("İ" does): same offsets
                joined = (raw, starts, low, starts)
            else:
                low_parts = [e.lower for e in self.items]
                joined = (raw, starts, _SEP.join(low_parts), _offsets(low_parts))
            self._shared["joined"] = joined
        return joined

    def _count_before(self, index: int) -> int:
        """How many evidence items were produced before step position ``index``."""
        return bisect.bisect_left(self._positions, index)

    def _end_before(self, index: int, lower: bool = False) -> int:
        """The offset in the joined text (:meth:`_texts`) where the evidence produced at or after
        step position ``index`` begins."""
        n = self._count_before(index)
        if not n:
            return 0
        _, raw_starts, _, low_starts = self._texts()
        if lower and low_starts is not raw_starts:
            return low_starts[n - 1] + len(self.items[n - 1].lower)
        return raw_starts[n - 1] + len(self._evidence[n - 1].text)

    def _first(
        self, needle: str, index: int, *, lower: bool, number: bool = False, amount: bool = False
    ) -> EvidenceItem | None:
        """The first evidence item before ``index`` holding ``needle`` as a whole token (or a
        whole number), or ``None``."""
        mode = 2 if amount else 1 if number else 0
        key = (needle, lower, mode)
        # A miss is the common case (most needles are asked once): ``get`` with a marker costs
        # less than catching the KeyError.
        entry = self._hits.get(key, _UNSEEN)
        if entry is _UNSEEN:
            entry = self._hits[key] = self._scan(needle, lower, mode)
        return entry if entry is not None and entry.index < index else None

    def _scan(self, needle: str, lower: bool, mode: int) -> EvidenceItem | None:
        """The evidence item holding the first whole-token occurrence of ``needle`` in the whole
        evidence (``mode``: 0 a token, 1 a number, 2 an amount). Cached per run by
        :meth:`_first`: both scorers, and every turn, look the same tokens up.

        A look-up is a C-speed ``find`` from the start of the evidence, until the searches of a
        run have read the evidence several times over (many turns, each citing something new,
        over long evidence: quadratic); from then on it goes through a :class:`_RunIndex` of
        the evidence, built once, which finds the same first occurrence. (The ``find`` loop is
        :func:`_first_checked`, written out here: this runs for every new needle of a run.)"""
        joined = self._shared.get("joined") or self._texts()
        if lower:
            hay, starts = joined[2], joined[3]
        else:
            hay, starts = joined[0], joined[1]
        check = _amount_at if mode == 2 else _number_at if mode == 1 else _token_at
        family = "digits" if mode else "words"
        read = self._read
        done = read.get(family, 0)
        if self._runs or done > _INDEX_AFTER * len(hay) + _INDEX_MIN:
            runs = self._run_index(hay, family)
            if runs is not None:
                at = runs.first(needle, check)
                return None if at is None else self._evidence[bisect.bisect_right(starts, at) - 1]
        pos = hay.find(needle)
        if pos >= 0:
            width = len(needle)
            while not check(hay, pos, pos + width):
                pos = hay.find(needle, pos + 1)
                if pos < 0:
                    break
        if pos < 0:
            read[family] = done + len(hay)
            return None
        read[family] = done + pos
        return self._evidence[bisect.bisect_right(starts, pos) - 1]

    def _run_index(self, hay: str, family: str) -> _RunIndex | None:
        """The :class:`_RunIndex` of ``hay`` once the ``find`` searches of this run have read
        more than :data:`_INDEX_AFTER` times its length (the index costs about one pass)."""
        key = (family, id(hay))
        found = self._runs.get(key)
        if found is None and self._read.get(family, 0) > _INDEX_AFTER * len(hay) + _INDEX_MIN:
            pattern = _DIGIT_RUN if family == "digits" else _WORD_RUN
            found = self._runs[key] = _RunIndex(hay, pattern)
        return found

    def with_extractor(self, extractor: Extractor) -> EvidenceIndex:
        """The same index (sharing everything computed so far) with another extractor for
        custom patterns and suggestions."""
        if extractor is self.extractor:
            return self
        other = EvidenceIndex.__new__(EvidenceIndex)
        other._evidence = self._evidence
        other._entries = self._entries
        other._positions = self._positions
        other.extractor = extractor
        other._pool_cache = self._pool_cache
        other._shared = self._shared
        other._hits = self._hits
        other._read = self._read
        other._runs = self._runs
        other._decades = self._decades
        other._last_digits = self._last_digits
        other._derived = self._derived
        other._written = self._written
        return other

    def before(self, index: int) -> Iterator[_ItemIndex]:
        """Index entries of the evidence produced before step position ``index``."""
        return iter(self.items[: self._count_before(index)])

    def truncated_before(self, index: int) -> bool:
        """True when evidence before ``index`` was truncated at its source."""
        return any(item.truncated for item in self._evidence[: self._count_before(index)])

    def find(
        self, ref: Reference, index: int, extra: Sequence[tuple[float, str]] = ()
    ) -> Match | None:
        """Where ``ref`` is found in the evidence before step position ``index``, or ``None``.
        ``extra``: amounts the same turn already grounded (value, kind), usable in arithmetic."""
        kind = ref.kind
        if kind == "id" or kind == "code":
            # The commonest kinds, a token as written: _find_token's look-up, its cache probed
            # here (what _first does, without its calls; most of a run's references are these).
            key = (ref.key, True, 0)
            hit = self._hits.get(key, _UNSEEN)
            if hit is _UNSEEN:
                hit = self._hits[key] = self._scan(ref.key, True, 0)
            if hit is None or hit.index >= index:
                return None
            return _match(Match, (hit, ref.text, False))
        if kind in _NUMERIC_KINDS:
            return self._find_number(ref, index, extra)
        if kind == "date":
            return self.find_date(ref.key, index)
        if kind == "url":
            return self._find_url(ref.key, index, ref.text)
        if kind == "email":
            hit = self._first(ref.key, index, lower=True)
            return None if hit is None else Match(hit, ref.text)
        if kind == "citation":
            return self._find_citation(ref, index)
        return self._find_token(ref, index)

    # ---- ids, codes, uuids, custom patterns

    def _find_token(self, ref: Reference, index: int) -> Match | None:
        key = ref.key
        hit = self._first(key, index, lower=True)
        if hit is not None:
            return Match(hit, ref.text)
        if ref.kind not in KINDS:  # a custom pattern: also accept its own matches in evidence
            for pos, found in enumerate(self._custom_matches(index)):
                if key in found:
                    return Match(self._evidence[pos], ref.text)
        return None

    def _custom_matches(self, index: int) -> list[set[str]]:
        out: list[set[str]] = []
        for e in self.before(index):
            keys: set[str] = set()
            for _, rx in self.extractor.custom:
                keys.update(m.group(0).lower() for m in rx.finditer(e.item.text))
            out.append(keys)
        return out

    # ---- citations

    def _find_citation(self, ref: Reference, index: int) -> Match | None:
        key = ref.key
        _, _, low, low_starts = self._texts()
        pos = low.find(f"[{key}]", 0, self._end_before(index, lower=True))
        if pos >= 0:
            return Match(self._evidence[bisect.bisect_right(low_starts, pos) - 1], ref.text)
        if not key.isdigit():
            hit = self._first(key, index, lower=True)
            if hit is not None:
                return Match(hit, key)
        if key.isdigit():
            n = int(key)
            count = 0
            for e in self.before(index):
                if e.item.kind == "retrieval" and isinstance(e.item.value, list):
                    count += len(e.item.value)
                    if 1 <= n <= count:
                        return Match(e.item, f"document {n} of the retrieved context")
        return None

    # ---- dates and URLs

    def find_date(self, key: str, index: int) -> Match | None:
        """A date key (``YYYY-MM-DD``, or ``--MM-DD`` for a date written without its year).

        A full date is also grounded by the same day written without a year ("May 20th") when
        the year appears in the evidence too (typically today's date in the system prompt), and
        by an evidence date one day away when the evidence speaks of a relative day ("the day
        after", "next day", "tomorrow", an overnight arrival ``03:00:00+1``)."""
        if not key.startswith("--"):
            hit = self._first(key, index, lower=False, number=True)
            if hit is not None:
                return Match(hit, key)
        for e in self.before(index):
            if key in e.dates:
                return Match(e.item, key)
        if key.startswith("--"):
            return None
        shifted = _shift_day(key)
        if shifted and any(_RELATIVE_DAY.search(e.item.text) for e in self.before(index)):
            for e in self.before(index):
                near = shifted & e.dates
                if near:
                    return Match(e.item, f"{min(near)} ± 1 day", derived=True)
        yearless = "?--" + key[5:]
        year = key[:4]
        day = next((e for e in self.before(index) if yearless in e.dates), None)
        if day is None:
            return None
        if any(year in e.numbers for e in self.before(index)):
            return Match(
                day.item, f"{key[5:]} with the year {year} from the evidence", derived=True
            )
        return None

    def find_decade(self, key: str, index: int) -> Match | None:
        """A decade (``1990s``; ``90s`` written without its century): grounded by the first
        year of it in the evidence before ``index`` (a whole number, alone or in a date: 1990
        to 1999; for ``90s``, 1990 to 1999 or 2090 to 2099; for a round century's ``1900s``,
        which may mean the century, 1900 to 1999; not inside a word or a code), or by the same
        decade written there."""
        try:
            hit = self._decades[key]
        except KeyError:
            hit = self._decades[key] = self._scan_decade(key)
        return hit if hit is not None and hit.item.index < index else None

    def _scan_decade(self, key: str) -> Match | None:
        """:meth:`find_decade` over the whole evidence (cached per run by it)."""
        raw, starts, low, low_starts = self._texts()
        tens = key[:-1]
        firsts = [int(tens)] if len(tens) == 4 else [1900 + int(tens), 2000 + int(tens)]
        width = 100 if len(tens) == 4 and tens.endswith("00") else 10
        for m in _YEAR.finditer(raw):
            year = int(m.group(0))
            if any(f <= year < f + width for f in firsts):
                item = self._evidence[bisect.bisect_right(starts, m.start()) - 1]
                return Match(item, f"{year}, in the {key}", derived=True)
        for m in _DECADE_TEXT.finditer(low):
            century = m.group(1)
            if m.group(2) == tens[-2:] and (
                century is None or len(tens) == 2 or century == tens[:2]
            ):
                return Match(
                    self._evidence[bisect.bisect_right(low_starts, m.start()) - 1], m.group(0)
                )
        return None

    def find_last_digits(self, digits: str, index: int) -> Match | None:
        """The last digits of a number ("the card ending in 4321"), in the evidence before
        ``index``: the end of an id-like token (``gift_card_7654321``: letters, then a ``_``
        or ``-``, then digits ending in them), of a long number (8 digits or more: a card or
        an account number), or of a masked one (``**** 4321``, ``XXXX-4321``, ``xxxx4321``);
        or the digits themselves where the evidence says they are last digits (a key such as
        ``"last_four": "4321"``, or "ending in 4321" in a message). Not any number that merely
        ends in them (a price of ``14321``), nor the digits standing alone elsewhere."""
        try:
            hit = self._last_digits[digits]
        except KeyError:
            hit = self._last_digits[digits] = self._scan_last_digits(digits)
        return hit if hit is not None and hit.item.index < index else None

    def _scan_last_digits(self, digits: str) -> Match | None:
        """:meth:`find_last_digits` over the whole evidence (cached per run by it)."""
        raw, starts, _, _ = self._texts()
        pos = raw.find(digits)
        while pos >= 0:
            how = _trailing_digits_of(raw, pos, pos + len(digits))
            if how is not None:
                item = self._evidence[bisect.bisect_right(starts, pos) - 1]
                return Match(item, how, derived=True)
            pos = raw.find(digits, pos + 1)
        return None

    def find_time(self, key: str, index: int) -> Match | None:
        """A time of day ``HH:MM``; ``HH:MM?`` (no am/pm written) also matches 12 hours later."""
        # In a fixed order, the time as written first, so that the supporting step is the same
        # in every process (a set's order changes with the interpreter's hash seed).
        keys = [key.rstrip("?")]
        if key.endswith("?"):
            hour = int(key[:2])
            keys.append(f"{(hour + 12) % 24:02d}:{key[3:5]}")
        for k in keys:
            hit = self._first(k, index, lower=False, number=True)
            if hit is not None:
                return Match(hit, key.rstrip("?"))
        wanted = frozenset(keys)
        for e in self.before(index):
            if wanted & e.times:
                return Match(e.item, key.rstrip("?"))
        return None

    def find_words(self, words: Sequence[str], index: int, text: str) -> Match | None:
        """Every one of ``words`` (lower-case) among the evidence tokens before ``index``,
        case-insensitively; they may come from different items. The match names the item that
        completed the set."""
        last: EvidenceItem | None = None
        for word in words:
            hit = self._first(word, index, lower=True)
            if hit is None:
                return None
            if last is None or hit.index > last.index:
                last = hit
        return None if last is None else Match(last, text)

    def find_value(
        self,
        value: float,
        index: int,
        *,
        percent: bool = False,
        tolerance: float = 0.0,
        arithmetic: bool = True,
        extra: Sequence[tuple[float, str]] = (),
        strict: bool = True,
        quantity: str = NUMBER,
    ) -> Match | None:
        """A number as written in the evidence (any common formatting), else within
        ``tolerance`` of an evidence number or, with ``arithmetic``, of plausible arithmetic on
        them and on ``extra`` (numbers the same turn already grounded, with their kinds; see
        :class:`_NumberPool`) for a claim of the kind ``quantity`` (``money``, ``count``,
        ``rate`` or ``number``). ``strict``: the number must stand alone in the evidence (an
        amount); otherwise digits inside an id or a date count too ("certificate 7504069", the
        year of a date)."""
        found = self._written.get((value, index, percent, strict), _UNSEEN)
        if found is _UNSEEN:
            found = self.find_written(value, index, percent=percent, strict=strict)
        if found is not None or not arithmetic:
            return found
        return self.derive(
            abs(value), index, percent=percent, tolerance=tolerance, extra=extra, quantity=quantity
        )

    def find_written(
        self, value: float, index: int, *, percent: bool = False, strict: bool = True
    ) -> Match | None:
        """:meth:`find_value` without its arithmetic: the number as written in the evidence
        before ``index`` (any common formatting), or for a percentage its hundredth; the rest of
        :meth:`find_value` (rounding, arithmetic) is tried only when this finds nothing.

        Kept per run: ``no_fabricated_refs`` looks up an amount or a percentage of a turn and
        ``parametric_leakage`` the same one, at the same position, again (the answer depends on
        nothing else)."""
        key = (value, index, percent, strict)
        found = self._written.get(key, _UNSEEN)
        if found is _UNSEEN:
            found = self._written[key] = self._find_written(value, index, percent, strict)
        return found

    def _find_written(self, value: float, index: int, percent: bool, strict: bool) -> Match | None:
        """:meth:`find_written`, computed."""
        key = number_key(abs(value))
        variants = _number_variants(key)
        frac = _number_variants(number_key(abs(value) / 100)) if percent else None
        mode = 2 if strict else 1
        hits = self._hits
        for v in variants:  # _first(v, index, lower=False, number=True, amount=strict), inlined
            hit = hits.get((v, False, mode), _UNSEEN)
            if hit is _UNSEEN:
                hit = hits[(v, False, mode)] = self._scan(v, False, mode)
            if hit is not None and hit.index < index:
                return _match(Match, (hit, key, False))
        for v in frac or ():
            hit = self._first(v, index, lower=False, number=True, amount=strict)
            if hit is not None:
                return Match(hit, number_key(abs(value) / 100))
        return None

    def _find_url(self, key: str, index: int, text: str = "") -> Match | None:
        bare = _SCHEME.sub("", text).lower()
        if bare:
            hit = self._first(bare, index, lower=True)  # as written, minus the scheme
            if hit is not None:
                return Match(hit, text)
        for e in self.before(index):
            urls = e.urls
            if key in urls:
                return Match(e.item, key)
            for u in urls:  # a page's own site, or a parent path, is grounded by a deeper link
                if u.startswith(key) and u[len(key) : len(key) + 1] in ("/", "?"):
                    return Match(e.item, u)
        return None

    # ---- amounts and percentages

    def _find_number(
        self, ref: Reference, index: int, extra: Sequence[tuple[float, str]] = ()
    ) -> Match | None:
        # find_value, with the tolerance (needed only by the arithmetic) read only when the
        # amount is not in the evidence as written
        value = float(ref.key)
        percent = ref.kind == "percent"
        found = self._written.get((value, index, percent, True), _UNSEEN)
        if found is _UNSEEN:
            found = self.find_written(value, index, percent=percent)
        if found is not None:
            return found
        return self.derive(
            abs(value),
            index,
            percent=percent,
            tolerance=written_tolerance(ref.text),
            extra=extra,
            quantity=MONEY if ref.kind == "money" else RATE,
        )

    def pool(self, index: int) -> _NumberPool:
        """The numbers of the evidence before ``index``, for arithmetic (cached)."""
        entries = list(self.before(index))
        n = len(entries)
        pool = self._pool_cache.get(n)
        if pool is None:
            pool = _NumberPool(entries)
            self._pool_cache[n] = pool
        return pool

    def derive(
        self,
        value: float,
        index: int,
        *,
        percent: bool = False,
        tolerance: float = 0.0,
        extra: Sequence[tuple[float, str]] = (),
        quantity: str = NUMBER,
    ) -> Match | None:
        """Whether ``value`` is a number of the evidence before ``index``, or plausible
        arithmetic on them for a claim of the kind ``quantity`` (see :class:`_NumberPool`),
        within ``tolerance``.

        The answer depends only on the arguments and on how many evidence items come before
        ``index`` (the pool), so it is kept per run: an amount that no evidence holds as
        written is derived by ``no_fabricated_refs`` and again by ``parametric_leakage``."""
        key = (value, self._count_before(index), percent, tolerance, quantity, tuple(extra))
        found = self._derived.get(key, _UNSEEN)
        if found is _UNSEEN:
            found = self._derived[key] = self._derive(
                value, index, percent, tolerance, extra, quantity
            )
        return found

    def _derive(
        self,
        value: float,
        index: int,
        percent: bool,
        tolerance: float,
        extra: Sequence[tuple[float, str]],
        quantity: str,
    ) -> Match | None:
        """:meth:`derive`, computed."""
        pool = self.pool(index)
        if not pool.entries:
            return None
        if extra:
            pool = pool.with_extra(extra)
        how = pool.derive(value, tolerance=tolerance, percent=percent, quantity=quantity)
        if how is None:
            return None
        text, pos = how
        return Match(pool.entries[pos].item, text, derived=not text.startswith("="))

    # ---- closest evidence, for the message

    def closest(self, ref: Reference, index: int) -> tuple[str, EvidenceItem] | None:
        """The evidence token of the same kind most like ``ref`` (for "did you mean")."""
        best: tuple[float, str, EvidenceItem] | None = None
        if ref.kind in _NUMERIC_KINDS:
            value = float(ref.key)
            for e in self.before(index):
                vals = e.values
                if not vals:
                    continue
                i = bisect.bisect_left(vals, value)
                for v in vals[max(0, i - 1) : i + 1]:
                    d = abs(v - value) / max(abs(value), 1.0)
                    if best is None or d < best[0]:
                        best = (d, number_key(v), e.item)
            return None if best is None else (best[1], best[2])
        limit = max(2, len(ref.key) // 4 + 1)
        target = ref.key.strip("[]")
        has_digit = any(ch.isdigit() for ch in target)
        raw, starts, low, _ = self._texts()
        lowered = False
        if ref.kind == "date":
            candidates = _ISO_TEXT_LED
        elif ref.kind in ("url", "email"):
            candidates = _URL if ref.kind == "url" else _EMAIL
        else:  # ids, codes, citations, custom shapes: words starting like the reference
            # (holding a digit when it does: "customer" is no suggestion for "cust-48231")
            candidates, lowered = _word_candidates(target[:2], has_digit, raw.isascii())
        end = self._end_before(index)
        if not end:
            return None
        seen: set[str] = set()
        # in evidence order: the first of equals wins
        for m in candidates.finditer(low if lowered else raw, 0, end):
            cand = raw[m.start() : m.end()] if lowered else m.group(0)
            if ref.kind == "url":
                cand = _trim_url(cand)
                key = url_key(cand)
            else:
                key = cand.lower() if ref.kind != "date" else cand[:10]
            if key in seen or abs(len(key) - len(target)) > limit or key == target:
                continue
            seen.add(key)
            if has_digit and not any(ch.isdigit() for ch in key):
                continue
            dist = distance_within(target, key, limit)
            if dist is not None and (best is None or dist < best[0]):
                item = self._evidence[bisect.bisect_right(starts, m.start()) - 1]
                best = (dist, cand, item)
        return None if best is None else (best[1], best[2])


_match = tuple.__new__
"""``_match(Match, (item, text, derived))`` is ``Match(item, text, derived)`` without the named
tuple's ``__new__`` in Python."""
_SEP = "\n\n"
_UNSEEN: Any = object()
"""Marks a needle not looked up yet in :attr:`EvidenceIndex._hits` (where ``None`` is "not
found")."""
_WORD_RUN = re.compile(r"[^\W_]+")
"""A maximal run of ``str.isalnum`` characters (a word character that is not ``_``)."""
_DIGIT_RUN = re.compile(r"\d+")
_INDEX_AFTER = 4
_INDEX_MIN = 1 << 16


class _RunIndex:
    """Where each maximal run of letters and digits (or of digits) starts in one text.

    In an occurrence of a needle that passes :func:`_token_at` (or :func:`_number_at`) every
    run of the needle is a whole run of the text: its ends are the needle's own separators or
    the checked boundaries. So the first occurrence is among the places where the needle's
    longest run stands as a run of the text, taken in order, and each is checked exactly as the
    ``find`` loop checks it.
    """

    __slots__ = ("_at", "_hay", "_pattern")

    def __init__(self, hay: str, pattern: re.Pattern[str]) -> None:
        self._hay = hay
        self._pattern = pattern
        at: dict[str, list[int]] = {}
        for m in pattern.finditer(hay):
            at.setdefault(m.group(), []).append(m.start())
        self._at = at

    def first(self, needle: str, check: Callable[[str, int, int], bool]) -> int | None:
        """The position of the first occurrence of ``needle`` that passes ``check``."""
        runs = list(self._pattern.finditer(needle))
        if not runs:  # nothing to look up by: read the text
            return _first_checked(self._hay, needle, check)
        key = max(runs, key=lambda m: len(m.group()))  # the first of the longest
        hay, width, offset = self._hay, len(needle), key.start()
        for at in self._at.get(key.group(), ()):
            start = at - offset
            if start >= 0 and hay.startswith(needle, start) and check(hay, start, start + width):
                return start
        return None


def _first_checked(hay: str, needle: str, check: Callable[[str, int, int], bool]) -> int | None:
    """The position of the first occurrence of ``needle`` in ``hay`` that passes ``check``."""
    pos = hay.find(needle)
    while pos >= 0:
        if check(hay, pos, pos + len(needle)):
            return pos
        pos = hay.find(needle, pos + 1)
    return None


def _offsets(parts: list[str]) -> list[int]:
    """Where each part starts in ``_SEP.join(parts)``."""
    return [0, *accumulate(len(p) + len(_SEP) for p in parts[:-1])] if parts else []


def _trailing_digits_of(raw: str, start: int, end: int) -> str | None:
    """How ``raw[start:end]`` stands as the last digits of a number, when it does as
    :meth:`EvidenceIndex.find_last_digits` accepts ("the last digits of gift_card_7654321"),
    else ``None``. Reads at most ``_TOKEN_SPAN`` characters back."""
    n = len(raw)
    if end < n and (raw[end].isalnum() or (raw[end] in ".," and raw[end + 1 : end + 2].isdigit())):
        return None  # more of a word or of a number follows
    floor = max(0, start - _TOKEN_SPAN)
    run = start
    while run > floor and raw[run - 1].isdigit():
        run -= 1
    if run > 1 and raw[run - 1] in ".," and raw[run - 2].isdigit():
        return None  # the decimals, or a thousands group, of a number
    head = run
    while head > floor and (raw[head - 1].isalnum() or raw[head - 1] in "_-*•"):
        head -= 1
    if end - run >= _LONG_NUMBER:
        return f"the last digits of {raw[head:end]}"  # a card or an account number
    prefix = raw[head:run]
    if (prefix[-1:] in ("_", "-") and any(c.isalpha() or c in _MASK for c in prefix)) or (
        len(prefix) >= 3 and all(c in _MASK for c in prefix[-3:])
    ):
        # gift_card_7654321, CUST-4321, XXXX-4321, xxxx4321, ****4321
        return f"the last digits of {raw[head:end]}"
    if run < start or head < run:
        return None  # a shorter number merely ending in them, or glued to a word
    lead = raw[floor:start].rstrip(" -")
    mask = len(lead)
    while mask > 0 and lead[mask - 1] in _MASK:
        mask -= 1
    if len(lead) - mask >= 3:
        return f"the last digits of {raw[floor + mask : end]}"  # "**** 4321", "XXXX 4321"
    line = raw[max(raw.rfind("\n", 0, start) + 1, start - 48) : start]
    if _LAST_DIGITS_KEY.search(line) or _LAST_DIGITS_LEAD.search(line.lower()):
        return f"{raw[start:end]}, given as last digits"  # "last_four": "4321", "ending in 4321"
    return None


def _token_at(hay: str, start: int, end: int) -> bool:
    """True when ``hay[start:end]`` is whole words: not glued to a letter or digit on either side
    (``inv-551`` is in ``inv-551-b`` and ``inv-551_x``, not in ``inv-5510``)."""
    return (start == 0 or not hay[start - 1].isalnum()) and (
        end == len(hay) or not hay[end].isalnum()
    )


def _amount_at(hay: str, start: int, end: int) -> bool:
    """True when ``hay[start:end]`` is a stand-alone number: as :func:`_number_at`, and not part
    of a word, an id, a date or a time (``117`` is not in ``HAT117``, ``10`` not in ``10:00``,
    ``05`` not in ``2024-05-20``); a minus sign before it is allowed (``-6594``)."""
    if not _number_at(hay, start, end):
        return False
    n = len(hay)
    before = hay[start - 1] if start else " "
    after = hay[end] if end < n else " "
    if before.isalpha() or before in "_:" or after.isalpha() or after == "_":
        return False
    if before == "-" and start > 1 and (hay[start - 2].isalnum() or hay[start - 2] == "-"):
        return False  # a range or a date, not a sign
    return not (after in ":-" and end + 1 < n and hay[end + 1].isdigit())


def _number_at(hay: str, start: int, end: int) -> bool:
    """True when ``hay[start:end]`` is a whole number: no digit next to it, and no decimal point
    or thousands separator that continues it (``5.1`` is not in ``15.10``; ``1834.2`` is not in
    ``1834.25``; ``117`` is in ``HAT117``)."""
    n = len(hay)
    before = hay[start - 1] if start else " "
    after = hay[end] if end < n else " "
    if before.isdigit() or after.isdigit():
        return False
    if before in ".," and start > 1 and hay[start - 2].isdigit():
        return False
    return not (after in ".," and end + 1 < n and hay[end + 1].isdigit())


class _NumberPool:
    """The numbers available before a turn, and what counts as derived from them.

    Accepted as derived (each within ``tolerance``): a number itself; for a percentage, the
    number times 100 (a fraction), ``a / b * 100`` and ``(b - a) / a * 100`` (a share and a
    change). For any other number, only arithmetic that means something, by the kinds of
    :mod:`agentlens.eval._quantities` (money, count, rate, or a number nothing describes), and
    only of a kind the claim can be (a claimed amount is money, "3 bags" a count; see
    :data:`_COMPATIBLE`):

    - ``a + b``, ``a - b`` of two numbers of one kind, each at least 10, the turn's own numbers
      tried first as ``a`` (money with money, counts with counts: a count of seats added to a
      price is no derivation);
    - ``k × a`` with ``k`` a count of the evidence (``"total_baggages": 3``, "3 passengers", a
      list of three passengers), or ``a`` a rate of the evidence ("$50 per passenger") and a
      whole ``k`` from 2 to 10;
    - ``a / b`` with ``a`` at least 10 and ``b`` a count of the evidence from 2 on (a per-unit
      value: a total over the passengers);
    - ``a + b + c`` of one kind (when at most 80 numbers of it are available), each at least 10.

    Arithmetic uses the 200 numbers nearest the turn, plus the numbers the turn itself already
    grounded (so "$500 + $250 = $750, plus $129 is $879" is followed step by step).
    """

    def __init__(self, entries: list[_ItemIndex]) -> None:
        self.entries = entries
        origin: dict[float, int] = {}
        for pos, e in enumerate(entries):
            for v in e.values:
                origin.setdefault(v, pos)
        self.origin = origin
        recent = sorted(origin, key=lambda v: -origin[v])[:_MAX_ARITH]
        self.values = sorted(recent)
        self.own: dict[float, set[str]] = {}
        self._typed: _Typed | None = None
        # the kinds and counts of the evidence numbers, shared with the pools with_extra makes
        self._evidence: list[tuple[dict[float, set[str]], dict[float, int]]] = []

    def with_extra(self, extra: Sequence[tuple[float, str]]) -> _NumberPool:
        """This pool plus ``extra`` numbers (value, kind: what the turn already grounded),
        attributed to the latest evidence item."""
        pool = _NumberPool.__new__(_NumberPool)
        pool.entries = self.entries
        pool.origin = dict(self.origin)
        last = len(self.entries) - 1
        for v, _ in extra:
            pool.origin.setdefault(v, last)
        pool.values = sorted(set(self.values) | {v for v, _ in extra})
        pool.own = {}
        for v, kind in extra:
            pool.own.setdefault(v, set()).add(kind)
        pool._typed = None
        pool._evidence = self._evidence
        return pool

    def evidence_kinds(self) -> tuple[dict[float, set[str]], dict[float, int]]:
        """The kinds of every evidence number, and each count with the position of the first
        item holding it: computed once, shared by the pools :meth:`with_extra` makes."""
        if not self._evidence:
            found: dict[float, set[str]] = {}
            counts: dict[float, int] = {}
            for pos, e in enumerate(self.entries):
                q = e.quantities
                for v, ks in q.kinds.items():
                    found.setdefault(v, set()).update(ks)
                for c in q.counts:
                    counts.setdefault(c, pos)
            self._evidence.append((found, counts))
        return self._evidence[0]

    def _has(self, target: float, tol: float, vals: list[float] | None = None) -> float | None:
        vals = self.values if vals is None else vals
        i = bisect.bisect_left(vals, target - tol - 1e-9)
        if i < len(vals) and vals[i] <= target + tol + 1e-9:
            return vals[i]
        return None

    def derive(
        self, x: float, *, tolerance: float, percent: bool, quantity: str = NUMBER
    ) -> tuple[str, int] | None:
        """How ``x`` (a claim of the kind ``quantity``) is derived from the pool's numbers, and
        the position of the evidence item that completed the derivation; ``None`` when not."""
        direct = self._has(x, tolerance)
        if direct is not None:
            return f"={number_key(direct)}", self.origin[direct]
        if percent:
            return self._derive_percent(x, tolerance)
        return self._derive_amount(x, tolerance, quantity)

    def _derive_percent(self, x: float, tol: float) -> tuple[str, int] | None:
        """A percentage: a fraction of the evidence, a change between two numbers, a share."""
        frac = self._has(x / 100, tol / 100)
        if frac is not None:
            return f"={number_key(frac)}", self.origin[frac]
        for a in self.values:
            if a == 0:
                continue
            b = self._has(a * (1 + x / 100), tol * abs(a) / 100)
            if b is not None:
                return (
                    f"{number_key(b)} is {number_key(x)}% more than {number_key(a)}",
                    self.origin[b],
                )
            b = self._has(a * (1 - x / 100), tol * abs(a) / 100)
            if b is not None:
                return (
                    f"{number_key(b)} is {number_key(x)}% less than {number_key(a)}",
                    self.origin[b],
                )
            b = self._has(x * a / 100, tol * abs(a) / 100)
            if b is not None:
                return f"{number_key(b)} is {number_key(x)}% of {number_key(a)}", self.origin[b]
        return None

    def _derive_amount(self, x: float, tol: float, quantity: str) -> tuple[str, int] | None:
        """A plausible derivation of ``x`` (see the class), the likeliest first: a sum or a
        difference of two of the turn's own numbers, a product with one of them ("$50 per
        passenger", then the total), a sum or difference of one of them and an evidence number;
        then sums, differences and products of evidence numbers; sums of three; quotients."""
        typed = self.typed()
        kinds = _COMPATIBLE.get(quantity, _COMPATIBLE[NUMBER])
        factors = sorted({v for kind in kinds for v in typed.of_kind.get(kind, ())})
        how = (
            self._pair(x, tol, kinds, own=2)
            or self._product(x, tol, kinds, factors, own=True)
            or self._pair(x, tol, kinds, own=1)
            or self._pair(x, tol, kinds, own=0)
            or self._product(x, tol, kinds, factors, own=False)
            or self._triple(x, tol, kinds)
            or self._quotient(x, tol, factors)
        )
        return how

    @staticmethod
    def _other(target: float, tol: float, vals: list[float], other: float) -> float | None:
        """A number of ``vals`` within ``tol`` of ``target`` that is not ``other``: the terms
        of a sum are distinct numbers (twice a price is a product, with a count)."""
        i = bisect.bisect_left(vals, target - tol - 1e-9)
        while i < len(vals) and vals[i] <= target + tol + 1e-9:
            if vals[i] != other:
                return vals[i]
            i += 1
        return None

    def _own(self, vals: list[float], kind: str) -> list[float]:
        """The turn's own numbers among ``vals``, claimed as ``kind``."""
        return [v for v in vals if kind in self.own.get(v, ())]

    def _pair(self, x: float, tol: float, kinds: tuple[str, ...], own: int) -> _How | None:
        """``a + b`` or ``a - b`` of one kind, with ``own`` of the two the turn's own."""
        typed = self.typed()
        for kind in kinds:
            terms = typed.terms.get(kind, [])
            firsts = self._own(terms, kind) if own else terms
            seconds = self._own(terms, kind) if own == 2 else terms
            for a in firsts:
                b = self._other(x - a, tol, seconds, a)
                if b is not None:
                    return self._how(f"{number_key(a)} + {number_key(b)}", a, b)
                b = self._other(a - x, tol, seconds, a)
                if b is not None:
                    return self._how(f"{number_key(a)} - {number_key(b)}", a, b)
        return None

    def _product(
        self, x: float, tol: float, kinds: tuple[str, ...], factors: list[float], own: bool
    ) -> _How | None:
        """``k × a`` with ``k`` a count of the evidence, or ``a`` a rate of the evidence and a
        whole ``k`` from 2 to 10; with ``own``, ``a`` is one of the turn's own numbers."""
        typed = self.typed()
        if own:
            factors = [v for v in factors if self.own.get(v)]
        for k, pos in typed.counts:
            factor = self._has(x / k, tol / k, factors)
            if factor is not None:
                return f"{number_key(k)} × {number_key(factor)}", max(pos, self.origin[factor])
        for rate in typed.rates:
            if rate and typed.kinds[rate] & set(kinds) and (not own or self.own.get(rate)):
                times = round(x / rate)
                if 2 <= times <= 10 and abs(times * rate - x) <= tol + 1e-9:
                    return self._how(f"{times} × {number_key(rate)}", rate, rate)
        return None

    def _triple(self, x: float, tol: float, kinds: tuple[str, ...]) -> _How | None:
        """``a + b + c`` of one kind, when at most 80 numbers of it are available."""
        typed = self.typed()
        for kind in kinds:
            terms = typed.terms.get(kind, [])
            if len(terms) > _MAX_TRIPLE:
                continue
            sums = typed.pair_sums(kind)
            keys = [s[0] for s in sums]
            for c in terms:
                t = x - c
                i = bisect.bisect_left(keys, t - tol - 1e-9)
                while i < len(keys) and keys[i] <= t + tol + 1e-9:
                    _, a, b = sums[i]
                    if c != a and c != b:
                        pos = max(self.origin[a], self.origin[b], self.origin[c])
                        return f"{number_key(a)} + {number_key(b)} + {number_key(c)}", pos
                    i += 1
        return None

    def _quotient(self, x: float, tol: float, factors: list[float]) -> _How | None:
        """``a / b``: ``a`` at least 10, ``b`` a count of the evidence (a per-unit value)."""
        dividends = [v for v in factors if abs(v) >= _MIN_OPERAND]
        for count, pos in self.typed().counts:
            total = self._has(x * count, tol * count, dividends)
            if total is not None:
                return f"{number_key(total)} / {number_key(count)}", max(pos, self.origin[total])
        return None

    def _how(self, text: str, a: float, b: float) -> _How:
        return text, max(self.origin[a], self.origin[b])

    def typed(self) -> _Typed:
        """The pool's numbers by kind (computed on the first derivation asked)."""
        if self._typed is None:
            self._typed = _Typed(self)
        return self._typed


_How = tuple[str, int]
"""A derivation's text and the position of the evidence item that completed it."""

_COMPATIBLE: dict[str, tuple[str, ...]] = {
    MONEY: (MONEY, NUMBER),
    COUNT: (COUNT, NUMBER),
    RATE: (RATE, MONEY, NUMBER),
    NUMBER: (MONEY, COUNT, RATE, NUMBER),
}
"""The kinds of operands a claim of each kind may be derived from (one kind per derivation):
an amount from money, or from numbers nothing describes (a JSON ``"value": 12``)."""


class _Typed:
    """A pool's numbers by kind: each number's kinds (a number of no known kind is a
    ``number``; the turn's own numbers have the kind they were claimed as), the operands of
    sums per kind (at least 10), the counts of the evidence with the position of the item
    holding each, and its rates."""

    __slots__ = ("_sums", "counts", "kinds", "of_kind", "rates", "terms")

    def __init__(self, pool: _NumberPool) -> None:
        found, evidence_counts = pool.evidence_kinds()
        counts = dict(evidence_counts)
        last = len(pool.entries) - 1
        for v, own in pool.own.items():
            if COUNT in own and v.is_integer():
                counts.setdefault(v, last)
        self.kinds = {
            v: frozenset(found.get(v, set()) | pool.own.get(v, set()) or (NUMBER,))
            for v in pool.values
        }
        self.of_kind: dict[str, list[float]] = {}
        for v in pool.values:
            for kind in self.kinds[v]:
                self.of_kind.setdefault(kind, []).append(v)
        self.terms = {
            kind: [v for v in vals if abs(v) >= _MIN_OPERAND] for kind, vals in self.of_kind.items()
        }
        self.counts = sorted((c, pos) for c, pos in counts.items() if c >= 2)
        self.rates = self.of_kind.get(RATE, [])
        self._sums: dict[str, list[tuple[float, float, float]]] = {}

    def pair_sums(self, kind: str) -> list[tuple[float, float, float]]:
        """Every ``a + b`` of two distinct operands of ``kind``, sorted."""
        sums = self._sums.get(kind)
        if sums is None:
            vals = self.terms.get(kind, [])
            sums = self._sums[kind] = sorted(
                (vals[i] + vals[j], vals[i], vals[j])
                for i in range(len(vals))
                for j in range(i + 1, len(vals))
            )
        return sums
