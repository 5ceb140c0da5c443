"""Host folders walked by file descriptor, never following a symlink: the removal and the
disk-usage count every sandbox folder and every volume folder uses. A guest can build ~1050 levels
of folders and swap folders for symlinks while the host works, so nothing here recurses or
follows a link.

**What a file counts toward a disk quota is its apparent size** (`max(st_size, st_blocks * 512)`
for a regular file): a sparse file costs the guest one block, but every export reads it in full
(a snapshot, a fork, `files.read`, a volume snapshot), so a 20 MiB quota must not hold a 512 MiB
sparse file."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Callable, Iterable, List, Optional, Sequence

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Walk:
    """Folder fds on the way down from a root, each opened with `O_NOFOLLOW` from the one above.

    Keeps the current folder's fd and one every `STRIDE` levels, so that moving to a sibling or
    back up re-opens at most `STRIDE` folders, walking on down opens one, and the fds held stay
    O(depth / STRIDE): a guest can make ~1050 levels, more than many processes' fd limit.
    """

    STRIDE = 32

    def __init__(self, root: Callable[[], int]) -> None:
        """`root()` returns a new fd of the walk's top folder (owned by the walk)."""
        self._root = root
        self._parts: List[str] = []
        self._fd: Optional[int] = None
        self._marks: dict[int, int] = {}  # level -> fd; level 0 is the root

    def folder(self, parts: Sequence[str]) -> int:
        """An fd of the folder `parts` below the root (owned by the walk: do not close it)."""
        if self._fd is None:
            self._fd = self._root()
            self._marks = {0: self._fd}
            self._parts = []
        keep = 0
        limit = min(len(self._parts), len(parts))
        while keep < limit and self._parts[keep] == parts[keep]:
            keep += 1
        if keep < len(self._parts):
            level = max(mark for mark in self._marks if mark <= keep)
            self._release_current()
            for mark in [m for m in self._marks if m > level]:
                os.close(self._marks.pop(mark))
            self._fd = self._marks[level]
            del self._parts[level:]
        for part in parts[len(self._parts):]:
            nxt = os.open(part, DIR_FLAGS, dir_fd=self._fd)
            self._release_current()
            self._fd = nxt
            self._parts.append(part)
            if len(self._parts) % self.STRIDE == 0:
                self._marks[len(self._parts)] = nxt
        return self._fd

    def _release_current(self) -> None:
        if self._fd is not None and self._marks.get(len(self._parts)) != self._fd:
            os.close(self._fd)

    def close(self) -> None:
        if self._fd is None:
            return
        self._release_current()
        for fd in self._marks.values():
            os.close(fd)
        self._fd, self._marks, self._parts = None, {}, []


def remove_tree(parent: int, name: str) -> None:
    """Delete the folder `name` in `parent` with everything in it, never following a symlink.

    Iterative (shutil.rmtree before Python 3.12.4 recurses once per level, and a guest can make
    ~1050), every folder listed once, fds bounded by `_Walk`. Removes all it can, then raises
    the first OSError met (a missing entry is not one).
    """
    walk = Walk(lambda: os.dup(parent))
    path = [name]
    todo: List[Optional[List[str]]] = [None]  # per level: subfolders still to delete (None: not listed)
    first: Optional[OSError] = None
    try:
        while path:
            if todo[-1] is None:
                subfolders: List[str] = []
                try:
                    fd = walk.folder(path)
                    for entry in os.listdir(fd):
                        try:
                            if stat.S_ISDIR(os.stat(entry, dir_fd=fd, follow_symlinks=False).st_mode):
                                subfolders.append(entry)
                            else:
                                os.unlink(entry, dir_fd=fd)
                        except FileNotFoundError:
                            pass
                        except OSError as exc:
                            first = first or exc
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    first = first or exc
                todo[-1] = subfolders
            pending = todo[-1]
            if pending:
                path.append(pending.pop())
                todo.append(None)
                continue
            done = path.pop()
            todo.pop()
            try:
                parent_fd = walk.folder(path)
                try:
                    os.rmdir(done, dir_fd=parent_fd)
                except NotADirectoryError:  # swapped for a file or a symlink meanwhile
                    os.unlink(done, dir_fd=parent_fd)
            except FileNotFoundError:
                pass
            except OSError as exc:
                first = first or exc
    finally:
        walk.close()
    if first is not None:
        raise first


def counted_bytes(st: os.stat_result) -> int:
    """What an entry counts toward a disk quota: a regular file its apparent size or its allocated
    blocks, whichever is larger (a sparse file counts at its size); anything else its blocks."""
    blocks = getattr(st, "st_blocks", None)
    allocated = blocks * 512 if blocks is not None else st.st_size
    return max(st.st_size, allocated) if stat.S_ISREG(st.st_mode) else allocated


def usage(folders: Iterable[Path]) -> tuple[int, int]:
    """(bytes counted toward the disk quota, entries) under `folders`, never following links;
    regular files count at their apparent size (`counted_bytes`)."""
    total, count = 0, 0
    stack = [str(f) for f in folders]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            count += 1
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            total += counted_bytes(st)
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
    return total, count

