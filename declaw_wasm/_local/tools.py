"""Host tools ("code mode"): the host's side of `declaw_tools` (guest/declaw_tools).

A sandbox's code calls functions of the program that made it (`Sandbox.create(tools=...)`,
`run_code(..., tools=...)`): `from declaw_tools import search; search(q="...")`. Each call is
a door request (doors.py: `tools.list`, `tools.call`, `tools.start`, `tools.wait`) answered by a
guest's `ToolDoor`, which finds the tool among the cell's and the sandbox's `Tools` and waits for
the call.

Why an executor: a door request is answered on the guest's thread, where epochs cannot interrupt
host Python. So a call runs elsewhere — sync functions on the tool set's thread pool, coroutine
functions on an event loop (the async face's own loop, whose token the `ToolSpec` carries, or a
background loop of this module's) — and the door waits for it in slices of `SLICE` seconds,
giving up (and cancelling what can be cancelled) as soon as the cell's timeout passes or the
sandbox is killed. The guest then stops as it would anywhere else.

What crosses: arguments arrive as msgpack bytes from the guest (decoded here within the door's
bounds, _wasm/door.py: nesting, count, host memory; no extension types), results go back as one
msgpack reply encoded where the value is made, both bounded by the door's size limit. Values
msgpack cannot carry go through pydantic's `to_jsonable_python` (models, dataclasses,
datetimes, enums, sets...), or `tolist()` (numpy). A host exception goes
back as its class name and message only: no traceback, no host path. Every call is audited in
the sandbox's log (kind "tool").

Threads: a sync call runs on a thread of its tool set (at most THREADS; more calls wait in the
set's queue), started under `TOOL_THREADS`: at most PER_SANDBOX_THREADS busy for one sandbox
(whichever of its tool sets: the sandbox's, each cell's) and PROCESS_THREADS in this process,
abandoned calls included (a cancelled sync function runs on unheard and keeps its thread until
it returns). A call that would need a thread past either cap fails at once, saying so.

`Tools` is what a door needs of a tool set: `HostTools` here (the callables themselves), or a
process pool worker's stand-in that calls back to the process that owns them (_pool/).
"""

from __future__ import annotations

import builtins
import collections
import inspect
import itertools
import queue
import threading
import time
from concurrent.futures import Future
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, Protocol

import msgpack

from .._backend import ToolSpec
from .._threads import CapReached, ThreadCap
from .._wasm.door import PRINTABLE, Bytes, Int, Op, Str, decode
from .._wasm.guest import Guest
from .._wasm.shims import DoorTransport, Encoded
from .doors import Route

if TYPE_CHECKING:
    from ..security.audit import AuditEvent

LIMIT = DoorTransport.MAX_REQUEST  # bytes of arguments, and of a result, per call
SLICE = 0.05  # seconds the door waits for a call between looks at the guest's deadline and kill
MAX_RUNNING = 64  # calls of one guest running at once; a further tools.start waits its turn
MAX_RUNNING_BYTES = 64 << 20  # bytes of arguments those may hold (one call may hold up to LIMIT)
MAX_UNCLAIMED = 4096  # calls started and not yet waited for (tools.wait), running or done
THREADS = 16  # threads per tool set running sync functions (more calls queue)
PER_SANDBOX_THREADS = 32  # threads busy with one sandbox's calls, abandoned ones included
PROCESS_THREADS = 256  # threads busy with host tool calls in this process
TOOL_THREADS = ThreadCap("host tool calls", PER_SANDBOX_THREADS, PROCESS_THREADS)
MAX_DOC = 4000  # characters of a tool's description sent to the guest
MAX_MESSAGE = 8000  # characters of an exception's message sent to the guest


# The door ops (doors.py), answered by ToolDoor below.
TOOL_NAME = Str(1000, PRINTABLE, min_len=1, required=True, doc="the tool's name")
PAYLOAD = Bytes(LIMIT, required=True, doc="msgpack of [args, kwargs], decoded within the door's bounds")
TOOLS_LIST = Op("tools.list", {}, "{tools: [{name, doc}], limit}",
                "the host tools this guest may call now (the cell's and the sandbox's) and the door's "
                "size limit for arguments and results")
TOOLS_CALL = Op("tools.call", {"name": TOOL_NAME, "payload": PAYLOAD}, "{result} | {error}",
                "call a host tool and wait for it (on an executor: the wait honours the cell's timeout "
                "and kill())")
