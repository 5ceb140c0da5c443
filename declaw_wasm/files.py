"""`sbx.files`: E2B's (and declaw's) Filesystem API over a sandbox's file tree, wherever it runs."""

from __future__ import annotations

from typing import Any, Iterator, List, Literal, Optional, Union, overload

from . import _args
from ._backend import Chunks, SandboxBackend, Watcher, WriteData
from .exceptions import InvalidArgumentException
from .models import EntryInfo, FilesystemEvent, WriteInfo

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


class WatchHandle:
    """A watch on a folder (E2B's `WatchHandle`): poll `get_new_events()`, then `stop()`."""

    def __init__(self, watcher: Watcher) -> None:
        self._watcher = watcher

    def get_new_events(self, request_timeout: Optional[float] = None) -> List[FilesystemEvent]:
        """The events since the last call; after `stop()`, `SandboxException`."""
        return self._watcher.events()

    def stop(self, request_timeout: Optional[float] = None) -> None:
        self._watcher.stop()


def entry_fields(entry: Any) -> tuple[str, Any]:
    """A `WriteEntry`: declaw's object (`.path`, `.data`) or E2B's dict (`["path"]`)."""
    if isinstance(entry, dict):
        if "path" not in entry or "data" not in entry:
            raise InvalidArgumentException(f"each entry needs 'path' and 'data', got {entry!r}")
        return entry["path"], entry["data"]
    if hasattr(entry, "path") and hasattr(entry, "data"):
        return entry.path, entry.data
    raise InvalidArgumentException(f"each entry must be a WriteEntry or a dict with 'path' and 'data', got {entry!r}")


class Filesystem:
    """Files in the sandbox. Relative paths start at /home/user; every path stays inside.

    E2B's transfer options are accepted everywhere: `gzip` and `use_octet_stream` say how the
    bytes travel to a served sandbox (the data is the same in-process); `metadata` (string keys
    and values, E2B's rules) is kept with the file and returned by `write`, `get_info`, `list`.
    """

    def __init__(self, backend: SandboxBackend) -> None:
        self._backend = backend

    @overload
    def read(self, path: str, format: Literal["text"] = "text", user: Optional[str] = None,
             request_timeout: Optional[float] = None, gzip: bool = False,
             stream_idle_timeout: Optional[float] = None) -> str: ...
    @overload
    def read(self, path: str, format: Literal["bytes"], user: Optional[str] = None,
             request_timeout: Optional[float] = None, gzip: bool = False,
             stream_idle_timeout: Optional[float] = None) -> bytearray: ...
    @overload
    def read(self, path: str, format: Literal["stream"], user: Optional[str] = None,
             request_timeout: Optional[float] = None, gzip: bool = False,
             stream_idle_timeout: Optional[float] = None) -> FileStream: ...

    def read(self, path: str, format: str = "text", user: Optional[str] = None,
             request_timeout: Optional[float] = None, gzip: bool = False,
             stream_idle_timeout: Optional[float] = None) -> Union[str, bytearray, FileStream]:
        """The file's content: `text` (str), `bytes` (bytearray) or `stream` (chunk iterator)."""
        if format not in FORMATS:
            raise InvalidArgumentException(f"format must be 'text', 'bytes' or 'stream', got {format!r}")
        stream = FileStream(self._backend.read(_args.path(path), gzip=bool(gzip)))
        if format == "stream":
            return stream
        with stream:
            data = b"".join(stream)
        return data.decode("utf-8", "replace") if format == "text" else bytearray(data)

    def write(self, path: str, data: WriteData, user: Optional[str] = None,
              request_timeout: Optional[float] = None, gzip: bool = False,
              use_octet_stream: Optional[bool] = None,
              metadata: Optional[dict[str, str]] = None) -> WriteInfo:
        """Write (or overwrite) a file, creating missing parent folders. An overwrite without
        `metadata` clears the file's old metadata (E2B's rule)."""
        _args.write_data(data)
        return self._backend.write(_args.path(path), data, _args.metadata(metadata), gzip=bool(gzip),
                                   octet_stream=use_octet_stream)

    def write_files(self, files: List[Any], user: Optional[str] = None,
                    request_timeout: Optional[float] = None, gzip: bool = False,
                    use_octet_stream: Optional[bool] = None,
                    metadata: Optional[dict[str, str]] = None) -> List[WriteInfo]:
        """Write several files, in order: each a `WriteEntry(path, data)` (declaw) or a dict with
        `path` and `data` (E2B)."""
        entries = [entry_fields(e) for e in files]
        for path, data in entries:
            _args.path(path)
            _args.write_data(data)
        return self._backend.write_files(entries, _args.metadata(metadata), gzip=bool(gzip),
                                         octet_stream=use_octet_stream)

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

    def watch_dir(self, path: str, user: Optional[str] = None, request_timeout: Optional[float] = None,
                  recursive: bool = False, include_entry: bool = False,
                  allow_network_mounts: bool = False) -> WatchHandle:
        """Watch a folder for changes made by the guest or through this API (E2B's events:
        create, write, remove, rename, chmod; names relative to the folder). A missing folder
        raises `FileNotFoundException`; a file, `InvalidArgumentException`. Symbolic links are
        reported, never followed into."""
        return WatchHandle(self._backend.watch(_args.path(path), bool(recursive), bool(include_entry)))
