"""What every router shares: finding a sandbox, checking a command as the faces would, the
documented error answers, and reading the query parameters declaw's SDKs send."""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Union

from ... import _args
from ..._backend import SandboxBackend
from ..._threads import in_thread
from ...wire import ErrorBody, RunCommand
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
