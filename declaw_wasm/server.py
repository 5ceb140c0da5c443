"""`declaw-wasm serve`: the sandboxes of this process over HTTP, for the remote SDKs.

Why FastAPI on uvicorn: the request and response bodies are the pydantic models the SDK already
returns (models.py, execution.py, wire.py), and FastAPI turns those into validation and an
OpenAPI document (`/openapi.json`) without a second schema; Starlette under it gives streamed
request and response bodies and WebSockets; uvicorn is the ASGI server both are made for. The
remote Python SDK (remote.py) uses httpx, which is also what Starlette's test client uses.

Every piece of guest or file work runs in a worker thread (`_in_thread`, anyio, with its own
large limiter), never on the event loop: a slow guest holds one thread, not the server. Streams
(command output, cells, file reads) wait for new data in bounded slices, so a client that goes
away is noticed within a second; a foreground command whose client disconnects is killed.

Security: an API key (`DECLAW_API_KEY`) is required on every request when set (`X-API-Key` or
`Authorization: Bearer`, compared with `hmac.compare_digest`), and `serve` refuses a non-loopback
host without one; sandbox ids come from `secrets`; bodies are size-limited (413 with a JSON
error); errors are JSON with the SDK exception's class name so the client raises the same.
"""

from __future__ import annotations

import base64
import functools
import hmac
import ipaddress
import json
import os
import queue
import socket
import threading
import time
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime, timezone
from typing import Any, AsyncIterator, Callable, Iterator, Optional, TypeVar, Union, cast

import anyio
import anyio.abc
import anyio.from_thread
import anyio.to_thread
from fastapi import FastAPI, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import __version__
from .commands import _result
from .exceptions import (AuthenticationException, InvalidArgumentException, NotFoundException,
                         SandboxException, SandboxNotFoundException)
from .execution import Context, ExecutionError, OutputMessage, Result
from .files import FileStream
from .limits import Limits
from .models import EntryInfo, ProcessInfo, PtySize, SandboxInfo, WriteInfo
from .process import Event, Process
from .sandbox import Sandbox, SandboxCore, new_core
from .wire import (API_KEY_HEADER, Connect, Created, CreateContext, CreatePty, CreateSandbox,
                   ErrorBody, Exists, Killed, MakeDir, Pid, Rename, Resize, RunCode, RunCommand,
                   SetTimeout, Stdin, error_body, status_of)

T = TypeVar("T")
DEFAULT_MAX_BODY = 16 << 20  # JSON bodies: code, stdin, arguments
DEFAULT_MAX_UPLOAD = 1 << 30  # one file upload (the default per-sandbox disk quota)
POLL = 1.0  # seconds a stream's worker waits for news before checking on its client
GRACE = 5  # seconds open streams get at shutdown before they are cut and the sandboxes killed
NDJSON = "application/x-ndjson"
_workers = anyio.CapacityLimiter(10_000)  # waiting threads are cheap; never queue behind 40


async def _in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs), limiter=_workers)


def _line(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, separators=(",", ":"), default=str) + "\n").encode()


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class BodyTooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body larger than the server's limit of {limit} bytes")


class Guard:
    """ASGI middleware: the API key on every request (HTTP and WebSocket) and body-size limits
    (a declared Content-Length over the limit is refused before the app sees the request; a
    body without one is counted as it arrives)."""

    def __init__(self, app: ASGIApp, api_key: Optional[str], max_body: int, max_upload: int) -> None:
        self.app = app
        self.key = api_key.encode() if api_key else None
        self.max_body = max_body
        self.max_upload = max_upload

    def _authorized(self, scope: Scope) -> bool:
        if self.key is None:
            return True
        headers = dict(scope.get("headers") or [])
        given = headers.get(API_KEY_HEADER.lower().encode())
        if given is None:
            auth = headers.get(b"authorization", b"")
            if auth[:7].lower() == b"bearer ":
                given = auth[7:].strip()
        return given is not None and hmac.compare_digest(given, self.key)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if not self._authorized(scope):
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 4401, "reason": "bad or missing API key"})
                return
            await _send_error(send, AuthenticationException(
                f"bad or missing API key (send it as {API_KEY_HEADER} or Authorization: Bearer)"), 401)
            return
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return
        upload = scope["method"] == "PUT" and scope["path"].endswith("/files")
        limit = self.max_upload if upload else self.max_body
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            await _send_error(send, InvalidArgumentException(BodyTooLarge(limit).detail), 413)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge(limit)
            return message

        await self.app(scope, counted, send)


