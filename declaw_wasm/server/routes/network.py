"""The sandbox's network, ours only (declaw has no routes for it): its audit events, under
`PREFIX`. (The vault has declaw's routes: vault.py.)"""

from __future__ import annotations

from typing import Optional

from fastapi import APIRouter, Query, Response

from ...events import to_json
from ...security.audit import AuditEvent
from ..._threads import in_thread
from ...wire import PREFIX
from ..registry import Registry
from .common import ERRORS, finder


def router(registry: Registry) -> APIRouter:
    sandbox = finder(registry)
    network = APIRouter(tags=["network"], prefix=PREFIX)

    @network.get("/sandboxes/{sandbox_id}/audit", responses=ERRORS)
    async def audit(sandbox_id: str) -> list[AuditEvent]:
        """The sandbox's outbound network events, oldest first (docs/egress.md, "Audit")."""
        return await in_thread((await sandbox(sandbox_id)).audit_events)

    @network.get("/sandboxes/{sandbox_id}/traffic-access-token", responses=ERRORS)
    async def traffic_access_token(sandbox_id: str) -> dict[str, Optional[str]]:
        """The token a request to the sandbox's servers must carry (`e2b-traffic-access-token`)
        when it was created with `network={"allow_public_traffic": False}`; else null."""
        backend = await sandbox(sandbox_id)
        return {"traffic_access_token": await in_thread(backend.traffic_access_token)}
    @network.get("/sandboxes/{sandbox_id}/events", responses=ERRORS)
    async def events(sandbox_id: str, since: int = Query(0, ge=0)) -> Response:
        """The sandbox's events (declaw_wasm.events) after sequence number `since`, oldest first:
        a JSON array (docs/observability.md)."""
        found = await sandbox(sandbox_id)
        listed = await in_thread(found.events, since)
        return Response("[" + ",".join(to_json(e) for e in listed) + "]", media_type="application/json")

    return network
