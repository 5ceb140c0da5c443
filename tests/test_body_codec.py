"""The body codec (declaw_wasm/_codings.py), on its own: every coding however its bytes are cut,
bounded output whatever the compression ratio, stacked codings in order within one memory
budget, one way to read a body's end, and clear refusals. The relay, the guards and the archive
reader use this one codec (tests/egress, tests/guards, tests/volumes test it through them)."""

from __future__ import annotations

import gzip
import io
import tracemalloc
import zlib
from collections.abc import Callable

import brotli
import pytest

from declaw_wasm._codings import (
    DECODER_BYTES,
    BodyDecoder,
    CorruptBody,
    DecodedStream,
    DecodedTooLarge,
    Meter,
    UndecodableBody,
    decode_all,
    zstd_module,
)

zstd = zstd_module()
TEXT = b"".join(b"line %d: all is well with the quarterly figures\n" % i for i in range(3000))


def _deflate_raw(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


def _zstd(data: bytes, window_log: int = 0) -> bytes:
    options = {zstd.CompressionParameter.window_log: window_log} if window_log else None
    return bytes(zstd.compress(data, options=options))


half = len(TEXT) // 2
SKIPPABLE = b"\x50\x2a\x4d\x18" + (4).to_bytes(4, "little") + b"skip"
# name -> (Content-Encoding, coded body): every coding, and the forms each may legally take
CODED: dict[str, tuple[str, bytes]] = {
    "identity": ("identity", TEXT),
    "none": ("", TEXT),
    "gzip": ("gzip", gzip.compress(TEXT)),
    "x-gzip": ("x-gzip", gzip.compress(TEXT)),
    "gzip, two members": ("gzip", gzip.compress(TEXT[:half]) + gzip.compress(TEXT[half:])),
    "gzip, zero padding": ("gzip", gzip.compress(TEXT) + b"\0" * 9),
    "gzip, an empty member": ("gzip", gzip.compress(b"") + gzip.compress(TEXT)),
    "deflate, zlib-wrapped": ("deflate", zlib.compress(TEXT)),
    "deflate, raw": ("deflate", _deflate_raw(TEXT)),
    "br": ("br", brotli.compress(TEXT)),
    "br, the largest window": ("br", brotli.compress(TEXT, lgwin=24)),
    "zstd": ("zstd", _zstd(TEXT)),
    "zstd, frames and a skippable one": ("zstd", _zstd(TEXT[:half]) + SKIPPABLE + _zstd(TEXT[half:])),
    "zstd, an 8 MiB window": ("zstd", _zstd(TEXT, window_log=23)),
    "upper case": ("GZIP", gzip.compress(TEXT)),
    "stacked": ("deflate, gzip, br, zstd",
                _zstd(brotli.compress(gzip.compress(zlib.compress(TEXT))))),
}


def _pushed(coding: str, body: bytes, cut: int) -> bytes:
    dec = BodyDecoder(coding, limit=len(TEXT))
    out = b"".join(dec.decode(body[i:i + cut]) for i in range(0, len(body), cut))
    dec.end()
    return out


def _pulled(coding: str, body: bytes, cut: int, step: int) -> bytes:
    dec = BodyDecoder(coding)
    out = []
    for i in range(0, len(body), cut):
        dec.feed(body[i:i + cut])
        while dec.pending:
            before = dec.buffered
            piece = dec.take(step)
            assert len(piece) <= step
            if not piece and dec.buffered >= before:
                break
            out.append(piece)
    dec.end()
    return b"".join(out)


@pytest.mark.heavy
@pytest.mark.parametrize("name", list(CODED))
def test_every_coding_decodes_however_it_is_cut(name: str) -> None:
    coding, body = CODED[name]
    for cut in (1, 2, 3, 7, 512, 65536, len(body)):
        assert _pushed(coding, body, cut) == TEXT, (name, cut)
    for cut, step in ((1, 1), (5, 13), (4096, 1000), (len(body), 1 << 16)):
        assert _pulled(coding, body, cut, step) == TEXT, (name, cut, step)
    assert decode_all(coding, body, len(TEXT)) == TEXT


BOMB = b"\0" * (64 << 20)
BOMBS: dict[str, Callable[[], bytes]] = {
    "gzip": lambda: gzip.compress(BOMB, 9),
    "deflate": lambda: zlib.compress(BOMB, 9),
    "br": lambda: brotli.compress(BOMB, quality=5),
    "zstd": lambda: _zstd(BOMB),
    "gzip, gzip": lambda: gzip.compress(gzip.compress(BOMB, 9), 9),
}


@pytest.mark.parametrize("coding", list(BOMBS))
def test_decoding_is_bounded_whatever_the_ratio(coding: str) -> None:
    """64 MiB of zeros from a few KiB: each step gives at most what was asked, the host's memory
    stays at a step's worth, and a total limit stops the body once it is passed."""
    body = BOMBS[coding]()
    assert len(body) < (1 << 20)
    dec = BodyDecoder(coding)
    dec.feed(body)
    tracemalloc.start()
    try:
        produced = 0
        while dec.pending and produced < (16 << 20):
            piece = dec.take(64 << 10)
            assert len(piece) <= 64 << 10
            produced += len(piece)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert produced >= 16 << 20
    assert peak < 2 << 20, peak  # the step's output and the input held, not the body
    limited = BodyDecoder(coding, limit=1 << 20)
    with pytest.raises(DecodedTooLarge, match="larger than the 1048576-byte limit"):
        for i in range(0, len(body), 4096):
            limited.decode(body[i:i + 4096])
    with pytest.raises(DecodedTooLarge):
        decode_all(coding, body, 1 << 20)


@pytest.mark.heavy
def test_stacked_padding_costs_bounded_work() -> None:
    """Zero padding, empty members and skippable frames decode to nothing: stacked, a few KiB of
    them would make one step chew through gigabytes without output. The inner codings are fed at
    most twice what the body decoded to, plus 16 MiB. The bound is on this process's CPU time
    (a loaded machine stretched a bounded decode's wall time past 5 s): here the bounded decodes
    take 0.1, 4.2 and 3.2 CPU-s; unbounded, the last two would take about 20 and 13 (by their sizes)."""
    import time

    padded = gzip.compress(b"x") + b"\0" * (256 << 20)
    empty_members = gzip.compress(b"") * (4 << 20)
    skippable = SKIPPABLE * (8 << 20)
    for coding, body in (("gzip, gzip", gzip.compress(padded, 1)),
                         ("gzip, gzip", gzip.compress(empty_members, 1)),
                         ("zstd, gzip", gzip.compress(skippable, 1))):
        assert len(body) < 2 << 20
        dec = BodyDecoder(coding)
        dec.feed(body)
        started = time.process_time()
        with pytest.raises(UndecodableBody, match="inner codings hold over twice what they decode to"):
            while dec.pending:
                dec.take(64 << 10)
        assert time.process_time() - started < 8
    # a real stacked body, incompressible inside, is fed about once what it decodes to
    noise = bytes(zlib.crc32(i.to_bytes(4, "little")) & 0xFF for i in range(1 << 20)) * 20
    assert decode_all("gzip, gzip", gzip.compress(gzip.compress(noise, 1), 1), len(noise)) == noise


@pytest.mark.parametrize("coding, unit, count", [("gzip", gzip.compress(b""), 200_000),
                                                 ("zstd", SKIPPABLE, 100_000)])
def test_many_tiny_members_or_frames_cost_linear_time(coding: str, unit: bytes, count: int) -> None:
    """Each gzip member or zstd frame ended with a copy of the rest of the body handed back:
    4 MB of empty gzip members took 34 s, 1.2 MB of skippable zstd frames 12 s."""
    import time

    body = unit * count + (gzip.compress(TEXT) if coding == "gzip" else _zstd(TEXT))
    started = time.perf_counter()
    assert decode_all(coding, body, len(TEXT)) == TEXT
    assert time.perf_counter() - started < 3


def test_stacked_codings_decode_in_order_within_one_budget() -> None:
    """`Content-Encoding: gzip, br` was gzipped first: br is undone first. All of a body's
    decoders charge one meter, before they allocate, and the meter reserves the total."""
    reserved: list[int] = []
    meter = Meter(reserve=reserved.append)
    body = brotli.compress(gzip.compress(TEXT), lgwin=22)
    assert decode_all("gzip, br", body, len(TEXT), meter) == TEXT
    assert reserved == [(4 << 20) - 16 + (3 << 20), (4 << 20) - 16 + (3 << 20) + (64 << 10)]
    assert meter.total == reserved[-1] <= DECODER_BYTES
    with pytest.raises(CorruptBody):  # the other order is another body
        decode_all("br, gzip", body, len(TEXT))
    two_large = brotli.compress(brotli.compress(TEXT, lgwin=24), lgwin=24)
    meter = Meter()
    with pytest.raises(UndecodableBody, match="its decoders would need 38 MiB of memory"):
        decode_all("br, br", two_large, len(TEXT), meter)
    assert meter.total == (16 << 20) - 16 + (3 << 20)  # the second was refused before it was made
    refusing = Meter(reserve=lambda total: (_ for _ in ()).throw(MemoryError("no room")))
    with pytest.raises(MemoryError, match="no room"):  # the budget's refusal reaches the caller
        decode_all("gzip", gzip.compress(TEXT), len(TEXT), refusing)


# name -> (Content-Encoding, a body that is not one, what the error names)
NOT_A_BODY: dict[str, tuple[str, bytes, str]] = {
    "gzip, cut": ("gzip", gzip.compress(TEXT)[:-3], "ends inside a gzip stream"),
    "gzip, cut in a second member": ("gzip", gzip.compress(TEXT) + gzip.compress(TEXT)[:20],
                                     "ends inside a gzip stream"),
    "gzip, data after it": ("gzip", gzip.compress(TEXT) + b"trailing", "not another gzip member"),
    "gzip, a bad CRC": ("gzip", gzip.compress(TEXT)[:-8] + b"\0\0\0\0" + gzip.compress(TEXT)[-4:],
                        "incorrect data check"),
    "gzip, a bad length": ("gzip", gzip.compress(TEXT)[:-4] + b"\0\0\0\0", "incorrect length check"),
    "deflate, cut": ("deflate", zlib.compress(TEXT)[:-2], "ends inside a deflate stream"),
    "deflate, data after it": ("deflate", zlib.compress(TEXT) + b"\0", "after the end of the deflate"),
    "deflate, a bad Adler-32": ("deflate", zlib.compress(TEXT)[:-1] + b"\0", "incorrect data check"),
    "br, cut": ("br", brotli.compress(TEXT)[:-2], "ends inside the br stream"),
    "br, data after it": ("br", brotli.compress(TEXT) + b"x", "decoder failed"),
    "zstd, cut": ("zstd", _zstd(TEXT)[:-2], "ends inside a zstd frame"),
    "zstd, data after it": ("zstd", _zstd(TEXT) + b"trailing", "Unknown frame descriptor"),
    "not gzip at all": ("gzip", b"hello, world", "incorrect header check"),
}


@pytest.mark.parametrize("name", list(NOT_A_BODY))
def test_a_body_must_end_where_its_coding_ends(name: str) -> None:
    """One reading of a body's end for every reader: gzip members back to back (zero padding
    allowed), one deflate or br stream, zstd frames; a cut, a bad checksum or anything after the
    end is refused naming the coding — never dropped, never a short body taken for whole."""
    coding, body, why = NOT_A_BODY[name]
    for cut in (1, 7, len(body)):
        dec = BodyDecoder(coding)
        with pytest.raises(CorruptBody, match=why) as caught:
            for i in range(0, len(body), cut):
                dec.decode(body[i:i + cut])
            dec.end()
        assert str(caught.value).startswith(f"Content-Encoding {coding!r}: "), caught.value


def test_unknown_or_too_many_codings_are_refused_by_name() -> None:
    with pytest.raises(UndecodableBody, match=r"Content-Encoding 'compress' is not one the host "
                                              r"can decode \(it decodes gzip, deflate, br, zstd\)"):
        BodyDecoder("gzip, compress")
    with pytest.raises(UndecodableBody, match=r"5 Content-Encodings are stacked \(the host undoes at most 4\)"):
        BodyDecoder(["gzip"] * 5)
    later = BodyDecoder("xyz", refuse_on_data=True)  # an empty body passes, a byte is refused
    later.feed(b"")
    assert not later.pending and later.take(10) == b""
    later.feed(b"x")
    with pytest.raises(UndecodableBody, match="'xyz'"):
        later.take(10)
    assert BodyDecoder("identity, ").identity and BodyDecoder(None).identity


def test_windows_over_the_bounds_are_refused_before_anything_is_allocated() -> None:
    """zstd's window (RFC 9659: 8 MiB) and br's (standard, 16 MiB; the large-window extension
    refused) are read from the coding's header: refused before a decoder exists."""
    for coding, body, why in (
        ("zstd", _zstd(b"\0" * (9 << 20), window_log=24), "a zstd frame that needs a window over 8 MiB"),
        ("br", bytes([0x11]) + b"\0" * 64, "a brotli stream with a large window"),
    ):
        meter = Meter()
        with pytest.raises(UndecodableBody, match=why):
            decode_all(coding, body, 64 << 20, meter)
        assert meter.total == 0


def test_a_stream_reads_what_the_codec_decodes_and_checks_its_end() -> None:
    """`DecodedStream` (the archive reader's) gives the same bytes, and a cut body raises at its
    end rather than reading as a short one."""
    for coding, body in (CODED["gzip, two members"], CODED["zstd, frames and a skippable one"]):
        stream = io.BufferedReader(DecodedStream(io.BytesIO(body), BodyDecoder(coding), chunk=999))
        assert stream.read() == TEXT
        cut = io.BufferedReader(DecodedStream(io.BytesIO(body[:-5]), BodyDecoder(coding)))
        with pytest.raises(CorruptBody, match="ends inside"):
            cut.read()
