"""What the server streams, encoded from wire/'s messages: a command's output (our NDJSON,
declaw's SSE), a cell's reports (NDJSON), a PTY's terminal (our WebSocket, declaw's SSE), a
stdio process's output (SSE), and an upload's body read from a worker thread. Every wait for
guest news is a bounded slice (`POLL`), so a client that goes away is noticed within a second
and a quiet guest holds a thread, not the event loop."""

from __future__ import annotations

import base64
import time
from typing import AsyncIterator, Awaitable, Callable

import anyio
import anyio.abc
import anyio.from_thread
from fastapi import WebSocket, WebSocketDisconnect

from .._backend import ProcessHandle, SandboxBackend
from .._codings import BodyDecoder, DecodedStream, EncodingError
from .._lines import cell_lines as lines_of_cell, end_line, event_line, start_cell
from .._threads import in_thread
from ..exceptions import InvalidArgumentException, SandboxException
from ..models import PtySize
from ..wire import (PTY_CONTROL, PtyData, ResizeMessage, RunCode, StartLine, StdioChunk, StreamError,
                    StreamExit, StreamOutput, line, sse)

POLL = 1.0  # seconds a stream's worker waits for news before checking on its client
PACE = 0.005  # seconds between a command's output chunks while output keeps coming


async def process_lines(process: ProcessHandle, kill_on_disconnect: bool) -> AsyncIterator[bytes]:
    """A command's stream: start, output as it is written (while it keeps coming, a chunk at
    most every `PACE` s: meanwhile later writes join the events not read yet, so a guest's
    million 1-byte writes are not a million lines), then end (or exception)."""
    finished = False
    try:
        yield line(StartLine(pid=process.pid))
        index = 0
        sent = 0.0
        while True:
            while time.monotonic() < sent + PACE and not process.done:  # its end goes at once
                await anyio.sleep(0.001)
            events, done = await in_thread(process.events_since, index, POLL)
            index += len(events)
            if events:
                sent = time.monotonic()
                yield b"".join(line(event_line(e)) for e in events)
            if done:
                break
        yield line(end_line(process))
        finished = True
    finally:
        if not finished and kill_on_disconnect:
            process.kill()


async def command_sse(process: ProcessHandle) -> AsyncIterator[bytes]:
    """declaw's `commands/stream`: one event per line of output, without its newline (a last
    line without one comes at the end), then `exit` or `error`. A client that goes away has its
    command killed."""
    partial = {"stdout": "", "stderr": ""}
    finished = False
    try:
        index = 0
        while True:
            events, done = await in_thread(process.events_since, index, POLL)
            index += len(events)
            out = []
            for event in events:
                if event.stream not in partial:
                    continue
                *lines, partial[event.stream] = (partial[event.stream] + event.data).split("\n")
                out += [sse(event.stream, StreamOutput(type=event.stream, data=text)) for text in lines]
            if done:
                out += [sse(name, StreamOutput(type=name, data=text))
                        for name, text in partial.items() if text]
            if out:
                yield b"".join(out)
            if done:
                break
        try:
            result = process.result()
            yield sse("exit", StreamExit(exit_code=result.exit_code))
        except SandboxException as exc:
            yield sse("error", StreamError(error=f"{type(exc).__name__}: {exc}"))
        finished = True
    finally:
        if not finished:
            process.kill()


async def pty_sse(process: ProcessHandle) -> AsyncIterator[bytes]:
    """declaw's PTY stream: the terminal's bytes from the start (event `data`), then `exit`
    (-1 if the PTY ended by a timeout or its sandbox's end). The PTY outlives the stream."""
    index = 0
    while True:
        events, done = await in_thread(process.events_since, index, POLL)
        index += len(events)
        data = b"".join(e.data for e in events if e.stream == "pty")
        if data:
            yield sse("data", PtyData(data=base64.b64encode(data).decode()))
        if done:
            break
    yield _exit_event(process)


