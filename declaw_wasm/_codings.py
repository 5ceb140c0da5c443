"""The body codec: one streaming, bounded decoder for HTTP bodies and compressed archives.

`BodyDecoder(codings)` undoes a body's Content-Encoding (identity, gzip, x-gzip, deflate, br,
zstd; stacked, outermost last) for every reader of coded bytes: the egress relay
(declaw_wasm/_egress/http.py pulls from it to scrub secrets and feed the guards), the guards
(declaw_wasm/_guard/pipeline.py and response_filter.py push bodies through it) and the volume archive
reader (declaw_wasm/_volumes/archive.py undoes a tar.gz or tar.zst with it). What one bounds, the
others do too; the limits are parameters with one set of defaults (below).

gzip, x-gzip and deflate use the standard library's zlib. br uses Google's `brotli` bindings
(the reference implementation; 1.2 can bound each call's output) and zstd the standard library's
`compression.zstd` on Python 3.14+ or its official backport `backports.zstd` before that. Both
come with the `declaw-wasm[guards]` extra and are imported on first use. Without them the guards
ask upstreams only for what they can decode (`Accept-Encoding` is narrowed), and a body in an
encoding they cannot decode is refused when a guard must read it — never passed unscanned.

What a hostile body can make the host hold is bounded, and past a bound the body is refused
(`UndecodableBody`, naming the bound), never decoded into more memory:

* **Output**: `take(n)` gives at most `n` bytes (a decompression bomb costs steps, not memory);
  with a `limit`, `DecodedTooLarge` past that many bytes in all.
* **Stacking**: at most `MAX_CODINGS` (4) codings (real servers use one; curl stops at 5), and
  the inner ones fed at most twice what the body decoded to, plus `INNER_SLACK` (16 MiB):
  padding, empty members and skippable frames decode to nothing, so a bomb of them would cost
  time without output.
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

What is a body, one way for every reader (the strictest the formats allow):

* gzip: one or more members (RFC 1952 §2.2), each checked against its CRC-32 and length
  trailer; zero bytes after a member are padding (as gzip(1) and Python's gzip module take
  them); anything else after a member is refused (`CorruptBody`), never silently dropped.
* deflate: one stream, zlib-wrapped (RFC 1950, its Adler-32 checked) or raw (RFC 1951, as some
  servers send it); anything after its end is refused.
* zstd: one or more frames (RFC 8878 §3.1), skippable frames and zero padding between them.
* br: one stream; anything after its end is refused (by the library).
* `end()` says whether the body ended where its codings end: one cut inside a gzip member, a
  deflate stream, a br stream or a zstd frame raises `CorruptBody` ("ends early").
"""

from __future__ import annotations

import functools
import importlib
import io
import zlib
from collections.abc import Callable, Iterable
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
# what a stacked body's inner codings may be fed beyond twice what the body decoded to: compressed
# data is smaller than what it holds, but zero padding, empty gzip members and skippable zstd frames
# decode to nothing (a few bytes of `gzip, gzip` made a step chew through terabytes of padding)
INNER_SLACK = 16 * MiB


class EncodingError(ValueError):
    """A body could not be decoded (unknown coding, missing decoder, corrupt data)."""


class DecodedTooLarge(EncodingError):
    """A decoded body went past its size limit."""


class CorruptBody(EncodingError):
    """A body whose coded bytes are not what its coding says (bad data, a bad checksum, data after
    its end, or an end inside it)."""


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
def zstd_module() -> Any:
    """zstd's bindings (the stdlib's from Python 3.14, else backports.zstd), or None."""
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
    if zstd_module() is not None:
        out.append("zstd")
    if _brotli_module() is not None:
        out.append("br")
    return (*out, "gzip", "deflate")


def decodable() -> list[str]:
    """The content codings the host can undo (for messages: gzip, deflate, br, zstd)."""
    return ["gzip", "deflate", *(["br"] if _brotli_module() is not None else []),
            *(["zstd"] if zstd_module() is not None else [])]


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


# -- the codings ---------------------------------------------------------------------------------

