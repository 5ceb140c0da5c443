"""Tar streams written and read one member at a time, holding nothing per member.

The stdlib's `tarfile.TarFile` keeps every member it writes or reads in `TarFile.members`: a
tree's whole list of names in memory, and a guest can make each name hundreds of KB long
(folders renamed into folders). Our exporters write with `TarWriter` (each header made by
tarfile's public `TarInfo.tobuf`, so tarfile still owns the format) and read with `members`
(tarfile's own `next()`, its list emptied after each member). Both count what each member
costs the export (`exports.ExportBudget.entry`) before it is written or laid out.
"""

from __future__ import annotations

import tarfile
from typing import IO, Any, Iterator, Optional, Protocol

from .exports import ExportBudget, Name

BLOCK = tarfile.BLOCKSIZE
RECORD = tarfile.RECORDSIZE
CHUNK = 1 << 20  # content is read and written in pieces of this size
BUFFER = 256 << 10  # smaller writes (headers, small files) are gathered up to this
_HEADER_TYPES = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE,
                 tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE)


class Readable(Protocol):
    def read(self, n: int = ..., /) -> bytes: ...


class HeaderTooLarge(tarfile.TarError):
    """An extended header (pax, GNU long name) over its reader's bound."""


class BoundedTarInfo(tarfile.TarInfo):
    """Refuses GNU long-name and pax headers over `MAX_HEADER` before tarfile reads them (it
    would read one of any size into memory). Subclass with another `MAX_HEADER` to change it,
    another `REFUSED` for what the refusal raises (a volume archive's: its reader's error)."""

    MAX_HEADER = 1 << 20
    REFUSED: type[Exception] = HeaderTooLarge

    def _proc_member(self, tarfile_: tarfile.TarFile) -> Any:
        if self.type in _HEADER_TYPES and self.size > self.MAX_HEADER:
            raise self.REFUSED(f"archive member header of {self.size} bytes (limit {self.MAX_HEADER})")
        return super()._proc_member(tarfile_)  # type: ignore[misc]


def members(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    """The members of a tar opened in stream mode ("r|"), one at a time, none kept."""
    while True:
        member = tar.next()
        tar.members.clear()  # type: ignore[attr-defined]  # tarfile's list of what it read
        if member is None:
            return
        yield member


def header_bytes(member: tarfile.TarInfo) -> int:
    """What a member read from a stream took besides its content: its headers (pax and GNU
    ones included) and the padding after its content."""
    return member.offset_data - member.offset + (-member.size % BLOCK if member.isreg() else 0)


class TarWriter:
    """An uncompressed PAX tar written to `out` member by member, each counted in `budget`
    (when given) before it is written: one entry, its header bytes and the padding after its
    content (the content itself is the caller's to count, from the descriptor it reads).
    Small members are gathered into writes of `BUFFER` bytes."""

    def __init__(self, out: IO[bytes], budget: Optional[ExportBudget] = None) -> None:
        self.out = out
        self.budget = budget
        self.offset = 0
        self._buf = bytearray()

    def add(self, info: tarfile.TarInfo, content: Optional[Readable] = None, name: Name = "") -> None:
        """Write `info` and, for a regular file, exactly `info.size` bytes read from `content`
        (which must give them: wrap a file that can change in `exports.Exactly`)."""
        header = info.tobuf(tarfile.PAX_FORMAT, tarfile.ENCODING, "surrogateescape")
        size = info.size if info.isreg() else 0
        pad = -size % BLOCK
        if self.budget is not None:
            self.budget.entry(name or info.name, len(header) + pad)
        self._write(header)
        left = size
        while left:
            data = content.read(min(CHUNK, left)) if content is not None else b""
            if not data:
                raise OSError(f"{info.name[:200]!r}: content ended {left} bytes before its size")
            left -= len(data)
            self._write(data)
        if pad:
            self._write(bytes(pad))

    def _write(self, data: bytes) -> None:
        self.offset += len(data)
        if len(data) >= BUFFER:
            self.flush()
            self.out.write(data)
            return
        self._buf += data
        if len(self._buf) >= BUFFER:
            self.flush()

    def flush(self) -> None:
        if self._buf:
            self.out.write(self._buf)
            self._buf = bytearray()  # (not cleared: the stream may hold the one it was given)

    def close(self) -> None:
        """The end-of-archive blocks, the record padded as tarfile pads it, and a flush."""
        self._write(bytes(2 * BLOCK))
        rest = -self.offset % RECORD
        if rest:
            self._write(bytes(rest))
        self.flush()

    def __enter__(self) -> "TarWriter":
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None:  # a failed stream is left unfinished (its writer discards it)
            self.close()
