"""A record of the state store as stored: one header line, then the body (canonical JSON), signed.

    declaw-wasm-record 2 <kind> <key id> <signature>\\n<body>

The signature is HMAC-SHA256 (stdlib `hmac`) with the state key (keys.py) over the record's kind,
its name in the store (its key below the store's root) and the body's exact bytes, so a record
that was changed, forged, or moved to another name or kind by whoever can write the store but
lacks the key fails the check. The check comes first (a constant-time compare) and nothing of a
record that fails it is parsed or used: `UntrustedRecord`, saying which failure it is. Each byte
is hashed once (the HMAC is the integrity check too; content blobs stay addressed by SHA-256,
and a record names its blobs by digest, so they are covered through it).

Kinds (`KINDS`, with where each lives, which `declaw-wasm state resign` uses to sign records
written before records were signed): a snapshot's manifest, a paused sandbox's state document,
the snapshot index, a volume's manifest, a lease generation. Such older records
(`{"body": ..., "format": 1, "sha256": ...}`: a bare checksum anyone could recompute) are
refused with a message naming that command.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from typing import Any, Optional

from .errors import IntegrityError, StateError, UntrustedRecord
from .keys import StateKey

MAGIC = b"declaw-wasm-record"
VERSION = 2
MAX_HEADER = 160  # magic, version, kind (<= 32), key id (16), signature (64), spaces
_KIND_RE = re.compile(r"[a-z][a-z0-9-]{0,31}")
_HEX16 = re.compile(r"[0-9a-f]{16}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_LEGACY = b'{"body":'  # the unsigned format 1 envelope (sorted keys: "body" comes first)

_ID = r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}"
# Every kind of record and where it lives (below any prefix): what resign signs an older record as.
KINDS: dict[str, re.Pattern[str]] = {
    "snapshot": re.compile(rf"(?:^|/)sandboxes/{_ID}/snapshots/{_ID}/manifest\.json\Z"),
    "sandbox-state": re.compile(rf"(?:^|/)sandboxes/{_ID}/state\.json\Z"),
    "snapshot-index": re.compile(rf"(?:^|/)snapshot-index/{_ID}\.json\Z"),
    "volume": re.compile(rf"(?:^|/)volumes/{_ID}/manifest\.json\Z"),
    "lease": re.compile(r"(?:^|/)g[0-9]{12}\.json\Z"),
}


def kind_of(name: str) -> Optional[str]:
    """The kind of record stored at `name` (None: not a place where records live)."""
    return next((kind for kind, pattern in KINDS.items() if pattern.search(name)), None)


def canonical(body: Any) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


# The command that signs a trusted store's records, as errors name it. Never the store's URL or
# folder: a server's errors reach its clients, who have no business knowing where it keeps state.
RESIGN = "`declaw-wasm state resign` (where DECLAW_WASM_STATE names this store, or with `--store URL`)"


def _signature(key: StateKey, kind: str, name: str, body: "bytes | memoryview") -> str:
    mac = hmac.new(key.secret, b"declaw-wasm-record 2\0%s\0%s\0" % (kind.encode(), name.encode()), hashlib.sha256)
    mac.update(body)
    return mac.hexdigest()


def sign(key: StateKey, kind: str, name: str, body: bytes) -> bytes:
    """The stored bytes of a record: its header, then `body` (exact bytes, signed as they are)."""
    if not _KIND_RE.fullmatch(kind):
        raise StateError(f"invalid record kind {kind!r}")
    header = b"%s %d %s %s %s\n" % (MAGIC, VERSION, kind.encode(), key.key_id.encode(),
                                    _signature(key, kind, name, body).encode())
    return header + body


def seal(key: StateKey, kind: str, name: str, body: Any) -> bytes:
    return sign(key, kind, name, canonical(body))


@dataclass(frozen=True)
class Header:
    """A record's header, as written (unverified)."""

    kind: str
    key_id: str
    signature: str
    body_at: int


