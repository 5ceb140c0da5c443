"""File URLs of in-process sandboxes (E2B's `download_url` / `upload_url`): a small HTTP server on
loopback, started on first use, serves one file per URL to clients that hold no API key
(a browser, `urllib.request.urlopen`, `curl`).

A sandbox made with `secure=True` (the default) gets signed URLs, as E2B's secured sandboxes do:
`signature` is an HMAC-SHA256 of the operation, the path, the user and the expiry under a key
of this process (derived per sandbox, so a signature for one sandbox is worth nothing for
another), and `signature_expiration` (unix seconds) ends it; a missing, wrong or expired one is
refused with 401 and E2B's JSON body (`{"code": 401, "message": "signature is already expired"}`).
A `secure=False` sandbox's URLs carry no signature (E2B's rule for unsecured sandboxes). The
server binds 127.0.0.1 only: a URL never reaches beyond this machine.

Web pages (`_webguard.py`, the checks all our listeners share): every request must name a
loopback Host (or a `DECLAW_WASM_ALLOWED_HOSTS` name), else 421 — a page cannot reach the server
by DNS rebinding. A signed URL is a credential like an API key, meant to be handed to a browser
(E2B's documented use: a page posts a form to it), so it works from any origin; an unsigned one
(`secure=False`) is refused (403) to another origin's or site's page. Uploads keep taking
multipart forms and raw bodies of any type (E2B's clients), so the simple-request check of
`serve` does not apply here: the signature (or, unsigned, the Origin check and the sandbox id
no page can guess) is what stands between a page and a write.

Why uvicorn and Starlette: both are already dependencies (the server, server/), and uvicorn is
the ASGI server that streams bodies both ways; the URL server is a separate small app so that an
in-process sandbox needs none of the REST server (its API key, its registry). Uploads take the
raw body (spooled to disk, at most `MAX_UPLOAD`), or a multipart form's first file (E2B's clients
post `multipart/form-data`), parsed by the stdlib's `email` parser, in memory, so at most
`MAX_FORM`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import socket
import tempfile
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional
from urllib.parse import quote, urlencode

from .. import _args
from .._webguard import HostPolicy, WebGuard, headers_of, host_of, send_refusal
from ..exceptions import InvalidArgumentException, NotEnoughSpaceException, SandboxException
from ..settings import allowed_hosts

if TYPE_CHECKING:
    from .sandbox import LocalSandbox

MAX_UPLOAD = 512 << 20  # bytes per upload (declaw's upload limit is 500 MiB), spooled to disk
MAX_FORM = 64 << 20  # a multipart form is parsed in memory: smaller
_KEY = secrets.token_bytes(32)  # this process's: URLs are served by this process only


def _sandbox_key(sandbox_id: str) -> bytes:
    return hmac.new(_KEY, sandbox_id.encode(), hashlib.sha256).digest()


def signature(sandbox_id: str, operation: str, path: str, user: str, expires: Optional[int]) -> str:
    message = "\n".join([operation, path, user, "" if expires is None else str(expires)]).encode()
    digest = hmac.new(_sandbox_key(sandbox_id), message, hashlib.sha256).digest()
    return "v1_" + base64.urlsafe_b64encode(digest).decode().rstrip("=")


def file_url(sandbox: "LocalSandbox", path: str, write: bool, user: Optional[str],
             expires_in: Optional[int], find: Callable[[str], Optional["LocalSandbox"]]) -> str:
    """The URL that reads (or, `write`, writes) `path` of `sandbox`; signed if the sandbox is
    secure, valid for `expires_in` seconds if given (E2B's `use_signature_expiration`). `find`:
    the process's running sandbox of an id (the server's lookup)."""
    _server.find = find
    secure = sandbox.options.secure is not False
    if expires_in is not None and not secure:
        raise InvalidArgumentException("Signature expiration can be used only when sandbox is created as secured.")
    who = user or "user"
    query = {"path": path, "username": who}
    if secure:
        expires = None if expires_in is None else int(time.time()) + expires_in
        query["signature"] = signature(sandbox.sandbox_id, "write" if write else "read", path, who, expires)
        if expires is not None:
            query["signature_expiration"] = str(expires)
    return f"{_server.url()}/sandboxes/{quote(sandbox.sandbox_id, safe='')}/files?{urlencode(query)}"


def check(sandbox: "LocalSandbox", operation: str, query: dict[str, str]) -> Optional[str]:
    """Why the request may not touch the file (None: it may)."""
    if sandbox.options.secure is False:
        return None
    given = query.get("signature")
    if not given:
        return "missing signature"
    raw_expiry = query.get("signature_expiration")
    expires: Optional[int] = None
    if raw_expiry is not None:
        if not raw_expiry.lstrip("-").isdigit() or len(raw_expiry) > 20:
            return "invalid signature expiration"
        expires = int(raw_expiry)
    want = signature(sandbox.sandbox_id, operation, query.get("path", ""), query.get("username", "user"), expires)
    if not hmac.compare_digest(given.encode(), want.encode()):
        return "invalid signature"
    if expires is not None and expires < time.time():
        return "signature is already expired"
    return None


class _Server:
    """The loopback server, started once per process on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._url: Optional[str] = None
        self.find: Callable[[str], Optional["LocalSandbox"]] = lambda sandbox_id: None

    def url(self) -> str:
        with self._lock:
            if self._url is None:
                self._url = self._start()
            return self._url

    def _start(self) -> str:
        import uvicorn

        try:
            hosts = HostPolicy.of(allowed_hosts())
        except ValueError as exc:
            raise InvalidArgumentException(f"DECLAW_WASM_ALLOWED_HOSTS: {exc}") from None
        # every request: a loopback Host (the route checks the Origin of unsigned ones)
        app = WebGuard(_app(self, hosts), hosts, origin=False, bodies=False, answer=_refuse)
        # listening before uvicorn runs: a client that comes early waits in the backlog, so the
        # URL is answered at once, never after the server's start-up (no stall of an event loop)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        port = sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="off")
        server = uvicorn.Server(config)
        threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True,
                         name="declaw-file-urls").start()
        return f"http://127.0.0.1:{port}"


