"""Reference extraction and normalisation, and the per-run evidence index they are looked up in.

A *reference* is a token in an answer that points at something specific the agent must have
been given: a record id, a booking code, a UUID, an amount, a percentage, a date, a URL, an
e-mail address or a citation key. :class:`Extractor` finds them (one precompiled regular
expression for the built-in kinds, plus the agent role's own ``patterns``) and gives each a
normalised ``key`` so that ``$1,834.20`` and a JSON ``1834.2`` compare equal.

:class:`EvidenceIndex` answers "was this reference in the evidence before position *i*?" for one
run. It indexes each evidence item lazily and only for the kinds that are asked about, using
C-speed primitives (one ``findall`` per item and family of kinds, then set look-ups), so that a
run whose answers contain no references costs almost nothing. The rules, and the reasons for
them, are in ``docs/grounding.md``.
"""

from __future__ import annotations

import bisect
import datetime as _dt
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from agentlens.errors import ConfigError
from agentlens.eval._evidence import EvidenceItem

__all__ = [
    "KINDS",
    "EvidenceIndex",
    "Extractor",
    "Match",
    "Reference",
    "date_key",
    "edit_distance",
    "get_extractor",
    "number_key",
    "parse_number",
    "url_key",
    "written_tolerance",
]

KINDS: tuple[str, ...] = (
    "url",
    "email",
    "uuid",
    "date",
    "money",
    "percent",
    "citation",
    "id",
    "code",
)
"""The built-in reference kinds. Custom ``patterns`` add the kind ``pattern`` (or their name)."""

_NUMERIC_KINDS = frozenset({"money", "percent"})


@dataclass(frozen=True, slots=True)
class Reference:
    """One reference found in a text."""

    kind: str
    """``id``, ``code``, ``uuid``, ``money``, ``percent``, ``date``, ``url``, ``email``,
    ``citation``, or a custom pattern's name (``pattern`` when unnamed)."""
    text: str
    """The exact text as written."""
    start: int
    """Offset of the first character in the searched text."""
    end: int
    """Offset after the last character."""
    key: str
    """The normalised form compared with the evidence (``1834.2``, ``2026-03-05``, ``cust-12345``)."""


@dataclass(frozen=True, slots=True)
class Match:
    """Where a reference was found in the evidence."""

    item: EvidenceItem
    """The evidence item (step output, or the run's input) that holds it."""
    text: str
    """What was found there, as it appears (or the derivation, for computed amounts)."""
    derived: bool = False
    """True when the value is computed from evidence numbers rather than found as such."""


# --------------------------------------------------------------------------- normalisation

_MONTHS: dict[str, int] = {}
for _i, _names in enumerate(
    (
        ("january", "jan"),
        ("february", "feb"),
        ("march", "mar"),
        ("april", "apr"),
        ("may",),
        ("june", "jun"),
        ("july", "jul"),
        ("august", "aug"),
        ("september", "sep", "sept"),
        ("october", "oct"),
        ("november", "nov"),
        ("december", "dec"),
    ),
    start=1,
):
    for _n in _names:
        _MONTHS[_n] = _i
_DAYS_IN_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)

_SCALES = {
    "k": 1e3,
    "thousand": 1e3,
    "m": 1e6,
    "mm": 1e6,
    "mn": 1e6,
    "million": 1e6,
    "b": 1e9,
    "bn": 1e9,
    "billion": 1e9,
    "t": 1e12,
    "trillion": 1e12,
}


def number_key(value: float) -> str:
    """The canonical text of a number: no thousands separators, no trailing zeros.

    ``1834.20`` -> ``1834.2``; ``12500.00`` -> ``12500``; ``-0.0`` -> ``0``.
    """
    if not math.isfinite(value):
        return repr(value)
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def parse_number(text: str) -> float | None:
    """Parse a written number: ``1,834.20``, ``$12.5 million``, ``USD 12.5``, ``9k``, ``20%``.

    Currency symbols and codes, ``%``/``percent`` and surrounding words are ignored; a scale word
    (``thousand``, ``million``, ``billion``, ``k``, ``M``, ``bn``) multiplies. Returns ``None``
    when there is no number.
    """
    m = _NUMBER_IN_TEXT.search(text)
    if m is None:
        return None
    digits = m.group("num").replace(",", "")
    try:
        value = float(digits)
    except ValueError:
        return None
    if m.group("neg"):
        value = -value
    scale = m.group("scale")
    if scale:
        value *= _SCALES[scale.lower()]
    return value