class _Stage(Protocol):
    """One coding's decoder: `feed` the coded bytes, `take(limit)` at most `limit` decoded
    bytes; `pending`: `take` can make progress without more input; `buffered`: input bytes held;
    `end()` raises if the input stopped inside the coding's stream."""

    def feed(self, data: bytes) -> None: ...

    def take(self, limit: int) -> bytes: ...

    @property
    def pending(self) -> bool: ...

    @property
    def buffered(self) -> int: ...

    def end(self) -> None: ...


IN_STEP = 8 << 10  # the input one zlib or zstd call is given: what it copies back is at most this


def _strip_zeros(data: bytearray) -> None:
    """Drop the zero bytes `data` starts with (padding), a step at a time (no whole copy)."""
    while data[:1] == b"\x00":
        head = bytes(data[:IN_STEP])
        del data[:len(head) - len(head.lstrip(b"\x00"))]


@dataclass
class _Zlib:
    """gzip (one or more members) or deflate (zlib-wrapped or raw). The input is held in a
    bytearray and given IN_STEP bytes a call: many tiny members cost each a step, not a copy of
    the rest of the body (they made decoding quadratic: 4 MB of empty members took 34 s)."""

    kind: str
    meter: Meter
    data: bytearray = field(default_factory=bytearray)
    d: Optional["zlib._Decompress"] = None
    more: bool = False  # the last call filled its output: the decoder may hold more
    charged: int = 0
    started: bool = False  # a stream was begun (for `end`)
    done: bool = False  # deflate: its one stream ended

    def _new(self, sample: bytearray) -> "zlib._Decompress":
        self.charged = self.meter.need(self.charged, ZLIB_MEMORY, self.kind)
        self.started = True
        if self.kind == "gzip":
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        wrapped = sample[0] & 0x0F == 8 and (sample[0] << 8 | sample[1]) % 31 == 0
        return zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)

    def feed(self, data: bytes) -> None:
        self.data += data

    def _between(self) -> bool:
        """Between streams: drop gzip's zero padding; True if another member starts here."""
        if self.kind == "gzip" and not self.started:
            return bool(self.data)  # (zlib says what is wrong with a first member)
        if self.kind == "gzip":
            _strip_zeros(self.data)
            if self.data[:2] == b"\x1f\x8b"[:len(self.data[:2])]:
                return len(self.data) >= 2
            raise CorruptBody("data after a gzip member is not another gzip member")
        if self.done and self.data:
            raise CorruptBody("data after the end of the deflate stream")
        return not self.done and len(self.data) >= 2  # its first 2 bytes say whether it is wrapped

    def take(self, limit: int) -> bytes:
        out: list[bytes] = []
        given = 0
        while given < limit and (self.data or self.more):
            if self.d is None:
                if not self._between():
                    self.more = False
                    break
                self.d = self._new(self.data)
            d = self.d
            room = limit - given
            with memoryview(self.data) as view:
                piece = view[:IN_STEP]
                try:
                    chunk = d.decompress(piece, room)
                except zlib.error as exc:
                    raise CorruptBody(str(exc)) from None
                taken = len(piece) - len(d.unused_data if d.eof else d.unconsumed_tail)
                piece.release()
            del self.data[:taken]
            if chunk:
                out.append(chunk)
                given += len(chunk)
            if d.eof:
                self.d, self.more = None, False
                self.done = self.kind == "deflate"
            else:
                self.more = len(chunk) == room
                if not chunk and not taken:
                    break
        return out[0] if len(out) == 1 else b"".join(out)

    @property
    def pending(self) -> bool:
        if self.d is None:
            if self.kind == "deflate" and not self.done and len(self.data) < 2:
                return False
            if self.kind == "gzip" and self.data == b"\x1f":
                return False
        return bool(self.data) or self.more

    @property
    def buffered(self) -> int:
        return len(self.data)

    def end(self) -> None:
        if self.d is not None or (self.data.strip(b"\x00") if self.kind == "gzip" else self.data):
            raise CorruptBody(f"the body ends inside a {self.kind} stream")


