"""What crosses a worker's pipe (and a Ray actor's replies, _ray/): msgpack, with the wire's and
the API's pydantic models as extension types rebuilt from an allow-list.

Why msgpack and not pickle (which `multiprocessing` and Ray would use by default): a worker
hosts hostile guests. Were one ever to escape Wasmtime it would own its worker, and a pickle from
the worker would then run its code in the agent's process; a msgpack message can only be data,
and every model in it is validated by pydantic on arrival. msgpack is already a dependency (the
guest's door speaks it). Strings keep lone surrogates (`surrogatepass`): file names listed from a
guest may hold them, as they do in-process.

**Bounded both ways** (docs/security.md, "The pool's and Ray's channels"). `pack` refuses a
message over `MAX_MESSAGE` (`MessageTooLarge`: the sender answers with an error instead).
`unpack` decodes a message of at most `MAX_MESSAGE` bytes under a budget, so what a hostile
sender can make the receiver hold is a small multiple of what it sent: no declared length may
exceed the bytes that are there (msgpack's own limits, which `unpackb` ties to the data's length);
nesting stops at msgpack's stack of 1024 levels; at most one array per `ARRAY_BYTES` and one
map per `MAP_BYTES` bytes of message (an empty list costs 64 bytes of Python for 1 byte of
msgpack, a map of one entry ~190 for 3), and whatever its size at most `MAX_ARRAYS` arrays,
`MAX_MAPS` maps and `MAX_ITEMS` items; an extension is one level deep (a model's fields are
plain data), and its fields share the message's budget; msgpack's own extension (-1, a
`Timestamp`, which msgpack decodes without asking `ext_hook`) is refused wherever it is, so
only plain data and allow-listed models cross. Anything else is a `BadMessage`, and so is
whatever raises while a message is decoded or its models validated (a `RecursionError` from a
model that recurses included: the receiver never sees an exception other than `BadMessage`). What a
message can then cost in Python objects is at most ~40 times its size (1-byte integers outside
CPython's small-int cache, each a pointer and an object) and ~350 MB whatever its size (4 M
short strings, 512 K empty arrays, 256 K maps), where an unbounded decode of 64 MiB could cost
~4.5 GB; honest messages are mostly strings and bytes, ~1-3 times their size.
tests/test_channels.py measures it.
"""

from __future__ import annotations

from typing import Any, Callable

import msgpack
from msgpack import Timestamp
from pydantic import BaseModel

from ..execution import Context, Execution, ExecutionError, OutputMessage, Result
from ..limits import Limits
from ..events import (CellRun, CommandEnded, CommandStarted, EgressEvent, FileEvent, LifecycleEvent, LimitEvent,
                      SampleEvent, ToolEvent)
from ..security.audit import AuditEvent
from ..models import (CommandResult, EntryInfo, FilesystemEvent, ProcessInfo, PtySize, SandboxInfo,
                     SandboxMetrics, Snapshot, WriteInfo)
from ..wire import (CellErrorLine, CellLogLine, CellResultLine, CreateContext, CreatePty, CreateSandbox,
                    EndLine, EndOfExecutionLine, ErrorBody, ExceptionLine, ExecutionCountLine, OutputLine,
                    PtyLine, ResumeSandbox, RunCode, RunCommand, StartLine)

MODEL = 1  # the one extension type: [name, fields]
MODELS: dict[str, type[BaseModel]] = {cls.__name__: cls for cls in (
    CreateSandbox, RunCommand, CreatePty, RunCode, CreateContext, Limits, SandboxInfo, EntryInfo,
    WriteInfo, ProcessInfo, Context, CommandResult, OutputMessage, ExecutionError, ErrorBody,
    AuditEvent, SandboxMetrics, FilesystemEvent, Snapshot, ResumeSandbox,
    # a sandbox's events (events.py: sbx.events())
    LifecycleEvent, CommandStarted, CommandEnded, CellRun, FileEvent, EgressEvent, ToolEvent, LimitEvent, SampleEvent,
    # a stream's lines (_lines.py), as the server's NDJSON carries them
    StartLine, OutputLine, PtyLine, EndLine, ExceptionLine, CellLogLine, CellResultLine, CellErrorLine,
    ExecutionCountLine, EndOfExecutionLine)}
