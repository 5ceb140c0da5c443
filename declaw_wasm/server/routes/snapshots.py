"""State: pause, resume, snapshots, restore (declaw's routes, its shapes), fork (ours, under
`wire.PREFIX`). Snapshots live in the server's state store (`DECLAW_WASM_STATE`), so they outlive
the sandboxes they were taken of, and a sandbox paused by one server resumes on another that
shares the store (docs/state.md). Secrets never travel: a sandbox made in-process with secrets
cannot be resumed through a server."""

from __future__ import annotations

from typing import Optional

from fastapi import APIRouter, Query

from ... import _args
from ..._threads import in_thread
from ...models import SandboxInfo, Snapshot
from ...wire import PREFIX, ForkSandbox, Forked, Paused, ResumeSandbox, SnapshotList
from ..registry import Registry
from .common import ERRORS, finder


def _resume_request(body: Optional[ResumeSandbox]) -> ResumeSandbox:
    """A client's resume body, checked (the lifetime as create's), never holding secrets."""
    timeout = None if body is None or body.timeout is None else _args.lifetime(body.timeout)
    return ResumeSandbox(timeout=timeout)


def router(registry: Registry) -> APIRouter:
    sandbox = finder(registry)
    state = APIRouter(tags=["state"])

    @state.post("/sandboxes/{sandbox_id}/pause", responses=ERRORS)
    async def pause(sandbox_id: str, keep_memory: bool = True) -> Paused:
        """Snapshot the sandbox into the state store and free it (False: paused already);
        `keep_memory=false` (E2B's filesystem-only pause): its files alone."""
        backend = await sandbox(sandbox_id)
        return Paused(paused=await in_thread(backend.pause, keep_memory))

    @state.post("/sandboxes/{sandbox_id}/resume", responses=ERRORS)
    async def resume(sandbox_id: str, body: Optional[ResumeSandbox] = None) -> SandboxInfo:
        """Bring a paused sandbox back (paused here, or by another server sharing the store)."""
        request = _resume_request(body)
        backend = await sandbox(sandbox_id)
        await in_thread(backend.resume, request)
        registry.adopt(backend)
        return await in_thread(backend.info)

    @state.post("/sandboxes/{sandbox_id}/snapshot", responses=ERRORS)
    async def snapshot(sandbox_id: str, name: Optional[str] = None) -> Snapshot:
        """declaw's `create_snapshot` (no body) and `snapshot` (`{}`): the answer carries the
        fields of both (`SnapshotInfo` and `Snapshot`); `name` (E2B's) is listed in `names`."""
        backend = await sandbox(sandbox_id)
        return await in_thread(backend.create_snapshot, _args.snapshot_name(name))

    @state.get("/sandboxes/{sandbox_id}/snapshots", responses=ERRORS)
    async def list_snapshots(sandbox_id: str) -> SnapshotList:
        """The sandbox's snapshots, newest first (also once it is killed: snapshots outlive it)."""
        checked = _args.snapshot_id(sandbox_id, "sandbox_id")
        return SnapshotList(snapshots=await in_thread(registry.sandboxes.list_snapshots, checked))

    @state.delete("/sandboxes/{sandbox_id}/snapshots/{snapshot_id}", responses=ERRORS)
    async def delete_snapshot(sandbox_id: str, snapshot_id: str) -> dict[str, bool]:
        """Idempotent (declaw's); 409 for the snapshot a paused sandbox resumes from."""
        checked = _args.snapshot_id(sandbox_id, "sandbox_id"), _args.snapshot_id(snapshot_id)
        return {"deleted": await in_thread(registry.sandboxes.delete_snapshot, *checked)}

    @state.post("/sandboxes/{sandbox_id}/restore", responses=ERRORS)
    async def restore(sandbox_id: str, snapshot_id: Optional[str] = None,
                      body: Optional[ResumeSandbox] = None) -> SandboxInfo:
        """The sandbox (same id) as one of its snapshots was (default: the latest, preferring
        pause > periodic > manual)."""
        checked = _args.snapshot_id(sandbox_id, "sandbox_id")
        snap = None if snapshot_id is None else _args.snapshot_id(snapshot_id)
        backend = await in_thread(registry.sandboxes.restore, checked, snap, _resume_request(body))
        registry.adopt(backend)
        return await in_thread(backend.info)

    @state.get("/snapshots", responses=ERRORS)
    async def all_snapshots(sandbox_id: Optional[str] = None, limit: Optional[int] = Query(None, gt=0),
                            next_token: Optional[str] = None) -> SnapshotList:
        """Every snapshot of the store (or of one sandbox), newest first; declaw's page shape."""
        checked = None if sandbox_id is None else _args.snapshot_id(sandbox_id, "sandbox_id")
        found = await in_thread(registry.sandboxes.list_snapshots, checked)
        start = int(next_token) if next_token and next_token.isdigit() else 0
        end = len(found) if limit is None else start + limit
        return SnapshotList(snapshots=found[start:end], next_token=str(end) if end < len(found) else None)

    @state.post(f"{PREFIX}/sandboxes/{{sandbox_id}}/fork", responses=ERRORS)
    async def fork(sandbox_id: str, body: ForkSandbox) -> Forked:
        """`count` new sandboxes with this one's files and code contexts (E2B's fork)."""
        backend = await sandbox(sandbox_id)
        forks = await in_thread(backend.fork, _args.fork_count(body.count))
        infos = []
        for made in forks:
            registry.adopt(made)
            infos.append(await in_thread(made.info))
        return Forked(sandboxes=infos)

    return state
