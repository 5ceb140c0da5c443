"""Inbound: servers in the sandbox, reached through host listeners the host chooses.

WASI gives a guest no listening socket, so the host listens for it (docs/inbound.md). Each guest
port a sandbox uses (`get_host(port)`, or a guest's `listen`) maps to one host listener on
127.0.0.1 at a port the kernel picks (`HostPort`), for the sandbox's life. One thread for the whole
process (`Front`) accepts on every host listener and reads each new connection's first HTTP
request head (bounded: `Limits.net_header_bytes` and `HEAD_SECONDS`; parsed by h11), then:

* a `Host` that is not a loopback name or address, a `*.localhost` name or an operator's name
  (DECLAW_WASM_ALLOWED_HOSTS) or a name under one: 421 (a web page rebinding its own name to 127.0.0.1);
* a sandbox created with `network={"allow_public_traffic": False}`: the head must carry the
  sandbox's token in `e2b-traffic-access-token` (compared in constant time), else 403;
* nothing in the sandbox listens on the port: 502, saying so;
* the sandbox has `Limits.net_connections` inbound connections already, or the guest's accept
  queue (`MAX_BACKLOG`) is full: 503;
* else the connection waits in the guest listener's queue (`Listener`), with the bytes read so
  far, until the guest accepts it (door op net.accept). From then on it is an
  `InboundConnection`, driven by the guest's own door calls as an outbound one is
  (connection.py): bytes move both ways unchanged, through two windows of `WINDOW` bytes each.

A killed sandbox's session closes its ports at once (`Inbound.close`): the host listeners, the
queued and the open connections. Every inbound connection is an audit event (kind "inbound",
direction "inbound": the guest port, the first request's method and target, bytes each way and
the duration); refused ones too, with the reason.
"""

from __future__ import annotations

import hmac
import os
import select
import selectors
import socket
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Optional

import h11

from .audit import AuditEvent, now
from .connection import NetError

if TYPE_CHECKING:
    from .session import EgressSession

TOKEN_HEADER = b"e2b-traffic-access-token"
HEAD_SECONDS = 10.0  # a new connection's first request head must arrive within this
WINDOW = 256 << 10  # bytes held each way per accepted connection
MAX_BACKLOG = 128  # connections waiting for the guest's accept, per listener
MAX_PORTS = 64  # guest ports one sandbox may map
MAX_HEADS = 1024  # connections whose head is being read, in the whole process
EPHEMERAL = (32768, 60999)  # guest ports given for a listen on port 0
LINGER = 5.0  # seconds a closed connection's last bytes may take to reach a slow client
# Refused inbound connections recorded in the audit log: a bucket of DENIED_BURST events refilled
# at DENIED_RATE a second; past it, refusals are counted and recorded as one summary event, so
# strangers cannot push a sandbox's own history out of its bounded audit log.
DENIED_BURST = 20
DENIED_RATE = 2.0


class HostPort:
    """One guest port of a sandbox and the host listener that stands for it."""

    def __init__(self, inbound: "Inbound", port: int) -> None:
        self.inbound = inbound
        self.port = port
        self.listener: Optional[Listener] = None
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(MAX_BACKLOG)
        sock.setblocking(False)
        self.sock = sock
        self.host_port: int = sock.getsockname()[1]
        self.used = time.monotonic()  # last asked for: the unused mapping longest idle goes first


class Pending:
    """An accepted connection whose first request head is being read."""

    def __init__(self, sock: socket.socket, port: HostPort, peer: tuple[str, int], limit: int) -> None:
        self.sock = sock
        self.port = port
        self.peer = peer
        self.data = bytearray()
        self.parser = h11.Connection(h11.SERVER, max_incomplete_event_size=limit)
        self.started = time.monotonic()
        self.deadline = self.started + HEAD_SECONDS


class Accepted:
    """A checked connection waiting for the guest's accept: its socket and the bytes read."""

    def __init__(self, pending: Pending, request: Optional[h11.Request]) -> None:
        self.sock = pending.sock
        self.peer = pending.peer
        self.data = bytes(pending.data)
        self.started = pending.started
        self.method = request.method.decode("ascii", "replace") if request is not None else "OWN"
        self.target = request.target.decode("ascii", "replace") if request is not None else ""


