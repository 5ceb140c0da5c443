"""How a sandbox sees a volume: `attach_volumes` turns `Sandbox.create(volumes=[...])` into host
folders and the `Mount`s (WASI preopens) its guests get. One function per mode:

* `copy` (default): a private copy, made at create. Into the sandbox's writable tree when the
  mount path is in it (`/home/user/...`, `/tmp/...`), else into a private folder of the sandbox
  preopened read-write at the mount path. Both are deleted with the sandbox and count toward its
  disk quota. Copied from the process's materialised revision by reflink where the file system
  can (btrfs, XFS), `copy_file_range` otherwise; never hard links (`_hostfs.copies` says why).
* `mount-ro`: a read-only preopen (wasmtime's read-only dir and file permissions: the guest can
  open, list and read, never create, write, rename, link or delete) of the volume's current
  revision, materialised once per process and shared by every sandbox that attaches it; or, when
  this process has the volume mounted read-write, of that live folder (so it sees those writes).
* `mount`: a live host folder shared by every sandbox of this process that mounts the volume
  (per `subpath`), writable by their guests. Changes reach the state store when a sandbox that
  mounts it ends (kill, timeout, process exit), when another sandbox attaches it, and on
  `sync_volume()`; each file the guests changed is written whole (last writer wins per file),
  files they deleted are deleted unless the store has a newer version. At the same points the
  folder picks up changes made through the store (VolumeFiles, other processes). Between two
  processes a `mount` is therefore shared at those points, not live.

The hook for the sandbox is `attach_volumes(sandbox_id, volumes, fs)`: it returns the mounts to
add (already added to `fs`) and a `release()` to call once the sandbox's guests are stopped.
"""

from __future__ import annotations

import atexit
import os
import posixpath
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Protocol, Sequence, Union

from .._printable import logger
from .._state import StateStore
from ..exceptions import (
    ConflictException,
    InvalidArgumentException,
    NotEnoughSpaceException,
    NotFoundException,
)
from .._hostfs import beneath, copies, walk
from .._hostfs.exports import shown_path
from .._owners import make_folder
from .._wasm.layout import Mount
from .store import VolumeState, VolumeStore, _Retry, _Spool, volume_store
from .tree import MAX_DEPTH, MAX_PATH, Entry, check_volume_path
from .models import MODES, VolumeAttachment

log = logger("declaw_wasm.volumes")


class SandboxLayout(Protocol):
    """What attaching needs to know of a sandbox's host folders (SandboxFS has all three)."""

    base: Path  # the sandbox's private folder, deleted with it
    root: Path  # the host folder behind the guest's "/" (read-only to the guest)
    mounts: list[Mount]  # what its guests see already


AttachmentArg = Union[VolumeAttachment, dict[str, Any]]


# -- the process's materialised volumes --------------------------------------------------------------
@dataclass
class _Revision:
    """A volume's files at one revision, materialised once, never written after: the source of
    copies and of mount-ro preopens."""

    volume_id: str
    tree_sha: str
    path: Path
    state: VolumeState
    refs: int = 0


@dataclass
class _Live:
    """A live working copy of (volume, subpath), shared by the sandboxes that mount it."""

    volume_id: str
    subpath: str
    path: Path
    vs: VolumeStore
    base: dict[str, Entry] = field(default_factory=dict)  # store entries the folder reflects
    seen: dict[str, walk.Seen] = field(default_factory=dict)  # the folder when last synced
    refs: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def key(self, rel: str) -> str:
        return f"{self.subpath}/{rel}" if self.subpath else rel


