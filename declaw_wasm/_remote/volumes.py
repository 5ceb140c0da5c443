"""A declaw-wasm server's volumes, as declaw's `Volumes` client reaches declaw's: its routes
(`/volumes...`, `/sandboxes/{id}/volumes/...`; server/routes/volumes.py), the same models back.
A host path given to `create`/`ingest` is packed here (tar.gz, regular files and folders, links
not followed) and uploaded: the server never reads a path a client names."""

from __future__ import annotations

import os
import tarfile
import tempfile
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Optional, Union

from .._volumes.models import FileEntry, Volume
from ..exceptions import InvalidArgumentException
from .connection import Connection, segment

CHUNK = 1 << 20


def _pack(path: Path) -> IO[bytes]:
    """A file or folder as tar.gz, spooled (declaw packs it in memory)."""
    out = tempfile.SpooledTemporaryFile(max_size=32 << 20)  # noqa: SIM115 -- returned
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        if path.is_file():
            tar.add(path, arcname=path.name, recursive=False)
        else:
            for root, dirs, files in os.walk(path):  # links to folders are not followed
                base = Path(root)
                for name in sorted(dirs) + sorted(files):
                    entry = base / name
                    if entry.is_symlink() or not (entry.is_dir() or entry.is_file()):
                        continue
                    tar.add(entry, arcname=str(entry.relative_to(path)), recursive=False)
    out.seek(0)
    return out


def _body(data: Any) -> Union[bytes, Iterator[bytes]]:
    """What httpx uploads: bytes as they are, a file object or an iterable as chunks."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if hasattr(data, "read"):
        def chunks() -> Iterator[bytes]:
            while True:
                chunk = data.read(CHUNK)
                if not chunk:
                    return
                if isinstance(chunk, str):
                    raise InvalidArgumentException("volume data: the file object must be opened in binary mode")
                yield chunk
        return chunks()
    if isinstance(data, Iterable):
        return (bytes(chunk) for chunk in data)
    raise InvalidArgumentException(f"volume data must be bytes, a binary file, an iterable of bytes "
                                   f"or a path, got {type(data).__name__}")


def _volume(raw: Any) -> Volume:
    return Volume.from_dict(raw)


class RemoteVolumes:
    """The volumes of one server (`Volumes`' calls, one request each)."""

    def __init__(self, domain: str, api_key: Optional[str]) -> None:
        self.conn = Connection.get(domain, api_key)

    @staticmethod
    def _path(volume_id: str, rest: str = "") -> str:
        return f"/volumes/{segment(volume_id)}{rest}"

    def create(self, name: str, data: Any = None, content_type: str = "application/gzip",
               route: str = "/volumes") -> Volume:
        if data is None or (isinstance(data, (bytes, bytearray)) and not data):
            return _volume(self.conn.request("POST", route, params={"name": name}))
        packed: Optional[IO[bytes]] = None
        if isinstance(data, (str, os.PathLike)):
            path = Path(data)
            if not path.exists():
                raise FileNotFoundError(f"volume source path does not exist: {path}")
            data = packed = _pack(path)
        try:
            return _volume(self.conn.request("POST", route, params={"name": name}, content=_body(data),
                                             headers={"Content-Type": content_type}))
        finally:
            if packed is not None:
                packed.close()

    def empty(self, name: str) -> Volume:
        return _volume(self.conn.request("POST", "/volumes/empty", params={"name": name}))

    def snapshot(self, sandbox_id: str, path: str, name: Optional[str]) -> Volume:
        params = {"path": path, **({"name": name} if name else {})}
        return _volume(self.conn.request("POST", f"/sandboxes/{segment(sandbox_id)}/volumes/snapshot", params=params))

    def commit(self, sandbox_id: str, volume_id: str, name: Optional[str]) -> Volume:
        path = f"/sandboxes/{segment(sandbox_id)}/volumes/{segment(volume_id)}/commit"
        return _volume(self.conn.request("POST", path, params={"name": name} if name else None))

    def get(self, volume_id: str) -> Volume:
        return _volume(self.conn.request("GET", self._path(volume_id)))

    def list_volumes(self) -> list[Volume]:
        return [_volume(v) for v in self.conn.request("GET", "/volumes").get("volumes", [])]

    def export(self, volume_id: str) -> bytes:
        return self.conn.raw("GET", self._path(volume_id, "/download"))

    def delete(self, volume_id: str) -> None:
        self.conn.request("DELETE", self._path(volume_id))

    # -- files (the names of the local VolumeStore's methods) ----------------------------------------
    def write(self, volume_id: str, path: str, data: Any, if_version: Optional[str]) -> str:
        params = {"path": path, **({"if_version": if_version} if if_version is not None else {})}
        found = self.conn.request("PUT", self._path(volume_id, "/files/raw"), params=params, content=_body(data),
                                  headers={"Content-Type": "application/octet-stream"})
        return str(found.get("path", path))

    def read(self, volume_id: str, path: str) -> bytes:
        return self.conn.raw("GET", self._path(volume_id, "/files/raw"), params={"path": path})

    def list_dir(self, volume_id: str, path: str) -> list[FileEntry]:
        found = self.conn.request("GET", self._path(volume_id, "/files/list"), params={"path": path})
        return [FileEntry.from_dict(e) for e in found.get("entries", [])]

    def file_entry(self, volume_id: str, path: str, with_version: bool) -> FileEntry:
        """`NotFoundException` (404) when there is nothing at `path`, as the local store."""
        found = self.conn.request("GET", self._path(volume_id, "/files/info"), params={"path": path})
        return FileEntry.from_dict(found)

    def remove(self, volume_id: str, path: str, recursive: bool) -> None:
        self.conn.request("DELETE", self._path(volume_id, "/files"),
                          params={"path": path, "recursive": "true" if recursive else "false"})

    def rename(self, volume_id: str, old_path: str, new_path: str) -> dict[str, str]:
        found = self.conn.request("PATCH", self._path(volume_id, "/files"),
                                  json={"old_path": old_path, "new_path": new_path})
        return {str(k): str(v) for k, v in found.items()}

    def mkdir(self, volume_id: str, path: str) -> str:
        found = self.conn.request("POST", self._path(volume_id, "/files/mkdir"), json={"path": path})
        return str(found.get("path", path))

    # -- locks -------------------------------------------------------------------------------------
    def lock_acquire(self, volume_id: str, path: str, ttl: Optional[float]) -> dict[str, Any]:
        body = {"path": path, **({"ttl_seconds": ttl} if ttl is not None else {})}
        return dict(self.conn.request("POST", self._path(volume_id, "/locks"), json=body))

    def lock_renew(self, volume_id: str, path: str, token: str, ttl: Optional[float]) -> dict[str, Any]:
        body = {"path": path, "token": token, **({"ttl_seconds": ttl} if ttl is not None else {})}
        return dict(self.conn.request("POST", self._path(volume_id, "/locks/renew"), json=body))

    def lock_release(self, volume_id: str, path: str, token: str) -> bool:
        found = self.conn.request("DELETE", self._path(volume_id, "/locks"), json={"path": path, "token": token})
        return bool(found.get("released"))

    def lock_status(self, volume_id: str, path: str) -> dict[str, Any]:
        return dict(self.conn.request("GET", self._path(volume_id, "/locks"), params={"path": path}))
