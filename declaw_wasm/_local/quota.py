"""Disk quotas: bytes and files under a sandbox's writable folders.

wasmtime-py offers no hook into the guest's WASI writes, so a guest cannot be handed ENOSPC
itself. What we can do, and do: the host files API refuses a write that would cross the quota
(`NotEnoughSpaceException`, E2B's "507"), and one watcher thread per process measures every
sandbox that has guests running and stops those guests once the sandbox is over its quota and
still growing from one look to the next (the command ends with exit 137 and `error` naming the
quota; a cell with `DiskQuotaExceeded`); a command that deletes files to get back under it runs.
The walk costs time in proportion to the files, so the watcher waits five walks' time between two
looks at a sandbox, at least 0.25 s and at most 2 s -- but a guest writes at the disk's speed
(~1.8 GB/s here: a 64 MiB sandbox held 900 MiB when it was looked at only every 0.25 s), so a
sandbox where a command or cell starts is looked at 20 ms later, and again every 20 ms (or five
walks' time) while it grows fast enough to reach its quota before a slow look would come.
A guest that ran from one look to the next while the sandbox went over and grew is stopped; a
guest started since the last look is measured once first (what an ended command wrote is not its
doing, and a cleanup must run), unless the sandbox was over at the last look already and grew by
more than 1 MiB since (a cleanup shrinks it). Once guests were stopped for the quota, each command or cell is
measured before it starts, and refused (`NotEnoughSpaceException`; `watcher.admit`) if the sandbox
grew by more than 1 MiB since the stop -- counting what the stopped guests wrote until they ended
as theirs, once: a guest cannot buy a fresh interval of writes with each new command, so the host
holds at most the quota plus one stop's writes for a sandbox (each command used to get an interval
of its own, without end). A file counts at its apparent size
(`_hostfs.walk.counted_bytes`): a sparse file costs the guest one block but counts as what every
export of it would carry.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import TYPE_CHECKING

from .._hostfs.walk import usage
from ..exceptions import NotEnoughSpaceException

if TYPE_CHECKING:
    from .sandbox import LocalSandbox

MIN_INTERVAL = 0.25
# How soon a sandbox is looked at after a command or cell starts in it, and how often while it
# grows fast enough to reach its quota before a look MIN_INTERVAL away: at a guest's write speed
# (~1.8 GB/s on this machine's page cache), what it can write past the quota between two looks.
FAST_INTERVAL = 0.02
STARTING = 2.0  # how long a sandbox is looked at that often for a guest that is still being made
# The longest wait between two looks at a sandbox with guests running, however long its walk takes
# (the guest sets that with its file count): a guest writes at the disk's speed between looks.
MAX_INTERVAL = 2.0
# Growth a guest started since the last look may show at its first look without being stopped: what
# a stopped guest's writes in flight can still add (see the over-quota rule in `_look`).
SLACK = 1 << 20


class _Watcher:
    """One thread for the process: looks at each sandbox with running guests in turn."""

    def __init__(self) -> None:
        self._cores: "weakref.WeakSet[LocalSandbox]" = weakref.WeakSet()
        self._next: "weakref.WeakKeyDictionary[LocalSandbox, float]" = weakref.WeakKeyDictionary()
        # per sandbox: (the guests seen at the last look, the usage then, whether it was over)
        self._last: "weakref.WeakKeyDictionary[LocalSandbox, tuple[set[int], tuple[int, int], bool]]" = \
            weakref.WeakKeyDictionary()
        # per sandbox over its quota: the usage at the look that first stopped guests for it
        self._stopped_at: "weakref.WeakKeyDictionary[LocalSandbox, tuple[int, int]]" = weakref.WeakKeyDictionary()
        # per sandbox: the guests that first stop stopped, until they have ended (see `admit`)
        self._stopping: "weakref.WeakKeyDictionary[LocalSandbox, set[int]]" = weakref.WeakKeyDictionary()
        # per sandbox where a command or cell is starting: until when its guest may still be made
        self._starting: "weakref.WeakKeyDictionary[LocalSandbox, float]" = weakref.WeakKeyDictionary()
        # per sandbox: when it was last looked at
        self._when: "weakref.WeakKeyDictionary[LocalSandbox, float]" = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, core: "LocalSandbox") -> None:
        with self._lock:
            self._cores.add(core)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="declaw-quota", daemon=True)
                self._thread.start()

    def soon(self, core: "LocalSandbox") -> None:
        """A command or cell is starting in the sandbox: look at it FAST_INTERVAL from now."""
        due = time.monotonic() + FAST_INTERVAL
        with self._lock:
            if self._next.get(core, due + 1) > due:
                self._next[core] = due
            self._starting[core] = due + STARTING
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait(self._pause())
            self._wake.clear()
            try:
                self._look()
            except Exception:  # a sandbox vanishing under us must not end the watcher
                pass

    def _pause(self) -> float:
        """Until the next look due (between FAST_INTERVAL and MIN_INTERVAL)."""
        with self._lock:
            due = min(self._next.values(), default=time.monotonic() + MIN_INTERVAL)
        return min(MIN_INTERVAL, max(FAST_INTERVAL / 2, due - time.monotonic()))

    def _interval(self, core: "LocalSandbox", used: tuple[int, int], before: tuple[int, int], walk: float,
                  fresh: bool) -> float:
        """Until the next look at a sandbox with guests running: soon after guests started (to see
        how fast they write) or while it grows fast enough to reach its quota before a slow look."""
        slow = min(MAX_INTERVAL, max(MIN_INTERVAL, 5 * walk))
        last = self._when.get(core)
        self._when[core] = now = time.monotonic()
        if fresh:
            return max(FAST_INTERVAL, 5 * walk)
        if last is None or now <= last:
            return slow
        rate = max(0, used[0] - before[0]) / (now - last)  # bytes a second since the last look
        files = max(0, used[1] - before[1]) / (now - last)
        limits = core.limits
        if used[0] + rate * slow * 2 > limits.disk_bytes or used[1] + files * slow * 2 > limits.disk_files:
            return min(slow, max(FAST_INTERVAL, 5 * walk))
        return slow

    def _look(self) -> None:
        with self._lock:
            cores = list(self._cores)
        now = time.monotonic()
        for core in cores:
            guests = core.running_guests() if core.running else set()
            if not guests:
                with self._lock:
                    if self._starting.get(core, 0) > now:  # its guest is still being made
                        self._next[core] = now + FAST_INTERVAL
                    else:
                        self._next.pop(core, None)  # looked at again when a guest starts (soon)
                continue
            seen, before, was_over = self._last.get(core, (set(), (0, 0), False))
            started = guests - seen
            # a sandbox already over its quota is looked at as soon as a guest starts in it
            if self._next.get(core, 0) > now and not (was_over and started):
                continue
            start = time.monotonic()
            used = usage(core.fs.writable_folders())
            walk = time.monotonic() - start
            interval = self._interval(core, used, before, walk, bool(started))
            with self._lock:
                self._next[core] = time.monotonic() + interval
            message = core.limits.over_disk_quota(*used)
            self._last[core] = (guests, used, bool(message))
            if not message:
                self._stopped_at.pop(core, None)
                self._stopping.pop(core, None)
                continue
            # Over, and growing while the same guests ran: stop them. A guest started since the last
            # look is measured once first, so that a cleanup of an over-full sandbox can run -- unless
            # the sandbox was over at that look already and has grown since by more than a stopped
            # guest's writes in flight: then whatever runs in it is writing past the quota.
            grew = used[0] > before[0] or used[1] > before[1]
            stop = guests & seen if grew else set()
            if was_over and _beyond(used, before):
                stop |= started
            if stop:
                if core not in self._stopped_at:  # the first stop since the sandbox was last under
                    self._stopped_at[core] = used
                    self._stopping[core] = set(stop)
                core.stop_for_quota(message, stop)

    def admit(self, core: "LocalSandbox") -> None:
        """Before a command or cell starts in a sandbox whose guests were stopped for its quota:
        measure it now, so that the new guest's first look counts only what it wrote itself, and
        refuse it (NotEnoughSpaceException) if the sandbox has grown by more than SLACK since the
        stop. What the stopped guests wrote after the look that stopped them (a write in flight,
        the walk's and the stop's own time: hundreds of MiB from a cell writing in a loop) is
        theirs: once they have ended, the usage then becomes the base, once per stop (a cleanup
        that started after such a stop used to be stopped itself for that growth). So a cleanup
        after a stop runs (`rm` shrinks the sandbox), and a guest that writes again is stopped
        and leaves the next one refused: however many commands a guest runs, the host holds at
        most the quota plus one stop's writes for it. The files API (`files.remove`) frees room;
        the next start measures again."""
        self.soon(core)
        base = self._stopped_at.get(core)
        last = self._last.get(core)
        if base is None or last is None:
            return
        used = usage(core.fs.writable_folders())
        message = core.limits.over_disk_quota(*used)
        self._last[core] = (last[0], used, bool(message))
        if not message:
            self._stopped_at.pop(core, None)
            self._stopping.pop(core, None)
            return
        stopped = self._stopping.get(core)
        if stopped is not None and not stopped & core.running_guests():
            del self._stopping[core]
            base = self._stopped_at[core] = (max(base[0], used[0]), max(base[1], used[1]))
        if _beyond(used, base):
            raise NotEnoughSpaceException(
                f"{message}; the sandbox grew past it after its guests were stopped for it: free room "
                "with files.remove before running more commands or cells")


def _beyond(used: tuple[int, int], base: tuple[int, int]) -> bool:
    return used[0] > base[0] + SLACK or used[1] > base[1] + 64


watcher = _Watcher()
