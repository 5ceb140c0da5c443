"""What tests do to the state store's records behind declaw-wasm's back: read one, change it
as a principal without the state key would (its body changed, its signature kept), write it in
the unsigned format of before records were signed, or re-sign a changed one with this process's
key (a stand-in for a record another declaw-wasm sharing the key wrote)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable

from declaw_wasm._state import keys, records


def parts(raw: bytes) -> tuple[list[str], Any]:
    """A stored record's header fields and its body."""
    head, _, body = raw.partition(b"\n")
    return head.decode().split(" "), json.loads(body)


def body_of(path: Path) -> Any:
    return parts(path.read_bytes())[1]


def forged(raw: bytes, change: Callable[[Any], Any]) -> bytes:
    """`raw` with its body changed by `change` and its header (and so its signature) kept: all
    someone who can write the store but lacks the key can do."""
    fields, body = parts(raw)
    return " ".join(fields).encode() + b"\n" + records.canonical(change(body))


def unsigned(body: Any) -> bytes:
    """`body` as records were stored before they were signed (format 1: a bare SHA-256)."""
    digest = hashlib.sha256(records.canonical(body)).hexdigest()
    return json.dumps({"format": 1, "sha256": digest, "body": body}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode()


def resigned(raw: bytes, name: str, change: Callable[[Any], Any]) -> bytes:
    """`raw` with its body changed and signed again with this process's state key."""
    fields, body = parts(raw)
    return records.seal(keys.current(), fields[2], name, change(body))
