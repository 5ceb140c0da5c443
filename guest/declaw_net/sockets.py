"""`socket` for the guest: TCP over the host's door.

WASI has no sockets; this replaces `socket.socket` for AF_INET/AF_INET6 SOCK_STREAM (a
SOCK_DGRAM socket can be made but every use of it fails with ENETUNREACH; other kinds fail with
OSError) and the resolver functions. The host resolves, applies the sandbox's policy,
connects, and runs TLS when the stub `ssl` asks; here a socket is an id on the host, a fake file
descriptor (from 10000 up, never a real WASI fd) for select/poll/selectors, and a receive buffer:
one door call fetches up to 256 KiB, later `recv`s are served from it, and the patched
select/poll (readiness.py) count what it holds as readable. Blocking, timeout and non-blocking
modes behave as CPython's: a timeout raises `TimeoutError("timed out")`, a non-blocking call
that would wait raises `BlockingIOError`, a non-blocking connect raises EINPROGRESS and the
result comes through `getsockopt(SOL_SOCKET, SO_ERROR)`.

Servers: `bind` records the port, `listen` asks the host to listen for it (door op net.listen:
the host maps the sandbox's port to a host listener on loopback, declaw_wasm/_egress/inbound.py),
and `accept` takes the next connection the host queued (net.accept), blocking, with a timeout
or not at all (BlockingIOError) as CPython's; a listening socket is readable in select/poll
while a connection waits. `patch_socketserver` makes socketserver's threading servers
(`python -m http.server`, werkzeug's) handle each request in turn: the guest has no threads.
"""

from __future__ import annotations

import errno
import os
import socket as _socket_module
import sys

from . import _door

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: start-up stays free
    from collections.abc import Callable
    from typing import Any

    from typing_extensions import Buffer, Self  # collections.abc.Buffer from 3.12 (the guest's Python has it)

_orig: dict[str, Any] = {}
FD_BASE = 10000
RECV_CHUNK = 256 << 10
SEND_CHUNK = 1 << 20
by_fd: dict[int, DoorSocket] = {}  # fake fd -> DoorSocket (open ones), for readiness.py
_next_fd = [FD_BASE]

SERVICES = {"http": 80, "https": 443, "ftp": 21, "ssh": 22, "smtp": 25, "domain": 53, "pop3": 110,
            "imap": 143, "ldap": 389, "smtps": 465, "submission": 587, "imaps": 993, "pop3s": 995,
            "mysql": 3306, "postgresql": 5432, "redis": 6379, "http-alt": 8080, "mongodb": 27017}
_SOL_SOCKET_OPTS = {"SO_ERROR": 4, "SO_KEEPALIVE": 9, "SO_REUSEADDR": 2, "SO_RCVBUF": 8,
                    "SO_SNDBUF": 7, "SO_LINGER": 13, "SO_BROADCAST": 6, "SO_REUSEPORT": 15,
                    "SO_RCVTIMEO": 20, "SO_SNDTIMEO": 21, "SO_RCVLOWAT": 18, "SO_SNDLOWAT": 19}


def _s() -> Any:  # the socket module (patched: its names are ours after install)
    return _socket_module


def _version(family: int) -> int:
    s = _s()
    return 6 if family == s.AF_INET6 else 4 if family == s.AF_INET else 0


def _literal(host: str) -> tuple[int, str] | None:
    """(version, canonical text) if `host` is a canonical IP literal, else None (no door call)."""
    s = _s()
    bare = host.split("%", 1)[0]
    for family, version in ((s.AF_INET, 4), (s.AF_INET6, 6)):
        try:
            s.inet_pton(family, bare)
        except (OSError, ValueError):
            continue
        return version, host
    return None


HOSTNAME = "sandbox"  # the shell's `hostname` and $HOSTNAME (declaw_wasm/_wasm/layout.py)


def gethostname() -> str:
    """The sandbox's name, as `hostname` gives it (WASI's C library says "(none)")."""
    return HOSTNAME


