"""The backend contract: what the faces need from wherever sandboxes run.

The faces (`Sandbox`, `files`, `commands`, `pty`, `run_code`) run over it wherever
sandboxes run — this process (`_local/`), a `declaw-wasm serve` (`_remote/`),
and whatever comes next (a process pool, a Ray cluster). A face holds a `SandboxBackend` and
never knows how bytes move, as httpx's `Client` holds a transport.

The arguments are the wire's request models (wire/: `CreateSandbox`, `RunCommand`,
`CreatePty`, `RunCode`, `CreateContext`), so the server's routes, this contract and the remote
client are views of one list. Arguments are checked once, by the faces (`_args.py`), before
they reach a backend; a backend raises the public exceptions (exceptions.py) and nothing else.

`EventLog` is the pure, shared half of every `ProcessHandle`: a command's output as a list of
events that handles, callbacks and waiters all read. `CellNews` is its counterpart for a cell's
reports on their way to a reader in another thread (a pool's or Ray's stream, `serve`).
"""

from __future__ import annotations

import io
import threading
import time
from array import array
from dataclasses import dataclass
from typing import (TYPE_CHECKING, Any, Callable, IO, Iterator, List, Literal, Mapping, Optional, Protocol, Sequence,
                    Union)

from .exceptions import InvalidArgumentException
from .models import (CommandResult, EntryInfo, FilesystemEvent, ProcessInfo, PtySize, SandboxInfo,
                     SandboxMetrics, Snapshot, WriteInfo)
from .wire import CreateContext, CreatePty, CreateSandbox, ResumeSandbox, RunCode, RunCommand

if TYPE_CHECKING:  # run_code's types: loaded by those who run code
    from .execution import Context, Execution, OutputMessage

Stream = Literal["stdout", "stderr", "pty"]
Callback = Optional[Callable[[Any], Any]]
WriteData = Union[str, bytes, bytearray, memoryview, IO[str], IO[bytes]]


@dataclass(frozen=True)
class ToolSpec:
    """Host tools given to `create(tools=)` or `run_code(tools=)` (checked by `_args.tools`):
    callables of this process that the sandbox's code calls through `declaw_tools`. They travel
    in a request's `_host_only["tools"]`; `loop` is the anyio event-loop token of the async face
    that took them (coroutine functions run there), None for the sync face. Only a backend in
    this process (and a process pool, which calls back here) can call them."""

    functions: Mapping[str, Callable[..., Any]]
    loop: Any = None


def tools_unreachable(where: str) -> Exception:
    """The error for `tools=` given to a backend whose sandboxes run where this process's
    callables cannot be called."""
    return InvalidArgumentException(
        f"tools= (host callables) cannot reach a sandbox on {where}: the sandbox's code would "
        "call functions that live in this process; create the sandbox in-process (backend='local') "
        "or in a process pool (backend='processes')")


@dataclass
class Event:
    stream: Stream
    data: Any  # str for stdout/stderr, bytes for a PTY


STREAMS: tuple[Stream, ...] = ("stdout", "stderr", "pty")
MERGE = 64 << 10  # bytes an event may grow to by taking in later writes nobody has read yet


