"""The server's front door (ASGI middleware): the API key on every request, HTTP and WebSocket,
and body-size limits — a declared Content-Length over the limit is refused before the app sees
the request; a body without one is counted as it arrives."""

from __future__ import annotations

import hmac
import ipaddress
from typing import Optional

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..exceptions import AuthenticationException, InvalidArgumentException
from ..wire import API_KEY_HEADER, error_body


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


VOLUME_UPLOADS = ("/volumes", "/volumes/ingest")  # archives: the upload limit, as file uploads


class BodyTooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body larger than the server's limit of {limit} bytes")


class Guard:
    def __init__(self, app: ASGIApp, api_key: Optional[str], max_body: int, max_upload: int) -> None:
        self.app = app
        self.key = api_key.encode() if api_key else None
        self.max_body = max_body
        self.max_upload = max_upload

    def _authorized(self, scope: Scope) -> bool:
        if self.key is None:
            return True
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
        if not self._authorized(scope):
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 4401, "reason": "bad or missing API key"})
                return
            await send_error(send, AuthenticationException(
                f"bad or missing API key (send it as {API_KEY_HEADER} or Authorization: Bearer)"), 401)
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


async def send_error(send: Send, exc: BaseException, status: int) -> None:
    body = error_body(exc).model_dump_json(exclude_none=True).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