@dataclass
class _Brotli:
    meter: Meter
    d: Any = None
    data: bytes = b""
    more: bool = False  # the decoder holds input or output it has not given yet
    inside: int = 0  # input handed to the decoder that it may still hold
    charged: int = 0
    over: bytes = b""  # output past the last call's limit (the library's limit is loose: ~2x)

    def feed(self, data: bytes) -> None:
        self.data += data

    def take(self, limit: int) -> bytes:
        if self.over:
            out, self.over = self.over[:limit], self.over[limit:]
            return out
        out = self._process(limit)
        if len(out) > limit:
            out, self.over = out[:limit], out[limit:]
        return out

    def _process(self, limit: int) -> bytes:
        brotli = _brotli_module()
        if self.d is None:
            if not self.data:
                return b""
            bits = brotli_window_bits(self.data[0])
            window = (1 << bits) - 16
            self.charged = self.meter.need(0, window + BROTLI_STATE,
                                           f"br with a {size_text(window)} window")
            self.d = brotli.Decompressor()
        d = self.d
        try:
            if self.data and d.can_accept_more_data():
                data, self.data = self.data, b""
                self.inside = len(data)
                out = d.process(data, output_buffer_limit=limit)
            elif self.more:
                out = d.process(b"", output_buffer_limit=limit)
            else:
                return b""
        except brotli.error as exc:
            raise CorruptBody(str(exc)) from None
        accepts = d.can_accept_more_data()
        # "can accept more" is not "has no more": with all its input taken, the decoder may still
        # have output to give (a highly compressed stream), until it is finished or gives nothing
        self.more = not accepts or (bool(out) and not d.is_finished())
        if accepts:
            self.inside = 0
        return bytes(out)

    @property
    def pending(self) -> bool:
        return self.more or bool(self.data) or bool(self.over)

    @property
    def buffered(self) -> int:
        return len(self.data) + self.inside

    def end(self) -> None:
        if (self.d is not None and not self.d.is_finished()) or (self.d is None and self.data):
            raise CorruptBody("the body ends inside the br stream")


@dataclass
class _Zstd:
    """zstd, frame after frame (concatenated frames are one body, RFC 8878 §3.1); each frame's
    window is read from its header before a decoder is made for it. The decoder is given IN_STEP
    bytes at a time (what it hands back after a frame is at most that: many tiny frames cost each
    a step, not a copy of the rest of the body)."""

    meter: Meter
    data: bytearray = field(default_factory=bytearray)
    head: bytes = b""  # what the last frame's decoder handed back, before `data`
    d: Any = None
    inside: int = 0  # input handed to the decoder that it may still hold
    charged: int = 0
    skip: int = 0  # bytes of a skippable frame still to drop

    def feed(self, data: bytes) -> None:
        self.data += data

    def _lead(self) -> bytes:
        """The next frame's first bytes (zero padding and skippable frames dropped, without a
        decoder), at most 64."""
        while True:
            if self.skip:
                n = min(self.skip, len(self.head))
                self.head, self.skip = self.head[n:], self.skip - n
                n = min(self.skip, len(self.data))
                del self.data[:n]
                self.skip -= n
                if self.skip:
                    return b""
            self.head = self.head.lstrip(b"\x00")
            if not self.head and self.data:
                _strip_zeros(self.data)
                self.head = bytes(self.data[:IN_STEP])
                del self.data[:len(self.head)]
            lead = (self.head + bytes(self.data[:64]))[:64]
            if len(lead) >= 8 and lead[0] & 0xF0 == 0x50 and lead[1:4] == b"\x2a\x4d\x18":
                self.skip = 8 + int.from_bytes(lead[4:8], "little")
                continue
            return lead

    def _next_frame(self) -> bool:
        """Start the next frame's decoder, if its header is whole."""
        d = self.d
        if d is not None and d.eof:
            self.head, self.d = d.unused_data + self.head, None
        if self.d is not None:
            return True
        lead = self._lead()
        if not lead:
            return False
        window = zstd_frame_window(lead)
        if window is None:
            return False
        if window:
            self.charged = self.meter.need(self.charged, window + ZSTD_STATE,
                                           f"zstd with a {size_text(window)} window")
        zstd = zstd_module()
        self.d = zstd.ZstdDecompressor(options={zstd.DecompressionParameter.window_log_max: ZSTD_WINDOW_LOG})
        return True

    def take(self, limit: int) -> bytes:
        if not self._next_frame():
            return b""
        d = self.d
        try:
            if d.needs_input and (self.head or self.data):
                if self.head:
                    piece, self.head = self.head, b""
                else:
                    piece = bytes(self.data[:IN_STEP])
                    del self.data[:len(piece)]
                self.inside = len(piece)
                out = bytes(d.decompress(piece, limit))
            else:
                out = b"" if d.needs_input or d.eof else bytes(d.decompress(b"", limit))
        except zstd_module().ZstdError as exc:
            if "memory" in str(exc):  # the frame's window is over window_log_max
                raise UndecodableBody(ZSTD_WINDOW_ERROR) from None
            raise CorruptBody(str(exc)) from None
        if d.needs_input or d.eof:
            self.inside = 0
        return out

    @property
    def pending(self) -> bool:
        d = self.d
        if self.skip:
            return bool(self.head or self.data)
        if d is None or d.eof:
            lead = ((d.unused_data if d is not None else b"") + self.head + bytes(self.data[:64]))
            rest = lead.lstrip(b"\x00")
            if not rest:
                return len(lead) < len(self.head) + len(self.data)  # zeros beyond: take drops them
            return _header_whole(rest) or len(rest) < len(lead)
        return bool(self.head or self.data) or not d.needs_input

    @property
    def buffered(self) -> int:
        d = self.d
        return (len(self.data) + len(self.head) + self.inside
                + (len(d.unused_data) if d is not None and d.eof else 0))

    def end(self) -> None:
        d = self.d
        rest = (d.unused_data if d is not None and d.eof else b"") + self.head + bytes(self.data)
        if (d is not None and not d.eof) or rest.strip(b"\x00") or self.skip:
            raise CorruptBody("the body ends inside a zstd frame")


