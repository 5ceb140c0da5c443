"""What one export of a sandbox's files may carry, and reading a file as exactly what was counted.

**Exports count as they read** (`ExportBudget`, `Exactly`): a snapshot, a pause, a checkpoint, a
fork, `files.read`, a volume snapshot read every file in full (a sparse one too), and the guest
can grow a file between a check and the read (the quota watcher stops it only after the fact),
so an exporter reserves a file's size from the descriptor it opened and reads no more than that
from it. What an export writes *about* each entry counts too (`ExportBudget.entry`: its tar
header, with its path, link target and metadata; and one entry against the quota's file count):
a guest can nest folders by renaming them into each other until one path is hundreds of KB long
(each rename names two paths under WASI's 4096 bytes; the result does not), so names cost an
export far more than the folders cost the quota.
"""

from __future__ import annotations

from typing import IO, Callable, Optional, Union

from .._printable import printable
from ..exceptions import NotEnoughSpaceException
from ..limits import Limits

# What one export may carry past the quota: the quota watcher looks only every 20-250 ms, so a
# sandbox can briefly hold a little more than its quota (a write in flight when it looked).
EXPORT_SLACK = 1 << 20
EXPORT_SLACK_FILES = 1024  # the same, in files and folders


def shown_path(path: str, keep: int = 200) -> str:
    """A guest path for a message or a log line: whole if short, else its ends and its length;
    control characters (line breaks, ESC, bidi controls...) escaped (`_printable.printable`)."""
    if len(path) <= keep:
        return printable(path)
    return (f"{printable(path[:keep // 2])}...{printable(path[-keep // 2:])} (a path of "
            f"{len(path.encode('utf-8', 'surrogateescape'))} bytes)")


Name = Union[str, Callable[[], str]]  # a guest path, or how to make it (only a refusal shows it)


class ExportBudget:
    """What one export (a snapshot, pause, checkpoint, fork, `files.read`, volume snapshot,
    restore) may carry: the quota it is bounded by plus `EXPORT_SLACK` bytes, and the quota's
    file count plus `EXPORT_SLACK_FILES` entries.

    An exporter `take`s each file's size, read from the descriptor it then reads (`fstat`),
    before reading any of it, and reads no more than that (`Exactly`); and counts each entry it
    writes with the bytes it writes about it (`entry`: a tar header with the path, link target
    and metadata, the padding after the content), before writing it. Past the budget the export
    fails with `NotEnoughSpaceException` naming the quota and what was too much, before it is
    read or written."""

    def __init__(self, quota: int, what: str, setting: str = "Limits.disk_bytes",
                 files: Optional[int] = None, files_setting: str = "Limits.disk_files") -> None:
        self.quota = quota
        self.limit = quota + EXPORT_SLACK
        self.used = 0
        self.what = what  # "snapshot of sandbox <id>": what is refused
        self.setting = setting  # how the quota is set
        self.files = files if files is not None else Limits().disk_files
        self.files_limit = self.files + EXPORT_SLACK_FILES
        self.files_setting = files_setting
        self.entries = 0

    def _allows(self) -> str:
        return f"more than the disk quota of {self.quota} bytes + 1 MiB allows ({self.setting}"

    def take(self, size: int, name: Name, file_size: Optional[int] = None) -> None:
        """Count `size` more bytes of file content (`name`: the guest path, for the message;
        `file_size`: the file's size read so far, when `size` is one piece of it)."""
        if self.used + size > self.limit:
            shown = size if file_size is None else file_size
            raise NotEnoughSpaceException(
                f"{self.what} refused: {shown_path(name if isinstance(name, str) else name())} is "
                f"{'at least ' if file_size is not None else ''}{shown} bytes ({self.used + size} bytes in all, "
                f"names and headers included), {self._allows()}; sparse files count at their apparent size)")
        self.used += size

    def entry(self, name: Name, metadata: int = 0) -> None:
        """Count one entry (a file, folder or link) and `metadata` bytes written about it."""
        self.entries += 1
        if self.entries > self.files_limit:
            raise NotEnoughSpaceException(
                f"{self.what} refused: more than {self.files_limit} files and folders, more than the disk "
                f"quota of {self.files} files and folders + {EXPORT_SLACK_FILES} allows ({self.files_setting})")
        if self.used + metadata > self.limit:
            raise NotEnoughSpaceException(
                f"{self.what} refused: {shown_path(name if isinstance(name, str) else name())} needs {metadata} "
                f"bytes of names and headers ({self.used + metadata} bytes in all), {self._allows()}; an export "
                "carries each entry's whole path, so folders nested deep cost it more than they cost the quota)")
        self.used += metadata


class Exactly:
    """A file read as exactly `size` bytes (the size its exporter checked and counted): a file
    that grew since is cut there, one that shrank is padded with zeros, so no more than `size`
    bytes are ever read from it and a tar header written before stays true."""

    def __init__(self, f: IO[bytes], size: int) -> None:
        self.f = f
        self.left = size

    def read(self, n: int = -1) -> bytes:
        want = self.left if n is None or n < 0 else min(n, self.left)
        data = self.f.read(want)[:want] if want else b""
        if len(data) < want:
            data += bytes(want - len(data))
        self.left -= len(data)
        return data
