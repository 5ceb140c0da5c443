"""Copies into host folders: a file (`copy_fd`), or one of our own folders into one guests may
have touched (`copy_folder`: a volume's revision into a sandbox).

Copies use a reflink (`FICLONE`: btrfs, XFS, bcachefs...) where the file system can, then
`copy_file_range` (the kernel copies, without passing the bytes through Python), then a plain
copy. Hard links are never used to share a volume's bytes: a WASI guest writes files in place
(truncate + write), which would change the shared inode under every other sandbox.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Optional, Sequence

from .beneath import create_file, open_dir, open_dir_at

FICLONE = 0x40049409  # Linux: _IOW(0x94, 9, int)
CHUNK = 1 << 20
_reflink_works: Optional[bool] = None


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



def copy_folder(src: Path, dst: Path, dst_parts: Sequence[str] = ()) -> int:
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