MAX_MESSAGE = 64 << 20  # bytes of one message, either way (file chunks and output batches are <= 1 MiB)
# Messages of one stream a worker may send ahead of its reader (pool.py `Worker.stream`): the
# reader grants more as it takes them (`credit`), so a slow reader makes the worker wait (where
# a cell's later writes join those waiting) instead of queueing in the pool's process.
STREAM_WINDOW = 32
ARRAY_BYTES = 2  # at least this many bytes of message per array in it (a chart's [x, y] points: 3)...
MAP_BYTES = 16  # ...and per map (a model's fields, a chart element's)...
MIN_CONTAINERS = 4096  # ...beyond this many of each (a small message may be all structure)
MAX_ARRAYS = 1 << 19  # and whatever the message's size, at most this many arrays (~35 MB of lists),
MAX_MAPS = 1 << 18  # maps (100 000 files listed are 100 000 maps),
MAX_ITEMS = 4 << 20  # and items (array elements, map keys and values; those files: ~2.3 M)
CHECKED = 1 << 20  # a message larger than this is checked against the budget before it is sent


class BadMessage(ValueError):
    """A message that is not one: too large, over its budget, malformed, or naming a type
    outside the allow-list."""


class MessageTooLarge(ValueError):
    """A message over `MAX_MESSAGE` bytes (or over the budget), refused by its sender."""

    def __init__(self, size: int, why: str = "") -> None:
        super().__init__(why or f"{size} bytes, more than a message may carry ({MAX_MESSAGE} bytes)")
        self.size = size


def _result(fields: Any) -> Result:
    return CellResultLine.model_validate(fields).to_result()  # rebuilds the chart's class


def _execution(fields: Any) -> Execution:
    """An `Execution`, its results' charts rebuilt as their classes; every other field as it is
    (a field added to `Execution` crosses with no change here)."""
    if not isinstance(fields, dict) or not isinstance(fields.get("results", []), list):
        raise BadMessage("an Execution's fields must be a map with a list of results")
    return Execution.model_validate({**fields, "results": [_result(r) for r in fields.get("results", [])]})


def _pty_size(fields: Any) -> PtySize:
    if not (isinstance(fields, list) and len(fields) == 2 and all(type(f) is int for f in fields)):
        raise BadMessage("a PtySize is [rows, cols]")
    return PtySize(rows=fields[0], cols=fields[1])


SPECIAL: dict[str, Callable[[Any], Any]] = {"Result": _result, "Execution": _execution, "PtySize": _pty_size}


def _default(obj: Any) -> msgpack.ExtType:
    if isinstance(obj, PtySize):
        name, fields = "PtySize", [obj.rows, obj.cols]
    elif isinstance(obj, (Result, Execution)) or type(obj).__name__ in MODELS:
        name, fields = type(obj).__name__, obj.model_dump(mode="json")
    else:
        raise TypeError(f"cannot send a {type(obj).__name__} to or from a worker")
    return msgpack.ExtType(MODEL, _packb([name, fields]))


def _packb(message: Any) -> bytes:
    return msgpack.packb(message, default=_default, use_bin_type=True, unicode_errors="surrogatepass")


# bytes that open an array or a map: a message with no more of them than its budget allows for
# maps (the stricter) cannot break it, and is sent without a check
_OPENS = bytes([*range(0x80, 0xA0), 0xDC, 0xDD, 0xDE, 0xDF])
_NOT_OPENS = bytes(b for b in range(256) if b not in _OPENS)


def pack(message: Any) -> bytes:
    """`message` as one message; `MessageTooLarge` over `MAX_MESSAGE` or over the receiver's
    budget (an honest answer the receiver would take for an attack — a cell's result of 16 000
    empty lists in 16 KB — is an error, never a lost worker: checked past `CHECKED` bytes, or
    when it has more bytes that could open a container than the budget allows maps), `TypeError`
    (or `ValueError`, `OverflowError`) for what msgpack and the allow-list cannot carry."""
    data = _packb(message)
    if len(data) > MAX_MESSAGE:
        raise MessageTooLarge(len(data))
    if len(data) > CHECKED or len(data.translate(None, _NOT_OPENS)) > len(data) // MAP_BYTES + MIN_CONTAINERS:
        try:
            unpack(data)
        except BadMessage as exc:
            raise MessageTooLarge(len(data), str(exc)) from None
    return data


# How an extension of type -1 (0xff) of 4, 8 or 12 bytes, the only Timestamps msgpack decodes,
# can begin (fixext 4, fixext 8, ext 8/16/32 of length 12): a message without any of these
# holds none, and is decoded without looking for one (~20% faster on messages of many arrays).
STAMP_HEADERS = (b"\xd6\xff", b"\xd7\xff", b"\xc7\x0c\xff", b"\xc8\x00\x0c\xff", b"\xc9\x00\x00\x00\x0c\xff")
_TIMESTAMP = "a msgpack Timestamp (extension type -1) in a message: not a type that crosses"


