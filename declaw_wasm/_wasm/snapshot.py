"""The warm snapshot: a module whose initial memory already has the heavy imports done.

Wizer's idea, in Python. Built once per machine (at warmup, or on first use):

1. instrument the runtime module: export wasi-libc's `__wasilibc_reset_preopens` (found by
   name in the name section) and the stack-pointer global;
2. instantiate it in a throw-away sandbox and run the warm-up as `turn`s: import the guest
   boot module, numpy, pandas, matplotlib (Agg) with pyplot, sympy...; check that no file is
   open but the preopened folders;
3. call `__wasilibc_reset_preopens`, so the snapshot remembers no fd → path mapping (a later
   instance, with its own mount layout, finds its preopens afresh);
4. write the live memory back as the module's data segments (non-zero runs only), its size as
   the memory's minimum, and the stack pointer's value as the global's initial value;
5. compile and cache it like the plain module.

Each instance of the warm module starts with those imports done (a few ms instead of
seconds); `_declaw_boot.start()` renews per instance what must not be shared: environment,
random seeds, tempfile names (see runtime/_declaw_boot.py). Commands on it run as one `turn`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import platform
import threading
import time
from typing import Optional

import wasmtime

from .._assets import guest_runtime_dir, rootfs_dir
from ..progress import Progress
from ..settings import cache_dir, snapshot_enabled
from . import binary as wb
from .boot import shell_spec
from .engine import EngineFlags, Runtime, compile_cached, load_plain_runtime, wasmtime_version
from .guest import Guest, GuestSpec
from .layout import GUEST_DECLAW, GUEST_PYTHON, Mount, base_env, scratch_root, shared_mounts
from .site import ensure_site

# Each costs seconds cold; together ~75 MB of initial memory (file-backed, shared, CoW).
WARMUP_IMPORTS = [
    "numpy", "pandas", "matplotlib", "matplotlib.pyplot", "sympy", "scipy", "PIL.Image",
]
RESET_EXPORT = "__declaw_reset_preopens"
STACK_EXPORT = "__declaw_stack_pointer"
EXPECTED_WARMUP_S = 20.0
EXPECTED_COMPILE_S = 110.0


def warmup_source() -> str:
    imports = "\n".join(f"import {name}" for name in WARMUP_IMPORTS)
    return f"""
import sys, importlib.util
spec = importlib.util.spec_from_file_location("_declaw_boot", "{GUEST_DECLAW}/_declaw_boot.py")
boot = importlib.util.module_from_spec(spec)
sys.modules["_declaw_boot"] = boot
spec.loader.exec_module(boot)
boot._install_import_patches()
import declaw_shell, declaw_shell.awk, declaw_kernel, declaw_kernel.display, declaw_kernel.charts
declaw_shell.run_command("/tmp", "true | cat && echo $((1+1)) >/dev/null", {{}})  # its lazy imports
import matplotlib
matplotlib.use("Agg")
{imports}
del boot, spec
import gc
gc.collect()
gc.freeze()  # what the snapshot holds is permanent: later collections skip it (0.15 s each)
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


def snapshot_key(files_sha: str, flags: EngineFlags, site: str) -> str:
    """Everything the snapshot's memory depends on: the runtime, the engine, the warm-up, our
    guest code (runtime/) and the guest's site-packages."""
    guest_code = hashlib.sha256()
    for path in sorted(guest_runtime_dir().glob("*.py")):  # declaw_shell/ is in the site
        guest_code.update(path.relative_to(guest_runtime_dir()).as_posix().encode() + b"\0")
        guest_code.update(path.read_bytes())
    parts = [files_sha, wasmtime_version(), flags.key(), platform.machine(), warmup_source(),
             CHECK_SOURCE, guest_code.hexdigest(), site, "snapshot-v2"]
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


