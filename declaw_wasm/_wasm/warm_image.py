"""The warm image: a module whose initial memory already has the heavy imports done.

Wizer's idea, in Python. Built once per machine (at warmup, or on first use):

1. instrument the runtime module: export wasi-libc's `__wasilibc_reset_preopens` (found by
   name in the name section) and the stack-pointer global; compile it as cheaply as Cranelift
   allows (the *builder*: it runs once, for seconds; it also byte-compiles the guest site);
2. instantiate it in a throw-away sandbox and run the warm-up as `turn`s: import the guest
   boot module, numpy, pandas, matplotlib (Agg) with pyplot, sympy...; check that no file is
   open but the preopened folders;
3. call `__wasilibc_reset_preopens`, so the warm image remembers no fd → path mapping (a later
   instance, with its own mount layout, finds its preopens afresh);
4. write the live memory back as the module's data segments (non-zero runs only), its size as
   the memory's minimum, and the stack pointer's value as the global's initial value;
   route the guest's BLAS routines to the host (`routing.py`: their bodies only, nothing
   renumbered, the memory image untouched; docs/compute.md);
5. compile it optimised and cache it like the plain module (which is compiled only for the
   cold path: docs/architecture.md, "Warmup").

Each instance of the warm module starts with those imports done (a few ms instead of
seconds); `_declaw_boot.start()` renews per instance what must not be shared: environment,
random seeds, tempfile names (see guest/_declaw_boot.py). Commands on it run as one `turn`.
"""

from __future__ import annotations

import hashlib
import json
import platform
import threading
import time
from pathlib import Path
from typing import Optional

import wasmtime

from .._assets import guest_code_dir, rootfs_dir
from .._cache import ensure_file, prune_superseded, writable, write_atomic
from .._printable import logger
from ..exceptions import SandboxException
from ..progress import Progress, Work
from ..settings import cache_dir, warm_image_enabled
from .._blas.routines import ROUTES_TAG, ROUTINES
from . import binary as wb
from .boot import shell_spec
from .artifacts import Artifacts, ensure_artifacts
from .engine import (DEFAULT_FLAGS, FUEL_FLAGS, BuildMissing, EngineFlags, Interpreter, compile_cached,
                     compile_work, engine_for, load_plain_interpreter, wasmtime_version, with_rates)
from .guest import Guest, GuestSpec
from .routing import BODY_VERSION, Route, route_module
from .layout import GUEST_DECLAW, GUEST_PYTHON, Mount, base_env, scratch_root, shared_mounts
from .site import built_site, ensure_site, site_name
from .timers import INTERRUPT_EXPORT, export_interrupt

# Each costs seconds cold; together ~75 MB of initial memory (file-backed, shared, CoW).
WARMUP_IMPORTS = [
    "numpy", "pandas", "matplotlib", "matplotlib.pyplot", "sympy", "scipy", "PIL.Image",
]
RESET_EXPORT = "__declaw_reset_preopens"
STACK_EXPORT = "__declaw_stack_pointer"
BUILDER_OPT_LEVEL = "none"
BUILDER_REGALLOC = "single_pass"


def warmup_source() -> str:
    imports = "\n".join(f"import {name}" for name in WARMUP_IMPORTS)
    return f"""
import sys, importlib.util
spec = importlib.util.spec_from_file_location("_declaw_boot", "{GUEST_DECLAW}/_declaw_boot.py")
boot = importlib.util.module_from_spec(spec)
sys.modules["_declaw_boot"] = boot
spec.loader.exec_module(boot)
boot._install_import_patches()
import declaw_shell, declaw_shell.awk, declaw_shell.git, declaw_shell.sed
import declaw_kernel, declaw_kernel.display, declaw_kernel.charts
declaw_shell.run_command("/tmp", "true | cat && echo $((1+1)) >/dev/null", {{}})  # its lazy imports
import matplotlib
matplotlib.use("Agg")
{imports}
del boot, spec
import declaw_posix.process
declaw_posix.process.baseline()  # sys.modules as programs find it, in the image's pages
import gc
gc.collect()
gc.freeze()  # what the warm image holds is permanent: later collections skip it (0.15 s each)
sys.stdout.flush(); sys.stderr.flush()
"""


