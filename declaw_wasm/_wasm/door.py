"""The door's wire, host side: frames decoded within bounds, requests checked against their op's
declaration before any handler sees them.

A guest's door request is one msgpack frame (`_host.call(bytes)`; shims.py's `DoorTransport`
reads it from the guest's memory). Two things stand between those bytes and a handler:

1. `decode(frame)`: a walk over the frame's structure, without building anything, refuses a
   frame that nests deeper than MAX_DEPTH, holds more than MAX_ITEMS values, declares more
   items than it has bytes, carries extension types, or would take more host memory to decode
   than MEMORY_FACTOR times its size (plus MEMORY_SLACK). msgpack's own limits do not bound
   that: a 16 MiB frame of empty arrays decodes to 16 million lists, 1.2 GB of host memory and
   seconds of the GIL. Only then does msgpack decode it. Host tools' arguments (a `payload`
   field, msgpack bytes of `[args, kwargs]`) are decoded the same way (_local/tools.py).
2. `Op.check(request)`: every op declares its request fields once, beside its handler (an
   `Op` with a `Field` per name: type, length or count, characters, range, required, None
   allowed; lists and maps declare their items). The one dispatcher (_local/doors.py) checks
   a request against its op before any handler runs: an unknown field, a wrong type, an
   over-long value, too many items or a character the field does not allow is refused with
   a `RequestError` naming the op and the field, answered to the guest as an error reply, and
   the handler never sees the request. Handlers get a dict of the declared fields only;
   `watch_reads` (tests) makes reading any other name fail.

The memory model counts CPython 3.11's sizes on 64 bits: a list 56 bytes and 8 a slot, a dict
64 and 104 an entry (the table at two-thirds load, a resize's two tables, and the
interned key's entry: msgpack interns str keys), a str 49 plus
its length (ASCII) or 76 plus four times its bytes, bytes 33 plus their length, an int 32 and a
float 24 (small ints, None, booleans and one-character strings are shared objects).
"""

from __future__ import annotations

import math
import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Optional

import msgpack

MAX_FRAME = 16 << 20  # bytes of one request (and of one answer)
MAX_DEPTH = 64  # nesting of arrays and maps in one frame
MAX_ITEMS = 1 << 20  # values inside arrays and maps, in all, in one frame
MEMORY_FACTOR = 32  # decoded size at most this many times the frame's...
MEMORY_SLACK = 1 << 20  # ...plus this
SMALL_FRAME = MAX_DEPTH  # a frame this small cannot pass any bound: not walked


class FrameError(ValueError):
    """A frame the door refuses to decode (the message says which bound it broke)."""


# -- frames ---------------------------------------------------------------------------------------

def _no_ext(code: int, data: bytes) -> Any:
    raise FrameError("extension types are not door values")


# bytes that open a non-empty array or map: a frame with no more of them than MAX_DEPTH cannot
# nest deeper
_NESTING = bytes([*range(0x81, 0x90), *range(0x91, 0xA0), 0xDC, 0xDD, 0xDE, 0xDF])
_NOT_NESTING = bytes(b for b in range(256) if b not in _NESTING)
MID_FRAME = 1024  # frames up to this size with few nesting bytes are not walked either


def decode(frame: bytes, strict_map_key: bool = True) -> Any:
    """The value in `frame`, decoded only if it keeps every bound (module docstring); else
    FrameError. Strings must be UTF-8; map keys str or bytes unless `strict_map_key` is False.

    Frames of at most SMALL_FRAME bytes, and of at most MID_FRAME bytes holding at most
    MAX_DEPTH bytes that could open a container, cannot break a bound (at most 1024 values,
    64 levels, each container's declared length at most the frame's: well under MEMORY_SLACK),
    so they are not walked: most requests are. A timestamp extension decodes as a number (any
    other extension is refused)."""
    size = len(frame)
    if size > MAX_FRAME:
        raise FrameError(f"the frame is {size} bytes; the door carries at most {MAX_FRAME}")
    if size > SMALL_FRAME and (size > MID_FRAME or len(frame.translate(None, _NOT_NESTING)) > MAX_DEPTH):
        measure(frame)
    try:
        return msgpack.unpackb(frame, raw=False, ext_hook=_no_ext, timestamp=1, strict_map_key=strict_map_key)
    except FrameError:
        raise
    except Exception as exc:  # ExtraData, ValueError, UnicodeDecodeError, TypeError (a key)...
        raise FrameError(f"not a msgpack value ({type(exc).__name__})") from None


