"""WASI path calls made to answer as Linux does for paths with a trailing slash.

wasmtime's WASI resolves a path by opening its parent folder and acting on the last component
(cap-std). For `dir/` the last component is `.`, so `rmdir("dir/")` became `rmdir(".")` in
`dir`: EINVAL, where Linux removes the folder (`shutil.rmtree("dir/")` failed the same way).
Linux drops trailing slashes from the last component of rmdir's path, and refuses to unlink
anything named with one (EISDIR for a folder, ENOTDIR otherwise, the link itself not followed);
wasmtime answers `unlink("link-to-dir/")` with EISDIR. Every other path call (open, stat, mkdir,
rename, symlink, link, readlink, utime) already answers as Linux does: tests/test_paths.py runs
the same table of calls natively and in a guest and compares.

So `path_remove_directory` is shadowed: for a path ending in `/` it calls wasmtime's with the
slashes dropped (the same bytes, a shorter length). wasmtime's WASI functions find the guest's
memory through their caller's exports, so the host calls them through a tiny wasm module that
imports the guest's memory (see shims.FdReaddir). `path_unlink_file` is not shadowed: every
unlink would pay a trip through Python (measured: several times the cost of the call itself),
for one error code; the guest's `os.unlink`/`os.remove` answer for a trailing slash themselves
(guest/_declaw_boot.py).
"""

from __future__ import annotations

import threading
import weakref
from typing import Optional

import wasmtime

EIO, EFAULT = 29, 21  # WASI errno values


def _without_trailing_slashes(raw: bytes) -> int:
    """The length of `raw` with trailing slashes dropped (but `/` stays `/`)."""
    stripped = len(raw.rstrip(b"/"))
    return stripped if stripped else min(len(raw), 1)


_TRAMPOLINE_WAT = """(module
  (import "guest" "memory" (memory 0))
  (import "wasi_snapshot_preview1" "path_remove_directory" (func $real (param i32 i32 i32) (result i32)))
  (export "memory" (memory 0))
  (func (export "call") (param i32 i32 i32) (result i32)
    (call $real (local.get 0) (local.get 1) (local.get 2))))"""
_modules: "weakref.WeakKeyDictionary[wasmtime.Engine, wasmtime.Module]" = weakref.WeakKeyDictionary()
_modules_lock = threading.Lock()


def _trampoline(engine: wasmtime.Engine) -> wasmtime.Module:
    with _modules_lock:
        module = _modules.get(engine)
        if module is None:
            module = _modules[engine] = wasmtime.Module(engine, bytes(wasmtime.wat2wasm(_TRAMPOLINE_WAT)))
        return module


class PathRemoveDirectory:
    """`path_remove_directory(fd, path, len)`: trailing slashes dropped, as Linux's rmdir does."""

    def __init__(self, engine: wasmtime.Engine, original: wasmtime.Func) -> None:
        self.engine = engine
        self.original = original
        self.call: Optional[wasmtime.Func] = None  # the trampoline, made on first use

    def __call__(self, caller: wasmtime.Caller, fd: int, ptr: int, length: int) -> int:
        try:
            memory = caller["memory"]
            assert isinstance(memory, wasmtime.Memory)
            if not (0 <= ptr and 0 <= length <= 1 << 20 and ptr + length <= memory.data_len(caller)):
                return EFAULT
            raw = bytes(memory.read(caller, ptr, ptr + length))
            if raw.endswith(b"/"):
                length = _without_trailing_slashes(raw)
            if self.call is None:
                instance = wasmtime.Instance(caller, _trampoline(self.engine), [memory, self.original])
                call = instance.exports(caller)["call"]
                assert isinstance(call, wasmtime.Func)
                self.call = call
            return int(self.call(caller, fd, ptr, length))
        except BaseException:  # never into wasmtime (see guest.py's module docstring)
            return EIO


def shadow_path_calls(engine: wasmtime.Engine, linker: wasmtime.Linker, store: wasmtime.Store) -> None:
    """Define the shim in `linker` (after `define_wasi`, with shadowing allowed)."""
    original = linker.get(store, "wasi_snapshot_preview1", "path_remove_directory")
    assert isinstance(original, wasmtime.Func)
    i32 = wasmtime.ValType.i32()
    linker.define_func("wasi_snapshot_preview1", "path_remove_directory", wasmtime.FuncType([i32] * 3, [i32]),
                       PathRemoveDirectory(engine, original), access_caller=True)
