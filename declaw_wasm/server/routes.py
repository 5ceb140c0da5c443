"""The HTTP routes, one router per noun: each takes its wire body (wire.py), checks what the
faces would check (`_args.py`: clients may not be ours), and calls the backend contract's
method of the same name on the sandbox's backend. Blocking work runs in worker threads."""

from __future__ import annotations

import base64
import threading
from typing import Any, Awaitable, Callable, Optional, Union

import anyio
from fastapi import APIRouter, Query, Request, WebSocket
from fastapi.responses import Response, StreamingResponse

from .. import __version__, _args
from .._backend import SandboxBackend, Sandboxes
from .._egress.audit import AuditEvent
from .._threads import in_thread
from ..exceptions import InvalidArgumentException, SandboxException, SandboxNotFoundException
from ..execution import Context
from ..limits import Limits
from ..models import EntryInfo, ProcessInfo, PtySize, SandboxInfo, WriteInfo
from ..wire import (Connect, CreateContext, Created, CreatePty, CreateSandbox, ErrorBody, Exists,
                    Killed, MakeDir, Pid, Rename, Resize, RunCode, RunCommand, SetTimeout, Stdin)
from .streams import BodyReader, cell_lines, process_lines, serve_pty

NDJSON = "application/x-ndjson"
ERRORS: dict[Union[int, str], dict[str, Any]] = {
    400: {"model": ErrorBody}, 401: {"model": ErrorBody}, 404: {"model": ErrorBody}}


class Registry:
    """The sandboxes this server made, on its backend. One that timed out stays known for a
    while, so calls on it raise `TimeoutException` (as in-process) rather than "not found"."""

    KEEP_ENDED = 1000

    def __init__(self, sandboxes: Sandboxes) -> None:
        self.sandboxes = sandboxes
        self._lock = threading.Lock()
        self._made: dict[str, SandboxBackend] = {}

    def create(self, request: CreateSandbox) -> SandboxBackend:
        backend = self.sandboxes.create(request)
        with self._lock:
            self._made[backend.sandbox_id] = backend
            ended = [i for i, b in self._made.items() if not b.is_running()]
            for sandbox_id in ended[: max(0, len(ended) - self.KEEP_ENDED)]:
                del self._made[sandbox_id]
        return backend

    def get(self, sandbox_id: str) -> SandboxBackend:
        with self._lock:
            backend = self._made.get(sandbox_id)
        return backend if backend is not None else self.sandboxes.connect(sandbox_id)

    def forget(self, sandbox_id: str) -> None:
        with self._lock:
            self._made.pop(sandbox_id, None)

    def kill_all(self) -> None:
        """Kill every sandbox this server made (at shutdown: their host folders go too)."""
        with self._lock:
            made, self._made = list(self._made.values()), {}
        for backend in made:
            backend.kill()


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


def _command(body: RunCommand) -> RunCommand:
    return body.model_copy(update={"cmd": _args.command(body.cmd), "envs": _args.envs(body.envs),
                                   "timeout": _args.timeout(body.timeout),
                                   "cwd": None if body.cwd is None else _args.path(body.cwd)})


def routers(registry: Registry) -> list[APIRouter]:
    """One router per noun, each over the registry's sandboxes."""
    return [_sandboxes(registry), _files(registry), _commands(registry), _pty(registry), _code(registry)]


def _finder(registry: Registry) -> Callable[[str], Awaitable[SandboxBackend]]:
    async def sandbox(sandbox_id: str) -> SandboxBackend:
        return await in_thread(registry.get, sandbox_id)
    return sandbox


