"""Standby sandboxes: `Sandbox.create` hands out one made ahead of time, with a parked guest.

Making a sandbox costs its folder (the root skeleton copied, a template's files laid over it)
and, for its first command, a guest booted from the warm image. Per template and limits,
`DECLAW_WASM_STANDBY` (settings.py) sandboxes are kept ready, each with its guest parked
(parking.py): `create` takes one, gives it its lifetime, metadata, envs and network
(`LocalSandbox.begin`: the envs reach guests with each command line, so a standby guest needs
none), and a background thread makes the next. Standby starts on the second `create` of its
template and limits in a process, so a program that makes one sandbox never pays for it;
standby sandboxes are not listed and do not count as live until handed out, and are killed at
exit. A create with volumes makes its own sandbox (their mounts are fixed before any guest
starts). (Not to be confused with `_pool/`, the backend that runs sandboxes in worker processes.)

The key covers what a standby sandbox was made from: the template (for a custom one, its
template.json as it is on disk now, so a rebuilt template is never served stale), the limits
(the memory limit and fuel are fixed in a guest's store) and the runtime (tests switch between
the warm and cold paths).
"""

from __future__ import annotations

import functools
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Callable, Hashable, Optional

from .._packages.catalog import GuestTemplate
from ..limits import Limits
from ..settings import standby_size
from .parking import parking

if TYPE_CHECKING:
    from .._wasm.guest import Guest
    from .sandbox import LocalSandbox

STANDBY_AFTER = 2  # creates of one key before it gets standby sandboxes
# Bounds on what a process keeps per key (a harness may create with a different template or
# limits each time): keys with standby sandboxes kept, and keys whose creates are counted; the
# least recently created key goes first (its standby sandboxes are killed).
MAX_KEYS = 8
MAX_COUNTED = 256
TEACH_WAIT_S = 5.0  # the longest a teaching standby sandbox is held back for its park turn (~30 ms)
QUIET_S = 0.05  # refills wait until creates pause this long (a burst of creates is not helped),
# except a key's first: made at once, its parked guest teaches the runtime its hot pages (prefault.py)


def standby_key(template: GuestTemplate, limits: Limits, interpreter: object) -> Optional[Hashable]:
    """What a standby sandbox must match (None: none can)."""
    stamp: tuple[int, int] = (0, 0)
    if template.root is not None:
        try:
            st = (template.root.parent / "template.json").stat()
        except OSError:
            return None
        stamp = (st.st_ino, st.st_mtime_ns)
    return (template.name, template.stdlib_only, template.bundle, str(template.site), str(template.root),
            tuple(sorted(template.envs.items())), stamp, limits, id(interpreter))


def teaches_hot_pages(template: GuestTemplate) -> bool:
    """Whether a standby guest of `template` may teach the runtime its hot pages (prefault.py):
    a built-in template's only; a custom one's files, site and envs are its author's (a site's
    .pth files run in the park turn's `python3`), not the runtime's."""
    return template.root is None and template.site is None and not template.envs


def _learned(sandbox: "LocalSandbox") -> bool:
    """Whether the sandbox's runtime has its hot pages (or will never have them)."""
    hot = sandbox.interpreter.hot_pages
    return hot is not None and (hot.runs is not None or hot.disabled)


def _park_turn_over(guest: "Guest") -> None:
    """Wait (at most TEACH_WAIT_S) until a teaching guest's park turn is over. A create that took
    it sooner (a loop creating back to back takes each standby sandbox as it is made) made it not
    pristine, so nothing was learned, and a loop never pauses for another: the runtime's guests
    then took every copy-on-write fault one at a time (~5 ms of each new sandbox's command)."""
    deadline = time.monotonic() + TEACH_WAIT_S
    while not guest.ready.wait(0.02) and not guest.done and time.monotonic() < deadline:
        pass


def _pristine(sandbox: "LocalSandbox") -> bool:
    """Whether nothing of a create's has reached the standby sandbox yet (not handed out)."""
    return not sandbox.begun


