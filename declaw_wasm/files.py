"""`sbx.files`: E2B's Filesystem API over a sandbox's file tree (see filesystem.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Literal, Optional, Union, overload

from .exceptions import InvalidArgumentException
from .filesystem import WriteData, stream_chunks
from .models import EntryInfo, WriteEntry, WriteInfo

if TYPE_CHECKING:
    from .sandbox import SandboxCore


class FileStream:
    """An iterator of a file's bytes in chunks (E2B's FileStreamReader); close it, or use `with`."""

    def __init__(self, core: "SandboxCore", path: str) -> None:
        self._cm = core.fs.open_read(path)
        self._chunks = stream_chunks(self._cm.__enter__())

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        try:
            return next(self._chunks)
        except StopIteration:
            self.close()
            raise

    def close(self) -> None:
        if self._cm is not None:
            cm, self._cm = self._cm, None
            cm.__exit__(None, None, None)

    def __enter__(self) -> "FileStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Filesystem:
    """Files in the sandbox. Relative paths start at /home/user; every path stays inside."""

    def __init__(self, core: "SandboxCore") -> None:
        self._core = core

    def _fs(self):  # type: ignore[no-untyped-def]
        self._core.ensure_running()
        return self._core.fs

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
        fs = self._fs()
        if format == "text":
            return fs.read_bytes(path).decode("utf-8", "replace")
        if format == "bytes":
            return bytearray(fs.read_bytes(path))
        if format == "stream":
            return FileStream(self._core, path)
        raise InvalidArgumentException(f"format must be 'text', 'bytes' or 'stream', got {format!r}")

    def write(self, path: str, data: WriteData, user: Optional[str] = None,
              request_timeout: Optional[float] = None) -> WriteInfo:
        """Write (or overwrite) a file, creating missing parent folders."""
        return self._fs().write(path, data)

    def write_files(self, files: list[WriteEntry], user: Optional[str] = None,
                    request_timeout: Optional[float] = None) -> list[WriteInfo]:
        fs = self._fs()
        for entry in files:
            if not isinstance(entry, dict) or "path" not in entry or "data" not in entry:
                raise InvalidArgumentException(f"each entry needs 'path' and 'data', got {entry!r}")
        return [fs.write(entry["path"], entry["data"]) for entry in files]

    def list(self, path: str, depth: Optional[int] = 1, user: Optional[str] = None,
             request_timeout: Optional[float] = None) -> list[EntryInfo]:
        """Entries under `path`, `depth` levels deep, sorted by path."""
        return self._fs().list(path, depth if depth is not None else 1)

    def exists(self, path: str, user: Optional[str] = None,
               request_timeout: Optional[float] = None) -> bool:
        return self._fs().exists(path)

    def get_info(self, path: str, user: Optional[str] = None,
                 request_timeout: Optional[float] = None) -> EntryInfo:
        return self._fs().get_info(path)

    def remove(self, path: str, user: Optional[str] = None,
               request_timeout: Optional[float] = None) -> None:
        """Remove a file or a folder with its content; a missing path is not an error."""
        self._fs().remove(path)

    def rename(self, old_path: str, new_path: str, user: Optional[str] = None,
               request_timeout: Optional[float] = None) -> EntryInfo:
        return self._fs().rename(old_path, new_path)

    def make_dir(self, path: str, user: Optional[str] = None,
                 request_timeout: Optional[float] = None) -> bool:
        """Create a folder and its parents; False if it already existed."""
        return self._fs().make_dir(path)
