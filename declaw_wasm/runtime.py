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
import logging
import os
import platform
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import wasmtime

from .artifacts import RuntimeFiles, ensure_runtime_files
from .progress import Progress
from .settings import cache_dir, snapshot_enabled

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

    def __init__(self, files: RuntimeFiles, flags: EngineFlags, module: wasmtime.Module,
                 engine: wasmtime.Engine, warm: bool = False, ticker: bool = True) -> None:
        self.files = files
        self.flags = flags
        self.engine = engine
        self.module = module
        self.warm = warm
        if ticker:
            threading.Thread(target=self._tick, name="declaw-epoch", daemon=True).start()

    def _tick(self) -> None:
        while True:
            time.sleep(TICK_S)
            self.engine.increment_epoch()


_runtimes: dict[tuple[EngineFlags, bool], Runtime] = {}
_runtimes_lock = threading.Lock()
log = logging.getLogger("declaw_wasm")


def get_runtime(flags: EngineFlags = EngineFlags(), progress: Progress | None = None,
                warm: bool | None = None) -> Runtime:
    """The process's runtime for `flags`: the warm snapshot unless disabled (or broken, then
    the cold module, with the reason logged). Compiles once per machine if needed."""
    want_warm = snapshot_enabled() if warm is None else warm
    with _runtimes_lock:
        runtime = _runtimes.get((flags, want_warm))
        if runtime is not None:
            return runtime
        progress = progress or Progress()
        cold = _runtimes.get((flags, False))
        if cold is None:
            files = ensure_runtime_files(progress)
            engine = wasmtime.Engine(flags.config())
            module = _load_or_compile(engine, files, flags, progress)
            cold = _runtimes[(flags, False)] = Runtime(files, flags, module, engine)
        if not want_warm:
            return cold
        from .snapshot import load_warm_runtime, self_check

        try:
            runtime = load_warm_runtime(cold, progress)
            problem = self_check(runtime)
        except Exception as exc:  # never worse than the cold path
            problem = f"{type(exc).__name__}: {exc}"
        if problem is not None:
            log.warning("warm snapshot unavailable, using the cold path: %s", problem)
            progress.say(f"warm snapshot unavailable, using the cold path: {problem}")
            runtime = cold
        _runtimes[(flags, want_warm)] = runtime
        return runtime


def compiled_path(files: RuntimeFiles, flags: EngineFlags) -> Path:
    key = "|".join([files.module_sha256, wasmtime_version(), flags.key(), platform.machine()])
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return cache_dir() / "compiled" / f"python-{digest}.cwasm"


def compile_cached(engine: wasmtime.Engine, path: Path, source: Callable[[], bytes],
                   progress: Progress, what: str, expected_s: float,
                   supersedes: Optional[str] = None) -> wasmtime.Module:
    """Load the compiled module at `path`, or compile `source()` (the wasm bytes) once and store
    it there: atomically, under a file lock so two processes never compile it at the same time.
    After a build, files matching the glob `supersedes` (older keys) are deleted."""
    if path.exists():
        return wasmtime.Module.deserialize_file(engine, str(path))
    if not _writable(path.parent):
        raise RuntimeError(f"cache {path.parent} is read-only and has no {path.name}")
    from filelock import FileLock

    with FileLock(str(path) + ".lock"):
        if not path.exists():  # else another process compiled it while we waited
            data = source()
            with progress.timed(what, expected_s):
                module = wasmtime.Module(engine, data)
            _write_atomic(path, module.serialize())
            if supersedes:
                prune_superseded(path, supersedes)
    # Loaded from disk so the code is file-backed (mmap, shared) rather than heap memory.
    return wasmtime.Module.deserialize_file(engine, str(path))


def publish(staging: Path, target: Path, key: str, pattern: str) -> None:
    """Make a finished cache folder visible: mark it READY, move it into place (replacing a
    broken one), and delete the builds it supersedes (its siblings matching `pattern`)."""
    (staging / "READY").write_text(key)
    if target.exists():
        shutil.rmtree(target)
    os.replace(staging, target)
    prune_superseded(target, pattern)


def prune_superseded(keep: Path, pattern: str) -> None:
    """Delete `keep`'s siblings matching `pattern` (builds for older keys: a warm module is
    ~350 MB). Best effort; a process still using one keeps its mapping (unlink frees the file
    only once it is unmapped)."""
    for old in keep.parent.glob(pattern):
        if old.name in (keep.name, keep.name + ".lock"):
            continue
        try:
            if old.is_dir():
                shutil.rmtree(old)
            else:
                old.unlink()
        except OSError:
            pass


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".cwasm-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)  # atomic: readers see the whole file or none
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def wasmtime_version() -> str:
    from importlib.metadata import version

    return version("wasmtime")


def _load_or_compile(engine: wasmtime.Engine, files: RuntimeFiles, flags: EngineFlags,
                     progress: Progress) -> wasmtime.Module:
    path = compiled_path(files, flags)
    if not path.exists() and not _writable(path.parent):
        progress.say(f"cache {path.parent} is read-only and holds no compiled module; "
                     "compiling in memory (run `declaw-wasm warmup` where the cache is writable)")
        with progress.timed("compiling the Python runtime", EXPECTED_COMPILE_S):
            return wasmtime.Module.from_file(engine, str(files.module))
    return compile_cached(engine, path, files.module.read_bytes, progress,
                          "compiling the Python runtime", EXPECTED_COMPILE_S)


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK)