def _encode_host(host: object) -> str:
    """A host name as the door takes it; the sandbox's own name is `localhost`, as /etc/hosts
    makes it on Linux (`gethostbyname(gethostname())`)."""
    if isinstance(host, (bytes, bytearray)):
        host = bytes(host).decode("ascii")
    if not isinstance(host, str):
        raise TypeError("str, bytes or bytearray expected, not %s" % type(host).__name__)
    if not host.isascii():
        return host.encode("idna").decode("ascii")
    return "localhost" if host.lower() == HOSTNAME else host


def _port(port: object) -> int:
    if port is None:
        return 0
    if isinstance(port, (bytes, bytearray)):
        port = bytes(port).decode("ascii")
    if isinstance(port, str):
        if port.isdigit():
            return int(port)
        if port in SERVICES:
            return SERVICES[port]
        raise _s().gaierror(getattr(_s(), "EAI_SERVICE", -8), "Servname not supported for ai_socktype")
    if isinstance(port, int) and not isinstance(port, bool):
        if not 0 <= port <= 65535:
            raise OverflowError("getsockaddrarg: port must be 0-65535.")
        return port
    raise TypeError("getaddrinfo() argument 2 must be integer or string")


class DoorSocket:
    """A TCP socket whose other end the host holds."""

    makefile: Callable[..., Any]  # CPython's socket.makefile, set by install()

    def __init__(self, family: int = -1, type: int = -1, proto: int = -1, fileno: int | None = None) -> None:
        s = _s()
        family = s.AF_INET if family in (-1, None) else family
        type = s.SOCK_STREAM if type in (-1, None) else type
        proto = 0 if proto in (-1, None) else proto
        if fileno is not None:
            raise OSError(errno.EBADF, "sockets from file descriptors are not available in the sandbox")
        flags = getattr(s, "SOCK_NONBLOCK", 0) | getattr(s, "SOCK_CLOEXEC", 0)
        if family not in (s.AF_INET, s.AF_INET6):
            raise OSError(errno.EAFNOSUPPORT, "Address family not supported by protocol (the "
                          "sandbox has TCP over IPv4 and IPv6 only)")
        kind = type & ~flags
        if kind not in (s.SOCK_STREAM, s.SOCK_DGRAM):
            raise OSError(getattr(errno, "EPROTONOSUPPORT", errno.EINVAL),
                          "Protocol not supported (the sandbox has TCP only: no UDP or raw sockets)")
        # a UDP socket can be made (werkzeug's banner probes an interface address with one) but
        # not used: connect, sendto, bind and listen fail as on a host with no route
        self._udp = kind == s.SOCK_DGRAM
        self._family = family
        self._type = kind
        self._proto = proto
        self._timeout: float | None = None if type & getattr(s, "SOCK_NONBLOCK", 0) == 0 else 0.0
        if self._timeout is None:
            self._timeout = s.getdefaulttimeout()
        self._id: int | None = None
        self._peer: tuple[Any, ...] | None = None
        self._pending = False  # a non-blocking connect in progress
        self._error = 0
        self._rbuf = b""
        self._eof = False
        self._shut_rd = False
        self._opts: dict[tuple[int, int], Any] = {}
        self._bound: tuple[str, int] | None = None  # bind()'s address
        self._listening = False
        self._io_refs = 0
        self._closed = False
        self._fd = _next_fd[0]
        _next_fd[0] += 1
        by_fd[self._fd] = self

    # -- properties as CPython's ---------------------------------------------------------------
    @property
    def family(self) -> int:
        return _convert(self._family, getattr(_s(), "AddressFamily", None))

    @property
    def type(self) -> int:
        return _convert(self._type, getattr(_s(), "SocketKind", None))

    @property
    def proto(self) -> int:
        return self._proto

    def fileno(self) -> int:
        return -1 if self._gone else self._fd

    def __repr__(self) -> str:
        state = "[closed]" if self._closed else ""
        return "<socket.socket%s fd=%d, family=%s, type=%s, proto=%d, sandbox network%s>" % (
            state, self.fileno(), self.family, self.type, self._proto,
            ", raddr=%r" % (self._peer,) if self._peer else "")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *args: object) -> None:
        self.close()

    def __getstate__(self) -> object:
        raise TypeError("cannot pickle %r object" % type(self).__name__)

    # -- timeouts ----------------------------------------------------------------------------------
    def settimeout(self, value: float | None) -> None:
        if value is not None:
            value = float(value)
            if value < 0:
                raise ValueError("Timeout value out of range")
        self._timeout = value

    def gettimeout(self) -> float | None:
        return self._timeout

    def setblocking(self, flag: bool) -> None:
        self._timeout = None if flag else 0.0

    def getblocking(self) -> bool:
        return self._timeout != 0.0

    def _wait(self) -> bool:
        return self._timeout != 0.0

    # -- connecting ----------------------------------------------------------------------------
    def _address(self, address: object) -> tuple[str, int]:
        if not isinstance(address, tuple) or len(address) not in (2, 4):
            raise TypeError("%s(): AF_INET address must be tuple, not %s"
                            % ("connect", type(address).__name__))
        host, port = address[0], address[1]
        if not isinstance(port, int) or isinstance(port, bool):
            raise TypeError("'%s' object cannot be interpreted as an integer" % type(port).__name__)
        if not 0 <= port <= 65535:
            raise OverflowError("connect(): port must be 0-65535.")
        return _encode_host(host), port

    def _no_udp(self) -> None:
        if self._udp:
            raise OSError(errno.ENETUNREACH, "Network is unreachable (the sandbox has no UDP)")

    def connect(self, address: tuple[Any, ...]) -> None:
        self._no_udp()
        self._connect(*self._address(address))

    def connect_ex(self, address: tuple[Any, ...]) -> int:
        try:
            self.connect(address)
        except BlockingIOError as exc:
            return exc.errno or errno.EINPROGRESS
        except OSError as exc:
            if isinstance(exc, _s().gaierror):
                raise
            return exc.errno or errno.EIO
        return 0

    def _connect(self, host: str, port: int, by_name: bool = False, any_family: bool = False) -> None:
        if self._gone:
            raise OSError(errno.EBADF, "Bad file descriptor")
        if self._listening:
            raise OSError(errno.EINVAL, "Invalid argument")
        if self._id is not None:
            if self._pending:
                raise BlockingIOError(errno.EALREADY, "Operation already in progress")
            raise OSError(errno.EISCONN, "Transport endpoint is already connected")
        literal = _literal(host)
        family = 0 if any_family else _version(self._family)
        reply = _door.call("net.connect", host=host, port=port, family=family,
                           by_name=by_name or literal is None, fd=self._fd, wait=self._wait(),
                           timeout=self._timeout)
        self._id = reply["id"]
        ip, peer_port = reply["peer"]
        self._peer = (ip, peer_port) if ":" not in ip else (ip, peer_port, 0, 0)
        if ":" in ip:
            self._family = _s().AF_INET6
        elif by_name:
            self._family = _s().AF_INET
        if reply.get("pending"):
            self._pending = True
            raise BlockingIOError(errno.EINPROGRESS, "Operation now in progress")

    def _connected(self) -> None:
        if self._gone:
            raise OSError(errno.EBADF, "Bad file descriptor")
        if self._id is None or self._listening:
            raise OSError(errno.ENOTCONN, "Transport endpoint is not connected")
        if self._pending:
            self._settle()
            if self._pending:
                raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
        if self._error:
            code, self._error = self._error, 0
            raise OSError(code, os.strerror(code))

    def _settle(self) -> None:
        """A non-blocking connect: has it finished? (Sets the SO_ERROR value.)"""
        reply = _door.call("net.status", id=self._id)
        error = reply.get("failure")
        if error:
            self._pending = False
            self._error = _door.errno_of(error)
            self._error_detail = error
        elif reply.get("connected"):
            self._pending = False

    # -- data ----------------------------------------------------------------------------------
    def send(self, data: Buffer, flags: int = 0) -> int:
        self._connected()
        view = memoryview(data).cast("B")
        if not len(view):
            return 0
        reply = _door.call("net.send", id=self._id, data=bytes(view[:SEND_CHUNK]),
                           wait=self._wait(), timeout=self._timeout)
        n = reply["n"]
        if not n:
            raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
        return n

    def sendall(self, data: Buffer, flags: int = 0) -> None:
        view = memoryview(data).cast("B")
        total = len(view)
        sent = 0
        while sent < total:
            sent += self.send(view[sent:], flags)

    def write(self, data: Buffer) -> int:  # for SSLSocket compatibility
        return self.send(data)

    def sendto(self, data: Buffer, *args: object) -> int:
        self._no_udp()
        raise OSError(errno.EISCONN, "Transport endpoint is already connected")

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        if bufsize < 0:
            raise ValueError("negative buffersize in recv")
        if self._gone:
            raise OSError(errno.EBADF, "Bad file descriptor")
        if not self._rbuf and not self._eof and not self._shut_rd:
            self._connected()
            reply = _door.call("net.recv", id=self._id, n=max(bufsize, RECV_CHUNK),
                               wait=self._wait(), timeout=self._timeout)
            self._rbuf, self._eof = reply["data"], reply["eof"]
            if not self._rbuf and not self._eof:
                raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
        if flags & getattr(_s(), "MSG_PEEK", 2):
            return self._rbuf[:bufsize]
        data, self._rbuf = self._rbuf[:bufsize], self._rbuf[bufsize:]
        return data

    def recv_into(self, buffer: Buffer, nbytes: int = 0, flags: int = 0) -> int:
        view = memoryview(buffer).cast("B")
        size = nbytes or len(view)
        data = self.recv(size, flags)
        view[: len(data)] = data
        return len(data)

    def recvfrom(self, bufsize: int, flags: int = 0) -> tuple[bytes, tuple[Any, ...] | None]:
        return self.recv(bufsize, flags), self._peer

    def recvfrom_into(self, buffer: Buffer, nbytes: int = 0, flags: int = 0) -> tuple[int, tuple[Any, ...] | None]:
        return self.recv_into(buffer, nbytes, flags), self._peer

    def read(self, n: int = 1024, buffer: Buffer | None = None) -> bytes | int:  # for SSLSocket compatibility
        if buffer is not None:
            return self.recv_into(buffer, n)
        return self.recv(n)

    def _locally_readable(self) -> bool:
        return bool(self._rbuf) or self._eof or self._shut_rd or self._gone

    # -- ending ----------------------------------------------------------------------------------
    def shutdown(self, how: int) -> None:
        s = _s()
        self._connected()
        mapping = {getattr(s, "SHUT_RD", 0): 0, getattr(s, "SHUT_WR", 1): 1, getattr(s, "SHUT_RDWR", 2): 2}
        if how not in mapping:
            raise OSError(errno.EINVAL, "Invalid argument")
        if mapping[how] in (0, 2):
            self._shut_rd = True
            self._rbuf = b""
        _door.call("net.shutdown", id=self._id, how=mapping[how])

    def _decref_socketios(self) -> None:
        if self._io_refs > 0:
            self._io_refs -= 1
        if self._closed:
            self.close()

    def _real_close(self) -> None:
        by_fd.pop(self._fd, None)
        cid, self._id = self._id, None
        if cid is not None:
            try:
                _door.call("net.close", id=cid)
            except Exception:
                pass

    @property
    def _gone(self) -> bool:
        """Really closed: `close()` was called and no file object (makefile) still reads through
        the socket. As CPython's socket: a closed socket with a live makefile() stays usable
        (http.client closes its socket and keeps reading the response through the file)."""
        return self._closed and self._io_refs <= 0

    def close(self) -> None:
        self._closed = True
        if self._io_refs <= 0:
            self._real_close()

    def detach(self) -> int:
        self._closed = True
        by_fd.pop(self._fd, None)
        self._id = None
        return -1

    def __del__(self) -> None:
        try:
            if not self._closed or self._id is not None:
                self._io_refs = 0
                self.close()
        except Exception:
            pass

    # -- names and options -------------------------------------------------------------------------
    def getpeername(self) -> tuple[Any, ...]:
        if self._peer is None:
            raise OSError(errno.ENOTCONN, "Transport endpoint is not connected")
        return self._peer

    def getsockname(self) -> tuple[Any, ...]:
        if self._bound is not None and self._bound[1] == 0 and self._id is None and not self._udp \
                and not self._gone:
            self._take_port()  # `bind(("", 0))` then asking which port: HTTPServer, "find a free port"
        host, port = self._bound or ("::" if self._family == _s().AF_INET6 else "0.0.0.0", 0)
        if self._family == _s().AF_INET6:
            return (host, port, 0, 0)
        return (host, port)

    def setsockopt(self, level: int, optname: int, value: object, optlen: int | None = None) -> None:
        self._opts[(level, optname)] = value

    def getsockopt(self, level: int, optname: int, buflen: int | None = None) -> Any:
        s = _s()
        if level == s.SOL_SOCKET and optname == s.SO_ERROR:
            if self._pending:
                self._settle()
                if self._pending:
                    return 0
            code, self._error = self._error, 0
            return code
        if level == s.SOL_SOCKET and optname == getattr(s, "SO_TYPE", -1):
            return self._type
        value = self._opts.get((level, optname), 0)
        if buflen is not None and isinstance(value, int):
            return value.to_bytes(max(buflen, 4), sys.byteorder)[:buflen]
        return value

    def bind(self, address: object) -> None:
        """Record the address: a server's port is the sandbox's (the host maps it at listen)."""
        self._no_udp()
        if self._gone:
            raise OSError(errno.EBADF, "Bad file descriptor")
        if self._bound is not None or self._id is not None:
            raise OSError(errno.EINVAL, "Invalid argument")
        if not isinstance(address, tuple) or len(address) not in (2, 4):
            raise TypeError("%s(): AF_INET address must be tuple, not %s"
                            % ("bind", type(address).__name__))
        host, port = address[0], address[1]
        if not isinstance(port, int) or isinstance(port, bool):
            raise TypeError("'%s' object cannot be interpreted as an integer" % type(port).__name__)
        if not 0 <= port <= 65535:
            raise OverflowError("bind(): port must be 0-65535.")
        host = _encode_host(host) if host else ("::" if self._family == _s().AF_INET6 else "0.0.0.0")
        self._bound = (host, port)

    def listen(self, backlog: int = 128) -> None:
        self._no_udp()
        if self._gone:
            raise OSError(errno.EBADF, "Bad file descriptor")
        if self._listening:
            return
        if self._id is None:
            self._take_port(backlog)
        elif self._peer is not None:  # a connection's (a port taken for a name has no peer)
            raise OSError(errno.EINVAL, "Invalid argument")
        self._listening = True

    def _take_port(self, backlog: int = 128) -> None:
        """The host's listener for the bound port; for port 0, the sandbox's port it picks. A
        socket bound to port 0 gets it when its name is asked for, as Linux picks one at bind
        (`HTTPServer(("", 0), ...).server_address` said port 0); clients' connections then wait
        for `accept` from that moment, where Linux would refuse them until `listen`; and such a
        socket cannot `connect` (EISCONN), where Linux would connect from that port."""
        host, port = self._bound or ("::" if self._family == _s().AF_INET6 else "0.0.0.0", 0)
        reply = _door.call("net.listen", port=port, backlog=min(max(int(backlog), 0), 1 << 16),
                           fd=self._fd)
        self._id = reply["id"]
        self._bound = (host, reply["port"])

    def accept(self) -> tuple[DoorSocket, tuple[Any, ...]]:
        if self._gone:
            raise OSError(errno.EBADF, "Bad file descriptor")
        if not self._listening:
            raise OSError(errno.EINVAL, "Invalid argument")
        reply = _door.call("net.accept", id=self._id, wait=self._wait(), timeout=self._timeout)
        if reply["id"] is None:
            raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
        s = _s()
        sock = DoorSocket(self._family, s.SOCK_STREAM)
        sock._id = reply["id"]
        ip, port = reply["peer"]
        sock._peer = (ip, port) if self._family != s.AF_INET6 else ("::ffff:" + ip, port, 0, 0)
        sock._bound = self._bound
        if s.getdefaulttimeout() is None and self.gettimeout():
            sock.setblocking(True)
        return sock, sock._peer

    def dup(self) -> DoorSocket:
        raise OSError(errno.EOPNOTSUPP, "dup() is not available for sandbox sockets")

    def set_inheritable(self, inheritable: bool) -> None:
        pass

    def get_inheritable(self) -> bool:
        return False

    @property
    def timeout(self) -> float | None:
        return self._timeout

    # -- TLS, for the ssl stub ---------------------------------------------------------------------
    def _door_start_tls(self, server_hostname: str | None, timeout: float | None = None,
                        wait: bool = True) -> dict[str, Any]:
        """The host's TLS details once the handshake is over ({"pending": True} while it runs,
        if not waiting)."""
        self._connected()
        if self._rbuf:
            raise OSError(errno.EINVAL, "TLS must start before any data")
        return _door.call("net.tls", id=self._id, server_hostname=server_hostname, wait=wait,
                          timeout=timeout if timeout is not None else self._timeout)


