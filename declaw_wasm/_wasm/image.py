"""A guest at rest, as data: what a WebAssembly instance is beyond its module, captured from a
live instance and applied to a fresh one (snapshots, pause and resume, fork).

Between two turns (no wasm frame live) a guest's whole state is:

* its **linear memory**. Most of it is still the module's initial image (the warm image every
  guest starts from), so an image keeps only the 4 KiB pages that differ from it, as runs of
  consecutive pages, found with `memcmp` against a pristine instance of the same module
  (`BaseImage`); pages past the initial size are kept unless they are all zero;
* its **mutable globals** that the module exports (the CPython module exports none: its one
  mutable global, the stack pointer, is back at its initial value whenever no wasm frame is live,
  which is when a capture runs);
* what lives in the host's **WASI context**, outside memory. The descriptor table:
  `open_descriptors` lists every descriptor open besides stdio and the preopens (the caller
  refuses to capture then: after a restore those numbers would name nothing, or a newly opened
  file, and writes would silently go astray). The monotonic clock: `clock_ns` is the guest's
  reading at capture, and a restored guest's clock continues from it (shims.ClockTimeGet), so
  `time.monotonic()` never goes backwards. The preopen order: wasi-libc's table (in memory)
  maps descriptor numbers to guest paths, so the caller must give the restored guest the same
  mounts in the same order (it records them beside the image).

An image is tied to the exact initial memory it was diffed against: `BaseImage.sha256` (the
SHA-256 of those bytes) travels with it and `apply` is only valid on an instance of a module
with the same image. Encoding (`encode`/`decode`): a small JSON header (runs, globals, clock,
sizes) and the pages, compressed in chunks (zstd when the stdlib's or backports.zstd is there,
else zlib) on a thread pool; `decode` treats its input as hostile (every length and offset is
bounded, decompression is capped at the declared size). Nothing here knows of sandboxes.
"""

from __future__ import annotations

import ctypes
import hashlib
import io
import json
import os
import re
import struct
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import wasmtime

from .._cache import write_atomic
from .._codings import zstd_module
from .shims import memory_address

PAGE = 4096  # the diff's granularity (the host's page size)
BLOCK = 64 << 10  # compared at once first; dirty blocks are refined page by page
GAP = 4 * PAGE  # clean pages between dirty ones kept in the same run (fewer, larger pieces)
WASM_PAGE = 64 << 10
MAX_MEMORY = 4 << 30  # wasm32
MAGIC = b"DWIMAGE1"
END = b"DWIMGEND"
MAX_HEADER = 32 << 20
CHUNK = 4 << 20  # compressed independently, so compression runs on every core
ZSTD_LEVEL = -3  # zstd's fast mode: ~3x level 1's speed; pages are mostly incompressible data or zeros
ZLIB_LEVEL = 1
SAMPLE = 64 << 10  # a piece's sample compressed first: if it keeps more than WORTH of its size,
WORTH = 0.9  # the piece is stored as it is
IMAGE_SIDECAR = ".image.json"


class ImageError(Exception):
    """An image that cannot be captured or applied (the message says why)."""


# -- memory compare and copy, through libc -------------------------------------------------------
def _libc_memcmp() -> Optional[Callable[[int, int, int], int]]:
    try:
        libc = ctypes.CDLL(None) if os.name != "nt" else ctypes.cdll.msvcrt
        memcmp = libc.memcmp
    except (OSError, AttributeError):
        return None
    memcmp.restype = ctypes.c_int
    memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    return memcmp


_memcmp = _libc_memcmp()
_ZERO_BLOCK = (ctypes.c_char * BLOCK)()
_ZERO_ADDR = ctypes.addressof(_ZERO_BLOCK)


def _differs(a: int, b: int, size: int) -> bool:
    if _memcmp is not None:
        return _memcmp(a, b, size) != 0
    return ctypes.string_at(a, size) != ctypes.string_at(b, size)


def _memory(store: wasmtime.Store, instance: wasmtime.Instance) -> wasmtime.Memory:
    memory = instance.exports(store)["memory"]
    if not isinstance(memory, wasmtime.Memory):
        raise ImageError("the instance exports no memory")
    return memory


