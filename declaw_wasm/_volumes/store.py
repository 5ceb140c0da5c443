"""Volumes in the state store: create from archives or folders, read, change with compare-and-set
versions, lock, materialise into a host folder, export as tar.gz.

Layout under the store (see _state/store.py for the primitives):

    volumes/<volume_id>/manifest.json      the volume: declaw's fields, quotas, revision, tree ref
    volumes/<volume_id>/blobs/ab/<sha256>  file contents (one pack per archive, one blob per write)
                                            and the tree (JSON: path -> where its bytes are)
    volumes/<volume_id>/writer/g*.json     the writers' lease: one change at a time, any process
    volumes/<volume_id>/locks/<h>/g*.json  VolumeLocks leases (h: SHA-256 of the locked path)

The manifest is a signed record (_state/records.py: kind "volume", bound to its key): one changed
or moved by someone without the state key is refused wherever it is read (get, files, attach),
and nothing of it is used; the tree and contents are blobs it names by SHA-256.

Every change is read-modify-write of the manifest under the writer lease: load, check (version,
quota), publish the new tree and manifest, then delete the blobs nothing references any more.
Content is uploaded before taking the lease, and checked to still be there once it is held (a
concurrent change may have deleted an identical, de-referenced blob): so uploads never hold
others up, and a published manifest never names a missing blob.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Iterator, Optional, Union

from .._printable import logger
from .._state import (
    default_store,
    BlobRef,
    IntegrityError,
    LeaseHeld,
    LeaseLost,
    RecordNotFound,
    StateStore,
    UntrustedRecord,
    check_id,
    iter_chunks,
    new_id,
)
from ..exceptions import (
    ConflictException,
    FileNotFoundException,
    InvalidArgumentException,
    NotEnoughSpaceException,
    NotFoundException,
)
from .archive import Source, read_folder, read_tar, write_tar_gz
from .tree import Entry, Tree, check_volume_path, shown
from .models import FileEntry, Volume, VolumeLimits

log = logger("declaw_wasm.volumes")

KIND = "volumes"
RECORD = "volume"  # the manifest's record kind (_state/records.py)
WRITER_TTL = 60.0
WRITER_WAIT = 60.0
DEFAULT_LOCK_TTL = 30
MAX_NAME = 255
CHUNK = 1 << 20


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def check_name(name: object) -> str:
    if not isinstance(name, str) or not name or len(name) > MAX_NAME or any(
            ord(c) < 32 or ord(c) == 127 for c in name):
        raise InvalidArgumentException(
            f"volume name must be 1-{MAX_NAME} printable characters, got {str(name)[:300]!r}")
    return name


def prefix_of(volume_id: str) -> str:
    return f"{KIND}/{check_id(volume_id, 'volume id')}"


class _Retry(Exception):
    """A blob uploaded for this change vanished before the lease was held: upload again."""


@dataclass
class VolumeState:
    """A loaded volume: its manifest fields and its tree (a private copy when writing)."""

    volume_id: str
    meta: dict[str, Any]
    tree: Tree
    tree_sha: str
    changed: bool = False

    @property
    def revision(self) -> int:
        return int(self.meta["revision"])

    def bump(self) -> str:
        """Start a change: the version every entry it touches gets."""
        if not self.changed:
            self.meta["revision"] = self.revision + 1
            self.changed = True
        return f"v{self.revision}"

    def volume(self) -> Volume:
        return volume_of(self.volume_id, self.meta, self.tree.total_bytes)

    def check_quota(self) -> None:
        if self.tree.total_bytes > int(self.meta["quota_bytes"]):
            raise NotEnoughSpaceException(
                f"volume {self.volume_id} quota exceeded: {self.tree.total_bytes} bytes, limit "
                f"{self.meta['quota_bytes']} (quota_bytes, DECLAW_WASM_VOLUME_MAX_BYTES)")
        if len(self.tree) > int(self.meta["quota_files"]):
            raise NotEnoughSpaceException(
                f"volume {self.volume_id} quota exceeded: {len(self.tree)} files and folders, limit "
                f"{self.meta['quota_files']} (DECLAW_WASM_VOLUME_MAX_FILES)")


def volume_of(volume_id: str, m: dict[str, Any], size_bytes: int) -> Volume:
    return Volume(volume_id=volume_id, owner_id=str(m.get("owner_id", "local")), name=str(m["name"]),
                  blob_key=prefix_of(volume_id), size_bytes=size_bytes,
                  content_type=str(m.get("content_type", "application/gzip")),
                  created_at=str(m["created_at"]), metadata=dict(m.get("metadata", {})), backend="files",
                  quota_bytes=int(m["quota_bytes"]), updated_at=str(m.get("updated_at", "")))


class _Spool:
    """Content to store: copied to a private temp file while hashed (so what is stored is
    exactly what was hashed, even if the source changes meanwhile), at most `limit` bytes."""

    def __init__(self, data: Union[bytes, IO[bytes], Any], limit: int, what: str) -> None:
        fd, name = tempfile.mkstemp(prefix="declaw-wasm-spool-")
        self.path = Path(name)
        digest = hashlib.sha256()
        size = 0
        try:
            with os.fdopen(fd, "wb") as out:
                for chunk in iter_chunks(data if not isinstance(data, str) else data.encode("utf-8")):
                    size += len(chunk)
                    if size > limit:
                        raise NotEnoughSpaceException(
                            f"{what}: more than the {limit} bytes left in the volume's quota")
                    digest.update(chunk)
                    out.write(chunk)
        except BaseException:
            self.close()
            raise
        self.ref = BlobRef(digest.hexdigest(), size)

    def close(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass


class VolumeStore:
    """The volumes of one state store."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self._trees: "OrderedDict[str, Tree]" = OrderedDict()  # tree sha -> Tree (immutable)
        self._trees_lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()

    # -- loading and publishing ----------------------------------------------------------------
    def load(self, volume_id: str) -> VolumeState:
        prefix = prefix_of(volume_id)
        try:
            meta = self.store.read_record(prefix, kind=RECORD)
        except RecordNotFound:
            raise NotFoundException(f"volume {volume_id} not found") from None
        for key in ("name", "created_at", "quota_bytes", "quota_files", "revision"):
            if key not in meta:
                raise IntegrityError(f"volume {volume_id}: manifest lacks {key!r}")
        ref = self.store.part_ref(prefix, meta, "tree")
        return VolumeState(volume_id, meta, self._tree(prefix, ref), ref.sha256)

    def _tree(self, prefix: str, ref: BlobRef) -> Tree:
        with self._trees_lock:
            tree = self._trees.get(ref.sha256)
            if tree is not None:
                self._trees.move_to_end(ref.sha256)
                return tree
        raw = self.store.get_blob(prefix, ref)
        try:
            tree = Tree.from_json(json.loads(raw))
        except ValueError:
            raise IntegrityError(f"{prefix}: the tree is not JSON") from None
        self._remember(ref.sha256, tree)
        return tree

    def _publish(self, state: VolumeState) -> str:
        prefix = prefix_of(state.volume_id)
        state.meta["updated_at"] = iso(time.time())
        state.meta["size_bytes"] = state.tree.total_bytes  # so that list() need not load trees
        raw = json.dumps(state.tree.to_json(), separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        ref = self.store.put_blob(prefix, raw)
        body = {k: v for k, v in state.meta.items() if k != "parts"}
        self.store.publish(prefix, body, {"tree": ref}, kind=RECORD)
        self._remember(ref.sha256, state.tree)
        state.tree_sha = ref.sha256
        return ref.sha256

    def _remember(self, sha: str, tree: Tree) -> None:
        """Keep a published tree (never changed after: writers change a copy)."""
        with self._trees_lock:
            self._trees[sha] = tree
            self._trees.move_to_end(sha)
            while len(self._trees) > 16:
                self._trees.popitem(last=False)

    def _thread_lock(self, volume_id: str) -> threading.Lock:
        with self._locks_lock:
            return self._locks.setdefault(volume_id, threading.Lock())

    @contextmanager
    def writing(self, volume_id: str) -> Iterator[VolumeState]:
        """Load the volume under its writer lease; publish it at the end if changed."""
        prefix = prefix_of(volume_id)
        with self._thread_lock(volume_id):
            if not self.store.exists(f"{prefix}/manifest.json"):
                raise NotFoundException(f"volume {volume_id} not found")
            try:
                hold = self.store.leases.hold(f"{prefix}/writer", WRITER_TTL, WRITER_WAIT, owner=f"pid {os.getpid()}")
                with hold:
                    state = self.load(volume_id)
                    before = state.tree.blobs() | {state.tree_sha}
                    state.tree = state.tree.copy()
                    yield state
                    if state.changed:
                        state.check_quota()
                        new_sha = self._publish(state)
                        for sha in before - state.tree.blobs() - {new_sha}:
                            self.store.delete_blob(prefix, sha)
            except LeaseHeld as exc:
                raise ConflictException(f"volume {volume_id} is busy (another writer for "
                                        f"{WRITER_WAIT:.0f} s): {exc}") from None

    # -- volumes ---------------------------------------------------------------------------------
    def create(self, name: str, *, archive: Optional[Source] = None, folder: Optional[Path] = None,
               limits: Optional[VolumeLimits] = None, content_type: str = "application/gzip",
               metadata: Optional[dict[str, str]] = None) -> Volume:
        """A new volume from a tar archive, a host folder or file, or nothing."""
        check_name(name)
        limits = limits or VolumeLimits.from_env()
        volume_id = new_id("vol")
        prefix = prefix_of(volume_id)
        version = "v1"
        tree = Tree()
        pack_ref: Optional[BlobRef] = None
        if archive is not None or folder is not None:
            with self.store.blob_writer(prefix) as pack:
                if folder is not None:
                    read_folder(folder, pack, tree=tree, max_bytes=limits.max_bytes,
                                max_files=limits.max_files, version=version)
                else:
                    assert archive is not None
                    read_tar(archive, pack, tree=tree, max_bytes=limits.max_bytes,
                             max_files=limits.max_files, max_upload=limits.max_upload_bytes,
                             version=version)
                if any(e.kind == "f" for _, e in tree.items()):
                    pack_ref = pack.commit()
        if pack_ref is not None:
            for entry in tree.entries():
                if entry.kind == "f" and not entry.blob:
                    entry.blob = pack_ref.sha256
        now = iso(time.time())
        meta = {"kind": "volume", "name": name, "owner_id": "local", "created_at": now,
                "updated_at": now, "content_type": content_type, "metadata": dict(metadata or {}),
                "quota_bytes": limits.max_bytes, "quota_files": limits.max_files, "revision": 1}
        state = VolumeState(volume_id, meta, tree, "")
        try:
            self._publish(state)
        except BaseException:
            self.store.delete_tree(prefix)
            raise
        return state.volume()

    def get(self, volume_id: str) -> Volume:
        return self.load(volume_id).volume()

    def list_volumes(self) -> list[Volume]:
        out = []
        for volume_id in self.store.list_records(KIND):
            try:
                meta = self.store.read_record(prefix_of(volume_id), kind=RECORD)
                out.append(volume_of(volume_id, meta, int(meta.get("size_bytes", 0))))
            except UntrustedRecord as exc:  # not signed with the state key: never listed, said once
                log.warning("volume %s left out: %s", volume_id, exc)
            except (NotFoundException, IntegrityError, KeyError, TypeError, ValueError):
                continue  # deleted meanwhile, or damaged: get() names the problem
        return sorted(out, key=lambda v: (v.created_at, v.volume_id))

    def delete(self, volume_id: str) -> None:
        prefix = prefix_of(volume_id)
        with self.writing(volume_id):
            self.store.delete(f"{prefix}/manifest.json")  # gone for readers at once
        self.store.delete_tree(prefix)

    # -- reading bytes -----------------------------------------------------------------------------
    def read_entry(self, volume_id: str, entry: Entry) -> bytes:
        return self.store.get_blob_range(prefix_of(volume_id), entry.blob, entry.offset, entry.size, entry.sha)

    def iter_files(self, state: VolumeState, prefix: str = "") -> Iterator[tuple[str, Entry, "_Slice"]]:
        """Each file (below folder `prefix`) with a reader of its bytes (verified against its
        SHA-256 as read), in storage order: one sequential read per blob."""
        ns = prefix_of(state.volume_id)
        raw: Optional[IO[bytes]] = None
        current, position = "", 0
        try:
            for path, entry in state.tree.files():
                if prefix and not path.startswith(prefix + "/"):
                    continue
                if entry.blob != current or entry.offset < position:
                    if raw is not None:
                        raw.close()
                    raw = self.store.open_read(self.store.blob_key(ns, entry.blob))
                    current, position = entry.blob, 0
                assert raw is not None
                if entry.offset > position:
                    _skip(raw, entry.offset - position, path)
                piece = _Slice(raw, entry, path)
                yield path, entry, piece
                piece.drain()
                position = entry.offset + entry.size
        finally:
            if raw is not None:
                raw.close()

    def materialise(self, state: VolumeState, dest: Path, prefix: str = "") -> None:
        """Write the volume's files (those below folder `prefix`, relative to it) into `dest`, a
        new empty folder of ours: nothing in it can be a link, and every path was validated
        when the tree was loaded; never more than the volume's quota (a tree over it is refused)."""
        state.check_quota()

        def rel(path: str) -> Optional[str]:
            if not prefix:
                return path
            return path[len(prefix) + 1:] if path.startswith(prefix + "/") else None

        folders = [(r, state.tree.get(p)) for p in state.tree.folders() if (r := rel(p))]
        for folder, _ in folders:
            (dest / folder).mkdir(parents=True, exist_ok=True)
        for path, entry, piece in self.iter_files(state, prefix):
            target = dest / rel(path)  # type: ignore[operator]
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         entry.mode or 0o644)
            with os.fdopen(fd, "wb") as out:
                while True:
                    chunk = piece.read(CHUNK)
                    if not chunk:
                        break
                    out.write(chunk)
            os.utime(target, (entry.mtime, entry.mtime))
        for folder, folder_entry in reversed(folders):
            if folder_entry is not None:
                os.utime(dest / folder, (folder_entry.mtime, folder_entry.mtime))

    def export(self, volume_id: str) -> bytes:
        state = self.load(volume_id)
        state.check_quota()  # the archive is built in memory: never more than the quota's content
        out = io.BytesIO()

        def items() -> Iterator[tuple[str, Entry, Optional[IO[bytes]]]]:
            for folder in state.tree.folders():
                yield folder, state.tree.get(folder), None  # type: ignore[misc]
            for path, entry, piece in self.iter_files(state):
                yield path, entry, piece  # type: ignore[misc]

        write_tar_gz(out, items())
        return out.getvalue()

    # -- VolumeFiles -------------------------------------------------------------------------------
    def entry(self, volume_id: str, path: str) -> tuple[str, Optional[Entry], VolumeState]:
        key = check_volume_path(path)
        state = self.load(volume_id)
        return key, (state.tree.get(key) if key else Entry.folder(0.0, "")), state

    def read(self, volume_id: str, path: str) -> bytes:
        for attempt in range(3):
            key, entry, _ = self.entry(volume_id, path)
            if entry is None:
                raise FileNotFoundException(f"{shown(key)}: no such file in volume {volume_id}")
            if entry.kind == "d":
                raise InvalidArgumentException(f"{shown(key)}: is a directory")
            try:
                return self.read_entry(volume_id, entry)
            except RecordNotFound:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def write(self, volume_id: str, path: str, data: Any, if_version: Optional[str]) -> str:
        key = check_volume_path(path)
        if not key:
            raise InvalidArgumentException("cannot write the volume's root (/)")
        if if_version is not None and not isinstance(if_version, str):
            raise InvalidArgumentException("if_version must be a string (FileEntry.version)")
        state = self.load(volume_id)
        spool = _Spool(data, int(state.meta["quota_bytes"]), shown(key))
        try:
            for _ in range(3):
                self.store.put_blob_file(prefix_of(volume_id), spool.path, spool.ref)
                try:
                    with self.writing(volume_id) as state:
                        self._check_blob(state, spool.ref)
                        self._set_file(state, key, spool.ref, if_version)
                    return shown(key)
                except _Retry:
                    continue
            raise ConflictException(f"{shown(key)}: volume {volume_id} kept changing; try again")
        finally:
            spool.close()

    def _check_blob(self, state: VolumeState, ref: BlobRef) -> None:
        if not self.store.exists(self.store.blob_key(prefix_of(state.volume_id), ref.sha256)):
            raise _Retry()

    def _set_file(self, state: VolumeState, key: str, ref: BlobRef, if_version: Optional[str],
                  mode: int = 0o644, mtime: Optional[float] = None) -> None:
        current = state.tree.get(key)
        if if_version is not None:
            have = current.version if current is not None else ""
            if have != if_version:
                raise ConflictException(
                    f"{shown(key)} changed: its version is {have or '(none: no such file)'!s}, "
                    f"the write expected {if_version or '(none)'}; read it again and retry")
        if current is not None and current.kind == "d":
            raise InvalidArgumentException(f"{shown(key)}: is a directory")
        conflict = state.tree.parent_conflict(key)
        if conflict:
            raise InvalidArgumentException(f"{shown(key)}: {conflict}")
        version = state.bump()
        now = time.time() if mtime is None else mtime
        state.tree.ensure_parents(key, version, now)
        state.tree.put(key, Entry.file(ref.size, ref.sha256, ref.sha256, 0, mode, now, version))

    def mkdir(self, volume_id: str, path: str) -> str:
        key = check_volume_path(path)
        with self.writing(volume_id) as state:
            current = state.tree.get(key) if key else Entry.folder(0.0, "")
            if current is not None:
                if current.kind != "d":
                    raise InvalidArgumentException(f"{shown(key)}: a file is there")
                return shown(key)
            conflict = state.tree.parent_conflict(key)
            if conflict:
                raise InvalidArgumentException(f"{shown(key)}: {conflict}")
            version = state.bump()
            now = time.time()
            state.tree.ensure_parents(key, version, now)
            state.tree.put(key, Entry.folder(now, version))
        return shown(key)

    def remove(self, volume_id: str, path: str, recursive: bool) -> None:
        key = check_volume_path(path)
        if not key:
            raise InvalidArgumentException("cannot remove the volume's root (/); delete the volume")
        with self.writing(volume_id) as state:
            current = state.tree.get(key)
            if current is None:
                raise FileNotFoundException(f"{shown(key)}: no such file or directory in volume {volume_id}")
            below = state.tree.below(key) if current.kind == "d" else []
            if below and not recursive:
                raise InvalidArgumentException(f"{shown(key)}: directory not empty (pass recursive=True)")
            state.bump()
            for p in below:
                state.tree.pop(p)
            state.tree.pop(key)

    def rename(self, volume_id: str, old_path: str, new_path: str) -> dict[str, str]:
        old, new = check_volume_path(old_path), check_volume_path(new_path)
        if not old or not new:
            raise InvalidArgumentException("cannot rename the volume's root (/)")
        if new == old:
            return {"old_path": shown(old), "new_path": shown(new)}
        if new.startswith(old + "/"):
            raise InvalidArgumentException(f"cannot move {shown(old)} into itself ({shown(new)})")
        with self.writing(volume_id) as state:
            source = state.tree.get(old)
            if source is None:
                raise FileNotFoundException(f"{shown(old)}: no such file or directory in volume {volume_id}")
            target = state.tree.get(new)
            if target is not None and (target.kind == "d" or source.kind == "d"):
                raise ConflictException(f"{shown(new)}: already exists")
            conflict = state.tree.parent_conflict(new)
            if conflict:
                raise InvalidArgumentException(f"{shown(new)}: {conflict}")
            version = state.bump()
            moves = [old] + (state.tree.below(old) if source.kind == "d" else [])
            entries = [(p, state.tree.pop(p)) for p in moves]
            state.tree.ensure_parents(new, version, time.time())
            for p, moved in entries:
                assert moved is not None
                state.tree.put(new + p[len(old):], Entry(**{**vars(moved), "version": version}))
        return {"old_path": shown(old), "new_path": shown(new)}

    def file_entry(self, volume_id: str, path: str, with_version: bool) -> FileEntry:
        key, entry, _ = self.entry(volume_id, path)
        if entry is None:
            raise FileNotFoundException(f"{shown(key)}: no such file or directory in volume {volume_id}")
        return _file_entry(key, entry, with_version)

    def list_dir(self, volume_id: str, path: str) -> list[FileEntry]:
        key, entry, state = self.entry(volume_id, path)
        if entry is None:
            raise FileNotFoundException(f"{shown(key)}: no such directory in volume {volume_id}")
        if entry.kind != "d":
            raise InvalidArgumentException(f"{shown(key)}: not a directory")
        return [_file_entry(p, state.tree.get(p), False) for p in state.tree.children(key)]  # type: ignore[arg-type]

    # -- locks ---------------------------------------------------------------------------------------
    def _lock_name(self, volume_id: str, path: str) -> str:
        key = check_volume_path(path)
        if not self.store.exists(f"{prefix_of(volume_id)}/manifest.json"):
            raise NotFoundException(f"volume {volume_id} not found")
        return f"{prefix_of(volume_id)}/locks/{hashlib.sha256(key.encode()).hexdigest()[:40]}"

    def lock_acquire(self, volume_id: str, path: str, ttl: Optional[float]) -> dict[str, Any]:
        name = self._lock_name(volume_id, path)
        ttl = DEFAULT_LOCK_TTL if ttl is None else ttl
        try:
            info = self.store.leases.take(name, _ttl(ttl), owner=check_volume_path(path))
        except LeaseHeld as exc:
            raise ConflictException(f"lock on {shown(check_volume_path(path))} in volume {volume_id} "
                                    f"is held ({exc.expires_in:.1f} s left)") from None
        return {"token": info.token, "ttl_seconds": ttl, "expires_at": iso(info.expires_at)}

    def lock_renew(self, volume_id: str, path: str, token: str, ttl: Optional[float]) -> dict[str, Any]:
        name = self._lock_name(volume_id, path)
        ttl = DEFAULT_LOCK_TTL if ttl is None else ttl
        try:
            info = self.store.leases.renew(name, token, _ttl(ttl))
        except LeaseLost as exc:
            raise ConflictException(f"lock on {shown(check_volume_path(path))}: {exc}") from None
        return {"token": info.token, "ttl_seconds": ttl, "expires_at": iso(info.expires_at)}

    def lock_release(self, volume_id: str, path: str, token: str) -> bool:
        name = self._lock_name(volume_id, path)
        try:
            return self.store.leases.release(name, token)
        except LeaseLost as exc:
            raise ConflictException(f"lock on {shown(check_volume_path(path))}: {exc}") from None

    def lock_status(self, volume_id: str, path: str) -> dict[str, Any]:
        status = self.store.leases.status(self._lock_name(volume_id, path))
        return {"held": status.held, "expires_in_ms": int(status.expires_in * 1000)}