def _convert(value: int, enum_class: Callable[[int], int] | None) -> int:
    if enum_class is None:
        return value
    try:
        return enum_class(value)
    except ValueError:
        return value


# -- module functions ------------------------------------------------------------------------------

def getaddrinfo(host: str | bytes | bytearray | None, port: object, family: int = 0, type: int = 0, proto: int = 0,
                flags: int = 0) -> list[tuple[int, int, int, str, tuple[Any, ...]]]:
    s = _s()
    port = _port(port)
    version = _version(family)
    if family not in (0, s.AF_UNSPEC, s.AF_INET, s.AF_INET6):
        raise s.gaierror(getattr(s, "EAI_FAMILY", -6), "ai_family not supported")
    if host is None:
        addresses = [[4, "127.0.0.1"]] if version != 6 else [[6, "::1"]]
        if flags & getattr(s, "AI_PASSIVE", 1):
            addresses = [[4, "0.0.0.0"]] if version != 6 else [[6, "::"]]
    else:
        host = _encode_host(host)
        literal = _literal(host)
        if literal is not None:
            addresses = [list(literal)]
        elif flags & getattr(s, "AI_NUMERICHOST", 4):
            raise s.gaierror(getattr(s, "EAI_NONAME", -2), "Name or service not known")
        else:
            addresses = _door.call("net.resolve", host=host, port=port, family=version)["addresses"]
    kinds = [type] if type else [s.SOCK_STREAM]
    result = []
    for ver, ip in addresses:
        if version and ver != version:
            continue
        fam = s.AF_INET6 if ver == 6 else s.AF_INET
        sockaddr = (ip, port, 0, 0) if ver == 6 else (ip, port)
        for kind in kinds:
            result.append((_convert(fam, getattr(s, "AddressFamily", None)),
                           _convert(kind, getattr(s, "SocketKind", None)),
                           proto or (getattr(s, "IPPROTO_TCP", 6) if kind == s.SOCK_STREAM else 0),
                           "", sockaddr))
    if not result:
        raise s.gaierror(getattr(s, "EAI_NONAME", -2), "Name or service not known")
    return result


