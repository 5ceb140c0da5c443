"""Servers in the sandbox (docs/inbound.md): a guest's `listen`/`accept` through the host's door,
reached from outside at `sbx.get_host(port)`. Real guests, real servers in them (`python -m
http.server`, wsgiref, asyncio), real clients on this machine; in this process and on the process
pool (`backend="processes:2"`)."""

from __future__ import annotations

import http.client
import socket
import time
from typing import Any, Callable, Iterator, Optional

import pytest

from declaw_wasm import Sandbox
from declaw_wasm.limits import Limits

pytestmark = pytest.mark.guest
BACKENDS = pytest.mark.parametrize("mode", ["in-process", "processes"], indirect=True)

WSGI_APP = r'''
import time
from urllib.parse import parse_qs
from wsgiref.simple_server import make_server

def app(environ, start_response):
    if environ["REQUEST_METHOD"] == "POST":
        size = int(environ.get("CONTENT_LENGTH") or 0)
        form = parse_qs(environ["wsgi.input"].read(size).decode())
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [("hello " + form["name"][0]).encode()]
    if environ["PATH_INFO"] == "/stream":
        start_response("200 OK", [("Content-Type", "text/plain")])
        def chunks():
            for i in range(3):
                yield b"part %d\n" % i
                time.sleep(0.5)
        return chunks()
    start_response("200 OK", [("Content-Type", "text/html")])
    return [b"<form method=post><input name=name></form>"]

make_server("0.0.0.0", 8000, app).serve_forever()
'''

ASYNC_APP = r'''
import asyncio

async def handle(reader, writer):
    head = await reader.readuntil(b"\r\n\r\n")
    writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n")
    for i in range(3):
        data = b"tick %d\n" % i
        writer.write(b"%x\r\n%s\r\n" % (len(data), data))
        await writer.drain()
        await asyncio.sleep(0.4)
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    writer.close()

async def main():
    server = await asyncio.start_server(handle, "0.0.0.0", 8080)
    async with server:
        await server.serve_forever()

asyncio.run(main())
'''


