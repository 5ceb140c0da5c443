"""The host holds a bounded number of bytes per egress connection, whatever the upstream sends
and whatever the guest leaves unread (docs/security.md, "Upstream servers and the relay").

Each case runs a hostile upstream on loopback (upstream.Flood: it answers at once, never reads
the request's body, and counts the bytes it managed to send) and a guest that keeps its
connections busy, so that the host pumps them, while consuming little or nothing. Two bounds:
the resident memory of the process that runs the relay (this one, or the pool worker hosting
the sandbox), and the bytes the upstream got out: when the host stops reading, the kernel's
socket buffers fill and the upstream blocks, far short of its 400 MiB.

Every case runs in this process and in a process pool's worker (the relay runs there), on the
warm guest path only (the relay is host code; the guest path does not change it).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Callable, Iterator, Optional

import brotli
import pytest

from declaw_wasm import Sandbox, Secret, testing
from declaw_wasm._pool.pool import ProcessPool
from declaw_wasm.security import PIIConfig, SecurityPolicy

from security.support import PeakRSS
from .upstream import Flood, Stalling, Upstreams

MiB = 1 << 20
SECONDS = 3.0  # how long the guest keeps its connections busy: at loopback speed, time for the
# upstream to send hundreds of MiB (all of its 400 MiB, to a relay that does not hold back)

pytestmark = [pytest.mark.guest, pytest.mark.parametrize("mode", ["in-process", "processes"], indirect=True)]

# The guest: opens N connections to the flood server (TLS if asked), sends each one's first
# bytes (REQUESTS[i % len]), then for SECONDS does, on every connection in turn, what BEHAVIOUR
# says, 50 rounds a second:
#   slow  read at most 1 KiB, send 64 bytes more of the request's body
#   poll  never read: only ask whether the socket is readable (select with timeout 0)
#   push  send 1 MiB of body as fast as the host takes it, never read
GUEST = """
import json, select, socket, ssl, time
PORT, N, TLS, BEHAVIOUR, SECONDS = {port}, {n}, {tls}, {behaviour!r}, {seconds}
REQUESTS = {requests!r}
CHUNK = b"x" * (1 << 20)
WOULD_BLOCK = (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError)
def opened(i):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=10)
    if TLS:
        s = ssl.create_default_context().wrap_socket(s, server_hostname="127.0.0.1")
    s.sendall(REQUESTS[i % len(REQUESTS)].replace(b"PORT", str(PORT).encode()))
    s.setblocking(False)
    return s
socks = [opened(i) for i in range(N)]
got = sent = 0
end = time.monotonic() + SECONDS
while time.monotonic() < end:
    for s in socks:
        if BEHAVIOUR == "slow":
            try:
                got += len(s.recv(1024))
            except WOULD_BLOCK:
                pass
            try:
                sent += s.send(b"x" * 64)
            except WOULD_BLOCK:
                pass
        elif BEHAVIOUR == "poll":
            select.select([s], [], [], 0)
        else:
            try:
                sent += s.send(CHUNK)
            except WOULD_BLOCK:
                pass
    time.sleep(0.02)
print(json.dumps({{"got": got, "sent": sent}}))
"""
# a request whose body has barely begun (1 GB announced, 3 bytes sent)
UNFINISHED = b"POST /early HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nContent-Length: 1000000000\r\n\r\nabc"
GET = b"GET /body HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\n\r\n"


@pytest.fixture(scope="module")
def guest_path() -> str:
    return "warm"


@pytest.fixture(scope="module")
def pool(upstreams: Upstreams) -> Iterator[ProcessPool]:
    """A pool of its own, started inside this folder's loopback namespace (a pool shared by the
    session may have been started outside it, where these servers are not), once the
    upstreams' environment is set."""
    made = ProcessPool(1)
    yield made
    made.close()


class Relay:
    """Where the test's sandboxes run, and the pid of the process running their relay."""

    def __init__(self, mode: str, pool: Optional[ProcessPool]) -> None:
        self.mode = mode
        self.pool = pool
        self.made: list[Sandbox] = []

    def make(self, **create: Any) -> Sandbox:
        backend: dict[str, Any] = {"backend": self.pool} if self.pool is not None else {}
        sandbox = Sandbox.create(timeout=300, network={"allow_out": ["127.0.0.1/32"]}, **backend,
                                 **create)
        self.made.append(sandbox)
        return sandbox

    def pid(self, sandbox: Sandbox) -> Optional[int]:
        return self.pool.pid_of(sandbox.sandbox_id) if self.pool is not None else None


