"""Sandboxes in this process: `LocalSandbox` (one sandbox: its file tree, running guests and
lifetime) and `LocalSandboxes` (the process's registry: create, connect, list).

Both implement the backend contract (_backend.py) that the faces, the server and the other
backends' workers use; arguments arrive checked (`_args.py`).
"""

from __future__ import annotations

import atexit
import os
import secrets
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar, List, Optional, Sequence, Union

from .._assets import rootfs_dir
from .._backend import Callback, WriteData
from .._egress.audit import AuditEvent
from .._egress.create import EgressPlan, plan_from_create, secrets_of, security_policy
from .._packages.catalog import GuestTemplate, lookup
from .._wasm.layout import PTY_ENV, base_env
from .._wasm.snapshot import get_runtime, guest_mounts
from ..exceptions import (InvalidArgumentException, NotFoundException, RateLimitException,
                          SandboxException, SandboxNotFoundException, TimeoutException)
from ..execution import Context, Execution
from ..limits import Limits
from ..models import EntryInfo, ProcessInfo, PtySize, SandboxInfo, SandboxMetrics, SandboxState, WriteInfo
from ..settings import max_sandboxes
from ..wire import CreateContext, CreatePty, CreateSandbox, RunCode, RunCommand
from . import quota
from .files import FileChunks, SandboxFS
from .kernel import CodeInterpreter
from .processes import Process
from .tools import Tools, close_tools, host_tools
from .watch import LocalWatcher, Watches

DEFAULT_TIMEOUT = 300.0


