"""`files.watch_dir` in this process: inotify watches on a sandbox's host folders, reported as
E2B's `FilesystemEvent`s with paths in the guest's namespace.

Why inotify_simple and not watchfiles: watchfiles' recursive mode (the notify crate under it)
follows symbolic links when it walks a tree -- measured here, one `ln -s /usr x` inside a watched
folder made it add 15 452 host watches -- so a guest's `ln -s / x` would make the host watch its
own `/`. inotify_simple is a ctypes wrapper of the kernel calls, under a hundred lines, and lets
every watch be added on a folder this module opened itself, walking from the mount with
`O_NOFOLLOW` at each step (as the files API does); the kernel then watches that folder's inode
(`/proc/self/fd/N`), never a path a guest can redirect. Symlinks are reported, never entered.

Reads are on demand (`events()`), so a watch holds one inotify descriptor and no thread. Caps:
`MAX_WATCHES` open watches per sandbox, `MAX_FOLDERS` folders per recursive watch, `MAX_FOUND`
entries reported as created for the folders that arrived full, and `MAX_FOLDERS` of them walked,
per read (each folder walked once a read, however often it arrived), and no folder or entry whose guest
path is longer than PATH_MAX (a guest nests folders past it by renaming them into each other;
no path-taking call reaches them, and a watch would hold their paths, each one longer).
"""

from __future__ import annotations

import os
import posixpath
import stat
import threading
import time
from typing import TYPE_CHECKING, Any, List, Optional

from .._hostfs import PATH_MAX
from .._hostfs.beneath import open_dir
from ..exceptions import InvalidArgumentException, RateLimitException, SandboxException
from ..models import FileType, FilesystemEvent, FilesystemEventType

if TYPE_CHECKING:
    from .files import SandboxFS

MAX_WATCHES = 16  # per sandbox
MAX_FOLDERS = 1024  # per recursive watch
MAX_FOUND = 4096  # entries reported as created, per read, for folders that arrived full (the rest: not reported)


def _flags() -> Any:
    try:
        import inotify_simple
    except ImportError:  # not Linux, or not installed
        raise SandboxException("files.watch_dir needs Linux's inotify (the inotify_simple package)") from None
    return inotify_simple


