"""`os.dup` for the files a program opened by name: WASI has no `dup` (`OSError: [Errno 58] Not
supported`), and numpy's `ndarray.tofile` and `np.fromfile` call `os.dup(f.fileno())` to hand
the file to C's stdio, so both failed.

`open()` (the boot's, guest/_declaw_boot.py) remembers which path each descriptor it opened came
from; `dup(fd)` opens that path again with the file's access (never truncating nor creating),
checks it is the same file (device and inode), and returns the new descriptor at the original's
offset. How it differs from Linux: from then on the two have offsets and status flags of their
own (a dup shares them), which numpy's use never notices (it seeks both explicitly). A
descriptor opened otherwise (`os.open`, a socket, the standard streams) still raises as before.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

_real_dup = os.dup
_OPENED: dict[int, tuple[weakref.ref[Any], str]] = {}  # fd -> (its file object, absolute path)


def remember(file: Any, name: Any) -> None:
    """`file` was just opened from the path `name` (str, bytes or PathLike)."""
    try:
        path = os.path.abspath(os.fsdecode(name))
        _OPENED[file.fileno()] = (weakref.ref(file), path)
    except (TypeError, ValueError, OSError):
        pass


def opened(fd: int) -> tuple[Any, str] | None:
    """The open file object `open()` made for `fd` from a path, and that path (absolute)."""
    known = _OPENED.get(fd)
    file = known[0]() if known is not None else None
    if known is None or file is None or getattr(file, "closed", True) or file.fileno() != fd:
        return None
    return file, known[1]


def dup(fd: int) -> int:
    found = opened(fd)
    if found is None:
        return _real_dup(fd)
    file, path = found
    mode = str(getattr(file, "mode", "r"))
    flags = os.O_RDWR if "+" in mode else os.O_RDONLY if "r" in mode else os.O_WRONLY
    if "a" in mode:
        flags |= os.O_APPEND
    new = os.open(path, flags)
    ours, theirs = os.fstat(new), os.fstat(fd)
    if (ours.st_dev, ours.st_ino) != (theirs.st_dev, theirs.st_ino):  # renamed or replaced since
        os.close(new)
        return _real_dup(fd)
    os.lseek(new, os.lseek(fd, 0, os.SEEK_CUR), os.SEEK_SET)  # starts where the original is
    return new