def date_key(year: int | None, month: int, day: int) -> str | None:
    """``YYYY-MM-DD`` (or ``--MM-DD`` without a year); ``None`` when the date cannot exist."""
    if not 1 <= month <= 12 or not 1 <= day <= _DAYS_IN_MONTH[month - 1]:
        return None
    if year is None:
        return f"--{month:02d}-{day:02d}"
    return f"{year:04d}-{month:02d}-{day:02d}"


_SCHEME = re.compile(r"(?i)^(?:https?|ftp)://")
_URL_PARTS = re.compile(r"(?i)^(?:(https?|ftp)://)?([^/?#]*)([^#]*)")
_DEFAULT_PORT = re.compile(r":(80|443)$")


def url_key(url: str) -> str:
    """A URL compared loosely: scheme and host lower-cased, default port, ``www.`` and a trailing
    slash dropped, fragment dropped; path and query kept as written."""
    m = _URL_PARTS.match(url)
    if m is None:  # pragma: no cover - the pattern matches any string
        return url
    scheme = (m.group(1) or "http").lower()
    if scheme == "https":
        scheme = "http"
    host = m.group(2).lower()
    host = _DEFAULT_PORT.sub("", host)
    if host.startswith("www."):
        host = host[4:]
    rest = m.group(3)
    path, _, query = rest.partition("?")
    path = path.rstrip("/")
    return f"{scheme}://{host}{path}" + (f"?{query}" if query else "")


def written_tolerance(text: str) -> float:
    """Half a unit of the last digit written: ``$1,834`` -> 0.5, ``$1,834.2`` -> 0.05.

    A scale word widens it accordingly (``$1.8 million`` -> 50,000), so a written amount matches
    the evidence number it is a rounding of, and nothing coarser.
    """
    m = _NUMBER_IN_TEXT.search(text)
    if m is None:
        return 0.0
    _, _, frac = m.group("num").partition(".")
    tol = 0.5 * 10 ** -len(frac)
    scale = m.group("scale")
    if scale:
        tol *= _SCALES[scale.lower()]
    return tol * 1.000001


def edit_distance(a: str, b: str, limit: int | None = None) -> int:
    """Levenshtein distance between ``a`` and ``b`` (stops early above ``limit``)."""
    if a == b:
        return 0
    if len(a) < len(b):
        a, b = b, a
    if limit is not None and len(a) - len(b) > limit:
        return limit + 1
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        best = i
        for j, cb in enumerate(b, 1):
            cost = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb))
            current.append(cost)
            best = min(best, cost)
        if limit is not None and best > limit:
            return limit + 1
        previous = current
    return previous[-1]


# --------------------------------------------------------------------------- the patterns

_NUM = r"(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
_SCALE = r"(?:thousand|million|billion|trillion|bn|mn|[kKmMbB])"
_NUMBER_IN_TEXT = re.compile(
    rf"(?P<neg>-)?(?P<num>{_NUM})(?:\s?(?P<scale>{_SCALE})\b)?", re.IGNORECASE
)
_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_CURRENCY_CODE = r"(?:USD|EUR|GBP|CAD|AUD|NZD|JPY|CHF|CNY|INR|SEK|NOK|DKK|US\$|A\$|C\$)"
_CURRENCY_WORD = r"(?:dollars?|euros?|pounds?|yen|USD|EUR|GBP|CAD|AUD|JPY|CHF)"

