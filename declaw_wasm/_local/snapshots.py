"""A sandbox as data, and back: snapshots, pause and resume (in this process or another), fork.

A sandbox at rest is its writable folders plus, for each code context, its guest's image
(_wasm/image.py: linear memory as a diff against the warm image, globals, the monotonic clock)
and the host's context record (id, language, cwd, execution count). Capturing needs the sandbox
*quiet*: no command running (refused: a command's guest is mid-flight, not at rest), no cell
running (each context's cell in flight is waited for, then no new one starts until the capture
is over). A context's guest must hold no descriptor but the preopens (a file or database left
open across cells: refused with an error naming the context; after a restore its number would
name nothing, or a file opened later, and writes would go astray).

* A **snapshot** goes to the state store (_state/snapshots.py): each private writable folder as
  an uncompressed tar part (`_hostfs.trees`), each context image as a part (zstd inside), the PII token
  map as a part when the sandbox's guard has one, and a manifest: format, the base it diffs
  against (module and image SHA-256, the cache file), the engine (wasmtime version, flags,
  machine), the mount layout (guest path and writability of every preopen, in order: wasi-libc
  keeps fd -> path in memory), the sandbox's create request without secret values (secret names
  and their placeholders only), and the contexts. The warm module it diffs against is pinned in
  the runtime cache (_cache.pin) so an upgrade does not prune it.
* **Restoring** (`load` -> `Restoring`, given to the sandbox's constructor) checks the manifest
  against this process (same module, same initial memory, same engine; else an error naming what
  is needed), lays out the folders, re-attaches volumes (copies come from the snapshot), checks
  that the mount layout is the recorded one, and installs the contexts, whose guests start at
  once from their images (the image is applied on each guest's own thread).
* **Fork** copies the folders (reflink / copy_file_range) and shares raw images in memory.
* **Pause** is a snapshot (source "pause") written to the store, then everything freed; the
  sandbox's `state.json` says it is paused. **Resume** takes the sandbox's lease first
  (`Held`: one process runs a sandbox at a time; the lease is renewed while it runs and released
  on pause or kill), so two processes racing to resume get one winner and a clear error.
* Every one of them carries at most the sandbox's disk quota + 1 MiB, file content and tar
  headers (each entry's path, link target, metadata) together, and its file count + 1024
  entries, counted as it is read and written (`_hostfs.trees`, `_hostfs.exports.ExportBudget`): past that it
  fails with `NotEnoughSpaceException` naming the quota and the file, and leaves nothing in the
  store.

Secrets never reach the store: a resume in another process takes `secrets=` (and `vault=`)
again; their placeholders are kept, so the guest's environment (in memory) still matches.
"""

from __future__ import annotations

import functools
import platform
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional

from .._cache import pin, unpin
from .._hostfs import trees
from .._hostfs.exports import ExportBudget
from .._printable import logger
from .._state import LeaseHeld, LeaseLost, RecordNotFound, StateError, StateStore, default_store
from .._state.snapshots import SnapshotRecord, SnapshotStore, lease_name, new_snapshot_id
from .._wasm import image as wimage
from .._wasm.engine import Interpreter, wasmtime_version
from .._wasm.guest import Guest
from ..exceptions import ConflictException, InvalidArgumentException, NotFoundException, SnapshotException
from ..execution import Context
from ..models import Snapshot
from ..wire import CreateSandbox

if TYPE_CHECKING:
    from .files import SandboxFS
    from .kernel import Kernel
    from .sandbox import LocalSandbox

log = logger("declaw_wasm.state")

QUIET_WAIT = 30.0  # seconds a snapshot waits for a cell in flight
RELEASE_TIMEOUT = 10.0  # seconds the turn before a capture may take
LEASE_TTL = 30.0  # a running sandbox's lease; renewed every third of it
SNAPSHOT_FORMAT = 1


RestoreError = SnapshotException
EXPORTS = {"pause": "pause", "periodic": "checkpoint", "manual": "snapshot"}  # what a source's refusal says


# -- what a snapshot says about where it was made ----------------------------------------------------
def base_of(interpreter: Interpreter) -> wimage.BaseImage:
    return wimage.base_image(interpreter.engine, interpreter.module, interpreter.source)


