"""Text normalisation for the offline judge: tokens, light stemming, numbers, negations.

Pure Python and deterministic. Nothing here knows about claims or verdicts.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import re
import unicodedata
from typing import NamedTuple

__all__ = [
    "NEGATIONS",
    "NEGATION_FORMS",
    "STOPWORDS",
    "Token",
    "char_ngrams",
    "claim_number",
    "count_word",
    "decade_values",
    "is_decade",
    "lemma",
    "negation_word",
    "number_values",
    "read_dates",
    "read_initialisms",
    "stem",
    "tokenize",
]

NEGATIONS = frozenset(
    [
        "no",
        "not",
        "never",
        "none",
        "nobody",
        "nothing",
        "neither",
        "nor",
        "cannot",
        "without",
        "n't",
        "isn't",
        "aren't",
        "wasn't",
        "weren't",
        "doesn't",
        "don't",
        "didn't",
        "hasn't",
        "haven't",
        "hadn't",
        "won't",
        "wouldn't",
        "can't",
        "couldn't",
        "shouldn't",
        "unable",
        "fail",
        "failed",
        "fails",
        "false",
    ]
)
"""Words that negate what follows them (the one list: the stop words exclude these)."""

_STOP_WORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "also",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "nor",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "s",
        "t",
        "can",
        "will",
        "just",
        "don",
        "should",
        "now",
        "ve",
        "ll",
        "re",
        "d",
        "m",
        "o",
        "y",
        "ma",
        "one's",
        "it's",
        "one",
        "also",
        "well",
        "may",
        "might",
        "must",
        "shall",
        "upon",
        "via",
        "per",
        "among",
        "amongst",
        "within",
        "without",
        "whose",
        "whether",
        "yet",
        "since",
        "though",
        "although",
        "however",
        "thus",
        "therefore",
        "hence",
        "currently",
        "later",
        "earlier",
        "still",
        "already",
        "ever",
        "many",
        "much",
        "several",
        "often",
        "around",
        "including",
        "include",
        "includes",
        "included",
        "like",
        "during",
        "whilst",
        "instead",
        "due",
        "prior",
        "became",
        "become",
        "becomes",
        "becoming",
        "began",
        "begin",
        "begins",
        "beginning",
        "time",
        "times",
        "year",
        "years",
    ]
) - (NEGATIONS - {"without"})
"""Function words left out of the content of a claim. Negations are not among them (the
negation check reads them), except "without", which is also a plain preposition."""


_MONTHS = {
    "jan": "january",
    "feb": "february",
    "mar": "march",
    "apr": "april",
    "jun": "june",
    "jul": "july",
    "aug": "august",
    "sep": "september",
    "sept": "september",
    "oct": "october",
    "nov": "november",
    "dec": "december",
}
_NUMBER_WORDS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
    "hundred": 100,
    "dozen": 12,
    "first": 1,
    "second": 2,
    "third": 3,
    "fourth": 4,
    "fifth": 5,
    "sixth": 6,
    "seventh": 7,
    "eighth": 8,
    "ninth": 9,
    "tenth": 10,
    "twice": 2,
    "once": 1,
    "single": 1,
    "double": 2,
    "triple": 3,
    "half": 0.5,
}
_SCALES = {
    "thousand": 1e3,
    "k": 1e3,
    "million": 1e6,
    "m": 1e6,
    "mn": 1e6,
    "billion": 1e9,
    "bn": 1e9,
    "b": 1e9,
    "trillion": 1e12,
    "percent": 1,
    "%": 1,
}

_TOKEN = re.compile(
    r"\d+(?:[.,:/]\d+)*(?:st|nd|rd|th|s)?|[A-Z](?:\.[A-Z])+\.?|[A-Za-zÀ-ÖØ-öø-ÿ]+(?:['’][A-Za-z]+)?|%",
)
_ACRONYMS = {"us": "usa", "usa": "usa", "uk": "uk", "eu": "eu", "un": "un"}
"""Dotted and bare upper-case acronyms with one spelling (``U.S.`` = ``US`` = ``USA``)."""
_NOT_NUMBERS = frozenset(["one", "first", "second", "once", "single"])
"""Number words too common to be a number (``one of``, ``at first``, ``a second``)."""
_ORDINAL = re.compile(r"(\d+)(?:st|nd|rd|th|s)$")


class Token(NamedTuple):
    """One word or number of a text."""

    stem: str
    """Lower-cased, lightly stemmed form (numbers normalised, ``n't`` → ``not``)."""
    start: int
    end: int
    capital: bool
    """Starts with a capital letter (a name, when not the first word of a sentence)."""
    number: bool
    """A number (digits or a number word)."""


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light, conservative stem: plural and common verb/adverb suffixes removed."""
    w = _fold(word.lower().replace("’", "'"))
    if w.endswith("n't"):
        return "not"
    if w.endswith("'s"):
        w = w[:-2]
    elif w.endswith("'"):
        w = w[:-1]
    if w in _MONTHS:
        return _MONTHS[w]
    n = len(w)
    if n <= 3:
        return w
    if w.endswith("ies") and n > 4:
        return w[:-3] + "y"
    if w.endswith(("sses", "xes", "ches", "shes")):
        return w[:-2]
    if w.endswith("s") and not w.endswith(("ss", "us", "is", "ous")):
        w = w[:-1]
        n -= 1
    if w.endswith("ing") and n > 5:
        return _undouble(w[:-3])
    if w.endswith("ied") and n > 4:
        return w[:-3] + "y"
    if w.endswith("ed") and n > 4:
        base = _undouble(w[:-2])
        return w[:-1] if base == "not" else base  # "noted" is no negation
    if w.endswith("ly") and n > 5:
        return w[:-2]
    if w.endswith("e") and n > 4:
        return w[:-1]
    return w


def _fold(w: str) -> str:
    """Drop diacritics (``aarón`` -> ``aaron``); plain ASCII is returned as is."""
    if w.isascii():
        return w
    return "".join(ch for ch in unicodedata.normalize("NFKD", w) if not unicodedata.combining(ch))


def _undouble(w: str) -> str:
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "lsz":
        return w[:-1]
    if w.endswith("e") and len(w) > 4:
        return w[:-1]
    return w


_IRREGULAR = {
    "ate": "eat",
    "eaten": "eat",
    "bore": "bear",
    "broke": "break",
    "broken": "break",
    "brought": "bring",
    "built": "build",
    "bought": "buy",
    "came": "come",
    "caught": "catch",
    "chose": "choose",
    "chosen": "choose",
    "drew": "draw",
    "drawn": "draw",
    "drove": "drive",
    "driven": "drive",
    "dying": "die",
    "fell": "fall",
    "fallen": "fall",
    "felt": "feel",
    "fought": "fight",
    "found": "find",
    "flew": "fly",
    "flown": "fly",
    "gave": "give",
    "given": "give",
    "went": "go",
    "gone": "go",
    "got": "get",
    "gotten": "get",
    "grew": "grow",
    "grown": "grow",
    "held": "hold",
    "hung": "hang",
    "kept": "keep",
    "knew": "know",
    "known": "know",
    "led": "lead",
    "left": "leave",
    "lost": "lose",
    "lying": "lie",
    "made": "make",
    "met": "meet",
    "paid": "pay",
    "ran": "run",
    "rode": "ride",
    "ridden": "ride",
    "rose": "rise",
    "risen": "rise",
    "said": "say",
    "sang": "sing",
    "sung": "sing",
    "saw": "see",
    "seen": "see",
    "sent": "send",
    "shot": "shoot",
    "sold": "sell",
    "spent": "spend",
    "spoke": "speak",
    "spoken": "speak",
    "stood": "stand",
    "stole": "steal",
    "stolen": "steal",
    "struck": "strike",
    "taught": "teach",
    "took": "take",
    "taken": "take",
    "thought": "think",
    "threw": "throw",
    "thrown": "throw",
    "told": "tell",
    "tying": "tie",
    "won": "win",
    "wore": "wear",
    "worn": "wear",
    "wrote": "write",
    "written": "write",
}
"""Irregular verb forms and their base (the stem of each is looked up, see :func:`lemma`)."""
_IRREGULAR_STEMS = {stem(form): stem(base) for form, base in _IRREGULAR.items()}


@functools.lru_cache(maxsize=65536)
def lemma(word_stem: str) -> str:
    """The stem of a word's base form, for matching inflections :func:`stem` leaves apart:
    ``died`` and ``dies`` (``die``), ``won`` and ``wins``, ``wrote`` and ``writes``."""
    if word_stem in _IRREGULAR_STEMS:
        return _IRREGULAR_STEMS[word_stem]
    if len(word_stem) == 4 and word_stem.endswith("ied"):
        return word_stem[:-1]  # died, lied, tied: stem() keeps words of four letters whole
    return word_stem


NEGATION_FORMS = NEGATIONS | {"nothing", "false", "unable", "cannot", "failing"}
"""Every negation word (``NEGATIONS`` holds their stems as :func:`stem` gives them)."""


def negation_word(word: str) -> bool:
    """True for a word that negates what follows it (``not``, ``cannot``, ``unable``,
    ``failed``, ``never``, ``n't`` forms...), read from the word itself, not its stem."""
    w = word.lower().replace("’", "'")
    return w in NEGATION_FORMS or w.endswith("n't")


_DECADE = re.compile(r"(?:\d{2})?\d0s")


def is_decade(raw: str) -> bool:
    """``1990s``, ``80s``: a decade (a span of ten years, or of ages), not one number."""
    return _DECADE.fullmatch(raw) is not None


def decade_values(raw: str) -> set[str]:
    """What a decade covers: itself and the ten numbers it spans (``1990s``: ``1990s`` and
    ``1990``..``1999``); a two-digit decade also spans the years of the 1900s (``80s``)."""
    base = int(raw[:-1])
    starts = [base] if base >= 100 else [base, 1900 + base]
    return {raw} | {str(start + d) for start in starts for d in range(10)}


_COUNT_WORDS = frozenset(w for w, v in _NUMBER_WORDS.items() if isinstance(v, int) and 2 <= v <= 12)
_COUNT_WORDS -= {"second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth"}
_COUNT_WORDS -= {"tenth", "twice", "double", "triple"}


_UNITS = frozenset(
    stem(w)
    for w in [
        *("seconds", "minutes", "hours", "days", "nights", "weeks", "months", "years"),
        *("decades", "centuries", "miles", "kilometres", "kilometers", "metres", "meters"),
        *("feet", "inches", "pounds", "kilograms", "tons", "dollars", "euros", "percent"),
        *("points", "goals", "runs", "votes", "seats"),
    ]
)
"""Plural nouns after which a count is a measurement (``three weeks``), not a count of things
the evidence may list."""


def count_word(word: str, following: str | None) -> bool:
    """True for a spelled-out count before a plural noun (``two films``, ``three seasons``):
    it counts things the evidence may list without the number. A measurement (``three
    weeks``, ``eight years``) is not one."""
    return (
        word.lower() in _COUNT_WORDS
        and following is not None
        and following.isalpha()
        and following[-1:].lower() == "s"
        and stem(following) not in _UNITS
    )


STOPWORDS: frozenset[str] = _STOP_WORDS | frozenset(stem(w) for w in _STOP_WORDS)
"""Function words (and their stems) that carry no checkable content."""


_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_DECIMAL = re.compile(r"\d+\.\d+")
_LEADING_ZEROS = re.compile(r"0+\d+")


@functools.lru_cache(maxsize=16384)
def _norm_number(raw: str) -> str:
    m = _ORDINAL.match(raw)
    if m:
        raw = m.group(1)
    if _THOUSANDS.fullmatch(raw):
        raw = raw.replace(",", "")
    if _DECIMAL.fullmatch(raw):
        raw = raw.rstrip("0").rstrip(".")
    if _LEADING_ZEROS.fullmatch(raw):
        raw = raw.lstrip("0") or "0"
    return raw


def tokenize(text: str) -> list[Token]:
    """The words and numbers of ``text`` with their spans."""
    out: list[Token] = []
    for m in _TOKEN.finditer(text):
        raw = m.group(0)
        if raw[0].isdigit():
            out.append(Token(_norm_number(raw), m.start(), m.end(), False, True))
        elif raw == "%":
            out.append(Token("percent", m.start(), m.end(), False, False))
        elif "." in raw or (raw.isupper() and raw.lower() in _ACRONYMS):
            low = raw.replace(".", "").lower()
            out.append(Token(_ACRONYMS.get(low, low), m.start(), m.end(), True, False))
        else:
            low = raw.lower()
            if low in _NUMBER_WORDS and low not in _NOT_NUMBERS:
                # a number word stands for its value: "three" == "3", "twelfth" == "12th"
                out.append(
                    Token(_fmt(_NUMBER_WORDS[low]), m.start(), m.end(), raw[0].isupper(), True)
                )
            else:
                out.append(Token(stem(raw), m.start(), m.end(), raw[0].isupper(), False))
    return out


def number_values(tokens: list[Token]) -> set[str]:
    """The numbers of a token list as normalised strings, with scaled forms.

    ``5.2 million`` yields ``5.2`` and ``5200000``; ``twelve`` yields ``12``; ``1,000`` → ``1000``.
    """
    values: set[str] = set()
    for i, tok in enumerate(tokens):
        if not tok.number:
            continue
        base = tok.stem
        values.add(base)
        if i + 1 < len(tokens) and tokens[i + 1].stem in _SCALES:
            with contextlib.suppress(ValueError):
                values.add(_fmt(float(base.replace(",", "")) * _SCALES[tokens[i + 1].stem]))
    return values


def claim_number(tokens: list[Token], i: int) -> set[str]:
    """What the number ``tokens[i]`` of a claim says, for matching against the evidence's
    :func:`number_values`: its scaled value when a scale word follows (``2 million`` is
    ``2000000``, not a bare ``2``), else its value."""
    base = tokens[i].stem
    if i + 1 < len(tokens):
        factor = _SCALES.get(tokens[i + 1].stem, 1)
        if factor != 1:
            with contextlib.suppress(ValueError):
                return {_fmt(float(base.replace(",", "")) * factor)}
    return {base}


def _fmt(value: float) -> str:
    if value == int(value):
        return str(int(value))
    return f"{value:g}"


def char_ngrams(text: str, n: int = 4) -> set[str]:
    """Character n-grams of the lower-cased text with spaces collapsed."""
    t = " " + re.sub(r"\s+", " ", text.lower()) + " "
    return {t[i : i + n] for i in range(max(0, len(t) - n + 1))}


_MONTH_NAMES = (
    *("january", "february", "march", "april", "may", "june", "july"),
    *("august", "september", "october", "november", "december"),
)
_NUMERIC_DATE = re.compile(
    r"(?<![\w.,:/–-])(?:"
    r"(?P<y>[12]\d{3})(?P<s1>[-/.])(?P<m>\d{1,2})(?P=s1)(?P<d>\d{1,2})"
    r"|(?P<a>\d{1,2})(?P<s2>[-/.])(?P<b>\d{1,2})(?P=s2)(?P<y2>[12]\d{3})"
    r"|(?P<y3>[12]\d{3})(?P<s3>[-–—/])(?P<yy>\d{2})"
    r")(?![\d]|[-/.–—]\d)"
)

_DATE_HINT = re.compile(r"\d[-/.–—]\d")
"""What every numeric date or range has: a quick test before the full pattern."""


def read_dates(text: str, toks: list[Token]) -> list[Token]:
    """``toks`` with numeric dates and short year ranges read as what they say.

    - ``2018-06-30`` (or ``2018/06/30``) is the year 2018, the month June (its name, as the
      other text may spell it) and the day 30;
    - ``30/06/2018`` is the year 2018, and the month's name when the order is plain (one of the
      first two numbers is over 12); otherwise its first two numbers stay one unreadable number;
    - ``2018–19`` (or ``2018-19``, ``2018/19``) is the range from 2018 to 2019.

    Anything else (``10-7``, ``5.2``, ``2018-1995``, a month or day out of range) is left as is.
    """
    if _DATE_HINT.search(text) is None:
        return toks
    spans: list[tuple[int, int, list[Token]]] = []
    for m in _NUMERIC_DATE.finditer(text):
        new = _date_tokens(m)
        if new is not None:
            spans.append((m.start(), m.end(), new))
    if not spans:
        return toks
    out: list[Token] = []
    k = 0
    for start, end, new in spans:
        while k < len(toks) and toks[k].start < start:
            out.append(toks[k])
            k += 1
        while k < len(toks) and toks[k].start < end:
            k += 1  # the tokens the date is read in place of
        out.extend(new)
    out.extend(toks[k:])
    return out


def _date_tokens(m: re.Match[str]) -> list[Token] | None:
    def num(group: str, value: int | None = None) -> Token:
        return Token(
            str(int(m.group(group)) if value is None else value),
            m.start(group),
            m.end(group),
            False,
            True,
        )

    def month(group: str) -> Token:
        name = _MONTH_NAMES[int(m.group(group)) - 1]
        return Token(name, m.start(group), m.end(group), False, False)

    if m.group("y") is not None:
        mm, dd = int(m.group("m")), int(m.group("d"))
        if not (1 <= mm <= 12 and 1 <= dd <= 31):
            return None
        return [num("y"), month("m"), num("d")]
    if m.group("y2") is not None:
        a, b = int(m.group("a")), int(m.group("b"))
        if not (1 <= a <= 31 and 1 <= b <= 31) or (a > 12 and b > 12):
            return None
        if a > 12:
            first = [num("a"), month("b")]
        elif b > 12:
            first = [month("a"), num("b")]
        else:
            raw = f"{a}/{b}"  # day and month in an unknown order: one number, found as written
            first = [Token(raw, m.start("a"), m.end("b"), False, True)]
        return [*first, num("y2")]
    year, yy = int(m.group("y3")), int(m.group("yy"))
    if yy <= year % 100:
        return None  # 1990-85 is no range of years (a score, a code)
    return [num("y3"), num("yy", year - year % 100 + yy)]


_INITIALISMS = {
    ("united", "states", "of", "america"): "usa",
    ("united", "states"): "usa",
    ("united", "kingdom"): "uk",
    ("united", "nations"): "un",
    ("european", "union"): "eu",
}
"""Names written out and the acronym they are also written as (``United States`` = ``U.S.`` =
``US`` = ``USA``; the acronyms' one spelling is in ``_ACRONYMS``)."""
_INITIAL_WORDS = frozenset(words[0] for words in _INITIALISMS)


def read_initialisms(text: str, toks: list[Token]) -> list[Token]:
    """``toks`` with a name written out in full read as its acronym: ``United States`` (as
    ``U.S.``), ``United Kingdom``, ``United Nations``, ``European Union``. The name must start
    with a capital; its words stay apart otherwise (``united`` alone is a plain word)."""
    lower = text.lower()
    if not any(word + " " in lower for word in _INITIAL_WORDS):
        return toks
    out: list[Token] = []
    i = 0
    n = len(toks)
    while i < n:
        tok = toks[i]
        if tok.capital and text[tok.start : tok.end].lower() in _INITIAL_WORDS:
            for words, acronym in _INITIALISMS.items():
                j = i + len(words)
                if (
                    j <= n
                    and all(
                        text[t.start : t.end].lower() == w
                        for t, w in zip(toks[i:j], words, strict=True)
                    )
                    and all(text[a.end : b.start] == " " for a, b in itertools.pairwise(toks[i:j]))
                ):
                    out.append(Token(acronym, tok.start, toks[j - 1].end, True, False))
                    i = j
                    break
            else:
                out.append(tok)
                i += 1
            continue
        out.append(tok)
        i += 1
    return out
