"""`AsyncVolumes`: the async twin of `Volumes` (declaw's `declaw/volumes_async/main.py`), the
same calls run in worker threads (anyio) so the caller's event loop never blocks on the store,
as `AsyncSandbox` does."""

from __future__ import annotations

import functools
from typing import (
    Any,
    BinaryIO,
    Callable,
    Dict,
    Iterable,
    List,
    Optional,
    TypeVar,
    Union,
)

import anyio.to_thread

from .main import Data, VolumeFiles, VolumeLocks, Volumes
from .._volumes.models import FileEntry, Volume

T = TypeVar("T")


async def _in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


class AsyncVolumeFiles:
    """Async files sub-API of one volume (`AsyncVolumes.files(volume_id)`)."""

    def __init__(self, volume_id: str, *, api_key: Optional[str] = None, domain: Optional[str] = None,
                 request_timeout: Optional[float] = None) -> None:
        self.volume_id = volume_id
        self._sync = VolumeFiles(volume_id, api_key=api_key, domain=domain)

    async def write(self, path: str, data: Union[bytes, BinaryIO, Iterable[bytes]], *,
                    if_version: Optional[str] = None) -> str:
        return await _in_thread(self._sync.write, path, data, if_version=if_version)

    async def read(self, path: str) -> bytes:
        return await _in_thread(self._sync.read, path)

    async def list(self, path: str = "/") -> List[FileEntry]:
        return await _in_thread(self._sync.list, path)

    async def info(self, path: str) -> FileEntry:
        return await _in_thread(self._sync.info, path)

    async def exists(self, path: str) -> bool:
        return await _in_thread(self._sync.exists, path)

    async def remove(self, path: str, *, recursive: bool = False) -> None:
        await _in_thread(self._sync.remove, path, recursive=recursive)

    async def rename(self, old_path: str, new_path: str) -> Dict[str, str]:
        return await _in_thread(self._sync.rename, old_path, new_path)

    async def mkdir(self, path: str) -> str:
        return await _in_thread(self._sync.mkdir, path)


class AsyncVolumeLocks:
    """Async advisory locks of one volume (`AsyncVolumes.locks(volume_id)`)."""

    def __init__(self, volume_id: str, *, api_key: Optional[str] = None, domain: Optional[str] = None,
                 request_timeout: Optional[float] = None) -> None:
        self.volume_id = volume_id
        self._sync = VolumeLocks(volume_id, api_key=api_key, domain=domain)

    async def acquire(self, path: str, *, ttl_seconds: Optional[int] = None) -> Dict[str, Any]:
        return await _in_thread(self._sync.acquire, path, ttl_seconds=ttl_seconds)

    async def release(self, path: str, token: str) -> bool:
        return await _in_thread(self._sync.release, path, token)

    async def renew(self, path: str, token: str, *, ttl_seconds: Optional[int] = None) -> Dict[str, Any]:
        return await _in_thread(self._sync.renew, path, token, ttl_seconds=ttl_seconds)

    async def status(self, path: str) -> Dict[str, Any]:
        return await _in_thread(self._sync.status, path)


class AsyncVolumes:
    """declaw's `AsyncVolumes`: `Volumes`, awaitable."""

    @staticmethod
    async def create(name: str, data: Optional[Data] = None, *, content_type: str = "application/gzip",
                     api_key: Optional[str] = None, domain: Optional[str] = None,
                     request_timeout: Optional[float] = None) -> Volume:
        return await _in_thread(Volumes.create, name, data, content_type=content_type, api_key=api_key, domain=domain)

    @staticmethod
    async def empty(name: str, *, api_key: Optional[str] = None, domain: Optional[str] = None,
                    request_timeout: Optional[float] = None) -> Volume:
        return await _in_thread(Volumes.empty, name, api_key=api_key, domain=domain)

    @staticmethod
    async def ingest(name: str, data: Data, *, api_key: Optional[str] = None, domain: Optional[str] = None,
                     request_timeout: Optional[float] = None) -> Volume:
        return await _in_thread(Volumes.ingest, name, data, api_key=api_key, domain=domain)

    @staticmethod
    async def snapshot(sandbox_id: str, path: str, name: Optional[str] = None, *,
                       api_key: Optional[str] = None, domain: Optional[str] = None,
                       request_timeout: Optional[float] = None) -> Volume:
        return await _in_thread(Volumes.snapshot, sandbox_id, path, name, api_key=api_key, domain=domain)

    @staticmethod
    async def commit(sandbox_id: str, volume_id: str, name: Optional[str] = None, *,
                     api_key: Optional[str] = None, domain: Optional[str] = None,
                     request_timeout: Optional[float] = None) -> Volume:
        return await _in_thread(Volumes.commit, sandbox_id, volume_id, name, api_key=api_key, domain=domain)

    @staticmethod
    async def get(volume_id: str, *, api_key: Optional[str] = None, domain: Optional[str] = None,
                  request_timeout: Optional[float] = None) -> Volume:
        return await _in_thread(Volumes.get, volume_id, api_key=api_key, domain=domain)

    @staticmethod
    async def list(*, api_key: Optional[str] = None, domain: Optional[str] = None,
                   request_timeout: Optional[float] = None) -> List[Volume]:
        return await _in_thread(Volumes.list, api_key=api_key, domain=domain)

    @staticmethod
    async def download(volume_id: str, *, api_key: Optional[str] = None, domain: Optional[str] = None,
                       request_timeout: Optional[float] = None) -> bytes:
        return await _in_thread(Volumes.download, volume_id, api_key=api_key, domain=domain)

    @staticmethod
    async def delete(volume_id: str, *, api_key: Optional[str] = None, domain: Optional[str] = None,
                     request_timeout: Optional[float] = None) -> None:
        await _in_thread(Volumes.delete, volume_id, api_key=api_key, domain=domain)

    @staticmethod
    def files(volume_id: str, *, api_key: Optional[str] = None, domain: Optional[str] = None,
              request_timeout: Optional[float] = None) -> AsyncVolumeFiles:
        return AsyncVolumeFiles(volume_id, api_key=api_key, domain=domain)

    @staticmethod
    def locks(volume_id: str, *, api_key: Optional[str] = None, domain: Optional[str] = None,
              request_timeout: Optional[float] = None) -> AsyncVolumeLocks:
        return AsyncVolumeLocks(volume_id, api_key=api_key, domain=domain)
