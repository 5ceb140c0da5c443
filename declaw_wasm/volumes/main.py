"""declaw's `Volumes` API (declaw 1.7.0 `declaw/volumes/main.py`: same names, signatures and
return shapes), kept in the state store of this process (`DECLAW_WASM_STATE`), or a server's
(remote mode, as `Sandbox.create` chooses it: `domain=`, or `DECLAW_DOMAIN` when no
`DECLAW_WASM_BACKEND` is set; _remote/volumes.py over declaw's routes). `request_timeout` is
accepted and ignored. HTTP statuses become the exceptions declaw's client raises for them: 400
`InvalidArgumentException`, 404 `NotFoundException`, 409 `ConflictException`, 413
`NotEnoughSpaceException`.

`snapshot` and `commit` need a live sandbox's files: they read them through a `GuestTreeSource`
(below), by default this process's sandboxes.
"""

from __future__ import annotations

import os
import posixpath
import tarfile
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, BinaryIO, Dict, Iterable, Iterator, List, Optional, Protocol, Union

from .._backend import SandboxBackend
from .._hostfs.exports import Exactly, ExportBudget
from .._hostfs.tarstream import TarWriter
from ..exceptions import InvalidArgumentException, NotFoundException
from ..limits import Limits
from .._volumes.archive import Source
from .._volumes.tree import MAX_DEPTH as MAX_LEVELS  # what a volume keeps: a snapshot lists no deeper
from ..settings import api_key as api_key_setting
from ..settings import remote_for

if TYPE_CHECKING:
    from .._remote.volumes import RemoteVolumes
from .._volumes.store import volume_store
from .._volumes.models import FileEntry, Volume, VolumeLimits

Data = Union[bytes, BinaryIO, Iterable[bytes], str, "os.PathLike[str]"]
# declaw refuses these in snapshot (400): synthetic file systems.
SYNTHETIC = ("/proc", "/sys", "/dev")


class GuestTreeSource(Protocol):
    """The hook `Volumes.snapshot`/`commit` read a sandbox through: a tar stream (plain or
    gzip) of the guest folder `path` of sandbox `sandbox_id`, members relative to it.
    `NotFoundException` if there is no such sandbox or path."""

    def __call__(self, sandbox_id: str, path: str) -> IO[bytes]: ...


_source: Optional[GuestTreeSource] = None


def set_guest_tree_source(source: Optional[GuestTreeSource]) -> None:
    """Install how snapshot/commit read a sandbox (None: this process's sandboxes)."""
    global _source
    _source = source


def _local_tree(sandbox_id: str, path: str) -> IO[bytes]:
    """The default GuestTreeSource: a sandbox of this process, read through its confined files
    API (sandbox.files), so links inside are never followed on the host."""
    from .._local.sandbox import LocalSandboxes
    from ..models import FileType

    fs = LocalSandboxes().connect(sandbox_id).fs
    info = fs.get_info(path)
    budget = ExportBudget(fs.quota_bytes(), f"volume snapshot of {info.path} in sandbox {sandbox_id}",
                          files=fs.quota_files())
    out = tempfile.SpooledTemporaryFile(max_size=32 << 20)  # noqa: SIM115 -- returned; bounded by `budget`
    with _closed_on_error(out), TarWriter(out, budget) as tar:
        if info.type == FileType.FILE:
            entries = [info]
            top = posixpath.dirname(info.path)
        else:
            entries = fs.list(info.path, depth=MAX_LEVELS)
            top = info.path
        for entry in entries:
            name = posixpath.relpath(entry.path, top)
            member = tarfile.TarInfo(name)
            member.mtime = int(entry.modified_time.timestamp())
            member.mode = entry.mode
            if entry.type == FileType.DIR and entry.symlink_target is None:
                member.type = tarfile.DIRTYPE
                tar.add(member, name=entry.path)
            elif entry.type == FileType.FILE and entry.symlink_target is None:
                with fs.open_read(entry.path) as f:
                    member.size = os.fstat(f.fileno()).st_size
                    budget.take(member.size, entry.path)
                    tar.add(member, Exactly(f, member.size), name=entry.path)  # type: ignore[arg-type]
    out.seek(0)
    return out


