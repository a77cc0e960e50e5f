"""Specific facts in an answer, for the deterministic half of ``parametric_leakage``.

A *fact* here is something an answer can only state correctly by having been told it: a
number (with its unit words), an amount, a percentage, a date, a year, a time of day, or the
name of a person, organisation or place. :func:`extract_facts` finds them; what does not count,
and why, is listed in ``docs/grounding.md`` and encoded below:

- small counts (whole numbers 0 to 10 without a scale word or currency), ordinals (``3rd``),
  list numbering (``1.`` at the start of a line), and numbers labelled ``Step 3``/``Option 2``;
- numbers inside references that ``no_fabricated_refs`` owns (ids, codes, UUIDs, URLs,
  e-mail addresses, citation keys, custom patterns): one token, one failure mode;
- capitalised words that name nothing: a curated list of common English words, greetings and
  sign-offs, titles, weekdays and months, and a few rules (a single sentence-initial word that
  the answer also uses in lower case or that ends like an adverb or a gerund; a ``Label:``; a
  Markdown heading).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields
from functools import lru_cache
from operator import attrgetter

from agentlens.eval._references import (
    _NUM_TAIL,
    _NUMBER_IN_TEXT,
    _SCALES,
    Reference,
    number_key,
    parse_number,
)

__all__ = ["COMMON_WORDS", "FACT_KINDS", "Fact", "extract_facts", "fact_tolerance", "name_tokens"]

FACT_KINDS = frozenset(
    {"number", "money", "percent", "year", "decade", "last_digits", "date", "time", "name"}
)
"""The kinds of fact :func:`extract_facts` finds."""


@dataclass(frozen=True, slots=True)
class Fact:
    """One specific fact stated in an answer."""

    kind: str
    """``number``, ``money``, ``percent``, ``year``, ``decade``, ``last_digits``, ``date``,
    ``time`` or ``name``."""
    text: str
    """The exact text as written."""
    start: int
    """Offset of the first character in the answer text."""
    end: int
    """Offset after the last character."""
    key: str
    """Normalised form: a canonical number, ``YYYY-MM-DD``, ``HH:MM``, a decade (``1990s``, or
    ``90s`` without its century), the digits as written (``last_digits``: ``0421``), or
    lower-case name tokens."""
    value: float | None = None
    """The numeric value, for numeric kinds."""
    tolerance: float = 0.0
    """How far from ``value`` an evidence number (or derivation) may be: rounding as written."""


# --------------------------------------------------------------------------- common words

COMMON_WORDS: frozenset[str] = frozenset(
    """
    a about above absolutely according account accounts across action actions actually add
    added additional additionally address after afternoon again against agent agents ago all
    allow allowed almost alone along already also alternatively although always am amount an
    and another answer any anyone anything anyway apologies apologize apologise app
    application applied apply appreciate approximately april are area arrival arrive arrives
    as ask assist assistance at august available away back balance bank based basic be
    because been before being below best better between bill billing book booked booking
    both brief business but by call can cancel cancellation cancelled canceled cannot card
    cards case certainly change changes changed charge charged charges check checked
    checkout choose city class click close code come company complete completed confirm
    confirmation confirmed congratulations consider contact continue cost costs could
    country credit current currently customer customers daily data date day days dear
    december definitely delay delayed department departure details did different direct
    discount do does done dont down due during each early east economy either else email end
    enjoy ensure enter error even evening every everything example excellent except extra
    fantastic fare feb february fee fees feel few file final finally find fine first flight
    flights following follow for friday from full further general get gift give glad go good
    goodbye got great greetings guest guide had happy has have having he hello help her here
    hey hi high his home hope how however hour hours i if important in included including
    information instead insurance into is issue it item items its jan january july june just
    keep key kind kindly know last later latest learn less let like likely limited list
    local long look looking low made main make manager many march may maybe me member
    membership message method methods might mine minutes monday month months more morning
    most mr mrs ms much must my name names need needed new next nice night no none nonstop
    normal north not note nothing notice november now number numbers october of off offer
    office ok okay old on once one only open option optional options or order orders other
    our out over overall page paid part passenger passengers past pay payment payments
    pending per perfect perhaps phone place plan please plus policy possible premium
    previous price prices priority pro process processed product products provide provided
    purchase question questions quick quite rate rather re ready really reason reasons
    receipt recommend record refund refunds regarding regards regular related remaining
    remember report request requested required reservation reservations reserved resolve
    response result results return review right round same saturday save saved schedule
    scheduled search seat seats second section see select selected september service
    services set several shall she should show since sincerely single so some someone
    something soon sorry south special standard start started status step still stop subject
    submit success successful successfully such summary sunday support sure system take team
    terms than thank thanks that the their them then there therefore these they thing things
    third this those though through thursday ticket tickets time times tip tips to today
    together tomorrow too total travel trip true try tuesday two type under understand
    unfortunately unless until up update updated upgrade upon us use used user using usually
    valid value various very via view visit wait want warm was way we website wednesday week
    weekend weeks welcome well were west what whatever when where whether which while who
    whole why will wish with within without wonderful work would yes yesterday yet you your
    yours yourself ok faq note notes tip warning info summary overview step steps total
    subtotal tax taxes cabin baggage bag bags checked carry fare fares seat layover stopover
    connection connecting outbound inbound return departure arrival depart departing
    arriving origin destination itinerary passenger adult child infant senior gold silver
    bronze platinum member regular economy business first premium basic class upgrade
    downgrade certificate voucher gift credit debit visa mastercard card transfer human
    agent representative assistance assistant dr prof sir madam miss mx mrs mr ms captain
    officer
        safe sold sound enjoy hope alright awesome cheers noted understood outgoing nearby major
        sales sale invoice invoices revenue revenues profit profits income cost growth market
    markets report reports analysis results result data figure figures chart table tables
    sum average mean median minimum maximum rate rates ratio share shares stock stocks price
    budget budgets expense expenses forecast quarter quarters annual monthly weekly yearly
    customers client clients vendor vendors supplier suppliers partner partners employee
    employees staff people person user users owner owners buyer buyers seller sellers
    product service plan plans project projects task tasks ticket issue issues bug bugs
    feature features release releases version versions update updates fix fixes change
    changes event events meeting meetings call calls email emails letter letters document
    documents documentation file files folder folders link links source sources reference
    references record records entry entries field fields form forms request requests reply
    replies answer answers question questions comment comments review reviews rating ratings
    score scores level levels tier tiers group groups category categories type types kind
    status state stage stages phase phases step process processes policy policies rule rules
    law laws contract contracts agreement agreements term terms condition conditions
    price cost fee charge charges discount discounts offer offers deal deals coupon coupons
    order purchase purchases shipment shipments delivery deliveries shipping return returns
    refund exchange exchanges warranty warranties claim claims case cases account
    balance credit debit card cash check payment transfer deposit withdrawal loan loans
    interest tax taxes total subtotal amount amounts number numbers count counts quantity
    size weight height width length distance speed time times hour minute second day week
    month year years today tomorrow yesterday morning afternoon evening night noon midnight
    north south east west northern southern eastern western central left right top bottom
    front back inside outside upper lower new old young big small large little long short
    high low good bad better worse best worst great poor rich full empty open closed free
    busy ready early late fast slow easy hard simple complex clear sure true false real
    main major minor key important necessary possible impossible likely unlikely certain
    general specific public private personal local national international global online
    offline digital mobile social financial economic political legal medical technical
    based according regarding including following given given overall however therefore
    meanwhile otherwise furthermore moreover nevertheless instead besides also still yet
    here there now then today once twice again always never often sometimes usually rarely
    first second third last next previous final initial original current recent future
    yes no maybe okay ok sure thanks thank please sorry welcome hello hi hey goodbye bye
    rose fell increased decreased grew dropped rising falling went came made took gave got
    said says told asks asked found find shows showed shown seems seemed looks looked
    approved approve rejected reject accepted accept declined decline confirmed pending
    """.split()  # noqa: SIM905
)
"""Words that, capitalised, still name nothing: never a fact on their own. Curated, not
complete: the rules in :func:`_is_name` catch much of the rest."""

_SENTENCE_OPENERS = frozenset(
    """
    access adapt add adjust aggregate analyse analyze append apply archive assess assign
    assume attach attempt audit avoid await begin browse build calculate capture categorize
    check choose clarify classify clean clear clone collect combine commit compare compile
    compose compute conclude conduct configure connect construct convert copy correct count
    create crop debug decide decode deduce define delete deploy derive describe design
    detect determine develop disable discuss display divide document download draft drop
    edit enable encode establish estimate evaluate examine execute expand explain explore
    export extend extract fetch filter focus format formulate gather generate grab group
    handle highlight identify implement import improve include initialize initialise input
    insert inspect install integrate interpret investigate isolate iterate join jump launch
    lint list load locate log map measure merge migrate modify monitor move navigate
    normalize normalise notify observe obtain organize organise outline parse paste perform
    pick plot prepare present preview print proceed produce propose prune push
    query recalculate recheck reattempt recompute reconcile record redo refactor refer
    refine reformat refresh reload remove rename render reorder repeat rephrase replace
    rerun research reset resize restart restore restructure retrieve retry reuse revert
    revise revisit rewrite run sample scan scrape scroll seek segregate send separate setup
    simplify skip solve sort specify split store structure study subtract suggest
    summarise summarize suppose swap sync tag tally test trace track train transform
    translate trim tune type uncomment undo uninstall unpack unzip upgrade upload utilize
    validate verify visualize watch wrap write
    added adjusted built changed cleaned configured converted copied created deleted
    deployed documented dropped extracted fixed implemented improved installed kept merged
    migrated modified moved ported ran refactored removed renamed reorganized replaced
    reran rewrote simplified split tested tidied updated verified wrote
    accordingly additionally alternatively among amongst assuming besides consequently
    considering despite essentially finally firstly further hence hopefully ideally
    importantly indeed interestingly lastly likewise nonetheless notably presumably prior
    regardless secondly similarly specifically subsequently throughout thus ultimately
    unlike upon whereas
    accurate correct proper relevant multiple unique primary subsequent former persistent
    manual manually historical
    """.split()  # noqa: SIM905
)
"""Words that, opening a sentence, begin no name: the imperatives of a plan ("1. Collect
the figures", "Verify the totals"), the past tenses of a change summary ("- Deleted Python
test files", "- Kept the Justfile"), connectives and a few adjectives ("Thus", "Despite",
"Former CEO of Avon"). Only at a sentence start: a single such word there is no name, and a
name it opens is read without it ("Locate Emily" names Emily). Curated from real runs."""

_ACRONYMS = frozenset(
    """
    ok id ids faq api url urls usd eur gbp am pm est edt pst pdt cst cdt mst mdt utc gmt bst
    cet pdf csv json xml html http https sms tv ai llm ps nb fyi asap eta etc tba tbd vip
    n/a na ceo cto cfo hr it qa ui ux os pc dm pin otp kyc faq diy rsvp aka vs hq nda ip ssn
    dob important note warning yes no ok please thanks total summary
    jsonl yaml yml toml ini sql css js ts tsx jsx txt png jpg jpeg gif svg zip tar gz cli sdk
    gpu cpu ram ssd usb ssh tcp udp dns tls ssl jwt sso rest grpc ocr bfs dfs xpath regex
    dict int str bool env tmp dir src lib bin exe uri uuid ascii gui ide vm ci pr readme todo
    """.split()  # noqa: SIM905
)
"""All-caps words that name nothing: common acronyms, and the file formats and programming
terms of a coding agent's answers (`JSONL`, `SQL`, `REST`)."""
_NON_NAME_SUFFIXES = (
    "ly",
    "ing",
    "ed",
    "ness",
    "ment",
    "tion",
    "sion",
    "able",
    "ible",
    "ful",
    "less",
    "ous",
    "ive",
    "ize",
    "ise",
    "ity",
    "ies",
    "est",
    "ally",
)