def _sandboxes(registry: Registry) -> APIRouter:
    sandbox = _finder(registry)
    sandboxes = APIRouter(tags=["sandboxes"])

    @sandboxes.get("/health", tags=["server"])
    async def health() -> dict[str, str]:
        return {"status": "ok", "version": __version__}

    # The server makes and finds sandboxes on its backend, never `Sandbox.create/connect/list`:
    # those would follow DECLAW_DOMAIN (remote mode) if the server's environment had it set.
    @sandboxes.post("/sandboxes", status_code=201, responses=ERRORS)
    async def create_sandbox(body: CreateSandbox) -> SandboxInfo:
        _args.template(body.template)
        request = body.model_copy(update={
            "timeout": None if body.timeout is None else _args.lifetime(body.timeout),
            "envs": _args.envs(body.envs), "metadata": _args.string_map(body.metadata, "metadata"),
            "limits": _check_limits(body.limits)})
        backend = await in_thread(registry.create, request)
        return await in_thread(backend.info)

    @sandboxes.get("/sandboxes")
    async def list_sandboxes() -> list[SandboxInfo]:
        return await in_thread(registry.sandboxes.list)

    @sandboxes.get("/sandboxes/{sandbox_id}", responses=ERRORS)
    async def get_sandbox(sandbox_id: str) -> SandboxInfo:
        return await in_thread((await sandbox(sandbox_id)).info)

    @sandboxes.post("/sandboxes/{sandbox_id}/connect", responses=ERRORS)
    async def connect_sandbox(sandbox_id: str, body: Connect) -> SandboxInfo:
        """Only extends the lifetime (a shorter `timeout` is ignored), as E2B's `connect`."""
        backend = await sandbox(sandbox_id)
        await in_thread(backend.info)  # a sandbox that timed out raises TimeoutException
        timeout = None if body.timeout is None else _args.lifetime(body.timeout)
        return await in_thread(lambda: registry.sandboxes.connect(sandbox_id, timeout).info())

    @sandboxes.post("/sandboxes/{sandbox_id}/timeout", status_code=204, responses=ERRORS)
    async def set_timeout(sandbox_id: str, body: SetTimeout) -> Response:
        backend = await sandbox(sandbox_id)
        await in_thread(backend.set_timeout, _args.lifetime(body.timeout))
        return Response(status_code=204)

    @sandboxes.get("/sandboxes/{sandbox_id}/audit", responses=ERRORS)
    async def audit(sandbox_id: str) -> list[AuditEvent]:
        """The sandbox's outbound network events, oldest first (docs/egress.md, "Audit")."""
        return await in_thread((await sandbox(sandbox_id)).audit_events)

    @sandboxes.delete("/sandboxes/{sandbox_id}")
    async def kill_sandbox(sandbox_id: str) -> Killed:
        try:
            backend = await sandbox(sandbox_id)
        except SandboxNotFoundException:
            return Killed(killed=False)
        killed = await in_thread(backend.kill)
        registry.forget(sandbox_id)
        return Killed(killed=killed)

    return sandboxes


