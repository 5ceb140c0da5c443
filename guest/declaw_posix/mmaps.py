"""`mmap.mmap` for the guest: WASI has no memory mapping, and the runtime's `mmap` module raised
`OSError: mmap is unavailable on wasm32-wasi` for every map, so `numpy.memmap`,
`np.load(..., mmap_mode="r")` and any library that maps a file to read it failed.

A map here is a copy of the mapped bytes in the guest's memory (`bytearray`), with the whole
`mmap.mmap` interface of CPython 3.15 on Linux: the buffer protocol (numpy arrays over it),
indexing and slicing, `read`/`write`/`seek`/`find`/`readline`/`move`/`resize`, `flush`, `close`,
the context manager, and the same errors for the same misuse. How it differs from Linux:

- **When a shared map's writes reach the file**: at `flush()`, `close()`, and when the map is
  freed (`del m`, a program's end), not as they are made. Another reader of the file sees them
  then; Linux shows them at once. A file written by others after the map was made is not seen.
- **Memory**: the mapped range is read whole when the map is made and counts against the
  sandbox's memory limit; a map larger than the guest's memory fails with `MemoryError`.

Write-back needs the file after its descriptor is closed (numpy closes it right after mapping):
WASI has no `dup`, so the map keeps the path `open()` opened the file from (declaw_posix/dup.py),
checked to be the same file (device and inode) at each write-back; a map made from a bare
descriptor (`os.open`) writes through it while it is the same file, and raises `OSError(EBADF)`
once it is not.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from typing import Any

from declaw_posix.dup import opened

ACCESS_DEFAULT, ACCESS_READ, ACCESS_WRITE, ACCESS_COPY = 0, 1, 2, 3
MAP_SHARED, MAP_PRIVATE, MAP_ANONYMOUS = 0x01, 0x02, 0x20
PROT_READ, PROT_WRITE, PROT_EXEC = 0x1, 0x2, 0x4
MADV_NORMAL, MADV_RANDOM, MADV_SEQUENTIAL, MADV_WILLNEED, MADV_DONTNEED = 0, 1, 2, 3, 4
PAGESIZE = ALLOCATIONGRANULARITY = 4096  # Linux's: code that aligns offsets to it maps here too
_ACCESS_NAMES = ("ACCESS_DEFAULT", "ACCESS_READ", "ACCESS_WRITE", "ACCESS_COPY")
CONSTANTS = {name: value for name, value in globals().items()
             if name.isupper() and isinstance(value, int) and not name.startswith("_")}


def _index(value: Any) -> int:
    if not hasattr(value, "__index__"):
        raise TypeError(f"'{type(value).__name__}' object cannot be interpreted as an integer")
    return value.__index__()


class mmap:  # noqa: N801 -- the standard name
    """A memory map of a file or of anonymous memory (the module docstring)."""

    def __init__(self, fileno: int, length: int, flags: int = MAP_SHARED, prot: int = PROT_WRITE | PROT_READ,
                 access: int = ACCESS_DEFAULT, offset: int = 0, *, trackfd: bool = True) -> None:
        fileno, length, offset = _index(fileno), _index(length), _index(offset)
        if length < 0:
            raise OverflowError("memory mapped length must be positive")
        if offset < 0:
            raise OverflowError("memory mapped offset must be positive")
        flags, prot = _mode(flags, prot, access)
        self._access = access
        self._writable = bool(prot & PROT_WRITE)
        self._shared = bool(flags & MAP_SHARED) and self._writable and fileno != -1  # written back
        self._offset = offset
        self._pos = 0
        self._exports = 0
        self._closed = True  # until made: a failed __init__ leaves a closed map (and __del__ quiet)
        self._fd = -1 if fileno == -1 else fileno
        self._path: str | None = None
        self._identity: tuple[int, int] | None = None
        if fileno == -1:
            if length == 0 or offset % ALLOCATIONGRANULARITY:
                raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
            self._data = bytearray(length)
        else:
            status = os.fstat(fileno)
            size = status.st_size
            if length == 0:
                if size == 0:
                    raise ValueError("cannot mmap an empty file")
                if offset >= size:
                    raise ValueError("mmap offset is greater than file size")
                length = size - offset
            elif offset > size or size - offset < length:
                raise ValueError("mmap length is greater than file size")
            if offset % ALLOCATIONGRANULARITY:  # the kernel's answer, after the size checks
                raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
            if self._shared:
                _check_writable_fd(fileno)
            self._data = _read_at(fileno, offset, length)
            self._identity = (status.st_dev, status.st_ino)
            if self._shared:  # WASI has no dup: the path `open()` made it from, to write back
                found = opened(fileno)
                self._path = found[1] if found is not None else None
        self._closed = False

    # -- the buffer protocol (numpy arrays, memoryview) --------------------------------------
    def __buffer__(self, flags: int) -> memoryview:
        self._check()
        view = memoryview(self._data)
        self._exports += 1
        return view if self._writable else view.toreadonly()

    def __release_buffer__(self, view: memoryview) -> None:
        self._exports -= 1
        view.release()

    # -- the file's side -----------------------------------------------------------------------
    def flush(self, offset: int = 0, size: int | None = None) -> None:
        self._check()
        size = len(self._data) - offset if size is None else size
        if offset < 0 or size < 0 or offset + size > len(self._data):
            raise ValueError("flush values out of range")
        if self._shared and size:
            self._write_back(offset, size)

    def _write_back(self, start: int, size: int) -> None:
        data = memoryview(self._data)[start:start + size]
        if self._path is not None:
            fd = os.open(self._path, os.O_WRONLY)
            try:
                self._same_file(fd)
                _write_at(fd, self._offset + start, data)
            finally:
                os.close(fd)
            return
        try:
            self._same_file(self._fd)
        except OSError:
            raise OSError(errno.EBADF, "the mapped file's descriptor was closed: a map of a bare "
                          "descriptor writes back only while it is open") from None
        _write_at(self._fd, self._offset + start, data)

    def _same_file(self, fd: int) -> None:
        status = os.fstat(fd)
        if (status.st_dev, status.st_ino) != self._identity:
            raise OSError(errno.EBADF, os.strerror(errno.EBADF))

    def close(self) -> None:
        if self._closed:
            return
        if self._exports > 0:
            raise BufferError("cannot close exported pointers exist")
        try:
            if self._shared:
                self._write_back(0, len(self._data))
        finally:
            self._closed = True
            self._data = bytearray()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True) and not getattr(self, "_exports", 0):
            try:
                self.close()
            except Exception:  # noqa: BLE001 -- as a finalizer: nowhere to report it
                pass

    @property
    def closed(self) -> bool:
        return self._closed

    def size(self) -> int:
        self._check()
        if self._fd == -1:
            return len(self._data)
        if self._path is not None:
            return os.stat(self._path).st_size
        return os.fstat(self._fd).st_size

    def resize(self, newsize: int) -> None:
        self._check()
        newsize = _index(newsize)
        if not self._writable or not self._shared and self._fd != -1:
            raise TypeError("mmap can't resize a readonly or copy-on-write memory map.")
        if newsize < 0:
            raise ValueError("new size out of range")
        if self._exports > 0:
            raise BufferError("mmap can't resize with extant buffers exported.")
        if self._fd != -1:
            self._write_back(0, len(self._data))
            path = self._path
            if path is not None:
                os.truncate(path, self._offset + newsize)
            else:
                os.ftruncate(self._fd, self._offset + newsize)
        if newsize < len(self._data):
            del self._data[newsize:]
        else:
            self._data.extend(bytes(newsize - len(self._data)))
        self._pos = min(self._pos, newsize)

    def madvise(self, option: int, start: int = 0, length: int | None = None) -> None:
        self._check()
        length = len(self._data) - start if length is None else length
        if start < 0 or start >= len(self._data):
            raise ValueError("madvise start out of bounds")
        if length < 0:
            raise ValueError("madvise length invalid")

    # -- the file-like side ----------------------------------------------------------------------
    def read(self, n: int | None = None) -> bytes:
        self._check()
        end = len(self._data) if n is None or n < 0 else min(len(self._data), self._pos + _index(n))
        data = bytes(self._data[self._pos:end])
        self._pos = max(self._pos, end)
        return data

    def read_byte(self) -> int:
        self._check()
        if self._pos >= len(self._data):
            raise ValueError("read byte out of range")
        self._pos += 1
        return self._data[self._pos - 1]

    def readline(self) -> bytes:
        self._check()
        end = self._data.find(b"\n", self._pos)
        end = len(self._data) if end < 0 else end + 1
        data = bytes(self._data[self._pos:end])
        self._pos = end if end > self._pos else self._pos
        return data

    def write(self, data: Any) -> int:
        self._check_writable()
        data = memoryview(data).cast("B")
        if self._pos > len(self._data) or len(self._data) - self._pos < len(data):
            raise ValueError("data out of range")
        self._data[self._pos:self._pos + len(data)] = data
        self._pos += len(data)
        return len(data)

    def write_byte(self, byte: int) -> None:
        self._check_writable()
        if self._pos >= len(self._data):
            raise ValueError("write byte out of range")
        self._data[self._pos] = byte
        self._pos += 1

    def seek(self, pos: int, whence: int = 0) -> int:
        self._check()
        pos = _index(pos)
        if whence == 0:
            where = pos
        elif whence == 1:
            where = self._pos + pos
        elif whence == 2:
            where = len(self._data) + pos
        else:
            raise ValueError("unknown seek type")
        if where < 0 or where > len(self._data):
            raise ValueError("seek out of range")
        self._pos = where
        return where

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        self._check()
        return self._pos

    def find(self, sub: Any, start: int | None = None, end: int | None = None) -> int:
        self._check()
        return self._data.find(sub, self._pos if start is None else start, len(self._data) if end is None else end)

    def rfind(self, sub: Any, start: int | None = None, end: int | None = None) -> int:
        self._check()
        return self._data.rfind(sub, self._pos if start is None else start, len(self._data) if end is None else end)

    def move(self, dest: int, src: int, count: int) -> None:
        self._check_writable()
        size = len(self._data)
        if min(dest, src, count) < 0 or src + count > size or dest + count > size:
            raise ValueError("source, destination, or count out of range")
        self._data[dest:dest + count] = self._data[src:src + count]

    # -- the sequence side -------------------------------------------------------------------
    def __len__(self) -> int:
        self._check()
        return len(self._data)

    def __getitem__(self, index: int | slice) -> int | bytes:
        self._check()
        if isinstance(index, slice):
            return bytes(self._data[index])
        try:
            return self._data[index]
        except IndexError:
            raise IndexError("mmap index out of range") from None

    def __setitem__(self, index: int | slice, value: Any) -> None:
        self._check_writable()
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self._data))
            value = memoryview(value).cast("B")
            if len(range(start, stop, step)) != len(value):
                raise IndexError("mmap slice assignment is wrong size")
            self._data[index] = value
            return
        if not isinstance(value, int):
            raise TypeError("mmap item value must be an int")
        if not 0 <= value < 256:
            raise ValueError("mmap item value must be in range(0, 256)")
        try:
            self._data[index] = value
        except IndexError:
            raise IndexError("mmap assignment index out of range") from None

    def __iter__(self) -> Iterator[bytes]:
        self._check()
        for i in range(len(self._data)):
            yield bytes(self._data[i:i + 1])

    def __enter__(self) -> mmap:
        self._check()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> Any:
        raise TypeError(f"cannot pickle {type(self).__module__}.{type(self).__name__!r} object")

    def __repr__(self) -> str:
        name = f"{type(self).__module__}.{type(self).__qualname__}"
        if self._closed:
            return f"<{name} closed=True>"
        return (f"<{name} closed=False, access={_ACCESS_NAMES[self._access]}, length={len(self._data)}, "
                f"pos={self._pos}, offset={self._offset}>")

    def _check(self) -> None:
        if self._closed:
            raise ValueError("mmap closed or invalid")

    def _check_writable(self) -> None:
        self._check()
        if not self._writable:
            raise TypeError("mmap can't modify a readonly memory map.")


def _mode(flags: int, prot: int, access: int) -> tuple[int, int]:
    """The flags and protection an `access` stands for, as CPython checks them."""
    if access != ACCESS_DEFAULT and (flags != MAP_SHARED or prot != PROT_WRITE | PROT_READ):
        raise ValueError("mmap can't specify both access and flags, prot.")
    if access == ACCESS_READ:
        return MAP_SHARED, PROT_READ
    if access == ACCESS_WRITE:
        return MAP_SHARED, PROT_READ | PROT_WRITE
    if access == ACCESS_COPY:
        return MAP_PRIVATE, PROT_READ | PROT_WRITE
    if access != ACCESS_DEFAULT:
        raise ValueError("mmap invalid access parameter.")
    return flags, prot


def _check_writable_fd(fd: int) -> None:
    """A shared, writable map of a descriptor not open for writing: EACCES, as Linux's mmap."""
    try:
        os.write(fd, b"")
    except OSError:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES)) from None


def _read_at(fd: int, offset: int, length: int) -> bytearray:
    data = bytearray()
    while len(data) < length:
        chunk = os.pread(fd, min(length - len(data), 16 << 20), offset + len(data))
        if not chunk:
            break
        data += chunk
    if len(data) < length:  # the file shrank meanwhile: Linux maps past it as zeros, then SIGBUS
        data.extend(bytes(length - len(data)))
    return data


def _write_at(fd: int, offset: int, data: memoryview) -> None:
    done = 0
    while done < len(data):
        done += os.pwrite(fd, data[done:], offset + done)


def patch_mmap(module: Any) -> None:
    """Give the runtime's `mmap` module (whose `mmap` raised OSError) this one's class and names."""
    mmap.__module__ = "mmap"
    module.mmap = mmap
    for name, value in CONSTANTS.items():
        setattr(module, name, value)
