"""One guest connection on the host: a non-blocking socket, TLS, and the relay between.

Everything here is driven by the guest's own door calls, on the guest's thread: `pump()` moves
whatever can move without blocking (finish connecting, the TLS handshake, send what the relay
queued for the upstream, read what the upstream sent while the guest's buffer has room), and the
session's waits (session.py) block in `poll` on the real sockets between pumps. No thread per
connection, and backpressure is natural: a socket is read only while the bytes it gave are being
consumed. Two windows per connection bound every byte the host holds for it, in every parser
state: towards the guest, 4 MiB (`IN_ROOM`: bytes for the guest, parsed or not: the relay's
buffer for the guest plus its parser's unparsed upstream bytes, such as an answer that came
before the guest's request was done); towards the upstream, 1 MiB (`OUT_ROOM`: the guest's bytes
not yet sent, parsed or not). Past a window the host stops reading that socket (`recv` on the
upstream, taking the guest's `send`) until the other side drains it; reads are sized to the room
left, so a window is never overshot. A sandbox's connections share a budget (budget.py:
`SANDBOX_ROOM`), and so do all of the process's (`PROCESS_ROOM`): once one is spent, each
connection keeps only `MIN_ROOM` of each window, so no connection stalls for another's sake and
the totals stay bounded. What cannot wait for the guest to read (a body's decoder windows, a
request body or an answer a content guard holds whole) is kept in the connection's `Hold`,
against the same budgets' hard caps (`SANDBOX_KEEP`, `PROCESS_KEEP`): past one, that request or
answer gets a 503 naming it (docs/security.md, "Upstream servers and the relay").

Until the first bytes show what the traffic is, a connection has no relay; then it gets the HTTP
relay (http.py; always for TLS) or, for non-HTTP bytes to a destination an `allow_out` entry
names explicitly, the raw one.
"""

from __future__ import annotations

import errno
import select
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Union

from .audit import AuditEvent
from .budget import Hold
from .http import HttpRelay, RawRelay, RelayContext, sniff
from .policy import Decision, IPAddress, unwrap
from .resolve import loopback_only
from .tls import client_context, peer_info

if TYPE_CHECKING:
    from .session import EgressSession

RECV_CHUNK = 256 << 10
OUT_ROOM = 1 << 20  # bytes queued for the upstream before the guest's send waits
IN_ROOM = 4 << 20  # bytes held for the guest before the host stops reading the upstream
MIN_ROOM = 64 << 10  # what a connection keeps of each window while a shared budget is spent
OWN_SERVER = "own server"  # the rule of a connection to a server of the same sandbox (session.py)


