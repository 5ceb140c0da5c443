"""declaw's stdio processes (MCP and LSP servers, REPLs): a command with an open stdin pipe and
no timeout, its output as Server-Sent Events that a client can resume (`last_entry_id`)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response, StreamingResponse

from ..._threads import in_thread
from ...exceptions import InvalidArgumentException, NotFoundException
from ...wire import Killed, RunCommand, StartStdio, StdioStarted, StdioStdin, Stdin
from ..registry import Registry
from ..streams import stdio_sse
from .commands import stdin_bytes
from .common import ERRORS, SSE, checked_command, finder, sse_response, streamed


def _pid(cmd_id: str) -> int:
    if not cmd_id.isdigit():
        raise NotFoundException(f"no stdio process {cmd_id!r}")
    return int(cmd_id)


def router(registry: Registry) -> APIRouter:
    sandbox = finder(registry)
    stdio = APIRouter(tags=["stdio"])

    @stdio.post("/sandboxes/{sandbox_id}/stdio", responses=ERRORS)
    async def start(sandbox_id: str, body: StartStdio) -> StdioStarted:
        request = checked_command(RunCommand(cmd=body.cmd, envs=body.envs, cwd=body.cwd, timeout=None,
                                             stdin=True, background=True))
        process = await in_thread((await sandbox(sandbox_id)).start, request)
        return StdioStarted(cmd_id=str(registry.keep(sandbox_id, process).pid))

    @stdio.post("/sandboxes/{sandbox_id}/stdio/{cmd_id}/stdin", status_code=204, responses=ERRORS)
    async def send(sandbox_id: str, cmd_id: str, body: StdioStdin) -> Response:
        data = stdin_bytes(Stdin(data=body.data, encoding="base64"))
        await in_thread((await sandbox(sandbox_id)).send_stdin, _pid(cmd_id), data)
        return Response(status_code=204)

    @stdio.post("/sandboxes/{sandbox_id}/stdio/{cmd_id}/stdin/close", status_code=204, responses=ERRORS)
    async def close(sandbox_id: str, cmd_id: str) -> Response:
        await in_thread((await sandbox(sandbox_id)).close_stdin, _pid(cmd_id))
        return Response(status_code=204)

    @stdio.delete("/sandboxes/{sandbox_id}/stdio/{cmd_id}", responses=ERRORS)
    async def kill(sandbox_id: str, cmd_id: str) -> Killed:
        return Killed(killed=await in_thread((await sandbox(sandbox_id)).kill_process, _pid(cmd_id)))

    @stdio.get("/sandboxes/{sandbox_id}/stdio/{cmd_id}/stream", responses=streamed(
            "events stdout/stderr ({entry_id, data: base64}), then exit", "StdioChunk", SSE))
    async def stream(sandbox_id: str, cmd_id: str, last_entry_id: int = 0) -> StreamingResponse:
        if last_entry_id < 0:
            raise InvalidArgumentException("last_entry_id must be >= 0")
        process = await in_thread(registry.process, sandbox_id, _pid(cmd_id))
        return sse_response(stdio_sse(process, last_entry_id))

    return stdio
