"""Web pages against our HTTP listeners (declaw_wasm/_webguard.py): a page open in the user's
browser can make the browser send requests to loopback. Without an API key, `declaw-wasm serve`
answers only its own Host names (no DNS rebinding), no page of another origin or site, and no
state-changing request a page could send without a CORS preflight; with a key, every route needs
the key. The file-URL servers (in-process, and a pool's worker's) answer loopback names only, and
an unsigned URL no other origin's page. Raw requests with forged headers stand in for the browser
(MCP's listener: tests/integrations/test_mcp.py)."""

from __future__ import annotations

import os
import socket
from typing import Any, Iterator, Mapping, Optional, Sequence
from urllib.parse import urlsplit

import httpx
import pytest
from starlette.routing import WebSocketRoute

from declaw_wasm import InvalidArgumentException, Sandbox
from declaw_wasm._webguard import SIMPLE_TYPES, STATE_CHANGING, HostPolicy, preview_name, split_host
from declaw_wasm.server import create_app, serve_in_thread

KEY = "web-key-" + os.urandom(6).hex()
FILL = {"sandbox_id": "sbx_0000000000000000", "pid": "1", "cmd_id": "1", "volume_id": "vol_00000000",
        "team_id": "default", "secret_id": "vs_0", "snapshot_id": "snap_0", "context_id": "ctx_0",
        "watcher_id": "w0", "digest": "0" * 64}
# Host values a page can make a browser send (rebinding), malformed ones, and a preview name
FOREIGN_HOSTS = ["evil.example", "evil.example:{port}", "127.0.0.1.nip.io", "127.0.0.1.nip.io:{port}",
                 "localhost.evil", "localhost.evil:{port}", "", "localhost:", "localhost:x", "[::1", "::1",
                 "[::2]:{port}", "10.0.0.1:{port}", "localhost:{port}@evil.example"]
OWN_HOSTS = ["localhost", "localhost:{port}", "LOCALHOST:{port}", "127.0.0.1", "127.0.0.1:{port}",
             "127.0.0.2:{port}", "[::1]", "[::1]:{port}"]
FOREIGN_ORIGINS = ["http://evil.example", "https://evil.example:{port}", "null", "http://localhost:1",
                   "http://127.0.0.1.nip.io:{port}", "http://8000-sbx_1.localhost:{port}", "file://",
                   "http://localhost:{port}/page", "chrome-extension://abc"]
OWN_ORIGINS = ["http://127.0.0.1:{port}", "http://localhost:{port}", "http://[::1]:{port}"]
OTHER_SITES = ["cross-site", "same-site"]  # Sec-Fetch-Site: a page of another site made the request


def _port(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


def _raw(url: str, method: str, path: str, headers: Mapping[str, Optional[str]], body: bytes = b"",
         version: str = "HTTP/1.1", more: Sequence[str] = ()) -> tuple[int, bytes]:
    """One request as the bytes a browser (or a forger) sends: Host as given, or none at all;
    `more`: header lines added as they are (a header twice)."""
    parts = urlsplit(url)
    lines = [f"{method} {path} {version}"]
    given = {k.lower() for k in headers}
    if "host" not in given:
        lines.append(f"Host: {parts.netloc}")
    lines += [f"{k}: {v}" for k, v in headers.items() if v is not None]
    lines += list(more)
    if body or method in STATE_CHANGING:
        lines.append(f"Content-Length: {len(body)}")
    lines.append("Connection: close")
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as conn:
        conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" in head.lower():
        rest = _dechunk(rest)
    return int(head.split(b" ", 2)[1]), rest


def _dechunk(data: bytes) -> bytes:
    out = b""
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out, data = out + data[:size], data[size + 2:]
    return out


WS_HEADERS = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
              "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}


def _handshake(url: str, path: str, headers: Mapping[str, Optional[str]]) -> tuple[int, bytes]:
    parts = urlsplit(url)
    lines = [f"GET {path} HTTP/1.1"] + ([] if "Host" in headers else [f"Host: {parts.netloc}"])
    lines += [f"{k}: {v}" for k, v in {**WS_HEADERS, **headers}.items() if v is not None]
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as conn:
        conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        data = b""
        while not (data.startswith(b"HTTP/1.1 101") and b"\r\n\r\n" in data) and not _complete(data):
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), rest


def _complete(data: bytes) -> bool:
    """A whole answer: its head and the body its Content-Length says."""
    if b"\r\n\r\n" not in data:
        return False
    head, _, rest = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(rest) >= int(line.split(b":", 1)[1])
    return False


