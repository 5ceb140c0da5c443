"""`Host`: the sandboxes one worker hosts (a pool's worker process, or a Ray actor), and every
call a client may make on them, answered as values.

A host is the in-process backend (`LocalSandboxes`) seen from outside: `call` runs one contract
method and returns its value; `stream` runs a command (its start, its output in batches, its
end), or a cell with callbacks, as a sequence of messages. Neither raises: a failure is an
`("error", ErrorBody)` reply, which the client turns back into the same exception class (wire/,
as the server does), so every backend raises what the in-process one raises. Large files move
in sessions of bounded chunks (`read_open`/`read_next`, `write_open`/`write_chunk`/`write_close`),
pulled by the client, so no message is ever larger than the transport allows.

Each message of a stream is a list of wire/'s line models, made by _lines.py as the server's
NDJSON lines are: a command's `[StartLine]`, then its output lines in batches of at most `limit`
bytes of data, the last batch ending with its `EndLine` (or `ExceptionLine`); a cell's log,
result and error lines as they come, then `ExecutionCountLine, EndOfExecutionLine` (or an
`ExceptionLine`). The client reads them with _lines.py's handles.
"""

from __future__ import annotations

import os
import queue
import secrets
import threading
import time
from collections import OrderedDict
from typing import Any, Callable, Generator, Iterator, Optional, cast

from .._args import checkpoint_policy
from .._backend import tools_unreachable
from .._lines import cell_lines, end_line, event_line, start_cell
from .._local import checkpoints
from .._local.checkpoints import Checkpoints
from .._local.files import FileChunks
from .._local.snapshots import owner
from .._state import RecordNotFound, keys
from .._local.sandbox import LocalSandbox, LocalSandboxes
from ..exceptions import NotFoundException, RateLimitException, SandboxException
from ..wire import ErrorBody, ExceptionLine, OutputLine, PtyLine, StartLine, error_body

Reply = tuple[Any, ...]  # (kind, payload...)
POLL = 1.0  # seconds a stream waits for output before looking again
PACE = 0.005  # seconds between a command's output messages while output keeps coming (see _pump)
KEEP_ENDED = 1000  # ended sandboxes kept known, so calls on them say why they ended
STALLED = 300.0  # seconds an upload waits for its next chunk
MAX_SESSIONS = 1024  # open file sessions per host; the oldest is closed past that

SANDBOX_CALLS = frozenset({
    "info", "is_running", "set_timeout", "kill", "write", "write_files", "list", "get_info", "exists", "remove",
    "rename", "make_dir", "processes", "kill_process", "send_stdin", "close_stdin", "resize_pty",
    "run_code", "create_context", "list_contexts", "restart_context", "remove_context",
    "audit_events", "events", "metrics", "create_snapshot", "list_snapshots", "delete_snapshot", "pause",
    "file_url", "get_host", "traffic_access_token"})
HOST_CALLS = frozenset({"create", "connect", "list_sandboxes", "load", "read_open", "read_next",
                        "read_close", "write_open", "write_chunk", "write_close", "write_abort",
                        "watch_open", "watch_events", "watch_stop", "resume", "restore", "fork",
                        "snapshots", "drop_snapshot", "recover", "owner"})
# calls after which a checkpointed sandbox is checkpointed (_local/checkpoints.py), if they changed it
TURNS = frozenset({"run_code", "write", "write_files", "remove", "rename", "make_dir", "create_context",
                   "restart_context", "remove_context"})


class _Failed(SandboxException):
    """An error reply raised through `call` (its body is what the client gets)."""

    def __init__(self, body: ErrorBody) -> None:
        super().__init__(body.message)
        self.body = body


def error(exc: BaseException) -> Reply:
    """A failure as a reply; a command's timeout without its output (the client has it)."""
    if isinstance(exc, _Failed):
        return ("error", exc.body)
    body = error_body(exc)
    body.stdout = body.stderr = None
    return ("error", body)


def exception(exc: BaseException) -> ExceptionLine:
    """A stream's failure as its last line (without a timeout's output: the client has it)."""
    return ExceptionLine(**error(exc)[1].model_dump())


def data_size(lines: list[Any]) -> int:
    """The output data in a message of lines."""
    return sum(len(line.data) for line in lines if isinstance(line, (OutputLine, PtyLine)))