class _Cache:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._folder: Optional[Path] = None
        self.revisions: dict[tuple[str, str], _Revision] = {}
        self.latest: dict[str, str] = {}
        self.lives: dict[tuple[str, str], _Live] = {}
        self.attached: dict[str, "VolumeMounts"] = {}
        self._n = 0

    def folder(self) -> Path:
        with self.lock:
            if self._folder is None:
                self._folder = make_folder("volumes")  # named after its owner: reaped if this process dies
                atexit.register(_at_exit)
            return self._folder

    def new_dir(self, kind: str) -> Path:
        with self.lock:
            self._n += 1
            path = self.folder() / f"{kind}-{self._n}"
        path.mkdir(mode=0o755)
        return path

    # -- revisions -------------------------------------------------------------------------------
    def revision(self, vs: VolumeStore, volume_id: str) -> _Revision:
        state = vs.load(volume_id)
        key = (volume_id, state.tree_sha)
        with self.lock:
            self.latest[volume_id] = state.tree_sha
            rev = self.revisions.get(key)
            if rev is None:
                path = self.new_dir("rev")
                try:
                    vs.materialise(state, path)
                except BaseException:
                    _rmtree(path)
                    raise
                rev = self.revisions[key] = _Revision(volume_id, state.tree_sha, path, state)
            rev.refs += 1
            self._prune(volume_id)
            return rev

    def unref_revision(self, rev: _Revision) -> None:
        with self.lock:
            rev.refs -= 1
            self._prune(rev.volume_id)

    def _prune(self, volume_id: str) -> None:
        for key, rev in list(self.revisions.items()):
            if key[0] == volume_id and rev.refs <= 0 and self.latest.get(volume_id) != rev.tree_sha:
                del self.revisions[key]
                _rmtree(rev.path)

    # -- live copies -------------------------------------------------------------------------------
    def live(self, vs: VolumeStore, volume_id: str, subpath: str, create: bool) -> Optional[_Live]:
        with self.lock:
            live = self.lives.get((volume_id, subpath))
            if live is None and not create:
                return None
            if live is None:
                state = vs.load(volume_id)
                if subpath and subpath in state.tree and not state.tree.is_dir(subpath):
                    raise InvalidArgumentException(f"subpath {subpath!r} of volume {volume_id} is a file")
                path = self.new_dir("live")
                live = _Live(volume_id, subpath, path, vs)
                try:
                    vs.materialise(state, path, prefix=subpath)
                    live.base = _subtree(state, subpath)
                    live.seen = walk.scan(path, int(state.meta["quota_files"]))
                except BaseException:
                    _rmtree(path)
                    raise
                self.lives[(volume_id, subpath)] = live
                live.refs += 1
                return live
            live.refs += 1
        try:
            sync(live)
        except Exception as exc:  # noqa: BLE001 -- the others' write-back failing is no reason to refuse this sandbox
            log.error("volume %s: changes in its mount were not written back: %s", volume_id, exc)
            return live  # and no refresh: it would overwrite what could not be stored
        try:
            refresh(live)
        except BaseException:
            self.unref_live(live, write_back=False)
            raise
        return live

    def unref_live(self, live: _Live, write_back: bool) -> None:
        if write_back:
            try:
                sync(live)
            except Exception as exc:  # noqa: BLE001 -- never fail a kill: say what was not written back
                log.error("volume %s: changes in its mount were not written back: %s", live.volume_id, exc)
        with self.lock:
            live.refs -= 1
            if live.refs > 0:
                return
            if self.lives.get((live.volume_id, live.subpath)) is live:
                del self.lives[(live.volume_id, live.subpath)]
        _rmtree(live.path)

    def forget(self, volume_id: str) -> None:
        with self.lock:
            self.latest.pop(volume_id, None)
            self._prune(volume_id)


_cache = _Cache()


def _rmtree(path: Path) -> None:
    """Delete a folder guests may have filled (iterative, never following a link)."""
    try:
        parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        walk.remove_tree(parent, path.name)
    except OSError as exc:
        log.warning("could not delete %s: %s", path, exc)
    finally:
        os.close(parent)


def _subtree(state: VolumeState, subpath: str) -> dict[str, Entry]:
    if not subpath:
        return dict(state.tree.items())
    prefix = subpath + "/"
    return {p[len(prefix):]: e for p, e in state.tree.items() if p.startswith(prefix)}


