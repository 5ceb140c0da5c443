"""The Wasmtime engine and the compiled guest module: configured once, compiled once, cached.

One `Runtime` per process and engine flavour. Compiling the 100 MB CPython module takes 1–3
minutes on 2 cores, so the result is serialized to `<cache>/compiled/<key>.cwasm`, where the key
covers everything the machine code depends on (module hash, wasmtime version, engine flags,
CPU architecture). Later loads are an mmap (`Module.deserialize_file`, ~10 ms) and every
instance maps the module's memory image copy-on-write. A file lock keeps two processes from
compiling at once; a read-only cache folder is opened as it is, never written.

An epoch ticker thread advances the engine's epoch every `TICK_S`; each store's deadline
callback (see guest.py) decides on every tick whether its guest may go on.
"""

from __future__ import annotations

import hashlib
import platform
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import wasmtime

from .._cache import ensure_file, writable
from ..progress import Progress
from ..settings import cache_dir
from .artifacts import Artifacts, ensure_artifacts

TICK_S = 0.01
MAX_WASM_STACK = 2 << 20  # the largest wasmtime-py allows without a larger async stack
EXPECTED_COMPILE_S = 100.0


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
        cfg.max_wasm_stack = self.max_wasm_stack
        cfg.wasm_exceptions = True
        return cfg

    def key(self) -> str:
        return f"epoch{int(self.epoch_interruption)}-fuel{int(self.consume_fuel)}-stack{self.max_wasm_stack}"


class Runtime:
    """An engine, a compiled CPython module, and (once per engine) its epoch ticker.

    `warm` runtimes run the snapshot module (commands as one `turn`, see snapshot.py); cold
    ones run the plain module's `run` with a WASI argv.
    """

    def __init__(self, files: Artifacts, flags: EngineFlags, module: wasmtime.Module,
                 engine: wasmtime.Engine, warm: bool = False, ticker: bool = True) -> None:
        self.files = files
        self.flags = flags
        self.engine = engine
        self.module = module
        self.warm = warm
        self.source: Optional[Path] = None  # the compiled module's file in the cache, if any
        if ticker:
            threading.Thread(target=self._tick, name="declaw-epoch", daemon=True).start()

    def _tick(self) -> None:
        while True:
            time.sleep(TICK_S)
            self.engine.increment_epoch()


def compiled_path(files: Artifacts, flags: EngineFlags) -> Path:
    key = "|".join([files.module_sha256, wasmtime_version(), flags.key(), platform.machine()])
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return cache_dir() / "compiled" / f"python-{digest}.cwasm"


def wasmtime_version() -> str:
    from importlib.metadata import version

    return version("wasmtime")


def compile_cached(engine: wasmtime.Engine, path: Path, source: Callable[[], bytes],
                   progress: Progress, what: str, expected_s: float,
                   supersedes: str = "") -> wasmtime.Module:
    """Load the compiled module at `path`, or compile `source()` (the wasm bytes) once and
    store it there (see _cache.py: locked, atomic, superseded keys pruned)."""
    def build() -> bytes:
        data = source()
        with progress.timed(what, expected_s):
            return bytes(wasmtime.Module(engine, data).serialize())

    ensure_file(path, build, supersedes)
    # Loaded from disk so the code is file-backed (mmap, shared) rather than heap memory.
    return wasmtime.Module.deserialize_file(engine, str(path))


def load_plain_runtime(flags: EngineFlags, progress: Progress) -> Runtime:
    """The plain (cold) module for `flags` with its own engine and epoch ticker."""
    files = ensure_artifacts(progress)
    engine = wasmtime.Engine(flags.config())
    path = compiled_path(files, flags)
    if not path.exists() and not writable(path.parent):
        progress.say(f"cache {path.parent} is read-only and holds no compiled module; "
                     "compiling in memory (run `declaw-wasm warmup` where the cache is writable)")
        with progress.timed("compiling the Python runtime", EXPECTED_COMPILE_S):
            module = wasmtime.Module.from_file(engine, str(files.module))
    else:
        module = compile_cached(engine, path, files.module.read_bytes, progress,
                                "compiling the Python runtime", EXPECTED_COMPILE_S)
    runtime = Runtime(files, flags, module, engine)
    runtime.source = path if path.exists() else None
    return runtime
