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
import os
import platform
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import wasmtime

from .artifacts import RuntimeFiles, ensure_runtime_files
from .progress import Progress
from .settings import cache_dir

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
    """An engine, its compiled CPython module, and its epoch ticker."""

    def __init__(self, files: RuntimeFiles, flags: EngineFlags, module: wasmtime.Module,
                 engine: wasmtime.Engine) -> None:
        self.files = files
        self.flags = flags
        self.engine = engine
        self.module = module
        self._ticker = threading.Thread(target=self._tick, name="declaw-epoch", daemon=True)
        self._ticker.start()

    def _tick(self) -> None:
        while True:
            time.sleep(TICK_S)
            self.engine.increment_epoch()


_runtimes: dict[EngineFlags, Runtime] = {}
_runtimes_lock = threading.Lock()


def get_runtime(flags: EngineFlags = EngineFlags(), progress: Progress | None = None) -> Runtime:
    """The process's runtime for `flags`, compiling (once per machine) if needed."""
    with _runtimes_lock:
        runtime = _runtimes.get(flags)
        if runtime is None:
            progress = progress or Progress()
            files = ensure_runtime_files(progress)
            engine = wasmtime.Engine(flags.config())
            module = _load_or_compile(engine, files, flags, progress)
            runtime = _runtimes[flags] = Runtime(files, flags, module, engine)
        return runtime


def compiled_path(files: RuntimeFiles, flags: EngineFlags) -> Path:
    key = "|".join([files.module_sha256, _wasmtime_version(), flags.key(), platform.machine()])
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return cache_dir() / "compiled" / f"python-{digest}.cwasm"


def _wasmtime_version() -> str:
    from importlib.metadata import version

    return version("wasmtime")


def _load_or_compile(engine: wasmtime.Engine, files: RuntimeFiles, flags: EngineFlags,
                     progress: Progress) -> wasmtime.Module:
    path = compiled_path(files, flags)
    if path.exists():
        return wasmtime.Module.deserialize_file(engine, str(path))
    if not _writable(path.parent):
        progress.say(f"cache {path.parent} is read-only and holds no compiled module; "
                     "compiling in memory (run `declaw-wasm warmup` where the cache is writable)")
        with progress.timed("compiling the Python runtime", EXPECTED_COMPILE_S):
            return wasmtime.Module.from_file(engine, str(files.module))
    from filelock import FileLock

    with FileLock(str(path) + ".lock"):
        if path.exists():  # another process compiled it while we waited
            return wasmtime.Module.deserialize_file(engine, str(path))
        with progress.timed("compiling the Python runtime", EXPECTED_COMPILE_S):
            module = wasmtime.Module.from_file(engine, str(files.module))
        fd, tmp = tempfile.mkstemp(prefix=".cwasm-", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(module.serialize())
            os.replace(tmp, path)  # atomic: readers see the whole file or none
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    # Re-load from disk so the module's code is file-backed (mmap) rather than heap memory.
    return wasmtime.Module.deserialize_file(engine, str(path))


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK)