# --------------------------------------------------------------------------- patterns

_SCALE_WORDS = r"(?:thousand|million|billion|trillion|bn|[kKmMbB])"
# A number not preceded by a letter, digit, separator or ``/:#-``, written as a look-behind
# over its first character and the one before (as _NAME does, so that the search skips to the
# next digit in C); with a scale word, or an ordinal suffix (dropped), and not followed by more
# of a word, a path or a number.
_NUMBER = re.compile(
    rf"[\d.](?<![\w.,/:#-].)(?P<num_tail>{_NUM_TAIL})(?:\s?(?P<scale>{_SCALE_WORDS})\b)?"
    r"(?P<ordinal>st|nd|rd|th)?(?![\w/-]|[.,:]\d)"
)
_TIME = re.compile(
    r"(?=\d)(?<![\w:.])(?P<h>[01]?\d|2[0-3]):(?P<m>[0-5]\d)(?::[0-5]\d)?(?:\s?(?P<ap>[AaPp]\.?[Mm]\.?)(?!\w))?"
    r"|(?=\d)(?<![\w:.])(?P<h2>1[0-2]|0?[1-9])\s?(?P<ap2>[AaPp]\.?[Mm]\.?)(?!\w)"
)
_HOUR_END = re.compile(r"\d(?=:[0-5]\d|\s?[AaPp]\.?[Mm])")
"""The last digit of the hour of any time: :func:`_times` tries _TIME only next to one."""
# A hedge ends the text before a number; the hedges' last characters are _HEDGE_LAST.
_HEDGE = re.compile(
    r"(?:about|around|approximately|approx\.?|roughly|nearly|almost|over|under|some|circa|"
    r"ca\.|more than|less than|fewer than|up to|at least|at most|close to|~|≈)\s*[$€£¥]?\s*$",
    re.IGNORECASE,
)
# A label ends the text before a number; the labels' last characters are _LABEL_LAST.
_LABELLED_NUMBER = re.compile(
    r"(?<![A-Za-z])(?:step|option|item|part|chapter|section|page|no\.|number|#|rank|level|tier|"
    r"round|phase|stage|line|row|column|figure|fig\.|table|version|v)\s*$",
    re.IGNORECASE,
)
# A word of a name is a capital, then one of: a full stop (an initial, before another word); a
# word's lower-case letters (with an O'/D' prefix, a McX part, -Xxx parts); 1 to 5 capitals
# (an acronym). The first capital is written once, before the alternatives, so that it leads
# the expression: see _NAME.
# A name may end in a possessive ("Kipchoge's time", "IBM’s"): the name stops before it.
_POSSESSIVE = r"['’]s(?![\w'’-])"
_NAME_WORD_TAIL = (
    r"(?:\.(?=[ \t]+[A-Z])"
    r"|(?:[a-z]*['’][A-Z])?[a-z]+(?:[A-Z][a-z]+)?(?:-[A-Z][a-z]+)*"
    rf"|[A-Z]{{1,5}}(?:(?![\w'’])|(?={_POSSESSIVE})))"
)
_NAME_WORD = rf"[A-Z]{_NAME_WORD_TAIL}"
_CONNECTOR = r"(?:of|de|da|del|della|van|von|der|den|la|le|du|di|&)"
# Words of a name not preceded by a letter, an apostrophe or a hyphen: ``(?<![\w'’-])`` before
# the first word, written here as a look-behind over the first capital and the character
# before it. The matches are the same; but an expression that starts with a character class
# lets the search skip to the next capital in C, where one that starts with a look-around is
# tried at every position (about 1.3x faster on answers).
_NAME = re.compile(
    rf"[A-Z](?<![\w'’-].){_NAME_WORD_TAIL}"
    rf"(?:[ \t]+(?:{_CONNECTOR}[ \t]+)?{_NAME_WORD})*(?:(?![\w'’-])|(?={_POSSESSIVE}))"
)
_WORDS = re.compile(r"[^\W_]+")
_DIGIT = re.compile(r"\d")
_HEADING = re.compile(r"[ \t>]*#")
_CURRENCY_SIGNS = frozenset("$€£¥")
_HEDGE_LAST = frozenset(".adenortxy~≈")
"""The last characters of the hedges in _HEDGE (and their upper case)."""
_LABEL_LAST = frozenset("#.deklmnprtvw")
"""The last characters of the labels in _LABELLED_NUMBER (and their upper case)."""
_NAME_WORDS = re.compile(_NAME_WORD)
_LEAD_IN = " \t*_#>\"'“‘([`"