def gethostbyname(hostname: str) -> str:
    return getaddrinfo(hostname, None, _s().AF_INET)[0][4][0]


def gethostbyname_ex(hostname: str) -> tuple[str, list[str], list[str]]:
    ips = []
    for info in getaddrinfo(hostname, None, _s().AF_INET):
        if info[4][0] not in ips:
            ips.append(info[4][0])
    return hostname, [], ips


def gethostbyaddr(ip_address: str) -> tuple[str, list[str], list[str]]:
    raise _s().herror(1, "Unknown host (no reverse lookups in the sandbox)")


def getnameinfo(sockaddr: tuple[Any, ...], flags: int) -> tuple[str, str]:
    host, port = sockaddr[0], sockaddr[1]
    return str(host), str(port)


def getfqdn(name: str = "") -> str:
    name = name.strip()
    if not name or name in ("0.0.0.0", "::"):
        return _s().gethostname()
    return name


_UNSET = object()


def create_connection(address: tuple[Any, ...], timeout: Any = _UNSET, source_address: object = None, *,
                      all_errors: bool = False) -> DoorSocket:
    host, port = address[0], address[1]
    s = _s()
    sock = DoorSocket(s.AF_INET, s.SOCK_STREAM)
    if timeout is not _UNSET and timeout is not _orig.get("_GLOBAL_DEFAULT_TIMEOUT"):
        sock.settimeout(timeout)
    try:
        if not isinstance(port, int) or isinstance(port, bool):
            port = _port(port)
        sock._connect(_encode_host(host), port, by_name=True, any_family=True)
    except BaseException:
        sock.close()
        raise
    return sock