# What each first byte of a msgpack value is: (kind, bytes of length or payload that follow,
# fixed count or length, or the cost of a scalar)
_SCALAR, _STR, _BIN, _ARRAY, _MAP, _BAD = range(6)


def _kinds() -> tuple[tuple[int, int, int], ...]:
    table = [(_BAD, 0, 0)] * 256
    for b in range(0x80):
        table[b] = (_SCALAR, 0, 0)  # positive fixint: a shared small int
    for b in range(0xE0, 0x100):
        table[b] = (_SCALAR, 0, 32)  # negative fixint
    for b in range(0x80, 0x90):
        table[b] = (_MAP, 0, b & 0x0F)
    for b in range(0x90, 0xA0):
        table[b] = (_ARRAY, 0, b & 0x0F)
    for b in range(0xA0, 0xC0):
        table[b] = (_STR, 0, b & 0x1F)
    table[0xC0] = table[0xC2] = table[0xC3] = (_SCALAR, 0, 0)  # nil, false, true
    table[0xC4], table[0xC5], table[0xC6] = (_BIN, 1, 0), (_BIN, 2, 0), (_BIN, 4, 0)
    table[0xCA], table[0xCB] = (_SCALAR, 4, 24), (_SCALAR, 8, 24)  # floats
    table[0xCC] = (_SCALAR, 1, 0)  # uint8: a shared small int
    for b, width in ((0xCD, 2), (0xCE, 4), (0xCF, 8), (0xD0, 1), (0xD1, 2), (0xD2, 4), (0xD3, 8)):
        table[b] = (_SCALAR, width, 36)
    table[0xD9], table[0xDA], table[0xDB] = (_STR, 1, 0), (_STR, 2, 0), (_STR, 4, 0)
    table[0xDC], table[0xDD] = (_ARRAY, 2, 0), (_ARRAY, 4, 0)
    table[0xDE], table[0xDF] = (_MAP, 2, 0), (_MAP, 4, 0)
    return tuple(table)  # 0xc1 (never used) and the extension types (0xc7-0xc9, 0xd4-0xd8): _BAD


_KINDS = _kinds()


def measure(frame: bytes) -> tuple[int, int, int]:  # noqa: C901 (one flat loop: it is per request)
    """Walk `frame`'s msgpack structure without decoding it: (values inside containers, deepest
    nesting, estimated bytes of host memory once decoded), or FrameError if it breaks a bound.
    About 0.3 µs a value."""
    size = len(frame)
    budget = MEMORY_FACTOR * size + MEMORY_SLACK
    i = items = cost = depth = deepest = 0
    stack: list[int] = []
    left = 1  # values still to read at the current level
    kinds = _KINDS
    try:
        while True:
            if not left:
                if not stack:
                    break
                left = stack.pop()
                depth -= 1
                continue
            left -= 1
            kind, width, n = kinds[frame[i]]
            i += 1
            if kind == _SCALAR:
                i += width
                cost += n
                continue
            if kind == _BAD:
                raise FrameError("extension types are not door values" if frame[i - 1] != 0xC1
                                 else "0xc1 is not a msgpack value")
            if width:
                n = int.from_bytes(frame[i:i + width], "big")
                i += width
            if kind == _STR or kind == _BIN:
                if n > size - i:
                    raise FrameError("a string or bytes value runs past the end of the frame")
                if n > 1:  # (empty and one-character values are shared objects)
                    if kind == _BIN:
                        cost += 33 + n
                    elif n <= 256 and frame[i:i + n].isascii():
                        cost += 49 + n
                    else:
                        cost += 80 + 5 * n
                i += n
                continue
            if n > size - i:  # every item takes a byte at least
                raise FrameError(f"an {'map' if kind == _MAP else 'array'} declares {n} items, more "
                                 "than the frame has bytes left")
            if kind == _MAP:
                cost += 64 + 104 * n
                n *= 2
            else:
                cost += 56 + 8 * n
            if n:
                items += n
                depth += 1
                if items > MAX_ITEMS:
                    raise FrameError(f"the frame holds more than {MAX_ITEMS} values")
                if depth > MAX_DEPTH:
                    raise FrameError(f"the frame nests deeper than {MAX_DEPTH} levels")
                if cost > budget:
                    raise FrameError(f"the frame would take more than {MEMORY_FACTOR} times its size "
                                     "of host memory to decode")
                deepest = max(deepest, depth)
                stack.append(left)
                left = n
    except IndexError:
        raise FrameError("the frame ends inside a value") from None
    if i != size:
        raise FrameError("the frame ends inside a value" if i > size else
                         "the frame has bytes after its value")
    if cost > budget:
        raise FrameError(f"the frame would take more than {MEMORY_FACTOR} times its size of host "
                         "memory to decode")
    return items, deepest, cost


