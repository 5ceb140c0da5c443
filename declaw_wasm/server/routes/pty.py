"""PTYs at declaw's paths: create, the SSE output stream, stdin, resize (`PATCH`) and kill
(`DELETE`); our clients' WebSocket is under `PREFIX`."""

from __future__ import annotations

from fastapi import APIRouter, WebSocket
from fastapi.responses import Response, StreamingResponse

from ... import _args
from ..._threads import in_thread
from ...exceptions import SandboxException
from ...models import PtySize
from ...wire import PREFIX, CreatePty, Killed, Pid, Resize, Stdin
from ..registry import Registry
from ..streams import pty_sse, serve_pty
from .commands import stdin_bytes
from .common import ERRORS, SSE, finder, sse_response, streamed


def router(registry: Registry) -> APIRouter:
    sandbox = finder(registry)
    pty = APIRouter(tags=["pty"])

    @pty.post("/sandboxes/{sandbox_id}/pty", responses=ERRORS)
    async def create_pty(sandbox_id: str, body: CreatePty) -> Pid:
        """Start an interactive shell on a terminal of this size. It runs until it exits, is
        killed or times out, whether or not a stream is attached."""
        request = body.model_copy(update={"envs": _args.envs(body.envs), "timeout": _args.timeout(body.timeout),
                                          "cwd": None if body.cwd is None else _args.path(body.cwd)})
        process = await in_thread((await sandbox(sandbox_id)).start, request)
        return Pid(pid=registry.keep(sandbox_id, process).pid)

    @pty.get("/sandboxes/{sandbox_id}/pty/{pid}/stream", responses=streamed(
            "event data (base64 bytes), then event exit", "PtyData", SSE))
    async def pty_stream(sandbox_id: str, pid: int) -> StreamingResponse:
        """The terminal's output from its start as Server-Sent Events, then its exit."""
        process = await in_thread(registry.process, sandbox_id, pid, True)
        return sse_response(pty_sse(process))

    @pty.post("/sandboxes/{sandbox_id}/pty/{pid}/stdin", status_code=204, responses=ERRORS)
    async def pty_stdin(sandbox_id: str, pid: int, body: Stdin) -> Response:
        await in_thread((await sandbox(sandbox_id)).send_stdin, pid, stdin_bytes(body))
        return Response(status_code=204)

    @pty.patch("/sandboxes/{sandbox_id}/pty/{pid}", status_code=204, responses=ERRORS)
    async def resize_pty(sandbox_id: str, pid: int, body: Resize) -> Response:
        size = PtySize(rows=body.size.rows, cols=body.size.cols)
        await in_thread((await sandbox(sandbox_id)).resize_pty, pid, size)
        return Response(status_code=204)

    @pty.delete("/sandboxes/{sandbox_id}/pty/{pid}", responses=ERRORS)
    async def kill_pty(sandbox_id: str, pid: int) -> Killed:
        return Killed(killed=await in_thread((await sandbox(sandbox_id)).kill_process, pid))

    @pty.websocket(PREFIX + "/sandboxes/{sandbox_id}/pty/{pid}")
    async def pty_socket(websocket: WebSocket, sandbox_id: str, pid: int) -> None:
        """The PTY's bytes both ways (wire/ describes the frames), for our clients."""
        try:
            process = await in_thread((await sandbox(sandbox_id)).process, pid, True)
        except SandboxException as exc:
            await websocket.close(code=4404, reason=str(exc)[:120])
            return
        await websocket.accept()
        await serve_pty(websocket, process)

    return pty
