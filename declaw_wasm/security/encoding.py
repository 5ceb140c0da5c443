"""Content-Encoding: decode what the guards must read, with a bound on the decoded size.

gzip, x-gzip and deflate use the standard library's zlib. br uses Google's `brotli` bindings
(the reference implementation; 1.2 can bound each call's output) and zstd the standard library's
`compression.zstd` on Python 3.14+ or its official backport `backports.zstd` before that (the
same zlib-like API, with `max_length`). Both come with the `declaw-wasm[guards]` extra and are
imported on first use. Without them the guards ask upstreams only for what they can decode
(`Accept-Encoding` is narrowed), and a body in an encoding they cannot decode is refused when a
guard must read it — never passed unscanned.

Every decoder runs with `max_length`, so a decompression bomb raises `DecodedTooLarge` after at
most `limit` bytes of output instead of filling the host's memory.
"""

from __future__ import annotations

import importlib
import zlib
from collections.abc import Callable
from functools import lru_cache
from typing import Any

IDENTITY = ("identity", "")


class EncodingError(ValueError):
    """A body could not be decoded (unknown coding, missing decoder, corrupt data)."""


class DecodedTooLarge(EncodingError):
    """A decoded body went past its size limit."""


def _optional(*names: str) -> Any:
    """The first of these modules that imports, or None (imported lazily, on first use)."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


@lru_cache(maxsize=1)
def _zstd_module() -> Any:
    return _optional("compression.zstd", "backports.zstd")  # stdlib from Python 3.14


@lru_cache(maxsize=1)
def _brotli_module() -> Any:
    brotli = _optional("brotli")
    if brotli is None:
        return None
    return brotli if hasattr(brotli.Decompressor(), "can_accept_more_data") else None


@lru_cache(maxsize=1)
def available_codings() -> tuple[str, ...]:
    """The content codings this host can decode, best first."""
    out = []
    if _zstd_module() is not None:
        out.append("zstd")
    if _brotli_module() is not None:
        out.append("br")
    return (*out, "gzip", "deflate")


def parse_codings(header: str | None) -> list[str]:
    """`Content-Encoding: gzip, br` -> ['gzip', 'br'] (applied in that order; identity dropped)."""
    if not header:
        return []
    return [c.strip().lower() for c in header.split(",") if c.strip().lower() not in IDENTITY]


def narrow_accept_encoding(value: str | None) -> str:
    """The client's Accept-Encoding restricted to codings we decode (`identity` if none left)."""
    ours = available_codings()
    if value is None:
        return "identity"
    kept: list[str] = []
    for item in value.split(","):
        name = item.split(";")[0].strip().lower()
        q = item.split(";", 1)[1].strip() if ";" in item else ""
        if name == "*":
            kept.extend(c for c in ours if c not in kept)
        elif name in ("x-gzip",):
            name = "gzip"
        if name in ours and name not in kept and not q.replace(" ", "").startswith("q=0"):
            kept.append(name)
    return ", ".join(kept) if kept else "identity"


