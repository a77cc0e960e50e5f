"""Reference extraction and normalisation.

A *reference* is a token in an answer that points at something specific the agent must have
been given: a record id, a booking code, a UUID, an amount, a percentage, a date, a URL, an
e-mail address or a citation key. :class:`Extractor` finds them (one precompiled regular
expression for the built-in kinds, plus the agent role's own ``patterns``) and gives each a
normalised ``key`` so that ``$1,834.20`` and a JSON ``1834.2`` compare equal. Looking them up
in a run's evidence is :mod:`agentlens.eval._index`'s job. The rules, and the reasons for them,
are in ``docs/grounding.md``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from agentlens.errors import ConfigError

__all__ = [
    "KINDS",
    "Extractor",
    "Reference",
    "date_key",
    "distance_within",
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


def _reference_maker() -> Callable[[str, str, int, int, str], Reference]:
    """A constructor of :class:`Reference` about 3x faster than the generated ``__init__``.

    A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` (a look-up
    by name per field); this sets the five slots through their descriptors directly. The result
    is the same object (same class, fields, equality, hash, immutability): only the extraction
    loop, which makes one per reference found, uses it.
    """
    new = object.__new__
    slots = vars(Reference)
    set_kind, set_text, set_start, set_end, set_key = (
        slots[name].__set__ for name in ("kind", "text", "start", "end", "key")
    )

    def make(kind: str, text: str, start: int, end: int, key: str) -> Reference:
        ref = new(Reference)
        set_kind(ref, kind)
        set_text(ref, text)
        set_start(ref, start)
        set_end(ref, end)
        set_key(ref, key)
        return ref

    return make


_make_ref = _reference_maker()


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


@lru_cache(maxsize=4096)
def number_key(value: float) -> str:
    """The canonical text of a number: no thousands separators, no trailing zeros.

    ``1834.20`` -> ``1834.2``; ``12500.00`` -> ``12500``; ``-0.0`` -> ``0``.

    Cached: numbers that compare equal (``1``, ``1.0``, ``-0.0``, ``0``) have the same text.
    """
    if not math.isfinite(value):
        return repr(value)
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


@lru_cache(maxsize=4096)
def parse_number(text: str) -> float | None:
    """Parse a written number: ``1,834.20``, ``$12.5 million``, ``USD 12.5``, ``9k``, ``20%``.

    Currency symbols and codes, ``%``/``percent`` and surrounding words are ignored; a scale word
    (``thousand``, ``million``, ``billion``, ``k``, ``M``, ``bn``) multiplies. Returns ``None``
    when there is no number. Cached (the same tokens recur in a run's answer and evidence).
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


@lru_cache(maxsize=4096)
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


@lru_cache(maxsize=4096)
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


def distance_within(a: str, b: str, limit: int) -> int | None:
    """:func:`edit_distance` of ``a`` and ``b`` when it is at most ``limit``, else ``None``.

    The common prefix and suffix are dropped first (they change no Levenshtein distance: an
    optimal alignment matches them), so the table is only as wide as the part that differs:
    ``cust-48231`` and ``cust-48213`` cost a 3 by 3 table instead of 10 by 10. Suggestions
    (:meth:`EvidenceIndex.closest`) use only distances within their limit, which this gives
    exactly (tests/eval/test_index_fastpath.py holds it to :func:`edit_distance`)."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    j = 0
    n -= i
    while j < n and a[-1 - j] == b[-1 - j]:
        j += 1
    if i or j:
        a = a[i : len(a) - j]
        b = b[i : len(b) - j]
    d = edit_distance(a, b, limit)
    return d if d <= limit else None


# --------------------------------------------------------------------------- the patterns

_NUM = r"(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
# _NUM with its first character written before the alternatives: a digit, then the rest of a
# grouped (1,234.5) or a plain (1234.5) number; or a point, then decimals (.5). An expression
# that starts "[\d.]" then this, with its look-behind moved after that first character, finds
# the same numbers but lets the search skip to the next digit or point in C instead of trying
# the look-behind at every offset (tests/eval/test_facts_fastpath.py holds it to _NUM).
_NUM_TAIL = r"(?:(?<=\d)(?:\d{0,2}(?:,\d{3})+(?:\.\d+)?|\d*(?:\.\d+)?)|(?<=\.)\d+)"
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

# An id: a word of letters and digits, then "_" or "-" parts, the last ones (at least one) of 3
# or more characters with a digit, the earlier ones starting with a letter; the whole run of
# such parts, not followed by more of a word. Written as "[A-Za-z][A-Za-z0-9]*(?:[_-][A-Za-z]
# [A-Za-z0-9]*)*(?:[_-](?=[A-Za-z0-9]*\d)[A-Za-z0-9]{3,})+" it tries every split of the parts
# between the two groups, and every later end, before failing: quadratic in the number of parts
# ("a-b1c" repeated took 90 s for 100 KB). Each part is a whole run of letters and digits (a
# match can only end where the run of parts ends), so the parts after the first are classified
# as they come, possessively: L, starting with a letter but not qualifying for the last group;
# A, starting with a letter and qualifying; D, starting with a digit and qualifying. The
# original accepts the sequences {L,A}* {A,D}+, which is "(L* A)+" (ending with an A) or
# "(L* A)* L* D (A|D)*" (the first D, then only qualifying parts), matched here without any
# choice to undo (tests/eval/test_linear_extractors.py holds it to the original).
_ID_QUALIFIES = r"(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{3,}+"
_ID_L = rf"[_-](?=[A-Za-z])(?!{_ID_QUALIFIES})[A-Za-z0-9]++"
_ID_A = rf"[_-](?=[A-Za-z]){_ID_QUALIFIES}"
_ID_D = rf"[_-](?=\d){_ID_QUALIFIES}"
# The repeats of whole parts are atomic groups, "(?>(?:X)*)", and not the possessive "(?:X)*+"
# that means the same: Python 3.11.0 to 3.11.4 mis-match a possessive repeat of a part that
# holds a look-around (CPython gh-106052, fixed in 3.11.5), and found no id at all there
# (tests/eval/test_regex_portability.py). A possessive repeat of one character is matched
# right by every version, and is faster than the atomic group.
_ID_LS = rf"(?>(?:{_ID_L})*)"
_ID_QS = rf"(?>(?:[_-]{_ID_QUALIFIES})*)"
_ID = (
    r"(?<![\w-])[A-Za-z][A-Za-z0-9]*+"
    rf"(?>(?>(?:{_ID_LS}{_ID_A})+)(?:{_ID_LS}{_ID_D}{_ID_QS})?|{_ID_LS}{_ID_D}{_ID_QS})"
    r"(?![\w]|-\w)"
)

# Order matters: at one position the first alternative that matches wins, so the longer and
# more specific shapes (a URL, an e-mail address, a UUID, a date) come before the shapes they
# contain (an id, a code, a number).
_BUILTIN = {
    "url": r"(?:\b(?:https?|ftp)://|\bwww\.)[^\s<>\"'`\\]+",
    # The local part starts where "(?<![\w.+-])" lets it, and is taken possessively ("@" is not
    # in its class). From the start of a run of local-part characters it is read whole, once; but
    # a "%" is a local-part character that the look-behind does not exclude, so the position
    # after each "%" of a run may start one too, and reading the rest of the run from each of
    # them was quadratic ("5%" repeated). From there the local part is read for at most 64
    # characters (RFC 5321's limit): the one difference with the unbounded form is that a local
    # part over 64 characters that starts right after a "%" is not an e-mail address.
    "email": (
        r"(?:(?<![\w.+%-])[A-Za-z0-9._%+-]++|(?<=%)[A-Za-z0-9._%+-]{1,64}+)@"
        r"[A-Za-z0-9-]++(?:\.[A-Za-z0-9-]++)*\.[A-Za-z]{2,}\b"
    ),
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
    # "a key with a digit somewhere" as a look-ahead and one possessive run ("]" is not in the
    # class), not as "[...]*\d[...]*", which tries every digit of a long key as the split.
    "citation": (r"\[(?:\d{1,3}|[A-Za-z](?=[A-Za-z0-9_:.-]*?\d)[A-Za-z0-9_:.-]*+)\](?!\()"),
    "id": _ID,
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
# A decade with a modifier ("mid-80s", "pre-1990s") has the shape of an id: it is a fact for
# parametric_leakage, not a reference.
_DECADE_ID = re.compile(r"(?:mid|early|late|pre|post)-(?:1[89]|20)?\d0s")
# Upper-case letter-digit shapes that are names of things, not references.
_NOT_CODE = re.compile(
    r"^(?:COVID\d+|FY\d{2,4}|Q[1-4]\d{2,4}|MP[34]|H264|H265|X86|ARM64|\d{3,4}P|\d+K)$"
)
_TRAILING_URL = ".,;:!?'\"*_"
_ID_SEP = re.compile(r"[_-]")


