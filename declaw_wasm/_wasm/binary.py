"""A small reader/writer for the WebAssembly binary format: just what the warm image needs.

The warm image's builder must add exports, change the memory's initial size, a global's initial
value, and the data segments, leaving every other byte of the 100 MB module as it was. The
well-kept Python options parse far more than that (and hold the whole module as objects), so
this reads the module as a list of raw sections and re-encodes only the ones it changes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

MAGIC = b"\x00asm\x01\x00\x00\x00"
CUSTOM, TYPE, IMPORT, FUNCTION, TABLE, MEMORY, GLOBAL, EXPORT, START, ELEMENT, CODE, DATA, DATACOUNT = range(13)
EXPORT_FUNC, EXPORT_GLOBAL = 0, 3
I32_CONST, END = 0x41, 0x0B


class WasmFormatError(ValueError):
    pass


def read_u(buf: bytes, pos: int) -> tuple[int, int]:
    """An unsigned LEB128 at `pos`: (value, position after it)."""
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise WasmFormatError("truncated LEB128")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 35:
            raise WasmFormatError("LEB128 too long")


def read_s(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            if byte & 0x40:
                result -= 1 << shift
            return result, pos


def u(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def s(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        done = (n == 0 and not byte & 0x40) or (n == -1 and byte & 0x40)
        out.append(byte | (0 if done else 0x80))
        if done:
            return bytes(out)


def name(text: str) -> bytes:
    raw = text.encode()
    return u(len(raw)) + raw


def read_name(buf: bytes, pos: int) -> tuple[str, int]:
    length, pos = read_u(buf, pos)
    return bytes(buf[pos:pos + length]).decode(), pos + length


@dataclass
class Section:
    id: int
    payload: bytes

    @property
    def custom_name(self) -> str | None:
        return read_name(self.payload, 0)[0] if self.id == CUSTOM else None


def code_size(data: bytes) -> int:
    """The size of the code section (what compiling a module takes scales with), 0 if it has
    none: the section headers are walked, nothing is copied."""
    if data[:8] != MAGIC:
        raise WasmFormatError("not a WebAssembly 1.0 module")
    pos = 8
    while pos < len(data):
        sid = data[pos]
        size, pos = read_u(data, pos + 1)
        if sid == CODE:
            return size
        pos += size
    return 0


class Module:
    """A module as an ordered list of raw sections."""

    def __init__(self, sections: list[Section]) -> None:
        self.sections = sections

    @classmethod
    def parse(cls, data: bytes) -> "Module":
        if data[:8] != MAGIC:
            raise WasmFormatError("not a WebAssembly 1.0 module")
        sections, pos = [], 8
        view = memoryview(data)
        while pos < len(data):
            sid = data[pos]
            size, pos = read_u(data, pos + 1)
            if pos + size > len(data):
                raise WasmFormatError(f"section {sid} runs past the end")
            sections.append(Section(sid, bytes(view[pos:pos + size])))
            pos += size
        return cls(sections)

    def encode(self) -> bytes:
        out = [MAGIC]
        for sec in self.sections:
            out += [bytes([sec.id]), u(len(sec.payload)), sec.payload]
        return b"".join(out)

    def section(self, sid: int, custom: str | None = None) -> Section | None:
        for sec in self.sections:
            if sec.id == sid and (custom is None or sec.custom_name == custom):
                return sec
        return None

    def _require(self, sid: int) -> Section:
        sec = self.section(sid)
        if sec is None:
            raise WasmFormatError(f"the module has no section {sid}")
        return sec

    # -- reading --------------------------------------------------------------------------------
    def function_names(self) -> dict[str, int]:
        """Function name → index, from the `name` custom section."""
        sec = self.section(CUSTOM, "name")
        if sec is None:
            raise WasmFormatError("the module has no name section")
        buf = sec.payload
        _, pos = read_name(buf, 0)
        names: dict[str, int] = {}
        while pos < len(buf):
            kind = buf[pos]
            size, pos = read_u(buf, pos + 1)
            end = pos + size
            if kind == 1:  # function names
                count, p = read_u(buf, pos)
                for _ in range(count):
                    index, p = read_u(buf, p)
                    fname, p = read_name(buf, p)
                    names.setdefault(fname, index)
            pos = end
        return names

    def exports(self) -> list[tuple[str, int, int]]:
        buf = self._require(EXPORT).payload
        count, pos = read_u(buf, 0)
        out = []
        for _ in range(count):
            ename, pos = read_name(buf, pos)
            kind = buf[pos]
            index, pos = read_u(buf, pos + 1)
            out.append((ename, kind, index))
        return out

    def memory_limits(self) -> tuple[int, int | None]:
        buf = self._require(MEMORY).payload
        count, pos = read_u(buf, 0)
        if count != 1:
            raise WasmFormatError(f"expected one memory, found {count}")
        flags = buf[pos]
        minimum, pos = read_u(buf, pos + 1)
        maximum = read_u(buf, pos)[0] if flags & 1 else None
        return minimum, maximum

    def globals(self) -> list[tuple[int, bool, bytes]]:
        """(value type, mutable, init expression bytes) of each defined global."""
        sec = self.section(GLOBAL)
        if sec is None:
            return []
        buf = sec.payload
        count, pos = read_u(buf, 0)
        out = []
        for _ in range(count):
            valtype, mutable = buf[pos], bool(buf[pos + 1])
            start = pos = pos + 2
            while buf[pos] != END:  # constant expressions here are one instruction + end
                pos = _skip_const_instr(buf, pos)
            pos += 1
            out.append((valtype, mutable, bytes(buf[start:pos])))
        return out

    def imported_count(self, kind: int) -> int:
        sec = self.section(IMPORT)
        if sec is None:
            return 0
        buf = sec.payload
        count, pos = read_u(buf, 0)
        found = 0
        for _ in range(count):
            _, pos = read_name(buf, pos)
            _, pos = read_name(buf, pos)
            ikind = buf[pos]
            pos += 1
            if ikind == 0:
                _, pos = read_u(buf, pos)
            elif ikind == 1:
                pos += 1
                flags = buf[pos]
                _, pos = read_u(buf, pos + 1)
                if flags & 1:
                    _, pos = read_u(buf, pos)
            elif ikind == 2:
                flags = buf[pos]
                _, pos = read_u(buf, pos + 1)
                if flags & 1:
                    _, pos = read_u(buf, pos)
            elif ikind == 3:
                pos += 2
            elif ikind == 4:
                pos += 1
                _, pos = read_u(buf, pos)
            else:
                raise WasmFormatError(f"unknown import kind {ikind}")
            found += ikind == kind
        return found

    # -- writing --------------------------------------------------------------------------------
    def set_exports(self, exports: list[tuple[str, int, int]]) -> None:
        payload = u(len(exports)) + b"".join(name(n) + bytes([k]) + u(i) for n, k, i in exports)
        self._require(EXPORT).payload = payload

    def set_memory_min(self, pages: int) -> None:
        _, maximum = self.memory_limits()
        flags = 1 if maximum is not None else 0
        payload = u(1) + bytes([flags]) + u(pages) + (u(maximum) if maximum is not None else b"")
        self._require(MEMORY).payload = payload

    def set_global_i32(self, index: int, value: int) -> None:
        entries = self.globals()
        valtype, mutable, _ = entries[index]
        entries[index] = (valtype, mutable, bytes([I32_CONST]) + s(value) + bytes([END]))
        payload = u(len(entries)) + b"".join(bytes([t, int(m)]) + init for t, m, init in entries)
        self._require(GLOBAL).payload = payload

    def set_data(self, segments: list[tuple[int, bytes]]) -> None:
        """Replace all data with active segments (offset, bytes) into memory 0."""
        parts = [u(len(segments))]
        for offset, data in segments:
            parts += [b"\x00", bytes([I32_CONST]), s(_as_i32(offset)), bytes([END]), u(len(data)), data]
        payload = b"".join(parts)
        sec = self.section(DATA)
        if sec is None:
            raise WasmFormatError("the module has no data section")
        sec.payload = payload
        count = self.section(DATACOUNT)
        if count is not None:
            count.payload = u(len(segments))


def _as_i32(value: int) -> int:
    return struct.unpack("<i", struct.pack("<I", value))[0]


def _skip_const_instr(buf: bytes, pos: int) -> int:
    op = buf[pos]
    pos += 1
    if op in (0x41, 0x42, 0x23, 0xD2):  # i32/i64.const, global.get, ref.func
        return read_s(buf, pos)[1] if op in (0x41, 0x42) else read_u(buf, pos)[1]
    if op == 0x43:
        return pos + 4
    if op == 0x44:
        return pos + 8
    if op == 0xD0:
        return pos + 1
    if op == 0xFD:  # v128.const
        return read_u(buf, pos)[1] + 16
    raise WasmFormatError(f"unsupported constant instruction 0x{op:02x}")


def nonzero_segments(memory: bytes, max_gap: int = 64, max_segments: int = 90_000) -> list[tuple[int, bytes]]:
    """Split memory into data segments covering its non-zero bytes.

    Zero runs shorter than `max_gap` stay inside a segment (a segment header costs ~10
    bytes); the gap grows until the count fits under `max_segments` (engines cap it at 100k).
    """
    while True:
        segments = _segments(memory, max_gap)
        if len(segments) <= max_segments:
            return segments
        max_gap *= 2


def _segments(memory: bytes, max_gap: int) -> list[tuple[int, bytes]]:
    import re

    out: list[tuple[int, bytes]] = []
    pattern = re.compile(rb"[^\x00]+(?:\x00{1,%d}[^\x00]+)*" % max_gap)
    for match in pattern.finditer(memory):
        out.append((match.start(), match.group()))
    return out