async def _send_error(send: Send, exc: BaseException, status: int) -> None:
    body = error_body(exc).model_dump_json(exclude_none=True).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _error_response(exc: BaseException, status: Optional[int] = None) -> JSONResponse:
    body = error_body(exc)
    return JSONResponse(body.model_dump(exclude_none=True), status_code=status or status_of(body.error))


class _Registry:
    """The sandboxes this server made. A sandbox that timed out stays listed for a while so that
    calls on it raise `TimeoutException` (as in-process) rather than "not found"."""

    KEEP_ENDED = 1000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cores: dict[str, SandboxCore] = {}

    def add(self, core: SandboxCore) -> None:
        with self._lock:
            self._cores[core.sandbox_id] = core
            ended = [i for i, c in self._cores.items() if not c.running]
            for sandbox_id in ended[: max(0, len(ended) - self.KEEP_ENDED)]:
                del self._cores[sandbox_id]

    def get(self, sandbox_id: str) -> Sandbox:
        with self._lock:
            core = self._cores.get(sandbox_id)
        if core is None:
            core = SandboxCore.lookup(sandbox_id)  # raises SandboxNotFoundException
        return Sandbox(core)

    def infos(self) -> list[SandboxInfo]:
        """The live sandboxes, newest first."""
        with SandboxCore.registry_lock:
            cores = [c for c in SandboxCore.registry.values() if c.running]
        return sorted((c.info() for c in cores), key=lambda i: i.started_at, reverse=True)

    def kill_all(self) -> None:
        """Kill every sandbox this server made (at shutdown: their host folders go too)."""
        with self._lock:
            cores, self._cores = list(self._cores.values()), {}
        for core in cores:
            core.kill()

    def forget(self, sandbox_id: str) -> None:
        with self._lock:
            self._cores.pop(sandbox_id, None)


def _check_limits(limits: Optional[Limits]) -> Optional[Limits]:
    """Clients may tighten a sandbox's limits, never loosen them past the server's defaults."""
    if limits is None:
        return None
    defaults = Limits.model_validate({})
    for name in Limits.model_fields:
        if getattr(limits, name) > getattr(defaults, name):
            raise InvalidArgumentException(f"limits.{name} may not exceed the server's "
                                           f"{getattr(defaults, name)}")
    return limits