def name_tokens(text: str) -> list[str]:
    """The lower-case word tokens of a name, as the evidence is tokenised (``O'Brien`` ->
    ``o``, ``brien``)."""
    return _WORDS.findall(text.lower())


def extract_facts(text: str, refs: Sequence[Reference], *, tolerances: bool = True) -> list[Fact]:
    """The specific facts in ``text``. ``refs`` are the references already found in it (by the
    same extractor ``no_fabricated_refs`` uses): amounts, percentages and dates among them become
    facts; the spans of the others are not searched for numbers or names again.

    ``tolerances=False`` leaves every fact's ``tolerance`` at ``0.0``, for a caller that needs
    it only now and then (``parametric_leakage`` reads it only for a number that the evidence
    does not hold as written) and asks :func:`fact_tolerance` for it then."""
    facts: list[Fact] = []
    # The spans taken by references, then times: a match overlapping one is not searched again.
    starts: list[int] = []
    ends: list[int] = []
    ordered = True  # sorted, disjoint and not empty, as the extractor returns them
    for r in refs:
        start, end, kind = r.start, r.end, r.kind
        if start >= end or (ends and start < ends[-1]):
            ordered = False
        starts.append(start)
        ends.append(end)
        if kind == "money" or kind == "percent":
            tolerance = _tolerance(r.text, text, start) if tolerances else 0.0
            facts.append(_fact(kind, r.text, start, end, r.key, float(r.key), tolerance))
        elif kind == "date":
            facts.append(_fact("date", r.text, start, end, r.key, None, 0.0))
    if not ordered:
        starts, ends, ordered = _spans_index(starts, ends)

    lowered = text.lower()
    # Every time and every number has a digit: when each digit of the text is inside a
    # reference, each of them would overlap one and be dropped, so neither is searched for.
    loose_digits = not ordered or _digit_outside(text, starts, ends)
    # A time has a ":" or an "am"/"pm" (a.m., PM...), which ``in`` finds faster than a search.
    maybe_time = loose_digits and (
        ":" in text or "am" in lowered or "pm" in lowered or "a.m" in lowered or "p.m" in lowered
    )
    if maybe_time:
        times: list[tuple[int, int]] = []
        for m in _times(text):
            start, end = m.span()
            if _overlaps(starts, ends, ordered, start, end):
                continue
            hour = int(m.group("h") or m.group("h2"))
            minute = int(m.group("m") or 0)
            ap = (m.group("ap") or m.group("ap2") or "").lower().replace(".", "")
            if ap == "pm" and hour < 12:
                hour += 12
            elif ap == "am" and hour == 12:
                hour = 0
            key = f"{hour:02d}:{minute:02d}" + ("" if ap or hour >= 13 or hour == 0 else "?")
            raw = m.group(0)
            if raw.endswith(".") and raw.count(".") == 1:
                raw = raw[:-1]  # "7:30 PM." ends a sentence
            facts.append(_fact("time", raw, start, start + len(raw), key, None, 0.0))
            # Times never overlap each other (one finditer): the index can wait for the last.
            times.append((start, end))
        if times:
            starts = starts + [s for s, _ in times]
            ends = ends + [e for _, e in times]
            starts, ends, ordered = _spans_index(starts, ends)

    if loose_digits and _MAYBE_DECADE.search(text):
        decades = _decades(text, lowered, starts, ends, ordered)
        if decades:
            facts.extend(decades)
            starts = starts + [f.start for f in decades]
            ends = ends + [f.end for f in decades]
            starts, ends, ordered = _spans_index(starts, ends)

    for m in _NUMBER.finditer(text) if loose_digits else ():
        start, end = m.span()
        if m.group("ordinal") or _overlaps(starts, ends, ordered, start, end):
            continue
        raw = m.group(0)
        scale = m.group("scale")
        # The match is the number, then at most a scale word: what ``parse_number(raw)`` reads
        # back (there is no minus sign, since _NUMBER never starts at one). Without a scale word
        # that is the digits alone, so they are not parsed again.
        digits = text[start : m.end("num_tail")].replace(",", "")
        if not scale and raw.isdigit() and _last_digits_claim(lowered, start, raw):
            facts.append(_fact("last_digits", raw, start, end, raw, None, 0.0))
            continue
        if scale:
            parsed = parse_number(raw)
            if parsed is None:
                continue
            value = parsed
        else:
            value = float(digits)
            if value.is_integer() and 0 <= value <= 10:
                continue  # a small count: "3 results"
        if _is_list_number(text, start, end) or _labelled(text, start):
            continue
        if not scale and len(digits) == 4 and digits.isdigit() and 1900 <= value <= 2100:
            facts.append(_fact("year", raw, start, end, digits, value, 0.0))
            continue
        tolerance = _tolerance_of(digits, scale, text, start) if tolerances else 0.0
        facts.append(_fact("number", raw, start, end, number_key(value), value, tolerance))

    line_start = _LineStart(text)
    headings: dict[int, bool] = {}
    lower_use: _LowerCaseUse | None = None
    for m in _NAME.finditer(text):
        parts = _name_parts(m.group(0))
        if parts is None:
            continue  # no word of it names anything (tested first: the cheaper test)
        start, end = m.span()
        if _overlaps(starts, ends, ordered, start, end):
            continue
        if _before_colon(text, end):
            continue
        # _in_heading(text, start), with the line's start found from the last name's and the
        # answer kept per line: the same, without searching back from every name of a line.
        heading_line = line_start(start)
        heading = headings.get(heading_line)
        if heading is None:
            heading = headings[heading_line] = _HEADING.match(text, heading_line) is not None
        if heading:
            continue
        single, first, last, low, key = parts
        if first == 0 and low in _SENTENCE_OPENERS and _at_sentence_start(text, start):
            if single:
                continue  # "Collect the figures", "Thus, ..."
            skip = _second_word_start(m.group(0))
            rest = _name_parts(m.group(0)[skip:])
            if rest is None:
                continue  # "Former Manager": nothing else names anything
            _, first, last, _, key = rest  # "Locate Emily": Emily, not at a sentence start
            first += skip
            last += skip
        elif single and _at_sentence_start(text, start):
            if low.endswith(_NON_NAME_SUFFIXES):
                continue  # one common word opening a sentence
            if lower_use is None:
                lower_use = _LowerCaseUse(lowered, text)
            if lower_use(low):
                continue
        first += start
        last += start
        facts.append(_fact("name", text[first:last], first, last, key, None, 0.0))
    if len(facts) > 1:
        facts.sort(key=_START)
    return facts


