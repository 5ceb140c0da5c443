"""Reading volume archives, which are hostile input, and writing them back.

We read tar archives with the stdlib `tarfile` in stream mode (one pass, nothing seeks, nothing
is extracted to disk by tarfile itself; gzip and zstd are undone by the host's one body codec,
declaw_wasm/_codings.py, with its bounds (zstd's window at most 8 MiB, gzip's members checked
whole, nothing after them), bzip2 and xz by the stdlib's; our own reader counts the decompressed
bytes): each member's content is copied into the volume's pack
blob, and the volume's folder is later written by our own code from the validated tree. What
gets in is decided member by member, following declaw ("only regular files are materialized;
symlinks, hardlinks and device nodes are dropped"):

* regular files and folders are kept; symlinks, hard links, character and block devices, FIFOs
  and unknown types are dropped (listed in `Ingest.dropped`, logged);
* names that are absolute, climb with `..`, are empty, hold NUL or lone surrogates, have a
  component over 255 bytes or a path over 4096 bytes are dropped (they never name a file);
* every kept member also passes the stdlib's `data` extraction filter (`tarfile.data_filter`,
  Python >= 3.11.4 / 3.12), the vetted policy against path traversal (CVE-2007-4559 and its
  2023 follow-ups), run against an empty folder; where it is missing (older Pythons) the rules
  above already cover what it checks for regular files and folders, since no link is ever kept;
* sizes are bounded before any content is read: the bytes and entries of the volume's quota
  (a tar bomb fails with `NotEnoughSpaceException` naming the limit, after reading at most the
  quota), the raw upload (`max_upload_bytes`, compressed), extended headers (1 MiB each: tarfile
  would otherwise read a pax header of any size into memory), and the members scanned (dropped
  ones count too, so a stream of skipped members cannot decompress forever).
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import lzma
import os
import posixpath
import shutil
import stat
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Iterator, Optional, Union

from .._codings import BodyDecoder, DecodedStream, UndecodableBody, zstd_module
from .._hostfs.tarstream import BoundedTarInfo, TarWriter
from .._hostfs.tarstream import members as tar_members
from .._printable import logger
from ..exceptions import InvalidArgumentException, NotEnoughSpaceException
from .tree import Entry, Tree, check_volume_path

log = logger("declaw_wasm.volumes")

CHUNK = 1 << 20
MAX_DROPPED_SHOWN = 100  # dropped members named in `Ingest.dropped` (the rest are counted)

Source = Union[bytes, bytearray, memoryview, IO[bytes], Iterable[bytes]]


class ArchiveError(InvalidArgumentException):
    """The archive cannot be read (not a tar, truncated, a header too large)."""


class _BoundedTarInfo(BoundedTarInfo):
    """Refuses GNU long-name and pax headers over 1 MiB before tarfile reads them."""

    REFUSED = ArchiveError


class _CountingReader(io.RawIOBase):
    """Bytes, a file object or an iterable of bytes as a readable stream; more than `limit`
    bytes raise `NotEnoughSpaceException(message)`."""

    def __init__(self, source: Source, limit: int, message: str) -> None:
        self._limit = limit
        self._message = message
        self.count = 0
        self._buf = b""
        self._file: Optional[IO[bytes]] = None
        self._iter: Optional[Iterator[bytes]] = None
        if isinstance(source, (bytes, bytearray, memoryview)):
            self._file = io.BytesIO(bytes(source))
        elif hasattr(source, "read"):
            self._file = source  # type: ignore[assignment]
        else:
            self._iter = iter(source)

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        want = min(len(b), self._limit - self.count + 1)
        if self._file is not None:
            data = self._file.read(want)
            if isinstance(data, str):
                raise InvalidArgumentException("volume data: the file object must be opened in binary mode")
        else:
            while not self._buf and self._iter is not None:
                try:
                    chunk = next(self._iter)
                except StopIteration:
                    self._iter = None
                    break
                if not isinstance(chunk, (bytes, bytearray, memoryview)):
                    raise InvalidArgumentException(
                        f"volume data: an iterable of bytes was expected, got {type(chunk).__name__}")
                self._buf = bytes(chunk)
            data, self._buf = self._buf[:want], self._buf[want:]
        self.count += len(data)
        if self.count > self._limit:
            raise NotEnoughSpaceException(self._message)
        b[:len(data)] = data
        return len(data)


def _decompressed(raw: Any) -> IO[bytes]:
    """The tar stream inside gzip, zstd, bzip2 or xz (or `raw` itself). We decompress rather than
    let tarfile do it: its stream mode keeps the decompressed rest of a chunk in one bytes object
    and re-slices it on every 512-byte read, quadratic on a well-compressed archive (10 000
    small files took 20 s)."""
    head = raw.peek(6)[:6]
    if head[:2] == b"\x1f\x8b":
        return DecodedStream(raw, BodyDecoder("gzip"))  # type: ignore[return-value]
    if head[:4] == b"\x28\xb5\x2f\xfd" and zstd_module() is not None:
        return DecodedStream(raw, BodyDecoder("zstd"))  # type: ignore[return-value]
    if head[:3] == b"BZh":
        return bz2.BZ2File(raw)
    if head[:6] == b"\xfd7zXZ\x00":
        return lzma.LZMAFile(raw)
    return raw


@dataclass
class Ingest:
    """What an archive or folder brought in: its tree, and what it dropped (the first
    `MAX_DROPPED_SHOWN` named, all counted: an archive can drop ~200 000 members)."""

    tree: Tree
    dropped: list[str] = field(default_factory=list)
    dropped_count: int = 0

    def drop(self, what: str) -> None:
        self.dropped_count += 1
        if len(self.dropped) < MAX_DROPPED_SHOWN:
            self.dropped.append(what)


def _data_filter() -> Optional[Callable[[tarfile.TarInfo, str], Optional[tarfile.TarInfo]]]:
    return getattr(tarfile, "data_filter", None)


class _Budget:
    def __init__(self, tree: Tree, max_bytes: int, max_files: int) -> None:
        self.tree = tree
        self.max_bytes = max_bytes
        self.max_files = max_files

    def check(self, new_bytes: int, new_entries: int) -> None:
        if self.tree.total_bytes + new_bytes > self.max_bytes:
            raise NotEnoughSpaceException(
                f"volume quota exceeded: {self.tree.total_bytes + new_bytes} bytes, limit "
                f"{self.max_bytes} (quota_bytes, DECLAW_WASM_VOLUME_MAX_BYTES)")
        if len(self.tree) + new_entries > self.max_files:
            raise NotEnoughSpaceException(
                f"volume quota exceeded: {len(self.tree) + new_entries} files and folders, limit "
                f"{self.max_files} (DECLAW_WASM_VOLUME_MAX_FILES)")


# What a broken compressed stream raises (besides tarfile's own errors).
_STREAM_ERRORS = (tarfile.TarError, EOFError, OSError, ValueError, lzma.LZMAError)


def read_tar(source: Source, pack: Any, *, tree: Optional[Tree] = None, base: str = "",  # noqa: C901
             max_bytes: int, max_files: int, max_upload: int, version: str) -> Ingest:
    """Copy a tar (gzip, zstd, bzip2, xz or plain) into `pack` and describe it as a tree under `base`.
    `pack.tell()` is the offset each file's content starts at."""
    tree = tree if tree is not None else Tree()
    out = Ingest(tree)
    budget = _Budget(tree, max_bytes, max_files)
    raw = io.BufferedReader(_CountingReader(
        source, max_upload, f"volume archive is larger than {max_upload} bytes (max_upload_bytes, "
        "DECLAW_WASM_VOLUME_MAX_UPLOAD)"), CHUNK)
    # Decompressed: the content the quota allows, plus tar headers (4 KiB a member is generous).
    expands = max_bytes + 64 * 1024 * 1024 + 4096 * max_files
    scanned, max_scanned = 0, max_bytes + 64 * max_files
    members, max_members = 0, 2 * max_files + 1000
    check = _data_filter()
    fake_dest = tempfile.mkdtemp(prefix="declaw-wasm-tar-")  # empty: the filter resolves nothing
    try:
        stream = io.BufferedReader(_CountingReader(
            _decompressed(raw), expands,
            f"volume archive expands past {expands} bytes (quota_bytes, DECLAW_WASM_VOLUME_MAX_BYTES)"), CHUNK)
        try:
            tar = tarfile.open(fileobj=stream, mode="r|", tarinfo=_BoundedTarInfo)  # noqa: SIM115 -- `with tar` below
        except _STREAM_ERRORS as exc:
            if isinstance(exc, (NotEnoughSpaceException, InvalidArgumentException)):
                raise
            if isinstance(exc, UndecodableBody):
                raise ArchiveError(f"volume archive cannot be decoded: {exc}") from None
            if isinstance(exc, tarfile.ReadError):
                raise ArchiveError(f"volume data is not a tar archive (tar.gz expected): {exc}") from None
            raise ArchiveError(f"volume archive is damaged or truncated: {exc}") from None
        with tar:
            for member in tar_members(tar):  # none kept: tarfile's own list would hold every name
                members += 1
                if members > max_members:
                    raise NotEnoughSpaceException(f"volume archive has more than {max_members} members")
                scanned += max(0, member.size)
                if scanned > max_scanned:
                    raise NotEnoughSpaceException(
                        f"volume archive expands past {max_scanned} bytes (quota_bytes, "
                        "DECLAW_WASM_VOLUME_MAX_BYTES)")
                reason = _refusal(member, check, fake_dest)
                path = ""
                if not reason:
                    try:
                        path = check_volume_path(posixpath.join(base, member.name), archive=True)
                    except InvalidArgumentException as exc:
                        reason = str(exc)
                if not reason and not path:
                    continue  # "." or "./": the root itself
                if not reason:
                    reason = _add_member(tar, member, path, tree, pack, budget, version)
                if reason:
                    out.drop(f"{member.name[:200]!r}: {reason}")
    except _STREAM_ERRORS as exc:
        if isinstance(exc, (NotEnoughSpaceException, InvalidArgumentException)):
            raise
        if isinstance(exc, UndecodableBody):
            raise ArchiveError(f"volume archive cannot be decoded: {exc}") from None
        raise ArchiveError(f"volume archive is damaged or truncated: {exc}") from None
    finally:
        shutil.rmtree(fake_dest, ignore_errors=True)
    if out.dropped:
        log.warning("volume archive: %d member(s) dropped, e.g. %s", out.dropped_count, out.dropped[:3])
    return out


