"""What the server streams, encoded from wire.py's messages: a command's output (NDJSON), a
cell's reports (NDJSON), a PTY's terminal (WebSocket), and an upload's body read from a worker
thread. Every wait for guest news is a bounded slice (`POLL`), so a client that goes away is
noticed within a second and a quiet guest holds a thread, not the event loop."""

from __future__ import annotations

import base64
import queue
import threading
from typing import Any, AsyncIterator, Awaitable, Callable

import anyio
import anyio.abc
import anyio.from_thread
from fastapi import WebSocket, WebSocketDisconnect
from pydantic import BaseModel

from .._backend import Event, ProcessHandle, SandboxBackend
from .._threads import in_thread
from ..exceptions import SandboxException
from ..execution import Execution, ExecutionError, OutputMessage, Result
from ..models import PtySize
from ..wire import (PTY_CONTROL, CellErrorLine, CellLogLine, CellResultLine, EndLine,
                    EndOfExecutionLine, ExecutionCountLine, OutputLine, PtyLine, ResizeMessage,
                    RunCode, StartLine, exception_line, line)

POLL = 1.0  # seconds a stream's worker waits for news before checking on its client


def _event_line(event: Event) -> bytes:
    if event.stream == "pty":
        return line(PtyLine(data=base64.b64encode(event.data).decode()))
    return line(OutputLine(type=event.stream, data=event.data))


async def process_lines(process: ProcessHandle, kill_on_disconnect: bool) -> AsyncIterator[bytes]:
    """A command's stream: start, output as it is written, then end (or exception)."""
    finished = False
    try:
        yield line(StartLine(pid=process.pid))
        index = 0
        while True:
            events, done = await in_thread(process.events_since, index, POLL)
            index += len(events)
            if events:
                yield b"".join(_event_line(e) for e in events)
            if done:
                break
        try:
            result = process.result()
        except SandboxException as exc:
            yield line(exception_line(exc))
        else:
            yield line(EndLine(exit_code=result.exit_code, error=result.error,
                             cpu_instructions_used=result.cpu_instructions_used))
        finished = True
    finally:
        if not finished and kill_on_disconnect:
            process.kill()


async def cell_lines(backend: SandboxBackend, body: RunCode) -> AsyncIterator[bytes]:
    """A cell's stream. The cell runs on its own thread and reports into a queue; a client that
    disconnects does not stop it (its timeout does): a kill would lose the context's state."""
    news: "queue.Queue[tuple[str, Any]]" = queue.Queue()

    def work() -> None:
        try:
            execution = backend.run_code(
                body, on_stdout=lambda m: news.put(("log", m)), on_stderr=lambda m: news.put(("log", m)),
                on_result=lambda r: news.put(("result", r)), on_error=lambda e: news.put(("error", e)))
            news.put(("done", execution))
        except BaseException as exc:  # reported to the client as an `exception` line
            news.put(("exception", exc))

    threading.Thread(target=work, name="declaw-serve-cell", daemon=True).start()
    while True:
        items = await in_thread(_drain, news, POLL)
        out: list[BaseModel] = []
        finished = False
        for kind, value in items:
            if kind == "log":
                message: OutputMessage = value
                out.append(CellLogLine(type="stderr" if message.error else "stdout", text=message.line,
                                       timestamp=message.timestamp))
            elif kind == "result":
                result: Result = value
                out.append(CellResultLine.model_validate(result.model_dump(mode="json")))
            elif kind == "error":
                error: ExecutionError = value
                out.append(CellErrorLine(**error.model_dump()))
            elif kind == "done":
                execution: Execution = value
                out += [ExecutionCountLine(execution_count=execution.execution_count), EndOfExecutionLine()]
                finished = True
            else:
                out.append(exception_line(value))
                finished = True
        if out:
            yield b"".join(line(message) for message in out)
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
        try:
            result = process.result()
            end: Any = EndLine(exit_code=result.exit_code, error=result.error,
                             cpu_instructions_used=result.cpu_instructions_used)
        except SandboxException as exc:
            end = exception_line(exc)
        await websocket.send_text(end.model_dump_json(exclude_none=True))
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
