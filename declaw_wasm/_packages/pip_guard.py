"""The host's pip, run under a guard that no input to pip can turn off: it starts no process.

pip.py never runs `python -m pip` itself; it runs this file as a program
(`python -c BOOT pip_guard.py ARGS...`, see `pip.pip_command`), which installs an audit hook
(`sys.addaudithook`, PEP 578) and then runs pip's own `__main__`, exactly as `-m pip` would.
The hook refuses, before the process exists, every way Python starts one: `subprocess.Popen`,
`os.exec*`, `os.posix_spawn*`, `os.spawn*`, `os.system`, `os.fork`, `os.forkpty`, and ctypes
looking up libc's fork/exec/spawn/system; `_posixsubprocess.fork_exec` (which multiprocessing
calls without an audit event) is replaced by one that refuses too.

Why that is the right line: everything that would run a package's code on the host starts a
process — building a source distribution (the PEP 517 hooks run in a subprocess), a legacy
`setup.py`, installing build dependencies into an isolated environment — while resolving and
downloading wheels starts none. The only processes pip starts on its wheel-only paths are
probes for its User-Agent header (`lsb_release -a`, `uname -rs`, `rustc --version`); pip
ignores their failure, so they are refused quietly. Keyring lookups, the other place pip may
start a program, are off: pip.py always passes `--no-input`, and pip then uses no keyring
unless `keyring-provider` is configured explicitly (`subprocess` would be refused here).

So `--only-binary :all:` is the first line (pip never *chooses* a source distribution) and
this is the second: whatever pip's inputs say (a constraints file, the host's pip.conf, an
index that serves only an sdist), nothing gets built or run. A refusal writes a line starting
with `MARK` to stderr, which the host turns into a clear error.

This file is a standalone program: it imports only the standard library (pip.py imports it
only for `MARK`).
"""

from __future__ import annotations

import os
import runpy
import sys
from types import FrameType
from typing import Any, Optional

MARK = "declaw-wasm-guard: refused "
EVENTS = frozenset({"subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "os.system",
                    "os.fork", "os.forkpty", "os.startfile", "pty.spawn"})
# libc functions that start a program, looked up through ctypes
SYMBOLS = frozenset({"fork", "vfork", "clone", "clone3", "execv", "execve", "execvp", "execvpe",
                     "execl", "execle", "execlp", "fexecve", "execveat", "posix_spawn",
                     "posix_spawnp", "system", "popen", "forkpty", "syscall"})


def _user_agent_probe(frame: Optional[FrameType]) -> bool:
    """Whether the refused call comes from pip's User-Agent probes (distro, rustc)."""
    while frame is not None:
        if frame.f_code.co_name == "user_agent" and \
                frame.f_globals.get("__name__") == "pip._internal.network.session":
            return True
        frame = frame.f_back
    return False


def _refuse(what: str) -> None:
    if not _user_agent_probe(sys._getframe(1)):
        os.write(2, f"{MARK}{what}\n".encode("utf-8", "replace"))
    raise PermissionError(f"declaw-wasm: pip may not start a process on the host ({what})")


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event in EVENTS:
        _refuse(event)
    elif event == "ctypes.dlsym" and len(args) > 1:
        name = args[1].decode("ascii", "replace") if isinstance(args[1], bytes) else args[1]
        if isinstance(name, str) and name in SYMBOLS:
            _refuse(f"ctypes.dlsym {name}")


def _no_fork_exec(*args: Any, **kwargs: Any) -> Any:
    _refuse("_posixsubprocess.fork_exec")


def install_guard() -> None:
    sys.addaudithook(_hook)
    try:
        import _posixsubprocess
    except ImportError:  # not POSIX
        return
    _posixsubprocess.fork_exec = _no_fork_exec


def main() -> None:
    install_guard()
    sys.argv = ["pip", *sys.argv[1:]]
    runpy.run_module("pip", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