# -- the base: a pristine instance of the module ------------------------------------------------
class BaseImage:
    """The initial memory of a module's instances: what images are diffed against and applied
    on. Kept as a pristine instance (its memory maps the module's image copy-on-write, so it
    costs no more than the pages read); `sha256` identifies those bytes."""

    def __init__(self, engine: wasmtime.Engine, module: wasmtime.Module,
                 source: Optional[Path] = None) -> None:
        self.store = wasmtime.Store(engine)
        self.store.set_epoch_deadline(1 << 62)
        self.store.set_wasi(wasmtime.WasiConfig())
        linker = wasmtime.Linker(engine)
        linker.define_wasi()
        i32 = wasmtime.ValType.i32()
        linker.define_func("host", "call", wasmtime.FuncType([i32] * 4, [i32]), lambda *args: -1)
        self.instance = linker.instantiate(self.store, module)
        self.memory = _memory(self.store, self.instance)
        self.size = self.memory.data_len(self.store)
        self.address = memory_address(self.memory, self.store)
        self.sha256 = self._digest(source)

    def _digest(self, source: Optional[Path]) -> str:
        """The SHA-256 of the initial memory, kept beside the compiled module in the cache
        (`<name>.cwasm.image.json`, checked against the module file's size and mtime): hashing
        ~110 MB takes a few hundred ms, too long for every process that resumes a sandbox."""
        sidecar = source.with_name(source.name + IMAGE_SIDECAR) if source is not None else None
        stamp: dict[str, Any] = {}
        if source is not None and sidecar is not None:
            try:
                st = source.stat()
                stamp = {"module_size": st.st_size, "module_mtime_ns": st.st_mtime_ns, "size": self.size}
                found = json.loads(sidecar.read_text())
                if isinstance(found, dict) and all(found.get(k) == v for k, v in stamp.items()) \
                        and isinstance(found.get("sha256"), str) and len(found["sha256"]) == 64:
                    return str(found["sha256"])
            except (OSError, ValueError):
                pass
        view = (ctypes.c_char * self.size).from_address(self.address)
        digest = hashlib.sha256(view).hexdigest()
        if sidecar is not None and stamp:
            try:
                write_atomic(sidecar, json.dumps({**stamp, "sha256": digest}).encode())
            except OSError:
                pass  # a read-only cache: hashed again next time
        return digest


_bases: dict[int, BaseImage] = {}
_bases_lock = threading.Lock()


def base_image(engine: wasmtime.Engine, module: wasmtime.Module, source: Optional[Path] = None) -> BaseImage:
    """The process's `BaseImage` of `module` (made on first use)."""
    with _bases_lock:
        found = _bases.get(id(module))
        if found is None:
            found = _bases[id(module)] = BaseImage(engine, module, source)
        return found


# -- the image ----------------------------------------------------------------------------------
@dataclass
class Piece:
    """`length` bytes of memory at `offset` (page-aligned, at most CHUNK): `raw`, or `packed`
    (compressed with `codec`)."""

    offset: int
    length: int
    raw: Optional[bytes] = None
    packed: Optional[Any] = None  # bytes, or a view of an encoded image
    codec: str = "none"
    at: Optional[tuple[bytes, int]] = None  # (the encoded image, offset) of `packed`, when decoded

    def source(self) -> Optional[int]:
        """The address of the piece's bytes as they are, if they need no decompressing or copy
        (raw, or stored uncompressed in an image held in memory): memmoved straight from there."""
        if self.raw is not None:
            return _bytes_address(self.raw)
        if self.codec == "none" and self.at is not None:
            return _bytes_address(self.at[0]) + self.at[1]
        return None

    def data(self) -> bytes:
        if self.raw is not None:
            return self.raw
        assert self.packed is not None
        return _decompress(self.codec, self.packed, self.length)