class _Decoder:
    """One coding, incremental: `feed(data, room)` returns at most `room` bytes at a time."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self._pending = b""
        self._impl: Any
        self._eof = False
        if coding in ("gzip", "x-gzip"):
            self._impl = zlib.decompressobj(16 + zlib.MAX_WBITS)
            self._step = self._zlib_step
        elif coding == "deflate":  # zlib-wrapped as the RFC says, raw deflate as some servers send
            self._impl = None
            self._step = self._deflate_step
        elif coding == "br":
            brotli = _brotli_module()
            if brotli is None:
                raise EncodingError("br body but no brotli decoder: install declaw-wasm[guards]")
            self._impl = brotli.Decompressor()
            self._step = self._brotli_step
        elif coding == "zstd":
            zstd = _zstd_module()
            if zstd is None:
                raise EncodingError("zstd body but no zstd decoder: install declaw-wasm[guards]")
            self._impl = zstd.ZstdDecompressor()
            self._step = self._zlib_like_step
        else:
            raise EncodingError(f"unsupported Content-Encoding: {coding!r}")

    def _zlib_step(self, data: bytes, room: int) -> bytes:
        d = self._impl
        if d.eof:  # concatenated gzip members
            rest = d.unused_data + data
            if not rest.strip(b"\x00"):
                return b""
            self._impl = d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            data = rest
        out = d.decompress(self._pending + data, room)
        self._pending = d.unconsumed_tail
        return bytes(out)

    def _deflate_step(self, data: bytes, room: int) -> bytes:
        if self._impl is None:
            head = self._pending + data
            if len(head) < 2:
                self._pending = head
                return b""
            zlib_wrapped = (head[0] & 0x0F) == 8 and (head[0] << 8 | head[1]) % 31 == 0
            self._impl = zlib.decompressobj(zlib.MAX_WBITS if zlib_wrapped else -zlib.MAX_WBITS)
            self._pending = b""
            data = head
        out = self._impl.decompress(self._pending + data, room)
        self._pending = self._impl.unconsumed_tail
        return bytes(out)

    def _brotli_step(self, data: bytes, room: int) -> bytes:
        d = self._impl
        if data and not d.can_accept_more_data():
            self._pending += data
            data = b""
        elif self._pending and d.can_accept_more_data():
            data, self._pending = self._pending + data, b""
        return bytes(d.process(data, output_buffer_limit=room))

    def _zlib_like_step(self, data: bytes, room: int) -> bytes:
        d = self._impl
        if getattr(d, "eof", False):
            return b""
        if self._pending and not data:
            data, self._pending = self._pending, b""
        elif self._pending:
            data, self._pending = self._pending + data, b""
        if not getattr(d, "needs_input", True) or data:
            out = d.decompress(data, room)
        else:
            out = d.decompress(b"", room)
        return bytes(out)

    @property
    def has_pending(self) -> bool:
        if self._pending:
            return True
        d = self._impl
        if self.coding == "br":
            return d is not None and not d.can_accept_more_data()
        if self.coding == "zstd":
            return not getattr(d, "needs_input", True) and not getattr(d, "eof", False)
        return False

    def feed(self, data: bytes, room: int) -> bytes:
        try:
            return self._step(data, room)
        except EncodingError:
            raise
        except Exception as e:  # zlib.error, brotli.error, ZstdError
            raise EncodingError(f"corrupt {self.coding} body: {e}") from e


class StreamDecoder:
    """Decodes a body encoded with `codings` (outermost last), never past `limit` bytes in all.

    `feed()` may be given any chunk sizes; it returns what could be decoded so far.
    """

    STEP = 1 << 20  # the output of one decoder call

    def __init__(self, codings: list[str], limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._chain = [_Decoder(c) for c in reversed(codings)]

    def feed(self, data: bytes) -> bytes:
        for dec in self._chain:
            data = self._drain(dec, data)
        return data

    def _drain(self, dec: _Decoder, data: bytes) -> bytes:
        out = [dec.feed(data, self.STEP)]
        while dec.has_pending:
            piece = dec.feed(b"", self.STEP)
            if not piece:
                break
            out.append(piece)
            self._check(sum(map(len, out)))
        result = b"".join(out)
        self._check(len(result))
        return result

    def _check(self, n: int) -> None:
        if self.total + n > self.limit:
            raise DecodedTooLarge(f"decoded body is larger than the {self.limit}-byte limit "
                                  "(decompression bomb?)")

    def count(self, produced: bytes) -> bytes:
        self.total += len(produced)
        if self.total > self.limit:
            raise DecodedTooLarge(f"decoded body is larger than the {self.limit}-byte limit "
                                  "(decompression bomb?)")
        return produced


def make_decoder(content_encoding: str | None, limit: int) -> Callable[[bytes], bytes] | None:
    """A feed function for this Content-Encoding, or None for identity."""
    codings = parse_codings(content_encoding)
    if not codings:
        return None
    dec = StreamDecoder(codings, limit)
    return lambda data: dec.count(dec.feed(data))


def decode_all(content_encoding: str | None, raw: bytes, limit: int) -> bytes:
    """A whole body, decoded (identity: `raw` itself, still checked against `limit`)."""
    feed = make_decoder(content_encoding, limit)
    if feed is None:
        if len(raw) > limit:
            raise DecodedTooLarge(f"body is larger than the {limit}-byte limit")
        return raw
    return feed(raw)
