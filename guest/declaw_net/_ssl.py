"""`ssl` for the guest: a stub whose TLS runs on the host.

CPython-WASI has no OpenSSL. This module is installed as `ssl` so that http.client, urllib,
urllib3 2.x, requests, httpx and aiohttp take their normal HTTPS paths: `SSLContext.wrap_socket`
asks the host (door op net.tls) to run TLS on that connection; the guest then speaks plaintext
to the host, which encrypts. The host verifies the server's certificate for the name the
connection is bound to against the host's own trust, whatever this context says: CERT_NONE,
`_create_unverified_context()`, `load_verify_locations` or `check_hostname = False` change
nothing on the host side (they are kept, and read back, for the code that sets them).
Client certificates, TLS servers and in-memory TLS (`wrap_bio`) are not available.
It is also registered as `_ssl` (truststore, which httpx2 and so the official `openai` and
`anthropic` clients use, imports it for its constants), and `get_unverified_chain` /
`get_verified_chain` (public since 3.13) give the peer's certificate as the host verified it.
"""

from __future__ import annotations

import enum as _enum
import os as _os
from collections import namedtuple as _namedtuple

from . import sockets as _sockets

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: start-up stays free
    from collections.abc import Callable
    from typing import Any

    from typing_extensions import Buffer  # collections.abc.Buffer from 3.12 (the guest's Python has it)

OPENSSL_VERSION = "OpenSSL 3.0.13 30 Jan 2024 (declaw-wasm: TLS runs on the host)"
OPENSSL_VERSION_INFO = (3, 0, 0, 13, 0)
OPENSSL_VERSION_NUMBER = 0x300000D0
_OPENSSL_API_VERSION = (3, 0, 0, 13, 0)
HAS_SNI = HAS_ALPN = HAS_ECDH = HAS_TLSv1_2 = HAS_TLSv1_3 = HAS_NEVER_CHECK_COMMON_NAME = True
HAS_NPN = HAS_SSLv2 = HAS_SSLv3 = HAS_TLSv1 = HAS_TLSv1_1 = HAS_PSK = HAS_PHA = False
CHANNEL_BINDING_TYPES: list[str] = []
socket_error = OSError
_declaw_net = False  # True once declaw_net.install made this module `ssl`


class SSLError(OSError):
    library = "SSL"
    reason = None

    def __str__(self) -> str:
        return self.args[1] if len(self.args) > 1 and isinstance(self.args[1], str) else super().__str__()


class SSLZeroReturnError(SSLError):
    pass


class SSLWantReadError(SSLError):
    pass


class SSLWantWriteError(SSLError):
    pass


class SSLSyscallError(SSLError):
    pass


class SSLEOFError(SSLError):
    pass


class SSLCertVerificationError(SSLError, ValueError):
    verify_code = 1
    verify_message = ""


CertificateError = SSLCertVerificationError


class _IntEnum(_enum.IntEnum):
    pass


class VerifyMode(_IntEnum):
    CERT_NONE = 0
    CERT_OPTIONAL = 1
    CERT_REQUIRED = 2


class VerifyFlags(_enum.IntFlag):
    VERIFY_DEFAULT = 0
    VERIFY_CRL_CHECK_LEAF = 0x4
    VERIFY_CRL_CHECK_CHAIN = 0xC
    VERIFY_X509_STRICT = 0x20
    VERIFY_ALLOW_PROXY_CERTS = 0x40
    VERIFY_X509_TRUSTED_FIRST = 0x8000
    VERIFY_X509_PARTIAL_CHAIN = 0x80000


class Options(_enum.IntFlag):
    OP_ALL = 0x80000050
    OP_NO_SSLv2 = 0
    OP_NO_SSLv3 = 0x2000000
    OP_NO_TLSv1 = 0x4000000
    OP_NO_TLSv1_1 = 0x10000000
    OP_NO_TLSv1_2 = 0x8000000
    OP_NO_TLSv1_3 = 0x20000000
    OP_NO_COMPRESSION = 0x20000
    OP_NO_TICKET = 0x4000
    OP_NO_RENEGOTIATION = 0x40000000
    OP_CIPHER_SERVER_PREFERENCE = 0x400000
    OP_SINGLE_DH_USE = 0
    OP_SINGLE_ECDH_USE = 0
    OP_ENABLE_MIDDLEBOX_COMPAT = 0x100000
    OP_IGNORE_UNEXPECTED_EOF = 0x80
    OP_LEGACY_SERVER_CONNECT = 0x4
    OP_ENABLE_KTLS = 0x8


