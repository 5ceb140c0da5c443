"""Time and size bounds: user patterns, our own detectors on hostile input, decompression bombs."""

from __future__ import annotations

import gzip
import json
import time
import zlib
from collections.abc import Callable

import pytest

from declaw_wasm.security import (
    DecodedTooLarge,
    GuardLimits,
    GuardPipeline,
    PIIConfig,
    SecurityPolicy,
    TokenMap,
    TransformationRule,
)
from declaw_wasm._guard.detectors import PIIDetector
from declaw_wasm._codings import BodyDecoder, decode_all, narrow_accept_encoding
from declaw_wasm.security.pii import ALL_PII_TYPES

from .conftest import JSON, pii_pipe, run_response


def test_redos_shaped_pattern_is_rejected() -> None:
    for p in (r"(a+)+$", r"(\w+\s?)*$", r"(?:x*)*y", r"(a|aa+)+b"):
        with pytest.raises(ValueError, match="nested quantifiers"):
            TransformationRule(match=p, replace="x")


def test_a_backtracking_pattern_that_passes_the_heuristic_stays_linear() -> None:
    # `(a|a)*c` is exponential for a backtracking engine (Python's re would not finish on this
    # input), passes declaw's heuristic, and runs in linear time on RE2.
    rule = TransformationRule(match=r"(a|a)*c", replace="X")
    pipe = GuardPipeline(SecurityPolicy(transformations=[rule]), TokenMap())
    body = json.dumps({"q": "a" * 200_000}).encode()
    t = time.perf_counter()
    out = pipe.request("h.example", "POST", "/", JSON, body)
    assert time.perf_counter() - t < 0.5
    assert out.body == body


@pytest.mark.parametrize("text", [
    "a" * 100_000, "1" * 100_000, "1-" * 50_000, "@" * 50_000 + "a", "a@" * 50_000,
    "a." * 50_000 + "@x", ("a" * 63 + "@") * 1500, "1 " * 50_000, "+1 " * 30_000,
    "f:" * 50_000, "::" * 50_000, "1." * 50_000, "sk-" + "a" * 100_000, "key=" + "a1" * 50_000,
    "[REDACTED_" * 10_000, "-----BEGIN PRIVATE KEY-----" + "a" * 100_000,
    " -1" * 33_000, "-4111111111111111e5," * 5_000, "1.0e1" * 20_000, "1234567.0e9 " * 8_000,
    ("1" * 40 + ".0 ") * 2_400, ("9" * 40 + "." + "0" * 40 + "e999 ") * 1_200,
])
def test_detectors_stay_fast_on_hostile_input(text: str) -> None:
    det = PIIDetector(ALL_PII_TYPES)
    t = time.perf_counter()
    det.find(text)
    assert time.perf_counter() - t < 1.0


def test_gzip_bomb_fails_the_request_not_the_host() -> None:
    bomb = gzip.compress(b"\0" * (64 << 20))
    pipe = GuardPipeline(SecurityPolicy(pii=PIIConfig(enabled=True, types=["email"])), TokenMap(),
                         limits=GuardLimits(max_request_body=8 << 20))
    out = pipe.request("h.example", "POST", "/", JSON + [("content-encoding", "gzip")], bomb)
    assert out.block and out.block.status == 413 and out.block.guard == "limits"
    with pytest.raises(DecodedTooLarge):
        decode_all("gzip", bomb, 1 << 20)


def test_response_bomb_is_cut() -> None:
    pipe = GuardPipeline(SecurityPolicy(pii=PIIConfig(enabled=True, types=["email"])), TokenMap(),
                         limits=GuardLimits(max_response_body=4 << 20))
    pipe.tokens.tokenize("email", "a@b.co")
    bomb = gzip.compress(b"x" * (32 << 20))
    f = pipe.response("h.example", "GET", "/", 200, [("content-type", "text/plain"),
                                                     ("content-encoding", "gzip")])
    from declaw_wasm.security import ResponseCut
    with pytest.raises(ResponseCut):
        for i in range(0, len(bomb), 4096):
            f.feed(bomb[i:i + 4096])


def test_every_coding_decodes_in_any_chunking() -> None:
    import brotli
    from backports import zstd
    data = json.dumps({"t": "x" * 5000 + " [REDACTED_EMAIL_1]"}).encode()
    for enc, raw in [("gzip", gzip.compress(data)), ("x-gzip", gzip.compress(data)),
                     ("deflate", zlib.compress(data)), ("deflate", zlib.compress(data)[2:-4]),
                     ("br", brotli.compress(data)), ("zstd", zstd.compress(data)),
                     ("gzip, br", brotli.compress(gzip.compress(data)))]:
        for step in (1, 7, 4096):
            feed = BodyDecoder(enc, limit=1 << 20).decode
            assert b"".join(feed(raw[i:i + step]) for i in range(0, len(raw), step)) == data
        pipe = pii_pipe()
        pipe.tokens.tokenize("email", "alice@example.com")
        _, got = run_response(pipe, raw, JSON + [("content-encoding", enc)])
        assert json.loads(got)["t"].endswith(" alice@example.com")


def test_unknown_response_encoding_passes_unrehydrated_or_blocks_a_scan() -> None:
    pipe = pii_pipe()
    pipe.tokens.tokenize("email", "a@b.co")
    f, got = run_response(pipe, b"\x1f\x9d...", JSON + [("content-encoding", "compress")])
    assert got == b"\x1f\x9d..." and any("not rehydrated" in n for n in f.notes)
    out = pipe.request("h.example", "POST", "/", JSON + [("content-encoding", "compress")], b"x")
    assert out.block and out.block.status == 415


