"""Claim extraction: split an answer into atomic claims, each with its character span.

Deterministic and model-free. An answer is split into sentences (robust to abbreviations such as
``Dr.`` and ``e.g.``, to decimals, URLs, list bullets and Markdown), then each sentence into
clauses where it clearly joins independent clauses (``;``, ``, and``, ``, but``, or ``and``
followed by a new subject and verb). The splitting is conservative: a clause is only split off
when both halves look like clauses of their own, so that no claim loses its verb.

Sentences that are not claims are skipped: questions, bare "yes"/"no" (not self-contained: the
claim is in the question), greetings, thanks, offers of help
("Let me know if...", "Feel free to..."), Markdown headings, code blocks and lead-ins that end
with a colon ("Here is what I found:").

Spans are offsets into the original text: ``text[claim.start:claim.end] == claim.text``.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Claim", "extract_claims", "split_sentences"]


@dataclass(frozen=True, slots=True)
class Claim:
    """One atomic claim of an answer."""

    text: str
    """The claim as written (markup such as bullets and bold markers stripped at the edges)."""
    start: int
    """Start offset of the claim in the answer."""
    end: int
    """End offset (exclusive) of the claim in the answer."""
    sentence: int = 0
    """Index of the sentence the claim came from (clauses of one sentence share it)."""


# Abbreviations after which a period does not end a sentence (lower case, without the dot).
_ABBREVIATIONS = frozenset(
    [
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "sr",
        "jr",
        "st",
        "mt",
        "ft",
        "vs",
        "v",
        "cf",
        "al",
        "fig",
        "figs",
        "no",
        "nos",
        "vol",
        "vols",
        "ed",
        "eds",
        "approx",
        "est",
        "dept",
        "univ",
        "inc",
        "ltd",
        "co",
        "corp",
        "bros",
        "gov",
        "gen",
        "col",
        "lt",
        "sgt",
        "capt",
        "cmdr",
        "adm",
        "rep",
        "sen",
        "hon",
        "rev",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "mon",
        "tue",
        "tues",
        "wed",
        "thu",
        "thur",
        "thurs",
        "fri",
        "sat",
        "sun",
        "e.g",
        "i.e",
        "a.m",
        "p.m",
        "u.s",
        "u.k",
        "u.n",
        "e.u",
        "ph.d",
        "b.a",
        "m.a",
        "b.sc",
        "m.sc",
        "d.c",
        "a.d",
        "b.c",
        "etc.al",
    ]
)

_CODE_FENCE = re.compile(r"^[ \t]*(```|~~~)")
# Patterns used with ``match(text, pos)`` carry no ``^``: ``match`` anchors at ``pos`` already.
_BULLET = re.compile(r"[ \t]*(?:[-*+•]|\d{1,3}[.)]|[a-z]\))[ \t]+")
_HEADING = re.compile(r"[ \t]*#{1,6}[ \t]")
_TABLE_RULE = re.compile(r"[ \t]*\|?[ \t:]*-{3,}")
# A candidate sentence end: terminal punctuation, optional closing quotes/brackets, then space.
# Only from the first mark of a run, and possessively (giving a mark or a closer back can only
# put another mark or closer before the space): "[.!?…]+" tried from every mark of a long run of
# them, each time reading to the run's end, was quadratic ("." repeated). The same matches.
_END = re.compile(r"(?<![.!?…])[.!?…]++[\"'”’)\]]*+(?=\s)")
_FRAGMENT = re.compile(r"[A-Za-z]\.?")
"""A sentence of one letter: the end of the sentence before it, cut at an abbreviation."""
_EDGE_MARKUP = "*_`>\"'“”‘’ \t"

_NON_CLAIM_START = re.compile(
    r"""^(?:
        (?:hi|hello|hey|greetings|dear)\b
      | thanks?\b | thank\s+you\b | many\s+thanks\b
      | (?:sure|certainly|absolutely|of\s+course|okay|ok|great\s+question|good\s+question)\b[!.,]?\s*$
      | (?:please\s+)?let\s+me\s+know\b
      | (?:please\s+)?feel\s+free\b
      | (?:please\s+)?don'?t\s+hesitate\b
      | (?:i\s+)?hope\s+(?:this|that|it)\s+helps\b
      | (?:i'?m|i\s+am|i'?d\s+be|we'?re|we\s+are)\s+(?:happy|glad)\s+to\s+help\b
      | (?:is\s+there\s+)?anything\s+else\b
      | would\s+you\s+like\b
      | (?:if\s+you\s+(?:have|need)\s+(?:any\s+)?(?:more|further|other|additional)?\s*(?:questions|help))\b
      | (?:i\s+can|i\s+could)\s+(?:also\s+)?help\b
      | (?:have\s+a\s+(?:great|good|nice)\s+(?:day|one))\b
      | (?:yes|no|yep|nope|yeah|ok|okay|sure|correct|right|true|false|done|indeed|exactly)\W*$
    )""",
    re.IGNORECASE | re.VERBOSE,
)

_SUBJECTS = frozenset(
    [
        "i",
        "you",
        "he",
        "she",
        "it",
        "we",
        "they",
        "this",
        "that",
        "these",
        "those",
        "there",
        "his",
        "her",
        "its",
        "their",
        "our",
        "my",
        "your",
        "the",
        "a",
        "an",
    ]
)
_FINITE = frozenset(
    [
        "is",
        "are",
        "was",
        "were",
        "am",
        "be",
        "been",
        "has",
        "have",
        "had",
        "will",
        "would",
        "can",
        "could",
        "shall",
        "should",
        "may",
        "might",
        "must",
        "does",
        "do",
        "did",
        "isn't",
        "aren't",
        "wasn't",
        "weren't",
        "hasn't",
        "haven't",
        "hadn't",
        "won't",
        "wouldn't",
        "can't",
        "couldn't",
        "shouldn't",
        "doesn't",
        "don't",
        "didn't",
        "'s",
        "'re",
        "'ve",
        "'ll",
        "'d",
    ]
)
# The white space before a bare "and"/"but" is taken from the start of its run, possessively: a
# start inside a run of white space reads to the same end as the run's start did (and fails
# where it failed), and a match never ends inside such a run. The same matches, in time linear
# in the run (from every space of a long run, it was quadratic).
_CLAUSE_SPLIT = re.compile(
    r";\s+|,\s++(?:and|but|yet|whereas|while|so)\s+|(?<!\s)\s++(?:and|but)\s+"
)
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*|\d[\d,.:/-]*")


def _lines(text: str) -> Iterator[tuple[int, int]]:
    """Yield (start, end) of each block of text that sentences may not cross: list items,
    headings and paragraphs; code blocks are skipped."""
    pos = 0
    in_code = False
    para_start: int | None = None
    para_end = 0
    for line in text.splitlines(keepends=True):
        start, end = pos, pos + len(line.rstrip("\r\n"))
        pos += len(line)
        if _CODE_FENCE.match(line):
            if para_start is not None:
                yield para_start, para_end
                para_start = None
            in_code = not in_code
            continue
        if in_code:
            continue
        stripped = text[start:end].strip()
        standalone = bool(
            not stripped
            or _BULLET.match(line)
            or _HEADING.match(line)
            or stripped.startswith("|")
            or stripped.startswith(">")
        )
        if standalone:
            if para_start is not None:
                yield para_start, para_end
                para_start = None
            if stripped:
                yield start, end
            continue
        if para_start is None:
            para_start = start
        para_end = end
        if stripped.endswith(":"):
            # A lead-in line ("Here is what I found:") ends a block.
            yield para_start, para_end
            para_start = None
    if para_start is not None:
        yield para_start, para_end


def _is_abbreviation(text: str, dot: int) -> bool:
    """True when the period at ``dot`` ends an abbreviation or an initial, not a sentence."""
    i = dot
    while i > 0 and (text[i - 1].isalnum() or text[i - 1] == "."):
        i -= 1
    word = text[i:dot].lower()
    if not word:
        return False
    if word in _ABBREVIATIONS:
        return True
    if len(word) == 1 and word.isalpha() and text[i].isupper():
        return True  # an initial: "J. R. R. Tolkien"
    # dotted acronyms such as "U.S." or "e.g."
    return bool(re.fullmatch(r"(?:[a-z]\.)+[a-z]", word))


def split_sentences(text: str) -> list[tuple[int, int]]:
    """The (start, end) spans of the sentences of ``text``, markup trimmed at the edges.

    Code blocks are skipped; list items, headings and table rows are sentences of their own.
    """
    spans: list[tuple[int, int]] = []
    for block_start, block_end in _lines(text):
        bullet = _BULLET.match(text, block_start, block_end)
        seg_start = bullet.end() if bullet else block_start
        for m in _END.finditer(text, seg_start, block_end):
            punct = text[m.start()]
            if punct == "." and m.end() - m.start() == 1 and _is_abbreviation(text, m.start()):
                nxt = _next_char(text, m.end(), block_end)
                # "Dr. Smith": never a boundary; "etc. The": not listed, so a boundary.
                if nxt is None or nxt.isupper() or nxt.islower() or nxt.isdigit():
                    continue
            nxt = _next_char(text, m.end(), block_end)
            if nxt is not None and nxt.islower():
                continue  # "3 p.m. today", "approx. ten", a sentence never starts lowercase
            spans.append((seg_start, m.end()))
            seg_start = m.end()
        spans.append((seg_start, block_end))
    out: list[tuple[int, int]] = []
    for s, e in spans:
        trimmed = _trim(text, s, e)
        if trimmed is None:
            continue
        if out and _FRAGMENT.fullmatch(text, *trimmed) and "\n" not in text[out[-1][1] : s]:
            out[-1] = (out[-1][0], trimmed[1])  # "5th Ave. N.": a trailing letter, no sentence
        else:
            out.append(trimmed)
    return out


def _next_char(text: str, pos: int, end: int) -> str | None:
    while pos < end and text[pos].isspace():
        pos += 1
    return text[pos] if pos < end else None


def _trim(text: str, start: int, end: int) -> tuple[int, int] | None:
    """Strip whitespace, bullets, heading marks and emphasis at both edges of a span."""
    m = _BULLET.match(text, start, end)
    if m:
        start = m.end()
    m = _HEADING.match(text, start, end)
    if m:
        start = m.end()
    while start < end and (text[start].isspace() or text[start] in _EDGE_MARKUP + "#|"):
        start += 1
    while end > start and (text[end - 1].isspace() or text[end - 1] in _EDGE_MARKUP + "|"):
        end -= 1
    # keep a closing quote that has its opening partner inside the span
    if end < len(text) and text[end] in '"”' and ('"' in text[start:end] or "“" in text[start:end]):
        end += 1
    if start >= end or not any(c.isalnum() for c in text[start:end]):
        return None
    return start, end


def _is_claim(sentence: str, line: str) -> bool:
    """``sentence``, on ``line``, is a claim: not a question, lead-in, heading, table rule or
    one of the sentences that claim nothing."""
    return not _line_blocks_claims(line) and _is_sentence_claim(sentence)


def _line_blocks_claims(line: str) -> bool:
    """No sentence of ``line`` is a claim: a heading or a table rule."""
    return bool(_HEADING.match(line) or set(line.strip()) <= set("|-: ") or _TABLE_RULE.match(line))


def _is_sentence_claim(sentence: str) -> bool:
    s = sentence.strip()
    if s.endswith("?") or s.endswith(":"):
        return False  # a question, a lead-in
    return not _NON_CLAIM_START.match(s)


def _has_finite_verb(words: list[str]) -> bool:
    for w in words:
        lw = w.lower()
        if lw in _FINITE or lw.endswith(("n't", "'s")):
            return True
        if len(lw) > 4 and lw.endswith("ed"):
            return True
    return False


def _looks_like_clause(words: list[str], *, needs_subject: bool) -> bool:
    """A conservative test for an independent clause: a subject, then a finite verb soon after."""
    if len(words) < 3:
        return False
    head = words[0].lower()
    if (
        needs_subject
        and head not in _SUBJECTS
        and not words[0][:1].isupper()
        and not words[0][:1].isdigit()
    ):
        return False
    window = words[1:6]
    if _has_finite_verb(window):
        return True
    # "it shipped", "they ship": a pronoun followed by a verb-looking word ending in s/ed
    return (
        head in {"i", "you", "he", "she", "it", "we", "they"}
        and len(words) >= 2
        and (words[1].lower().endswith(("s", "ed")))
    )


def _split_clauses(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Split the sentence ``text[start:end]`` into independent clauses, conservatively.

    At each candidate separator the text since the last cut is judged (brackets and quotes left
    open, its words: whether one is a finite verb, whether there are two) and the words after it
    (the first six are all the tests read). What is known of the text since the last cut is kept
    and extended from one candidate to the next rather than read again, so a sentence of many
    candidates that are not cuts (``and`` or ``;`` repeated) costs its length, not its square. A
    word never spans the position of a candidate (``;``, ``,`` or white space), so the words read
    piece by piece are the words of the whole.
    """
    pieces: list[tuple[int, int]] = []
    seg_start = start
    cuts: list[tuple[int, int]] = []
    # What is known of text[seg_start:scanned]:
    scanned = start
    depth = straight_quotes = open_quotes = close_quotes = 0
    left_verb = False
    left_words = 0  # counted up to 2, all the tests need
    # The sentence's words, found once when first needed: the words after a candidate are those
    # that start after it (a candidate ends with white space, which no word spans).
    sentence_words: list[str] | None = None
    sentence_starts: list[int] = []
    for m in _CLAUSE_SPLIT.finditer(text, start, end):
        here = m.start()
        chunk = text[scanned:here]
        depth += chunk.count("(") - chunk.count(")") + chunk.count("[") - chunk.count("]")
        straight_quotes += chunk.count('"')
        open_quotes += chunk.count("“")
        close_quotes += chunk.count("”")
        if not left_verb or left_words < 2:
            for word in _WORD.finditer(text, scanned, here):
                left_words = min(left_words + 1, 2)
                if not left_verb and _has_finite_verb([word.group()]):
                    left_verb = True
                if left_verb and left_words >= 2:
                    break
        scanned = here
        # never split inside brackets or quotes
        if depth > 0 or straight_quotes % 2 == 1 or open_quotes > close_quotes:
            continue
        sep = m.group(0)
        if sentence_words is None:
            sentence_words = [w.group() for w in _WORD.finditer(text, start, end)]
            sentence_starts = [w.start() for w in _WORD.finditer(text, start, end)]
        first = bisect_left(sentence_starts, m.end())
        right = sentence_words[first : first + 6]
        bare_and = not sep.strip(" ").startswith((";", ","))
        if bare_and:
            # "X and he did Y": only when a pronoun or determiner opens a new clause
            ok = (
                right[:1]
                and right[0].lower() in {"i", "he", "she", "it", "we", "they", "this", "there"}
                and _looks_like_clause(right, needs_subject=True)
                and left_verb
            )
        elif sep.startswith(";"):
            ok = left_words >= 2 and len(right) >= 2
        else:
            ok = left_verb and _looks_like_clause(right, needs_subject=True)
        if ok:
            cuts.append((m.start(), m.end()))
            seg_start = m.end()
            scanned = seg_start
            depth = straight_quotes = open_quotes = close_quotes = 0
            left_verb = False
            left_words = 0
    seg_start = start
    for cut_start, cut_end in cuts:
        pieces.append((seg_start, cut_start))
        seg_start = cut_end
    pieces.append((seg_start, end))
    out = []
    for s, e in pieces:
        trimmed = _trim(text, s, e)
        if trimmed is not None:
            s2, e2 = trimmed
            while e2 > s2 and (text[e2 - 1] in ",;" or text[e2 - 1].isspace()):
                e2 -= 1
            out.append((s2, e2))
    return out


def extract_claims(text: str, *, clauses: bool = True) -> list[Claim]:
    """Split ``text`` into atomic claims with their spans.

    Args:
        text: the answer.
        clauses: also split sentences into independent clauses (default); ``False`` keeps whole
            sentences.

    Returns:
        The claims in order; ``text[c.start:c.end] == c.text`` for each.
    """
    claims: list[Claim] = []
    # _is_claim(sentence, line), with the line's tests made once per line (and its start found
    # from the last sentence's): many sentences on one long line cost its length once, not once
    # per sentence.
    line_start = 0
    line_end = -1
    line_blocks = False
    for index, (start, end) in enumerate(split_sentences(text)):
        if start > line_end or start < line_start:
            line_start = text.rfind("\n", 0, start) + 1
            found = text.find("\n", start)
            line_end = found if found >= 0 else len(text)
            line_blocks = _line_blocks_claims(text[line_start:line_end])
        if line_blocks or not _is_sentence_claim(text[start:end]):
            continue
        spans = _split_clauses(text, start, end) if clauses else [(start, end)]
        for s, e in spans:
            if any(c.isalnum() for c in text[s:e]) and not _NON_CLAIM_START.match(text[s:e]):
                claims.append(Claim(text=text[s:e], start=s, end=e, sentence=index))
    return claims
