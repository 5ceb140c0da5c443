"""Opening, making, writing and removing below a folder we own, never through a link.

A sandbox's writable tree and a live `mount` folder are written by guests, which can put
symlinks (even relative ones climbing out) where folders were. So every path here is walked from
a folder fd down with `O_NOFOLLOW` (as the files API does, _local/files.py), never through a host
path string below the folder we own; a link or a file where a folder should be raises
`UnsafePath`.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Iterator, Sequence

from . import DIR_FLAGS
from .walk import remove_tree


class UnsafePath(OSError):
    """A component that should be a folder is a link or a file (a guest put it there)."""


def open_dir(top: Path, parts: Sequence[str], create: bool = False, mode: int = 0o755) -> int:
    """An fd of folder `top/parts...`, walking with O_NOFOLLOW (caller closes it). With `create`,
    missing folders are made. A link or file in the way raises `UnsafePath`."""
    root = os.open(top, DIR_FLAGS)
    try:
        return open_dir_at(root, parts, create, mode)
    finally:
        os.close(root)


def open_dir_at(top: int, parts: Sequence[str], create: bool = False, mode: int = 0o755) -> int:
    """`open_dir` from the folder fd `top` (which stays open)."""
    fd = os.dup(top)
    try:
        for part in parts:
            try:
                nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(part, mode, dir_fd=fd)
                except FileExistsError:
                    pass
                nxt = _open_sub(fd, part)
            except OSError:  # ELOOP (a link), ENOTDIR (a file)
                raise UnsafePath(errno.ENOTDIR, f"{part}: not a plain folder") from None
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def _open_sub(fd: int, part: str) -> int:
    try:
        return os.open(part, DIR_FLAGS, dir_fd=fd)
    except OSError:
        raise UnsafePath(errno.ENOTDIR, f"{part}: not a plain folder") from None


def create_file(dir_fd: int, name: str, mode: int) -> int:
    """A new empty file `name` in `dir_fd` (replacing a file or link there; never following one)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(name, flags, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.EEXIST, errno.ETXTBSY, errno.EISDIR):
            raise
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "a folder is there", name)
    os.unlink(name, dir_fd=dir_fd)
    return os.open(name, flags | os.O_EXCL, mode, dir_fd=dir_fd)


def open_file(top: Path, key: str) -> int:
    """A read fd of file `top/key`, never following a link (OSError if it changed kind)."""
    parts = key.split("/")
    dir_fd = open_dir(top, parts[:-1])
    try:
        return os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def write_file(top: Path, key: str, chunks: Iterator[bytes], mode: int, mtime: float) -> None:
    """Write file `top/key` (folders made; links in the way replaced, never followed)."""
    parts = key.split("/")
    dir_fd = open_dir(top, parts[:-1], create=True)
    try:
        fd = create_file(dir_fd, parts[-1], mode or 0o644)
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                out.write(chunk)
        os.utime(parts[-1], (mtime, mtime), dir_fd=dir_fd, follow_symlinks=False)
    finally:
        os.close(dir_fd)


def remove(top: Path, key: str) -> None:
    """Remove `top/key` (a folder with everything in it), never following a link."""
    parts = key.split("/")
    try:
        dir_fd = open_dir(top, parts[:-1])
    except (FileNotFoundError, UnsafePath):
        return
    try:
        st = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            remove_tree(dir_fd, parts[-1])
        else:
            os.unlink(parts[-1], dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    finally:
        os.close(dir_fd)
