"""One sandbox's network: the door ops (ops.py) of all its guests, its connections, its audit.

`answer(guest, op, fields)` answers one `net.*` op, run on the guest's thread once the door's
dispatcher (_local/doors.py's `net_routes`) has checked the request against the op's declaration
(ops.py); `handle(guest, request)` does both, for callers outside the door. Requests are untrusted: every field is
type- and range-checked (declared, and checked again here), every buffer is bounded, and every
failure is an `{"error": ...}` reply (never an exception into the door), except the guest-stopping
signal, which the door turns into its own error while the guest is being stopped. A waiting op
waits in slices of at most 50 ms, checking the guest's deadline and kill between them.

Binding: a connection opened by name (`socket.create_connection`) is bound to that name; one
opened by address is bound to the name this sandbox last resolved to that address (so
`getaddrinfo` + `connect`, what urllib3, httpx and asyncio do, keeps the name), or to the literal
address. SNI and every HTTP `Host` on the connection must be that name.
"""

from __future__ import annotations

import ipaddress
import select
import threading
import time
from collections import OrderedDict
from typing import Any, Callable, Optional
from urllib.parse import urlsplit

from .._guard.contract import ContentGuard, IdentityGuard
from .._printable import logger
from .._wasm.guest import Guest, GuestStopping
from ..limits import Limits
from .audit import DEFAULT_MASK_PATTERNS, AuditEvent, AuditLog, now
from .budget import PROCESS_BUDGET, SANDBOX_ROOM, Budget, sandbox_keep
from .connection import OWN_SERVER, Connection, Destination, NetError
from .inbound import Inbound, InboundConnection, Listener
from .._wasm.door import RequestError
from .ops import MAX_IDS, MAX_RECV, MAX_SEND, OPS
from .policy import Decision, IPAddress, Policy, PolicyError, normalize_name, parse_address
from .resolve import Answer, ResolveError, Resolver, dns_answers_from_env, overrides_from_env
from .secrets import SecretBook

log = logger("declaw_wasm.egress")

SLICE = 0.05
LOOPBACK = ipaddress.IPv4Address("127.0.0.1")
MAX_NAMES = 4096  # addresses whose resolved names are remembered, per sandbox