# Order matters: at one position the first alternative that matches wins, so the longer and
# more specific shapes (a URL, an e-mail address, a UUID, a date) come before the shapes they
# contain (an id, a code, a number).
_BUILTIN = {
    "url": r"(?:\b(?:https?|ftp)://|\bwww\.)[^\s<>\"'`\\]+",
    "email": r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b",
    "uuid": r"(?<![\w-])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![\w-])",
    "isodate": (
        r"(?<![\w-])\d{4}-\d{2}-\d{2}"
        r"(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?(?![\w-])"
    ),
    "mdy": rf"\b{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s+\d{{4}}\b)?",
    "dmy": rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\b\.?(?:,?\s+\d{{4}}\b)?",
    "money": (
        rf"(?:(?<![\w$€£¥])-?(?:{_CURRENCY_CODE}\s?|[$€£¥]\s?)-?{_NUM}(?:\s?{_SCALE}\b)?"
        rf"|(?<![\w.,]){_NUM}(?:\s?(?:thousand|million|billion|[kKmM]))?\s?{_CURRENCY_WORD}\b)"
    ),
    "percent": rf"(?<![\w.,]){_NUM}\s?(?:%|percent\b|per\s?cent\b)",
    "citation": r"\[(?:\d{1,3}|[A-Za-z][A-Za-z0-9_:.-]*\d[A-Za-z0-9_:.-]*)\](?!\()",
    "id": (
        r"(?<![\w-])[A-Za-z][A-Za-z0-9]*(?:[_-][A-Za-z][A-Za-z0-9]*)*"
        r"(?:[_-](?=[A-Za-z0-9]*\d)[A-Za-z0-9]{3,})+(?![\w]|-\w)"
    ),
    "code": r"(?<![\w-])(?=[A-Z0-9]*[A-Z])(?=[A-Z0-9]*\d)[A-Z0-9]{5,12}(?![\w]|-\w)",
}
_GROUP_KIND = {"isodate": "date", "mdy": "date", "dmy": "date"}

# Prefixes of PREFIX-number shapes that name standards and versions rather than records.
_NOT_ID_PREFIXES = frozenset(
    """
    sha utf iso covid gpt ipv win windows mp top x h base md crc aes rsa ecdsa ed es type
    version ver v python py llama claude gemini mistral phi qwen o text ada babbage davinci
    en fr de zh year fy q rev http tls ssl ieee ansi ecma cp latin ascii unicode
    """.split()  # noqa: SIM905
)
# Upper-case letter-digit shapes that are names of things, not references.
_NOT_CODE = re.compile(
    r"^(?:COVID\d+|FY\d{2,4}|Q[1-4]\d{2,4}|MP[34]|H264|H265|X86|ARM64|\d{3,4}P|\d+K)$"
)
_TRAILING_URL = ".,;:!?'\"*_"
_ID_SEP = re.compile(r"[_-]")


def _trim_url(text: str) -> str:
    """Drop what ends the sentence or the Markdown construct around a URL."""
    while text:
        last = text[-1]
        if (
            last in _TRAILING_URL
            or (last == ")" and text.count("(") < text.count(")"))
            or (last == "]" and text.count("[") < text.count("]"))
            or (last == "}" and text.count("{") < text.count("}"))
        ):
            text = text[:-1]
        else:
            break
    return text


_TRIGGER = re.compile(r"\d|@|://|www\.")
# What must follow a word start for any built-in shape to match there: a digit, "@", ":" or "-"
# before the next white space (ids, codes, numbers, dates, e-mail addresses, URLs, UUIDs,
# citation keys), "www.", or a month name or a currency code or sign followed by white space
# (the only shapes whose first digit can be in the next word: "March 5", "USD 12", "$ 12").
# Differential tests check that it changes no match (tests/eval/test_grounding_fastpath.py).
_GUARD = rf"(?=[^\s]*[\d@:-]|www\.|{_MONTH}\.?\s|-?(?:{_CURRENCY_CODE}|[$€£¥])\s)"


_MONTH_GROUP = re.compile(rf"({_MONTH})")
_DIGITS = re.compile(r"\d+")


def _date_from_words(text: str) -> str | None:
    month = day = year = None
    m = _MONTH_GROUP.search(text)
    if m is None:
        return None
    month = _MONTHS[m.group(1).lower()]
    rest = text[: m.start()] + " " + text[m.end() :]
    nums = _DIGITS.findall(rest)
    for n in nums:
        if len(n) == 4:
            year = int(n)
        elif day is None:
            day = int(n)
    if day is None:
        return None
    return date_key(year, month, day)