def _refusal(member: tarfile.TarInfo, check: Any, fake_dest: str) -> str:
    """Why a member is dropped ("" if kept)."""
    if member.issym() or member.islnk():
        return "links are dropped"
    if member.ischr() or member.isblk() or member.isfifo():
        return "device nodes and FIFOs are dropped"
    if not (member.isreg() or member.isdir()):
        return "only regular files and folders are kept"
    if check is not None:
        try:
            check(member, fake_dest)
        except tarfile.FilterError as exc:
            return f"refused by tarfile's data filter: {exc}"
    return ""


def _add_member(tar: tarfile.TarFile, member: tarfile.TarInfo, path: str, tree: Tree, pack: Any,
                budget: _Budget, version: str) -> str:
    conflict = tree.parent_conflict(path)
    if conflict:
        return conflict
    existing = tree.get(path)
    mtime = _mtime(member.mtime)
    if member.isdir():
        if existing is not None and existing.kind == "f":
            return "a folder over a file of the same name"
        budget.check(0, tree.missing_parents(path) + (existing is None))
        tree.ensure_parents(path, version, mtime)
        tree.put(path, Entry.folder(mtime, version, member.mode))
        return ""
    if existing is not None and existing.kind == "d":
        return "a file over a folder of the same name"
    replaced = existing.size if existing is not None else 0
    budget.check(member.size - replaced, tree.missing_parents(path) + (existing is None))
    f = tar.extractfile(member)
    if f is None:
        return "no content"
    offset = pack.tell()
    digest = hashlib.sha256()
    size = 0
    while True:
        chunk = f.read(CHUNK)
        if not chunk:
            break
        size += len(chunk)
        if size > member.size:
            raise ArchiveError(f"{member.name[:200]!r}: more content than its header says")
        digest.update(chunk)
        pack.write(chunk)
    if size != member.size:
        raise ArchiveError(f"{member.name[:200]!r}: truncated ({size} of {member.size} bytes)")
    tree.ensure_parents(path, version, mtime)
    tree.put(path, Entry.file(size, digest.hexdigest(), "", offset, member.mode, mtime, version))
    return ""