class LocalWatcher:
    """One watch on a folder of a sandbox (the local `Watcher`)."""

    def __init__(self, fs: "SandboxFS", path: str, recursive: bool, include_entry: bool,
                 on_stop: Any = None) -> None:
        lib = _flags()
        f = lib.flags
        self._lib = lib
        self._mask = (f.CREATE | f.MODIFY | f.CLOSE_WRITE | f.DELETE | f.MOVED_FROM | f.MOVED_TO
                      | f.ATTRIB | f.DONT_FOLLOW | f.ONLYDIR | f.EXCL_UNLINK)
        self.fs = fs
        self.recursive = recursive
        self.include_entry = include_entry
        self._on_stop = on_stop
        self._lock = threading.Lock()
        self._stopped = False
        info = fs.get_info(path)  # FileNotFoundException if missing
        if info.type != FileType.DIR:
            raise InvalidArgumentException(f"{info.path}: not a directory")
        loc = fs.locate(path)
        self.root = loc.guest.rstrip("/") or "/"
        self._mount = loc.mount
        self._folders: dict[int, str] = {}  # watch descriptor -> guest path of the folder
        try:
            self._inotify = lib.INotify()
        except OSError as exc:
            raise RateLimitException(f"no inotify instance left on the host: {exc.strerror}") from None
        try:
            self._add(self.root, loc.parts, walk=recursive)  # (what is there already is not news)
        except BaseException:
            self._inotify.close()
            raise

    # -- watches -------------------------------------------------------------------------------
    def _add(self, guest: str, parts: tuple[str, ...], walk: bool,
             budget: Optional["_Budget"] = None) -> list[tuple[str, bool]]:
        """Watch the folder `parts` below the mount (reached without following any link) and,
        with `walk`, its subfolders; the guest paths of what is already in the new folders, each
        with whether it is a file with content (a folder made and filled before its watch was
        added: reported as created, and its files with content as written, which is what a
        watch that was there in time would have seen). `budget`: what one read may still report
        and walk, spent here (a folder moved in and out again arrives again)."""
        budget = budget or _Budget(MAX_FOUND, MAX_FOLDERS + 1)
        found: list[tuple[str, bool]] = []
        todo = [(guest, parts)]
        while todo and budget.take_folder():
            folder, below = todo.pop()
            if len(self._folders) >= MAX_FOLDERS:
                if folder == self.root:
                    raise RateLimitException(f"watch of {self.root}: more than {MAX_FOLDERS} folders")
                return found
            fd = self._open(below)
            if fd is None:
                continue
            try:
                try:
                    wd = self._inotify.add_watch(f"/proc/self/fd/{fd}", self._mask & ~self._lib.flags.DONT_FOLLOW)
                except OSError as exc:
                    if folder == self.root:
                        raise RateLimitException(f"cannot watch {folder}: {exc.strerror}") from None
                    continue
                self._folders[wd] = folder
                if walk:
                    self._list(fd, folder, below, found, todo, budget)
            finally:
                os.close(fd)
        return found

    @staticmethod
    def _list(fd: int, folder: str, below: tuple[str, ...], found: list[tuple[str, bool]],
              todo: list[tuple[str, tuple[str, ...]]], budget: "_Budget") -> None:
        """One folder's entries into `found` (while the budget lasts), its subfolders into `todo`."""
        for name in sorted(os.listdir(fd)):
            path = posixpath.join(folder, name)
            if len(path.encode("utf-8", "surrogateescape")) > PATH_MAX:
                continue
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            if budget.take_entry():
                found.append((path, stat.S_ISREG(st.st_mode) and st.st_size > 0))
            if stat.S_ISDIR(st.st_mode):
                todo.append((path, below + (name,)))

    def _open(self, parts: tuple[str, ...]) -> Optional[int]:
        try:
            return open_dir(self._mount.host, parts)
        except OSError:  # gone, or a symlink now: not followed
            return None

    def _below(self, guest: str) -> tuple[str, ...]:
        prefix = self._mount.guest.rstrip("/")
        return tuple(p for p in guest[len(prefix):].split("/") if p)

    # -- events ------------------------------------------------------------------------------------
    def events(self) -> List[FilesystemEvent]:
        with self._lock:
            if self._stopped:
                raise SandboxException("The watcher is already stopped")
            raw = list(self._inotify.read(timeout=0))  # at most the kernel's queue (max_queued_events)
            out: List[FilesystemEvent] = []
            # what folders that arrived full may add to this read, all of them together: a guest
            # renaming one full folder in and out of the watch queues an arrival per rename
            budget = _Budget(MAX_FOUND, MAX_FOLDERS)
            walked: set[str] = set()
            for event in raw:
                folder = self._folders.get(event.wd)
                if event.mask & self._lib.flags.IGNORED:
                    self._folders.pop(event.wd, None)
                    continue
                if folder is None or not event.name:
                    continue
                kind = self._kind(event.mask)
                if kind is None:
                    continue
                path = posixpath.join(folder, event.name)
                if len(path.encode("utf-8", "surrogateescape")) > PATH_MAX:
                    continue  # as a listing: no call could name it
                is_dir = bool(event.mask & self._lib.flags.ISDIR)
                out.append(self._event(path, kind))
                if self.recursive and is_dir and event.mask & (self._lib.flags.CREATE | self._lib.flags.MOVED_TO) \
                        and path not in walked:
                    walked.add(path)
                    for inner, written in self._add(path, self._below(path), walk=True, budget=budget):
                        out.append(self._event(inner, FilesystemEventType.CREATE))
                        if written:
                            out.append(self._event(inner, FilesystemEventType.WRITE))
            return out

    def _kind(self, mask: int) -> Optional[FilesystemEventType]:
        f = self._lib.flags
        if mask & f.CREATE:
            return FilesystemEventType.CREATE
        if mask & (f.MODIFY | f.CLOSE_WRITE):
            return FilesystemEventType.WRITE
        if mask & f.DELETE:
            return FilesystemEventType.REMOVE
        if mask & (f.MOVED_FROM | f.MOVED_TO):
            return FilesystemEventType.RENAME
        if mask & f.ATTRIB:
            return FilesystemEventType.CHMOD
        return None

    def _event(self, path: str, kind: FilesystemEventType) -> FilesystemEvent:
        entry = None
        if self.include_entry and kind != FilesystemEventType.REMOVE:
            try:
                entry = self.fs.get_info(path)
            except SandboxException:
                entry = None
        name = posixpath.relpath(path, self.root)
        return FilesystemEvent(name=name, type=kind, path=path, entry=entry, timestamp=time.time())

    # -- end -----------------------------------------------------------------------------------------
    @property
    def stopped(self) -> bool:
        return self._stopped

    def stop(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            self._inotify.close()
        if self._on_stop is not None:
            self._on_stop(self)


class _Budget:
    """Entries a read may still report and folders it may still walk."""

    def __init__(self, entries: int, folders: int) -> None:
        self.entries, self.folders = entries, folders

    def take_entry(self) -> bool:
        self.entries -= 1
        return self.entries >= 0

    def take_folder(self) -> bool:
        self.folders -= 1
        return self.folders >= 0


class Watches:
    """A sandbox's open watches, capped."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: list[LocalWatcher] = []

    def start(self, fs: "SandboxFS", path: str, recursive: bool, include_entry: bool) -> LocalWatcher:
        with self._lock:
            if len(self._open) >= MAX_WATCHES:
                raise RateLimitException(f"this sandbox already has {MAX_WATCHES} open watches; stop one")
        watcher = LocalWatcher(fs, path, recursive, include_entry, on_stop=self._forget)
        with self._lock:
            self._open.append(watcher)
        return watcher

    def _forget(self, watcher: LocalWatcher) -> None:
        with self._lock:
            if watcher in self._open:
                self._open.remove(watcher)

    def stop_all(self) -> None:
        with self._lock:
            watchers, self._open = list(self._open), []
        for watcher in watchers:
            watcher.stop()
