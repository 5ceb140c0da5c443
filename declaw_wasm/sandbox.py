"""`Sandbox`: one isolated Python machine in this process, with E2B's API.

`SandboxCore` holds the state (file tree, running guests, lifetime timer); `Sandbox` is the sync
face and `AsyncSandbox` (async_sandbox.py) the async one, both thin over the same core.
"""

from __future__ import annotations

import atexit
import functools
import secrets
import threading
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, ClassVar, Iterator, Optional

from .commands import Commands
from .pty import Pty
from .execution import Context, Execution
from .kernel import DEFAULT_TIMEOUT as RUN_CODE_TIMEOUT
from .kernel import CodeInterpreter
from .exceptions import (InvalidArgumentException, RateLimitException, SandboxException,
                         SandboxNotFoundException, TimeoutException)
from .files import Filesystem
from .filesystem import HOME, SandboxFS, runtime_mounts
from .process import PTY_DEFAULT_ENV, Process
from .guest_site import site_dir
from . import quota
from .limits import Limits, max_sandboxes
from .models import PtySize, SandboxInfo, SandboxState
from ._egress.audit import AuditEvent
from .paths import guest_runtime_dir, rootfs_dir
from .runtime import Runtime, get_runtime
from .templates import GuestTemplate, lookup
from ._egress.create import EGRESS_PARAMS, EgressPlan, plan_from_create, refuse_served

DEFAULT_TIMEOUT = 300
# E2B keyword arguments that mean nothing in-process; accepted so E2B code runs unchanged.
IGNORED_E2B_PARAMS = {"api_key", "domain", "debug", "request_timeout", "secure",
                      "api_url", "sandbox_url", "proxy", "headers",
                      "logger", "mcp", "lifecycle", "user"}


def base_env() -> dict[str, str]:
    """The environment every guest starts from. Nothing comes from the host's environment."""
    return {
        "HOME": HOME, "USER": "user", "LOGNAME": "user", "SHELL": "/bin/bash",
        "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "TMPDIR": "/tmp",
        "HOSTNAME": "sandbox", "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": f"{HOME}/.config/matplotlib",
    }


def new_sandbox_fs(runtime: Runtime, limits: Optional[Limits] = None,
                   template: Optional[GuestTemplate] = None) -> SandboxFS:
    files = runtime.files
    mounts = runtime_mounts(files.lib_dir, files.mpl_data_dir, guest_runtime_dir(), site_dir(runtime))
    if template is not None:
        mounts += template.mounts(runtime)
    return SandboxFS(mounts, skeleton=rootfs_dir(), limits=limits,
                     overlay=template.root if template is not None else None)


