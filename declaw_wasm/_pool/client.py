"""The client half of a hosted sandbox: the backend contract (`SandboxBackend`, `ProcessHandle`)
as calls to a `Host` (host.py) over a `Link` — a worker's pipe (pool.py) or a Ray actor
(_ray/). Written once, so the pool and Ray behave alike: a command's output arrives on a thread
of its own (as the remote backend's does), so a handle fills while the caller does other work;
a cell's callbacks run on the calling thread; files move in chunks of the link's size.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from typing import Any, Callable, Iterator, List, Optional, Protocol, Sequence, TypeVar, Union, cast

from .._model import construct
from .._backend import Callback, ToolSpec, WriteData, tools_unreachable
from .._journal import dispatch, listening
from .._lines import CellReader, LineProcess
from ..events import SandboxEvent
from ..security.audit import AuditEvent
from ..exceptions import InvalidArgumentException, SandboxException, SandboxNotFoundException, TimeoutException
from ..execution import Context, Execution, Logs, Result
from ..limits import Limits
from ..models import (CommandResult, EntryInfo, FilesystemEvent, ProcessInfo, PtySize, SandboxInfo,
                      SandboxMetrics, Snapshot, WriteInfo)
from ..wire import (CreateContext, CreatePty, ErrorBody, ResumeSandbox, RunCode, RunCommand, StartLine,
                    exception_from)

SMALL_WRITE = 8 << 20  # bytes and str up to this size travel in one call on a pool's pipe
CALL_WAIT = 600.0  # seconds a call waits for its host's answer (a cell: its own timeout more)
DEFAULT_OUTPUT = construct(Limits).output_limit  # a sandbox's output limit when not known here
OUTPUT_SLACK = 64 << 10  # what a host may send of one output stream beyond the sandbox's output limit
KEEP_LIMITS = 100_000  # output limits of sandboxes made here, remembered by id
LOG_COST = 16  # what one log entry of a cell costs beyond its characters (as _local/kernel.py counts)
RESULT_COST = 1024  # ...and one result beyond its data
TRUNCATED = "\n[declaw-wasm] output truncated at the sandbox's output limit\n"  # as _local/kernel.py marks it
_output_limits: "OrderedDict[str, int]" = OrderedDict()
_limits_lock = threading.Lock()
_forwarded: "OrderedDict[str, int]" = OrderedDict()  # per sandbox id: the last event seq forwarded here
_forward_lock = threading.Lock()


class OutputBudget:
    """What this process keeps (and hands to callbacks) of one command's or cell's output from
    a host: per stream, the sandbox's output limit and `OUTPUT_SLACK`; a cell's results, twice
    the limit and the slack. An honest host never sends more (it cuts each stream at the limit
    in bytes, and each character comes from at least one byte; a cell's logs and results share
    the limit). A host that does — a compromised worker or actor — is cut there, as in-process
    output is (the command's error says so, a cell's text ends with `TRUNCATED`), so what it
    makes this process hold stays proportional to the limit, not to what it sends."""

    def __init__(self, limit: int) -> None:
        self.rooms = {"stdout": limit + OUTPUT_SLACK, "stderr": limit + OUTPUT_SLACK,
                      "pty": limit + OUTPUT_SLACK, "results": 2 * limit + OUTPUT_SLACK}
        self.cut: list[str] = []  # the streams cut, in order

    def take(self, stream: str, data: Any, cost: int = 0) -> Any:
        """`data` (str or bytes) as much of it as the stream has room for (None: none), each
        item costing `cost` more (a cell's log entry)."""
        room = self.rooms[stream] - cost
        if len(data) <= room:
            self.rooms[stream] = room - len(data)
            return data
        self.rooms[stream] = 0
        if stream not in self.cut:
            self.cut.append(stream)
            return data[: max(room, 0)]
        return None

    def log(self, stream: str, text: str) -> Optional[str]:
        """A cell's log entry as kept: cut, with `TRUNCATED` the first time."""
        first = stream not in self.cut
        kept = self.take(stream, text, LOG_COST)
        if kept is None or stream not in self.cut:
            return kept
        return kept + TRUNCATED if first else None

    def result(self, result: Result) -> bool:
        """Whether a cell's result still fits (its size as this codec packs it)."""
        from .codec import pack

        if "results" in self.cut:
            return False
        try:
            cost = len(pack(result)) + RESULT_COST
        except Exception:  # a result that cannot be sent on is not kept either
            cost = self.rooms["results"] + 1
        if cost > self.rooms["results"]:
            if "results" not in self.cut:
                self.cut.append("results")
            return False
        self.rooms["results"] -= cost
        return True

    def close(self, execution: Execution) -> None:
        """A cell's end: its stderr says so if results were dropped."""
        if "results" in self.cut:
            execution.logs.stderr.append(RESULTS_DROPPED)

    def execution(self, execution: Execution) -> Execution:
        """A cell's whole answer (one call, no stream), its logs and results held to the budget."""
        logs = {}
        for stream in ("stdout", "stderr"):
            kept = [self.log(stream, text) for text in getattr(execution.logs, stream)]
            logs[stream] = [text for text in kept if text is not None]
        results = [r for r in execution.results if self.result(r)]
        done = execution.model_copy(update={"results": results, "logs": Logs(**logs)})
        self.close(done)
        return done


RESULTS_DROPPED = ("[declaw-wasm] results dropped: this cell's output (logs and results) reached the sandbox's "
                   "output limit (Limits.output_limit)\n")


def call_wait(method: str, args: Sequence[Any]) -> Optional[float]:
    """How long a call may wait for its host's answer before `TimeoutException`: `CALL_WAIT`
    (a snapshot of a full sandbox to a slow store takes a while; nothing honest takes ten
    minutes), and a cell's own timeout more; a cell without one waits as long as its host lives
    (a dead worker or actor is seen at once, and its calls fail)."""
    if method == "run_code":
        timeout = getattr(args[0], "timeout", None) if args else None
        return CALL_WAIT + float(timeout) if timeout else None
    return CALL_WAIT


def stream_wait(op: str, args: Sequence[Any]) -> Optional[float]:
    """How long a stream (a command's output, a cell's callbacks) may take to end: its request's
    own timeout and `CALL_WAIT` more; None (as long as its host lives) for one without a timeout,
    or whose request is not here (`attach`, `follow`)."""
    timeout = getattr(args[0], "timeout", None) if op in ("start", "run_code") and args else None
    return CALL_WAIT + float(timeout) if timeout else None


class HostLost(SandboxException):
    """The worker process or Ray actor that hosted a sandbox is gone (and the sandbox with it,
    unless it was checkpointed: then it was restored on another host, `Recovery`)."""

    named = False  # already says which sandbox, and what became of it


# Calls that change nothing: when the host is lost under one of them and the sandbox is restored
# from its checkpoint, it is asked again of the restored sandbox instead of failing.
READS = frozenset({"info", "is_running", "list", "get_info", "exists", "processes", "list_contexts",
                   "metrics", "audit_events", "events", "list_snapshots", "traffic_access_token"})


class Recovery:
    """How a checkpointed hosted sandbox (`lifecycle={"checkpoint": "cell"}`) comes back when its
    host is lost: the backend's `relocate(recovery)` restores it from its checkpoint on another
    host (from `where[1]`, the host's id of it, breaking `owner`'s lease, with `secrets`) and
    answers `(link, host_id, sandbox_id, owner, turn, what)`.
    `secrets` are the create's (values, this process's memory only), passed again as a call
    argument; `owner` is the hosting process's name on the sandbox's lease, which the new host
    breaks (the host is known to be dead). One recovery per loss, however many calls see it.

    The call under which the host was lost fails (HostLost, naming the checkpoint the sandbox
    came back from): whether it ran, partly or at all, before the host died cannot be known, and
    running a command or a cell twice is worse than asking the caller to run it again. Calls that
    change nothing (`READS`) are asked again of the restored sandbox."""

    def __init__(self, relocate: Any, secrets: Any, owner: str, link: "Link", host_id: str,
                 sandbox_id: str) -> None:
        self.relocate = relocate
        self.secrets = secrets
        self.owner = owner
        self.lock = threading.Lock()
        self.where: tuple[Any, str, str] = (link, host_id, sandbox_id)
        self.note = ""

    def recover(self, sandbox: "HostedSandbox", exc: HostLost, link: "Link") -> HostLost:
        old = sandbox.sandbox_id
        with self.lock:
            if self.where[0] is link:  # lost under this call, not restored yet
                try:
                    found = self.relocate(self)
                except Exception as failure:  # no host, no checkpoint, a damaged one: lost after all
                    lost = HostLost(f"sandbox {old} is lost: {exc}; restoring it from its checkpoint failed: "
                                    f"{failure}")
                    lost.named = True
                    return lost
                new_link, host_id, sandbox_id, self.owner, turn, what = found
                self.where = (new_link, host_id, sandbox_id)
                moved = f" (its id is now {sandbox_id})" if sandbox_id != old else ""
                self.note = (f"it was restored on another host from its checkpoint after turn {turn} "
                             f"({what or 'create'}){moved}")
            sandbox.link, sandbox.host_id, sandbox.sandbox_id = self.where
        lost = HostLost(f"sandbox {old}: its host was lost during this call ({exc}); {self.note}. What was "
                        "in flight is lost: run it again")
        lost.named = True
        return lost


class Link(Protocol):
    """A way to one host: calls answered with values (errors raised as the API's exceptions,
    `HostLost` when the host is gone) and streams of messages (host.py)."""

    chunk: int  # the largest file chunk one message carries
    same_machine: bool  # whether the host runs on this machine (its loopback is ours: file URLs)

    def call(self, sandbox_id: Optional[str], method: str, *args: Any) -> Any: ...
    def stream(self, sandbox_id: str, op: str, *args: Any) -> Iterator[Any]: ...
    def lend_tools(self, spec: ToolSpec) -> list[Any]:
        """Make host tools callable from the host: `[token, {name: description}]`, which the
        host's stand-in sends back with each call (a link that cannot call back raises)."""
    def return_tools(self, token: str) -> None: ...
    def adopt(self, host_id: str, fresh: bool = False) -> "HostedSandbox":
        """A sandbox on this host from now on, as its owner knows it: one it made by itself
        (`fresh`: a fork, never an id its owner knows already) or one it was asked for (a
        resume)."""


# Calls that may read or write the state store on the host (host calls, and calls on a sandbox):
# they carry this process's state key as an argument of their own (`state_key_for`), as a
# create's secrets do. The host signs and checks records with the last key given, and has no
# other: never its environment (a pool's workers do not inherit the key), Ray's `runtime_env`
# or object store (_state/keys.py).
KEYED_HOST = frozenset({"create", "connect", "list_sandboxes", "resume", "restore", "recover", "fork",
                        "snapshots", "drop_snapshot"})
KEYED_SANDBOX = frozenset({"pause", "create_snapshot", "list_snapshots", "delete_snapshot", "kill"})


def state_key_for(sandbox_id: Optional[str], method: str) -> Any:
    """The state key to send with this call (its 32 bytes, or why this process has none), or
    None for a call that never touches the state store."""
    from .._state import keys

    return keys.for_host() if method in (KEYED_HOST if sandbox_id is None else KEYED_SANDBOX) else None


def raised(body: ErrorBody) -> Exception:
    if not isinstance(body, ErrorBody):
        return SandboxException(f"the host answered with a malformed error (a {type(body).__name__})")
    return exception_from(body.model_dump())


def expect(value: Any, kind: Any, method: str) -> Any:
    """A host's answer to `method`, if it is a `kind` (a type, or `[type]`: a list of them); else
    `SandboxException`. A host that lies about types fails its own call, nothing more: its
    answer is never converted (`bytes(2**40)` would allocate a terabyte)."""
    if isinstance(kind, list):
        fine = isinstance(value, list) and all(isinstance(v, kind[0]) for v in value)
        name = f"a list of {kind[0].__name__}"
    else:
        fine = isinstance(value, kind)
        name = "a " + " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
    if not fine:
        raise SandboxException(f"the host answered {method} with a {type(value).__name__}, not {name}")
    return value


class HostedChunks:
    """A file's bytes, pulled from the host a chunk at a time."""

    def __init__(self, link: Link, token: Optional[str], first: bytes) -> None:
        self._link = link
        self._token = token
        self._first: Optional[bytes] = first

    def __iter__(self) -> "HostedChunks":
        return self

    def __next__(self) -> bytes:
        if self._first is not None:
            data, self._first = self._first, None
            if data:
                return data
        if self._token is None:
            raise StopIteration
        data = expect(self._link.call(None, "read_next", self._token, self._link.chunk), bytes, "read_next")
        if not data:
            self._token = None
            raise StopIteration
        return data

    def close(self) -> None:
        token, self._token, self._first = self._token, None, None
        if token is not None:
            try:
                self._link.call(None, "read_close", token)
            except SandboxException:  # the host is gone: nothing left to close
                pass


class HostedProcess(LineProcess):
    """The client's copy of a hosted command or PTY: its lines as the host sends them (read
    by `pump`, _lines.py), held to the sandbox's output limit (`OutputBudget`), and control as
    calls."""

    def __init__(self, sandbox: "HostedSandbox", pid: int, cmd: str, callbacks: dict[str, Callback]) -> None:
        super().__init__(sandbox, pid, cmd, callbacks, OutputBudget(sandbox.output_limit))
        self.sandbox = sandbox

    def result(self) -> CommandResult:
        try:
            return super().result()
        finally:
            self.sandbox.forward()

    def broken(self, exc: Exception) -> ErrorBody:
        if isinstance(exc, HostLost):
            return ErrorBody(error="SandboxException", message=str(self.sandbox.lost(exc)))
        if isinstance(exc, TimeoutException):  # its host did not end it in time (client.stream_wait)
            return ErrorBody(error="TimeoutException", message=str(exc))
        return ErrorBody(error="SandboxException", message=f"the command's stream broke: {exc}")


def lines_of(messages: Iterator[Any]) -> Iterator[Any]:
    """A host's stream messages (each a list of lines) as one iterator of lines."""
    for message in messages:
        if not isinstance(message, list):
            raise SandboxException(f"the host sent a {type(message).__name__} in a stream, not a list of lines")
        yield from message


def create_arguments(request: Any) -> tuple[Any, Any]:
    """A create request as it crosses to a host: the request without secret values (a policy
    object travels as its JSON, `security`), and its secrets beside it as a call argument
    (values, hosts, vault refs resolved here: `hosted_secrets`), or None. A `Vault` object of
    the caller's stays here: only the refs it resolves cross. Host tools are lent apart
    (`lend_tools`), where the host can call back."""
    from .._egress.create import hosted_secrets

    if getattr(request, "_host_only", {}).get("journal") is not None:
        raise InvalidArgumentException("journal=: not supported for a sandbox in a worker yet; its worker journals it "
                                       "with DECLAW_WASM_JOURNAL (docs/observability.md), or create it in-process")
    if getattr(request, "_host_only", {}).get("guard_plugins"):
        raise InvalidArgumentException("guard_plugins: callables of this process cannot run in a worker; "
                                       "create the sandbox in-process (docs/guardrails.md)")
    secrets = hosted_secrets(request)
    plain = request.model_copy(update={"secrets": None})
    plain._host_only = {}  # Secrets, a Vault, a policy object: never pickled or packed
    return plain, secrets


def refuse_host_only(request: Any, where: str) -> None:
    """A resume's or restore's secrets do not cross to a worker yet (a create's do, as
    `create_arguments`): refuse them rather than resume the sandbox without them."""
    if getattr(request, "_host_only", {}).get("tools") is not None:
        raise tools_unreachable(where)  # a pool lends a create's tools itself (lend_tools)
    held = sorted(k for k in getattr(request, "_host_only", {}) if k in ("secrets", "vault"))
    if held:
        raise InvalidArgumentException(f"{', '.join(held)} on resume: not supported on {where} yet; resume "
                                       "the sandbox in-process (docs/state.md)")


F = TypeVar("F", bound=Callable[..., Any])


def forwarded(method: F) -> F:
    """A call that makes events: its sandbox's new ones are forwarded here after it (`forward`)."""
    @functools.wraps(method)
    def call(self: "HostedSandbox", *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        finally:
            self.forward()
    return cast(F, call)


class HostedSandbox:
    """A sandbox on a host (the `SandboxBackend` of the pool and of Ray). `sandbox_id` is the
    id callers see; `host_id`, the host's own (they differ on Ray, where the id names its actor)."""

    def __init__(self, link: Link, sandbox_id: str, host_id: Optional[str] = None,
                 recovery: Optional[Recovery] = None) -> None:
        self.link = link
        self.sandbox_id = sandbox_id
        self.host_id = host_id or sandbox_id
        self.recovery = recovery  # set for a checkpointed sandbox: restored when its host is lost
        if recovery is not None:
            self.link, self.host_id, self.sandbox_id = recovery.where
        with _limits_lock:
            self.output_limit = _output_limits.get(self.sandbox_id, DEFAULT_OUTPUT)

    def limit_output(self, limit: int) -> None:
        """The sandbox's `output_limit`, as this process made it: what the host may send of a
        command's or a cell's output here (`OutputBudget`), remembered for later handles by id."""
        self.output_limit = limit
        with _limits_lock:
            _output_limits[self.sandbox_id] = limit
            _output_limits.move_to_end(self.sandbox_id)
            while len(_output_limits) > KEEP_LIMITS:
                _output_limits.popitem(last=False)

    def _call(self, method: str, *args: Any) -> Any:
        link = self.link
        try:
            return link.call(self.host_id, method, *args)
        except HostLost as exc:
            lost = self.lost(exc, link)
            if method not in READS or self.link is link:
                raise lost from None
        try:  # restored from its checkpoint: a read is asked again
            return self.link.call(self.host_id, method, *args)
        except HostLost as exc:
            raise self.lost(exc, self.link) from None

    def _host_call(self, method: str, *args: Any) -> Any:
        link = self.link
        try:
            return link.call(None, method, *args)
        except HostLost as exc:
            raise self.lost(exc, link) from None

    def lost(self, exc: HostLost, link: Optional[Link] = None) -> HostLost:
        """`exc`, naming this sandbox; a checkpointed one is restored on another host first (once,
        for the `link` the failed call went to)."""
        if exc.named:
            return exc
        if self.recovery is not None and link is not None:
            return self.recovery.recover(self, exc, link)
        text = str(exc)
        named = exc if self.sandbox_id in text else HostLost(f"sandbox {self.sandbox_id} is lost: {text}")
        named.named = True
        return named

    # -- lifetime ------------------------------------------------------------------------------
    def info(self) -> SandboxInfo:
        info: SandboxInfo = expect(self._call("info"), SandboxInfo, "info")
        return info.model_copy(update={"sandbox_id": self.sandbox_id})

    def is_running(self) -> bool:
        try:
            return bool(self._call("is_running"))
        except SandboxException:  # lost with its host, or unknown to a restarted one
            return False

    def set_timeout(self, timeout: float) -> None:
        self._call("set_timeout", timeout)

    @forwarded
    def kill(self) -> bool:
        link = self.link
        try:
            return bool(self._call("kill"))
        except (HostLost, SandboxNotFoundException):  # gone with its host: nothing left to kill
            if self.link is link:
                return False
        try:  # restored from its checkpoint meanwhile: that one is killed
            return bool(self._call("kill"))
        except (HostLost, SandboxNotFoundException):
            return False

    def audit_events(self) -> List[Any]:
        events: List[Any] = expect(self._call("audit_events"), [AuditEvent], "audit_events")
        return events

    def events(self, since: int = 0) -> List[Any]:
        events: List[Any] = expect(self._call("events", since), [SandboxEvent], "events")
        return events

    def forward(self) -> None:
        """The sandbox's new events, from its host to this process's listeners (OpenTelemetry,
        `serve`'s metrics and webhooks: _journal.dispatch), when there are any: after each call
        that makes events (a create, a command's end, a cell, a file written or read, a pause,
        a kill). What happens between calls (a lifetime's end) comes with the next one."""
        if not listening():
            return
        with _forward_lock:
            since = _forwarded.get(self.sandbox_id, 0)
        try:
            events = self.events(since)
        except SandboxException:
            return
        with _forward_lock:
            fresh = [e for e in events if e.seq > _forwarded.get(self.sandbox_id, 0) and e.sandbox_id == self.host_id]
            if fresh:
                _forwarded[self.sandbox_id] = fresh[-1].seq
                _forwarded.move_to_end(self.sandbox_id)
                while len(_forwarded) > KEEP_LIMITS:
                    _forwarded.popitem(last=False)
        for event in fresh:
            if self.sandbox_id != self.host_id:  # a Ray host's own id: callers know the sandbox by ours
                event = event.model_copy(update={"sandbox_id": self.sandbox_id})
            dispatch(event)

    def metrics(self) -> SandboxMetrics:
        metrics: SandboxMetrics = expect(self._call("metrics"), SandboxMetrics, "metrics")
        return metrics

    # -- state ------------------------------------------------------------------------------------
    def create_snapshot(self, name: Optional[str] = None) -> Snapshot:
        snapshot: Snapshot = expect(self._call("create_snapshot", name), Snapshot, "create_snapshot")
        return snapshot

    def list_snapshots(self) -> List[Snapshot]:
        found: List[Snapshot] = expect(self._call("list_snapshots"), [Snapshot], "list_snapshots")
        return found

    def delete_snapshot(self, snapshot_id: str) -> bool:
        return bool(self._call("delete_snapshot", snapshot_id))

    def file_url(self, path: str, write: bool, user: Optional[str], expires_in: Optional[int]) -> str:
        """Served by the host process on its loopback: a host of this machine only."""
        if not self.link.same_machine:
            raise InvalidArgumentException("file URLs of a sandbox on a Ray cluster are not made: the host serves "
                                           "them on its own loopback, which may be another machine's")
        return expect(self._call("file_url", path, write, user, expires_in), str, "file_url")

    def get_host(self, port: int) -> str:
        """The host process's loopback listener for the port: a host of this machine only."""
        if not self.link.same_machine:
            raise InvalidArgumentException(
                "get_host: a sandbox on a Ray cluster listens on its host actor's loopback, which "
                "may be another machine's: servers in sandboxes are reached in this process or on a "
                "process pool (not on Ray yet, nor through `declaw-wasm serve --backend ray`)")
        return expect(self._call("get_host", port), str, "get_host")

    def traffic_access_token(self) -> Optional[str]:
        token = self._call("traffic_access_token")
        return None if token is None else expect(token, str, "traffic_access_token")

    @forwarded
    def pause(self, keep_memory: bool = True) -> bool:
        return bool(self._call("pause", keep_memory))

    @forwarded
    def resume(self, request: ResumeSandbox) -> None:
        refuse_host_only(request, "a process pool or Ray")
        self._host_call("resume", self.host_id, request)
        self.link.adopt(self.host_id)

    def fork(self, count: int) -> List["HostedSandbox"]:
        made: List[str] = expect(self._host_call("fork", self.host_id, count), [str], "fork")
        if len(made) != count or len(set(made)) != count:
            raise SandboxException(f"the host answered fork with {len(made)} distinct ids for {count} forks")
        forks = [self.link.adopt(local, fresh=True) for local in made]
        for fork in forks:
            fork.limit_output(self.output_limit)
        return forks

    # -- files ------------------------------------------------------------------------------------
    @forwarded
    def read(self, path: str, gzip: bool = False) -> HostedChunks:
        """`gzip` is how bytes travel on a server's wire; here the data is the same."""
        opened = self._host_call("read_open", self.host_id, path, self.link.chunk)
        if not (isinstance(opened, list) and len(opened) == 2 and isinstance(opened[0], (str, type(None)))
                and isinstance(opened[1], bytes)):
            raise SandboxException(f"the host answered read_open with a {type(opened).__name__}, not [token, bytes]")
        return HostedChunks(self.link, opened[0], opened[1])

    @forwarded
    def write(self, path: str, data: WriteData, metadata: Optional[dict[str, str]] = None,
              gzip: bool = False, octet_stream: Optional[bool] = None) -> WriteInfo:
        small = min(SMALL_WRITE, self.link.chunk)
        if isinstance(data, (str, bytes, bytearray, memoryview)) and len(data) <= small:
            info: WriteInfo = expect(self._call("write", path, data if isinstance(data, str) else bytes(data),
                                                metadata), WriteInfo, "write")
            return info
        token = self._host_call("write_open", self.host_id, path, metadata)
        try:
            for chunk in _chunks(data, self.link.chunk):
                self._host_call("write_chunk", token, chunk)
        except BaseException:
            try:
                self.link.call(None, "write_abort", token)
            except SandboxException:
                pass
            raise
        done: WriteInfo = expect(self._host_call("write_close", token), WriteInfo, "write_close")
        return done

    @forwarded
    def write_files(self, entries: Sequence[tuple[str, WriteData]],
                    metadata: Optional[dict[str, str]] = None, gzip: bool = False,
                    octet_stream: Optional[bool] = None) -> List[WriteInfo]:
        """Small files (in all up to one pipe message) in one call; otherwise one `write` each."""
        sized = [(path, data if isinstance(data, str) else bytes(data)) for path, data in entries
                 if isinstance(data, (str, bytes, bytearray, memoryview))]
        if len(sized) == len(entries) and \
                sum(len(data.encode()) if isinstance(data, str) else len(data) for _, data in sized) \
                <= min(SMALL_WRITE, self.link.chunk):
            infos: List[WriteInfo] = expect(self._call("write_files", sized, metadata), [WriteInfo], "write_files")
            return infos
        return [self.write(path, data, metadata) for path, data in entries]

    def watch(self, path: str, recursive: bool, include_entry: bool) -> "HostedWatcher":
        return HostedWatcher(self, expect(self._host_call("watch_open", self.host_id, path, recursive, include_entry),
                                          str, "watch_open"))

    def list(self, path: str, depth: int = 1) -> List[EntryInfo]:
        entries: List[EntryInfo] = expect(self._call("list", path, depth), [EntryInfo], "list")
        return entries

    def get_info(self, path: str) -> EntryInfo:
        entry: EntryInfo = expect(self._call("get_info", path), EntryInfo, "get_info")
        return entry

    def exists(self, path: str) -> bool:
        return bool(self._call("exists", path))

    def remove(self, path: str) -> None:
        self._call("remove", path)

    def rename(self, old_path: str, new_path: str) -> EntryInfo:
        entry: EntryInfo = expect(self._call("rename", old_path, new_path), EntryInfo, "rename")
        return entry

    def make_dir(self, path: str) -> bool:
        return bool(self._call("make_dir", path))

    # -- commands and PTYs -----------------------------------------------------------------------
    def start(self, request: Union[RunCommand, CreatePty], on_stdout: Callback = None,
              on_stderr: Callback = None, on_pty: Callback = None) -> HostedProcess:
        cmd = request.cmd if isinstance(request, RunCommand) else ""
        callbacks = {"stdout": on_stdout, "stderr": on_stderr, "pty": on_pty}
        run = getattr(self.link, "run", None)
        if run is not None and isinstance(request, RunCommand) and not request.background \
                and not any(callbacks.values()):  # nobody streams it: one call when it is short (Ray)
            return self._attach(self._run(run, request), cmd, callbacks)
        return self._attach(self._stream("start", request), cmd, callbacks)

    def _run(self, run: Any, request: RunCommand) -> Union[List[Any], Iterator[Any]]:
        link = self.link
        try:
            messages: Union[List[Any], Iterator[Any]] = run(self.host_id, request)
        except HostLost as exc:
            raise self.lost(exc, link) from None
        if isinstance(messages, list):
            return messages
        return self._guarded(messages, link)

    def _stream(self, op: str, *args: Any) -> Iterator[Any]:
        link = self.link
        try:
            messages = link.stream(self.host_id, op, *args)
        except HostLost as exc:
            raise self.lost(exc, link) from None
        return self._guarded(messages, link)

    def _guarded(self, messages: Iterator[Any], link: Link) -> Iterator[Any]:
        """A host's streamed messages, a lost host raised as `lost` says."""
        try:
            yield from messages
        except HostLost as exc:
            raise self.lost(exc, link) from None

    def _attach(self, messages: Union[List[Any], Iterator[Any]], cmd: str,
                callbacks: dict[str, Callback]) -> HostedProcess:
        complete = isinstance(messages, list)  # every message is here (a short command in one call)
        lines = lines_of(iter(messages))
        try:
            first = next(lines, None)
        except HostLost as exc:
            raise self.lost(exc) from None
        if isinstance(first, ErrorBody):
            raise raised(first)
        if not isinstance(first, StartLine):
            raise SandboxException(f"unexpected first line from the host: a {type(first).__name__}")
        process = HostedProcess(self, first.pid, cmd, callbacks)
        process.pump(lines, inline=complete)
        return process

    def process(self, pid: int, pty: bool = False) -> HostedProcess:
        return self._attach(self._stream("attach", int(pid), bool(pty)), "", {})

    def processes(self) -> List[ProcessInfo]:
        infos: List[ProcessInfo] = expect(self._call("processes"), [ProcessInfo], "processes")
        return infos

    def kill_process(self, pid: int) -> bool:
        return bool(self._call("kill_process", int(pid)))

    def send_stdin(self, pid: int, data: bytes) -> None:
        self._call("send_stdin", int(pid), bytes(data))

    def close_stdin(self, pid: int) -> None:
        self._call("close_stdin", int(pid))

    def resize_pty(self, pid: int, size: PtySize) -> None:
        self._call("resize_pty", int(pid), size)

    # -- code contexts ------------------------------------------------------------------------------
    @forwarded
    def run_code(self, request: RunCode, on_stdout: Callback = None, on_stderr: Callback = None,
                 on_result: Callback = None, on_error: Callback = None) -> Execution:
        spec = request._host_only.get("tools")
        if spec is None:
            return self._run_code(request, on_stdout, on_stderr, on_result, on_error)
        lent = self.link.lend_tools(spec)  # the cell's host tools, called back for its duration
        try:
            return self._run_code(request, on_stdout, on_stderr, on_result, on_error, lent)
        finally:
            self.link.return_tools(lent[0])

    def _run_code(self, request: RunCode, on_stdout: Callback, on_stderr: Callback, on_result: Callback,
                  on_error: Callback, *tools: Any) -> Execution:
        if not any((on_stdout, on_stderr, on_result, on_error)):  # one call, no stream
            execution: Execution = expect(self._call("run_code", request, *tools), Execution, "run_code")
            return OutputBudget(self.output_limit).execution(execution)
        reader = CellReader(on_stdout, on_stderr, on_result, on_error, budget=OutputBudget(self.output_limit))
        try:
            return reader.read(lines_of(self._stream("run_code", request, *tools)))
        except HostLost as exc:
            raise self.lost(exc) from None

    def create_context(self, request: CreateContext) -> Context:
        context: Context = expect(self._call("create_context", request), Context, "create_context")
        return context

    def list_contexts(self) -> List[Context]:
        contexts: List[Context] = expect(self._call("list_contexts"), [Context], "list_contexts")
        return contexts

    def restart_context(self, context_id: str) -> None:
        self._call("restart_context", context_id)

    def remove_context(self, context_id: str) -> None:
        self._call("remove_context", context_id)


def _chunks(data: WriteData, size: int) -> Iterator[bytes]:
    if isinstance(data, str):
        data = data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        view = memoryview(data)
        for start in range(0, len(view), size):
            yield bytes(view[start:start + size])
        return
    reader: Any = data
    while True:
        chunk = reader.read(size)
        if not chunk:
            return
        raw = chunk.encode("utf-8") if isinstance(chunk, str) else bytes(chunk)
        for start in range(0, len(raw), size):  # text may encode to more bytes than characters
            yield raw[start:start + size]


class HostedWatcher:
    """A watch on a hosted sandbox's folder: its events fetched from the host when asked."""

    def __init__(self, sandbox: HostedSandbox, token: str) -> None:
        self._sandbox = sandbox
        self._token = token
        self._stopped = False

    def events(self) -> List[FilesystemEvent]:
        if self._stopped:
            raise SandboxException("The watcher is already stopped")
        found: List[FilesystemEvent] = expect(self._sandbox._host_call("watch_events", self._token),
                                              [FilesystemEvent], "watch_events")
        return found

    def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            try:
                self._sandbox._host_call("watch_stop", self._token)
            except SandboxException:  # the host or the sandbox is gone: nothing to stop
                pass

    @property
    def stopped(self) -> bool:
        return self._stopped
