"""`ProcessPool`: sandboxes in worker processes on this machine (`processes[:N]`), for crash
isolation — a fault in Wasmtime or in our host code ends one worker and the sandboxes on it,
not the agent and every other sandbox.

Each worker (worker.py) hosts many sandboxes; a sandbox lives on one worker for its life. A
create goes to the least loaded worker (live sandboxes, counting creates in flight): that is all
the scheduling there is. Each worker is a `Link` (client.py) over a socket pair: one reader
thread per worker routes replies to the calls waiting for them (many calls share one socket),
so a worker's death is seen the moment the kernel closes its end. Then every call in flight on
it, and every later call on its sandboxes, raises `SandboxException` saying the worker died,
and a fresh worker takes its slot; the other workers never notice.

Host tools (`tools=`, docs/integrations.md) stay in this process: the pool lends them to a
worker under a random token, the worker's guests call back over the same socket (`tool`
notices, answered by `tool_reply` messages, worker.py), and the tools go back when the cell or
the sandbox ends. A worker can call only the tools lent to it.

Workers are started with `subprocess` (`python -m declaw_wasm._pool.worker`), not
`multiprocessing.Process`: spawn and forkserver re-import the agent's `__main__` (a script
without an `if __name__ == "__main__"` guard would start pools recursively), and fork is unsafe
in a process with threads (Wasmtime's, the epoch ticker).
"""

from __future__ import annotations

import atexit
import itertools
import os
import queue
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Iterator, List, Optional

from .._backend import ToolSpec
from .._local.tools import LIMIT as TOOL_LIMIT
from .._local.tools import MAX_RUNNING_BYTES, HostTools, ToolCall, error_reply
from .._args import checkpoint_policy
from ..exceptions import InvalidArgumentException, SandboxException, SandboxNotFoundException, TimeoutException
from ..limits import Limits
from ..models import SandboxInfo, Snapshot
from ..wire import CreateSandbox, ErrorBody, ResumeSandbox
from .client import (HostedSandbox, HostLost, Recovery, call_wait, create_arguments, expect, raised,
                     refuse_host_only, state_key_for, stream_wait)
from .codec import MAX_MESSAGE, STREAM_WINDOW, BadMessage, MessageTooLarge, check_plain, pack, unpack

SLICE = 1.0  # seconds between looks at a call's deadline while it waits
MAX_TOOL_CALLS = 4096  # host tool calls one worker may have running here at once...
MAX_TOOL_BYTES = MAX_RUNNING_BYTES  # ...and bytes of arguments they may hold (a guest's in-process: the same)
KEEP_LOST = 10_000  # ids of sandboxes lost with their worker, remembered to say so
STOP_GRACE = 5.0  # seconds a worker gets to kill its sandboxes at shutdown


def _died(code: Optional[int]) -> str:
    if code is None:
        return "ended its connection"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