def _times(text: str) -> Iterator[re.Match[str]]:
    """The matches of _TIME in ``text``, as ``_TIME.finditer(text)`` gives them.

    A time's hour has one or two digits, the last followed by ``:MM`` or an am/pm: a match can
    only start at that digit (_HOUR_END) or the one before. Trying those places in order, from
    the end of the last match on, finds the same leftmost matches as the search does, without
    trying _TIME (two look-arounds) at every other character.
    """
    pos = 0
    for digit in _HOUR_END.finditer(text):
        for start in (digit.start() - 1, digit.start()):
            if start >= pos:
                m = _TIME.match(text, start)
                if m is not None:
                    yield m
                    pos = m.end()
                    break


# A decade: "1990s", "2000's", "'90s", "80s"; a century and its tens, then "0s" (an apostrophe
# before the s allowed), not inside a word or a number.
_DECADE = re.compile(r"(?<![\w.,/:#])(['’])?(1[89]|20)?\d0['’]?s(?![\w'’])")
_MAYBE_DECADE = re.compile(r"0['’]?s")
_DECADE_LEAD = re.compile(
    r"(?:\b(?:the|mid|early|late|pre|post)[ -]|(?:mid|early|late|pre|post)-)$"
)
"""What makes "80s" (two digits, no apostrophe) a decade: "the 80s", "mid-80s", "early 90s"."""
_DECADE_MODIFIER = re.compile(r"(?:mid|early|late|pre|post)-$", re.IGNORECASE)