def _routes() -> list[tuple[str, frozenset[str], bool]]:
    """Every route of the server's app: (path with ids filled in, methods, is a WebSocket)."""
    app = create_app().api  # type: ignore[attr-defined]  # the FastAPI app behind the previews and the Guard
    try:
        from fastapi.routing import iter_route_contexts

        found = [(c.path, c.methods, c.route) for c in iter_route_contexts(app.routes)]
    except ImportError:  # FastAPI before included-router contexts
        found = [(r.path, getattr(r, "methods", None), r) for r in app.routes]
    out = []
    for path, methods, route in found:
        assert isinstance(path, str) and path.startswith("/"), route
        out.append((path.format(**FILL), frozenset(methods or ()), isinstance(route, WebSocketRoute)))
    return out


ROUTES = _routes()


@pytest.fixture(scope="module")
def guest_path() -> str:
    return "warm"  # the listeners do not depend on the guest path


@pytest.fixture(scope="module")
def keyless() -> Iterator[str]:
    with serve_in_thread(allowed_hosts=["sandboxes.internal"]) as url:
        yield url


@pytest.fixture(scope="module")
def keyed() -> Iterator[str]:
    with serve_in_thread(KEY) as url:
        yield url


# -- the rules, as data ----------------------------------------------------------------------------
def test_host_names_are_parsed_strictly() -> None:
    assert split_host("LocalHost:8080") == ("localhost", 8080)
    assert split_host("[::1]:80") == ("::1", 80) and split_host("[::1]") == ("::1", None)
    for bad in ("", ":80", "localhost:", "localhost:99999", "a b", "[::1", "[::1]x", "[zz]", "::1",
                "localhost:80@evil.example", "evil.example/x", "host:1:2"):
        assert split_host(bad) is None, bad
    with pytest.raises(ValueError):
        HostPolicy.of(["name.example:80"])
    with pytest.raises(ValueError):
        HostPolicy.of(["*.example"])
    assert preview_name("8000-sbx_abc.localhost") == (8000, "sbx_abc") and preview_name("localhost") is None
    policy = HostPolicy.of([])
    assert policy.host_refusal("8000-sbx_abc.localhost:8080") is not None  # not on API routes
    assert policy.host_refusal("8000-sbx_abc.localhost:8080", preview=True) is None  # the place kept for them


# -- serve without a key ---------------------------------------------------------------------------
def test_a_keyless_server_answers_only_its_own_host_names(keyless: str) -> None:
    port = _port(keyless)
    for host in FOREIGN_HOSTS:
        status, body = _raw(keyless, "GET", "/sandboxes", {"Host": host.format(port=port)})
        assert status in (421, 400), (host, status, body)  # 400: uvicorn's own refusal of a malformed Host
        if status == 421:
            assert b"DNS rebinding" in body
    status, _ = _raw(keyless, "GET", "/sandboxes", {"Host": None}, version="HTTP/1.0")  # no Host at all
    assert status == 421
    # a preview name is a sandbox's server (server/previews.py), never the API's routes
    status, body = _raw(keyless, "GET", "/sandboxes", {"Host": f"8000-sbx_1.localhost:{port}"})
    assert status == 404 and body.startswith(b"no sandbox sbx_1"), body
    for host in [*OWN_HOSTS, "sandboxes.internal", "SANDBOXES.internal:{port}"]:  # + --allowed-host
        status, body = _raw(keyless, "GET", "/sandboxes", {"Host": host.format(port=port)})
        assert status == 200, (host, status, body)
    for path in ("/openapi.json", "/health", "/snapshots", "/volumes", "/teams/default/vault/secrets"):
        assert _raw(keyless, "GET", path, {"Host": "evil.example"})[0] == 421, path
    status, _ = _raw(keyless, "GET", "/sandboxes", {"Host": "localhost"}, more=["Host: evil.example"])
    assert status in (400, 421)  # two Hosts: uvicorn's parser or ours refuses


def test_allowed_hosts_come_from_the_setting_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECLAW_WASM_ALLOWED_HOSTS", "proxy.internal, other.internal")
    with serve_in_thread() as url:
        assert _raw(url, "GET", "/health", {"Host": "proxy.internal"})[0] == 200
        assert _raw(url, "GET", "/health", {"Host": "other.internal:9"})[0] == 200
        assert _raw(url, "GET", "/health", {"Host": "evil.internal"})[0] == 421
    monkeypatch.setenv("DECLAW_WASM_ALLOWED_HOSTS", "bad name")
    with pytest.raises(InvalidArgumentException, match="bad name"):
        create_app()


