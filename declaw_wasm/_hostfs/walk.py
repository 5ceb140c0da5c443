"""Host folders walked by file descriptor, never following a symlink: the removal and the
disk-usage count every sandbox folder and every volume folder uses, and the scan a live volume
folder is synced by. A guest can build ~1050 levels of folders and swap folders for symlinks
while the host works, so nothing here recurses or follows a link.

**What a file counts toward a disk quota is its apparent size** (`max(st_size, st_blocks * 512)`
for a regular file): a sparse file costs the guest one block, but every export reads it in full
(a snapshot, a fork, `files.read`, a volume snapshot: exports.py), so a 20 MiB quota must not
hold a 512 MiB sparse file.

**Nothing here goes by host path** (`walk_entries`): below a folder nested deep enough, a host
path is longer than Linux's PATH_MAX and every call by path fails (ENAMETOOLONG), so a walk by
path would not see what is there (the quota would not count it) and, between two calls, could
follow a folder the guest swapped for a symlink out of the sandbox."""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, List, Optional, Sequence

from . import DIR_FLAGS


class Walk:
    """Folder fds on the way down from a root, each opened with `O_NOFOLLOW` from the one above.

    Keeps the fds of the top `KEEP` levels, the current folder's, and one every `STRIDE` levels
    below, so that moving to a sibling or back up re-opens no folder in a tree of ordinary depth
    and at most `STRIDE` in a deep one, walking on down opens one, and the fds held stay
    O(KEEP + depth / STRIDE): a guest can nest folders far deeper than a process's fd limit.
    A caller that knows how much of the path is unchanged says so (`known`), so that a move
    costs O(1) however deep the folder is, not a comparison of the whole path.
    """

    STRIDE = 32
    KEEP = 16

    def __init__(self, root: Callable[[], int]) -> None:
        """`root()` returns a new fd of the walk's top folder (owned by the walk)."""
        self._root = root
        self._parts: List[str] = []
        self._fd: Optional[int] = None
        self._marks: List[tuple[int, int]] = []  # (level, fd), by level; level 0 is the root

    def folder(self, parts: Sequence[str], known: int = 0) -> int:
        """An fd of the folder `parts` below the root (owned by the walk: do not close it).
        `known`: how many leading parts are those of the last call's `parts` (0: unknown)."""
        if self._fd is None:
            self._fd = self._root()
            self._marks = [(0, self._fd)]
            self._parts = []
            known = 0
        limit = min(len(self._parts), len(parts))
        keep = min(known, limit)
        if keep < limit:
            if self._parts[keep:limit] == list(parts[keep:limit]):  # the usual case, compared in C
                keep = limit
            else:
                while self._parts[keep] == parts[keep]:
                    keep += 1
        if keep < len(self._parts):
            self._release_current()
            while self._marks[-1][0] > keep:
                os.close(self._marks.pop()[1])
            level, self._fd = self._marks[-1]
            del self._parts[level:]
        for part in parts[len(self._parts):]:
            nxt = os.open(part, DIR_FLAGS, dir_fd=self._fd)
            self._release_current()
            self._fd = nxt
            self._parts.append(part)
            if len(self._parts) <= self.KEEP or len(self._parts) % self.STRIDE == 0:
                self._marks.append((len(self._parts), nxt))
        return self._fd

    def _release_current(self) -> None:
        if self._fd is not None and self._marks[-1] != (len(self._parts), self._fd):
            os.close(self._fd)

    def close(self) -> None:
        if self._fd is None:
            return
        self._release_current()
        for _, fd in self._marks:
            os.close(fd)
        self._fd, self._marks, self._parts = None, [], []


def remove_tree(parent: int, name: str) -> None:
    """Delete the folder `name` in `parent` with everything in it, never following a symlink.

    Iterative (shutil.rmtree before Python 3.12.4 recurses once per level, and a guest can make
    ~1050), every folder listed once, fds bounded by `_Walk`. Removes all it can, then raises
    the first OSError met (a missing entry is not one).
    """
    walk = Walk(lambda: os.dup(parent))
    path = [name]
    known = 0  # how much of `path` the walk's last folder shares (so each move is O(1))
    todo: List[Optional[List[str]]] = [None]  # per level: subfolders still to delete (None: not listed)
    first: Optional[OSError] = None
    try:
        while path:
            if todo[-1] is None:
                subfolders: List[str] = []
                try:
                    fd = walk.folder(path, known)
                    known = len(path)
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
                known = min(known, len(path) - 1)
                todo.append(None)
                continue
            done = path.pop()
            known = min(known, len(path))
            todo.pop()
            try:
                parent_fd = walk.folder(path, known)
                known = len(path)
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