@functools.lru_cache(maxsize=None)
def _engine_version() -> str:
    return wasmtime_version()  # reads package metadata: tens of ms


def engine_info(interpreter: Interpreter) -> dict[str, Any]:
    return {"wasmtime": _engine_version(), "flags": interpreter.flags.key(), "machine": platform.machine(),
            "cpu": platform.processor() or platform.machine()}


def base_info(interpreter: Interpreter, base: wimage.BaseImage) -> dict[str, Any]:
    return {"module_sha256": interpreter.files.module_sha256, "warm": interpreter.warm, "image_sha256": base.sha256,
            "image_size": base.size, "module_file": interpreter.source.name if interpreter.source else None}


def check_compatible(manifest: dict[str, Any], interpreter: Interpreter) -> wimage.BaseImage:
    """This process's base image, if the snapshot can be restored on it; else RestoreError
    naming what is needed."""
    engine, want = manifest.get("engine") or {}, manifest.get("base") or {}
    here = engine_info(interpreter)
    for key, what in (("wasmtime", "wasmtime"), ("flags", "engine flags")):
        if engine.get(key) != here[key]:
            raise RestoreError(f"snapshot {manifest.get('snapshot_id')} was made with {what} {engine.get(key)}, this "
                               f"process runs {here[key]}: restore it with {what} {engine.get(key)}")
    if want.get("module_sha256") != interpreter.files.module_sha256 or bool(want.get("warm")) != interpreter.warm:
        raise RestoreError(f"snapshot {manifest.get('snapshot_id')} was made on another CPython-WASI module "
                           f"({str(want.get('module_sha256'))[:16]}, warm={want.get('warm')}); this process runs "
                           f"{interpreter.files.module_sha256[:16]}, warm={interpreter.warm}")
    base = base_of(interpreter)
    if want.get("image_sha256") != base.sha256:
        raise RestoreError(
            f"snapshot {manifest.get('snapshot_id')} diffs against the warm image {str(want.get('image_sha256'))[:16]} "
            f"({want.get('module_file')}), which this process does not run (its image is {base.sha256[:16]}): restore "
            "it with the declaw-wasm version and runtime cache that made it (the cache keeps that image while "
            "a stored snapshot pins it)")
    return base


def layout_of(fs: "SandboxFS") -> list[list[Any]]:
    return [[m.guest, m.writable] for m in fs.mounts]


# -- quiet ----------------------------------------------------------------------------------------
@contextmanager
def quiet(sandbox: "LocalSandbox", wait: float = QUIET_WAIT) -> Iterator[list["Kernel"]]:
    """The sandbox at rest for as long as this is held: every context's cell in flight is waited
    for (then none starts), no command runs (ConflictException if one does) or starts."""
    with sandbox.commands_frozen():
        with ExitStack() as stack:
            kernels = sandbox.kernels()
            for kernel in kernels:
                stack.enter_context(kernel.held(wait))
            yield kernels


@dataclass
class ContextState:
    """A context at rest: its record and its guest's image (None: it had no live guest, and
    starts afresh); `written`: the writer the image was encoded into as it was captured."""

    context: Context
    count: int
    image: Optional[wimage.GuestImage]
    written: Optional[Any] = None


