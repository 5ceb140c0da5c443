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
    from pydantic_ai.capabilities import AbstractCapability
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
    """

    def __init__(self, ref: WorkspaceRef | None = None, *, template: str | None = None,
                 timeout: float = 3600, envs: Mapping[str, str] | None = None,
                 metadata: Mapping[str, str] | None = None, working_dir: str = WORKING_DIR,
                 command_timeout: float = 3600) -> None:
        if ref is not None and ref.provider != PROVIDER:
            raise ValueError(f"not a {PROVIDER} workspace ref: {ref!r}")
        self._ref = ref
        self._template, self._timeout = template, timeout
        self._envs, self._metadata = dict(envs or {}), dict(metadata or {})
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
                            envs=self._envs or None, metadata=self._metadata or None)
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

    def get_workspace(self, ctx: Any, *, ref: WorkspaceRef | None) -> WorkspaceBackend | None:
        if ref is not None and ref.provider != PROVIDER:
            return None
        return DeclawWasmWorkspaceBackend(ref, template=self.template, timeout=self.timeout,
                                          envs=self.envs, working_dir=self.working_dir)


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


__all__ = ["PROVIDER", "DeclawWasmWorkspace", "DeclawWasmWorkspaceBackend"]
