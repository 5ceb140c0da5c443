"""One discipline for everything built into the cache: keyed, locked, and moved into place atomically.

Keyed names, a file lock so two
processes never build the same thing, a staging folder or temp file moved into place
atomically (readers see all of it or none), and superseded builds pruned.

A read-only cache (a relocated one shipped with a serverless function) is only ever read.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import BinaryIO, Callable



def writable(folder: Path) -> bool:
    """Whether `folder` can be created or written (a read-only cache cannot)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK)


def write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)  # atomic: readers see the whole file or none
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def publish_new(path: Path, write: Callable[[BinaryIO], None]) -> bool:
    """Make `path` from what `write(out)` writes, never replacing it: the bytes go to a temp file
    beside it, which is then hard-linked to `path` (atomic, and it fails if `path` exists, so
    another writer's file stays exactly as it is). True if this call made it, False if `path`
    was already there."""
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            write(out)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        return True
    finally:
        os.unlink(tmp)


def ensure_file(path: Path, build: Callable[[], bytes], supersedes: str = "") -> Path:
    """`path`, built once with `build()` if missing (under a lock; another process may be
    building it now). Afterwards, siblings matching the glob `supersedes` are deleted."""
    if path.exists():
        return path
    if not writable(path.parent):
        raise RuntimeError(f"cache {path.parent} is read-only and has no {path.name}")
    from filelock import FileLock  # only to build: a cold start that finds everything never locks

    with FileLock(str(path) + ".lock"):
        if not path.exists():  # else another process built it while we waited
            write_atomic(path, build())
            if supersedes:
                prune_superseded(path, supersedes)
    return path


def ensure_folder(target: Path, build: Callable[[Path], None], supersedes: str = "",
                  read_only_hint: str = "") -> Path:
    """The finished folder `target` (it holds a READY file), built once by `build(staging)`
    into a staging folder beside it, then moved into place; siblings matching `supersedes`
    are pruned. On a read-only cache without it: an error ending with `read_only_hint`."""
    if (target / "READY").exists():
        _mark_used(target)
        return target
    if not writable(target.parent):
        raise RuntimeError(f"{target.name} is not in the cache and the cache is read-only"
                           + (f": {read_only_hint}" if read_only_hint else ""))
    from filelock import FileLock

    with FileLock(str(target) + ".lock"):
        if (target / "READY").exists():
            return target
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        try:
            build(staging)
            (staging / "READY").write_text(target.name)
            if target.exists():
                shutil.rmtree(target)
            os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        if supersedes:
            prune_superseded(target, supersedes)
    return target


# A superseded folder used this recently is kept: another install (another version of the package,
# or a checkout with other guest code) sharing the cache may have guests running on it (a folder,
# unlike a mapped file, is gone for its users once deleted).
FOLDER_GRACE_S = 24 * 3600
_used: set[Path] = set()


def _mark_used(folder: Path) -> None:
    """Record (once per process) that `folder` is in use: its READY file's mtime."""
    if folder in _used:
        return
    _used.add(folder)
    try:
        os.utime(folder / "READY")
    except OSError:  # a read-only cache: nothing prunes it either
        pass


def prune_superseded(keep: Path, pattern: str) -> None:
    """Delete `keep`'s siblings matching `pattern` (builds for older keys: a warm module is
    ~350 MB), except those of `keep`'s own key (its name up to the first dot: `x-KEY.cwasm`
    keeps `x-KEY.wasm`, `x-KEY.cwasm.lock`...), pinned ones (`pin`) and their companions, and
    folders some process used in the last `FOLDER_GRACE_S`. Best effort; a process still using
    a file keeps its mapping (unlink frees the file only once it is unmapped)."""
    stem = keep.name.split(".", 1)[0]
    pinned = {p.name[:-len(PINS)] for p in keep.parent.glob("*" + PINS) if _holders(p)}
    for old in keep.parent.glob(pattern):
        if old.name.split(".", 1)[0] == stem:
            continue
        if any(old.name == name or old.name.startswith(name + ".") for name in pinned):
            continue
        if old.is_dir() and _recently_used(old):
            continue
        try:
            if old.is_dir():
                shutil.rmtree(old)
            else:
                old.unlink()
        except OSError:
            pass


def _recently_used(folder: Path) -> bool:
    try:
        return time.time() - (folder / "READY").stat().st_mtime < FOLDER_GRACE_S
    except OSError:  # unfinished or damaged: not in use
        return False


# -- pins: a cache entry that something outside the cache still needs ---------------------------------
PINS = ".pins"


def _holders(folder: Path) -> list[str]:
    """The live pins in `folder`; a pin whose witness (a local file) is gone is dropped."""
    found = []
    try:
        entries = [p for p in folder.iterdir() if not p.name.startswith(".")]
    except OSError:
        return []
    for entry in entries:
        try:
            witness = entry.read_text().strip()
        except OSError:
            continue
        if witness.startswith("/") and not os.path.exists(witness):
            try:
                entry.unlink()
            except OSError:
                pass
            continue
        found.append(entry.name)
    return found


def pin(path: Path, holder: str, witness: str = "") -> None:
    """Keep `path` (and its companions `path.*`) through `prune_superseded` while `holder` (a
    name: a stored snapshot's, say) needs it: a file `<path>.pins/<holder>` holding `witness`,
    a local file whose removal ends the pin by itself (a snapshot's manifest in a local store;
    "" for none: then only `unpin` ends it). Best effort: a read-only cache is never pruned."""
    folder = path.with_name(path.name + PINS)
    try:
        folder.mkdir(exist_ok=True)
        (folder / holder).write_text(witness)
    except OSError:
        pass


def unpin(path: Path, holder: str) -> None:
    folder = path.with_name(path.name + PINS)
    try:
        (folder / holder).unlink()
    except OSError:
        pass


def pins(path: Path) -> list[str]:
    """Who holds `path` (see `pin`)."""
    return _holders(path.with_name(path.name + PINS))
