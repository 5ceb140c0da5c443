"""`sbx.files`: E2B's Filesystem API over a sandbox's file tree, wherever the sandbox runs."""

from __future__ import annotations

from typing import Iterator, List, Literal, Optional, Union, overload

from . import _args
from ._backend import Chunks, SandboxBackend, WriteData
from .exceptions import InvalidArgumentException
from .models import EntryInfo, WriteEntry, WriteInfo

FORMATS = ("text", "bytes", "stream")


class FileStream:
    """An iterator of a file's bytes in chunks (E2B's FileStreamReader); close it, or use `with`."""

    def __init__(self, chunks: Chunks) -> None:
        self._chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        return next(self._chunks)

    def close(self) -> None:
        self._chunks.close()

    def __enter__(self) -> "FileStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Filesystem:
    """Files in the sandbox. Relative paths start at /home/user; every path stays inside."""

    def __init__(self, backend: SandboxBackend) -> None:
        self._backend = backend

    @overload
    def read(self, path: str, format: Literal["text"] = "text", user: Optional[str] = None,
             request_timeout: Optional[float] = None) -> str: ...
    @overload
    def read(self, path: str, format: Literal["bytes"], user: Optional[str] = None,
             request_timeout: Optional[float] = None) -> bytearray: ...
    @overload
    def read(self, path: str, format: Literal["stream"], user: Optional[str] = None,
             request_timeout: Optional[float] = None) -> FileStream: ...

    def read(self, path: str, format: str = "text", user: Optional[str] = None,
             request_timeout: Optional[float] = None) -> Union[str, bytearray, FileStream]:
        """The file's content: `text` (str), `bytes` (bytearray) or `stream` (chunk iterator)."""
        if format not in FORMATS:
            raise InvalidArgumentException(f"format must be 'text', 'bytes' or 'stream', got {format!r}")
        stream = FileStream(self._backend.read(_args.path(path)))
        if format == "stream":
            return stream
        with stream:
            data = b"".join(stream)
        return data.decode("utf-8", "replace") if format == "text" else bytearray(data)

    def write(self, path: str, data: WriteData, user: Optional[str] = None,
              request_timeout: Optional[float] = None) -> WriteInfo:
        """Write (or overwrite) a file, creating missing parent folders."""
        _args.write_data(data)
        return self._backend.write(_args.path(path), data)

    def write_files(self, files: List[WriteEntry], user: Optional[str] = None,
                    request_timeout: Optional[float] = None) -> List[WriteInfo]:
        for entry in files:
            if not isinstance(entry, dict) or "path" not in entry or "data" not in entry:
                raise InvalidArgumentException(f"each entry needs 'path' and 'data', got {entry!r}")
        return [self.write(entry["path"], entry["data"]) for entry in files]

    def list(self, path: str, depth: Optional[int] = 1, user: Optional[str] = None,
             request_timeout: Optional[float] = None) -> List[EntryInfo]:
        """Entries under `path`, `depth` levels deep, sorted by path."""
        return self._backend.list(_args.path(path), depth if depth is not None else 1)

    def exists(self, path: str, user: Optional[str] = None,
               request_timeout: Optional[float] = None) -> bool:
        return self._backend.exists(_args.path(path))

    def get_info(self, path: str, user: Optional[str] = None,
                 request_timeout: Optional[float] = None) -> EntryInfo:
        return self._backend.get_info(_args.path(path))

    def remove(self, path: str, user: Optional[str] = None,
               request_timeout: Optional[float] = None) -> None:
        """Remove a file or a folder with its content; a missing path is not an error."""
        self._backend.remove(_args.path(path))

    def rename(self, old_path: str, new_path: str, user: Optional[str] = None,
               request_timeout: Optional[float] = None) -> EntryInfo:
        return self._backend.rename(_args.path(old_path), _args.path(new_path))

    def make_dir(self, path: str, user: Optional[str] = None,
                 request_timeout: Optional[float] = None) -> bool:
        """Create a folder and its parents; False if it already existed."""
        return self._backend.make_dir(_args.path(path))
