"""Content-Encoding: decode bodies in bounded steps, with bounded decoder memory.

One implementation for the guards (`StreamDecoder`, `decode_all`) and the egress relay
(declaw_wasm/_egress/http.py pulls from `decoder_for`'s decoders to scrub secrets and to feed
the guards): what one bounds, the other does too.

gzip, x-gzip and deflate use the standard library's zlib. br uses Google's `brotli` bindings
(the reference implementation; 1.2 can bound each call's output) and zstd the standard library's
`compression.zstd` on Python 3.14+ or its official backport `backports.zstd` before that. Both
come with the `declaw-wasm[guards]` extra and are imported on first use. Without them the guards
ask upstreams only for what they can decode (`Accept-Encoding` is narrowed), and a body in an
encoding they cannot decode is refused when a guard must read it — never passed unscanned.

What a hostile body can make the host hold is bounded, and past a bound the body is refused
(`UndecodableBody`, naming the bound), never decoded into more memory:

* **Output**: a decoder gives at most `limit` bytes per `take` (a decompression bomb costs
  steps, not memory); `StreamDecoder` raises `DecodedTooLarge` past its total.
* **Stacking**: at most `MAX_CODINGS` (4) codings (real servers use one; curl stops at 5).
* **Windows**, each read from the coding's own header before its decoder allocates anything:
  zstd at most 8 MiB (`ZSTD_WINDOW_LOG`: RFC 9659's limit for the `zstd` content coding; the
  library's own default is 128 MiB), read from the frame header (RFC 8878 §3.1.1.1.2) of every
  frame, with the library's `window_log_max` as a backstop; br at most the standard 16 MiB,
  read from the stream header's WBITS (RFC 7932 §9.1: the first 1-7 bits); the large-window
  extension (up to 1 GiB) is refused; gzip and deflate 32 KiB.
* **Decoder memory per body**: all of a body's decoders together at most `DECODER_BYTES`
  (20 MiB): windows plus state (br's Huffman tables, zstd's block buffers). That admits one
  coding at the largest standard window (br, 16 MiB) with the small ones a server may stack
  around it, and refuses two large ones (`br, br` at 16 MiB each: 38 MiB). Each decoder charges
  its memory to the body's `Meter` *before* allocating it; the relay's meter also reserves it in
  the connection's sandbox's and process's budgets (declaw_wasm/_egress/budget.py).
"""

from __future__ import annotations

import functools
import importlib
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

IDENTITY = ("identity", "")
MiB = 1 << 20

MAX_CODINGS = 4  # stacked content codings undone (curl stops at 5); real servers use 1
ZSTD_WINDOW_LOG = 23  # RFC 9659: the `zstd` content coding's window is at most 8 MiB
BROTLI_MAX_WBITS = 24  # RFC 7932: a standard brotli window is at most 16 MiB - 16 bytes
DECODER_BYTES = 20 * MiB  # decoder memory (windows and state) of one body, all its codings
ZLIB_MEMORY = 64 << 10  # inflate: a 32 KiB window and ~7 KiB of state, rounded up
BROTLI_STATE = 3 * MiB  # br's Huffman tables: up to 256 trees of each of its 3 kinds (~2.7 MB)
ZSTD_STATE = 512 << 10  # zstd's context and block buffers (~300 KB), beside the window


class EncodingError(ValueError):
    """A body could not be decoded (unknown coding, missing decoder, corrupt data)."""


class DecodedTooLarge(EncodingError):
    """A decoded body went past its size limit."""


class UndecodableBody(EncodingError):
    """A body the host will not decode, the message says why: an unknown or too deeply stacked
    coding, a window or decoder memory over the bounds (module docstring)."""


def size_text(n: int) -> str:
    """`n` bytes for a message: "16 MiB", "1.5 MiB", "64 KiB"."""
    if n >= MiB:
        return f"{n / MiB:.1f}".removesuffix(".0") + " MiB"
    return f"{-(-n // 1024)} KiB"


