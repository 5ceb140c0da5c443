"""JPEG decode and encode for the host, by libjpeg-turbo compiled to WebAssembly (jpeg.wasm).

The bytes come from guest code, so they are hostile: libjpeg only ever parses them inside
`jpeg.wasm` (libjpeg-turbo 2.1.5 and tools/jpeg_wasm/codec.c, built by
tools/jpeg_wasm/build.py), run by wasmtime:

- every call runs in a fresh instance on its own `wasmtime.Store`, so a trap (libjpeg's fatal
  errors end in one: codec.c's error_exit keeps the message and executes `unreachable`) leaves
  nothing behind, and calls from many threads share nothing but the compiled module;
- the module gets no capability: its four WASI imports (linked only through libjpeg's unused
  stderr printer) are stubs answering ENOSYS (proc_exit returns onto wasi-libc's `unreachable`);
- its memory is capped per call (`memory_limit`): the input, the output, libjpeg's whole-image
  coefficient buffer when the file needs one (progressive or multi-scan), and `WORK_BYTES`;
  a call needing more than `MAX_MEMORY` is refused before it starts;
- its CPU is capped by wasmtime fuel (`decode_fuel`, `encode_fuel`): a budget proportional to
  the samples (width x height x components) and the input bytes, plus a constant, and never above
  `MAX_FUEL`. Measured (x86-64, wasmtime 50, synthetic photos 640x480 and 1600x1200, smooth and
  noisy, Pillow-made): Huffman decoding used 7-100 fuel a sample at 1/8 scale and 67-281 at
  full size (baseline 4:2:0 q75 ~70, 4:4:4 q100 on noise ~220, progressive 4:4:4 q97 on noise
  ~281), about 100 a sample plus ~120 per input byte; arithmetic decoding ~1 150 per input byte
  (1 057 a sample at 0.83 bytes a sample). Encoding used 105 a sample (q75) to 1 100 (gray,
  q100, progressive and optimized). The budgets, 1 200 a sample plus 5 000 per input byte to
  decode and 5 000 a sample to encode, leave a margin of 4x or more. The engine burns ~8-20
  fuel a nanosecond, so `MAX_FUEL` is ~10-25 s of CPU; a hostile progressive file repeating
  a scan thousands of times runs out and ends as `CodecError("... took too long ...")`.

libjpeg's warnings (corrupt data, a premature end of file) do not stop a decode: libjpeg goes
on, filling what is missing with grey as Pillow's LOAD_TRUNCATED_IMAGES does, and `Decoded`
counts them (`warnings`, `truncated`, the first one's text in `warning`), for the caller to
decide. CMYK is returned and taken as stored (Adobe files store it inverted; no inversion
here). wasmtime is imported on the first call, never at import.

The module is compiled once per process (its own engine: fuel on, Cranelift for speed) and
kept compiled in the cache (`<cache>/compiled/jpeg-<key>.cwasm`, the key covering the module's
SHA-256, wasmtime's version, the engine flags and the CPU), or compiled in memory when the cache
is read-only. `warm()` makes sure the compiled file is there.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import platform
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Union

from .._cache import ensure_file, writable
from ..settings import cache_dir

if TYPE_CHECKING:
    import wasmtime

Buffer = Union[bytes, bytearray, memoryview]

MODULE_PATH = Path(__file__).with_name("jpeg.wasm")
MAX_DIMENSION = 65500  # JPEG's own limit (libjpeg's JPEG_MAX_DIMENSION)
MODES = {"L": 1, "YCbCr": 2, "RGB": 3, "CMYK": 4}  # output mode -> codec.c's out_mode (= channels but YCbCr)
CHANNELS = {"L": 1, "YCbCr": 3, "RGB": 3, "CMYK": 4}
ENCODE_MODES = {"L": 1, "RGB": 3, "CMYK": 4}
SCALES = (1, 2, 4, 8)
# libjpeg's J_COLOR_SPACE for the file's components
COLOR_SPACES = {1: "L", 2: "RGB", 3: "YCbCr", 4: "CMYK", 5: "YCCK"}

WORK_BYTES = 64 << 20  # libjpeg's working memory, the module's stack and data, with room to spare
MAX_MEMORY = 1 << 30  # no call may use more than this, whatever its inputs
HEADER_MEMORY = 16 << 20  # beside the input while only the header is read

# Fuel (see the docstring for the measurements): per sample of the full-size image (width x
# height x the file's components; decoding at 1/8 scale still entropy-decodes every block), per
# byte of input, and a constant for the instance's start and small images.
FUEL_PER_SAMPLE_DECODE = 1200
FUEL_PER_INPUT_BYTE = 5000
FUEL_PER_SAMPLE_ENCODE = 5000
FUEL_BASE = 50_000_000
MAX_FUEL = 200_000_000_000  # ~20 s of this machine's CPU: no call runs longer, whatever its size

_STUB_ENOSYS = 52  # WASI's ENOSYS


@functools.lru_cache(maxsize=1)
def _NO_FINALIZER(kind: Any) -> Any:  # noqa: N802 - one ctypes callback object, kept alive for the process
    return kind(lambda _data: None)


class CodecError(ValueError):
    """A JPEG could not be read or written: the message says why (libjpeg's own words when it
    is libjpeg that refused)."""


@dataclass(frozen=True)
class Header:
    width: int
    height: int
    components: int
    color_space: str  # "L", "RGB", "YCbCr", "CMYK", "YCCK" or "unknown": the file's, as libjpeg reads it
    progressive: bool


@dataclass(frozen=True)
class Decoded:
    width: int
    height: int
    pixels: bytes  # rows of width x channels bytes, top to bottom
    warnings: int  # libjpeg's warnings (corrupt data, premature end): 0 for a sound file
    truncated: bool = False  # the data ended early; libjpeg filled the rest with grey
    warning: Optional[str] = None  # the first warning's text


@dataclass
class Meter:
    """The fuel a caller's own budget pays for a call (the door charges a guest's instruction
    limit, Limits.cpu_instructions, with it): the call gets at most `cap` (None: only the codec's
    own bounds), and `spent` counts what it used, failed calls included."""

    cap: Optional[int] = None
    spent: int = 0


@dataclass(frozen=True)
class _Info:
    header: Header
    arithmetic: bool
    multiscan: bool  # libjpeg keeps every coefficient of the image (progressive, or not one interleaved scan)


# -- the compiled module ------------------------------------------------------------------------------

_lock = threading.Lock()
_compiled: Optional[tuple["wasmtime.Engine", "wasmtime.Module"]] = None


def _wasmtime_version() -> str:
    import wasmtime

    version = getattr(wasmtime, "__version__", None)
    if isinstance(version, str):
        return version
    import importlib.metadata

    return importlib.metadata.version("wasmtime")


def compiled_path(wasm: bytes) -> Path:
    """Where the compiled module for `wasm` lives in the cache."""
    key = "|".join([hashlib.sha256(wasm).hexdigest(), _wasmtime_version(), "fuel1-epoch1-speed",
                    platform.machine()])
    return cache_dir() / "compiled" / f"jpeg-{hashlib.sha256(key.encode()).hexdigest()[:24]}.cwasm"


def _engine() -> "wasmtime.Engine":
    import wasmtime

    config = wasmtime.Config()
    config.consume_fuel = True
    config.epoch_interruption = True
    config.cranelift_opt_level = "speed"
    return wasmtime.Engine(config)


# The epoch ticker: while calls run, the engine's epoch advances every TICK_S and each call's
# deadline callback asks whether its caller wants it stopped (a sandbox killed or timed out while
# its guest waits for the codec) or its wall-clock bound has passed.
TICK_S = 0.01
MAX_SECONDS = 30.0  # of wall-clock time a call may take, whatever its fuel (a loaded machine)
_running = 0
_running_cond = threading.Condition()


def _tick(engine: "wasmtime.Engine") -> None:
    while True:
        with _running_cond:
            while not _running:
                _running_cond.wait()
        time.sleep(TICK_S)
        engine.increment_epoch()


def _started(engine: "wasmtime.Engine") -> None:
    global _running, _ticker
    with _running_cond:
        _running += 1
        if _ticker is None:
            _ticker = threading.Thread(target=_tick, args=(engine,), name="declaw-jpeg-epoch", daemon=True)
            _ticker.start()
        _running_cond.notify_all()


def _ended() -> None:
    global _running
    with _running_cond:
        _running -= 1


_ticker: Optional[threading.Thread] = None


_calls = threading.local()  # the stores one call (a `_ticking` block) opened, closed at its end


@contextlib.contextmanager
def _ticking() -> Iterator[None]:
    """The epoch ticks while the block runs (one call's instances); the stores the block
    opened are closed at its end, whatever happened (their memory is freed then, not at a
    collection)."""
    engine, _ = _load()
    _started(engine)
    opened: list[Any] = []
    _calls.opened = opened
    try:
        yield
    finally:
        _calls.opened = None
        _ended()
        for store in opened:
            try:
                store.close()
            except Exception:  # noqa: BLE001 - closing is a courtesy: the store is ours alone
                pass


def _load() -> tuple["wasmtime.Engine", "wasmtime.Module"]:
    """The engine and the compiled module, once per process."""
    global _compiled
    with _lock:
        if _compiled is None:
            import wasmtime

            engine = _engine()
            wasm = MODULE_PATH.read_bytes()
            path = compiled_path(wasm)
            module = None
            if path.exists() or writable(path.parent):
                try:
                    ensure_file(path, lambda: bytes(wasmtime.Module(engine, wasm).serialize()), "jpeg-*.cwasm")
                    module = wasmtime.Module.deserialize_file(engine, str(path))
                except (OSError, RuntimeError, wasmtime.WasmtimeError):
                    module = None  # unreadable or incompatible: compiled in memory below
            if module is None:
                module = wasmtime.Module(engine, wasm)
            _compiled = (engine, module)
        return _compiled


def warm() -> None:
    """Compile the module into the cache now (the warmup's step), unless it is there already."""
    _load()


# -- one call, one instance ---------------------------------------------------------------------------

class _Instance:
    """A fresh instance of the module on its own store, with its memory and fuel limits."""

    def __init__(self, memory: int, fuel: int, meter: Optional[Meter] = None,
                 stop: Optional[Callable[[], bool]] = None) -> None:
        import wasmtime

        engine, module = _load()
        self.store = wasmtime.Store(engine)
        opened = getattr(_calls, "opened", None)
        if opened is not None:
            opened.append(self.store)
        self.store.set_limits(memory_size=memory)
        self.watch = _Watch(stop, time.monotonic() + MAX_SECONDS)
        self._callback = _install_deadline(self.store, self.watch)
        self.meter = meter if meter is not None else Meter()
        self.fuel = 0
        self.capped = False  # the caller's cap, not the codec's budget, bounds this call
        self._given = 0
        self.set_fuel(fuel)
        imports: list[Any] = []
        for item in module.imports:
            kind = item.type
            if not isinstance(kind, wasmtime.FuncType):
                raise CodecError(f"jpeg.wasm imports {item.module}.{item.name}, which is not a function")
            imports.append(wasmtime.Func(self.store, kind, _stub(item.name or "", kind)))
        try:
            instance = wasmtime.Instance(self.store, module, imports)
        except wasmtime.WasmtimeError as error:
            raise CodecError(f"the JPEG codec could not start: {error}") from None
        exports = instance.exports(self.store)
        self.exports = exports
        memory_export = exports["memory"]
        assert isinstance(memory_export, wasmtime.Memory)
        self.memory = memory_export
        init = exports.get("_initialize")
        if init is not None:
            self.call("_initialize")

    def set_fuel(self, fuel: int) -> None:
        """Give the instance `fuel` from now on (at most what the caller's cap leaves)."""
        self.account()
        cap = self.meter.cap
        allowed = fuel if cap is None else max(0, min(fuel, cap - self.meter.spent))
        self.capped = allowed < fuel
        self.store.set_fuel(allowed)
        self.fuel = self._given = allowed

    def account(self) -> None:
        """Add the fuel used since the last look to the meter."""
        if self._given:
            left = self.store.get_fuel()
            self.meter.spent += max(0, self._given - left)
            self._given = left

    def call(self, name: str, *args: int) -> int:
        import wasmtime

        func = self.exports[name]
        assert isinstance(func, wasmtime.Func)
        failure: Optional[CodecError] = None
        try:
            result = func(self.store, *args)
        except (wasmtime.Trap, wasmtime.WasmtimeError) as trap:  # (a stop: the deadline callback's error)
            failure = self._error(trap)
            # wasmtime-py's trap holds (through its traceback) the frames that hold this store:
            # raised from here, the cycle would keep the store's memory until a collection
            trap.__traceback__ = None
        finally:
            self.account()
        if failure is not None:
            raise failure  # (outside the except clause: no __context__ holding the trap)
        return int(result) if result is not None else 0

    def _error(self, trap: "wasmtime.Trap | wasmtime.WasmtimeError") -> CodecError:
        import wasmtime

        if self.watch.stopped is not None:
            return CodecError(f"the JPEG codec was stopped: {self.watch.stopped}")
        code = getattr(trap, "trap_code", None)
        if code == wasmtime.TrapCode.OUT_OF_FUEL and self.capped:
            return CodecError("the sandbox's instruction limit (Limits.cpu_instructions) ran out while the "
                              "JPEG codec worked")
        if code == wasmtime.TrapCode.OUT_OF_FUEL:
            return CodecError(f"the JPEG took too long: its work ran past {self.fuel:,} fuel "
                              "(a hostile or damaged file: thousands of scans, say)")
        message = ""
        try:
            message = self.string(self.call_quiet("error_message"))
        except Exception:  # noqa: BLE001 - the message is a courtesy; the trap is the error
            pass
        if message:
            return CodecError(_sentence(message))
        return CodecError(f"the JPEG codec stopped: {code if code is not None else trap}")

    def call_quiet(self, name: str) -> int:
        func = self.exports[name]
        return int(func(self.store))  # type: ignore[operator]

    def write(self, data: Buffer) -> int:
        """Copy `data` (flat: see `_data`) into the instance's memory; its address."""
        view = memoryview(data)
        size = len(view)
        pointer = self.call("alloc", size)
        if pointer == 0:
            raise CodecError(f"no memory in the codec for {size:,} bytes of input")
        target = memoryview(self.memory.get_buffer_ptr(self.store, size, pointer)).cast("B")
        target[:] = view
        return pointer

    def read(self, pointer: int, size: int) -> bytes:
        if size == 0:
            return b""
        if pointer <= 0 or pointer + size > self.memory.data_len(self.store):
            raise CodecError("the JPEG codec returned a buffer outside its memory")
        return bytes(memoryview(self.memory.get_buffer_ptr(self.store, size, pointer)).cast("B"))

    def words(self, pointer: int, count: int) -> tuple[int, ...]:
        return struct.unpack(f"<{count}I", self.read(pointer, 4 * count))

    def string(self, pointer: int, limit: int = 512) -> str:
        end = min(pointer + limit, self.memory.data_len(self.store))
        raw = self.read(pointer, end - pointer).split(b"\0", 1)[0]
        return raw.decode("utf-8", "replace")


@dataclass
class _Watch:
    """What a call's deadline callback checks at each tick, and why it stopped the call. (Apart
    from `_Instance`, which holds the callback: no reference cycle keeps a store and its memory
    alive after the call.)"""

    stop: Optional[Callable[[], bool]]
    deadline: float
    stopped: Optional[str] = None


def _install_deadline(store: "wasmtime.Store", watch: _Watch) -> object:
    """At every tick: trap the call if its caller wants it stopped or it ran too long (through
    the C API: nothing raises into wasmtime). The callback object, to keep while the store lives."""
    from wasmtime import _bindings as ffi

    def on_deadline(_ctx: object, _data: object, delta: Any, kind: Any) -> int:
        try:
            if watch.stop is not None and watch.stop():
                watch.stopped = "its sandbox is stopping"
            elif time.monotonic() > watch.deadline:
                watch.stopped = f"it ran past {MAX_SECONDS:.0f} s"
            if watch.stopped is not None:
                error = ffi.wasmtime_error_new(b"declaw-wasm: JPEG codec stopped")
                return ctypes.cast(error, ctypes.c_void_p).value or 0
        except BaseException:  # noqa: BLE001 - never into wasmtime
            pass
        delta[0] = 1
        kind[0] = 0  # WASMTIME_UPDATE_DEADLINE_CONTINUE
        return 0

    function_type = ffi._wasmtime_store_epoch_deadline_callback.argtypes
    callback = function_type[1](on_deadline)
    ffi.wasmtime_store_epoch_deadline_callback(store.ptr(), callback, None, _NO_FINALIZER(function_type[3]))
    store.set_epoch_deadline(1)
    return callback


def _stub(name: str, kind: "wasmtime.FuncType") -> Callable[..., Any]:
    """A WASI import that does nothing: ENOSYS for anything returning a value; proc_exit traps."""
    returns = len(kind.results)

    def stub(*_args: Any) -> Any:
        # never raises into wasmtime (wasmtime-py keeps a host function's exception process-wide:
        # _wasm/guest.py); proc_exit returning lands on wasi-libc's `unreachable`, a trap
        return _STUB_ENOSYS if returns else None

    return stub


def _sentence(message: str) -> str:
    """libjpeg's message as the start of ours: "Not a JPEG file: ..." -> "not a JPEG file: ..."."""
    message = message.strip()
    if len(message) > 1 and message[0].isupper() and message[1].islower():
        message = message[0].lower() + message[1:]
    return message


# -- validation ---------------------------------------------------------------------------------------

def _data(data: object, what: str = "data") -> Buffer:
    """`data` as a flat run of bytes: bytes and bytearray as they are, a memoryview of any shape
    or item size cast to bytes (copied if it is not contiguous)."""
    if isinstance(data, (bytes, bytearray)):
        return data
    if isinstance(data, memoryview):
        if data.c_contiguous:
            return data.cast("B") if data.ndim != 1 or data.format != "B" else data
        return data.tobytes()
    raise CodecError(f"{what} must be bytes, bytearray or memoryview, not {type(data).__name__}")


def _int(value: object, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CodecError(f"{name} must be an int, not {type(value).__name__}")
    if not low <= value <= high:
        raise CodecError(f"{name} must be {low}..{high}, not {value}")
    return value


def _nbytes(data: Buffer) -> int:
    return len(data)  # flat, after _data


def _check_input(data: object) -> Buffer:
    buffer = _data(data)
    size = _nbytes(buffer)
    if size == 0:
        raise CodecError("empty input: no JPEG data")
    if size > MAX_MEMORY // 2:
        raise CodecError(f"input too large: {size:,} bytes, at most {MAX_MEMORY // 2:,}")
    head = bytes(buffer[:2])
    if head != b"\xff\xd8":
        shown = " ".join(f"0x{b:02X}" for b in head)
        raise CodecError(f"not a JPEG file: starts with {shown}")
    return buffer


# -- budgets ------------------------------------------------------------------------------------------

def _scaled(size: int, scale: int) -> int:
    return -(-size // scale)  # libjpeg's ceil(size * 1 / scale)


def decode_fuel(info: Header, input_bytes: int) -> int:
    samples = info.width * info.height * info.components
    return min(MAX_FUEL, FUEL_BASE + FUEL_PER_SAMPLE_DECODE * samples + FUEL_PER_INPUT_BYTE * input_bytes)


def encode_fuel(width: int, height: int, channels: int) -> int:
    return min(MAX_FUEL, FUEL_BASE + FUEL_PER_SAMPLE_ENCODE * width * height * channels)


def _coefficients(width: int, height: int, components: int) -> int:
    """Bytes of libjpeg's whole-image coefficient buffer (2 bytes a sample, padded to MCUs of
    up to 4x4 blocks)."""
    return 2 * (width + 32) * (height + 32) * components


def memory_limit(input_bytes: int, output_bytes: int, coefficients: int = 0) -> int:
    # the output twice: with one copy and WORK_BYTES beside it, an 8000x6000 RGB decode (144 MB)
    # ran out of memory in the allocator while 9000x9000 did not (how wasi-libc's malloc grows
    # the heap around libjpeg's pools); with two, every size tried up to 12000x9000 decodes
    return input_bytes + 2 * output_bytes + coefficients + WORK_BYTES


# -- the API ------------------------------------------------------------------------------------------

def _read_info(instance: _Instance, pointer: int, size: int) -> _Info:
    width, height, components, space, progressive, arithmetic, multiscan = \
        instance.words(instance.call("header", pointer, size), 7)
    header = Header(width, height, components, COLOR_SPACES.get(space, "unknown"), bool(progressive))
    return _Info(header, bool(arithmetic), bool(multiscan))


def read_header(data: Buffer) -> Header:
    """The JPEG's frame header: its size, components, colour space and whether it is progressive."""
    buffer = _check_input(data)
    size = _nbytes(buffer)
    with _ticking():
        instance = _Instance(memory_limit(size, 0, HEADER_MEMORY), FUEL_BASE + FUEL_PER_INPUT_BYTE * size)
        return _read_info(instance, instance.write(buffer), size).header


def decode(data: Buffer, *, mode: str, scale: int = 1, max_bytes: int, meter: Optional[Meter] = None,
           stop: Optional[Callable[[], bool]] = None) -> Decoded:
    """Decode `data` to `mode` ("L", "RGB", "CMYK"; "YCbCr" too, as Pillow's draft asks) at
    1/`scale` of its size (1, 2, 4 or 8). A result larger than `max_bytes` (width x height x
    channels after scaling) is refused from the header, before anything is decoded. `meter`:
    a budget of the caller's that the call draws on (see `Meter`); `stop()`, asked every
    TICK_S while the codec runs: true stops it (a CodecError)."""
    with _ticking():
        return _decode(data, mode, scale, max_bytes, meter, stop)


def _decode(data: Buffer, mode: str, scale: int, max_bytes: int, meter: Optional[Meter],
            stop: Optional[Callable[[], bool]]) -> Decoded:
    buffer = _check_input(data)
    if not isinstance(mode, str) or mode not in MODES:
        raise CodecError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if isinstance(scale, bool) or scale not in SCALES:
        raise CodecError(f"scale must be one of 1, 2, 4, 8, not {scale!r}")
    _int(max_bytes, "max_bytes", 0, 1 << 62)
    size = _nbytes(buffer)
    instance = _Instance(memory_limit(size, 0, HEADER_MEMORY), FUEL_BASE + FUEL_PER_INPUT_BYTE * size, meter, stop)
    pointer = instance.write(buffer)
    info = _read_info(instance, pointer, size)
    head = info.header
    if head.width < 1 or head.height < 1:
        raise CodecError(f"bad image size {head.width}x{head.height}")
    width, height = _scaled(head.width, scale), _scaled(head.height, scale)
    output = width * height * CHANNELS[mode]
    if output > max_bytes:
        raise CodecError(f"image too large: {head.width}x{head.height} pixels"
                         + (f" (1/{scale}: {width}x{height})" if scale > 1 else "")
                         + f" in {mode} is {output:,} bytes, at most {max_bytes:,} (max_bytes)")
    coefficients = _coefficients(head.width, head.height, head.components) if info.multiscan else 0
    limit = memory_limit(size, output, coefficients)
    if limit > MAX_MEMORY:
        raise CodecError(f"image too large: {head.width}x{head.height} pixels, {head.components} components"
                         + (", progressive" if head.progressive else "")
                         + f", needs {limit:,} bytes to decode, at most {MAX_MEMORY:,}")
    instance.store.set_limits(memory_size=limit)
    instance.set_fuel(decode_fuel(head, size))
    result = instance.call("decode", pointer, size, MODES[mode], scale)
    out_width, out_height, channels, pixels, warnings, truncated = instance.words(result, 6)
    if (out_width, out_height, channels) != (width, height, CHANNELS[mode]):
        raise CodecError(f"the JPEG codec decoded {out_width}x{out_height}x{channels}, "
                         f"not the {width}x{height}x{CHANNELS[mode]} its header gave")
    warning = instance.string(instance.call("warning_message")) if warnings else None
    return Decoded(width, height, instance.read(pixels, output), warnings, bool(truncated), warning or None)


def encode(pixels: Buffer, width: int, height: int, mode: str, *, quality: int = 75,
           progressive: bool = False, optimize: bool = False, subsampling: int = -1,
           dpi: Optional[tuple[int, int]] = None, arithmetic: bool = False, meter: Optional[Meter] = None,
           stop: Optional[Callable[[], bool]] = None) -> bytes:
    """`pixels` (rows of width x channels bytes, top to bottom) as a JPEG file. `mode` "L",
    "RGB" (stored as YCbCr) or "CMYK" (stored as given, with an Adobe marker); `subsampling`
    -1 libjpeg's default (4:2:0), 0 4:4:4, 1 4:2:2, 2 4:2:0; `dpi` a JFIF density in dots per
    inch (none: density unit 0, aspect 1:1), as Pillow writes them; `arithmetic` codes it with
    arithmetic coding instead of Huffman's (Pillow cannot; for tests and completeness); `meter` a
    budget of the caller's that the call draws on (see `Meter`); `stop` as `decode`'s."""
    buffer = _data(pixels, "pixels")
    if not isinstance(mode, str) or mode not in ENCODE_MODES:
        raise CodecError(f"mode must be one of {', '.join(ENCODE_MODES)}, not {mode!r}")
    _int(width, "width", 1, MAX_DIMENSION)
    _int(height, "height", 1, MAX_DIMENSION)
    _int(quality, "quality", 1, 100)
    _int(subsampling, "subsampling", -1, 2)
    for name, flag in (("progressive", progressive), ("optimize", optimize), ("arithmetic", arithmetic)):
        if not isinstance(flag, bool):
            raise CodecError(f"{name} must be a bool, not {type(flag).__name__}")
    density = (0, 1, 1)
    if dpi is not None:
        if not isinstance(dpi, tuple) or len(dpi) != 2:
            raise CodecError(f"dpi must be a (x, y) tuple of ints, not {dpi!r}")
        density = (1, _int(dpi[0], "dpi[0]", 1, 65535), _int(dpi[1], "dpi[1]", 1, 65535))
    channels = ENCODE_MODES[mode]
    expected = width * height * channels
    size = _nbytes(buffer)
    if size != expected:
        raise CodecError(f"pixels hold {size:,} bytes; {width}x{height} {mode} needs {expected:,}")
    # the output: at most ~1.5x the samples at quality 100 on noise; room for twice that while
    # libjpeg's growing buffer is copied; the coefficients when optimizing or progressive
    output_room = 3 * expected + (1 << 20)
    coefficients = _coefficients(width, height, channels) if (progressive or optimize) else 0
    limit = expected + output_room + coefficients + WORK_BYTES  # (the room is generous already)
    if limit > MAX_MEMORY:
        raise CodecError(f"image too large: {width}x{height} {mode} needs {limit:,} bytes to encode, "
                         f"at most {MAX_MEMORY:,}")
    with _ticking():
        instance = _Instance(limit, encode_fuel(width, height, channels), meter, stop)
        pointer = instance.write(buffer)
        result = instance.call("encode", pointer, width, height, channels, quality, int(progressive),
                               int(optimize), subsampling, *density, int(arithmetic))
        data, length = instance.words(result, 2)
        return instance.read(data, length)
