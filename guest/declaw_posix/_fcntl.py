"""`fcntl` in the guest: CPython's names and constants over what WASI has.

- `flock`: locks between this guest's open files, as Linux's are between open file descriptions:
  a second `open()` of a locked file is refused with `LOCK_NB` (BlockingIOError), and without it,
  where Linux would wait forever on itself (one process, one thread), OSError EDEADLK says so. A
  lock ends with `LOCK_UN` or when its descriptor is closed. Two guests (a background command
  and another) do not see each other's locks: WASI has no shared lock table.
- `lockf` and `fcntl(F_SETLK/F_SETLKW)`: POSIX record locks belong to the process, and one
  process never conflicts with itself, so they succeed once the descriptor is checked;
  `F_GETLK` answers F_UNLCK.
- `fcntl(F_GETFL/F_SETFL)` reads and sets `O_NONBLOCK` (`os.get_blocking`/`os.set_blocking`),
  `F_GETFD/F_SETFD` keep FD_CLOEXEC (nothing is exec'd here); `F_DUPFD` raises ENOSYS (WASI
  cannot duplicate a descriptor), any other command EINVAL.
- `ioctl`: ENOTTY (no terminal driver answers here).
"""

from __future__ import annotations

import errno
import os
import struct
from typing import Any

from declaw_posix import program_state

LOCK_SH, LOCK_EX, LOCK_NB, LOCK_UN = 1, 2, 4, 8
F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_GETLK, F_SETLK, F_SETLKW = range(8)
F_SETOWN, F_GETOWN, F_SETSIG, F_GETSIG = 8, 9, 10, 11
F_SETLEASE, F_GETLEASE, F_NOTIFY = 1024, 1025, 1026
F_DUPFD_CLOEXEC, F_SETPIPE_SZ, F_GETPIPE_SZ = 1030, 1031, 1032
F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW = 36, 37, 38
F_RDLCK, F_WRLCK, F_UNLCK = 0, 1, 2
FD_CLOEXEC = 1
FASYNC = 0o20000

# (st_dev, st_ino) -> {fd: LOCK_SH or LOCK_EX} of this guest's flock()s
_flocks: dict[tuple[int, int], dict[int, int]] = {}


def _fd(fd: Any) -> int:
    """A descriptor from an int or an object's fileno(), as CPython takes it."""
    if isinstance(fd, int):
        number = int(fd)
    elif hasattr(fd, "fileno"):
        number = fd.fileno()
        if not isinstance(number, int):
            raise TypeError("fileno() returned a non-integer")
    else:
        raise TypeError("argument must be an int, or have a fileno() method.")
    if number < 0:
        raise ValueError(f"file descriptor cannot be a negative integer ({number})")
    return number


def _key(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)  # EBADF for a closed descriptor, as Linux
    return (st.st_dev, st.st_ino)


def _holders(key: tuple[int, int]) -> dict[int, int]:
    """The live holders of `key` (a descriptor since closed, or reused for another file, is gone)."""
    held = _flocks.get(key, {})
    for other in list(held):
        try:
            alive = _key(other) == key
        except OSError:
            alive = False
        if not alive:
            del held[other]
    return held


def flock(fd: Any, operation: int, /) -> None:
    """Lock (LOCK_SH, LOCK_EX, with LOCK_NB) or unlock (LOCK_UN) the file open on `fd`."""
    fd = _fd(fd)
    if not isinstance(operation, int):
        raise TypeError(f"'{type(operation).__name__}' object cannot be interpreted as an integer")
    kind = operation & ~LOCK_NB
    if kind not in (LOCK_SH, LOCK_EX, LOCK_UN):
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
    key = _key(fd)
    held = _holders(key)
    if kind == LOCK_UN:
        held.pop(fd, None)
        return
    others = {other: mode for other, mode in held.items() if other != fd}
    if others and (kind == LOCK_EX or LOCK_EX in others.values()):
        if operation & LOCK_NB:
            raise BlockingIOError(errno.EAGAIN, os.strerror(errno.EAGAIN))
        raise OSError(errno.EDEADLK, os.strerror(errno.EDEADLK)
                      + " (another descriptor of this process holds the lock: Linux would wait forever)")
    _flocks.setdefault(key, {})[fd] = kind


def lockf(fd: Any, cmd: int, len: int = 0, start: int = 0, whence: int = 0, /) -> None:  # noqa: A002
    """POSIX record locks are the process's own: checked, and granted (see the module)."""
    fd = _fd(fd)
    if cmd & ~LOCK_NB not in (LOCK_SH, LOCK_EX, LOCK_UN):
        raise ValueError("unrecognized lockf argument")
    os.fstat(fd)


def fcntl(fd: Any, cmd: int, arg: int | bytes | str = 0, /) -> int | bytes:
    """The commands of the module's docstring."""
    fd = _fd(fd)
    if not isinstance(cmd, int):
        raise TypeError(f"'{type(cmd).__name__}' object cannot be interpreted as an integer")
    os.fstat(fd)
    if cmd in (F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW):
        return arg.encode() if isinstance(arg, str) else arg if isinstance(arg, bytes) else 0
    if cmd in (F_GETLK, F_OFD_GETLK):
        if isinstance(arg, (bytes, bytearray)) and len(arg) >= 2:
            return struct.pack("h", F_UNLCK) + bytes(arg[2:])
        raise OSError(errno.EFAULT, os.strerror(errno.EFAULT))
    if isinstance(arg, (bytes, str)):
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
    if cmd == F_GETFD:
        return int(program_state("cloexec").get(fd, 0))
    if cmd == F_SETFD:
        program_state("cloexec")[fd] = int(arg) & FD_CLOEXEC
        return 0
    if cmd == F_GETFL:
        flags = os.O_RDWR
        try:
            if not os.get_blocking(fd):
                flags |= os.O_NONBLOCK
        except OSError:
            pass
        return flags
    if cmd == F_SETFL:
        os.set_blocking(fd, not int(arg) & os.O_NONBLOCK)
        return 0
    if cmd in (F_DUPFD, F_DUPFD_CLOEXEC):
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))
    raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))


def ioctl(fd: Any, request: int, arg: Any = 0, mutate_flag: bool = True, /) -> Any:
    """No terminal driver or device answers here: ENOTTY, as Linux says of a plain file."""
    fd = _fd(fd)
    os.fstat(fd)
    raise OSError(errno.ENOTTY, os.strerror(errno.ENOTTY))