def _decades(
    text: str, lowered: str, starts: list[int], ends: list[int], ordered: bool
) -> list[Fact]:
    """The decades in ``text`` outside the spans taken: ``the 1990s``, ``the 2000's``,
    ``mid-80s``, ``the '90s``, ``80's``. A decade written with two digits and no apostrophe is
    one only after ``the``, ``mid-``, ``early``, ``late``, ``pre-`` or ``post-`` ("in their
    80s" is an age). The key is the decade with its century when written (``1990s``), else ``90s``; a
    hyphenated modifier (``mid-``) is part of the fact's text."""
    out: list[Fact] = []
    for m in _DECADE.finditer(text):
        start, end = m.span()
        apostrophe, century = m.group(1), m.group(2)
        before = lowered[max(0, start - 6) : start]
        modifier = _DECADE_MODIFIER.search(before)
        if before.endswith("-") and modifier is None:
            continue  # "x-1990s": part of something else
        if (
            not apostrophe
            and not century
            and m.group(0)[-2] not in "'’"
            and _DECADE_LEAD.search(before) is None
        ):
            continue
        digits = m.group(0).lstrip("'’")[: 4 if century else 2]
        if modifier is not None:
            start -= len(modifier.group(0))
        if _overlaps(starts, ends, ordered, start, end):
            continue
        out.append(_fact("decade", text[start:end], start, end, digits + "s", None, 0.0))
    return out


# What says that the digits after it are the last ones of a longer number: "ending in", "ends
# with", "last four digits of your card are", a mask of three or more ("**** ", "XXXX ").
_LAST_DIGITS_LEAD = re.compile(
    r"(?:\bend(?:s|ing)(?:\s+(?:in|with))?"
    r"|\blast\s+(?:\d|two|three|four|five|six)(?:\s+digits?)?(?:\s+of(?:\s+[a-z'’]+){1,4}?)?"
    r"(?:\s+(?:are|is))?)\s*[:(\"'#]?\s*$"
    r"|(?<![*•])(?:[*•]{3,}|\bx{3,})[ -]?$"  # a mask; "**Bags:** 2" is Markdown, no mask
)
_ACCOUNT_WORD = re.compile(
    r"\b(?:card|account|acct|visa|mastercard|amex|iban|phone|number|no\.|id|certificate)\b"
)
_LAST_DIGITS_HINT = ("end", "last", "***", "•", "xxx")


