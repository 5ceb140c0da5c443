"""A pool's worker process: `python -m declaw_wasm._pool.worker FD`, where FD is its end of a
socket pair with the pool (pool.py). It loads the runtime (from the machine's compiled cache:
one compile per machine, never per worker), says `ready`, then answers each request on a thread
of its own with its `Host`. Every few tenths of a second it tells the pool which of its
sandboxes ended by themselves (timeouts), so the pool's placement counts stay true.

It lives only as long as its pool: when the pool's end of the socket closes (the agent exited or
was killed) it kills its sandboxes (deleting their folders) and exits. It runs in a session of
its own, so a Ctrl-C meant for the agent does not reach it; the agent's pool stops it.

Framing is `multiprocessing.connection.Connection` (length-prefixed messages on the socket,
`recv_bytes` with a size cap); the messages are msgpack (codec.py): a request is `[id, kind,
sandbox id, method, args, state key]`, the last set on the calls that may use the state store
(client.py `KEYED`): the worker's only source of the state key, which is never in its
environment (pool.py `_worker_env`). Every request gets exactly one answer: a value, or an
error — also when the answer cannot be encoded (a value msgpack cannot carry, an answer over
the codec's `MAX_MESSAGE`), and when answering raised.

Host tools (`tools=`) live in the pool's process: a guest's call becomes a `tool` message to
the pool (`[call id, token, name, msgpack arguments]`), answered by a `tool_reply` (`[call id,
encoded reply, error]`); a guest that stops waiting sends `tool_cancel`.

A stream sends at most `STREAM_WINDOW` messages ahead of the pool's reader, which grants more
with `credit` messages (`[id, "credit", None, "", [count]]`) as its caller takes them; while it
has no credit, the stream's thread waits (a cell's later writes join those waiting:
_backend.CellNews; a command's join its EventLog). A `close` (the caller stopped reading) lets
the stream run to its end with nothing sent.
"""

from __future__ import annotations

import itertools
import os
import queue
import signal
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

from .._local.tools import ToolCall, error_reply
from ..exceptions import SandboxException
from .codec import MAX_MESSAGE, STREAM_WINDOW, pack, unpack
from .host import Host, Reply, error

WATCH = 0.25  # seconds between checks for sandboxes that ended by themselves


