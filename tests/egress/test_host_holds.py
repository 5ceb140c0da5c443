"""What the relay keeps beyond its windows — a body's decoder windows and state, a request body
or an answer a content guard holds whole — is bounded per body and counted in the sandbox's and
the process's budgets; past a bound the guest gets a clear error naming it (502 for an answer
over its own bounds, 413 for a request body over its own, 503 with Retry-After when the
sandbox's or the process's budget is full), and everything is given back when the exchange ends.
Answers that are within the bounds get through whole, however they are cut into pieces.

Pure: the relay (declaw_wasm/_egress/http.py) fed real encoders' bytes, as a connection feeds it
(tests/egress/test_backpressure.py drives the same from guest code, in this process and in a
process pool's worker). docs/security.md, "Upstream servers and the relay".
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from typing import Any, Callable, Optional

import brotli
import h11
import pytest

from declaw_wasm import Limits
from declaw_wasm._egress.budget import Budget, Hold
from declaw_wasm._guard.contract import ContentGuard, IdentityGuard
from declaw_wasm._egress.http import HttpRelay, RelayContext
from declaw_wasm._egress.policy import parse_rule
from declaw_wasm._egress.secrets import Injection, SecretBook
from declaw_wasm.security import GuardPipeline, InjectionDefenseConfig, PIIConfig, SecurityPolicy

from .upstream import zstd_compress

MiB = 1 << 20
SECRET = "sk-test-0123456789abcdefXYZ"  # its URL-encoded spelling is the longest: 26 bytes held back
BOOK = SecretBook([Injection("TOKEN", SECRET, "declaw-secret-x", [parse_rule("example.com", "allow_out")])])
CODERS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress, "deflate": zlib.compress, "raw-deflate": lambda b: zlib.compress(b)[2:-4],
    "br": brotli.compress, "zstd": zstd_compress, "gzip, br": lambda b: brotli.compress(gzip.compress(b)),
    "br, zstd, deflate": lambda b: zlib.compress(zstd_compress(brotli.compress(b))),
}


def relay(budget: Optional[Budget] = None, secrets: SecretBook = BOOK, guard: Optional[ContentGuard] = None,
          request: bytes = b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", **ctx: Any) -> HttpRelay:
    """A relay for one connection to example.com, its hold counted in `budget`, with the
    guest's `request` fed."""
    made = HttpRelay(RelayContext(name="example.com", port=80, address="127.0.0.1", tls=False, rule="test",
                                  secrets=secrets, guard=guard or IdentityGuard(), record=lambda event: None,
                                  hold=Hold(budget), **ctx))
    made.feed_guest(request)
    return made


def answer(body: bytes, coding: str = "", ctype: str = "application/octet-stream") -> bytes:
    coded = f"Content-Encoding: {coding.replace('raw-', '')}\r\n" if coding else ""
    return (f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\n{coded}Content-Length: {len(body)}\r\n\r\n"
            ).encode() + body


def received(made: HttpRelay) -> tuple[int, bytes, bool]:
    """(status, body, ended cleanly) of what the guest got so far, as a client parses it."""
    client = h11.Connection(h11.CLIENT)
    client.send(h11.Request(method="GET", target="/", headers=[("Host", "example.com")]))
    client.send(h11.EndOfMessage())
    if made.to_guest:  # (b"" would say the connection closed)
        client.receive_data(bytes(made.to_guest))
    status, body, ended = 0, b"", False
    while True:
        event = client.next_event()
        if event is h11.NEED_DATA or event is h11.PAUSED:
            return status, body, ended
        if isinstance(event, h11.Response):
            status = event.status_code
        elif isinstance(event, h11.Data):
            body += bytes(event.data)
        elif isinstance(event, h11.EndOfMessage):
            return status, body, True


def budgets(keep: int = 64 * MiB, process_keep: int = 1 << 30) -> tuple[Budget, Budget]:
    process = Budget(1 << 30, None, process_keep, "this process")
    return Budget(32 * MiB, process, keep, "this sandbox"), process


# -- answers that are within the bounds get through ------------------------------------------------