def test_a_keyless_server_refuses_other_origins_pages(keyless: str) -> None:
    port = _port(keyless)
    for origin in FOREIGN_ORIGINS:
        status, body = _raw(keyless, "GET", "/sandboxes", {"Origin": origin.format(port=port)})
        assert status == 403, (origin, status, body)
        assert _raw(keyless, "POST", "/volumes/empty?name=x", {"Origin": origin.format(port=port),
                                                               "Content-Type": "application/json"})[0] == 403
    for site in OTHER_SITES:
        assert _raw(keyless, "GET", "/sandboxes", {"Sec-Fetch-Site": site})[0] == 403
    for origin in OWN_ORIGINS:
        status, body = _raw(keyless, "GET", "/sandboxes", {"Origin": origin.format(port=port)})
        assert status == 200, (origin, status, body)
    for site in ("same-origin", "none"):
        assert _raw(keyless, "GET", "/sandboxes", {"Sec-Fetch-Site": site})[0] == 200
    # a header twice: every value counts
    own = OWN_ORIGINS[0].format(port=port)
    assert _raw(keyless, "GET", "/sandboxes", {"Origin": own}, more=["Origin: http://evil.example"])[0] == 403
    assert _raw(keyless, "POST", "/volumes/empty?name=x", {"Content-Type": "application/json"},
                more=["Content-Type: text/plain"])[0] == 415
    # the operator's name is the server's own origin too (behind a proxy of theirs)
    assert _raw(keyless, "GET", "/sandboxes", {"Host": "sandboxes.internal",
                                               "Origin": "https://sandboxes.internal"})[0] == 200


def test_every_state_changing_route_refuses_what_a_page_can_send_cross_site(keyless: str) -> None:
    """Walks the app's routes, so that a new route cannot be forgotten: each state-changing one
    refuses the three simple content types (and a POST without one), a foreign Origin and a
    forged Host before the route runs; a JSON request passes the checks (and reaches the route,
    which then refuses the made-up ids or the body)."""
    port = _port(keyless)
    changing = [(p, m) for p, methods, ws in ROUTES for m in sorted(methods & STATE_CHANGING)]
    assert len(changing) >= 50, changing  # the whole API is walked
    volumes_before = httpx.get(keyless + "/volumes").json()["volumes"]
    for path, method in changing:
        for kind in sorted(SIMPLE_TYPES):
            for variant in (kind, kind.upper() + "; charset=UTF-8", f" {kind} ;boundary=x"):
                status, body = _raw(keyless, method, path, {"Content-Type": variant}, b"a=b")
                assert status == 415, (method, path, variant, status, body)
        if method == "POST":
            assert _raw(keyless, method, path, {})[0] == 415, path
        ok = {"Content-Type": "application/json"}
        assert _raw(keyless, method, path, {**ok, "Origin": "http://evil.example"}, b"[]")[0] == 403
        assert _raw(keyless, method, path, {**ok, "Host": f"evil.example:{port}"}, b"[]")[0] == 421
        status, body = _raw(keyless, method, path, ok, b"[]")
        assert status not in (403, 415, 421), (method, path, status, body)
    assert httpx.get(keyless + "/volumes").json()["volumes"] == volumes_before  # nothing was made


def test_websockets_refuse_other_origins_and_forged_hosts(keyless: str) -> None:
    port = _port(keyless)
    sockets = [p for p, _, ws in ROUTES if ws]
    assert sockets  # the PTY socket
    for path in sockets:
        status, body = _handshake(keyless, path, {"Origin": "http://evil.example"})
        assert status == 403 and b"Origin" in body, (status, body)
        status, body = _handshake(keyless, path, {"Host": f"evil.example:{port}"})
        assert status == 421 and b"DNS rebinding" in body, (status, body)
        status, body = _handshake(keyless, path, {"Origin": f"http://localhost:{port}"})
        assert status == 403 and b"Origin" not in body  # the route's own answer: no such PTY


def test_our_clients_mark_body_less_posts() -> None:
    """Our SDK (remote mode) sends `Content-Type: application/json` on a POST without a body, as
    declaw's SDK does, so a keyless server takes it (the TypeScript SDK: sdk-ts/src/connection.ts)."""
    from declaw_wasm._remote.connection import _typed

    assert _typed("POST", {"params": {"a": 1}})["headers"] == {"Content-Type": "application/json"}
    assert "headers" not in _typed("POST", {"json": {}}) and "headers" not in _typed("GET", {})
    assert _typed("POST", {"content": b"x", "headers": {"Content-Type": "application/gzip"}})["headers"] == {
        "Content-Type": "application/gzip"}


@pytest.mark.guest
def test_our_sdk_works_against_a_keyless_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DECLAW_API_KEY", raising=False)
    from declaw_wasm import Volumes

    with serve_in_thread() as url:
        sbx = Sandbox.create(domain=url, timeout=120)
        try:
            sbx.files.write("/tmp/a.txt", b"bytes")  # a raw upload (application/octet-stream)
            assert sbx.commands.run("cat /tmp/a.txt").stdout == "bytes"
            context = sbx.create_code_context()
            sbx.restart_code_context(context)  # a POST without a body
            volume = Volumes.create("web-pages", domain=url)  # one too
            assert volume.name == "web-pages"
            Volumes.delete(volume.volume_id, domain=url)
        finally:
            sbx.kill()


