"""PIIHandler (declaw's host helper) and the token map's contract."""

from __future__ import annotations

import json
import threading

import pytest

from declaw_wasm.security import PIIHandler, TokenMap


def test_anonymize_deanonymize_round_trip() -> None:
    h = PIIHandler()
    texts, rmap = h.anonymize(["John's SSN 123-45-6789, mail john@example.com",
                               "again john@example.com"])
    assert texts == ["John's SSN [REDACTED_SSN_1], mail [REDACTED_EMAIL_1]",
                     "again [REDACTED_EMAIL_1]"]
    assert rmap == {"[REDACTED_SSN_1]": "123-45-6789", "[REDACTED_EMAIL_1]": "john@example.com"}
    assert PIIHandler.deanonymize(texts[0], rmap) == "John's SSN 123-45-6789, mail john@example.com"
    assert PIIHandler.deanonymize("[REDACTED_EMAIL_9] stays", rmap) == "[REDACTED_EMAIL_9] stays"
    # declaw-style maps with free-form keys (longest first) still work
    assert PIIHandler.deanonymize("REDACTED_PERSON_10 REDACTED_PERSON_1",
                                  {"REDACTED_PERSON_1": "A", "REDACTED_PERSON_10": "B"}) == "B A"


def test_deanonymize_stream_holds_back_only_partial_tokens() -> None:
    rmap = {"[REDACTED_EMAIL_1]": "a@b.co"}
    chunks = ["Hi ", "[RED", "ACTED", "_EMAIL_1", "] ok [", "x]"]
    out = list(PIIHandler.deanonymize_stream(chunks, rmap))
    assert "".join(out) == "Hi a@b.co ok [x]"
    assert out[0] == "Hi "  # not delayed


def test_entities_take_pii_types_or_presidio_names() -> None:
    h = PIIHandler(entities=["EMAIL_ADDRESS"])
    assert h.anonymize(["a@b.co 123-45-6789"])[0] == ["[REDACTED_EMAIL_1] 123-45-6789"]
    with pytest.raises(ValueError, match="PERSON"):
        PIIHandler().anonymize(["x"], entities=["PERSON"])


def test_token_map_serialises_and_keeps_counting() -> None:
    tm = TokenMap()
    a = tm.tokenize("email", "a@b.co")
    cvv = tm.tokenize("credit_card", "123", rehydrate=False)
    again = TokenMap.from_dict(json.loads(json.dumps(tm.to_dict())))
    assert again == tm and again.lookup(a) == "a@b.co" and again.lookup(cvv) is None
    assert again.tokenize("email", "c@d.co") == "[REDACTED_EMAIL_2]"
    assert again.tokenize("email", "a@b.co") == a
    assert "a@b.co" not in repr(tm)
    with pytest.raises(ValueError):
        TokenMap.from_dict({"version": 1, "entries": [["bogus", "email", "x", True]]})


def test_token_map_is_bounded_and_thread_safe() -> None:
    tm = TokenMap(max_entries=1000)
    results: list[str] = []

    def work(k: int) -> None:
        for i in range(500):
            results.append(tm.tokenize("email", f"u{i % 300}@x.co"))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(tm) == 300 and len(set(results)) == 300
    small = TokenMap(max_entries=1)
    small.tokenize("email", "a@b.co")
    assert small.tokenize("email", "c@d.co") == "[REDACTED_EMAIL]" and small.overflowed
