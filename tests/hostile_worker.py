"""A pool worker gone bad, for tests/test_channels.py: the real worker process
(`declaw_wasm._pool.worker`), whose answer to a call naming a path `/hostile/MODE` (`files.exists`,
`files.read`...) is replaced by what MODE says — what a worker could send once a guest had
escaped Wasmtime into it. Everything else it answers honestly, so its sandboxes are made and
work until then.

Run by a `ProcessPool` whose `worker_module` is `tests.hostile_worker` (the checkout's root is
on the worker's path). `HOSTILE_MARKER` is a file the pickle payloads would create were they
ever unpickled.
"""

from __future__ import annotations

import os
import pickle
import struct
import sys
from typing import Any

import msgpack

from declaw_wasm._pool import worker as real
from declaw_wasm._pool.codec import MODEL

MARKER = os.environ.get("HOSTILE_MARKER", "/nonexistent/marker")
PREFIX = "/hostile/"  # a call with an argument `/hostile/MODE...` is answered as MODE says
SIZE = int(os.environ.get("HOSTILE_SIZE", str(8 << 20)))  # bytes of the budget-testing messages


class Pwn:
    """Unpickling this runs a command in the unpickling process."""

    def __reduce__(self) -> Any:
        return (os.system, (f"touch {MARKER}",))


def _head(rid: int) -> bytes:
    return msgpack.packb(rid) + msgpack.packb("ok")


def _frames(rid: int, mode: str) -> list[bytes]:
    """The frames sent instead of the trigger's answer (raw: not through the codec)."""
    if mode == "declared":  # 10 bytes declaring a 2**32-item array
        return [b"\x93" + _head(rid) + b"\xdd\xff\xff\xff\xff"]
    if mode == "deep":  # 10**6 levels of nesting
        return [b"\x93" + _head(rid) + b"\x91" * 10**6 + b"\xc0"]
    if mode == "arrays":  # the costliest structure: empty arrays, one byte each (8 arrays of them)
        inner = b"\xdd" + struct.pack(">I", SIZE // 8) + b"\x90" * (SIZE // 8)
        return [b"\x93" + _head(rid) + b"\x98" + inner * 8]
    if mode == "ints":  # the costliest scalars: 1-byte ints outside CPython's small-int cache
        return [b"\x93" + _head(rid) + b"\xdd" + struct.pack(">I", SIZE) + b"\xf0" * SIZE]
    if mode == "pickle":  # a pickle where a message belongs
        return [pickle.dumps(Pwn())]
    if mode == "pickle-ext":  # a pickle inside a message, as an extension type's data
        return [b"\x93" + _head(rid) + msgpack.packb(msgpack.ExtType(MODEL, pickle.dumps(Pwn())))]
    if mode == "model":  # a type outside the allow-list, named as Python would import it
        return [b"\x93" + _head(rid)
                + msgpack.packb(msgpack.ExtType(MODEL, msgpack.packb(["os.system", {"command": "true"}])))]
    if mode == "unknown":  # a notice kind nobody sent
        return [msgpack.packb([0, "upgrade", {"to": "root"}])]
    if mode == "tool-bytes":  # a host tool call whose arguments are an int the driver would bytes()
        return [msgpack.packb([0, "tool", [1, "token", "search", 1 << 40]])]
    return []


def _huge_prefix() -> bytes:
    """A length prefix announcing 1 GiB (multiprocessing.connection's framing), then a little."""
    return struct.pack("!i", 1 << 30) + b"\x00" * 1024


def _lie(rid: int, mode: str) -> list[Any]:
    """Well-formed answers of the wrong type."""
    return [rid, "ok", 1 << 40] if mode == "lie-int" else [rid, "error", {"error": "SandboxException"}]


def _mode(args: Any) -> str:
    for arg in args if isinstance(args, list) else []:
        text = getattr(arg, "cmd", arg)  # a path, or a command line naming one
        if isinstance(text, str) and PREFIX in text:
            return text[text.index(PREFIX) + len(PREFIX):].split("/")[0].split()[0]
    return ""


class Hostile(real.Worker):
    def _handle(self, message: Any) -> None:
        rid, kind, _, method, args, _key = message
        mode = _mode(args)
        if not mode:
            return super()._handle(message)
        if mode == "silent":  # never answers
            return None
        if mode == "unencodable":  # an honest worker whose answer cannot be encoded
            self.answer(rid, ("ok", object()), method)
        elif mode == "too-large":  # nor one over the codec's limit
            self.answer(rid, ("ok", b"x" * ((64 << 20) + 1)), method)
        elif mode.startswith("lie-"):
            self.send(_lie(rid, mode))
        elif mode == "tool-bomb":  # a host tool call (with a token lent here) whose arguments are a bomb
            token = next(getattr(s.tools, "token", None) for s in self.host._mine.values() if s.tools is not None)
            self.send([0, "tool", [1, token, "echo", b"\x92\xdd" + struct.pack(">I", SIZE) + b"\x90" * SIZE + b"\x80"]])
            self.answer(rid, ("ok", True), method)
        else:
            with self._send_lock:
                if mode == "huge":
                    self.conn._send(_huge_prefix())  # type: ignore[attr-defined]
                for frame in _frames(rid, mode):
                    self.conn.send_bytes(frame)
        return None


def main(argv: list[str]) -> int:
    real.Worker = Hostile  # type: ignore[misc]
    return real.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
