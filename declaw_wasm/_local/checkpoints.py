"""Node-loss checkpoints (`lifecycle={"checkpoint": "cell"}`): a hosted sandbox written to the
state store after each completed turn, so that it comes back on another host when its host dies.

A *turn* is a call that may change the sandbox: a command or a cell that ended, a file written,
removed, renamed or made, a code context made, restarted or removed. After each, the host (a
pool's worker or a Ray actor, _pool/host.py) calls `after_turn`, which takes a snapshot of the
sandbox (snapshots.py, source "periodic": declaw's name for snapshots the platform takes by
itself) into the shared state store (`DECLAW_WASM_STATE`), then deletes the previous one: a
checkpointed sandbox keeps one. The reply of the turn is sent only once its checkpoint is
published, so a turn the caller saw complete is never lost.

What it costs is what changed: a turn that changed nothing (a command that wrote no file, a
read) is seen by a fingerprint (a digest of every private file's place, size, mode, inode and
mtime, and each context's turns) and costs a walk of the sandbox's folders, no snapshot; a
cell's snapshot is its context's memory pages that differ from the warm image plus the folders
(benchmarks/README.md, "Checkpoints"). A sandbox is captured only at rest: while a background
command runs, or a cell runs in another context, the turn is not checkpointed (the next turn,
at the latest the command's end, is).

Restoring is the driver's (`HostedSandbox`'s recovery, _pool/client.py): when the host is
reported dead, another host `restore`s the sandbox from its checkpoint, breaking the dead host's
lease on it (its owner, `host:pid`, is known to be gone), with the create's secrets passed again
as a call argument: they are never in a checkpoint (snapshots never store them).
"""

from __future__ import annotations

import functools
import hashlib
import os
import struct
import threading
from typing import TYPE_CHECKING, Any, Optional

from .._hostfs import DIR_FLAGS
from .._hostfs.walk import walk_entries
from .._printable import logger
from .._state import RecordNotFound, StateError
from ..exceptions import ConflictException, SandboxException

if TYPE_CHECKING:
    from .._state.snapshots import SnapshotRecord, SnapshotStore
    from .kernel import Kernel
    from .sandbox import LocalSandbox

log = logger("declaw_wasm.state")

SOURCE = "periodic"
OTHERS_WAIT = 0.05  # seconds a checkpoint waits for a cell running in another context


def refused_here() -> str:
    return ("lifecycle={'checkpoint': 'cell'} checkpoints a sandbox hosted by a process pool or a Ray "
            "cluster (backend='processes' or 'ray') so that it survives its host: an in-process sandbox "
            "has no host of its own to lose. Take snapshots with create_snapshot() (docs/scale.md)")


class Checkpoints:
    """A checkpointed sandbox's latest checkpoint (its record, turn), the fingerprint it was
    taken at, and each context's cell count then (a context that ran nothing since is copied
    from it, not captured again). `record`: the checkpoint a restored sandbox was made from."""

    def __init__(self, record: Optional["SnapshotRecord"] = None, turn: int = 0) -> None:
        self.lock = threading.Lock()
        self.record = record
        self.snapshot_id = record.snapshot_id if record is not None else None
        self.turn = turn
        self.mark: Optional[tuple[Any, ...]] = None
        # a restored context starts at 0 cells, its image the checkpoint's
        self.turns_at: dict[str, int] = {str(c.get("id")): 0 for c in (record.manifest.get("contexts") or [])} \
            if record is not None else {}
        self.ended = False

    def after_turn(self, sandbox: "LocalSandbox", what: str) -> None:
        """Checkpoint the sandbox if the turn changed it (never raises: a failed checkpoint is
        logged, and the previous one stays)."""
        from .snapshots import held, quiet, snapshot_store, take_snapshot

        previous = None
        with self.lock:
            if self.ended or not sandbox.running:
                return
            try:
                store = snapshot_store()
                with quiet(sandbox, OTHERS_WAIT) as kernels:
                    mark = fingerprint(sandbox, kernels)
                    if mark == self.mark:
                        return
                    held.take(store.store, sandbox.sandbox_id)
                    turn = self.turn + 1 if self.snapshot_id is not None else self.turn  # the create's: 0
                    record = take_snapshot(sandbox, SOURCE, store, kernels,
                                           checkpoint={"policy": "cell", "turn": turn, "after": what},
                                           unchanged=self._unchanged(kernels))
            except ConflictException as exc:  # a command, or another context's cell, is running
                log.info("sandbox %s: not checkpointed after %s (%s)", sandbox.sandbox_id, what, exc)
                return
            except (SandboxException, StateError, OSError) as exc:
                log.warning("sandbox %s: checkpoint after %s failed (the previous one stays): %s",
                            sandbox.sandbox_id, what, exc)
                return
            previous, self.snapshot_id, self.mark, self.turn = self.snapshot_id, record.snapshot_id, mark, turn
            self.record, self.turns_at = record, {k.context.id: k.turns for k in kernels}
        if previous is not None:
            _drop_later(store, sandbox, previous)

    def _unchanged(self, kernels: list["Kernel"]) -> dict[str, "SnapshotRecord"]:
        """The contexts that ran no cell since the last checkpoint (theirs is copied from it)."""
        if self.record is None:
            return {}
        return {k.context.id: self.record for k in kernels if self.turns_at.get(k.context.id) == k.turns}

    def end(self, sandbox: "LocalSandbox") -> None:
        """The sandbox ended (killed, timed out, paused): its checkpoint goes (a pause keeps its
        own snapshot); a host that dies never gets here, so the checkpoint stays for the restore."""
        from .snapshots import snapshot_store

        with self.lock:
            self.ended = True
            last, self.snapshot_id = self.snapshot_id, None
        if last is not None:
            _drop_later(snapshot_store(), sandbox, last)


