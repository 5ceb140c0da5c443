"""Hot pages: a fresh guest's copy-on-write faults taken in one batch instead of one by one.

A guest instantiated from the warm image maps the image's memory copy-on-write; its first
command line then writes ~1300 of those pages, and each first write is a page fault (~3 µs each
here, ~5 ms of a new sandbox's `print(1)`). `madvise(MADV_POPULATE_WRITE)` (Linux 5.14+) makes the
same private copies without a trap per page: ~3.5 ms instead of ~5.5 ms for a new sandbox's first
command line (benchmarks/notes/2026-12-02-back-to-back.md).

Which pages: the ones a *pristine* guest's park turn wrote (`_declaw_boot.park`: the template
applied, `true && python3 -c pass` through the shell), read once per runtime from
`/proc/self/pagemap` (a present page that is not file-backed is a private copy). Pristine means a
standby sandbox's parked guest (standby.py) of a built-in template, made before the sandbox is
handed out: no sandbox's envs, files or code, and no custom template's files, have reached it,
so the page list (offsets only, never content) carries nothing from one sandbox to another.
Prefaulting never changes what a guest reads: a populated page holds the image's bytes, as the
fault would have copied them.

Where the kernel has no `MADV_POPULATE_WRITE`, or `/proc/self/pagemap` cannot be read, nothing
is learned or populated and guests fault as before.
"""

from __future__ import annotations

import ctypes
import struct
import sys
import threading
from typing import Callable, Optional

PAGE = 4096
MADV_POPULATE_WRITE = 23
MAX_RUNS = 4096  # a bound on the calls one guest's start makes (a park turn writes ~1200 pages in ~700 runs)
# Only adjacent pages make one run: each page populated costs ~2.9 µs here and a call ~nothing
# more, so runs merged across gaps of 2 pages cost more than they save (3.5 -> 3.8 ms a guest).
_PRESENT = 1 << 63
_FILE_OR_SHARED = 1 << 61

_libc: Optional[ctypes.CDLL] = None


def _madvise() -> Optional[Callable[[int, int, int], int]]:
    global _libc
    if not sys.platform.startswith("linux"):
        return None
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        _libc.madvise.restype = ctypes.c_int
    madvise: Callable[[int, int, int], int] = _libc.madvise
    return madvise


class HotPages:
    """One runtime's hot pages: (offset, length) runs of its linear memory, learned once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.runs: Optional[tuple[tuple[int, int], ...]] = None  # None: not learned (yet)
        self.disabled = False  # the kernel or /proc said no: never tried again

    def learn(self, base: int, length: int) -> None:
        """Record the private pages of the memory at `base` (`length` bytes), once: call it on
        the guest's thread, right after a pristine guest's park turn, with no turn running."""
        if self.runs is not None or self.disabled or base % PAGE or length <= 0:
            return
        try:
            with open("/proc/self/pagemap", "rb") as pagemap:
                pagemap.seek(base // PAGE * 8)
                data = pagemap.read(length // PAGE * 8)
        except OSError:
            self.disabled = True
            return
        runs: list[list[int]] = []
        for index, (entry,) in enumerate(struct.iter_unpack("<Q", data[: len(data) // 8 * 8])):
            if entry & _PRESENT and not entry & _FILE_OR_SHARED:
                offset = index * PAGE
                if runs and runs[-1][0] + runs[-1][1] == offset:
                    runs[-1][1] += PAGE
                else:
                    runs.append([offset, PAGE])
        with self._lock:
            if self.runs is None and runs:
                self.runs = tuple((offset, size) for offset, size in runs[:MAX_RUNS])

    def populate(self, base: int, length: int) -> int:
        """Take the hot pages' copy-on-write faults now, in the memory at `base` (`length`
        bytes, its accessible size: runs past it are skipped). Returns the bytes populated."""
        runs = self.runs
        if runs is None or self.disabled or base % PAGE:
            return 0
        madvise = _madvise()
        if madvise is None:
            self.disabled = True
            return 0
        done = 0
        for offset, size in runs:
            size = min(size, length - offset)
            if size <= 0:
                continue
            if madvise(base + offset, size, MADV_POPULATE_WRITE) != 0:
                self.disabled = ctypes.get_errno() == 22  # EINVAL: a kernel without it; else just stop
                break
            done += size
        return done
