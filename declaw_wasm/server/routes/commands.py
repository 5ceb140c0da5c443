"""Commands at declaw's paths: run (JSON `CommandResult`, or `{pid}` in the background), list,
kill, stdin, wait and the SSE stream; our clients' NDJSON stream of a command, its events and
close-stdin are under `PREFIX`."""

from __future__ import annotations

import base64
from typing import Union

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse

from ..._backend import ProcessHandle
from ..._threads import in_thread
from ...exceptions import InvalidArgumentException
from ...models import CommandResult, ProcessInfo
from ...wire import PREFIX, Killed, Pid, RunCommand, Stdin
from ..registry import Registry
from ..streams import POLL, command_sse, process_lines
from .common import ERRORS, NDJSON, SSE, checked_command, finder, sse_response, streamed


async def finished(process: ProcessHandle, request: Request, kill_on_disconnect: bool) -> CommandResult:
    """Wait for the command's end (its result, or the exception it ended with); a client that
    goes away first has its command killed if `kill_on_disconnect`."""
    index = 0
    while True:
        events, done = await in_thread(process.events_since, index, POLL)
        index += len(events)
        if done:
            return await in_thread(process.result)
        if await request.is_disconnected():
            if not kill_on_disconnect:  # nobody to answer; the command runs on
                return CommandResult(stdout="", stderr="", exit_code=-1)
            await in_thread(process.kill)
            return await in_thread(process.result)


def stdin_bytes(body: Stdin) -> bytes:
    if body.encoding == "utf-8":
        return body.data.encode()
    try:
        return base64.b64decode(body.data, validate=True)
    except ValueError:
        raise InvalidArgumentException("stdin data is not valid base64") from None


def router(registry: Registry) -> APIRouter:
    sandbox = finder(registry)
    commands = APIRouter(tags=["commands"])

    @commands.post("/sandboxes/{sandbox_id}/commands", responses=ERRORS)
    async def run_command(sandbox_id: str, body: RunCommand, request: Request) -> Union[CommandResult, Pid]:
        """declaw's run: with `background`, `{pid}` at once (then `.../wait`, `/stdin`,
        `DELETE`); else the `CommandResult` once it ends (a non-zero exit is a result; a timeout
        is a 408 `TimeoutException` carrying the output so far). A foreground command whose
        client disconnects is killed. A background command's stdin stays open unless `stdin` is
        false (declaw's async SDK sends stdin to background commands it cannot ask it for)."""
        backend = await sandbox(sandbox_id)
        if body.background and body.stdin is None:
            body = body.model_copy(update={"stdin": True})
        process = await in_thread(backend.start, checked_command(body))
        if body.background:
            return Pid(pid=registry.keep(sandbox_id, process).pid)
        return await finished(process, request, kill_on_disconnect=True)

    @commands.get("/sandboxes/{sandbox_id}/commands", responses=ERRORS)
    async def list_commands(sandbox_id: str) -> list[ProcessInfo]:
        """The running commands and PTYs."""
        return await in_thread((await sandbox(sandbox_id)).processes)

    @commands.get("/sandboxes/{sandbox_id}/commands/{pid}/wait", responses=ERRORS)
    async def wait_command(sandbox_id: str, pid: int, request: Request) -> CommandResult:
        """Wait for a command's end: its `CommandResult` (declaw's client raises
        `CommandExitException` on a non-zero exit)."""
        process = await in_thread(registry.process, sandbox_id, pid)
        return await finished(process, request, kill_on_disconnect=False)

    @commands.post("/sandboxes/{sandbox_id}/commands/stream", responses=streamed(
            "events stdout/stderr (one line each), then exit or error", "StreamOutput", SSE))
    async def stream_command(sandbox_id: str, body: RunCommand) -> StreamingResponse:
        """declaw's `run_stream`: Server-Sent Events, one line of output each (without its
        newline), then `{"exit_code"}` or `{"error"}`. A client that disconnects has its
        command killed."""
        backend = await sandbox(sandbox_id)
        process = await in_thread(backend.start, checked_command(body))
        return sse_response(command_sse(process))

    @commands.post("/sandboxes/{sandbox_id}/commands/{pid}/stdin", status_code=204, responses=ERRORS)
    async def send_stdin(sandbox_id: str, pid: int, body: Stdin) -> Response:
        await in_thread((await sandbox(sandbox_id)).send_stdin, pid, stdin_bytes(body))
        return Response(status_code=204)

    @commands.delete("/sandboxes/{sandbox_id}/commands/{pid}", responses=ERRORS)
    async def kill_command(sandbox_id: str, pid: int) -> Killed:
        """Kill a command or PTY (`killed` false if none runs with this pid)."""
        return Killed(killed=await in_thread((await sandbox(sandbox_id)).kill_process, pid))

    # -- ours -------------------------------------------------------------------------------------
    @commands.post(PREFIX + "/sandboxes/{sandbox_id}/commands",
                   responses=streamed("start, output and end lines", "CommandLine"))
    async def run_streamed(sandbox_id: str, body: RunCommand) -> StreamingResponse:
        """Start a command line and stream its output as NDJSON while it runs: a `start` line
        with the pid, `stdout`/`stderr` lines as written, then `end` (exit code) or `exception`.
        Unless `background`, a client that disconnects before the end has its command killed."""
        backend = await sandbox(sandbox_id)
        process = await in_thread(backend.start, checked_command(body))
        if body.background:
            registry.keep(sandbox_id, process)
        return StreamingResponse(process_lines(process, kill_on_disconnect=not body.background),
                                 media_type=NDJSON)

    @commands.get(PREFIX + "/sandboxes/{sandbox_id}/commands/{pid}/events",
                  responses=streamed("as for POST {PREFIX}/.../commands", "CommandLine"))
    async def command_events(sandbox_id: str, pid: int) -> StreamingResponse:
        """A running command's output from its start, then what follows (E2B's `connect`)."""
        process = await in_thread((await sandbox(sandbox_id)).process, pid)
        return StreamingResponse(process_lines(process, kill_on_disconnect=False), media_type=NDJSON)

    @commands.post(PREFIX + "/sandboxes/{sandbox_id}/commands/{pid}/stdin/close", status_code=204,
                   responses=ERRORS)
    async def close_stdin(sandbox_id: str, pid: int) -> Response:
        await in_thread((await sandbox(sandbox_id)).close_stdin, pid)
        return Response(status_code=204)

    return commands
