"""`resource` in the guest: CPython's names, constants and errors, answered from the sandbox.

- `getrusage(RUSAGE_SELF)`: user time is the guest's CPU time (`time.process_time()`), system
  time 0; `ru_maxrss` (KiB) is the guest's memory as the host counts it (the door's `sysinfo`;
  a Wasm memory never shrinks, so its size is its peak). `RUSAGE_CHILDREN` is all zeros: a program's
  "children" (subprocess) run in this same guest, so their usage is already in RUSAGE_SELF.
- `getrlimit`: the soft `RLIMIT_AS`, `RLIMIT_DATA` and `RLIMIT_RSS` are the sandbox's memory
  limit (what `free` shows as total), their hard limits unlimited (so code that caps itself with
  `setrlimit(RLIMIT_AS, (2 << 30, 2 << 30))` runs, as on a Linux box); the others Linux's defaults.
- `setrlimit` checks its arguments as Linux does (soft ≤ hard; a hard limit can be lowered, never
  raised) and records them for `getrlimit` for the rest of the program (the next program of a
  command line starts from the defaults, as a new process would), but enforces nothing: the sandbox's own limits
  (memory, CPU, disk, timeouts: `Limits`) are what bound a guest.
"""

from __future__ import annotations

import time

from declaw_posix import program_state
from declaw_posix._structs import StructSequence

error = OSError

RLIM_INFINITY = -1
(RLIMIT_CPU, RLIMIT_FSIZE, RLIMIT_DATA, RLIMIT_STACK, RLIMIT_CORE, RLIMIT_RSS, RLIMIT_NPROC,
 RLIMIT_NOFILE, RLIMIT_MEMLOCK, RLIMIT_AS, RLIMIT_LOCKS, RLIMIT_SIGPENDING, RLIMIT_MSGQUEUE,
 RLIMIT_NICE, RLIMIT_RTPRIO, RLIMIT_RTTIME) = range(16)
RLIMIT_OFILE = RLIMIT_NOFILE
RUSAGE_SELF, RUSAGE_CHILDREN, RUSAGE_THREAD = 0, -1, 1

class struct_rusage(StructSequence):  # noqa: N801 - CPython's name
    """getrusage()'s answer."""

    __module__ = "resource"
    __slots__ = ()
    fields = ("ru_utime", "ru_stime", "ru_maxrss", "ru_ixrss", "ru_idrss", "ru_isrss", "ru_minflt",
              "ru_majflt", "ru_nswap", "ru_inblock", "ru_oublock", "ru_msgsnd", "ru_msgrcv",
              "ru_nsignals", "ru_nvcsw", "ru_nivcsw")
    ru_utime: float
    ru_stime: float
    ru_maxrss: int


_MEMORY = (RLIMIT_AS, RLIMIT_DATA, RLIMIT_RSS)
_DEFAULTS = {RLIMIT_STACK: (8 << 20, RLIM_INFINITY), RLIMIT_CORE: (0, RLIM_INFINITY),
             RLIMIT_NOFILE: (1024, 1 << 20), RLIMIT_MEMLOCK: (8 << 20, 8 << 20),
             RLIMIT_MSGQUEUE: (819200, 819200),
             RLIMIT_NICE: (0, 0), RLIMIT_RTPRIO: (0, 0)}


def _sysinfo() -> dict[str, object] | None:
    """The host's `sysinfo` answer (None where no door answers: a bare interpreter)."""
    try:
        from declaw_shell import door

        info = door.call("sysinfo")
    except Exception:  # noqa: BLE001 - no door, or the op is not this guest's: the defaults
        return None
    return info if isinstance(info, dict) else None


def _resource(resource: object) -> int:
    if not isinstance(resource, int):
        raise TypeError(f"'{type(resource).__name__}' object cannot be interpreted as an integer")
    if not 0 <= resource < 16:
        raise ValueError("invalid resource specified")
    return int(resource)


def getrlimit(resource: int, /) -> tuple[int, int]:
    """(soft, hard) of `resource`."""
    resource = _resource(resource)
    recorded: dict[int, tuple[int, int]] = program_state("rlimits")
    if resource in recorded:
        return recorded[resource]
    if resource in _MEMORY:
        info = _sysinfo()
        total = info.get("mem_total") if info else None
        if isinstance(total, int) and total > 0:
            return (total, RLIM_INFINITY)
    return _DEFAULTS.get(resource, (RLIM_INFINITY, RLIM_INFINITY))


def setrlimit(resource: int, limits: tuple[int, int], /) -> None:
    """Check and record (soft, hard) for `getrlimit`; nothing is enforced (see the module)."""
    resource = _resource(resource)
    try:
        pair = tuple(limits)
    except TypeError:
        raise TypeError(f"'{type(limits).__name__}' object is not iterable") from None
    if len(pair) != 2:
        raise ValueError("expected a tuple of 2 integers")
    for value in pair:
        if not isinstance(value, int):
            raise TypeError(f"'{type(value).__name__}' object cannot be interpreted as an integer")
    soft, hard = (RLIM_INFINITY if v < 0 or v >= 1 << 64 else int(v) for v in pair)

    def above(a: int, b: int) -> bool:
        return b != RLIM_INFINITY and (a == RLIM_INFINITY or a > b)

    if above(soft, hard):
        raise ValueError("current limit exceeds maximum limit")
    if above(hard, getrlimit(resource)[1]):
        raise ValueError("not allowed to raise maximum limit")
    program_state("rlimits")[resource] = (soft, hard)


def prlimit(pid: int, resource: int, limits: tuple[int, int] | None = None, /) -> tuple[int, int]:
    """Linux's prlimit for this process (pid 0 or its own): the old limits, the new ones set."""
    if not isinstance(pid, int):
        raise TypeError(f"'{type(pid).__name__}' object cannot be interpreted as an integer")
    if pid not in (0, _own_pid()):
        raise ProcessLookupError(3, "No such process")
    old = getrlimit(resource)
    if limits is not None:
        setrlimit(resource, limits)
    return old


def _own_pid() -> int:
    import os

    return os.getpid()


def getrusage(who: int, /) -> struct_rusage:
    """The guest's usage (see the module)."""
    if not isinstance(who, int):
        raise TypeError(f"'{type(who).__name__}' object cannot be interpreted as an integer")
    if who not in (RUSAGE_SELF, RUSAGE_CHILDREN, RUSAGE_THREAD):
        raise ValueError("invalid who parameter")
    if who == RUSAGE_CHILDREN:
        return struct_rusage((0.0, 0.0) + (0,) * 14)
    info = _sysinfo() or {}
    memory = info.get("self_memory")
    memory = memory if isinstance(memory, int) and memory > 0 else 0
    return struct_rusage((time.process_time(), 0.0, memory // 1024) + (0,) * 13)


def getpagesize() -> int:
    """The guest's page size as Linux code means it (4096; a Wasm page is 64 KiB)."""
    return 4096