def capture_contexts(sandbox: "LocalSandbox", kernels: list["Kernel"],
                     writer: Optional[Callable[[], Any]] = None) -> list[ContextState]:
    """Each context's state (the sandbox held quiet by the caller). With `writer` (a factory of
    the store's part writers) each image is encoded straight from the guest's memory into one;
    without, the images are raw copies (fork)."""
    interpreter = sandbox.interpreter
    base = base_of(interpreter)
    preopens = len(sandbox.fs.mounts)
    states: list[ContextState] = []
    opened: list[Any] = []
    for kernel in kernels:
        made: list[Any] = []  # the writer this context's image went into, if captured now

        def capture(guest: Guest, kernel: "Kernel" = kernel, made: list[Any] = made) -> wimage.GuestImage:
            def at_rest(store: Any, instance: Any) -> wimage.GuestImage:
                guest.set_deadline(RELEASE_TIMEOUT)  # the guest's own modules run in it: bounded
                try:
                    Guest.turn(store, instance, RELEASE)
                except Exception as exc:
                    raise ConflictException(f"code context {kernel.context.id!r} did not come to rest for the "
                                            f"snapshot ({type(exc).__name__}); it restarts afresh") from None
                finally:
                    guest.set_deadline(None)
                open_fds = wimage.open_descriptors(store, instance, interpreter.engine, 3 + preopens)
                if open_fds:
                    shown = ", ".join(f"fd {fd} ({kind})" for fd, kind in open_fds[:8])
                    raise ConflictException(
                        f"code context {kernel.context.id!r} holds open files across cells ({shown}): "
                        "close them (f.close(), conn.close(), or a `with` block) and snapshot again. "
                        "After a restore their numbers could name other files, so they cannot be carried")
                out = None
                if writer is not None:
                    out = writer()
                    opened.append(out)
                    made.append(out)
                return wimage.capture(store, instance, base, time.monotonic_ns() - guest.clock_base_ns, out)
            try:
                image: wimage.GuestImage = guest.between_turns(at_rest)
            except ConflictException as exc:
                if "did not come to rest" in str(exc):
                    kernel.stop(lost="it did not come to rest for a snapshot")
                raise
            return image

        try:
            image, count = kernel.state(capture)
        except BaseException:
            for out in opened:
                out.discard()
            raise
        states.append(ContextState(kernel.context, count, image, made[0] if made else None))
    return states


# What a context runs just before its capture: let go of files the libraries we ship keep open
# only as a cache (matplotlib's fonts, opened when a figure is drawn; reopened on the next draw),
# so that the descriptor rule refuses only the user's own open files.
RELEASE = ("__declaw_m = __import__('sys').modules.get('matplotlib.font_manager')\n"
           "if __declaw_m is not None and __declaw_m._get_font.cache_info().currsize:\n"
           "    __declaw_m._get_font.cache_clear()\n"
           "    __declaw_m = __import__('gc').collect()\n"
           "del __declaw_m\n")


def private_trees(sandbox: "LocalSandbox") -> list[tuple[str, Path]]:
    """The writable folders that belong to the sandbox alone (its /home/user, /tmp, private
    volume copies), as (guest path, host folder). Live `mount` volumes are the volume's."""
    base = sandbox.fs.base.resolve()
    return [(m.guest, m.host) for m in sandbox.fs.mounts
            if m.writable and (m.host.resolve() == base or base in m.host.resolve().parents)]


def request_of(sandbox: "LocalSandbox") -> dict[str, Any]:
    """The create request to remake the sandbox from: what it was made with, no secret values
    (the wire model's JSON never holds them: they travel in `_host_only`)."""
    request = sandbox.options.model_dump(mode="json", exclude_none=True)
    request["template"] = sandbox.template
    return request


def placeholders_of(sandbox: "LocalSandbox") -> dict[str, str]:
    """{secret name: its placeholder in the guest's environment} (no values)."""
    session = sandbox.egress_slot.in_use()
    return {} if session is None else {i.name: i.placeholder for i in session.secrets.injections if i.scope is None}


def next_connection_id(sandbox: "LocalSandbox") -> int:
    """The id the sandbox's next connection gets (1: it never opened one)."""
    session = sandbox.egress_slot.in_use()
    return 1 if session is None else session.next_connection_id()


# -- the PII token map (the guard's) -------------------------------------------------------------------
def _tokens(sandbox: "LocalSandbox") -> Any:
    """The sandbox's PII token map, if its guard keeps one: the egress session's `token_map`
    (the guard wiring: a `security.TokenMap`), None otherwise (no PII guard, or a build without
    the wiring: then nothing is persisted)."""
    return getattr(sandbox.egress_slot.in_use(), "token_map", None)


def token_map_of(sandbox: "LocalSandbox") -> Optional[dict[str, Any]]:
    """The token map as a plain dict (it holds the original values: stored with the snapshot,
    so a restored sandbox still rehydrates its tokens)."""
    tokens = _tokens(sandbox)
    to_dict = getattr(tokens, "to_dict", None)
    return to_dict() if callable(to_dict) and len(tokens) else None


def restore_token_map(sandbox: "LocalSandbox", data: dict[str, Any]) -> None:
    """Give the restored sandbox's guard its tokens back (its map object stays its own)."""
    tokens = _tokens(sandbox)
    if tokens is not None and callable(getattr(tokens, "load", None)):
        tokens.load(data)


# -- writing a snapshot ----------------------------------------------------------------------------------
def snapshot_store(store: Optional[StateStore] = None) -> SnapshotStore:
    return SnapshotStore(store or default_store())


def take_snapshot(sandbox: "LocalSandbox", source: str, store: SnapshotStore,
                  kernels: list["Kernel"], label: Optional[str] = None, keep_memory: bool = True,
                  checkpoint: Optional[dict[str, Any]] = None,
                  unchanged: Optional[dict[str, SnapshotRecord]] = None) -> SnapshotRecord:
    """Write the (quiet) sandbox to the store as a snapshot of `source` (`label`: E2B's name).
    Without `keep_memory` (E2B's filesystem-only pause), no context is kept and the resume is a
    new boot. `checkpoint`: what a node-loss checkpoint records of itself (checkpoints.py);
    `unchanged`: contexts (by id) that ran nothing since the snapshot given for each, whose image
    part is copied from it rather than captured again (capturing a context is most of a
    snapshot's time)."""
    import json

    started = time.monotonic()
    snapshot_id = new_snapshot_id()
    interpreter = sandbox.interpreter
    base = base_of(interpreter)
    parts: dict[str, Any] = {}
    unchanged = unchanged or {}
    kept = kernels if keep_memory else []  # a filesystem-only pause keeps no context
    states: list[ContextState] = []
    # the files are bounded by the disk quota: a guest's sparse or growing file cannot make a
    # snapshot carry more (`_hostfs.trees`)
    budget = ExportBudget(sandbox.limits.disk_bytes, f"{EXPORTS.get(source, 'snapshot')} of sandbox "
                                                     f"{sandbox.sandbox_id}", files=sandbox.limits.disk_files)
    try:
        # the files first: a sandbox over its disk quota is refused before any context is captured
        tree_entries = []
        for index, (guest, host) in enumerate(private_trees(sandbox)):
            writer = store.part_writer(sandbox.sandbox_id, snapshot_id)
            try:
                count, size = trees.write_tar(host, writer, budget, guest)  # type: ignore[arg-type]  # a write-only file
                parts[f"tree-{index}"] = writer.commit()
            finally:
                writer.discard()
            tree_entries.append({"guest": guest, "part": f"tree-{index}", "entries": count, "bytes": size})
        states = capture_contexts(sandbox, [k for k in kept if k.context.id not in unchanged],
                                  lambda: store.part_writer(sandbox.sandbox_id, snapshot_id))
        captured = iter(states)
        context_entries = []
        for index, kernel in enumerate(kept):
            if kernel.context.id in unchanged:
                context_entries.append(_copy_context(store, sandbox.sandbox_id, snapshot_id, kernel.context.id,
                                                     unchanged[kernel.context.id], f"ctx-{index}", parts))
                continue
            state = next(captured)
            entry: dict[str, Any] = {"id": state.context.id, "language": state.context.language,
                                     "cwd": state.context.cwd, "execution_count": state.count, "part": None}
            if state.image is not None:
                name = f"ctx-{index}"
                writer = state.written or store.part_writer(sandbox.sandbox_id, snapshot_id)
                try:
                    if state.written is None:  # a restored context not started: its pending image
                        wimage.write(state.image, writer)
                    parts[name] = writer.commit()
                finally:
                    writer.discard()
                entry.update(part=name, memory_size=state.image.memory_size, dirty_bytes=state.image.dirty_bytes)
            context_entries.append(entry)
        tokens = token_map_of(sandbox)
        if tokens is not None:
            parts["tokens"] = store.put_part(sandbox.sandbox_id, snapshot_id, json.dumps(tokens).encode())
        manifest = {
            "kind": "declaw-wasm sandbox snapshot", "snapshot_format": SNAPSHOT_FORMAT, "source": source,
            "created_at": datetime.now(timezone.utc).isoformat(), "engine": engine_info(interpreter),
            "base": base_info(interpreter, base), "mounts": layout_of(sandbox.fs),
            "sandbox": {"request": request_of(sandbox), "secrets": placeholders_of(sandbox),
                        "metadata": dict(sandbox.metadata), "started_at": sandbox.started_at.isoformat(),
                        "next_connection_id": next_connection_id(sandbox),
                        "boot_id": sandbox.boot_id if keep_memory else None},
            "trees": tree_entries, "contexts": context_entries, "tokens": "tokens" if tokens is not None else None,
            "pause_duration_ms": None, "checkpoint": checkpoint, "names": [label] if label else [],
        }
        manifest["duration_ms"] = round((time.monotonic() - started) * 1000)
        record = store.publish(sandbox.sandbox_id, snapshot_id, manifest, parts)
    except BaseException:
        for state in states:  # images encoded but not stored yet (their temp files)
            if state.written is not None:
                state.written.discard()
        store.discard(sandbox.sandbox_id, snapshot_id)
        raise
    if interpreter.warm and interpreter.source is not None:
        witness = store.store.path(f"{record.prefix}/manifest.json") if store.store.local else ""
        pin(interpreter.source, _pin_holder(store, record), witness)
    return record