# -- declarations ------------------------------------------------------------------------------

class RequestError(ValueError):
    """A request its op's declaration refuses: the op, the field (with its place in a list or
    map: `present['x']`, `read[3]`) and why."""

    def __init__(self, op: str, field: str, why: str) -> None:
        self.op, self.field, self.why = op, field, why
        super().__init__(f"{op}: {field}: {why}" if field else f"{op}: {why}")

    def reply(self) -> dict[str, Any]:
        """The error the guest gets: one dict every guest-side caller reads (the network's
        `kind`/`errno`, host tools' `type`/`builtin`; `message` for all)."""
        return {"error": {"kind": "invalid", "errno": "EINVAL", "type": "ValueError", "builtin": True,
                          "message": str(self), "op": self.op, "field": self.field}}


class UndeclaredField(AssertionError):
    """A handler read a field its op does not declare (a host bug; see `watch_reads`)."""


def shown(value: Any, limit: int = 60) -> str:
    """A guest value for an error message: its repr, cut short (never the whole value)."""
    if isinstance(value, (str, bytes)):
        text = repr(value[:limit])
    elif isinstance(value, (list, dict)):
        text = f"a {type(value).__name__} of {len(value)} items"
    else:
        try:
            text = repr(value)
        except Exception:
            text = f"a {type(value).__name__}"
    return text if len(text) <= limit + 20 else text[:limit] + "..."


Problem = Optional[tuple[str, str]]  # None, or (where inside the value, why): a field's verdict


@dataclass(frozen=True)
class Chars:
    """Which characters a string field allows: a name for messages, and a test of the whole
    string (C-speed: a regular expression's fullmatch or a str method)."""

    name: str
    test: Callable[[str], Any]

    @staticmethod
    def only(name: str, char_class: str) -> "Chars":
        """The characters of a regular-expression class, e.g. `only("a name", "A-Za-z0-9._-")`."""
        return Chars(name, re.compile(f"[{char_class}]*").fullmatch)

    @staticmethod
    def excluding(name: str, char_class: str) -> "Chars":
        """Any character but those of a class, e.g. `excluding("no NUL", "\\x00")`."""
        search = re.compile(f"[{char_class}]").search
        return Chars(name, lambda text: search(text) is None)


ANY_TEXT = Chars("any text", lambda text: True)
NO_NUL = Chars.excluding("no NUL", "\x00")
PRINTABLE = Chars("printable characters (no control characters, no line or paragraph separators)",
                  str.isprintable)
ASCII_PRINTABLE = Chars.only("printable ASCII", " -~")


@dataclass(frozen=True)
class Field:
    """One field of a request: `required`, `null` (None allowed), and what its values must be
    (the subclasses). `check(value)` is None for a good value, else (where, why)."""

    required: bool = field(default=False, kw_only=True)
    null: bool = field(default=False, kw_only=True)
    doc: str = field(default="", kw_only=True)

    kind = "value"

    def check(self, value: Any) -> Problem:
        raise NotImplementedError

    def describe(self) -> str:
        return self.kind


@dataclass(frozen=True)
class Int(Field):
    low: int = -(1 << 63)
    high: int = (1 << 64) - 1
    kind = "int"

    def check(self, value: Any) -> Problem:
        if type(value) is int and self.low <= value <= self.high:
            return None
        return "", f"must be a whole number from {self.low} to {self.high}, not {shown(value)}"

    def describe(self) -> str:
        return f"int {self.low}..{self.high}"


@dataclass(frozen=True)
class Num(Field):
    """An int or a float (not NaN), from `low` to `high`."""

    low: float = -math.inf
    high: float = math.inf
    kind = "number"

    def check(self, value: Any) -> Problem:
        if (type(value) is float or type(value) is int) and self.low <= value <= self.high:
            return None
        return "", f"must be a number from {self.low:g} to {self.high:g}, not {shown(value)}"

    def describe(self) -> str:
        return f"number {self.low:g}..{self.high:g}"


@dataclass(frozen=True)
class Bool(Field):
    kind = "bool"

    def check(self, value: Any) -> Problem:
        return None if type(value) is bool else ("", f"must be true or false, not {shown(value)}")