def _iso_key(text: str) -> str | None:
    return date_key(int(text[0:4]), int(text[5:7]), int(text[8:10]))


class Extractor:
    """Finds references in text: the built-in kinds and the agent role's own patterns.

    Args:
        patterns: extra shapes: a list of regular expressions (their matches get the kind
            ``pattern``), or a mapping of kind name -> regular expression. A match that is also
            an amount, date, percentage, URL or e-mail address is normalised as one.
        kinds: the built-in kinds to look for (default: all of :data:`KINDS`).

    Raises:
        ConfigError: a pattern is not a valid regular expression, or a kind is unknown.
    """

    def __init__(
        self,
        patterns: Sequence[str] | Mapping[str, str] = (),
        kinds: Iterable[str] | None = None,
    ) -> None:
        chosen = tuple(KINDS if kinds is None else kinds)
        unknown = [k for k in chosen if k not in KINDS]
        if unknown:
            raise ConfigError(
                f"unknown reference kind {unknown[0]!r}; choose from {', '.join(KINDS)}"
            )
        self.kinds = frozenset(chosen)
        groups = [
            f"(?P<{name}>{rx})"
            for name, rx in _BUILTIN.items()
            if _GROUP_KIND.get(name, name) in self.kinds
        ]
        # Every built-in shape starts where a word starts (or at a "["), so positions inside a
        # word are rejected by one look-behind instead of by each alternative in turn; and at a
        # word start, _GUARD (which every alternative implies) rejects ordinary words with one
        # cheap look-ahead instead of eleven alternatives: the same matches, about 1.6x faster.
        self._builtin = (
            re.compile(r"(?:(?<!\w)|(?=\[))" + _GUARD + "(?:" + "|".join(groups) + ")")
            if groups
            else None
        )
        named = (
            patterns.items()
            if isinstance(patterns, Mapping)
            else (("pattern", p) for p in patterns)
        )
        custom: list[tuple[str, re.Pattern[str]]] = []
        for kind, rx in named:
            if not isinstance(rx, str):
                raise ConfigError(f"reference pattern {rx!r} must be a string")
            try:
                custom.append((str(kind), re.compile(rx)))
            except re.error as exc:
                raise ConfigError(f"bad reference pattern {rx!r}: {exc}") from None
        self.custom: tuple[tuple[str, re.Pattern[str]], ...] = tuple(custom)

    def extract(self, text: str) -> list[Reference]:
        """Every reference in ``text``, in order; custom patterns win over built-ins they overlap."""
        refs: list[Reference] = []
        if self._builtin is not None and _TRIGGER.search(text):
            # Every built-in shape holds a digit, "@", "://" or "www.": a text without any
            # (a greeting, a question) is not scanned.
            for m in self._builtin.finditer(text):
                ref = self._builtin_ref(m)
                if ref is not None:
                    refs.append(ref)
        if not self.custom:
            return refs
        extra: list[Reference] = []
        for kind, rx in self.custom:
            for m in rx.finditer(text):
                if m.end() > m.start():
                    extra.append(self._custom_ref(kind, m.group(0), m.start(), m.end()))
        if not extra:
            return refs
        extra.sort(key=lambda r: (r.start, -r.end))
        kept: list[Reference] = []
        last_end = -1
        for r in extra:  # drop custom matches that overlap an earlier custom match
            if r.start >= last_end:
                kept.append(r)
                last_end = r.end
        out = [r for r in refs if not any(r.start < c.end and c.start < r.end for c in kept)]
        out.extend(kept)
        out.sort(key=lambda r: r.start)
        return out

    def _builtin_ref(self, m: re.Match[str]) -> Reference | None:
        group = m.lastgroup
        assert group is not None
        text = m.group(0)
        start = m.start()
        kind = _GROUP_KIND.get(group, group)
        key: str | None
        if kind == "url":
            text = _trim_url(text)
            if len(text) < 8:
                return None
            key = url_key(text)
        elif kind == "email" or kind == "uuid":
            key = text.lower()
        elif group == "isodate":
            key = _iso_key(text)
        elif kind == "date":
            key = _date_from_words(text)
        elif kind in _NUMERIC_KINDS:
            value = parse_number(text)
            key = None if value is None else number_key(abs(value))
        elif kind == "citation":
            key = text[1:-1].lower()
        elif kind == "id":
            prefix = _ID_SEP.split(text, maxsplit=1)[0].lower()
            if prefix in _NOT_ID_PREFIXES:
                return None
            key = text.lower()
        else:  # code
            if _NOT_CODE.match(text):
                return None
            key = text.lower()
        if key is None:
            return None
        return Reference(kind, text, start, start + len(text), key)

    def _custom_ref(self, kind: str, text: str, start: int, end: int) -> Reference:
        m = _FULL_GROUPED.fullmatch(text)
        if m is not None and m.lastgroup in _NORMALISED_GROUPS:
            ref = self._builtin_ref(m)
            if ref is not None:
                return Reference(ref.kind, text, start, end, ref.key)
        return Reference(kind, text, start, end, text.lower())