class NetError(Exception):
    """A failure the guest sees as an exception: `kind` picks the type (ops.py), `errno_name` its
    errno (by name: the guest's errno numbers are WASI's, not the host's)."""

    def __init__(self, kind: str, message: str, errno_name: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.errno_name = errno_name or {
            "policy": "ECONNREFUSED", "refused": "ECONNREFUSED", "timeout": "ETIMEDOUT",
            "reset": "ECONNRESET", "limit": "EMFILE", "closed": "EBADF", "invalid": "EINVAL",
            "unreachable": "ENETUNREACH", "gai": "", "tls": "", "tls_verify": ""}.get(kind, "EIO")

    def reply(self) -> dict[str, Any]:
        return {"error": {"kind": self.kind, "errno": self.errno_name, "message": str(self)}}


@dataclass
class Destination:
    """Where a connection goes: the address the guest sees and the policy checked, the name it is
    bound to (or the literal address), and where the host really connects (a DECLAW_WASM_RESOLVE
    entry may redirect the port)."""

    ip: IPAddress
    port: int
    name: str
    by_name: bool  # bound to a name (else to its literal address)
    real_port: int
    mapped: bool
    decision: Decision
    named: bool = False  # opened by name (socket.create_connection): bound for good

    def label(self) -> str:
        shown = f"[{self.ip}]" if self.ip.version == 6 else str(self.ip)
        return f"{self.name}:{self.port}" if self.by_name else f"{shown}:{self.port}"


class Connection:
    """A guest connection (see the module docstring). States: connecting, open, handshaking,
    failed, closed."""

    def __init__(self, session: "EgressSession", cid: int, owner: object, dest: Destination) -> None:
        self.session = session
        self.id = cid
        self.owner = owner
        self.dest = dest
        self.state = "connecting"
        self.error: Optional[NetError] = None
        self.sock: Optional[Union[socket.socket, ssl.SSLSocket]] = None
        self.tls = False
        self.tls_info: Optional[dict[str, Any]] = None
        self.relay: Optional[Union[HttpRelay, RawRelay]] = None
        self.pre = bytearray()  # the guest's first bytes, until they show what the traffic is
        self.upstream_eof = False
        self.upstream_shut = False
        self.local: Any = None  # the host socket's own address, once connecting
        self.bytes_in = 0
        self.bytes_out = 0
        self.opened = time.monotonic()
        self.last_activity = self.opened
        self.connect_deadline = self.opened + session.limits.net_connect_timeout
        self.lock = threading.RLock()
        self.event: Optional[AuditEvent] = None
        self.held = 0  # the window bytes this connection holds, as last counted in the budgets
        self.hold = Hold(session.budget)  # what it keeps beyond its windows (budget.py)
        # the smallest windows: a whole head (Limits.net_header_bytes) must always fit
        self._floor = max(MIN_ROOM, session.limits.net_header_bytes + 1)

    def label(self) -> str:
        return f"the connection to {self.dest.label()}"

    # -- setting up ----------------------------------------------------------------------------
    def start(self) -> None:
        """Begin the TCP connection (non-blocking)."""
        ip = unwrap(self.dest.ip)  # ::ffff:a.b.c.d is IPv4 on the wire
        if loopback_only() and not ip.is_loopback:
            raise NetError("policy", f"{self.dest.label()}: DECLAW_WASM_EGRESS_LOOPBACK_ONLY is set "
                           "(a test run): only loopback addresses may be reached")
        family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        address = str(ip).split("%", 1)[0]
        if self.dest.decision.rule == OWN_SERVER:  # known to the host listener before it accepts
            sock.bind(("127.0.0.1", 0))
            self.local = sock.getsockname()
            self.session.inbound.own_peer(self.local, True)
        code = sock.connect_ex((address, self.dest.real_port))
        if code not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY):
            self._fail_connect(code)

    def _fail_connect(self, code: int) -> None:
        label = self.dest.label()
        if code == errno.ECONNREFUSED:
            self.fail(NetError("refused", f"[Errno 111] Connection refused ({label})"))
        elif code in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            self.fail(NetError("unreachable", f"{label}: {errno.errorcode.get(code, code)}: "
                               "network is unreachable"))
        else:
            self.fail(NetError("reset", f"{label}: connect failed: {errno.errorcode.get(code, code)}",
                               errno.errorcode.get(code, "EIO")))

    def start_tls(self, server_hostname: Optional[str]) -> None:
        """Begin the TLS handshake on the open connection (verified for the bound name)."""
        assert self.sock is not None and not isinstance(self.sock, ssl.SSLSocket)
        context = client_context()
        self.sock = context.wrap_socket(self.sock, server_hostname=server_hostname,
                                        do_handshake_on_connect=False,
                                        suppress_ragged_eofs=False)  # _read tells the end from a cut
        self.tls = True
        self.state = "handshaking"
        self.connect_deadline = time.monotonic() + self.session.limits.net_connect_timeout

    # -- the guest's view ----------------------------------------------------------------------
    def readable(self) -> bool:
        """recv would not wait: data, the end of the stream, or an error."""
        if self.state in ("failed", "closed"):
            return True
        if self.state != "open":
            return False
        relay = self.relay
        if relay is None:
            return self.upstream_eof and not self.pre
        return bool(relay.to_guest) or relay.guest_done

    def connected_or_failed(self) -> bool:
        return self.state != "connecting"

    def handshake_over(self) -> bool:
        return self.state != "handshaking"

    def writable(self) -> bool:
        if self.state in ("failed", "closed"):
            return True
        if self.state != "open":
            return False
        return self._queued() < self._window(OUT_ROOM)

    def _queued(self) -> int:
        """Guest bytes the host holds for this connection (not yet sent upstream)."""
        if self.relay is None:
            return len(self.pre)
        return len(self.relay.to_upstream) + self.relay.backlog()

    def _window(self, full: int) -> int:
        """A window's size now: `full`, or the floor while the sandbox's or the process's budget
        is spent."""
        return self._floor if self.session.budget.spent() else max(full, self._floor)

    def _account(self) -> None:
        """Count what this connection holds now in the budgets (call after bytes moved)."""
        relay = self.relay
        held = 0 if self.state == "closed" else \
            len(self.pre) + (relay.held_in() + self._queued() if relay is not None else 0)
        if held != self.held:
            self.session.budget.add(held - self.held)
            self.held = held

    def take(self, data: bytes) -> int:
        """Accept up to all of `data` from the guest (what fits); the count."""
        self.check()
        if self.state != "open" or not self.writable():
            return 0
        chunk = data[:max(self._window(OUT_ROOM) - self._queued(), 0)]
        if not chunk:
            return 0
        self.last_activity = time.monotonic()
        self._route(chunk)
        self.pump()
        return len(chunk)

    def give(self, n: int) -> tuple[bytes, bool]:
        """Up to `n` bytes for the guest, and whether the stream has ended."""
        self.check(reading=True)
        relay = self.relay
        if relay is None:
            return b"", self.upstream_eof
        data = bytes(relay.to_guest[:n])
        del relay.to_guest[:n]
        if data:
            relay.resume()
            self.pump()
        return data, (not relay.to_guest and relay.guest_done)

    def shutdown_write(self) -> None:
        with self.lock:
            if self.relay is None:
                if self.pre:
                    self._decide(force=True)
                else:
                    self.relay = RawRelay() if self.dest.decision.explicit and not self.tls else None
            if self.relay is not None:
                self.relay.feed_guest(b"")
            else:
                self.upstream_eof = True
            self.pump()

    def check(self, reading: bool = False) -> None:
        if self.state == "closed":
            raise NetError("closed", "the connection is closed")
        if self.error is not None:
            if reading and self.relay is not None and self.relay.to_guest:
                return  # deliver what arrived before the error first
            raise self.error

    # -- moving bytes ------------------------------------------------------------------------------
    def _route(self, data: bytes) -> None:
        if self.relay is None:
            self.pre += data
            self._decide()
            return
        self.relay.feed_guest(data)

    def _decide(self, force: bool = False) -> None:
        """Pick the relay once the guest's first bytes show what the traffic is."""
        kind = "http" if self.tls else sniff(bytes(self.pre))
        if kind is None and not force:
            return
        if kind != "http":
            if not self.dest.decision.explicit:
                self.session.record_raw_refused(self)
                self.fail(NetError("reset", f"connection to {self.dest.label()} closed by the "
                                   "sandbox's network policy: non-HTTP traffic is relayed only to "
                                   "destinations an allow_out entry names (this one is allowed by "
                                   f"{self.dest.decision.rule!r})"))
                return
            self.relay = RawRelay()
        else:
            self.relay = HttpRelay(self._relay_context())
        data, self.pre = bytes(self.pre), bytearray()
        self.relay.feed_guest(data)

    def _relay_context(self) -> RelayContext:
        limits = self.session.limits
        return RelayContext(name=self.dest.name if self.dest.by_name else str(self.dest.ip),
                            port=self.dest.port, address=str(self.dest.ip), tls=self.tls,
                            rule=self.dest.decision.rule, secrets=self.session.secrets,
                            guard=self.session.guard, record=self.session.audit.record,
                            header_bytes=limits.net_header_bytes,
                            guard_body_bytes=limits.net_guard_body_bytes, out_room=IN_ROOM,
                            rebind=self._rebind, hold=self.hold)

    def _rebind(self, name: str) -> bool:
        """A plaintext connection opened by address may take another name the sandbox resolved
        to that address (the first request's Host), if the policy allows that name too."""
        if self.session.rebind(self, name) and self.relay is not None:
            assert isinstance(self.relay, HttpRelay)
            self.relay.ctx.name = self.dest.name
            return True
        return False

    def pump(self) -> None:
        """Move what can move now; never blocks. Failures become `self.error`."""
        with self.lock:
            try:
                self._pump()
            except ssl.SSLCertVerificationError as exc:
                self.fail(NetError("tls_verify", f"certificate verify failed for {self.dest.label()}: "
                                   f"{exc.verify_message or exc}"))
            except ssl.SSLError as exc:
                self.fail(NetError("tls", f"TLS with {self.dest.label()} failed: {exc.reason or exc}"))
            except NetError as exc:
                self.fail(exc)
            except OSError as exc:
                name = errno.errorcode.get(exc.errno or 0, "")
                self.fail(NetError("reset", f"connection to {self.dest.label()}: {exc.strerror or exc}",
                                   name or "ECONNRESET"))
            self._account()

    def _pump(self) -> None:
        sock = self.sock
        if sock is None or self.state in ("failed", "closed"):
            return
        if self.state == "connecting":
            if not _ready(sock, select.POLLOUT):
                if time.monotonic() > self.connect_deadline:
                    raise NetError("timeout", f"connecting to {self.dest.label()} timed out")
                return
            code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                self._fail_connect(code)
                return
            self.state = "open"
        if self.state == "handshaking":
            assert isinstance(sock, ssl.SSLSocket)
            try:
                sock.do_handshake()
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                if time.monotonic() > self.connect_deadline:
                    raise NetError("timeout", f"the TLS handshake with {self.dest.label()} "
                                   "timed out") from None
                return
            self.tls_info = peer_info(sock)
            self.state = "open"
        relay = self.relay
        if relay is None:
            if not self.tls and self.dest.decision.explicit and _ready(sock, select.POLLIN):
                self.relay = relay = RawRelay()  # the server speaks first: a raw protocol
            else:
                return
        self._flush(sock, relay)
        self._read(sock, relay)
        if relay.to_upstream:
            self._flush(sock, relay)

    def _flush(self, sock: socket.socket, relay: Union[HttpRelay, RawRelay]) -> None:
        while relay.to_upstream:
            try:
                sent = sock.send(bytes(relay.to_upstream[:RECV_CHUNK]))
            except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
                return
            del relay.to_upstream[:sent]
            self._count(out=sent)
        if relay.upstream_done and not self.upstream_shut:
            self.upstream_shut = True
            if not self.tls:
                try:
                    sock.shutdown(socket.SHUT_WR)
                except OSError:
                    pass

    def _read(self, sock: socket.socket, relay: Union[HttpRelay, RawRelay]) -> None:
        window = self._window(IN_ROOM)
        relay.set_room(window)
        relay.resume()
        while not self.upstream_eof and relay.can_take_upstream():
            room = window - relay.held_in()
            if room <= 0:
                return  # the window is full: the upstream waits (its kernel buffers fill)
            try:
                data = sock.recv(min(RECV_CHUNK, room))
            except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return
            except (ssl.SSLEOFError, ConnectionResetError):
                if isinstance(relay, RawRelay):
                    raise  # the guest sees the reset itself (a raw relay is never on TLS)
                # a reset, or TLS ended without close_notify (OpenSSL reports a reset so too): the
                # end of the stream, but an answer it cut in the middle stays cut for the guest
                self.upstream_eof = True
                relay.upstream_reset()
                return
            if not data:
                self.upstream_eof = True
                relay.feed_upstream(b"")
                return
            self._count(inward=len(data), progress=False)
            relay.feed_upstream(data)
            if not relay.head_unfinished():  # a head dripped byte by byte is no progress
                self.last_activity = time.monotonic()

    def _count(self, out: int = 0, inward: int = 0, progress: bool = True) -> None:
        self.bytes_out += out
        self.bytes_in += inward
        if progress:
            self.last_activity = time.monotonic()
        limits = self.session.limits
        if self.bytes_in + self.bytes_out > limits.net_connection_bytes:
            raise NetError("limit", f"connection to {self.dest.label()} closed: it moved more than "
                           f"{limits.net_connection_bytes} bytes (Limits.net_connection_bytes)", "EFBIG")
        self.session.count_bytes(out + inward)

    # -- waiting -----------------------------------------------------------------------------------
    def poll_events(self, want_read: bool) -> int:
        """What to wait for on the real socket (0: nothing: pumping alone makes progress, or
        nothing will come)."""
        if self.sock is None or self.state in ("failed", "closed"):
            return 0
        if self.state == "connecting":
            return select.POLLOUT
        events = 0
        relay = self.relay
        if self.state == "handshaking":  # a writable socket just wakes the pump once more
            return select.POLLIN | select.POLLOUT
        if relay is not None and relay.to_upstream:
            events |= select.POLLOUT
        if want_read and not self.upstream_eof and self._can_read(relay):
            if isinstance(self.sock, ssl.SSLSocket) and self.sock.pending():
                return -1  # decrypted bytes wait already: pump at once
            events |= select.POLLIN
        return events

    def _can_read(self, relay: Optional[Union[HttpRelay, RawRelay]]) -> bool:
        """Would a pump read the upstream now (so a wait should wake when it is readable)?"""
        if relay is None:  # only to see a raw protocol's server speak first (_pump)
            return not self.tls and self.dest.decision.explicit
        return relay.can_take_upstream() and relay.held_in() < self._window(IN_ROOM)

    # -- the end -----------------------------------------------------------------------------------
    def fail(self, error: NetError) -> None:
        if self.error is None and self.state != "closed":
            self.error = error
            self.state = "failed"
            self._close_socket()

    def close(self) -> None:
        with self.lock:
            if self.state == "closed":
                return
            if self.relay is not None:
                self.relay.close_audit()
            self.state = "closed"
            self._close_socket()
            self._account()  # holds nothing now
            self.hold.clear(closing=True)

    def _close_socket(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass


def _ready(sock: socket.socket, events: int) -> bool:
    poller = select.poll()
    poller.register(sock.fileno(), events)
    return bool(poller.poll(0))