def _mtime(value: object) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0
    return number if 0 <= number < 1e11 else 0.0


def read_folder(folder: Path, pack: Any, *, tree: Optional[Tree] = None, base: str = "",
                max_bytes: int, max_files: int, version: str, single_name: str = "") -> Ingest:
    """A host folder (or one file) into `pack` and a tree, as an archive of it would be: regular
    files and folders only (links and devices dropped, never followed)."""
    tree = tree if tree is not None else Tree()
    out = Ingest(tree)
    budget = _Budget(tree, max_bytes, max_files)
    st = os.lstat(folder)
    if stat.S_ISREG(st.st_mode):
        _add_host_file(folder, check_volume_path(posixpath.join(base, single_name or folder.name)),
                       st, tree, pack, budget, version)
        return out
    if not stat.S_ISDIR(st.st_mode):
        raise InvalidArgumentException(f"{folder}: not a regular file or folder")
    stack = [(folder, base)]
    while stack:
        host, rel = stack.pop()
        with os.scandir(host) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            try:
                path = check_volume_path(posixpath.join(rel, entry.name))
            except InvalidArgumentException as exc:
                out.drop(f"{entry.path[:200]}: {exc}")
                continue
            est = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(est.st_mode):
                budget.check(0, tree.missing_parents(path) + 1)
                tree.ensure_parents(path, version, est.st_mtime)
                tree.put(path, Entry.folder(est.st_mtime, version, est.st_mode))
                stack.append((Path(entry.path), path))
            elif stat.S_ISREG(est.st_mode):
                _add_host_file(Path(entry.path), path, est, tree, pack, budget, version)
            else:
                out.drop(f"{entry.path[:200]}: only regular files and folders are kept")
    if out.dropped:
        log.warning("volume folder: %d entries dropped, e.g. %s", out.dropped_count, out.dropped[:3])
    return out