def _top(value: Any) -> Any:
    """A message's top-level value, which no hook sees."""
    if type(value) is Timestamp:
        raise BadMessage(_TIMESTAMP)
    return value


class _Budget:
    """One message's decoding: its arrays, maps and items counted, its extensions decoded one
    level deep."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.arrays = min(size // ARRAY_BYTES + MIN_CONTAINERS, MAX_ARRAYS)
        self.maps = min(size // MAP_BYTES + MIN_CONTAINERS, MAX_MAPS)
        self.items = MAX_ITEMS

    def array(self, value: Any) -> Any:
        self.arrays -= 1
        self.items -= len(value)
        if self.arrays < 0:
            raise BadMessage(f"more arrays than a message of {self.size} bytes may hold (one per "
                             f"{ARRAY_BYTES} bytes beyond {MIN_CONTAINERS}, {MAX_ARRAYS} at most)")
        return self._counted(value)

    def map(self, value: Any) -> Any:
        self.maps -= 1
        self.items -= 2 * len(value)
        if self.maps < 0:
            raise BadMessage(f"more maps than a message of {self.size} bytes may hold (one per "
                             f"{MAP_BYTES} bytes beyond {MIN_CONTAINERS}, {MAX_MAPS} at most)")
        return self._counted(value)

    def _counted(self, value: Any) -> Any:
        if self.items < 0:
            raise BadMessage(f"more than {MAX_ITEMS} items in a message")
        return value

    def ext(self, code: int, data: bytes) -> Any:
        if code != MODEL:
            raise BadMessage(f"unknown extension type {code} in a message")
        found = _top(self._unpack(data, self._no_ext))
        if not (isinstance(found, list) and len(found) == 2 and isinstance(found[0], str)):
            raise BadMessage("a model in a message is [name, fields]")
        name, fields = found
        if name in SPECIAL:
            return SPECIAL[name](fields)
        cls = MODELS.get(name)
        if cls is None:
            raise BadMessage(f"unexpected type {name[:100]!r} in a message")
        return cls.model_validate(fields)

    def _no_ext(self, code: int, data: bytes) -> Any:
        raise BadMessage("a model's fields hold another extension type")

    def _stamped_array(self, value: Any) -> Any:
        if Timestamp in map(type, value):
            raise BadMessage(_TIMESTAMP)
        return self.array(value)

    def _stamped_map(self, value: Any) -> Any:
        if Timestamp in map(type, value.values()) or Timestamp in map(type, value):
            raise BadMessage(_TIMESTAMP)
        return self.map(value)

    def _unpack(self, data: bytes, ext: Callable[[int, bytes], Any]) -> Any:
        stamped = any(header in data for header in STAMP_HEADERS)  # else no Timestamp can be in it
        return msgpack.unpackb(data, ext_hook=ext, list_hook=self._stamped_array if stamped else self.array,
                               object_hook=self._stamped_map if stamped else self.map,
                               max_array_len=min(len(data), MAX_ITEMS), max_map_len=min(len(data), MAX_ITEMS) // 2,
                               raw=False, unicode_errors="surrogatepass", strict_map_key=False)


def check_plain(data: bytes) -> None:
    """`BadMessage` unless `data` is plain msgpack (no extension types) within a message's budget:
    for bytes another decoder will read (a host tool's arguments from a worker)."""
    budget = _Budget(len(data))
    try:
        _top(budget._unpack(data, budget._no_ext))
    except BadMessage:
        raise
    except Exception as exc:  # whatever msgpack raises (and RecursionError, MemoryError's kin)
        raise BadMessage(f"{type(exc).__name__}: {str(exc)[:300]}") from None


def unpack(data: bytes) -> Any:
    """One message, decoded within its budget; `BadMessage` for anything else: whatever raises
    while it is decoded and its models validated (a model whose fields do not validate, one
    whose validation recursed too deep) is a `BadMessage` naming the exception."""
    if len(data) > MAX_MESSAGE:
        raise BadMessage(f"a message of {len(data)} bytes, more than {MAX_MESSAGE}")
    budget = _Budget(len(data))
    try:
        return _top(budget._unpack(data, budget.ext))
    except BadMessage:
        raise
    except Exception as exc:  # msgpack's errors, pydantic's ValidationError, RecursionError...: never past here
        raise BadMessage(f"{type(exc).__name__}: {str(exc)[:300]}") from None
