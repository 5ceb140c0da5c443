"""Host folder work for attached volumes, safe against what guests leave in folders they write.

A sandbox's writable tree and a live `mount` folder are written by guests, which can put
symlinks (even relative ones climbing out) where folders were. So every walk here goes from a
folder fd down with `O_NOFOLLOW` (as filesystem.py does for the files API), never through a host
path string below the folder we own; links, devices and FIFOs met on the way are skipped.

Copies use a reflink (`FICLONE`: btrfs, XFS, bcachefs...) where the file system can, then
`copy_file_range` (the kernel copies, without passing the bytes through Python), then a plain
copy. Hard links are never used to share a volume's bytes: a WASI guest writes files in place
(truncate + write), which would change the shared inode under every other sandbox.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence

from .._hostdirs import remove_tree

FICLONE = 0x40049409  # Linux: _IOW(0x94, 9, int)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
CHUNK = 1 << 20
_reflink_works: Optional[bool] = None


class UnsafePath(OSError):
    """A component that should be a folder is a link or a file (a guest put it there)."""


def open_dir(top: Path, parts: Sequence[str], create: bool = False, mode: int = 0o755) -> int:
    """An fd of folder `top/parts...`, walking with O_NOFOLLOW (caller closes it). With `create`,
    missing folders are made. A link or file in the way raises `UnsafePath`."""
    root = os.open(top, _DIR_FLAGS)
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
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
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
        return os.open(part, _DIR_FLAGS, dir_fd=fd)
    except OSError:
        raise UnsafePath(errno.ENOTDIR, f"{part}: not a plain folder") from None


def copy_fd(src: int, dst: int, limit: Optional[int] = None) -> None:
    """Copy file `src` into empty file `dst`: reflink, else copy_file_range, else read/write. At
    most `limit` bytes (None: the size `src` has now): a file that grows meanwhile is cut there
    (a guest may be growing it; a reflink of it is truncated back)."""
    global _reflink_works
    size = os.fstat(src).st_size if limit is None else limit
    if _reflink_works is not False:
        try:
            import fcntl

            fcntl.ioctl(dst, FICLONE, src)
            _reflink_works = True
        except (OSError, ImportError):
            _reflink_works = False if _reflink_works is None else _reflink_works
        else:
            if os.fstat(dst).st_size > size:
                os.ftruncate(dst, size)
            return
    copied = 0
    if hasattr(os, "copy_file_range"):
        try:
            while copied < size:
                n = os.copy_file_range(src, dst, size - copied, copied, copied)
                if n == 0:
                    break
                copied += n
            if copied >= size:
                return
        except OSError:
            pass
    os.lseek(src, copied, os.SEEK_SET)
    os.lseek(dst, copied, os.SEEK_SET)
    while copied < size:
        chunk = os.read(src, min(CHUNK, size - copied))
        if not chunk:
            return
        copied += len(chunk)
        view = memoryview(chunk)
        while view:
            view = view[os.write(dst, view):]


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


def copy_tree(src: Path, dst: Path, dst_parts: Sequence[str] = ()) -> int:
    """Copy our own folder `src` (trusted: no links) into `dst/dst_parts` (maybe guest-touched:
    walked without following links); files already there are replaced. The files copied."""
    count = 0
    top = open_dir(dst, dst_parts, create=True)
    try:
        stack: list[tuple[Path, list[str]]] = [(src, [])]
        while stack:
            folder, rel = stack.pop()
            dir_fd = open_dir_at(top, rel)
            try:
                with os.scandir(folder) as it:
                    for entry in it:
                        st = entry.stat(follow_symlinks=False)
                        if stat.S_ISDIR(st.st_mode):
                            try:
                                os.mkdir(entry.name, stat.S_IMODE(st.st_mode) or 0o755, dir_fd=dir_fd)
                            except FileExistsError:
                                pass
                            stack.append((Path(entry.path), rel + [entry.name]))
                        elif stat.S_ISREG(st.st_mode):
                            out = create_file(dir_fd, entry.name, stat.S_IMODE(st.st_mode) or 0o644)
                            try:
                                src_fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                                try:
                                    copy_fd(src_fd, out)
                                finally:
                                    os.close(src_fd)
                            finally:
                                os.close(out)
                            os.utime(entry.name, ns=(st.st_atime_ns, st.st_mtime_ns), dir_fd=dir_fd,
                                     follow_symlinks=False)
                            count += 1
            finally:
                os.close(dir_fd)
    finally:
        os.close(top)
    return count


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
    root = os.open(top, _DIR_FLAGS)
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
                            sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
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
