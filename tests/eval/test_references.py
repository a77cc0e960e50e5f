"""Reference extraction and normalisation, and look-ups in the evidence index."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from agentlens.errors import ConfigError
from agentlens.eval import EvidenceItem
from agentlens.eval._index import EvidenceIndex
from agentlens.eval._references import (
    Extractor,
    date_key,
    edit_distance,
    get_extractor,
    number_key,
    parse_number,
    url_key,
)


def refs(text: str, **kwargs: object) -> list[tuple[str, str, str]]:
    extractor = Extractor(**kwargs) if kwargs else get_extractor()  # type: ignore[arg-type]
    out = []
    for r in extractor.extract(text):
        assert text[r.start : r.end] == r.text
        out.append((r.kind, r.text, r.key))
    return out


def item(
    value: object, index: int = 0, *, kind: str = "tool", truncated: bool = False
) -> EvidenceItem:
    from agentlens.eval import text_of

    return EvidenceItem(f"s{index}", kind, "lookup", value, text_of(value), index, truncated)


def found(answer_ref: str, *evidence: object, **kwargs: object) -> bool:
    extractor = Extractor(**kwargs) if kwargs else get_extractor()  # type: ignore[arg-type]
    found_refs = extractor.extract(answer_ref)
    assert len(found_refs) == 1, found_refs
    index = EvidenceIndex([item(v, i) for i, v in enumerate(evidence)], extractor)
    return index.find(found_refs[0], len(evidence) + 1) is not None


# --------------------------------------------------------------------------- extraction


@pytest.mark.parametrize(
    ("text", "kind", "key"),
    [
        ("CUST-12345", "id", "cust-12345"),
        ("DOC-1a2b3c4d", "id", "doc-1a2b3c4d"),
        ("INV-7781", "id", "inv-7781"),
        ("ORD-2024-00123", "id", "ord-2024-00123"),
        ("credit_card_4421486", "id", "credit_card_4421486"),
        ("ZK3P9Q", "code", "zk3p9q"),
        ("HAT117", "code", "hat117"),
        ("4XGCCM", "code", "4xgccm"),
        ("123e4567-e89b-12d3-a456-426614174000", "uuid", "123e4567-e89b-12d3-a456-426614174000"),
        ("$1,834.20", "money", "1834.2"),
        ("USD 12.5", "money", "12.5"),
        ("€3", "money", "3"),
        ("12,500.00 dollars", "money", "12500"),
        ("$12.5 million", "money", "12500000"),
        ("20%", "percent", "20"),
        ("12.5 percent", "percent", "12.5"),
        ("2026-03-05", "date", "2026-03-05"),
        ("2026-03-05T10:00:00Z", "date", "2026-03-05"),
        ("March 5, 2026", "date", "2026-03-05"),
        ("5 March 2026", "date", "2026-03-05"),
        ("Mar 5th, 2026", "date", "2026-03-05"),
        ("May 20th", "date", "--05-20"),
        ("https://Example.com/a/b/", "url", "http://example.com/a/b"),
        ("Jane.Doe@Example.com", "email", "jane.doe@example.com"),
        ("[1]", "citation", "1"),
        ("[smith2020]", "citation", "smith2020"),
        ("[DOC-3]", "citation", "doc-3"),
    ],
)
def test_each_shape_is_extracted_with_its_key(text: str, kind: str, key: str) -> None:
    assert refs(f"see {text} here") == [(kind, text, key)]


@pytest.mark.parametrize(
    "text",
    [
        "MP3",
        "COVID-19",
        "GPT-4o",
        "A1",
        "SHA-256",
        "UTF-8",
        "H264",
        "FY2024",
        "hello world",
        "follow-up",
        "Q3",
        "1080P",
        "step 3",
        "[x]",
        "February 30, 2026",
        "2026-13-01",
    ],
)
def test_things_that_are_not_references(text: str) -> None:
    assert refs(f"about {text} today") == []


def test_url_ends_where_the_sentence_or_markdown_link_ends() -> None:
    assert refs("Read https://ex.com/a/b.") == [("url", "https://ex.com/a/b", "http://ex.com/a/b")]
    assert refs("[docs](https://ex.com/a?q=1), then") == [
        ("url", "https://ex.com/a?q=1", "http://ex.com/a?q=1")
    ]
    assert refs("(see https://en.wikipedia.org/wiki/Foo_(bar)).")[0][1] == (
        "https://en.wikipedia.org/wiki/Foo_(bar)"
    )


def test_ids_inside_urls_and_emails_are_part_of_them() -> None:
    kinds = [k for k, _, _ in refs("mail a.b@x.io or open https://x.io/DOC-1a2b3c4d")]
    assert kinds == ["email", "url"]


def test_custom_patterns_win_over_builtins_and_keep_normalisation() -> None:
    out = refs("ticket TCK-0042 cost $1,834.20", patterns=[r"TCK-\d{4}", r"\$[\d,]+\.\d{2}"])
    assert out == [("pattern", "TCK-0042", "tck-0042"), ("money", "$1,834.20", "1834.2")]
    named = refs("order A-7 ok", patterns={"order": r"\bA-\d\b"})
    assert named == [("order", "A-7", "a-7")]


def test_bad_options_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="bad reference pattern"):
        Extractor(patterns=["("])
    with pytest.raises(ConfigError, match="unknown reference kind"):
        Extractor(kinds=["ids"])


def test_kinds_limits_the_builtins() -> None:
    assert refs("CUST-12345 costs $5.00", kinds=["money"]) == [("money", "$5.00", "5")]


# --------------------------------------------------------------------------- normalisation


def test_number_key_and_parse_number() -> None:
    assert number_key(1834.20) == "1834.2"
    assert number_key(12500.0) == "12500"
    assert number_key(-0.0) == "0"
    assert parse_number("$1,834.20") == pytest.approx(1834.2)
    assert parse_number("9k") == 9000
    assert parse_number("8.8 million") == pytest.approx(8_800_000)
    assert parse_number("no digits") is None


def test_date_and_url_keys() -> None:
    assert date_key(2026, 2, 29) == "2026-02-29"  # leap-agnostic: a day that can exist
    assert date_key(None, 4, 31) is None
    assert url_key("HTTPS://WWW.Example.COM:443/Path/?q=1#frag") == "http://example.com/Path?q=1"
    assert url_key("http://example.com/") == url_key("https://example.com")


def test_edit_distance() -> None:
    assert edit_distance("cust-48231", "cust-48213") == 2
    assert edit_distance("abc", "abc") == 0
    assert edit_distance("abc", "xyzabc", limit=1) == 2


@given(
    cents=st.integers(min_value=0, max_value=10**11),
)
def test_money_formats_normalise_to_one_key(cents: int) -> None:
    value = cents / 100
    whole, frac = divmod(cents, 100)
    forms = [
        f"${value:,.2f}",
        f"${value:.2f}",
        f"USD {value:,.2f}",
        f"{value:,.2f} dollars",
        f"€{whole:,}.{frac:02d}",
    ]
    if frac == 0:
        forms += [f"${whole:,}", f"${whole}"]
    keys = set()
    for form in forms:
        found_refs = get_extractor().extract(f"pay {form} now")
        assert [r.kind for r in found_refs] == ["money"], form
        keys.add(found_refs[0].key)
    assert keys == {number_key(value)}


@given(st.floats(min_value=0, max_value=1e9, allow_nan=False).map(lambda f: round(f, 2)))
def test_a_json_number_grounds_its_money_forms(value: float) -> None:
    index = EvidenceIndex([item({"amount": value})])
    for form in (f"${value:,.2f}", f"${value:.2f}"):
        ref = get_extractor().extract(f"total {form}")[0]
        assert index.find(ref, 5) is not None, (form, value)


@given(
    st.dates(),
    st.sampled_from(["{b} {d}, {y}", "{d} {b} {y}", "{a} {d}th, {y}", "{y}-{m:02d}-{d:02d}"]),
)
def test_date_forms_normalise_to_iso(day: object, shape: str) -> None:
    import datetime as dt

    assert isinstance(day, dt.date)
    assume(day.year >= 1000)  # a three-digit year is not written as a date
    text = shape.format(
        b=day.strftime("%B"), a=day.strftime("%b"), d=day.day, y=day.year, m=day.month
    )
    found_refs = get_extractor().extract(f"on {text} we")
    assert [(r.kind, r.key) for r in found_refs] == [("date", day.isoformat())], text


# --------------------------------------------------------------------------- grounded and fabricated


@pytest.mark.parametrize(
    ("answer", "evidence", "fabricated"),
    [
        ("CUST-12345", {"customer": "CUST-12345"}, "CUST-12354"),
        ("cust-12345", "Customer CUST-12345 found", "cust-1234"),
        ("DOC-1a2b3c4d", [{"id": "DOC-1a2b3c4d"}], "DOC-1a2b3c4e"),
        ("ZK3P9Q", {"reservations": ["ZK3P9Q"]}, "ZK3P9P"),
        ("HAT117", {"flight_number": "HAT117"}, "HAT171"),
        (
            "123e4567-e89b-12d3-a456-426614174000",
            {"id": "123e4567-e89b-12d3-a456-426614174000"},
            "123e4567-e89b-12d3-a456-426614174001",
        ),
        ("$1,834.20", {"total": 1834.2}, "$1,834.21"),
        ("$12,500.00", {"total": 12500.0}, "$12,600.00"),
        ("USD 12.5", "amount 12.50", "USD 12.4"),
        ("20%", {"discount": 0.2}, "25%"),
        ("March 5, 2026", {"date": "2026-03-05T10:00:00Z"}, "March 6, 2026"),
        ("2026-03-05", "on 5 March 2026", "2026-03-15"),
        ("https://ex.com/docs/a", {"url": "https://ex.com/docs/a/"}, "https://ex.com/docs/b"),
        ("a.b@ex.com", {"email": "A.B@ex.com"}, "a.c@ex.com"),
        ("[smith2020]", [{"key": "smith2020"}], "[smith2021]"),
        ("[DOC-3]", [{"id": "DOC-3", "text": "..."}], "[DOC-4]"),
    ],
)
def test_grounded_and_fabricated_variants(answer: str, evidence: object, fabricated: str) -> None:
    assert found(answer, evidence)
    assert not found(fabricated, evidence)


def test_json_keys_count_as_evidence() -> None:
    assert found("CUST-12345", {"CUST-12345": {"name": "x"}})


def test_token_boundaries() -> None:
    assert not found("INV-551", {"id": "INV-5510"})
    assert not found("INV-5510", {"id": "INV-551"})
    assert found("INV-551", "see INV-551-B")  # a whole hyphen part of a longer token
    assert not found("$5.10", {"price": 15.10})
    assert not found("HAT117", "HAT1170")


def test_numeric_citations_count_retrieved_documents() -> None:
    extractor = get_extractor()
    ref = extractor.extract("as [2] says")[0]
    docs = EvidenceItem("s1", "retrieval", "search", [{"t": "a"}, {"t": "b"}], "[...]", 0)
    assert EvidenceIndex([docs]).find(ref, 1) is not None
    ref3 = extractor.extract("as [3] says")[0]
    assert EvidenceIndex([docs]).find(ref3, 1) is None


def test_url_site_grounded_by_a_deeper_link() -> None:
    assert found("https://ex.com/docs", "https://ex.com/docs/page-1")
    assert not found("https://ex.com/doc", "https://ex.com/docs/page-1")


def test_amount_arithmetic_and_rounding() -> None:
    assert found("$1,034.00", {"price": 517, "passengers": 2})  # 2 x 517, two passengers
    assert not found("$1,034.00", [{"price": 517}])  # a product needs a count of the evidence
    assert found("$305", {"a": 152, "b": 103, "c": 50})  # 152 + 103 + 50
    assert found("$49", {"a": 152, "b": 103})  # difference
    assert found("$1,834", {"total": 1834.2})  # rounded as written
    assert not found("$1,835", {"total": 1834.2})
    assert not found("$1,834.00", {"total": 1834.2})  # written to the cent: must match the cent


def test_digits_of_dates_times_and_ids_are_not_amounts() -> None:
    evidence = {"flight": "HAT117", "at": "2026-03-05T10:00:00Z", "price": 767.91}
    assert not found("$117.00", evidence)
    assert not found("$10.00", evidence)
    assert not found("$777.91", evidence)  # 767.91 + 10, where 10 is only the hour of a time
    assert found("$777.91", {**evidence, "fee": 10})  # a real fee of 10 does add up
    assert found("-$50.00", {"refund": -50})


def test_evidence_order_is_respected() -> None:
    extractor = get_extractor()
    ref = extractor.extract("CUST-12345")[0]
    index = EvidenceIndex([item("nothing", 0), item("CUST-12345", 5)])
    assert index.find(ref, 3) is None
    match = index.find(ref, 6)
    assert match is not None and match.item.source == "s5"
    assert not index.truncated_before(6)
    assert EvidenceIndex([item("x", 0, truncated=True)]).truncated_before(1)


def test_closest_suggestion() -> None:
    extractor = get_extractor()
    index = EvidenceIndex([item({"id": "CUST-48213", "other": "INV-0001"}, 1)])
    closest = index.closest(extractor.extract("CUST-48231")[0], 9)
    assert closest is not None and closest[0] == "CUST-48213" and closest[1].source == "s1"
    money = EvidenceIndex([item({"total": 1834.2, "n": 3}, 1)])
    near = money.closest(extractor.extract("$1,843.20")[0], 9)
    assert near is not None and near[0] == "1834.2"


def test_a_uuid_without_decimal_digits_is_found() -> None:
    text = "Your ticket is deadbeef-dead-beef-dead-beefdeadbeef."
    assert refs(text) == [
        ("uuid", "deadbeef-dead-beef-dead-beefdeadbeef", "deadbeef-dead-beef-dead-beefdeadbeef")
    ]