_server = _Server()


def _error(code: int, message: str) -> Any:
    from starlette.responses import JSONResponse

    return JSONResponse({"code": code, "message": message}, status_code=code)


async def _refuse(scope: Any, receive: Any, send: Any, status: int, message: str) -> None:
    """A web-page check's refusal in E2B's error shape."""
    await send_refusal(scope, send, status, json.dumps({"code": status, "message": message}).encode(),
                       b"application/json")


def _app(server: _Server, hosts: HostPolicy) -> Any:
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    async def files(request: Request) -> Any:
        query = dict(request.query_params)
        sandbox = server.find(request.path_params["sandbox_id"])
        if sandbox is None:
            return _error(404, "sandbox not found")
        operation = "read" if request.method == "GET" else "write"
        refused = check(sandbox, operation, query)
        if refused is not None:
            return _error(401, refused)
        if sandbox.options.secure is False:  # no signature: no page of another origin
            headers = headers_of(request.scope)
            foreign = hosts.origin_refusal(headers, host_of(headers))
            if foreign is not None:
                return _error(*foreign)
        try:
            path = _args.path(query.get("path"))
            if operation == "read":
                chunks = await run_in_threadpool(sandbox.read, path)
                return StreamingResponse(_iterate(chunks), media_type="application/octet-stream")
            body = await _receive(request)
            try:
                info = await run_in_threadpool(sandbox.write, path, body)
            finally:
                body.close()
            return JSONResponse([info.model_dump(mode="json")])
        except InvalidArgumentException as exc:
            return _error(400, str(exc))
        except SandboxException as exc:
            status = 404 if type(exc).__name__.endswith("NotFoundException") else \
                413 if isinstance(exc, NotEnoughSpaceException) else 400  # a file past the disk quota
            return _error(status, str(exc))

    return Starlette(routes=[Route("/sandboxes/{sandbox_id}/files", files, methods=["GET", "POST", "PUT"])])


def _iterate(chunks: Any) -> Iterator[bytes]:
    try:
        yield from chunks
    finally:
        chunks.close()


async def _receive(request: Any) -> Any:
    """The upload's bytes, spooled (bounded): the raw body, or a multipart form's first file."""
    spool = tempfile.SpooledTemporaryFile(max_size=8 << 20)
    size = 0
    async for piece in request.stream():
        size += len(piece)
        if size > MAX_UPLOAD:
            spool.close()
            raise InvalidArgumentException(f"upload larger than {MAX_UPLOAD} bytes")
        spool.write(piece)
    spool.seek(0)
    content_type = request.headers.get("content-type", "")
    if not content_type.lower().startswith("multipart/form-data"):
        return spool
    if size > MAX_FORM:
        spool.close()
        raise InvalidArgumentException(f"a multipart upload larger than {MAX_FORM} bytes: send the raw body")
    from email.parser import BytesParser
    from email.policy import HTTP

    with spool:
        message = BytesParser(policy=HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode("latin-1") + spool.read())
    for part in message.iter_parts() if message.is_multipart() else ():
        data = part.get_payload(decode=True)
        if isinstance(data, bytes):
            out = tempfile.SpooledTemporaryFile(max_size=8 << 20)
            out.write(data)
            out.seek(0)
            return out
    raise InvalidArgumentException("the multipart form holds no file")
