"""`declaw-wasm state resign`: sign every record of a store the user trusts with this host's
state key (records.py) — the records written before records were signed, and those signed with
a key since rotated. Blobs are left alone (records name them by SHA-256).

What it does with each record (every object but blobs and temp files):

* signed with this key and intact: kept as it is;
* unsigned (format 1), its checksum intact, at a place where records of a known kind live:
  signed, as that kind;
* signed with another key (a rotated one): signed with this one, as the kind its place says
  (or, at a place of no known kind, the kind its header names);
* anything else is left as it is and reported: a record signed with *this* key that fails its
  check was changed after it was signed (the one thing re-signing must never bless), and
  damaged or unknown objects are not records to sign.

Run it only while nothing else uses the store: a record re-signed from what was read a moment
before would undo a change made in between.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable, Optional

from . import records
from .errors import IntegrityError, RecordNotFound, StateError, UntrustedRecord
from .keys import StateKey
from .store import MAX_JSON, StateStore


@dataclass
class Outcome:
    """What resign did with one object: `action` is "kept", "signed", "re-signed" or "left"."""

    key: str
    action: str
    kind: str = ""
    note: str = ""


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    def count(self, action: str) -> int:
        return sum(1 for o in self.outcomes if o.action == action)

    @property
    def left(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.action == "left"]


def resign(store: StateStore, dry_run: bool = False,
           progress: Optional[Callable[[Outcome], None]] = None) -> Report:
    """Sign every record of `store` with its key (see the module's notes); `dry_run`: say what
    would be done, change nothing."""
    key = store.key
    report = Report()
    for name in sorted(store.walk()):
        outcome = _one(store, key, name, dry_run)
        if outcome is None:
            continue
        report.outcomes.append(outcome)
        if progress is not None:
            progress(outcome)
    return report


def _one(store: StateStore, key: StateKey, name: str, dry_run: bool) -> Optional[Outcome]:
    place = records.kind_of(name)
    try:
        raw = store.read_bytes(name, limit=MAX_JSON)
    except RecordNotFound:
        return None  # deleted meanwhile
    except IntegrityError:
        return Outcome(name, "left", place or "", f"larger than {MAX_JSON} bytes: not a record")
    if raw.startswith(b"{"):
        if place is None:
            return Outcome(name, "left", "", "not at a place where records live") if name.endswith(".json") else None
        try:
            body = records.legacy_body(raw, name)
        except IntegrityError as exc:
            return Outcome(name, "left", place, f"unsigned and damaged ({exc})")
        if not dry_run:
            store.put_json(name, body, kind=place)
        return Outcome(name, "signed", place, "was unsigned")
    try:
        header = records.header_of(raw, name)
    except (UntrustedRecord, StateError) as exc:
        if place is None and not name.endswith(".json"):
            return None  # not ours, and not where records live
        return Outcome(name, "left", place or "", str(exc))
    if header.key_id == key.key_id:
        try:
            records.verify(raw, place or header.kind, store.signed_name(name), key)
        except UntrustedRecord as exc:
            return Outcome(name, "left", place or header.kind,
                           f"signed with this key but fails its check, so it was changed or moved after it was "
                           f"signed: never re-signed ({exc.reason}); delete it if it is not wanted")
        return Outcome(name, "kept", header.kind)
    kind = place or header.kind
    if place is not None and header.kind != place:
        return Outcome(name, "left", place, f"holds a {header.kind!r} record where a {place!r} record belongs")
    body = raw[header.body_at:]
    try:
        json.loads(body)
    except ValueError:
        return Outcome(name, "left", kind, "signed with another key, and its body is not JSON")
    if not dry_run:
        store.write_bytes(name, records.sign(key, kind, store.signed_name(name), body))
    return Outcome(name, "re-signed", kind, f"was signed with key {header.key_id}")