def split(events: list[Any], limit: int) -> Iterator[list[Any]]:
    """Output lines in batches of at most `limit` bytes of data each (one event may be larger)."""
    batch: list[Any] = []
    size = 0
    for event in events:
        if batch and size + len(event.data) > limit:
            yield batch
            batch, size = [], 0
        batch.append(event_line(event))
        size += len(event.data)
    if batch:
        yield batch


class _Download:
    """A file being read, in chunks of the size the client asks for."""

    def __init__(self, chunks: FileChunks) -> None:
        self._chunks = chunks
        self._buffer = b""

    def next(self, size: int) -> bytes:
        """Up to `size` bytes (at least 1); b"" at the end."""
        if not self._buffer:
            self._buffer = next(self._chunks, b"")
        data, self._buffer = self._buffer[:max(1, size)], self._buffer[max(1, size):]
        return data

    def at_end(self) -> bool:
        if not self._buffer:
            self._buffer = next(self._chunks, b"")
        return not self._buffer

    def close(self) -> None:
        self._chunks.close()


class _Upload:
    """A file being written from chunks the client sends: `SandboxFS.write` reads them from a
    bounded queue on a thread of its own, as it reads any file object."""

    def __init__(self, sandbox: LocalSandbox, path: str, metadata: Optional[dict[str, str]] = None) -> None:
        self._chunks: "queue.Queue[Optional[bytes]]" = queue.Queue(maxsize=8)
        self._buffer: Optional[bytes] = b""
        self.outcome: Optional[Reply] = None
        self.sandbox = sandbox
        self._thread = threading.Thread(target=self._write, args=(sandbox, path, metadata), daemon=True,
                                        name="declaw-host-upload")
        self._thread.start()

    def _write(self, sandbox: LocalSandbox, path: str, metadata: Optional[dict[str, str]]) -> None:
        try:
            self.outcome = ("ok", sandbox.write(path, cast(Any, self), metadata))  # a file object
        except BaseException as exc:  # reported by the next chunk or the close
            self.outcome = error(exc)

    def read(self, size: int = -1) -> bytes:
        if not self._buffer:
            try:
                self._buffer = self._chunks.get(timeout=STALLED)
            except queue.Empty:
                raise SandboxException(f"an upload got no data for {STALLED} s") from None
            if self._buffer is None:
                raise SandboxException("the upload was abandoned by its client")
        n = len(self._buffer) if size is None or size < 0 else size
        data, self._buffer = self._buffer[:n], self._buffer[n:]
        return data

    def put(self, data: Optional[bytes]) -> Optional[Reply]:
        """Queue a chunk (b"": the end); the write's failure if it has already failed."""
        while self.outcome is None:
            try:
                self._chunks.put(data, timeout=0.1)
                return None
            except queue.Full:
                continue
        return self.outcome if self.outcome[0] == "error" else None

    def abort(self) -> None:
        self.put(None)

    def finish(self) -> Reply:
        failed = self.put(b"")
        self._thread.join()
        return failed or self.outcome or ("error", ErrorBody(error="SandboxException",
                                                             message="the upload did not finish"))


