"""Files at declaw's paths: read (raw, streamed; gzip when the client accepts it), write (raw
`PUT /files/raw`, or text `POST /files`), batch, list, exists, info, rename (`PATCH`), remove,
mkdir and watch; a watch's events are ours to read (`{PREFIX}/.../watchers/{id}`)."""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any, AsyncIterator, Optional, Union

import anyio
from fastapi import APIRouter, Query, Request
from fastapi.responses import Response, StreamingResponse

from ... import _args
from ..._backend import SandboxBackend
from ..._threads import in_thread
from ...exceptions import InvalidArgumentException, SandboxException
from ...models import EntryInfo, FilesystemEvent, WriteInfo
from ...wire import PREFIX, Created, ErrorBody, Exists, MakeDir, Rename, Watch, Watching, WriteBatch, WriteText
from ..registry import Registry
from ..streams import BodyReader, GunzipReader
from .common import ERRORS, finder

BYTES: dict[Union[int, str], dict[str, Any]] = {
    200: {"content": {"application/octet-stream": {}}, "description": "the bytes"}}
UPLOAD = {"requestBody": {"required": True, "content": {
    "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}}


def _gzip_wanted(request: Request) -> bool:
    for part in request.headers.get("accept-encoding", "").split(","):
        name, _, q = part.strip().partition(";")
        if name.strip().lower() == "gzip" and q.strip() not in ("q=0", "q=0.0"):
            return True
    return False


def _metadata_param(text: Optional[str]) -> Optional[dict[str, str]]:
    if text is None:
        return None
    try:
        return _args.metadata(json.loads(text))
    except ValueError:
        raise InvalidArgumentException("metadata must be a JSON object of strings") from None


async def read(backend: SandboxBackend, path: str, request: Request) -> StreamingResponse:
    """A file's bytes as a streamed response, gzip-encoded if the client accepts gzip."""
    chunks = await in_thread(backend.read, _args.path(path))
    gzip = _gzip_wanted(request)

    async def stream() -> AsyncIterator[bytes]:
        packer = zlib.compressobj(1, zlib.DEFLATED, 31) if gzip else None
        try:
            while True:
                chunk = await in_thread(next, chunks, None)
                if chunk is None:
                    break
                out = packer.compress(chunk) if packer is not None else chunk
                if out:
                    yield out
            if packer is not None:
                yield packer.flush()
        finally:
            chunks.close()

    headers = {"Content-Encoding": "gzip", "Vary": "Accept-Encoding"} if gzip else {"Vary": "Accept-Encoding"}
    return StreamingResponse(stream(), media_type="application/octet-stream", headers=headers)


async def upload_to(backend: SandboxBackend, path: str, request: Request,
                    metadata: Optional[dict[str, str]]) -> WriteInfo:
    body = BodyReader(request.stream())
    data: Any = GunzipReader(body) if request.headers.get("content-encoding", "").lower() == "gzip" else body
    try:
        return await in_thread(backend.write, path, data, metadata)
    except BaseException:
        if body.started:  # a half-written file is worse than none
            with anyio.CancelScope(shield=True):
                await in_thread(_remove_quietly, backend, path)
        raise


def router(registry: Registry) -> APIRouter:
    sandbox = finder(registry)
    files = APIRouter(tags=["files"])

    @files.get("/sandboxes/{sandbox_id}/files", responses={**ERRORS, **BYTES})
    async def read_file(sandbox_id: str, request: Request, path: str = Query(...)) -> StreamingResponse:
        """The file's bytes, streamed in 1 MiB chunks (gzip-encoded if the client accepts gzip)."""
        return await read(await sandbox(sandbox_id), path, request)

    @files.get("/sandboxes/{sandbox_id}/files/raw", responses={**ERRORS, **BYTES})
    async def download(sandbox_id: str, request: Request, path: str = Query(...)) -> StreamingResponse:
        """declaw's `download_url`: as `GET .../files`."""
        return await read(await sandbox(sandbox_id), path, request)

    @files.put("/sandboxes/{sandbox_id}/files/raw", responses={**ERRORS, 413: {"model": ErrorBody}},
               openapi_extra=UPLOAD)
    async def upload(sandbox_id: str, request: Request, path: str = Query(...),
                     metadata: Optional[str] = Query(None, description="a JSON object")) -> WriteInfo:
        """Write (create or overwrite) a file from the raw body (`Content-Encoding: gzip`
        accepted), streamed to disk as it arrives; parents are created. Over the upload limit or
        the disk quota: 413, and nothing is left behind."""
        backend = await sandbox(sandbox_id)
        return await upload_to(backend, _args.path(path), request, _metadata_param(metadata))

    @files.post("/sandboxes/{sandbox_id}/files", responses=ERRORS)
    async def write_text(sandbox_id: str, body: WriteText) -> WriteInfo:
        """declaw's text write (`{path, data}`; `encoding: "base64"` for bytes)."""
        data: Any = body.data if body.encoding == "utf-8" else _b64(body.data)
        return await in_thread((await sandbox(sandbox_id)).write, _args.path(body.path), data,
                               _args.metadata(body.metadata))

    @files.post("/sandboxes/{sandbox_id}/files/batch", responses=ERRORS)
    async def write_batch(sandbox_id: str, body: WriteBatch) -> list[WriteInfo]:
        backend = await sandbox(sandbox_id)
        meta = _args.metadata(body.metadata)
        entries = [(_args.path(e.path), e.data) for e in body.files]
        return await in_thread(backend.write_files, entries, meta)

    @files.get("/sandboxes/{sandbox_id}/files/list", responses=ERRORS)
    async def list_files(sandbox_id: str, path: str = Query(...), depth: int = 1) -> list[EntryInfo]:
        return await in_thread((await sandbox(sandbox_id)).list, _args.path(path), depth)

    @files.get("/sandboxes/{sandbox_id}/files/info", responses=ERRORS)
    async def file_info(sandbox_id: str, path: str = Query(...)) -> EntryInfo:
        return await in_thread((await sandbox(sandbox_id)).get_info, _args.path(path))

    @files.get("/sandboxes/{sandbox_id}/files/exists", responses=ERRORS)
    async def file_exists(sandbox_id: str, path: str = Query(...)) -> Exists:
        return Exists(exists=await in_thread((await sandbox(sandbox_id)).exists, _args.path(path)))

    @files.delete("/sandboxes/{sandbox_id}/files", status_code=204, responses=ERRORS)
    async def remove_file(sandbox_id: str, path: str = Query(...)) -> Response:
        """Remove a file or folder (a missing path is not an error)."""
        await in_thread((await sandbox(sandbox_id)).remove, _args.path(path))
        return Response(status_code=204)

    @files.patch("/sandboxes/{sandbox_id}/files", responses=ERRORS)
    async def rename_file(sandbox_id: str, body: Rename) -> EntryInfo:
        return await in_thread((await sandbox(sandbox_id)).rename, _args.path(body.old_path),
                               _args.path(body.new_path))

    @files.post("/sandboxes/{sandbox_id}/files/mkdir", responses=ERRORS)
    async def make_dir(sandbox_id: str, body: MakeDir) -> Created:
        return Created(created=await in_thread((await sandbox(sandbox_id)).make_dir, _args.path(body.path)))

    @files.post("/sandboxes/{sandbox_id}/files/watch", responses=ERRORS)
    async def watch(sandbox_id: str, body: Watch) -> Watching:
        """Start watching a folder; read its events from `GET {PREFIX}/sandboxes/{id}/watchers/
        {watcher_id}`. A watch nobody reads for two minutes is stopped."""
        backend = await sandbox(sandbox_id)
        watcher = await in_thread(backend.watch, _args.path(body.path), body.recursive, body.include_entry)
        return Watching(watcher_id=registry.add_watch(sandbox_id, watcher))

    @files.get(PREFIX + "/sandboxes/{sandbox_id}/watchers/{watcher_id}", responses=ERRORS)
    async def watch_events(sandbox_id: str, watcher_id: str) -> list[FilesystemEvent]:
        """The watch's events since the last read."""
        return await in_thread(registry.watch(sandbox_id, watcher_id).events)

    @files.delete(PREFIX + "/sandboxes/{sandbox_id}/watchers/{watcher_id}", status_code=204, responses=ERRORS)
    async def stop_watch(sandbox_id: str, watcher_id: str) -> Response:
        await in_thread(registry.stop_watch, sandbox_id, watcher_id)
        return Response(status_code=204)

    return files


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise InvalidArgumentException("data is not valid base64") from None


def _remove_quietly(backend: SandboxBackend, path: str) -> None:
    try:
        backend.remove(path)
    except SandboxException:
        pass