_CLOSERS = {")": "(", "]": "[", "}": "{"}


def _trim_url(text: str) -> str:
    """Drop what ends the sentence or the Markdown construct around a URL: trailing punctuation,
    and a closing bracket that has no opening partner in the URL.

    The brackets are counted once and the counts kept as characters are dropped (only a closing
    bracket is ever dropped, and only from the end), so a URL followed by many ``]`` or ``.)``
    costs its length, not its length times the number dropped.
    """
    end = len(text)
    counts: dict[str, int] = {}
    while end:
        last = text[end - 1]
        if last in _TRAILING_URL:
            end -= 1
            continue
        opener = _CLOSERS.get(last)
        if opener is None:
            break
        if not counts:
            counts = {c: text.count(c, 0, end) for c in "()[]{}"}
        if counts[opener] < counts[last]:
            counts[last] -= 1
            end -= 1
        else:
            break
    return text[:end]


# Every built-in shape holds a digit, "@", "://" or "www.", except a UUID written only with the
# letters a-f: a text without any of these (a greeting, a question) is not scanned.
_TRIGGER = re.compile(r"\d|@|://|www\.|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-")
# _TRIGGER written to start with one class, [\d@:.-], a character every one of its matches holds
# (a digit, the "@", the ":" of "://", the "." of "www.", the first "-" of a UUID), the rest
# checked around it: a text holds a match of one exactly when it holds a match of the other,
# but the search skips to the next such character in C instead of trying the five alternatives
# at every offset until the first match (tests/eval/test_references_fastpath.py).
_TRIGGER_LED = re.compile(
    r"[\d@:.-](?:(?<=[\d@])|(?<=:)(?=//)|(?<=www\.)|(?<=[0-9a-fA-F]{8}-)(?=[0-9a-fA-F]{4}-))"
)
_TRIGGER_ASCII = re.compile(_TRIGGER_LED.pattern, re.ASCII)
"""_TRIGGER_LED for a text that is :func:`_ascii_alike`."""
_SEPARATORS = re.compile(r"[\x1c-\x1f]")
"""The four separators, as :func:`_ascii_alike` looks for them (four ``in`` tests, each a
``memchr``, cost a third of this expression's search, which tests every character)."""
# Where the scan of a text may start: every match holds a trigger (a match of _TRIGGER_LED)
# in its first word or, for a month or a currency before its number ("March 5", "USD 12",
# "$ 12"), in the word after it; so no match starts before the word that precedes the word of
# the text's first trigger. Matched on the text before that trigger, reversed: the rest of the
# trigger's word, the white space before it, and the word before that.
_BACK_TWO_WORDS = re.compile(r"\S*\s*\S*")