# -- write-back and refresh of live copies -------------------------------------------------------------
def sync(live: _Live) -> bool:  # noqa: C901 (each way a file can have changed)
    """Write what the guests changed in a live folder back to the store. True if anything was."""
    with live.lock:
        state = live.vs.load(live.volume_id)
        quota_files = int(state.meta["quota_files"])
        try:
            now = walk.scan(live.path, quota_files)
        except OSError as exc:
            raise NotEnoughSpaceException(f"volume {live.volume_id}: its mount holds {exc.strerror}") from None
        removed = [k for k in live.base if k not in now or now[k].kind != live.base[k].kind]
        new_dirs = [k for k, s in now.items() if s.kind == "d" and (k not in live.base or live.base[k].kind != "d")]
        changed = [k for k, s in now.items() if s.kind == "f" and (
            k not in live.seen or live.seen[k].ident != s.ident or k not in live.base)]
        if not (removed or new_dirs or changed):
            live.seen = now
            return False
        spools: list[tuple[str, _Spool, walk.Seen]] = []
        try:
            room = int(state.meta["quota_bytes"])
            for key in changed:
                try:
                    fd = beneath.open_file(live.path, key)
                except OSError:
                    continue  # changed kind or vanished since the scan: the next sync sees it
                with os.fdopen(fd, "rb") as f:
                    spool = _Spool(f, room, f"/{live.key(key)}")
                room -= spool.ref.size  # what is written back together fits in the quota together
                base = live.base.get(key)
                if base is not None and base.kind == "f" and base.sha == spool.ref.sha256:
                    spool.close()  # touched, not changed
                    continue
                spools.append((key, spool, now[key]))
            if not (removed or new_dirs or spools):
                live.seen = now
                return False
            for _ in range(3):
                for _key, spool, _seen in spools:
                    live.vs.store.put_blob_file(f"volumes/{live.volume_id}", spool.path, spool.ref)
                try:
                    with live.vs.writing(live.volume_id) as state:
                        for _key, spool, _seen in spools:
                            live.vs._check_blob(state, spool.ref)
                        _apply(live, state, removed, new_dirs, spools)
                    break
                except _Retry:
                    continue
            else:
                raise ConflictException(f"volume {live.volume_id} kept changing; its mount was not written back")
            for key in removed:
                live.base.pop(key, None)
            for key in new_dirs:
                entry = state.tree.get(live.key(key))
                if entry is not None:
                    live.base[key] = entry
            for key, _spool, _seen in spools:
                entry = state.tree.get(live.key(key))
                if entry is not None:
                    live.base[key] = entry
            live.seen = now
            return True
        finally:
            for _key, spool, _seen in spools:
                spool.close()


def _apply(live: _Live, state: VolumeState, removed: list[str], new_dirs: list[str],
           spools: list[tuple[str, _Spool, walk.Seen]]) -> None:
    version = state.bump()
    for key in sorted(removed, key=lambda k: k.count("/"), reverse=True):
        full = live.key(key)
        current, base = state.tree.get(full), live.base.get(key)
        if current is not None and base is not None and current.version == base.version:
            if current.kind == "d" and state.tree.below(full):
                continue  # the store has something newer below it
            state.tree.pop(full)
    for key in sorted(new_dirs):
        full = live.key(key)
        try:
            check_volume_path(full)  # a guest nests folders past 4096 bytes by renaming them
        except InvalidArgumentException as exc:
            log.warning("volume %s: /%s not written back: %s", live.volume_id, shown_path(full), exc)
            continue
        if state.tree.parent_conflict(full) or (full in state.tree and not state.tree.is_dir(full)):
            log.warning("volume %s: /%s not written back (a file is in the way)", live.volume_id, shown_path(full))
            continue
        state.tree.ensure_parents(full, version, time.time())
        state.tree.put(full, Entry.folder(time.time(), version))
    for key, spool, seen in spools:
        full = live.key(key)
        try:
            check_volume_path(full)
            live.vs._set_file(state, full, spool.ref, None, mode=seen.mode, mtime=seen.mtime)
        except InvalidArgumentException as exc:
            log.warning("volume %s: /%s not written back: %s", live.volume_id, shown_path(full), exc)