def _last_digits_claim(lowered: str, start: int, digits: str) -> bool:
    """The digits at ``start`` are said to be the last ones of a longer number: "the card
    ending in 4321", "last four digits: 4321", "**** 4321". Digits that read as a year (1900 to
    2100) need a card or account word before them too ("the card ending in 2024", not "the
    fiscal year ending in 2024"). Only the 48 characters before the digits are read."""
    before = lowered[max(0, start - 48) : start]
    if not any(hint in before for hint in _LAST_DIGITS_HINT):
        return False
    if _LAST_DIGITS_LEAD.search(before) is None:
        return False
    if len(digits) == 4 and 1900 <= int(digits) <= 2100:
        return _ACCOUNT_WORD.search(before) is not None
    return True


def _digit_outside(text: str, starts: list[int], ends: list[int]) -> bool:
    """``text`` has a digit outside the sorted disjoint spans ``zip(starts, ends)``."""
    pos = 0
    for start, end in zip(starts, ends, strict=True):
        if _DIGIT.search(text, pos, start):
            return True
        pos = end
    return _DIGIT.search(text, pos) is not None


_START = attrgetter("start")


def _spans_index(starts: list[int], ends: list[int]) -> tuple[list[int], list[int], bool]:
    """The spans ``zip(starts, ends)`` merged into sorted disjoint ones, for :func:`_overlaps`
    to bisect; as they are (and ``False``) when one is empty or inverted."""
    spans = sorted(zip(starts, ends, strict=True))
    if any(s >= e for s, e in spans):
        return starts, ends, False
    merged_starts: list[int] = []
    merged_ends: list[int] = []
    for s, e in spans:
        if merged_ends and s <= merged_ends[-1]:
            merged_ends[-1] = max(merged_ends[-1], e)
        else:
            merged_starts.append(s)
            merged_ends.append(e)
    return merged_starts, merged_ends, True


def _overlaps(starts: list[int], ends: list[int], ordered: bool, start: int, end: int) -> bool:
    """``[start, end)`` overlaps a span: ``start < e and s < end`` for one of them.

    For non-empty spans and a non-empty match, that is "they share a point", which merging
    overlapping spans into their union does not change. Then, the spans being sorted and
    disjoint (``ordered``), only the last one that starts before ``end`` can overlap. An empty
    or inverted span (the extractor makes none) does not behave like an interval under that
    test: then each span is tested as written.
    """
    if ordered:
        i = bisect_left(starts, end)
        return i > 0 and ends[i - 1] > start
    return any(start < e and s < end for s, e in zip(starts, ends, strict=True))


def _fact_maker() -> Callable[[str, str, int, int, str, float | None, float], Fact]:
    """A constructor of :class:`Fact` about twice as fast as the generated ``__init__`` (the
    trick and its argument are ``_references._reference_maker``'s: the same object, its slots
    set through their descriptors rather than ``object.__setattr__`` by name)."""
    new = object.__new__
    slots = vars(Fact)
    setters = tuple(slots[f.name].__set__ for f in fields(Fact))
    set_kind, set_text, set_start, set_end, set_key, set_value, set_tolerance = setters

    def make(
        kind: str, text: str, start: int, end: int, key: str, value: float | None, tolerance: float
    ) -> Fact:
        fact = new(Fact)
        set_kind(fact, kind)
        set_text(fact, text)
        set_start(fact, start)
        set_end(fact, end)
        set_key(fact, key)
        set_value(fact, value)
        set_tolerance(fact, tolerance)
        return fact

    return make


_fact = _fact_maker()


def fact_tolerance(fact: Fact, text: str) -> float:
    """The ``tolerance`` that :func:`extract_facts` gives ``fact``, a fact of ``text``: the
    rounding of a number, an amount or a percentage as written (:func:`_tolerance`), else
    ``0.0``."""
    if fact.kind in _ROUNDED_KINDS:
        return _tolerance(fact.text, text, fact.start)
    return 0.0


_ROUNDED_KINDS = frozenset({"number", "money", "percent"})


def _tolerance(raw: str, text: str, start: int) -> float:
    """Rounding allowed for a number as written: half a unit of its last digit; trailing zeros
    of a whole number count as rounding only with a scale word or a hedge (``about 9,000``);
    after a hedge, a whole unit (``over 8 million`` for 8.8 million)."""
    m = _NUMBER_IN_TEXT.search(raw)
    if m is None:
        return 0.0
    return _tolerance_of(m.group("num").replace(",", ""), m.group("scale"), text, start)


def _tolerance_of(digits: str, scale: str | None, text: str, start: int) -> float:
    """:func:`_tolerance` of a number already parsed into ``digits`` (no separators) and its
    scale word."""
    hedged = _hedged(text, start)
    whole, _, frac = digits.partition(".")
    if frac:
        place = 10.0 ** -len(frac)
    elif scale or hedged:
        stripped = whole.rstrip("0")
        place = 10.0 ** (len(whole) - len(stripped)) if stripped else 1.0
    else:
        place = 1.0
    if scale:
        place *= _scale_value(scale)
    return place * (1.0 if hedged else 0.5) * 1.000001


def _hedged(text: str, start: int) -> bool:
    """A hedge (``about``, ``over``, ``~``...) ends the 24 characters before ``start``."""
    before = text[max(0, start - 24) : start]
    # Fast path: in a match of _HEDGE, what is left once the trailing white space (``\s``,
    # what ``rstrip`` strips), a currency sign and more white space are cut ends with the last
    # character of a hedge; ``lower`` maps every character that matches one of those under
    # IGNORECASE onto it. Not one of those, no match.
    tail = before.rstrip()
    if tail[-1:] in _CURRENCY_SIGNS:
        tail = tail[:-1].rstrip()
    if tail[-1:].lower() not in _HEDGE_LAST:
        return False
    return _HEDGE.search(before) is not None