def _copy_context(store: SnapshotStore, sandbox_id: str, snapshot_id: str, context_id: str,
                  source: SnapshotRecord, name: str, parts: dict[str, Any]) -> dict[str, Any]:
    """A context's entry and image part, copied from an earlier snapshot of the sandbox."""
    entry = next((dict(e) for e in source.manifest.get("contexts") or [] if e.get("id") == context_id), None)
    if entry is None:
        raise SnapshotException(f"snapshot {source.snapshot_id} has no code context {context_id!r} to copy")
    if entry.get("part"):
        parts[name] = store.put_part(sandbox_id, snapshot_id, store.read_part(source, str(entry["part"])))
        entry["part"] = name
    return entry


def _pin_holder(store: SnapshotStore, record: SnapshotRecord) -> str:
    import hashlib

    return hashlib.sha256(f"{store.store.url}|{record.prefix}".encode()).hexdigest()[:32]


def delete_snapshot(store: SnapshotStore, sandbox_id: str, snapshot_id: str,
                    interpreter: Optional[Interpreter]) -> bool:
    """Delete a snapshot; its pin on the warm image (if this cache holds one) goes too."""
    try:
        record: Optional[SnapshotRecord] = store.read(sandbox_id, snapshot_id)
    except (RecordNotFound, StateError):
        record = None
    state = store.get_state(sandbox_id)
    if state is not None and state.get("state") == "paused" and state.get("snapshot_id") == snapshot_id:
        raise ConflictException(f"snapshot {snapshot_id} is what paused sandbox {sandbox_id} resumes from: "
                                "resume or kill the sandbox first")
    existed = store.delete(sandbox_id, snapshot_id)
    if record is not None and interpreter is not None and interpreter.source is not None:
        module_file = (record.manifest.get("base") or {}).get("module_file")
        if module_file:
            unpin(interpreter.source.with_name(module_file), _pin_holder(store, record))
    return existed


def snapshot_model(record: SnapshotRecord) -> Snapshot:
    """declaw's `Snapshot` (and `SnapshotInfo`'s fields) for a stored snapshot."""
    m = record.manifest
    memory = sum(int(c.get("memory_size") or 0) for c in m.get("contexts") or [])
    parts = m.get("parts") or {}
    ctx_parts = [c["part"] for c in m.get("contexts") or [] if c.get("part")]
    return Snapshot(snapshot_id=record.snapshot_id, sandbox_id=record.sandbox_id, source=record.source,
                    mem_blob_key=f"{record.prefix}/{ctx_parts[0]}" if ctx_parts else "",
                    vmstate_blob_key=f"{record.prefix}/manifest.json",
                    mem_size_bytes=memory or None, pause_duration_ms=m.get("pause_duration_ms"),
                    created_at=record.created_at,
                    size_bytes=sum(int(p.get("size", 0)) for p in parts.values() if isinstance(p, dict)),
                    names=[str(n) for n in m.get("names") or []])


