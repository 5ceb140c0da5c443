"""Previews: servers in the server's sandboxes, reached through `declaw-wasm serve` (docs/inbound.md).

Two ways in, both proxied to the sandbox's host listener (`get_host(port)` on the server's
backend: a loopback listener of this process or of its pool worker, _egress/inbound.py, which
checks the request head, the Host, the traffic token and the bounds again):

* **By host name** (our SDKs' `get_host`): `Host: <port>-<sandbox id>.localhost[:<serve port>]`,
  or `<port>-<sandbox id>.<name>` for a name of the server's (`--allowed-host`). `Previews`
  answers every request with such a Host before anything else of the server sees it — no API
  route, no API key (a preview is public unless its sandbox says otherwise:
  `allow_public_traffic=False` and its token), no web-page check of the API's (the preview is
  the guest's own origin; its forms post as they like). A preview name never reaches an API route.
* **By path** (declaw's SDK computes `{api_url}/sandboxes/{id}/ports/{port}`): an API route like
  the others — behind the API key, or the keyless server's web-page checks but the
  content-type rule — and its answers carry `Content-Security-Policy: sandbox`, so the guest's
  HTML and script never run with the API's origin.

The proxy streams both ways (httpx, no body held whole), drops hop-by-hop headers, and never
passes the server's API key on (`X-API-Key`, and an `Authorization` that carries the key).
WebSockets are proxied too (websockets' client upstream, messages both ways, each bounded).
"""

from __future__ import annotations

import hmac
import re
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any, Optional

import httpx
from starlette.types import ASGIApp, Receive, Scope, Send

from .._threads import in_thread
from .._webguard import HostPolicy, headers_of, host_of, plain_answer, split_host
from ..exceptions import NotFoundException, SandboxException
from ..wire import API_KEY_HEADER
from .registry import Registry

HOP = frozenset({b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te",
                 b"trailer", b"transfer-encoding", b"upgrade", b"proxy-connection"})
_LABEL = re.compile(r"^([0-9]{1,5})-([a-z0-9][a-z0-9_-]{0,127})$")
_PATH = re.compile(rb"^/sandboxes/([A-Za-z0-9_-]{1,128})/ports/([0-9]{1,5})(/[^?#]*)?(\?.*)?$")
CSP = b"sandbox"
# One WebSocket message from the sandbox's server, and how many the proxy holds for a client that
# does not read: what one preview WebSocket can cost the server, ~2 MiB (uvicorn's bound the other way).
WS_MAX = 1 << 20
WS_QUEUE = 1
# What the path route never passes on: the browser's cookies there are the *server's* origin's
# (and every local service's on that host: browsers share them across ports), and a sandbox's
# Set-Cookie there would land on the server's origin.
PATH_REQUEST_DROP = frozenset({b"cookie"})
PATH_ANSWER_DROP = frozenset({b"set-cookie", b"set-cookie2", b"content-security-policy"})


def _no_cookies() -> CookieJar:
    """A cookie jar that keeps nothing: the proxy is every client's, so it must never remember
    one sandbox's cookies for another request (httpx's client keeps a jar otherwise)."""
    return CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))


def origin_form(target: bytes) -> bool:
    """Whether a request target is origin-form (`/path?query`): only those are proxied, so
    nothing a client sends can change which host the proxy connects to."""
    return target.startswith(b"/") and all(32 < c < 127 for c in target)


def upstream_url(host: str, target: bytes, scheme: str = "http") -> httpx.URL:
    """The URL of `target` on the sandbox's host listener `host` (`127.0.0.1:<port>`), built from
    its parts: the host and port are ours, the target only ever the path and query."""
    address, _, port = host.rpartition(":")
    path, _, query = target.partition(b"?")
    return httpx.URL(scheme=scheme, host=address, port=int(port), raw_path=path + (b"?" + query if query else b""))


def preview_target(host: Optional[str], names: HostPolicy) -> Optional[tuple[int, str]]:
    """(port, sandbox id) for a preview Host: `<port>-<id>.localhost` or `<port>-<id>.<a name of
    the server's>`, with or without a port; None for any other Host."""
    found = split_host(host) if host else None
    if found is None:
        return None
    label, _, rest = found[0].partition(".")
    match = _LABEL.match(label)
    if match is None or not (rest == "localhost" or rest in names.allowed):
        return None
    port = int(match.group(1))
    return (port, match.group(2)) if 1 <= port <= 65535 else None


