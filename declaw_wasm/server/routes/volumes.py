"""Volumes at declaw's paths, as declaw's `Volumes` client calls them: create (from the uploaded
tar.gz bytes of the request body — never a host path: a client cannot make the server read its
own files), empty, ingest, get, list, download, delete; a sandbox's folder into a new volume
(`snapshot`) or its attached volume (`commit`); a volume's files with compare-and-set versions
(`/volumes/{id}/files...`) and its advisory locks (`/volumes/{id}/locks...`).

Over this server's state store (`DECLAW_WASM_STATE`; the sandboxes' volumes attach from the same
store, in a pool's workers too). Every id is validated (`_state/ids.py`) before it names a store
path; paths inside a volume are checked by the store (`_volumes/tree.py`); archives are hostile
input (docs/volumes.md). Uploads are streamed into the store as they arrive, bounded by the
server's upload limit and the volume quotas.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Optional, Union

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel

from ..._state import check_id
from ..._webguard import media_type
from ..._threads import in_thread
from ..._volumes.models import FileEntry, Volume
from ..._volumes.store import volume_store
from ...exceptions import NotFoundException
from ...volumes.main import backend_tree, snapshot_path
from ...wire import (ErrorBody, Exists, LockAcquire, LockHeld, LockStatus, LockToken, MakeDir, Released, Rename,
                     Renamed, VolumePath)
from ..registry import Registry
from ..streams import BodyReader
from .common import ERRORS, finder

GZIP: dict[Union[int, str], dict[str, Any]] = {
    200: {"content": {"application/gzip": {}}, "description": "the volume as tar.gz"}}
BYTES: dict[Union[int, str], dict[str, Any]] = {
    200: {"content": {"application/octet-stream": {}}, "description": "the file's bytes"}}
ARCHIVE = {"requestBody": {"required": False, "content": {
    "application/gzip": {"schema": {"type": "string", "format": "binary"}}}}}
UPLOAD = {"requestBody": {"required": True, "content": {
    "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}}
WITH_413 = {**ERRORS, 409: {"model": ErrorBody}, 413: {"model": ErrorBody}}


class VolumeList(BaseModel):
    volumes: list[Volume]


class FileEntries(BaseModel):
    entries: list[FileEntry]


async def _body(request: Request) -> Optional[BodyReader]:
    """The request body as a blocking reader for the store, or None when it is empty."""
    stream = request.stream()
    first = b""
    async for chunk in stream:
        if chunk:
            first = chunk
            break
    if not first:
        return None

    async def rest() -> AsyncIterator[bytes]:
        yield first
        async for chunk in stream:
            yield chunk

    return BodyReader(rest())


def _vid(volume_id: str) -> str:
    return check_id(volume_id, "volume id")


def router(registry: Registry) -> APIRouter:
    volumes = APIRouter(tags=["volumes"])
    _volumes(volumes)
    _from_sandboxes(volumes, registry)
    _files(volumes)
    _locks(volumes)
    return volumes


def _volumes(volumes: APIRouter) -> None:
    async def create(name: str, request: Request, content_type: str) -> Volume:
        body: Any = await _body(request)  # a file-like object (read)
        if body is None:
            return await in_thread(volume_store().create, name, content_type=content_type)
        return await in_thread(lambda: volume_store().create(name, archive=body, content_type=content_type))

    @volumes.post("/volumes", status_code=201, responses=WITH_413, openapi_extra=ARCHIVE)
    async def create_volume(request: Request, name: str = Query(...)) -> Volume:
        """A volume from the body (tar.gz, tar, tar.bz2 or tar.xz bytes; regular files and
        folders kept, links, devices and `..` dropped), or empty without a body."""
        kind = request.headers.get("content-type") or "application/gzip"
        if media_type(kind) == "application/json":  # no archive: a client's marker on an empty body
            kind = "application/gzip"
        return await create(name, request, kind)

    @volumes.post("/volumes/empty", status_code=201, responses=ERRORS)
    async def empty_volume(name: str = Query(...)) -> Volume:
        return await in_thread(volume_store().create, name)

    @volumes.post("/volumes/ingest", status_code=201, responses=WITH_413, openapi_extra=ARCHIVE)
    async def ingest_volume(request: Request, name: str = Query(...)) -> Volume:
        return await create(name, request, "application/gzip")

    @volumes.get("/volumes", responses=ERRORS)
    async def list_volumes() -> VolumeList:
        return VolumeList(volumes=await in_thread(volume_store().list_volumes))

    @volumes.get("/volumes/{volume_id}", responses=ERRORS)
    async def get_volume(volume_id: str) -> Volume:
        return await in_thread(volume_store().get, _vid(volume_id))

    @volumes.get("/volumes/{volume_id}/download", responses={**ERRORS, **GZIP})
    async def download_volume(volume_id: str) -> Response:
        data = await in_thread(volume_store().export, _vid(volume_id))
        return Response(data, media_type="application/gzip")

    @volumes.delete("/volumes/{volume_id}", status_code=204, responses=ERRORS)
    async def delete_volume(volume_id: str) -> Response:
        from ..._volumes.attach import forget_volume

        vid = _vid(volume_id)
        await in_thread(volume_store().delete, vid)
        forget_volume(vid)
        return Response(status_code=204)


def _from_sandboxes(volumes: APIRouter, registry: Registry) -> None:
    sandbox = finder(registry)

    @volumes.post("/sandboxes/{sandbox_id}/volumes/snapshot", status_code=201, responses=WITH_413)
    async def snapshot(sandbox_id: str, path: str = Query(...), name: Optional[str] = None) -> Volume:
        """A new volume from a folder (or file) of the sandbox (default name "snapshot")."""
        clean = snapshot_path(path)
        backend = await sandbox(sandbox_id)

        def work() -> Volume:
            with backend_tree(backend, clean) as stream:
                return volume_store().create(name or "snapshot", archive=stream)
        return await in_thread(work)

    @volumes.post("/sandboxes/{sandbox_id}/volumes/{volume_id}/commit", status_code=201, responses=WITH_413)
    async def commit(sandbox_id: str, volume_id: str, name: Optional[str] = None) -> Volume:
        """A new volume from where `volume_id` is attached in the sandbox (its files now; the
        source is unchanged). Default name "<source>-commit"."""
        vid = _vid(volume_id)
        backend = await sandbox(sandbox_id)
        source = await in_thread(volume_store().get, vid)
        mount = registry.mount_path(sandbox_id, vid)
        if mount is None:
            raise NotFoundException(f"volume {vid} is not attached to sandbox {sandbox_id[:100]}")

        def work() -> Volume:
            with backend_tree(backend, mount) as stream:
                return volume_store().create(name or f"{source.name}-commit", archive=stream)
        return await in_thread(work)


def _files(volumes: APIRouter) -> None:
    @volumes.put("/volumes/{volume_id}/files/raw", responses=WITH_413, openapi_extra=UPLOAD)
    async def write_file(volume_id: str, request: Request, path: str = Query(...),
                         if_version: Optional[str] = None) -> VolumePath:
        """Write the body at `path` (parents made); with `if_version` ("" : must not exist),
        409 if the file changed since."""
        vid = _vid(volume_id)
        body = await _body(request)
        data: Any = body if body is not None else b""
        written = await in_thread(volume_store().write, vid, path, data, if_version)
        return VolumePath(path=written)

    @volumes.get("/volumes/{volume_id}/files/raw", responses={**ERRORS, **BYTES})
    async def read_file(volume_id: str, path: str = Query(...)) -> Response:
        data = await in_thread(volume_store().read, _vid(volume_id), path)
        return Response(data, media_type="application/octet-stream")

    @volumes.get("/volumes/{volume_id}/files/list", responses=ERRORS)
    async def list_files(volume_id: str, path: str = "/") -> FileEntries:
        return FileEntries(entries=await in_thread(volume_store().list_dir, _vid(volume_id), path))

    @volumes.get("/volumes/{volume_id}/files/info", responses=ERRORS)
    async def file_info(volume_id: str, path: str = Query(...)) -> FileEntry:
        """`version` is the compare-and-set token for `PUT .../files/raw?if_version=`."""
        return await in_thread(volume_store().file_entry, _vid(volume_id), path, True)

    @volumes.get("/volumes/{volume_id}/files/exists", responses=ERRORS)
    async def file_exists(volume_id: str, path: str = Query(...)) -> Exists:
        vid = _vid(volume_id)
        try:
            await in_thread(volume_store().file_entry, vid, path, False)
        except NotFoundException:
            return Exists(exists=False)
        return Exists(exists=True)

    @volumes.delete("/volumes/{volume_id}/files", status_code=204, responses=ERRORS)
    async def remove_file(volume_id: str, path: str = Query(...), recursive: bool = False) -> Response:
        await in_thread(volume_store().remove, _vid(volume_id), path, recursive)
        return Response(status_code=204)

    @volumes.patch("/volumes/{volume_id}/files", responses=WITH_413)
    async def rename_file(volume_id: str, body: Rename) -> Renamed:
        return Renamed(**await in_thread(volume_store().rename, _vid(volume_id), body.old_path, body.new_path))

    @volumes.post("/volumes/{volume_id}/files/mkdir", responses=WITH_413)
    async def make_dir(volume_id: str, body: MakeDir) -> VolumePath:
        return VolumePath(path=await in_thread(volume_store().mkdir, _vid(volume_id), body.path))


def _locks(volumes: APIRouter) -> None:
    @volumes.post("/volumes/{volume_id}/locks", responses=WITH_413)
    async def acquire(volume_id: str, body: LockAcquire) -> LockHeld:
        """An advisory lease on (volume, path); 409 while another holds it."""
        return LockHeld(**await in_thread(volume_store().lock_acquire, _vid(volume_id), body.path,
                                          body.ttl_seconds))

    @volumes.post("/volumes/{volume_id}/locks/renew", responses=WITH_413)
    async def renew(volume_id: str, body: LockToken) -> LockHeld:
        return LockHeld(**await in_thread(volume_store().lock_renew, _vid(volume_id), body.path, body.token,
                                          body.ttl_seconds))

    @volumes.delete("/volumes/{volume_id}/locks", responses=WITH_413)
    async def release(volume_id: str, body: LockToken) -> Released:
        """declaw sends the path and token as a JSON body on DELETE."""
        return Released(released=await in_thread(volume_store().lock_release, _vid(volume_id), body.path,
                                                  body.token))

    @volumes.get("/volumes/{volume_id}/locks", responses=ERRORS)
    async def status(volume_id: str, path: str = Query(...)) -> LockStatus:
        return LockStatus(**await in_thread(volume_store().lock_status, _vid(volume_id), path))