def _files(registry: Registry) -> APIRouter:
    sandbox = _finder(registry)
    files = APIRouter(tags=["files"])

    @files.get("/sandboxes/{sandbox_id}/files", responses={
        **ERRORS, 200: {"content": {"application/octet-stream": {}}, "description": "the bytes"}})
    async def read_file(sandbox_id: str, path: str = Query(...)) -> StreamingResponse:
        """The file's bytes, streamed in 1 MiB chunks."""
        backend = await sandbox(sandbox_id)
        chunks = await in_thread(backend.read, _args.path(path))

        async def stream() -> Any:
            try:
                while True:
                    chunk = await in_thread(next, chunks, None)
                    if chunk is None:
                        return
                    yield chunk
            finally:
                chunks.close()

        return StreamingResponse(stream(), media_type="application/octet-stream")

    @files.put("/sandboxes/{sandbox_id}/files", responses={**ERRORS, 413: {"model": ErrorBody}},
               openapi_extra={"requestBody": {"required": True, "content": {
                   "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}})
    async def write_file(sandbox_id: str, request: Request, path: str = Query(...)) -> WriteInfo:
        """Write (create or overwrite) a file from the raw body, streamed to disk as it arrives;
        parents are created. Over the upload limit: 413, and nothing is left behind."""
        backend = await sandbox(sandbox_id)
        body = BodyReader(request.stream())
        try:
            return await in_thread(backend.write, _args.path(path), body)
        except BaseException:
            if body.started:  # a half-written file is worse than none
                with anyio.CancelScope(shield=True):
                    await in_thread(_remove_quietly, backend, path)
            raise

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
        await in_thread((await sandbox(sandbox_id)).remove, _args.path(path))
        return Response(status_code=204)

    @files.post("/sandboxes/{sandbox_id}/files/rename", responses=ERRORS)
    async def rename_file(sandbox_id: str, body: Rename) -> EntryInfo:
        return await in_thread((await sandbox(sandbox_id)).rename, _args.path(body.old_path),
                               _args.path(body.new_path))

    @files.post("/sandboxes/{sandbox_id}/files/mkdir", responses=ERRORS)
    async def make_dir(sandbox_id: str, body: MakeDir) -> Created:
        return Created(created=await in_thread((await sandbox(sandbox_id)).make_dir, _args.path(body.path)))

    return files


def _commands(registry: Registry) -> APIRouter:
    sandbox = _finder(registry)
    commands = APIRouter(tags=["commands"])

    @commands.post("/sandboxes/{sandbox_id}/commands", responses={
        **ERRORS, 200: {"content": {NDJSON: {"schema": {"$ref": "#/components/schemas/CommandLine"}}},
                        "description": "start, output and end lines"}})
    async def run_command(sandbox_id: str, body: RunCommand) -> StreamingResponse:
        """Start a command line and stream its output as NDJSON while it runs: a `start` line
        with the pid, `stdout`/`stderr` lines, then `end` (exit code) or `exception`. Unless
        `background`, a client that disconnects before the end has its command killed."""
        backend = await sandbox(sandbox_id)
        process = await in_thread(backend.start, _command(body))
        return StreamingResponse(process_lines(process, kill_on_disconnect=not body.background),
                                 media_type=NDJSON)

    @commands.get("/sandboxes/{sandbox_id}/commands", responses=ERRORS)
    async def list_commands(sandbox_id: str) -> list[ProcessInfo]:
        return await in_thread((await sandbox(sandbox_id)).processes)

    @commands.get("/sandboxes/{sandbox_id}/commands/{pid}/events", responses={
        **ERRORS, 200: {"content": {NDJSON: {"schema": {"$ref": "#/components/schemas/CommandLine"}}},
                        "description": "as for POST .../commands"}})
    async def command_events(sandbox_id: str, pid: int) -> StreamingResponse:
        """A running command's output from its start, then what follows (E2B's `connect`)."""
        process = await in_thread((await sandbox(sandbox_id)).process, pid)
        return StreamingResponse(process_lines(process, kill_on_disconnect=False), media_type=NDJSON)

    @commands.post("/sandboxes/{sandbox_id}/commands/{pid}/stdin", status_code=204, responses=ERRORS)
    async def send_stdin(sandbox_id: str, pid: int, body: Stdin) -> Response:
        data = base64.b64decode(body.data) if body.encoding == "base64" else body.data.encode()
        await in_thread((await sandbox(sandbox_id)).send_stdin, pid, data)
        return Response(status_code=204)

    @commands.post("/sandboxes/{sandbox_id}/commands/{pid}/close-stdin", status_code=204,
                   responses=ERRORS)
    async def close_stdin(sandbox_id: str, pid: int) -> Response:
        await in_thread((await sandbox(sandbox_id)).close_stdin, pid)
        return Response(status_code=204)

    @commands.delete("/sandboxes/{sandbox_id}/commands/{pid}", responses=ERRORS)
    async def kill_command(sandbox_id: str, pid: int) -> Killed:
        return Killed(killed=await in_thread((await sandbox(sandbox_id)).kill_process, pid))

    return commands


def _pty(registry: Registry) -> APIRouter:
    sandbox = _finder(registry)
    pty = APIRouter(tags=["pty"])

    @pty.post("/sandboxes/{sandbox_id}/pty", responses=ERRORS)
    async def create_pty(sandbox_id: str, body: CreatePty) -> Pid:
        """Start an interactive shell on a terminal of this size; attach with the WebSocket
        `/sandboxes/{id}/pty/{pid}`. It runs until it exits, is killed or times out, whether
        or not a socket is attached."""
        request = body.model_copy(update={"envs": _args.envs(body.envs), "timeout": _args.timeout(body.timeout),
                                          "cwd": None if body.cwd is None else _args.path(body.cwd)})
        process = await in_thread((await sandbox(sandbox_id)).start, request)
        return Pid(pid=process.pid)

    @pty.post("/sandboxes/{sandbox_id}/pty/{pid}/resize", status_code=204, responses=ERRORS)
    async def resize_pty(sandbox_id: str, pid: int, body: Resize) -> Response:
        await in_thread((await sandbox(sandbox_id)).resize_pty, pid, PtySize(rows=body.rows, cols=body.cols))
        return Response(status_code=204)

    @pty.websocket("/sandboxes/{sandbox_id}/pty/{pid}")
    async def pty_socket(websocket: WebSocket, sandbox_id: str, pid: int) -> None:
        """The PTY's bytes both ways (wire.py describes the frames). Stdin and resizes may
        also come as HTTP calls (`.../commands/{pid}/stdin`, `.../pty/{pid}/resize`)."""
        try:
            process = await in_thread((await sandbox(sandbox_id)).process, pid, True)
        except SandboxException as exc:
            await websocket.close(code=4404, reason=str(exc)[:120])
            return
        await websocket.accept()
        await serve_pty(websocket, process)

    return pty


def _code(registry: Registry) -> APIRouter:
    """E2B code-interpreter's calls: cells and contexts."""
    sandbox = _finder(registry)
    code = APIRouter(tags=["code"])

    @code.post("/sandboxes/{sandbox_id}/execute", responses={
        **ERRORS, 200: {"content": {NDJSON: {"schema": {"$ref": "#/components/schemas/CellLine"}}},
                        "description": "E2B's /execute lines"}})
    async def execute(sandbox_id: str, body: RunCode) -> StreamingResponse:
        """Run a cell and stream what it produces as NDJSON, in the spirit of E2B's `/execute`:
        `stdout`/`stderr`/`result`/`error` lines as they happen, then `number_of_executions` and
        `end_of_execution`; an `exception` line if the call failed (timeout, sandbox killed).
        A client that disconnects does not stop the cell (its `timeout` does)."""
        backend = await sandbox(sandbox_id)
        await in_thread(backend.info)  # a killed or timed-out sandbox answers with an error now
        request = body.model_copy(update={"code": _args.code(body.code), "envs": _args.envs(body.envs),
                                          "language": _args.language(body.language),
                                          "timeout": _args.timeout(body.timeout)})
        return StreamingResponse(cell_lines(backend, request), media_type=NDJSON)

    @code.post("/sandboxes/{sandbox_id}/contexts", responses=ERRORS)
    async def create_context(sandbox_id: str, body: CreateContext) -> Context:
        request = body.model_copy(update={"language": _args.language(body.language),
                                          "cwd": None if body.cwd is None else _args.path(body.cwd)})
        return await in_thread((await sandbox(sandbox_id)).create_context, request)

    @code.get("/sandboxes/{sandbox_id}/contexts", responses=ERRORS)
    async def list_contexts(sandbox_id: str) -> list[Context]:
        return await in_thread((await sandbox(sandbox_id)).list_contexts)

    @code.post("/sandboxes/{sandbox_id}/contexts/{context_id}/restart", status_code=204, responses=ERRORS)
    async def restart_context(sandbox_id: str, context_id: str) -> Response:
        await in_thread((await sandbox(sandbox_id)).restart_context, context_id)
        return Response(status_code=204)

    @code.delete("/sandboxes/{sandbox_id}/contexts/{context_id}", status_code=204, responses=ERRORS)
    async def remove_context(sandbox_id: str, context_id: str) -> Response:
        await in_thread((await sandbox(sandbox_id)).remove_context, context_id)
        return Response(status_code=204)

    return code


def _remove_quietly(backend: SandboxBackend, path: str) -> None:
    try:
        backend.remove(path)
    except SandboxException:
        pass