@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "zstd", "gzip, br"])
def test_a_coded_answer_shorter_than_the_scrubbers_hold_back_reaches_the_guest_whole(coding: str) -> None:
    """With secrets on, the scrubber holds back the last (longest spelling - 1) bytes and a coded
    answer's head waits for its first decoded bytes: an answer shorter than that is all tail, and
    its head must still go out first (h11 refused the tail before the head: a 502)."""
    for text in (b'{"ok":true}', b""):
        made = relay()
        made.feed_upstream(answer(CODERS[coding](text), coding))
        assert received(made) == (200, text, True), bytes(made.to_guest)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("coding", list(CODERS))
def test_a_coded_answer_decodes_however_it_is_cut(coding: str) -> None:
    """Byte by byte (a deflate body's first byte alone cannot say whether it is zlib-wrapped: the
    relay spun on it forever, holding the guest's thread), in odd pieces, and whole."""
    text = json.dumps({"t": "quarterly figures " * 3000, "key": SECRET}).encode()
    coded = CODERS[coding](text)
    wire = answer(coded, coding, "application/json")
    for step in (1, 7, 4096, len(wire)):
        budget, _ = budgets()
        made = relay(budget)
        got = bytearray()
        for i in range(0, len(wire), step):
            made.feed_upstream(wire[i:i + step])
            assert made.held_in() <= made.ctx.out_room + len(wire)
            got += made.to_guest
            made.to_guest.clear()
            made.resume()
        made.to_guest[:0] = got
        status, body, ended = received(made)
        assert (status, ended) == (200, True), (step, bytes(made.to_guest[:300]))
        assert body == text.replace(SECRET.encode(), b"declaw-secret-x"), step
        assert budget.kept == 0 and made.ctx.hold.total == 0  # given back at the end


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "zstd", "gzip, br"])
def test_a_highly_compressed_answer_reaches_the_guest_whole(coding: str) -> None:
    """2 MiB that compress to a few hundred bytes: the decoder takes all its input at once and
    then gives its output 64 KiB at a time. brotli's "can accept more data" is not "has no more
    output": the relay stopped there, and the guest got a clean end after ~80 % of the answer."""
    text = b"all is well with the quarterly figures, nothing to see here at all\n" * 32000
    made = relay()
    made.feed_upstream(answer(CODERS[coding](text), coding, "text/plain"))
    got = bytearray()
    while made.to_guest:
        got += made.to_guest
        made.to_guest.clear()
        made.resume()
    made.to_guest[:0] = got
    assert received(made) == (200, text, True)


# -- decoder memory: per body, per sandbox, per process ---------------------------------------------

def _brotli_header(bits_byte: int, body: bytes = b"") -> bytes:
    return bytes([bits_byte]) + body


UNDECODABLE = {  # what the answer is: (Content-Encoding, body, what the 502 says)
    "two largest br windows": ("br, br", brotli.compress(brotli.compress(os.urandom(4096), lgwin=24), lgwin=24),
                               "its decoders would need 38 MiB of memory (br with a 16 MiB window: 19 MiB), "
                               "over the 20 MiB the host gives one body's decoders"),
    "three default br": ("br, br, br", brotli.compress(brotli.compress(brotli.compress(b"x"))),
                         "its decoders would need 21 MiB of memory (br with a 4 MiB window: 7 MiB)"),
    "large-window br": ("br", _brotli_header(0x11, b"\x30" * 64),
                        "a brotli stream with a large window (an extension of up to 1 GiB"),
    "zstd window": ("zstd", zstd_compress(b"\0" * (9 * MiB), window_log=24),
                    "a zstd frame that needs a window over 8 MiB (RFC 9659's limit for HTTP)"),
    "zstd window inside gzip": ("zstd, gzip", gzip.compress(zstd_compress(b"\0" * (9 * MiB), window_log=24)),
                                "a zstd frame that needs a window over 8 MiB"),
    "five codings": ("gzip, gzip, gzip, gzip, gzip", b"\x1f\x8b" + b"\0" * 30,
                     "(the host undoes at most 4)"),
}


