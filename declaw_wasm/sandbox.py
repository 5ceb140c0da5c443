"""`Sandbox`: one isolated Python machine, with E2B's (and declaw's) API.

The face is written once over the backend contract (_backend.py): a sandbox runs in this
process (`_local/`), in a pool of worker processes (`_pool/`), on a Ray cluster (`_ray/`), or on
a `declaw-wasm serve` (`_remote/`). `backend_for` is the one place that chooses. `AsyncSandbox`
(async_sandbox.py) is the async twin.
"""

from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator, List, Optional

from datetime import datetime
from typing import Dict

from ._model import construct
from . import _args
from ._backend import SandboxBackend, Sandboxes, ToolSpec
from .commands import Commands
from .exceptions import InvalidArgumentException, SandboxException, SandboxNotFoundException
from .files import Filesystem
from .limits import Limits
from .models import SandboxInfo, SandboxMetrics, SandboxQuery, SandboxState, Snapshot, SnapshotInfo
from .pty import Pty
from .settings import BackendChoice, api_key, parse_backend, remote_domain
from .settings import backend as backend_setting
from .stdio import Stdio
from .wire import CreateContext, CreateSandbox, ResumeSandbox, RunCode

if TYPE_CHECKING:
    from .execution import Context, Execution
    from .events import SandboxEvent

RUN_CODE_TIMEOUT = 300.0


def backend_for(params: dict[str, Any], sandbox_id: Optional[str] = None) -> Sandboxes:
    """Where sandboxes live for this call, first match wins: `backend=` (`local`,
    `processes[:N]`, `ray[:address]`, or a `Sandboxes` object) or `domain=`; for a call on an existing sandbox, the
    backend of this process that made it; DECLAW_WASM_BACKEND; DECLAW_DOMAIN (a server, its key
    from `api_key=` or DECLAW_API_KEY); else this process. Takes `backend`, `domain` and
    `api_key` out of `params`. `api_key=` alone keeps a sandbox in-process (E2B code passes it)."""
    explicit = params.pop("backend", None)
    domain = params.pop("domain", None)
    key = params.pop("api_key", None)
    if explicit is not None and domain:
        raise InvalidArgumentException("pass either backend= or domain=, not both")
    if explicit is not None:
        return sandboxes_for(parse_backend(explicit)) if isinstance(explicit, str) else _sandboxes(explicit)
    home = None if domain or sandbox_id is None else _home_of(sandbox_id)
    if home is not None:
        return home
    choice = None if domain else backend_setting()
    if choice is not None:
        return sandboxes_for(choice)
    domain = domain or remote_domain()
    if domain:
        from ._remote.sandbox import RemoteSandboxes

        return RemoteSandboxes(domain, key or api_key())
    return sandboxes_for(BackendChoice("local"))


def _sandboxes(value: Any) -> Sandboxes:
    """A `Sandboxes` object given as `backend=` (a `ProcessPool(8)`, a configured `RaySandboxes`)."""
    if not all(callable(getattr(value, name, None)) for name in ("create", "connect", "list")):
        raise InvalidArgumentException("backend must be 'local', 'processes[:N]', 'ray[:address]' "
                                       f"or a Sandboxes object, got {value!r}")
    sandboxes: Sandboxes = value
    return sandboxes


def sandboxes_for(choice: BackendChoice) -> Sandboxes:
    """The `Sandboxes` a parsed backend name stands for (pools and Ray: one per process)."""
    if choice.kind == "processes":
        from ._pool.pool import pool_for

        return pool_for(choice.workers)
    if choice.kind == "ray":
        from ._ray.sandboxes import ray_sandboxes

        return ray_sandboxes(choice.address)
    from ._local.sandbox import LocalSandboxes

    return LocalSandboxes()


def _home_of(sandbox_id: str) -> Optional[Sandboxes]:
    """The pool or Ray backend of this process that made (or met) this sandbox, if any (only a
    process that made a pool, or uses Ray, can know one: neither is imported to find out)."""
    home: Optional[Sandboxes] = None
    if "declaw_wasm._pool.pool" in sys.modules:
        from ._pool.pool import home_of

        home = home_of(sandbox_id)
    if home is None and "ray" in sys.modules:  # only a process that uses Ray can know a Ray id
        from ._ray.sandboxes import home_of as ray_home_of

        home = ray_home_of(sandbox_id)
    return home


