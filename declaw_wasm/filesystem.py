"""A sandbox's file tree: the host folder behind it, the mounts the guest sees, and `sbx.files`.

Each sandbox owns a private host folder (mode 0700) that Wasmtime preopens for the guest (a
custom template's files are laid over it first):

    guest path                                         host                           access
    /                                                  <sandbox>/root  (wasi-fs/ copy)   read-only
    /home/user                                         <sandbox>/root/home/user          read-write
    /tmp                                               <sandbox>/root/tmp                read-write
    /usr/local/lib                                     <cache>/runtime/.../lib (shared)  read-only
    /usr/local/lib/declaw                              the package's runtime/ folder     read-only
    /usr/local/lib/declaw-site                         <cache>/runtime/guest-site-*      read-only
    /usr/local/lib/declaw-bundle   (code-interpreter)  <cache>/runtime/bundle-*          read-only
    /usr/local/lib/declaw-template (custom templates)  <cache>/templates/NAME/site       read-only
    /usr/local/lib/python315.zip/matplotlib/mpl-data   <cache>/runtime/.../mpl-data      read-only

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

import errno
import os
import posixpath
import shutil
import stat
import tempfile
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, TYPE_CHECKING, Iterator, Optional, Union

from .exceptions import (FileNotFoundException, InvalidArgumentException,
                         NotEnoughSpaceException, SandboxException)
from .guest import Mount
from .guest_site import GUEST_SITE
from .models import EntryInfo, FileType, WriteInfo
from .quota import usage

if TYPE_CHECKING:
    from .limits import Limits

HOME = "/home/user"
MAX_SYMLINK_HOPS = 40
CHUNK = 1 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

WriteData = Union[str, bytes, bytearray, memoryview, IO[str], IO[bytes]]


@dataclass(frozen=True)
class _Located:
    """A guest path resolved to a mount and the path inside it."""

    guest: str  # canonical guest path (no symlinks above the last component)
    mount: Mount
    parts: tuple[str, ...]  # components below the mount's folder

    @property
    def name(self) -> str:
        return self.parts[-1] if self.parts else "."


def runtime_mounts(lib_dir: Path, mpl_data_dir: Path, guest_runtime: Path,
                   guest_site: Path) -> list[Mount]:
    """The read-only mounts every guest shares: stdlib + packages, boot and shell code, the
    guest's own site-packages, matplotlib data."""
    return [
        Mount("/usr/local/lib", lib_dir, writable=False),
        Mount("/usr/local/lib/declaw", guest_runtime, writable=False),
        Mount(GUEST_SITE, guest_site, writable=False),
        Mount("/usr/local/lib/python315.zip/matplotlib/mpl-data", mpl_data_dir, writable=False),
    ]


