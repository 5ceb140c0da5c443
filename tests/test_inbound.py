"""Servers in the sandbox (docs/inbound.md): a guest's `listen`/`accept` through the host's door,
reached from outside at `sbx.get_host(port)`. Real guests, real servers in them (`python -m
http.server`, wsgiref, asyncio), real clients on this machine; in this process and on the process
pool (`backend="processes:2"`)."""

from __future__ import annotations

import http.client
import json
import socket
import time
from typing import Any, Callable, Iterator, Optional

import pytest

from declaw_wasm import Sandbox
from declaw_wasm.limits import Limits
from waiting import until  # tests/ is on sys.path

pytestmark = pytest.mark.guest
BACKENDS = pytest.mark.parametrize("mode", ["in-process", "processes", "served"], indirect=True)
POOL_BACKENDS = pytest.mark.parametrize("mode", ["in-process", "processes"], indirect=True)

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


def _connection(host: str) -> tuple[http.client.HTTPConnection, dict[str, str]]:
    """A connection to `host` as get_host gave it: a `*.localhost` preview name (served) is
    reached at 127.0.0.1 with its name as the Host, as a browser does (this machine's resolver
    may not know `*.localhost`)."""
    name, port = tuple_of(host)
    if name.endswith(".localhost"):
        return http.client.HTTPConnection("127.0.0.1", port, timeout=30), {"Host": host}
    return http.client.HTTPConnection(host, timeout=30), {}


def _get(host: str, path: str = "/", method: str = "GET", body: Optional[bytes] = None,
         headers: Optional[dict[str, str]] = None) -> tuple[int, bytes]:
    conn, extra = _connection(host)
    try:
        conn.request(method, path, body=body, headers={**extra, **(headers or {})})
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
        if mode == "served":
            assert host.startswith(f"8000-{sbx.sandbox_id}.localhost:")
        else:
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
    if mode == "served":  # the server knows the sandbox is gone
        assert _get(host)[0] in (404, 502)
    else:
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
    conn, extra = _connection(host)
    conn.request("GET", "/stream", headers=extra)
    answer = conn.getresponse()
    started = time.monotonic()
    first = answer.readline()
    first_at = time.monotonic() - started
    rest = answer.read()
    assert first == b"part 0\n" and rest == b"part 1\npart 2\n"
    assert first_at < 0.9, "the first part arrived only with the whole answer"
    conn.close()


@BACKENDS
def test_an_asyncio_server_streams_chunks(server: Callable[..., Sandbox], mode: str) -> None:
    sbx = server(ASYNC_APP)
    host = sbx.get_host(8080)
    _until_served(host)
    conn, extra = _connection(host)
    conn.request("GET", "/", headers=extra)
    answer = conn.getresponse()
    assert answer.status == 200
    started = time.monotonic()
    first = answer.read1(100)
    assert first == b"tick 0\n" and time.monotonic() - started < 0.35
    assert answer.read() == b"tick 1\ntick 2\n"


@BACKENDS
def test_two_sandboxes_serve_the_same_port(server: Callable[..., Sandbox], mode: str) -> None:
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


@POOL_BACKENDS
def test_traffic_access_token_is_required_when_traffic_is_not_public(server: Callable[..., Sandbox],
                                                                     mode: str) -> None:
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


@POOL_BACKENDS
def test_inbound_connections_are_bounded(server: Callable[..., Sandbox], mode: str) -> None:
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
    from declaw_wasm._egress.inbound import WINDOW, InboundConnection

    code = ("import socket, time\ns = socket.create_server(('', 9000))\nc, _ = s.accept()\n"
            "c.recv(10)\ntime.sleep(600)\n")
    sbx = server(code)
    host = sbx.get_host(9000)
    session = sbx._backend.egress  # type: ignore[attr-defined]
    for _ in range(300):  # the server is listening
        if session.inbound.ports[9000].listener is not None:
            break
        time.sleep(0.1)
    sock = socket.create_connection(tuple_of(host), timeout=5)
    sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
    sent = 0
    sock.settimeout(3)
    try:
        while sent < 64 << 20:
            sent += sock.send(b"x" * 65536)
    except (TimeoutError, OSError):
        pass
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


