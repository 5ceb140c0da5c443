"""`ssl` for the guest: a stub whose TLS runs on the host.

CPython-WASI has no OpenSSL. This module is installed as `ssl` so that http.client, urllib,
urllib3 2.x, requests, httpx and aiohttp take their normal HTTPS paths: `SSLContext.wrap_socket`
asks the host (door op net.tls) to run TLS on that connection; the guest then speaks plaintext
to the host, which encrypts. The host verifies the server's certificate for the name the
connection is bound to against the host's own trust, whatever this context says: CERT_NONE,
`_create_unverified_context()`, `load_verify_locations` or `check_hostname = False` change
nothing on the host side (they are kept, and read back, for the code that sets them).
Client certificates, TLS servers and in-memory TLS (`wrap_bio`) are not available.
"""

import enum as _enum
import os as _os
from collections import namedtuple as _namedtuple

from . import sockets as _sockets

OPENSSL_VERSION = "OpenSSL 3.0.13 30 Jan 2024 (declaw-wasm: TLS runs on the host)"
OPENSSL_VERSION_INFO = (3, 0, 0, 13, 0)
OPENSSL_VERSION_NUMBER = 0x300000D0
_OPENSSL_API_VERSION = (3, 0, 0, 13, 0)
HAS_SNI = HAS_ALPN = HAS_ECDH = HAS_TLSv1_2 = HAS_TLSv1_3 = HAS_NEVER_CHECK_COMMON_NAME = True
HAS_NPN = HAS_SSLv2 = HAS_SSLv3 = HAS_TLSv1 = HAS_TLSv1_1 = HAS_PSK = HAS_PHA = False
CHANNEL_BINDING_TYPES = []
socket_error = OSError


class SSLError(OSError):
    library = "SSL"
    reason = None

    def __str__(self):
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
PROTOCOL_TLS = PROTOCOL_SSLv23  # noqa: F821 (set just above)
PROTOCOL_SSLv23 = PROTOCOL_TLS

_ASN1Object = _namedtuple("_ASN1Object", "nid shortname longname oid")


class Purpose(_ASN1Object, _enum.Enum):
    SERVER_AUTH = (129, "serverAuth", "TLS Web Server Authentication", "1.3.6.1.5.5.7.3.1")
    CLIENT_AUTH = (130, "clientAuth", "TLS Web Client Authentication", "1.3.6.1.5.5.7.3.2")


DefaultVerifyPaths = _namedtuple("DefaultVerifyPaths", "cafile capath openssl_cafile_env "
                                 "openssl_cafile openssl_capath_env openssl_capath")


def get_default_verify_paths():
    return DefaultVerifyPaths(None, None, "SSL_CERT_FILE", "/etc/ssl/cert.pem", "SSL_CERT_DIR",
                              "/etc/ssl/certs")


class SSLSession:
    pass


class MemoryBIO:
    def __init__(self):
        raise NotImplementedError("in-memory TLS (MemoryBIO) is not available in the sandbox; "
                                  "TLS runs on the host, per connection")


class SSLObject:
    def __init__(self, *args, **kwargs):
        raise TypeError("SSLObject (in-memory TLS) is not available in the sandbox")


