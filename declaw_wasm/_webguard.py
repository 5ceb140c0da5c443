"""Our HTTP listeners against web pages: one implementation of the checks for all of them.

The listeners: `declaw-wasm serve` without an API key, the file-URL servers of in-process and
pool sandboxes, `declaw-wasm mcp --transport http`.

A web page open in the user's browser is a principal of its own, and it can make the browser
send requests to loopback. Without a key, a listener on loopback would answer it:

* **Host.** A page whose own name (`evil.example`) it re-points at 127.0.0.1 (DNS rebinding)
  makes the browser send `Host: evil.example` and read the answers as its own. A listener of
  ours answers only loopback names (`localhost`, loopback address literals, with or without a
  port) and the names its operator adds (`--allowed-host`, `DECLAW_WASM_ALLOWED_HOSTS`): 421
  otherwise, as the `mcp` SDK answers. An address literal is never a rebinding (the page's
  origin is then the listener itself); a name is, unless it is ours.
* **Origin.** A page of another origin still reaches `127.0.0.1` by its real name. The browser
  says who sent the request: `Origin` on every cross-origin request, every POST and every
  WebSocket, `Sec-Fetch-Site` on requests to loopback (a potentially trustworthy URL) from
  current browsers. A request from another origin (`null` included: sandboxed frames, files,
  `data:` pages) or from another site gets 403. Ours: an `Origin` whose host is one of the names
  above and whose port is the one the request came to (the listener's own origin, by any of its
  names).
* **Simple requests.** A page can send a POST that needs no CORS preflight when its
  `Content-Type` is `text/plain`, `application/x-www-form-urlencoded` or `multipart/form-data`,
  or absent; PUT, PATCH and DELETE always need one, and we answer no preflight. State-changing
  requests with those types, and POSTs without a type, get 415: a client must send JSON (or
  the raw body's real type), as declaw's and our SDKs do. (Browsers that send `Origin` are
  refused above already; this is the second lock for requests that come without it.)

Preview names (`<port>-<sandbox_id>.localhost`, servers running in sandboxes) never reach a
listener's routes: `declaw-wasm serve` answers them before its guard (server/previews.py), so
here a preview name is a foreign Host (421) and its Origin a foreign page (403).
`WebGuard(preview_route=...)` says which requests are the path route to a preview
(`/sandboxes/{id}/ports/{port}`): the guest's own traffic, so the content-type rule for
state-changing requests does not apply to them (Host and Origin checks do).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Awaitable, Callable, Iterable, Optional

from starlette.types import ASGIApp, Receive, Scope, Send

LOOPBACK_NAMES = ("localhost",)
SIMPLE_TYPES = frozenset({"text/plain", "application/x-www-form-urlencoded", "multipart/form-data"})
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_NAME = re.compile(r"^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*$")
_PREVIEW = re.compile(r"^([0-9]{1,5})-([a-z0-9][a-z0-9_-]{0,127})\.localhost$")
_DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}

Refusal = tuple[int, str]  # (HTTP status, message)


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback address literal (IPv6 bracketed or not)."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def split_host(value: str) -> Optional[tuple[str, Optional[int]]]:
    """A Host header (or an Origin's authority) -> (name, port): the name lower-cased, an IPv6
    literal without its brackets; None if it is not `name[:port]`."""
    value = value.strip().lower()
    port_text: Optional[str] = None
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[1:end], value[end + 1:]
        if rest:
            if not rest.startswith(":"):
                return None
            port_text = rest[1:]
        try:
            ipaddress.IPv6Address(name)
        except ValueError:
            return None
    else:
        name, sep, port_text_found = value.partition(":")
        if sep:
            port_text = port_text_found
        if not name or not (_NAME.match(name) or _is_address(name)):
            return None
    if port_text is None:
        return name, None
    if not port_text.isdigit() or len(port_text) > 5 or int(port_text) > 65535:
        return None
    return name, int(port_text)


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def check_names(names: Iterable[str]) -> tuple[str, ...]:
    """Operator-given host names (`--allowed-host`), checked: a DNS name or an address literal,
    without port or wildcard."""
    out = []
    for raw in names:
        found = split_host(raw) if isinstance(raw, str) else None
        if found is None or found[1] is not None:
            raise ValueError(f"allowed host {raw!r}: give a host name or address, without a port "
                             "or wildcard (e.g. sandboxes.internal)")
        out.append(found[0])
    return tuple(dict.fromkeys(out))


def preview_name(name: str) -> Optional[tuple[int, str]]:
    """`<port>-<sandbox_id>.localhost` -> (port, sandbox id): the name a server running in a
    sandbox is previewed under (server/previews.py answers them before any listener's guard)."""
    found = _PREVIEW.match(name.lower())
    return (int(found.group(1)), found.group(2)) if found else None


def media_type(value: Optional[str]) -> Optional[str]:
    """A Content-Type's essence (`type/subtype`, lower-cased), as the fetch standard compares it."""
    if value is None:
        return None
    return value.split(";", 1)[0].strip(" \t").lower()


@dataclass(frozen=True)
class HostPolicy:
    """Which Host values a listener answers: loopback names and `allowed` (operator's names)."""

    allowed: tuple[str, ...] = ()

    @classmethod
    def of(cls, names: Iterable[str] = ()) -> "HostPolicy":
        return cls(check_names(names))

    def ours(self, name: str) -> bool:
        return is_loopback(name) or name in self.allowed

    def host_refusal(self, host: Optional[str], preview: bool = False) -> Optional[Refusal]:
        found = split_host(host) if host else None
        if found is not None and (self.ours(found[0]) or (preview and preview_name(found[0]) is not None)):
            return None
        shown = "none" if host is None else repr(host[:100])
        names = ", ".join(["localhost", "127.0.0.1", "[::1]", *self.allowed])
        return 421, (f"Host {shown} is not one of this server's names ({names}); refused: a web page "
                     "may be reaching it by DNS rebinding. Add a name with --allowed-host "
                     "(DECLAW_WASM_ALLOWED_HOSTS), or give the server an API key")

    def origin_refusal(self, headers: "Headers", host: Optional[str]) -> Optional[Refusal]:
        """403 for a request a page of another origin (or site) sent; None for ours or a
        request no browser page sent. Every value counts when a header comes more than once."""
        for raw in headers.get(b"sec-fetch-site", []):
            site = raw.decode("latin-1").strip().lower()
            if site in ("cross-site", "same-site"):
                return 403, f"a request from another site's page (Sec-Fetch-Site: {site}); refused"
        target = split_host(host) if host else None
        for raw in headers.get(b"origin", []):
            origin = raw.decode("latin-1").strip()
            scheme, sep, authority = origin.partition("://")
            found = split_host(authority) if sep and scheme.lower() in _DEFAULT_PORTS else None
            if found is None or target is None or not self.ours(found[0]) or \
                    _port(found[1], scheme.lower()) != _port(target[1], None):
                return 403, (f"Origin {origin[:100]!r} is not this server's; refused (a web page of "
                             "another origin may not drive it)")
        return None


def _port(port: Optional[int], scheme: Optional[str]) -> Optional[int]:
    """A port with the default ports dropped (a Host without a port is the default's)."""
    if port is None or port in (80, 443) and (scheme is None or _DEFAULT_PORTS.get(scheme) == port):
        return None
    return port


def simple_body_refusal(method: str, content_types: Iterable[str]) -> Optional[Refusal]:
    """415 for a state-changing request a page could send without a CORS preflight (every
    `Content-Type` value counts)."""
    if method not in STATE_CHANGING:
        return None
    kinds = [media_type(value) for value in content_types]
    for kind in kinds:
        if kind in SIMPLE_TYPES:
            return 415, (f"Content-Type {kind} is refused on a state-changing route (a web page can send "
                         "it cross-site); send application/json, or the raw body as "
                         "application/octet-stream")
    if not kinds and method == "POST":
        return 415, ("a POST without a Content-Type is refused (a web page can send one cross-site); "
                     "send Content-Type: application/json, even with an empty body")
    return None


Headers = dict[bytes, list[bytes]]  # a request's headers by lower-cased name, every value kept


def headers_of(scope: Scope) -> Headers:
    found: Headers = {}
    for name, value in scope.get("headers") or []:
        found.setdefault(name.lower(), []).append(value)
    return found


def host_of(headers: Headers) -> Optional[str]:
    """The request's one Host (None when it has none, or more than one)."""
    values = headers.get(b"host", [])
    return values[0].decode("latin-1") if len(values) == 1 else None


Answer = Callable[[Scope, Receive, Send, int, str], Awaitable[None]]


async def send_refusal(scope: Scope, send: Send, status: int, body: bytes, content_type: bytes) -> None:
    """An HTTP answer before the app; for a WebSocket handshake the same answer as a denial
    response where the server offers one (uvicorn does), else a close before accept (HTTP 403)."""
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    if scope["type"] == "websocket":
        if "websocket.http.response" in (scope.get("extensions") or {}):
            await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
            await send({"type": "websocket.http.response.body", "body": body})
        else:
            await send({"type": "websocket.close", "code": 1008})
        return
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def plain_answer(scope: Scope, receive: Receive, send: Send, status: int, message: str) -> None:
    """A refusal as `text/plain`."""
    await send_refusal(scope, send, status, message.encode(), b"text/plain; charset=utf-8")


class WebGuard:
    """ASGI middleware: the checks above before `app` sees a request (HTTP and WebSocket).
    `origin`: refuse other origins' pages; `bodies`: refuse simple state-changing requests;
    `preview_route(scope)`: whether a request is the path route to a sandbox's server (no
    content-type rule for it);
    `answer`: how a refusal is sent (the listener's error shape)."""

    def __init__(self, app: ASGIApp, policy: HostPolicy, *, origin: bool = True, bodies: bool = True,
                 answer: Answer = plain_answer,
                 preview_route: Callable[[Scope], bool] = lambda scope: False) -> None:
        self.app = app
        self.policy = policy
        self.origin = origin
        self.bodies = bodies
        self.answer = answer
        self.preview_route = preview_route

    def refusal(self, scope: Scope) -> Optional[Refusal]:
        headers = headers_of(scope)
        host = host_of(headers)
        preview = self.preview_route(scope)
        refused = self.policy.host_refusal(host)
        if refused is None and self.origin:
            refused = self.policy.origin_refusal(headers, host)
        if refused is None and self.bodies and scope["type"] == "http" and not preview:
            refused = simple_body_refusal(scope["method"],
                                          [v.decode("latin-1") for v in headers.get(b"content-type", [])])
        return refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            refused = self.refusal(scope)
            if refused is not None:
                await self.answer(scope, receive, send, *refused)
                return
        await self.app(scope, receive, send)


__all__ = ["Headers", "HostPolicy", "WebGuard", "check_names", "headers_of", "host_of", "is_loopback", "media_type",
           "plain_answer", "preview_name", "send_refusal", "simple_body_refusal", "split_host", "SIMPLE_TYPES",
           "STATE_CHANGING"]