_FULL_GROUPED = re.compile("|".join(f"(?P<{n}>{rx})" for n, rx in _BUILTIN.items()))
_NORMALISED_GROUPS = frozenset(
    {"url", "email", "uuid", "isodate", "mdy", "dmy", "money", "percent"}
)


@lru_cache(maxsize=256)
def _cached_extractor(
    patterns: tuple[tuple[str, str], ...], named: bool, kinds: tuple[str, ...] | None
) -> Extractor:
    pats: Sequence[str] | Mapping[str, str] = dict(patterns) if named else [p for _, p in patterns]
    return Extractor(pats, kinds)


def get_extractor(
    patterns: Sequence[str] | Mapping[str, str] | None = None, kinds: Iterable[str] | None = None
) -> Extractor:
    """A shared, compiled :class:`Extractor` for these options (compiled once per process)."""
    if patterns is None:
        patterns = ()
    if isinstance(patterns, str):
        patterns = [patterns]
    named = isinstance(patterns, Mapping)
    items = (
        tuple(patterns.items())
        if isinstance(patterns, Mapping)
        else tuple(("pattern", p) for p in patterns)
    )
    return _cached_extractor(items, named, None if kinds is None else tuple(kinds))


# --------------------------------------------------------------------------- the evidence index

_RAW_NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")
_ISO_DATE = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")
_ISO_TEXT = re.compile(r"(?<!\d)\d{4}-\d{2}-\d{2}(?!\d)")
_WORD_DATE = re.compile(f"{_BUILTIN['mdy']}|{_BUILTIN['dmy']}")
_URL = re.compile(_BUILTIN["url"])
_EMAIL = re.compile(_BUILTIN["email"])
_NUMBER_WITH_SCALE = re.compile(
    rf"(?<![\w.]){_NUM}\s?(?:thousand|million|billion|trillion|bn|[kKmMbB])\b"
)
_STANDALONE = re.compile(rf"(?<![\w.,/:#-]){_NUM}(?![\w/:-]|[.,]\d)")
_MAX_ARITH = 200
_MAX_TRIPLE = 80
_MIN_OPERAND = 10.0


def _number_variants(key: str) -> tuple[str, ...]:
    """The ways a canonical number is commonly written: ``1834.2`` -> ``1834.2``, ``1834.20``,
    ``1,834.2``, ``1,834.20``."""
    neg = key.startswith("-")
    body = key[1:] if neg else key
    whole, _, frac = body.partition(".")
    wholes = {whole}
    if len(whole) > 3:
        wholes.add(f"{int(whole):,}")
    fracs = {frac} if frac else {"", "0", "00"}
    if len(frac) == 1:
        fracs.add(frac + "0")
    out = []
    for w in wholes:
        for f in fracs:
            out.append(f"{w}.{f}" if f else w)
    return tuple(out)


