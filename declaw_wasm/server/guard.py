"""The server's front door (ASGI middleware): with an API key, the key on every request, HTTP
and WebSocket, on every route (`/health` and `/openapi.json` included: docs/server.md says why)
but the console's static page (`console.OPEN_PATHS`: no data, its script sends the key);
without one, the checks against web pages (`_webguard.py`: loopback Host names, no other
origin's page, no state-changing request a page could send without a preflight); then the
body-size limits — a declared Content-Length over the limit is refused before the app sees the
request; a body without one is counted as it arrives."""

from __future__ import annotations

import hmac
from typing import Callable, Optional

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._webguard import HostPolicy, WebGuard, send_refusal
from .console import OPEN_PATHS
from ..exceptions import AuthenticationException, InvalidArgumentException
from ..wire import API_KEY_HEADER, error_body

__all__ = ["Guard", "send_error"]

VOLUME_UPLOADS = ("/volumes", "/volumes/ingest")  # archives: the upload limit, as file uploads


class BodyTooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body larger than the server's limit of {limit} bytes")


class Guard:
    def __init__(self, app: ASGIApp, api_key: Optional[str], max_body: int, max_upload: int,
                 hosts: Optional[HostPolicy] = None,
                 preview_route: Callable[[Scope], bool] = lambda scope: False) -> None:
        self.app = app
        self.key = api_key.encode() if api_key else None
        self.max_body = max_body
        self.max_upload = max_upload
        # without a key, what a web page may not do (with one, a page cannot know the key)
        self.web = WebGuard(app, hosts or HostPolicy(), answer=_refuse,
                            preview_route=preview_route) if self.key is None else None

    def _authorized(self, scope: Scope) -> bool:
        if self.key is None:
            return True
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD") and scope["path"] in OPEN_PATHS:
            return True  # the console's static page: it holds no data, its script sends the key
        headers = dict(scope.get("headers") or [])
        given = headers.get(API_KEY_HEADER.lower().encode())
        if given is None:
            auth = headers.get(b"authorization", b"")
            if auth[:7].lower() == b"bearer ":
                given = auth[7:].strip()
        return given is not None and hmac.compare_digest(given, self.key)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if self.web is not None:
            refused = self.web.refusal(scope)
            if refused is not None:
                await _refuse(scope, receive, send, *refused)
                return
        elif not self._authorized(scope):
            await send_error(send, AuthenticationException(
                f"bad or missing API key (send it as {API_KEY_HEADER} or Authorization: Bearer)"), 401, scope)
            return
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return
        upload = (scope["method"] == "PUT" and scope["path"].endswith("/files/raw")) or \
            (scope["method"] == "POST" and scope["path"].rstrip("/") in VOLUME_UPLOADS)
        limit = self.max_upload if upload else self.max_body
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            await send_error(send, InvalidArgumentException(BodyTooLarge(limit).detail), 413)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge(limit)
            return message

        await self.app(scope, counted, send)


async def _refuse(scope: Scope, receive: Receive, send: Send, status: int, message: str) -> None:
    """A web-page check's refusal, as the server's JSON error."""
    exc = AuthenticationException(message) if status == 403 else InvalidArgumentException(message)
    await send_error(send, exc, status, scope)


async def send_error(send: Send, exc: BaseException, status: int, scope: Optional[Scope] = None) -> None:
    """The error as the server's JSON body (for a WebSocket handshake: its denial response)."""
    body = error_body(exc).model_dump_json(exclude_none=True).encode()
    await send_refusal(scope or {"type": "http"}, send, status, body, b"application/json")