CHECK_SOURCE = """
import os, stat, json
def _declaw_open_fds():
    found = []
    for fd in range(3, 256):
        try:
            found.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        except OSError:
            pass
    return found
print(json.dumps(_declaw_open_fds()))
del _declaw_open_fds
"""


def warm_image_key(files_sha: str, flags: EngineFlags, site: str) -> str:
    """Everything the warm image's memory depends on: the runtime, the engine, the warm-up, our
    guest code (guest/) and the guest's site-packages. ("snapshot-v2" is the key's version tag
    from before the rename: kept, so the rename does not rebuild every cache's image.)"""
    guest_code = hashlib.sha256()
    for path in sorted(guest_code_dir().glob("*.py")):  # declaw_shell/ is in the site
        guest_code.update(path.relative_to(guest_code_dir()).as_posix().encode() + b"\0")
        guest_code.update(path.read_bytes())
    parts = [files_sha, wasmtime_version(), flags.key(), platform.machine(), warmup_source(),
             CHECK_SOURCE, guest_code.hexdigest(), site, "snapshot-v2", ROUTES_TAG, BODY_VERSION, INTERRUPT_EXPORT]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:24]


class _BuildGuest(Guest):
    """Runs its turns (the warm-up, then the open-files check), then captures memory and the
    stack pointer."""

    memory_image: bytes = b""
    stack_pointer: int = 0

    def _drive(self, store: wasmtime.Store, instance: wasmtime.Instance) -> int:
        code = super()._drive(store, instance)
        if code != 0:
            return code
        exports = instance.exports(store)
        reset = exports[RESET_EXPORT]
        assert isinstance(reset, wasmtime.Func)
        reset(store)
        sp = exports[STACK_EXPORT]
        assert isinstance(sp, wasmtime.Global)
        self.stack_pointer = int(sp.value(store))
        memory = exports["memory"]
        assert isinstance(memory, wasmtime.Memory)
        self.memory_image = bytes(memory.read(store, 0, memory.data_len(store)))
        return 0


def instrumented_module(original: bytes) -> bytes:
    """Step 1: the runtime module with the two exports the build needs."""
    module = wb.Module.parse(original)
    names = module.function_names()
    if "__wasilibc_reset_preopens" not in names:
        raise RuntimeError("the runtime module has no __wasilibc_reset_preopens")
    exports = module.exports()
    if module.imported_count(3) != 0:
        raise RuntimeError("the runtime module imports globals; the stack pointer is not global 0")
    module.set_exports(exports + [(RESET_EXPORT, wb.EXPORT_FUNC, names["__wasilibc_reset_preopens"]),
                                  (STACK_EXPORT, wb.EXPORT_GLOBAL, 0)])
    return module.encode()


def builder_config(flags: EngineFlags) -> wasmtime.Config:
    """The builder's engine: `flags` (the same code semantics), compiled as cheaply as Cranelift
    allows: no optimisation and the single-pass register allocator (~45 CPU-s on the reference
    machine; no optimisation alone, the old setting, ~78, more than the optimised compile's
    ~61-100: docs/architecture.md, "Warmup"; Winch, Wasmtime's baseline compiler, cannot compile
    the module: it has no wasm exceptions). The builder runs once, for a few seconds of guest code."""
    config = flags.config()
    config.cranelift_opt_level = BUILDER_OPT_LEVEL
    config.cranelift_flag_set("regalloc_algorithm", BUILDER_REGALLOC)
    return config


def builder_interpreter(files: Artifacts, flags: EngineFlags, progress: Progress) -> Interpreter:
    """The instrumented module, compiled cheaply on an engine of its own (no ticker: no deadline;
    it runs only our code: the warm-up, byte-compiling the guest site). It can run everything
    the plain module runs (`run` with an argv, `turn`s); compiled in memory, never cached."""
    data = instrumented_module(files.module.read_bytes())
    engine = wasmtime.Engine(builder_config(flags))
    with with_rates(progress).timed("compiling the warm image's builder (no optimisation)",
                                    compile_work(data, "compile-fast")):
        module = wasmtime.Module(engine, data)
    return Interpreter(files, flags, module, engine)


