"""A pool worker gone bad, for tests/test_channels.py: the real worker process
(`declaw_wasm._pool.worker`), whose answer to a call naming a path `/hostile/MODE` (`files.exists`,
`files.read`...) is replaced by what MODE says — what a worker could send once a guest had
escaped Wasmtime into it. Everything else it answers honestly, so its sandboxes are made and
work until then. Besides garbage, it lies in well-formed messages: `claim/CALL/ID` makes it
answer its next CALL (`fork`, `create`) with ID (a sandbox of another worker); `tool-flood/N/MIB`
sends N host tool calls of MIB MiB each; `flood/N` answers a command or a cell with N MiB of
output whatever the sandbox's limit.

Run by a `ProcessPool` whose `worker_module` is `tests.hostile_worker` (the checkout's root is
on the worker's path). `HOSTILE_MARKER` is a file the pickle payloads would create were they
ever unpickled.
"""

from __future__ import annotations

import os
import pickle
import re
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
    if mode == "timestamp":  # msgpack's own extension, which it decodes without the codec's hook
        return [b"\x93" + _head(rid) + b"\xd6\xff\x00\x00\x00\x05"]
    if mode == "deep-chart":  # a result whose chart nests 400 supercharts (10 KB)
        return [b"\x93" + _head(rid) + deep_chart(400)]
    if mode == "unknown":  # a notice kind nobody sent
        return [msgpack.packb([0, "upgrade", {"to": "root"}])]
    if mode == "tool-bytes":  # a host tool call whose arguments are an int the driver would bytes()
        return [msgpack.packb([0, "tool", [1, "token", "search", 1 << 40]])]
    return []


def deep_chart(depth: int) -> bytes:
    """A codec `Result` whose chart is `depth` supercharts deep (a guest's door allows 64 levels)."""
    chart: dict[str, Any] = {"type": "line", "elements": []}
    for _ in range(depth):
        chart = {"type": "superchart", "elements": [chart]}
    return msgpack.packb(msgpack.ExtType(MODEL, msgpack.packb(["Result", {"text": "x", "chart": chart}])))


def _huge_prefix() -> bytes:
    """A length prefix announcing 1 GiB (multiprocessing.connection's framing), then a little."""
    return struct.pack("!i", 1 << 30) + b"\x00" * 1024


def _lie(rid: int, mode: str) -> list[Any]:
    """Well-formed answers of the wrong type."""
    return [rid, "ok", 1 << 40] if mode == "lie-int" else [rid, "error", {"error": "SandboxException"}]


def _text(arg: Any) -> Any:
    """A path, or a command line or a cell's code naming one."""
    return getattr(arg, "cmd", None) or getattr(arg, "code", None) or arg


def _mode(args: Any) -> str:
    for arg in args if isinstance(args, list) else []:
        text = _text(arg)
        if isinstance(text, str) and PREFIX in text:
            return text[text.index(PREFIX) + len(PREFIX):].split("/")[0].split()[0]
    return ""


def _after(args: Any, mode: str) -> list[str]:
    """The path's parts after `/hostile/MODE/`."""
    for arg in args if isinstance(args, list) else []:
        text = _text(arg)
        if isinstance(text, str) and PREFIX + mode in text:
            rest = text[text.index(PREFIX + mode) + len(PREFIX + mode):]
            return re.match(r"(?:/[\w.-]+)*", rest).group(0).strip("/").split("/")  # type: ignore[union-attr]
    return []


MiB = 1 << 20


class Hostile(real.Worker):
    claim: tuple[str, str] = ("", "")  # (the call, the id) answered instead: a sandbox of another worker

    def _handle(self, message: Any) -> None:
        rid, kind, _, method, args, _key = message
        mode = _mode(args)
        if self._lies(rid, kind, method, args, mode):
            return None
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

    def _lies(self, rid: int, kind: str, method: str, args: Any, mode: str) -> bool:
        """Claims, floods: what a compromised worker sends besides garbage (True: it answered)."""
        if self.claim[0] and method == self.claim[0]:  # claims a sandbox it did not make
            claimed, self.claim = self.claim[1], ("", "")
            if claimed == "none":  # no id at all for a fork of one
                self.answer(rid, ("ok", []), method)
            else:
                self.answer(rid, ("ok", [claimed] if method == "fork" else claimed), method)
            return True
        if mode == "claim":  # /hostile/claim/CALL/ID: answer the next CALL (fork, create) with ID
            call, sandbox_id = _after(args, mode)[:2]
            self.claim = (call, sandbox_id)
            self.answer(rid, ("ok", True), method)
            return True
        if mode == "tool-flood":  # /hostile/tool-flood/N/MIB: N host tool calls of MIB MiB of arguments each
            count, size = map(int, _after(args, mode)[:2])
            token = next(getattr(s.tools, "token", None) for s in self.host._mine.values() if s.tools is not None)
            payload = msgpack.packb([[b"x" * (size * MiB)], {}])
            for i in range(count):
                self.send([0, "tool", [10_000 + i, token, "slow", payload]])
            self.answer(rid, ("ok", True), method)
            return True
        if mode == "flood" and kind == "stream":  # /hostile/flood/N: N MiB of output, whatever the limit
            self._flood(rid, method, int(_after(args, mode)[0]))
            return True
        if mode == "flood":  # a cell without callbacks: one answer, as large as a message may be
            self._flood_cell(rid, method)
            return True
        return False

    def _flood(self, rid: int, method: str, mib: int) -> None:
        """A command's or a cell's stream: `mib` MiB of stdout (and a cell's results)."""
        from datetime import datetime, timezone

        from declaw_wasm.wire import (CellLogLine, CellResultLine, EndLine, EndOfExecutionLine, ExecutionCountLine,
                                      OutputLine, StartLine)

        block = "x" * MiB
        if method == "run_code":
            now = datetime.now(timezone.utc)
            for _ in range(mib):
                self.answer(rid, ("item", [CellLogLine(type="stdout", text=block, timestamp=now)]), method)
                self.answer(rid, ("item", [CellResultLine(html=block)]), method)
            last = [CellLogLine(type="stdout", text=block, timestamp=now)] * 16  # one message of 16 MiB
            self.answer(rid, ("item", [*last, ExecutionCountLine(execution_count=1), EndOfExecutionLine()]), method)
        else:
            self.answer(rid, ("item", [StartLine(pid=4242)]), method)
            for _ in range(mib):
                self.answer(rid, ("item", [OutputLine(type="stdout", data=block)]), method)
            self.answer(rid, ("item", [EndLine(exit_code=0)]), method)
        self.answer(rid, ("ok", None), method)

    def _flood_cell(self, rid: int, method: str) -> None:
        from declaw_wasm.execution import Execution, Result

        block = "x" * MiB
        self.answer(rid, ("ok", Execution(logs={"stdout": [block] * 24, "stderr": [block] * 8},
                                          results=[Result(html=block)] * 24)), method)


def main(argv: list[str]) -> int:
    real.Worker = Hostile  # type: ignore[misc]
    return real.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
