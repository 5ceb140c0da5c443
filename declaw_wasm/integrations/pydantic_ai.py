"""pydantic-ai workspace: `DeclawWasmWorkspace`, a capability handing out
`DeclawWasmWorkspaceBackend` (`WorkspaceBackend` + `SupportsCommands`, `SupportsFilesystem`,
`SupportsRealpath`) over one declaw-wasm sandbox.

    from pydantic_ai import Agent
    from declaw_wasm.integrations.pydantic_ai import DeclawWasmWorkspace

    agent = Agent(model, capabilities=[DeclawWasmWorkspace()])

The backend follows pydantic-ai's contract (checked by its own `WorkspaceBackendSuite`): no I/O
when built; the sandbox is made on first use (one, however many first calls race) or attached by
its `WorkspaceRef(provider="declaw-wasm", id=<sandbox id>)`; a gone sandbox raises
`WorkspaceUnavailableError`, never a silent replacement; the run never kills it (the ref's holder
does, e.g. with `destroy()`). Commands run through the sandbox shell from the working directory
(`/home/user`); argv items are quoted, so they stay literal; a non-zero exit is a result; a
timeout raises `WorkspaceTimeoutError` with the output so far; a cancelled call kills its
command. Files go through the files API and fail with the builtin errors (`FileNotFoundError`,
`IsADirectoryError`, `NotADirectoryError`, `FileExistsError`, `OSError`).

The sandbox keeps no permission bits (WASI), so `chmod 000` does not make a file unreadable.

`DeclawWasmCodeMode` is code mode ("programmatic tool calling") on the same sandboxes: the
agent's tools fold into one `run_code` tool whose Python calls them as functions, each call a
host tool (`run_code(tools=)`) dispatched back through pydantic-ai. The installed pydantic-ai
has no code mode of its own (pydantic-ai-harness's `CodeMode` runs on Monty and pins an older
pydantic-ai), so this is ours, on pydantic-ai's documented toolset and capability hooks.
"""

from __future__ import annotations

import errno
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

import anyio

from .. import (
    AsyncSandbox,
    FileNotFoundException,
    FileType,
    NotEnoughSpaceException,
    SandboxException,
    TimeoutException,
)
from ._common import command_line, missing_extra, split_cd, wait_or_kill

try:
    from pydantic_ai import ModelRetry, ToolDenied, ToolReturn
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.tool_manager import ToolManager
    from pydantic_ai.tools import ToolDefinition
    from pydantic_ai.toolsets import WrapperToolset
    from pydantic_ai.toolsets.abstract import ToolsetTool
    from pydantic_core import SchemaValidator, core_schema
    from pydantic_ai.workspaces import (
        CommandResult,
        FileEntry,
        WorkspaceBackend,
        WorkspaceCommand,
        WorkspaceRef,
        WorkspaceTimeoutError,
        WorkspaceUnavailableError,
    )
except ImportError as exc:  # the framework is an optional extra
    raise missing_extra("pydantic-ai") from exc

_RUN_CODE_VALIDATOR = SchemaValidator(core_schema.typed_dict_schema(
    {"code": core_schema.typed_dict_field(core_schema.str_schema())}))

PROVIDER = "declaw-wasm"
WORKING_DIR = "/home/user"
MAX_SYMLINKS = 40
# pydantic-ai's `Workspace.run(cwd=)` wraps argv so: `cd` then `exec "$@"` (our shell has no exec).
_CWD_WRAPPER = 'cd -- "$1" || exit; shift; exec "$@"'


class DeclawWasmWorkspaceBackend:
    """A pydantic-ai workspace backend over one declaw-wasm sandbox.

    Args:
        ref: attach to this sandbox instead of making one.
        template, timeout, envs, metadata: how a new sandbox is made (`timeout` is its lifetime).
        working_dir: where commands start (must exist in the template; default /home/user).
        command_timeout: the longest a command may run when the caller gives no `timeout`.
        create_options: more `AsyncSandbox.create` keywords for a new sandbox: `security`,
            `network`, `volumes`, `secrets`, `allow_internet_access`, `limits`, `backend`...
    """

    def __init__(self, ref: WorkspaceRef | None = None, *, template: str | None = None,
                 timeout: float = 3600, envs: Mapping[str, str] | None = None,
                 metadata: Mapping[str, str] | None = None, working_dir: str = WORKING_DIR,
                 command_timeout: float = 3600, **create_options: Any) -> None:
        if ref is not None and ref.provider != PROVIDER:
            raise ValueError(f"not a {PROVIDER} workspace ref: {ref!r}")
        self._ref = ref
        self._template, self._timeout = template, timeout
        self._envs, self._metadata = dict(envs or {}), dict(metadata or {})
        self._create_options = create_options
        self._working_dir = posixpath.normpath(working_dir)
        self._command_timeout = command_timeout
        self._sandbox: AsyncSandbox | None = None
        self._lock = anyio.Lock()

    # -- the environment ---------------------------------------------------------------------

    @property
    def ref(self) -> WorkspaceRef | None:
        return self._ref

    async def sandbox(self) -> AsyncSandbox:
        """The sandbox, made or attached on first use."""
        if self._sandbox is not None:
            return self._sandbox
        async with self._lock:
            if self._sandbox is None:
                if self._ref is not None:
                    try:
                        sandbox = await AsyncSandbox.connect(self._ref.id)
                    except SandboxException as exc:
                        raise WorkspaceUnavailableError(
                            f"sandbox {self._ref.id} is gone: {exc}") from None
                    if not await sandbox.is_running():
                        raise WorkspaceUnavailableError(f"sandbox {self._ref.id} has ended")
                    self._sandbox = sandbox
                else:
                    with anyio.CancelScope(shield=True):  # keep the ref of what we made
                        sandbox = await AsyncSandbox.create(
                            template=self._template, timeout=self._timeout,
                            envs=self._envs or None, metadata=self._metadata or None,
                            **self._create_options)
                        self._ref = WorkspaceRef(provider=PROVIDER, id=sandbox.sandbox_id)
                        self._sandbox = sandbox
        assert self._sandbox is not None
        return self._sandbox

    async def working_dir(self) -> str:
        await self.sandbox()
        return self._working_dir

    async def destroy(self) -> None:
        """Kill the sandbox (the holder of the ref decides when; a run never does)."""
        await (await self.sandbox()).kill()

    async def _alive_or_unavailable(self, sbx: AsyncSandbox) -> None:
        if not await sbx.is_running():
            raise WorkspaceUnavailableError(f"sandbox {sbx.sandbox_id} has ended")

    # -- commands ----------------------------------------------------------------------------

    async def run(self, command: WorkspaceCommand, *, shell: bool = False,
                  env: Mapping[str, str] | None = None, timeout: float | None = None
                  ) -> CommandResult:
        if isinstance(command, str) != shell:
            raise TypeError("a string command requires shell=True, an argv sequence shell=False")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not 0 < timeout < float("inf")):
            raise ValueError("timeout must be a positive finite number or None")
        cwd = self._working_dir
        if isinstance(command, str):
            where, line = split_cd(command)
            cwd = where or cwd
        else:
            argv = [str(a) for a in command]
            if not argv:
                raise ValueError("command must not be empty")
            if argv[0] in ("sh", "/bin/sh") and argv[1:3] == ["-c", _CWD_WRAPPER] and len(argv) > 5:
                cwd, argv = argv[4], argv[5:]
            line = command_line(argv)
        sbx = await self.sandbox()
        limit = timeout if timeout is not None else self._command_timeout
        try:
            handle = await sbx.commands.run(line, background=True, cwd=cwd, envs=dict(env or {}),
                                            timeout=limit)
            result = await wait_or_kill(handle)
        except TimeoutException as exc:  # also what a command of a killed sandbox raises (E2B's rule)
            await self._alive_or_unavailable(sbx)
            raise WorkspaceTimeoutError(f"command timed out after {limit:g}s and was killed",
                                        stdout=getattr(exc, "stdout", "") or "",
                                        stderr=getattr(exc, "stderr", "") or "") from None
        except SandboxException as exc:
            await self._alive_or_unavailable(sbx)
            if isinstance(exc, FileNotFoundException):  # a missing cwd
                raise FileNotFoundError(errno.ENOENT, str(exc), cwd) from None
            raise
        if result.exit_code == 137 and result.error == "killed":
            await self._alive_or_unavailable(sbx)
        return CommandResult(exit_code=result.exit_code, stdout=result.stdout,
                             stderr=result.stderr)

    # -- files -------------------------------------------------------------------------------

    async def _call(self, path: str, fn: Any, *args: Any) -> Any:
        sbx = await self.sandbox()
        try:
            return await fn(sbx, *args)
        except SandboxException as exc:
            await self._alive_or_unavailable(sbx)
            raise _os_error(exc, path) from None

    async def read_bytes(self, path: str) -> bytes:
        data = await self._call(path, lambda s: s.files.read(_abs(path), format="bytes"))
        return bytes(data)

    async def write_bytes(self, path: str, data: bytes) -> None:
        await self._call(path, lambda s: s.files.write(_abs(path), bytes(data)))

    async def stat(self, path: str) -> FileEntry:
        info = await self._call(path, lambda s: s.files.get_info(_abs(path)))
        return _entry(posixpath.normpath(path), info)

    async def list_dir(self, path: str) -> Sequence[FileEntry]:
        entries = await self._call(path, lambda s: s.files.list(_abs(path)))
        base = posixpath.normpath(path)
        return sorted((_entry(posixpath.join(base, e.name), e) for e in entries),
                      key=lambda e: e.name)

    async def make_dir(self, path: str) -> None:
        async def make(sbx: AsyncSandbox) -> None:
            target = _abs(path)
            if await sbx.files.exists(target):
                if (await sbx.files.get_info(target)).type != FileType.DIR:
                    raise FileExistsError(errno.EEXIST, "File exists", target)
                return
            await sbx.files.make_dir(target)

        await self._call(path, make)

    async def remove(self, path: str) -> None:
        target = posixpath.join(await self.realpath(posixpath.dirname(_abs(path))),
                                posixpath.basename(posixpath.normpath(path)))
        working = self._working_dir
        if target in ("/", working) or working.startswith(target.rstrip("/") + "/"):
            raise ValueError("cannot remove the working directory or one of its ancestors")

        async def remove(sbx: AsyncSandbox) -> None:
            if not await sbx.files.exists(_abs(path)) and not await _is_link(sbx, _abs(path)):
                raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
            await sbx.files.remove(_abs(path))

        await self._call(path, remove)

    async def exists(self, path: str) -> bool:
        return bool(await self._call(path, lambda s: s.files.exists(_abs(path))))

    async def realpath(self, path: str) -> str:
        """Component by component, as `os.path.realpath(strict=False)`: symlinks followed (their
        targets as the files API reports them), missing names kept, `..` climbing what is
        resolved so far; a loop raises OSError(ELOOP)."""
        sbx = await self.sandbox()
        resolved = "/"
        for part in _abs(path).split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                resolved = posixpath.dirname(resolved)
                continue
            resolved = posixpath.join(resolved, part)
            for _ in range(MAX_SYMLINKS):
                try:
                    info = await sbx.files.get_info(resolved)
                except FileNotFoundException:
                    break
                except SandboxException as exc:
                    await self._alive_or_unavailable(sbx)
                    raise _os_error(exc, path) from None
                target = info.symlink_target
                if not target or posixpath.normpath(target) == resolved:
                    if target:  # a link to itself
                        raise OSError(errno.ELOOP, "Too many levels of symbolic links", path)
                    break
                resolved = posixpath.normpath(target)
            else:
                raise OSError(errno.ELOOP, "Too many levels of symbolic links", path)
        return resolved