class _Pull:
    """A stream's messages for a client that pulls them in calls of its own (Ray: each pull is a
    plain actor call answering bytes, so nothing the driver reads is unpickled): made on a
    thread into a bounded queue (the stream waits while its client does not pull), taken by
    `take` a batch at a time. A stream nobody pulls for `STALLED` s is closed."""

    DEPTH = 64  # messages made ahead of the client's pulls

    def __init__(self, messages: Generator[list[Any], None, None]) -> None:
        self._messages = messages
        self._queue: "queue.Queue[Optional[list[Any]]]" = queue.Queue(self.DEPTH)
        self._closed = threading.Event()
        self._ended = False
        self._pulled = time.monotonic()
        threading.Thread(target=self._make, name="declaw-host-pull", daemon=True).start()

    def _make(self) -> None:
        try:
            for message in self._messages:
                if not self._put(message):
                    return
        except BaseException as exc:  # the stream broke: its client hears why
            self._put([exception(exc)])
        finally:
            self._messages.close()
            self._put(None)

    def _put(self, message: Optional[list[Any]]) -> bool:
        while not self._closed.is_set():
            try:
                self._queue.put(message, timeout=1.0)
                return True
            except queue.Full:
                if time.monotonic() - self._pulled > STALLED:
                    self._closed.set()
        return False

    LINGER = 0.005  # seconds a pull waits for a further message once it has one (a short command's all)
    MAX_LINGER = 0.05

    def take(self, wait: float, limit: int) -> tuple[list[list[Any]], bool]:
        """The messages made so far (waiting up to `wait` s for one, then while more keep coming
        within `LINGER` s of each other, `MAX_LINGER` at most: a short command's start, output
        and end in one answer), up to about `limit` bytes of output; and whether the stream has
        ended."""
        self._pulled = time.monotonic()
        taken: list[list[Any]] = []
        size = 0
        timeout: Optional[float] = wait
        until = 0.0
        while not self._ended and size < limit:
            try:
                message = self._queue.get(timeout=timeout) if timeout else self._queue.get_nowait()
            except queue.Empty:
                break
            now = time.monotonic()
            until = until or now + self.MAX_LINGER
            timeout = min(self.LINGER, max(0.0, until - now)) or None
            if message is None:
                self._ended = True
                break
            taken.append(message)
            size += data_size(message)
        return taken, self._ended

    def close(self) -> None:
        self._closed.set()