class EventLog:
    """A command's output as a sequence of events; `done` says no more will come. Subclasses set
    `_cond` and `_callbacks`, call `_emit` for each write, and say when they are done.

    Stored compactly, so what the host holds per output stream is proportional to the bytes kept
    (the sandbox's output limit), whatever the sizes of the writes: each stream's data in one
    buffer (text as UTF-8, with `surrogatepass`), and per event only its stream and where it
    starts and ends there (17 bytes). Writes that nobody has read yet join the last event of their stream
    (one event back at most, so alternating stdout and stderr merge too), up to `MERGE` bytes;
    an event once handed out never changes, so indices stay valid. `Event` objects are made only
    for the events a reader asks for."""

    _cond: threading.Condition
    _callbacks: dict[str, Callback]
    _buffers: Optional[dict[Stream, bytearray]] = None
    _kinds: bytearray  # per event: its stream's index in STREAMS
    _starts: "array[int]"  # per event: where its data starts in its stream's buffer...
    _ends: "array[int]"  # ...and where it ends
    _handed = 0  # events [0, _handed) were handed to a reader: they never change

    @property
    def done(self) -> bool:
        raise NotImplementedError

    def _store(self) -> dict[Stream, bytearray]:
        if self._buffers is None:
            self._buffers = {name: bytearray() for name in STREAMS}
            self._kinds = bytearray()
            self._starts = array("q")
            self._ends = array("q")
        return self._buffers

    def _emit(self, stream: Stream, data: Any) -> None:
        raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
        with self._cond:
            buffers = self._store()
            kind = STREAMS.index(stream)
            buffer = buffers[stream]
            buffer += raw
            count = len(self._kinds)
            merged = False
            for back in (1, 2):  # the last event of this stream, if nobody has read it or what follows
                i = count - back
                if i < self._handed:
                    break
                if self._kinds[i] == kind:
                    if self._ends[i] - self._starts[i] + len(raw) <= MERGE:
                        self._ends[i] = len(buffer)
                        merged = True
                    break
            if not merged:
                self._kinds.append(kind)
                self._starts.append(len(buffer) - len(raw))
                self._ends.append(len(buffer))
            self._cond.notify_all()
        callback = self._callbacks.get(stream)
        if callback is not None:
            try:
                callback(data)
            except Exception:  # a caller's callback bug must not break the command
                pass

    def _count(self) -> int:
        return 0 if self._buffers is None else len(self._kinds)

    def _take(self, start: int) -> List[Event]:
        """Events `start`... as objects (under `_cond`); they are handed out from now on."""
        count = self._count()
        if start >= count:
            return []
        assert self._buffers is not None
        self._handed = max(self._handed, count)
        out: List[Event] = []
        for i in range(start, count):
            name = STREAMS[self._kinds[i]]
            chunk = bytes(self._buffers[name][self._starts[i]:self._ends[i]])
            out.append(Event(name, chunk if name == "pty" else chunk.decode("utf-8", "surrogatepass")))
        return out

    def set_callbacks(self, **callbacks: Callback) -> None:
        for stream, callback in callbacks.items():
            if callback is not None:
                self._callbacks[stream] = callback

    def text(self, stream: str) -> str:
        """Everything written to `stream` so far."""
        with self._cond:
            buffer = None if self._buffers is None else self._buffers.get(stream)  # type: ignore[call-overload]
            return "" if buffer is None else buffer.decode("utf-8", "surrogatepass" if stream != "pty" else "replace")

    def outline(self, stream: Stream, chars: int) -> tuple[int, str, str]:
        """`stream`'s size in bytes, its first `chars` characters and its last `chars` ("" when
        the first have it all), read without copying the whole stream (the sandbox's journal)."""
        with self._cond:
            buffer = None if self._buffers is None else self._buffers.get(stream)
            if not buffer:
                return 0, "", ""
            size, span = len(buffer), 4 * chars  # a character is at most 4 bytes of UTF-8
            if size <= span:
                text = buffer.decode("utf-8", "replace")
                return size, text[:chars], text[-chars:] if len(text) > chars else ""
            return (size, bytes(buffer[:span]).decode("utf-8", "replace")[:chars],
                    bytes(buffer[-span:]).decode("utf-8", "replace")[-chars:])

    def events(self, start: int = 0) -> Iterator[Event]:
        """Every event from `start` on, waiting for more until the command has ended."""
        index = start
        while True:
            with self._cond:
                while index >= self._count() and not self.done:
                    self._cond.wait(0.1)
                batch = self._take(index)
                if not batch:
                    return
            index += len(batch)
            yield from batch

    def events_since(self, start: int, wait: float) -> tuple[List[Event], bool]:
        """The events from `start` on, waiting at most `wait` seconds for one; and whether the
        command has ended (then the list holds everything left). For streams that must not
        hold a thread for as long as a quiet command runs (the server's)."""
        deadline = time.monotonic() + wait
        with self._cond:
            while start >= self._count() and not self.done:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, 0.1))
            return self._take(start), self.done

    def read_raw(self, start: int, skip: int, room: int) -> tuple[List[tuple[Stream, bytes]], int, int, bool]:
        """Without waiting: the events from `start` on (`skip` bytes of it read already) as their
        raw pieces (UTF-8, `surrogatepass`), `room` bytes at most in all; where the next read
        starts; and whether the command has ended and everything is read. Copies only what it
        returns, however much the stream holds (a `python3 ... &` job reads its program's)."""
        pieces: List[tuple[Stream, bytes]] = []
        with self._cond:
            done = self.done
            count = self._count()
            if self._buffers is not None and start < count:
                self._handed = max(self._handed, count)  # what is handed out never grows (merging)
                while start < count and room > 0:
                    name = STREAMS[self._kinds[start]]
                    begin, end = self._starts[start] + max(skip, 0), self._ends[start]
                    take = max(min(end - begin, room), 0)
                    if take:
                        pieces.append((name, bytes(self._buffers[name][begin:begin + take])))
                        room -= take
                    if begin + take >= end:
                        start, skip = start + 1, 0
                    else:
                        skip = begin + take - self._starts[start]
            return pieces, start, skip, done and start >= count


