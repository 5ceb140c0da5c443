"""`os.statvfs`, `os.fstatvfs`, `shutil.disk_usage` and `os.getloadavg` in the guest: what WASI's
CPython lacks and agents' code calls to look at the machine ("is there room for this download?",
a system report), answered from the sandbox as `df` and `uptime` answer them.

- The disk is the sandbox's quota: the host's door op `disk` (declaw_wasm/_local/processes.py)
  gives `Limits.disk_bytes` and `disk_files` and what the writable folders (/home/user, /tmp)
  hold now. Every path of the tree is on that one filesystem, as `df` shows one `/`; a path that
  does not exist is FileNotFoundError, as on Linux. Blocks are 4096 bytes; `f_bavail` is what
  the quota leaves (a write past it is refused, and the command stopped: docs/security.md).
- The load average is the sandbox's running commands (what `uptime` and `top` print), the same
  figure for 1, 5 and 15 minutes: the host keeps no history of them.
- `os.sysconf`: WASI's C library (musl's table) answers the names it computes at run time with
  its own placeholders (`SC_PHYS_PAGES` -248, `SC_AVPHYS_PAGES` -247, `SC_MINSIGSTKSZ` -244) and
  the page size as a Wasm page (65536, where `resource.getpagesize()` and `mmap.PAGESIZE` say
  Linux's 4096). Those names are answered from the sandbox: the memory is its limit and what its
  programs use (what `free` prints), the page 4096 bytes, the open files `RLIMIT_NOFILE`'s soft
  limit (1024), as Linux computes them.
- `os.get_terminal_size`: the PTY's size on a terminal, else OSError (ENOTTY) as on Linux.
"""

from __future__ import annotations

import collections
import os
from typing import Any

from declaw_posix._structs import StructSequence

BLOCK = 4096
NAME_MAX = 255


class statvfs_result(StructSequence):  # noqa: N801 - CPython's name
    """os.statvfs_result, as CPython's: ten fields, and `f_fsid` as an attribute only."""

    __module__ = "os"
    __slots__ = ()
    fields = ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree", "f_favail",
              "f_flag", "f_namemax")

    @property
    def f_fsid(self) -> int:
        return 0