class Worker:
    """One worker process, as a `Link` (client.py)."""

    chunk = 1 << 20
    same_machine = True  # a child process of this one

    def __init__(self, pool: "ProcessPool", slot: int) -> None:
        self.pool = pool
        self.slot = slot
        self.sandboxes: set[str] = set()  # live sandboxes here (placement's count)
        self.pending = 0  # creates in flight
        self.ready = threading.Event()
        self.dead: Optional[str] = None
        self.bad = ""  # why this process killed the worker (an answer a worker must never give)
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._inboxes: dict[int, "queue.SimpleQueue[tuple[str, Any]]"] = {}
        self._windows: dict[int, int] = {}  # a stream's id -> messages it may still send (credit)
        self._ids = itertools.count(1)
        self._tools: dict[str, HostTools] = {}  # token -> host tools lent to this worker
        self.sandbox_tools: dict[str, str] = {}  # sandbox id -> the token of its create(tools=)
        self._tool_calls: dict[int, ToolCall] = {}  # the worker's call id -> the call running here
        self._tool_bytes = 0  # bytes of arguments of the calls running or queued here
        ours, theirs = socket.socketpair()
        with theirs:
            self.process = subprocess.Popen(
                [sys.executable, "-m", pool.worker_module, str(theirs.fileno())],
                pass_fds=[theirs.fileno()], env=_worker_env(), stdin=subprocess.DEVNULL,
                stdout=sys.stderr.fileno() if _has_fileno(sys.stderr) else subprocess.DEVNULL,
                start_new_session=True)
        self.pid = self.process.pid
        self.conn = Connection(ours.detach())
        threading.Thread(target=self._read, name=f"declaw-pool-{self.pid}", daemon=True).start()

    def __repr__(self) -> str:
        return f"<worker {self.slot} pid {self.pid}{' dead' if self.dead else ''}>"

    # -- the Link -----------------------------------------------------------------------------------
    def call(self, sandbox_id: Optional[str], method: str, *args: Any) -> Any:
        rid, inbox = self._request("call", sandbox_id, method, args, state_key_for(sandbox_id, method))
        try:
            kind, payload = self._answer(inbox, call_wait(method, args), method)
        finally:
            with self._lock:
                self._inboxes.pop(rid, None)
        if kind == "ok":
            return payload
        if kind == "error":
            if not isinstance(payload, ErrorBody):
                raise SandboxException(f"the worker process {self.pid} answered {method} with a malformed error")
            raise raised(payload)
        raise HostLost(payload)

    def _answer(self, inbox: "queue.SimpleQueue[tuple[str, Any]]", wait: Optional[float],
                method: str, until: Optional[float] = None) -> tuple[str, Any]:
        """The one answer to a call: within `wait` seconds of the worker being ready (or by the
        monotonic time `until`; None: as long as the worker lives, which its socket tells), else
        TimeoutException."""
        deadline = until
        while True:
            try:
                return inbox.get(timeout=SLICE)
            except queue.Empty:
                pass
            if wait is None or not self.ready.is_set():
                continue
            now = time.monotonic()
            deadline = deadline or now + wait - SLICE
            if now >= deadline:
                raise TimeoutException(f"the worker process {self.pid} did not answer {method} within "
                                       f"{wait:g} s")

    def adopt(self, host_id: str, fresh: bool = False) -> HostedSandbox:
        return self.pool.adopt(self, host_id, fresh)

    def refuse(self, why: str) -> HostLost:
        """The worker answered what no honest worker does (`why`): it is killed as one a guest
        took over (its sandboxes fail naming why, and a fresh worker takes its slot), and the
        call that got the answer fails with the returned error."""
        self.bad = why[:300]
        self.process.kill()
        return HostLost(f"the worker process {self.pid} sent a bad message ({self.bad}), so it was killed")

    def stream(self, sandbox_id: str, op: str, *args: Any) -> Iterator[Any]:
        """A stream's messages as the caller takes them. The worker may send `STREAM_WINDOW`
        messages ahead; each half window taken grants it as many more (`credit`), so what waits
        here for a slow caller (an `on_stdout` that takes its time) is a window of messages, and
        the worker waits meanwhile. A worker that sends past its window is not to be trusted
        (`_read`). A caller that stops early closes the stream (`close`): the worker makes the
        rest (a command, a cell run to their end) and drops it."""
        rid, inbox = self._request("stream", sandbox_id, op, args)
        wait = stream_wait(op, args)  # the whole stream's
        until = None if wait is None else time.monotonic() + wait

        def items() -> Iterator[Any]:
            taken = 0
            ended = False
            try:
                while True:
                    kind, payload = self._answer(inbox, wait, op, until)
                    if kind != "item":
                        ended = True
                    if kind == "item":
                        taken += 1
                        if taken >= STREAM_WINDOW // 2:
                            self._credit(rid, taken)
                            taken = 0
                        yield payload
                    elif kind == "ok":
                        return
                    elif kind == "error":  # the request failed: its stream's last line
                        yield [payload]
                        return
                    else:
                        raise HostLost(payload)
            finally:
                if not ended:  # a timeout, or the caller stopped reading
                    self._close_stream(rid)
        return items()

    def _credit(self, rid: int, count: int) -> None:
        with self._lock:
            if rid not in self._windows:
                return
            self._windows[rid] += count
        self._send_control(rid, "credit", [count])

    def _close_stream(self, rid: int) -> None:
        with self._lock:
            self._inboxes.pop(rid, None)
            open_ = self._windows.pop(rid, None) is not None
        if open_:
            self._send_control(rid, "close", [])

    def _send_control(self, rid: int, kind: str, args: list[Any]) -> None:
        try:
            with self._send_lock:
                self.conn.send_bytes(pack([rid, kind, None, "", args]))
        except OSError:  # the worker is gone: the reader says so to every inbox
            pass

    def _request(self, kind: str, sandbox_id: Optional[str], method: str, args: tuple[Any, ...],
                 state_key: Any = None) -> tuple[int, "queue.SimpleQueue[tuple[str, Any]]"]:
        inbox: "queue.SimpleQueue[tuple[str, Any]]" = queue.SimpleQueue()
        with self._lock:
            if self.dead is not None:
                raise HostLost(self.dead)
            rid = next(self._ids)
            self._inboxes[rid] = inbox
            if kind == "stream":
                self._windows[rid] = STREAM_WINDOW
        try:
            data = pack([rid, kind, sandbox_id, method, list(args), state_key])
        except BaseException as exc:
            with self._lock:
                self._inboxes.pop(rid, None)
                self._windows.pop(rid, None)
            if isinstance(exc, MessageTooLarge):
                raise InvalidArgumentException(f"{method}: the request is {exc}") from None
            raise
        try:
            with self._send_lock:
                self.conn.send_bytes(data)
        except OSError:  # the worker is gone: the reader says so to every inbox
            pass
        return rid, inbox

    # -- the reader ---------------------------------------------------------------------------------
    def _read(self) -> None:
        """Route the worker's messages. The worker is not trusted (its guests are hostile, and
        one that escaped Wasmtime would own it): a message that is not one — over `MAX_MESSAGE`
        (refused from its length prefix, before it is read), not msgpack within the codec's
        budget, not `[id, kind, payload]`, a notice that does not parse — ends the worker, and
        its sandboxes fail naming why; the other workers never notice."""
        reason = ""
        try:
            while True:
                try:
                    data = self.conn.recv_bytes(MAX_MESSAGE)
                except OSError as exc:
                    if "bad message length" not in str(exc):
                        raise
                    raise BadMessage(f"a message of more than {MAX_MESSAGE} bytes") from None
                message = unpack(data)
                if not (isinstance(message, list) and len(message) == 3 and type(message[0]) is int
                        and isinstance(message[1], str)):
                    raise BadMessage("a message is [id, kind, payload]")
                rid, kind, payload = message
                if rid == 0:
                    self._notice(kind, payload)
                    continue
                with self._lock:
                    inbox = self._inboxes.get(rid)
                    if kind != "item":
                        self._inboxes.pop(rid, None)
                        self._windows.pop(rid, None)
                    elif rid in self._windows:
                        if self._windows[rid] <= 0:
                            raise BadMessage("a stream sent more messages than its reader had granted")
                        self._windows[rid] -= 1
                if inbox is not None:
                    inbox.put((kind, payload))
        except (EOFError, OSError):
            if self.bad:
                reason = f" after it sent a bad message ({self.bad})"
        except Exception as exc:  # a message we cannot read: the worker is not to be trusted
            what = str(exc)[:300] if isinstance(exc, BadMessage) else type(exc).__name__
            reason = f" after it sent a bad message ({what})"
            self.process.kill()
        self._die(reason)

    # -- host tools: the callables stay here; the worker calls back ----------------------------------
    def lend_tools(self, spec: ToolSpec) -> list[Any]:
        tools = HostTools(spec)
        token = secrets.token_hex(16)
        with self._lock:
            if self.dead is not None:
                raise HostLost(self.dead)
            self._tools[token] = tools
        return [token, dict(tools.describe())]

    def return_tools(self, token: str) -> None:
        with self._lock:
            tools = self._tools.pop(token, None)
        if tools is not None:
            tools.close()

    def _tool_call(self, payload: Any) -> None:
        """A guest's call (on the reader thread: only started here). The worker is not trusted:
        the token must be one lent to it, and the call is refused past MAX_TOOL_CALLS calls or
        MAX_TOOL_BYTES bytes of arguments running and queued here (what one guest may hold
        in-process: `ToolDoor`), so its calls cost this process a bounded amount."""
        if not (isinstance(payload, list) and len(payload) == 4 and type(payload[0]) is int
                and isinstance(payload[1], str) and isinstance(payload[2], str) and isinstance(payload[3], bytes)):
            raise BadMessage("a tool call is [id, token, name, arguments]")  # never bytes(2**40)
        call_id, token, name, data = payload
        with self._lock:
            tools = self._tools.get(token)
            busy = len(self._tool_calls) >= MAX_TOOL_CALLS
            full = self._tool_bytes + len(data) > MAX_TOOL_BYTES
            if tools is not None and not busy and not full and len(data) <= TOOL_LIMIT:
                self._tool_bytes += len(data)  # given back when the call ends (`answer`), or now
        if tools is None or busy or full or len(data) > TOOL_LIMIT:
            reason = "these host tools are no longer lent" if tools is None else \
                "too many host tool calls at once" if busy else \
                "arguments over the door's limit" if len(data) > TOOL_LIMIT else \
                f"too many bytes of host tool call arguments at once (over {MAX_TOOL_BYTES >> 20} MiB)"
            self._send_tool_reply(call_id, error_reply("RuntimeError", reason), reason)
            return
        try:  # the arguments are decoded here (HostTools): first within the codec's budget
            check_plain(data)
        except BadMessage as exc:
            with self._lock:
                self._tool_bytes -= len(data)
            reason = f"bad arguments for host tool {name[:100]!r}: {exc}"
            self._send_tool_reply(call_id, error_reply("ValueError", reason), reason)
            return
        size = len(data)
        call = tools.start(name, data)
        del data  # the call holds its decoded arguments only
        with self._lock:
            self._tool_calls[call_id] = call

        def answer(done: ToolCall) -> None:  # also when cancelled: then a queued call is dropped
            with self._lock:
                self._tool_calls.pop(call_id, None)
                self._tool_bytes -= size
            self._send_tool_reply(call_id, done.reply(), done.error)

        call.then(answer)

    def _send_tool_reply(self, call_id: int, reply: bytes, error: str) -> None:
        try:
            with self._send_lock:
                self.conn.send_bytes(pack([0, "tool_reply", None, "", [call_id, reply, error]]))
        except OSError:  # the worker is gone: the reader sees it
            pass

    def _tool_cancel(self, call_id: Any) -> None:
        with self._lock:
            call = self._tool_calls.pop(call_id, None) if isinstance(call_id, int) else None
        if call is not None:
            call.cancel()

    def release_tools_of(self, sandbox_ids: List[str]) -> None:
        """Sandboxes that ended: their create(tools=) go back."""
        with self._lock:
            tokens = [self.sandbox_tools.pop(i) for i in sandbox_ids if i in self.sandbox_tools]
        for token in tokens:
            self.return_tools(token)

    def _close_tools(self) -> None:
        with self._lock:
            tools, self._tools, self.sandbox_tools = list(self._tools.values()), {}, {}
            calls, self._tool_calls = list(self._tool_calls.values()), {}
        for call in calls:
            call.cancel()
        for tool_set in tools:
            tool_set.close()

    def _notice(self, kind: str, payload: Any) -> None:
        if kind == "tool":
            self._tool_call(payload)
        elif kind == "tool_cancel":
            self._tool_cancel(payload)
        elif kind == "ready":
            self.ready.set()
        elif kind == "ended":
            if not (isinstance(payload, list) and all(isinstance(i, str) for i in payload)):
                raise BadMessage("an `ended` notice is a list of sandbox ids")
            self.pool.forget(self, payload)
        elif kind == "failed":
            self.pool.failure = f"a worker process could not start: {str(payload)[:1000]}"
        else:
            raise BadMessage(f"an unknown notice {kind[:100]!r}")

    def _die(self, reason: str) -> None:
        try:
            code: Optional[int] = self.process.wait(1.0)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = None
        message = f"the worker process {self.pid} hosting it {_died(code)}{reason}"
        with self._lock:
            self.dead = message
            inboxes, self._inboxes = list(self._inboxes.values()), {}
            self._windows = {}
        for inbox in inboxes:
            inbox.put(("dead", message))
        self._close_tools()
        self.conn.close()
        self.pool.replace(self)

    def stop(self) -> None:
        """Ask the worker to kill its sandboxes and exit; kill it if it does not."""
        try:
            with self._send_lock:
                self.conn.send_bytes(pack([0, "shutdown", None, "", []]))
        except OSError:
            pass
        try:
            self.process.wait(STOP_GRACE)
        except subprocess.TimeoutExpired:
            self.process.kill()