@pytest.mark.parametrize("case", list(UNDECODABLE))
@pytest.mark.parametrize("guarded", [False, True], ids=["secrets", "guards"])
def test_a_bodys_decoders_are_held_to_their_bounds(case: str, guarded: bool) -> None:
    """Windows are read from each coding's own header, before its decoder allocates anything:
    a 502 naming the bound, nothing kept; the same with only a guard reading the answer (no
    secrets), as its head waits for the first decoded bytes too."""
    coding, body, why = UNDECODABLE[case]
    budget, process = budgets()
    guard = GuardPipeline(SecurityPolicy(injection_defense=InjectionDefenseConfig(
        enabled=True, action="log_only", domains=["example.com"]))) if guarded else None
    made = relay(budget, SecretBook() if guarded else BOOK, guard)
    made.feed_upstream(answer(body, coding, "text/plain"))
    status, text, _ = received(made)
    assert status == 502 and why in text.decode(), text
    assert made.guest_done and budget.kept == process.kept == 0


def test_decoder_windows_are_counted_in_the_sandboxs_and_the_processs_budgets() -> None:
    """Each answer's decoders are reserved in its sandbox's budget (64 MiB of kept bytes) and the
    process's: a brotli answer at the largest standard window costs 19 MiB, so three fit a
    sandbox and the fourth gets a 503 (Retry-After) naming the sandbox's bound; once one ends, its
    bytes are given back and another fits. A process's bound is named the same way."""
    body = brotli.compress(os.urandom(256 << 10), quality=0, lgwin=24)
    budget, process = budgets()
    made = [relay(budget) for _ in range(4)]
    half = len(answer(body, "br")) - len(body) // 2
    for one in made:
        one.feed_upstream(answer(body, "br")[:half])
    assert [received(one)[0] for one in made] == [200, 200, 200, 503]
    refusal = bytes(made[3].to_guest).decode("latin-1")
    assert "Retry-After: 1" in refusal and "this sandbox's egress keeps 57 MiB already" in refusal
    assert "19 MiB more would pass its 64 MiB" in refusal
    one_br = 19 * MiB - 16  # the window is (1 << WBITS) - 16 bytes
    assert budget.kept == process.kept == 3 * one_br
    made[0].feed_upstream(answer(body, "br")[half:])  # the first answer ends
    while made[0].to_guest and not received(made[0])[2]:
        made[0].to_guest.clear()
        made[0].resume()
    assert budget.kept == 2 * one_br
    late = relay(budget)
    late.feed_upstream(answer(body, "br"))
    assert received(late)[0] == 200
    for one in (*made, late):
        one.close_audit()
        one.ctx.hold.clear(closing=True)
    assert budget.kept == process.kept == 0
    small, process = budgets(process_keep=20 * MiB)
    first, second = relay(small), relay(small)
    for one in (first, second):
        one.feed_upstream(answer(body, "br")[:half])
    assert received(first)[0] == 200 and received(second)[0] == 503
    assert "this process's egress keeps 19 MiB already" in bytes(second.to_guest).decode()


# -- what a content guard holds whole ----------------------------------------------------------------

def _pii_guard(body_bytes: int = 16 * MiB) -> GuardPipeline:
    guard = GuardPipeline(SecurityPolicy(pii=PIIConfig(enabled=True, types=["email"])))
    guard.apply_limits(Limits(net_guard_body_bytes=body_bytes))
    return guard


def _post(size: int, coding: str = "") -> bytes:
    coded = f"Content-Encoding: {coding}\r\n" if coding else ""
    return (f"POST /v1 HTTP/1.1\r\nHost: example.com\r\nContent-Type: text/plain\r\n{coded}"
            f"Content-Length: {size}\r\n\r\n").encode()


