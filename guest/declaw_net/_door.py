"""The guest's end of the network door: `call(op, **fields)` and the errors it raises.

The ops and their fields are declared on the host (declaw_wasm/_egress/ops.py); OPS here must
name the same (tests/egress/test_ops.py checks). A reply `{"error": {kind, errno, message}}`
becomes the exception the same failure raises on a real system.
"""

from __future__ import annotations

import errno as _errno

from . import _wire

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: start-up stays free
    from collections.abc import Callable
    from typing import Any

OPS = {
    "net.resolve": ("host", "port", "family"),
    "net.connect": ("host", "port", "family", "by_name", "fd", "wait", "timeout"),
    "net.status": ("id",),
    "net.tls": ("id", "server_hostname", "wait", "timeout"),
    "net.send": ("id", "data", "wait", "timeout"),
    "net.recv": ("id", "n", "wait", "timeout"),
    "net.poll": ("read", "write", "timeout"),
    "net.shutdown": ("id", "how"),
    "net.close": ("id",),
    "net.listen": ("port", "backlog", "fd"),
    "net.accept": ("id", "wait", "timeout"),
}

_codec: list[Callable[[bytes], bytes]] = []  # _host.call, imported on first use: start-up stays free


def call(op: str, **fields: Any) -> Any:
    """One network request to the host; its reply (a dict), or the matching exception."""
    if not _codec:
        import _host

        _codec.append(_host.call)
    fields["op"] = op
    reply = _wire.unpack(_codec[0](_wire.pack(fields)))
    if type(reply) is dict and "error" in reply:
        raise error_from(reply["error"], op)
    return reply


def errno_of(error: dict[str, Any]) -> int:
    return getattr(_errno, str(error.get("errno") or ""), 0) or _errno.EIO


def error_from(error: dict[str, Any], op: str = "") -> OSError:
    """The exception for a host error dict."""
    import socket

    kind = error.get("kind")
    message = str(error.get("message", "network error"))
    if kind == "gai" or (kind == "policy" and op == "net.resolve") or \
            (kind == "policy" and error.get("errno") == "EAI_NONAME"):
        return socket.gaierror(getattr(socket, "EAI_NONAME", -2), message)
    if kind in ("tls", "tls_verify"):
        import ssl

        if kind == "tls_verify":
            exc = ssl.SSLCertVerificationError(1, message)
            exc.verify_message = message
            exc.verify_code = 1
            return exc
        return ssl.SSLError(1, message)
    code = errno_of(error)
    if kind in ("policy", "refused"):
        return ConnectionRefusedError(code, message)
    if kind == "timeout":
        return TimeoutError(message) if message == "timed out" else TimeoutError(code, message)
    if kind == "reset":
        return ConnectionResetError(code, message)
    return OSError(code, message)