def _labelled(text: str, start: int) -> bool:
    """A label (``Step``, ``Option``, ``#``...) ends the 12 characters before ``start``."""
    before = text[max(0, start - 12) : start]
    # Fast path, as in _hedged: a match ends with the last character of a label, then white
    # space.
    if before.rstrip()[-1:].lower() not in _LABEL_LAST:
        return False
    return _LABELLED_NUMBER.search(before) is not None


def _scale_value(scale: str) -> float:
    return _SCALES.get(scale.lower(), 1.0)


def _is_list_number(text: str, start: int, end: int) -> bool:
    """``1.`` or ``2)`` opening a line (Markdown or plain numbered lists).

    What is before the number on its line must be only `` \t*_#>``: found by stepping back over
    those characters (never over more than lies between this number and the text before it),
    rather than by searching back to the line's start from every number of a long line.
    """
    if text[end : end + 1] not in (".", ")", ":"):
        return False
    i = start
    while i > 0 and text[i - 1] in _LIST_LEAD:
        i -= 1
    return i == 0 or text[i - 1] == "\n"


_LIST_LEAD = frozenset(" \t*_#>")


class _LineStart:
    """The offset of the start of the line holding an offset, for offsets asked in increasing
    order (as a scan meets them): each call searches only what lies after the last offset asked,
    so a whole scan reads the text once. An earlier offset starts the search again from 0."""

    __slots__ = ("_last", "_start", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._last = 0
        self._start = 0

    def __call__(self, offset: int) -> int:
        if offset < self._last:
            self._last = self._start = 0
        newline = self._text.rfind("\n", self._last, offset)
        if newline >= 0:
            self._start = newline + 1
        self._last = offset
        return self._start


def _at_sentence_start(text: str, start: int) -> bool:
    """``start`` opens a sentence: the text's start, a line's, a list item's (after ``- ``,
    ``* ``, or ``1. ``/``2) `` opening a line), or what follows a sentence's end (``.``, ``!``,
    ``?``, ``:`` or ``;``). A full stop after a title, an abbreviation or an initial
    (``Dr. Harding``, ``J. Harding``) ends no sentence."""
    i = _skip_back(text, start, _LEAD_IN)
    mark = text[i - 1] if i > 0 else ""
    if mark in _BULLETS:  # "- Foo", "* Foo"
        i = _skip_back(text, _skip_back(text, i - 1, " \t"), _LEAD_IN)
        mark = text[i - 1] if i > 0 else ""
    if mark == "." or mark == ")":
        digits = _skip_back(text, i - 1, _DIGIT_CHARS)
        if digits < i - 1 and _line_opens_at(text, digits):
            return True  # "1. Foo", "2) Foo" opening a line: a list item
        if mark == ")":
            return False
        return not _abbreviation_before(text, i - 1)
    return i == 0 or mark in _SENTENCE_ENDS


_BULLETS = frozenset("-•*")
_SENTENCE_ENDS = frozenset("!?\n:;")
_DIGIT_CHARS = frozenset("0123456789")
_ABBREVIATIONS = frozenset(
    """
    dr mr mrs ms mx prof st mt jr sr gen col capt lt sgt rev hon gov sen rep vs etc no vol
    fig approx ca cf eg ie inc ltd co corp
    """.split()  # noqa: SIM905
)
"""Words that a full stop follows without ending the sentence (titles, abbreviations)."""


def _skip_back(text: str, i: int, chars: frozenset[str] | str) -> int:
    """The offset before the run of ``chars`` that ends at ``i``."""
    while i > 0 and text[i - 1] in chars:
        i -= 1
    return i


def _line_opens_at(text: str, i: int) -> bool:
    """Only Markdown lead-in (`` \t*_#>``) lies between the line's start and ``i``."""
    i = _skip_back(text, i, _LIST_LEAD)
    return i == 0 or text[i - 1] == "\n"


def _abbreviation_before(text: str, dot: int) -> bool:
    """The word ending at ``text[dot]`` (a full stop) is an initial (one letter) or a title or
    abbreviation such as ``Dr`` or ``e.g``, after which a capitalised word starts no sentence."""
    begin = dot
    while begin > 0 and (text[begin - 1].isalpha() or text[begin - 1] == "."):
        begin -= 1
        if dot - begin > 8:
            return False  # a long word: no abbreviation
    word = text[begin:dot].replace(".", "").lower()
    return len(word) == 1 or word in _ABBREVIATIONS


def _in_heading(text: str, start: int) -> bool:
    """``start`` is on a Markdown heading's line."""
    return _HEADING.match(text, text.rfind("\n", 0, start) + 1) is not None


def _before_colon(text: str, end: int) -> bool:
    """A label: ``**Departure:** 17:00``."""
    return text[end : end + 4].lstrip("*_ \t").startswith(":")


@lru_cache(maxsize=4096)
def _name_parts(name: str) -> tuple[bool, int, int, str, str] | None:
    """What of a match of _NAME may name something, from its text alone (so cached per text):
    whether it is a single word; the offsets (in ``name``) of the first kept word and of the
    end of the last; the first kept word in lower case; and the key. ``None`` when no word is
    kept or no token is left: initials, acronyms and common words name nothing."""
    words = list(_NAME_WORDS.finditer(name))
    kept = []
    for w in words:
        word = w.group(0)
        low = word.lower().rstrip(".")
        if len(low) == 1:
            continue  # an initial, or "I"
        if word.isupper() and len(word) > 1:
            if low in _ACRONYMS or low in COMMON_WORDS:
                continue
        elif _common(low):
            continue
        kept.append(w)
    if not kept:
        return None
    tokens = [t for w in kept for t in name_tokens(w.group(0)) if len(t) > 1]
    if not tokens:
        return None
    first, last = kept[0], kept[-1]
    return len(words) == 1, first.start(), last.end(), first.group(0).lower(), " ".join(tokens)


@lru_cache(maxsize=1024)
def _second_word_start(name: str) -> int:
    """The offset of a name's second word (a match of _NAME of more than one word)."""
    words = _NAME_WORDS.finditer(name)
    next(words)
    return next(words).start()


def _common(word: str) -> bool:
    """A common word, or the plural / third person of one (``Members``, ``Sounds``)."""
    if word in COMMON_WORDS:
        return True
    if word.endswith("ies") and word[:-3] + "y" in COMMON_WORDS:
        return True
    if word.endswith("es") and word[:-2] in COMMON_WORDS:
        return True
    return word.endswith("s") and word[:-1] in COMMON_WORDS


class _LowerCaseUse:
    """:func:`_used_in_lower_case` for one text, asked about many words: linear in the text.

    Searching the text once per word (as :func:`_used_in_lower_case` does) is quadratic when
    many sentences open with a capitalised word ("Zed. Zed. ..." or distinct ones). Here the
    text's runs of letters and digits are indexed once: a word without ``'``, ``’`` or ``-`` is
    used in lower case when one whole run equals it (compared as the search compares: on the
    lower-cased text, or case-insensitively when lower-casing changes the text's length) and
    starts with a lower-case character. A word with such separators (``o'brien``, ``jean-luc``)
    is looked for as consecutive runs joined by exactly those single characters, from the
    occurrences of its rarest part. Answers are kept per word.
    """

    __slots__ = ("_answers", "_keys", "_lower_starts", "_spans", "_text", "_where")

    def __init__(self, lowered: str, text: str) -> None:
        self._text = text
        self._answers: dict[str, bool] = {}
        if len(lowered) == len(text):
            runs = [(m.start(), m.end(), m.group()) for m in _RUNS.finditer(lowered)]
        else:
            runs = [(m.start(), m.end(), _fold(m.group())) for m in _RUNS.finditer(text)]
        self._spans = [(start, end) for start, end, _ in runs]
        self._keys = [key for _, _, key in runs]
        self._lower_starts = {key for start, _, key in runs if key and text[start].islower()}
        self._where: dict[str, list[int]] | None = None

    def __call__(self, word: str) -> bool:
        answer = self._answers.get(word)
        if answer is None:
            answer = self._answers[word] = self._find(word)
        return answer

    def _find(self, word: str) -> bool:
        pieces = _SEPARATED.split(word)
        if len(pieces) == 1:
            return word in self._lower_starts
        if any(not piece for piece in pieces[::2]):
            return False  # an empty part: no run of letters can match it
        parts, separators = pieces[::2], pieces[1::2]
        where = self._where
        if where is None:
            where = self._where = {}
            for i, key in enumerate(self._keys):
                where.setdefault(key, []).append(i)
        rarest = min(range(len(parts)), key=lambda j: len(where.get(parts[j], ())))
        text, keys, spans = self._text, self._keys, self._spans
        for i in where.get(parts[rarest], ()):
            first = i - rarest
            if first < 0 or first + len(parts) > len(keys):
                continue
            if not text[spans[first][0]].islower():
                continue
            if all(
                keys[first + j] == parts[j]
                and (
                    j == 0
                    or (
                        spans[first + j][0] == spans[first + j - 1][1] + 1
                        and text[spans[first + j - 1][1]] == separators[j - 1]
                    )
                )
                for j in range(len(parts))
            ):
                return True
        return False


_RUNS = re.compile(r"[^\W_]+")
_SEPARATED = re.compile(r"(['’-])")
_ASCII_LETTER = re.compile(r"[a-z]", re.IGNORECASE)


@lru_cache(maxsize=4096)
def _fold_char(char: str) -> str:
    """The ASCII letter ``char`` matches case-insensitively (as ``re.IGNORECASE`` compares), or
    ``char`` itself (which then matches no letter of a name word)."""
    if char.isascii():
        return char.lower()
    if _ASCII_LETTER.fullmatch(char) is None:
        return char
    for letter in "abcdefghijklmnopqrstuvwxyz":
        if re.fullmatch(letter, char, re.IGNORECASE):
            return letter
    return char  # pragma: no cover - matched [a-z], so matches one of them


def _fold(run: str) -> str:
    return "".join(_fold_char(c) for c in run)


def _used_in_lower_case(lowered: str, text: str, word: str) -> bool:
    """True when ``word`` also appears in ``text`` written in lower case (a common word)."""
    if len(lowered) != len(text):  # lower-casing changed a length ("İ"): offsets differ
        return any(
            m.group(0)[0].islower()
            for m in re.finditer(rf"(?<![^\W_]){re.escape(word)}(?![^\W_])", text, re.IGNORECASE)
        )
    start = lowered.find(word)
    while start >= 0:
        end = start + len(word)
        whole = (start == 0 or not lowered[start - 1].isalnum()) and (
            end == len(lowered) or not lowered[end].isalnum()
        )
        if whole and text[start].islower():
            return True
        start = lowered.find(word, end)
    return False
