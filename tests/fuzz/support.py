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

from hypothesis import settings


def profile_name() -> str:
    """HYPOTHESIS_PROFILE if set, else hypothesis's own `--hypothesis-profile` if it is one of
    the fuzzer's (tests/conftest.py registers `ci` and `nightly`), else "ci"."""
    name = os.environ.get("HYPOTHESIS_PROFILE") or settings.get_current_profile_name()
    return name if name in ("ci", "nightly") else "ci"


def profile(scale: float = 1.0) -> settings:
    """The run's profile, with `scale` times its examples (a slower test runs fewer)."""
    chosen = settings.get_profile(profile_name())
    return settings(chosen, max_examples=max(1, int(chosen.max_examples * scale)))


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
        if not self.on:
            return
        try:
            self._record(event, args)
        except Exception:  # a hook must never fail the event; record that it could not look
            with self.lock:
                self.written.append(f"<unreadable {event} event>")

    def _record(self, event: str, args: tuple[Any, ...]) -> None:
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
                with self.lock:
                    if O_TMPFILE and isinstance(flags, int) and flags & O_TMPFILE == O_TMPFILE:
                        self.anonymous += 1
                    else:
                        self.written.append(os.fsdecode(path))
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