class _SSLMethod(_IntEnum):
    PROTOCOL_SSLv23 = 2
    PROTOCOL_TLS_CLIENT = 16
    PROTOCOL_TLS_SERVER = 17
    PROTOCOL_TLSv1 = 3
    PROTOCOL_TLSv1_1 = 4
    PROTOCOL_TLSv1_2 = 5


class TLSVersion(_enum.IntEnum):
    MINIMUM_SUPPORTED = -2
    SSLv3 = 768
    TLSv1 = 769
    TLSv1_1 = 770
    TLSv1_2 = 771
    TLSv1_3 = 772
    MAXIMUM_SUPPORTED = -1


class AlertDescription(_IntEnum):
    ALERT_DESCRIPTION_CLOSE_NOTIFY = 0
    ALERT_DESCRIPTION_HANDSHAKE_FAILURE = 40
    ALERT_DESCRIPTION_BAD_CERTIFICATE = 42
    ALERT_DESCRIPTION_INTERNAL_ERROR = 80


class SSLErrorNumber(_IntEnum):
    SSL_ERROR_SSL = 1
    SSL_ERROR_WANT_READ = 2
    SSL_ERROR_WANT_WRITE = 3
    SSL_ERROR_WANT_X509_LOOKUP = 4
    SSL_ERROR_SYSCALL = 5
    SSL_ERROR_ZERO_RETURN = 6
    SSL_ERROR_WANT_CONNECT = 7
    SSL_ERROR_EOF = 8
    SSL_ERROR_INVALID_ERROR_CODE = 10


for _cls in (VerifyMode, VerifyFlags, Options, _SSLMethod, AlertDescription, SSLErrorNumber):
    globals().update(_cls.__members__)
if TYPE_CHECKING:  # the members the loop sets that this module uses, spelled out for the checker
    CERT_NONE, CERT_REQUIRED = VerifyMode.CERT_NONE, VerifyMode.CERT_REQUIRED
    OP_ALL, OP_NO_SSLv3, OP_NO_COMPRESSION = Options.OP_ALL, Options.OP_NO_SSLv3, Options.OP_NO_COMPRESSION
    VERIFY_X509_TRUSTED_FIRST = VerifyFlags.VERIFY_X509_TRUSTED_FIRST
    PROTOCOL_SSLv23 = _SSLMethod.PROTOCOL_SSLv23
    PROTOCOL_TLS_CLIENT, PROTOCOL_TLS_SERVER = _SSLMethod.PROTOCOL_TLS_CLIENT, _SSLMethod.PROTOCOL_TLS_SERVER
PROTOCOL_TLS = PROTOCOL_SSLv23
PROTOCOL_SSLv23 = PROTOCOL_TLS

_ASN1Object = _namedtuple("_ASN1Object", "nid shortname longname oid")


class Purpose(_ASN1Object, _enum.Enum):
    SERVER_AUTH = (129, "serverAuth", "TLS Web Server Authentication", "1.3.6.1.5.5.7.3.1")
    CLIENT_AUTH = (130, "clientAuth", "TLS Web Client Authentication", "1.3.6.1.5.5.7.3.2")


DefaultVerifyPaths = _namedtuple("DefaultVerifyPaths", "cafile capath openssl_cafile_env "
                                 "openssl_cafile openssl_capath_env openssl_capath")


def get_default_verify_paths() -> DefaultVerifyPaths:
    return DefaultVerifyPaths(None, None, "SSL_CERT_FILE", "/etc/ssl/cert.pem", "SSL_CERT_DIR",
                              "/etc/ssl/certs")


