"""What the server keeps beyond its backend: the sandboxes it made (one that timed out stays
known for a while, so calls on it raise `TimeoutException` as in-process, not "not found"), the
background commands, PTYs and stdio processes it started (declaw's `wait` and SSE streams may
come after the command has ended, when the backend has forgotten it) and the watches it opened (declaw's SDKs
open watches and never read them: an unread watch lapses)."""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from typing import Any, Optional

from .._backend import ProcessHandle, SandboxBackend, Sandboxes, Watcher
from ..exceptions import NotFoundException, RateLimitException


class Registry:
    KEEP_ENDED = 1000
    KEEP_PROCESSES = 1024  # background commands, PTYs, stdio kept for `wait` and streams; ended ones go first
    WATCH_IDLE = 120.0  # seconds an unread watch lives
    MAX_WATCHES = 256  # open watches per server (the backend caps each sandbox too)

    def __init__(self, sandboxes: Sandboxes, vault: Any = None) -> None:
        from ..secrets import Vault

        self.sandboxes = sandboxes
        self.vault: Vault = vault if vault is not None else Vault.default()  # the vault routes' and vault_refs'
        self._lock = threading.Lock()
        self._made: dict[str, SandboxBackend] = {}
        self._mounts: dict[str, dict[str, str]] = {}  # sandbox id -> volume id -> mount path
        self._processes: "OrderedDict[tuple[str, int], ProcessHandle]" = OrderedDict()
        self._watches: dict[str, tuple[str, Watcher, list[float]]] = {}

    # -- sandboxes ---------------------------------------------------------------------------------
    def create(self, request: Any) -> SandboxBackend:
        request._host_only["vault"] = self.vault  # vault_refs name this server's secrets
        backend = self.sandboxes.create(request)
        with self._lock:
            self._made[backend.sandbox_id] = backend
            self._mounts[backend.sandbox_id] = {str(v.get("volume_id")): str(v.get("mount_path"))
                                                for v in request.volumes or ()}
            ended = [i for i, b in self._made.items() if not b.is_running()]
            for sandbox_id in ended[: max(0, len(ended) - self.KEEP_ENDED)]:
                del self._made[sandbox_id]
                self._mounts.pop(sandbox_id, None)
        return backend

    def mount_path(self, sandbox_id: str, volume_id: str) -> Optional[str]:
        """Where a volume is attached in a sandbox this server made (for `Volumes.commit`)."""
        with self._lock:
            return self._mounts.get(sandbox_id, {}).get(volume_id)

    def adopt(self, backend: SandboxBackend) -> None:
        """A sandbox made by a resume, restore or fork: known like one this server created."""
        with self._lock:
            self._made[backend.sandbox_id] = backend

    def get(self, sandbox_id: str) -> SandboxBackend:
        with self._lock:
            backend = self._made.get(sandbox_id)
        return backend if backend is not None else self.sandboxes.connect(sandbox_id)

    def forget(self, sandbox_id: str) -> None:
        with self._lock:
            self._made.pop(sandbox_id, None)
            self._mounts.pop(sandbox_id, None)
            for key in [k for k in self._processes if k[0] == sandbox_id]:
                del self._processes[key]
            for wid in [w for w, (s, _, _) in self._watches.items() if s == sandbox_id]:
                self._watches.pop(wid)[1].stop()

    def kill_all(self) -> None:
        """Kill every sandbox this server made (at shutdown: their host folders go too)."""
        with self._lock:
            made, self._made = list(self._made.values()), {}
        for backend in made:
            backend.kill()

    # -- processes -----------------------------------------------------------------------------------
    def keep(self, sandbox_id: str, process: ProcessHandle) -> ProcessHandle:
        with self._lock:
            self._processes[(sandbox_id, process.pid)] = process
            if len(self._processes) > self.KEEP_PROCESSES:
                for key in [k for k, p in self._processes.items() if p.done][: len(self._processes)
                                                                              - self.KEEP_PROCESSES]:
                    del self._processes[key]
        return process

    def process(self, sandbox_id: str, pid: int, pty: bool = False) -> ProcessHandle:
        """A command this server started (ended or not), else the backend's running one."""
        with self._lock:
            found = self._processes.get((sandbox_id, pid))
        if found is not None:
            return found
        return self.get(sandbox_id).process(pid, pty)

    # -- watches ------------------------------------------------------------------------------------------
    def add_watch(self, sandbox_id: str, watcher: Watcher) -> str:
        now = time.monotonic()
        with self._lock:
            for wid in [w for w, (_, _, seen) in self._watches.items() if now - seen[0] > self.WATCH_IDLE]:
                self._watches.pop(wid)[1].stop()
            if len(self._watches) >= self.MAX_WATCHES:
                watcher.stop()
                raise RateLimitException(f"the server has {len(self._watches)} open watches; stop some")
            wid = secrets.token_hex(12)
            self._watches[wid] = (sandbox_id, watcher, [now])
        return wid

    def watch(self, sandbox_id: str, wid: str) -> Watcher:
        with self._lock:
            found = self._watches.get(wid)
            if found is None or found[0] != sandbox_id:
                raise NotFoundException(f"no watch {wid!r} in sandbox {sandbox_id}")
            found[2][0] = time.monotonic()
            return found[1]

    def stop_watch(self, sandbox_id: str, wid: str) -> Optional[Watcher]:
        with self._lock:
            found = self._watches.get(wid)
            if found is None or found[0] != sandbox_id:
                return None
            del self._watches[wid]
        found[1].stop()
        return found[1]