class Standby:
    """The process's standby sandboxes, and the one thread that makes them."""

    def __init__(self, make: Callable[[GuestTemplate, Limits], "LocalSandbox"]) -> None:
        """`make(template, limits)`: a new sandbox, not yet begun (sandbox.py's)."""
        self._make = make
        self._lock = threading.Lock()
        self._ready: dict[Hashable, deque["LocalSandbox"]] = {}
        self._wanted: dict[Hashable, tuple[GuestTemplate, Limits]] = {}
        self._creates: dict[Hashable, int] = {}
        self._work = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._closed = False
        self._last_take = 0.0
        self._made: set[Hashable] = set()  # keys that had a standby sandbox made (the first waits for no pause)
        self._evicted: list["LocalSandbox"] = []  # standby sandboxes of keys no longer kept, to kill

    def take(self, key: Optional[Hashable], template: GuestTemplate, limits: Limits) -> Optional["LocalSandbox"]:
        """A standby sandbox for `key` (None if none is ready); counts the create either way."""
        if key is None or standby_size() <= 0:
            return None
        with self._lock:
            self._last_take = time.monotonic()
            # dicts keep insertion order: re-inserting makes the key the most recently created
            creates = self._creates[key] = self._creates.pop(key, 0) + 1
            if len(self._creates) > MAX_COUNTED:
                del self._creates[next(iter(self._creates))]
            if key in self._wanted or creates >= STANDBY_AFTER:
                self._wanted[key] = self._wanted.pop(key, (template, limits))
            if len(self._wanted) > MAX_KEYS:
                while len(self._wanted) > MAX_KEYS:
                    self._drop(next(iter(self._wanted)))
                self._start()  # the thread kills them
            ready = self._ready.get(key)
            sandbox = ready.popleft() if ready else None
            if key in self._wanted:
                self._start()
        if sandbox is not None and not sandbox.running:
            return None
        return sandbox

    def _drop(self, key: Hashable) -> None:  # under the lock
        """Stop wanting `key`: its ready sandboxes go to be killed (by the thread's next round)."""
        self._wanted.pop(key, None)
        self._made.discard(key)
        self._evicted.extend(self._ready.pop(key, ()))

    def ready(self, key: Hashable) -> int:
        with self._lock:
            return len(self._ready.get(key, ()))

    def _start(self) -> None:  # under the lock
        self._work.set()
        if self._thread is None:
            self._thread = threading.Thread(target=self._fill, name="declaw-standby", daemon=True)
            self._thread.start()

    def _fill(self) -> None:
        while True:
            self._work.wait()
            self._work.clear()
            while True:
                with self._lock:
                    if self._closed:
                        return
                    evicted, self._evicted = self._evicted, []
                for sandbox in evicted:
                    sandbox.kill()
                with self._lock:
                    size = standby_size()
                    short = [(key, spec) for key, spec in self._wanted.items()
                             if len(self._ready.get(key, ())) < size]
                if not short:
                    break
                quiet = time.monotonic() - self._last_take
                first = any(key not in self._made for key, _spec in short[:1])
                if quiet < QUIET_S and not first:
                    time.sleep(QUIET_S - quiet)
                    continue
                for key, (template, limits) in short[:1]:
                    try:
                        sandbox = self._make(template, limits)
                    except Exception:  # a template deleted meanwhile, a full disk: stop wanting it
                        with self._lock:
                            self._drop(key)
                        continue
                    if standby_key(template, limits, sandbox.interpreter) != key:
                        # made from something else than the key says: the runtime switched meanwhile
                        # (DECLAW_WASM_WARM_IMAGE), or the template was rebuilt. Wanted again by the
                        # next creates of the key, if they come.
                        sandbox.kill()
                        with self._lock:
                            self._drop(key)
                            self._creates.pop(key, None)
                        continue
                    teach = teaches_hot_pages(template) and not _learned(sandbox)
                    guest = parking.park(sandbox, pristine=functools.partial(_pristine, sandbox) if teach else None)
                    if teach and guest is not None:
                        _park_turn_over(guest)  # offered once it has taught the runtime
                    with self._lock:
                        kept = key in self._wanted  # not evicted meanwhile
                        if kept:
                            self._made.add(key)
                            self._ready.setdefault(key, deque()).append(sandbox)
                    if not kept:
                        sandbox.kill()

    def close(self) -> None:
        """Kill every standby sandbox (at exit)."""
        with self._lock:
            self._closed = True
            sandboxes = [s for ready in self._ready.values() for s in ready] + self._evicted
            self._ready.clear()
            self._evicted = []
            self._work.set()
        for sandbox in sandboxes:
            try:
                sandbox.kill()
            except Exception:
                pass

