"""Sandboxes in this process: `LocalSandbox` (one sandbox: its file tree, running guests and
lifetime) and `LocalSandboxes` (the in-process backend: create, connect, list, resume, restore).

The registry they are kept in and the paused-store helpers are registry.py's; every guest of a
sandbox is built by its launcher (launcher.py).

Both implement the backend contract (_backend.py) that the faces, the server and the other
backends' workers use; arguments arrive checked (`_args.py`).
"""

from __future__ import annotations

import atexit
import functools
import os
import secrets
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Iterator, List, Optional, Sequence, Union

from .._model import construct
from .._args import checkpoint_policy
from .._assets import rootfs_dir
from .._backend import Callback, WriteData
from .._packages.catalog import GuestTemplate, lookup
from .._printable import logger
from .._wasm.engine import DEFAULT_FLAGS, FUEL_FLAGS, Interpreter
from .._wasm.layout import PTY_ENV, base_env
from .._wasm.shims import exiting
from .._wasm.warm_image import get_interpreter, guest_mounts
from ..exceptions import (ConflictException, InvalidArgumentException, NotFoundException, RateLimitException,
                          SandboxException, SandboxNotFoundException, TimeoutException)
from ..limits import Limits
from ..models import (EntryInfo, FileType, ProcessInfo, PtySize, SandboxInfo, SandboxMetrics, SandboxState, Snapshot,
                      WriteInfo)
from ..settings import dns_answers, max_sandboxes, resolve_overrides
from ..wire import CreateContext, CreatePty, CreateSandbox, ResumeSandbox, RunCode, RunCommand
from . import quota, recording
from .files import FileChunks, SandboxFS
from .launcher import Launcher
from .lifetimes import Alarm, lifetimes
from .parking import parking
from .processes import MAX_SPAWNED, Outputs, Process
from .registry import (clear_state, drop_older_pauses, forget_paused, in_background, latest, paused_info,
                       paused_infos, read_snapshot, reopen, sandboxes, store_in_use)
from .standby import Standby, standby_key
from .watch import LocalWatcher, Watches

if TYPE_CHECKING:
    from .._wasm.guest import Guest
    from ..execution import Context, Execution
    from .._egress.create import EgressPlan
    from .tools import Tools
    from .kernel import CodeInterpreter
    from .checkpoints import Checkpoints
    from .._egress.session import EgressSession
    from ..events import SandboxEvent
    from ..security.audit import AuditEvent
    from .snapshots import Restoring

DEFAULT_TIMEOUT = 300.0
DEFAULT_LIMITS = construct(Limits)  # the defaults, without a first validation (~20 ms)
PARK_AFTER_S = 0.05
log = logger("declaw_wasm")


def egress_plan(request: CreateSandbox, restoring: Optional["Restoring"] = None) -> Optional["EgressPlan"]:
    """The checked network plan of a create (_egress/create.py), or None when the create names
    no network, secret, vault or security option: the default plan, built with the sandbox's
    egress session at its first use, so a plain create imports no egress or guard code."""
    host_only = request._host_only
    asked = (request.network is not None or request.allow_internet_access is False or bool(request.secrets)
             or bool(request.vault_refs) or request.security is not None
             or (restoring is not None and bool(restoring.placeholders))
             or any(host_only.get(key) is not None for key in ("secrets", "vault", "guard_plugins", "security")))
    if not asked:
        return None
    from .._egress.create import plan_from_create, secrets_of, security_policy

    plan = plan_from_create({"network": request.network,
                             "allow_internet_access": request.allow_internet_access is not False,
                             "secrets": secrets_of(request), "vault_refs": request.vault_refs,
                             "vault": host_only.get("vault"), "guard_plugins": host_only.get("guard_plugins")},
                            security_policy(host_only.get("security") or request.security))
    if restoring is not None:
        plan.secrets.use_placeholders(restoring.placeholders)
    return plan


def checked_hooks(sandbox: "LocalSandbox") -> "LocalSandbox":
    """With an egress testing hook set (DECLAW_WASM_RESOLVE, DECLAW_WASM_DNS_ANSWERS), the sandbox's
    network is built now, so a bad hook is refused by the create (or resume) that meets it, as a
    bad network option is, and not by the guest's first connection."""
    if resolve_overrides().strip() or dns_answers().strip():
        try:
            sandbox.egress_slot.session()
        except BaseException:
            sandbox.kill()
            raise
    return sandbox


def interpreter_for(limits: Limits) -> Interpreter:
    """The runtime a sandbox with `limits` runs on: the fuel build for CPU limits."""
    return get_interpreter(FUEL_FLAGS if limits.cpu_instructions else DEFAULT_FLAGS)