@dataclass
class GuestImage:
    """A guest at rest: its memory as the pieces that differ from its base (the module's initial
    memory, by SHA-256), its exported mutable globals, its monotonic clock reading (ns)."""

    base_sha256: str
    memory_size: int
    pieces: list[Piece]
    clock_ns: int = 0
    globals: dict[str, tuple[str, Any]] = field(default_factory=dict)

    @property
    def dirty_bytes(self) -> int:
        """Bytes of memory that differ from the base."""
        return sum(p.length for p in self.pieces)

    def apply(self, store: wasmtime.Store, instance: wasmtime.Instance, base: BaseImage) -> None:
        """Make a fresh instance of the base's module this image: grow its memory, write the
        pieces (decompressed on a thread pool), set the globals. Call before it runs anything."""
        if base.sha256 != self.base_sha256:
            raise ImageError(f"the image was made against initial memory {self.base_sha256[:16]}, "
                             f"this module's is {base.sha256[:16]}")
        memory = _memory(store, instance)
        have = memory.data_len(store)
        if have != base.size:
            raise ImageError("apply needs a fresh instance")
        if self.memory_size > have:
            memory.grow(store, (self.memory_size - have) // WASM_PAGE)
        if memory.data_len(store) != self.memory_size:
            raise ImageError(f"the instance's memory could not grow to {self.memory_size} bytes")
        address = memory_address(memory, store)

        def write(piece: Piece) -> None:
            source = piece.source()
            if source is not None:
                ctypes.memmove(address + piece.offset, source, piece.length)
            else:
                ctypes.memmove(address + piece.offset, piece.data(), piece.length)

        _each(write, self.pieces)
        exports = instance.exports(store)
        for name, (kind, value) in self.globals.items():
            found = exports.get(name)
            if not isinstance(found, wasmtime.Global) or not found.type(store).mutable:
                raise ImageError(f"the module has no mutable global export {name!r}")
            found.set_value(store, _val(kind, value))


def _val(kind: str, value: Any) -> wasmtime.Val:
    makers: dict[str, Callable[[Any], wasmtime.Val]] = {
        "i32": wasmtime.Val.i32, "i64": wasmtime.Val.i64, "f32": wasmtime.Val.f32, "f64": wasmtime.Val.f64}
    if kind not in makers:
        raise ImageError(f"global of unsupported type {kind!r}")
    return makers[kind](value)


def dirty_runs(address: int, size: int, base: BaseImage) -> list[tuple[int, int]]:
    """The (offset, length) runs of whole pages of the memory at `address` that differ from the
    base (past the base's size: that are not all zero). Only pages the host may have written are
    compared (`_touched`), the others are the base's by construction."""
    runs: list[tuple[int, int]] = []
    for start, length in _touched(address, size):
        for block in range(start, start + length, BLOCK):
            end = min(block + BLOCK, start + length)
            if not _differs_from_base(address, block, end - block, base):
                continue
            for page in range(block, end, PAGE):
                if _differs_from_base(address, page, PAGE, base):
                    # a few clean pages between two dirty ones travel along: fewer, larger pieces
                    if runs and page - (runs[-1][0] + runs[-1][1]) <= GAP:
                        runs[-1] = (runs[-1][0], page + PAGE - runs[-1][0])
                    else:
                        runs.append((page, PAGE))
    return runs


def _differs_from_base(address: int, offset: int, length: int, base: BaseImage) -> bool:
    """Whether memory [offset, offset+length) differs from the base (zero past its end)."""
    inside = min(length, max(0, base.size - offset))
    if inside and _differs(address + offset, base.address + offset, inside):
        return True
    rest = length - inside
    return rest > 0 and _differs(address + offset + inside, _ZERO_ADDR, rest)


# A page of the guest's memory that is mapped and not file-backed (wasmtime maps the module's
# image copy-on-write, so a written page becomes anonymous), or swapped out, may differ from the
# base; one never touched, or only read, is the base's. Top byte of a /proc/self/pagemap entry:
# 0x80 present, 0x40 swapped, 0x20 file-backed or shared.
_MAYBE_WRITTEN = bytes(1 if (b & 0x40) or (b & 0x80 and not b & 0x20) else 0 for b in range(256))
_RUN = re.compile(rb"\x01+")


def _touched(address: int, size: int) -> list[tuple[int, int]]:
    """Runs of pages that may have been written (from the kernel's page map, on Linux; read in
    one go: 8 bytes a page), else the whole memory. Faulting in and comparing untouched pages
    would cost more than the diff itself."""
    if os.name != "posix" or address % PAGE or os.sysconf("SC_PAGE_SIZE") != PAGE:
        return [(0, size)]
    pages = size // PAGE
    try:
        fd = os.open("/proc/self/pagemap", os.O_RDONLY)
    except OSError:
        return [(0, size)]
    try:
        raw = os.pread(fd, pages * 8, (address // PAGE) * 8)
    except OSError:
        return [(0, size)]
    finally:
        os.close(fd)
    if len(raw) != pages * 8:
        return [(0, size)]
    flags = raw[7::8].translate(_MAYBE_WRITTEN)
    return [(m.start() * PAGE, (m.end() - m.start()) * PAGE) for m in _RUN.finditer(flags)]


def capture(store: wasmtime.Store, instance: wasmtime.Instance, base: BaseImage, clock_ns: int,
            out: Optional[Any] = None, codec: Optional[str] = None) -> GuestImage:
    """The image of a guest at rest (no wasm frame live: between turns), diffed against `base`
    (the initial memory of the same module). With `out` (anything with `write(buffer)`), the
    image is written there encoded, straight from the guest's memory (pieces compressed on the
    thread pool while earlier ones are written; pieces not worth compressing are written from
    memory without a copy), and the returned image holds only its layout. Without, the pieces
    are copied raw (to apply them again in this process: fork)."""
    memory = _memory(store, instance)
    size = memory.data_len(store)
    if size < base.size:
        raise ImageError("the guest's memory is smaller than its module's initial memory")
    address = memory_address(memory, store)
    pieces = [Piece(offset + at, min(CHUNK, length - at))
              for offset, length in dirty_runs(address, size, base) for at in range(0, length, CHUNK)]
    image = GuestImage(base.sha256, size, pieces, clock_ns, _globals(store, instance))

    def view(piece: Piece) -> memoryview:
        return memoryview((ctypes.c_char * piece.length).from_address(address + piece.offset)).cast("B")

    if out is None:
        def copy(piece: Piece) -> None:
            piece.raw = bytes(view(piece))
        _each(copy, pieces)
        return image

    chosen = codec or default_codec()

    def pack(piece: Piece) -> Any:
        data = view(piece)
        piece.codec = _worth(chosen, data)
        return data if piece.codec == "none" else _compress(piece.codec, data)

    _write(image, out, chosen, pack)
    return image


def _each(work: Callable[[Piece], None], pieces: list[Piece]) -> None:
    """`work(piece)` for every piece, on the thread pool (compression and copies release the GIL)."""
    if len(pieces) <= 2:
        for piece in pieces:
            work(piece)
        return
    for _ in _threads().map(work, pieces):
        pass


def _bytes_address(data: bytes) -> int:
    """Where a bytes object's bytes are (valid while it lives; bytes never move)."""
    return ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value or 0


def _globals(store: wasmtime.Store, instance: wasmtime.Instance) -> dict[str, tuple[str, Any]]:
    found: dict[str, tuple[str, Any]] = {}
    for name, extern in instance.exports(store).items():
        if isinstance(extern, wasmtime.Global):
            kind = extern.type(store)
            if kind.mutable:
                found[name] = (str(kind.content), extern.value(store))
    return found


# -- the descriptor table -----------------------------------------------------------------------
_FD_SCAN_WAT = """
(module
  (import "guest" "memory" (memory 0))
  (import "wasi_snapshot_preview1" "fd_fdstat_get" (func $stat (param i32 i32) (result i32)))
  (export "memory" (memory 0))
  ;; out[fd] = 1 + the descriptor's WASI filetype, or 0 if it is not open, for fd in [0, n)
  (func (export "scan") (param $out i32) (param $buf i32) (param $n i32)
    (local $fd i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $fd) (local.get $n)))
        (i32.store8 (i32.add (local.get $out) (local.get $fd))
          (if (result i32) (i32.eqz (call $stat (local.get $fd) (local.get $buf)))
            (then (i32.add (i32.load8_u (local.get $buf)) (i32.const 1)))
            (else (i32.const 0))))
        (local.set $fd (i32.add (local.get $fd) (i32.const 1)))
        (br $next)))))
"""
FILETYPES = {0: "unknown", 1: "block device", 2: "character device", 3: "directory",
             4: "regular file", 5: "datagram socket", 6: "stream socket", 7: "symbolic link"}
FIRST_SCAN = 1024
MAX_SCAN = 1 << 16
_scanners: dict[int, wasmtime.Module] = {}


def open_descriptors(store: wasmtime.Store, instance: wasmtime.Instance, engine: wasmtime.Engine,
                     first: int) -> list[tuple[int, str]]:
    """The descriptors open in the guest's WASI table from `first` on (the caller passes the
    first number after the preopens), as (fd, kind); preopens that are no longer folders are
    reported too (with `first` = 3 + the number of preopens, descriptors 3.. must be folders).

    The table is wasmtime's, outside linear memory, and wasmtime's WASI functions find memory
    through their caller's exports, so a tiny wasm module importing the guest's memory calls
    `fd_fdstat_get` in a loop; its scratch bytes (at the top of memory) are put back after.
    Numbers are scanned up to 1024, and on in doubling steps while the top quarter has any open
    (numbers are handed out densely from the lowest free one)."""
    with _bases_lock:
        module = _scanners.get(id(engine))
        if module is None:
            module = _scanners[id(engine)] = wasmtime.Module(engine, bytes(wasmtime.wat2wasm(_FD_SCAN_WAT)))
    memory = _memory(store, instance)
    linker = wasmtime.Linker(engine)
    linker.define_wasi()  # bound to this store's WASI context, as the guest's own imports are
    stat = linker.get(store, "wasi_snapshot_preview1", "fd_fdstat_get")
    scanner = wasmtime.Instance(store, module, [memory, stat])
    scan = scanner.exports(store)["scan"]
    assert isinstance(scan, wasmtime.Func)
    count = FIRST_SCAN
    while True:
        kinds = _scan(store, memory, scan, count)
        busy_top = any(kinds[count * 3 // 4:])
        if not busy_top or count >= MAX_SCAN:
            break
        count *= 2
    found = [(fd, FILETYPES.get(kind - 1, "unknown")) for fd, kind in enumerate(kinds) if kind and fd >= first]
    bad_preopens = [(fd, FILETYPES.get(kind - 1, "unknown") if kind else "closed")
                    for fd, kind in enumerate(kinds[3:first], start=3) if kind != 4]
    return bad_preopens + found


def _scan(store: wasmtime.Store, memory: wasmtime.Memory, scan: wasmtime.Func, count: int) -> bytes:
    size = memory.data_len(store)
    need = count + 32
    if size < need:
        raise ImageError("the guest's memory is too small to scan its descriptors")
    at = size - need
    saved = bytes(memory.read(store, at, size))
    try:
        scan(store, at + 32, at, count)
        return bytes(memory.read(store, at + 32, at + 32 + count))
    finally:
        memory.write(store, saved, at)


# -- encoding -----------------------------------------------------------------------------------
def default_codec() -> str:
    return "zstd" if zstd_module() is not None else "zlib"


def _worth(codec: str, view: Any) -> str:
    """`codec`, or "none" for a piece whose sample does not compress (random numbers, already
    compressed data: trying costs more than it saves)."""
    if codec == "none" or len(view) <= SAMPLE:
        return codec
    sample = view[len(view) // 2 - SAMPLE // 2:][:SAMPLE]
    return codec if len(_compress(codec, sample)) < SAMPLE * WORTH else "none"


def _compress(codec: str, chunk: Any) -> bytes:
    """`chunk` (bytes or any buffer) compressed with `codec`."""
    if codec == "zstd":
        module = zstd_module()
        if module is None:
            raise ImageError("zstd is not available: install backports.zstd (a dependency of declaw-wasm "
                             "before Python 3.14)")
        return bytes(module.compress(chunk, level=ZSTD_LEVEL))
    if codec == "zlib":
        return zlib.compress(chunk, ZLIB_LEVEL)
    return bytes(chunk)


def _decompress(codec: str, chunk: Any, size: int) -> bytes:
    """`chunk` decompressed, which must give exactly `size` bytes (never more is produced)."""
    if codec == "none":
        out = chunk
    elif codec == "zlib":
        d = zlib.decompressobj()
        out = d.decompress(chunk, size)
        if d.unconsumed_tail or not d.eof:
            raise ImageError("a compressed chunk is longer than declared, or truncated")
    elif codec == "zstd":
        module = zstd_module()
        if module is None:
            raise ImageError("this image is zstd-compressed: install backports.zstd (a dependency of "
                             "declaw-wasm before Python 3.14)")
        zd = module.ZstdDecompressor()
        out = zd.decompress(chunk, max_length=size)
        if not zd.eof or zd.unused_data:
            raise ImageError("a compressed chunk is longer than declared, or truncated")
    else:
        raise ImageError(f"unknown image codec {codec!r}")
    if len(out) != size:
        raise ImageError(f"a chunk decompressed to {len(out)} bytes, {size} declared")
    return bytes(out)


_pool: Optional[ThreadPoolExecutor] = None


def _threads() -> ThreadPoolExecutor:
    global _pool
    with _bases_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max(1, min(8, os.cpu_count() or 1)), thread_name_prefix="declaw-image")
        return _pool


def encode(image: GuestImage, codec: Optional[str] = None) -> bytes:
    """The image as bytes (see `write`)."""
    out = io.BytesIO()
    write(image, out, codec)
    return out.getvalue()


def write(image: GuestImage, out: Any, codec: Optional[str] = None) -> int:
    """Write the image to `out` (anything with `write(buffer)`); the bytes written. Layout:
    `DWIMAGE1`, the pieces' bytes (each compressed with `codec` when worth it, or as it is packed
    already), the JSON header (base, memory size, clock, globals, per piece: offset, length,
    packed length, codec), its length (u32) and `DWIMGEND`: the header comes last so pieces can
    be written as they are compressed."""
    chosen = codec or default_codec()

    def pack(piece: Piece) -> Any:
        if piece.packed is not None:
            return piece.packed
        data = piece.data()
        piece.codec = _worth(chosen, data)
        return _compress(piece.codec, data)

    return _write(image, out, chosen, pack)


def _write(image: GuestImage, out: Any, codec: str, pack: Callable[[Piece], Any]) -> int:
    out.write(MAGIC)
    total = len(MAGIC)
    sizes = []
    packed = _threads().map(pack, image.pieces) if len(image.pieces) > 2 else map(pack, image.pieces)
    for data in packed:  # in order, as each is ready
        out.write(data)
        sizes.append(len(data))
        total += len(data)
    header = json.dumps({
        "base_sha256": image.base_sha256, "memory_size": image.memory_size,
        "clock_ns": image.clock_ns, "globals": {k: list(v) for k, v in image.globals.items()},
        "codec": codec,
        "pieces": [[p.offset, p.length, n, p.codec] for p, n in zip(image.pieces, sizes, strict=True)],
    }, separators=(",", ":")).encode()
    out.write(header + struct.pack("<I", len(header)) + END)
    return total + len(header) + 4 + len(END)


def decode(blob: Any) -> GuestImage:
    """An encoded image, every field checked (a damaged or hostile image is an ImageError). The
    pieces stay compressed until applied (and are checked then: each must give exactly its
    declared length)."""
    whole = blob if isinstance(blob, bytes) else bytes(blob)
    blob = memoryview(whole)  # pieces are views of it: no copies
    tail = len(END) + 4
    if (len(blob) < len(MAGIC) + tail or bytes(blob[:len(MAGIC)]) != MAGIC
            or bytes(blob[len(blob) - len(END):]) != END):
        raise ImageError("not a guest image, or truncated (bad magic)")
    (hlen,) = struct.unpack_from("<I", blob, len(blob) - tail)
    start = len(blob) - tail - hlen
    if hlen > MAX_HEADER or start < len(MAGIC):
        raise ImageError("guest image header truncated or too large")
    try:
        header = json.loads(bytes(blob[start:start + hlen]))
        base = str(header["base_sha256"])
        memory_size = int(header["memory_size"])
        clock_ns = int(header["clock_ns"])
        globals_ = {str(k): (str(v[0]), v[1]) for k, v in dict(header.get("globals") or {}).items()}
        codec = str(header["codec"])
        layout = [(int(e[0]), int(e[1]), int(e[2])) for e in header["pieces"]]
        codecs = [str(e[3]) if len(e) > 3 else codec for e in header["pieces"]]
    except (ValueError, KeyError, TypeError, IndexError):
        raise ImageError("guest image header is malformed") from None
    if any(c not in ("none", "zlib", "zstd") for c in [codec, *codecs]):
        raise ImageError(f"unknown image codec in {sorted(set([codec, *codecs]))}")
    _check_layout(memory_size, layout, clock_ns)
    at = len(MAGIC)
    if at + sum(p for _, _, p in layout) != start:
        raise ImageError("guest image truncated, or its pieces do not add up")
    pieces = []
    for (offset, length, packed), piece_codec in zip(layout, codecs, strict=True):
        pieces.append(Piece(offset, length, packed=blob[at:at + packed], codec=piece_codec, at=(whole, at)))
        at += packed
    return GuestImage(base, memory_size, pieces, clock_ns, globals_)


def _check_layout(memory_size: int, pieces: list[tuple[int, int, int]], clock_ns: int) -> None:
    if not 0 < memory_size <= MAX_MEMORY or memory_size % WASM_PAGE:
        raise ImageError(f"guest image memory size {memory_size} is not a whole number of wasm pages")
    end = 0
    for offset, length, packed in pieces:
        if (offset % PAGE or length <= 0 or length % PAGE or length > CHUNK or offset < end
                or offset + length > memory_size or packed < 0):
            raise ImageError("guest image pieces are misaligned, overlapping or outside its memory")
        end = offset + length
    if clock_ns < 0:
        raise ImageError("guest image clock is negative")
