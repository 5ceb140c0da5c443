"""Disk quotas: bytes and files under a sandbox's writable folders.

wasmtime-py offers no hook into the guest's WASI writes, so a guest cannot be handed ENOSPC
itself. What we can do, and do: the host files API refuses a write that would cross the quota
(`NotEnoughSpaceException`, E2B's "507"), and one watcher thread per process measures every
sandbox that has guests running and stops those guests once the sandbox is over its quota and
still growing from one look to the next (the command ends with exit 137 and `error` naming the
quota; a cell with `DiskQuotaExceeded`); a command that deletes files to get back under it runs.
The walk costs time in proportion to the files, so the watcher waits at least five walks' time
between two looks at a sandbox. A file counts at its apparent size (`_hostfs.walk.counted_bytes`): a
sparse file costs the guest one block but counts as what every export of it would carry.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import TYPE_CHECKING

from .._hostfs.walk import usage

if TYPE_CHECKING:
    from .sandbox import LocalSandbox

MIN_INTERVAL = 0.25


class _Watcher:
    """One thread for the process: looks at each sandbox with running guests in turn."""

    def __init__(self) -> None:
        self._cores: "weakref.WeakSet[LocalSandbox]" = weakref.WeakSet()
        self._next: "weakref.WeakKeyDictionary[LocalSandbox, float]" = weakref.WeakKeyDictionary()
        # per sandbox: (the guests seen at the last look, the usage then)
        self._last: "weakref.WeakKeyDictionary[LocalSandbox, tuple[set[int], tuple[int, int]]]" = \
            weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, core: "LocalSandbox") -> None:
        with self._lock:
            self._cores.add(core)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="declaw-quota", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(MIN_INTERVAL)
            try:
                self._look()
            except Exception:  # a sandbox vanishing under us must not end the watcher
                pass

    def _look(self) -> None:
        with self._lock:
            cores = list(self._cores)
        now = time.monotonic()
        for core in cores:
            guests = core.running_guests() if core.running else set()
            if not guests or self._next.get(core, 0) > now:
                continue
            start = time.monotonic()
            used = usage(core.fs.writable_folders())
            self._next[core] = time.monotonic() + max(MIN_INTERVAL, 5 * (time.monotonic() - start))
            seen, before = self._last.get(core, (set(), (0, 0)))
            self._last[core] = (guests, used)
            message = core.limits.over_disk_quota(*used)
            # Over, and growing while the same guests ran: stop them. A guest started since the
            # last look is measured once first, so a cleanup of an over-full sandbox can run.
            if message and (used[0] > before[0] or used[1] > before[1]) and guests & seen:
                core.stop_for_quota(message, guests & seen)


watcher = _Watcher()