class EgressSlot:
    """One generation of a sandbox's network: its create's plan (None: the default one) and the
    egress session built from it at its first use — a guest's first network op, `pip install`,
    a host tool's audit, the audit API, a snapshot of a sandbox with network options. A sandbox
    created with no network, secrets or security options whose guests never connect imports no
    egress or guard code (a cold start pays for what it uses).

    Each `_open` of a sandbox (a create, a resume in place) makes a new slot, and a guest's door
    routes and tool door keep the slot of their generation: an op from before a pause reaches
    that generation's session, closed with it, never the resumed sandbox's; an op racing the
    sandbox's end gets a closed session (the error "closed"), never a new open one."""

    def __init__(self, sandbox: "LocalSandbox", plan: Optional["EgressPlan"]) -> None:
        self._sandbox = sandbox
        self._plan = plan
        self._session: Optional["EgressSession"] = None
        self._lock = threading.Lock()
        self._ended = False

    def session(self) -> "EgressSession":
        session = self._session
        if session is None:
            with self._lock:
                session = self._session
                if session is None:
                    plan = self._plan
                    if plan is None:
                        from .._egress.create import EgressPlan

                        plan = EgressPlan()
                    session = self._session = plan.session(self._sandbox.limits, self._sandbox.envs)
                    session.inbound.label = self._sandbox.sandbox_id
                    session.audit.listener = functools.partial(recording.audit, self._sandbox)
                    recording.recorder(self._sandbox).hide = recording.hidden(self._sandbox, session)
                    if self._ended:
                        session.close()
        return session

    def traffic_token(self) -> Optional[str]:
        return None if self._plan is None else self._plan.traffic_token

    def in_use(self) -> Optional["EgressSession"]:
        """The session if it was built or the plan asks for one; else None (nothing built)."""
        if self._session is None and self._plan is None:
            return None
        return self.session()

    @property
    def built(self) -> bool:
        return self._session is not None

    def adopt(self, plan: "EgressPlan") -> bool:
        """A standby sandbox handed out takes its create's plan, if no session was built yet."""
        with self._lock:
            if self._session is not None or self._ended:
                return False
            self._plan = plan
            return True

    def close(self) -> None:
        with self._lock:
            session = self._session
            self._ended = True
        if session is not None:
            session.close()