@contextmanager
def _closed_on_error(spool: IO[bytes]) -> Iterator[None]:
    """A refused export frees what it spooled at once (not when the traceback is collected)."""
    try:
        yield
    except BaseException:
        spool.close()
        raise


def _guest_tree(sandbox_id: str, path: str) -> IO[bytes]:
    return (_source or _local_tree)(sandbox_id, path)


def backend_tree(backend: SandboxBackend, path: str) -> IO[bytes]:
    """A sandbox's folder (or file) `path` as a tar stream, through any backend's files API (a
    server's sandboxes may live in a process pool or on Ray): regular files and folders, links
    not followed; a file gone meanwhile is left out. Each file is spooled before it is added,
    so the size in its header is what was read. At most the sandbox's disk quota + 1 MiB, file
    content and tar headers together, counted as it arrives (NotEnoughSpaceException past it);
    folders at most 256 levels deep (what a volume keeps), as the listing bounds them."""
    from ..models import FileType

    info = backend.get_info(path)
    budget = ExportBudget(backend.metrics().disk_total or Limits().disk_bytes,
                          f"volume snapshot of {info.path} in sandbox {backend.sandbox_id}")
    out = tempfile.SpooledTemporaryFile(max_size=32 << 20)  # noqa: SIM115 -- returned; bounded by `budget`
    with _closed_on_error(out), TarWriter(out, budget) as tar:
        if info.type == FileType.FILE:
            entries, top = [info], posixpath.dirname(info.path)
        else:
            entries, top = backend.list(info.path, MAX_LEVELS), info.path
        for entry in entries:
            if entry.symlink_target is not None:
                continue
            member = tarfile.TarInfo(posixpath.relpath(entry.path, top))
            member.mtime = int(entry.modified_time.timestamp())
            member.mode = entry.mode
            if entry.type == FileType.DIR:
                member.type = tarfile.DIRTYPE
                tar.add(member, name=entry.path)
            elif entry.type == FileType.FILE:
                with tempfile.SpooledTemporaryFile(max_size=8 << 20) as body:
                    try:
                        chunks = backend.read(entry.path)
                    except NotFoundException:
                        continue
                    try:
                        for chunk in chunks:
                            budget.take(len(chunk), entry.path, body.tell() + len(chunk))
                            body.write(chunk)
                    finally:
                        chunks.close()
                    member.size = body.tell()
                    body.seek(0)
                    tar.add(member, body, name=entry.path)
    out.seek(0)
    return out


def snapshot_path(path: object) -> str:
    """A path `snapshot` may read: absolute, not in a synthetic file system."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise InvalidArgumentException(f"snapshot path must be an absolute guest path, got {path!r}")
    clean = posixpath.normpath(path)
    if any(clean == p or clean.startswith(p + "/") for p in SYNTHETIC):
        raise InvalidArgumentException(f"{clean}: cannot snapshot a synthetic file system")
    return clean


def _source_of(data: Data) -> tuple[Optional[Source], Optional[Path]]:
    """(archive, folder): declaw's rule, a str or path-like is a host path, packed."""
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        if not path.exists():
            raise FileNotFoundError(f"volume source path does not exist: {path}")
        return None, path
    if isinstance(data, (bytes, bytearray, memoryview)) or hasattr(data, "read") or isinstance(data, Iterable):
        return data, None
    raise InvalidArgumentException(f"volume data must be bytes, a binary file, an iterable of bytes "
                                   f"or a path, got {type(data).__name__}")


def _remote(domain: Optional[str], api_key: Optional[str]) -> Optional["RemoteVolumes"]:
    """The server's volumes when this call goes remote, else None."""
    where = remote_for(domain)
    if not where:
        return None
    from .._remote.volumes import RemoteVolumes

    return RemoteVolumes(where, api_key or api_key_setting())