ENCODING_PEM = 1  # `_ssl`'s values (certificate encodings)
ENCODING_DER = 2


class SSLSession:
    pass


class MemoryBIO:
    def __init__(self) -> None:
        raise NotImplementedError("in-memory TLS (MemoryBIO) is not available in the sandbox; "
                                  "TLS runs on the host, per connection")


class SSLObject:
    def __init__(self, *args: object, **kwargs: object) -> None:
        raise TypeError("SSLObject (in-memory TLS) is not available in the sandbox")


def _plain_cert(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_plain_cert(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain_cert(v) for k, v in value.items()}
    return value


class SSLContext:
    """Settings kept for the code that reads them back; the host decides how TLS is done."""

    sslsocket_class: type[SSLSocket] | None = None
    sslobject_class: type[SSLObject] | None = None

    def __init__(self, protocol: int | None = None, *args: object, **kwargs: object) -> None:
        if protocol is None:
            protocol = PROTOCOL_TLS
        self.protocol = _SSLMethod(protocol)
        client = self.protocol == PROTOCOL_TLS_CLIENT
        self._verify_mode = CERT_REQUIRED if client else CERT_NONE
        self._check_hostname = client
        self.options = Options(OP_ALL | OP_NO_SSLv3 | OP_NO_COMPRESSION)
        self.verify_flags = VerifyFlags(VERIFY_X509_TRUSTED_FIRST)
        self.minimum_version = TLSVersion.MINIMUM_SUPPORTED
        self.maximum_version = TLSVersion.MAXIMUM_SUPPORTED
        self.post_handshake_auth = False
        self.hostname_checks_common_name = False
        self.keylog_filename: str | None = None
        self.sni_callback: Callable[..., Any] | None = None
        self.security_level = 2
        self.num_tickets = 2
        self._alpn: list[str] = []

    @property
    def verify_mode(self) -> VerifyMode:
        return self._verify_mode

    @verify_mode.setter
    def verify_mode(self, value: int) -> None:
        value = VerifyMode(value)
        if value == CERT_NONE and self._check_hostname:
            raise ValueError("Cannot set verify_mode to CERT_NONE when check_hostname is enabled.")
        self._verify_mode = value

    @property
    def check_hostname(self) -> bool:
        return self._check_hostname

    @check_hostname.setter
    def check_hostname(self, value: object) -> None:
        value = bool(value)
        if value and self._verify_mode == CERT_NONE:
            self._verify_mode = CERT_REQUIRED
        self._check_hostname = value

    def load_verify_locations(self, cafile: str | None = None, capath: str | None = None,
                              cadata: str | bytes | None = None) -> None:
        if cafile is None and capath is None and cadata is None:
            raise TypeError("cafile, capath and cadata cannot be all omitted")
        for path in (cafile, capath):
            if path is not None and not _os.path.exists(path):
                raise FileNotFoundError(2, "No such file or directory")

    def load_default_certs(self, purpose: Purpose | None = None) -> None:
        pass

    def set_default_verify_paths(self) -> None:
        pass

    def load_cert_chain(self, certfile: str, keyfile: str | None = None, password: object = None) -> None:
        raise SSLError(1, "client certificates are not supported in the sandbox (TLS runs on "
                       "the host)")

    def set_ciphers(self, ciphers: str) -> None:
        pass

    def get_ciphers(self) -> list[dict[str, Any]]:
        return []

    def set_alpn_protocols(self, protocols: list[str]) -> None:
        self._alpn = list(protocols)

    def set_npn_protocols(self, protocols: list[str]) -> None:
        pass

    def set_ecdh_curve(self, name: str) -> None:
        pass

    def set_servername_callback(self, callback: Callable[..., Any] | None) -> None:
        self.sni_callback = callback

    def load_dh_params(self, path: str) -> None:
        pass

    def get_ca_certs(self, binary_form: bool = False) -> list[Any]:
        return []

    def cert_store_stats(self) -> dict[str, int]:
        return {"crl": 0, "x509": 0, "x509_ca": 0}

    def session_stats(self) -> dict[str, int]:
        return {}

    def wrap_socket(self, sock: object, server_side: bool = False, do_handshake_on_connect: bool = True,
                    suppress_ragged_eofs: bool = True, server_hostname: str | None = None,
                    session: SSLSession | None = None) -> SSLSocket:
        if server_side:
            raise SSLError(1, "TLS servers are not available in the sandbox")
        if not isinstance(sock, _sockets.DoorSocket):
            raise TypeError("wrap_socket() needs a socket of the sandbox's network")
        if self._check_hostname and not server_hostname:
            raise ValueError("check_hostname requires server_hostname")
        return SSLSocket._adopt(sock, self, server_hostname, do_handshake_on_connect)

    def wrap_bio(self, incoming: MemoryBIO, outgoing: MemoryBIO, server_side: bool = False,
                 server_hostname: str | None = None, session: SSLSession | None = None) -> SSLObject:
        raise SSLError(1, "in-memory TLS (wrap_bio) is not available in the sandbox; TLS runs on "
                       "the host, per connection")


class SSLSocket(_sockets.DoorSocket):
    """A sandbox socket on which the host runs TLS; reads and writes are plaintext here."""

    _context: SSLContext
    server_hostname: str | None
    server_side: bool
    _tls: dict[str, Any] | None  # the host's TLS details once the handshake is done

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise TypeError("SSLSocket does not have a public constructor. Instances are returned "
                        "by SSLContext.wrap_socket().")

    @classmethod
    def _adopt(cls, sock: _sockets.DoorSocket, context: SSLContext, server_hostname: str | None,
               handshake: bool) -> SSLSocket:
        self = object.__new__(cls)
        self.__dict__.update(sock.__dict__)
        _sockets.by_fd[self._fd] = self
        sock.__dict__.update(_closed=True, _id=None, _fd=-1)  # the old object lets go
        self._context = context
        self.server_hostname = server_hostname
        self.server_side = False
        self._tls = None
        if handshake and self._id is not None and not self._pending:
            self.do_handshake()
        return self

    @property
    def context(self) -> SSLContext:
        return self._context

    @context.setter
    def context(self, value: SSLContext) -> None:
        self._context = value

    @property
    def session(self) -> SSLSession | None:
        return None

    @property
    def _sslobj(self) -> SSLSocket | None:  # httpcore reads it for "ssl_object"
        return self if self._tls is not None else None

    session_reused = False

    def connect(self, address: tuple[Any, ...]) -> None:
        super().connect(address)
        self.do_handshake()

    def do_handshake(self, block: bool = False) -> None:
        if self._tls is None:
            self._tls = self._door_start_tls(self.server_hostname)

    def _ensure(self) -> None:
        if self._tls is None:
            self.do_handshake()

    def send(self, data: Buffer, flags: int = 0) -> int:
        self._ensure()
        return super().send(data, flags)

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        self._ensure()
        return super().recv(bufsize, flags)

    def getpeercert(self, binary_form: bool = False) -> Any:
        self._ensure()
        assert self._tls is not None
        if binary_form:
            return self._tls.get("peercert_der")
        if self._context.verify_mode == CERT_NONE:
            return {}
        return _plain_cert(self._tls.get("peercert") or {})

    def get_unverified_chain(self) -> list[bytes]:
        """The peer's certificate (DER) as the host received it; the host verified the chain
        against its own trust (truststore's check of it on Linux is a no-op)."""
        self._ensure()
        assert self._tls is not None
        der = self._tls.get("peercert_der")
        return [der] if isinstance(der, bytes) and der else []

    get_verified_chain = get_unverified_chain

    def cipher(self) -> tuple[Any, ...] | None:
        cipher = self._tls and self._tls.get("cipher")
        return tuple(cipher) if cipher else None

    def shared_ciphers(self) -> None:
        return None

    def compression(self) -> None:
        return None

    def version(self) -> str | None:
        return self._tls.get("version") if self._tls else None

    def selected_alpn_protocol(self) -> str | None:
        return self._tls.get("alpn") if self._tls else None

    def selected_npn_protocol(self) -> None:
        return None

    def pending(self) -> int:
        return len(self._rbuf)

    def get_channel_binding(self, cb_type: str = "tls-unique") -> None:
        return None

    def verify_client_post_handshake(self) -> None:
        raise SSLError(1, "post-handshake authentication is not available in the sandbox")

    def unwrap(self) -> _sockets.DoorSocket:
        raise SSLError(1, "unwrapping TLS is not available in the sandbox")

    def dup(self) -> SSLSocket:
        raise NotImplementedError("Can't dup() %s instances" % self.__class__.__name__)


SSLContext.sslsocket_class = SSLSocket
SSLContext.sslobject_class = SSLObject


def create_default_context(purpose: Purpose = Purpose.SERVER_AUTH, *, cafile: str | None = None,
                           capath: str | None = None, cadata: str | bytes | None = None) -> SSLContext:
    if purpose == Purpose.SERVER_AUTH:
        context = SSLContext(PROTOCOL_TLS_CLIENT)
    else:
        context = SSLContext(PROTOCOL_TLS_SERVER)
    if cafile or capath or cadata:
        context.load_verify_locations(cafile, capath, cadata)
    return context


def _create_unverified_context(protocol: int | None = None, *, cert_reqs: int | None = None,
                               check_hostname: bool = False, purpose: Purpose = Purpose.SERVER_AUTH,
                               certfile: str | None = None, keyfile: str | None = None,
                               cafile: str | None = None, capath: str | None = None,
                               cadata: str | bytes | None = None) -> SSLContext:
    context = SSLContext(protocol or PROTOCOL_TLS_CLIENT)
    context.check_hostname = check_hostname
    context.verify_mode = CERT_NONE if cert_reqs is None else cert_reqs
    if cafile or capath or cadata:
        context.load_verify_locations(cafile, capath, cadata)
    return context


_create_default_https_context = create_default_context
_create_stdlib_context = _create_unverified_context


def RAND_bytes(n: int) -> bytes:
    return _os.urandom(n)


def RAND_status() -> bool:
    return True


def RAND_add(string: str | Buffer, entropy: float) -> None:
    pass


def cert_time_to_seconds(cert_time: str) -> int:
    import calendar
    import time

    return calendar.timegm(time.strptime(cert_time, "%b %d %H:%M:%S %Y GMT"))


PEM_HEADER = "-----BEGIN CERTIFICATE-----"
PEM_FOOTER = "-----END CERTIFICATE-----"


def DER_cert_to_PEM_cert(der_cert_bytes: Buffer) -> str:
    import base64
    import textwrap

    f = str(base64.standard_b64encode(der_cert_bytes), "ASCII", "strict")
    return PEM_HEADER + "\n" + "\n".join(textwrap.wrap(f, 64)) + "\n" + PEM_FOOTER + "\n"


def PEM_cert_to_DER_cert(pem_cert_string: str) -> bytes:
    import base64

    if not pem_cert_string.startswith(PEM_HEADER) or not pem_cert_string.strip().endswith(PEM_FOOTER):
        raise ValueError("Invalid PEM encoding; must start with %s and end with %s" % (PEM_HEADER, PEM_FOOTER))
    d = pem_cert_string.strip()[len(PEM_HEADER):-len(PEM_FOOTER)]
    return base64.decodebytes(d.encode("ASCII", "strict"))


def get_server_certificate(addr: tuple[str, int], ssl_version: int | None = None, ca_certs: str | None = None,
                           timeout: float | None = None) -> str:
    import socket

    host, port = addr
    with socket.create_connection((host, port), timeout=timeout) as sock:
        with create_default_context().wrap_socket(sock, server_hostname=host) as tls:
            return DER_cert_to_PEM_cert(tls.getpeercert(True))


for _name in ("SSLContext", "SSLSocket", "SSLObject", "SSLError", "SSLZeroReturnError",
              "SSLWantReadError", "SSLWantWriteError", "SSLSyscallError", "SSLEOFError",
              "SSLCertVerificationError", "MemoryBIO", "SSLSession"):
    globals()[_name].__module__ = "ssl"