class Front:
    """The process's one accepting thread (module docstring), started with the first port."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.selector: Optional[selectors.BaseSelector] = None
        self.heads = 0
        self._wake: Optional[tuple[socket.socket, socket.socket]] = None
        self._pid = 0

    def _start(self) -> selectors.BaseSelector:
        if self.selector is not None and self._pid != os.getpid():  # a forked child: no thread here
            self.selector, self._wake, self.heads = None, None, 0
        if self.selector is None:
            self._pid = os.getpid()
            self.selector = selectors.DefaultSelector()
            wake = socket.socketpair()
            for s in wake:
                s.setblocking(False)
            self._wake = wake
            self.selector.register(wake[0], selectors.EVENT_READ, None)
            threading.Thread(target=self._run, name="declaw-wasm inbound", daemon=True).start()
        return self.selector

    def add(self, sock: socket.socket, data: object) -> None:
        with self.lock:
            self._start().register(sock, selectors.EVENT_READ, data)
        self.wake()

    def drop(self, sock: socket.socket) -> None:
        """Stop watching `sock` and close it (now, on the caller's thread)."""
        with self.lock:
            if self.selector is not None:
                try:
                    self.selector.unregister(sock)
                except (KeyError, ValueError):
                    pass
            try:
                sock.close()
            except OSError:
                pass

    def wake(self) -> None:
        if self._wake is not None:
            try:
                self._wake[1].send(b"\0")
            except OSError:
                pass

    def _run(self) -> None:
        assert self.selector is not None and self._wake is not None
        while True:
            try:
                events = self.selector.select(1.0)
            except (OSError, ValueError):  # a socket closed meanwhile
                time.sleep(0.01)
                events = []
            for key, _ in events:
                data = key.data
                if data is None:
                    try:
                        while self._wake[0].recv(4096):
                            pass
                    except OSError:
                        pass
                elif isinstance(data, HostPort):
                    self._accept(data)
                elif isinstance(data, Pending):
                    self._read(data)
            self._expire()

    def _accept(self, port: HostPort) -> None:
        while True:
            with self.lock:
                if port.sock.fileno() < 0:
                    return
                try:
                    sock, peer = port.sock.accept()
                except (BlockingIOError, InterruptedError):
                    return
                except OSError:
                    return
            sock.setblocking(False)
            try:  # the guest's writes go out as it makes them (as outbound connections' do)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
            inbound = port.inbound
            if inbound.closed:
                sock.close()
                continue
            if self.heads >= MAX_HEADS or not inbound.admit():
                inbound.refuse(sock, peer, port, 503, "too many connections: the sandbox has "
                               f"{inbound.session.limits.net_connections} inbound connections "
                               "(Limits.net_connections)")
                continue
            pending = Pending(sock, port, (str(peer[0]), int(peer[1])),
                              inbound.session.limits.net_header_bytes)
            if pending.peer in inbound.own:  # the sandbox's own connection: no head to check
                inbound.arrive(pending, None)
                continue
            with self.lock:
                self.heads += 1
                inbound.heads.add(pending)
            self.add(sock, pending)

    def _end_head(self, pending: Pending) -> None:
        with self.lock:
            if self.selector is not None:
                try:
                    self.selector.unregister(pending.sock)
                except (KeyError, ValueError):
                    pass
            self.heads -= 1
            pending.port.inbound.heads.discard(pending)

    def _read(self, pending: Pending) -> None:
        inbound = pending.port.inbound
        try:
            data = pending.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._end_head(pending)
            inbound.release_slot()
            pending.sock.close()
            return
        pending.data += data
        pending.parser.receive_data(data)
        try:
            event = pending.parser.next_event()
        except h11.RemoteProtocolError as exc:
            self._end_head(pending)
            code = exc.error_status_hint
            inbound.refuse(pending.sock, pending.peer, pending.port, code,
                           "not an HTTP/1.1 request head within the bounds "
                           f"(Limits.net_header_bytes: {inbound.session.limits.net_header_bytes}): "
                           f"{exc}", admitted=True)
            return
        if event is h11.NEED_DATA:
            return
        self._end_head(pending)
        if not isinstance(event, h11.Request):
            inbound.refuse(pending.sock, pending.peer, pending.port, 400, "not an HTTP request",
                           admitted=True)
            return
        inbound.arrive(pending, event)

    def _expire(self) -> None:
        moment = time.monotonic()
        with self.lock:
            late = [key.data for key in (self.selector.get_map() or {}).values()
                    if isinstance(key.data, Pending) and key.data.deadline < moment] \
                if self.selector is not None else []
        for pending in late:
            self._end_head(pending)
            pending.port.inbound.refuse(pending.sock, pending.peer, pending.port, 408,
                                        f"no whole request head within {HEAD_SECONDS:g} s",
                                        admitted=True)


FRONT = Front()


class Inbound:
    """One sandbox's ports (one per egress session: a resumed sandbox maps its ports anew)."""

    def __init__(self, session: "EgressSession", token: Optional[str], label: str) -> None:
        self.session = session
        self.token = token
        self.label = label
        self.ports: dict[int, HostPort] = {}
        self.heads: set[Pending] = set()
        self.own: set[tuple[str, int]] = set()  # host sockets of this sandbox's own connections
        self.count = 0  # connections admitted: head being read, queued, or accepted and open
        self.closed = False
        self._lock = threading.Lock()
        self._denied_tokens = float(DENIED_BURST)
        self._denied_at = time.monotonic()
        self._denied_unrecorded = 0

    # -- ports --------------------------------------------------------------------------------
    def host_port(self, port: int) -> int:
        """The host port that stands for guest `port` (mapped now if it was not)."""
        return self._port(port).host_port

    def _port(self, port: int) -> HostPort:
        with self._lock:
            if self.closed:
                raise NetError("closed", "the sandbox's network is closed (the sandbox ended)")
            mapped = self.ports.get(port)
            if mapped is None:
                if len(self.ports) >= MAX_PORTS and not self._evict():
                    raise NetError("limit", f"the sandbox listens on {MAX_PORTS} ports already", "EADDRINUSE")
                mapped = self.ports[port] = HostPort(self, port)
                FRONT.add(mapped.sock, mapped)
            mapped.used = time.monotonic()
            return mapped

    def _evict(self) -> bool:
        """Unmap the port mapped longest ago that nothing listens on (its host listener closes;
        a `get_host` for it maps it anew): mappings a keyless preview request or a closed server
        left never keep the sandbox from listening. False if every mapped port has a listener.
        Called with the lock held."""
        idle = [m for m in self.ports.values() if m.listener is None]
        if not idle:
            return False
        victim = min(idle, key=lambda m: m.used)
        del self.ports[victim.port]
        FRONT.drop(victim.sock)
        return True

    def listen(self, port: int, listener_for: Any) -> tuple["Listener", int]:
        """A listener on guest `port` (0: a free one), made by `listener_for(port)`."""
        with self._lock:
            if port == 0:
                port = next((p for p in range(*EPHEMERAL) if p not in self.ports
                             or self.ports[p].listener is None), 0)
                if not port:
                    raise NetError("limit", "no free port", "EADDRINUSE")
            current = self.ports.get(port)
            if current is not None and current.listener is not None:
                raise NetError("invalid", f"[Errno 98] Address already in use (port {port} of the "
                               "sandbox)", "EADDRINUSE")
        mapped = self._port(port)
        listener: Listener = listener_for(mapped)
        with self._lock:
            if mapped.listener is not None:
                raise NetError("invalid", f"[Errno 98] Address already in use (port {port})", "EADDRINUSE")
            mapped.listener = listener
        return listener, port

    def own_peer(self, address: Any, on: bool) -> None:
        """A host socket that connects a guest of this sandbox to its own server (session.py):
        its requests need no traffic token (the token keeps others out, not the sandbox)."""
        if not isinstance(address, tuple) or len(address) < 2:
            return
        key = (str(address[0]), int(address[1]))
        with self._lock:
            if on:
                self.own.add(key)
            else:
                self.own.discard(key)

    # -- admission ------------------------------------------------------------------------------
    def admit(self) -> bool:
        with self._lock:
            if self.count >= self.session.limits.net_connections:
                return False
            self.count += 1
            return True

    def release_slot(self) -> None:
        with self._lock:
            self.count = max(0, self.count - 1)

    def arrive(self, pending: Pending, request: Optional[h11.Request]) -> None:
        """A whole first head: check the Host and the token, find the listener, queue it for
        the guest. (None: a connection of the sandbox's own, queued as it is.)"""
        refused = host_refusal(request) if request is not None else None
        if refused is not None:
            self.refuse(pending.sock, pending.peer, pending.port, refused[0], refused[1],
                        admitted=True, request=request)
            return
        if self.token is not None and request is not None:
            given = next((v for k, v in request.headers if k == TOKEN_HEADER), b"")
            if not hmac.compare_digest(given, self.token.encode()):
                self.refuse(pending.sock, pending.peer, pending.port, 403,
                            "this sandbox's traffic is not public: send its traffic access token "
                            "(sbx.traffic_access_token) in the e2b-traffic-access-token header",
                            admitted=True, request=request)
                return
        listener = pending.port.listener
        accepted = Accepted(pending, request)
        if listener is None or not listener.offer(accepted):
            why = (f"nothing in sandbox {self.label} listens on port {pending.port.port}"
                   if listener is None else
                   f"the server on port {pending.port.port} has {MAX_BACKLOG} connections "
                   "waiting to be accepted already")
            self.refuse(pending.sock, pending.peer, pending.port, 502 if listener is None else 503,
                        why, admitted=True, request=request)

    def refuse(self, sock: socket.socket, peer: Any, port: HostPort, status: int, why: str,
               admitted: bool = False, request: Optional[h11.Request] = None) -> None:
        """Answer `status` with `why` and close; recorded as a denied inbound event."""
        if admitted:
            self.release_slot()
        method = request.method.decode("ascii", "replace") if request is not None else ""
        target = request.target.decode("ascii", "replace") if request is not None else ""
        unrecorded = self._denied_budget()
        if unrecorded is not None:
            if unrecorded:
                self.record(port.port, "", "", "", "denied",
                            f"{unrecorded} more refused inbound connections, not recorded one by one")
            self.record(port.port, str(peer[0]) if peer else "", method, target, "denied",
                        f"{status}: {why}")
        answer_and_close(sock, status, why)

    def _denied_budget(self) -> Optional[int]:
        """Whether a refusal is recorded (DENIED_RATE): None if not (counted instead), else how
        many went unrecorded before it (recorded first, as one event)."""
        with self._lock:
            now_ = time.monotonic()
            self._denied_tokens = min(float(DENIED_BURST),
                                      self._denied_tokens + (now_ - self._denied_at) * DENIED_RATE)
            self._denied_at = now_
            if self._denied_tokens < 1.0:
                self._denied_unrecorded += 1
                return None
            self._denied_tokens -= 1.0
            unrecorded, self._denied_unrecorded = self._denied_unrecorded, 0
            return unrecorded

    def record(self, port: int, peer: str, method: str, target: str, decision: str,
               reason: str) -> AuditEvent:
        event = AuditEvent(timestamp=now(), method=method or "INBOUND", url=target, kind="inbound",
                           direction="inbound", decision=decision, rule="inbound", reason=reason,
                           address=peer, port=port)
        self.session.audit.record(event)
        return event

    # -- the end ------------------------------------------------------------------------------------
    def unlisten(self, listener: "Listener") -> None:
        with self._lock:
            mapped = self.ports.get(listener.port)
            if mapped is not None and mapped.listener is listener:
                mapped.listener = None

    def close(self) -> None:
        """The sandbox ended: every host listener and queued connection is closed, now."""
        with self._lock:
            self.closed = True
            ports = list(self.ports.values())
            heads = list(self.heads)
        for mapped in ports:
            FRONT.drop(mapped.sock)
        for pending in heads:
            FRONT.drop(pending.sock)


def host_refusal(request: h11.Request) -> Optional[tuple[int, str]]:
    """421 unless the request's Host is a loopback name or address, a `*.localhost` name (browsers
    resolve those to loopback themselves) or an operator's name (DECLAW_WASM_ALLOWED_HOSTS): a
    web page that re-points its own name at 127.0.0.1 (DNS rebinding) must not read a sandbox's
    server as its own origin. (h11 has checked there is exactly one Host.)"""
    from .. import settings
    from .._webguard import HostPolicy, split_host

    host = next((v for k, v in request.headers if k == b"host"), b"").decode("latin-1")
    found = split_host(host)
    if found is not None and found[0].endswith(".localhost"):
        return None
    try:
        policy = HostPolicy.of(settings.allowed_hosts())
    except ValueError as exc:
        return 421, str(exc)
    if found is not None and any(found[0].endswith("." + name) for name in policy.allowed):
        return None  # a preview name under an operator's name (serve's `<port>-<id>.<name>`)
    return policy.host_refusal(host or None)


def answer_and_close(sock: socket.socket, status: int, why: str) -> None:
    """A short plain-text answer (it fits a socket buffer: sent without waiting), then close."""
    body = (why + "\n").encode("utf-8", "replace")
    reason = {400: "Bad Request", 403: "Forbidden", 408: "Request Timeout", 421: "Misdirected Request", 431:
              "Request Header Fields Too Large", 502: "Bad Gateway", 503: "Service Unavailable"}.get(
        status, "Error")
    head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode("ascii")
    try:
        sock.send(head + body)
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class Listener:
    """A guest's listening socket: the connections queued for its accept, and a wake-up socket
    the front writes to when one arrives (so the guest's wait wakes at once)."""

    error: Optional[NetError] = None
    event: Optional[AuditEvent] = None
    last_activity = 0.0

    def __init__(self, inbound: Inbound, cid: int, owner: object, port: HostPort) -> None:
        self.inbound = inbound
        self.id = cid
        self.owner = owner
        self.port = port.port
        self.queue: deque[Accepted] = deque()
        self.lock = threading.RLock()
        self.state = "open"
        self.sock: Optional[socket.socket]
        self.sock, self._wake = socket.socketpair()
        self.sock.setblocking(False)
        self._wake.setblocking(False)

    def label(self) -> str:
        return f"port {self.port} of the sandbox"

    def offer(self, accepted: Accepted) -> bool:
        with self.lock:
            if self.state != "open" or len(self.queue) >= MAX_BACKLOG:
                return False
            self.queue.append(accepted)
        try:
            self._wake.send(b"\0")
        except OSError:
            pass
        return True

    def take(self) -> Optional[Accepted]:
        with self.lock:
            return self.queue.popleft() if self.queue else None

    def readable(self) -> bool:
        return bool(self.queue) or self.state != "open"

    def writable(self) -> bool:
        return False

    def pump(self) -> None:
        with self.lock:
            sock = self.sock
            if sock is not None:
                try:
                    while sock.recv(4096):
                        pass
                except OSError:
                    pass

    def poll_events(self, want_read: bool) -> int:
        return select.POLLIN if self.state == "open" and not self.queue else 0

    def close(self) -> None:
        with self.lock:
            if self.state == "closed":
                return
            self.state = "closed"
            queued = list(self.queue)
            self.queue.clear()
            for s in (self.sock, self._wake):
                if s is not None:
                    s.close()
            self.sock = None
        self.inbound.unlisten(self)
        for accepted in queued:
            self.inbound.release_slot()
            answer_and_close(accepted.sock, 502, f"the server on port {self.port} closed")


class InboundConnection:
    """An accepted connection, held by the guest that accepted it: bytes from the client for
    the guest (`to_guest`, starting with those the front read) and from the guest for the
    client (`to_client`), each at most `WINDOW`; the client's socket is read only while
    `to_guest` has room, and the guest's sends wait while `to_client` is full."""

    def __init__(self, inbound: Inbound, cid: int, owner: object, accepted: Accepted,
                 port: int, event: AuditEvent) -> None:
        self.inbound = inbound
        self.id = cid
        self.owner = owner
        self.port = port
        self.sock: Optional[socket.socket] = accepted.sock
        self.peer = accepted.peer
        self.to_guest = bytearray(accepted.data)
        self.to_client = bytearray()
        self.client_eof = False
        self.shut = False  # the guest shut its side for writing
        self.state = "open"
        self.error: Optional[NetError] = None
        self.bytes_in = len(accepted.data)  # from the client
        self.bytes_out = 0  # to the client
        self.opened = accepted.started
        self.last_activity = time.monotonic()
        self.lock = threading.RLock()
        self.event: Optional[AuditEvent] = event
        self.tls = False

    def label(self) -> str:
        return f"the inbound connection from {self.peer[0]}:{self.peer[1]} (port {self.port})"

    # -- the guest's view ----------------------------------------------------------------------
    def connected_or_failed(self) -> bool:
        return True

    def readable(self) -> bool:
        return self.state != "open" or bool(self.to_guest) or self.client_eof

    def writable(self) -> bool:
        return self.state != "open" or len(self.to_client) < WINDOW

    def check(self, reading: bool = False) -> None:
        if self.state == "closed":
            raise NetError("closed", "the connection is closed")
        if self.error is not None:
            if reading and self.to_guest:
                return
            raise self.error

    def take(self, data: bytes) -> int:
        self.check()
        if self.shut:
            raise NetError("closed", "[Errno 32] Broken pipe (shut down for writing)", "EPIPE")
        with self.lock:
            chunk = data[:max(WINDOW - len(self.to_client), 0)]
            self.to_client += chunk
        if chunk:
            self.last_activity = time.monotonic()
            self.pump()
        return len(chunk)

    def give(self, n: int) -> tuple[bytes, bool]:
        self.check(reading=True)
        with self.lock:
            data = bytes(self.to_guest[:n])
            del self.to_guest[:n]
        if data:
            self.pump()
        return data, not self.to_guest and self.client_eof

    def shutdown_write(self) -> None:
        self.shut = True
        self.pump()

    # -- moving bytes ------------------------------------------------------------------------------
    def pump(self) -> None:
        with self.lock:
            sock = self.sock
            if sock is None or self.state != "open":
                return
            try:
                while self.to_client:
                    try:
                        sent = sock.send(bytes(self.to_client[:65536]))
                    except (BlockingIOError, InterruptedError):
                        break
                    del self.to_client[:sent]
                    self._count(sent, 0)
                if self.shut and not self.to_client:
                    try:
                        sock.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                while not self.client_eof and len(self.to_guest) < WINDOW:
                    try:
                        data = sock.recv(WINDOW - len(self.to_guest))
                    except (BlockingIOError, InterruptedError):
                        break
                    if not data:
                        self.client_eof = True
                        break
                    self.to_guest += data
                    self._count(0, len(data))
            except NetError as exc:
                self.fail(exc)
            except OSError as exc:
                self.fail(NetError("reset", f"{self.label()}: {exc.strerror or exc}", "ECONNRESET"))

    def _count(self, out: int, inward: int) -> None:
        self.bytes_out += out
        self.bytes_in += inward
        self.last_activity = time.monotonic()
        limits = self.inbound.session.limits
        if self.bytes_in + self.bytes_out > limits.net_connection_bytes:
            raise NetError("limit", f"{self.label()} closed: it moved more than "
                           f"{limits.net_connection_bytes} bytes (Limits.net_connection_bytes)", "EFBIG")
        self.inbound.session.count_bytes(out + inward)

    def poll_events(self, want_read: bool) -> int:
        if self.sock is None or self.state != "open":
            return 0
        events = select.POLLOUT if self.to_client else 0
        if want_read and not self.client_eof and len(self.to_guest) < WINDOW:
            events |= select.POLLIN
        return events

    # -- the end -----------------------------------------------------------------------------------
    def fail(self, error: NetError) -> None:
        if self.error is None and self.state == "open":
            self.error = error
            self.state = "failed"
            self._close_socket()

    def close(self) -> None:
        with self.lock:
            if self.state == "closed":
                return
            if self.state == "open" and not self.inbound.closed:  # a sandbox ending waits for no client
                self._linger()
            self.state = "closed"
            self._close_socket()
        self.inbound.release_slot()

    def _linger(self) -> None:
        """Closed with bytes still for the client: they go out first, waiting at most
        `LINGER` seconds for a client that does not read (as a kernel's SO_LINGER would)."""
        self.pump()
        sock = self.sock
        if sock is None or not self.to_client:
            return
        try:
            sock.settimeout(LINGER)
            sock.sendall(bytes(self.to_client))
            self._count(len(self.to_client), 0)
            self.to_client.clear()
        except (OSError, NetError):
            pass

    def _close_socket(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass
