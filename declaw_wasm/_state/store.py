"""The state store: where everything that outlives a process lives (volumes today; snapshots,
paused sandboxes and forks build on the same primitives).

`DECLAW_WASM_STATE` names it: a local folder or any fsspec URL (`s3://bucket/prefix`, `memory://x`
in tests); the default is the user's state folder (`platformdirs.user_state_path`). Never inside
the runtime cache (`DECLAW_WASM_CACHE`), which may be shipped read-only and is pruned on upgrades.

Built on fsspec because it is one well-kept API over local folders and every object store
(s3fs, gcsfs, adlfs, ...), so a serverless function can resume what another invocation stored.
What the store offers, and how each primitive stays correct on a store without rename or locks:

* blobs, content-addressed by SHA-256 within a namespace (`<ns>/blobs/ab/abcd...`): written
  once, verified on every read, so a truncated or tampered blob is an `IntegrityError`;
* JSON documents (manifests, state documents, lease generations), each a record of a kind,
  signed with the state key, which lives outside the store (records.py, keys.py): one changed,
  forged, or moved to another name or kind by whoever can write the store without the key is
  refused (`UntrustedRecord`) and nothing of it is used. Blobs need no key: a record names
  each of its blobs by SHA-256;
* records: a folder of blobs published by writing its `manifest.json` last, in one atomic put
  (rename on a local folder, a single PUT on an object store), so readers see all or nothing;
* exclusive create, the base of leases (lease.py): `link(2)` of a finished temp file on a local
  folder, a conditional PUT (`If-None-Match: *`) on S3 through s3fs, a lock within the process
  for `memory://`. Stores without one are refused for leases unless
  `DECLAW_WASM_STATE_UNSAFE_LEASES=1` says the caller accepts check-then-write races.
"""

from __future__ import annotations

import errno
import hashlib
import inspect
import os
import secrets
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import (
    IO,
    TYPE_CHECKING,
    Any,
    Iterable,
    Iterator,
    Mapping,
    Optional,
    Self,
    Union,
)

from ..exceptions import SandboxException
from ..settings import NAMESPACES, STATE_ENV, UNSAFE_LEASES_ENV, state_url, unsafe_leases
from . import keys, records
from .errors import IntegrityError, RecordNotFound, StateError, UnsafeStoreError
from .ids import check_id, check_key
from .keys import StateKey

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

    from .lease import Leases

MAX_JSON = 64 << 20  # a volume tree of 100 000 entries is ~15 MB
CHUNK = 1 << 20
_HEX = frozenset("0123456789abcdef")
_MEMORY_LOCK = threading.Lock()  # memory:// is one dict per process: exclusive create under it

BlobData = Union[bytes, bytearray, memoryview]


def sha256_hex(data: BlobData) -> str:
    return hashlib.sha256(data).hexdigest()


def check_sha(value: object) -> str:
    if not isinstance(value, str) or len(value) != 64 or not set(value) <= _HEX:
        raise IntegrityError(f"not a SHA-256 hex digest: {str(value)[:80]!r}")
    return value


@dataclass(frozen=True)
class BlobRef:
    """A blob: its SHA-256 (hex) and size in bytes."""

    sha256: str
    size: int

    def to_json(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "size": self.size}

    @classmethod
    def from_json(cls, data: object) -> "BlobRef":
        if not isinstance(data, dict) or not isinstance(data.get("size"), int) or data["size"] < 0:
            raise IntegrityError(f"malformed blob reference: {str(data)[:200]}")
        return cls(check_sha(data.get("sha256")), data["size"])


def default_state_url() -> str:
    return state_url()


class VerifiedReader:
    """Reads a blob and checks its size and SHA-256 as it goes: reading past the expected size,
    or reaching the end with the wrong digest, raises `IntegrityError`."""

    def __init__(self, raw: IO[bytes], ref: BlobRef, where: str) -> None:
        self._raw = raw
        self._ref = ref
        self._where = where
        self._hash = hashlib.sha256()
        self._seen = 0
        self._checked = False

    def read(self, n: int = -1) -> bytes:
        want = self._ref.size - self._seen + 1 if n is None or n < 0 else n
        data = self._raw.read(max(0, min(want, self._ref.size - self._seen + 1)))
        self._seen += len(data)
        if self._seen > self._ref.size:
            raise IntegrityError(f"{self._where}: longer than its recorded {self._ref.size} bytes")
        self._hash.update(data)
        if not data or self._seen == self._ref.size:
            self._verify()
        return data

    def finish(self) -> None:
        """Read whatever is left and verify the whole blob."""
        while self.read(CHUNK):
            pass
        self._verify()

    def _verify(self) -> None:
        if self._checked:
            return
        if self._seen == self._ref.size:
            extra = self._raw.read(1)
            if extra:
                raise IntegrityError(f"{self._where}: longer than its recorded {self._ref.size} bytes")
        if self._seen != self._ref.size:
            raise IntegrityError(f"{self._where}: truncated ({self._seen} of {self._ref.size} bytes)")
        if self._hash.hexdigest() != self._ref.sha256:
            raise IntegrityError(f"{self._where}: content does not match its SHA-256 (damaged or tampered with)")
        self._checked = True

    def close(self) -> None:
        self._raw.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BlobWriter:
    """Streams a blob to a temp file while hashing it, then stores it under its digest."""

    def __init__(self, store: "StateStore", ns: str) -> None:
        self._store = store
        self._ns = ns
        folder = Path(store.root) / ns / "blobs" if store.local else None
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=".tmp-", dir=folder)
        self._path = Path(name)
        self._file = os.fdopen(fd, "wb")
        self._hash = hashlib.sha256()
        self.size = 0
        self.ref: Optional[BlobRef] = None

    def write(self, data: BlobData) -> int:
        self._file.write(data)
        self._hash.update(data)
        self.size += len(data)
        return len(data)

    def tell(self) -> int:
        return self.size

    def commit(self) -> BlobRef:
        self._file.close()
        ref = BlobRef(self._hash.hexdigest(), self.size)
        key = self._store.blob_key(self._ns, ref.sha256)
        try:
            if self._store.local:
                target = Path(self._store.path(key))
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(self._path, target)
            elif not self._store.exists(key):
                self._store.fs.makedirs(self._store.fs._parent(self._store.path(key)), exist_ok=True)
                self._store.fs.put_file(str(self._path), self._store.path(key))
        finally:
            self.discard()
        self.ref = ref
        return ref

    def discard(self) -> None:
        if not self._file.closed:
            self._file.close()
        try:
            self._path.unlink()
        except FileNotFoundError:
            pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()


class StateStore:
    """One state store (a root folder or URL prefix), over fsspec."""

    def __init__(self, url: Union[str, "os.PathLike[str]", None] = None, *,
                 signing_key: Optional[StateKey] = None, **storage_options: Any) -> None:
        """`signing_key`: the key this store's records are signed and checked with (default:
        this process's state key, keys.py, looked up at each use)."""
        self.url = str(url) if url is not None else default_state_url()
        self.signing_key = signing_key
        self._fs: Optional["AbstractFileSystem"] = None
        if "://" not in self.url and not storage_options:
            # a plain folder: everything local goes through os, so fsspec is not even imported
            # (it costs tens of ms, on the path of a resume in a new process)
            self.local, self.protocol, root = True, "file", self.url
        else:
            import fsspec
            from fsspec.implementations.local import LocalFileSystem

            fs, root = fsspec.core.url_to_fs(self.url, **storage_options)
            self._fs = fs
            self.local = isinstance(fs, LocalFileSystem)
            self.protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        self.root: str = root.rstrip("/") or "/"
        parts = self.root.rstrip("/").split("/")
        # a namespace of a store (settings.state_url): its records are signed as its own
        self.scope = f"{NAMESPACES}/{parts[-1]}/" if len(parts) >= 2 and parts[-2] == NAMESPACES else ""
        if self.local:
            self.root = str(Path(self.root).expanduser().resolve())
            self._refuse_cache()
            Path(self.root).mkdir(mode=0o700, parents=True, exist_ok=True)
        self.exclusive = self._exclusive_kind()
        self._leases: Optional["Leases"] = None

    def __repr__(self) -> str:
        return f"<StateStore {self.url!r} leases={'safe' if self.lease_safe else 'unsafe'}>"

    @property
    def fs(self) -> "AbstractFileSystem":
        """The fsspec file system (made on first use for a plain folder)."""
        if self._fs is None:
            from fsspec.implementations.local import LocalFileSystem

            self._fs = LocalFileSystem()
        return self._fs

    # -- where things are ----------------------------------------------------------------------------
    def _refuse_cache(self) -> None:
        from ..settings import cache_dir

        cache = cache_dir().expanduser().resolve()
        root = Path(self.root)
        if root == cache or cache in root.parents:
            raise StateError(f"the state store ({root}) must not be inside the runtime cache ({cache}): "
                             f"the cache may be read-only and is pruned on upgrades; set {STATE_ENV}")

    def _exclusive_kind(self) -> str:
        """How this store creates an object only if it does not exist ("" if it cannot)."""
        if self.local:
            return "link"
        if self.protocol == "memory":
            return "process-lock"
        if self.protocol in ("s3", "s3a") and type(self.fs).__module__.startswith("s3fs"):
            pipe = getattr(type(self.fs), "_pipe_file", None)
            if pipe is not None and "mode" in inspect.signature(pipe).parameters:
                return "if-none-match"
        return ""

    @property
    def lease_safe(self) -> bool:
        """Whether two processes can never hold the same lease here (see docs/state-store.md)."""
        return bool(self.exclusive)  # memory:// lives in one process, so its lock is enough

    def path(self, key: str) -> str:
        return f"{self.root}/{check_key(key)}" if self.root != "/" else f"/{check_key(key)}"

    # -- bytes ---------------------------------------------------------------------------------------
    def exists(self, key: str) -> bool:
        path = self.path(key)
        if self.local:
            return os.path.lexists(path)
        self.fs.invalidate_cache(path)
        return bool(self.fs.exists(path))

    def read_bytes(self, key: str, limit: Optional[int] = None) -> bytes:
        """The object's bytes (`RecordNotFound` if missing); more than `limit` is an IntegrityError."""
        path = self.path(key)
        try:
            if self.local:
                with open(path, "rb") as f:
                    data = f.read(-1 if limit is None else limit + 1)
            else:
                self.fs.invalidate_cache(path)
                with self.fs.open(path, "rb") as f:
                    data = f.read(-1 if limit is None else limit + 1)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise RecordNotFound(f"state store: nothing at {key}") from None
        if limit is not None and len(data) > limit:
            raise IntegrityError(f"{key}: larger than {limit} bytes")
        return bytes(data)

    def read_range(self, key: str, start: int, end: int) -> bytes:
        path = self.path(key)
        try:
            if self.local:
                with open(path, "rb") as f:
                    f.seek(start)
                    return f.read(end - start)
            return bytes(self.fs.cat_file(path, start=start, end=end))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise RecordNotFound(f"state store: nothing at {key}") from None

    def open_read(self, key: str) -> IO[bytes]:
        path = self.path(key)
        try:
            if self.local:
                return open(path, "rb")
            self.fs.invalidate_cache(path)
            return self.fs.open(path, "rb")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise RecordNotFound(f"state store: nothing at {key}") from None

    @staticmethod
    def _local_temp(path: str, data: BlobData) -> str:
        """A finished temp file beside `path` (a local store), holding `data`."""
        folder = os.path.dirname(path)
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, f".tmp-{secrets.token_hex(8)}")
        with open(tmp, "xb") as f:
            f.write(data)
        return tmp

    def write_bytes(self, key: str, data: BlobData) -> None:
        """Replace the object atomically: readers see the old bytes or the new, never a part."""
        path = self.path(key)
        if self.local:
            tmp = self._local_temp(path, data)
            try:
                os.replace(tmp, path)
            finally:
                if os.path.lexists(tmp):
                    os.unlink(tmp)
            return
        self.fs.pipe_file(path, bytes(data))  # one PUT: atomic on object stores
        self.fs.invalidate_cache(path)

    def create_bytes(self, key: str, data: BlobData) -> None:
        """Create the object only if nothing is there, atomically; `FileExistsError` otherwise."""
        path = self.path(key)
        if self.exclusive == "link":
            tmp = self._local_temp(path, data)
            try:
                os.link(tmp, path)  # fails with EEXIST, atomically, and the file is complete
            finally:
                os.unlink(tmp)
            return
        if self.exclusive == "process-lock":
            with _MEMORY_LOCK:
                if self.fs.exists(path):
                    raise FileExistsError(errno.EEXIST, "exists", key)
                self.fs.pipe_file(path, bytes(data))
            return
        if self.exclusive == "if-none-match":
            try:
                self.fs.pipe_file(path, bytes(data), mode="create")
            except FileExistsError:
                raise
            except OSError:
                # Stores that answer 412 without naming the condition come back as EINVAL.
                if self.exists(key):
                    raise FileExistsError(errno.EEXIST, "exists", key) from None
                raise
            finally:
                self.fs.invalidate_cache(path)
            return
        if not unsafe_leases():
            raise UnsafeStoreError(
                f"the state store {self.url!r} ({self.protocol}) has no atomic create-if-absent, so "
                f"a lease there could be taken twice; use a local folder, memory:// or s3:// (s3fs), "
                f"or set {UNSAFE_LEASES_ENV}=1 to accept the race (one process at a time only)")
        if self.exists(key):
            raise FileExistsError(errno.EEXIST, "exists", key)
        self.fs.pipe_file(path, bytes(data))

    def names(self, key: str) -> list[str]:
        """Names directly below `key` (files and folders; temp files left out); [] if none."""
        path = self.path(key)
        try:
            if self.local:
                names = os.listdir(path)
            else:
                self.fs.invalidate_cache(path)
                names = [p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(path, detail=False)]
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(n for n in names if n and not n.startswith("."))

    def walk(self) -> Iterator[str]:
        """The key of every object in the store but blobs and temp files (unordered): what
        `declaw-wasm state resign` looks at. Names that are not valid keys are left out."""
        if self.local:
            for folder, dirs, files in os.walk(self.root):  # never follows a symlinked folder
                dirs[:] = [d for d in dirs if d != "blobs" and not d.startswith(".")]
                rel = os.path.relpath(folder, self.root).replace(os.sep, "/")
                for name in files:
                    if not name.startswith("."):
                        yield from _valid_key(name if rel == "." else f"{rel}/{name}")
            return
        self.fs.invalidate_cache(self.root)
        base = self.root.rstrip("/") + "/"
        for path in self.fs.find(self.root):
            rel = str(path)[len(base):] if str(path).startswith(base) else ""
            parts = rel.split("/")
            if rel and "blobs" not in parts[:-1] and not parts[-1].startswith("."):
                yield from _valid_key(rel)

    def delete(self, key: str) -> bool:
        """Delete one object; False if it was not there."""
        path = self.path(key)
        try:
            if self.local:
                os.unlink(path)
            else:
                self.fs.rm_file(path)
                self.fs.invalidate_cache(path)
        except FileNotFoundError:
            return False
        return True

    def delete_tree(self, key: str) -> None:
        """Delete everything below `key` (never following a symlink on a local folder)."""
        path = self.path(key)
        if self.local:
            if os.path.islink(path) or os.path.isfile(path):
                os.unlink(path)
            elif os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            return
        try:
            self.fs.rm(path, recursive=True)
        except FileNotFoundError:
            pass
        self.fs.invalidate_cache(path)

    # -- blobs ---------------------------------------------------------------------------------------
    @staticmethod
    def blob_key(ns: str, sha: str) -> str:
        check_sha(sha)
        return f"{check_key(ns)}/blobs/{sha[:2]}/{sha}"

    def put_blob(self, ns: str, data: BlobData) -> BlobRef:
        """Store `data` under its SHA-256 (a no-op if it is there already)."""
        ref = BlobRef(sha256_hex(data), len(data))
        key = self.blob_key(ns, ref.sha256)
        if not self.exists(key):
            self.write_bytes(key, data)
        return ref

    def blob_writer(self, ns: str) -> BlobWriter:
        """A writer for a large blob: `write()` chunks, then `commit()` -> BlobRef."""
        return BlobWriter(self, check_key(ns))

    def put_blob_file(self, ns: str, local: Path, ref: BlobRef) -> None:
        """Store the local file `local`, whose digest the caller computed as `ref`, as a blob
        (the file stays; a hard link on a local store when it can, else a copy)."""
        key = self.blob_key(ns, ref.sha256)
        if self.exists(key):
            return
        if self.local:
            target = Path(self.path(key))
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.parent / f".tmp-{secrets.token_hex(8)}"
            try:
                try:
                    os.link(local, tmp)
                except OSError:
                    shutil.copyfile(local, tmp)
                os.replace(tmp, target)
            finally:
                if os.path.lexists(tmp):
                    os.unlink(tmp)
            return
        path = self.path(key)
        self.fs.makedirs(self.fs._parent(path), exist_ok=True)
        self.fs.put_file(str(local), path)
        self.fs.invalidate_cache(path)

    def get_blob(self, ns: str, ref: BlobRef) -> bytes:
        key = self.blob_key(ns, ref.sha256)
        data = self.read_bytes(key, limit=ref.size)
        if len(data) != ref.size:
            raise IntegrityError(f"blob {ref.sha256[:12]} in {ns}: {len(data)} bytes, expected {ref.size} (truncated)")
        if sha256_hex(data) != ref.sha256:
            raise IntegrityError(f"blob {ref.sha256[:12]} in {ns}: content does not match its SHA-256")
        return data

    def get_blob_range(self, ns: str, blob: str, offset: int, size: int, sha: str) -> bytes:
        """`size` bytes at `offset` of a blob, checked against their own SHA-256 `sha`."""
        data = self.read_range(self.blob_key(ns, blob), offset, offset + size)
        if len(data) != size or sha256_hex(data) != sha:
            raise IntegrityError(f"blob {blob[:12]} in {ns}: bytes {offset}-{offset + size} are "
                                 "truncated or do not match their SHA-256")
        return data

    def open_blob(self, ns: str, ref: BlobRef) -> VerifiedReader:
        return VerifiedReader(self.open_read(self.blob_key(ns, ref.sha256)), ref,
                              f"blob {ref.sha256[:12]} in {ns}")

    def list_blobs(self, ns: str) -> set[str]:
        out: set[str] = set()
        for shard in self.names(f"{ns}/blobs"):
            out.update(n for n in self.names(f"{ns}/blobs/{shard}") if len(n) == 64)
        return out

    def delete_blob(self, ns: str, sha: str) -> None:
        self.delete(self.blob_key(ns, sha))

    # -- JSON documents: signed records ------------------------------------------------------------
    @property
    def key(self) -> StateKey:
        """The key this store's records are signed and checked with."""
        return self.signing_key if self.signing_key is not None else keys.current()

    def put_json(self, key: str, body: Any, *, kind: str) -> None:
        """Store `body` at `key` as a signed record of `kind` (replacing what is there)."""
        self.write_bytes(key, records.seal(self.key, kind, self.signed_name(key), body))

    def create_json(self, key: str, body: Any, *, kind: str) -> None:
        """Like put_json, only if nothing is at `key` (`FileExistsError` otherwise)."""
        self.create_bytes(key, records.seal(self.key, kind, self.signed_name(key), body))

    def get_json(self, key: str, *, kind: str) -> Any:
        """The body of the `kind` record at `key`: `RecordNotFound` if none, `UntrustedRecord` if
        it fails its signature check (nothing of it is used)."""
        raw = self.read_bytes(key, limit=MAX_JSON)
        return records.unseal(raw, kind, self.signed_name(key), self.key)

    def signed_name(self, key: str) -> str:
        """The name a record at `key` is signed under: its key, inside its namespace when this store
        is one (`<store>/namespaces/<name>`, settings.state_url), so that a record cannot be moved
        from one namespace to another any more than to another name."""
        return self.scope + check_key(key)

    # -- records ---------------------------------------------------------------------------------------
    def publish(self, prefix: str, body: Mapping[str, Any],
                parts: Optional[Mapping[str, Union[BlobData, BlobRef]]] = None, *, kind: str) -> dict[str, Any]:
        """Store a record's parts (blobs) first, then its manifest (a signed record of `kind`): all
        or nothing to readers. A part given as a BlobRef must already be a blob in `prefix`."""
        refs: dict[str, Any] = {}
        for name, data in (parts or {}).items():
            check_id(name, "part name")
            refs[name] = (data if isinstance(data, BlobRef) else self.put_blob(prefix, data)).to_json()
        manifest = {**body, "parts": refs}
        self.put_json(f"{prefix}/manifest.json", manifest, kind=kind)
        return manifest

    def read_record(self, prefix: str, *, kind: str) -> dict[str, Any]:
        body = self.get_json(f"{prefix}/manifest.json", kind=kind)
        if not isinstance(body, dict) or not isinstance(body.get("parts", {}), dict):
            raise IntegrityError(f"{prefix}/manifest.json: not a record manifest")
        return body

    def part_ref(self, prefix: str, manifest: Mapping[str, Any], name: str) -> BlobRef:
        try:
            return BlobRef.from_json(manifest["parts"][name])
        except KeyError:
            raise RecordNotFound(f"{prefix}: the record has no part {name!r}") from None

    def read_part(self, prefix: str, manifest: Mapping[str, Any], name: str) -> bytes:
        return self.get_blob(prefix, self.part_ref(prefix, manifest, name))

    def list_records(self, kind: str) -> list[str]:
        """Ids under `kind/` with a published manifest (half-written records are left out)."""
        ids = []
        for name in self.names(kind):
            try:
                check_id(name)
            except SandboxException:
                continue
            if self.exists(f"{kind}/{name}/manifest.json"):
                ids.append(name)
        return ids

    def delete_record(self, prefix: str) -> None:
        """The manifest first (the record is gone for readers at once), then its parts."""
        self.delete(f"{prefix}/manifest.json")
        self.delete_tree(prefix)

    # -- leases ------------------------------------------------------------------------------------------
    @property
    def leases(self) -> "Leases":
        if self._leases is None:
            from .lease import Leases

            self._leases = Leases(self)
        return self._leases


def _valid_key(key: str) -> Iterator[str]:
    try:
        yield check_key(key)
    except SandboxException:
        return


_stores: dict[str, StateStore] = {}
_stores_lock = threading.Lock()


def default_store() -> StateStore:
    """The store `DECLAW_WASM_STATE` names (one object per URL, made on first use)."""
    url = default_state_url()
    with _stores_lock:
        store = _stores.get(url)
        if store is None:
            store = _stores[url] = StateStore(url)
        return store


def iter_chunks(data: Union[BlobData, IO[bytes], Iterable[bytes]]) -> Iterator[bytes]:
    """bytes, a binary file object or an iterable of bytes, as chunks."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        yield bytes(data)
    elif hasattr(data, "read"):
        while True:
            chunk = data.read(CHUNK)
            if not chunk:
                return
            if isinstance(chunk, str):
                raise StateError("the file object must be opened in binary mode")
            yield chunk
    else:
        for chunk in data:
            if not isinstance(chunk, (bytes, bytearray, memoryview)):
                raise StateError(f"an iterable of bytes was expected, got an item of type {type(chunk).__name__}")
            yield bytes(chunk)