class SandboxCore:
    """The state of one sandbox, shared by its sync and async faces."""

    registry: ClassVar[dict[str, "SandboxCore"]] = {}
    registry_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, template: GuestTemplate, timeout: float, metadata: dict[str, str],
                 envs: dict[str, str], limits: Limits, egress: Optional[EgressPlan] = None) -> None:
        with SandboxCore.registry_lock:
            live = len(SandboxCore.registry)
        if live >= max_sandboxes():
            raise RateLimitException(f"{live} sandboxes are live in this process "
                                     "(DECLAW_WASM_MAX_SANDBOXES); kill some first")
        self.runtime: Runtime = get_runtime()
        self.sandbox_id = "sbx_" + secrets.token_hex(16)  # 128 bits: ids are capabilities once served
        self.template = template.name
        self.profile = template.profile(self.runtime)  # what each guest's start-up applies
        self.metadata = metadata
        self.envs = {**template.envs, **envs}
        self.limits = limits
        self.egress = (egress or EgressPlan()).session(limits, self.envs)  # the network (_egress)
        self.fs = new_sandbox_fs(self.runtime, limits, template)
        self.started_at = datetime.now(timezone.utc)
        self.end_at = self.started_at
        self._lock = threading.Lock()
        self._processes: dict[int, Process] = {}
        self._next_pid = 1
        self._timer: Optional[threading.Timer] = None
        self._ended: Optional[str] = None  # None while running; "killed" or "timeout"
        self._timeout = timeout
        self.code = CodeInterpreter(self)
        try:
            self.set_timeout(timeout)
        except BaseException:  # a bad timeout: leave no folder behind
            self.fs.destroy()
            raise
        with SandboxCore.registry_lock:
            SandboxCore.registry[self.sandbox_id] = self
        quota.watcher.watch(self)

    # -- lifetime ----------------------------------------------------------------------------------
    def set_timeout(self, timeout: float) -> None:
        """Kill the sandbox `timeout` seconds from now (shorter or longer than before)."""
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            raise InvalidArgumentException(f"timeout must be a positive number of seconds, got {timeout!r}")
        with self._lock:
            self._require_running()
            if self._timer is not None:
                self._timer.cancel()
            self._timeout = timeout
            self.end_at = datetime.now(timezone.utc) + timedelta(seconds=timeout)
            self._timer = threading.Timer(timeout, self.kill, kwargs={"reason": "timeout"})
            self._timer.daemon = True
            self._timer.start()

    def kill(self, reason: str = "killed") -> bool:
        """Stop every running guest and delete the file tree. False if already gone."""
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
        self.egress.close()
        self.fs.destroy()
        with SandboxCore.registry_lock:
            SandboxCore.registry.pop(self.sandbox_id, None)
        return True

    @property
    def running(self) -> bool:
        return self._ended is None

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

    # -- guests --------------------------------------------------------------------------------------
    def guest_env(self) -> dict[str, str]:
        return {**base_env(), **self.envs}

    def spawn(self, cmd: str, envs: Optional[dict[str, str]] = None, cwd: Optional[str] = None,
              timeout: Optional[float] = None, pty: Optional[PtySize] = None,
              **process_args: Any) -> Process:
        """Start a command line (or, with `pty`, an interactive shell) in a guest of its own."""
        env = {**self.guest_env(), **(PTY_DEFAULT_ENV if pty is not None else {}), **_check_envs(envs)}
        where = self.fs.absolute(cwd) if cwd else self.fs.absolute(".")
        if cwd and not self.fs.exists(where):
            raise InvalidArgumentException(f"cwd {where} does not exist in the sandbox")
        if timeout is not None and (not isinstance(timeout, (int, float)) or timeout < 0):
            raise InvalidArgumentException(f"timeout must be a number of seconds >= 0, got {timeout!r}")
        with self._lock:
            self._require_running()
            running = sum(1 for p in self._processes.values() if not p.done)
            if running >= self.limits.max_processes:
                raise RateLimitException(f"sandbox {self.sandbox_id} already runs {running} commands "
                                         f"(limits.max_processes); wait for one or kill one")
            pid = self._next_pid
            self._next_pid += 1
            process = Process(self, pid, cmd, where, env, envs=dict(envs or {}), timeout=timeout,
                              pty=pty, **process_args)
            self._processes[pid] = process
        process.start()
        return process

    def forget_process(self, process: Process) -> None:
        with self._lock:
            self._processes.pop(process.pid, None)

    def processes(self) -> list[Process]:
        with self._lock:
            return [p for p in self._processes.values() if not p.done]

    def processes_checked(self) -> list[Process]:
        """The running commands and PTYs; raises if the sandbox is gone (as every call does)."""
        self.ensure_running()
        return self.processes()

    def running_guests(self) -> set[int]:
        """Ids of the guests doing work now: running commands and cells in flight."""
        with self._lock:
            ids = {id(p.guest) for p in self._processes.values() if not p.done}
        return ids | self.code.busy_guests()

    def stop_for_quota(self, message: str, guest_ids: set[int]) -> None:
        """Over the disk quota: stop these running guests (see quota.py)."""
        with self._lock:
            processes = [p for p in self._processes.values() if id(p.guest) in guest_ids]
        for process in processes:
            process.stop_for_quota(message)
        self.code.stop_for_quota(message, guest_ids)

    def kill_process(self, pid: int) -> bool:
        """Kill a running command or PTY; False if there is none with this pid."""
        self.ensure_running()
        process = self.process(pid)
        return process.kill() if process is not None else False

    def process(self, pid: int) -> Optional[Process]:
        with self._lock:
            process = self._processes.get(pid)
        return process if process is not None and not process.done else None

    def info(self) -> SandboxInfo:
        return SandboxInfo(sandbox_id=self.sandbox_id, template_id=self.template, name=self.template,
                           metadata=dict(self.metadata), started_at=self.started_at,
                           end_at=self.end_at, state=SandboxState.RUNNING,
                           memory_mb=self.limits.memory_limit >> 20)

    @classmethod
    def lookup(cls, sandbox_id: str) -> "SandboxCore":
        with cls.registry_lock:
            core = cls.registry.get(sandbox_id)
        if core is None or not core.running:
            raise SandboxNotFoundException(f"sandbox {sandbox_id!r} not found (killed, timed out, "
                                           "or never created in this process)")
        return core


def _kill_all_at_exit() -> None:
    """A program that ends without killing its sandboxes leaves no sandbox folders behind."""
    with SandboxCore.registry_lock:
        cores = list(SandboxCore.registry.values())
    for core in cores:
        try:
            core.kill()
        except Exception:  # exiting anyway: clean up what can be
            pass


atexit.register(_kill_all_at_exit)