def create_request(template: Optional[str], timeout: Optional[float],
                   metadata: Optional[dict[str, str]], envs: Optional[dict[str, str]],
                   options: dict[str, Any], extra: dict[str, Any]) -> CreateSandbox:
    """`create`'s arguments, checked, as the wire's request (shared with AsyncSandbox).
    `options` holds the keyword-only parameters; config objects become declaw's JSON shapes. The
    network's arguments are checked here too, once (docs/egress.md); `Secret`s, a vault and
    the policy object ride in `_host_only` (each backend sends what it may: docs/egress.md)."""
    _args.create_params(extra)
    limits = options.get("limits")
    if limits is not None and not isinstance(limits, Limits):
        limits = Limits.model_validate(limits)
    security = _args.security(options.get("security"))
    allow = options.get("allow_internet_access", True)
    vault_refs = options.get("vault_refs")
    # every field checked: constructed, not validated again (see commands.py's `run`)
    request = construct(CreateSandbox,
        template=_args.template(template), timeout=None if timeout is None else _args.lifetime(timeout),
        metadata=_args.string_map(metadata, "metadata"), envs=_args.envs(envs), limits=limits,
        secure=bool(options.get("secure", True)), allow_internet_access=allow, security=security,
        network=_args.network(options.get("network"), allow, security),
        lifecycle=_args.lifecycle(options.get("lifecycle")), volumes=_args.volumes(options.get("volumes")),
        vault_refs=None if vault_refs is None else _args.string_map(vault_refs, "vault_refs"))
    if extra.get("auto_pause"):  # E2B's beta: pause at the end of the lifetime
        request.lifecycle = {**(request.lifecycle or {}), "on_timeout": "pause"}
    if options.get("snapshot") is not None:
        request.snapshot = _args.snapshot_id(options["snapshot"], "snapshot")
    host_only = {k: options.get(k) for k in ("secrets", "vault", "security", "guard_plugins", "tools", "journal")
                 if options.get(k) is not None}
    # a bad policy, guard or secret is refused now; vault refs are resolved by the backend, where
    # the vault is (this process's, or a server's). With none of them, nothing to check: the
    # egress code is not even imported (a plain create pays for what it uses)
    if allow is not True or any(options.get(k) is not None for k in ("network", "secrets", "guard_plugins",
                                                                      "security")):
        from ._egress.create import plan_from_create, security_policy

        plan_from_create({"network": options.get("network"), "allow_internet_access": allow,
                          "secrets": options.get("secrets"), "guard_plugins": options.get("guard_plugins")},
                         security_policy(options.get("security")))
    request._host_only = host_only
    return request


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
            try:
                backend = backend_for(kwargs, sandbox_id).connect(sandbox_id)
            except SandboxNotFoundException:
                if self.if_missing is instance_or_id._RAISE:
                    raise
                return self.if_missing
            return self.method(cls(backend), *args, **kwargs)

        return by_id


class instance_or_class:
    """A method with two forms, as E2B's `class_method_variant` has, where the class form takes
    other arguments than an id: `sbx.connect()` / `Sandbox.connect(sandbox_id)`,
    `sbx.delete_snapshot(id)` (declaw's) / `Sandbox.delete_snapshot(snapshot_id)` (E2B's)."""

    def __init__(self, on_class: Callable[..., Any], on_instance: Callable[..., Any]) -> None:
        self.on_class = on_class
        self.on_instance = on_instance
        functools.update_wrapper(self, on_instance)  # type: ignore[arg-type]

    def __get__(self, obj: Any, cls: type) -> Callable[..., Any]:
        if obj is None:
            return functools.partial(self.on_class, cls)
        return functools.partial(self.on_instance, obj)


