"""asyncio's subprocesses in the sandbox: `asyncio.create_subprocess_exec`, `..._shell` and
`loop.subprocess_exec`/`subprocess_shell`, over the sandbox's `subprocess.Popen`
(subprocesses.py).

CPython's own transport needs what WASI lacks: a file descriptor per pipe for the selector, and a
thread that waits for the child (both failed: `can't start new thread`, `fileno`). Here the child
is the one `Popen` runs through the sandbox shell, and it runs as such a child does, on this
thread: when it is made, or, with `stdin=PIPE`, once its stdin is closed (`communicate`,
`stdin.close()`, `write_eof()`), it is waited for, or the loop has nothing else to wait for
(`run_waiting`, called by the guest's selector: a child that never reads its stdin, as
`loop.subprocess_shell`'s default pipes make). The loop waits meanwhile. Then its output is
handed to the protocol as a pipe's data, its pipes close, and it has exited: `communicate`,
`wait`, `stdout.read()`/`readline()`, `returncode` behave as CPython's with a child that ran to its
end. So a program that talks with its child line by line (writes, then reads a reply before
closing stdin) waits for ever here, as its `subprocess.Popen` form would; docs/guest.md says so.
"""

from __future__ import annotations

import asyncio
import subprocess
from typing import Any


class _Pipe(asyncio.Transport):
    """One of the child's pipes as the protocol sees it: stdin written into the child's input,
    stdout and stderr fed by `_Transport._deliver`."""

    def __init__(self, owner: _Transport, fd: int) -> None:
        super().__init__()
        self._owner, self._fd, self._closing = owner, fd, False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing:
            raise RuntimeError("unable to write; the pipe is closed")
        self._owner._write_stdin(bytes(data))

    def write_eof(self) -> None:
        self.close()

    def can_write_eof(self) -> bool:
        return True

    def get_write_buffer_size(self) -> int:
        return 0

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return (0, 0)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def is_reading(self) -> bool:
        return not self._closing

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        if self._fd == 0:
            self._owner._stdin_closed()

    def abort(self) -> None:
        self.close()

    def is_closing(self) -> bool:
        return self._closing


_waiting: list[_Transport] = []  # children whose stdin is a pipe still open: not run yet


def run_waiting() -> bool:
    """Run the running loop's children still waiting for their stdin to close, when it would
    otherwise wait for ever (nothing scheduled, no timer): on Linux they would have run meanwhile.
    Whether any will (at once: the loop's next callbacks)."""
    loop = asyncio.events._get_running_loop()
    ran = False
    for transport in list(_waiting):
        if transport._loop.is_closed():  # left by an earlier program's loop: never run now
            _waiting.remove(transport)
        elif transport._loop is loop:
            _waiting.remove(transport)
            loop.call_soon(transport._end)  # as a callback: what its protocol raises is the loop's to report
            ran = True
    return ran


class _Transport(asyncio.SubprocessTransport):
    """A child of the sandbox's `Popen`, run on this thread, as a subprocess transport."""

    def __init__(self, loop: asyncio.AbstractEventLoop, protocol: Any, args: Any, shell: bool, stdin: Any,
                 stdout: Any, stderr: Any, bufsize: int, extra: Any = None, **kwargs: Any) -> None:
        super().__init__(extra)
        self._loop, self._protocol = loop, protocol
        self._returncode: int | None = None
        self._ended = False
        self._closed = False
        self._waiters: list[asyncio.Future[int]] = []
        popen: Any = subprocess.Popen  # the sandbox's (subprocesses.py), which takes _declaw_waited
        self._popen = popen(args, shell=shell, stdin=stdin, stdout=stdout, stderr=stderr, bufsize=bufsize,
                            _declaw_waited=True, **kwargs)  # run here, never beside: see above
        self._pipes = {fd: _Pipe(self, fd) for fd, where in enumerate((stdin, stdout, stderr))
                       if where == subprocess.PIPE}
        protocol.connection_made(self)
        if stdin != subprocess.PIPE:  # the child has run: its output and exit come next
            loop.call_soon(self._end)
        else:
            _waiting.append(self)

    def _write_stdin(self, data: bytes) -> None:
        stdin = self._popen.stdin
        if stdin is not None and not stdin.closed:
            stdin.write(data)

    def _stdin_closed(self) -> None:
        if self._ended:
            return
        self._loop.call_soon(self._end)

    def _end(self) -> None:
        """Run the child (if its stdin kept it waiting), hand its output over and end it."""
        if self._ended:
            return
        self._ended = True
        if self in _waiting:
            _waiting.remove(self)
        stdin = self._popen.stdin
        if stdin is not None and not stdin.closed:
            stdin.close()  # runs the child (subprocesses._Input)
        self._popen.wait()
        self._returncode = self._popen.returncode
        if 0 in self._pipes:
            self._pipes[0]._closing = True
            self._protocol.pipe_connection_lost(0, None)
        for fd, stream in ((1, self._popen.stdout), (2, self._popen.stderr)):
            if fd in self._pipes and stream is not None:
                data = stream.read()
                if data:
                    self._protocol.pipe_data_received(fd, data)
                self._pipes[fd]._closing = True
                self._protocol.pipe_connection_lost(fd, None)
        self._protocol.process_exited()
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(self._returncode)
        self._waiters.clear()
        self._loop.call_soon(self._protocol.connection_lost, None)

    async def _wait(self) -> int:
        """What `Process.wait()` awaits (CPython's transports have it too)."""
        if self._returncode is not None:
            return self._returncode
        waiter: asyncio.Future[int] = self._loop.create_future()
        self._waiters.append(waiter)
        self._loop.call_soon(self._end)
        return await waiter

    def get_pid(self) -> int:
        return int(self._popen.pid)

    def get_returncode(self) -> int | None:
        return self._returncode

    def get_pipe_transport(self, fd: int) -> _Pipe | None:
        return self._pipes.get(fd)

    def send_signal(self, signal: int) -> None:
        if self._returncode is not None:
            raise ProcessLookupError()
        self._popen.send_signal(signal)

    def terminate(self) -> None:
        self.send_signal(15)

    def kill(self) -> None:
        self.send_signal(9)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for pipe in self._pipes.values():
            pipe._closing = True

    def is_closing(self) -> bool:
        return self._closed


def patch(unix_loop: Any) -> None:
    """Make `unix_loop` (asyncio's `_UnixSelectorEventLoop`) start its subprocesses as above."""
    if getattr(unix_loop, "_declaw_subprocesses", False):
        return
    unix_loop._declaw_subprocesses = True

    async def _make_subprocess_transport(self: Any, protocol: Any, args: Any, shell: bool, stdin: Any,
                                         stdout: Any, stderr: Any, bufsize: int, extra: Any = None,
                                         **kwargs: Any) -> _Transport:
        return _Transport(self, protocol, args, shell, stdin, stdout, stderr, bufsize, extra, **kwargs)

    unix_loop._make_subprocess_transport = _make_subprocess_transport