class Threads:
    """Threads that run requests, kept for the next one when idle (a request may block as long
    as its command runs, so there is no cap: a thread is started whenever none is idle)."""

    IDLE = 60.0  # seconds an idle thread waits for work before it ends

    def __init__(self) -> None:
        self._tasks: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0

    def run(self, task: Any, *args: Any) -> None:
        with self._lock:
            spare = self._idle > 0
            if spare:
                self._idle -= 1
        self._tasks.put((task, args))
        if not spare:
            threading.Thread(target=self._serve, name="declaw-worker-call", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                task, args = self._tasks.get(timeout=self.IDLE)
            except queue.Empty:
                with self._lock:
                    if self._idle > 0 and self._tasks.empty():
                        self._idle -= 1
                        return
                continue
            task(*args)
            with self._lock:
                self._idle += 1


class RemoteTools:
    """Host tools the pool's process lent (`lend_tools`): a call goes back over the pipe, where
    the callables live, and its reply comes back as a `tool_reply` (already encoded for the
    guest)."""

    def __init__(self, worker: "Worker", token: str, descriptions: dict[str, str]) -> None:
        self.worker = worker
        self.token = token
        self.descriptions = descriptions

    def describe(self) -> dict[str, str]:
        return self.descriptions

    def start(self, name: str, payload: bytes, owner: Any = None) -> ToolCall:
        return self.worker.tool_call(self.token, name, payload)  # (capped where the callables run)


class Window:
    """What one stream may still send before the pool's reader grants more (`credit`)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._credit = STREAM_WINDOW
        self._closed = False

    def give(self, count: int) -> None:
        with self._cond:
            self._credit += count
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def take(self, stop: threading.Event) -> bool:
        """Wait for credit for one message: True to send it, False if the reader closed the
        stream (or the pool is gone)."""
        with self._cond:
            while self._credit <= 0 and not self._closed and not stop.is_set():
                self._cond.wait(1.0)
            if self._closed or stop.is_set():
                return False
            self._credit -= 1
            return True


class Worker:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.host = Host(f"worker process {os.getpid()}",
                         tools=lambda token, descriptions: RemoteTools(self, token, descriptions))
        self._send_lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = Threads()
        self._tool_lock = threading.Lock()
        self._tool_calls: dict[int, ToolCall] = {}  # host tool calls waiting for the pool's reply
        self._tool_ids = itertools.count(1)
        self._windows: dict[int, Window] = {}  # open streams' credit (only this loop adds)

    # -- host tools: calls back to the pool's process ------------------------------------------
    def tool_call(self, token: str, name: str, payload: bytes) -> ToolCall:
        call = ToolCall()
        with self._tool_lock:
            call_id = next(self._tool_ids)
            self._tool_calls[call_id] = call

        def cancel() -> None:
            with self._tool_lock:
                self._tool_calls.pop(call_id, None)
            self.send([0, "tool_cancel", call_id])

        call.on_cancel = cancel
        self.send([0, "tool", [call_id, token, name, payload]])
        return call

    def _tool_reply(self, call_id: int, reply: bytes, error: str) -> None:
        with self._tool_lock:
            call = self._tool_calls.pop(call_id, None)
        if call is not None:
            call.finish(bytes(reply), str(error))

    def send(self, message: Any) -> None:
        self._send_bytes(pack(message))

    def _send_bytes(self, data: bytes) -> None:
        try:
            with self._send_lock:
                self.conn.send_bytes(data)
        except OSError:  # the pool is gone; the main loop sees it too and ends
            self._stop.set()

    def answer(self, rid: int, reply: Reply, what: str) -> bool:
        """Send `reply` to request `rid`; if it cannot be encoded, the request's error instead
        (then False: a stream ends there)."""
        try:
            self._send_bytes(pack([rid, *reply]))
            return True
        except Exception as exc:  # MessageTooLarge, TypeError, ValueError, OverflowError...
            failed = SandboxException(f"the answer to {what} could not be sent from the worker process "
                                      f"{os.getpid()}: {type(exc).__name__}: {str(exc)[:300]}")
            self._send_bytes(pack([rid, *error(failed)]))
            return False

    def run(self) -> int:
        try:
            from .._wasm.warm_image import get_interpreter

            get_interpreter()  # warm before the first request (progress goes to stderr)
        except Exception as exc:
            self.send([0, "failed", f"{type(exc).__name__}: {exc}"])
            return 1
        self.send([0, "ready", os.getpid()])
        threading.Thread(target=self._watch, name="declaw-worker-watch", daemon=True).start()
        try:
            while not self._stop.is_set():
                try:
                    message = unpack(self.conn.recv_bytes(MAX_MESSAGE))
                except (EOFError, OSError):
                    break
                if message[1] == "shutdown":
                    break
                if message[1] == "tool_reply":  # a host tool's answer: no thread needed
                    self._tool_reply(*message[4])
                    continue
                if message[1] in ("credit", "close"):  # a stream's reader took messages, or stopped
                    window = self._windows.get(message[0])
                    if window is not None and message[1] == "credit":
                        window.give(int(message[4][0]))
                    elif window is not None:
                        window.close()
                    continue
                if message[1] == "stream":
                    self._windows[message[0]] = Window()
                self._threads.run(self._handle, message)
        finally:
            self._stop.set()
            self.host.sandboxes.kill_all()
            with self._tool_lock:
                calls, self._tool_calls = list(self._tool_calls.values()), {}
            for call in calls:
                call.finish(error_reply("RuntimeError", "the pool's process is gone"), "pool gone")
        return 0

    def _handle(self, message: Any) -> None:
        """One request, answered exactly once (a stream: its items, then its end or an error)."""
        rid, kind, sandbox_id, method, args, state_key = message
        try:
            if kind == "call":
                self.answer(rid, self.host.call(sandbox_id, method, args, state_key), str(method))
                return
            stream = self.host.stream(sandbox_id, method, args)
            window = self._windows.get(rid) or Window()
            try:
                for item in stream:
                    if window.take(self._stop) and not self.answer(rid, ("item", list(item)), str(method)):
                        return
            finally:
                stream.close()
                self._windows.pop(rid, None)
            self.answer(rid, ("ok", None), str(method))
        except BaseException as exc:  # answering itself failed: the caller still hears of it
            self.answer(rid, error(exc), str(method))

    def _watch(self) -> None:
        while not self._stop.wait(WATCH):
            ended = self.host.ended()
            if ended:
                self.send([0, "ended", ended])


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # kill the sandboxes on the way out
    conn = Connection(int(argv[1]))
    try:
        code = Worker(conn).run()
    except SystemExit:  # SIGTERM: the sandboxes were killed on the way out
        code = 0
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # guest threads must not hold the exit


if __name__ == "__main__":
    sys.exit(main(sys.argv))