@dataclass
class DeclawWasmWorkspace(AbstractCapability[Any]):
    """A pydantic-ai capability giving each run a declaw-wasm sandbox as its workspace (a fresh
    one, or the one a `WorkspaceRef` from `workspace=` or the history names)."""

    _: KW_ONLY
    template: str | None = None
    timeout: float = 3600
    envs: Mapping[str, str] | None = None
    working_dir: str = WORKING_DIR
    id: str | None = "declaw_wasm_workspace"
    # declaw's sandbox options, handed to `AsyncSandbox.create` for a new sandbox
    security: Any = None
    network: Any = None
    volumes: Any = None
    secrets: Mapping[str, Any] | None = None
    create_options: Mapping[str, Any] | None = None  # any other `AsyncSandbox.create` keyword

    def get_workspace(self, ctx: Any, *, ref: WorkspaceRef | None) -> WorkspaceBackend | None:
        if ref is not None and ref.provider != PROVIDER:
            return None
        return DeclawWasmWorkspaceBackend(ref, template=self.template, timeout=self.timeout,
                                          envs=self.envs, working_dir=self.working_dir,
                                          **_options(self.security, self.network, self.volumes,
                                                     self.secrets, self.create_options))


def _options(security: Any, network: Any, volumes: Any, secrets: Mapping[str, Any] | None,
             more: Mapping[str, Any] | None) -> dict[str, Any]:
    given = {"security": security, "network": network, "volumes": volumes,
             "secrets": dict(secrets) if secrets else None}
    return {**{k: v for k, v in given.items() if v is not None}, **(more or {})}


def _abs(path: str) -> str:
    if not posixpath.isabs(path):
        raise ValueError(f"path must be absolute, got {path!r}")
    return posixpath.normpath(path)


