"""A sandbox's writable folders as data: written to a tar stream (snapshots), read back from one,
or copied to another sandbox (fork) — always walking by file descriptor without following a
link, because guests wrote these folders and can leave symlinks (absolute ones, or ones climbing
out) anywhere.

What a tree keeps: folders, regular files (bytes, mode, mtime, and the file's E2B metadata held
in an extended attribute) and symlinks (their target text: a link is the guest's data, resolved
inside the guest's namespace when the guest uses it; the host never follows one). Hard links are
kept as separate files. Nothing else can exist in a sandbox's tree (WASI makes no devices or
FIFOs); if something does, it is left out.

Every export is bounded by the sandbox's disk quota (`exports.ExportBudget`): each regular
file's size is counted, from the descriptor that is then read, before any of it is read, and no
more than that is read from it (`Exactly`); each entry counts once against the quota's file count
and with the bytes of its tar header (path, link target, metadata) and padding against its bytes;
a tree that adds up to more than the quota + 1 MiB (or its files and folders + 1024) fails the
export with `NotEnoughSpaceException`. Reading a tree back counts its members the same way,
against the restored sandbox's quota. A tree is written with `tarstream.TarWriter`, which keeps
no member once written (tarfile's `TarFile` keeps them all: every path, whole, in memory), and a
tree deeper or with a longer path than a restore reads back (`MAX_DEPTH`, `MAX_NAME_BYTES`) is
refused as it is written, so no snapshot is stored that cannot be restored. The walks go by file
descriptor (`walk.walk_entries`, `Walk`): paths longer than PATH_MAX are carried like any
other, and each entry costs O(1) folder opens however deep it is.

Reading a tar back treats it as hostile input, even though we wrote it (a state store can be
shared, or damaged): member names must be relative, without `..`, NUL or empty parts, and within
the size limits; hard links, devices, FIFOs and unknown members are refused; each member is
created by walking from the destination folder with `O_NOFOLLOW` at every step, so a symlink
member can never redirect a later one outside. The stdlib's `tarfile` (in stream mode) parses
the format; it never extracts anything itself.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
import tarfile
from pathlib import Path
from typing import IO, Iterator, Optional

from ..exceptions import SandboxException, SnapshotException
from . import DIR_FLAGS, META_XATTR
from .beneath import UnsafePath, create_file, open_dir, open_dir_at
from .copies import copy_fd
from .exports import Exactly, ExportBudget, Name, shown_path
from .tarstream import BoundedTarInfo, TarWriter, header_bytes, members
from .walk import Walk, walk_entries

MAX_NAME_BYTES = 1 << 20  # a path in a tree (a guest can nest folders far below WASI's 4096 bytes)
MAX_DEPTH = 4096  # levels of folders in a tree
COPY_CHUNK = 1 << 20
PAX_META = "DECLAW.metadata"


class TreeError(SandboxException):
    """A tree that cannot be read back (damaged, or not one of ours)."""


class _TreeTarInfo(BoundedTarInfo):
    MAX_HEADER = MAX_NAME_BYTES + (64 << 10)  # a path, a link target, a file's metadata


def _entries(top: Path) -> Iterator[tuple[list[str], int, str, os.stat_result]]:
    """Every entry below `top` as (folder names from `top`, fd of that folder, name, lstat),
    folders before what they hold, by name; links never followed (`walk_entries`). The list
    and the fd are valid until the next entry."""
    return walk_entries(lambda: os.open(top, DIR_FLAGS), sort=True)


class _Dest:
    """The folders of a tree being laid out below `root`, reached by a `Walk` (O(1) opens per
    entry when entries come folders first, as ours do); a folder the walk cannot reach (missing:
    a tree not ours) is made, walking from `root` with O_NOFOLLOW at each step."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.walk = Walk(lambda: os.dup(root))

    def folder(self, parts: list[str]) -> int:
        """An fd of the folder `parts` (the caller closes it)."""
        try:
            return os.dup(self.walk.folder(parts))
        except OSError:
            return open_dir_at(self.root, parts, create=True)

    def close(self) -> None:
        self.walk.close()


def _metadata(fd: int) -> Optional[bytes]:
    try:
        return os.getxattr(fd, META_XATTR)
    except OSError:
        return None


def _shown(guest: str, path: str) -> str:
    return f"{guest.rstrip('/')}/{path}"