class Host:
    """The sandboxes of one worker or actor. `tools` makes the stand-in for host tools lent by
    the client (`[token, {name: description}]`), whose calls go back to it; None: this host
    cannot call back (Ray), and tools are refused."""

    def __init__(self, label: str = "", tools: Optional[Callable[[str, dict[str, str]], Any]] = None) -> None:
        self.label = label or f"pid {os.getpid()}"
        keys.host_process(self.label)  # the state key comes with the client's calls, from nowhere else
        self._tools = tools
        self.sandboxes = LocalSandboxes()
        self.sandboxes.hosted = True
        self._lock = threading.Lock()
        self._mine: "OrderedDict[str, LocalSandbox]" = OrderedDict()  # made here, ended ones too
        self._reported: set[str] = set()
        self._sessions: "OrderedDict[str, Any]" = OrderedDict()

    # -- plain calls -------------------------------------------------------------------------------
    def call(self, sandbox_id: Optional[str], method: str, args: list[Any], state_key: Any = None) -> Reply:
        """One call. `state_key`: the client's state key (or why it has none), sent with the calls
        that may use the state store (client.py `KEYED`): this process signs and checks the
        store's records with the last one given (_state/keys.py)."""
        try:
            if state_key is not None:
                keys.give(state_key)
            if sandbox_id is None:
                if method not in HOST_CALLS:
                    raise SandboxException(f"unknown host call {method!r}")
                return ("ok", getattr(self, "_" + method)(*args))
            if method not in SANDBOX_CALLS:
                raise SandboxException(f"unknown sandbox call {method!r}")
            if method == "run_code":
                args = [self._with_tools(*args)]
            sandbox = self.sandbox(sandbox_id)
            value = getattr(sandbox, method)(*args)
            if method in TURNS:
                after_turn(sandbox, method)
            return ("ok", value)
        except BaseException as exc:
            return error(exc)

    def sandbox(self, sandbox_id: str) -> LocalSandbox:
        """A sandbox made here (running or not: its calls then say how it ended), or any live one."""
        with self._lock:
            sandbox = self._mine.get(sandbox_id)
        return sandbox if sandbox is not None else self.sandboxes.connect(sandbox_id)

    def _with_tools(self, request: Any, lent: Optional[list[Any]] = None) -> Any:
        """`request` with the stand-in for the host tools the client lent (`lent`), if any."""
        if lent is not None:
            if self._tools is None:
                raise tools_unreachable(self.label)
            token, descriptions = lent
            request._host_only["tools"] = self._tools(str(token), dict(descriptions))
        return request

    def _create(self, request: Any, secrets: Any = None, tools: Optional[list[Any]] = None) -> str:
        """A sandbox; `secrets` (the client's `create_arguments`) and the lent `tools` arrive
        beside the request."""
        if secrets is not None:
            from .._egress.create import host_only_of

            request._host_only = host_only_of(secrets)
        sandbox = self.sandboxes.create(self._with_tools(request, tools))
        if checkpoint_policy(sandbox.options.lifecycle):
            sandbox.checkpoints = Checkpoints()
            after_turn(sandbox, "create")  # a lost host's sandbox comes back even before its first turn
        with self._lock:
            self._mine[sandbox.sandbox_id] = sandbox
            ended = [i for i, s in self._mine.items() if not s.running]
            for sandbox_id in ended[: max(0, len(ended) - KEEP_ENDED)]:
                del self._mine[sandbox_id]
                self._reported.discard(sandbox_id)
        return sandbox.sandbox_id

    def _connect(self, sandbox_id: str, timeout: Optional[float]) -> str:
        return self.sandboxes.connect(sandbox_id, timeout).sandbox_id

    def _list_sandboxes(self) -> list[Any]:
        return self.sandboxes.list()

    # -- state (the store is shared: a sandbox paused by one host resumes on another) -------------------
    def _keep(self, sandbox: LocalSandbox) -> str:
        if sandbox.checkpoints is None and checkpoint_policy(sandbox.options.lifecycle):
            sandbox.checkpoints = Checkpoints()
        with self._lock:
            self._mine[sandbox.sandbox_id] = sandbox
            self._reported.discard(sandbox.sandbox_id)
        return sandbox.sandbox_id

    def _resume(self, sandbox_id: str, request: Any) -> str:
        husk = self.sandbox(sandbox_id)
        return self._keep(self.sandboxes.resume(sandbox_id, request, into=husk if husk.paused else None))

    def _restore(self, sandbox_id: str, snapshot_id: Optional[str], request: Any) -> str:
        return self._keep(self.sandboxes.restore(sandbox_id, snapshot_id, request))

    def _recover(self, sandbox_id: str, breaking: str, secrets: Any = None) -> list[Any]:
        """A checkpointed sandbox whose host died (its lease owner `breaking`), restored here from
        its latest checkpoint with the create's `secrets` again: [id, turn, what ended the turn]."""
        from .._egress.create import host_only_of
        from .._local.snapshots import snapshot_store
        from ..wire import ResumeSandbox

        try:
            record = checkpoints.latest(snapshot_store(), sandbox_id)
        except RecordNotFound:
            raise NotFoundException(f"sandbox {sandbox_id} has no checkpoint in the state store (DECLAW_WASM_STATE "
                                    "must be one store every host reaches)") from None
        request = ResumeSandbox()
        if secrets is not None:
            request._host_only = host_only_of(secrets)
        sandbox = self.sandboxes.restore(sandbox_id, record.snapshot_id, request, breaking=breaking)
        turn, what = checkpoints.turn_of(record)
        sandbox.checkpoints = Checkpoints(record, turn)
        self._keep(sandbox)
        return [sandbox.sandbox_id, turn, what]

    def _owner(self) -> str:
        """This host's name on the leases it takes (a driver breaks them when it knows it died)."""
        return owner()

    def _fork(self, sandbox_id: str, count: int) -> list[str]:
        return [self._keep(fork) for fork in self.sandbox(sandbox_id).fork(count)]

    def _snapshots(self, sandbox_id: Optional[str]) -> list[Any]:
        return self.sandboxes.list_snapshots(sandbox_id)

    def _drop_snapshot(self, sandbox_id: str, snapshot_id: str) -> bool:
        return self.sandboxes.delete_snapshot(sandbox_id, snapshot_id)

    def _load(self) -> int:
        """How many sandboxes live here (placement's measure)."""
        with self._lock:
            return sum(1 for s in self._mine.values() if s.running)

    def ended(self) -> list[str]:
        """Sandboxes made here that ended since the last call (timed out, or killed)."""
        with self._lock:
            gone = [i for i, s in self._mine.items() if not s.running and not s.paused and i not in self._reported]
            self._reported.update(gone)
        return gone

    # -- file sessions ----------------------------------------------------------------------------
    def _session(self, value: Any) -> str:
        token = secrets.token_hex(8)
        with self._lock:
            self._sessions[token] = value
            old = self._sessions.popitem(last=False)[1] if len(self._sessions) > MAX_SESSIONS else None
        if isinstance(old, (_Download, _Pull)):
            old.close()
        return token

    def _take(self, token: str) -> Any:
        with self._lock:
            value = self._sessions.get(token)
        if value is None:
            raise NotFoundException("this file transfer was closed (too many open at once?)")
        return value

    def _close(self, token: str) -> Any:
        with self._lock:
            return self._sessions.pop(token, None)

    def _read_open(self, sandbox_id: str, path: str, size: int) -> list[Any]:
        """[token or None, first chunk]: a file that fits in one chunk needs no session."""
        download = _Download(self.sandbox(sandbox_id).read(path))
        try:
            data = download.next(size)
            if download.at_end():
                return [None, data]
        except BaseException:
            download.close()
            raise
        return [self._session(download), data]

    def _read_next(self, token: str, size: int) -> bytes:
        """Up to `size` bytes; b"" at the end (the session is then closed)."""
        download: _Download = self._take(token)
        try:
            data = download.next(size)
        except BaseException:
            self._read_close(token)
            raise
        if not data:
            self._read_close(token)
        return data

    def _read_close(self, token: str) -> None:
        download = self._close(token)
        if download is not None:
            download.close()

    def _write_open(self, sandbox_id: str, path: str, metadata: Optional[dict[str, str]] = None) -> str:
        with self._lock:
            if len(self._sessions) >= MAX_SESSIONS:
                raise RateLimitException("too many file transfers at once on this host")
        return self._session(_Upload(self.sandbox(sandbox_id), path, metadata))

    def _write_chunk(self, token: str, data: bytes) -> None:
        failed = self._take(token).put(bytes(data)) if data else None
        if failed is not None:
            self._close(token)
            raise _Failed(failed[1])

    def _write_abort(self, token: str) -> None:
        """The client failed mid-upload: the write fails (and its thread ends) at once."""
        upload = self._close(token)
        if upload is not None:
            upload.abort()

    def _write_close(self, token: str) -> Any:
        upload = self._close(token)
        if upload is None:
            raise NotFoundException("this upload was closed")
        outcome = upload.finish()
        if outcome[0] == "error":
            raise _Failed(outcome[1])
        after_turn(upload.sandbox, "write")
        return outcome[1]

    # -- watches (files.watch_dir): the client polls a watch's events -------------------------------
    def _watch_open(self, sandbox_id: str, path: str, recursive: bool, include_entry: bool) -> str:
        return self._session(self.sandbox(sandbox_id).watch(path, recursive, include_entry))

    def _watch_events(self, token: str) -> list[Any]:
        return list(self._take(token).events())

    def _watch_stop(self, token: str) -> None:
        watcher = self._close(token)
        if watcher is not None:
            watcher.stop()

    # -- streams pulled a batch at a time (Ray) ---------------------------------------------------
    def pull_open(self, sandbox_id: str, op: str, args: list[Any], wait: float,
                  limit: int) -> tuple[Optional[str], list[list[Any]]]:
        """Start a stream (`stream`'s ops) for a client that pulls it: its first messages
        (waiting up to `wait` s for one) and the token its next pulls name (None: it ended)."""
        pull = _Pull(self.stream(sandbox_id, op, args, limit))
        messages, ended = pull.take(wait, limit)
        return (None if ended else self._session(pull)), messages

    def pull_next(self, token: str, wait: float, limit: int) -> tuple[bool, list[list[Any]]]:
        """The stream's next messages (waiting up to `wait` s for one), and whether it ended
        (its session is then closed)."""
        pull: _Pull = self._take(token)
        messages, ended = pull.take(wait, limit)
        if ended:
            self._close(token)
        return ended, messages

    def pull_close(self, token: str) -> None:
        pull = self._close(token)
        if isinstance(pull, _Pull):
            pull.close()

    # -- streams ----------------------------------------------------------------------------------
    def stream(self, sandbox_id: str, op: str, args: list[Any],
               limit: int = 1 << 20) -> Generator[list[Any], None, None]:
        """A command's (`start`, `attach`) or a cell's (`run_code`) messages; `limit` bounds the
        output data in one message."""
        try:
            sandbox = self.sandbox(sandbox_id)
            if op == "start":
                process: Any = sandbox.start(args[0])
            elif op == "attach":
                process = sandbox.process(int(args[0]), bool(args[1]))
            elif op == "follow":  # the rest of a `run` that did not end in its call
                process, index = self._close(str(args[0])) or (None, 0)
                if process is None:
                    raise NotFoundException("this command's stream was closed (too many open at once?)")
                yield from _pump(process, limit, lambda: after_turn(sandbox, "command"), index)
                return
            elif op == "run_code":
                yield from self._cell(sandbox, self._with_tools(*args))
                return
            else:
                raise SandboxException(f"unknown stream {op!r}")
        except BaseException as exc:
            yield [exception(exc)]
            return
        yield [StartLine(pid=process.pid)]
        yield from _pump(process, limit, lambda: after_turn(sandbox, "command"))

    def run(self, sandbox_id: str, request: Any, wait: float,
            limit: int = 1 << 20) -> tuple[list[list[Any]], Optional[str]]:
        """A foreground command nobody streams (no callbacks) in one call: its messages (start,
        output, end) if it ends within `wait` seconds and `limit` bytes of output; else those so
        far and a token whose `follow` stream carries the rest. One call instead of a stream of
        three messages or more: on Ray each further pull costs a round trip."""
        try:
            sandbox = self.sandbox(sandbox_id)
            process: Any = sandbox.start(request)
        except BaseException as exc:
            return [[exception(exc)]], None
        messages: list[list[Any]] = [[StartLine(pid=process.pid)]]

        def ended() -> None:
            after_turn(sandbox, "command")
        deadline = time.monotonic() + wait
        got: list[Any] = []
        size = 0
        while True:
            events, done = process.events_since(len(got), max(0.0, deadline - time.monotonic()))
            got += events
            size += sum(len(e.data) for e in events)
            if done:
                return messages + list(_ending(process, got, 0, limit, ended)), None
            if size >= limit or time.monotonic() >= deadline:
                messages += list(split(got, limit))
                return messages, self._session((process, len(got)))
            if events:  # output keeps coming: let it gather (see _pump), unless it ends
                process.wait(max(0.0, min(PACE, deadline - time.monotonic())))

    def _cell(self, sandbox: LocalSandbox, request: Any) -> Iterator[list[Any]]:
        """A cell's lines as they come; while its client is behind (the stream's sender waits
        for the client to take earlier messages), later logs join those waiting (CellNews)."""
        news = start_cell(sandbox.run_code, request, after=lambda: after_turn(sandbox, "run_code"))
        while True:
            lines, finished = cell_lines(news.take(POLL), output=False)
            if lines:
                yield lines
            if finished:
                return