def _exit_event(process: ProcessHandle) -> bytes:
    """The last event of a PTY's or stdio's stream: the exit code (-1 if the command failed)."""
    try:
        code = process.result().exit_code
    except SandboxException:
        code = -1
    return sse("exit", StreamExit(exit_code=code))


async def stdio_sse(process: ProcessHandle, last_entry_id: int) -> AsyncIterator[bytes]:
    """declaw's stdio stream: output entries after `last_entry_id` (each an event of the
    command's log, numbered from 1), then `exit`. The process outlives the stream."""
    index = last_entry_id
    while True:
        events, done = await in_thread(process.events_since, index, POLL)
        out = []
        for event in events:
            index += 1
            if event.stream in ("stdout", "stderr"):
                data = event.data.encode("utf-8", "surrogateescape") if isinstance(event.data, str) else event.data
                out.append(sse(event.stream, StdioChunk(entry_id=index, data=base64.b64encode(data).decode())))
        if out:
            yield b"".join(out)
        if done:
            break
    yield _exit_event(process)


async def cell_lines(backend: SandboxBackend, body: RunCode) -> AsyncIterator[bytes]:
    """A cell's stream. The cell runs on its own thread and reports into a `CellNews`, which
    never makes it wait: while the client reads slowly or not at all, later logs join those
    waiting, so what the server holds for the cell stays within its output limit. A client that
    disconnects does not stop the cell (its timeout does): a kill would lose the context's
    state."""
    news = start_cell(backend.run_code, body)
    while True:
        out, finished = lines_of_cell(await in_thread(news.take, POLL))
        if out:
            yield b"".join(line(message) for message in out)
        if finished:
            return


async def serve_pty(websocket: WebSocket, process: ProcessHandle) -> None:
    """A PTY's WebSocket: output down as binary frames from the start, then an end (or
    exception) text frame; stdin (binary or a `stdin` message) and `resize` messages up."""
    async def output() -> None:
        index = 0
        while True:
            events, done = await in_thread(process.events_since, index, POLL)
            index += len(events)
            data = b"".join(e.data for e in events if e.stream == "pty")
            if data:
                await websocket.send_bytes(data)
            if done:
                break
        await websocket.send_text(end_line(process).model_dump_json(exclude_none=True))
        await websocket.close()

    async def control() -> None:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            try:
                if message.get("bytes") is not None:
                    await in_thread(process.send_stdin, message["bytes"])
                    continue
                request = PTY_CONTROL.validate_json(message.get("text") or "{}")
                if isinstance(request, ResizeMessage):
                    process.resize(PtySize(rows=request.rows, cols=request.cols))
                else:
                    await in_thread(process.send_stdin, request.data.encode())
            except (SandboxException, ValueError):
                continue  # input after the exit, a bad message: the output side ends the socket

    async def first(job: Callable[[], Awaitable[None]], group: anyio.abc.TaskGroup) -> None:
        try:
            await job()
        except (WebSocketDisconnect, RuntimeError):  # the client went away mid-send
            pass
        group.cancel_scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(first, output, group)
        group.start_soon(first, control, group)


class GunzipReader:
    """A gzip-encoded body (`Content-Encoding: gzip`) as the plain bytes it holds, decoded a
    bounded piece at a time by the host's body codec (declaw_wasm/_codings.py: every member, its
    end checked): a small body that inflates hugely never sits in memory whole (the disk quota
    bounds what is written)."""

    def __init__(self, raw: "BodyReader") -> None:
        self._stream = DecodedStream(raw, BodyDecoder("gzip"))

    def read(self, size: int = -1) -> bytes:
        size = 1 << 20 if size is None or size < 0 else max(1, size)
        try:
            return self._stream.read(size) or b""
        except EncodingError as exc:
            raise InvalidArgumentException(f"the body is not valid gzip: {exc}") from None


class BodyReader:
    """A request body as the blocking file-like object a backend's `write` copies from: read in
    a worker thread, each chunk fetched from the event loop as the client sends it."""

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
