"""The registry of this process's sandboxes, and the paused ones of the state store.

`sandboxes` holds the live sandboxes (create puts them in, an end takes them out) and those
paused here, kept to resume in place; the rest of this module is what the in-process backend
(sandbox.py's `LocalSandboxes`) does with paused sandboxes in the state store: list them, check
one may be resumed here, clear one, free a pause's leftovers in the background, and `reopen`,
the one path by which a sandbox comes back from the store (resume and restore alike).

The state store is imported on first use (snapshots.py brings it): a process that never
pauses never loads it.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Generic, List, Optional, Protocol, TypeVar

from .._printable import logger
from .._wasm.warm_image import get_interpreter
from ..exceptions import ConflictException, NotFoundException, SandboxException, SnapshotException
from ..models import SandboxInfo
from ..settings import state_given, state_url

if TYPE_CHECKING:
    from .._state.snapshots import SnapshotRecord, SnapshotStore
    from .snapshots import Restoring

log = logger("declaw_wasm")


class Registered(Protocol):
    """What the registry reads of a sandbox."""

    @property
    def sandbox_id(self) -> str: ...
    @property
    def running(self) -> bool: ...
    def kill(self) -> bool: ...


S = TypeVar("S", bound=Registered)


class Registry(Generic[S]):
    """The sandboxes of this process: the live ones, and those paused here (kept to resume in
    place)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: dict[str, S] = {}
        self._paused: dict[str, S] = {}

    def add(self, sandbox: S) -> None:
        with self._lock:
            self._live[sandbox.sandbox_id] = sandbox

    def forget(self, sandbox: S) -> None:
        """The sandbox ended (killed, timed out or paused)."""
        with self._lock:
            self._live.pop(sandbox.sandbox_id, None)

    def count(self) -> int:
        with self._lock:
            return len(self._live)

    def all(self) -> list[S]:
        with self._lock:
            return list(self._live.values())

    def get(self, sandbox_id: str) -> Optional[S]:
        """The sandbox `sandbox_id` as this process knows it: live, or paused here."""
        with self._lock:
            return self._live.get(sandbox_id) or self._paused.get(sandbox_id)

    def live(self, sandbox_id: str) -> Optional[S]:
        """The running sandbox `sandbox_id` of this process, if any (file URLs)."""
        with self._lock:
            sandbox = self._live.get(sandbox_id)
        return sandbox if sandbox is not None and sandbox.running else None

    def entry(self, sandbox_id: str) -> tuple[Optional[S], Optional[S]]:
        """(its live entry, its paused one), read together."""
        with self._lock:
            return self._live.get(sandbox_id), self._paused.get(sandbox_id)

    def paused(self, sandbox: S, replace: bool = True) -> S:
        """Keep a paused sandbox to resume in place; `replace=False`: the one kept already, if any."""
        with self._lock:
            if replace:
                self._paused[sandbox.sandbox_id] = sandbox
                return sandbox
            return self._paused.setdefault(sandbox.sandbox_id, sandbox)

    def unpaused(self, sandbox_id: str) -> None:
        """It resumed, or was killed while paused."""
        with self._lock:
            self._paused.pop(sandbox_id, None)

    def kill_all(self) -> None:
        """A program that ends without killing its sandboxes leaves no sandbox folders behind."""
        for sandbox in self.all():
            try:
                sandbox.kill()
            except Exception:  # exiting anyway: clean up what can be
                pass


sandboxes: Registry[Any] = Registry()


# -- the one path back from the store ---------------------------------------------------------------------
T = TypeVar("T")


def reopen(store: "SnapshotStore", sandbox_id: str, pick: Callable[[], tuple["SnapshotRecord", dict[str, Any]]],
           remake: Callable[["Restoring"], T], breaking: str = "") -> T:
    """A sandbox back from the store, for resume and restore alike: take its lease (one process
    runs it; `breaking`: the owner of a dead holder, whose lease is taken over), read the
    snapshot `pick` names (with the sandbox's state record, kept), load and check it, `remake`
    the sandbox from it, and record it as running here. Whatever fails lets the lease go."""
    from .snapshots import held, load, owner

    held.take(store.store, sandbox_id, breaking=breaking)
    try:
        record, state = pick()
        restoring = load(record, store, get_interpreter(), sandbox_id)
        sandbox = remake(restoring)
        store.put_state(sandbox_id, {**state, "state": "running", "snapshot_id": record.snapshot_id,
                                     "owner": owner()})
    except BaseException:
        held.release(sandbox_id)
        raise
    sandboxes.unpaused(sandbox_id)
    return sandbox


def read_snapshot(store: Any, sandbox_id: str, snapshot_id: str) -> Any:
    from .._state import RecordNotFound, StateError  # the store's code loads with the store

    try:
        return store.read(sandbox_id, snapshot_id)
    except RecordNotFound:
        raise NotFoundException(f"sandbox {sandbox_id} has no snapshot {snapshot_id!r}") from None
    except StateError as exc:
        raise SnapshotException(f"snapshot {snapshot_id} of sandbox {sandbox_id} cannot be read: {exc}") from None