def path_target(scope: Scope) -> Optional[tuple[int, str, bytes]]:
    """(port, sandbox id, the rest of the target) for declaw's path route."""
    if scope["type"] not in ("http", "websocket"):
        return None
    raw = scope.get("raw_path") or scope["path"].encode("latin-1")
    query = scope.get("query_string") or b""
    match = _PATH.match(raw)
    if match is None:
        return None
    port = int(match.group(2))
    if not 1 <= port <= 65535:
        return None
    rest = (match.group(3) or b"/") + (match.group(4) or (b"?" + query if query else b""))
    return port, match.group(1).decode("ascii"), rest


def is_path_preview(scope: Scope) -> bool:
    return path_target(scope) is not None


class Previews:
    """Outermost ASGI layer: preview host names go to their sandbox's server, the rest to `app`
    (the Guard and the API)."""

    app: ASGIApp  # set once the Guard around the API is made (app.py)
    api: Any  # the FastAPI app inside it (its routes, for tests and docs)

    def __init__(self, registry: Registry, api_key: Optional[str], names: HostPolicy) -> None:
        self.registry = registry
        self.key = api_key.encode() if api_key else None
        self.names = names
        self._client: Optional[httpx.AsyncClient] = None

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            # no connection is kept for another request: a host listener checks each connection's
            # first request (its Host and the traffic token), so each request gets its own
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(connect=10.0, read=300.0, write=300.0, pool=10.0),
                limits=httpx.Limits(max_connections=512, max_keepalive_connections=0),
                follow_redirects=False, trust_env=False, cookies=_no_cookies())
        return self._client

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            target = preview_target(host_of(headers_of(scope)), self.names)
            if target is not None:
                raw = scope.get("raw_path") or scope["path"].encode("latin-1")
                query = scope.get("query_string") or b""
                rest = raw + (b"?" + query if query else b"")
                if scope["type"] == "websocket":
                    await self.proxy_websocket(scope, receive, send, target[1], target[0], rest, by_path=False)
                else:
                    await self.proxy(scope, receive, send, target[1], target[0], rest, by_path=False)
                return
        await self.app(scope, receive, send)

    def path_app(self, app: ASGIApp) -> ASGIApp:
        """The path route, inside the Guard (so behind the key): declaw's `/sandboxes/{id}/ports/{port}`."""
        async def route(scope: Scope, receive: Receive, send: Send) -> None:
            found = path_target(scope)
            if found is None:
                await app(scope, receive, send)
                return
            port, sandbox_id, rest = found
            if scope["type"] == "websocket":
                await self.proxy_websocket(scope, receive, send, sandbox_id, port, rest, by_path=True)
            else:
                await self.proxy(scope, receive, send, sandbox_id, port, rest, by_path=True)
        return route

    def _keeps(self, name: bytes, value: bytes, by_path: bool) -> bool:
        name = name.lower()
        if name in HOP or name == API_KEY_HEADER.lower().encode() or (by_path and name == b"host"):
            return False
        if by_path and name in PATH_REQUEST_DROP:
            return False
        if name == b"authorization" and (by_path or (
                self.key is not None and value[:7].lower() == b"bearer "
                and hmac.compare_digest(value[7:].strip(), self.key))):
            return False
        return True

    async def proxy(self, scope: Scope, receive: Receive, send: Send, sandbox_id: str, port: int,
                    target: bytes, by_path: bool) -> None:
        host = await self._host(scope, receive, send, sandbox_id, port, target)
        if host is None:
            return
        headers = [(k, v) for k, v in scope.get("headers") or [] if self._keeps(k, v, by_path)]
        if by_path:
            headers.append((b"host", host.encode("ascii")))

        async def body() -> Any:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                chunk = message.get("body", b"")
                if chunk:
                    yield chunk
                if not message.get("more_body", False):
                    return

        method = scope["method"]
        has_body = any(k.lower() in (b"content-length", b"transfer-encoding") for k, _ in scope.get("headers") or [])
        request = self.client.build_request(method, upstream_url(host, target),
                                            headers=headers, content=body() if has_body else None)
        try:
            answer = await self.client.send(request, stream=True)
        except httpx.HTTPError as exc:
            await plain_answer(scope, receive, send, 502, f"the sandbox's server on port {port} did not "
                               f"answer: {type(exc).__name__}")
            return
        try:
            out = [(k.lower(), v) for k, v in answer.headers.raw if k.lower() not in HOP]
            if by_path:
                out = [(k, v) for k, v in out if k not in PATH_ANSWER_DROP]
                out.append((b"content-security-policy", CSP))
            await send({"type": "http.response.start", "status": answer.status_code, "headers": out})
            async for chunk in answer.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except httpx.HTTPError:
            pass  # the answer was cut: the client sees its connection end
        finally:
            await answer.aclose()

    async def _host(self, scope: Scope, receive: Receive, send: Send, sandbox_id: str,
                    port: int, target: bytes) -> Optional[str]:
        """The sandbox's host listener for `port`, or None once the refusal was sent: also for a
        request target that is not a path (only origin-form targets are proxied)."""
        if not origin_form(target):
            await plain_answer(scope, receive, send, 400, "a preview's request target must be a path")
            return None
        try:
            backend = await in_thread(self.registry.get, sandbox_id)
            return str(await in_thread(backend.get_host, port))
        except NotFoundException:
            await plain_answer(scope, receive, send, 404, f"no sandbox {sandbox_id[:140]} on this server")
        except SandboxException as exc:
            await plain_answer(scope, receive, send, 502, str(exc))
        return None

    async def proxy_websocket(self, scope: Scope, receive: Receive, send: Send, sandbox_id: str,
                              port: int, target: bytes, by_path: bool) -> None:
        """A WebSocket to the sandbox's server: the handshake made upstream first (its refusal
        is the client's), then messages both ways, each at most `WS_MAX` bytes, until either
        side closes."""
        import asyncio

        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

        host = await self._host(scope, receive, send, sandbox_id, port, target)
        if host is None:
            return
        skip = {b"host", b"sec-websocket-key", b"sec-websocket-version", b"sec-websocket-extensions",
                b"sec-websocket-protocol", b"origin"}
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope.get("headers") or []
                   if k.lower() not in skip and self._keeps(k, v, by_path)]
        origin = next((v.decode("latin-1") for k, v in scope.get("headers") or [] if k.lower() == b"origin"), None)
        try:
            upstream = await connect(str(upstream_url(host, target, "ws")), additional_headers=headers,
                                     subprotocols=scope.get("subprotocols") or None, origin=origin,
                                     open_timeout=10, max_size=WS_MAX, max_queue=WS_QUEUE,
                                     compression=None, proxy=None)
        except InvalidStatus as exc:
            await plain_answer(scope, receive, send, exc.response.status_code,
                               exc.response.body.decode("utf-8", "replace")[:1000] or "refused")
            return
        except (OSError, asyncio.TimeoutError, ValueError, InvalidHandshake) as exc:
            # (InvalidHandshake: an answer that is not HTTP, or not an upgrade: the guest's)
            await plain_answer(scope, receive, send, 502, f"the sandbox's server on port {port} did not "
                               f"take the WebSocket: {type(exc).__name__}")
            return
        try:
            if (await receive())["type"] != "websocket.connect":
                return
            await send({"type": "websocket.accept", "subprotocol": upstream.subprotocol})

            async def down() -> None:
                async for message in upstream:
                    key = "text" if isinstance(message, str) else "bytes"
                    await send({"type": "websocket.send", key: message})
                await send({"type": "websocket.close", "code": upstream.close_code or 1000})

            async def up() -> None:
                while True:
                    message = await receive()
                    if message["type"] == "websocket.disconnect":
                        return
                    if message["type"] == "websocket.receive":
                        data = message.get("text")
                        await upstream.send(data if data is not None else message.get("bytes") or b"")

            tasks = [asyncio.ensure_future(down()), asyncio.ensure_future(up())]
            done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            for task in done:
                task.exception()  # retrieved: a closed side ends the proxy, both close below
        except ConnectionClosed:
            pass
        finally:
            await upstream.close()

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
