"""Snapshots and paused sandboxes in the state store: where they live and how they are read back.
What a snapshot holds is the local backend's business (_local/snapshots.py); this module only
stores, finds, verifies and deletes records, and keeps the paused-sandbox state documents.

    sandboxes/<sandbox_id>/snapshots/<snapshot_id>/manifest.json   the snapshot (published last)
    sandboxes/<sandbox_id>/snapshots/<snapshot_id>/blobs/ab/<sha>  its parts: file trees, images
    sandboxes/<sandbox_id>/state.json      while the sandbox is paused (or was resumed from a pause)
    sandboxes/<sandbox_id>/lease/g*.json   held by the one process running the sandbox
    snapshot-index/<snapshot_id>.json      the sandbox a snapshot belongs to (ids alone find it)

Records are published parts first, manifest last (store.py), so a half-written snapshot is never
listed; every part is checked against its SHA-256 when read, so a truncated or altered part is an
`IntegrityError`. Every document here (manifest, state document, index entry, lease generation)
is a record signed with the state key (records.py), bound to its kind and its key: one changed,
forged or moved by someone without the key (a paused sandbox's create request with a wider
network policy, a manifest copied to another id) is an `UntrustedRecord`, and nothing of it is
used. Ids are validated before they name a key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional

from .._printable import logger
from .errors import IntegrityError, RecordNotFound, StateError
from .ids import check_id, new_id
from .store import BlobRef, BlobWriter, StateStore

log = logger("declaw_wasm.state")

KIND = "sandboxes"
# record kinds (records.py): what each signed document is, bound into its signature
SNAPSHOT, STATE, INDEX_ENTRY = "snapshot", "sandbox-state", "snapshot-index"
INDEX = "snapshot-index"
FORMAT = 1  # the snapshot manifest's format (the store's own envelope has its own)
SOURCES = ("pause", "periodic", "manual")
PREFERENCE = {"pause": 0, "periodic": 1, "manual": 2}  # declaw's restore order


def sandbox_prefix(sandbox_id: str) -> str:
    return f"{KIND}/{check_id(sandbox_id, 'sandbox id')}"


def snapshot_prefix(sandbox_id: str, snapshot_id: str) -> str:
    return f"{sandbox_prefix(sandbox_id)}/snapshots/{check_id(snapshot_id, 'snapshot id')}"


def lease_name(sandbox_id: str) -> str:
    return f"{sandbox_prefix(sandbox_id)}/lease"


def new_snapshot_id() -> str:
    return new_id("snap")


@dataclass
class SnapshotRecord:
    """A stored snapshot: its manifest (format-checked) and where it is."""

    sandbox_id: str
    snapshot_id: str
    manifest: dict[str, Any]

    @property
    def prefix(self) -> str:
        return snapshot_prefix(self.sandbox_id, self.snapshot_id)

    @property
    def source(self) -> str:
        return str(self.manifest.get("source", "manual"))

    @property
    def created_at(self) -> str:
        return str(self.manifest.get("created_at", ""))


class SnapshotStore:
    """The snapshot records and paused-sandbox documents of one state store."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    # -- writing ---------------------------------------------------------------------------------
    def part_writer(self, sandbox_id: str, snapshot_id: str) -> BlobWriter:
        """A streamed part of a snapshot being made (`commit()` gives its BlobRef)."""
        return self.store.blob_writer(snapshot_prefix(sandbox_id, snapshot_id))

    def put_part(self, sandbox_id: str, snapshot_id: str, data: bytes) -> BlobRef:
        return self.store.put_blob(snapshot_prefix(sandbox_id, snapshot_id), data)

    def publish(self, sandbox_id: str, snapshot_id: str, manifest: dict[str, Any],
                parts: dict[str, BlobRef]) -> SnapshotRecord:
        """Make the snapshot visible (its parts are stored already): manifest, then index."""
        body = {**manifest, "format": FORMAT, "sandbox_id": sandbox_id, "snapshot_id": snapshot_id}
        published = self.store.publish(snapshot_prefix(sandbox_id, snapshot_id), body, parts, kind=SNAPSHOT)
        self.store.put_json(f"{INDEX}/{check_id(snapshot_id, 'snapshot id')}.json", {"sandbox_id": sandbox_id},
                            kind=INDEX_ENTRY)
        return SnapshotRecord(sandbox_id, snapshot_id, published)

    def discard(self, sandbox_id: str, snapshot_id: str) -> None:
        """Remove a snapshot that was never published (its parts)."""
        self.store.delete_tree(snapshot_prefix(sandbox_id, snapshot_id))

    # -- reading ---------------------------------------------------------------------------------
    def read(self, sandbox_id: str, snapshot_id: str) -> SnapshotRecord:
        """The snapshot's record (`RecordNotFound` if there is none, `IntegrityError` if damaged)."""
        prefix = snapshot_prefix(sandbox_id, snapshot_id)
        manifest = self.store.read_record(prefix, kind=SNAPSHOT)
        fmt = manifest.get("format")
        if fmt != FORMAT:
            raise StateError(f"snapshot {snapshot_id}: format {fmt!r}; this declaw-wasm reads format {FORMAT}")
        if manifest.get("sandbox_id") != sandbox_id or manifest.get("snapshot_id") != snapshot_id:
            raise IntegrityError(f"snapshot {snapshot_id}: its manifest names another snapshot")
        return SnapshotRecord(sandbox_id, snapshot_id, manifest)

    def part_ref(self, record: SnapshotRecord, name: str) -> BlobRef:
        return self.store.part_ref(record.prefix, record.manifest, name)

    def read_part(self, record: SnapshotRecord, name: str) -> bytes:
        return self.store.read_part(record.prefix, record.manifest, name)

    def open_part(self, record: SnapshotRecord, name: str) -> Any:
        """A verifying reader of a part (read it to the end: the digest is checked there)."""
        return self.store.open_blob(record.prefix, self.part_ref(record, name))

    def owner(self, snapshot_id: str) -> str:
        """The sandbox a snapshot belongs to (`RecordNotFound` if none)."""
        found = self.store.get_json(f"{INDEX}/{check_id(snapshot_id, 'snapshot id')}.json", kind=INDEX_ENTRY)
        if not isinstance(found, dict):
            raise IntegrityError(f"snapshot index entry {snapshot_id}: malformed")
        return check_id(found.get("sandbox_id"), "sandbox id")

    def find(self, snapshot_id: str, sandbox_id: Optional[str] = None) -> SnapshotRecord:
        return self.read(sandbox_id or self.owner(snapshot_id), snapshot_id)

    def list(self, sandbox_id: Optional[str] = None,
             refused: Optional[List[StateError]] = None) -> list[SnapshotRecord]:
        """Snapshots of one sandbox, or of all, newest first (damaged or untrusted ones are left
        out, logged, and added to `refused` if given)."""
        sandbox_ids = [sandbox_id] if sandbox_id is not None else self._sandbox_ids()
        found = []
        for sid in sandbox_ids:
            for snapshot_id in self.store.list_records(f"{sandbox_prefix(sid)}/snapshots"):
                try:
                    found.append(self.read(sid, snapshot_id))
                except RecordNotFound:
                    continue  # deleted meanwhile
                except StateError as exc:
                    log.warning("snapshot %s of %s left out: %s", snapshot_id, sid, exc)
                    if refused is not None:
                        refused.append(exc)
        return sorted(found, key=lambda r: r.created_at, reverse=True)

    def latest(self, sandbox_id: str) -> SnapshotRecord:
        """declaw's default for `restore`: the newest snapshot, preferring pause > periodic > manual.
        With none to use but some refused (damaged, not signed with the state key), the refusal."""
        refused: List[StateError] = []
        records = self.list(sandbox_id, refused)
        if not records and refused:
            raise refused[0]
        if not records:
            raise RecordNotFound(f"sandbox {sandbox_id} has no snapshots")
        best = min(PREFERENCE.get(r.source, 3) for r in records)
        return next(r for r in records if PREFERENCE.get(r.source, 3) == best)

    def delete(self, sandbox_id: str, snapshot_id: str) -> bool:
        """Delete a snapshot (manifest first); False if there was none."""
        prefix = snapshot_prefix(sandbox_id, snapshot_id)
        existed = self.store.exists(f"{prefix}/manifest.json")
        self.store.delete_record(prefix)
        self.store.delete(f"{INDEX}/{snapshot_id}.json")
        return existed

    def _sandbox_ids(self) -> List[str]:
        ids: List[str] = []
        for name in self.store.names(KIND):
            try:
                ids.append(check_id(name))
            except Exception:  # not one of ours
                continue
        return ids

    # -- paused sandboxes ----------------------------------------------------------------------------
    def state_key(self, sandbox_id: str) -> str:
        return f"{sandbox_prefix(sandbox_id)}/state.json"

    def put_state(self, sandbox_id: str, state: dict[str, Any]) -> None:
        self.store.put_json(self.state_key(sandbox_id), state, kind=STATE)

    def get_state(self, sandbox_id: str) -> Optional[dict[str, Any]]:
        try:
            found = self.store.get_json(self.state_key(sandbox_id), kind=STATE)
        except RecordNotFound:
            return None
        if not isinstance(found, dict):
            raise IntegrityError(f"sandbox {sandbox_id}: its state document is malformed")
        return found

    def clear_state(self, sandbox_id: str) -> bool:
        return self.store.delete(self.state_key(sandbox_id))

    def states(self) -> dict[str, dict[str, Any]]:
        """Every sandbox with a state document (paused ones, and resumed ones), by id."""
        out = {}
        for sandbox_id in self._sandbox_ids():
            try:
                found = self.get_state(sandbox_id)
            except StateError as exc:
                log.warning("sandbox %s: state left out: %s", sandbox_id, exc)
                continue
            if found is not None:
                out[sandbox_id] = found
        return out