class VolumeFiles:
    """Files of one volume (declaw's files sub-API). Paths are inside the volume ("/" its root).
    Works on every volume here (declaw: file-granular volumes only, 409 on tarball ones)."""

    def __init__(self, volume_id: str, *, api_key: Optional[str] = None, domain: Optional[str] = None,
                 request_timeout: Optional[float] = None) -> None:
        self.volume_id = volume_id
        self._remote = _remote(domain, api_key)

    def _store(self) -> Any:
        return self._remote if self._remote is not None else volume_store()

    def write(self, path: str, data: Union[bytes, BinaryIO, Iterable[bytes]], *,
              if_version: Optional[str] = None) -> str:
        """Write `data` at `path` (parents made); the path written. With `if_version` (from
        `info(path).version`; "" for "must not exist yet"), `ConflictException` if it changed."""
        return self._store().write(self.volume_id, path, data, if_version)

    def read(self, path: str) -> bytes:
        return self._store().read(self.volume_id, path)

    def list(self, path: str = "/") -> List[FileEntry]:
        return self._store().list_dir(self.volume_id, path)

    def info(self, path: str) -> FileEntry:
        return self._store().file_entry(self.volume_id, path, with_version=True)

    def exists(self, path: str) -> bool:
        try:
            self._store().file_entry(self.volume_id, path, with_version=False)
            return True
        except NotFoundException:
            return False

    def remove(self, path: str, *, recursive: bool = False) -> None:
        self._store().remove(self.volume_id, path, recursive)

    def rename(self, old_path: str, new_path: str) -> Dict[str, str]:
        return self._store().rename(self.volume_id, old_path, new_path)

    def mkdir(self, path: str) -> str:
        return self._store().mkdir(self.volume_id, path)


class VolumeLocks:
    """Advisory locks over (volume, path) with a TTL and tokens (declaw's locks sub-API). Held
    in the state store, so they hold across processes where its leases are safe
    (docs/state-store.md)."""

    def __init__(self, volume_id: str, *, api_key: Optional[str] = None, domain: Optional[str] = None,
                 request_timeout: Optional[float] = None) -> None:
        self.volume_id = volume_id
        self._remote = _remote(domain, api_key)

    def _store(self) -> Any:
        return self._remote if self._remote is not None else volume_store()

    def acquire(self, path: str, *, ttl_seconds: Optional[int] = None) -> Dict[str, Any]:
        """`{"token", "ttl_seconds", "expires_at"}`; `ConflictException` if held (default TTL 30 s)."""
        return self._store().lock_acquire(self.volume_id, path, ttl_seconds)

    def release(self, path: str, token: str) -> bool:
        """True if released while valid, False if it had expired; `ConflictException` if the
        token does not hold it."""
        return self._store().lock_release(self.volume_id, path, token)

    def renew(self, path: str, token: str, *, ttl_seconds: Optional[int] = None) -> Dict[str, Any]:
        """A new expiry `ttl_seconds` from now; `ConflictException` if not the holder or expired."""
        return self._store().lock_renew(self.volume_id, path, token, ttl_seconds)

    def status(self, path: str) -> Dict[str, Any]:
        """`{"held": bool, "expires_in_ms": int}`."""
        return self._store().lock_status(self.volume_id, path)