class CellNews:
    """A cell's reports (`run_code`'s callbacks) on their way to a reader on another thread: a
    pool worker's or a Ray actor's stream (_pool/host.py), `serve`'s NDJSON (server/streams.py).
    The cell's callbacks `log` and `put` and never wait; the reader `take`s what has come.

    While the reader is behind (a slow `on_stdout` in the pool's process, a `serve` client that
    stopped reading), a log joins the last log of its stream not taken yet, as EventLog's
    events do: one report back at most, so alternating stdout and stderr merge too, never past
    a result or an error, up to MERGE characters; the merged message keeps its first write's
    timestamp. So what waits here is the cell's text (within its output limit, kernel.py
    `_Cell`) and a message or two per result, not a message per write: a million one-character
    writes behind a reader that stopped reading hold a megabyte, not half a gigabyte."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        # [kind, value], or for a log [kind, OutputMessage, joined writes (StringIO) or None, length]
        self._items: List[List[Any]] = []

    def log(self, kind: str, message: OutputMessage) -> None:
        """A log message (`kind`: how the reader names its stream; stdout and stderr differ in
        `message.error`)."""
        text = message.line
        with self._cond:
            items = self._items
            for back in (1, 2):
                if back > len(items) or len(items[-back]) != 4:
                    break  # logs never join past a result or an error
                item = items[-back]
                if item[0] == kind and item[1].error == message.error:
                    if item[3] + len(text) <= MERGE:
                        joined = item[2]
                        if joined is None:
                            joined = item[2] = io.StringIO()
                            joined.write(item[1].line)
                        joined.write(text)
                        item[3] += len(text)
                        return
                    break
            items.append([kind, message, None, len(text)])
            self._cond.notify_all()

    def put(self, kind: str, value: Any) -> None:
        with self._cond:
            self._items.append([kind, value])
            self._cond.notify_all()

    def take(self, wait: float) -> List[tuple[str, Any]]:
        """Everything reported since the last take (waiting up to `wait` s for something)."""
        with self._cond:
            if not self._items:
                self._cond.wait(wait)
            items, self._items = self._items, []
        out: List[tuple[str, Any]] = []
        for item in items:
            if len(item) == 4 and item[2] is not None:
                out.append((item[0], item[1].model_copy(update={"line": item[2].getvalue()})))
            else:
                out.append((item[0], item[1]))
        return out


class ProcessHandle(Protocol):
    """A command or PTY, in this process or elsewhere (an `EventLog` plus control)."""

    pid: int
    cmd: str

    @property
    def done(self) -> bool: ...
    def events(self, start: int = 0) -> Iterator[Event]: ...
    def events_since(self, start: int, wait: float) -> tuple[List[Event], bool]: ...
    def text(self, stream: str) -> str: ...
    def set_callbacks(self, **callbacks: Callback) -> None: ...
    def result(self) -> CommandResult:
        """Wait for the end: a timeout raises `TimeoutException` (with the output so far), a
        killed command gives exit code 137, a killed sandbox raises `SandboxException`."""
    def kill(self) -> bool: ...
    def send_stdin(self, data: bytes) -> None: ...
    def close_stdin(self) -> None: ...
    def resize(self, size: PtySize) -> None: ...


class Chunks(Protocol):
    """A file's bytes as they are read; close it when done early."""

    def __iter__(self) -> Iterator[bytes]: ...
    def __next__(self) -> bytes: ...
    def close(self) -> None: ...


class Watcher(Protocol):
    """A watch on a folder of the sandbox (`files.watch_dir`)."""

    def events(self) -> List[FilesystemEvent]:
        """The events since the last call (paths in the guest's namespace)."""
    def stop(self) -> None: ...
    @property
    def stopped(self) -> bool: ...