def header_of(raw: bytes, name: str) -> Header:
    """The header of a record (UntrustedRecord if there is none: damaged, unsigned, not ours)."""
    if raw.startswith(_LEGACY):
        raise UntrustedRecord(f"{name}: written before the state store's records were signed, so anyone who "
                              "could write the store could have changed it; refused", "unsigned")
    end = raw.find(b"\n", 0, MAX_HEADER)
    fields = raw[:end].split(b" ") if end > 0 else []
    if len(fields) != 5 or fields[0] != MAGIC:
        raise UntrustedRecord(f"{name}: not a signed state record (damaged, truncated, or not written by "
                              "declaw-wasm); refused", "malformed")
    if fields[1] != b"%d" % VERSION:
        raise StateError(f"{name}: record format {fields[1][:8].decode('ascii', 'replace')!r}; this declaw-wasm "
                         f"reads format {VERSION} (a newer declaw-wasm wrote it?)")
    try:
        kind, key_id, signature = (f.decode("ascii") for f in fields[2:])
    except UnicodeDecodeError:
        raise UntrustedRecord(f"{name}: a malformed record header; refused", "malformed") from None
    if not (_KIND_RE.fullmatch(kind) and _HEX16.fullmatch(key_id) and _HEX64.fullmatch(signature)):
        raise UntrustedRecord(f"{name}: a malformed record header; refused", "malformed")
    return Header(kind, key_id, signature, end + 1)


def verify(raw: bytes, kind: str, name: str, key: StateKey) -> bytes:
    """The body of the record `raw` stored at `name`, if it is a `kind` record signed with `key`
    for that name; else UntrustedRecord (nothing of it is used)."""
    try:
        header = header_of(raw, name)
    except UntrustedRecord as exc:
        if exc.reason == "unsigned":
            raise UntrustedRecord(f"{exc} (it will not be used). If you trust every record in this store as it "
                                  f"is now, sign them with this host's state key: {RESIGN}",
                                  "unsigned") from None
        raise
    if header.key_id != key.key_id:
        raise UntrustedRecord(
            f"{name}: signed with another state key (key id {header.key_id}; this process's key, from "
            f"{key.source}, is {key.key_id}); refused. Give this process the key the store's other users "
            f"have (DECLAW_WASM_STATE_KEY or the key file, docs/state-store.md); or, if the key was rotated "
            f"and you trust the store as it is now, re-sign it: {RESIGN}", "other-key")
    if header.kind != kind:
        raise UntrustedRecord(f"{name}: holds a {header.kind!r} record where a {kind!r} record belongs (moved "
                              "here from elsewhere); refused", "kind")
    body = memoryview(raw)[header.body_at:]
    if not hmac.compare_digest(_signature(key, kind, name, body), header.signature):
        raise UntrustedRecord(f"{name}: does not match its signature: changed by someone without the state key, "
                              "damaged, or moved here from another name; refused (nothing of it is used)",
                              "mismatch")
    return raw[header.body_at:]


def unseal(raw: bytes, kind: str, name: str, key: StateKey) -> Any:
    """The parsed body of a verified record."""
    body = verify(raw, kind, name, key)
    try:
        return json.loads(body)
    except ValueError:
        raise IntegrityError(f"{name}: a signed record that is not JSON") from None


def legacy_body(raw: bytes, name: str) -> Any:
    """The body of an unsigned record of format 1 whose checksum holds (IntegrityError if not):
    what resign signs, when the user trusts the store."""
    try:
        doc = json.loads(raw)
        body, digest, fmt = doc["body"], doc["sha256"], doc["format"]
    except (ValueError, KeyError, TypeError):
        raise IntegrityError(f"{name}: not a state document (truncated or damaged)") from None
    if fmt != 1 or hashlib.sha256(canonical(body)).hexdigest() != digest:
        raise IntegrityError(f"{name}: its checksum does not hold (damaged or changed)")
    return body
