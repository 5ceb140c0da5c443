"""What every router shares: finding a sandbox, checking a command as the faces would, the
documented error answers, and reading the query parameters declaw's SDKs send."""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Union

from starlette.requests import Request

from ... import _args
from ..._backend import SandboxBackend
from ..._threads import in_thread
from ...exceptions import InvalidArgumentException
from ...wire import ErrorBody, RunCommand
from ..._webguard import is_loopback
from ..registry import Registry

NDJSON = "application/x-ndjson"
SSE = "text/event-stream"
ERRORS: dict[Union[int, str], dict[str, Any]] = {
    400: {"model": ErrorBody}, 401: {"model": ErrorBody}, 404: {"model": ErrorBody},
    408: {"model": ErrorBody}}
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def finder(registry: Registry) -> Callable[[str], Awaitable[SandboxBackend]]:
    async def sandbox(sandbox_id: str) -> SandboxBackend:
        return await in_thread(registry.get, sandbox_id)
    return sandbox


def checked_command(body: RunCommand) -> RunCommand:
    return body.model_copy(update={"cmd": _args.command(body.cmd), "envs": _args.envs(body.envs),
                                   "timeout": _args.timeout(body.timeout),
                                   "cwd": None if body.cwd is None else _args.path(body.cwd)})


def sse_response(body: Any) -> Any:
    from fastapi.responses import StreamingResponse

    return StreamingResponse(body, media_type=SSE, headers=SSE_HEADERS)


def streamed(description: str, schema: str, media: str = NDJSON) -> dict[Union[int, str], dict[str, Any]]:
    return {**ERRORS, 200: {"content": {media: {"schema": {"$ref": f"#/components/schemas/{schema}"}}},
                            "description": description}}


def check_private(request: Request, what: str, given: object = True) -> None:
    """Secret values (`what`) are taken only over TLS (uvicorn's own, or a proxy's that uvicorn
    trusts for X-Forwarded-Proto) or from this machine. Our clients refuse to send them
    otherwise; a client that did not has put them on the network in clear: refusing tells its
    operator (the message says to rotate them) and keeps such values out of use. Nothing to
    check when no value was `given`."""
    client = request.client.host if request.client else ""
    if not given or request.url.scheme in ("https", "wss") or is_loopback(client):
        return
    raise InvalidArgumentException(
        f"{what}: secret values reached this server over plain HTTP from {client or 'a remote client'}; "
        "refused. They crossed the network unencrypted: rotate them. Serve over TLS "
        "(declaw-wasm serve --tls-cert/--tls-key, or a TLS proxy in front)")