TOOLS_START = Op("tools.start", {"name": TOOL_NAME, "payload": PAYLOAD}, "{id} | {error}",
                 "start a host tool call without waiting (async code: asyncio.gather runs calls at once)")
TOOLS_WAIT = Op("tools.wait", {"id": Int(0, (1 << 63) - 1, required=True)}, "{result} | {error}",
                "wait for a call `tools.start` began")
TOOL_OPS = (TOOLS_LIST, TOOLS_CALL, TOOLS_START, TOOLS_WAIT)


class ToolCall:
    """One call in flight: done once its reply (msgpack bytes) is set."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._reply = b""
        self.error = ""  # the failure's message, for the audit ("" if the call returned)
        self.on_cancel: Optional[Callable[[], Any]] = None
        self._then: list[Callable[["ToolCall"], None]] = []

    def finish(self, reply: bytes, error: str = "") -> None:
        """Set the reply (the first one counts)."""
        with self._lock:
            if self._done.is_set():
                return
            self._reply, self.error = reply, error
            self._done.set()
            then, self._then = self._then, []
        for fn in then:
            fn(self)

    def then(self, fn: Callable[["ToolCall"], None]) -> None:
        """Call `fn(self)` once the reply is set (at once if it is)."""
        with self._lock:
            if not self._done.is_set():
                self._then.append(fn)
                return
        fn(self)

    def wait(self, timeout: float) -> bool:
        return self._done.wait(timeout)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def reply(self) -> bytes:
        return self._reply

    def cancel(self) -> None:
        """Give up on the call: its reply becomes an error; a queued call never runs, a coroutine
        is cancelled, a running sync function finishes unheard."""
        self.finish(error_reply("CancelledError", "the call was cancelled", builtin=False), "cancelled")
        cancel, self.on_cancel = self.on_cancel, None
        if cancel is not None:
            try:
                cancel()
            except Exception:  # the loop or pool is gone: nothing left to cancel
                pass


class Tools(Protocol):
    """A set of host tools a guest may call."""

    def describe(self) -> Mapping[str, str]:
        """Name -> description (signature and docstring); the caller does not change it."""
    def start(self, name: str, payload: bytes, owner: Any = None) -> ToolCall:
        """Start calling tool `name` (one of `describe()`'s) with msgpack `[args, kwargs]`, for
        `owner` (the calling sandbox's id: whose thread cap it counts against; None: the set's)."""


# -- replies ---------------------------------------------------------------------------------------
def _plain(value: Any) -> Any:
    """msgpack's `default`: a value it cannot carry, as one it can."""
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and not isinstance(value, type):
        return tolist()
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(value)


def result_reply(name: str, value: Any, limit: int = LIMIT) -> tuple[bytes, str]:
    """The reply carrying a tool's return value, and "" (or an error reply and its message when
    the value cannot cross: not msgpack, or over the limit)."""
    try:
        reply = msgpack.packb({"result": value}, default=_plain, use_bin_type=True)
    except Exception as exc:  # TypeError, OverflowError, pydantic's serialization error...
        message = (f"host tool {name!r} returned a {type(value).__name__}, which cannot cross to the "
                   f"sandbox ({type(exc).__name__}: {str(exc)[:200]}); return None, bool, int, float, "
                   "str, bytes, lists and dicts")
        return error_reply("TypeError", message), message
    if len(reply) > limit:
        message = (f"the result of host tool {name!r} is {len(reply)} bytes; the door carries at most "
                   f"{limit}")
        return error_reply("ValueError", message), message
    return reply, ""


def error_reply(type_name: str, message: str, builtin: bool = True) -> bytes:
    return msgpack.packb({"error": {"type": type_name, "message": message[:MAX_MESSAGE],
                                    "builtin": builtin}}, use_bin_type=True)


def exception_reply(exc: BaseException) -> tuple[bytes, str]:
    """A host exception as the guest sees it: its class name and message, nothing else."""
    cls = type(exc)
    if isinstance(exc, KeyError) and len(exc.args) == 1 and isinstance(exc.args[0], str):
        message = exc.args[0]  # str(KeyError) adds quotes the guest's KeyError would add again
    else:
        message = str(exc)
    builtin = getattr(builtins, cls.__name__, None) is cls
    return error_reply(cls.__name__, message, builtin), message or cls.__name__


def decode_arguments(payload: bytes) -> tuple[list[Any], dict[str, Any]]:
    """The guest's `[args, kwargs]`: plain msgpack only, decoded within the door's bounds
    (_wasm/door.py: nesting, count, host memory; no extension types), keyword names str."""
    found = decode(payload, strict_map_key=False)
    if not (isinstance(found, list) and len(found) == 2 and isinstance(found[0], list)
            and isinstance(found[1], dict) and all(isinstance(k, str) for k in found[1])):
        raise ValueError("arguments must be [args, kwargs]")
    return found[0], found[1]


def describe(name: str, fn: Callable[..., Any]) -> str:
    """`name(signature)` and the docstring: what `help()` shows in the guest."""
    try:
        signature = str(inspect.signature(fn))
    except (TypeError, ValueError):
        signature = "(*args, **kwargs)"
    doc = inspect.getdoc(fn) or ""
    return (f"{name}{signature}" + (f"\n\n{doc}" if doc else ""))[:MAX_DOC]


# -- the callables themselves ------------------------------------------------------------------------
class _Job:
    """A sync call waiting for, or running on, a thread of its tool set."""

    __slots__ = ("name", "fn", "args", "kwargs", "call", "dropped")

    def __init__(self, name: str, fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any],
                 call: ToolCall) -> None:
        self.name, self.fn, self.args, self.kwargs, self.call = name, fn, args, kwargs, call
        self.dropped = False  # cancelled before a thread took it: never runs