def _optional(*names: str) -> Any:
    """The first of these modules that imports, or None (imported lazily, on first use)."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


@functools.lru_cache(maxsize=1)
def _zstd_module() -> Any:
    return _optional("compression.zstd", "backports.zstd")  # stdlib from Python 3.14


@functools.lru_cache(maxsize=1)
def _brotli_module() -> Any:
    brotli = _optional("brotli")
    if brotli is None:
        return None
    return brotli if hasattr(brotli.Decompressor(), "can_accept_more_data") else None


@functools.lru_cache(maxsize=1)
def available_codings() -> tuple[str, ...]:
    """The content codings this host can decode, best first."""
    out = []
    if _zstd_module() is not None:
        out.append("zstd")
    if _brotli_module() is not None:
        out.append("br")
    return (*out, "gzip", "deflate")


def decodable() -> list[str]:
    """The content codings the host can undo (for messages: gzip, deflate, br, zstd)."""
    return ["gzip", "deflate", *(["br"] if _brotli_module() is not None else []),
            *(["zstd"] if _zstd_module() is not None else [])]


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


def undecodable(encodings: list[str]) -> Optional[str]:
    """Why the host cannot decode a body with this Content-Encoding list (None: it can)."""
    codings = [e.strip().lower() for e in encodings if e.strip().lower() not in IDENTITY]
    can = decodable() + ["x-gzip"]
    unknown = [c for c in codings if c not in can]
    if unknown:
        return (f"Content-Encoding {unknown[0][:100]!r} is not one the host can decode "
                f"(it decodes {', '.join(decodable())})")
    if len(codings) > MAX_CODINGS:
        return (f"{len(codings)} Content-Encodings are stacked (the host undoes at most "
                f"{MAX_CODINGS})")
    return None


# -- windows, read from the codings' own headers --------------------------------------------------

def brotli_window_bits(first: int) -> int:
    """A brotli stream's WBITS, from its first byte (RFC 7932 §9.1: 1, 4 or 7 bits, LSB first);
    the large-window extension's marker is refused."""
    if not first & 1:
        return 16
    n = (first >> 1) & 7
    if n:
        return 17 + n
    m = (first >> 4) & 7
    if m == 1:
        raise UndecodableBody(f"a brotli stream with a large window (an extension of up to 1 GiB; "
                              f"a standard one is at most {size_text(1 << BROTLI_MAX_WBITS)}, "
                              "RFC 7932)")
    return 8 + m if m else 17


_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
ZSTD_WINDOW_ERROR = (f"a zstd frame that needs a window over {size_text(1 << ZSTD_WINDOW_LOG)} "
                     "(RFC 9659's limit for HTTP)")


def zstd_frame_window(data: bytes) -> Optional[int]:
    """The window a zstd frame starting `data` needs (RFC 8878 §3.1.1.1.2: its Window_Descriptor,
    or its content size for a single-segment frame), None while its header is not whole yet, 0
    for a skippable frame or bytes that are no zstd frame (the library then says what is wrong);
    over 8 MiB raises."""
    head = bytes(data[:18])
    if len(head) < 4:
        maybe = _ZSTD_MAGIC.startswith(head) or (head[:1] and head[0] & 0xF0 == 0x50 and
                                                 b"\x2a\x4d\x18".startswith(head[1:]))
        return None if maybe else 0
    if head[:4] != _ZSTD_MAGIC:
        return 0
    if len(head) < 5:
        return None
    descriptor = head[4]
    single = bool(descriptor & 0x20)
    fcs_size = (1 if single else 0, 2, 4, 8)[descriptor >> 6]
    did_size = (0, 1, 2, 4)[descriptor & 3]
    need = 5 + (0 if single else 1) + did_size + fcs_size
    if len(head) < need:
        return None
    if single:
        start = 5 + did_size
        window = int.from_bytes(head[start:start + fcs_size], "little") + (256 if fcs_size == 2 else 0)
    else:
        exponent, mantissa = head[5] >> 3, head[5] & 7
        base = 1 << (10 + exponent)
        window = base + (base >> 3) * mantissa
    if window > 1 << ZSTD_WINDOW_LOG:
        raise UndecodableBody(ZSTD_WINDOW_ERROR)
    return max(window, 1 << 10)