class LocalSandbox:
    """One sandbox in this process."""

    # the create request as made (declaw's network, security, lifecycle, volumes and vault_refs
    # travel here as data for the egress, guardrails and volumes code to read)
    options: CreateSandbox = construct(CreateSandbox)
    _code: Optional[CodeInterpreter] = None  # made at the first cell or context (`code`)
    # parking a guest for the next command (park_later): the pending alarm, and when a command
    # last started or ended
    _park_alarm: Optional[Alarm] = None
    _active_at = 0.0
    # node-loss checkpoints (checkpoints.py), set by the host that hosts it with the policy
    checkpoints: Optional["Checkpoints"] = None

    def __init__(self, template: GuestTemplate, timeout: float, metadata: dict[str, str],
                 envs: dict[str, str], limits: Limits, volumes: Sequence[Any] = (),
                 egress: Optional[EgressPlan] = None, tools: Optional[Tools] = None,
                 restoring: Optional["Restoring"] = None, begin: bool = True) -> None:
        """A new sandbox, or (with `restoring`, snapshots.py) one remade from a snapshot or a
        fork's source. `begin=False`: made ahead of time (standby.py); `begin()` starts its life
        when it is handed out."""
        self.interpreter = interpreter_for(limits)
        self.tools = tools  # host tools every guest of the sandbox may call (tools.py)
        own_id = restoring.sandbox_id if restoring is not None else None
        self.sandbox_id = own_id or "sbx_" + secrets.token_hex(16)  # 128 bits: ids are capabilities once served
        self._lock = threading.Lock()
        self._open(template, timeout, metadata, envs, limits, volumes, egress, restoring, begin)

    @property
    def code(self) -> CodeInterpreter:
        """The sandbox's code contexts and their kernels, made at the first cell or context: a
        sandbox that only runs commands never imports the kernel and what it brings (host tools'
        threads, anyio)."""
        code = self._code
        if code is None:
            from .kernel import CodeInterpreter

            with _code_lock:
                code = self._code
                if code is None:
                    code = self._code = CodeInterpreter(self)
        return code

    def kernels(self) -> list[Any]:
        """The code contexts' kernels, none if no cell or context was ever made."""
        return self._code.kernels() if self._code is not None else []

    def kernel_busy_guests(self) -> set[int]:
        """Ids of the kernels' guests running a cell now."""
        return self._code.busy_guests() if self._code is not None else set()

    def kernel_guests(self) -> list[Any]:
        """The live guests of the code contexts' kernels."""
        return self._code.live_guests() if self._code is not None else []

    def _open(self, template: GuestTemplate, timeout: float, metadata: dict[str, str],
              envs: dict[str, str], limits: Limits, volumes: Sequence[Any] = (),
              egress: Optional[EgressPlan] = None, restoring: Optional["Restoring"] = None,
              begin: bool = True) -> None:
        """Everything a running sandbox holds (made again when a paused one resumes in place).
        `volumes` are attached now (their mounts are fixed before any guest starts)."""
        if getattr(self, "interpreter", None) is None:  # a paused husk (connect) resuming
            self.interpreter = interpreter_for(limits)
        self.launcher = Launcher(self)  # every guest of the sandbox is built by it
        self.template = template.name
        self.profile = template.profile(self.interpreter)  # what each guest's start-up applies
        self.metadata = metadata
        self.envs = {**template.envs, **envs}
        self._template_envs = dict(template.envs)
        self.limits = limits
        # the network (_egress), built at its first use (`egress`); a standby sandbox gets its
        # create's in `begin`
        self.egress_slot = EgressSlot(self, egress)
        mounts = guest_mounts(self.interpreter) + template.ensure_mounts(self.interpreter)
        self.fs = SandboxFS(mounts, skeleton=rootfs_dir(), limits=limits, overlay=template.root,
                            kind="sbx" if begin else "standby")
        self.volumes: Optional[Any] = None  # declaw's volumes (_volumes/attach.py): mounts added to fs
        if volumes:
            self.volumes = _attach(self.sandbox_id, volumes, self.fs, restoring=restoring is not None)
        self.started_at = datetime.now(timezone.utc)
        self.started_monotonic = time.monotonic()
        self.end_at = self.started_at
        self._processes: dict[int, Process] = {}
        self._next_pid = 1
        self._spawns_held = 0  # `python3 ... &` programs running, or ended and not read yet (processes.py)
        self._alarm: Optional[Alarm] = None
        self._ended: Optional[str] = None  # None while running; "killed", "timeout" or "paused"
        self._timeout = timeout
        self._frozen = 0  # snapshots in progress: no command may start
        self._code = None
        self.watches = Watches()
        self.cpu_seconds_ended = 0.0  # CPU time of the guests that have ended (metrics)
        self.fuel_used = 0  # instructions of finished command lines and cells (cpu_instructions)
        self._last_sample: Optional[tuple[float, float]] = None  # (wall clock, cpu seconds)
        self.begun = False  # a standby sandbox not handed out yet (standby.py)
        if begin:
            self.begin(timeout, metadata, envs, restoring=restoring)

    def begin(self, timeout: float, metadata: dict[str, str], envs: dict[str, str],
              egress: Optional[EgressPlan] = None, restoring: Optional["Restoring"] = None) -> None:
        """Start the sandbox's life: its lifetime, metadata and envs, a snapshot's files and
        contexts (`restoring`), the disk watcher; for a standby sandbox, its network (`egress`:
        the session sees the envs, whose values its audit log masks)."""
        self.begun = True  # first: a standby guest's park turn checks it (standby._pristine)
        self.metadata = metadata
        self.envs = {**self._template_envs, **envs}
        if egress is not None and not self.egress_slot.adopt(egress):
            self.egress_slot.close()  # the standby sandbox's own, used meanwhile
            self.egress_slot = EgressSlot(self, egress)
        self.started_at = datetime.now(timezone.utc)
        self.started_monotonic = time.monotonic()
        try:
            if restoring is not None:
                restoring.fill(self.fs)
                restoring.install(self)
            same = restoring is not None and restoring.sandbox_id == self.sandbox_id
            self._boot(restoring.boot_id if same and restoring is not None else None)
            self.set_timeout(timeout)
        except BaseException:  # a bad timeout or snapshot: leave no folder behind
            self._ended = "killed"
            parking.drop(self)
            if self._code is not None:
                self._code.stop_all()
            self._release_volumes()
            self.fs.destroy()
            raise
        quota.watcher.watch(self)

    def _boot(self, boot_id: Optional[str]) -> None:
        """The sandbox's boot id at /proc/sys/kernel/random/boot_id, as Linux has one: new at
        each start, kept by a resume that keeps memory, new after a filesystem-only pause (E2B's
        tests tell a cold boot from a memory restore by it). In the read-only root (its folder
        is made with the root: layout.make_root)."""
        self.boot_id = boot_id or str(uuid.uuid4())
        (self.fs.root / "proc/sys/kernel/random/boot_id").write_text(self.boot_id + "\n")

    # -- lifetime ----------------------------------------------------------------------------------
    def set_timeout(self, timeout: float) -> None:
        """Kill the sandbox `timeout` seconds from now (shorter or longer than before)."""
        with self._lock:
            self._require_running()
            end_at = datetime.now(timezone.utc) + timedelta(seconds=timeout)  # refuses a bad one
            if self._alarm is not None:
                self._alarm.cancel()
            self._timeout = timeout
            self.end_at = end_at
            self._alarm = lifetimes.schedule(timeout, lambda: self._end("timeout"))

    def extend_timeout(self, timeout: float) -> None:
        """E2B's `connect`: a longer lifetime than what is left extends it; a shorter changes nothing."""
        left = (self.end_at - datetime.now(timezone.utc)).total_seconds()
        if timeout > left:
            self.set_timeout(timeout)

    def kill(self) -> bool:
        """Stop every running guest and delete the file tree. False if already gone."""
        return self._end("killed")

    def _end(self, reason: str) -> bool:
        lifecycle = self.options.lifecycle or {}
        if reason == "timeout" and lifecycle.get("on_timeout") == "pause":
            try:
                if self.pause(lifecycle.get("keep_memory") is not False, stop_running=True):
                    return True
            except Exception as exc:  # noqa: BLE001 -- the lifetime is over: kill it instead
                log.error("sandbox %s: pausing at the end of its lifetime failed, killed instead: %s",
                          self.sandbox_id, exc)
        if self.checkpoints is not None:  # its checkpoint goes with it (a pause has its own snapshot)
            self.checkpoints.end(self)
        with self._lock:
            if self._ended == "paused" and reason == "killed":
                self._ended = "killed"
                return forget_paused(self.sandbox_id)
            if self._ended is not None:
                return False
            self._ended = reason
            if self._alarm is not None:
                self._alarm.cancel()
            processes = list(self._processes.values())
        recording.lifecycle(self, {"timeout": "timed_out"}.get(reason, reason))
        parking.drop(self)
        for process in processes:
            process.guest.kill("killed")
        for process in processes:
            process.guest.wait(5.0)
        paused = reason == "paused"  # its contexts are at rest and its files are in the store
        if self._code is not None:
            self._code.stop_all(wait=not paused)
        _close_tools(getattr(self, "tools", None))  # host callables are not kept across a pause
        self.tools = None
        self.watches.stop_all()
        self.egress_slot.close()
        self._release_volumes()  # after the guests stop: live mounts are written back
        if paused:  # nothing reads the folder any more: freed in the background, not in pause()
            in_background(self.fs.destroy)
        else:
            self.fs.destroy()
        sandboxes.forget(self)
        if reason != "paused" and "declaw_wasm._local.snapshots" in sys.modules:
            from .snapshots import held

            if held.holds(self.sandbox_id):  # a sandbox in the store ends: its state goes, not its snapshots
                clear_state(self.sandbox_id)
                held.release(self.sandbox_id)
        return True

    @property
    def egress(self) -> "EgressSession":
        """The sandbox's network (_egress: policy, secrets, guards, audit), built at its first use
        (`EgressSlot`)."""
        return self.egress_slot.session()

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
        if self._ended == "paused":
            raise SandboxException(f"sandbox {self.sandbox_id} is paused: resume it first "
                                   "(sbx.resume(), Sandbox.resume(id) or Sandbox.connect(id))")
        if self._ended is not None:
            raise SandboxException(f"sandbox {self.sandbox_id} was killed")

    def audit_events(self) -> List["AuditEvent"]:
        """The sandbox's outbound events, oldest first (docs/egress.md, "Audit")."""
        self.ensure_running()
        session = self.egress_slot.in_use()
        return [] if session is None else session.audit_events()  # none: nothing happened

    def get_host(self, port: int) -> str:
        """`127.0.0.1:<host port>`: the host listener that stands for the sandbox's `port`
        (_egress/inbound.py; mapped now if it was not; docs/inbound.md)."""
        self.ensure_running()
        from .._egress.connection import NetError

        try:
            return f"127.0.0.1:{self.egress.inbound.host_port(port)}"
        except NetError as exc:
            raise SandboxException(f"get_host({port}): {exc}") from None

    def traffic_access_token(self) -> Optional[str]:
        """The token inbound connections must carry (`network={"allow_public_traffic": False}`),
        or None: the sandbox's servers are public."""
        return self.egress_slot.traffic_token()
    def events(self, since: int = 0) -> List["SandboxEvent"]:
        """The sandbox's events (events.py) with a sequence number above `since`, oldest first,
        from its ring (the newest `_journal.RING_EVENTS`); a sandbox that ended keeps its own."""
        return recording.recorder(self).events(since)

    def event_image(self, digest: str) -> Optional[tuple[str, bytes]]:
        """A chart a cell event refers to (`ImageRef.sha256`): (mime, bytes), if the ring has it."""
        return recording.recorder(self).image_data(digest)

    def info(self) -> SandboxInfo:
        with self._lock:
            paused = self._ended == "paused"
            if not paused:
                self._require_running()
        return SandboxInfo(sandbox_id=self.sandbox_id, template_id=self.template, name=self.template,
                           metadata=dict(self.metadata), started_at=self.started_at,
                           end_at=self.end_at, state=SandboxState.PAUSED if paused else SandboxState.RUNNING,
                           memory_mb=self.limits.memory_limit >> 20,
                           allow_internet_access=self.options.allow_internet_access,
                           network=self.options.network, lifecycle=self.options.lifecycle)

    # -- files ---------------------------------------------------------------------------------------
    def _files(self) -> SandboxFS:
        self.ensure_running()
        return self.fs

    def read(self, path: str, gzip: bool = False) -> FileChunks:
        chunks = FileChunks(self._files(), path)
        recording.file_event(self, "read", self.fs.absolute(path), chunks.size)
        return chunks

    def read_bytes(self, path: str) -> bytes:
        data = self._files().read_bytes(path)
        recording.file_event(self, "read", self.fs.absolute(path), len(data))
        return data

    def write(self, path: str, data: WriteData, metadata: Optional[dict[str, str]] = None,
              gzip: bool = False, octet_stream: Optional[bool] = None) -> WriteInfo:
        info = self._files().write(path, data, metadata)
        recording.file_event(self, "write", info.path, info.size)
        return info

    def write_files(self, entries: Sequence[tuple[str, WriteData]],
                    metadata: Optional[dict[str, str]] = None, gzip: bool = False,
                    octet_stream: Optional[bool] = None) -> List[WriteInfo]:
        infos = self._files().write_many(entries, metadata)
        for info in infos:
            recording.file_event(self, "write", info.path, info.size)
        return infos

    def file_url(self, path: str, write: bool, user: Optional[str], expires_in: Optional[int]) -> str:
        """E2B's `download_url`/`upload_url`: served by this process on loopback (fileurls.py)."""
        from .fileurls import file_url

        self.ensure_running()
        return file_url(self, path, write, user, expires_in, sandboxes.live)

    def watch(self, path: str, recursive: bool, include_entry: bool) -> LocalWatcher:
        return self.watches.start(self._files(), path, recursive, include_entry)

    def metrics(self) -> SandboxMetrics:
        """Memory of the live guests (their linear memories), disk use under the writable
        folders (as the quota watcher measures it), the guests' CPU time and, with a CPU limit,
        the instructions used."""
        self.ensure_running()
        guests = [p.guest for p in self._live_processes()] + self.kernel_guests()
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
                              disk_total=self.limits.disk_bytes,
                              cpu_instructions_used=self.fuel_used if self.limits.cpu_instructions else None)

    def system_view(self, pid: int, asker: Guest) -> dict[str, Any]:
        """What a command's `free`, `ps` and `uptime` show (doors.py: sysinfo): the memory
        limit and the live guests' memory (as `metrics`), the running commands, the uptime;
        `pid` is the asking command's (0: a code context's), `self_memory` the asking guest's
        (`resource.getrusage` in the guest)."""
        processes = self._live_processes()
        memory = sum(p.guest.memory_bytes() for p in processes) + sum(
            g.memory_bytes() for g in self.kernel_guests())
        return {"pid": pid, "self_memory": asker.memory_bytes(), "mem_total": self.limits.memory_limit,
                "mem_used": memory,
                "uptime": round(time.monotonic() - self.started_monotonic, 3), "cpus": 1,
                "processes": [p.ps_row() for p in sorted(processes, key=lambda p: p.pid)]}

    def disk_view(self) -> dict[str, int]:
        """What a guest's `df`, `os.statvfs` and `shutil.disk_usage` show (processes.py: disk):
        the disk quota and what the writable folders hold now, walked as the quota's watcher
        walks them (a guest that asks in a loop pays the walks in its own time)."""
        used_bytes, used_files = quota.usage(self.fs.writable_folders())
        return {"bytes_total": self.limits.disk_bytes, "bytes_used": used_bytes,
                "files_total": self.limits.disk_files, "files_used": used_files}

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
              on_stderr: Callback = None, on_pty: Callback = None, spawned: Optional[Outputs] = None) -> Process:
        """Start a command line (or an interactive shell on a terminal) in a guest of its own.
        `spawned`: a guest asks, for a program beside it (processes.py, `spawn`), and where its
        output goes: also bounded by MAX_SPAWNED."""
        pty = PtySize(rows=request.size.rows, cols=request.size.cols) if isinstance(request, CreatePty) else None
        envs = dict(request.envs or {})
        # a spawned program's environment is its asker's whole one (Popen(env=...) as on Linux)
        env = dict(envs) if spawned is not None else {**self.guest_env(), **(PTY_ENV if pty is not None else {}),
                                                      **envs}
        where = self.fs.absolute(request.cwd) if request.cwd else self.fs.absolute(".")
        if request.cwd and not self.fs.exists(where):
            raise InvalidArgumentException(f"cwd {where} does not exist in the sandbox")
        if request.cwd and self._kind(where) == FileType.FILE:
            raise InvalidArgumentException(f"cwd {where} is not a folder")
        cmd, stdin, tag = ("", True, None) if pty is not None else \
            (request.cmd, request.stdin, request.tag)  # type: ignore[union-attr]
        quota.watcher.admit(self)  # not while it grew past its quota after a stop for it
        with self._lock:
            self._require_running()
            if self._frozen:
                raise ConflictException(f"sandbox {self.sandbox_id} is being snapshotted; start the command "
                                        "once the snapshot is done")
            running = sum(1 for p in self._processes.values() if p.running)
            if running >= self.limits.max_processes:
                raise RateLimitException(f"sandbox {self.sandbox_id} already runs {running} commands "
                                         f"(limits.max_processes); wait for one or kill one")
            if spawned is not None and self._spawns_held >= MAX_SPAWNED:
                raise RateLimitException(f"sandbox {self.sandbox_id} already holds {MAX_SPAWNED} programs that "
                                         "guests started beside them (`python3 ... &`, a Popen of a Python "
                                         "program; running, or ended and not yet read)")
            pid = self._next_pid
            self._next_pid += 1
            process = Process(self, pid, cmd, where, env, envs=envs, timeout=request.timeout or None,
                              stdin=bool(stdin), pty=pty, tag=tag,
                              callbacks={"stdout": on_stdout, "stderr": on_stderr, "pty": on_pty},
                              parked=parking.take(self), spawned=spawned)
            self._processes[pid] = process
            self._spawns_held += spawned is not None
            self._active_at = time.monotonic()
        recording.command_started(self, process)
        process.start()
        if isinstance(stdin, str):  # that input, then end of input
            process.send_stdin(stdin.encode())
            process.close_stdin()
        return process

    def _kind(self, path: str) -> Optional[FileType]:
        """What is at a path that exists (None: a link that loops, which `exists` counts)."""
        try:
            return self.fs.get_info(path).type
        except SandboxException:
            return None

    def release_spawned(self) -> None:
        """A spawned program's asker has read it to its end, killed it, or ended."""
        with self._lock:
            self._spawns_held -= 1

    def forget_process(self, process: Process) -> None:
        """A command ended: forget it, and park a guest for the next one."""
        with self._lock:
            self._processes.pop(process.pid, None)
            self.cpu_seconds_ended += process.guest.cpu_seconds()
        recording.command_ended(self, process)
        self.park_later()

    def park_later(self) -> None:
        """Park a guest for the next command once no command has started or ended in the
        sandbox for PARK_AFTER_S. In a loop of commands a guest parked beside them only competes
        with them for the cores (and a command may come while it is still parking): 17 against
        11 ms a command back to back before this rule (benchmarks/notes/2026-12-02-parking.md)."""
        with self._lock:
            self._active_at = time.monotonic()
            if self._park_alarm is None:
                self._park_alarm = lifetimes.schedule(PARK_AFTER_S, self._park_when_quiet, inline=True)

    def _park_when_quiet(self) -> None:
        """The parking alarm (on the timer's thread): park now if the sandbox has been quiet
        long enough, else look again when it will have been."""
        with self._lock:
            left = self._active_at + PARK_AFTER_S - time.monotonic()
            if left > 0:
                self._park_alarm = lifetimes.schedule(left, self._park_when_quiet, inline=True)
                return
            self._park_alarm = None
        parking.park(self)

    def count_fuel(self, used: Optional[int]) -> None:
        """A command line or cell with a CPU limit ended, having run `used` instructions."""
        with self._lock:
            self.fuel_used += used or 0

    def _live_processes(self) -> List[Process]:
        with self._lock:
            return [p for p in self._processes.values() if p.running]

    def processes(self) -> List[ProcessInfo]:
        """The running commands and PTYs."""
        self.ensure_running()
        return [p.info() for p in self._live_processes()]

    def process(self, pid: int, pty: bool = False) -> Process:
        self.ensure_running()
        with self._lock:
            process = self._processes.get(pid)
        if process is None or not process.running or (pty and process.pty_size is None):
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
        return ids | self.kernel_busy_guests()

    def stop_for_quota(self, message: str, guest_ids: set[int]) -> None:
        """Over the disk quota: stop these running guests (see quota.py)."""
        for process in self._live_processes():
            if id(process.guest) in guest_ids:
                process.stop_for_quota(message)
        if self._code is not None:
            self._code.stop_for_quota(message, guest_ids)

    # -- code contexts ---------------------------------------------------------------------------------
    def run_code(self, request: RunCode, on_stdout: Callback = None, on_stderr: Callback = None,
                 on_result: Callback = None, on_error: Callback = None) -> Execution:
        callbacks = {"on_stdout": on_stdout, "on_stderr": on_stderr, "on_result": on_result,
                     "on_error": on_error}
        quota.watcher.admit(self)
        tools = _host_tools(request._host_only.get("tools"))  # this cell's own, if any
        began = time.monotonic()
        recording.sampling(self)
        try:
            execution = self.code.run_code(request.code, request.context_id, dict(request.envs or {}),
                                           request.timeout or None, callbacks, tools, request.language)
        except BaseException as exc:
            recording.cell_run(self, request.code, request.context_id, request.language, began, None, exc)
            raise
        finally:
            _close_tools(tools)
        recording.cell_run(self, request.code, request.context_id, request.language, began, execution, None)
        return execution

    def create_context(self, request: CreateContext) -> Context:
        return self.code.create_context(request.cwd, request.language or "python")

    def list_contexts(self) -> List[Context]:
        return self.code.list_contexts()

    def restart_context(self, context_id: str) -> None:
        self.code.restart_context(context_id)

    def remove_context(self, context_id: str) -> None:
        self.code.remove_context(context_id)

    # -- snapshots, pause, fork (snapshots.py) ----------------------------------------------------------
    @contextmanager
    def commands_frozen(self) -> Iterator[None]:
        """No command runs or starts while held (a snapshot: a command's guest is mid-flight)."""
        with self._lock:
            self._require_running()
            running = sorted(p.pid for p in self._processes.values() if p.running)
            if running:
                raise ConflictException(
                    f"sandbox {self.sandbox_id} has commands running (pids {', '.join(map(str, running))}): a "
                    "running command cannot be captured; wait for it or kill it, then snapshot or pause")
            self._frozen += 1
        try:
            yield
        finally:
            with self._lock:
                self._frozen -= 1

    def create_snapshot(self, name: Optional[str] = None, source: str = "manual") -> Snapshot:
        """Write the sandbox's files and code contexts to the state store (docs/state.md)."""
        from .snapshots import held, quiet, snapshot_model, snapshot_store, take_snapshot

        store = snapshot_store()
        held.take(store.store, self.sandbox_id)  # in the store now: one process runs it
        with quiet(self) as kernels:
            record = take_snapshot(self, source, store, kernels, name)
        return snapshot_model(record)

    def list_snapshots(self) -> List[Snapshot]:
        from .snapshots import snapshot_model, snapshot_store

        return [snapshot_model(r) for r in snapshot_store().list(self.sandbox_id)]

    def delete_snapshot(self, snapshot_id: str) -> bool:
        from .snapshots import delete_snapshot, snapshot_store

        return delete_snapshot(snapshot_store(), self.sandbox_id, snapshot_id, self.interpreter)

    def pause(self, keep_memory: bool = True, stop_running: bool = False) -> bool:
        """Snapshot the sandbox to the state store (source "pause") and free everything it holds;
        False if it is paused already. `stop_running`: first stop what runs (the lifetime's end).
        Without `keep_memory` (E2B's filesystem-only pause), the files alone: the code contexts
        are not kept and start afresh after the resume."""
        from .snapshots import held, quiet, snapshot_store, take_snapshot

        with self._lock:
            if self._ended == "paused":
                return False
            self._require_running()
        if stop_running:
            running = self._live_processes()
            for process in running:
                process.kill()
            for process in running:
                process.wait(5.0)
            for kernel in self.kernels():
                if kernel.busy():
                    kernel.stop()
        store = snapshot_store()
        held.take(store.store, self.sandbox_id)
        with quiet(self) as kernels:
            record = take_snapshot(self, "pause", store, kernels, keep_memory=keep_memory)
            info = self.info().model_copy(update={"state": SandboxState.PAUSED})
            store.put_state(self.sandbox_id, {"state": "paused", "snapshot_id": record.snapshot_id,
                                              "paused_at": datetime.now(timezone.utc).isoformat(),
                                              "info": info.model_dump(mode="json")})
            self._end("paused")
        in_background(lambda: drop_older_pauses(store, self.sandbox_id, record.snapshot_id))
        sandboxes.paused(self)
        held.release(self.sandbox_id)
        return True

    def resume(self, request: Optional[ResumeSandbox] = None) -> None:
        """Bring a paused sandbox back in place (its files and contexts, from the store)."""
        LocalSandboxes().resume(self.sandbox_id, request, into=self)

    @property
    def paused(self) -> bool:
        return self._ended == "paused"

    @classmethod
    def husk(cls, sandbox_id: str, info: SandboxInfo) -> "LocalSandbox":
        """A paused sandbox of the state store as `info` tells it (registry.paused_info), holding
        nothing: `resume()` remakes it in place."""
        husk = cls.__new__(cls)
        husk.sandbox_id = sandbox_id
        husk._lock = threading.Lock()
        husk._ended = "paused"
        husk.template, husk.metadata = info.template_id, dict(info.metadata)
        husk.started_at, husk.end_at = info.started_at, info.end_at
        husk.limits = Limits()
        husk.options = CreateSandbox(lifecycle=info.lifecycle, network=info.network,
                                     allow_internet_access=info.allow_internet_access)
        return husk

    def fork(self, count: int) -> List["LocalSandbox"]:
        """`count` new sandboxes with this one's files and code contexts, diverging from here."""
        from .snapshots import fork_source, quiet

        forks: List[LocalSandbox] = []
        with quiet(self) as kernels:
            source = fork_source(self, kernels)
            try:
                for _ in range(count):
                    forks.append(LocalSandboxes().build(source.request.model_copy(), source))
            except BaseException:
                for fork in forks:
                    fork.kill()
                raise
        return forks