@pytest.fixture
def relay(mode: str, request: pytest.FixtureRequest, no_background_guests: None) -> Iterator[Relay]:
    where = Relay(mode, request.getfixturevalue("pool") if mode == "processes" else None)
    yield where
    for sandbox in where.made:
        sandbox.kill()


def flooded(relay: Relay, flood: Flood, *, n: int = 1, behaviour: str = "slow",
            requests: tuple[bytes, ...] = (UNFINISHED,), tls: bool = False) -> tuple[dict[str, int], int]:
    """Run the guest against `flood`; (its counts, the relay process's RSS growth while the
    guest kept its connections busy, from the moment the upstream had all N requests and before
    it sent anything)."""
    sbx = relay.make()
    code = GUEST.format(port=flood.port, n=n, tls=tls, behaviour=behaviour, seconds=SECONDS,
                        requests=list(requests))
    sbx.files.write("/tmp/flood.py", code)
    handle = sbx.commands.run("python3 /tmp/flood.py", background=True, timeout=120)
    deadline = time.monotonic() + 60
    while flood.seen < n and time.monotonic() < deadline:
        time.sleep(0.01)
    assert flood.seen >= n, f"the upstream saw {flood.seen} of {n} requests"
    with PeakRSS(relay.pid(sbx)) as mem:
        flood.release()
        result = handle.wait()
    assert result.exit_code == 0, result.stderr
    if relay.pool is None:  # the guest ended: its connections closed and hold nothing
        assert testing.egress_of(sbx).budget.held == 0
    return json.loads(result.stdout.strip().splitlines()[-1]), mem.growth


@pytest.fixture
def flood_factory(upstreams: Upstreams) -> Iterator[Callable[..., Flood]]:
    made: list[Flood] = []

    def start(**kwargs: Any) -> Flood:
        server = Flood(**kwargs)
        made.append(server)
        return server

    yield start
    for server in made:
        server.stop()


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_upstream_bytes_held_while_the_request_is_unfinished_are_bounded(
        relay: Relay, flood_factory: Callable[..., Flood], upstreams: Upstreams, tls: bool) -> None:
    """The upstream answers at once, then keeps sending while the guest's request body goes on
    (the relay may not pass those bytes on before the request is done): the host stops reading."""
    flood = flood_factory(tls=upstreams.https.tls if tls else None)
    got, growth = flooded(relay, flood, tls=tls)
    assert 0 < got["got"] < 1024, got  # the early answer, and nothing after it
    assert flood.sent < 64 * MiB, flood.sent
    assert growth < 32 * MiB, growth


def test_many_flooding_connections_stay_within_their_windows(
        relay: Relay, flood_factory: Callable[..., Flood]) -> None:
    """50 connections at once, half answered early (then flooded), half with a 400 MiB body,
    all read slowly."""
    flood = flood_factory(total=2 << 30)
    got, growth = flooded(relay, flood, n=50, requests=(UNFINISHED, UNFINISHED.replace(b"/early", b"/body")))
    assert flood.sent < 50 * 16 * MiB, flood.sent
    assert growth < 50 * 6 * MiB, growth


def test_a_response_the_guest_never_reads_holds_one_window(
        relay: Relay, flood_factory: Callable[..., Flood]) -> None:
    """A plain GET with a 400 MiB answer; the guest only polls its socket, never reads."""
    flood = flood_factory()
    got, growth = flooded(relay, flood, behaviour="poll", requests=(GET,))
    assert got == {"got": 0, "sent": 0}
    assert flood.sent < 64 * MiB, flood.sent
    assert growth < 32 * MiB, growth


def test_raw_connection_bytes_held_are_bounded(relay: Relay, flood_factory: Callable[..., Flood]) -> None:
    """Non-HTTP traffic (relayed as bytes to a destination allow_out names): the upstream
    floods, the guest reads slowly and keeps sending."""
    flood = flood_factory(raw=True)
    got, growth = flooded(relay, flood, requests=(b"\x00\x01 a binary protocol",))
    assert flood.sent < 64 * MiB, flood.sent
    assert got["got"] < 1 * MiB
    assert growth < 32 * MiB, growth


def test_guest_bytes_held_for_a_stalled_upstream_are_bounded(
        relay: Relay, flood_factory: Callable[..., Flood]) -> None:
    """The guest sends a 1 GB body as fast as it may to an upstream that never reads: the host
    stops taking the guest's bytes once its window towards the upstream is full."""
    flood = flood_factory()
    got, growth = flooded(relay, flood, behaviour="push",
                          requests=(UNFINISHED.replace(b"/early", b"/sink"),))
    assert got["sent"] < 64 * MiB, got
    assert growth < 32 * MiB, growth