def build_warm_module(cold: Runtime, progress: Progress) -> bytes:
    """The warmed module's bytes (steps 1–4 of the module docstring)."""
    original = cold.files.module.read_bytes()
    module = wb.Module.parse(original)
    names = module.function_names()
    if "__wasilibc_reset_preopens" not in names:
        raise RuntimeError("the runtime module has no __wasilibc_reset_preopens")
    exports = module.exports()
    if module.imported_count(3) != 0:
        raise RuntimeError("the runtime module imports globals; the stack pointer is not global 0")
    module.set_exports(exports + [(RESET_EXPORT, wb.EXPORT_FUNC, names["__wasilibc_reset_preopens"]),
                                  (STACK_EXPORT, wb.EXPORT_GLOBAL, 0)])
    instrumented_bytes = module.encode()

    # The instrumented module runs once: compile it fast (no optimisation), same engine flags.
    config = cold.flags.config()
    config.cranelift_opt_level = "none"
    build_engine = wasmtime.Engine(config)
    with progress.timed("compiling the snapshot builder", 60.0):
        instrumented = wasmtime.Module(build_engine, instrumented_bytes)

    with scratch_root(rootfs_dir()) as root:  # the build runs in a throw-away root folder
        mounts = root + guest_mounts(cold)
        build_runtime = Runtime(cold.files, cold.flags, instrumented, build_engine, ticker=False)
        spec = GuestSpec(argv=[GUEST_PYTHON], env=base_env(), mounts=mounts,
                         turns=[warmup_source(), CHECK_SOURCE], timeout=600, memory_limit=2 << 30)
        guest = _BuildGuest(build_runtime, spec)
        with progress.timed("importing the warm-up modules in a live guest", EXPECTED_WARMUP_S):
            guest.start()
            outcome = guest.wait()
        assert outcome is not None
        if outcome.exit_code != 0 or not guest.memory_image:
            raise RuntimeError(f"the warm-up failed (exit {outcome.exit_code}, {outcome.error}): "
                               f"{outcome.stderr[-2000:]}")
        fds = json.loads(outcome.stdout.strip().splitlines()[-1])
        if len(fds) != len(mounts) or not all(fds):
            raise RuntimeError(f"files left open at snapshot time (fd kinds: {fds})")

    image = guest.memory_image
    warmed = wb.Module.parse(original)  # from the original: no instrumentation exports
    warmed.set_data(wb.nonzero_segments(image))
    warmed.set_memory_min(len(image) // 65536)
    warmed.set_global_i32(0, guest.stack_pointer)
    return warmed.encode()


def load_warm_runtime(cold: Runtime, progress: Progress) -> Runtime:
    """The warm runtime, built and compiled once per machine, then loaded from the cache."""
    key = snapshot_key(cold.files.module_sha256, cold.flags, ensure_site(cold).name)

    def build() -> bytes:
        start = time.monotonic()
        data = build_warm_module(cold, progress)
        progress.say(f"snapshot built in {time.monotonic() - start:.0f}s "
                     f"({len(data) / 1e6:.0f} MB module)")
        return data

    path = cache_dir() / "compiled" / f"python-warm-{key}.cwasm"
    module = compile_cached(cold.engine, path, build, progress, "compiling the warm snapshot",
                            EXPECTED_COMPILE_S, supersedes="python-warm-*")
    runtime = Runtime(cold.files, cold.flags, module, cold.engine, warm=True, ticker=False)
    runtime.source = path
    return runtime


def self_check(runtime: Runtime) -> Optional[str]:
    """None if the warm runtime runs a command correctly, else what went wrong."""
    with scratch_root(rootfs_dir()) as root:
        line = "echo $((6 * 7)) | python3 -c 'import sys, pandas; print(input(), sys.argv)'"
        spec = shell_spec(True, "/tmp", line, base_env(), tty=False,
                          mounts=root + guest_mounts(runtime), timeout=60)
        guest = Guest(runtime, spec)
        guest.start()
        outcome = guest.wait()
        assert outcome is not None
        if outcome.exit_code != 0 or outcome.stdout != "42 ['-c']\n":
            return f"exit {outcome.exit_code}, stdout {outcome.stdout!r}, stderr {outcome.stderr[-500:]!r}"
        return None


def guest_mounts(runtime: Runtime) -> list[Mount]:
    """The read-only mounts every guest of `runtime` shares (the guest site built if needed)."""
    files = runtime.files
    return shared_mounts(files.lib_dir, files.mpl_data_dir, guest_runtime_dir(), ensure_site(runtime))


DEFAULT_FLAGS = EngineFlags()
_runtimes: dict[tuple[EngineFlags, bool], Runtime] = {}
_runtimes_lock = threading.Lock()
log = logging.getLogger("declaw_wasm")


def get_runtime(flags: EngineFlags = DEFAULT_FLAGS, progress: Optional[Progress] = None,
                warm: Optional[bool] = None) -> Runtime:
    """The process's runtime for `flags`: the warm snapshot unless disabled (or broken, then
    the cold module, with the reason logged). Builds and compiles once per machine if needed."""
    want_warm = snapshot_enabled() if warm is None else warm
    with _runtimes_lock:
        runtime = _runtimes.get((flags, want_warm))
        if runtime is not None:
            return runtime
        progress = progress or Progress()
        cold = _runtimes.get((flags, False))
        if cold is None:
            cold = _runtimes[(flags, False)] = load_plain_runtime(flags, progress)
        if not want_warm:
            return cold
        chosen: Runtime = cold
        try:
            chosen = load_warm_runtime(cold, progress)
            problem = self_check(chosen)
        except Exception as exc:  # never worse than the cold path
            problem = f"{type(exc).__name__}: {exc}"
        if problem is not None:
            log.warning("warm snapshot unavailable, using the cold path: %s", problem)
            progress.say(f"warm snapshot unavailable, using the cold path: {problem}")
            chosen = cold
        _runtimes[(flags, want_warm)] = chosen
        return chosen