class EgressSession:
    """The network of one sandbox."""

    def __init__(self, policy: Policy, limits: Limits, secrets: Optional[SecretBook] = None,
                 guard: Optional[ContentGuard] = None, env: Optional[dict[str, str]] = None,
                 audit_enabled: bool = True,
                 mask_patterns: tuple[str, ...] = DEFAULT_MASK_PATTERNS,
                 traffic_token: Optional[str] = None) -> None:
        self.policy = policy
        self.limits = limits
        self.secrets = secrets or SecretBook()
        self.guard: ContentGuard = guard or IdentityGuard()
        self.resolver = Resolver(overrides_from_env(), dns_answers=dns_answers_from_env())
        self.audit = AuditLog(self.secrets.values(), env or {}, mask_patterns, audit_enabled)
        self._lock = threading.Lock()
        self._conns: dict[int, Any] = {}  # Connection, and inbound.py's Listener, InboundConnection
        self.inbound = Inbound(self, traffic_token, "")
        self._next_id = 1
        self._names: "OrderedDict[IPAddress, list[str]]" = OrderedDict()
        self.bytes_total = 0
        # bytes its connections hold, together
        self.budget = Budget(SANDBOX_ROOM, PROCESS_BUDGET, sandbox_keep(limits), "this sandbox")
        self.calls = 0  # door ops answered (benchmarks: a sandbox that opens nothing makes none)
        self.closed = False
        self._ops: dict[str, Callable[[Guest, dict[str, Any]], dict[str, Any]]] = {
            "net.resolve": self._resolve, "net.connect": self._connect, "net.status": self._status,
            "net.tls": self._tls, "net.send": self._send, "net.recv": self._recv,
            "net.poll": self._poll, "net.shutdown": self._shutdown, "net.close": self._close,
            "net.listen": self._listen, "net.accept": self._accept}
        assert set(self._ops) == set(OPS)

    @property
    def token_map(self) -> Any:
        """The sandbox's PII token map (a `security.TokenMap`, owned by its content guard), or
        None without PII guards: one token per value for all its connections and guests."""
        return getattr(self.guard, "tokens", None)

    # -- the door ------------------------------------------------------------------------------
    def handle(self, guest: Guest, request: Any) -> dict[str, Any]:
        """One request, checked against its op's declaration first (as the door does)."""
        op = request.get("op") if isinstance(request, dict) else None
        if not isinstance(op, str) or op not in OPS:
            self.calls += 1
            return NetError("invalid", f"unknown network op {op!r}").reply()
        try:
            fields = OPS[op].check(request)
        except RequestError as exc:
            self.calls += 1
            return exc.reply()
        return self.answer(guest, op, fields)

    def answer(self, guest: Guest, op: str, request: dict[str, Any]) -> dict[str, Any]:
        """Answer one checked request of `op`."""
        fn = self._ops[op]
        self.calls += 1
        try:
            if self.closed:
                raise NetError("closed", "the sandbox's network is closed (the sandbox ended)")
            return fn(guest, request)
        except NetError as exc:
            return exc.reply()
        except PolicyError as exc:
            return NetError("invalid", str(exc)).reply()
        except GuestStopping:
            raise
        except Exception as exc:  # a bug of ours: the guest gets an error, the host goes on
            log.exception("egress: %s failed", op)
            return NetError("invalid", f"internal error in {op}: {type(exc).__name__}").reply()

    # -- ops ---------------------------------------------------------------------------------------
    def _resolve(self, guest: Guest, req: dict[str, Any]) -> dict[str, Any]:
        host = _str(req, "host")
        port = _int(req, "port", 0, 65535, default=0)
        family = _int(req, "family", 0, 6, default=0)
        try:
            ip = parse_address(host)
        except PolicyError as exc:
            raise NetError("gai", f"{exc}", "EAI_NONAME") from None
        if ip is not None:
            return {"addresses": [[ip.version, str(ip).split("%", 1)[0]]]}
        name = _name(host)
        if name == "localhost":  # answered here, as /etc/hosts does: no query is made. A connection
            with self._lock:  # to it reaches this sandbox's own servers (inbound.py), else is refused
                self._names[LOOPBACK] = ["localhost"]
            return {"addresses": [[4, str(LOOPBACK)]] if family in (0, 4) else []}
        answer = self._lookup(guest, name, port)
        return {"addresses": [[a.version, str(a)] for a in answer.addresses
                              if family in (0, a.version)]}

    def _connect(self, guest: Guest, req: dict[str, Any]) -> dict[str, Any]:
        host = _str(req, "host")
        port = _int(req, "port", 1, 65535)
        family = _int(req, "family", 0, 6, default=0)
        wait = bool(req.get("wait", True))
        timeout = _timeout(req, "timeout")
        _int(req, "fd", -1, 1 << 30, default=-1)  # the guest's number: checked, not needed here
        with self._lock:
            live = sum(1 for c in self._conns.values() if isinstance(c, Connection) and c.state != "closed")
        if live >= self.limits.net_connections:
            raise NetError("limit", f"the sandbox has {live} network connections open "
                           f"(Limits.net_connections); close some first")
        try:
            ip = parse_address(host)
        except PolicyError as exc:
            raise NetError("gai", str(exc), "EAI_NONAME") from None
        own = self._own_server(host, ip, port)
        if own is not None:
            candidates = [own]
        elif ip is not None:
            candidates = [self._destination_for_address(ip, port)]
        elif (name := _name(host)) == "localhost":  # no server of this sandbox: the loopback rule's
            candidates = [self._destination(LOOPBACK, port, name, True, False, named=True)]
        else:
            answer = self._lookup(guest, name, port)
            candidates = [self._destination(a, port, name, True, answer.mapped, named=True)
                          for a in answer.addresses if family in (0, a.version)]
            if not candidates:
                raise NetError("gai", f"{name} has no IPv{family} address", "EAI_NONAME")
        limit = min(timeout, self.limits.net_connect_timeout) if timeout is not None \
            else self.limits.net_connect_timeout
        deadline = time.monotonic() + limit
        error: Optional[NetError] = None
        for dest in candidates:
            if not dest.decision.allowed:
                self._record_connection(dest, "denied", dest.decision.reason)
                raise NetError("policy", f"connection to {dest.label()} refused by the sandbox's "
                               f"network policy: {dest.decision.reason}")
            conn = self._open(guest, dest)
            if not wait:
                return {"id": conn.id, "peer": [str(dest.ip), port], "pending": conn.state == "connecting"}
            left = deadline - time.monotonic()
            self._wait(guest, [conn], conn.connected_or_failed, max(left, 0.0))
            if conn.state == "connecting":
                conn.fail(NetError("timeout", "timed out"))
            if conn.error is None:
                return {"id": conn.id, "peer": [str(dest.ip), port], "pending": False}
            error = conn.error
            self._forget(conn)
            if time.monotonic() >= deadline:
                break
        assert error is not None
        raise error

    def _status(self, guest: Guest, req: dict[str, Any]) -> dict[str, Any]:
        conn = self._own(guest, req)
        conn.pump()
        return {"connected": conn.state in ("open", "handshaking"),
                "failure": conn.error.reply()["error"] if conn.error is not None else None}

    def _tls(self, guest: Guest, req: dict[str, Any]) -> dict[str, Any]:
        conn = self._own(guest, req)
        if not isinstance(conn, Connection):
            raise NetError("invalid", "TLS is available on outbound connections only (an inbound "
                           "connection's TLS is the client's and the host's business)")
        wanted = req.get("server_hostname")
        timeout = _timeout(req, "timeout")
        if wanted is not None and (not isinstance(wanted, str) or len(wanted) > 1024):
            raise NetError("invalid", "server_hostname must be a string")
        wait = bool(req.get("wait", True))
        if conn.tls:  # started already (a non-waiting call): done yet?
            return self._tls_result(guest, conn, wait, timeout)
        self._wait(guest, [conn], conn.connected_or_failed,
                   self._limit(timeout, self.limits.net_connect_timeout))
        conn.check()
        if conn.relay is not None or conn.pre:
            raise NetError("invalid", "TLS must start on a fresh connection, before any data")
        dest = conn.dest
        if wanted:
            try:
                ip = parse_address(wanted)
                name = None if ip is not None else normalize_name(wanted)
            except PolicyError:
                raise NetError("tls", f"server_hostname {wanted!r} is not a host name") from None
            if ip is not None and ip != dest.ip:
                raise NetError("tls", f"server_hostname {wanted!r} is not this connection's address")
            if name is not None and (name != dest.name or not dest.by_name) and not self.rebind(conn, name):
                raise NetError("tls", f"server_hostname {wanted!r} does not match {dest.name!r}, the "
                               "name this connection was opened for (SNI must be that name)")
        dest = conn.dest
        with conn.lock:
            conn.start_tls(dest.name if dest.by_name else str(dest.ip).split("%", 1)[0])
        return self._tls_result(guest, conn, wait, timeout)

    def _tls_result(self, guest: Guest, conn: Connection, wait: bool,
                    timeout: Optional[float]) -> dict[str, Any]:
        conn.pump()
        if conn.state == "handshaking" and not wait:
            return {"pending": True}
        self._wait(guest, [conn], conn.handshake_over,
                   self._limit(timeout, self.limits.net_connect_timeout))
        if conn.state == "handshaking":
            conn.fail(NetError("timeout", f"the TLS handshake with {conn.dest.label()} timed out"))
        if conn.error is not None:
            if conn.event is not None:
                conn.event.error = self.audit.text(str(conn.error))
            raise conn.error
        if conn.event is not None:
            conn.event.tls = True
        assert conn.tls_info is not None
        return dict(conn.tls_info)

    def _send(self, guest: Guest, req: dict[str, Any]) -> dict[str, Any]:
        conn = self._own(guest, req)
        data = req.get("data")
        if not isinstance(data, (bytes, bytearray)) or len(data) > MAX_SEND:
            raise NetError("invalid", f"data must be bytes (at most {MAX_SEND})")
        wait = bool(req.get("wait", True))
        timeout = _timeout(req, "timeout")
        if not data:
            conn.check()
            return {"n": 0}
        n = conn.take(bytes(data))
        if n or not wait:
            return {"n": n}
        if not self._wait(guest, [conn], conn.writable, timeout, idle=conn):
            raise NetError("timeout", "timed out")
        return {"n": conn.take(bytes(data))}

    def _recv(self, guest: Guest, req: dict[str, Any]) -> dict[str, Any]:
        conn = self._own(guest, req)
        n = _int(req, "n", 1, 1 << 30)
        wait = bool(req.get("wait", True))
        timeout = _timeout(req, "timeout")
        conn.pump()
        if not conn.readable() and wait:
            if not self._wait(guest, [conn], conn.readable, timeout, idle=conn):
                raise NetError("timeout", "timed out")
        data, eof = conn.give(min(n, MAX_RECV))
        return {"data": data, "eof": eof}

    def _poll(self, guest: Guest, req: dict[str, Any]) -> dict[str, Any]:
        read = _ids(req, "read")
        write = _ids(req, "write")
        timeout = _timeout(req, "timeout")
        conns = {i: self._own(guest, {"id": i}, listeners=True) for i in {*read, *write}}

        def ready() -> tuple[list[int], list[int]]:
            return ([i for i in read if conns[i].readable()], [i for i in write if conns[i].writable()])

        self._wait(guest, list(conns.values()), lambda: any(ready()), timeout)
        r, w = ready()
        return {"read": r, "write": w}

    def _shutdown(self, guest: Guest, req: dict[str, Any]) -> dict[str, Any]:
        conn = self._own(guest, req)
        how = _int(req, "how", 0, 2)
        if how in (1, 2):
            conn.shutdown_write()
        return {}

    def _close(self, guest: Guest, req: dict[str, Any]) -> dict[str, Any]:
        cid = _int(req, "id", 0, 1 << 62)
        with self._lock:
            conn = self._conns.get(cid)
            if conn is None or conn.owner is not guest:
                return {}
        self._forget(conn)
        return {}

    # -- names and destinations --------------------------------------------------------------------
    def _lookup(self, guest: Guest, name: str, port: int) -> Answer:
        """Check the name, resolve it, check every address; remember them for binding."""
        started = time.monotonic()
        mapped = self.resolver.mapped(name, port) is not None
        decision = self.policy.check_name(name, mapped)
        if not decision.allowed:
            self._record_dns(name, decision, started)
            raise NetError("policy", f"{name}: name refused by the sandbox's network policy: "
                           f"{decision.reason}", "EAI_NONAME")
        try:
            answer = self.resolver.resolve(name, port, self.limits.net_connect_timeout,
                                           guest.stop_requested)
        except ResolveError as exc:
            guest.check_stopped()
            self._record_dns(name, Decision(False, "dns", str(exc)), started, error=str(exc))
            raise NetError("gai", f"{name}: {exc}", "EAI_NONAME") from None
        for ip in answer.addresses:
            checked = self.policy.check_address(ip, name, answer.mapped)
            if not checked.allowed:
                self._record_dns(name, checked, started, answer)
                raise NetError("policy", f"{name}: name refused by the sandbox's network policy: it "
                               f"resolves to {ip}, and {checked.reason}", "EAI_NONAME")
        self._record_dns(name, decision, started, answer)
        with self._lock:
            for ip in answer.addresses:
                names = self._names.pop(ip, [])
                if name in names:
                    names.remove(name)
                self._names[ip] = (names + [name])[-8:]
            while len(self._names) > MAX_NAMES:
                self._names.popitem(last=False)
        return answer

    def _serves(self, port: int) -> bool:
        mapped = self.inbound.ports.get(port)
        return mapped is not None and mapped.listener is not None

    def _own_server(self, host: str, ip: Optional[IPAddress], port: int) -> Optional[Destination]:
        """A connection to a server of this very sandbox: `localhost` or a loopback address, on a
        port one of its guests listens on, goes to that port's host listener (the policy's
        loopback rule is for everything else; another sandbox's or the host's services stay
        refused). Bound to `localhost` when the guest named it (or resolved it), else to the
        literal; its requests need no traffic token (inbound.py: `own_peer`)."""
        if not self._serves(port):
            return None
        if ip is None:
            try:
                if _name(host) != "localhost":
                    return None
            except NetError:
                return None
            name, by_name = "localhost", True
        else:
            plain = _plain(ip)
            if not plain.is_loopback:
                return None
            with self._lock:
                known = "localhost" in self._names.get(plain, [])
            name, by_name = ("localhost", True) if known else (str(plain), False)
        decision = Decision(True, OWN_SERVER, f"port {port} is a server of this sandbox "
                            "(docs/inbound.md)", explicit=True)
        return Destination(LOOPBACK, port, name, by_name, self.inbound.host_port(port), True, decision,
                           named=by_name)

    def _destination(self, ip: IPAddress, port: int, name: str, by_name: bool,
                     mapped: bool, named: bool = False) -> Destination:
        decision = self.policy.check_address(ip, name if by_name else None, mapped)
        real = self.resolver.real_port(name if mapped else None, ip, port)
        return Destination(ip, port, name, by_name, real, mapped, decision, named)

    def _destination_for_address(self, ip: IPAddress, port: int) -> Destination:
        """A connection by address: bound to the name last resolved to it, else the literal."""
        with self._lock:
            names = list(self._names.get(_plain(ip), []))
        for name in reversed(names):
            entries = self.resolver.mapped(name, port)
            mapped = entries is not None and any(e.ip == _plain(ip) for e in entries)
            return self._destination(_plain(ip), port, name, True, mapped)
        return self._destination(ip, port, str(ip), False, False)

    def rebind(self, conn: Connection, name: str) -> bool:
        """Let `conn`, opened by address (no data sent yet, or its first request's Host), take
        `name`, if this sandbox resolved `name` to that address and the policy allows it there.
        (A connection opened by name keeps its name.)"""
        if conn.dest.named:
            return False
        try:
            name = normalize_name(name)
        except PolicyError:
            return False
        with self._lock:
            known = name in self._names.get(_plain(conn.dest.ip), [])
        if not known:
            return False
        entries = self.resolver.mapped(name, conn.dest.port)
        mapped = entries is not None and any(e.ip == _plain(conn.dest.ip) for e in entries)
        dest = self._destination(_plain(conn.dest.ip), conn.dest.port, name, True, mapped)
        if not dest.decision.allowed or dest.real_port != conn.dest.real_port:
            return False
        conn.dest = dest
        if conn.event is not None:
            conn.event.host, conn.event.rule = name, dest.decision.rule
        return True

    # -- connections -------------------------------------------------------------------------------
    def _open(self, guest: Guest, dest: Destination) -> Connection:
        with self._lock:
            cid = self._next_id
            self._next_id += 1
            conn = Connection(self, cid, guest, dest)
            self._conns[cid] = conn
        conn.event = self._record_connection(dest, "allowed", dest.decision.reason)
        try:
            conn.start()
        except NetError as exc:
            self._forget(conn)
            if conn.event is not None:
                conn.event.decision, conn.event.error = "denied", self.audit.text(str(exc))
            raise
        return conn

    def _own(self, guest: Guest, req: dict[str, Any], listeners: bool = False) -> Any:
        """The guest's own open connection (outbound or inbound; with `listeners`, or a
        listening socket) with the request's id."""
        cid = _int(req, "id", 0, 1 << 62)
        with self._lock:
            conn = self._conns.get(cid)
        if conn is None or conn.owner is not guest:
            raise NetError("closed", f"no connection {cid} (closed)", "EBADF")
        if isinstance(conn, Listener) and not listeners:
            raise NetError("invalid", f"socket {cid} is listening: accept() its connections",
                           "ENOTCONN")
        return conn

    # -- inbound (inbound.py) --------------------------------------------------------------------
    def _listen(self, guest: Guest, req: dict[str, Any]) -> dict[str, Any]:
        port = _int(req, "port", 0, 65535, default=0)

        def make(mapped: Any) -> Listener:
            with self._lock:
                cid = self._next_id
                self._next_id += 1
                listener = Listener(self.inbound, cid, guest, mapped)
                self._conns[cid] = listener
            return listener

        listener, port = self.inbound.listen(port, make)
        return {"id": listener.id, "port": port}

    def _accept(self, guest: Guest, req: dict[str, Any]) -> dict[str, Any]:
        listener = self._own(guest, req, listeners=True)
        if not isinstance(listener, Listener):
            raise NetError("invalid", "accept() needs a listening socket", "EINVAL")
        wait = bool(req.get("wait", True))
        timeout = _timeout(req, "timeout")
        listener.pump()
        if not listener.readable() and wait:
            if not self._wait(guest, [listener], listener.readable, timeout):
                raise NetError("timeout", "timed out")
        accepted = listener.take()
        if accepted is None:
            if listener.state != "open":
                raise NetError("closed", "the listening socket is closed", "EBADF")
            return {"id": None, "peer": None}
        event = self.inbound.record(listener.port, accepted.peer[0], accepted.method,
                                    accepted.target, "allowed", "accepted by the sandbox's server")
        with self._lock:
            cid = self._next_id
            self._next_id += 1
            conn = InboundConnection(self.inbound, cid, guest, accepted, listener.port, event)
            self._conns[cid] = conn
        return {"id": cid, "peer": list(accepted.peer)}

    def _forget(self, conn: Any) -> None:
        if isinstance(conn, Connection) and conn.dest.decision.rule == OWN_SERVER:
            self.inbound.own_peer(conn.local, False)
        conn.close()
        with self._lock:
            self._conns.pop(conn.id, None)
        event = conn.event
        if event is not None:
            event.bytes_in, event.bytes_out = conn.bytes_in, conn.bytes_out
            event.duration_ms = round((time.monotonic() - conn.opened) * 1000, 3)
            if conn.error is not None and not event.error:
                event.error = self.audit.text(str(conn.error))

    def _wait(self, guest: Guest, conns: list[Any], ready: Callable[[], Any],
              timeout: Optional[float], idle: Any = None) -> bool:
        """Pump until `ready()`, the timeout (None: none), or the guest is to stop (raises)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            for conn in conns:
                conn.pump()
            if ready():
                return True
            current = time.monotonic()
            if deadline is not None and current >= deadline:
                return False
            if idle is not None and current - idle.last_activity > self.limits.net_idle_timeout:
                idle.fail(NetError("timeout", f"no traffic on {idle.label()} "
                                   f"for {self.limits.net_idle_timeout:g} s (Limits.net_idle_timeout)"))
                return True
            guest.check_stopped()
            poller = select.poll()
            registered = False
            immediate = False
            for conn in conns:
                with conn.lock:
                    sock = conn.sock
                    events = conn.poll_events(want_read=True)
                    fileno = sock.fileno() if sock is not None else -1
                if events == -1:
                    immediate = True
                elif events and fileno >= 0:
                    poller.register(fileno, events)
                    registered = True
            if immediate:
                continue
            wait = SLICE if deadline is None else max(0.0, min(SLICE, deadline - current))
            if registered:
                poller.poll(wait * 1000)
            else:
                time.sleep(wait)

    @staticmethod
    def _limit(timeout: Optional[float], cap: float) -> float:
        return cap if timeout is None else min(timeout, cap)

    def count_bytes(self, n: int) -> None:
        with self._lock:
            self.bytes_total += n
            total = self.bytes_total
        if total > self.limits.net_sandbox_bytes:
            raise NetError("limit", f"the sandbox moved more than {self.limits.net_sandbox_bytes} "
                           "bytes over the network (Limits.net_sandbox_bytes)", "EFBIG")

    # -- audit ---------------------------------------------------------------------------------------
    def _record_dns(self, name: str, decision: Decision, started: float,
                    answer: Optional[Answer] = None, error: str = "") -> None:
        self.audit.record(AuditEvent(
            timestamp=now(), method="DNS", url=name, kind="dns",
            decision="allowed" if decision.allowed else "denied", rule=decision.rule,
            reason=decision.reason, host=name,
            address=",".join(str(a) for a in answer.addresses) if answer else "",
            duration_ms=round((time.monotonic() - started) * 1000, 3), error=error))

    def _record_connection(self, dest: Destination, decision: str, reason: str) -> AuditEvent:
        event = AuditEvent(timestamp=now(), method="CONNECT", url=dest.label(), kind="connection",
                           decision=decision, rule=dest.decision.rule, reason=reason,
                           host=dest.name, address=str(dest.ip), port=dest.port)
        self.audit.record(event)
        return event

    def record_raw_refused(self, conn: Connection) -> None:
        if conn.event is not None:
            conn.event.decision = "denied"
            conn.event.rule = "raw-tcp"
            conn.event.reason = ("non-HTTP traffic; allowed only to destinations an allow_out entry "
                                 "names")

    # -- the host's own traffic on the sandbox's behalf --------------------------------------------
    def index_refusal(self, urls: list[str], should_stop: Callable[[], bool]) -> Optional[str]:
        """None if the policy lets the host's pip reach these package indexes for this sandbox,
        else why not. Names are checked as the guest's would be; addresses against deny_out (the
        index is the operator's configuration, so a private mirror is not refused as such)."""
        hosts: list[str] = []
        for url in urls:
            parts = urlsplit(url)
            if parts.scheme == "file" or not parts.hostname:
                continue  # a local index: no network
            hosts.append(parts.hostname.lower())
            if parts.hostname.lower() == "pypi.org":
                hosts.append("files.pythonhosted.org")
        started = time.monotonic()
        for host in dict.fromkeys(hosts):
            decision = self.policy.check_name(host)
            if decision.allowed and (self.policy.deny or not self.policy.internet):
                try:
                    answer = self.resolver.resolve(host, 443, self.limits.net_connect_timeout, should_stop)
                except ResolveError as exc:
                    decision = Decision(False, "dns", str(exc))
                else:
                    for ip in answer.addresses:
                        checked = self.policy.check_address(ip, host, mapped=True)
                        if not checked.allowed:
                            decision = checked
                            break
            self.audit.record(AuditEvent(
                timestamp=now(), method="PIP", url=f"https://{host}/", kind="connection",
                decision="allowed" if decision.allowed else "denied", rule=decision.rule,
                reason=f"the host's pip, for this sandbox: {decision.reason}", host=host, port=443,
                duration_ms=round((time.monotonic() - started) * 1000, 3)))
            if not decision.allowed:
                return f"the sandbox's network policy does not allow {host} ({decision.reason})"
        return None

    # -- lifetime ------------------------------------------------------------------------------------
    def next_connection_id(self) -> int:
        """The id the next connection gets (a snapshot records it: see reserve_connection_ids)."""
        with self._lock:
            return self._next_id

    def reserve_connection_ids(self, first: int) -> None:
        """A restored sandbox's guests may hold ids of connections that are gone: number new ones
        from `first` on, so a stale socket fails as closed instead of reaching a new connection."""
        with self._lock:
            self._next_id = max(self._next_id, int(first))

    def release(self, guest: object) -> None:
        """The guest ended: close its connections."""
        with self._lock:
            mine = [c for c in self._conns.values() if c.owner is guest]
        for conn in mine:
            self._forget(conn)

    def close(self) -> None:
        """The sandbox ended: close everything; later ops fail."""
        self.closed = True
        self.inbound.close()
        with self._lock:
            conns = list(self._conns.values())
        for conn in conns:
            self._forget(conn)

    def audit_events(self) -> list[AuditEvent]:
        return self.audit.events()