class _ItemIndex:
    """What one evidence item contains, computed lazily per family of kinds."""

    __slots__ = (
        "_dates",
        "_emails",
        "_lower",
        "_numbers",
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
            vals = {float(n.replace(",", "")) for n in _STANDALONE.findall(self.item.text)}
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
        self.items = tuple(_ItemIndex(i) for i in items)
        self.extractor = extractor or get_extractor()
        self._pool_cache: dict[int, _NumberPool] = {}
        self._shared: dict[str, tuple[str, list[int], str, list[int]]] = {}
        self._hits: dict[tuple[str, bool, int], _ItemIndex | None] = {}

    def _texts(self) -> tuple[str, list[int], str, list[int]]:
        """All evidence as one string (and lower-cased), with each item's start offset, so that
        a look-up is one C-speed ``find`` over the run rather than one per item."""
        joined = self._shared.get("joined")
        if joined is None:
            raw_parts = [e.item.text for e in self.items]
            low_parts = [e.lower for e in self.items]
            joined = self._shared["joined"] = (
                _SEP.join(raw_parts),
                _offsets(raw_parts),
                _SEP.join(low_parts),
                _offsets(low_parts),
            )
        return joined

    def _first(
        self, needle: str, index: int, *, lower: bool, number: bool = False, amount: bool = False
    ) -> _ItemIndex | None:
        """The first evidence item before ``index`` holding ``needle`` as a whole token (or a
        whole number), or ``None``."""
        key = (needle, lower, 2 if amount else 1 if number else 0)
        try:
            entry = self._hits[key]
        except KeyError:
            entry = self._hits[key] = self._scan(needle, lower, key[2])
        return entry if entry is not None and entry.item.index < index else None

    def _scan(self, needle: str, lower: bool, mode: int) -> _ItemIndex | None:
        """The evidence item holding the first whole-token occurrence of ``needle`` in the whole
        evidence (``mode``: 0 a token, 1 a number, 2 an amount). Cached per run by
        :meth:`_first`: both scorers, and every turn, look the same tokens up."""
        raw, raw_starts, low, low_starts = self._texts()
        hay, starts = (low, low_starts) if lower else (raw, raw_starts)
        check = _amount_at if mode == 2 else _number_at if mode == 1 else _token_at
        width = len(needle)
        pos = hay.find(needle)
        while pos >= 0:
            if check(hay, pos, pos + width):
                return self.items[bisect.bisect_right(starts, pos) - 1]
            pos = hay.find(needle, pos + 1)
        return None

    def with_extractor(self, extractor: Extractor) -> EvidenceIndex:
        """The same index (sharing everything computed so far) with another extractor for
        custom patterns and suggestions."""
        if extractor is self.extractor:
            return self
        other = EvidenceIndex.__new__(EvidenceIndex)
        other.items = self.items
        other.extractor = extractor
        other._pool_cache = self._pool_cache
        other._shared = self._shared
        other._hits = self._hits
        return other

    def before(self, index: int) -> Iterator[_ItemIndex]:
        """Index entries of the evidence produced before step position ``index``."""
        for entry in self.items:
            if entry.item.index >= index:
                break
            yield entry

    def truncated_before(self, index: int) -> bool:
        """True when evidence before ``index`` was truncated at its source."""
        return any(e.item.truncated for e in self.before(index))

    def find(self, ref: Reference, index: int, extra: Sequence[float] = ()) -> Match | None:
        """Where ``ref`` is found in the evidence before step position ``index``, or ``None``.
        ``extra``: amounts the same turn already derived, usable in arithmetic."""
        kind = ref.kind
        if kind in _NUMERIC_KINDS:
            return self._find_number(ref, index, extra)
        if kind == "date":
            return self.find_date(ref.key, index)
        if kind == "url":
            return self._find_url(ref.key, index, ref.text)
        if kind == "email":
            hit = self._first(ref.key, index, lower=True)
            return None if hit is None else Match(hit.item, ref.text)
        if kind == "citation":
            return self._find_citation(ref, index)
        return self._find_token(ref, index)

    # ---- ids, codes, uuids, custom patterns

    def _find_token(self, ref: Reference, index: int) -> Match | None:
        key = ref.key
        hit = self._first(key, index, lower=True)
        if hit is not None:
            return Match(hit.item, ref.text)
        if ref.kind not in KINDS:  # a custom pattern: also accept its own matches in evidence
            for pos, found in enumerate(self._custom_matches(index)):
                if key in found:
                    return Match(self.items[pos].item, ref.text)
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
        bracketed = f"[{key}]"
        for e in self.before(index):
            if bracketed in e.lower:
                return Match(e.item, ref.text)
        if not key.isdigit():
            hit = self._first(key, index, lower=True)
            if hit is not None:
                return Match(hit.item, key)
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
                return Match(hit.item, key)
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
                return Match(hit.item, key.rstrip("?"))
        wanted = frozenset(keys)
        for e in self.before(index):
            if wanted & e.times:
                return Match(e.item, key.rstrip("?"))
        return None

    def find_words(self, words: Sequence[str], index: int, text: str) -> Match | None:
        """Every one of ``words`` (lower-case) among the evidence tokens before ``index``,
        case-insensitively; they may come from different items. The match names the item that
        completed the set."""
        last: _ItemIndex | None = None
        for word in words:
            hit = self._first(word, index, lower=True)
            if hit is None:
                return None
            if last is None or hit.item.index > last.item.index:
                last = hit
        return None if last is None else Match(last.item, text)

    def find_value(
        self,
        value: float,
        index: int,
        *,
        percent: bool = False,
        tolerance: float = 0.0,
        arithmetic: bool = True,
        extra: Sequence[float] = (),
        strict: bool = True,
    ) -> Match | None:
        """A number as written in the evidence (any common formatting), else within
        ``tolerance`` of an evidence number or, with ``arithmetic``, of simple arithmetic on
        them and on ``extra`` (numbers the same turn already derived; see :class:`_NumberPool`).
        ``strict``: the number must stand alone in the evidence (an amount); otherwise digits
        inside an id or a date count too ("certificate 7504069", the year of a date)."""
        key = number_key(abs(value))
        variants = _number_variants(key)
        frac = _number_variants(number_key(abs(value) / 100)) if percent else None
        for v in variants:
            hit = self._first(v, index, lower=False, number=True, amount=strict)
            if hit is not None:
                return Match(hit.item, key)
        for v in frac or ():
            hit = self._first(v, index, lower=False, number=True, amount=strict)
            if hit is not None:
                return Match(hit.item, number_key(abs(value) / 100))
        if not arithmetic:
            return None
        return self.derive(abs(value), index, percent=percent, tolerance=tolerance, extra=extra)

    def _find_url(self, key: str, index: int, text: str = "") -> Match | None:
        bare = _SCHEME.sub("", text).lower()
        if bare:
            hit = self._first(bare, index, lower=True)  # as written, minus the scheme
            if hit is not None:
                return Match(hit.item, text)
        for e in self.before(index):
            urls = e.urls
            if key in urls:
                return Match(e.item, key)
            for u in urls:  # a page's own site, or a parent path, is grounded by a deeper link
                if u.startswith(key) and u[len(key) : len(key) + 1] in ("/", "?"):
                    return Match(e.item, u)
        return None

    # ---- amounts and percentages

    def _find_number(self, ref: Reference, index: int, extra: Sequence[float] = ()) -> Match | None:
        return self.find_value(
            float(ref.key),
            index,
            percent=ref.kind == "percent",
            tolerance=written_tolerance(ref.text),
            extra=extra,
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
        extra: Sequence[float] = (),
    ) -> Match | None:
        """Whether ``value`` is a number of the evidence before ``index``, or simple arithmetic
        on them (see :class:`_NumberPool`), within ``tolerance``."""
        pool = self.pool(index)
        if not pool.entries:
            return None
        if extra:
            pool = pool.with_extra(extra)
        how = pool.derive(value, tolerance=tolerance, percent=percent)
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
        if ref.kind == "date":
            candidates = _ISO_TEXT
        elif ref.kind in ("url", "email"):
            candidates = _URL if ref.kind == "url" else _EMAIL
        else:  # ids, codes, citations, custom shapes: words starting like the reference
            head = re.escape(ref.key.strip("[]")[:2])
            candidates = re.compile(rf"(?i)(?<![\w-]){head}[\w-]*")
        target = ref.key.strip("[]")
        has_digit = any(ch.isdigit() for ch in target)
        for e in self.before(index):
            for m in candidates.finditer(e.item.text):
                cand = m.group(0)
                if ref.kind == "url":
                    cand = _trim_url(cand)
                    key = url_key(cand)
                else:
                    key = cand.lower() if ref.kind != "date" else cand[:10]
                if abs(len(key) - len(target)) > limit or key == target:
                    continue
                if has_digit and not any(ch.isdigit() for ch in key):
                    continue  # "customer" is no suggestion for "cust-48231"
                d = edit_distance(target, key, limit)
                if d <= limit and (best is None or d < best[0]):
                    best = (d, cand, e.item)
        return None if best is None else (best[1], best[2])


_SEP = "\n\n"


def _offsets(parts: list[str]) -> list[int]:
    starts = []
    pos = 0
    for part in parts:
        starts.append(pos)
        pos += len(part) + len(_SEP)
    return starts


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
    change); ``k * a`` for a whole ``k`` from 2 to 10; ``a + b``, ``|a - b|`` of two numbers and
    ``a + b + c`` of three (when at most 80 are available) with every term at least 10 (a count
    added to a price is not a derivation); ``a / b`` with ``a`` at least 10 and ``b`` at least 2
    (a per-unit value). Arithmetic
    uses the 200 numbers nearest the turn, plus the numbers the turn itself already derived
    (so "$500 + $250 = $750, plus $129 is $879" is followed step by step).
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
        self._pair_sums: list[tuple[float, float, float]] | None = None

    def with_extra(self, extra: Sequence[float]) -> _NumberPool:
        """This pool plus ``extra`` numbers, attributed to the latest evidence item."""
        pool = _NumberPool.__new__(_NumberPool)
        pool.entries = self.entries
        pool.origin = dict(self.origin)
        last = len(self.entries) - 1
        for v in extra:
            pool.origin.setdefault(v, last)
        pool.values = sorted(set(self.values) | set(extra))
        pool._pair_sums = None
        return pool

    def _has(self, target: float, tol: float, vals: list[float] | None = None) -> float | None:
        vals = self.values if vals is None else vals
        i = bisect.bisect_left(vals, target - tol - 1e-9)
        if i < len(vals) and vals[i] <= target + tol + 1e-9:
            return vals[i]
        return None

    def derive(self, x: float, *, tolerance: float, percent: bool) -> tuple[str, int] | None:
        tol = tolerance
        direct = self._has(x, tol)
        if direct is not None:
            return f"={number_key(direct)}", self.origin[direct]
        vals = self.values
        if percent:
            frac = self._has(x / 100, tol / 100)
            if frac is not None:
                return f"={number_key(frac)}", self.origin[frac]
            for a in vals:
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
        for k in range(2, 11):
            a_ = self._has(x / k, tol / k)
            if a_ is not None:
                return f"{k} × {number_key(a_)}", self.origin[a_]
        # Terms of sums and differences (and the dividend of a ratio) are at least 10: adding a
        # count of seats to a price means nothing, and small terms would let anything through.
        big = [v for v in vals if abs(v) >= _MIN_OPERAND]
        for a in big:
            b = self._has(x - a, tol, big)
            if b is not None:
                return f"{number_key(a)} + {number_key(b)}", max(self.origin[a], self.origin[b])
            b = self._has(a - x, tol, big)
            if b is not None:
                return f"{number_key(a)} - {number_key(b)}", max(self.origin[a], self.origin[b])
            b = self._has(a / x, tol * abs(a) / (x * x)) if x else None
            if b is not None and abs(b) >= 2:  # a per-unit value: a total over a count
                return f"{number_key(a)} / {number_key(b)}", max(self.origin[a], self.origin[b])
        if len(big) <= _MAX_TRIPLE:
            sums = self._sums(big)
            keys = [s[0] for s in sums]
            for c in big:
                t = x - c
                i = bisect.bisect_left(keys, t - tol - 1e-9)
                if i < len(keys) and keys[i] <= t + tol + 1e-9:
                    _, a, b = sums[i]
                    pos = max(self.origin[a], self.origin[b], self.origin[c])
                    return f"{number_key(a)} + {number_key(b)} + {number_key(c)}", pos
        return None

    def _sums(self, vals: list[float]) -> list[tuple[float, float, float]]:
        if self._pair_sums is None:
            self._pair_sums = sorted(
                (vals[i] + vals[j], vals[i], vals[j])
                for i in range(len(vals))
                for j in range(i, len(vals))
            )
        return self._pair_sums
