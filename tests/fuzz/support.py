"""What the door fuzzer shares: its hypothesis profile, and the record of what the host does
meanwhile (an audit hook: every process started, every file opened for writing)."""

from __future__ import annotations

import os
import stat
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from hypothesis import Phase, settings


def profile_name() -> str:
    """HYPOTHESIS_PROFILE if set, else hypothesis's own `--hypothesis-profile` if it is one of
    the fuzzer's (tests/conftest.py registers `ci` and `nightly`), else "ci"."""
    name = os.environ.get("HYPOTHESIS_PROFILE") or settings.get_current_profile_name()
    return name if name in ("ci", "nightly") else "ci"


def profile(scale: float = 1.0, shrink: bool = True) -> settings:
    """The run's profile, with `scale` times its examples (a slower test runs fewer; one whose
    examples take seconds does not shrink a failure: its blob reproduces it)."""
    chosen = settings.get_profile(profile_name())
    phases = chosen.phases if shrink else tuple(p for p in chosen.phases if p != Phase.shrink)
    return settings(chosen, max_examples=max(1, int(chosen.max_examples * scale)), phases=phases)


WATCHED = frozenset({"subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "os.system", "open",
                     "tempfile.mkdtemp", "tempfile.mkstemp"})
_inside = threading.local()
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
O_TMPFILE = getattr(os, "O_TMPFILE", 0)


@dataclass
class HostEffects:
    """What this process did while `on`: argv of every process started (subprocess.Popen,
    os.exec*, os.posix_spawn, os.system), every path opened for writing, every temporary
    folder or file the host made (tempfile's own events)."""

    on: bool = False
    started: list[list[str]] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    anonymous: int = 0  # O_TMPFILE files: no name, gone when closed
    temporary: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.on or event not in WATCHED or getattr(_inside, "hook", False):
            return  # (what the hook itself does raises events too: sys._getframe...)
        _inside.hook = True
        try:
            self._record(event, args, sys._getframe(1))
        except Exception:  # a hook must never fail the event; record that it could not look
            with self.lock:
                self.written.append(f"<unreadable {event} event>")
        finally:
            _inside.hook = False

    def _record(self, event: str, args: tuple[Any, ...], caller: Any) -> None:
        if event == "subprocess.Popen":
            self._start([os.fsdecode(a) for a in (args[1] if isinstance(args[1], (list, tuple)) else [args[1]])])
        elif event in ("os.exec", "os.posix_spawn", "os.spawn"):
            self._start([os.fsdecode(a) for a in args[1]])
        elif event == "os.system":
            self._start(["<os.system>", os.fsdecode(args[0])])
        elif event == "open":
            path, mode, flags = args
            if isinstance(path, int) or path is None:
                return  # an fd opened before: not a new file
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                (isinstance(flags, int) and flags & WRITE_FLAGS)
            if writes:
                path = _beneath(os.fsdecode(path), caller)
                with self.lock:  # (a folder "opened for writing" is an unnamed O_TMPFILE file in it)
                    if O_TMPFILE and isinstance(flags, int) and (flags & O_TMPFILE) == O_TMPFILE \
                            or os.path.isdir(path):
                        self.anonymous += 1
                    else:
                        self.written.append(path)
        elif event in ("tempfile.mkdtemp", "tempfile.mkstemp"):
            with self.lock:
                self.temporary.append(os.fsdecode(args[0]))

    def _start(self, argv: list[str]) -> None:
        with self.lock:
            self.started.append(argv)

    def clear(self) -> None:
        with self.lock:
            self.started.clear()
            self.written.clear()
            self.temporary.clear()


DIR_FD_NAMES = ("parent", "dir_fd", "src_dir", "dst_dir")


def _beneath(path: str, caller: Any) -> str:
    """A relative path opened with `dir_fd` (the confined files API walks from a mount's
    folder with openat): joined to the folder of the caller's directory fd, found by the names
    the host's code gives it (the audit event carries no dir_fd)."""
    if os.path.isabs(path) or caller is None:
        return path
    local = caller.f_locals
    for name in DIR_FD_NAMES:
        value = local.get(name)
        if type(value) is int and value > 2:
            try:
                folder = os.readlink(f"/proc/self/fd/{value}")
            except OSError:
                continue
            if os.path.isdir(folder):
                return os.path.join(folder, path)
    return f"<relative, no folder known: {path}>"


EFFECTS = HostEffects()
_installed = threading.Lock()
_hooked: list[bool] = []


def host_effects() -> HostEffects:
    """The process-wide recorder (its audit hook is installed once: hooks cannot be removed)."""
    with _installed:
        if not _hooked:
            sys.addaudithook(EFFECTS.hook)
            _hooked.append(True)
    return EFFECTS


def under(path: str, roots: Iterable[Path | str]) -> bool:
    """Whether `path` (resolved) lies in one of `roots` (resolved)."""
    real = Path(os.path.realpath(path))
    return any(real == Path(os.path.realpath(r)) or Path(os.path.realpath(r)) in real.parents for r in roots)


def is_device(path: str) -> bool:
    try:
        return stat.S_ISCHR(os.stat(path).st_mode)
    except OSError:
        return False
