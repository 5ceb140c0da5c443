"""Parked guests: a sandbox's next command line finds a guest already booted and waiting.

A guest's mounts and memory limit are fixed when its WASI context is built, and every sandbox
has its own folders, so a parked guest belongs to one sandbox. It is instantiated from the warm
snapshot and runs its first turn, `_declaw_boot.park` (the template applied, and a throw-away
`true` through the shell, so the copy-on-write page faults a command line takes are behind it),
then waits on its thread for its next turn. A command line becomes that turn: `_declaw_boot.
shell` renews what a fresh guest would have (environment, working directory, seeds, tempfile
names; tests/test_warm_image.py runs the renewal tests on parked guests) and runs the line. A
guest still parking when its line comes runs the line right after, which is never slower than a
fresh guest. After the command, the sandbox gets a new parked guest.

Idle cost is bounded: each parked guest holds a thread and the pages its park turn touched
(benchmarks/startup.py measures both), so at most `DECLAW_WASM_PARKED` (settings.py) guests are
parked in a process, for the sandboxes used last (least recently used first out); a sandbox
without one starts a fresh guest, as before. Only the warm image parks (the cold path's
programs are `run` once, with a fixed argv).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Callable, Optional

from .._wasm.guest import Guest
from ..settings import parked_guests

if TYPE_CHECKING:
    from .launcher import GuestSandbox


class Parking:
    """The process's parked guests, one per sandbox at most, least recently used first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._guests: "OrderedDict[str, Guest]" = OrderedDict()  # sandbox id -> its parked guest
        self.hits = 0  # commands that found a parked guest

    def take(self, sandbox: "GuestSandbox") -> Optional[Guest]:
        """The sandbox's parked guest, now its caller's (None: none is parked)."""
        with self._lock:
            guest = self._guests.pop(sandbox.sandbox_id, None)
        if guest is None or guest.done:
            return None
        self.hits += 1
        return guest

    def park(self, sandbox: "GuestSandbox", pristine: Optional[Callable[[], bool]] = None) -> Optional[Guest]:
        """Give the sandbox a parked guest (if it has none and may have one), evicting the least
        recently used sandbox's if the process is at its limit; the guest parked now, if any.
        `pristine`: see Launcher.park."""
        limit = parked_guests()
        if limit <= 0 or not sandbox.launcher.warm or not sandbox.running:
            return None
        evicted: list[Guest] = []
        with self._lock:
            if sandbox.sandbox_id in self._guests:
                self._guests.move_to_end(sandbox.sandbox_id)
                return None
            while len(self._guests) >= limit:
                evicted.append(self._guests.popitem(last=False)[1])
            guest = sandbox.launcher.park(pristine)
            self._guests[sandbox.sandbox_id] = guest
        for old in evicted:
            old.kill("killed")
        if not sandbox.running:  # killed meanwhile: its kill may have looked before we parked
            self.drop(sandbox)
        return guest

    def drop(self, sandbox: "GuestSandbox") -> None:
        """Stop the sandbox's parked guest, if any (the sandbox ends)."""
        with self._lock:
            guest = self._guests.pop(sandbox.sandbox_id, None)
        if guest is not None:
            guest.kill("killed")

    def count(self) -> int:
        with self._lock:
            return len(self._guests)

    def is_parked(self, sandbox: "GuestSandbox") -> bool:
        """Whether the sandbox has a parked guest that has finished parking (for tests)."""
        with self._lock:
            guest = self._guests.get(sandbox.sandbox_id)
        return guest is not None and guest.ready.is_set() and not guest.done


parking = Parking()