async def _is_link(sbx: AsyncSandbox, path: str) -> bool:
    try:
        entries = await sbx.files.list(posixpath.dirname(path))
    except SandboxException:
        return False
    return any(e.name == posixpath.basename(path) and e.symlink_target for e in entries)


def _entry(path: str, info: Any) -> FileEntry:
    is_dir = info.type == FileType.DIR
    return FileEntry(name=posixpath.basename(path) or "/", path=path, is_dir=is_dir,
                     size=None if is_dir or info.type == FileType.SYMLINK else info.size)


def _os_error(exc: SandboxException, path: str) -> Exception:
    """The builtin error for a files-API failure (pydantic-ai's contract)."""
    text = str(exc)
    if "not a directory" in text:
        return NotADirectoryError(errno.ENOTDIR, text, path)
    if isinstance(exc, FileNotFoundException):
        return FileNotFoundError(errno.ENOENT, text, path)
    if "is a directory" in text:
        return IsADirectoryError(errno.EISDIR, text, path)
    if "exists" in text:
        return FileExistsError(errno.EEXIST, text, path)
    if "read-only" in text:
        return OSError(errno.EROFS, text, path)
    if "symbolic links" in text:
        return OSError(errno.ELOOP, text, path)
    if isinstance(exc, NotEnoughSpaceException):
        return OSError(errno.ENOSPC, text, path)
    return exc


# -- code mode ----------------------------------------------------------------------------------
RUN_CODE = "run_code"
_RUN_CODE_SCHEMA = {"type": "object", "properties": {"code": {"type": "string", "description":
                    "Python source, run as a notebook cell"}}, "required": ["code"],
                    "additionalProperties": False}
_JSON_TYPES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool",
               "array": "list", "object": "dict", "null": "None"}
MAX_REPORT = 20_000  # characters of a cell's output handed back to the model


@dataclass
class DeclawWasmCodeMode(AbstractCapability[Any]):
    """Code mode on declaw-wasm: the agent's tools fold into one `run_code` tool whose Python
    (run as a cell of a stateful sandbox context) calls them as functions — in loops, with
    `asyncio.gather`, filtering what comes back — in one model turn. Each call is a host tool
    (`run_code(tools=)`): it runs here, through pydantic-ai's own validation and hooks (a
    nested `ToolManager`, as pydantic-ai-harness's `CodeMode` does on Monty), while the code
    runs in the sandbox with numpy, pandas and the rest.

        agent = Agent(model, tools=[search, fetch], capabilities=[DeclawWasmCodeMode()])

    `tools`: the names to fold in (default all function tools; the others stay native). The
    sandbox is the run's declaw-wasm workspace when there is one (`DeclawWasmWorkspace`: code
    and file tools then share files), else one of this capability's own, made on first use
    with `create_options` (`security`, `network`, `secrets`...) and killed by `destroy()`.
    A cell's error comes back as a retry (`ModelRetry`) with its traceback."""

    tools: Sequence[str] | None = None
    _: KW_ONLY
    code_timeout: float = 120
    create_options: Mapping[str, Any] | None = None
    id: str | None = "declaw_wasm_code_mode"

    def __post_init__(self) -> None:
        self._own: DeclawWasmWorkspaceBackend | None = None

    def get_wrapper_toolset(self, toolset: Any) -> Any:
        return _CodeModeToolset(toolset, self)

    async def sandbox(self, ctx: Any) -> AsyncSandbox:
        backend = getattr(getattr(ctx, "workspace", None), "backend", None)
        if isinstance(backend, DeclawWasmWorkspaceBackend):
            return await backend.sandbox()
        if self._own is None:
            self._own = DeclawWasmWorkspaceBackend(**dict(self.create_options or {}))
        return await self._own.sandbox()

    async def destroy(self) -> None:
        """Kill this capability's own sandbox, if it made one."""
        if self._own is not None:
            own, self._own = self._own, None
            await own.destroy()