class Volumes:
    """declaw's `Volumes`: volumes in this process's state store, or a server's (remote mode)."""

    @staticmethod
    def create(name: str, data: Optional[Data] = None, *, content_type: str = "application/gzip",
               api_key: Optional[str] = None, domain: Optional[str] = None,
               request_timeout: Optional[float] = None) -> Volume:
        """A volume named `name`, with `data`: tar.gz bytes, a binary file, an iterable of bytes
        chunks, or a host path (a file or folder, packed); empty without data."""
        remote = _remote(domain, api_key)
        if remote is not None:
            return remote.create(name, data, content_type)
        if data is None or (isinstance(data, (bytes, bytearray)) and len(data) == 0):
            return volume_store().create(name, content_type=content_type)
        archive, folder = _source_of(data)
        return volume_store().create(name, archive=archive, folder=folder, content_type=content_type)

    @staticmethod
    def empty(name: str, *, api_key: Optional[str] = None, domain: Optional[str] = None,
              request_timeout: Optional[float] = None) -> Volume:
        remote = _remote(domain, api_key)
        return remote.empty(name) if remote is not None else volume_store().create(name)

    @staticmethod
    def ingest(name: str, data: Data, *, api_key: Optional[str] = None, domain: Optional[str] = None,
               request_timeout: Optional[float] = None) -> Volume:
        """A volume from tar.gz data (the same rules as `create`)."""
        remote = _remote(domain, api_key)
        if remote is not None:
            return remote.create(name, data, route="/volumes/ingest")
        archive, folder = _source_of(data)
        return volume_store().create(name, archive=archive, folder=folder)

    @staticmethod
    def snapshot(sandbox_id: str, path: str, name: Optional[str] = None, *, api_key: Optional[str] = None,
                 domain: Optional[str] = None, request_timeout: Optional[float] = None) -> Volume:
        """A new volume from the folder (or file) `path` of a live sandbox (default name
        "snapshot"); `InvalidArgumentException` for /proc, /sys, /dev or a relative path."""
        clean = snapshot_path(path)
        remote = _remote(domain, api_key)
        if remote is not None:
            return remote.snapshot(sandbox_id, clean, name)
        with _guest_tree(sandbox_id, clean) as stream:
            return volume_store().create(name or "snapshot", archive=stream)

    @staticmethod
    def commit(sandbox_id: str, volume_id: str, name: Optional[str] = None, *, api_key: Optional[str] = None,
               domain: Optional[str] = None, request_timeout: Optional[float] = None) -> Volume:
        """A new volume from where `volume_id` is attached in the sandbox (its current files;
        the source volume is left unchanged). Default name "<source name>-commit"."""
        from .._volumes.attach import mount_path_of

        remote = _remote(domain, api_key)
        if remote is not None:
            return remote.commit(sandbox_id, volume_id, name)
        source = volume_store().get(volume_id)
        mount_path = mount_path_of(sandbox_id, volume_id)
        with _guest_tree(sandbox_id, mount_path) as stream:
            return volume_store().create(name or f"{source.name}-commit", archive=stream)

    @staticmethod
    def get(volume_id: str, *, api_key: Optional[str] = None, domain: Optional[str] = None,
            request_timeout: Optional[float] = None) -> Volume:
        remote = _remote(domain, api_key)
        return remote.get(volume_id) if remote is not None else volume_store().get(volume_id)

    @staticmethod
    def list(*, api_key: Optional[str] = None, domain: Optional[str] = None,
             request_timeout: Optional[float] = None) -> List[Volume]:
        remote = _remote(domain, api_key)
        return remote.list_volumes() if remote is not None else volume_store().list_volumes()

    @staticmethod
    def download(volume_id: str, *, api_key: Optional[str] = None, domain: Optional[str] = None,
                 request_timeout: Optional[float] = None) -> bytes:
        """The volume's contents as tar.gz bytes (folders and regular files)."""
        remote = _remote(domain, api_key)
        return remote.export(volume_id) if remote is not None else volume_store().export(volume_id)

    @staticmethod
    def delete(volume_id: str, *, api_key: Optional[str] = None, domain: Optional[str] = None,
               request_timeout: Optional[float] = None) -> None:
        remote = _remote(domain, api_key)
        if remote is not None:
            remote.delete(volume_id)
            return
        volume_store().delete(volume_id)
        from .._volumes.attach import forget_volume

        forget_volume(volume_id)

    @staticmethod
    def files(volume_id: str, *, api_key: Optional[str] = None, domain: Optional[str] = None,
              request_timeout: Optional[float] = None) -> VolumeFiles:
        return VolumeFiles(volume_id, api_key=api_key, domain=domain)

    @staticmethod
    def locks(volume_id: str, *, api_key: Optional[str] = None, domain: Optional[str] = None,
              request_timeout: Optional[float] = None) -> VolumeLocks:
        return VolumeLocks(volume_id, api_key=api_key, domain=domain)


__all__ = ["FileEntry", "GuestTreeSource", "Volume", "VolumeFiles", "VolumeLimits", "VolumeLocks",
           "Volumes", "set_guest_tree_source", "volume_store"]