class Helper:
    """The interpreter that builds what the warm image needs (the guest site, the memory image),
    made on first need: the builder, compiled once per build. (The plain module would do for the
    site, and does when this process has it loaded, but it is compiled only for the cold path.)"""

    def __init__(self, files: Artifacts, flags: EngineFlags, progress: Progress) -> None:
        self.files, self.flags, self.progress = files, flags, progress
        self._builder: Optional[Interpreter] = None
        self._lock = threading.Lock()

    def builder(self) -> Interpreter:
        with self._lock:
            if self._builder is None:
                self._builder = builder_interpreter(self.files, self.flags, self.progress)
            return self._builder


def build_warm_module(builder: Interpreter, progress: Progress) -> bytes:
    """The warmed module's bytes (steps 2–4 of the module docstring), run on `builder`."""
    with scratch_root(rootfs_dir()) as root:  # the build runs in a throw-away root folder
        mounts = root + guest_mounts(builder)
        spec = GuestSpec(argv=[GUEST_PYTHON], env=base_env(), mounts=mounts,
                         turns=[warmup_source(), CHECK_SOURCE], timeout=600, memory_limit=2 << 30)
        guest = _BuildGuest(builder, spec)
        with with_rates(progress).timed("importing the warm-up modules in a live guest", Work("warm-up")):
            guest.start()
            outcome = guest.wait()
        assert outcome is not None
        if outcome.exit_code != 0 or not guest.memory_image:
            raise RuntimeError(f"the warm-up failed (exit {outcome.exit_code}, {outcome.error}): "
                               f"{outcome.stderr[-2000:]}")
        fds = json.loads(outcome.stdout.strip().splitlines()[-1])
        if len(fds) != len(mounts) or not all(fds):
            raise RuntimeError(f"files left open when the warm image is taken (fd kinds: {fds})")

    image = guest.memory_image
    warmed = wb.Module.parse(builder.files.module.read_bytes())  # from the original: no instrumentation exports
    export_interrupt(warmed)
    warmed.set_data(wb.nonzero_segments(image))
    warmed.set_memory_min(len(image) // 65536)
    warmed.set_global_i32(0, guest.stack_pointer)
    skipped = route_module(warmed, blas_routes())  # ~0.5 s
    for reason in skipped:
        progress.say(f"BLAS routine not routed to the host: {reason}")
    return warmed.encode()


def blas_routes() -> list[Route]:
    """The warm image's routed BLAS and LAPACK routines (`_blas/routines.py`)."""
    return [Route(i, r.name, r.sizes, not r.cblas, r.threshold) for i, r in enumerate(ROUTINES)]


def warm_image_path(files: Artifacts, flags: EngineFlags) -> Path:
    """Where the warmed module's wasm bytes are kept: the plain and the fuel compile share them
    (the memory image does not depend on fuel), so `warmup --fuel` only compiles."""
    key = warm_image_key(files.module_sha256, flags, site_name())
    return cache_dir() / "compiled" / f"python-warm-{key}.wasm"


def ensure_warm_image(helper: Helper) -> bytes:
    """The warmed module's bytes, built once (steps 1–4) and kept beside the compiled module."""
    if helper.flags.consume_fuel:
        raise ValueError("the warm image is built on the plain interpreter")
    progress = helper.progress

    def build() -> bytes:
        start = time.monotonic()
        data = build_warm_module(helper.builder(), progress)
        progress.say(f"warm image built in {time.monotonic() - start:.0f}s "
                     f"({len(data) / 1e6:.0f} MB module)")
        return data

    path = warm_image_path(helper.files, helper.flags)
    if not writable(path.parent):  # a read-only cache: build in memory (compiled in memory too)
        return path.read_bytes() if path.exists() else build()
    if not path.exists():  # a new image: compiled modules of older ones go (fuel's included)
        ensure_file(path, build, supersedes="python-warm-*")
        prune_superseded(path, "python-warmfuel-*")
    return path.read_bytes()


def _warm_prefix(flags: EngineFlags) -> str:
    return "python-warmfuel" if flags.consume_fuel else "python-warm"


def warm_module_path(files: Artifacts, flags: EngineFlags, site: str) -> Path:
    """The compiled warm module for `flags` (the plain one keeps its historical name)."""
    key = warm_image_key(files.module_sha256, flags, site)
    return cache_dir() / "compiled" / f"{_warm_prefix(flags)}-{key}.cwasm"


def load_warm_interpreter(files: Artifacts, flags: EngineFlags, progress: Progress,
                          cold: Optional[Interpreter] = None) -> Interpreter:
    """The warm interpreter for `flags`, built and compiled once per machine, then loaded from
    the cache. What has to be built first (the guest site, the warm image's bytes) is built on
    `cold` if this process has the plain interpreter loaded, else on a builder compiled for it."""
    helper = Helper(files, DEFAULT_FLAGS, progress)
    if built_site() is None:
        runner = cold if cold is not None else helper.builder()
        with with_rates(progress).timed("byte-compiling the guest site in a guest", Work("site")):
            ensure_site(runner)
    path = warm_module_path(files, flags, site_name())
    engine = engine_for(flags)
    module = compile_cached(engine, path, lambda: ensure_warm_image(helper), progress,
                            f"compiling the warm image{' with fuel' if flags.consume_fuel else ''}",
                            supersedes=f"{_warm_prefix(flags)}-*", kind=flags.compile_kind(warm=True))
    return Interpreter(files, flags, module, engine, warm=True, source=path)


def load_built_warm_interpreter(flags: EngineFlags, progress: Progress) -> tuple[Optional[Interpreter], Path]:
    """The warm interpreter straight from the cache if its compiled module and the guest site are
    there (the plain module is not loaded: a serverless cold start maps one file), else None;
    and where the compiled module is (or would be)."""
    files = ensure_artifacts(progress)
    path = warm_module_path(files, flags, site_name())
    if built_site() is None or not path.exists():
        return None, path
    engine = engine_for(flags)
    module = wasmtime.Module.deserialize_file(engine, str(path))
    return Interpreter(files, flags, module, engine, warm=True, source=path), path


def checked(interpreter: Interpreter) -> Optional[str]:
    """`self_check`, once per compiled module and machine: a pass is recorded beside the module
    (warmup records it, so a relocated read-only cache starts without the ~20 ms check)."""
    mark = interpreter.source.with_name(interpreter.source.name + ".checked") if interpreter.source else None
    if mark is not None and mark.exists():
        return None
    problem = self_check(interpreter)
    if problem is None and mark is not None and writable(mark.parent):
        try:
            write_atomic(mark, b"")
        except OSError:
            pass
    return problem


def self_check(interpreter: Interpreter) -> Optional[str]:
    """None if the warm interpreter runs a command correctly, else what went wrong."""
    with scratch_root(rootfs_dir()) as root:
        line = "echo $((6 * 7)) | python3 -c 'import sys, pandas; print(input(), sys.argv)'"
        spec = shell_spec(True, "/tmp", line, base_env(), tty=False,
                          mounts=root + guest_mounts(interpreter), timeout=60)
        guest = Guest(interpreter, spec)
        guest.start()
        outcome = guest.wait()
        assert outcome is not None
        if outcome.exit_code != 0 or outcome.stdout != "42 ['-c']\n":
            return f"exit {outcome.exit_code}, stdout {outcome.stdout!r}, stderr {outcome.stderr[-500:]!r}"
        return None


def guest_mounts(interpreter: Interpreter) -> list[Mount]:
    """The read-only mounts every guest of `interpreter` shares (the guest site built if needed)."""
    files = interpreter.files
    return shared_mounts(files.lib_dir, files.mpl_data_dir, guest_code_dir(), ensure_site(interpreter))


_interpreters: dict[tuple[EngineFlags, bool], Interpreter] = {}
_interpreters_lock = threading.Lock()
log = logger("declaw_wasm")


def fuel_build_hint(warm: bool) -> str:
    """The command that builds the fuel interpreter for this path."""
    return "declaw-wasm warmup --fuel" if warm else "DECLAW_WASM_WARM_IMAGE=0 declaw-wasm warmup --fuel"


def get_interpreter(flags: EngineFlags = DEFAULT_FLAGS, progress: Optional[Progress] = None,
                    warm: Optional[bool] = None, build: Optional[bool] = None) -> Interpreter:
    """The process's interpreter for `flags`: the warm image unless disabled (or broken, then
    the cold module, with the reason logged). Builds and compiles once per machine if needed,
    except the fuel interpreter (minutes of compiling): without `build=True` (warmup --fuel) a
    missing fuel build raises `SandboxException` naming the command that builds it."""
    want_warm = warm_image_enabled() if warm is None else warm
    build = not flags.consume_fuel if build is None else build
    with _interpreters_lock:
        interpreter = _interpreters.get((flags, want_warm))
        if interpreter is not None:
            return interpreter
        progress = progress or Progress()
        try:
            if flags.consume_fuel:
                interpreter = _load_fuel_interpreter(want_warm, progress, build)
            else:
                interpreter = _load_interpreter(flags, want_warm, progress)
        except BuildMissing as missing:
            raise SandboxException(
                f"CPU limits (Limits.cpu_instructions) need the runtime compiled with fuel, which is "
                f"not in the cache ({missing.path}): build it once with `{fuel_build_hint(want_warm)}` "
                "(several minutes of compiling)") from None
        _interpreters[(flags, want_warm)] = interpreter
        return interpreter


def _cold(flags: EngineFlags, progress: Progress) -> Interpreter:
    cold = _interpreters.get((flags, False))
    if cold is None:
        cold = _interpreters[(flags, False)] = load_plain_interpreter(flags, progress)
    return cold


def _load_interpreter(flags: EngineFlags, want_warm: bool, progress: Progress) -> Interpreter:
    if not want_warm:
        return _cold(flags, progress)
    interpreter: Optional[Interpreter] = None
    try:
        interpreter, _ = load_built_warm_interpreter(flags, progress)
        if interpreter is None:  # build it (on a builder: the plain module is compiled only if wanted)
            interpreter = load_warm_interpreter(ensure_artifacts(progress), flags, progress,
                                                _interpreters.get((flags, False)))
        problem = checked(interpreter)
    except Exception as exc:  # never worse than the cold path
        problem = f"{type(exc).__name__}: {exc}"
    if problem is None and interpreter is not None:
        return interpreter
    # The plain module, compiled now if it is not in the cache (warmup builds it only when asked).
    log.warning("warm image unavailable, using the cold path: %s", problem)
    progress.say(f"warm image unavailable, using the cold path: {problem}")
    return _cold(flags, progress)


def _load_fuel_interpreter(want_warm: bool, progress: Progress, build: bool) -> Interpreter:
    """The fuel interpreter: the plain module compiled with fuel (cold), or the warm image compiled
    with fuel, which shares the plain warm build's image (only the compile differs)."""
    if not want_warm:
        return load_plain_interpreter(FUEL_FLAGS, progress, build=build)
    interpreter, path = load_built_warm_interpreter(FUEL_FLAGS, progress)
    if interpreter is None:
        if not build:
            raise BuildMissing(path)
        interpreter = load_warm_interpreter(ensure_artifacts(progress), FUEL_FLAGS, progress,
                                            _interpreters.get((DEFAULT_FLAGS, False)))
    problem = checked(interpreter)
    if problem is not None:  # no cold fallback: the cold fuel module is another build
        raise SandboxException(f"the fuel-enabled warm image fails its self-check: {problem}")
    return interpreter