def _header_whole(data: bytes) -> bool:
    """Whether a zstd frame's header is whole (one over the bounds is: `take` then raises)."""
    try:
        return zstd_frame_window(data) is not None
    except UndecodableBody:
        return True


@dataclass
class _Refusing:
    """A body the host cannot decode (`reason`): an empty body passes, its first byte raises."""

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

    def end(self) -> None:
        pass


@dataclass
class _Identity:
    data: bytes = b""

    def feed(self, data: bytes) -> None:
        self.data += data

    def take(self, limit: int) -> bytes:
        if len(self.data) <= limit:
            out, self.data = self.data, b""
            return out
        out, self.data = self.data[:limit], self.data[limit:]
        return out

    @property
    def pending(self) -> bool:
        return bool(self.data)

    @property
    def buffered(self) -> int:
        return len(self.data)

    def end(self) -> None:
        pass


# -- the codec -----------------------------------------------------------------------------------

class BodyDecoder:
    """A body coded with `codings` (a Content-Encoding header's value or its list, outermost
    last), decoded in bounded steps: `feed` it the coded bytes as they come, `take(n)` at most
    `n` decoded bytes at a time (pull), or `decode(data)` what `data` lets decode (push); `end()`
    once the body is all fed. `limit`: the decoded bytes in all (`DecodedTooLarge` past it;
    None: no total, each step is still bounded); `meter`: the body's decoder memory (a fresh
    one of `DECODER_BYTES` if None).

    A coding the host cannot decode, or too many, raises `UndecodableBody` here; with
    `refuse_on_data=True` only from `take` once the body has a byte (an empty body passes).
    """

    STEP = 1 << 20  # `decode`'s output per decoder call

    def __init__(self, codings: str | Iterable[str] | None, *, limit: Optional[int] = None,
                 meter: Optional[Meter] = None, refuse_on_data: bool = False) -> None:
        names = parse_codings(codings if isinstance(codings, str) or codings is None
                              else ",".join(codings))
        self.codings = ", ".join(names)[:200]
        self.limit = limit
        self.total = 0  # decoded bytes given
        self.inner = 0  # bytes fed to the inner codings of a stacked body
        self.refusal = undecodable(names)
        if self.refusal is not None and not refuse_on_data:
            raise UndecodableBody(self.refusal)
        meter = meter or Meter()
        stages: list[_Stage] = []
        for coding in reversed(names if self.refusal is None else []):
            if coding in ("gzip", "x-gzip"):
                stages.append(_Zlib("gzip", meter))
            elif coding == "deflate":
                stages.append(_Zlib("deflate", meter))
            elif coding == "br":
                stages.append(_Brotli(meter))
            else:  # zstd (undecodable() let only codings this host has through)
                stages.append(_Zstd(meter))
        if self.refusal is not None:
            stages = [_Refusing(self.refusal)]
        self._stages = stages or [_Identity()]

    @property
    def identity(self) -> bool:
        """No coding to undo: what is fed is what is taken."""
        return not self.codings

    def feed(self, data: bytes) -> None:
        self._stages[0].feed(data)

    def take(self, limit: int) -> bytes:
        """At most `limit` decoded bytes; none only when more input is needed (`pending` may
        still be true: what is held does not decode on its own) or the body is done."""
        stages = self._stages
        try:
            state = None
            while True:  # until output, or no stage moves (stacked: one may feed another)
                moved = False
                for i, stage in enumerate(stages[:-1]):
                    nxt = stages[i + 1]
                    while stage.pending and not nxt.pending:
                        chunk = stage.take(limit)
                        if not chunk:
                            break
                        nxt.feed(chunk)
                        moved = True
                        self.inner += len(chunk)
                if self.inner > 2 * self.total + INNER_SLACK:
                    raise UndecodableBody(
                        f"its inner codings hold over twice what they decode to ({size_text(self.inner)} "
                        f"for {size_text(self.total)}: padding, empty members or skippable frames)")
                out = stages[-1].take(limit)
                if out or len(stages) == 1:
                    break
                state, before = [s.pending for s in stages], state
                if not moved and state == before:
                    break
        except CorruptBody as exc:
            raise CorruptBody(f"Content-Encoding {self.codings!r}: {exc}") from None
        self.total += len(out)
        if out and self.limit is not None:
            if self.total > self.limit:
                raise DecodedTooLarge(f"decoded body is larger than the {self.limit}-byte limit "
                                      "(decompression bomb?)")
        return out

    @property
    def pending(self) -> bool:
        """`take` can make progress without more input."""
        return any(stage.pending for stage in self._stages)

    @property
    def buffered(self) -> int:
        """The input bytes the decoders hold."""
        return sum(stage.buffered for stage in self._stages)

    def decode(self, data: bytes) -> bytes:
        """Feed `data`; all that decodes from what was fed so far (within `limit`)."""
        self.feed(data)
        out: list[bytes] = []
        while self.pending:
            before = self.buffered
            piece = self.take(self.STEP)
            if piece:
                out.append(piece)
            elif self.buffered >= before:
                break  # no progress: it needs more input
        return b"".join(out)

    def end(self) -> None:
        """The body is all fed: raises `CorruptBody` if it stopped inside a coding's stream."""
        try:
            for stage in self._stages:
                stage.end()
        except CorruptBody as exc:
            raise CorruptBody(f"Content-Encoding {self.codings!r}: {exc}") from None