def _ascii_alike(text: str) -> bool:
    r"""An expression matches in ``text`` what it matches in ASCII mode (``re.ASCII``): the text
    is ASCII, where ``\w``, ``\d`` and ``\b`` mean the same in both modes and ignoring case
    pairs the same letters, and holds none of the four separators ``\x1c``-``\x1f``, the only
    ASCII characters that ``\s`` matches in Unicode mode (``str.isspace``) and not in ASCII
    mode."""
    return text.isascii() and not (
        "\x1c" in text or "\x1d" in text or "\x1e" in text or "\x1f" in text
    )


# What must follow a word start for any built-in shape to match there (every alternative of the
# expression implies it; tests/eval/test_grounding_fastpath.py checks that it changes no match):
# - before the next white space, a digit, "@", "://" or a "-" and a hex digit: a digit is in
#   every id, code, number, date and citation key (an id's last part must hold one), "@" in an
#   e-mail address, "://" in a URL, "-" and a hex digit in a UUID (which may hold no digit);
# - or "www.", or a month name or a currency code or sign followed by white space: the only
#   shapes whose first digit can be in the next word ("March 5", "USD 12", "$ 12").
# Plain words (most word starts) must fail it cheaply, so it is written for the engine:
# "[^\s\d@:-]*+" skips the characters that cannot start a trigger in one possessive step, and
# only a ":" or "-" that starts none ("Note:", "one-way") makes it look further, lazily; the
# second branch first checks the one character every "www.", month, code or sign starts with.
_TRIGGER_AT = r"(?:[\d@]|://|-[0-9a-fA-F])"
# Both scans are bounded (_GUARD_SPAN characters): where the word goes on further without a
# trigger in reach, the guard lets the position through (the alternatives decide there, as they
# would without the guard). Unbounded, it read the rest of a long word from each position not
# after a word character ("a." repeated, then "@": quadratic); bounded, it reads a fixed number
# of characters at most, and answers as before for every shorter word.
_GUARD_SPAN = 32
_GUARD = (
    rf"(?=[^\s\d@:-]{{0,{_GUARD_SPAN}}}+(?:{_TRIGGER_AT}|[:-]\S{{0,{_GUARD_SPAN}}}?{_TRIGGER_AT}"
    rf"|[:-]\S{{{_GUARD_SPAN}}}|[^\s\d@:-])"
    rf"|(?=[wJFMASONDUEGCI$€£¥-])(?:www\.|{_MONTH}\.?\s|-?(?:{_CURRENCY_CODE}|[$€£¥])\s))"
)
# The word-start test of the extractor's expression: "not after a word character, or at a [".
_HEAD = r"(?:(?<!\w)|(?=\[))"
# The same test as one look-behind, which the engine (trying it at every offset of the text)
# runs faster than the two-way alternation: "(?<!\w(?!\[))" fails exactly when the previous
# character is a word character and this one is not a "[".
_FAST_HEAD = r"(?<!\w(?!\[))"