# N answers of SIZE bytes at once (more than the sandbox's budget together), read to the end one
# connection after another, each only once select says it is readable.
IN_TURN = """
import json, select, socket, time
PORT, N, SIZE = {port}, {n}, {size}
socks = [socket.create_connection(("127.0.0.1", PORT), timeout=30) for _ in range(N)]
for s in socks:
    s.sendall(b"GET /body HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\n\\r\\n" % PORT)
for _ in range(50):  # the answers fill their windows meanwhile
    select.select(socks, [], [], 0.01)
out = []
for s in socks:
    ready = select.select([s], [], [], 10)[0] == [s]
    data = b""
    while b"\\r\\n\\r\\n" not in data:
        data += s.recv(65536)
    head, _, body = data.partition(b"\\r\\n\\r\\n")
    size = len(body)
    while size < SIZE:
        chunk = s.recv(1 << 20)
        assert chunk.count(b"z") == len(chunk)
        size += len(chunk)
    out.append([ready, head.startswith(b"HTTP/1.1 200"), size, select.select([s], [], [], 0)[0] == []])
print(json.dumps(out))
"""


def test_connections_read_in_turn_all_complete_when_the_budget_is_spent(
        relay: Relay, flood_factory: Callable[..., Flood]) -> None:
    """Twelve 8 MiB answers at once spend the sandbox's budget; a guest reading them one after
    another still gets each whole (a connection it reads keeps its floor), and select stays
    truthful: readable before each, not readable once each answer is read."""
    flood = flood_factory(size=8 * MiB)
    flood.release()
    sbx = relay.make()
    sbx.files.write("/tmp/turn.py", IN_TURN.format(port=flood.port, n=12, size=8 * MiB))
    result = sbx.commands.run("python3 /tmp/turn.py", timeout=120)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == [[True, True, 8 * MiB, True]] * 12
    if relay.pool is None:
        assert testing.egress_of(sbx).budget.held == 0


# -- what the relay keeps beyond its windows (decoders, guard buffers): test_host_holds.py -------

# The guest: N connections to PORT, one after another, each a GET whose answer it reads until
# WANT bytes of body came (or nothing more for 3 s), all kept open; then it waits 2 s (the host
# holds what it holds meanwhile). Per connection: the status line, the body's size, its start.
READER = r'''
import json, socket, sys, time
port, n, want = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
socks, got = [], []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /x HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % port)
    s.settimeout(3)
    data, size = b"", 0
    while size < want:
        try:
            chunk = s.recv(1 << 20)
        except TimeoutError:
            break
        if not chunk:
            break
        data += chunk[:8192 - len(data)]  # the head and the body's start are kept, the rest counted
        size += len(chunk)
    head, _, body = data.partition(b"\r\n\r\n")
    socks.append(s)
    got.append([head.split(b"\r\n")[0].decode(), body[:600].decode("latin-1")])
time.sleep(2)
print(json.dumps(got))
'''