def decode_all(content_encoding: str | None, raw: bytes, limit: int,
               meter: Optional[Meter] = None) -> bytes:
    """A whole body, decoded and checked to end where its codings do (identity: `raw` itself,
    still checked against `limit`)."""
    dec = BodyDecoder(content_encoding, limit=limit, meter=meter)
    if dec.identity:
        if len(raw) > limit:
            raise DecodedTooLarge(f"body is larger than the {limit}-byte limit")
        return raw
    out = dec.decode(raw)
    dec.end()
    return out


class _Source(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class DecodedStream(io.RawIOBase):
    """What `source` (a binary stream of coded bytes) decodes to with `decoder`, as a readable
    stream: `source` is read `chunk` bytes at a time, and its end is checked to be the end of
    the codings (`BodyDecoder.end`)."""

    def __init__(self, source: _Source, decoder: BodyDecoder, chunk: int = 64 << 10) -> None:
        super().__init__()
        self._source = source
        self._decoder = decoder
        self._chunk = chunk
        self._eof = False

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        dec = self._decoder
        want = len(b)
        while want:
            if dec.pending:
                before = dec.buffered
                out = dec.take(want)
                if out:
                    b[:len(out)] = out
                    return len(out)
                if dec.buffered < before:
                    continue  # an inner coding took the bytes
            if self._eof:
                break
            data = self._source.read(self._chunk)
            if data:
                dec.feed(data)
            else:
                self._eof = True
        if self._eof:
            dec.end()
        return 0
