"""Sandboxes: create, list, get (declaw's `connect`), kill, kill-many, status, timeout, metrics."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Optional
from urllib.parse import parse_qsl

from fastapi import APIRouter, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse, Response

from ... import __version__, _args
from ..._threads import in_thread
from ...exceptions import InvalidArgumentException, SandboxException, SandboxNotFoundException
from ...limits import Limits
from ...models import SandboxInfo, SandboxMetrics, SandboxQuery, SandboxState
from ...wire import CreateSandbox, Killed, KillMany, KillManyResults, SandboxList, SetTimeout, Status
from ..registry import Registry
from .common import ERRORS, check_private, finder


def check_limits(limits: Optional[Limits]) -> Optional[Limits]:
    """Clients may tighten a sandbox's limits, never loosen them past the server's defaults."""
    if limits is None:
        return None
    defaults = Limits.model_validate({})
    for name in Limits.model_fields:
        mine, default = getattr(limits, name), getattr(defaults, name)
        if mine is not None and default is not None and mine > default:  # None: no limit (cpu_instructions)
            raise InvalidArgumentException(f"limits.{name} may not exceed the server's "
                                           f"{getattr(defaults, name)}")
    return limits


def query_of(metadata: Optional[str], state: list[str], started_after: Optional[str],
             template: Optional[str]) -> SandboxQuery:
    """`GET /sandboxes`'s filters: `metadata` as E2B sends it (`k=v&k2=v2`, URL-encoded) or a
    JSON object; `state` repeated or comma-separated."""
    pairs: dict[str, str] = {}
    if metadata:
        try:
            found = json.loads(metadata)
            pairs = {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}
        except ValueError:
            pairs = dict(parse_qsl(metadata, keep_blank_values=True))
    states = [s for item in state for s in item.split(",") if s]
    try:
        return SandboxQuery(metadata=pairs or None, state=[SandboxState(s) for s in states] or None,
                            started_after=datetime.fromisoformat(started_after) if started_after else None,
                            template=template)
    except ValueError as exc:
        raise InvalidArgumentException(f"bad sandbox query: {exc}") from None


async def kill(registry: Registry, sandbox_id: str) -> bool:
    try:
        backend = await in_thread(registry.get, sandbox_id)
    except SandboxNotFoundException:
        return False
    killed = await in_thread(backend.kill)
    registry.forget(sandbox_id)
    return killed


STATE = Query(None, description="repeated or comma-separated")


def created(info: SandboxInfo, token: Optional[str]) -> Any:
    """The create's answer: the info, and for a sandbox without public traffic declaw's
    `traffic_access_token` beside it (declaw's SDK reads it from there)."""
    if token is None:
        return info
    return JSONResponse({**jsonable_encoder(info), "traffic_access_token": token}, status_code=201)


def router(registry: Registry) -> APIRouter:
    sandbox = finder(registry)
    sandboxes = APIRouter(tags=["sandboxes"])

    @sandboxes.get("/health", tags=["server"])
    async def health() -> dict[str, str]:
        return {"status": "ok", "version": __version__}

    # The server makes and finds sandboxes on its backend, never `Sandbox.create/connect/list`:
    # those would follow DECLAW_DOMAIN (remote mode) if the server's environment had it set.
    @sandboxes.post("/sandboxes", status_code=201, responses=ERRORS, response_model=SandboxInfo)
    async def create_sandbox(body: CreateSandbox, http: Request) -> Any:
        """declaw's create: its body (unknown fields ignored) plus our `limits` and `secrets`
        (values held by the server, never by the guest: docs/egress.md; only over TLS or from
        loopback). `vault_refs` name secrets of the server's vault (declaw's vault routes)."""
        _args.template(body.template)
        check_private(http, "secrets", body.secrets)
        request = body.model_copy(update={
            "timeout": None if body.timeout is None else _args.lifetime(body.timeout),
            "envs": _args.envs(body.envs), "metadata": _args.string_map(body.metadata, "metadata"),
            "limits": check_limits(body.limits), "security": _args.security(body.security),
            "network": _args.config(body.network, "network"),
            "lifecycle": _args.lifecycle(body.lifecycle), "volumes": _args.volumes(body.volumes)})
        backend = await in_thread(registry.create, request)
        return created(await in_thread(backend.info), await in_thread(backend.traffic_access_token))

    @sandboxes.get("/sandboxes", responses=ERRORS)
    async def list_sandboxes(metadata: Optional[str] = None, state: Optional[list[str]] = STATE,
                             started_after: Optional[str] = None, template: Optional[str] = None,
                             limit: Optional[int] = Query(None, gt=0),
                             next_token: Optional[str] = None) -> SandboxList:
        """The live sandboxes, newest first, filtered; declaw's page shape (`next_token` is the
        offset of the next page when `limit` cuts the list)."""
        query = query_of(metadata, state or [], started_after, template)
        found = [i for i in await in_thread(registry.sandboxes.list) if query.matches(i)]
        start = int(next_token) if next_token and next_token.isdigit() else 0
        end = len(found) if limit is None else start + limit
        return SandboxList(sandboxes=found[start:end], next_token=str(end) if end < len(found) else None)

    @sandboxes.get("/sandboxes/{sandbox_id}", responses=ERRORS)
    async def get_sandbox(sandbox_id: str, timeout: Optional[float] = None) -> SandboxInfo:
        """The sandbox's info (declaw's `connect` and `get_info`); a `timeout` longer than what
        it has left extends its lifetime, a shorter one changes nothing (E2B's `connect`)."""
        backend = await sandbox(sandbox_id)
        info = await in_thread(backend.info)  # a sandbox that timed out raises TimeoutException
        if timeout is None:
            return info
        lifetime = _args.lifetime(timeout)
        return await in_thread(lambda: registry.sandboxes.connect(sandbox_id, lifetime).info())

    @sandboxes.patch("/sandboxes/{sandbox_id}/timeout", status_code=204, responses=ERRORS)
    async def set_timeout(sandbox_id: str, body: SetTimeout) -> Response:
        backend = await sandbox(sandbox_id)
        await in_thread(backend.set_timeout, _args.lifetime(body.timeout, now=True))
        return Response(status_code=204)

    @sandboxes.get("/sandboxes/{sandbox_id}/status")
    async def status(sandbox_id: str) -> Status:
        try:
            backend = await sandbox(sandbox_id)
        except SandboxNotFoundException:
            return Status(is_running=False)
        return Status(is_running=await in_thread(backend.is_running))

    @sandboxes.get("/sandboxes/{sandbox_id}/metrics", responses=ERRORS)
    async def metrics(sandbox_id: str, start: Optional[str] = None, end: Optional[str] = None) -> list[SandboxMetrics]:
        """One sample, now (declaw's list of samples; `start`/`end` are accepted)."""
        return [await in_thread((await sandbox(sandbox_id)).metrics)]

    async def kill_one(sandbox_id: str) -> bool:
        return await kill(registry, sandbox_id)

    @sandboxes.delete("/sandboxes/{sandbox_id}")
    async def kill_sandbox(sandbox_id: str, async_: bool = Query(False, alias="async")) -> Killed:
        """Kill the sandbox (done before the answer, with or without declaw's `?async=true`)."""
        killed = await kill_one(sandbox_id)
        return Killed(killed=killed, queued=killed)

    @sandboxes.post("/sandboxes/kill-many", responses=ERRORS)
    async def kill_many(body: KillMany, async_: bool = Query(False, alias="async")) -> KillManyResults:
        results: dict[str, dict[str, Any]] = {}
        for sandbox_id in dict.fromkeys(body.sandbox_ids):
            try:
                killed = await kill_one(sandbox_id)
                results[sandbox_id] = {"queued": True} if async_ and killed else \
                    {"killed": True} if killed else {"error": "sandbox not found"}
            except SandboxException as exc:
                results[sandbox_id] = {"error": str(exc)}
        return KillManyResults(results=results)

    return sandboxes