@pytest.fixture
def stalling() -> Iterator[Callable[[bytes, str], Stalling]]:
    """`stalling(body, coding)`: an upstream answering each GET with `body` (so coded) and then
    stalling after 7/8 of it."""
    made: list[Stalling] = []

    def start(body: bytes, coding: str) -> Stalling:
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Encoding: %s\r\n"
                b"Content-Length: %d\r\n\r\n" % (coding.encode(), len(body)))
        server = Stalling(head, body, len(body) * 7 // 8)
        made.append(server)
        return server

    yield start
    for server in made:
        server.stop()


def _read_all(relay: Relay, server: Stalling, n: int, want: int, **create: Any) -> tuple[list[list[str]], int]:
    """The guest reads `n` answers from `server` (READER) in a sandbox with secrets (so the relay
    decodes every body): what each connection got, and the relay process's RSS growth."""
    sbx = relay.make(secrets={"TOKEN": Secret("sk-test-0123456789abcdef", hosts=["example.com"])}, **create)
    sbx.files.write("/tmp/reader.py", READER)
    with PeakRSS(relay.pid(sbx)) as mem:
        result = sbx.commands.run(f"python3 /tmp/reader.py {server.port} {n} {want}", timeout=240)
    assert result.exit_code == 0, result.stderr
    if relay.pool is None:  # its connections closed with the guest: nothing kept any more
        assert testing.egress_of(sbx).budget.kept == 0
    return json.loads(result.stdout), mem.growth


def test_decoding_hostile_answers_holds_a_bounded_amount_of_host_memory(
        relay: Relay, stalling: Callable[[bytes, str], Stalling]) -> None:
    """Four stacked brotli codings at the largest standard window (16 MiB each): the relay held
    ~64 MiB of decoder windows per connection (8 connections grew the host by 500-700 MiB). Each
    body's decoders together get at most 20 MiB, read from the codings' headers before anything
    is allocated: every connection gets a 502 naming that bound, at once (~50 MiB measured, the
    guest included)."""
    body = os.urandom(20 * MiB)
    for _ in range(4):
        body = brotli.compress(body, quality=0, lgwin=24)
    got, growth = _read_all(relay, stalling(body, "br, br, br, br"), 8, 15 * MiB)
    for status, text in got:
        assert status == "HTTP/1.1 502 Bad Gateway", (status, text)
        assert "over the 20 MiB the host gives one body's decoders" in text, text
    assert growth < 96 * MiB, f"the relay's process grew by {growth >> 20} MiB"


def test_decoder_windows_past_the_sandboxs_budget_get_a_503(
        relay: Relay, stalling: Callable[[bytes, str], Stalling]) -> None:
    """One brotli coding at the largest standard window is a good answer, but its decoder holds
    ~19 MiB until the answer ends: a sandbox keeps at most 64 MiB of such bytes, so of sixteen
    answers held open at once three decode and the rest get a 503 (Retry-After) naming the
    sandbox's bound (~85 MiB measured, the guest and the three answers' windows included),
    instead of ~300 MiB of host memory."""
    body = brotli.compress(os.urandom(20 * MiB), quality=0, lgwin=24)
    got, growth = _read_all(relay, stalling(body, "br"), 16, 15 * MiB)
    assert [status for status, _ in got] == ["HTTP/1.1 200 OK"] * 3 + ["HTTP/1.1 503 Service Unavailable"] * 13
    for _, text in got[3:]:
        assert "this sandbox's egress keeps 57 MiB already for decoding and content guards" in text, text
        assert "would pass its 64 MiB" in text
    assert growth < 128 * MiB, f"the relay's process grew by {growth >> 20} MiB"


# The guest: N connections to PORT, each a POST announcing 15 MiB, of which it sends 14 MiB, 1 MiB
# at a time, as long as no answer came; all kept open. Per connection: the answer's status line
# and body start ("" if none came within 0.5 s).
SENDER = r'''
import json, select, socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
socks, got = [], []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"POST /sink HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: text/plain\r\n"
              b"Content-Length: %d\r\n\r\n" % (port, 15 << 20))
    for _ in range(14):
        if select.select([s], [], [], 0)[0]:
            break  # answered already: refused
        s.sendall(b"a" * (1 << 20))
    socks.append(s)
for s in socks:
    s.settimeout(0.5)
    try:
        data = s.recv(65536)
    except TimeoutError:
        data = b""
    head, _, body = data.partition(b"\r\n\r\n")
    got.append([head.split(b"\r\n")[0].decode(), body.decode("latin-1")])
print(json.dumps(got))
'''


def test_request_bodies_a_guard_holds_past_the_sandboxs_budget_get_a_503(
        relay: Relay, flood_factory: Callable[..., Flood]) -> None:
    """A content guard sees a request body whole, so the relay holds it (up to 16 MiB,
    Limits.net_guard_body_bytes) until it is: 64 connections could make a sandbox hold 1 GiB.
    They share the sandbox's budget of kept bytes (64 MiB): of sixteen 14 MiB bodies held open
    at once, four are held, the others get a 503 (Retry-After) naming the bound (~110 MiB
    measured, the guest included, where the sixteen bodies took ~300 MiB)."""
    flood = flood_factory()
    sbx = relay.make(security=SecurityPolicy(pii=PIIConfig(enabled=True, types=["email"])))
    sbx.files.write("/tmp/sender.py", SENDER)
    with PeakRSS(relay.pid(sbx)) as mem:
        result = sbx.commands.run(f"python3 /tmp/sender.py {flood.port} 16", timeout=240)
    assert result.exit_code == 0, result.stderr
    got = json.loads(result.stdout)
    assert [status for status, _ in got] == [""] * 4 + ["HTTP/1.1 503 Service Unavailable"] * 12, got
    for _, text in got[4:]:
        assert "the request cannot be held for the content guard now: this sandbox's egress keeps" in text
    assert flood.seen == 0  # nothing went upstream: no body was whole
    assert mem.growth < 160 * MiB, f"the relay's process grew by {mem.growth >> 20} MiB"
    if relay.pool is None:
        assert testing.egress_of(sbx).budget.kept == 0