@dataclass
class Meter:
    """The decoder memory of one body, all its codings together: each decoder charges what it
    is about to allocate (`need`), checked against `cap`, then reserved through `reserve(total)`
    (which raises to refuse: the relay's counts it in the sandbox's and process's budgets)."""

    cap: int = DECODER_BYTES
    reserve: Optional[Callable[[int], None]] = None
    total: int = 0

    def need(self, old: int, new: int, what: str) -> int:
        """A decoder that holds `old` bytes is about to hold `new` (`what` it is, for the
        message); `new` once charged (raises when over)."""
        if new <= old:
            return old
        total = self.total + new - old
        if total > self.cap:
            raise UndecodableBody(
                f"its decoders would need {size_text(total)} of memory ({what}: "
                f"{size_text(new)}), over the {size_text(self.cap)} the host gives one body's "
                "decoders (one coding at the largest standard window, br's 16 MiB, fits)")
        if self.reserve is not None:
            self.reserve(total)
        self.total = total
        return new


# -- the decoders ---------------------------------------------------------------------------------

class Decoder(Protocol):
    """A body's decoder: `feed` the coded bytes, `take(limit)` at most `limit` decoded bytes;
    `pending`: `take` can make progress without more input; `buffered`: input bytes held."""

    def feed(self, data: bytes) -> None: ...

    def take(self, limit: int) -> bytes: ...

    @property
    def pending(self) -> bool: ...

    @property
    def buffered(self) -> int: ...


@dataclass
class _Zlib:
    """gzip (possibly several members) or deflate (zlib-wrapped or raw)."""

    kind: str
    meter: Meter
    data: bytes = b""
    d: Optional["zlib._Decompress"] = None
    more: bool = False  # the last call filled its output: the decoder may hold more
    charged: int = 0

    def _new(self, sample: bytes) -> "zlib._Decompress":
        self.charged = self.meter.need(self.charged, ZLIB_MEMORY, self.kind)
        if self.kind == "gzip":
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        wrapped = sample[0] & 0x0F == 8 and (sample[0] << 8 | sample[1]) % 31 == 0
        return zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)

    def feed(self, data: bytes) -> None:
        self.data += data

    def take(self, limit: int) -> bytes:
        out = b""  # (one chunk, the usual case, is returned without a copy)
        while len(out) < limit and (self.data or self.more):
            if self.d is None:
                if not self.data or (self.kind == "deflate" and len(self.data) < 2):
                    self.more = False
                    break  # a deflate stream's first 2 bytes say whether it is wrapped
                self.d = self._new(self.data)
            room = limit - len(out)
            chunk = self.d.decompress(self.data, room)
            out += chunk
            if self.d.eof:
                rest, self.d, self.more = self.d.unused_data, None, False
                # another gzip member may follow; anything after a deflate stream is dropped
                self.data = rest if self.kind == "gzip" and rest[:2] == b"\x1f\x8b" else b""
            else:
                self.data = self.d.unconsumed_tail
                self.more = len(chunk) == room
                if not chunk:
                    break
        return out

    @property
    def pending(self) -> bool:
        if self.d is None and self.kind == "deflate" and len(self.data) < 2:
            return False
        return bool(self.data) or self.more

    @property
    def buffered(self) -> int:
        return len(self.data)