def _check_envs(envs: Optional[dict[str, str]]) -> dict[str, str]:
    """`envs` as a guest environment: names a C environment can hold (non-empty, no `=`, no
    NUL), values without NUL, all valid UTF-8 (WASI passes the environment as UTF-8)."""
    if envs is None:
        return {}
    if not isinstance(envs, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                             for k, v in envs.items()):
        raise InvalidArgumentException("envs must be a dict of str to str")
    for name, value in envs.items():
        if not name or "=" in name or "\x00" in name:
            raise InvalidArgumentException(f"envs: invalid variable name {name!r} (empty, or has '=' or NUL)")
        if "\x00" in value:
            raise InvalidArgumentException(f"envs: the value of {name!r} contains a NUL byte")
        try:
            name.encode("utf-8")
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidArgumentException(f"envs: {name!r} or its value is not valid UTF-8 "
                                           "(lone surrogate)") from None
    return dict(envs)


def new_core(template: Optional[str], timeout: Optional[float], metadata: Optional[dict[str, str]],
             envs: Optional[dict[str, str]], limits: Optional[Limits], extra: dict[str, Any]) -> SandboxCore:
    """Check `create`'s arguments and make the core (shared by Sandbox and AsyncSandbox)."""
    egress = plan_from_create({k: extra.pop(k) for k in EGRESS_PARAMS if k in extra},
                              extra.get("security"))
    unknown = set(extra) - IGNORED_E2B_PARAMS
    if unknown:
        raise InvalidArgumentException(f"unexpected argument(s) to create: {', '.join(sorted(unknown))}")
    guest_template = lookup(template)
    if metadata is not None and not (isinstance(metadata, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        raise InvalidArgumentException("metadata must be a dict of str to str")
    envs = _check_envs(envs)
    clash = set(envs) & set(egress.guest_env())
    if clash:
        raise InvalidArgumentException(f"{', '.join(sorted(clash))}: given both in envs and as a "
                                       "secret or vault_ref")
    return SandboxCore(guest_template, DEFAULT_TIMEOUT if timeout is None else timeout,
                       dict(metadata or {}), {**envs, **egress.guest_env()}, limits or Limits(),
                       egress)


class instance_or_id:
    """A method usable on an instance (`sbx.kill()`) or on the class with an id
    (`Sandbox.kill(sandbox_id)`), as E2B's `class_method_variant` is. With `if_missing`, an
    unknown id returns that value instead of raising `SandboxNotFoundException`."""

    _RAISE: ClassVar[object] = object()

    def __init__(self, method: Callable[..., Any], if_missing: Any = _RAISE) -> None:
        self.method = method
        self.if_missing = if_missing
        functools.update_wrapper(self, method)  # type: ignore[arg-type]

    @classmethod
    def returning(cls, if_missing: Any) -> Callable[[Callable[..., Any]], "instance_or_id"]:
        return lambda method: cls(method, if_missing)

    def __get__(self, obj: Any, cls: type) -> Callable[..., Any]:
        if obj is not None:
            return functools.partial(self.method, obj)

        def by_id(sandbox_id: str, *args: Any, **kwargs: Any) -> Any:
            from . import remote

            conn = remote.connection(kwargs)
            if conn is not None:  # remote mode (remote.py)
                return getattr(remote.RemoteSandbox(conn, sandbox_id), self.method.__name__)(*args, **kwargs)
            try:
                core = SandboxCore.lookup(sandbox_id)
            except SandboxNotFoundException:
                if self.if_missing is instance_or_id._RAISE:
                    raise
                return self.if_missing
            return self.method(cls(core), *args, **kwargs)

        return by_id


class Sandbox:
    """A sandbox running in this process. Create one with `Sandbox.create()`."""

    def __init__(self, core: SandboxCore) -> None:
        self._core = core
        self.files = Filesystem(core)
        self.commands = Commands(core)
        self.pty = Pty(core)

    @classmethod
    def create(cls, template: Optional[str] = None, timeout: Optional[float] = None,
               metadata: Optional[dict[str, str]] = None, envs: Optional[dict[str, str]] = None,
               limits: Optional[Limits] = None, **e2b_params: Any) -> "Sandbox":
        """A new sandbox. `timeout` is its lifetime in seconds (default 300); the first call in
        a process loads the runtime (compiling it once per machine if `declaw-wasm warmup`
        has not). With `domain=` or DECLAW_DOMAIN, it is made on that server (remote.py).
        The network (docs/egress.md): `network={"allow_out": [...], "deny_out": [...]}`,
        `allow_internet_access=False`, `secrets={"NAME": Secret(value, hosts=[...])}`,
        `vault_refs={"NAME": "vault secret name"}`."""
        from . import remote

        conn = remote.connection(e2b_params)
        if conn is not None:
            refuse_served(e2b_params)
            return remote.RemoteSandbox.create_on(conn, template, timeout, metadata, envs, limits)
        return cls(new_core(template, timeout, metadata, envs, limits, e2b_params))

    @classmethod
    def _with_template(cls, template: GuestTemplate, timeout: float) -> "Sandbox":
        """A sandbox of a template that is not saved yet (a template build's own sandbox)."""
        return cls(SandboxCore(template, timeout, {}, {}, Limits()))

    @classmethod
    def connect(cls, sandbox_id: str, timeout: Optional[float] = None, **e2b_params: Any) -> "Sandbox":
        """The live sandbox with this id; `timeout` can only extend its lifetime (as in E2B)."""
        from . import remote

        conn = remote.connection(e2b_params)
        if conn is not None:
            return remote.RemoteSandbox.connect_on(conn, sandbox_id, timeout)
        core = SandboxCore.lookup(sandbox_id)
        if timeout is not None:
            left = (core.end_at - datetime.now(timezone.utc)).total_seconds()
            if timeout > left:
                core.set_timeout(timeout)
        return cls(core)

    @classmethod
    def list(cls, **e2b_params: Any) -> "SandboxPaginator":
        """The live sandboxes of this process (or of the server, in remote mode), newest first
        (E2B's paginator shape)."""
        from . import remote

        conn = remote.connection(e2b_params)
        if conn is not None:
            return remote.RemoteSandbox.list_on(conn)
        with SandboxCore.registry_lock:
            cores = list(SandboxCore.registry.values())
        infos = [c.info() for c in cores if c.running]
        return SandboxPaginator(sorted(infos, key=lambda i: i.started_at, reverse=True))

    @property
    def sandbox_id(self) -> str:
        return self._core.sandbox_id

    @instance_or_id.returning(False)
    def kill(self, **e2b_params: Any) -> bool:
        """Stop everything in the sandbox and delete its files. False if it was already gone."""
        return self._core.kill()

    @instance_or_id
    def set_timeout(self, timeout: float, **e2b_params: Any) -> None:
        self._core.set_timeout(timeout)

    @instance_or_id
    def get_info(self, **e2b_params: Any) -> SandboxInfo:
        self._core.ensure_running()
        return self._core.info()

    def is_running(self, request_timeout: Optional[float] = None) -> bool:
        return self._core.running

    def audit_events(self, **e2b_params: Any) -> list[AuditEvent]:
        """The sandbox's outbound events, oldest first: every name lookup, connection and HTTP
        request, allowed or denied, with the rule that decided (docs/egress.md, "Audit")."""
        return self._core.egress.audit_events()

    # -- the code interpreter (E2B's e2b_code_interpreter.Sandbox) ------------------------------
    def run_code(self, code: str, language: Optional[str] = None,
                 context: Optional[Context] = None,
                 on_stdout: Optional[Callable[[Any], Any]] = None,
                 on_stderr: Optional[Callable[[Any], Any]] = None,
                 on_result: Optional[Callable[[Any], Any]] = None,
                 on_error: Optional[Callable[[Any], Any]] = None,
                 envs: Optional[dict[str, str]] = None,
                 timeout: Optional[float] = RUN_CODE_TIMEOUT,
                 request_timeout: Optional[float] = None) -> Execution:
        """Run a cell in a stateful context (the default one unless `context` is given): the
        `Execution` with results, logs and the error. Code errors do not raise; a cell past
        `timeout` seconds raises `TimeoutException` and the context starts afresh."""
        return self._core.code.run_code(code, language, context, envs, timeout,
                                        on_stdout=on_stdout, on_stderr=on_stderr,
                                        on_result=on_result, on_error=on_error)

    def create_code_context(self, cwd: Optional[str] = None, language: Optional[str] = None,
                            request_timeout: Optional[float] = None) -> Context:
        return self._core.code.create_context(cwd, language)

    def list_code_contexts(self, request_timeout: Optional[float] = None) -> list[Context]:
        return self._core.code.list_contexts()

    def restart_code_context(self, context: Any, request_timeout: Optional[float] = None) -> None:
        self._core.code.restart_context(context)

    def remove_code_context(self, context: Any, request_timeout: Optional[float] = None) -> None:
        self._core.code.remove_context(context)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def __repr__(self) -> str:
        state = "running" if self._core.running else "ended"
        return f"<Sandbox {self.sandbox_id} template={self._core.template!r} {state}>"


class SandboxPaginator:
    """E2B's `SandboxPaginator`: `has_next`, `next_items()`; here one page holds everything."""

    def __init__(self, items: list[SandboxInfo]) -> None:
        self._items: Optional[list[SandboxInfo]] = items
        self.next_token: Optional[str] = None

    @property
    def has_next(self) -> bool:
        return self._items is not None

    def next_items(self, **e2b_params: Any) -> list[SandboxInfo]:
        if self._items is None:
            raise Exception("No more items to fetch")
        items, self._items = self._items, None
        return items

    def __iter__(self) -> Iterator[SandboxInfo]:
        while self.has_next:
            yield from self.next_items()