class SandboxBackend(Protocol):
    """One sandbox, wherever it runs."""

    @property
    def sandbox_id(self) -> str: ...
    def info(self) -> SandboxInfo: ...
    def is_running(self) -> bool: ...
    def set_timeout(self, timeout: float) -> None: ...
    def kill(self) -> bool: ...
    def audit_events(self) -> List[Any]:
        """The sandbox's outbound network events (`AuditEvent`s), oldest first."""
    def events(self, since: int = 0) -> List[Any]:
        """The sandbox's events (events.py) with a sequence number above `since`, oldest first."""
    def metrics(self) -> SandboxMetrics: ...
    def get_host(self, port: int) -> str:
        """Where a server on the sandbox's `port` is reached (a host, no scheme)."""
    def traffic_access_token(self) -> Optional[str]:
        """The token inbound requests must carry, or None (public)."""

    # files (paths in the guest's namespace)
    def read(self, path: str, gzip: bool = False) -> Chunks:
        """The file's bytes; `gzip`: how they travel, for a backend that moves them (E2B's)."""
    def write(self, path: str, data: WriteData, metadata: Optional[dict[str, str]] = None,
              gzip: bool = False, octet_stream: Optional[bool] = None) -> WriteInfo:
        """Create or overwrite a file; `metadata` (checked) replaces the file's, None clears it.
        `gzip` and `octet_stream` (E2B's `use_octet_stream`) say how the bytes travel, for a
        backend that moves them; the file is the same."""
    def write_files(self, entries: Sequence[tuple[str, WriteData]],
                    metadata: Optional[dict[str, str]] = None, gzip: bool = False,
                    octet_stream: Optional[bool] = None) -> List[WriteInfo]:
        """`write` for several files, in order, as one call where the backend can (one quota
        walk in process, one round trip to a worker or a server)."""
    def file_url(self, path: str, write: bool, user: Optional[str], expires_in: Optional[int]) -> str:
        """A URL that reads (`write`: writes) the file without an API key (E2B's
        `download_url`/`upload_url`), signed for a secure sandbox, expiring after `expires_in` s."""
    def watch(self, path: str, recursive: bool, include_entry: bool) -> Watcher:
        """Watch a folder (`FileNotFoundException` if missing, `InvalidArgumentException` if a file)."""
    def list(self, path: str, depth: int) -> List[EntryInfo]: ...
    def get_info(self, path: str) -> EntryInfo: ...
    def exists(self, path: str) -> bool: ...
    def remove(self, path: str) -> None: ...
    def rename(self, old_path: str, new_path: str) -> EntryInfo: ...
    def make_dir(self, path: str) -> bool: ...

    # commands and PTYs
    def start(self, request: Union[RunCommand, CreatePty], on_stdout: Callback = None,
              on_stderr: Callback = None, on_pty: Callback = None) -> ProcessHandle: ...
    def process(self, pid: int, pty: bool = False) -> ProcessHandle:
        """The running command (or, with `pty`, PTY) `pid`; `NotFoundException` if none."""
    def processes(self) -> List[ProcessInfo]: ...
    def kill_process(self, pid: int) -> bool: ...
    def send_stdin(self, pid: int, data: bytes) -> None: ...
    def close_stdin(self, pid: int) -> None: ...
    def resize_pty(self, pid: int, size: PtySize) -> None: ...

    # code contexts
    def run_code(self, request: RunCode, on_stdout: Callback = None, on_stderr: Callback = None,
                 on_result: Callback = None, on_error: Callback = None) -> Execution: ...
    def create_context(self, request: CreateContext) -> Context: ...
    def list_contexts(self) -> List[Context]: ...
    def restart_context(self, context_id: str) -> None: ...
    def remove_context(self, context_id: str) -> None: ...

    # state (docs/state.md): snapshots in the state store, pause and resume, fork
    def create_snapshot(self, name: Optional[str] = None) -> Snapshot:
        """Snapshot files and code contexts into the state store (source "manual"); `name`
        listed in its `names`."""
    def list_snapshots(self) -> List[Snapshot]: ...
    def delete_snapshot(self, snapshot_id: str) -> bool: ...
    def pause(self, keep_memory: bool = True) -> bool:
        """Snapshot (source "pause") and free the sandbox; False if it was paused already.
        Without `keep_memory`, the files alone (its code contexts start afresh)."""
    def resume(self, request: ResumeSandbox) -> None:
        """Bring the paused sandbox back, in place."""
    def fork(self, count: int) -> Sequence["SandboxBackend"]:
        """`count` new sandboxes with this one's files and code contexts."""


class Sandboxes(Protocol):
    """Where sandboxes live: this process, or a server."""

    def create(self, request: CreateSandbox) -> SandboxBackend: ...
    def connect(self, sandbox_id: str, timeout: Optional[float] = None) -> SandboxBackend:
        """The live sandbox `sandbox_id` (`SandboxNotFoundException` if none); a `timeout`
        longer than what it has left extends its lifetime, a shorter one changes nothing. A
        paused one is answered as it is (`info().state` paused; `resume()` brings it back)."""
    def list(self) -> List[SandboxInfo]:
        """The live sandboxes, newest first (and the paused ones of the state store)."""
    def restore(self, sandbox_id: str, snapshot_id: Optional[str], request: ResumeSandbox) -> SandboxBackend:
        """declaw's `restore`: the sandbox remade (same id) from one of its snapshots (None: the
        latest, preferring pause > periodic > manual)."""
    def list_snapshots(self, sandbox_id: Optional[str] = None) -> List[Snapshot]:
        """Snapshots in the state store (of one sandbox, or all), newest first."""
    def delete_snapshot(self, sandbox_id: str, snapshot_id: str) -> bool:
        """Delete a snapshot of a sandbox, running or not (False: there was none)."""
