"""The built-in detectors, type by type: what they must find and what they must leave."""

from __future__ import annotations

import pytest

from declaw_wasm._guard.detectors import PIIDetector
from declaw_wasm.security.pii import ALL_PII_TYPES

DET = PIIDetector(ALL_PII_TYPES)


def found(text: str, context: str | None = None) -> list[tuple[str, str]]:
    return [(text[d.start:d.end], d.type) for d in DET.find(text, context)]


@pytest.mark.parametrize("text, want", [
    # ssn: the SSA rules, samples still caught, labelled bare numbers
    ("ssn=123-45-6789", [("123-45-6789", "ssn")]),
    ("078-05-1120 and 123 45 6789", [("078-05-1120", "ssn"), ("123 45 6789", "ssn")]),
    ("000-12-3456 666-12-3456 912-34-5678 123-00-4567 123-45-0000", []),
    ("SSN: 123456789", [("123456789", "ssn")]),
    ("order 123456789", []),
    ("2024-12-3456", []),
    # credit_card: Luhn, separators, prefixes
    ("4111 1111 1111 1111", [("4111 1111 1111 1111", "credit_card")]),
    ("5500-0000-0000-0004 exp", [("5500-0000-0000-0004", "credit_card")]),
    ("amex 378282246310005.", [("378282246310005", "credit_card")]),
    ("4111 1111 1111 1111 12", [("4111 1111 1111 1111", "credit_card")]),
    ("4111 1111 1111 1112", []),  # Luhn fails
    ("1700000000000", []),  # a timestamp: no card prefix
    ("cvv: 123, CVC2 4567", [("123", "credit_card"), ("4567", "credit_card")]),
    # email
    ("mail alice.smith+tag@mail.example.co.uk now", [("alice.smith+tag@mail.example.co.uk",
                                                      "email")]),
    ("user@localhost, @handle, a@b", []),
    # phone
    ("+91 98210 34567", [("+91 98210 34567", "phone")]),
    ("+447911123456", [("+447911123456", "phone")]),
    ("call (415) 555-2671 or 415.555.2671", [("(415) 555-2671", "phone"),
                                             ("415.555.2671", "phone")]),
    ("1-800-555-1234", [("1-800-555-1234", "phone")]),
    ("020 7946 0958", [("020 7946 0958", "phone")]),
    ("98210 34567", [("98210 34567", "phone")]),
    ("routing 021000021, version 3.11.7, 2024-01-15", []),
    # ip_address
    ("from 203.0.113.7:443", [("203.0.113.7", "ip_address")]),
    ("2001:db8::8a2e:370:7334 and ::ffff:192.0.2.1", [("2001:db8::8a2e:370:7334", "ip_address"),
                                                       ("::ffff:192.0.2.1", "ip_address")]),
    ("0.0.0.0 127.0.0.1 ::1 255.255.255.255 a[1::2] 12:30:45 999.1.1.1", []),
    # api_key
    ("sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345", [
        ("sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345", "api_key")]),
    ("ghp_abcdefghijklmnopqrstuvwxyz0123456789AB", [
        ("ghp_abcdefghijklmnopqrstuvwxyz0123456789AB", "api_key")]),
    ("AKIAIOSFODNN7EXAMPLE", [("AKIAIOSFODNN7EXAMPLE", "api_key")]),
    ("Authorization: Bearer Zx9fQ2mP8wL4nR7tK1vBq3", [("Zx9fQ2mP8wL4nR7tK1vBq3", "api_key")]),
    ("password = 'hunter2hunter2hunter2'", []),  # low entropy, no digits mix
    ("risk-assessment-framework-guide", []),
    ("the key findings and token economy", []),
])
def test_detectors(text: str, want: list[str]) -> None:
    assert found(text) == want


def test_field_names_make_bare_values_pii() -> None:
    assert found("123", "card_cvv") == [("123", "credit_card")]
    assert found("123456789", "customer_ssn") == [("123456789", "ssn")]
    assert found("4155552671", "mobile_number") == [("4155552671", "phone")]
    assert found("Zx9fQ2mP8wL4nR7tK1vB", "client_secret") == [("Zx9fQ2mP8wL4nR7tK1vB", "api_key")]
    assert found("123", "quantity") == [] and found("hello world", "api_key") == []


def test_cvv_tokens_are_not_rehydratable() -> None:
    (d,) = DET.find("cvv 123")
    assert d.type == "credit_card" and d.rehydrate is False


def test_hidden_characters_do_not_hide_pii() -> None:
    text = "ssn 123\u200b-45-67\u206089 mail a\u200bli\ufeffce@example.com"
    assert found(text) == [("123\u200b-45-67\u206089", "ssn"),
                           ("a\u200bli\ufeffce@example.com", "email")]


