"""The guest's JPEG codec: the door ops `jpeg.decode` and `jpeg.encode`.

The guest's Pillow was built without libjpeg (`Image.open("photo.jpg").load()`, `im.save("x.jpg")`
and `savefig("x.jpg")` failed: "decoder jpeg not available"). Its JPEG plugin now registers
codecs (guest/declaw_posix/jpeg.py) that ask the host through these ops, and the host runs
libjpeg-turbo — compiled to WebAssembly (jpeg.py) — in a wasm instance of its own for each call:
what the guest sends is parsed only inside that instance, which has no WASI capability, a memory
limit and a fuel budget.

Pixels and JPEG bytes move by address, not inside the door's frames (a 12-megapixel photo is
36 MB of RGB; a frame holds 16 MiB): the guest names buffers of its own memory (`src`/`src_len`,
`dst`/`dst_len`) and the host reads and writes them through `CallerMemory`, which checks every
address against the guest's memory. A guest can only ever read or overwrite its own memory.

Bounds: the JPEG read is at most MAX_JPEG_BYTES; what a call writes is at most `dst_len` (the
decoded image is refused before it is decoded if it would not fit); the codec's memory and fuel
are bounded by jpeg.py; at most one call per sandbox and one per CPU the process may use run at
once (each holds its input, its instance and its output; a guest waiting holds nothing, its input
is read once it has its slot); with an instruction limit (Limits.cpu_instructions) the
codec's instructions are charged to the guest, and a call the budget cannot pay is not made; a
call stops within a tick (10 ms) of its sandbox's kill or timeout, and after 30 s whatever its
fuel.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import TYPE_CHECKING, Any, Iterator

from .._wasm.door import Bool, Int, List, Op, RequestError, Word

if TYPE_CHECKING:
    from .._wasm.guest import Guest
    from .._wasm.shims import CallerMemory

MAX_ADDRESS = (1 << 32) - 1  # wasm32
MAX_JPEG_BYTES = 256 << 20  # one JPEG read from the guest
MAX_PIXEL_BYTES = 1 << 30  # one image's pixels (the guest's memory bounds them first)
MODES = ("L", "RGB", "CMYK")

def _cores() -> int:
    """The CPUs this process may run on (a container's share, not the host's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


_SLOTS = threading.BoundedSemaphore(_cores())


class CodecShare:
    """One sandbox's place at the codec: its guests take it in turn before a process slot, so a
    sandbox running many commands at once holds at most one of the process's slots and other
    sandboxes' calls never wait behind it (an attack helper measured a 21 s wait before)."""

    def __init__(self) -> None:
        self.turn = threading.BoundedSemaphore(1)

_ADDRESS = Int(0, MAX_ADDRESS, required=True, doc="an address in the guest's memory")
JPEG_DECODE = Op("jpeg.decode", {
    "src": _ADDRESS, "src_len": Int(0, MAX_JPEG_BYTES, required=True, doc="bytes of the JPEG file at src"),
    "dst": _ADDRESS, "dst_len": Int(0, MAX_PIXEL_BYTES, required=True, doc="bytes the pixels may fill at dst"),
    "mode": Word(MODES, required=True, doc="the pixels wanted: L (8-bit gray), RGB, CMYK (as stored)"),
    "scale": Int(1, 8, doc="decode at 1/scale of the size (1, 2, 4 or 8; libjpeg's DCT scaling)")},
    "{width, height, warnings} | error",
    "decode the JPEG file at src into dst (rows of width × bands bytes, top to bottom); warnings: "
    "the corrupt-data warnings libjpeg gave (a truncated file decodes, grey where data was missing)")
JPEG_ENCODE = Op("jpeg.encode", {
    "src": _ADDRESS, "src_len": Int(0, MAX_PIXEL_BYTES, required=True, doc="bytes of pixels at src"),
    "dst": _ADDRESS, "dst_len": Int(0, MAX_PIXEL_BYTES, required=True, doc="bytes the JPEG file may fill"),
    "width": Int(1, 65500, required=True), "height": Int(1, 65500, required=True),
    "mode": Word(MODES, required=True, doc="the pixels' layout: L, RGB, CMYK"),
    "quality": Int(1, 100, doc="libjpeg's quality (default 75)"),
    "progressive": Bool(), "optimize": Bool(doc="optimal Huffman tables"),
    "subsampling": Int(-1, 2, doc="-1: libjpeg's default, 0: 4:4:4, 1: 4:2:2, 2: 4:2:0"),
    "dpi": List(Int(0, 65535), 2, doc="[x, y] dots per inch written in the JFIF header")},
    "{size} | {needed} | error",
    "encode the pixels at src (rows of width × bands bytes) as a JPEG file at dst: its size; or, when "
    "dst_len is too small, the size it needs (nothing written: ask again with a buffer that large)")
JPEG_OPS = (JPEG_DECODE, JPEG_ENCODE)

BANDS = {"L": 1, "RGB": 3, "CMYK": 4}


def routes(share: CodecShare | None = None) -> tuple[tuple[Op, Any], ...]:
    """The ops' routes for one sandbox's guests (`share`: the sandbox's place at the codec)."""
    own = share if share is not None else CodecShare()
    return ((JPEG_DECODE, lambda guest, request: decode(guest, request, own)),
            (JPEG_ENCODE, lambda guest, request: encode(guest, request, own)))


@contextlib.contextmanager
def _slot(op: str, guest: Guest, share: CodecShare) -> Iterator[None]:
    """The sandbox's turn, then one of the process's codec slots, each waited for in short
    slices: a sandbox stopping while its guest waits gives up."""
    for semaphore in (share.turn, _SLOTS):
        while not semaphore.acquire(timeout=0.05):
            if guest.stop_requested():
                if semaphore is _SLOTS:
                    share.turn.release()
                raise RequestError(op, "", "the sandbox is stopping")
    try:
        yield
    finally:
        _SLOTS.release()
        share.turn.release()


def _memory(op: str, guest: Guest) -> CallerMemory:
    memory = guest.door_memory
    if memory is None:  # (a transport that carries no memory: the pool's tests, never a live guest)
        raise RequestError(op, "", "no guest memory to read")
    return memory


def _check(op: str, memory: CallerMemory, request: dict[str, Any]) -> None:
    """Both buffers inside the guest's memory (checked before waiting for a slot; read inside
    one, so that a guest waiting holds no copy of its input)."""
    problem = memory.check(request["src"], request["src_len"])
    if problem is not None:
        raise RequestError(op, "src", problem)
    problem = memory.check(request["dst"], request["dst_len"])
    if problem is not None:
        raise RequestError(op, "dst", problem)


def decode(guest: Guest, request: dict[str, Any], share: CodecShare) -> Any:
    from . import jpeg

    op = JPEG_DECODE.name
    try:
        scale = request.get("scale") or 1
        if scale not in (1, 2, 4, 8):
            raise RequestError(op, "scale", f"must be 1, 2, 4 or 8, not {scale}")
        memory = _memory(op, guest)
        _check(op, memory, request)
        with _slot(op, guest, share):
            data = memory.read(request["src"], request["src_len"])
            meter = jpeg.Meter(memory.fuel_left())
            try:
                image = jpeg.decode(data, mode=request["mode"], scale=scale, max_bytes=request["dst_len"],
                                    meter=meter, stop=guest.stop_requested)
            except jpeg.CodecError as exc:
                raise RequestError(op, "src", str(exc)) from None
            finally:
                memory.spend_fuel(meter.spent)
        del data
        memory.write(request["dst"], image.pixels)
        return {"width": image.width, "height": image.height, "warnings": image.warnings}
    except RequestError as exc:
        return exc.reply()


def encode(guest: Guest, request: dict[str, Any], share: CodecShare) -> Any:
    from . import jpeg

    op = JPEG_ENCODE.name
    try:
        width, height, mode = request["width"], request["height"], request["mode"]
        if request["src_len"] != width * height * BANDS[mode]:
            raise RequestError(op, "src_len", f"must be width × height × {BANDS[mode]} ({mode}) = "
                                              f"{width * height * BANDS[mode]}, not {request['src_len']}")
        memory = _memory(op, guest)
        _check(op, memory, request)
        dpi = request.get("dpi")
        if dpi is not None and len(dpi) != 2:
            raise RequestError(op, "dpi", f"must be [x, y], not {len(dpi)} numbers")
        with _slot(op, guest, share):
            pixels = memory.read(request["src"], request["src_len"])
            meter = jpeg.Meter(memory.fuel_left())
            try:
                data = jpeg.encode(pixels, width, height, mode, quality=request.get("quality") or 75,
                                   progressive=bool(request.get("progressive")),
                                   optimize=bool(request.get("optimize")),
                                   subsampling=-1 if request.get("subsampling") is None else request["subsampling"],
                                   dpi=None if dpi is None or 0 in dpi else (dpi[0], dpi[1]), meter=meter,
                                   stop=guest.stop_requested)
            except jpeg.CodecError as exc:
                raise RequestError(op, "src", str(exc)) from None
            finally:
                memory.spend_fuel(meter.spent)
        del pixels
        if len(data) > request["dst_len"]:
            return {"needed": len(data)}
        memory.write(request["dst"], data)
        return {"size": len(data)}
    except RequestError as exc:
        return exc.reply()