def test_request_bodies_a_guard_holds_are_counted_in_the_sandboxs_budget() -> None:
    """A request body a guard must see whole is kept as it arrives: over its own bound
    (Limits.net_guard_body_bytes) a 413; over the sandbox's budget, with other connections'
    bodies held, a 503 naming it; a coded body keeps room for the guard's decoded copy too;
    everything is given back once the body went upstream."""
    budget, process = budgets()
    guard = _pii_guard(16 * MiB)
    chunk = b"a" * MiB
    held = []
    for _ in range(5):
        made = relay(budget, SecretBook(), guard, request=_post(15 * MiB))
        for _ in range(14):
            made.feed_guest(chunk)
        held.append(made)
    assert [received(one)[0] for one in held] == [0, 0, 0, 0, 503]
    refusal = bytes(held[4].to_guest).decode()
    assert "the request cannot be held for the content guard now: this sandbox's egress keeps" in refusal
    assert "(a request body the content guard must see whole: 9 MiB)" in refusal
    assert "Retry-After: 1" in refusal and budget.kept == 4 * 14 * MiB
    too_big = relay(budget, SecretBook(), _pii_guard(1 * MiB), request=_post(2 * MiB), guard_body_bytes=MiB)
    too_big.feed_guest(chunk + chunk)
    assert received(too_big)[0] == 413 and "Limits.net_guard_body_bytes" in bytes(too_big.to_guest).decode()
    first = held[0]
    mail = b" write to alice@example.com"
    first.feed_guest(chunk[:-len(mail)] + mail)  # the body is whole: the guard reads it, it goes on
    assert b"[REDACTED_EMAIL_1]" in bytes(first.to_upstream) and budget.kept == 3 * 14 * MiB
    for one in held[1:]:
        one.close_audit()
        one.ctx.hold.clear(closing=True)
    assert budget.kept == process.kept == 0
    coded = gzip.compress(b"mail alice@example.com")
    made = relay(budget, SecretBook(), guard, request=_post(len(coded), "gzip"))
    seen: list[int] = []
    original = guard.request

    def request(*a: Any) -> Any:
        seen.append(budget.kept)
        return original(*a)

    guard.request = request  # type: ignore[method-assign, assignment]  # this instance only
    made.feed_guest(coded)
    assert seen == [len(coded) + 16 * MiB + 20 * MiB] and budget.kept == 0
    assert b"[REDACTED_EMAIL_1]" in bytes(made.to_upstream)


@pytest.mark.heavy
def test_an_answer_held_for_an_injection_scan_is_counted_in_the_sandboxs_budget() -> None:
    """A blocking scan holds an answer back up to Limits.net_guard_scan_bytes (4 MiB): kept as it
    grows, given back as it is released; with the sandbox's budget full, a 503 naming it (the
    head was held back, so the guest gets a clear answer, not a cut one)."""
    guard = GuardPipeline(SecurityPolicy(injection_defense=InjectionDefenseConfig(
        enabled=True, action="block", domains=["example.com"])))
    text = b"all is well with the quarterly figures\n" * (100 << 10)  # ~3.8 MiB: held whole
    budget, process = budgets()
    made = relay(budget, SecretBook(), guard)
    made.feed_upstream(answer(text, ctype="text/plain")[:3 * MiB])
    assert made.to_guest == bytearray() and 2 * MiB < budget.kept <= 3 * MiB
    made.feed_upstream(answer(text, ctype="text/plain")[3 * MiB:])
    assert received(made) == (200, text, True) and budget.kept == 0
    full, _ = budgets(keep=1 * MiB)
    made = relay(full, SecretBook(), guard)
    made.feed_upstream(answer(text, ctype="text/plain")[:3 * MiB])
    status, body, _ = received(made)
    assert status == 503 and b"cannot be held back for the content guard now" in body
    assert full.kept == 0


def test_an_unfinished_event_a_rehydrating_guard_holds_is_counted() -> None:
    """Rehydrating an SSE answer, the guard holds an event until its end (up to 1 MiB): counted
    as it grows, given back once the event is whole."""
    guard = _pii_guard()
    guard.tokens.tokenize("email", "alice@example.com")
    budget, _ = budgets()
    made = relay(budget, SecretBook(), guard)
    event = b"data: " + b"x" * (512 << 10)
    made.feed_upstream(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                       + b"%x\r\n%s\r\n" % (len(event), event))
    assert (512 << 10) < budget.kept < (520 << 10)
    made.feed_upstream(b"2\r\n\n\n\r\n0\r\n\r\n")
    status, body, ended = received(made)
    assert (status, ended) == (200, True) and body == event + b"\n\n" and budget.kept == 0