_MONTH_GROUP = re.compile(rf"({_MONTH})")
_DIGITS = re.compile(r"\d+")


@lru_cache(maxsize=4096)
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
        self._alternatives = "(?:" + "|".join(groups) + ")" if groups else None
        # What extract() runs: _builtin with the cheaper form of the word-start test
        # (tests/eval/test_references_fastpath.py checks that both find the same matches).
        self._scan = (
            re.compile(_FAST_HEAD + _GUARD + self._alternatives) if self._alternatives else None
        )
        # The same expression in ASCII mode, for an ASCII text without the separators
        # \x1c-\x1f (_ascii_alike): there it matches exactly what _scan matches, with classes
        # tested by table instead of through Unicode's character database.
        self._scan_ascii = (
            re.compile(_FAST_HEAD + _GUARD + self._alternatives, re.ASCII)
            if self._alternatives
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

    @property
    def _builtin(self) -> re.Pattern[str] | None:
        """The built-in shapes with the plain word-start test: the definition that
        :attr:`_scan` speeds up, compiled only when the tests compare the two."""
        return (
            None if self._alternatives is None else re.compile(_HEAD + _GUARD + self._alternatives)
        )

    def extract(self, text: str) -> list[Reference]:
        """Every reference in ``text``, in order; custom patterns win over built-ins they overlap."""
        refs: list[Reference] = []
        # _ascii_alike(text), inlined
        alike = text.isascii() and not (
            "\x1c" in text or "\x1d" in text or "\x1e" in text or "\x1f" in text
        )
        scan = self._scan_ascii if alike else self._scan
        first = None if scan is None else (_TRIGGER_ASCII if alike else _TRIGGER_LED).search(text)
        if first is not None:
            assert scan is not None
            make = _make_ref
            # No match starts before the word before the first trigger's word (_BACK_TWO_WORDS):
            # the scan, which tries its expression at every offset, starts there.
            at = first.start()
            if at:
                at -= _BACK_TWO_WORDS.match(text[at - 1 :: -1]).end()  # type: ignore[union-attr]
            for m in scan.finditer(text, at):
                # The common kinds are normalised inline (a function call costs as much as
                # their whole key); the others go through the cached _builtin_key. Each
                # branch computes what _builtin_key computes for its group.
                group = m.lastgroup
                token = m.group()
                start, end = m.span()
                if group == "id":
                    key = token.lower()
                    # the prefix before the first "-" or "_", as _ID_SEP.split gives it
                    if key.partition("-")[0].partition("_")[0] in _NOT_ID_PREFIXES:
                        continue
                    if key[0] in "melp" and _DECADE_ID.fullmatch(key):
                        continue
                    refs.append(make("id", token, start, end, key))
                elif group == "code":
                    # Every _NOT_CODE shape starts with C, F, Q, M, H, X or A, or ends with P
                    # or K: other codes skip the expression.
                    if (token[0] in "CFQMHXA" or token[-1] in "PK") and _NOT_CODE.match(token):
                        continue
                    refs.append(make("code", token, start, end, token.lower()))
                elif group == "citation":
                    refs.append(make("citation", token, start, end, token[1:-1].lower()))
                elif group == "email" or group == "uuid":
                    refs.append(make(group, token, start, end, token.lower()))
                else:
                    assert group is not None
                    found = _builtin_key(group, token)
                    if found is not None:
                        kind, token, key = found
                        refs.append(make(kind, token, start, start + len(token), key))
        if not self.custom:
            return refs
        extra: list[tuple[int, int, str, str]] = []
        for kind, rx in self.custom:
            for m in rx.finditer(text):
                if m.end() > m.start():
                    extra.append((m.start(), -m.end(), kind, m.group()))
        if not extra:
            return refs
        extra.sort(key=_start_then_longest)
        kept: list[Reference] = []
        last_end = -1
        for start, neg_end, kind, token in extra:
            # drop custom matches that overlap an earlier custom match
            if start >= last_end:
                kept.append(self._custom_ref(kind, token, start, -neg_end))
                last_end = -neg_end
        if not refs:
            return kept
        # Both lists are sorted by start and free of overlaps within themselves, so one pass
        # drops the built-in references a kept custom match overlaps and merges the rest in
        # order of start (two non-empty spans that start at the same offset overlap, so the
        # order is total, as the stable sort of the plain version gave it).
        out: list[Reference] = []
        k = 0
        n_kept = len(kept)
        for r in refs:
            while k < n_kept and kept[k].end <= r.start:
                out.append(kept[k])
                k += 1
            if k < n_kept and kept[k].start < r.end:
                continue  # overlaps kept[k]
            out.append(r)
        out.extend(kept[k:])
        return out

    def _custom_ref(self, kind: str, text: str, start: int, end: int) -> Reference:
        normal = _custom_key(text)
        if normal is not None:
            return _make_ref(normal[0], text, start, end, normal[1])
        return _make_ref(kind, text, start, end, text.lower())


def _start_then_longest(match: tuple[int, int, str, str]) -> tuple[int, int]:
    return match[0], match[1]


@lru_cache(maxsize=4096)
def _builtin_key(group: str, text: str) -> tuple[str, str, str] | None:
    """``(kind, text, key)`` of a built-in match of ``group``, or ``None`` when it is not one.

    ``text`` is the match, less what ends a sentence after a URL. Cached: a run's answer repeats
    its ids, amounts and dates.
    """
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
        if prefix in _NOT_ID_PREFIXES or _DECADE_ID.fullmatch(text.lower()):
            return None
        key = text.lower()
    else:  # code
        if _NOT_CODE.match(text):
            return None
        key = text.lower()
    if key is None:
        return None
    return kind, text, key


@lru_cache(maxsize=4096)
def _custom_key(text: str) -> tuple[str, str] | None:
    """``(kind, key)`` when a custom pattern's match is wholly an amount, date, URL, ...."""
    m = _FULL_GROUPED.fullmatch(text)
    if m is None or m.lastgroup not in _NORMALISED_GROUPS:
        return None
    found = _builtin_key(m.lastgroup, text)
    if found is None:
        return None
    return found[0], found[2]


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
