"""The Wasmtime engine and the compiled guest module: configured once, compiled once, cached.

One `Interpreter` (an engine and a compiled CPython module of the runtime) per process and engine
flavour. Compiling the 100 MB CPython module takes 1–3 minutes on 2 cores, so the result is
serialized to `<cache>/compiled/<key>.cwasm`, where the key covers everything the machine code
depends on (module hash, wasmtime version, engine flags, CPU architecture). Later loads are an
mmap (`Module.deserialize_file`, ~10 ms) and every instance maps the module's memory image
copy-on-write. A file lock keeps two processes from compiling at once; a read-only cache folder
is opened as it is, never written.

An epoch ticker thread advances the engine's epoch every `TICK_S`; each store's deadline
callback (see guest.py) decides on every tick whether its guest may go on.
"""

from __future__ import annotations

import functools
import hashlib
import platform
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

import wasmtime
from wasmtime import _ffi

from .._cache import ensure_file, writable
from ..progress import Progress, Rates, Work
from ..settings import cache_dir
from .artifacts import Artifacts, ensure_artifacts
from .binary import code_size

if TYPE_CHECKING:
    from .prefault import HotPages

TICK_S = 0.01
# The guest's C code recurses on this native stack (the guest thread's: guest.py's
# GUEST_THREAD_STACK, 64 MiB, leaves the host half). CPython's own depth checks on WASI see only
# its shadow stack in linear memory, which deallocating nested containers never moves: at 2 MiB a
# 16 000-deep nested list freed, or json.loads of 8 000 brackets, trapped the guest (the whole
# command line ended with 134); at 32 MiB they take ~200 000 and ~120 000 levels (dicts), and
# json raises its RecursionError first. Touched pages stay with the guest's thread until it ends:
# at most this much per running guest, beside its memory limit (docs/security.md).
MAX_WASM_STACK = 32 << 20
RATES_FILE = "rates.json"  # CPU-seconds per unit of each warmup step, measured here (progress.py)


@dataclass(frozen=True)
class EngineFlags:
    """The engine settings that change the generated code, hence the cache key."""

    epoch_interruption: bool = True
    consume_fuel: bool = False
    max_wasm_stack: int = MAX_WASM_STACK

    def config(self) -> wasmtime.Config:
        cfg = wasmtime.Config()
        cfg.epoch_interruption = self.epoch_interruption
        cfg.consume_fuel = self.consume_fuel
        # wasmtime refuses a wasm stack larger than its async stack (2 MiB unless set, and only
        # through the C API: wasmtime-py has no setter); nothing here runs async, so it costs nothing
        _ffi.wasmtime_config_async_stack_size_set(cfg.ptr(), self.max_wasm_stack)
        cfg.max_wasm_stack = self.max_wasm_stack
        cfg.wasm_exceptions = True
        return cfg

    def compile_kind(self, warm: bool = False) -> str:
        """The kind of compile step for progress estimates (fuel checks make more code; the warm
        module's memory image costs more too)."""
        return "compile" + ("-warm" if warm else "") + ("-fuel" if self.consume_fuel else "")

    def key(self) -> str:
        # not the stack size: a runtime limit, not in the code (a module compiled under 2 MiB
        # deserialises and runs under 32 MiB)
        return f"epoch{int(self.epoch_interruption)}-fuel{int(self.consume_fuel)}"


DEFAULT_FLAGS = EngineFlags()
# Fuel (a per-store instruction budget, `Limits.cpu_instructions`) changes the generated code: a
# module compiled for it is a second compile, built on request only (`declaw-wasm warmup --fuel`).
FUEL_FLAGS = EngineFlags(consume_fuel=True)


class Interpreter:
    """An engine, a compiled CPython module, and (once per engine) its epoch ticker.

    `warm` interpreters run the warm image (commands as one `turn`, see warm_image.py); cold
    ones run the plain module's `run` with a WASI argv.
    """

    def __init__(self, files: Artifacts, flags: EngineFlags, module: wasmtime.Module,
                 engine: wasmtime.Engine, warm: bool = False, source: Optional[Path] = None) -> None:
        self.files = files
        self.flags = flags
        self.engine = engine
        self.module = module
        self.warm = warm
        self.source = source  # the compiled module's file in the cache, if any
        self.hot_pages: Optional["HotPages"] = None  # the warm image's only (prefault.py), made at first use