def _add_host_file(host: Path, path: str, st: os.stat_result, tree: Tree, pack: Any,
                   budget: _Budget, version: str) -> None:
    budget.check(st.st_size, tree.missing_parents(path) + 1)
    fd = os.open(host, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    offset = pack.tell()
    digest = hashlib.sha256()
    size = 0
    with os.fdopen(fd, "rb") as f:
        while True:
            chunk = f.read(CHUNK)
            if not chunk:
                break
            size += len(chunk)
            budget.check(size, 0)
            digest.update(chunk)
            pack.write(chunk)
    tree.ensure_parents(path, version, st.st_mtime)
    tree.put(path, Entry.file(size, digest.hexdigest(), "", offset, st.st_mode, st.st_mtime, version))


def write_tar_gz(out: IO[bytes], items: Iterable[tuple[str, Entry, Optional[IO[bytes]]]]) -> None:
    """Write a tar.gz of (path, entry, content reader) items: folders and regular files, owned
    by 0:0, the entries' modes and mtimes (deterministic for the same tree)."""
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, compresslevel=6) as gz, \
            TarWriter(gz) as tar:  # type: ignore[arg-type]  # write() is all it needs
        for path, entry, content in items:
            info = tarfile.TarInfo(path)
            info.mtime = int(entry.mtime)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if entry.kind == "d":
                info.type = tarfile.DIRTYPE
                info.mode = entry.mode or 0o755
                tar.add(info)
            else:
                info.size = entry.size
                info.mode = entry.mode or 0o644
                tar.add(info, content)