def refresh(live: _Live) -> None:
    """Bring changes made through the store into a live folder (after `sync`)."""
    with live.lock:
        state = live.vs.load(live.volume_id)
        latest = _subtree(state, live.subpath)
        for key in sorted(latest):
            entry, base = latest[key], live.base.get(key)
            if base is not None and base.version == entry.version and base.kind == entry.kind:
                continue
            if base is not None and base.kind != entry.kind:
                beneath.remove(live.path, key)
            try:
                if entry.kind == "d":
                    os.close(beneath.open_dir(live.path, key.split("/"), create=True))
                else:
                    data = live.vs.read_entry(live.volume_id, entry)
                    beneath.write_file(live.path, key, iter((data,)), entry.mode, entry.mtime)
            except (OSError, beneath.UnsafePath) as exc:
                log.warning("volume %s: /%s not refreshed in the mount: %s", live.volume_id, shown_path(key), exc)
                continue
            live.base[key] = entry
        for key in sorted((k for k in live.base if k not in latest), key=lambda k: k.count("/"), reverse=True):
            beneath.remove(live.path, key)
            live.base.pop(key, None)
        live.seen = walk.scan(live.path, int(state.meta["quota_files"]))


# -- attaching ------------------------------------------------------------------------------------------
@dataclass
class VolumeMounts:
    """What `attach_volumes` made for one sandbox."""

    sandbox_id: str
    mounts: list[Mount]
    paths: dict[str, str]  # volume id -> guest path (the first attachment of each)
    _holds: list[tuple[str, Any]] = field(default_factory=list)
    _released: bool = False

    def release(self) -> None:
        """The sandbox has ended (its guests stopped): write back `mount` volumes, drop holds.
        Idempotent; never raises (failures are logged)."""
        with _cache.lock:
            if self._released:
                return
            self._released = True
            holds, self._holds = self._holds, []
            _cache.attached.pop(self.sandbox_id, None)
        _drop(holds)


def _drop(holds: list[tuple[str, Any]]) -> None:
    for kind, obj in holds:
        try:
            if kind == "revision":
                _cache.unref_revision(obj)
            else:
                _cache.unref_live(obj, write_back=kind == "live-rw")
        except Exception as exc:  # noqa: BLE001 -- a release runs in kill(): log, never raise
            log.error("volume %s: release failed: %s", getattr(obj, "volume_id", "?"), exc)


def _attachment(value: AttachmentArg) -> VolumeAttachment:
    if isinstance(value, VolumeAttachment):
        return value
    if isinstance(value, dict):
        unknown = set(value) - {"volume_id", "mount_path", "mode", "subpath"}
        if unknown:
            raise InvalidArgumentException(f"volume attachment: unknown key(s) {sorted(unknown)}")
        try:
            return VolumeAttachment(**value)
        except ValueError as exc:
            raise InvalidArgumentException(f"volume attachment: {exc}") from None
    raise InvalidArgumentException(f"volumes must be VolumeAttachment objects or dicts, got {type(value).__name__}")


def _guest_path(value: object) -> str:
    if not isinstance(value, str) or not value.startswith("/") or "\x00" in value:
        raise InvalidArgumentException(f"mount_path must be an absolute guest path, got {str(value)[:200]!r}")
    if ".." in value.split("/"):
        raise InvalidArgumentException(f"mount_path must not contain '..': {value[:200]!r}")
    try:
        encoded = value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgumentException(f"mount_path is not valid UTF-8: {value[:200]!r}") from None
    clean = posixpath.normpath(value)
    if clean == "/" or len(encoded) > MAX_PATH or clean.count("/") > MAX_DEPTH:
        raise InvalidArgumentException(f"mount_path {value[:200]!r}: not a folder below /")
    return clean


def _container(mounts: Sequence[Mount], guest: str) -> Mount:
    """The mount a guest path falls in (longest prefix, as wasi-libc picks a preopen)."""
    best: Optional[Mount] = None
    for mount in mounts:
        prefix = mount.guest.rstrip("/")
        inside = mount.guest == "/" or guest == prefix or guest.startswith(prefix + "/")
        if inside and (best is None or len(mount.guest) > len(best.guest)):
            best = mount
    assert best is not None, "no mount for /"
    return best


def _below(mount: Mount, guest: str) -> list[str]:
    return [p for p in guest[len(mount.guest.rstrip("/")):].split("/") if p]