_engines: dict[EngineFlags, wasmtime.Engine] = {}
_engines_lock = threading.Lock()


def engine_for(flags: EngineFlags) -> wasmtime.Engine:
    """The process's engine for `flags` (the plain and the warm module share it), with its
    epoch ticker running."""
    with _engines_lock:
        engine = _engines.get(flags)
        if engine is None:
            engine = _engines[flags] = wasmtime.Engine(flags.config())
            threading.Thread(target=_tick, args=(engine,), name="declaw-epoch", daemon=True).start()
        return engine


def _tick(engine: wasmtime.Engine) -> None:
    while True:
        time.sleep(TICK_S)
        engine.increment_epoch()


class BuildMissing(Exception):
    """A compiled module that is only built on request (the fuel build) is not in the cache."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path} is not built")
        self.path = path


def compiled_path(files: Artifacts, flags: EngineFlags) -> Path:
    key = "|".join([files.module_sha256, wasmtime_version(), flags.key(), platform.machine(), PLAIN_TAG])
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return cache_dir() / "compiled" / f"python-{digest}.cwasm"


@functools.lru_cache(maxsize=1)
def wasmtime_version() -> str:
    from .distinfo import version

    return version("wasmtime", "wasmtime")


def machine_rates() -> Rates:
    """The measured rates of this machine's warmup steps, kept in the cache (progress.py)."""
    return Rates(cache_dir() / "compiled" / RATES_FILE)


def with_rates(progress: Progress) -> Progress:
    """`progress`, estimating from this machine's measured rates (read from the cache once)."""
    if progress.rates.path is None:
        progress.rates = machine_rates()
    return progress


def compile_work(data: bytes, kind: str = "compile") -> Work:
    """Compiling `data`: MB of code (the data segments of the warm image cost next to nothing)."""
    return Work(kind, (code_size(data) or len(data)) / 1e6)


def compile_cached(engine: wasmtime.Engine, path: Path, source: Callable[[], bytes],
                   progress: Progress, what: str, supersedes: str = "", kind: str = "compile") -> wasmtime.Module:
    """Load the compiled module at `path`, or compile `source()` (the wasm bytes) once and
    store it there (see _cache.py: locked, atomic, superseded keys pruned)."""
    def build() -> bytes:
        data = source()
        with with_rates(progress).timed(what, compile_work(data, kind)):
            return bytes(wasmtime.Module(engine, data).serialize())

    ensure_file(path, build, supersedes)
    # Loaded from disk so the code is file-backed (mmap, shared) rather than heap memory.
    return wasmtime.Module.deserialize_file(engine, str(path))


PLAIN_TAG = "interrupt-export"  # what plain_module adds to the wheel's module (in its compiled file's key)


def plain_module(files: Artifacts) -> bytes:
    """The plain module: the wheel's, plus the export the guest's timers trip signals with
    (timers.py)."""
    from . import binary as wb
    from .timers import export_interrupt

    module = wb.Module.parse(files.module.read_bytes())
    export_interrupt(module)
    return module.encode()


def load_plain_interpreter(flags: EngineFlags, progress: Progress, build: bool = True) -> Interpreter:
    """The plain (cold) module for `flags` with its own engine and epoch ticker. `build=False`:
    a module not yet in the cache raises `BuildMissing` instead of compiling for minutes."""
    files = ensure_artifacts(progress)
    engine = engine_for(flags)
    path = compiled_path(files, flags)
    if not build and not path.exists():
        raise BuildMissing(path)
    if not path.exists() and not writable(path.parent):
        progress.say(f"cache {path.parent} is read-only and holds no compiled module; "
                     "compiling in memory (run `declaw-wasm warmup` where the cache is writable)")
        data = plain_module(files)
        with progress.timed("compiling the Python runtime module", compile_work(data, flags.compile_kind())):
            module = wasmtime.Module(engine, data)
    else:
        module = compile_cached(engine, path, lambda: plain_module(files), progress,
                                "compiling the Python runtime module", kind=flags.compile_kind())
    return Interpreter(files, flags, module, engine, source=path if path.exists() else None)