# -- restoring -----------------------------------------------------------------------------------------
@dataclass
class Restoring:
    """What a sandbox is remade from (a stored snapshot, or a fork's source): given to the
    sandbox's constructor, which calls `fill`, then `install`."""

    request: CreateSandbox
    sandbox_id: Optional[str]  # None: a new id (create(snapshot=...), fork)
    layout: list[list[Any]]
    contexts: "list[ContextState] | Future[list[ContextState]]"  # a stored snapshot's: being read
    base: wimage.BaseImage
    fill: Callable[["SandboxFS"], None]
    placeholders: dict[str, str] = field(default_factory=dict)
    next_connection_id: int = 1
    tokens: Optional[dict[str, Any]] = None
    reseed: bool = False  # forks: new random seeds in each context, so they diverge
    boot_id: Optional[str] = None  # the sandbox's boot id, kept by a resume that keeps memory

    def install(self, sandbox: "LocalSandbox") -> None:
        """Check the mount layout and add the contexts (each guest starts from its image on the
        context's first use: a fork or a resume costs no guest until one is needed)."""
        from .kernel import Kernel

        if layout_of(sandbox.fs) != self.layout:
            raise RestoreError("the restored sandbox's mount layout differs from the snapshot's "
                               f"(snapshot: {self.layout}, here: {layout_of(sandbox.fs)}): the same volumes must be "
                               "attached at the same paths, with the same template")
        if self.next_connection_id > 1:  # else no connection was ever opened: nothing to reserve
            sandbox.egress.reserve_connection_ids(self.next_connection_id)
        if self.tokens is not None:
            restore_token_map(sandbox, self.tokens)
        contexts = self.contexts.result() if isinstance(self.contexts, Future) else self.contexts
        for state in contexts:
            image = (state.image, self.base) if state.image is not None else None
            kernel = Kernel(sandbox, state.context.model_copy(), image=image, count=state.count if image else 0,
                            first_turn=RESEED if self.reseed else None)
            sandbox.code.install(kernel)  # its guest starts from the image on first use


# What a forked context runs first (once, on its own guest): new random seeds and tempfile names,
# so that forks diverge (the same renewal every guest start-up does, guest/_declaw_boot.py).
RESEED = ("__declaw_m = __import__('sys').modules\n"
          "if 'random' in __declaw_m: __declaw_m['random'].seed()\n"
          "if 'numpy.random' in __declaw_m: __declaw_m['numpy.random'].seed()\n"
          "if 'tempfile' in __declaw_m: __declaw_m['tempfile']._name_sequence = None\n"
          "del __declaw_m\n")


@contextmanager
def reading(snapshot_id: str) -> Iterator[None]:
    """A snapshot that cannot be read back (damaged, truncated, tampered with, malformed) is a
    SnapshotException naming it."""
    try:
        yield
    except (StateError, trees.TreeError, wimage.ImageError, ValueError) as exc:
        if isinstance(exc, SnapshotException):
            raise
        raise SnapshotException(f"snapshot {snapshot_id} cannot be restored: {exc}") from None


_reader_pool: Optional[ThreadPoolExecutor] = None
_reader_lock = threading.Lock()


def _readers() -> ThreadPoolExecutor:
    """The threads that read snapshots' context images beside the rest of a restore (reading
    and hashing release the GIL). Not image.py's pool: a capture or an image's apply waits on
    that one, and a reader queued behind them could hold a restore up."""
    global _reader_pool
    with _reader_lock:
        if _reader_pool is None:
            _reader_pool = ThreadPoolExecutor(2, thread_name_prefix="declaw-restore-read")
        return _reader_pool


def load(record: SnapshotRecord, store: SnapshotStore, interpreter: Interpreter,
         sandbox_id: Optional[str]) -> Restoring:
    """A stored snapshot, checked and read, ready to remake a sandbox from (with `sandbox_id`, or
    a new id when None)."""
    with reading(record.snapshot_id):
        return _load(record, store, interpreter, sandbox_id)