def _check_paths(atts: list[tuple[VolumeAttachment, str]], mounts: Sequence[Mount]) -> None:
    seen: list[str] = []
    for att, path in atts:
        for other in seen:
            if path == other or path.startswith(other + "/") or other.startswith(path + "/"):
                raise InvalidArgumentException(f"volume mount paths {other} and {path} overlap")
        seen.append(path)
        container = _container(mounts, path)
        if container.guest != "/" and not container.writable:
            raise InvalidArgumentException(
                f"mount_path {path} is inside the read-only runtime folder {container.guest}")
        if container.guest == path and att.effective_mode != "copy":
            raise InvalidArgumentException(f"mount_path {path} would hide the sandbox's own {path}; mount below it")


def attach_volumes(sandbox_id: str, volumes: Iterable[AttachmentArg], fs: Any,
                   store: Optional[StateStore] = None, restoring: bool = False) -> VolumeMounts:
    """Prepare `volumes` for a new sandbox whose files are `fs` (a SandboxFS) and add the mounts
    to it. Call `release()` on the result when the sandbox ends. `restoring`: the sandbox is
    remade from a snapshot, whose files are the copies' content (copies are not made again)."""
    result = prepare_volumes(sandbox_id, volumes, fs, store, restoring)
    if result.mounts:
        fs.add_mounts(result.mounts)
    return result


def prepare_volumes(sandbox_id: str, volumes: Iterable[AttachmentArg], layout: SandboxLayout,
                    store: Optional[StateStore] = None, restoring: bool = False) -> VolumeMounts:
    """Materialise what each attachment needs and return the mounts to give the sandbox's
    guests (mount points are laid down in `layout`). Nothing is held if it raises."""
    atts = [(a, _guest_path(a.mount_path)) for a in map(_attachment, volumes)]
    existing = list(layout.mounts)
    _check_paths(atts, existing)
    vs = volume_store(store)
    result = VolumeMounts(sandbox_id, [], {})
    holds: list[tuple[str, Any]] = []
    try:
        for index, (att, path) in enumerate(atts):
            mode = att.effective_mode
            if mode not in MODES:
                raise InvalidArgumentException(f"volume mode must be one of {MODES}, got {att.mode!r}")
            subpath = check_volume_path(att.subpath or "")
            if subpath and mode == "copy":
                raise InvalidArgumentException("subpath is for live mounts (mode='mount' or 'mount-ro'), not copies")
            container = _container(existing, path)
            if mode == "copy" and restoring:
                mount = _copy_folder(path, container, layout, index)
            elif mode == "copy":
                mount = _attach_copy(vs, att.volume_id, path, container, layout, index)
            elif mode == "mount-ro":
                mount = _attach_ro(vs, att.volume_id, subpath, path, holds)
            else:
                mount = _attach_rw(vs, att.volume_id, subpath, path, holds)
            if mount is not None:
                _mount_point(container, path)
                result.mounts.append(mount)
            result.paths.setdefault(att.volume_id, path)
    except BaseException:
        _drop([("live-ro" if k == "live-rw" else k, o) for k, o in holds])  # nothing to write back yet
        raise
    result._holds = holds
    with _cache.lock:
        _cache.attached[sandbox_id] = result
    return result


def _mount_point(container: Mount, path: str) -> None:
    """The folder the guest sees at a mount path when it lists the parent (a mount point)."""
    try:
        os.close(beneath.open_dir(container.host, _below(container, path), create=True))
    except (OSError, beneath.UnsafePath) as exc:
        raise InvalidArgumentException(f"mount_path {path}: cannot make the mount point ({exc})") from None


def _attach_copy(vs: VolumeStore, volume_id: str, path: str, container: Mount, layout: SandboxLayout,
                 index: int) -> Optional[Mount]:
    rev = _cache.revision(vs, volume_id)
    try:
        _check_disk_quota(layout, rev, path)
        if container.writable:  # into the sandbox's own writable tree
            try:
                copies.copy_folder(rev.path, container.host, _below(container, path))
            except beneath.UnsafePath as exc:
                raise InvalidArgumentException(f"mount_path {path}: {exc.strerror}") from None
            return None
        folder = layout.base / "volumes" / str(index)
        folder.mkdir(parents=True, mode=0o755)
        copies.copy_folder(rev.path, folder)
        return Mount(path, folder, writable=True)
    finally:
        _cache.unref_revision(rev)