def _plain_cert(value):
    if isinstance(value, list):
        return tuple(_plain_cert(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain_cert(v) for k, v in value.items()}
    return value


class SSLContext:
    """Settings kept for the code that reads them back; the host decides how TLS is done."""

    sslsocket_class = None
    sslobject_class = None

    def __init__(self, protocol=None, *args, **kwargs):
        if protocol is None:
            protocol = PROTOCOL_TLS
        self.protocol = _SSLMethod(protocol)
        client = self.protocol == PROTOCOL_TLS_CLIENT  # noqa: F821
        self._verify_mode = CERT_REQUIRED if client else CERT_NONE  # noqa: F821
        self._check_hostname = client
        self.options = Options(OP_ALL | OP_NO_SSLv3 | OP_NO_COMPRESSION)  # noqa: F821
        self.verify_flags = VerifyFlags(VERIFY_X509_TRUSTED_FIRST)  # noqa: F821
        self.minimum_version = TLSVersion.MINIMUM_SUPPORTED
        self.maximum_version = TLSVersion.MAXIMUM_SUPPORTED
        self.post_handshake_auth = False
        self.hostname_checks_common_name = False
        self.keylog_filename = None
        self.sni_callback = None
        self.security_level = 2
        self.num_tickets = 2
        self._alpn = []

    @property
    def verify_mode(self):
        return self._verify_mode

    @verify_mode.setter
    def verify_mode(self, value):
        value = VerifyMode(value)
        if value == CERT_NONE and self._check_hostname:  # noqa: F821
            raise ValueError("Cannot set verify_mode to CERT_NONE when check_hostname is enabled.")
        self._verify_mode = value

    @property
    def check_hostname(self):
        return self._check_hostname

    @check_hostname.setter
    def check_hostname(self, value):
        value = bool(value)
        if value and self._verify_mode == CERT_NONE:  # noqa: F821
            self._verify_mode = CERT_REQUIRED  # noqa: F821
        self._check_hostname = value

    def load_verify_locations(self, cafile=None, capath=None, cadata=None):
        if cafile is None and capath is None and cadata is None:
            raise TypeError("cafile, capath and cadata cannot be all omitted")
        for path in (cafile, capath):
            if path is not None and not _os.path.exists(path):
                raise FileNotFoundError(2, "No such file or directory")

    def load_default_certs(self, purpose=None):
        pass

    def set_default_verify_paths(self):
        pass

    def load_cert_chain(self, certfile, keyfile=None, password=None):
        raise SSLError(1, "client certificates are not supported in the sandbox (TLS runs on "
                       "the host)")

    def set_ciphers(self, ciphers):
        pass

    def get_ciphers(self):
        return []

    def set_alpn_protocols(self, protocols):
        self._alpn = list(protocols)

    def set_npn_protocols(self, protocols):
        pass

    def set_ecdh_curve(self, name):
        pass

    def set_servername_callback(self, callback):
        self.sni_callback = callback

    def load_dh_params(self, path):
        pass

    def get_ca_certs(self, binary_form=False):
        return []

    def cert_store_stats(self):
        return {"crl": 0, "x509": 0, "x509_ca": 0}

    def session_stats(self):
        return {}

    def wrap_socket(self, sock, server_side=False, do_handshake_on_connect=True,
                    suppress_ragged_eofs=True, server_hostname=None, session=None):
        if server_side:
            raise SSLError(1, "TLS servers are not available in the sandbox")
        if not isinstance(sock, _sockets.DoorSocket):
            raise TypeError("wrap_socket() needs a socket of the sandbox's network")
        if self._check_hostname and not server_hostname:
            raise ValueError("check_hostname requires server_hostname")
        return SSLSocket._adopt(sock, self, server_hostname, do_handshake_on_connect)

    def wrap_bio(self, incoming, outgoing, server_side=False, server_hostname=None, session=None):
        raise SSLError(1, "in-memory TLS (wrap_bio) is not available in the sandbox; TLS runs on "
                       "the host, per connection")


class SSLSocket(_sockets.DoorSocket):
    """A sandbox socket on which the host runs TLS; reads and writes are plaintext here."""

    def __init__(self, *args, **kwargs):
        raise TypeError("SSLSocket does not have a public constructor. Instances are returned "
                        "by SSLContext.wrap_socket().")

    @classmethod
    def _adopt(cls, sock, context, server_hostname, handshake):
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
    def context(self):
        return self._context

    @context.setter
    def context(self, value):
        self._context = value

    @property
    def session(self):
        return None

    @property
    def _sslobj(self):  # httpcore reads it for "ssl_object"
        return self if self._tls is not None else None

    session_reused = False

    def connect(self, address):
        super().connect(address)
        self.do_handshake()

    def do_handshake(self, block=False):
        if self._tls is None:
            self._tls = self._door_start_tls(self.server_hostname)

    def _ensure(self):
        if self._tls is None:
            self.do_handshake()

    def send(self, data, flags=0):
        self._ensure()
        return super().send(data, flags)

    def recv(self, bufsize, flags=0):
        self._ensure()
        return super().recv(bufsize, flags)

    def getpeercert(self, binary_form=False):
        self._ensure()
        if binary_form:
            return self._tls.get("peercert_der")
        if self._context.verify_mode == CERT_NONE:  # noqa: F821
            return {}
        return _plain_cert(self._tls.get("peercert") or {})

    def cipher(self):
        cipher = self._tls and self._tls.get("cipher")
        return tuple(cipher) if cipher else None

    def shared_ciphers(self):
        return None

    def compression(self):
        return None

    def version(self):
        return self._tls and self._tls.get("version")

    def selected_alpn_protocol(self):
        return self._tls and self._tls.get("alpn")

    def selected_npn_protocol(self):
        return None

    def pending(self):
        return len(self._rbuf)

    def get_channel_binding(self, cb_type="tls-unique"):
        return None

    def verify_client_post_handshake(self):
        raise SSLError(1, "post-handshake authentication is not available in the sandbox")

    def unwrap(self):
        raise SSLError(1, "unwrapping TLS is not available in the sandbox")

    def dup(self):
        raise NotImplementedError("Can't dup() %s instances" % self.__class__.__name__)


SSLContext.sslsocket_class = SSLSocket
SSLContext.sslobject_class = SSLObject


def create_default_context(purpose=Purpose.SERVER_AUTH, *, cafile=None, capath=None, cadata=None):
    if purpose == Purpose.SERVER_AUTH:
        context = SSLContext(PROTOCOL_TLS_CLIENT)  # noqa: F821
    else:
        context = SSLContext(PROTOCOL_TLS_SERVER)  # noqa: F821
    if cafile or capath or cadata:
        context.load_verify_locations(cafile, capath, cadata)
    return context


def _create_unverified_context(protocol=None, *, cert_reqs=None, check_hostname=False,
                               purpose=Purpose.SERVER_AUTH, certfile=None, keyfile=None,
                               cafile=None, capath=None, cadata=None):
    context = SSLContext(protocol or PROTOCOL_TLS_CLIENT)  # noqa: F821
    context.check_hostname = check_hostname
    context.verify_mode = CERT_NONE if cert_reqs is None else cert_reqs  # noqa: F821
    if cafile or capath or cadata:
        context.load_verify_locations(cafile, capath, cadata)
    return context


_create_default_https_context = create_default_context
_create_stdlib_context = _create_unverified_context


def RAND_bytes(n):
    return _os.urandom(n)


def RAND_status():
    return True


def RAND_add(string, entropy):
    pass


def cert_time_to_seconds(cert_time):
    import calendar
    import time

    return calendar.timegm(time.strptime(cert_time, "%b %d %H:%M:%S %Y GMT"))


PEM_HEADER = "-----BEGIN CERTIFICATE-----"
PEM_FOOTER = "-----END CERTIFICATE-----"


def DER_cert_to_PEM_cert(der_cert_bytes):
    import base64
    import textwrap

    f = str(base64.standard_b64encode(der_cert_bytes), "ASCII", "strict")
    return PEM_HEADER + "\n" + "\n".join(textwrap.wrap(f, 64)) + "\n" + PEM_FOOTER + "\n"


def PEM_cert_to_DER_cert(pem_cert_string):
    import base64

    if not pem_cert_string.startswith(PEM_HEADER) or not pem_cert_string.strip().endswith(PEM_FOOTER):
        raise ValueError("Invalid PEM encoding; must start with %s and end with %s" % (PEM_HEADER, PEM_FOOTER))
    d = pem_cert_string.strip()[len(PEM_HEADER):-len(PEM_FOOTER)]
    return base64.decodebytes(d.encode("ASCII", "strict"))


def get_server_certificate(addr, ssl_version=None, ca_certs=None, timeout=None):
    import socket

    host, port = addr
    with socket.create_connection((host, port), timeout=timeout) as sock:
        with create_default_context().wrap_socket(sock, server_hostname=host) as tls:
            return DER_cert_to_PEM_cert(tls.getpeercert(True))


for _name in ("SSLContext", "SSLSocket", "SSLObject", "SSLError", "SSLZeroReturnError",
              "SSLWantReadError", "SSLWantWriteError", "SSLSyscallError", "SSLEOFError",
              "SSLCertVerificationError", "MemoryBIO", "SSLSession"):
    globals()[_name].__module__ = "ssl"
