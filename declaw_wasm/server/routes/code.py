"""E2B code-interpreter's calls, ours alone (declaw has no code contexts): cells streamed as
NDJSON and contexts, under `PREFIX`."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response, StreamingResponse

from ... import _args
from ..._threads import in_thread
from ...execution import Context
from ...wire import PREFIX, CreateContext, RunCode
from ..registry import Registry
from ..streams import cell_lines
from .common import ERRORS, NDJSON, finder, streamed


def router(registry: Registry) -> APIRouter:
    sandbox = finder(registry)
    code = APIRouter(tags=["code"], prefix=PREFIX)

    @code.post("/sandboxes/{sandbox_id}/execute", responses=streamed("E2B's /execute lines", "CellLine"))
    async def execute(sandbox_id: str, body: RunCode) -> StreamingResponse:
        """Run a cell and stream what it produces as NDJSON, in the spirit of E2B's `/execute`:
        `stdout`/`stderr`/`result`/`error` lines as they happen, then `number_of_executions` and
        `end_of_execution`; an `exception` line if the call failed (timeout, sandbox killed).
        A client that disconnects does not stop the cell (its `timeout` does)."""
        backend = await sandbox(sandbox_id)
        await in_thread(backend.info)  # a killed or timed-out sandbox answers with an error now
        request = body.model_copy(update={"code": _args.code(body.code), "envs": _args.envs(body.envs),
                                          "language": _args.language(body.language),
                                          "timeout": _args.timeout(body.timeout)})
        return StreamingResponse(cell_lines(backend, request), media_type=NDJSON)

    @code.post("/sandboxes/{sandbox_id}/contexts", responses=ERRORS)
    async def create_context(sandbox_id: str, body: CreateContext) -> Context:
        request = body.model_copy(update={"language": _args.language(body.language),
                                          "cwd": None if body.cwd is None else _args.path(body.cwd)})
        return await in_thread((await sandbox(sandbox_id)).create_context, request)

    @code.get("/sandboxes/{sandbox_id}/contexts", responses=ERRORS)
    async def list_contexts(sandbox_id: str) -> list[Context]:
        return await in_thread((await sandbox(sandbox_id)).list_contexts)

    @code.post("/sandboxes/{sandbox_id}/contexts/{context_id}/restart", status_code=204, responses=ERRORS)
    async def restart_context(sandbox_id: str, context_id: str) -> Response:
        await in_thread((await sandbox(sandbox_id)).restart_context, context_id)
        return Response(status_code=204)

    @code.delete("/sandboxes/{sandbox_id}/contexts/{context_id}", status_code=204, responses=ERRORS)
    async def remove_context(sandbox_id: str, context_id: str) -> Response:
        await in_thread((await sandbox(sandbox_id)).remove_context, context_id)
        return Response(status_code=204)

    return code