def _get(host: str, path: str = "/", method: str = "GET", body: Optional[bytes] = None,
         headers: Optional[dict[str, str]] = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(host, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def _until_served(host: str, path: str = "/", deadline: float = 60.0, **kwargs: Any) -> tuple[int, bytes]:
    """The first answer that is not the host's 502 (the server is still starting)."""
    end = time.monotonic() + deadline
    while True:
        status, body = _get(host, path, **kwargs)
        if status != 502 or time.monotonic() > end:
            return status, body
        time.sleep(0.2)


@pytest.fixture
def server(make: Callable[..., Sandbox]) -> Iterator[Callable[..., Sandbox]]:
    made: list[Sandbox] = []

    def start(code: str, **create: Any) -> Sandbox:
        sbx = make(timeout=300, **create)
        made.append(sbx)
        sbx.files.write("/home/user/app.py", code)
        sbx.commands.run("python3 /home/user/app.py", background=True)
        return sbx

    yield start
    for sbx in made:
        sbx.kill()


@BACKENDS
def test_python_http_server_is_reached_through_get_host(make: Callable[..., Sandbox], mode: str) -> None:
    sbx = make(timeout=300)
    try:
        host = sbx.get_host(8000)
        assert host.startswith("127.0.0.1:")
        status, body = _get(host)
        assert status == 502 and b"listens on port 8000" in body  # nothing yet
        sbx.files.write("/home/user/site/index.html", "<h1>from the sandbox</h1>")
        sbx.commands.run("python3 -m http.server 8000 -d /home/user/site", background=True)
        status, body = _until_served(host, "/index.html")
        assert status == 200 and body == b"<h1>from the sandbox</h1>"
        assert _get(host, "/missing")[0] == 404
        assert sbx.get_host(8000) == host
        events = [e for e in sbx.audit_events() if e.kind == "inbound" and e.decision == "allowed"]
        assert any(e.url == "/index.html" and e.port == 8000 and e.bytes_out > 0 for e in events)
    finally:
        sbx.kill()
    with pytest.raises(OSError):  # a killed sandbox's ports close at once
        socket.create_connection(tuple_of(host), timeout=5)


def tuple_of(host: str) -> tuple[str, int]:
    name, port = host.rsplit(":", 1)
    return name, int(port)


@BACKENDS
def test_a_wsgi_app_takes_a_form_and_streams(server: Callable[..., Sandbox], mode: str) -> None:
    sbx = server(WSGI_APP)
    host = sbx.get_host(8000)
    status, body = _until_served(host)
    assert status == 200 and b"<form" in body
    status, body = _get(host, "/", "POST", b"name=sandbox",
                        {"Content-Type": "application/x-www-form-urlencoded"})
    assert (status, body) == (200, b"hello sandbox")
    conn = http.client.HTTPConnection(host, timeout=30)
    conn.request("GET", "/stream")
    answer = conn.getresponse()
    started = time.monotonic()
    first = answer.readline()
    first_at = time.monotonic() - started
    rest = answer.read()
    assert first == b"part 0\n" and rest == b"part 1\npart 2\n"
    assert first_at < 0.9, "the first part arrived only with the whole answer"
    conn.close()


def test_an_asyncio_server_streams_chunks(server: Callable[..., Sandbox]) -> None:
    sbx = server(ASYNC_APP)
    host = sbx.get_host(8080)
    _until_served(host)
    conn = http.client.HTTPConnection(host, timeout=30)
    conn.request("GET", "/")
    answer = conn.getresponse()
    assert answer.status == 200
    started = time.monotonic()
    first = answer.read1(100)
    assert first == b"tick 0\n" and time.monotonic() - started < 0.35
    assert answer.read() == b"tick 1\ntick 2\n"


def test_two_sandboxes_serve_the_same_port(server: Callable[..., Sandbox]) -> None:
    code = ("import http.server\nclass H(http.server.SimpleHTTPRequestHandler):\n"
            "    def do_GET(self):\n        b = open('/home/user/who').read().encode()\n"
            "        self.send_response(200); self.send_header('Content-Length', str(len(b)))\n"
            "        self.end_headers(); self.wfile.write(b)\n"
            "http.server.HTTPServer(('', 8000), H).serve_forever()\n")
    one, two = server(code), server(code)
    one.files.write("/home/user/who", "one")
    two.files.write("/home/user/who", "two")
    assert one.get_host(8000) != two.get_host(8000)
    assert _until_served(one.get_host(8000)) == (200, b"one")
    assert _until_served(two.get_host(8000)) == (200, b"two")


def test_traffic_access_token_is_required_when_traffic_is_not_public(server: Callable[..., Sandbox]) -> None:
    sbx = server(WSGI_APP, network={"allow_public_traffic": False})
    token = sbx.traffic_access_token
    assert token
    host = sbx.get_host(8000)
    status, body = _get(host)
    assert status == 403 and b"e2b-traffic-access-token" in body
    assert _get(host, headers={"e2b-traffic-access-token": "guess"})[0] == 403
    assert _until_served(host, headers={"e2b-traffic-access-token": token})[0] == 200
    denied = [e for e in sbx.audit_events() if e.kind == "inbound" and e.decision == "denied"]
    assert any("403" in e.reason for e in denied)
    public = Sandbox.create(timeout=60)
    try:
        assert public.traffic_access_token is None
    finally:
        public.kill()


def test_inbound_connections_are_bounded(server: Callable[..., Sandbox]) -> None:
    """A flood of connections: past Limits.net_connections the host answers 503 itself, and the
    server goes on serving once the flood is gone."""
    code = WSGI_APP
    sbx = server(code, limits=Limits(net_connections=4))
    host = sbx.get_host(8000)
    _until_served(host)
    flood = []
    try:
        for _ in range(40):  # connections that never send their request
            flood.append(socket.create_connection(tuple_of(host), timeout=10))
        status, body = _get(host)
        assert status == 503 and b"Limits.net_connections" in body
    finally:
        for sock in flood:
            sock.close()
    assert _until_served(host, deadline=30)[0] == 200 or _retry_ok(host)


def _retry_ok(host: str) -> bool:
    for _ in range(50):
        if _get(host)[0] == 200:
            return True
        time.sleep(0.2)
    return False


def test_bytes_in_flight_are_bounded(server: Callable[..., Sandbox]) -> None:
    """A client sends far more than a server reads: the host holds at most its window and the
    client's sends stop (backpressure), not the host's memory growing."""
    from declaw_wasm import testing  # noqa: F401  (the in-process sandbox behind the face)
    from declaw_wasm._egress.inbound import WINDOW, InboundConnection

    code = ("import socket, time\ns = socket.create_server(('', 9000))\nc, _ = s.accept()\n"
            "c.recv(10)\ntime.sleep(600)\n")
    sbx = server(code)
    host = sbx.get_host(9000)
    time.sleep(1)
    sock = socket.create_connection(tuple_of(host), timeout=5)
    sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    sent = 0
    sock.settimeout(3)
    try:
        while sent < 64 << 20:
            sent += sock.send(b"x" * 65536)
    except (TimeoutError, OSError):
        pass
    session = sbx._backend.egress  # type: ignore[attr-defined]
    held = [len(c.to_guest) for c in session._conns.values() if isinstance(c, InboundConnection)]
    assert held and max(held) <= WINDOW
    assert sent < 64 << 20, "the client was never held back"
    sock.close()


def test_guest_sockets_accept_blocking_with_timeouts_and_without_waiting(
        server: Callable[..., Sandbox]) -> None:
    code = r'''
import errno, select, selectors, socket
out = []
s = socket.socket()
s.bind(("0.0.0.0", 7000))
s.listen()
out.append(s.getsockname()[1])
s.setblocking(False)
try:
    s.accept()
except BlockingIOError:
    out.append("would block")
out.append(select.select([s], [], [], 0)[0] == [])
s.settimeout(0.2)
try:
    s.accept()
except TimeoutError:
    out.append("timed out")
try:
    socket.create_server(("", 7000))
except OSError as exc:
    out.append(exc.errno == errno.EADDRINUSE)
free = socket.create_server(("", 0))
out.append(free.getsockname()[1] > 0)
open("/home/user/ready", "w").write(repr(out))
sel = selectors.DefaultSelector()
sel.register(s, selectors.EVENT_READ)
ready = sel.select(60)
s.setblocking(True)
c, peer = s.accept()
request = c.recv(1000)
c.sendall(b"HTTP/1.0 200 OK\r\n\r\n" + repr(out + [bool(ready), peer[0]]).encode())
c.close()
'''
    sbx = server(code)
    host = sbx.get_host(7000)
    for _ in range(300):
        if sbx.files.exists("/home/user/ready"):
            break
        time.sleep(0.1)
    status, body = _get(host)
    assert status == 200
    assert body.decode() == repr([7000, "would block", True, "timed out", True, True, True, "127.0.0.1"])