@dataclass(frozen=True)
class Str(Field):
    max_len: int = 1024  # characters
    chars: Chars = ANY_TEXT
    min_len: int = 0
    kind = "str"

    def check(self, value: Any) -> Problem:
        if type(value) is not str:
            return "", f"must be a string, not {shown(value)}"
        if not self.min_len <= len(value) <= self.max_len:
            return "", f"must be {self.min_len} to {self.max_len} characters, not {len(value)}"
        if not self.chars.test(value):
            return "", f"must hold {self.chars.name} only: {shown(value)}"
        return None

    def describe(self) -> str:
        return f"str of {self.min_len}..{self.max_len} ({self.chars.name})"


@dataclass(frozen=True)
class Word(Field):
    """One of a few fixed strings (a mode)."""

    words: tuple[str, ...] = ()
    kind = "word"

    def check(self, value: Any) -> Problem:
        if type(value) is str and value in self.words:
            return None
        return "", f"must be one of {', '.join(self.words)}, not {shown(value)}"

    def describe(self) -> str:
        return "one of " + ", ".join(self.words)


@dataclass(frozen=True)
class Bytes(Field):
    max_len: int = MAX_FRAME
    kind = "bytes"

    def check(self, value: Any) -> Problem:
        if type(value) is not bytes:
            return "", f"must be bytes, not {shown(value)}"
        if len(value) > self.max_len:
            return "", f"must be at most {self.max_len} bytes, not {len(value)}"
        return None

    def describe(self) -> str:
        return f"bytes of at most {self.max_len}"


def _item_problem(spec: Field, item: Any) -> Problem:
    """What is wrong with one item of a list or map declared `spec` (None only where it allows)."""
    if item is None:
        return None if spec.null else ("", "must not be None")
    return spec.check(item)


@dataclass(frozen=True)
class List(Field):
    items: Field = field(default_factory=lambda: Json())
    max_items: int = 1024
    kind = "list"

    def check(self, value: Any) -> Problem:
        if type(value) is not list:
            return "", f"must be a list, not {shown(value)}"
        if len(value) > self.max_items:
            return "", f"must have at most {self.max_items} items, not {len(value)}"
        for index, item in enumerate(value):
            problem = _item_problem(self.items, item)
            if problem is not None:
                return f"[{index}]{problem[0]}", problem[1]
        return None

    def describe(self) -> str:
        return f"list of at most {self.max_items} ({self.items.describe()})"


@dataclass(frozen=True)
class Map(Field):
    keys: Str = field(default_factory=lambda: Str())
    values: Field = field(default_factory=lambda: Json())
    max_items: int = 1024
    kind = "map"

    def check(self, value: Any) -> Problem:
        if type(value) is not dict:
            return "", f"must be a map, not {shown(value)}"
        if len(value) > self.max_items:
            return "", f"must have at most {self.max_items} entries, not {len(value)}"
        for key, item in value.items():
            problem = self.keys.check(key)
            if problem is not None:
                return f"[{shown(key, 30)}]", f"(the key) {problem[1]}"
            problem = _item_problem(self.values, item)
            if problem is not None:
                return f"[{key[:30]!r}]{problem[0]}", problem[1]
        return None

    def describe(self) -> str:
        return f"map of at most {self.max_items} ({self.keys.describe()} -> {self.values.describe()})"


@dataclass(frozen=True)
class Keyed(Field):
    """A map whose `known` keys have declarations of their own; any other key (a `keys`
    string) takes `others`. E.g. a result bundle: "image/png" must be text, any other MIME
    type any plain value."""

    known: Mapping[str, Field] = field(default_factory=dict)
    keys: Str = field(default_factory=lambda: Str())
    others: Field = field(default_factory=lambda: Json())
    max_items: int = 1024
    kind = "map"

    def check(self, value: Any) -> Problem:
        if type(value) is not dict:
            return "", f"must be a map, not {shown(value)}"
        if len(value) > self.max_items:
            return "", f"must have at most {self.max_items} entries, not {len(value)}"
        for key, item in value.items():
            spec = self.known.get(key) if type(key) is str else None
            if spec is None:
                problem = self.keys.check(key)
                if problem is not None:
                    return f"[{shown(key, 30)}]", f"(the key) {problem[1]}"
                spec = self.others
            problem = _item_problem(spec, item)
            if problem is not None:
                return f"[{key[:30]!r}]{problem[0]}", problem[1]
        return None

    def describe(self) -> str:
        known = ", ".join(f"{key}: {spec.describe()}" for key, spec in self.known.items())
        return f"map of at most {self.max_items} ({known}; other {self.keys.describe()} -> {self.others.describe()})"