def create_server(address: tuple[Any, ...], *, family: int = -1, backlog: int | None = None,
                  reuse_port: bool = False, dualstack_ipv6: bool = False) -> DoorSocket:
    s = _s()
    sock = DoorSocket(s.AF_INET if family == -1 else family, s.SOCK_STREAM)
    try:
        sock.bind(address)
        sock.listen(128 if backlog is None else backlog)
    except BaseException:
        sock.close()
        raise
    return sock


def has_dualstack_ipv6() -> bool:
    return False


def patch_socketserver(socketserver: Any) -> None:
    """The guest has no threads: a threading server (`ThreadingMixIn`: `python -m http.server`,
    werkzeug's) handles each request in turn, as a plain server does."""
    mixin = socketserver.ThreadingMixIn
    if getattr(mixin, "_declaw_net", False):
        return
    mixin._declaw_net = True

    def process_request(self: Any, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)

    mixin.process_request = process_request


def install() -> None:
    """Make the `socket` module the sandbox's (idempotent)."""
    s: Any = _socket_module  # patched: its names become ours
    if getattr(s, "_declaw_net", False):
        return
    _orig.update(socket=s.socket, getaddrinfo=s.getaddrinfo,
                 _GLOBAL_DEFAULT_TIMEOUT=getattr(s, "_GLOBAL_DEFAULT_TIMEOUT", None))
    create_connection.__defaults__ = (s._GLOBAL_DEFAULT_TIMEOUT, None)
    for name, value in _SOL_SOCKET_OPTS.items():
        if not hasattr(s, name):
            setattr(s, name, value)
    DoorSocket.__name__ = DoorSocket.__qualname__ = "socket"
    DoorSocket.__module__ = "socket"
    DoorSocket.makefile = s.socket.makefile
    s.socket = DoorSocket
    s.create_connection = create_connection
    s.create_server = create_server
    s.has_dualstack_ipv6 = has_dualstack_ipv6
    s.getaddrinfo = getaddrinfo
    s.gethostbyname = gethostbyname
    s.gethostbyname_ex = gethostbyname_ex
    s.gethostbyaddr = gethostbyaddr
    s.getnameinfo = getnameinfo
    s.getfqdn = getfqdn
    s.gethostname = gethostname
    s.has_ipv6 = True
    s._declaw_net = True
