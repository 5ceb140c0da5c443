"""A volume's tree: every path in the volume and where its bytes are.

A file's bytes live in a blob of the volume's namespace in the state store, at an offset: a
volume made from an archive keeps all its files in one *pack* blob (one upload, one read to
materialise 10 000 files), a file written later through `VolumeFiles` in a blob of its own.
Each file also records the SHA-256 of its own bytes, checked on every read and materialisation.

The tree is stored as a JSON blob referenced (by hash) from the volume's manifest, so it is
verified too; everything in it is re-validated on load (paths, sizes, digests), since a store
may be shared with others.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from .._state import IntegrityError
from ..exceptions import InvalidArgumentException

MAX_PATH = 4096
MAX_NAME = 255
MAX_DEPTH = 256
_SHA = re.compile(r"[0-9a-f]{64}")


def check_volume_path(path: object, *, archive: bool = False) -> str:
    """A path inside a volume as the tree keys it: relative, normalised, no `..`, no NUL, valid
    UTF-8, components of at most 255 bytes, at most 4096 bytes and 256 levels; "" is the root.
    API paths may start with "/" (the volume's root); archive member names may not."""
    if not isinstance(path, str):
        raise InvalidArgumentException(f"volume path must be a string, got {type(path).__name__}")
    if "\x00" in path:
        raise InvalidArgumentException(f"volume path contains a NUL byte: {path[:200]!r}")
    try:
        encoded = path.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgumentException(f"volume path is not valid UTF-8: {path[:200]!r}") from None
    if len(encoded) > MAX_PATH:
        raise InvalidArgumentException(f"volume path longer than {MAX_PATH} bytes")
    if archive and path.startswith("/"):
        raise InvalidArgumentException("absolute member names are dropped")
    parts = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            raise InvalidArgumentException(f"volume path climbs with '..': {path[:200]!r}")
        if len(part.encode("utf-8")) > MAX_NAME:
            raise InvalidArgumentException(f"volume path has a name longer than {MAX_NAME} bytes")
        parts.append(part)
    if len(parts) > MAX_DEPTH:
        raise InvalidArgumentException(f"volume path deeper than {MAX_DEPTH} levels")
    return "/".join(parts)


def shown(path: str) -> str:
    """A tree key as the API shows it: "/a/b"."""
    return "/" + path


@dataclass
class Entry:
    """A file ("f": `size` bytes at `offset` of blob `blob`, SHA-256 `sha`) or a folder ("d")."""

    kind: str
    size: int
    sha: str
    blob: str
    offset: int
    mode: int
    mtime: float
    version: str

    @classmethod
    def file(cls, size: int, sha: str, blob: str, offset: int, mode: int, mtime: float,
             version: str) -> "Entry":
        return cls("f", size, sha, blob, offset, (mode & 0o777) or 0o644, mtime, version)

    @classmethod
    def folder(cls, mtime: float, version: str, mode: int = 0o755) -> "Entry":
        return cls("d", 0, "", "", 0, (mode & 0o777) or 0o755, mtime, version)

    def to_json(self) -> list[Any]:
        return [self.kind, self.size, self.sha, self.blob, self.offset, self.mode, self.mtime, self.version]

    @classmethod
    def from_json(cls, path: str, raw: object) -> "Entry":
        kind: Any
        size: Any
        sha: Any
        blob: Any
        offset: Any
        mode: Any
        mtime: Any
        version: Any
        try:
            kind, size, sha, blob, offset, mode, mtime, version = raw  # type: ignore[misc]
        except (TypeError, ValueError):
            raise IntegrityError(f"volume tree: malformed entry for {path[:200]!r}") from None
        ok = (kind in ("f", "d") and isinstance(size, int) and isinstance(offset, int)
              and isinstance(mode, int) and isinstance(mtime, (int, float)) and isinstance(version, str)
              and size >= 0 and offset >= 0 and len(version) <= 64)
        if ok and kind == "f":
            ok = (isinstance(sha, str) and isinstance(blob, str) and bool(_SHA.fullmatch(sha))
                  and bool(_SHA.fullmatch(blob)))
        if not ok:
            raise IntegrityError(f"volume tree: malformed entry for {path[:200]!r}")
        return cls(kind, size, sha, blob, offset, mode & 0o777, float(mtime), version)


class Tree:
    """Path -> Entry, with running totals for the quota."""

    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}
        self.total_bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, path: str) -> bool:
        return path in self._entries

    def get(self, path: str) -> Optional[Entry]:
        return self._entries.get(path)

    def items(self) -> Iterator[tuple[str, Entry]]:
        return iter(self._entries.items())

    def entries(self) -> Iterator[Entry]:
        return iter(self._entries.values())

    def put(self, path: str, entry: Entry) -> None:
        old = self._entries.get(path)
        if old is not None:
            self.total_bytes -= old.size
        self._entries[path] = entry
        self.total_bytes += entry.size

    def pop(self, path: str) -> Optional[Entry]:
        old = self._entries.pop(path, None)
        if old is not None:
            self.total_bytes -= old.size
        return old

    def is_dir(self, path: str) -> bool:
        if path == "":
            return True
        entry = self._entries.get(path)
        return entry is not None and entry.kind == "d"

    def parent_conflict(self, path: str) -> str:
        """Why `path` cannot exist because of an ancestor ("" if it can)."""
        parent = posixpath.dirname(path)
        while parent:
            entry = self._entries.get(parent)
            if entry is not None:
                return "" if entry.kind == "d" else f"/{parent} is a file"
            parent = posixpath.dirname(parent)
        return ""

    def missing_parents(self, path: str) -> int:
        count, parent = 0, posixpath.dirname(path)
        while parent and parent not in self._entries:
            count += 1
            parent = posixpath.dirname(parent)
        return count

    def ensure_parents(self, path: str, version: str, mtime: float) -> None:
        parent = posixpath.dirname(path)
        while parent and parent not in self._entries:
            self._entries[parent] = Entry.folder(mtime, version)
            parent = posixpath.dirname(parent)

    def below(self, path: str) -> list[str]:
        """Every path strictly below folder `path`."""
        if path == "":
            return list(self._entries)
        prefix = path + "/"
        return [p for p in self._entries if p.startswith(prefix)]

    def children(self, path: str) -> list[str]:
        prefix = path + "/" if path else ""
        return sorted(p for p in self._entries if p.startswith(prefix) and "/" not in p[len(prefix):])

    def blobs(self) -> set[str]:
        return {e.blob for e in self._entries.values() if e.kind == "f"}

    def files(self) -> list[tuple[str, Entry]]:
        """Files in the order their bytes are stored (blob, offset): one pass per blob."""
        return sorted(((p, e) for p, e in self._entries.items() if e.kind == "f"),
                      key=lambda pe: (pe[1].blob, pe[1].offset))

    def folders(self) -> list[str]:
        return sorted(p for p, e in self._entries.items() if e.kind == "d")

    def copy(self) -> "Tree":
        other = Tree()
        other._entries = {p: Entry(**vars(e)) for p, e in self._entries.items()}
        other.total_bytes = self.total_bytes
        return other

    def to_json(self) -> dict[str, Any]:
        return {"entries": {p: e.to_json() for p, e in sorted(self._entries.items())}}

    @classmethod
    def from_json(cls, raw: object) -> "Tree":
        entries = raw.get("entries") if isinstance(raw, dict) else None
        if not isinstance(entries, dict):
            raise IntegrityError("volume tree: malformed")
        tree = cls()
        for path, value in entries.items():
            try:
                clean = check_volume_path(path)
            except InvalidArgumentException:
                clean = ""
            if not clean or clean != path:
                raise IntegrityError(f"volume tree: invalid path {str(path)[:200]!r}")
            tree.put(path, Entry.from_json(path, value))
        for path in entries:
            if tree.parent_conflict(path):
                raise IntegrityError(f"volume tree: /{path} is below a file")
        return tree