class SandboxFS:
    """The host folder of one sandbox and the mounts its guests see."""

    def __init__(self, shared_mounts: list[Mount], skeleton: Path,
                 limits: Optional["Limits"] = None, overlay: Optional[Path] = None) -> None:
        """`limits`: whose disk quota the files API keeps to (none for a throw-away tree);
        `overlay`: a template's files, laid over the skeleton."""
        self.limits = limits
        self.base = Path(tempfile.mkdtemp(prefix="declaw-wasm-sbx-"))
        self.root = self.base / "root"
        shutil.copytree(skeleton, self.root, ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
        if overlay is not None and overlay.is_dir():
            shutil.copytree(overlay, self.root, symlinks=True, dirs_exist_ok=True)
        for folder in ("home/user/.config/matplotlib", "tmp", "usr/local/lib", "usr/local/bin"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        self.mounts = [
            Mount("/", self.root, writable=False),
            Mount(HOME, self.root / "home" / "user", writable=True),
            Mount("/tmp", self.root / "tmp", writable=True),
            *shared_mounts,
        ]
        # Longest guest prefix first: the same rule wasi-libc uses to pick a preopen.
        self._by_prefix = sorted(self.mounts, key=lambda m: len(m.guest), reverse=True)

    def destroy(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)

    def writable_folders(self) -> list[Path]:
        return [m.host for m in self.mounts if m.writable]

    def _room(self, new_bytes: int) -> Optional[int]:
        """Bytes a write may still add under the disk quota (None: no quota); raises
        NotEnoughSpaceException if even `new_bytes` (the size, when known) or a new file is too much."""
        if self.limits is None:
            return None
        used_bytes, used_files = usage(self.writable_folders())
        message = self.limits.over_disk_quota(used_bytes + new_bytes, used_files + 1)
        if message:
            raise NotEnoughSpaceException(message)
        return self.limits.disk_bytes - used_bytes

    # -- resolution ------------------------------------------------------------------------------
    @staticmethod
    def absolute(path: str) -> str:
        """The path as the API reports it: absolute, relative ones taken from /home/user."""
        if not isinstance(path, str) or not path:
            raise InvalidArgumentException(f"path must be a non-empty string, got {path!r}")
        if "\x00" in path:
            raise InvalidArgumentException(f"path contains a NUL byte: {path!r}")
        return posixpath.normpath(posixpath.join(HOME, path)).replace("//", "/")

    def _mount_of(self, parts: list[str]) -> tuple[Mount, tuple[str, ...]]:
        guest = "/" + "/".join(parts)
        for mount in self._by_prefix:
            prefix = mount.guest.rstrip("/")
            if guest == prefix or guest.startswith(prefix + "/") or mount.guest == "/":
                below = guest[len(prefix):].strip("/")
                return mount, tuple(p for p in below.split("/") if p)
        raise AssertionError("no mount for /")  # "/" always matches

    def locate(self, path: str, follow_last: bool = True) -> _Located:
        """Resolve `path` in the guest's namespace, following symlinks as the guest would."""
        pending = deque(self.absolute(path).split("/"))
        resolved: list[str] = []
        hops = 0
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
            host = mount.host.joinpath(*below)
            try:
                is_link = stat.S_ISLNK(os.lstat(host).st_mode) if below else False
            except OSError:
                is_link = False
            if not is_link:
                resolved = candidate
                continue
            hops += 1
            if hops > MAX_SYMLINK_HOPS:
                raise SandboxException(f"{path}: too many levels of symbolic links")
            target = os.readlink(host)
            if target.startswith("/"):
                resolved = []
            pending.extendleft(reversed(target.split("/")))
        mount, below = self._mount_of(resolved)
        return _Located("/" + "/".join(resolved), mount, below)

    @contextmanager
    def _parent_fd(self, loc: _Located, create: bool = False) -> Iterator[int]:
        """An fd of the folder holding `loc`, reached from the mount without following links."""
        fd = os.open(loc.mount.host, _DIR_FLAGS)
        try:
            for part in loc.parts[:-1]:
                try:
                    nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    os.mkdir(part, 0o755, dir_fd=fd)
                    nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = nxt
            yield fd
        finally:
            os.close(fd)

    def _writable(self, loc: _Located, path: str) -> None:
        if not loc.mount.writable:
            raise SandboxException(f"{path}: read-only file system (writable: {HOME}, /tmp)")

    # -- the files API -----------------------------------------------------------------------------
    def read_bytes(self, path: str) -> bytes:
        with self.open_read(path) as f:
            return f.read()

    @contextmanager
    def open_read(self, path: str) -> Iterator[IO[bytes]]:
        loc = self.locate(path)
        with _errors(path):
            if not loc.parts:
                raise IsADirectoryError(errno.EISDIR, "Is a directory")
            with self._parent_fd(loc) as parent:
                fd = os.open(loc.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
            f = os.fdopen(fd, "rb")
        with f:
            if stat.S_ISDIR(os.fstat(f.fileno()).st_mode):
                raise InvalidArgumentException(f"{path}: is a directory")
            yield f

    def write(self, path: str, data: WriteData) -> WriteInfo:
        shown = self.absolute(path)
        loc = self.locate(path)
        self._writable(loc, shown)
        known = len(data) if isinstance(data, (bytes, bytearray, memoryview)) else \
            len(data.encode()) if isinstance(data, str) else 0
        room = self._room(known)
        with _errors(shown):
            if not loc.parts:
                raise IsADirectoryError(errno.EISDIR, "Is a directory")
            with self._parent_fd(loc, create=True) as parent:
                fd = os.open(loc.name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                             0o644, dir_fd=parent)
                try:
                    with os.fdopen(fd, "wb") as out:
                        _copy_into(data, out, room)
                except OSError as exc:
                    if exc.errno == errno.ENOSPC:  # over the quota: leave nothing half-written
                        os.unlink(loc.name, dir_fd=parent)
                    raise
        return WriteInfo(name=posixpath.basename(shown), type=FileType.FILE, path=shown)

    def write_tree(self, source: Path, dest: str) -> int:
        """Copy a host folder's regular files to `dest` in the guest (confined as `write` is),
        checking the disk quota once for the whole tree; the number of files written."""
        files = [p for p in sorted(source.rglob("*")) if p.is_file() and not p.is_symlink()]
        if self.limits is not None:
            used_bytes, used_files = usage(self.writable_folders())
            message = self.limits.over_disk_quota(used_bytes + sum(p.stat().st_size for p in files),
                                                  used_files + len(files))
            if message:
                raise NotEnoughSpaceException(message)
        for path in files:
            shown = f"{self.absolute(dest).rstrip('/')}/{path.relative_to(source).as_posix()}"
            loc = self.locate(shown)
            self._writable(loc, shown)
            with _errors(shown), open(path, "rb") as data:
                with self._parent_fd(loc, create=True) as parent:
                    fd = os.open(loc.name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                                 | os.O_CLOEXEC, 0o644, dir_fd=parent)
                    with os.fdopen(fd, "wb") as out:
                        shutil.copyfileobj(data, out, CHUNK)
        return len(files)

    def list(self, path: str, depth: int = 1) -> list[EntryInfo]:
        if depth is None or depth < 1:
            raise InvalidArgumentException("depth should be at least 1")
        top = self.get_info(path)
        if top.type != FileType.DIR:
            raise InvalidArgumentException(f"{self.absolute(path)}: not a directory")
        out: list[EntryInfo] = []
        self._list_into(top.symlink_target or top.path, depth, out)
        return sorted(out, key=lambda e: e.path)

    def _list_into(self, folder: str, depth: int, out: list[EntryInfo]) -> None:
        loc = self.locate(folder)
        names = set()
        with _errors(folder):
            with self._dir_fd(loc) as fd:
                names.update(os.listdir(fd))
        # Mount points below this folder are what the guest sees there, even if no folder exists.
        for mount in self.mounts:
            if posixpath.dirname(mount.guest) == loc.guest and mount.guest != "/":
                names.add(posixpath.basename(mount.guest))
        for name in names:
            child = posixpath.join(loc.guest, name)
            try:
                info = self.get_info(child)
            except FileNotFoundException:
                continue
            out.append(info)
            if depth > 1 and info.type == FileType.DIR and info.symlink_target is None:
                self._list_into(child, depth - 1, out)

    @contextmanager
    def _dir_fd(self, loc: _Located) -> Iterator[int]:
        if not loc.parts:
            fd = os.open(loc.mount.host, _DIR_FLAGS)
        else:
            with self._parent_fd(loc) as parent:
                fd = os.open(loc.name, _DIR_FLAGS, dir_fd=parent)
        try:
            yield fd
        finally:
            os.close(fd)

    def get_info(self, path: str) -> EntryInfo:
        shown = self.absolute(path)
        link = self.locate(path, follow_last=False)
        st = self._lstat(link, shown)
        target: Optional[str] = None
        if stat.S_ISLNK(st.st_mode):
            resolved = self.locate(path)
            target = resolved.guest
            try:
                st = self._lstat(resolved, shown)
            except FileNotFoundException:
                pass  # a dangling link: describe the link itself
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
            symlink_target=target)

    def _lstat(self, loc: _Located, shown: str) -> os.stat_result:
        with _errors(shown):
            if not loc.parts:
                return os.stat(loc.mount.host)
            with self._parent_fd(loc) as parent:
                return os.stat(loc.name, dir_fd=parent, follow_symlinks=False)

    def exists(self, path: str) -> bool:
        try:
            self.get_info(path)
            return True
        except FileNotFoundException:
            return False

    def remove(self, path: str) -> None:
        shown = self.absolute(path)
        loc = self.locate(path, follow_last=False)
        if not loc.parts:
            raise InvalidArgumentException(f"{shown}: cannot remove a mount point")
        self._writable(loc, shown)
        try:
            with self._parent_fd(loc) as parent:
                st = os.stat(loc.name, dir_fd=parent, follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    shutil.rmtree(loc.name, dir_fd=parent)  # symlink-attack resistant on Linux
                else:
                    os.unlink(loc.name, dir_fd=parent)
        except FileNotFoundError:
            return  # removing a missing path is not an error (E2B's behaviour)
        except OSError as exc:
            raise SandboxException(f"{shown}: {exc.strerror}") from None

    def rename(self, old_path: str, new_path: str) -> EntryInfo:
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


def stream_chunks(f: IO[bytes]) -> Iterator[bytes]:
    while True:
        chunk = f.read(CHUNK)
        if not chunk:
            return
        yield chunk