class Sandbox:
    """A sandbox. Create one with `Sandbox.create()`."""

    default_template = "code-interpreter"
    default_sandbox_timeout = 300

    def __init__(self, backend: SandboxBackend) -> None:
        self._backend = backend
        self.files = Filesystem(backend)
        self.commands = Commands(backend)
        self.pty = Pty(backend)
        self.stdio = Stdio(backend)

    @classmethod
    def create(cls, template: Optional[str] = None, timeout: Optional[float] = None,
               metadata: Optional[dict[str, str]] = None, envs: Optional[dict[str, str]] = None, *,
               vault_refs: Optional[dict[str, str]] = None, secure: bool = True,
               allow_internet_access: bool = True, network: Any = None, security: Any = None,
               lifecycle: Any = None, volumes: Optional[List[Any]] = None,
               api_key: Optional[str] = None, domain: Optional[str] = None,
               request_timeout: Optional[float] = None, limits: Optional[Limits] = None,
               secrets: Optional[dict[str, Any]] = None, vault: Any = None,
               guard_plugins: Any = None, tools: Any = None, snapshot: Optional[str] = None,
               journal: Any = None, **e2b_params: Any) -> "Sandbox":
        """A new sandbox. `timeout` is its lifetime in seconds (default 300); the first call in
        a process loads the runtime (compiling it once per machine if `declaw-wasm warmup`
        has not). With `domain=` or DECLAW_DOMAIN, it is made on that server.

        declaw's parameters, keyword-only after `envs` (declaw's, E2B's and our fifth positional
        parameters differ): `network`, `allow_internet_access`, `security` (a policy object
        with `to_dict()`, or a dict), `lifecycle`, `volumes` and `vault_refs` are carried to
        the backend as declaw's JSON (docs/differences.md says what is enforced). The network
        (docs/egress.md): `network={"allow_out": [...], "deny_out": [...]}`,
        `allow_internet_access=False`, `secrets={"NAME": Secret(value, hosts=[...])}` and
        `vault_refs={"NAME": "vault secret name"}` (from `vault=`, default the process's Vault):
        the guest sees placeholders, the host injects the values for the secrets' hosts only.
        `security` is enforced on every outbound HTTP request and answer (docs/guardrails.md);
        `guard_plugins=GuardPlugins(...)` (in-process only) gives engines for the guards
        declaw-wasm does not ship (named entities, toxicity, judges, Rego).

        `tools={"search": search, ...}` (or a list of functions): host tools ("code mode",
        docs/integrations.md), functions of this process that the sandbox's code calls as
        `from declaw_tools import search; search(q="...")`; in-process and process-pool
        sandboxes only.

        `journal=` (a folder; in-process only): the sandbox's events (`events()`) are appended to
        `<folder>/<sandbox id>.jsonl` as they happen (docs/observability.md); `journal=False`:
        none, whatever `DECLAW_WASM_JOURNAL` says.

        `snapshot=` (a snapshot id, or E2B's way: the id as `template`): the new sandbox starts
        as that snapshot was, files and code contexts (docs/state.md);
        `lifecycle={"on_timeout": "pause"}` (or E2B's `{"on_timeout": {"action": "pause",
        "keep_memory": False}}`) pauses it at the end of its lifetime instead of killing it;
        `lifecycle={"checkpoint": "cell"}` (process pool and Ray) checkpoints it after each turn
        and restores it on another host when its own is lost (docs/scale.md)."""
        template, snapshot = template_or_snapshot(template, snapshot)
        options = {"vault_refs": vault_refs, "secure": secure, "allow_internet_access": allow_internet_access,
                   "network": network, "security": security, "lifecycle": lifecycle, "volumes": volumes,
                   "limits": limits, "secrets": secrets, "vault": vault, "guard_plugins": guard_plugins,
                   "tools": tool_spec(tools), "snapshot": snapshot,
                   "journal": _args.journal(journal)}
        sandboxes = backend_for({"api_key": api_key, "domain": domain, "backend": e2b_params.pop("backend", None)})
        return cls(sandboxes.create(create_request(template, timeout, metadata, envs, options, e2b_params)))

    def _connect_by_id(cls: Any, sandbox_id: str, timeout: Optional[float] = None, *,
                       secrets: Optional[dict[str, Any]] = None, vault: Any = None,
                       **e2b_params: Any) -> "Sandbox":
        """The live sandbox with this id; `timeout` can only extend its lifetime (as in E2B). A
        paused one is resumed (E2B's rule), in this process, from the state store; `secrets=`
        (and `vault=`) again if it was made with them in another process (docs/state.md).
        Also `sbx.connect(timeout=None)` (E2B's): this sandbox, resumed if paused."""
        sandboxes = backend_for(e2b_params, sandbox_id)
        lifetime = None if timeout is None else _args.lifetime(timeout)
        backend = sandboxes.connect(sandbox_id, lifetime)
        if not backend.is_running() and backend.info().state == SandboxState.PAUSED:
            backend.resume(resume_request(lifetime, secrets, vault))
        return cls(backend)

    def _connect_instance(self, timeout: Optional[float] = None, *, secrets: Optional[dict[str, Any]] = None,
                          vault: Any = None, **e2b_params: Any) -> "Sandbox":
        type(self).connect(self.sandbox_id, timeout, secrets=secrets, vault=vault, **e2b_params)
        return self  # its backend reaches the same sandbox (resumed in place, or a client of it)

    connect = instance_or_class(_connect_by_id, _connect_instance)

    @classmethod
    def list(cls, query: Optional[SandboxQuery] = None, limit: Optional[int] = None,
             next_token: Optional[str] = None, api_key: Optional[str] = None,
             domain: Optional[str] = None, request_timeout: Optional[float] = None,
             **e2b_params: Any) -> "SandboxPaginator":
        """The live sandboxes of this process (or of the server, in remote mode), newest first
        (E2B's `order="asc"`: oldest first), filtered by `query` (E2B's `SandboxQuery`: metadata,
        state). The answer is E2B's paginator (`has_next`, `next_items()`, iteration) and also
        reads as declaw's dict (`["sandboxes"]`: the first page, `["next_token"]`)."""
        order = e2b_params.pop("order", None)
        backend = e2b_params.pop("backend", None)
        _args.list_params(e2b_params)
        found = [i for i in backend_for({"api_key": api_key, "domain": domain, "backend": backend}).list()
                 if query is None or _query(query).matches(i)]
        if order == "asc":
            found.reverse()
        return SandboxPaginator(found, limit=_args.page_limit(limit), next_token=next_token)

    @property
    def sandbox_id(self) -> str:
        return self._backend.sandbox_id

    def get_host(self, port: int) -> str:
        """Where a server listening on the sandbox's `port` is reached, as E2B's and declaw's
        `get_host` (a host, no scheme): in this process `127.0.0.1:<host port>` (a host listener
        on loopback that stands for the port); under `declaw-wasm serve`
        `<port>-<sandbox id>.localhost:<serve port>` (docs/inbound.md). With
        `network={"allow_public_traffic": False}`, requests must carry `traffic_access_token` in
        the `e2b-traffic-access-token` header."""
        return self._backend.get_host(_args.port(port))

    @property
    def traffic_access_token(self) -> Optional[str]:
        """The token a request to `get_host(port)` must carry in `e2b-traffic-access-token` when
        the sandbox was created with `network={"allow_public_traffic": False}`; else None."""
        return self._backend.traffic_access_token()

    @instance_or_id.returning(False)
    def kill(self, request_timeout: Optional[float] = None, *, wait: bool = False, **e2b_params: Any) -> bool:
        """Stop everything in the sandbox and delete its files (done before the call returns,
        `wait` or not). False if it was already gone."""
        return self._backend.kill()

    @classmethod
    def kill_by_id(cls, sandbox_id: str, *, wait: bool = False, connection_config: Any = None,
                   request_timeout: Optional[float] = None, **e2b_params: Any) -> bool:
        """declaw's kill of a sandbox by id; False if there is none."""
        kill: Callable[..., bool] = cls.kill
        return kill(sandbox_id, **_where(connection_config, e2b_params))

    @classmethod
    def kill_many(cls, sandbox_ids: List[str], *, wait: bool = False, connection_config: Any = None,
                  request_timeout: Optional[float] = None, **e2b_params: Any) -> Dict[str, Dict[str, Any]]:
        """Kill several sandboxes: per id `{"killed": True}` (declaw's `{"queued": True}` without
        `wait`, though the kill is done either way) or `{"error": "..."}`."""
        results: Dict[str, Dict[str, Any]] = {}
        where = _where(connection_config, e2b_params)
        for sandbox_id in dict.fromkeys(sandbox_ids):
            try:
                killed = cls.kill_by_id(sandbox_id, **where)
            except SandboxException as exc:
                results[sandbox_id] = {"error": str(exc)}
                continue
            results[sandbox_id] = ({"killed": True} if wait else {"queued": True}) if killed else \
                {"error": "sandbox not found"}
        return results

    def get_metrics(self, start: Optional[datetime] = None, end: Optional[datetime] = None,
                    request_timeout: Optional[float] = None) -> List[SandboxMetrics]:
        """declaw's metrics: one sample, now (memory of the live guests, disk use, CPU); none
        when `start`..`end` lies wholly before the sandbox started or after now (E2B's range)."""
        sample = self._backend.metrics()
        if start is None and end is None:
            return [sample]
        started = self._backend.info().started_at
        if (end is not None and _args.moment(end, "end") < started) or \
                (start is not None and _args.moment(start, "start") > sample.timestamp):
            return []
        return [sample]

    @instance_or_id
    def set_timeout(self, timeout: float, request_timeout: Optional[float] = None,
                    **e2b_params: Any) -> None:
        """A new lifetime from now, in seconds; 0 ends it now (E2B's: a sandbox made with
        `lifecycle={"on_timeout": "pause"}` pauses)."""
        self._backend.set_timeout(_args.lifetime(timeout, now=True))

    @instance_or_id
    def get_info(self, request_timeout: Optional[float] = None, **e2b_params: Any) -> SandboxInfo:
        return self._backend.info()

    def is_running(self, request_timeout: Optional[float] = None) -> bool:
        return self._backend.is_running()

    # -- state: snapshots, pause and resume, fork (docs/state.md) ---------------------------------
    @instance_or_id
    def pause(self, request_timeout: Optional[float] = None, *, keep_memory: Optional[bool] = None,
              **e2b_params: Any) -> bool:
        """Write the sandbox (files and code contexts) to the state store (DECLAW_WASM_STATE)
        and free it; `resume()`, `Sandbox.resume(id)` or `Sandbox.connect(id)` bring it back, in
        this process or another. False if it was paused already. Refused (ConflictException)
        while a command runs or a context holds a file open across cells. `keep_memory=False`
        (E2B's filesystem-only pause): the files alone; the code contexts start afresh."""
        return self._backend.pause(_args.keep_memory(keep_memory))

    @instance_or_id
    def beta_pause(self, request_timeout: Optional[float] = None, *, keep_memory: Optional[bool] = None,
                   **e2b_params: Any) -> bool:
        """E2B's name for `pause`."""
        return self._backend.pause(_args.keep_memory(keep_memory))

    @instance_or_id
    def resume(self, request_timeout: Optional[float] = None, *, timeout: Optional[float] = None,
               secrets: Optional[dict[str, Any]] = None, vault: Any = None, **e2b_params: Any) -> "Sandbox":
        """Bring a paused sandbox back (declaw's `resume`; also `Sandbox.resume(sandbox_id)`):
        its files and code contexts as they were. `timeout`: its new lifetime. A sandbox made
        with `secrets=` resumed in another process needs them again (they are never stored)."""
        self._backend.resume(resume_request(None if timeout is None else _args.lifetime(timeout), secrets, vault))
        return self

    @instance_or_id
    def create_snapshot(self, request_timeout: Optional[float] = None, *, name: Optional[str] = None,
                        **e2b_params: Any) -> SnapshotInfo:
        """Snapshot the sandbox into the state store (files, and every code context's state
        between cells); it keeps running. Snapshots outlive `kill()`. `name` (E2B's): listed in
        the snapshot's `names`, and `Sandbox.list_snapshots(name=...)` finds it."""
        return self._backend.create_snapshot(_args.snapshot_name(name)).info()

    def snapshot(self, request_timeout: Optional[float] = None) -> Snapshot:
        """declaw's `snapshot()`: `create_snapshot`, answered as a `Snapshot` (source "manual")."""
        return self._backend.create_snapshot()

    def _list_snapshots_of(self, request_timeout: Optional[float] = None, **e2b_params: Any) -> List[Snapshot]:
        """The sandbox's snapshots (pause and manual), newest first."""
        return self._backend.list_snapshots()

    def _list_snapshots(cls: Any, sandbox_id: Optional[str] = None, *, name: Optional[str] = None,
                        limit: Optional[int] = None, next_token: Optional[str] = None,
                        request_timeout: Optional[float] = None, **e2b_params: Any) -> "SnapshotPaginator":
        """Every snapshot in the state store, or one sandbox's, or those named `name`, newest
        first: E2B's paginator (`has_next`, `next_items()`) that is also declaw's list."""
        sandbox = None if sandbox_id is None else _args.snapshot_id(sandbox_id, "sandbox_id")
        wanted = None if name is None else _args.snapshot_name(name)
        found = backend_for(e2b_params, sandbox).list_snapshots(sandbox)
        if wanted is not None:
            found = [s for s in found if wanted in s.names]
        return SnapshotPaginator(found, _args.page_limit(limit), next_token)

    list_snapshots = instance_or_class(_list_snapshots, _list_snapshots_of)

    def _delete_snapshot_of(self, snapshot_id: str, request_timeout: Optional[float] = None) -> bool:
        """Delete one of the sandbox's snapshots (True, also if it was gone; ConflictException
        for the one a paused sandbox resumes from). `Sandbox.delete_snapshot(snapshot_id)`
        (E2B's): any snapshot of the store, False if there was none."""
        self._backend.delete_snapshot(_args.snapshot_id(snapshot_id))
        return True

    def _delete_snapshot(cls: Any, snapshot_id: str, request_timeout: Optional[float] = None,
                         **e2b_params: Any) -> bool:
        checked = _args.snapshot_id(snapshot_id)
        sandboxes = backend_for(e2b_params)
        owner = next((s.sandbox_id for s in sandboxes.list_snapshots(None) if s.snapshot_id == checked), None)
        return owner is not None and sandboxes.delete_snapshot(owner, checked)

    delete_snapshot = instance_or_class(_delete_snapshot, _delete_snapshot_of)

    @classmethod
    def restore(cls, sandbox_id: str, *, snapshot_id: Optional[str] = None, api_key: Optional[str] = None,
                domain: Optional[str] = None, request_timeout: Optional[float] = None,
                timeout: Optional[float] = None, secrets: Optional[dict[str, Any]] = None, vault: Any = None,
                **e2b_params: Any) -> "Sandbox":
        """declaw's `restore`: the sandbox `sandbox_id` (same id) as it was in one of its
        snapshots; by default the latest, preferring pause > periodic > manual. A copy of it
        running in this process is replaced; one running in another process is refused."""
        where = {"api_key": api_key, "domain": domain, "backend": e2b_params.pop("backend", None)}
        sandboxes = backend_for(where, sandbox_id)
        request = resume_request(None if timeout is None else _args.lifetime(timeout), secrets, vault)
        return cls(sandboxes.restore(_args.snapshot_id(sandbox_id, "sandbox_id"),
                                     None if snapshot_id is None else _args.snapshot_id(snapshot_id), request))

    def _fork(self, timeout: Optional[float] = None, count: Optional[int] = None,
              request_timeout: Optional[float] = None, **e2b_params: Any) -> List["Sandbox"]:
        """New sandboxes with this one's files and code contexts, each diverging on its own from
        here (E2B's `fork`): a list of `count` (default 1). `timeout`: their lifetime (default:
        this sandbox's). Also `Sandbox.fork(sandbox_id, ...)`."""
        how_many = _args.fork_count(count)
        lifetime = None if timeout is None else _args.lifetime(timeout)
        if not self._backend.is_running():
            try:
                paused = self._backend.info().state == SandboxState.PAUSED
            except SandboxException:
                paused = False
            if not paused:  # E2B: a killed sandbox is not found
                raise SandboxNotFoundException(f"sandbox {self.sandbox_id} is not running: it cannot be forked")
        forks = [Sandbox(backend) for backend in self._backend.fork(how_many)]
        if lifetime is not None:
            for fork in forks:
                fork.set_timeout(lifetime)
        return forks

    def _fork_by_id(cls: Any, sandbox_id: str, timeout: Optional[float] = None, count: Optional[int] = None,
                    request_timeout: Optional[float] = None, **e2b_params: Any) -> List["Sandbox"]:
        _args.fork_count(count)  # a bad count is refused before the id is looked up (E2B's order)
        return cls.connect(sandbox_id, **e2b_params)._fork(timeout, count, request_timeout)

    fork = instance_or_class(_fork_by_id, _fork)

    def download_url(self, path: str, user: Optional[str] = None,
                     use_signature_expiration: Optional[int] = None) -> str:
        """E2B's: a URL that downloads the file with no API key (a browser, `urlopen`). In
        process, this process serves it on loopback; signed when the sandbox is `secure` (the
        default), valid for `use_signature_expiration` seconds if given."""
        return self._backend.file_url(_args.path(path), False, user,
                                      _args.signature_expiration(use_signature_expiration))

    def upload_url(self, path: Optional[str] = None, user: Optional[str] = None,
                   use_signature_expiration: Optional[int] = None) -> str:
        """E2B's: a URL that writes the file from a POST or PUT (the raw body, or a multipart
        form's file), with no API key; signed as `download_url`."""
        if path is None:
            raise InvalidArgumentException("upload_url needs the path of the file to write")
        return self._backend.file_url(_args.path(path), True, user,
                                      _args.signature_expiration(use_signature_expiration))

    def audit_events(self, request_timeout: Optional[float] = None) -> List[Any]:
        """The sandbox's outbound events (`AuditEvent`s), oldest first: every name lookup,
        connection and HTTP request, allowed or denied, with the rule that decided
        (docs/egress.md, "Audit"). declaw has no client API for this; its `AuditEntry` fields are
        a subset."""
        return self._backend.audit_events()

    def events(self, since: int = 0, request_timeout: Optional[float] = None) -> List["SandboxEvent"]:
        """What happened in the sandbox, as events (declaw_wasm.events): lifecycle steps,
        commands, cells, files written and read through the API, egress (the audit's events:
        `audit_events()` is their egress view), host tool calls, limits hit; those with a
        sequence number above `since`, oldest first, from the sandbox's bounded ring (its JSONL
        journal, if it has one, keeps them all: docs/observability.md)."""
        return self._backend.events(_args.event_seq(since))

    # -- the code interpreter (E2B's e2b_code_interpreter.Sandbox) ------------------------------
    def run_code(self, code: str, language: Optional[str] = None,
                 context: Optional[Context] = None,
                 on_stdout: Optional[Callable[[Any], Any]] = None,
                 on_stderr: Optional[Callable[[Any], Any]] = None,
                 on_result: Optional[Callable[[Any], Any]] = None,
                 on_error: Optional[Callable[[Any], Any]] = None,
                 envs: Optional[dict[str, str]] = None,
                 timeout: Optional[float] = RUN_CODE_TIMEOUT,
                 request_timeout: Optional[float] = None, *, tools: Any = None) -> Execution:
        """Run a cell in a stateful context (the default one unless `context` is given): the
        `Execution` with results, logs and the error. Code errors do not raise; a cell past
        `timeout` seconds raises `TimeoutException` and the context starts afresh. A cell may
        `await` at the top level. `tools`: host tools for this cell only (as `create`'s, and
        before them); a tool call counts against `timeout`."""
        return self._backend.run_code(run_code_request(code, language, context, envs, timeout, tools),
                                      on_stdout=on_stdout, on_stderr=on_stderr,
                                      on_result=on_result, on_error=on_error)

    def create_code_context(self, cwd: Optional[str] = None, language: Optional[str] = None,
                            request_timeout: Optional[float] = None) -> Context:
        return self._backend.create_context(CreateContext(
            cwd=_args.path(cwd) if cwd is not None else None, language=_args.language(language)))

    def list_code_contexts(self, request_timeout: Optional[float] = None) -> List[Context]:
        return self._backend.list_contexts()

    def restart_code_context(self, context: Any, request_timeout: Optional[float] = None) -> None:
        self._backend.restart_context(_context_id(context))

    def remove_code_context(self, context: Any, request_timeout: Optional[float] = None) -> None:
        self._backend.remove_context(_context_id(context))

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def __repr__(self) -> str:
        state = "running" if self._backend.is_running() else "ended"
        return f"<Sandbox {self.sandbox_id} {state}>"