def _joined(guest: str, parents: list[str], name: str) -> str:
    return _shown(guest, "/".join([*parents, name]))


def write_tar(top: Path, out: IO[bytes], budget: ExportBudget, guest: str) -> tuple[int, int]:
    """Write the tree below `top` (the guest's folder `guest`) to `out` as an uncompressed PAX
    tar stream, counted in `budget` (file content, entries, headers); (entries, bytes of file
    content). A tree a restore would refuse (deeper than `MAX_DEPTH`, a path over
    `MAX_NAME_BYTES`) is refused here (SnapshotException)."""
    count = size = 0
    with TarWriter(out, budget) as tar:
        for parents, dir_fd, name, st in _entries(top):
            path = "/".join([*parents, name])
            shown = functools.partial(_shown, guest, path)
            if len(parents) >= MAX_DEPTH or len(path) > MAX_NAME_BYTES // 4 and \
                    len(path.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
                raise SnapshotException(
                    f"{budget.what} refused: {shown_path(shown())} is {len(parents) + 1} folders deep, a path of "
                    f"{len(path.encode('utf-8', 'surrogateescape'))} bytes: a tree carries at most {MAX_DEPTH} levels "
                    f"and {MAX_NAME_BYTES} bytes of path (move it up, or remove it)")
            info = tarfile.TarInfo(path)
            info.mode = stat.S_IMODE(st.st_mode)
            info.mtime = st.st_mtime
            if stat.S_ISDIR(st.st_mode):
                info.type = tarfile.DIRTYPE
                tar.add(info, name=shown)
            elif stat.S_ISLNK(st.st_mode):
                info.type = tarfile.SYMTYPE
                try:
                    info.linkname = os.readlink(name, dir_fd=dir_fd)
                except OSError:
                    continue
                tar.add(info, name=shown)
            elif stat.S_ISREG(st.st_mode):
                try:
                    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
                except OSError:
                    continue
                with os.fdopen(fd, "rb") as f:
                    st = os.fstat(f.fileno())
                    budget.take(st.st_size, shown)
                    info.size = st.st_size
                    meta = _metadata(f.fileno())
                    if meta is not None:
                        info.pax_headers = {PAX_META: meta.decode("utf-8", "replace")}
                    tar.add(info, Exactly(f, st.st_size), name=shown)
                size += st.st_size
            else:
                continue
            count += 1
    return count, size


def count_files(sources: list[tuple[str, Path]], budget: ExportBudget) -> None:
    """Count the trees `(guest folder, host folder)` in `budget`: their entries, and their
    regular files by their sizes now, so that an export over it is refused before anything
    else is done (the export itself counts again, from each descriptor it reads)."""
    for guest, top in sources:
        for parents, _, name, st in _entries(top):
            shown = functools.partial(_joined, guest, parents, name)  # made only for a refusal
            budget.entry(shown)
            if stat.S_ISREG(st.st_mode):
                budget.take(st.st_size, shown)


def _member_parts(name: str) -> list[str]:
    if not name or "\x00" in name or name.startswith("/") or len(name.encode("utf-8", "replace")) > MAX_NAME_BYTES:
        raise TreeError(f"tree member {name[:200]!r}: not a relative path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or ".." in parts or len(parts) > MAX_DEPTH:
        raise TreeError(f"tree member {name[:200]!r}: climbs out or is too deep")
    return parts


def read_tar(stream: IO[bytes], top: Path, budget: ExportBudget, guest: str) -> int:
    """Lay out the tree in the tar `stream` below the existing folder `top` (the guest's folder
    `guest`), counted in `budget` as it was when written (see the module docstring for what is
    refused); the entries made."""
    count = 0
    try:
        tar = tarfile.open(fileobj=stream, mode="r|", tarinfo=_TreeTarInfo)
    except tarfile.TarError as exc:
        raise TreeError(f"not a tree: {exc}") from None
    root = os.open(top, DIR_FLAGS)
    dest = _Dest(root)
    try:
        with tar:
            for member in members(tar):
                parts = _member_parts(member.name)
                shown = functools.partial(_shown, guest, member.name)
                if member.isreg():
                    budget.take(member.size, shown)
                budget.entry(shown, header_bytes(member))
                try:
                    _make(tar, member, dest, parts)
                except (UnsafePath, OSError) as exc:
                    raise TreeError(f"tree member {member.name[:200]!r}: {exc}") from None
                count += 1
    except tarfile.TarError as exc:
        raise TreeError(f"tree damaged or truncated: {exc}") from None
    finally:
        dest.close()
        os.close(root)
    return count


def _make(tar: tarfile.TarFile, member: tarfile.TarInfo, dest: _Dest, parts: list[str]) -> None:
    mode = member.mode & 0o777
    parent = dest.folder(parts[:-1])
    name = parts[-1]
    try:
        if member.isdir():
            try:
                os.mkdir(name, mode or 0o755, dir_fd=parent)
            except FileExistsError:
                sub = os.open(name, DIR_FLAGS, dir_fd=parent)  # a folder, not a link or file
                os.close(sub)
        elif member.issym():
            os.symlink(member.linkname, name, dir_fd=parent)
        elif member.isreg():
            fd = create_file(parent, name, mode or 0o644)
            with os.fdopen(fd, "wb") as out:
                source = tar.extractfile(member)
                assert source is not None
                while True:
                    chunk = source.read(COPY_CHUNK)
                    if not chunk:
                        break
                    out.write(chunk)
                meta = member.pax_headers.get(PAX_META)
                if meta is not None:
                    try:
                        os.setxattr(out.fileno(), META_XATTR, meta.encode())
                    except OSError:
                        pass
            os.utime(name, (member.mtime, member.mtime), dir_fd=parent, follow_symlinks=False)
        else:
            raise TreeError(f"tree member {member.name[:200]!r}: a {_kind(member)}, which a tree never holds")
    finally:
        os.close(parent)


def _kind(member: tarfile.TarInfo) -> str:
    if member.islnk():
        return "hard link"
    if member.isdev():
        return "device or FIFO"
    return "member of unknown type"


def copy_tree(src: Path, dst: Path, budget: ExportBudget, guest: str) -> int:
    """Copy the tree below `src` (the guest's folder `guest`) into the existing folder `dst`
    (fork): files by reflink where the file system can, else `copy_file_range`, each at most the
    size counted in `budget`, every entry counted against its file count; symlinks as symlinks;
    never following one. The entries copied."""
    count = 0
    root = os.open(dst, DIR_FLAGS)
    dest = _Dest(root)
    try:
        for parents, dir_fd, name, st in _entries(src):
            shown = functools.partial(_joined, guest, parents, name)  # made only for a refusal
            budget.entry(shown)
            mode = stat.S_IMODE(st.st_mode)
            try:
                parent = dest.folder(parents)
            except (UnsafePath, OSError):
                continue
            try:
                if stat.S_ISDIR(st.st_mode):
                    try:
                        os.mkdir(name, mode or 0o755, dir_fd=parent)
                    except FileExistsError:
                        pass
                elif stat.S_ISLNK(st.st_mode):
                    os.symlink(os.readlink(name, dir_fd=dir_fd), name, dir_fd=parent)
                elif stat.S_ISREG(st.st_mode):
                    _copy_file(dir_fd, name, parent, mode, budget, shown)
                    os.utime(name, ns=(st.st_atime_ns, st.st_mtime_ns), dir_fd=parent, follow_symlinks=False)
                else:
                    continue
            except FileNotFoundError:
                continue  # gone meanwhile
            finally:
                os.close(parent)
            count += 1
    finally:
        dest.close()
        os.close(root)
    return count


def _copy_file(src_dir: int, name: str, dst_dir: int, mode: int, budget: ExportBudget, shown: Name) -> None:
    src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=src_dir)
    try:
        size = os.fstat(src).st_size
        budget.take(size, shown)
        out = create_file(dst_dir, name, mode or 0o644)
        try:
            copy_fd(src, out, size)
            meta = _metadata(src)
            if meta is not None:
                try:
                    os.setxattr(out, META_XATTR, meta)
                except OSError:
                    pass
        finally:
            os.close(out)
    finally:
        os.close(src)


def ensure_folder(top: Path, guest_parts: list[str]) -> None:
    """The folder `top/guest_parts` (made if missing, never through a link)."""
    try:
        os.close(open_dir(top, guest_parts, create=True))
    except (UnsafePath, OSError) as exc:
        if isinstance(exc, OSError) and exc.errno == errno.EEXIST:
            return
        raise TreeError(f"cannot make {'/'.join(guest_parts)}: {exc}") from None