def latest(store: Any, sandbox_id: str) -> Any:
    from .._state import RecordNotFound

    try:
        return store.latest(sandbox_id)
    except RecordNotFound:
        raise NotFoundException(f"sandbox {sandbox_id!r} has no snapshots in the state store") from None


# -- paused sandboxes in the state store ----------------------------------------------------------------------
def store_in_use() -> bool:
    """Whether this process may look in the state store (set explicitly, or the default folder
    exists already): listing sandboxes must not create the user's state folder."""
    return state_given() or os.path.isdir(state_url())


def paused_infos() -> List[SandboxInfo]:
    """The paused sandboxes of the state store (not those paused here and resumed since)."""
    if not store_in_use():
        return []
    from .._state import StateError
    from .snapshots import snapshot_store

    infos = []
    try:
        states = snapshot_store().states()
    except (StateError, OSError) as exc:
        log.warning("listing paused sandboxes: %s", exc)
        return []
    for state in states.values():
        if state.get("state") != "paused":
            continue
        try:
            infos.append(SandboxInfo.model_validate(state.get("info") or {}))
        except ValueError:
            continue
    return infos


def paused_info(sandbox_id: str) -> Optional[SandboxInfo]:
    """What the state store says of a sandbox paused there (by this process or another), if it
    may be resumed here; None if it holds none. A sandbox running in another process is a
    ConflictException; a record someone without the state key wrote, UntrustedRecord."""
    if not store_in_use():
        return None
    from .._state import UntrustedRecord, check_id
    from .._state.snapshots import lease_name
    from .snapshots import snapshot_store

    try:
        check_id(sandbox_id, "sandbox id")
        store = snapshot_store()
        state = store.get_state(sandbox_id)
        if state is None:
            return None
        running = state.get("state") != "paused" and store.store.leases.status(lease_name(sandbox_id))
    except UntrustedRecord as exc:  # a record someone without the state key wrote: say so, use none of it
        raise UntrustedRecord(f"sandbox {sandbox_id} cannot be resumed: {exc}", exc.reason) from None
    except (SandboxException, OSError):
        return None
    if running and running.held:
        raise ConflictException(f"sandbox {sandbox_id} is running in another process ({running.owner}); "
                                "use it there, or pause it there first")
    # a paused sandbox, or one whose runner ended without pausing it (its lease lapsed): the last
    # pause is what it resumes from
    try:
        return SandboxInfo.model_validate(state.get("info") or {})
    except ValueError:
        return None


def drop_older_pauses(store: Any, sandbox_id: str, latest: str) -> None:
    """The latest pause is what a sandbox resumes from: older pause snapshots go (in the
    background: a pause returns once its own snapshot is stored)."""
    from .._state import StateError

    try:
        for older in store.list(sandbox_id):
            if older.source == "pause" and older.snapshot_id != latest:
                store.delete(sandbox_id, older.snapshot_id)
    except (StateError, OSError) as exc:
        log.warning("sandbox %s: deleting older pause snapshots: %s", sandbox_id, exc)


def forget_paused(sandbox_id: str) -> bool:
    """Kill a paused sandbox: it is no longer resumable (its snapshots stay)."""
    sandboxes.unpaused(sandbox_id)
    return clear_state(sandbox_id)


def clear_state(sandbox_id: str) -> bool:
    from .._state import StateError
    from .snapshots import snapshot_store

    try:
        return snapshot_store().clear_state(sandbox_id)
    except (StateError, OSError) as exc:
        log.warning("sandbox %s: clearing its state in the store: %s", sandbox_id, exc)
        return False


# -- what a pause need not wait for ---------------------------------------------------------------------------
_background: set[threading.Thread] = set()
_background_lock = threading.Lock()
_waits_at_exit = False


def in_background(work: Any) -> None:
    """Clean-up a pause need not wait for (freeing its folder, deleting older pause snapshots),
    on a thread of its own; the process waits for them at exit (a serverless function that
    pauses and returns must not leave a folder behind)."""
    def run() -> None:
        try:
            work()
        finally:
            with _background_lock:
                _background.discard(threading.current_thread())

    global _waits_at_exit
    thread = threading.Thread(target=run, name="declaw-reap", daemon=True)
    with _background_lock:
        _background.add(thread)
        if not _waits_at_exit:  # registered now, so it runs before the exit handlers of what the
            _waits_at_exit = True  # store loaded (fsspec's event loop, for an object store)
            atexit.register(finish_background)
    thread.start()


def finish_background(timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    with _background_lock:
        pending = list(_background)
    for thread in pending:
        thread.join(max(0.0, deadline - time.monotonic()))
