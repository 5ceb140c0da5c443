"""The network door ops: every one declared once, here, with its request and reply fields.

The guest's side (guest/declaw_net/_door.py) calls them as `call(op, **fields)` over
`_host.call` (msgpack); tests/egress/test_ops.py checks that both sides name the same ops and
fields. Each field is declared with its type and bounds (_wasm/door.py); the door's dispatcher
checks a request against them before the session sees it (a refusal is an error of kind
"invalid" naming the op and the field), and the session's own checks stay as the deeper ones.
Every reply is a dict; a failure is `{"error": {"kind", "errno", "message"}}`, which the guest
raises as the matching exception (`kind`: "policy" -> ConnectionRefusedError (or
socket.gaierror for a name), "gai" -> socket.gaierror, "refused" -> ConnectionRefusedError,
"timeout" -> TimeoutError, "reset" -> ConnectionResetError, "tls" -> ssl.SSLError,
"tls_verify" -> ssl.SSLCertVerificationError, "limit" / "closed" / "invalid" -> OSError).

Waiting ops (`wait`: True) wait on the host in short slices, up to `timeout` seconds (None: no
limit but the guest's own deadline, which always stops the wait).
"""

from __future__ import annotations

from .._wasm.door import NO_NUL, Bool, Bytes, Int, List, Num, Op, Str

MAX_SEND = 1 << 20  # bytes per net.send
MAX_RECV = 1 << 20  # bytes per net.recv
MAX_IDS = 1024  # ids in one net.poll
MAX_HOST = 1024  # characters of a name or an address
MAX_ID = 1 << 62

# the fields several ops share (each a declaration: _wasm/door.py)
ID = Int(0, MAX_ID, required=True, doc="the connection's id (net.connect's reply)")
HOST = Str(MAX_HOST, NO_NUL, min_len=1, required=True, doc="an IDNA-encoded name or an address")
FAMILY = Int(0, 6, null=True, doc="0 (any), 4 or 6")
WAIT = Bool(doc="wait for the outcome (default), or answer at once")
TIMEOUT = Num(0, 1e7, null=True, doc="seconds to wait at most (None: the guest's own deadline)")
IDS = List(Int(0, MAX_ID), MAX_IDS, null=True)

OPS = {op.name: op for op in [
    Op("net.resolve", {"host": HOST, "port": Int(0, 65535, null=True), "family": FAMILY}, "{addresses}",
       "Resolve `host` (an IDNA-encoded name or any address spelling); `addresses` is a list of "
       "[family, ip] the policy allows. A name the policy refuses fails with kind 'policy'."),
    Op("net.connect", {"host": HOST, "port": Int(1, 65535, required=True), "family": FAMILY,
                       "by_name": Bool(), "fd": Int(-1, 1 << 30, null=True), "wait": WAIT,
                       "timeout": TIMEOUT},
       "{id, peer, pending}",
       "Open a TCP connection to (host, port). `by_name`: `host` is a name to resolve and bind "
       "to (socket.create_connection); else an address the guest got from net.resolve (bound "
       "to the name it was resolved for) or a literal. `wait` False: returns at once with "
       "`pending` True while the connection is made (net.poll says writable when it is done; "
       "net.status gives the result). `fd`: the guest's number for it, for error messages."),
    Op("net.status", {"id": ID}, "{connected, failure}",
       "The outcome of a connection made without waiting (SO_ERROR): `failure` is None or an "
       "error dict (a reply's `error` key always means the op itself failed)."),
    Op("net.tls", {"id": ID, "server_hostname": Str(MAX_HOST, NO_NUL, null=True), "wait": WAIT,
                   "timeout": TIMEOUT},
       "{version, cipher, alpn, peercert, peercert_der, pending}",
       "Run TLS on the connection (before any data): the host verifies the certificate for the "
       "connection's name (which `server_hostname`, if given, must be) against its own trust. "
       "`wait` False: returns `pending` True while the handshake runs (net.poll says writable "
       "when it is over; call net.tls again for the result)."),
    Op("net.send", {"id": ID, "data": Bytes(MAX_SEND, required=True), "wait": WAIT, "timeout": TIMEOUT},
       "{n}",
       "Give the host up to 1 MiB to send; `n` is how many bytes it took (0 only when not "
       "waiting and its buffer is full)."),
    Op("net.recv", {"id": ID, "n": Int(1, 1 << 30, required=True), "wait": WAIT, "timeout": TIMEOUT},
       "{data, eof}",
       "Up to `n` bytes (the host may give at most `n`); `eof` once the peer closed and all "
       "was read. Not waiting and nothing there: empty data, eof False."),
    Op("net.poll", {"read": IDS, "write": IDS, "timeout": TIMEOUT}, "{read, write}",
       "Which connections (ids) are readable (data, end of stream or an error) and writable "
       "(connected with room, or failed); waits up to `timeout` for one if none is."),
    Op("net.shutdown", {"id": ID, "how": Int(0, 2, required=True)}, "{}",
       "Half-close: how 0 = read, 1 = write, 2 = both."),
    Op("net.close", {"id": ID}, "{}", "Close the connection or listening socket (idempotent)."),
    Op("net.listen", {"port": Int(0, 65535, required=True), "backlog": Int(0, 1 << 16, null=True),
                      "fd": Int(-1, 1 << 30, null=True)},
       "{id, port}",
       "Listen on the sandbox's `port` (0: a free one; `port` in the reply): the host maps it to "
       "a host listener on loopback (inbound.py) and queues its connections for net.accept. A "
       "port another socket of the sandbox listens on fails with EADDRINUSE."),
    Op("net.accept", {"id": ID, "wait": WAIT, "timeout": TIMEOUT}, "{id, peer}",
       "The next connection on the listening socket `id`: its connection id (for net.send, "
       "net.recv, net.poll...) and the client's [address, port]. Not waiting and none queued: "
       "`id` None. net.poll says the listening socket is readable while one is queued."),
]}