def _ttl(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 86400:
        raise InvalidArgumentException(f"ttl_seconds must be in (0, 86400], got {value!r}")
    return float(value)


def _file_entry(key: str, entry: Entry, with_version: bool) -> FileEntry:
    return FileEntry(name=key.rsplit("/", 1)[-1] if key else "/", path=shown(key),
                     is_dir=entry.kind == "d", size=entry.size, mod_time=iso(entry.mtime),
                     mode=entry.mode, version=entry.version if with_version else "")


def _skip(raw: IO[bytes], n: int, path: str) -> None:
    while n > 0:
        chunk = raw.read(min(n, CHUNK))
        if not chunk:
            raise IntegrityError(f"volume blob truncated before /{path}")
        n -= len(chunk)


class _Slice:
    """`entry.size` bytes of a blob stream, checked against `entry.sha` when the last is read."""

    def __init__(self, raw: IO[bytes], entry: Entry, path: str) -> None:
        self._raw = raw
        self._left = entry.size
        self._entry = entry
        self._path = path
        self._hash = hashlib.sha256()
        if entry.size == 0:
            self._check()

    def read(self, n: int = -1) -> bytes:
        if self._left <= 0:
            return b""
        want = self._left if n is None or n < 0 else min(n, self._left)
        data = self._raw.read(want)
        if not data:
            raise IntegrityError(f"/{self._path}: truncated in the store")
        self._left -= len(data)
        self._hash.update(data)
        if self._left == 0:
            self._check()
        return data

    def drain(self) -> None:
        while self.read(CHUNK):
            pass

    def _check(self) -> None:
        if self._hash.hexdigest() != self._entry.sha:
            raise IntegrityError(f"/{self._path}: content does not match its SHA-256 (damaged or tampered with)")


_stores: dict[str, "VolumeStore"] = {}
_stores_lock = threading.Lock()


def volume_store(store: Optional[StateStore] = None) -> VolumeStore:
    """The volumes of `store` (default: `DECLAW_WASM_STATE`'s store)."""
    store = store or default_store()
    with _stores_lock:
        vs = _stores.get(store.url)
        if vs is None or vs.store is not store:
            vs = _stores[store.url] = VolumeStore(store)
        return vs