def lease_owner(worker: Worker) -> str:
    """A worker's name on the leases it takes (_local/snapshots.py `owner`: this machine, its pid)."""
    return f"{socket.gethostname()}:{worker.pid}"


def _has_fileno(stream: Any) -> bool:
    try:
        stream.fileno()
        return True
    except (AttributeError, OSError, ValueError):
        return False


def _worker_env() -> dict[str, str]:
    """The agent's environment (the cache and settings; guests never see it), with this copy
    of declaw_wasm first on the path, and without the state key's settings: a worker takes the
    key only from the calls that need it (client.py `KEYED`)."""
    from ..settings import STATE_KEY_ENV, STATE_KEY_FILE_ENV

    here = str(Path(__file__).resolve().parents[2])
    env = {k: v for k, v in os.environ.items() if k not in (STATE_KEY_ENV, STATE_KEY_FILE_ENV)}
    env["PYTHONPATH"] = os.pathsep.join([here] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


class ProcessPool:
    """Sandboxes in N worker processes (the `Sandboxes` of `processes[:N]`)."""

    worker_module = "declaw_wasm._pool.worker"  # what each worker runs (`python -m`); tests run hostile ones

    def __init__(self, workers: Optional[int] = None) -> None:
        if not sys.executable:
            raise SandboxException("a process pool needs sys.executable to start its workers")
        self.size = workers or os.cpu_count() or 1
        self.failure = ""
        self._lock = threading.Lock()
        self._closed = False
        self._homes: dict[str, Worker] = {}
        self._lost: "OrderedDict[str, str]" = OrderedDict()
        self._recoveries: dict[str, Recovery] = {}  # checkpointed sandboxes: restored when their worker dies
        self.workers: List[Worker] = [Worker(self, slot) for slot in range(self.size)]

    # -- placement ----------------------------------------------------------------------------------
    def _pick(self, ready_first: bool = False) -> Worker:
        """The least loaded live worker (`ready_first`: among those ready, if any: a restore does
        not wait for a worker still starting)."""
        with self._lock:
            live = [w for w in self.workers if w.dead is None]
            if not live:
                raise SandboxException(self.failure or "no worker process is running")
            if ready_first:
                live = [w for w in live if w.ready.is_set()] or live
            worker = min(live, key=lambda w: (len(w.sandboxes) + w.pending, not w.ready.is_set()))
            worker.pending += 1
        return worker

    def create(self, request: CreateSandbox) -> HostedSandbox:
        plain, secrets = create_arguments(request)
        worker = self._pick()
        spec = request._host_only.get("tools")
        lent = None
        try:
            lent = worker.lend_tools(spec) if spec is not None else None
            sandbox_id = expect(worker.call(None, "create", plain, secrets, *([lent] if lent else [])), str, "create")
            hosted = self.adopt(worker, sandbox_id, fresh=True)
        except BaseException:
            if lent is not None:
                worker.return_tools(lent[0])
            raise
        finally:
            with self._lock:
                worker.pending -= 1
        hosted.forward()  # its "created" event, to this process's listeners
        recovery = None
        if checkpoint_policy(request.lifecycle):
            recovery = Recovery(self._relocate, secrets, lease_owner(worker), worker, sandbox_id, sandbox_id)
        with self._lock:
            if lent is not None:
                worker.sandbox_tools[sandbox_id] = lent[0]
            if recovery is not None:
                self._recoveries[sandbox_id] = recovery
        if recovery is not None:
            hosted = HostedSandbox(worker, sandbox_id, recovery=recovery)
        hosted.limit_output((request.limits or Limits()).output_limit)
        return hosted

    def _relocate(self, recovery: Recovery) -> tuple[Any, ...]:
        """Restore a checkpointed sandbox whose worker died on a live worker (a ready one first)."""
        worker = self._pick(ready_first=True)
        try:
            local, turn, what = worker.call(None, "recover", recovery.where[1], recovery.owner, recovery.secrets)
        finally:
            with self._lock:
                worker.pending -= 1
        asked = recovery.where[1]
        if local != asked:
            raise worker.refuse(f"it answered recover {asked} with another sandbox's id")
        self.adopt(worker, asked)
        return worker, asked, asked, lease_owner(worker), int(turn), str(what)

    def connect(self, sandbox_id: str, timeout: Optional[float] = None) -> HostedSandbox:
        with self._lock:
            worker = self._homes.get(sandbox_id)
            lost = self._lost.get(sandbox_id)
            recovery = self._recoveries.get(sandbox_id)
        if recovery is not None:  # checkpointed: restored on another worker if its own died
            hosted = HostedSandbox(worker or recovery.where[0], sandbox_id, recovery=recovery)
            hosted.info()
            return hosted
        if lost is not None:
            raise HostLost(f"sandbox {sandbox_id} is lost: {lost}")
        if worker is None:  # paused in the state store, maybe by another process: any worker resumes it
            worker = self._pick()
            try:
                worker.call(None, "connect", sandbox_id, timeout)
            except SandboxNotFoundException:
                raise SandboxNotFoundException(
                    f"sandbox {sandbox_id!r} not found (killed, timed out, or never created in this "
                    "process's pool nor paused in the state store)") from None
            finally:
                with self._lock:
                    worker.pending -= 1
            return self.adopt(worker, sandbox_id)
        worker.call(None, "connect", sandbox_id, timeout)
        return HostedSandbox(worker, sandbox_id)

    def adopt(self, worker: Worker, sandbox_id: str, fresh: bool = False) -> HostedSandbox:
        """A sandbox on `worker` from now on: one it made (`fresh`: a create's, a fork's), or one
        it was asked for by id (a resume, a restore, a connect to a paused one).

        A worker is trusted with no id it was not given or did not make: a "new" id this pool
        already knows (homed on a worker, or lost with one), or any id homed on another live
        worker, would send that sandbox's calls — the agent's files, code, envs — to this
        worker, and report the real one lost when this one dies. A worker that answers one is
        killed as compromised (`Worker.refuse`) and the call fails. (Ids of sandboxes paused in
        the state store are not homed anywhere: any worker may resume one, as `connect` asks.)"""
        if not isinstance(sandbox_id, str) or not sandbox_id:
            raise worker.refuse("a sandbox id that is not a string")
        with self._lock:
            home = self._homes.get(sandbox_id)
            taken = home is not None and home is not worker and home.dead is None
            known = home is not None or sandbox_id in self._lost
            if not taken and not (fresh and known):
                self._homes[sandbox_id] = worker
                self._lost.pop(sandbox_id, None)
                worker.sandboxes.add(sandbox_id)
        if fresh and known:
            raise worker.refuse(f"it named sandbox {sandbox_id[:100]} as one it made, which it did not")
        if taken:
            raise SandboxException(f"sandbox {sandbox_id} is hosted by another worker process "
                                   f"({home.pid if home else '?'}); it was not moved to {worker.pid}")
        return HostedSandbox(worker, sandbox_id)

    def restore(self, sandbox_id: str, snapshot_id: Optional[str], request: ResumeSandbox) -> HostedSandbox:
        refuse_host_only(request, "a process pool")
        with self._lock:
            home = self._homes.get(sandbox_id)
        worker = home or self._pick()
        try:
            local = worker.call(None, "restore", sandbox_id, snapshot_id, request)
        finally:
            if home is None:
                with self._lock:
                    worker.pending -= 1
        if local != sandbox_id:  # a restore keeps the id
            raise worker.refuse(f"it answered restore {sandbox_id} with another sandbox's id")
        return self.adopt(worker, sandbox_id)

    def list_snapshots(self, sandbox_id: Optional[str] = None) -> List[Snapshot]:
        worker = self._pick()
        try:
            found: List[Snapshot] = expect(worker.call(None, "snapshots", sandbox_id), [Snapshot], "snapshots")
        finally:
            with self._lock:
                worker.pending -= 1
        return found

    def delete_snapshot(self, sandbox_id: str, snapshot_id: str) -> bool:
        worker = self._pick()
        try:
            return bool(worker.call(None, "drop_snapshot", sandbox_id, snapshot_id))
        finally:
            with self._lock:
                worker.pending -= 1

    def list(self) -> List[SandboxInfo]:
        infos: List[SandboxInfo] = []
        for worker in list(self.workers):
            try:
                infos += expect(worker.call(None, "list_sandboxes"), [SandboxInfo], "list_sandboxes")
            except SandboxException:  # lost, or answering nonsense: its sandboxes are not listed
                continue
        return sorted(infos, key=lambda i: i.started_at, reverse=True)

    def knows(self, sandbox_id: str) -> bool:
        with self._lock:
            return sandbox_id in self._homes or sandbox_id in self._lost

    def pid_of(self, sandbox_id: str) -> int:
        """The pid of the worker process hosting a sandbox (for tests and operators)."""
        with self._lock:
            worker = self._homes.get(sandbox_id)
        if worker is None:
            raise SandboxNotFoundException(f"sandbox {sandbox_id!r} is not in this pool")
        return worker.pid

    # -- the workers' news --------------------------------------------------------------------------
    def forget(self, worker: Worker, sandbox_ids: List[str]) -> None:
        with self._lock:
            for sandbox_id in sandbox_ids:
                worker.sandboxes.discard(sandbox_id)
                if self._homes.get(sandbox_id) is worker:
                    del self._homes[sandbox_id]
                    self._recoveries.pop(sandbox_id, None)
        worker.release_tools_of(sandbox_ids)

    def replace(self, worker: Worker) -> None:
        """A worker died: its sandboxes are lost; a fresh worker takes its slot (unless it died
        before it was ever ready: then the pool would only start failing workers)."""
        with self._lock:
            for sandbox_id in worker.sandboxes:
                if self._homes.get(sandbox_id) not in (None, worker):
                    continue  # checkpointed, and restored on another worker already
                self._homes.pop(sandbox_id, None)
                self._lost[sandbox_id] = worker.dead or "its worker process died"
            while len(self._lost) > KEEP_LOST:
                self._lost.popitem(last=False)
            worker.sandboxes = set()
            if self._closed or not worker.ready.is_set() or self.workers[worker.slot] is not worker:
                return
        fresh = Worker(self, worker.slot)
        with self._lock:
            self.workers[worker.slot] = fresh
        if self._closed:
            fresh.stop()

    def close(self) -> None:
        """Stop every worker (their sandboxes are killed and their folders deleted)."""
        with self._lock:
            self._closed = True
            workers = list(self.workers)
        threads = [threading.Thread(target=w.stop, daemon=True) for w in workers if w.dead is None]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(STOP_GRACE + 1)


_pools: dict[int, ProcessPool] = {}
_pools_lock = threading.Lock()


def pool_for(workers: Optional[int] = None) -> ProcessPool:
    """This process's pool of `workers` worker processes (default: one per core), started on
    first use and shared by every call that names it."""
    size = workers or os.cpu_count() or 1
    with _pools_lock:
        pool = _pools.get(size)
        if pool is None:
            pool = _pools[size] = ProcessPool(size)
        return pool


def home_of(sandbox_id: str) -> Optional[ProcessPool]:
    """The pool of this process that made the sandbox, if one did."""
    with _pools_lock:
        pools = list(_pools.values())
    return next((p for p in pools if p.knows(sandbox_id)), None)


@atexit.register
def _close_all() -> None:
    with _pools_lock:
        pools = list(_pools.values())
    for pool in pools:
        pool.close()