# -- serve with a key ------------------------------------------------------------------------------
def test_with_a_key_every_route_needs_it(keyed: str) -> None:
    """No route is exempt: /health and /openapi.json hold no sandbox data, but they name the
    version and every route, and nothing needs them without the key (docs/server.md). Only the
    console's static page and assets are (they hold no data: its script sends the key)."""
    from declaw_wasm.server.console import OPEN_PATHS

    for path, methods, ws in ROUTES:
        if path in OPEN_PATHS:
            status, body = _raw(keyed, "GET", path, {})
            assert status == 200 and b"sbx_" not in body, (path, status)
            continue
        if ws:
            status, body = _handshake(keyed, path, {})
            assert status == 401 and b"API key" in body, (path, status)
            continue
        for method in sorted(methods - {"HEAD"}):
            status, body = _raw(keyed, method, path, {"Content-Type": "application/json"}, b"[]")
            assert status == 401, (method, path, status, body)
            status, body = _raw(keyed, method, path, {"Content-Type": "application/json", "X-API-Key": "wrong"},
                                b"[]")
            assert status == 401, (method, path, status, body)
    assert _raw(keyed, "GET", "/health", {"X-API-Key": KEY})[0] == 200
    # with a key the key is the authority: any Host (a server beyond loopback has names of its own)
    assert _raw(keyed, "GET", "/health", {"X-API-Key": KEY, "Host": "sandboxes.example.com"})[0] == 200


# -- the file-URL servers --------------------------------------------------------------------------
def _file_url_checks(sbx: Sandbox, unsigned: Sandbox) -> None:
    sbx.files.write("/tmp/f.txt", "data")
    unsigned.files.write("/tmp/f.txt", "open")
    url = sbx.download_url("/tmp/f.txt")
    parts = urlsplit(url)
    path = parts.path + "?" + parts.query
    port = _port(url)
    for host in FOREIGN_HOSTS:
        status, body = _raw(url, "GET", path, {"Host": host.format(port=port)})
        assert status in (421, 400), (host, status, body)
    for host in OWN_HOSTS:
        status, body = _raw(url, "GET", path, {"Host": host.format(port=port)})
        assert (status, body) == (200, b"data"), host
    form = (b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\nfrom a page"
            b"\r\n--XyZ--\r\n")
    multipart = {"Content-Type": "multipart/form-data; boundary=XyZ"}
    # a signed URL is a credential meant for browsers (E2B's documented upload from a page)
    up = urlsplit(sbx.upload_url("/tmp/up.txt"))
    status, body = _raw(url, "POST", up.path + "?" + up.query, {**multipart, "Origin": "http://app.example"}, form)
    assert status == 200, body
    assert sbx.files.read("/tmp/up.txt") == "from a page"
    # an unsigned URL (secure=False) is refused to another origin's or site's page (in a pool, the
    # sandbox may be another worker's: its own server)
    url = unsigned.download_url("/tmp/f.txt")
    plain = urlsplit(url)
    plain_path, port = plain.path + "?" + plain.query, _port(url)
    assert _raw(url, "GET", plain_path, {})[1] == b"open"
    for origin in FOREIGN_ORIGINS:
        status, body = _raw(url, "GET", plain_path, {"Origin": origin.format(port=port)})
        assert status == 403 and b'"code":403' in body.replace(b" ", b""), (origin, status, body)
    assert _raw(url, "GET", plain_path, {"Sec-Fetch-Site": "cross-site"})[0] == 403
    put = urlsplit(unsigned.upload_url("/tmp/x.txt"))
    assert _raw(url, "POST", put.path + "?" + put.query, {**multipart, "Origin": "null"}, form)[0] == 403
    assert not unsigned.files.exists("/tmp/x.txt")
    assert _raw(url, "GET", plain_path, {"Origin": f"http://127.0.0.1:{port}"})[0] == 200
    assert _raw(url, "GET", plain_path, {"Host": "evil.example"})[0] == 421


@pytest.mark.guest
@pytest.mark.parametrize("mode", ["in-process", "processes"])
def test_file_url_servers_answer_only_loopback_host_names(mode: str, where: Any) -> None:
    sbx = Sandbox.create(timeout=120, **where(mode))
    unsigned = Sandbox.create(timeout=120, secure=False, **where(mode))
    try:
        _file_url_checks(sbx, unsigned)
    finally:
        sbx.kill()
        unsigned.kill()