class LocalSandbox:
    """One sandbox in this process."""

    # the create request as made (declaw's network, security, lifecycle, volumes and vault_refs
    # travel here as data for the egress, guardrails and volumes code to read)
    options: CreateSandbox = CreateSandbox()

    def __init__(self, template: GuestTemplate, timeout: float, metadata: dict[str, str],
                 envs: dict[str, str], limits: Limits, volumes: Sequence[Any] = (),
                 egress: Optional[EgressPlan] = None, tools: Optional[Tools] = None) -> None:
        self.runtime = get_runtime()
        self.tools = tools  # host tools every guest of the sandbox may call (tools.py)
        self.sandbox_id = "sbx_" + secrets.token_hex(16)  # 128 bits: ids are capabilities once served
        self.template = template.name
        self.profile = template.profile(self.runtime)  # what each guest's start-up applies
        self.metadata = metadata
        self.envs = {**template.envs, **envs}
        self.limits = limits
        self.egress = (egress or EgressPlan()).session(limits, self.envs)  # the network (_egress)
        mounts = guest_mounts(self.runtime) + template.ensure_mounts(self.runtime)
        self.fs = SandboxFS(mounts, skeleton=rootfs_dir(), limits=limits, overlay=template.root)
        self.volumes: Optional[Any] = None  # declaw's volumes (_volumes/attach.py): mounts added to fs
        if volumes:
            self.volumes = _attach(self.sandbox_id, volumes, self.fs)
        self.started_at = datetime.now(timezone.utc)
        self.started_monotonic = time.monotonic()
        self.end_at = self.started_at
        self._lock = threading.Lock()
        self._processes: dict[int, Process] = {}
        self._next_pid = 1
        self._timer: Optional[threading.Timer] = None
        self._ended: Optional[str] = None  # None while running; "killed" or "timeout"
        self._timeout = timeout
        self.code = CodeInterpreter(self)
        self.watches = Watches()
        self.cpu_seconds_ended = 0.0  # CPU time of the guests that have ended (metrics)
        self._last_sample: Optional[tuple[float, float]] = None  # (wall clock, cpu seconds)
        try:
            self.set_timeout(timeout)
        except BaseException:  # a bad timeout: leave no folder behind
            self._release_volumes()
            self.fs.destroy()
            raise
        quota.watcher.watch(self)

    # -- lifetime ----------------------------------------------------------------------------------
    def set_timeout(self, timeout: float) -> None:
        """Kill the sandbox `timeout` seconds from now (shorter or longer than before)."""
        with self._lock:
            self._require_running()
            if self._timer is not None:
                self._timer.cancel()
            self._timeout = timeout
            self.end_at = datetime.now(timezone.utc) + timedelta(seconds=timeout)
            self._timer = threading.Timer(timeout, self._end, kwargs={"reason": "timeout"})
            self._timer.daemon = True
            self._timer.start()

    def extend_timeout(self, timeout: float) -> None:
        """E2B's `connect`: a longer lifetime than what is left extends it; a shorter changes nothing."""
        left = (self.end_at - datetime.now(timezone.utc)).total_seconds()
        if timeout > left:
            self.set_timeout(timeout)

    def kill(self) -> bool:
        """Stop every running guest and delete the file tree. False if already gone."""
        return self._end("killed")

    def _end(self, reason: str) -> bool:
        with self._lock:
            if self._ended is not None:
                return False
            self._ended = reason
            if self._timer is not None:
                self._timer.cancel()
            processes = list(self._processes.values())
        for process in processes:
            process.guest.kill("killed")
        for process in processes:
            process.guest.wait(5.0)
        self.code.stop_all()
        close_tools(self.tools)
        self.watches.stop_all()
        self.egress.close()
        self._release_volumes()  # after the guests stop: live mounts are written back
        self.fs.destroy()
        LocalSandboxes.forget(self)
        return True

    def _release_volumes(self) -> None:
        if self.volumes is not None:
            self.volumes.release()

    @property
    def running(self) -> bool:
        return self._ended is None

    def is_running(self) -> bool:
        return self.running

    def ensure_running(self) -> None:
        with self._lock:
            self._require_running()

    def _require_running(self) -> None:
        if self._ended == "timeout":
            raise TimeoutException(
                f"sandbox {self.sandbox_id} reached its timeout of {self._timeout:g} s and was "
                "killed; create a new sandbox (or give a longer timeout)")
        if self._ended is not None:
            raise SandboxException(f"sandbox {self.sandbox_id} was killed")

    def audit_events(self) -> List[AuditEvent]:
        """The sandbox's outbound events, oldest first (docs/egress.md, "Audit")."""
        self.ensure_running()
        return self.egress.audit_events()

    def info(self) -> SandboxInfo:
        self.ensure_running()
        return SandboxInfo(sandbox_id=self.sandbox_id, template_id=self.template, name=self.template,
                           metadata=dict(self.metadata), started_at=self.started_at,
                           end_at=self.end_at, state=SandboxState.RUNNING,
                           memory_mb=self.limits.memory_limit >> 20,
                           allow_internet_access=self.options.allow_internet_access,
                           network=self.options.network, lifecycle=self.options.lifecycle)

    # -- files ---------------------------------------------------------------------------------------
    def _files(self) -> SandboxFS:
        self.ensure_running()
        return self.fs

    def read(self, path: str, gzip: bool = False) -> FileChunks:
        return FileChunks(self._files(), path)

    def read_bytes(self, path: str) -> bytes:
        return self._files().read_bytes(path)

    def write(self, path: str, data: WriteData, metadata: Optional[dict[str, str]] = None,
              gzip: bool = False, octet_stream: Optional[bool] = None) -> WriteInfo:
        return self._files().write(path, data, metadata)

    def watch(self, path: str, recursive: bool, include_entry: bool) -> LocalWatcher:
        return self.watches.start(self._files(), path, recursive, include_entry)

    def metrics(self) -> SandboxMetrics:
        """Memory of the live guests (their linear memories), disk use under the writable
        folders (as the quota watcher measures it) and the guests' CPU time."""
        self.ensure_running()
        guests = [p.guest for p in self._live_processes()] + self.code.live_guests()
        memory = sum(g.memory_bytes() for g in guests)
        cpu = self.cpu_seconds_ended + sum(g.cpu_seconds() for g in guests)
        disk, _ = quota.usage(self.fs.writable_folders())
        now = time.monotonic()
        since, before = self._last_sample or (self.started_monotonic, 0.0)
        self._last_sample = (now, cpu)
        percent = 100.0 * max(0.0, cpu - before) / max(now - since, 1e-6)
        cpus = os.cpu_count() or 1
        return SandboxMetrics(timestamp=datetime.now(timezone.utc), cpu_usage_percent=round(percent, 2),
                              memory_usage_mb=round(memory / (1 << 20), 2),
                              disk_usage_mb=round(disk / (1 << 20), 3), cpu_time_seconds=round(cpu, 4),
                              cpu_count=cpus, cpu_used_pct=round(percent / cpus, 2), mem_used=memory,
                              mem_total=self.limits.memory_limit, disk_used=disk,
                              disk_total=self.limits.disk_bytes)

    def list(self, path: str, depth: int = 1) -> List[EntryInfo]:
        return self._files().list(path, depth)

    def get_info(self, path: str) -> EntryInfo:
        return self._files().get_info(path)

    def exists(self, path: str) -> bool:
        return self._files().exists(path)

    def remove(self, path: str) -> None:
        self._files().remove(path)

    def rename(self, old_path: str, new_path: str) -> EntryInfo:
        return self._files().rename(old_path, new_path)

    def make_dir(self, path: str) -> bool:
        return self._files().make_dir(path)

    # -- guests --------------------------------------------------------------------------------------
    def guest_env(self) -> dict[str, str]:
        return {**base_env(), **self.envs}

    def start(self, request: Union[RunCommand, CreatePty], on_stdout: Callback = None,
              on_stderr: Callback = None, on_pty: Callback = None) -> Process:
        """Start a command line (or an interactive shell on a terminal) in a guest of its own."""
        pty = PtySize(rows=request.size.rows, cols=request.size.cols) if isinstance(request, CreatePty) else None
        envs = dict(request.envs or {})
        env = {**self.guest_env(), **(PTY_ENV if pty is not None else {}), **envs}
        where = self.fs.absolute(request.cwd) if request.cwd else self.fs.absolute(".")
        if request.cwd and not self.fs.exists(where):
            raise InvalidArgumentException(f"cwd {where} does not exist in the sandbox")
        cmd, stdin, tag = ("", True, None) if pty is not None else \
            (request.cmd, request.stdin, request.tag)  # type: ignore[union-attr]
        with self._lock:
            self._require_running()
            running = sum(1 for p in self._processes.values() if not p.done)
            if running >= self.limits.max_processes:
                raise RateLimitException(f"sandbox {self.sandbox_id} already runs {running} commands "
                                         f"(limits.max_processes); wait for one or kill one")
            pid = self._next_pid
            self._next_pid += 1
            process = Process(self, pid, cmd, where, env, envs=envs, timeout=request.timeout or None,
                              stdin=bool(stdin), pty=pty, tag=tag,
                              callbacks={"stdout": on_stdout, "stderr": on_stderr, "pty": on_pty})
            self._processes[pid] = process
        process.start()
        if isinstance(stdin, str):  # that input, then end of input
            process.send_stdin(stdin.encode())
            process.close_stdin()
        return process

    def forget_process(self, process: Process) -> None:
        with self._lock:
            self._processes.pop(process.pid, None)
            self.cpu_seconds_ended += process.guest.cpu_seconds()

    def _live_processes(self) -> List[Process]:
        with self._lock:
            return [p for p in self._processes.values() if not p.done]

    def processes(self) -> List[ProcessInfo]:
        """The running commands and PTYs."""
        self.ensure_running()
        return [p.info() for p in self._live_processes()]

    def process(self, pid: int, pty: bool = False) -> Process:
        self.ensure_running()
        with self._lock:
            process = self._processes.get(pid)
        if process is None or process.done or (pty and process.pty_size is None):
            what = "PTY" if pty else "command"
            raise NotFoundException(f"no running {what} with pid {pid} in sandbox {self.sandbox_id}")
        return process

    def kill_process(self, pid: int) -> bool:
        """Kill a running command or PTY; False if there is none with this pid."""
        self.ensure_running()
        with self._lock:
            process = self._processes.get(pid)
        return process.kill() if process is not None else False

    def send_stdin(self, pid: int, data: bytes) -> None:
        self.process(pid).send_stdin(data)

    def close_stdin(self, pid: int) -> None:
        self.process(pid).close_stdin()

    def resize_pty(self, pid: int, size: PtySize) -> None:
        self.process(pid, pty=True).resize(size)

    def running_guests(self) -> set[int]:
        """Ids of the guests doing work now: running commands and cells in flight."""
        ids = {id(p.guest) for p in self._live_processes()}
        return ids | self.code.busy_guests()

    def stop_for_quota(self, message: str, guest_ids: set[int]) -> None:
        """Over the disk quota: stop these running guests (see quota.py)."""
        for process in self._live_processes():
            if id(process.guest) in guest_ids:
                process.stop_for_quota(message)
        self.code.stop_for_quota(message, guest_ids)

    # -- code contexts ---------------------------------------------------------------------------------
    def run_code(self, request: RunCode, on_stdout: Callback = None, on_stderr: Callback = None,
                 on_result: Callback = None, on_error: Callback = None) -> Execution:
        callbacks = {"on_stdout": on_stdout, "on_stderr": on_stderr, "on_result": on_result,
                     "on_error": on_error}
        tools = host_tools(request._host_only.get("tools"))  # this cell's own, if any
        try:
            return self.code.run_code(request.code, request.context_id, dict(request.envs or {}),
                                      request.timeout or None, callbacks, tools)
        finally:
            close_tools(tools)

    def create_context(self, request: CreateContext) -> Context:
        return self.code.create_context(request.cwd, request.language or "python")

    def list_contexts(self) -> List[Context]:
        return self.code.list_contexts()

    def restart_context(self, context_id: str) -> None:
        self.code.restart_context(context_id)

    def remove_context(self, context_id: str) -> None:
        self.code.remove_context(context_id)