@dataclass(frozen=True)
class Json(Field):
    """Any plain value: None, bool, int, float, str, bytes, and lists and maps of them (what a
    result bundle or a host tool's arguments carry). Its nesting, count and size are those of
    the frame's own bounds (`decode`); `decode` lets nothing else through."""

    null: bool = field(default=True, kw_only=True)  # (None is one of its values)
    kind = "value"

    def check(self, value: Any) -> Problem:
        return None

    def describe(self) -> str:
        return "any plain value"


class Op:
    """One door op: its name, its request fields (besides "op"), what it answers, what it does;
    `refusal` makes a refused request's answer in the op's own shape (default: the error reply
    every guest-side caller reads, `RequestError.reply`)."""

    __slots__ = ("name", "fields", "reply", "doc", "names", "refusal", "_checks", "_required")

    def __init__(self, name: str, fields: Mapping[str, Field], reply: str, doc: str,
                 refusal: Optional[Callable[[RequestError], Any]] = None) -> None:
        self.name = name
        self.fields: dict[str, Field] = dict(fields)
        self.reply = reply
        self.doc = doc
        self.refusal = refusal
        self.names = frozenset(self.fields)
        self._checks = {key: (spec.check, spec.null) for key, spec in self.fields.items()}
        self._required = frozenset(key for key, spec in self.fields.items() if spec.required)

    @property
    def request(self) -> tuple[str, ...]:
        """The field names, in declared order."""
        return tuple(self.fields)

    def check(self, request: dict[Any, Any]) -> dict[str, Any]:
        """The request's fields (without "op") if the declaration allows every one; else
        RequestError naming the field."""
        fields: dict[str, Any] = {}
        checks = self._checks
        for key, value in request.items():
            if key == "op":
                continue
            entry = checks.get(key)
            if entry is None:
                raise RequestError(self.name, shown(key, 40) if type(key) is not str else key[:40],
                                   f"not a field of {self.name} (its fields: "
                                   f"{', '.join(self.fields) or 'none'})")
            if value is None:
                if not entry[1]:
                    raise RequestError(self.name, key, "must not be None")
            else:
                problem = entry[0](value)
                if problem is not None:
                    raise RequestError(self.name, key + problem[0], problem[1])
            fields[key] = value
        if self._required and not self._required <= fields.keys():
            missing = sorted(self._required - fields.keys())
            raise RequestError(self.name, missing[0], "is required")
        watch = _watch
        if watch is not None:
            return _Watched(self, fields, watch)
        return fields

    def refused(self, exc: RequestError) -> Any:
        """The answer to a request `check` refused."""
        return exc.reply() if self.refusal is None else self.refusal(exc)

    def __repr__(self) -> str:
        return f"Op({self.name!r}, {', '.join(self.fields)})"


# -- what handlers read (tests) -----------------------------------------------------------------

@dataclass
class Reads:
    """What handlers read while `watch_reads` is on: (op, field) pairs, declared or not."""

    read: set[tuple[str, str]] = field(default_factory=set)
    undeclared: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


_watch: Optional[Reads] = None


@contextmanager
def watch_reads() -> Iterator[Reads]:
    """While on (tests only), handlers get their fields in a mapping that records every name
    read and raises UndeclaredField for a name the op does not declare."""
    global _watch
    previous, _watch = _watch, Reads()
    try:
        yield _watch
    finally:
        _watch = previous


class _Watched(dict[str, Any]):
    __slots__ = ("_op", "_reads")

    def __init__(self, op: Op, fields: dict[str, Any], reads: Reads) -> None:
        super().__init__(fields)
        self._op, self._reads = op, reads

    def _read(self, key: Any) -> None:
        with self._reads.lock:
            self._reads.read.add((self._op.name, str(key)))
            if key not in self._op.names:
                self._reads.undeclared.append((self._op.name, str(key)))
                raise UndeclaredField(f"a handler of {self._op.name} read {key!r}, which it does not "
                                      "declare")

    def __getitem__(self, key: Any) -> Any:
        self._read(key)
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        self._read(key)
        return super().get(key, default)

    def __contains__(self, key: Any) -> bool:
        self._read(key)
        return super().__contains__(key)

    def pop(self, key: Any, *default: Any) -> Any:
        self._read(key)
        return super().pop(key, *default)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        self._read(key)
        return super().setdefault(key, default)