def fingerprint(sandbox: "LocalSandbox", kernels: list["Kernel"]) -> tuple[Any, ...]:
    """What a checkpoint would capture, cheaply: a digest of each private entry's place in its
    tree, name, type, size, inode and mtime, and each context's id and turns (a cell always
    changes its context's memory). Walked by descriptor (`walk_entries`): every entry counts
    however deep it is, and the host holds a digest, not a list of the sandbox's paths."""
    from .snapshots import private_trees

    digest = hashlib.blake2b(digest_size=32)
    for guest, host in private_trees(sandbox):
        digest.update(guest.encode("utf-8", "surrogateescape") + b"\0")
        for parents, _, name, st in walk_entries(functools.partial(os.open, host, DIR_FLAGS), sort=True):
            digest.update(_ENTRY.pack(len(parents), st.st_mode, st.st_size, st.st_ino, st.st_mtime_ns))
            digest.update(name.encode("utf-8", "surrogateescape") + b"\0")
    contexts = tuple((k.context.id, k.turns) for k in kernels)
    return (digest.digest(), contexts)


_ENTRY = struct.Struct("<IIqQq")  # depth, mode, size, inode, mtime (ns): the walk's order gives the tree


def latest(store: "SnapshotStore", sandbox_id: str) -> "SnapshotRecord":
    """A sandbox's newest checkpoint (RecordNotFound if it has none; with none to use but some
    refused, damaged or not signed with the state key, the refusal)."""
    refused: list[StateError] = []
    found = [r for r in store.list(sandbox_id, refused) if (r.manifest.get("checkpoint") or {}).get("policy")]
    if not found and refused:
        raise refused[0]
    if not found:
        raise RecordNotFound(f"sandbox {sandbox_id} has no checkpoint in the state store")
    return found[0]


def turn_of(record: "SnapshotRecord") -> tuple[int, str]:
    """(turn, what ended it) of a checkpoint."""
    checkpoint = record.manifest.get("checkpoint") or {}
    return int(checkpoint.get("turn") or 0), str(checkpoint.get("after") or "")


def _drop_later(store: "SnapshotStore", sandbox: "LocalSandbox", snapshot_id: str) -> None:
    """Delete a superseded checkpoint in the background (the turn's reply does not wait)."""
    from .snapshots import delete_snapshot

    def drop() -> None:
        try:
            delete_snapshot(store, sandbox.sandbox_id, snapshot_id, sandbox.interpreter)
        except (SandboxException, StateError, OSError) as exc:
            log.warning("sandbox %s: deleting its superseded checkpoint %s: %s", sandbox.sandbox_id, snapshot_id, exc)

    threading.Thread(target=drop, name="declaw-checkpoint-drop", daemon=True).start()