class LocalSandboxes:
    """The sandboxes of this process (the `Sandboxes` of the in-process backend)."""

    _registry: ClassVar[dict[str, LocalSandbox]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def create(self, request: CreateSandbox) -> LocalSandbox:
        template = lookup(request.template)
        host_only = request._host_only
        egress = plan_from_create({"network": request.network,
                                   "allow_internet_access": request.allow_internet_access is not False,
                                   "secrets": secrets_of(request), "vault_refs": request.vault_refs,
                                   "vault": host_only.get("vault"),
                                   "guard_plugins": host_only.get("guard_plugins")},
                                  security_policy(host_only.get("security") or request.security))
        envs = dict(request.envs or {})
        clash = set(envs) & set(egress.guest_env())
        if clash:
            raise InvalidArgumentException(f"{', '.join(sorted(clash))}: given both in envs and as a "
                                           "secret or vault_ref")
        tools = host_tools(host_only.get("tools"))
        try:
            sandbox = self.create_from(template, DEFAULT_TIMEOUT if request.timeout is None else request.timeout,
                                       dict(request.metadata or {}), {**envs, **egress.guest_env()},
                                       request.limits or Limits(), request.volumes or (), egress, tools)
        except BaseException:
            close_tools(tools)
            raise
        sandbox.options = request.model_copy(update={"secrets": None})  # the values stay in the egress plan
        return sandbox

    def create_from(self, template: GuestTemplate, timeout: float, metadata: dict[str, str],
                    envs: dict[str, str], limits: Limits, volumes: Sequence[Any] = (),
                    egress: Optional[EgressPlan] = None, tools: Optional[Tools] = None) -> LocalSandbox:
        """A sandbox of `template`, which need not be in the catalog (a template build's own)."""
        with self._lock:
            live = len(self._registry)
        if live >= max_sandboxes():
            raise RateLimitException(f"{live} sandboxes are live in this process "
                                     "(DECLAW_WASM_MAX_SANDBOXES); kill some first")
        sandbox = LocalSandbox(template, timeout, metadata, envs, limits, volumes, egress, tools)
        with self._lock:
            self._registry[sandbox.sandbox_id] = sandbox
        return sandbox

    def connect(self, sandbox_id: str, timeout: Optional[float] = None) -> LocalSandbox:
        with self._lock:
            sandbox = self._registry.get(sandbox_id)
        if sandbox is None or not sandbox.running:
            raise SandboxNotFoundException(f"sandbox {sandbox_id!r} not found (killed, timed out, "
                                           "or never created in this process)")
        if timeout is not None:
            sandbox.extend_timeout(timeout)
        return sandbox

    def list(self) -> List[SandboxInfo]:
        with self._lock:
            sandboxes = list(self._registry.values())
        infos = []
        for sandbox in sandboxes:
            try:
                infos.append(sandbox.info())
            except SandboxException:  # ended while we looked
                continue
        return sorted(infos, key=lambda i: i.started_at, reverse=True)

    @classmethod
    def forget(cls, sandbox: LocalSandbox) -> None:
        with cls._lock:
            cls._registry.pop(sandbox.sandbox_id, None)

    @classmethod
    def kill_all(cls) -> None:
        """A program that ends without killing its sandboxes leaves no sandbox folders behind."""
        with cls._lock:
            sandboxes = list(cls._registry.values())
        for sandbox in sandboxes:
            try:
                sandbox.kill()
            except Exception:  # exiting anyway: clean up what can be
                pass


def _attach(sandbox_id: str, volumes: Sequence[Any], fs: SandboxFS) -> Any:
    """Attach declaw's volumes (imported on first use: they bring the state store and fsspec)."""
    from .._volumes.attach import attach_volumes, before_exit

    before_exit(LocalSandboxes.kill_all)
    try:
        return attach_volumes(sandbox_id, volumes, fs)
    except BaseException:
        fs.destroy()
        raise


atexit.register(LocalSandboxes.kill_all)