def _copy_folder(path: str, container: Mount, layout: SandboxLayout, index: int) -> Optional[Mount]:
    """Where a copy goes, left empty (a restored sandbox: the snapshot holds the copy's files)."""
    if container.writable:
        return None
    folder = layout.base / "volumes" / str(index)
    folder.mkdir(parents=True, mode=0o755)
    return Mount(path, folder, writable=True)


def _check_disk_quota(layout: SandboxLayout, rev: _Revision, path: str) -> None:
    """A copy counts toward the sandbox's disk quota (Limits.disk_bytes / disk_files)."""
    limits = getattr(layout, "limits", None)
    writable = getattr(layout, "writable_folders", None)
    if limits is None or writable is None:
        return
    used_bytes, used_files = walk.usage(writable())
    message = limits.over_disk_quota(used_bytes + rev.state.tree.total_bytes, used_files + len(rev.state.tree))
    if message:
        raise NotEnoughSpaceException(f"copying volume {rev.volume_id} to {path}: {message}")


def _attach_ro(vs: VolumeStore, volume_id: str, subpath: str, path: str,
               holds: list[tuple[str, Any]]) -> Mount:
    live = _cache.live(vs, volume_id, subpath, create=False)
    if live is not None:
        holds.append(("live-ro", live))
        return Mount(path, live.path, writable=False)
    rev = _cache.revision(vs, volume_id)
    holds.append(("revision", rev))
    if subpath and not rev.state.tree.is_dir(subpath):
        raise NotFoundException(f"volume {volume_id} has no folder {subpath!r} (subpath)")
    return Mount(path, rev.path / subpath if subpath else rev.path, writable=False)


def _attach_rw(vs: VolumeStore, volume_id: str, subpath: str, path: str,
               holds: list[tuple[str, Any]]) -> Mount:
    live = _cache.live(vs, volume_id, subpath, create=True)
    assert live is not None
    holds.append(("live-rw", live))
    return Mount(path, live.path, writable=True)


# -- for Volumes.commit, Volumes.delete, and the process's end ---------------------------------------
def mount_path_of(sandbox_id: str, volume_id: str) -> str:
    """Where `volume_id` is attached in a live sandbox of this process."""
    with _cache.lock:
        attached = _cache.attached.get(sandbox_id)
        path = attached.paths.get(volume_id) if attached is not None else None
    if path is None:
        raise NotFoundException(f"volume {volume_id} is not attached to sandbox {sandbox_id} in this process")
    return path


def sync_volume(volume_id: str) -> bool:
    """Write the live `mount` folders of `volume_id` in this process back to the store now, and
    bring store changes into them. True if anything was written."""
    with _cache.lock:
        lives = [live for (vid, _), live in _cache.lives.items() if vid == volume_id]
    wrote = False
    for live in lives:
        wrote = sync(live) or wrote
        refresh(live)
    return wrote


def forget_volume(volume_id: str) -> None:
    """A volume was deleted: drop its unused materialised revisions."""
    _cache.forget(volume_id)


_before_exit: list[Callable[[], None]] = []


def before_exit(hook: Callable[[], None]) -> None:
    """Run `hook` at the process's end before live mounts are written back (the local backend
    kills its sandboxes there, so their guests have stopped writing)."""
    if hook not in _before_exit:
        _before_exit.append(hook)


def _at_exit() -> None:
    """Write back live mounts and delete this process's materialised volumes. Registered when
    volumes are first attached (after the local backend's own exit handler, so it runs first):
    the sandboxes are killed first (`before_exit`), then their mounts are written back."""
    for hook in _before_exit:
        try:
            hook()
        except Exception as exc:  # noqa: BLE001 -- exiting: write back what can be
            log.error("killing sandboxes at exit: %s", exc)
    with _cache.lock:
        attached = list(_cache.attached.values())
    for mounts in attached:
        mounts.release()
    with _cache.lock:
        folder, _cache._folder = _cache._folder, None
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
