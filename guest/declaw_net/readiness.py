"""Truthful readiness for sandbox sockets: `select.select`, `select.poll`, `selectors`.

The WASI `poll_oneoff` shim reports every fd ready at once (right for files). Sandbox sockets
are not WASI fds: here they are told apart by their fake fd numbers, and their readiness comes
from the socket's own receive buffer first (bytes the guest holds already, or the end of the
stream), then from the host (door op net.poll), which waits until a connection has data, ended,
failed, or can take more. So urllib3's pooled-connection check (`wait_for_read(sock, 0)`) sees a
live idle connection as not readable, and asyncio's selector waits for real events.
Other fds go to the original functions, as before.
"""

from __future__ import annotations

import select as _select_module
import sys

from . import _door
from .sockets import DoorSocket, by_fd

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: start-up stays free
    from collections.abc import Iterable
    from typing import Any

_orig: dict[str, Any] = {}


def _fileno(obj: object) -> int:
    if isinstance(obj, int):
        return obj
    fileno = getattr(obj, "fileno", None)
    if fileno is None:
        raise TypeError("argument must be an int, or have a fileno() method.")
    fd = fileno()
    if not isinstance(fd, int):
        raise TypeError("fileno() returned a non-integer")
    if fd < 0:
        raise ValueError("file descriptor cannot be a negative integer (%d)" % fd)
    return fd


def _program_stdin() -> bool:
    """Whether fd 0 is a running program's stdin stream, not the guest's descriptor."""
    process = sys.modules.get("declaw_posix.process")
    return process is not None and bool(process.virtual_fd(0))


def _ask_host(read_socks: Iterable[DoorSocket], write_socks: Iterable[DoorSocket],
              timeout: float | None) -> tuple[set[DoorSocket], set[DoorSocket]]:
    """(readable, writable) sets of sockets, asking the host for those it must answer."""
    readable = {s for s in read_socks if s._locally_readable() or s._id is None}
    writable = {s for s in write_socks if s._id is None or s._closed}
    ask_r = [s for s in read_socks if s not in readable and s._id is not None]
    ask_w = [s for s in write_socks if s not in writable and s._id is not None]
    if readable or writable:
        timeout = 0
    if ask_r or ask_w:
        reply = _door.call("net.poll", read=[s._id for s in ask_r], write=[s._id for s in ask_w],
                           timeout=timeout)
        ready_r, ready_w = set(reply["read"]), set(reply["write"])
        readable |= {s for s in ask_r if s._id in ready_r}
        writable |= {s for s in ask_w if s._id in ready_w}
    return readable, writable


def select(rlist: Iterable[Any], wlist: Iterable[Any], xlist: Iterable[Any],
           timeout: float | None = None) -> tuple[list[Any], list[Any], list[Any]]:
    if timeout is not None and timeout < 0:
        raise ValueError("timeout must be non-negative")
    rlist, wlist, xlist = list(rlist), list(wlist), list(xlist)
    stdin = [o for o in rlist if _fileno(o) == 0 and _program_stdin()]
    if stdin:  # a program's stdin the shell hands it (a pipe's text, a file): there to read, or at its end
        rest = [o for o in rlist if o not in stdin]
        got = select(rest, wlist, xlist, 0) if rest or wlist or xlist else ([], [], [])
        return [o for o in rlist if o in stdin or o in got[0]], got[1], got[2]
    door_r = {id(o): by_fd[_fileno(o)] for o in rlist if _fileno(o) in by_fd}
    door_w = {id(o): by_fd[_fileno(o)] for o in wlist if _fileno(o) in by_fd}
    if not door_r and not door_w:
        return _orig["select"](rlist, wlist, xlist, timeout)
    other_r = [o for o in rlist if id(o) not in door_r]
    other_w = [o for o in wlist if id(o) not in door_w]
    other_x = [o for o in xlist if _fileno(o) not in by_fd]
    got_r: list[Any] = []
    got_w: list[Any] = []
    got_x: list[Any] = []
    if other_r or other_w or other_x:
        got_r, got_w, got_x = _orig["select"](other_r, other_w, other_x, 0)
    readable, writable = _ask_host(set(door_r.values()), set(door_w.values()),
                                   0 if (got_r or got_w or got_x) else timeout)
    return ([o for o in rlist if (id(o) in door_r and door_r[id(o)] in readable) or o in got_r],
            [o for o in wlist if (id(o) in door_w and door_w[id(o)] in writable) or o in got_w],
            got_x)


class poll:
    """select.poll() that knows sandbox sockets."""

    def __init__(self) -> None:
        self._masks: dict[int, int] = {}
        self._inner = _orig["poll"]()

    def register(self, fd: object, eventmask: int | None = None) -> None:
        fd = _fileno(fd)
        if eventmask is None:
            eventmask = _select_module.POLLIN | _select_module.POLLPRI | _select_module.POLLOUT
        self._masks[fd] = eventmask
        if fd not in by_fd:
            self._inner.register(fd, eventmask)

    def modify(self, fd: object, eventmask: int) -> None:
        fd = _fileno(fd)
        if fd not in self._masks:
            raise FileNotFoundError(2, "No such file or directory")
        self.register(fd, eventmask)

    def unregister(self, fd: object) -> None:
        fd = _fileno(fd)
        del self._masks[fd]
        if fd not in by_fd:
            try:
                self._inner.unregister(fd)
            except KeyError:
                pass

    def poll(self, timeout: float | None = None) -> list[tuple[int, int]]:
        m = _select_module
        door = {fd: mask for fd, mask in self._masks.items() if fd in by_fd}
        if not door:
            return self._inner.poll(timeout)
        others = self._inner.poll(0) if len(door) < len(self._masks) else []
        if timeout is None or timeout < 0:
            seconds = None
        else:
            seconds = timeout / 1000.0
        reads = {by_fd[fd] for fd, mask in door.items() if mask & (m.POLLIN | m.POLLPRI)}
        writes = {by_fd[fd] for fd, mask in door.items() if mask & m.POLLOUT}
        readable, writable = _ask_host(reads, writes, 0 if others else seconds)
        events = list(others)
        for fd in door:
            sock = by_fd.get(fd)
            ev = 0
            if sock in readable:
                ev |= m.POLLIN
            if sock in writable:
                ev |= m.POLLOUT
            if ev:
                events.append((fd, ev))
        return events


def install() -> None:
    s: Any = _select_module  # patched: select and poll become ours
    if getattr(s, "_declaw_net", False):
        return
    _orig.update(select=s.select, poll=s.poll)
    s.select = select
    s.poll = poll
    s._declaw_net = True
    import selectors

    patched: Any = selectors  # private class attributes the selectors read
    patched.SelectSelector._select = staticmethod(select)
    if hasattr(selectors, "PollSelector"):
        patched.PollSelector._selector_cls = poll