def test_a_socket_bound_to_port_zero_names_its_port_before_it_listens(server: Callable[..., Sandbox]) -> None:
    """As Linux picks a port at `bind(("", 0))`: `HTTPServer(("127.0.0.1", 0), ...)` (whose
    `server_address` is read before `listen`) says the port it serves, another command reaches
    it there, and the "find a free port" idiom (bind 0, read the port, close, listen on it) works."""
    code = r'''
import socket
from http.server import BaseHTTPRequestHandler, HTTPServer

probe = socket.socket()
probe.bind(("", 0))
free = probe.getsockname()[1]
probe.close()
again = socket.create_server(("", free))
again.close()

class Hello(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"hello from %d" % self.server.server_address[1])

httpd = HTTPServer(("127.0.0.1", 0), Hello)
open("/home/user/port", "w").write("%d %d" % (httpd.server_address[1], free))
httpd.serve_forever()
'''
    sbx = server(code)
    until(lambda: sbx.files.exists("/home/user/port"), seconds=30)
    port, free = map(int, sbx.files.read("/home/user/port").split())
    assert port > 0 and free > 0
    fetched = sbx.commands.run(f"python3 -c \"import urllib.request; "
                               f"print(urllib.request.urlopen('http://127.0.0.1:{port}/').read().decode())\"")
    assert fetched.stdout == f"hello from {port}\n", fetched


ECHO_APP = r'''
import json
from wsgiref.simple_server import make_server

def app(environ, start_response):
    size = int(environ.get("CONTENT_LENGTH") or 0)
    seen = {"path": environ["PATH_INFO"], "query": environ["QUERY_STRING"],
            "method": environ["REQUEST_METHOD"], "body": environ["wsgi.input"].read(size).decode(),
            "headers": sorted(k for k in environ if k.startswith("HTTP_"))}
    start_response("200 OK", [("Content-Type", "text/html"), ("Content-Security-Policy", "default-src *")])
    return [json.dumps(seen).encode()]

make_server("0.0.0.0", 8000, app).serve_forever()
'''


def _served_app(sbx: Sandbox) -> None:
    sbx.files.write("/home/user/app.py", ECHO_APP)
    sbx.commands.run("python3 /home/user/app.py", background=True)


def test_served_previews_by_host_name_and_by_declaws_path(make_served: Callable[..., Sandbox], server_url: str,
                                                          where: Callable[[str], dict[str, Any]]) -> None:
    """Through `declaw-wasm serve`: our SDK's preview name needs no API key and never reaches an
    API route; declaw's path route needs the key, never passes it on, and sandboxes the page."""
    import json

    import httpx

    API_KEY = where("served")["api_key"]
    sbx = make_served(timeout=300)
    try:
        _served_app(sbx)
        host = sbx.get_host(8000)
        status, body = _until_served(host, "/health?x=1", headers={"X-API-Key": API_KEY})
        seen = json.loads(body)
        assert status == 200 and seen["path"] == "/health" and seen["query"] == "x=1"  # the guest's
        assert "HTTP_X_API_KEY" not in seen["headers"]
        status, body = _get(host, "/form", "POST", b"a=1", {"Content-Type": "application/x-www-form-urlencoded"})
        assert status == 200 and json.loads(body)["body"] == "a=1"
        url = f"{server_url}/sandboxes/{sbx.sandbox_id}/ports/8000/page?q=2"
        assert httpx.get(url).status_code == 401
        answer = httpx.get(url, headers={"X-API-Key": API_KEY})
        assert answer.status_code == 200
        assert answer.headers.get_list("content-security-policy") == ["sandbox"]
        seen = answer.json()
        assert seen["path"] == "/page" and seen["query"] == "q=2"
        assert "HTTP_X_API_KEY" not in seen["headers"] and "HTTP_AUTHORIZATION" not in seen["headers"]
        answer = httpx.get(url, headers={"Authorization": f"Bearer {API_KEY}"})
        assert answer.status_code == 200 and "HTTP_AUTHORIZATION" not in answer.json()["headers"]
        assert httpx.get(f"{server_url}/sandboxes/{sbx.sandbox_id}/ports/8001/",
                         headers={"X-API-Key": API_KEY}).status_code == 502
    finally:
        sbx.kill()


def test_served_traffic_token(make_served: Callable[..., Sandbox]) -> None:
    sbx = make_served(timeout=300, network={"allow_public_traffic": False})
    try:
        _served_app(sbx)
        token = sbx.traffic_access_token
        assert token
        host = sbx.get_host(8000)
        assert _get(host)[0] == 403
        assert _until_served(host, headers={"e2b-traffic-access-token": token})[0] == 200
    finally:
        sbx.kill()