# -- request fields --------------------------------------------------------------------------------

def _str(req: dict[str, Any], key: str) -> str:
    value = req.get(key)
    if not isinstance(value, str) or not value or len(value) > 1024 or "\x00" in value:
        raise NetError("invalid", f"{key} must be a non-empty string (at most 1024 characters)")
    return value


def _int(req: dict[str, Any], key: str, low: int, high: int, default: Optional[int] = None) -> int:
    value = req.get(key, default)
    if value is None and default is not None:
        value = default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise NetError("invalid", f"{key} must be a whole number from {low} to {high}")
    return value


def _timeout(req: dict[str, Any], key: str) -> Optional[float]:
    value = req.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1e7:
        raise NetError("invalid", f"{key} must be None or seconds (0 to 1e7)")
    return float(value)


def _ids(req: dict[str, Any], key: str) -> list[int]:
    value = req.get(key) or []
    if not isinstance(value, list) or len(value) > MAX_IDS or \
            not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise NetError("invalid", f"{key} must be a list of connection ids (at most {MAX_IDS})")
    return value


def _name(host: str) -> str:
    try:
        return normalize_name(host)
    except PolicyError as exc:
        raise NetError("gai", str(exc), "EAI_NONAME") from None


def _plain(ip: IPAddress) -> IPAddress:
    if isinstance(ip, ipaddress.IPv6Address):
        mapped = ip.ipv4_mapped
        if mapped is not None:
            return mapped
        if ip.scope_id:
            return ipaddress.IPv6Address(str(ip).split("%", 1)[0])
    return ip