def create_app(api_key: Optional[str] = None, max_body: int = DEFAULT_MAX_BODY,
               max_upload: int = DEFAULT_MAX_UPLOAD) -> ASGIApp:
    """The server as an ASGI app (the `Guard` around the FastAPI routes)."""
    registry = _Registry()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await _in_thread(registry.kill_all)

    # no /docs or /redoc: they load their scripts from a CDN and fetch the document without the key
    app = FastAPI(title="declaw-wasm", version=__version__, docs_url=None, redoc_url=None,
                  lifespan=lifespan,
                  description="Sandboxes running CPython on WASI, with E2B's API. Every request "
                              f"needs the API key ({API_KEY_HEADER} or Authorization: Bearer) "
                              "when the server has one.")

    @app.exception_handler(SandboxException)
    async def sandbox_error(request: Request, exc: SandboxException) -> JSONResponse:
        return _error_response(exc)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        cls: type[SandboxException] = (NotFoundException if exc.status_code == 404
                                       else InvalidArgumentException)
        if exc.status_code >= 500:
            cls = SandboxException
        return _error_response(cls(str(exc.detail)), exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}"
                             for e in exc.errors())
        return _error_response(InvalidArgumentException(problems), 400)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        return _error_response(SandboxException(f"internal error: {type(exc).__name__}: {exc}"), 500)

    errors: dict[Union[int, str], dict[str, Any]] = {
        400: {"model": ErrorBody}, 401: {"model": ErrorBody}, 404: {"model": ErrorBody}}

    async def sandbox(sandbox_id: str) -> Sandbox:
        return await _in_thread(registry.get, sandbox_id)

    # -- sandboxes ---------------------------------------------------------------------------------
    @app.get("/health", tags=["server"])
    async def health() -> dict[str, str]:
        return {"status": "ok", "version": __version__}

    # The server makes and finds sandboxes through the core, never `Sandbox.create/connect/list`:
    # those would follow DECLAW_DOMAIN (remote mode) if the server's environment had it set.
    @app.post("/sandboxes", tags=["sandboxes"], status_code=201, responses=errors)
    async def create_sandbox(body: CreateSandbox) -> SandboxInfo:
        core = await _in_thread(new_core, body.template, body.timeout, body.metadata, body.envs,
                                _check_limits(body.limits), {})
        registry.add(core)
        return core.info()

    @app.get("/sandboxes", tags=["sandboxes"])
    async def list_sandboxes() -> list[SandboxInfo]:
        return registry.infos()

    @app.get("/sandboxes/{sandbox_id}", tags=["sandboxes"], responses=errors)
    async def get_sandbox(sandbox_id: str) -> SandboxInfo:
        sbx = await sandbox(sandbox_id)
        return await _in_thread(sbx.get_info)

    @app.post("/sandboxes/{sandbox_id}/connect", tags=["sandboxes"], responses=errors)
    async def connect_sandbox(sandbox_id: str, body: Connect) -> SandboxInfo:
        """Only extends the lifetime (a shorter `timeout` is ignored), as E2B's `connect`."""
        core = (await sandbox(sandbox_id))._core
        core.ensure_running()
        if body.timeout is not None:
            left = (core.end_at - datetime.now(timezone.utc)).total_seconds()
            if body.timeout > left:
                await _in_thread(core.set_timeout, body.timeout)
        return core.info()

    @app.post("/sandboxes/{sandbox_id}/timeout", tags=["sandboxes"], status_code=204, responses=errors)
    async def set_timeout(sandbox_id: str, body: SetTimeout) -> Response:
        sbx = await sandbox(sandbox_id)
        await _in_thread(sbx.set_timeout, body.timeout)
        return Response(status_code=204)

    @app.delete("/sandboxes/{sandbox_id}", tags=["sandboxes"])
    async def kill_sandbox(sandbox_id: str) -> Killed:
        try:
            sbx = await sandbox(sandbox_id)
        except SandboxNotFoundException:
            return Killed(killed=False)
        killed = await _in_thread(sbx.kill)
        registry.forget(sandbox_id)
        return Killed(killed=killed)

    # -- files -------------------------------------------------------------------------------------
    @app.get("/sandboxes/{sandbox_id}/files", tags=["files"], responses={
        **errors, 200: {"content": {"application/octet-stream": {}}, "description": "the bytes"}})
    async def read_file(sandbox_id: str, path: str = Query(...)) -> StreamingResponse:
        """The file's bytes, streamed in 1 MiB chunks."""
        sbx = await sandbox(sandbox_id)
        stream = cast(FileStream, await _in_thread(sbx.files.read, path, "stream"))

        async def chunks() -> AsyncIterator[bytes]:
            try:
                while True:
                    chunk = await _in_thread(next, stream, None)
                    if chunk is None:
                        return
                    yield chunk
            finally:
                stream.close()

        return StreamingResponse(chunks(), media_type="application/octet-stream")

    @app.put("/sandboxes/{sandbox_id}/files", tags=["files"], responses={**errors, 413: {"model": ErrorBody}},
             openapi_extra={"requestBody": {"required": True, "content": {
                 "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}})
    async def write_file(sandbox_id: str, request: Request, path: str = Query(...)) -> WriteInfo:
        """Write (create or overwrite) a file from the raw body, streamed to disk as it arrives;
        parents are created. Over the upload limit: 413, and nothing is left behind."""
        sbx = await sandbox(sandbox_id)
        body = _BodyReader(request.stream())
        try:
            return await _in_thread(sbx.files.write, path, body)
        except BaseException:
            if body.started:  # a half-written file is worse than none
                with anyio.CancelScope(shield=True):
                    await _in_thread(_remove_quietly, sbx, path)
            raise

    @app.get("/sandboxes/{sandbox_id}/files/list", tags=["files"], responses=errors)
    async def list_files(sandbox_id: str, path: str = Query(...), depth: int = 1) -> list[EntryInfo]:
        sbx = await sandbox(sandbox_id)
        return await _in_thread(sbx.files.list, path, depth)

    @app.get("/sandboxes/{sandbox_id}/files/info", tags=["files"], responses=errors)
    async def file_info(sandbox_id: str, path: str = Query(...)) -> EntryInfo:
        sbx = await sandbox(sandbox_id)
        return await _in_thread(sbx.files.get_info, path)

    @app.get("/sandboxes/{sandbox_id}/files/exists", tags=["files"], responses=errors)
    async def file_exists(sandbox_id: str, path: str = Query(...)) -> Exists:
        sbx = await sandbox(sandbox_id)
        return Exists(exists=await _in_thread(sbx.files.exists, path))

    @app.delete("/sandboxes/{sandbox_id}/files", tags=["files"], status_code=204, responses=errors)
    async def remove_file(sandbox_id: str, path: str = Query(...)) -> Response:
        sbx = await sandbox(sandbox_id)
        await _in_thread(sbx.files.remove, path)
        return Response(status_code=204)

    @app.post("/sandboxes/{sandbox_id}/files/rename", tags=["files"], responses=errors)
    async def rename_file(sandbox_id: str, body: Rename) -> EntryInfo:
        sbx = await sandbox(sandbox_id)
        return await _in_thread(sbx.files.rename, body.old_path, body.new_path)

    @app.post("/sandboxes/{sandbox_id}/files/mkdir", tags=["files"], responses=errors)
    async def make_dir(sandbox_id: str, body: MakeDir) -> Created:
        sbx = await sandbox(sandbox_id)
        return Created(created=await _in_thread(sbx.files.make_dir, body.path))

    # -- commands ----------------------------------------------------------------------------------
    @app.post("/sandboxes/{sandbox_id}/commands", tags=["commands"], responses={
        **errors, 200: {"content": {NDJSON: {}}, "description": "start, output and end lines"}})
    async def run_command(sandbox_id: str, body: RunCommand) -> StreamingResponse:
        """Start a command line and stream its output as NDJSON while it runs: a `start` line
        with the pid, `stdout`/`stderr` lines, then `end` (exit code) or `exception`. Unless
        `background`, a client that disconnects before the end has its command killed."""
        sbx = await sandbox(sandbox_id)
        handle = await _in_thread(sbx.commands.run, body.cmd, background=True, envs=body.envs,
                                  cwd=body.cwd, stdin=body.stdin, timeout=body.timeout, tag=body.tag)
        return StreamingResponse(_process_lines(handle._process, kill_on_disconnect=not body.background),
                                 media_type=NDJSON)

    @app.get("/sandboxes/{sandbox_id}/commands", tags=["commands"], responses=errors)
    async def list_commands(sandbox_id: str) -> list[ProcessInfo]:
        sbx = await sandbox(sandbox_id)
        return await _in_thread(sbx.commands.list)

    @app.get("/sandboxes/{sandbox_id}/commands/{pid}/events", tags=["commands"], responses={
        **errors, 200: {"content": {NDJSON: {}}, "description": "as for POST .../commands"}})
    async def command_events(sandbox_id: str, pid: int) -> StreamingResponse:
        """A running command's output from its start, then what follows (E2B's `connect`)."""
        sbx = await sandbox(sandbox_id)
        handle = await _in_thread(sbx.commands.connect, pid)
        return StreamingResponse(_process_lines(handle._process, kill_on_disconnect=False),
                                 media_type=NDJSON)

    @app.post("/sandboxes/{sandbox_id}/commands/{pid}/stdin", tags=["commands"], status_code=204,
              responses=errors)
    async def send_stdin(sandbox_id: str, pid: int, body: Stdin) -> Response:
        sbx = await sandbox(sandbox_id)
        data = base64.b64decode(body.data) if body.encoding == "base64" else body.data.encode()
        await _in_thread(sbx.commands.send_stdin, pid, data)
        return Response(status_code=204)

    @app.post("/sandboxes/{sandbox_id}/commands/{pid}/close-stdin", tags=["commands"],
              status_code=204, responses=errors)
    async def close_stdin(sandbox_id: str, pid: int) -> Response:
        sbx = await sandbox(sandbox_id)
        await _in_thread(sbx.commands.close_stdin, pid)
        return Response(status_code=204)

    @app.delete("/sandboxes/{sandbox_id}/commands/{pid}", tags=["commands"], responses=errors)
    async def kill_command(sandbox_id: str, pid: int) -> Killed:
        sbx = await sandbox(sandbox_id)
        return Killed(killed=await _in_thread(sbx.commands.kill, pid))

    # -- PTYs ----------------------------------------------------------------------------------------
    @app.post("/sandboxes/{sandbox_id}/pty", tags=["pty"], responses=errors)
    async def create_pty(sandbox_id: str, body: CreatePty) -> Pid:
        """Start an interactive shell on a terminal of this size; attach with the WebSocket
        `/sandboxes/{id}/pty/{pid}`. It runs until it exits, is killed or times out, whether
        or not a socket is attached."""
        sbx = await sandbox(sandbox_id)
        handle = await _in_thread(sbx.pty.create, PtySize(rows=body.rows, cols=body.cols),
                                  cwd=body.cwd, envs=body.envs, timeout=body.timeout)
        return Pid(pid=handle.pid)

    @app.post("/sandboxes/{sandbox_id}/pty/{pid}/resize", tags=["pty"], status_code=204, responses=errors)
    async def resize_pty(sandbox_id: str, pid: int, body: Resize) -> Response:
        sbx = await sandbox(sandbox_id)
        await _in_thread(sbx.pty.resize, pid, PtySize(rows=body.rows, cols=body.cols))
        return Response(status_code=204)

    @app.websocket("/sandboxes/{sandbox_id}/pty/{pid}")
    async def pty_socket(websocket: WebSocket, sandbox_id: str, pid: int) -> None:
        """The PTY's bytes both ways (wire.py describes the frames). Stdin and resizes may
        also come as HTTP calls (`.../commands/{pid}/stdin`, `.../pty/{pid}/resize`)."""
        try:
            sbx = await sandbox(sandbox_id)
            handle = await _in_thread(sbx.pty.connect, pid)
        except SandboxException as exc:
            await websocket.close(code=4404, reason=str(exc)[:120])
            return
        await websocket.accept()
        await _serve_pty(websocket, handle._process)

    # -- the code interpreter ----------------------------------------------------------------------
    @app.post("/sandboxes/{sandbox_id}/execute", tags=["code"], responses={
        **errors, 200: {"content": {NDJSON: {}}, "description": "E2B's /execute lines"}})
    async def execute(sandbox_id: str, body: RunCode) -> StreamingResponse:
        """Run a cell and stream what it produces as NDJSON, in the spirit of E2B's `/execute`:
        `stdout`/`stderr`/`result`/`error` lines as they happen, then `number_of_executions` and
        `end_of_execution`; an `exception` line if the call failed (timeout, sandbox killed).
        A client that disconnects does not stop the cell (its `timeout` does)."""
        sbx = await sandbox(sandbox_id)
        sbx._core.ensure_running()
        return StreamingResponse(_cell_lines(sbx, body), media_type=NDJSON)

    @app.post("/sandboxes/{sandbox_id}/contexts", tags=["code"], responses=errors)
    async def create_context(sandbox_id: str, body: CreateContext) -> Context:
        sbx = await sandbox(sandbox_id)
        return await _in_thread(sbx.create_code_context, body.cwd, body.language)

    @app.get("/sandboxes/{sandbox_id}/contexts", tags=["code"], responses=errors)
    async def list_contexts(sandbox_id: str) -> list[Context]:
        sbx = await sandbox(sandbox_id)
        return await _in_thread(sbx.list_code_contexts)

    @app.post("/sandboxes/{sandbox_id}/contexts/{context_id}/restart", tags=["code"],
              status_code=204, responses=errors)
    async def restart_context(sandbox_id: str, context_id: str) -> Response:
        sbx = await sandbox(sandbox_id)
        await _in_thread(sbx.restart_code_context, context_id)
        return Response(status_code=204)

    @app.delete("/sandboxes/{sandbox_id}/contexts/{context_id}", tags=["code"], status_code=204,
                responses=errors)
    async def remove_context(sandbox_id: str, context_id: str) -> Response:
        sbx = await sandbox(sandbox_id)
        await _in_thread(sbx.remove_code_context, context_id)
        return Response(status_code=204)

    return Guard(app, api_key, max_body, max_upload)


async def _serve_pty(websocket: WebSocket, process: Process) -> None:
    async def output() -> None:
        index = 0
        while True:
            events, done = await _in_thread(process.events_since, index, POLL)
            index += len(events)
            data = b"".join(e.data for e in events if e.stream == "pty")
            if data:
                await websocket.send_bytes(data)
            if done:
                break
        try:
            result = _result(process)
            end = {"type": "end", "exit_code": result.exit_code, "error": result.error}
        except SandboxException as exc:
            end = {"type": "exception", **error_body(exc).model_dump(exclude_none=True)}
        await websocket.send_text(json.dumps(end))
        await websocket.close()

    async def control() -> None:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            try:
                if message.get("bytes") is not None:
                    await _in_thread(process.send_stdin, message["bytes"])
                    continue
                request = json.loads(message.get("text") or "{}")
                if request.get("type") == "resize":
                    size = Resize.model_validate({k: request.get(k) for k in ("rows", "cols")})
                    process.resize(PtySize(rows=size.rows, cols=size.cols))
                elif request.get("type") == "stdin":
                    await _in_thread(process.send_stdin, str(request.get("data", "")))
            except (SandboxException, ValueError):
                continue  # input after the exit, a bad message: the output side ends the socket

    async def first(job: Callable[[], Any], group: anyio.abc.TaskGroup) -> None:
        try:
            await job()
        except (WebSocketDisconnect, RuntimeError):  # the client went away mid-send
            pass
        group.cancel_scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(first, output, group)
        group.start_soon(first, control, group)


def _remove_quietly(sbx: Sandbox, path: str) -> None:
    try:
        sbx.files.remove(path)
    except SandboxException:
        pass


class _BodyReader:
    """A request body as the blocking file-like object `files.write` copies from: read in a worker
    thread, each chunk fetched from the event loop as the client sends it."""

    def __init__(self, stream: AsyncIterator[bytes]) -> None:
        self._stream = stream
        self._buffer = b""
        self._ended = False
        self.started = False

    async def _next(self) -> bytes:
        try:
            while True:
                chunk = await self._stream.__anext__()
                if chunk:
                    return chunk
        except StopAsyncIteration:
            return b""

    def read(self, size: int = -1) -> bytes:
        self.started = True
        if not self._buffer and not self._ended:
            self._buffer = anyio.from_thread.run(self._next)
            self._ended = not self._buffer
        n = len(self._buffer) if size is None or size < 0 else size
        data, self._buffer = self._buffer[:n], self._buffer[n:]
        return data


def _event_line(event: Event) -> dict[str, Any]:
    if event.stream == "pty":
        return {"type": "pty", "data": base64.b64encode(event.data).decode()}
    return {"type": event.stream, "data": event.data}


async def _process_lines(process: Process, kill_on_disconnect: bool) -> AsyncIterator[bytes]:
    finished = False
    try:
        yield _line({"type": "start", "pid": process.pid})
        index = 0
        while True:
            events, done = await _in_thread(process.events_since, index, POLL)
            index += len(events)
            if events:
                yield b"".join(_line(_event_line(e)) for e in events)
            if done:
                break
        try:
            result = _result(process)
        except SandboxException as exc:
            yield _line({"type": "exception", **error_body(exc).model_dump(exclude_none=True)})
        else:
            yield _line({"type": "end", "exit_code": result.exit_code, "error": result.error})
        finished = True
    finally:
        if not finished and kill_on_disconnect:
            process.kill()


async def _cell_lines(sbx: Sandbox, body: RunCode) -> AsyncIterator[bytes]:
    news: "queue.Queue[tuple[str, Any]]" = queue.Queue()

    def work() -> None:
        try:
            execution = sbx.run_code(
                body.code, body.language,
                Context(id=body.context_id) if body.context_id is not None else None,
                on_stdout=lambda m: news.put(("log", m)), on_stderr=lambda m: news.put(("log", m)),
                on_result=lambda r: news.put(("result", r)), on_error=lambda e: news.put(("error", e)),
                envs=body.envs, timeout=body.timeout)
            news.put(("done", execution))
        except BaseException as exc:  # reported to the client as an `exception` line
            news.put(("exception", exc))

    threading.Thread(target=work, name="declaw-serve-cell", daemon=True).start()
    while True:
        items = await _in_thread(_drain, news, POLL)
        lines = []
        finished = False
        for kind, value in items:
            if kind == "log":
                message: OutputMessage = value
                lines.append({"type": "stderr" if message.error else "stdout", "text": message.line,
                              "timestamp": message.timestamp.isoformat()})
            elif kind == "result":
                result: Result = value
                lines.append({"type": "result", **result.model_dump(mode="json", exclude_none=True)})
            elif kind == "error":
                error: ExecutionError = value
                lines.append({"type": "error", **error.model_dump(mode="json")})
            elif kind == "done":
                lines.append({"type": "number_of_executions", "execution_count": value.execution_count})
                lines.append({"type": "end_of_execution"})
                finished = True
            else:
                lines.append({"type": "exception", **error_body(value).model_dump(exclude_none=True)})
                finished = True
        if lines:
            yield b"".join(_line(line) for line in lines)
        if finished:
            return


def _drain(news: "queue.Queue[tuple[str, Any]]", wait: float) -> list[tuple[str, Any]]:
    try:
        items = [news.get(timeout=wait)]
    except queue.Empty:
        return []
    while True:
        try:
            items.append(news.get_nowait())
        except queue.Empty:
            return items


# -- running it ------------------------------------------------------------------------------------
def check_bind(host: str, api_key: Optional[str]) -> None:
    """Refuse to listen beyond loopback without an API key."""
    if not api_key and not is_loopback(host):
        raise SystemExit(f"declaw-wasm serve: refusing to listen on {host} without an API key; "
                         "set DECLAW_API_KEY (or use --host 127.0.0.1)")


def serve(host: str = "127.0.0.1", port: int = 8080, api_key: Optional[str] = None,
          max_body: int = DEFAULT_MAX_BODY, max_upload: int = DEFAULT_MAX_UPLOAD) -> None:
    """Run the server until interrupted (what `declaw-wasm serve` does)."""
    import sys

    import uvicorn

    check_bind(host, api_key)
    if not api_key:
        print("declaw-wasm serve: no DECLAW_API_KEY set; requests are not authenticated "
              "(loopback only)", file=sys.stderr)
    from .runtime import get_runtime

    get_runtime()  # load (or build) the runtime before taking requests
    shown = f"[{host}]" if ":" in host else host
    print(f"declaw-wasm serve: http://{shown}:{port} (OpenAPI document: /openapi.json)", file=sys.stderr)
    # at shutdown: streams get GRACE seconds to end, then every sandbox is killed (lifespan)
    uvicorn.run(create_app(api_key, max_body, max_upload), host=host, port=port,
                log_level=os.environ.get("DECLAW_LOG_LEVEL", "warning"),
                timeout_graceful_shutdown=GRACE)


@contextmanager
def serve_in_thread(api_key: Optional[str] = None, host: str = "127.0.0.1", grace: float = GRACE,
                    **app_args: Any) -> Iterator[str]:
    """Run the server on a free port in a thread of this process; yields its URL (tests,
    benchmarks, embedding). Leaving the block stops it (and kills its sandboxes)."""
    import uvicorn

    check_bind(host, api_key)
    # proto IPPROTO_TCP, so that asyncio sets TCP_NODELAY on the accepted connections (it checks
    # the proto; without it, small writes wait ~40 ms for delayed ACKs)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM,
                         socket.IPPROTO_TCP)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(create_app(api_key, **app_args), log_level="warning",
                            timeout_graceful_shutdown=grace)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True,
                              name="declaw-serve")
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the server did not start")
        time.sleep(0.01)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(grace + 10)
        sock.close()