def test_a_keyless_server_lets_previews_take_forms(make: Callable[..., Sandbox]) -> None:
    """The content-type rule against web pages is the API's: a preview (by name or path) is the
    guest's own site and takes its forms; preview names never reach the API's routes."""
    import httpx

    from declaw_wasm.server import serve_in_thread

    with serve_in_thread(None) as url:
        sbx = Sandbox.create(domain=url, timeout=300)
        try:
            _served_app(sbx)
            host = sbx.get_host(8000)
            _until_served(host)
            form = {"Content-Type": "application/x-www-form-urlencoded"}
            assert _get(host, "/sandboxes", "POST", b"a=1", form)[0] == 200  # the guest's, not the API's
            answer = httpx.post(f"{url}/sandboxes/{sbx.sandbox_id}/ports/8000/x", content=b"a=2", headers=form)
            assert answer.status_code == 200 and answer.json()["body"] == "a=2"
            assert httpx.post(f"{url}/sandboxes", content=b"a=1", headers=form).status_code == 415
        finally:
            sbx.kill()


def test_a_sandbox_reaches_its_own_servers_on_localhost(server: Callable[..., Sandbox]) -> None:
    """`http://localhost:<port>/` from inside the sandbox reaches the sandbox's own server (no
    token needed even when its traffic is not public); loopback ports nothing in the sandbox
    listens on stay refused, as before, by address and by name (`localhost` resolves whatever
    the port, as on Linux; a connection to a port no server has is refused, not a lookup)."""
    sbx = server(WSGI_APP, network={"allow_public_traffic": False})
    _until_served(sbx.get_host(8000), headers={"e2b-traffic-access-token": sbx.traffic_access_token or ""})
    probe = r'''
import json, socket, urllib.request
import requests
out = [urllib.request.urlopen("http://localhost:8000/", timeout=30).read().decode()[:5],
       urllib.request.urlopen("http://127.0.0.1:8000/", timeout=30).read().decode()[:5],
       requests.post("http://localhost:8000/", data={"name": "me"}, timeout=30).text]
for url in ("http://localhost:8001/", "http://127.0.0.1:8001/"):
    try:
        urllib.request.urlopen(url, timeout=5)
        out.append("reached")
    except OSError:
        out.append("refused")
# `localhost` and the sandbox's own name resolve, whatever the port, as /etc/hosts makes them
out.append([socket.gethostbyname("localhost"), socket.gethostbyname(socket.gethostname()),
            socket.getaddrinfo("localhost", 8001)[0][4][0]])
try:
    socket.create_connection(("localhost", 8001), timeout=5)
except ConnectionRefusedError:
    out.append("refused")
print(json.dumps(out))
'''
    sbx.files.write("/home/user/probe.py", probe)
    r = sbx.commands.run("python3 /home/user/probe.py", timeout=120)
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout) == ["<form", "<form", "hello me", "refused", "refused",
                                    ["127.0.0.1"] * 3, "refused"]
    own = [e for e in sbx.audit_events() if e.kind == "connection" and e.rule == "own server"]
    assert own and all(e.port == 8000 for e in own)


def test_pause_is_refused_while_a_server_runs(server: Callable[..., Sandbox]) -> None:
    from declaw_wasm.exceptions import ConflictException

    sbx = server(WSGI_APP)
    _until_served(sbx.get_host(8000))
    with pytest.raises(ConflictException, match="running"):
        sbx.pause()
    assert _get(sbx.get_host(8000))[0] == 200  # still serving


AIOHTTP_APP = r'''
from aiohttp import web

async def hello(request):
    return web.json_response({"hello": request.match_info["name"]})

app = web.Application()
app.add_routes([web.get("/hi/{name}", hello)])
web.run_app(app, host="0.0.0.0", port=8001, print=None)
'''


def test_an_aiohttp_server_runs(server: Callable[..., Sandbox]) -> None:
    """aiohttp (in the bundle) serves with `web.run_app`: the loop refuses signal handlers as a
    platform without signals does, and aiohttp goes on without its Ctrl-C handler."""
    sbx = server(AIOHTTP_APP)
    status, body = _until_served(sbx.get_host(8001), "/hi/you")
    assert status == 200 and json.loads(body) == {"hello": "you"}