def test_accept_encoding_narrowed_to_what_we_decode() -> None:
    assert narrow_accept_encoding("gzip;q=1.0, compress, identity;q=0.5") == "gzip"
    assert narrow_accept_encoding("br;q=0") == "identity"
    assert set(narrow_accept_encoding("*").split(", ")) == {"gzip", "deflate", "br", "zstd"}


def test_a_byte_range_of_an_encoded_answer_is_not_decoded() -> None:
    pipe = pii_pipe()
    pipe.tokens.tokenize("email", "a@b.co")
    part = gzip.compress(b'{"a": "[REDACTED_EMAIL_1]"}')[5:20]
    f, got = run_response(pipe, part, JSON + [("content-encoding", "gzip")], status=206)
    assert got == part and any("not rehydrated" in n for n in f.notes)


def test_the_guards_decoders_have_the_relays_bounds() -> None:
    """The guards decode with the egress relay's decoders (_codings.py), so a request
    body the guest codes gets the same bounds as an answer: at most 4 codings, a zstd window of
    at most 8 MiB (RFC 9659; the library alone allows 128 MiB), a standard brotli window (the
    large-window extension refused), 20 MiB of decoder memory per body (one largest standard
    window, not two) — each refused (415) naming the bound, before the decoder allocates it."""
    import brotli

    from declaw_wasm._codings import DECODER_BYTES, Meter, UndecodableBody

    text = b"mail alice@example.com " * 100
    cases = {
        "gzip, gzip, gzip, gzip, gzip": (_layers(text, [gzip.compress] * 5), "(the host undoes at most 4)"),
        "zstd": (zstd_compress(b"\0" * (9 << 20), window_log=24), "a zstd frame that needs a window over 8 MiB"),
        "br": (bytes([0x11]) + b"\0" * 64, "a brotli stream with a large window"),
        "br, br": (_layers(text, [lambda b: brotli.compress(b, lgwin=24)] * 2),
                   "its decoders would need 38 MiB of memory"),
    }
    pipe = pii_pipe(action="redact")
    for coding, (body, why) in cases.items():
        with pytest.raises(UndecodableBody, match=why.replace("(", r"\(").replace(")", r"\)")):
            decode_all(coding, body, 64 << 20)
        out = pipe.request("h.example", "POST", "/", [("content-type", "text/plain"),
                                                      ("content-encoding", coding)], body)
        assert out.block and out.block.status == 415 and why in out.block.body.decode(), (coding, out.block)
    meter = Meter()  # what one body's decoders were charged, and that it stays under the cap
    assert decode_all("br, gzip", gzip.compress(brotli.compress(text, lgwin=24)), 1 << 20, meter) == text
    assert meter.total == (16 << 20) - 16 + (3 << 20) + (64 << 10) <= DECODER_BYTES


def zstd_compress(data: bytes, window_log: int = 0) -> bytes:
    from declaw_wasm._codings import zstd_module

    zstd = zstd_module()
    options = {zstd.CompressionParameter.window_log: window_log} if window_log else None
    return bytes(zstd.compress(data, options=options))


def _layers(data: bytes, coders: list[Callable[[bytes], bytes]]) -> bytes:
    for code in coders:
        data = code(data)
    return data


def test_every_frame_of_a_zstd_request_body_is_scanned() -> None:
    """A zstd body may be several frames (RFC 8878 §3.1); the guards read only the first, and
    sent the body on unchanged when that was clean: PII in a second frame reached the upstream."""
    body = zstd_compress(b"hello, nothing to see here\n") + zstd_compress(b"mail alice@example.com\n")
    pipe = pii_pipe(action="block")
    out = pipe.request("h.example", "POST", "/", [("content-type", "text/plain"),
                                                  ("content-encoding", "zstd")], body)
    assert out.block and out.block.guard == "pii"
    assert decode_all("zstd", body, 1 << 20) == b"hello, nothing to see here\nmail alice@example.com\n"


def test_a_highly_compressed_body_decodes_whole() -> None:
    """A body whose input is all taken at once while its output comes 1 MiB a step: brotli's
    decoder still has output when it "can accept more data" (a guard read ~80 % of such a body)."""
    import brotli

    text = b"all is well with the quarterly figures, nothing to see here at all\n" * 64000
    for coding, raw in (("br", brotli.compress(text, quality=5)), ("gzip", gzip.compress(text)),
                        ("zstd", zstd_compress(text))):
        assert decode_all(coding, raw, 16 << 20) == text, coding


def test_a_body_cut_inside_its_coding_is_not_taken_for_whole() -> None:
    """A request body, or an answer, that stops inside a gzip member (or has anything but another
    member after one) is refused naming why, as the relay and the archive reader refuse it: a
    guard never scans part of a body as if it were all of it."""
    from declaw_wasm.security import ResponseCut

    whole = gzip.compress(b"".join(b"mail alice@example.com %d\n" % i for i in range(2000)))
    pipe = pii_pipe(action="redact")
    pipe.tokens.tokenize("email", "a@b.co")  # (the answer is read to rehydrate it)
    for body, why in ((whole[:len(whole) // 2], "the body ends inside a gzip stream"),
                      (whole + b"trailing", "data after a gzip member is not another gzip member")):
        out = pipe.request("h.example", "POST", "/", [("content-type", "text/plain"),
                                                      ("content-encoding", "gzip")], body)
        assert out.block and out.block.status == 415 and why in out.block.body.decode(), out.block
        f = pipe.response("h.example", "GET", "/", 200, [("content-type", "text/plain"),
                                                         ("content-encoding", "gzip")])
        with pytest.raises(ResponseCut, match=why):
            f.feed(body)
            f.end()