def template_or_snapshot(template: Optional[str], snapshot: Optional[str]) -> tuple[Optional[str], Optional[str]]:
    """E2B makes a sandbox from a snapshot by passing its id as the template: an id of the state
    store's form (`snap_` + hex) is a snapshot, never a template name."""
    if snapshot is None and isinstance(template, str) and _args.is_snapshot_id(template):
        return None, template
    return template, snapshot


def resume_request(timeout: Optional[float], secrets: Optional[dict[str, Any]], vault: Any) -> ResumeSandbox:
    """A resume's (or restore's) arguments: a lifetime, and secrets that stay in this process."""
    request = ResumeSandbox(timeout=timeout)
    request._host_only = {k: v for k, v in (("secrets", secrets), ("vault", vault)) if v is not None}
    if secrets is not None:
        from ._egress.create import plan_from_create

        plan_from_create({"secrets": secrets})  # refuses a bad secret now
    return request


def run_code_request(code: str, language: Optional[str], context: Any,
                     envs: Optional[dict[str, str]], timeout: Optional[float], tools: Any = None) -> RunCode:
    """`run_code`'s arguments, checked, as the wire's request (shared with AsyncSandbox)."""
    if language is not None and context is not None:
        raise InvalidArgumentException("pass either language or context, not both")
    request = RunCode(code=_args.code(code), language=_args.language(language),
                      context_id=_args.context_id(context), envs=_args.envs(envs),
                      timeout=_args.timeout(timeout))
    spec = tool_spec(tools)
    if spec is not None:
        request._host_only["tools"] = spec
    return request