@dataclass
class _CodeModeToolset(WrapperToolset[Any]):
    mode: DeclawWasmCodeMode

    @property
    def id(self) -> str | None:
        return self.mode.id

    def _folded(self, tools: Mapping[str, Any]) -> dict[str, Any]:
        wanted = None if self.mode.tools is None else set(self.mode.tools)
        return {name: tool for name, tool in tools.items()
                if tool.tool_def.kind == "function" and name.isidentifier() and name != RUN_CODE
                and (wanted is None or name in wanted)}

    async def get_tools(self, ctx: Any) -> dict[str, Any]:
        tools = await self.wrapped.get_tools(ctx)
        folded = self._folded(tools)
        if not folded:
            return tools
        run_code = ToolsetTool(
            toolset=self, tool_def=ToolDefinition(name=RUN_CODE, description=_catalog(folded),
                                                  parameters_json_schema=_RUN_CODE_SCHEMA),
            max_retries=max((t.max_retries for t in folded.values()), default=1),
            args_validator=_RUN_CODE_VALIDATOR)
        return {**{n: t for n, t in tools.items() if n not in folded}, RUN_CODE: run_code}

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: Any, tool: Any) -> Any:
        if name != RUN_CODE or tool.toolset is not self:
            return await self.wrapped.call_tool(name, tool_args, ctx, tool)
        folded = self._folded(await self.wrapped.get_tools(ctx))
        parent = ctx.tool_manager
        manager = ToolManager(toolset=self.wrapped, ctx=ctx, tools=folded,
                              root_capability=getattr(parent, "root_capability", None))
        host = {n: _dispatcher(manager, n, t.tool_def) for n, t in folded.items()}
        sbx = await self.mode.sandbox(ctx)
        bind = await sbx.run_code(f"from declaw_tools import {', '.join(host)}", tools=host)
        if bind.error is not None:
            raise ModelRetry(f"the sandbox could not bind the tools: {bind.error.value}")
        try:
            execution = await sbx.run_code(str(tool_args["code"]), timeout=self.mode.code_timeout,
                                           tools=host)
        except TimeoutException:
            raise ModelRetry(f"the code ran past {self.mode.code_timeout:g} s and was stopped "
                             "(the context's variables are gone)") from None
        return _report(execution)


def _dispatcher(manager: Any, name: str, tool_def: Any) -> Any:
    """The host tool for one folded tool: positional arguments are named in the schema's
    order, and the call goes through pydantic-ai's own validation, hooks and retries."""
    order = list((tool_def.parameters_json_schema or {}).get("properties", {}))

    async def call(*args: Any, **kwargs: Any) -> Any:
        if len(args) > len(order):
            raise TypeError(f"{name}() takes at most {len(order)} positional arguments")
        kwargs.update(zip(order, args, strict=False))
        result = await manager.handle_call(ToolCallPart(tool_name=name, args=kwargs),
                                           wrap_validation_errors=False)
        if isinstance(result, ToolDenied):
            raise PermissionError(f"{name}: {result.message}")
        if isinstance(result, ToolReturn):
            result = result.return_value
        return result

    call.__name__ = name
    call.__doc__ = tool_def.description
    return call


def _signature(name: str, tool_def: Any) -> str:
    schema = tool_def.parameters_json_schema or {}
    required = set(schema.get("required", []))
    params = []
    for param, spec in schema.get("properties", {}).items():
        kind = spec.get("type") if isinstance(spec, dict) else None
        hint = _JSON_TYPES.get(kind, "Any") if isinstance(kind, str) else "Any"
        params.append(f"{param}: {hint}" if param in required else
                      f"{param}: {hint} = {spec.get('default')!r}" if isinstance(spec, dict) else param)
    doc = (tool_def.description or "").strip().replace('"""', "'''")
    head = f"def {name}({', '.join(params)}):"
    return f'{head}\n    """{doc}"""' if doc else f"{head} ..."


def _catalog(tools: Mapping[str, Any]) -> str:
    listing = "\n\n".join(_signature(name, tool.tool_def) for name, tool in tools.items())
    return ("Run Python in a sandboxed notebook (numpy, pandas, matplotlib...; variables persist "
            "between calls). The functions below are already defined; call them with keyword "
            "arguments. In code without `await` a call returns its value (`x = search(query='...')`). "
            "In code that uses `await` (top-level `await` works), every call is a coroutine: "
            "`x = await search(query='...')`, and `await asyncio.gather(a(...), b(...))` runs "
            "calls at once. The value of the last expression and anything printed come back to "
            "you.\n\n" + listing)


def _report(execution: Any) -> str:
    if execution.error is not None:
        logs = "".join(execution.logs.stdout)[-MAX_REPORT // 2:]
        raise ModelRetry(f"{logs}\n{execution.error.name}: {execution.error.value}\n"
                         f"{execution.error.traceback}"[-MAX_REPORT:])
    parts = ["".join(execution.logs.stdout)]
    if execution.text is not None:
        parts.append(execution.text)
    return "\n".join(p for p in parts if p).strip()[:MAX_REPORT] or "(no output)"


__all__ = ["PROVIDER", "DeclawWasmCodeMode", "DeclawWasmWorkspace", "DeclawWasmWorkspaceBackend"]