class LocalSandboxes:
    """The sandboxes of this process (the `Sandboxes` of the in-process backend, kept in
    registry.py's `sandboxes`), and the paused ones of the state store (resumed here on demand)."""

    hosted = False  # a pool's or Ray's host (_pool/host.py): its sandboxes may be checkpointed

    def create(self, request: CreateSandbox) -> LocalSandbox:
        if not self.hosted and checkpoint_policy(request.lifecycle):
            from .checkpoints import refused_here

            raise InvalidArgumentException(refused_here())
        if request.snapshot:
            return self._from_snapshot(request)
        return self.build(request)

    def build(self, request: CreateSandbox, restoring: Optional["Restoring"] = None,
              into: Optional[LocalSandbox] = None) -> LocalSandbox:
        """A sandbox for `request` (remade from `restoring` if given, in place of the paused
        `into` if given)."""
        template = lookup(request.template)
        host_only = request._host_only
        egress = egress_plan(request, restoring)
        envs = dict(request.envs or {})
        secret_envs = egress.guest_env() if egress is not None else {}
        clash = set(envs) & set(secret_envs)
        if clash:
            raise InvalidArgumentException(f"{', '.join(sorted(clash))}: given both in envs and as a "
                                           "secret or vault_ref")
        tools = _host_tools(host_only.get("tools"))
        args = (template, DEFAULT_TIMEOUT if request.timeout is None else request.timeout,
                dict(request.metadata or {}), {**envs, **secret_envs}, request.limits or DEFAULT_LIMITS,
                request.volumes or (), egress, tools)
        try:
            if into is not None:
                into.tools = tools
                into._open(*args[:-1], restoring=restoring)
                into.options = request.model_copy(update={"secrets": None})
                sandboxes.add(into)
                recording.lifecycle(into, "resumed")
                return checked_hooks(into)
            sandbox = self.create_from(*args, restoring=restoring)
        except BaseException:
            _close_tools(tools)
            raise
        sandbox.options = request.model_copy(update={"secrets": None})  # the values stay in the egress plan
        same = restoring is not None and restoring.sandbox_id == sandbox.sandbox_id
        recording.lifecycle(sandbox, "resumed" if same else "created")
        return checked_hooks(sandbox)

    def create_from(self, template: GuestTemplate, timeout: float, metadata: dict[str, str],
                    envs: dict[str, str], limits: Limits, volumes: Sequence[Any] = (),
                    egress: Optional[EgressPlan] = None, tools: Optional[Tools] = None,
                    restoring: Optional["Restoring"] = None) -> LocalSandbox:
        """A sandbox of `template`, which need not be in the catalog (a template build's own)."""
        live = sandboxes.count()
        if live >= max_sandboxes():
            raise RateLimitException(f"{live} sandboxes are live in this process "
                                     "(DECLAW_WASM_MAX_SANDBOXES); kill some first")
        sandbox = None
        if not volumes and restoring is None:  # a standby sandbox's guest is parked already: no volume
            # mounts can join it; a snapshot's sandbox has its own id and files
            sandbox = standby.take(standby_key(template, limits, interpreter_for(limits)), template, limits)
        if sandbox is not None:
            sandbox.tools = tools
            sandbox.begin(timeout, metadata, envs, egress)
        else:
            sandbox = LocalSandbox(template, timeout, metadata, envs, limits, volumes, egress, tools, restoring)
        sandboxes.add(sandbox)
        return sandbox

    def connect(self, sandbox_id: str, timeout: Optional[float] = None) -> LocalSandbox:
        """The live sandbox; or, paused (here or in the state store), its paused husk, which
        `resume()` brings back (the faces' `connect` does)."""
        sandbox = sandboxes.get(sandbox_id)
        if sandbox is not None and sandbox.paused:
            return sandbox
        if sandbox is None or not sandbox.running:
            info = paused_info(sandbox_id)
            if info is not None:
                return sandboxes.paused(LocalSandbox.husk(sandbox_id, info), replace=False)
            raise SandboxNotFoundException(f"sandbox {sandbox_id!r} not found (killed, timed out, "
                                           "or never created in this process)")
        if timeout is not None:
            sandbox.extend_timeout(timeout)
            recording.lifecycle(sandbox, "connected")  # the faces' connect (a server's routes give none)
        return sandbox

    def list(self) -> List[SandboxInfo]:
        """The live sandboxes of this process and the paused ones of the state store."""
        infos = []
        for sandbox in sandboxes.all():
            try:
                infos.append(sandbox.info())
            except SandboxException:  # ended while we looked
                continue
        live = {i.sandbox_id for i in infos}
        infos += [i for i in paused_infos() if i.sandbox_id not in live]
        return sorted(infos, key=lambda i: i.started_at, reverse=True)

    # -- state (snapshots.py) ----------------------------------------------------------------------------
    def resume(self, sandbox_id: str, request: Optional[ResumeSandbox] = None,
               into: Optional[LocalSandbox] = None) -> LocalSandbox:
        """Bring a paused sandbox back (in place of `into`, its paused husk, if given): take its
        lease (one process runs it), restore its last pause snapshot."""
        from .snapshots import snapshot_store

        live, paused = sandboxes.entry(sandbox_id)
        if live is not None and live.running:
            return live
        store = snapshot_store()

        def last_pause() -> tuple[Any, dict[str, Any]]:
            state = store.get_state(sandbox_id)
            if state is None or not state.get("snapshot_id"):
                raise SandboxNotFoundException(f"sandbox {sandbox_id!r} is not paused (it was killed, or never "
                                               "paused into this state store)")
            if state.get("state") != "paused":
                log.warning("sandbox %s: its last runner (%s) ended without pausing it; resuming its last pause",
                            sandbox_id, state.get("owner"))
            return read_snapshot(store, sandbox_id, str(state["snapshot_id"])), state

        return reopen(store, sandbox_id, last_pause, lambda restoring: self._restore(restoring, request,
                                                                                     into or paused))

    def restore(self, sandbox_id: str, snapshot_id: Optional[str] = None,
                request: Optional[ResumeSandbox] = None, breaking: str = "") -> LocalSandbox:
        """declaw's `restore`: the sandbox `sandbox_id` remade from one of its snapshots (default:
        the latest, preferring pause > periodic > manual); a running copy of it here is replaced.
        `breaking`: the lease owner of its dead host (a node-loss restore, checkpoints.py)."""
        from .snapshots import snapshot_store

        store = snapshot_store()
        record = read_snapshot(store, sandbox_id, snapshot_id) if snapshot_id else latest(store, sandbox_id)
        live, into = sandboxes.entry(sandbox_id)
        if live is not None and live.running:
            live.kill()
        return reopen(store, sandbox_id, lambda: (record, {}),
                      lambda restoring: self._restore(restoring, request, into), breaking)

    def _restore(self, restoring: "Restoring", request: Optional[ResumeSandbox],
                 into: Optional[LocalSandbox]) -> LocalSandbox:
        from .snapshots import check_resume_secrets

        host_only = dict(request._host_only) if request is not None and request._host_only else \
            dict(into.options._host_only) if into is not None else {}
        check_resume_secrets(restoring, host_only)
        made = restoring.request.model_copy()
        if request is not None and request.timeout is not None:
            made.timeout = request.timeout
        made._host_only = host_only
        return self.build(made, restoring, into)

    def _from_snapshot(self, request: CreateSandbox) -> LocalSandbox:
        """`create(snapshot=...)`: a new sandbox (new id) as the snapshot was."""
        from .._state import RecordNotFound
        from .snapshots import check_resume_secrets, load, reading, snapshot_store

        store = snapshot_store()
        try:
            with reading(str(request.snapshot)):
                record = store.find(str(request.snapshot))
        except RecordNotFound:
            raise NotFoundException(f"no snapshot {request.snapshot!r} in the state store") from None
        restoring = load(record, store, get_interpreter(), None)
        made = restoring.request.model_copy()
        if request.template not in (None, made.template):
            raise InvalidArgumentException(f"snapshot {request.snapshot} is of template {made.template!r}, "
                                           f"not {request.template!r}")
        for name in ("timeout", "metadata"):
            if getattr(request, name) is not None:
                setattr(made, name, getattr(request, name))
        made._host_only = dict(request._host_only)
        check_resume_secrets(restoring, made._host_only)
        return self.build(made, restoring)

    def list_snapshots(self, sandbox_id: Optional[str] = None) -> List[Snapshot]:
        """The state store's snapshots (of one sandbox, or all), newest first."""
        from .snapshots import snapshot_model, snapshot_store

        if not store_in_use():
            return []
        return [snapshot_model(r) for r in snapshot_store().list(sandbox_id)]

    def delete_snapshot(self, sandbox_id: str, snapshot_id: str) -> bool:
        from .snapshots import delete_snapshot, snapshot_store

        return delete_snapshot(snapshot_store(), sandbox_id, snapshot_id, get_interpreter())

    @staticmethod
    def kill_all() -> None:
        """Kill every sandbox of this process (a pool's worker, as it ends)."""
        sandboxes.kill_all()


def _attach(sandbox_id: str, volumes: Sequence[Any], fs: SandboxFS, restoring: bool = False) -> Any:
    """Attach declaw's volumes (imported on first use: they bring the state store and fsspec).
    `restoring`: copies are not made (the snapshot's files are their content)."""
    from .._volumes.attach import attach_volumes, before_exit

    before_exit(sandboxes.kill_all)
    try:
        return attach_volumes(sandbox_id, volumes, fs, restoring=restoring)
    except BaseException:
        fs.destroy()
        raise


def _host_tools(value: Any) -> Optional["Tools"]:
    """A request's host tools (tools.py, imported only when there are some)."""
    if value is None:
        return None
    from .tools import host_tools

    return host_tools(value)


def _close_tools(tools: Optional["Tools"]) -> None:
    if tools is not None:
        from .tools import close_tools

        close_tools(tools)


_code_lock = threading.Lock()  # makes a sandbox's `code` once
standby = Standby(lambda template, limits: LocalSandbox(template, 0, {}, {}, limits, begin=False))
atexit.register(sandboxes.kill_all)
atexit.register(standby.close)
atexit.register(exiting.set)  # first: the guests' stores are freed while the rest of the exit runs