def test_secret_placeholders_are_never_detections() -> None:
    ph = "sk-placeholder-0123456789abcdefghij"
    det = PIIDetector(ALL_PII_TYPES, never=[ph])
    assert det.find(f"key={ph} other sk-real0123456789abcdefghijklm") == \
        det.find(f"key={ph} other sk-real0123456789abcdefghijklm")[-1:]


# -- numbers: a sign or a float spelling hides nothing ---------------------------------------------

@pytest.mark.parametrize("text, want", [
    ("-4111111111111111", "-4111111111111111"),
    ("+4111111111111111", "+4111111111111111"),
    ("card: -4111111111111111.", "-4111111111111111"),
    ("x=-4111111111111111&y=1", "-4111111111111111"),
    ("[1,-4111111111111111]", "-4111111111111111"),
    ("(-378282246310005)", "-378282246310005"),
    ("-4111 1111 1111 1111", "4111 1111 1111 1111"),  # no number: the sign stays text
])
def test_a_card_number_is_found_whatever_its_sign(text: str, want: str) -> None:
    assert found(text) == [(want, "credit_card")]


def test_card_digits_written_out_are_redacted_with_the_whole_number() -> None:
    """Digits that are a card, written out, are a card whatever exponent follows (as before);
    the match takes the whole number, so a JSON number is replaced whole."""
    assert found("n=4111111111111111e5;") == [("4111111111111111e5", "credit_card")]
    assert found("[-4111111111111111E+2]") == [("-4111111111111111E+2", "credit_card")]


@pytest.mark.parametrize("text", [
    "4111111111111111.0", "4111111111111111.000", "4.111111111111111e15", "4.111111111111111E+15",
    "4111111111111111e0", "41111111111111110e-1", "0.4111111111111111e16", "-4.111111111111111e15",
])
def test_a_float_spelling_of_a_card_number_is_the_card(text: str) -> None:
    """A float that holds the card's integer exactly is the card (docs/guardrails.md#pii)."""
    assert found(f"pay {text} now") == [(text, "credit_card")]


@pytest.mark.parametrize("text", [
    "4111111111111111.5",  # no integer
    "6.623982102020842e16", "66239821020208420.0",  # a float past 2**53: rounding, no card
    "4111111111111111.0.1", "v4.111111111111111e15", "4.111111111111111e15x",  # not numbers
    "-4111111111111112", "4111111111111112.0", "4.111111111111112e15",  # Luhn fails
    "1-4111111111111111", "--4111111111111111", "0.4111111111111111",
    "1.7e15", "1700000000000.0",  # no card prefix (timestamps)
])
def test_numbers_that_are_no_card_stay_untouched(text: str) -> None:
    assert found(f"n {text} n") == []


@pytest.mark.parametrize("text, card", [
    ("order-4111111111111111", "4111111111111111"),
    ("ref-4111-1111-1111-1111", "4111-1111-1111-1111"),
    ("x-5555 5555 5555 4444", "5555 5555 5555 4444"),
    ("order4111111111111111", "4111111111111111"),
    ("order_4111111111111111", "4111111111111111"),
])
def test_a_card_number_after_a_word_is_found_whatever_joins_them(text: str, card: str) -> None:
    """After a letter a dash separates, as nothing or an underscore does; the dash stays."""
    assert found(f"n {text} n") == [(card, "credit_card")]


@pytest.mark.parametrize("text, want", [
    ("-123-45-6789", [("123-45-6789", "ssn")]),
    ("+123-45-6789", [("123-45-6789", "ssn")]),
    ("SSN: -123456789", [("-123456789", "ssn")]),
    ("SSN: 123456789.0", [("123456789.0", "ssn")]),
    ("-020 7946 0958", [("020 7946 0958", "phone")]),
    ("-98210 34567", [("98210 34567", "phone")]),
    ("-415-555-2671", [("415-555-2671", "phone")]),
    ("-10.20.30.40", [("10.20.30.40", "ip_address")]),
    ("cvv: -123", [("-123", "credit_card")]),
    ("x-123-45-6789 1-020 7946 0958", []),  # a dash after a letter or digit joins, as before
])
def test_a_sign_hides_no_other_numeric_pii(text: str, want: list[tuple[str, str]]) -> None:
    assert found(text) == want


def test_field_names_judge_a_number_by_the_integer_it_stands_for() -> None:
    assert found("-123456789", "ssn") == [("-123456789", "ssn")]
    assert found("123456789.0", "customer_ssn") == [("123456789.0", "ssn")]
    assert found("4.155552671e9", "phone") == [("4.155552671e9", "phone")]
    assert found("-123", "cvv") == [("-123", "credit_card")]
    assert found("123.0", "cvv") == [("123.0", "credit_card")]
    assert found("12.5", "cvv") == [] and found("-12345678", "ssn") == []