@dataclass
class _Brotli:
    meter: Meter
    d: Any = None
    data: bytes = b""
    more: bool = False  # the decoder holds input or output it has not given yet
    inside: int = 0  # input handed to the decoder that it may still hold
    charged: int = 0

    def feed(self, data: bytes) -> None:
        self.data += data

    def take(self, limit: int) -> bytes:
        if self.d is None:
            if not self.data:
                return b""
            bits = brotli_window_bits(self.data[0])
            window = (1 << bits) - 16
            self.charged = self.meter.need(0, window + BROTLI_STATE,
                                           f"br with a {size_text(window)} window")
            self.d = _brotli_module().Decompressor()
        d = self.d
        if self.data and d.can_accept_more_data():
            data, self.data = self.data, b""
            self.inside = len(data)
            out = d.process(data, output_buffer_limit=limit)
        elif self.more:
            out = d.process(b"", output_buffer_limit=limit)
        else:
            return b""
        accepts = d.can_accept_more_data()
        # "can accept more" is not "has no more": with all its input taken, the decoder may still
        # have output to give (a highly compressed stream), until it is finished or gives nothing
        self.more = not accepts or (bool(out) and not d.is_finished())
        if accepts:
            self.inside = 0
        return bytes(out)

    @property
    def pending(self) -> bool:
        return self.more or bool(self.data)

    @property
    def buffered(self) -> int:
        return len(self.data) + self.inside


@dataclass
class _Zstd:
    """zstd, frame after frame (concatenated frames are one body, RFC 8878 §3.1); each frame's
    window is read from its header before a decoder is made for it."""

    meter: Meter
    data: bytes = b""
    d: Any = None
    inside: int = 0  # input handed to the decoder that it may still hold
    charged: int = 0

    def feed(self, data: bytes) -> None:
        self.data += data

    def _next_frame(self) -> bool:
        """Start the next frame's decoder, if its header is whole."""
        d = self.d
        if d is not None and d.eof:
            self.data, self.d = (d.unused_data + self.data).lstrip(b"\x00"), None
        if self.d is not None:
            return True
        if not self.data:
            return False
        window = zstd_frame_window(self.data)
        if window is None:
            return False
        if window:
            self.charged = self.meter.need(self.charged, window + ZSTD_STATE,
                                           f"zstd with a {size_text(window)} window")
        zstd = _zstd_module()
        self.d = zstd.ZstdDecompressor(options={zstd.DecompressionParameter.window_log_max: ZSTD_WINDOW_LOG})
        return True

    def take(self, limit: int) -> bytes:
        if not self._next_frame():
            return b""
        d = self.d
        try:
            if self.data:
                data, self.data = self.data, b""
                self.inside = len(data)
                out = bytes(d.decompress(data, limit))
            else:
                out = b"" if d.needs_input or d.eof else bytes(d.decompress(b"", limit))
        except _zstd_module().ZstdError as exc:
            if "memory" in str(exc):  # the frame's window is over window_log_max
                raise UndecodableBody(ZSTD_WINDOW_ERROR) from None
            raise
        if d.needs_input or d.eof:
            self.inside = 0
        return out

    @property
    def pending(self) -> bool:
        d = self.d
        if d is None or d.eof:
            rest = self.data if d is None else (d.unused_data + self.data).lstrip(b"\x00")
            return bool(rest) and _header_whole(rest)
        return bool(self.data) or not d.needs_input

    @property
    def buffered(self) -> int:
        d = self.d
        return len(self.data) + self.inside + (len(d.unused_data) if d is not None and d.eof else 0)


def _header_whole(data: bytes) -> bool:
    """Whether a zstd frame's header is whole (one over the bounds is: `take` then raises)."""
    try:
        return zstd_frame_window(data) is not None
    except UndecodableBody:
        return True


@dataclass
class _Identity:
    data: bytes = b""

    def feed(self, data: bytes) -> None:
        self.data += data

    def take(self, limit: int) -> bytes:
        out, self.data = self.data[:limit], self.data[limit:]
        return out

    @property
    def pending(self) -> bool:
        return bool(self.data)

    @property
    def buffered(self) -> int:
        return len(self.data)


@dataclass
class Chain:
    """Several codings (`Content-Encoding: gzip, br` is undone br first)."""

    stages: list[Decoder] = field(default_factory=list)

    def feed(self, data: bytes) -> None:
        self.stages[0].feed(data)

    def take(self, limit: int) -> bytes:
        for i, stage in enumerate(self.stages[:-1]):
            nxt = self.stages[i + 1]
            while stage.pending and not nxt.pending:
                chunk = stage.take(limit)
                if not chunk:
                    break
                nxt.feed(chunk)
        return self.stages[-1].take(limit)

    @property
    def pending(self) -> bool:
        return any(stage.pending for stage in self.stages)

    @property
    def buffered(self) -> int:
        return sum(stage.buffered for stage in self.stages)