class HostTools:
    """The tools of a `ToolSpec`: sync functions on threads of their own (at most THREADS,
    started under TOOL_THREADS as calls come, gone when the set is closed and its queue empty),
    coroutine functions on the spec's loop or a background one."""

    def __init__(self, spec: ToolSpec) -> None:
        self.functions = dict(spec.functions)
        self.loop = spec.loop
        self._descriptions = {name: describe(name, fn) for name, fn in self.functions.items()}
        self._lock = threading.Lock()
        self._queue: "collections.deque[_Job]" = collections.deque()
        self._threads = 0  # this set's threads (running a call or about to take the next)
        self._closed = False

    def describe(self) -> Mapping[str, str]:
        return self._descriptions

    def start(self, name: str, payload: bytes, owner: Any = None) -> ToolCall:
        call = ToolCall()
        fn = self.functions.get(name)
        if fn is None:
            call.finish(error_reply("LookupError", f"no host tool named {name!r}"), "unknown tool")
            return call
        try:
            args, kwargs = decode_arguments(payload)
        except Exception as exc:
            message = f"bad arguments for host tool {name!r}: {exc}"
            call.finish(error_reply("ValueError", message), message)
            return call
        if _is_async(fn) and self.loop is None:  # no thread needed: a task on the background loop
            self._on_background_loop(name, fn, args, kwargs, call)
            return call
        job = _Job(name, fn, args, kwargs, call)
        with self._lock:
            if self._closed:
                refusal = "the sandbox's tools are closed"
            elif self._threads < THREADS:
                try:  # a thread for it (the cap counts it until the thread ends)
                    TOOL_THREADS.start(self if owner is None else owner, self._serve,
                                       name="declaw-tool")
                    self._threads += 1
                    refusal = ""
                except CapReached as exc:
                    refusal = str(exc)
            else:
                refusal = ""  # the set's threads are busy: it waits for one
            if not refusal:
                self._queue.append(job)
        if refusal:
            call.finish(error_reply("RuntimeError", f"host tool {name!r} was not called: {refusal}"),
                        refusal)
            return call

        def drop() -> None:  # out of the queue now: its arguments are not held until a thread is free
            job.dropped = True
            with self._lock:
                try:
                    self._queue.remove(job)
                except ValueError:  # a thread took it already
                    pass

        call.on_cancel = drop
        return call

    def _serve(self) -> None:
        """A thread of this set: run queued calls until none is left."""
        while True:
            with self._lock:
                job = self._queue.popleft() if self._queue else None
                if job is None:
                    self._threads -= 1
                    return
            if not job.dropped:
                self._run(job.name, job.fn, job.args, job.kwargs, job.call)

    def _run(self, name: str, fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any],
             call: ToolCall) -> None:
        try:
            if _is_async(fn):
                value = self._on_loop(fn, args, kwargs, call)
            else:
                value = fn(*args, **kwargs)
                if inspect.isawaitable(value):  # a sync callable that returned a coroutine
                    value = self._on_loop(_awaiting(value), [], {}, call)
        except BaseException as exc:
            call.finish(*exception_reply(exc))
            return
        call.finish(*result_reply(name, value))

    def _on_loop(self, fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any],
                 call: ToolCall) -> Any:
        """Run a coroutine function to its end on the spec's loop (this thread waits), or on the
        background loop; `call.cancel()` cancels it."""
        if self.loop is None:
            return _background().start_task_soon(_calling(fn, args, kwargs)).result()
        import anyio.from_thread

        scopes: list[Any] = []

        async def run() -> Any:
            with anyio.CancelScope() as scope:
                scopes.append(scope)
                return await fn(*args, **kwargs)
            raise RuntimeError("the call was cancelled")

        call.on_cancel = lambda: anyio.from_thread.run_sync(scopes[0].cancel, token=self.loop) if scopes else None
        return anyio.from_thread.run(run, token=self.loop)

    def _on_background_loop(self, name: str, fn: Callable[..., Any], args: list[Any],
                            kwargs: dict[str, Any], call: ToolCall) -> None:
        future: "Future[Any]" = _background().start_task_soon(_calling(fn, args, kwargs))

        def finished(done: "Future[Any]") -> None:
            if done.cancelled():
                return
            exc = done.exception()
            call.finish(*(exception_reply(exc) if exc is not None else result_reply(name, done.result())))

        future.add_done_callback(finished)
        call.on_cancel = future.cancel

    def close(self) -> None:
        """No more calls; queued ones are dropped (running sync functions finish unheard, their
        threads counted until they do)."""
        with self._lock:
            self._closed = True
            queued, self._queue = list(self._queue), collections.deque()
        for job in queued:
            job.call.finish(error_reply("RuntimeError", "the sandbox's tools are closed"), "closed")


