"""Web frameworks served from the `web-dev` template (docs/inbound.md): Flask with a form POST and
a streamed response, Dash's page and layout, Bottle, and a WebSocket echo on `websockets`'
pure-Python asyncio server, each reached from this process at `get_host(port)`."""

from __future__ import annotations

import http.client
import json
import time
from typing import Any, Callable, Iterator, Optional

import pytest

from declaw_wasm import Sandbox

pytestmark = pytest.mark.guest


@pytest.fixture(scope="module")
def guest_path() -> str:
    return "warm"  # the template's packages and the host's relay do not depend on the guest path


@pytest.fixture(scope="module")
def web() -> Iterator[Sandbox]:
    sbx = Sandbox.create(template="web-dev", timeout=900)
    yield sbx
    sbx.kill()


def _start(sbx: Sandbox, name: str, code: str) -> None:
    sbx.files.write(f"/home/user/{name}.py", code)
    sbx.commands.run(f"python3 /home/user/{name}.py", background=True)


def _get(host: str, path: str = "/", method: str = "GET", body: Optional[bytes] = None,
         headers: Optional[dict[str, str]] = None, deadline: float = 90.0) -> tuple[int, bytes]:
    """The first answer that is not the host's 502 (the server is still starting)."""
    end = time.monotonic() + deadline
    while True:
        conn = http.client.HTTPConnection(host, timeout=60)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            answer = conn.getresponse()
            status, data = answer.status, answer.read()
        finally:
            conn.close()
        if status != 502 or time.monotonic() > end:
            return status, data
        time.sleep(0.3)


FLASK_APP = r'''
import time
from flask import Flask, Response, request, stream_with_context

app = Flask(__name__)

@app.get("/")
def index():
    return '<form method="post" action="/greet"><input name="who"><button>go</button></form>'

@app.post("/greet")
def greet():
    return f"hello {request.form['who']}"

@app.get("/stream")
def stream():
    def parts():
        for i in range(3):
            yield f"part {i}\n"
            time.sleep(0.5)
    return Response(stream_with_context(parts()), mimetype="text/plain")

app.run(host="0.0.0.0", port=5000)
'''


def test_a_flask_app_takes_a_form_and_streams(web: Sandbox) -> None:
    _start(web, "flask_app", FLASK_APP)
    host = web.get_host(5000)
    status, body = _get(host)
    assert status == 200 and b"<form" in body
    status, body = _get(host, "/greet", "POST", b"who=flask",
                        {"Content-Type": "application/x-www-form-urlencoded"})
    assert (status, body) == (200, b"hello flask")
    conn = http.client.HTTPConnection(host, timeout=60)
    conn.request("GET", "/stream")
    answer = conn.getresponse()
    started = time.monotonic()
    first = answer.readline()
    first_at = time.monotonic() - started
    assert first == b"part 0\n" and answer.read() == b"part 1\npart 2\n"
    assert first_at < 0.9, "the first part came only with the whole answer"
    conn.close()


BOTTLE_APP = r'''
from bottle import Bottle, request
app = Bottle()

@app.post("/sum")
def total():
    return {"sum": sum(request.json["numbers"])}

app.run(host="0.0.0.0", port=5001, quiet=True)
'''


def test_a_bottle_json_api(web: Sandbox) -> None:
    _start(web, "bottle_app", BOTTLE_APP)
    status, body = _get(web.get_host(5001), "/sum", "POST", json.dumps({"numbers": [1, 2, 3]}).encode(),
                        {"Content-Type": "application/json"})
    assert status == 200 and json.loads(body) == {"sum": 6}


DASH_APP = r'''
from dash import Dash, html
app = Dash(__name__)
app.layout = html.Div([html.H1("sandbox dashboard", id="title")])
app.run(host="0.0.0.0", port=8050, debug=False)
'''


def test_a_dash_app_serves_its_page_and_layout(web: Sandbox) -> None:
    _start(web, "dash_app", DASH_APP)
    host = web.get_host(8050)
    status, body = _get(host, deadline=180)
    assert status == 200 and b"_dash-renderer" in body or b"dash" in body.lower()
    status, body = _get(host, "/_dash-layout")
    assert status == 200 and b"sandbox dashboard" in body


WS_APP = r'''
import asyncio
from websockets.asyncio.server import serve

async def echo(ws):
    async for message in ws:
        await ws.send("echo: " + message)

async def main():
    async with serve(echo, "0.0.0.0", 8765) as server:
        await server.serve_forever()

asyncio.run(main())
'''


def test_a_websocket_echo(web: Sandbox) -> None:
    websockets_sync: Any = pytest.importorskip("websockets.sync.client")
    _start(web, "ws_app", WS_APP)
    host = web.get_host(8765)
    end = time.monotonic() + 90
    while True:
        try:
            with websockets_sync.connect(f"ws://{host}/", open_timeout=30) as ws:
                ws.send("hi")
                assert ws.recv(timeout=30) == "echo: hi"
                ws.send("again")
                assert ws.recv(timeout=30) == "echo: again"
            return
        except Exception:  # the server is still starting (a 502 fails the handshake)
            if time.monotonic() > end:
                raise
            time.sleep(0.5)


def test_web_dev_has_the_frameworks(web: Sandbox) -> None:
    found: Callable[[str], Any] = web.commands.run
    r = found("python3 -c 'import flask, werkzeug, itsdangerous, jinja2, bottle, dash, websockets'")
    assert r.exit_code == 0, r.stderr


def test_a_websocket_echo_through_serve(make_served: Callable[..., Sandbox]) -> None:
    """The same echo through `declaw-wasm serve`'s preview name: the server proxies the upgrade."""
    import socket

    websockets_sync: Any = pytest.importorskip("websockets.sync.client")
    sbx = make_served(template="web-dev", timeout=300)
    try:
        _start(sbx, "ws_app", WS_APP)
        host = sbx.get_host(8765)  # <port>-<id>.localhost:<serve port>
        end = time.monotonic() + 90
        while True:
            sock = socket.create_connection(("127.0.0.1", int(host.rsplit(":", 1)[1])), timeout=30)
            try:
                with websockets_sync.connect(f"ws://{host}/", sock=sock, open_timeout=30) as ws:
                    ws.send("through serve")
                    assert ws.recv(timeout=30) == "echo: through serve"
                return
            except Exception:  # the server is still starting (a 502 fails the handshake)
                if time.monotonic() > end:
                    raise
                time.sleep(0.5)
    finally:
        sbx.kill()