def tool_spec(tools: Any, loop: Any = None) -> Optional[ToolSpec]:
    """`tools=` as the backends take it: checked callables, and the event loop coroutine
    functions run on (the async face's; None: the backend's own). A ToolSpec passes through."""
    if tools is None or isinstance(tools, ToolSpec):
        return tools
    functions = _args.tools(tools)
    return ToolSpec(functions, loop) if functions else None


def _context_id(context: Any) -> str:
    found = _args.context_id(context)
    if found is None:
        raise InvalidArgumentException(f"context must be a Context or its id, got {context!r}")
    return found


def _query(query: Any) -> SandboxQuery:
    """E2B's or declaw's query object (or a dict) as ours."""
    if isinstance(query, SandboxQuery):
        return query
    found = _args.config(query, "query") if not hasattr(query, "metadata") else \
        {k: getattr(query, k, None) for k in ("metadata", "state", "started_after", "template")}
    try:
        return SandboxQuery.model_validate({k: v for k, v in (found or {}).items() if v is not None})
    except ValueError as exc:
        raise InvalidArgumentException(f"bad query: {exc}") from None


def _where(connection_config: Any, params: dict[str, Any]) -> dict[str, Any]:
    """declaw's `connection_config` (api_key, domain) as keyword arguments."""
    where: dict[str, Any] = {k: params.pop(k) for k in ("api_key", "domain") if k in params}
    if connection_config is not None:
        where.setdefault("api_key", getattr(connection_config, "api_key", None))
        domain = getattr(connection_config, "api_url", None) or getattr(connection_config, "domain", None)
        where.setdefault("domain", domain)
    return where


