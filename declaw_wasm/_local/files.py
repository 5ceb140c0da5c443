"""A sandbox's file tree: the host folder behind it, the mounts its guests see (the layout is in
_wasm/layout.py), and the confined files API every backend call goes through.

A host folder (rather than an in-memory store) because wasmtime-py's WASI can only preopen host
directories: an in-memory tree would mean re-implementing every WASI file call in Python, slower
and with more room for bugs. Wasmtime confines the guest to its preopens (no `..` or symlink
escapes); this module confines the *host-side* API the same way: a guest path is resolved
component by component in the guest's namespace (symlinks followed as the guest would see them,
absolute targets re-rooted at the sandbox's `/`, `..` never above `/`), then opened by walking
from the mount's folder with `O_NOFOLLOW` at every step, so that a symlink swapped in by a
running guest makes the call fail instead of leaving the sandbox.
"""

from __future__ import annotations

import atexit
import errno
import functools
import io
import json
import os
import posixpath
import queue
import shutil
import stat
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, IO, Iterator, List, Optional, Protocol, Sequence

from .._args import path as check_path
from .._backend import WriteData
from .._hostfs import DIR_FLAGS, META_XATTR, PATH_MAX
from .._hostfs.exports import EXPORT_SLACK
from .._hostfs.walk import Walk, counted_bytes, remove_tree, usage
from .._wasm.layout import HOME, WRITABLE, Mount, make_root, root_mounts
from .._owners import make_folder, trash_name
from ..exceptions import (FileNotFoundException, InvalidArgumentException,
                          NotEnoughSpaceException, SandboxException)
from ..limits import Limits
from ..models import EntryInfo, FileType, WriteInfo

class Writer(Protocol):
    """Where `read_into` copies to: anything with `write` (a file, a hashing wrapper)."""

    def write(self, data: bytes, /) -> int: ...


MAX_SYMLINK_HOPS = 40
CHUNK = 1 << 20
# What one `files.list` may hold in the host's memory (~1.5 KB an entry, plus its strings): as
# many entries as a sandbox holds by default (Limits.disk_files), and this many bytes of paths,
# link targets and metadata (a guest can make each path ~4 KB long at no cost to its quota).
MAX_LIST_ENTRIES = 100_000
MAX_LIST_BYTES = 16 << 20
# A file's metadata (E2B's `metadata=`) is one extended attribute on the host file, JSON
# (`_hostfs.META_XATTR`).


def _read_metadata(parent: int, name: str) -> Optional[dict[str, str]]:
    """The metadata of `name` in the folder `parent` (never following a link at `name`)."""
    try:
        raw = os.getxattr(f"/proc/self/fd/{parent}/{name}", META_XATTR, follow_symlinks=False)
        found = json.loads(raw)
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _set_metadata(fd: int, path: str, metadata: Optional[dict[str, str]]) -> None:
    """Replace the metadata of the open file `fd` (None: remove it, E2B's rule for a write
    without metadata)."""
    try:
        if metadata is None:
            os.removexattr(fd, META_XATTR)
        else:
            os.setxattr(fd, META_XATTR, json.dumps(metadata, separators=(",", ":")).encode())
    except OSError as exc:
        if metadata is None and exc.errno in (errno.ENODATA, errno.ENOTSUP):
            return
        if exc.errno == errno.ENOTSUP:
            raise SandboxException(f"{path}: the host's file system keeps no extended attributes, "
                                   "so no file metadata") from None
        raise InvalidArgumentException(f"{path}: the host's file system refused the metadata "
                                       f"({exc.strerror})") from None


@dataclass(frozen=True)
class _Located:
    """A guest path resolved to a mount and the path inside it."""

    guest: str  # canonical guest path (no symlinks above the last component)
    mount: Mount
    parts: tuple[str, ...]  # components below the mount's folder

    @property
    def name(self) -> str:
        return self.parts[-1] if self.parts else "."


class _SymlinkLoop(SandboxException):
    """Too many levels of symbolic links (a guest-made loop)."""


class _Deleter:
    """One background thread that deletes killed sandboxes' folders, in order."""

    def __init__(self) -> None:
        self._queue: "queue.Queue[Path]" = queue.Queue()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()

    def delete(self, folder: Path) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="declaw-deleter", daemon=True)
                self._thread.start()
        self._queue.put(folder)

    def _run(self) -> None:
        while True:
            folder = self._queue.get()
            try:
                parent = os.open(folder.parent, DIR_FLAGS)
            except OSError:
                continue
            try:
                remove_tree(parent, folder.name)
            except OSError:
                pass  # best effort; a racing call's end tries again, the next start reaps it
            finally:
                os.close(parent)
                self._queue.task_done()

    def wait(self, timeout: float = 10.0) -> bool:
        """Until every folder handed over so far is deleted (at exit, for tests), at most
        `timeout` seconds; whether they all are."""
        deadline = time.monotonic() + timeout
        done = self._queue.all_tasks_done
        with done:
            while self._queue.unfinished_tasks:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                done.wait(left)
        return True