def _load(record: SnapshotRecord, store: SnapshotStore, interpreter: Interpreter,
          sandbox_id: Optional[str]) -> Restoring:
    import json

    m = record.manifest
    base = check_compatible(m, interpreter)
    sandbox = m.get("sandbox") or {}
    try:
        request = CreateSandbox.model_validate(sandbox.get("request") or {})
    except ValueError as exc:
        raise RestoreError(f"snapshot {record.snapshot_id}: its sandbox record is malformed ({exc})") from None
    entries = list(m.get("contexts") or [])
    for entry in entries:
        if not isinstance(entry, dict) or "id" not in entry:
            raise RestoreError(f"snapshot {record.snapshot_id}: malformed context entry")

    def read_contexts() -> list[ContextState]:
        """Every context's image read, its digest checked, decoded: on a thread, while the
        sandbox's folder is made and its files written (the restore waits for it before it
        installs the contexts; whatever fails here fails the restore, as before)."""
        contexts = []
        with reading(record.snapshot_id):
            for entry in entries:
                part = entry.get("part")
                try:
                    context = Context(id=str(entry["id"]), language=str(entry.get("language") or "python"),
                                      cwd=str(entry.get("cwd") or "/home/user"))
                    image = wimage.decode(store.read_part(record, str(part))) if part else None
                except wimage.ImageError as exc:
                    raise RestoreError(f"snapshot {record.snapshot_id}: context image damaged ({exc})") from None
                except (KeyError, TypeError):
                    raise RestoreError(f"snapshot {record.snapshot_id}: malformed context entry") from None
                if image is not None and image.base_sha256 != base.sha256:
                    raise RestoreError(f"snapshot {record.snapshot_id}: a context image names another base image")
                contexts.append(ContextState(context, int(entry.get("execution_count") or 0), image))
        return contexts

    contexts = _readers().submit(read_contexts) if any(e.get("part") for e in entries) else read_contexts()
    tree_parts = [(str(t["guest"]), str(t["part"])) for t in m.get("trees") or []]
    for _, part in tree_parts:
        store.part_ref(record, part)  # every part the manifest names is listed

    def fill(fs: "SandboxFS") -> None:
        with reading(record.snapshot_id):
            fill_trees(fs)

    def fill_trees(fs: "SandboxFS") -> None:
        hosts = {mount.guest: mount.host for mount in fs.mounts}
        budget = ExportBudget(fs.quota_bytes(), f"restore of snapshot {record.snapshot_id}", files=fs.quota_files())
        for guest, part in tree_parts:
            host = hosts.get(guest)
            if host is None:
                raise RestoreError(f"the snapshot has files for {guest}, which the restored sandbox does not "
                                   "mount (attach the same volumes at the same paths)")
            with store.open_part(record, part) as reader:
                trees.read_tar(reader, host, budget, guest)
                reader.finish()  # the digest is checked at the end: a damaged tree fails here

    tokens = json.loads(store.read_part(record, "tokens")) if m.get("tokens") else None
    return Restoring(request, sandbox_id, [list(x) for x in m.get("mounts") or []], contexts, base, fill,
                     dict(sandbox.get("secrets") or {}), int(sandbox.get("next_connection_id") or 1), tokens,
                     boot_id=str(sandbox["boot_id"]) if sandbox.get("boot_id") else None)