def _is_async(fn: Callable[..., Any]) -> bool:
    """A coroutine function, or an object whose `__call__` is one."""
    if inspect.iscoroutinefunction(fn):
        return True
    method = None if inspect.isroutine(fn) else vars(type(fn)).get("__call__")
    return method is not None and inspect.iscoroutinefunction(method)


def _calling(fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Callable[[], Any]:
    async def call() -> Any:
        return await fn(*args, **kwargs)
    return call


def _awaiting(awaitable: Any) -> Callable[[], Any]:
    async def wait() -> Any:
        return await awaitable
    return wait


_portal: Any = None
_portal_lock = threading.Lock()


def _background() -> Any:
    """An anyio `BlockingPortal` on an event loop of this module's own (a daemon thread, started
    on first use): where coroutine tools of the sync face run."""
    global _portal
    with _portal_lock:
        if _portal is None:
            import anyio
            from anyio.from_thread import BlockingPortal

            ready: "queue.Queue[Any]" = queue.Queue()

            async def serve() -> None:
                async with BlockingPortal() as portal:
                    ready.put(portal)
                    await anyio.sleep_forever()

            threading.Thread(target=anyio.run, args=(serve,), name="declaw-tools-loop", daemon=True).start()
            _portal = ready.get()
        return _portal


def host_tools(value: Any) -> Optional[Tools]:
    """A request's `tools` as a tool set: a `ToolSpec` (this process's callables) becomes
    `HostTools`; a tool set already made (a pool worker's stand-in) is used as it is."""
    if value is None:
        return None
    if isinstance(value, ToolSpec):
        return HostTools(value)
    tools: Tools = value
    return tools


def close_tools(tools: Optional[Tools]) -> None:
    close = getattr(tools, "close", None)
    if callable(close):
        close()


# -- the door ----------------------------------------------------------------------------------------
class _Pending:
    def __init__(self, name: str, call: ToolCall, size: int) -> None:
        self.name = name
        self.call = call
        self.size = size
        self.started = time.monotonic()
        self.at = datetime.now(timezone.utc)


class ToolDoor:
    """One guest's tool requests: the tools it may call now (`sources()`, first match wins: the
    cell's, then the sandbox's), its calls in flight, and the audit of each."""

    def __init__(self, sources: Callable[[], Iterable[Optional[Tools]]],
                 record: Callable[["AuditEvent"], None], owner: Any = None) -> None:
        self._sources = sources
        self._record = record
        self._owner = owner  # the sandbox (its id): whose thread cap its calls count against
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}  # started (tools.start), not yet waited for
        self._freed = threading.Event()  # set whenever one of them finishes

    def routes(self) -> list[Route]:
        return [(TOOLS_LIST, self._list), (TOOLS_CALL, self._call), (TOOLS_START, self._start),
                (TOOLS_WAIT, self._wait)]

    def _tools(self) -> dict[str, tuple[Tools, str]]:
        found: dict[str, tuple[Tools, str]] = {}
        for source in self._sources():
            if source is not None:
                for name, doc in source.describe().items():
                    found.setdefault(name, (source, doc))
        return found

    def _list(self, guest: Guest, request: dict[str, Any]) -> Any:
        return {"tools": [{"name": name, "doc": doc} for name, (_, doc) in sorted(self._tools().items())],
                "limit": LIMIT}

    def _begin(self, request: dict[str, Any]) -> "_Pending | dict[str, Any]":
        """Start the call a request asks for, or the error reply refusing it (audited)."""
        name, payload = request["name"], request["payload"]  # (declared: a str and bytes, both required)
        tools = self._tools()
        if name not in tools:
            names = ", ".join(sorted(tools)) or "none"
            return self._refuse(name, f"no host tool named {name!r} here (tools: {names})")
        if len(payload) > LIMIT:
            return self._refuse(name, f"the arguments of host tool {name!r} are {len(payload)} bytes; "
                                      f"the door carries at most {LIMIT}")
        if len(self._pending) >= MAX_UNCLAIMED:
            return self._refuse(name, f"{MAX_UNCLAIMED} host tool calls were started and never "
                                      "awaited; await some first")
        return _Pending(name, tools[name][0].start(name, payload, self._owner), len(payload))

    def _wait_for_room(self, guest: Guest, size: int) -> None:
        """Before a call starts without waiting: until fewer than MAX_RUNNING of the guest's
        calls run (and their arguments leave room), wait for one to finish. Running calls end
        by themselves (or the cell's deadline stops the guest), so this cannot deadlock."""
        while True:
            self._freed.clear()
            running = [p.size for p in self._pending.values() if not p.call.done]
            if len(running) < MAX_RUNNING and (not running or sum(running) + size <= MAX_RUNNING_BYTES):
                return
            self._freed.wait(SLICE)
            guest.check_stopped()

    def _refuse(self, name: str, reason: str) -> dict[str, Any]:
        from ..security.audit import AuditEvent

        self._record(AuditEvent(timestamp=datetime.now(timezone.utc), method="TOOL", url=f"tool:{name}", kind="tool",
                                decision="denied", reason=reason))
        return {"error": {"type": "", "message": reason, "builtin": False}}

    def _call(self, guest: Guest, request: dict[str, Any]) -> Any:
        pending = self._begin(request)
        return pending if isinstance(pending, dict) else self._finish(guest, pending)

    def _start(self, guest: Guest, request: dict[str, Any]) -> Any:
        self._wait_for_room(guest, len(request["payload"]))
        pending = self._begin(request)
        if isinstance(pending, dict):
            return pending
        call_id = next(self._ids)
        self._pending[call_id] = pending
        pending.call.then(lambda _call: self._freed.set())
        return {"id": call_id}

    def _wait(self, guest: Guest, request: dict[str, Any]) -> Any:
        call_id = request["id"]
        pending = self._pending.pop(call_id, None)
        if pending is None:
            return {"error": {"type": "", "message": f"no host tool call {call_id!r} in flight "
                                                     "(awaited twice?)", "builtin": False}}
        return self._finish(guest, pending)

    def _finish(self, guest: Guest, pending: _Pending) -> Any:
        """Wait for the call in slices; a timeout or kill cancels it and stops the guest."""
        call = pending.call
        while not call.wait(SLICE):
            if guest.stop_requested():
                call.cancel()
                self._audit(pending, "the cell timed out or the sandbox was killed while it ran")
                guest.check_stopped()  # raises: the door answers with an error, the guest stops
        self._audit(pending, call.error)
        return Encoded(call.reply())

    def _audit(self, pending: _Pending, error: str) -> None:
        from ..security.audit import AuditEvent

        self._record(AuditEvent(timestamp=pending.at, method="TOOL", url=f"tool:{pending.name}",
                                kind="tool", bytes_out=pending.size, bytes_in=len(pending.call.reply()),
                                duration_ms=round((time.monotonic() - pending.started) * 1000, 3),
                                error=error[:500]))

    def reset(self) -> None:
        """The cell (or guest) is over: calls started and never awaited are cancelled."""
        pending, self._pending = list(self._pending.values()), {}
        for item in pending:
            if not item.call.done:
                item.call.cancel()
            self._audit(item, item.call.error or "never awaited")


__all__ = ["HostTools", "LIMIT", "TOOL_OPS", "TOOL_THREADS", "ToolCall", "ToolDoor", "Tools", "close_tools",
           "error_reply", "exception_reply", "host_tools", "result_reply"]