@dataclass
class Refusing:
    """The decoder of a body the host cannot decode (`undecodable`'s reason): an empty body
    passes, the first byte is an error."""

    reason: str
    data: bool = False

    def feed(self, data: bytes) -> None:
        self.data = self.data or bool(data)

    def take(self, limit: int) -> bytes:
        if self.data:
            raise UndecodableBody(self.reason)
        return b""

    @property
    def pending(self) -> bool:
        return self.data

    @property
    def buffered(self) -> int:
        return 0


def decoder_for(encodings: list[str], meter: Optional[Meter] = None) -> Optional[Decoder]:
    """A decoder for a Content-Encoding list (outermost last), charging `meter` (a fresh one
    with the default cap if None), or None if the host cannot decode it (`undecodable` says
    why)."""
    if undecodable(encodings) is not None:
        return None
    meter = meter or Meter()
    stages: list[Decoder] = []
    for coding in reversed([e.strip().lower() for e in encodings if e.strip()]):
        if coding in IDENTITY:
            continue
        if coding in ("gzip", "x-gzip"):
            stages.append(_Zlib("gzip", meter))
        elif coding == "deflate":
            stages.append(_Zlib("deflate", meter))
        elif coding == "br":
            stages.append(_Brotli(meter))
        else:  # zstd (undecodable() let only codings this host has through)
            stages.append(_Zstd(meter))
    if not stages:
        return _Identity()
    return stages[0] if len(stages) == 1 else Chain(stages)


# -- the guards' face: push bytes, get what decoded --------------------------------------------

class StreamDecoder:
    """Decodes a body encoded with `codings` (outermost last), never past `limit` bytes in all,
    with the bounds of the module docstring (`meter`: the body's decoder memory).

    `feed()` may be given any chunk sizes; it returns what could be decoded so far.
    """

    STEP = 1 << 20  # the output of one decoder call

    def __init__(self, codings: list[str], limit: int, meter: Optional[Meter] = None) -> None:
        why = undecodable(codings)
        if why is not None:
            raise UndecodableBody(why)
        self.limit = limit
        self.total = 0
        self.codings = ", ".join(codings)
        decoder = decoder_for(codings, meter)
        assert decoder is not None
        self._decoder = decoder

    def feed(self, data: bytes) -> bytes:
        dec = self._decoder
        dec.feed(data)
        out: list[bytes] = []
        produced = 0
        while dec.pending:
            before = dec.buffered
            try:
                piece = dec.take(self.STEP)
            except EncodingError:
                raise
            except Exception as e:  # zlib.error, brotli.error, ZstdError
                raise EncodingError(f"corrupt {self.codings} body: {e}") from e
            if piece:
                produced += len(piece)
                self._check(produced)
                out.append(piece)
            elif dec.buffered >= before:
                break  # no progress: it needs more input
        return b"".join(out)

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


def make_decoder(content_encoding: str | None, limit: int,
                 meter: Optional[Meter] = None) -> Callable[[bytes], bytes] | None:
    """A feed function for this Content-Encoding, or None for identity."""
    codings = parse_codings(content_encoding)
    if not codings:
        return None
    dec = StreamDecoder(codings, limit, meter)
    return lambda data: dec.count(dec.feed(data))


def decode_all(content_encoding: str | None, raw: bytes, limit: int,
               meter: Optional[Meter] = None) -> bytes:
    """A whole body, decoded (identity: `raw` itself, still checked against `limit`)."""
    feed = make_decoder(content_encoding, limit, meter)
    if feed is None:
        if len(raw) > limit:
            raise DecodedTooLarge(f"body is larger than the {limit}-byte limit")
        return raw
    return feed(raw)