class SnapshotPaginator(List[Snapshot]):
    """`Sandbox.list_snapshots(...)`: E2B's `SnapshotPaginator` (`has_next`, `next_items()`)
    that is also declaw's list of snapshots (all of them, newest first)."""

    def __init__(self, items: List[Snapshot], limit: Optional[int] = None,
                 next_token: Optional[str] = None) -> None:
        super().__init__(items)
        self._pages = SandboxPaginator(items, limit, next_token)  # type: ignore[arg-type]  # same paging

    @property
    def has_next(self) -> bool:
        return self._pages.has_next

    @property
    def next_token(self) -> Optional[str]:
        return self._pages.next_token

    def next_items(self, **e2b_params: Any) -> List[Snapshot]:
        return self._pages.next_items()  # type: ignore[return-value]


class SandboxPaginator:
    """E2B's `SandboxPaginator` (`has_next`, `next_token`, `next_items()`, iteration over the
    sandboxes) that also reads as declaw's `Sandbox.list()` dict: `["sandboxes"]` is the first
    page, `["next_token"]` the token after it."""

    def __init__(self, items: List[SandboxInfo], limit: Optional[int] = None,
                 next_token: Optional[str] = None) -> None:
        self._items = items
        self._limit = limit
        self._offset = int(next_token) if next_token and next_token.isdigit() else 0
        self._first = self._page(self._offset)
        self.next_token: Optional[str] = str(self._offset) if self._offset else None
        self._done = False

    def _page(self, offset: int) -> tuple[List[SandboxInfo], Optional[str]]:
        end = len(self._items) if self._limit is None else offset + self._limit
        return self._items[offset:end], (str(end) if end < len(self._items) else None)

    @property
    def has_next(self) -> bool:
        return not self._done

    def next_items(self, **e2b_params: Any) -> List[SandboxInfo]:
        if self._done:
            raise Exception("No more items to fetch")
        items, self.next_token = self._page(self._offset)
        self._offset += len(items)
        self._done = self.next_token is None
        return items

    def __iter__(self) -> Iterator[SandboxInfo]:
        while self.has_next:
            yield from self.next_items()

    # -- declaw's dict shape ------------------------------------------------------------------
    def _as_dict(self) -> dict[str, Any]:
        return {"sandboxes": self._first[0], "next_token": self._first[1]}

    def __getitem__(self, key: str) -> Any:
        return self._as_dict()[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._as_dict().get(key, default)

    def keys(self) -> Any:
        return self._as_dict().keys()

    def __contains__(self, key: object) -> bool:
        return key in self._as_dict()
