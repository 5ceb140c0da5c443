"""msgpack for the network door, small and fast: the guest has only msgpack's pure-Python
fallback, which costs ~0.4 ms per request and answer (it builds a Packer/Unpacker each time).
Network ops are the door's hottest path, and their messages are small dicts of str, int, float,
bool, None, bytes, lists and dicts: this encodes and decodes exactly that, per the msgpack spec
(the host decodes with the real msgpack; tests/egress/test_ops.py checks both agree).
"""

from __future__ import annotations

from struct import pack as _pack
from struct import unpack_from as _unpack_from

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: start-up stays free
    from collections.abc import Callable
    from typing import Any


def pack(obj: object) -> bytes:
    out: list[bytes] = []
    _enc(obj, out.append)
    return b"".join(out)


def _enc(obj: object, put: Callable[[bytes], object]) -> None:  # noqa: C901 (one flat dispatch over msgpack's types)
    if obj is None:
        put(b"\xc0")
    elif obj is True:
        put(b"\xc3")
    elif obj is False:
        put(b"\xc2")
    elif type(obj) is int:
        if 0 <= obj < 0x80:
            put(bytes((obj,)))
        elif -32 <= obj < 0:
            put(bytes((obj & 0xFF,)))
        elif 0 <= obj <= 0xFFFFFFFF:
            put(b"\xce" + _pack(">I", obj))
        elif 0 <= obj <= 0xFFFFFFFFFFFFFFFF:
            put(b"\xcf" + _pack(">Q", obj))
        elif -0x8000000000000000 <= obj < 0:
            put(b"\xd3" + _pack(">q", obj))
        else:
            raise OverflowError("int too large for the door")
    elif type(obj) is float:
        put(b"\xcb" + _pack(">d", obj))
    elif type(obj) is str:
        data = obj.encode("utf-8", "surrogatepass")
        n = len(data)
        put((bytes((0xA0 | n,)) if n < 32 else b"\xd9" + bytes((n,)) if n < 256
             else b"\xdb" + _pack(">I", n)) + data)
    elif isinstance(obj, (bytes, bytearray, memoryview)):
        data = bytes(obj)
        n = len(data)
        put((b"\xc4" + bytes((n,)) if n < 256 else b"\xc6" + _pack(">I", n)) + data)
    elif isinstance(obj, (list, tuple)):
        n = len(obj)
        put(bytes((0x90 | n,)) if n < 16 else b"\xdd" + _pack(">I", n))
        for item in obj:
            _enc(item, put)
    elif isinstance(obj, dict):
        n = len(obj)
        put(bytes((0x80 | n,)) if n < 16 else b"\xdf" + _pack(">I", n))
        for key, value in obj.items():
            _enc(key, put)
            _enc(value, put)
    elif isinstance(obj, int):  # bool handled above; int subclasses (enums)
        _enc(int(obj), put)
    else:
        raise TypeError("cannot send %s through the door" % type(obj).__name__)


def unpack(data: bytes) -> Any:
    value, end = _dec(data, 0)
    if end != len(data):
        raise ValueError("trailing bytes in a door answer")
    return value


def _dec(d: bytes, i: int) -> tuple[Any, int]:  # noqa: C901 (one flat dispatch over msgpack's type bytes)
    b = d[i]
    i += 1
    if b < 0x80:
        return b, i
    if b >= 0xE0:
        return b - 0x100, i
    if 0xA0 <= b <= 0xBF:
        n = b & 0x1F
        return d[i:i + n].decode("utf-8", "surrogatepass"), i + n
    if 0x90 <= b <= 0x9F:
        return _list(d, i, b & 0x0F)
    if 0x80 <= b <= 0x8F:
        return _map(d, i, b & 0x0F)
    if b == 0xC0:
        return None, i
    if b == 0xC2:
        return False, i
    if b == 0xC3:
        return True, i
    if b in (0xC4, 0xC5, 0xC6, 0xD9, 0xDA, 0xDB):
        size = {0xC4: 1, 0xC5: 2, 0xC6: 4, 0xD9: 1, 0xDA: 2, 0xDB: 4}[b]
        n = int.from_bytes(d[i:i + size], "big")
        i += size
        raw = d[i:i + n]
        return (raw if b <= 0xC6 else raw.decode("utf-8", "surrogatepass")), i + n
    if b in (0xCC, 0xCD, 0xCE, 0xCF):
        size = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}[b]
        return int.from_bytes(d[i:i + size], "big"), i + size
    if b in (0xD0, 0xD1, 0xD2, 0xD3):
        size = {0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}[b]
        return int.from_bytes(d[i:i + size], "big", signed=True), i + size
    if b == 0xCA:
        return _unpack_from(">f", d, i)[0], i + 4
    if b == 0xCB:
        return _unpack_from(">d", d, i)[0], i + 8
    if b in (0xDC, 0xDD):
        size = 2 if b == 0xDC else 4
        return _list(d, i + size, int.from_bytes(d[i:i + size], "big"))
    if b in (0xDE, 0xDF):
        size = 2 if b == 0xDE else 4
        return _map(d, i + size, int.from_bytes(d[i:i + size], "big"))
    raise ValueError("unsupported msgpack type 0x%02x in a door answer" % b)


def _list(d: bytes, i: int, n: int) -> tuple[list[Any], int]:
    out = []
    for _ in range(n):
        value, i = _dec(d, i)
        out.append(value)
    return out, i


def _map(d: bytes, i: int, n: int) -> tuple[dict[Any, Any], int]:
    out = {}
    for _ in range(n):
        key, i = _dec(d, i)
        value, i = _dec(d, i)
        out[key] = value
    return out, i