deleter = _Deleter()
# Runs after the sandboxes' atexit kill (registered later, so run earlier): no folder outlives
# its program unless deleting it takes longer than this; then the next start reaps it.
atexit.register(deleter.wait, 10.0)


class SandboxFS:
    """The host folder of one sandbox and the mounts its guests see."""

    def __init__(self, shared_mounts: List[Mount], skeleton: Path,
                 limits: Optional[Limits] = None, overlay: Optional[Path] = None,
                 kind: str = "sbx") -> None:
        """`limits`: whose disk quota the files API keeps to (none for a throw-away tree);
        `overlay`: a template's files, laid over the skeleton; `kind`: "standby" for a sandbox made
        ahead of time (its folder keeps that name)."""
        self.limits = limits
        self.base = make_folder(kind)  # named after its owner: reaped if this process dies
        self.root = self.base / "root"
        make_root(self.root, skeleton)
        if overlay is not None and overlay.is_dir():
            shutil.copytree(overlay, self.root, symlinks=True, dirs_exist_ok=True)
        self.mounts = [*root_mounts(self.root), *shared_mounts]
        # Longest guest prefix first: the same rule wasi-libc uses to pick a preopen.
        self._by_prefix = sorted(self.mounts, key=lambda m: len(m.guest), reverse=True)
        self._mount_paths = {m.guest for m in self.mounts}
        # Calls in flight and whether the tree is gone: a call that raced `destroy` (say, a
        # write making a parent folder after the removal passed it) removes the tree again.
        self._calls = 0
        self._closed = False
        self._calls_lock = threading.Lock()
        self._destroy_lock = threading.Lock()
        self._trash: Optional[Path] = None  # where the folder went on destroy

    def add_mounts(self, mounts: list[Mount]) -> None:
        """More folders for the guests (attached volumes): before any guest starts."""
        self.mounts = [*self.mounts, *mounts]
        self._by_prefix = sorted(self.mounts, key=lambda m: len(m.guest), reverse=True)
        self._mount_paths = {m.guest for m in self.mounts}

    def destroy(self) -> None:
        """Delete the sandbox's host folder; calls still in flight delete it again as they end.

        The folder is first renamed out of the way (one rename: the sandbox's path is gone at
        once), then deleted by a background thread: deleting a tree is a dozen metadata writes
        or more, ~20 ms on a busy disk, which a `kill` need not wait for. A process that exits
        before the deletion ends leaves it to the next one to start (_owners.py)."""
        with self._calls_lock:
            self._closed = True
        self._remove_base()

    def _remove_base(self) -> None:
        with self._destroy_lock:
            if self._trash is None:
                trash = self.base.with_name(trash_name(self.base.name))
                try:
                    os.rename(self.base, trash)
                except FileNotFoundError:
                    return
                except OSError:  # cannot rename: delete in place, now
                    trash = self.base
                self._trash = trash
            deleter.delete(self._trash)

    @contextmanager
    def _call(self) -> Iterator[None]:
        """Wraps each files-API call: refused once the tree is gone; the last call to end after
        `destroy` removes whatever it raced in."""
        with self._calls_lock:
            if self._closed:
                raise SandboxException("the sandbox was killed: its files are gone")
            self._calls += 1
        try:
            yield
        finally:
            with self._calls_lock:
                self._calls -= 1
                last = self._closed and self._calls == 0
            if last:
                self._remove_base()

    def writable_folders(self) -> List[Path]:
        return [m.host for m in self.mounts if m.writable]

    def quota_bytes(self) -> int:
        """The disk quota every export of this tree is bounded by (a tree made without limits:
        the default quota, `Limits().disk_bytes`, so that no export is ever unbounded)."""
        return (self.limits or Limits()).disk_bytes

    def quota_files(self) -> int:
        """The files and folders every export of this tree is bounded by (as `quota_bytes`)."""
        return (self.limits or Limits()).disk_files

    def _room(self, new_bytes: int, used: Optional[List[int]] = None) -> Optional[int]:
        """Bytes a write may still add under the disk quota (None: no quota); raises
        NotEnoughSpaceException if even `new_bytes` (the size, when known) or a new file is too
        much. `used`: [bytes, files] already known (a batch's running total), else walked."""
        if self.limits is None:
            return None
        used_bytes, used_files = used if used is not None else usage(self.writable_folders())
        message = self.limits.over_disk_quota(used_bytes + new_bytes, used_files + 1)
        if message:
            raise NotEnoughSpaceException(message)
        return self.limits.disk_bytes - used_bytes

    # -- resolution ------------------------------------------------------------------------------
    @staticmethod
    def absolute(path: str) -> str:
        """The path as the API reports it: absolute, relative ones taken from /home/user."""
        return posixpath.normpath(posixpath.join(HOME, check_path(path))).replace("//", "/")

    def _mount_of(self, parts: List[str]) -> tuple[Mount, tuple[str, ...]]:
        guest = "/" + "/".join(parts)
        for mount in self._by_prefix:
            prefix = mount.guest.rstrip("/")
            if guest == prefix or guest.startswith(prefix + "/") or mount.guest == "/":
                below = guest[len(prefix):].strip("/")
                return mount, tuple(p for p in below.split("/") if p)
        raise AssertionError("no mount for /")  # "/" always matches

    def locate(self, path: str, follow_last: bool = True) -> _Located:
        """Resolve `path` in the guest's namespace, following symlinks as the guest would.

        Links are looked at through folder fds opened with O_NOFOLLOW from the mount down (never
        a host path, which the host kernel would resolve through a symlink a guest just swapped
        in); a link that changes under us is taken as what we find, and the call's own open
        (O_NOFOLLOW again) decides. Nothing here raises an OSError, so no host path can leak.
        """
        shown = self.absolute(path)
        pending = deque(shown.split("/"))
        resolved: List[str] = []
        hops = 0
        walks: dict[str, Walk] = {}
        try:
            while pending:
                part = pending.popleft()
                if part in ("", "."):
                    continue
                if part == "..":
                    if resolved:
                        resolved.pop()
                    continue
                candidate = resolved + [part]
                if not pending and not follow_last:
                    resolved = candidate
                    break
                mount, below = self._mount_of(candidate)
                target = self._link_target(walks, mount, below) if below else None
                if target is None:
                    resolved = candidate
                    continue
                hops += 1
                if hops > MAX_SYMLINK_HOPS:
                    raise _SymlinkLoop(f"{shown}: too many levels of symbolic links")
                if target.startswith("/"):
                    resolved = []
                pending.extendleft(reversed(target.split("/")))
        finally:
            for walk in walks.values():
                walk.close()
        mount, below = self._mount_of(resolved)
        return _Located("/" + "/".join(resolved), mount, below)

    @staticmethod
    def _link_target(walks: dict[str, Walk], mount: Mount, below: tuple[str, ...]) -> Optional[str]:
        """The target of the symlink at `below` in `mount`; None if it is not a symlink (or is
        missing, or changed while we looked)."""
        walk = walks.get(mount.guest)
        if walk is None:
            walk = walks[mount.guest] = Walk(lambda: os.open(mount.host, DIR_FLAGS))
        try:
            fd = walk.folder(below[:-1])
            if not stat.S_ISLNK(os.stat(below[-1], dir_fd=fd, follow_symlinks=False).st_mode):
                return None
            return os.readlink(below[-1], dir_fd=fd)
        except OSError:
            return None

    @contextmanager
    def _parent_fd(self, loc: _Located, create: bool = False) -> Iterator[int]:
        """An fd of the folder holding `loc`, reached from the mount without following links."""
        fd = os.open(loc.mount.host, DIR_FLAGS)
        try:
            for part in loc.parts[:-1]:
                try:
                    nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    os.mkdir(part, 0o755, dir_fd=fd)
                    nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = nxt
            yield fd
        finally:
            os.close(fd)

    def _writable(self, loc: _Located, path: str) -> None:
        if not loc.mount.writable:
            raise SandboxException(f"{path}: read-only file system (writable: {', '.join(WRITABLE)})")

    # -- the files API -----------------------------------------------------------------------------
    def read_bytes(self, path: str, limit: Optional[int] = None) -> bytes:
        """The file's bytes. `limit`: a regular file of at most that many bytes, or refused; the
        size checked is the apparent one of the descriptor that is read (a sparse file counts
        whole), and no more than it is read however the file grows meanwhile."""
        if limit is None:
            with self.open_read(path) as f:
                return f.read()
        out = io.BytesIO()
        self.read_into(path, out, limit)
        return out.getvalue()

    def read_into(self, path: str, out: "Writer", limit: int) -> int:
        """Copy the regular file at `path`, of at most `limit` bytes (or refused, as `read_bytes`
        refuses), to `out`, a block at a time: the bytes copied."""
        with self.open_read(path) as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise InvalidArgumentException(f"{self.absolute(path)}: not a regular file")
            if st.st_size > limit:
                raise InvalidArgumentException(f"{self.absolute(path)}: {st.st_size} bytes, more "
                                               f"than the {limit} that may be read")
            done = 0
            while done < st.st_size:  # from the descriptor itself: no read-ahead past it
                block = os.read(f.fileno(), min(CHUNK, st.st_size - done))
                if not block:
                    break
                out.write(block)
                done += len(block)
            return done

    @contextmanager
    def open_read(self, path: str) -> Iterator["CappedReader"]:
        """The file at `path`, to read: at most the disk quota + 1 MiB of it (a read is an export,
        bounded like a snapshot: docs/security.md). A larger file is refused before any of it is
        read, one that grows past that while it is read fails the read there
        (`NotEnoughSpaceException` naming the quota and the size)."""
        with self._call():
            loc = self.locate(path)
            with _errors(path):
                if not loc.parts:
                    raise IsADirectoryError(errno.EISDIR, "Is a directory")
                with self._parent_fd(loc) as parent:
                    fd = os.open(loc.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
                f = os.fdopen(fd, "rb")
        with f:
            st = os.fstat(f.fileno())
            if stat.S_ISDIR(st.st_mode):
                raise InvalidArgumentException(f"{path}: is a directory")
            reader = CappedReader(f, self.quota_bytes(), self.absolute(path))
            reader.check(st.st_size)
            yield reader

    def write(self, path: str, data: WriteData, metadata: Optional[dict[str, str]] = None) -> WriteInfo:
        with self._call():
            return self._write(path, data, metadata)

    def write_many(self, entries: Sequence[tuple[str, WriteData]],
                   metadata: Optional[dict[str, str]] = None) -> List[WriteInfo]:
        """Write several files in order, walking the tree for the disk quota once (a walk per
        file made a batch of n files cost n walks of a growing tree) and keeping the running
        total after each file."""
        with self._call():
            if self.limits is None:
                return [self._write(path, data, metadata) for path, data in entries]
            used = list(usage(self.writable_folders()))
            return [self._write(path, data, metadata, used) for path, data in entries]

    def _write(self, path: str, data: WriteData, metadata: Optional[dict[str, str]] = None,
               used: Optional[List[int]] = None) -> WriteInfo:
        """`used`: a batch's running [bytes, files] under the quota (walked once), updated here."""
        shown = self.absolute(path)
        loc = self.locate(path)
        self._writable(loc, shown)
        known = len(data) if isinstance(data, (bytes, bytearray, memoryview)) else \
            len(data.encode()) if isinstance(data, str) else 0
        room = self._room(known, used)
        old_size = -1
        with _errors(shown):
            if not loc.parts:
                raise IsADirectoryError(errno.EISDIR, "Is a directory")
            with self._parent_fd(loc, create=True) as parent:
                if used is not None:
                    try:
                        old_size = os.stat(loc.name, dir_fd=parent, follow_symlinks=False).st_size
                    except OSError:
                        old_size = -1
                fd = os.open(loc.name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                             0o644, dir_fd=parent)
                try:
                    with os.fdopen(fd, "wb") as out:
                        _copy_into(data, out, room)
                        out.flush()
                        _set_metadata(out.fileno(), shown, metadata)
                        size = os.fstat(out.fileno()).st_size
                except OSError as exc:
                    if exc.errno == errno.ENOSPC:  # over the quota: leave nothing half-written
                        os.unlink(loc.name, dir_fd=parent)
                    raise
        if used is not None:
            used[0] += size - max(old_size, 0)
            used[1] += 1 if old_size < 0 else 0
        return WriteInfo(name=posixpath.basename(shown), type=FileType.FILE, path=shown, size=size,
                         metadata=metadata)

    def write_tree(self, source: Path, dest: str) -> int:
        """`write_trees` of one folder."""
        return self.write_trees([(source, dest)])

    def write_trees(self, trees: Sequence[tuple[Path, str]]) -> int:
        """Copy host folders' regular files to guest folders (confined as `write` is); the number
        of files written. Refused whole, before anything is written, unless they fit the disk
        quota as the quota counts them (`counted_bytes`: each file at least its size rounded up
        to the sandbox's file-system blocks, each new folder a block; an entry each). What is
        written is counted as it is written too: past the quota (an estimate that fell short),
        or on any failure, what this call created is removed and the error raised."""
        with self._call():
            return self._write_trees(trees)

    def _write_trees(self, trees: Sequence[tuple[Path, str]]) -> int:
        folders: list[str] = []  # guest folders, each after the one holding it
        files: list[tuple[str, Path, os.stat_result]] = []
        for source, dest in trees:
            top = self.absolute(dest).rstrip("/")
            parts = [p for p in top.split("/") if p]
            folders += ["/" + "/".join(parts[:i]) for i in range(1, len(parts) + 1)]
            for path in sorted(source.rglob("*")):
                st = os.lstat(path)
                shown = f"{top}/{path.relative_to(source).as_posix()}"
                if stat.S_ISDIR(st.st_mode):
                    folders.append(shown)
                elif stat.S_ISREG(st.st_mode):
                    files.append((shown, path, st))
        folders = list(dict.fromkeys(folders))
        new_folders = [f for f in folders if self._mode_of(f) is None]
        used: Optional[List[int]] = None
        if self.limits is not None:
            used = list(usage(self.writable_folders()))
            block = self._block_size(trees[0][1]) if trees else 4096
            new_files = sum(1 for shown, _, _ in files if self._mode_of(shown) is None)
            estimate = sum(max(counted_bytes(st), -(-st.st_size // block) * block) for _, _, st in files)
            message = self.limits.over_disk_quota(used[0] + estimate + block * len(new_folders),
                                                  used[1] + new_files + len(new_folders))
            if message:
                raise NotEnoughSpaceException(message)
        made: list[str] = []
        created: list[str] = []
        try:
            for shown in new_folders:
                if self._make_dir(shown):
                    made.append(shown)
                    self._count(used, shown)
            for shown, path, _ in files:
                if self._write_copy(shown, path):
                    created.append(shown)
                self._count(used, shown)
        except BaseException:
            for shown in reversed(created):
                try:
                    self._remove(shown)
                except SandboxException:
                    pass
            for shown in reversed(made):
                self._remove_empty_dir(shown)
            raise
        return len(files)

    def _mode_of(self, shown: str) -> Optional[int]:
        """The st_mode of the entry at guest path `shown` (links not followed), None if missing."""
        try:
            loc = self.locate(shown, follow_last=False)
            if not loc.parts:
                return os.stat(loc.mount.host).st_mode
            with self._parent_fd(loc) as parent:
                return os.stat(loc.name, dir_fd=parent, follow_symlinks=False).st_mode
        except (OSError, SandboxException):
            return None

    def _block_size(self, dest: str) -> int:
        """The allocation unit of the file system behind `dest` (a file takes whole ones)."""
        try:
            got = os.statvfs(self.locate(dest).mount.host)
            return max(got.f_frsize or got.f_bsize, 512)
        except (OSError, SandboxException):
            return 4096

    def _count(self, used: Optional[List[int]], shown: str) -> None:
        """Add what the entry at `shown` (just made) counts to `used`, refusing past the quota."""
        if used is None or self.limits is None:
            return
        loc = self.locate(shown, follow_last=False)
        with _errors(shown), self._parent_fd(loc) as parent:
            used[0] += counted_bytes(os.stat(loc.name, dir_fd=parent, follow_symlinks=False))
        used[1] += 1
        message = self.limits.over_disk_quota(used[0], used[1])
        if message:
            raise NotEnoughSpaceException(message)

    def _write_copy(self, shown: str, source: Path) -> bool:
        """Copy the host file `source` to guest path `shown`; whether the file is new."""
        loc = self.locate(shown)
        self._writable(loc, shown)
        with _errors(shown), open(source, "rb") as data:
            with self._parent_fd(loc, create=True) as parent:
                try:
                    os.stat(loc.name, dir_fd=parent, follow_symlinks=False)
                    new = False
                except FileNotFoundError:
                    new = True
                fd = os.open(loc.name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                             | os.O_CLOEXEC, 0o644, dir_fd=parent)
                with os.fdopen(fd, "wb") as out:
                    shutil.copyfileobj(data, out, CHUNK)
        return new

    def _remove_empty_dir(self, shown: str) -> None:
        try:
            loc = self.locate(shown, follow_last=False)
            if loc.parts:
                with self._parent_fd(loc) as parent:
                    os.rmdir(loc.name, dir_fd=parent)
        except (OSError, SandboxException):
            pass

    def entries(self, path: str, limit: int) -> List[tuple[str, FileType]]:
        """The names and types (a symlink as itself; other kinds left out) of the entries of the
        folder at `path`, as the folder yields them: at most `limit`, one more is refused
        (InvalidArgumentException), so that no listing is ever built whole."""
        shown = self.absolute(path)
        out: List[tuple[str, FileType]] = []
        with self._call():
            loc = self.locate(path)
            with _errors(shown):
                if loc.parts:
                    with self._parent_fd(loc) as parent:
                        fd = os.open(loc.name, DIR_FLAGS, dir_fd=parent)
                else:
                    fd = os.open(loc.mount.host, DIR_FLAGS)
                try:
                    with os.scandir(fd) as found:
                        for entry in found:
                            if len(out) >= limit:
                                raise InvalidArgumentException(f"{shown}: more than {limit} entries")
                            if entry.is_symlink():
                                out.append((entry.name, FileType.SYMLINK))
                            elif entry.is_dir(follow_symlinks=False):
                                out.append((entry.name, FileType.DIR))
                            elif entry.is_file(follow_symlinks=False):
                                out.append((entry.name, FileType.FILE))
                finally:
                    os.close(fd)
        return out

    def room(self) -> Optional[tuple[int, int]]:
        """(bytes, files) the disk quota has left, as it counts them; None: no quota."""
        if self.limits is None:
            return None
        with self._call():
            used_bytes, used_files = usage(self.writable_folders())
        return max(0, self.limits.disk_bytes - used_bytes), max(0, self.limits.disk_files - used_files)

    def list(self, path: str, depth: int = 1) -> List[EntryInfo]:
        """Entries under `path`, `depth` levels deep, sorted by path: at most `MAX_LIST_ENTRIES`
        entries and `MAX_LIST_BYTES` of paths, link targets and metadata (past either:
        InvalidArgumentException naming it, before more is held); an entry whose path is longer
        than PATH_MAX is left out with what it holds (no path-taking call could name it)."""
        if depth is None or depth < 1:
            raise InvalidArgumentException("depth should be at least 1")
        with self._call():
            top = self.get_info(path)
            if top.type != FileType.DIR:
                raise InvalidArgumentException(f"{self.absolute(path)}: not a directory")
            return sorted(self._walk_listing(self.locate(top.path), depth), key=lambda e: e.path)

    def _walk_listing(self, start: _Located, depth: int) -> List[EntryInfo]:
        """Entries below `start`, depth-first, each folder opened once from the one above it
        (`Walk`) and each entry stat'ed in its folder: linear in the entries, however deep.
        Entries that vanish meanwhile are left out; symlinks (loops too) are listed, never
        followed into; entries past PATH_MAX are left out, never walked into; the listing is
        bounded as `list` says."""
        out: List[EntryInfo] = []
        held = 0  # bytes of paths, link targets and metadata in `out`
        stack = [(start.guest, depth)]
        walks: dict[str, Walk] = {}
        try:
            while stack:
                folder, left = stack.pop()
                mount, below = self._mount_of([p for p in folder.split("/") if p])
                walk = walks.get(mount.guest)
                if walk is None:
                    walk = walks[mount.guest] = Walk(functools.partial(os.open, mount.host, DIR_FLAGS))
                try:
                    fd = walk.folder(below)
                    names = set(os.listdir(fd))
                except OSError:
                    if folder == start.guest:
                        with _errors(folder):
                            raise
                    continue  # changed while we listed
                # Mount points below this folder are what the guest sees there, even if no folder exists.
                names.update(posixpath.basename(m) for m in self._mount_paths
                             if m != "/" and posixpath.dirname(m) == folder)
                subfolders = []
                for name in names:
                    child = posixpath.join(folder, name)
                    if len(child) > PATH_MAX // 4 and len(child.encode("utf-8", "surrogateescape")) > PATH_MAX:
                        continue  # no call can name it (a guest nests folders past it by renaming them)
                    info = self._listed(child, fd, name)
                    if info is None:
                        continue
                    held += len(info.path) + len(info.symlink_target or "") + \
                        sum(len(k) + len(v) for k, v in (info.metadata or {}).items())
                    if len(out) >= MAX_LIST_ENTRIES or held > MAX_LIST_BYTES:
                        raise InvalidArgumentException(
                            f"listing {start.guest} {depth} levels deep refused: more than "
                            + (f"{MAX_LIST_ENTRIES} entries" if len(out) >= MAX_LIST_ENTRIES
                               else f"{MAX_LIST_BYTES} bytes of paths, link targets and metadata")
                            + " (files.list's limit): list a folder further down, or fewer levels")
                    out.append(info)
                    if left > 1 and info.type == FileType.DIR and info.symlink_target is None:
                        subfolders.append(child)
                stack.extend((child, left - 1) for child in sorted(subfolders, reverse=True))
        finally:
            for walk in walks.values():
                walk.close()
        return out

    def _listed(self, child: str, fd: int, name: str) -> Optional[EntryInfo]:
        """One entry of a listing (None if it vanished): stat'ed in its folder `fd`; mount
        points and symlinks the slow way, a looping symlink as the link itself."""
        if child not in self._mount_paths:
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                return None
            if not stat.S_ISLNK(st.st_mode):
                return _entry(child, st, None, _read_metadata(fd, name) if stat.S_ISREG(st.st_mode) else None)
        try:
            return self.get_info(child)
        except FileNotFoundException:
            return None
        except _SymlinkLoop:
            return self._link_itself(child)

    def _link_itself(self, shown: str) -> Optional[EntryInfo]:
        """A symlink that cannot be followed (a loop), described as itself: type symlink, its
        target as the guest path it names (one hop)."""
        try:
            link = self.locate(shown, follow_last=False)
            with self._parent_fd(link) as parent:
                st = os.stat(link.name, dir_fd=parent, follow_symlinks=False)
                target = os.readlink(link.name, dir_fd=parent) if stat.S_ISLNK(st.st_mode) else None
        except (OSError, SandboxException):
            return None
        if target is not None:
            target = posixpath.normpath(posixpath.join(posixpath.dirname(link.guest), target))
        return _entry(shown, st, target)

    def get_info(self, path: str) -> EntryInfo:
        with self._call():
            shown = self.absolute(path)
            link = self.locate(path, follow_last=False)
            st = self._lstat(link, shown)
            target: Optional[str] = None
            found = link
            if stat.S_ISLNK(st.st_mode):
                resolved = self.locate(path)
                target = resolved.guest
                try:
                    st = self._lstat(resolved, shown)
                    found = resolved
                except FileNotFoundException:
                    pass  # a dangling link: describe the link itself
            return _entry(shown, st, target, self._metadata(found) if stat.S_ISREG(st.st_mode) else None)

    def _metadata(self, loc: _Located) -> Optional[dict[str, str]]:
        if not loc.parts:
            return None
        try:
            with self._parent_fd(loc) as parent:
                return _read_metadata(parent, loc.name)
        except OSError:
            return None

    def _lstat(self, loc: _Located, shown: str) -> os.stat_result:
        with _errors(shown):
            if not loc.parts:
                return os.stat(loc.mount.host)
            with self._parent_fd(loc) as parent:
                return os.stat(loc.name, dir_fd=parent, follow_symlinks=False)

    def exists(self, path: str) -> bool:
        """Whether something is at `path`; a symlink that loops is something (the link)."""
        try:
            self.get_info(path)
            return True
        except FileNotFoundException:
            return False
        except _SymlinkLoop:
            with self._call():
                return self._link_itself(self.absolute(path)) is not None

    def remove(self, path: str) -> None:
        with self._call():
            self._remove(path)

    def _remove(self, path: str) -> None:
        shown = self.absolute(path)
        loc = self.locate(path, follow_last=False)
        if not loc.parts:
            raise InvalidArgumentException(f"{shown}: cannot remove a mount point")
        self._writable(loc, shown)
        try:
            with self._parent_fd(loc) as parent:
                st = os.stat(loc.name, dir_fd=parent, follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    remove_tree(parent, loc.name)  # iterative, never follows a symlink
                else:
                    os.unlink(loc.name, dir_fd=parent)
        except FileNotFoundError:
            return  # removing a missing path is not an error (E2B's behaviour)
        except OSError as exc:
            raise SandboxException(f"{shown}: {exc.strerror}") from None

    def rename(self, old_path: str, new_path: str) -> EntryInfo:
        with self._call():
            return self._rename(old_path, new_path)

    def _rename(self, old_path: str, new_path: str) -> EntryInfo:
        old_shown, new_shown = self.absolute(old_path), self.absolute(new_path)
        src = self.locate(old_path, follow_last=False)
        dst = self.locate(new_path, follow_last=False)
        for loc, shown in ((src, old_shown), (dst, new_shown)):
            if not loc.parts:
                raise InvalidArgumentException(f"{shown}: cannot rename a mount point")
            self._writable(loc, shown)
        with _errors(old_shown):
            with self._parent_fd(src) as src_parent, self._parent_fd(dst, create=True) as dst_parent:
                os.rename(src.name, dst.name, src_dir_fd=src_parent, dst_dir_fd=dst_parent)
        return self.get_info(new_shown)

    def make_dir(self, path: str) -> bool:
        with self._call():
            return self._make_dir(path)

    def _make_dir(self, path: str) -> bool:
        shown = self.absolute(path)
        loc = self.locate(path)
        if not loc.parts:
            return False
        self._writable(loc, shown)
        with _errors(shown):
            with self._parent_fd(loc, create=True) as parent:
                try:
                    os.mkdir(loc.name, 0o755, dir_fd=parent)
                    return True
                except FileExistsError:
                    if stat.S_ISDIR(os.stat(loc.name, dir_fd=parent, follow_symlinks=False).st_mode):
                        return False
                    raise

    def host_path(self, path: str) -> Optional[Path]:
        """The host path behind a guest path (for diagnostics and tests), or None if outside."""
        loc = self.locate(path)
        return loc.mount.host.joinpath(*loc.parts)


def _entry(shown: str, st: os.stat_result, target: Optional[str],
           metadata: Optional[dict[str, str]] = None) -> EntryInfo:
    if stat.S_ISDIR(st.st_mode):
        kind = FileType.DIR
    elif stat.S_ISLNK(st.st_mode):
        kind = FileType.SYMLINK
    else:
        kind = FileType.FILE
    return EntryInfo(
        name=posixpath.basename(shown) or "/", type=kind, path=shown, size=st.st_size,
        mode=stat.S_IMODE(st.st_mode), permissions=stat.filemode(st.st_mode),
        owner="user", group="user",
        modified_time=datetime.fromtimestamp(st.st_mtime, tz=timezone.utc),
        symlink_target=target, metadata=metadata)


@contextmanager
def _errors(path: str) -> Iterator[None]:
    """Turn host OS errors into the SDK's exceptions, naming the guest path (never the host's)."""
    try:
        yield
    except FileNotFoundError:
        raise FileNotFoundException(f"{path}: no such file or directory") from None
    except NotADirectoryError:
        raise FileNotFoundException(f"{path}: a parent is not a directory") from None
    except IsADirectoryError:
        raise InvalidArgumentException(f"{path}: is a directory") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SandboxException(f"{path}: refused, a symbolic link changed during the call") from None
        if exc.errno == errno.ENOSPC:
            raise NotEnoughSpaceException(f"{path}: {exc.strerror or 'no space left'}") from None
        raise SandboxException(f"{path}: {exc.strerror or exc}") from None


def _copy_into(data: WriteData, out: IO[bytes], room: Optional[int] = None) -> None:
    """Write `data`; more than `room` bytes (None: no limit) is ENOSPC."""
    if isinstance(data, str):
        out.write(data.encode("utf-8"))
    elif isinstance(data, (bytes, bytearray, memoryview)):
        out.write(data)
    elif hasattr(data, "read"):
        written = 0
        while True:
            chunk = data.read(CHUNK)
            if not chunk:
                break
            raw = chunk.encode("utf-8") if isinstance(chunk, str) else chunk
            written += len(raw)
            if room is not None and written > room:
                raise OSError(errno.ENOSPC, "disk quota exceeded (Limits.disk_bytes)")
            out.write(raw)
    else:
        raise InvalidArgumentException(
            f"data must be str, bytes or a file-like object, got {type(data).__name__}")


class CappedReader:
    """A sandbox file being read by the host (`files.read` in every form): at most `quota` + 1
    MiB of it. Each read asks the file for no more than what is left of that (plus one byte, to
    tell a file that grew past it), so the host never holds more, however large the guest makes
    the file while it is read."""

    def __init__(self, f: IO[bytes], quota: int, shown: str) -> None:
        self.f = f
        self.quota = quota
        self.limit = quota + EXPORT_SLACK
        self.shown = shown
        self.count = 0

    def check(self, size: int, grew: bool = False) -> None:
        if size > self.limit:
            raise NotEnoughSpaceException(
                f"reading {self.shown} refused: it {'grew past' if grew else 'is'} {size} bytes, more than the "
                f"disk quota of {self.quota} bytes + 1 MiB allows (Limits.disk_bytes; sparse files count at "
                "their apparent size)")

    def read(self, n: Optional[int] = -1) -> bytes:
        if n is not None and n >= 0:
            return self._read(n)
        # all of it: one buffer of the size the file has now (as a plain read() allocates), then
        # whatever it grew by meanwhile
        first = self._read(max(os.fstat(self.f.fileno()).st_size - self.count, 0) + 1)
        rest: list[bytes] = []
        while True:
            chunk = self._read(CHUNK)
            if not chunk:
                return first + b"".join(rest) if rest else first
            rest.append(chunk)

    def _read(self, n: int) -> bytes:
        data = self.f.read(min(n, self.limit - self.count + 1))
        self.count += len(data)
        self.check(self.count, grew=True)
        return data

    def fileno(self) -> int:
        return self.f.fileno()


def stream_chunks(f: "IO[bytes] | CappedReader") -> Iterator[bytes]:
    while True:
        chunk = f.read(CHUNK)
        if not chunk:
            return
        yield chunk


class FileChunks:
    """A file's bytes in 1 MiB chunks as they are read (the backend's `Chunks`); closed at the
    end or by `close()`."""

    def __init__(self, fs: SandboxFS, path: str) -> None:
        self._cm: Optional[Any] = fs.open_read(path)
        reader = self._cm.__enter__()
        self.size = os.fstat(reader.f.fileno()).st_size  # as opened (the sandbox's journal)
        self._chunks = stream_chunks(reader)

    def __iter__(self) -> "FileChunks":
        return self

    def __next__(self) -> bytes:
        try:
            return next(self._chunks)
        except StopIteration:
            self.close()
            raise

    def close(self) -> None:
        if self._cm is not None:
            cm, self._cm = self._cm, None
            cm.__exit__(None, None, None)