def _folder_entries(fd: int, sort: bool) -> Iterator[tuple[str, os.stat_result]]:
    """(name, lstat) of each entry of the folder `fd`, read as the folder yields them (`sort`: the
    names only are gathered and sorted first): a folder's listing is never held as objects, so a
    folder of 10^5 entries costs its names at most. Entries that vanish meanwhile are left out."""
    try:
        with os.scandir(fd) as found:
            if not sort:
                for entry in found:
                    try:
                        yield entry.name, entry.stat(follow_symlinks=False)  # (fstatat in `fd`)
                    except OSError:
                        continue
                return
            names = sorted(entry.name for entry in found)
    except OSError:
        return
    for name in names:
        try:
            yield name, os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            continue


def walk_entries(root: Callable[[], int], sort: bool = False
                 ) -> Iterator[tuple[List[str], int, str, os.stat_result]]:
    """Every entry below a folder as (its folder's names from the top, an fd of that folder, its
    name, its lstat), each folder's entries before what its subfolders hold (`sort`: by name),
    never following a link, never naming a host path. `root()` returns a new fd of the top
    folder (owned by the walk). The list and the fd are the walk's: valid until the next entry.

    Memory is the names still to visit, O(entries), however deep the tree (a stack of paths
    would be O(entries x depth)); the fds held are `Walk`'s. A folder that vanishes or is
    swapped for something else meanwhile is skipped."""
    walk = Walk(root)
    path: List[str] = []
    known = 0  # how much of `path` the walk's last folder shares (so each move is O(1))
    pending: List[List[str]] = []  # per level: the subfolders still to visit, last first
    try:
        while True:
            subfolders: List[str] = []
            try:
                fd = walk.folder(path, known)
                known = len(path)
            except OSError:
                fd = -1
            for name, st in _folder_entries(fd, sort) if fd >= 0 else ():
                yield path, fd, name, st
                if stat.S_ISDIR(st.st_mode):
                    subfolders.append(name)
            subfolders.reverse()
            pending.append(subfolders)
            while pending and not pending[-1]:
                pending.pop()
            if not pending:
                return
            del path[len(pending) - 1:]
            known = min(known, len(path))
            path.append(pending[-1].pop())
    finally:
        walk.close()


def usage(folders: Iterable[Path]) -> tuple[int, int]:
    """(bytes counted toward the disk quota, entries) under `folders`, never following links,
    however deep (`walk_entries`); regular files count at their apparent size (`counted_bytes`)."""
    total, count = 0, 0
    regular = stat.S_ISREG
    for folder in folders:
        for _, _, _, st in walk_entries(lambda folder=folder: os.open(folder, DIR_FLAGS)):  # type: ignore[misc]
            count += 1
            allocated = st.st_blocks * 512  # counted_bytes, inline: this runs for every entry, often
            total += max(st.st_size, allocated) if regular(st.st_mode) else allocated
    return total, count


@dataclass(frozen=True)
class Seen:
    """A file or folder found by `scan` (its identity, to tell later whether it changed)."""

    kind: str  # "f" or "d"
    size: int
    mtime: float
    mode: int
    ident: tuple[int, int, int, int]  # size, mtime_ns, ctime_ns, inode

    @classmethod
    def of(cls, kind: str, st: os.stat_result) -> "Seen":
        return cls(kind, st.st_size if kind == "f" else 0, st.st_mtime, stat.S_IMODE(st.st_mode),
                   (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))


def scan(top: Path, max_entries: int, max_depth: int = 256) -> dict[str, Seen]:
    """Files and folders below `top` ("a/b" keys), not following links (links, devices and FIFOs
    are left out), at most `max_entries` (more raises `OSError(EFBIG)`)."""
    out: dict[str, Seen] = {}
    root = os.open(top, DIR_FLAGS)
    stack: list[tuple[int, str, int]] = [(root, "", 0)]
    try:
        while stack:
            fd, rel, depth = stack.pop()
            try:
                for name in os.listdir(fd):
                    try:
                        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    except OSError:
                        continue
                    key = f"{rel}/{name}" if rel else name
                    if stat.S_ISREG(st.st_mode):
                        out[key] = Seen.of("f", st)
                    elif stat.S_ISDIR(st.st_mode) and depth < max_depth:
                        try:
                            sub = os.open(name, DIR_FLAGS, dir_fd=fd)
                        except OSError:
                            continue
                        out[key] = Seen.of("d", st)
                        stack.append((sub, key, depth + 1))
                    if len(out) > max_entries:
                        raise OSError(errno.EFBIG, f"more than {max_entries} files and folders")
            finally:
                os.close(fd)
    finally:
        for fd, _, _ in stack:
            os.close(fd)
    return out