def _figures() -> statvfs_result:
    from declaw_shell import door

    disk = door.call("disk")
    total, used = int(disk["bytes_total"]), int(disk["bytes_used"])
    files, used_files = int(disk["files_total"]), int(disk["files_used"])
    blocks = total // BLOCK
    free = max(0, blocks - -(-used // BLOCK))
    free_files = max(0, files - used_files)
    return statvfs_result((BLOCK, BLOCK, blocks, free, free, files, free_files, free_files, 0, NAME_MAX))


def statvfs(path: Any) -> statvfs_result:
    """The sandbox's disk for any path of it (module docstring); a descriptor as fstatvfs."""
    if isinstance(path, int):
        return fstatvfs(path)
    os.stat(path)  # FileNotFoundError, NotADirectoryError, TypeError as Linux's statvfs(2) and CPython
    return _figures()


def fstatvfs(fd: int) -> statvfs_result:
    """The sandbox's disk, for an open descriptor (EBADF for a closed one, as Linux)."""
    os.fstat(fd)
    return _figures()


def getloadavg() -> tuple[float, float, float]:
    """The sandbox's running commands, as `uptime` prints them (module docstring)."""
    from declaw_shell import door

    try:
        running = float(len(door.call("sysinfo")["processes"]))
    except Exception as exc:  # noqa: BLE001 -- CPython's own message when there is no figure
        raise OSError("Load averages are unobtainable") from exc
    return (running, running, running)


PAGE = 4096  # resource.getpagesize(), mmap.PAGESIZE: the page Linux code aligns to
MINSIGSTKSZ = 2048  # Linux's (x86-64's and aarch64's smallest)
OPEN_MAX = 1024  # resource's RLIMIT_NOFILE soft limit (declaw_posix/_resource.py)


def _memory(available: bool) -> int:
    """The sandbox's memory in pages: its limit, or what its programs leave of it."""
    from declaw_posix._resource import _sysinfo

    info = _sysinfo() or {}
    total, used = info.get("mem_total"), info.get("mem_used")
    if not isinstance(total, int) or total <= 0:
        return -1  # no door (a bare interpreter): no figure, as sysconf says of an unknown limit
    if available:
        total -= min(used, total) if isinstance(used, int) and used > 0 else 0
    return total // PAGE


def _sysconf_answers(names: dict[str, int]) -> dict[int, Any]:
    """What the sandbox answers instead of the C library (module docstring), by the guest's own
    numbers of the names."""
    answers: dict[str, Any] = {"SC_PAGESIZE": lambda: PAGE, "SC_PAGE_SIZE": lambda: PAGE,
                               "SC_PHYS_PAGES": lambda: _memory(False), "SC_AVPHYS_PAGES": lambda: _memory(True),
                               "SC_MINSIGSTKSZ": lambda: MINSIGSTKSZ, "SC_OPEN_MAX": lambda: OPEN_MAX}
    return {names[name]: answer for name, answer in answers.items() if name in names}


def patch_sysconf(module: Any) -> None:
    """`os.sysconf` with the sandbox's answers (module docstring); every other name, and every
    error (an unknown name, a name of the wrong type), is the C library's, as before."""
    original = module.sysconf
    if getattr(original, "__declaw_sysconf__", False):
        return
    answers = _sysconf_answers(dict(module.sysconf_names))

    def sysconf(name: Any, /) -> int:
        number = module.sysconf_names.get(name) if isinstance(name, str) else name
        answer = answers.get(number) if type(number) is int else None
        return int(answer()) if answer is not None else int(original(name))

    sysconf.__name__ = sysconf.__qualname__ = "sysconf"
    sysconf.__doc__ = original.__doc__
    sysconf.__module__ = "os"
    sysconf.__declaw_sysconf__ = True  # type: ignore[attr-defined]
    module.sysconf = sysconf


def get_terminal_size(fd: int = 1, /) -> Any:
    """`os.get_terminal_size`, which WASI's CPython lacks (AttributeError, where code's fallback
    catches the OSError Linux raises): a terminal's size is the sandbox's PTY's (COLUMNS and LINES,
    as the PTY session sets them, else 80x24); anything else is not a terminal (ENOTTY)."""
    import errno

    if not os.isatty(fd):
        raise OSError(errno.ENOTTY, os.strerror(errno.ENOTTY))
    def size(name: str, default: int) -> int:
        value = os.environ.get(name, "")
        return int(value) if value.isdigit() and int(value) > 0 else default
    return os.terminal_size((size("COLUMNS", 80), size("LINES", 24)))


def add_to_os(module: Any) -> None:
    """Give `os` what WASI's lacks (module docstring); never over a real one."""
    if hasattr(module, "sysconf"):
        patch_sysconf(module)
    if not hasattr(module, "get_terminal_size") and hasattr(module, "terminal_size"):
        module.get_terminal_size = get_terminal_size
    for name, value in (("statvfs_result", statvfs_result), ("statvfs", statvfs), ("fstatvfs", fstatvfs),
                        ("getloadavg", getloadavg), ("ST_RDONLY", 1), ("ST_NOSUID", 2)):
        if not hasattr(module, name):
            setattr(module, name, value)


usage = collections.namedtuple("usage", "total used free", module="shutil")  # shutil's own


def disk_usage(path: Any) -> Any:
    """shutil.disk_usage as CPython's on Linux computes it from statvfs."""
    st = os.statvfs(path)
    free = st.f_bavail * st.f_frsize
    total = st.f_blocks * st.f_frsize
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    return usage(total, used, free)


def patch_shutil(module: Any) -> None:
    """shutil defines disk_usage at its import only where os has statvfs: add it where it was
    imported before (the warm image's)."""
    if not hasattr(module, "disk_usage"):
        module._ntuple_diskusage = usage
        module.disk_usage = disk_usage
        if hasattr(module, "__all__") and "disk_usage" not in module.__all__:
            module.__all__.append("disk_usage")