def fork_source(sandbox: "LocalSandbox", kernels: list["Kernel"]) -> Restoring:
    """A restoring plan that copies this (quiet) sandbox: files from its folders, contexts from
    raw images shared by every fork. A sandbox whose files are over its disk quota is refused
    first, before its contexts are captured (and each fork's copy counts again as it copies)."""
    sources = private_trees(sandbox)
    what = f"fork of sandbox {sandbox.sandbox_id}"
    trees.count_files(sources, ExportBudget(sandbox.limits.disk_bytes, what, files=sandbox.limits.disk_files))
    contexts = capture_contexts(sandbox, kernels)

    def fill(fs: "SandboxFS") -> None:
        hosts = {mount.guest: mount.host for mount in fs.mounts}
        budget = ExportBudget(sandbox.limits.disk_bytes, what, files=sandbox.limits.disk_files)
        for guest, host in sources:
            target = hosts.get(guest)
            if target is None:
                raise RestoreError(f"the fork does not mount {guest}")
            trees.copy_tree(host, target, budget, guest)

    request = CreateSandbox.model_validate(request_of(sandbox))
    request._host_only = dict(sandbox.options._host_only)
    return Restoring(request, None, layout_of(sandbox.fs), contexts, base_of(sandbox.interpreter), fill,
                     placeholders_of(sandbox), next_connection_id(sandbox), token_map_of(sandbox),
                     reseed=True)


# -- leases: one process runs a sandbox ------------------------------------------------------------------
class Held:
    """The leases this process holds on sandboxes it runs from the store, renewed in the
    background (every third of the TTL) until released."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, tuple[StateStore, str]] = {}  # sandbox id -> (store, token)
        self._thread: Optional[threading.Thread] = None

    def take(self, store: StateStore, sandbox_id: str, breaking: str = "") -> None:
        """Take the sandbox's lease (ConflictException if another process holds it); `breaking`:
        the owner of a holder known to be dead (checkpoints.py), whose lease is taken over."""
        with self._lock:
            if sandbox_id in self._held:
                return
        try:
            info = store.leases.take(lease_name(sandbox_id), LEASE_TTL, owner=owner(), breaking=breaking)
        except LeaseHeld as exc:
            raise ConflictException(f"sandbox {sandbox_id} is running in another process, or being resumed "
                                    f"there ({exc}); connect to it there, or wait until it is paused") from None
        with self._lock:
            self._held[sandbox_id] = (store, info.token)
            if self._thread is None:
                self._thread = threading.Thread(target=self._renew, name="declaw-leases", daemon=True)
                self._thread.start()

    def holds(self, sandbox_id: str) -> bool:
        with self._lock:
            return sandbox_id in self._held

    def release(self, sandbox_id: str) -> None:
        with self._lock:
            found = self._held.pop(sandbox_id, None)
        if found is not None:
            try:
                found[0].leases.release(lease_name(sandbox_id), found[1])
            except (LeaseLost, RecordNotFound, StateError, OSError) as exc:
                log.warning("sandbox %s: releasing its lease: %s", sandbox_id, exc)

    def _renew(self) -> None:
        while True:
            time.sleep(LEASE_TTL / 3)
            with self._lock:
                held = list(self._held.items())
            for sandbox_id, (store, token) in held:
                try:
                    store.leases.renew(lease_name(sandbox_id), token, LEASE_TTL)
                except LeaseLost as exc:
                    log.error("sandbox %s: its lease was lost (%s); another process may resume it too", sandbox_id, exc)
                    with self._lock:
                        self._held.pop(sandbox_id, None)
                except (StateError, OSError) as exc:
                    log.warning("sandbox %s: renewing its lease: %s (will retry)", sandbox_id, exc)


held = Held()


def owner() -> str:
    """Who holds a lease: this host and process (a pool or Ray names a dead host by it)."""
    import os
    import socket

    return f"{socket.gethostname()}:{os.getpid()}"


def check_resume_secrets(restoring: Restoring, host_only: dict[str, Any]) -> None:
    """A sandbox made with secrets needs them again to resume elsewhere (they are never stored)."""
    names = sorted(restoring.placeholders)
    given = host_only.get("secrets") or {}
    missing = [n for n in names if n not in given]
    if missing:
        raise InvalidArgumentException(
            f"sandbox {restoring.sandbox_id or ''} was made with secrets {', '.join(missing)}, which are never "
            "stored: pass secrets={...} again to resume or restore it in this process")


def not_found(sandbox_id: str) -> NotFoundException:
    from ..exceptions import SandboxNotFoundException

    return SandboxNotFoundException(f"sandbox {sandbox_id!r} is neither running in this process nor paused in "
                                    "the state store (DECLAW_WASM_STATE)")