def after_turn(sandbox: LocalSandbox, what: str) -> None:
    """Checkpoint a checkpointed sandbox after a turn, before its reply goes (checkpoints.py)."""
    if sandbox.checkpoints is not None:
        sandbox.checkpoints.after_turn(sandbox, what)


def _pump(process: Any, limit: int, ended: Callable[[], None], index: int = 0) -> Iterator[list[Any]]:
    """A command's lines from its event `index` on, until its end. Output that keeps coming
    is sent at most every `PACE` s (a first write goes at once): meanwhile later writes join
    the events not read yet (_backend.EventLog), so a guest's million 1-byte writes cross as a
    few hundred messages, not a million events the client would queue."""
    sent = 0.0
    while True:
        gap = sent + PACE - time.monotonic()
        if gap > 0:
            process.wait(gap)  # while output keeps coming, but its end goes at once
        events, done = process.events_since(index, POLL)
        if events:
            sent = time.monotonic()
        index += len(events)
        if done:
            yield from _ending(process, events, 0, limit, ended)
            return
        yield from split(events, limit)


def _ending(process: Any, events: list[Any], start: int, limit: int,
            ended: Callable[[], None]) -> Iterator[list[Any]]:
    """The last messages of an ended command: its remaining output (`events[start:]`), the last
    batch ending with its end line (after `ended`: a checkpoint, before the reply that says the
    turn is over)."""
    batches = list(split(events[start:], limit)) or [[]]
    yield from batches[:-1]
    ended()
    yield batches[-1] + [end_line(process, output=False)]
