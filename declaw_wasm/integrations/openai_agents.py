"""OpenAI Agents SDK sandbox backend: `DeclawWasmSandboxClient` for `agents.sandbox`.

    from agents import Runner
    from agents.run import RunConfig
    from agents.sandbox import SandboxAgent, SandboxRunConfig
    from declaw_wasm.integrations.openai_agents import (DeclawWasmSandboxClient,
                                                        DeclawWasmSandboxClientOptions)

    run_config = RunConfig(sandbox=SandboxRunConfig(
        client=DeclawWasmSandboxClient(), options=DeclawWasmSandboxClientOptions()))
    await Runner.run(SandboxAgent(name="dev", model=...), "…", run_config=run_config)

What the SDK gets, and how (all through declaw-wasm's public `AsyncSandbox`):
- `exec` (`_exec_internal`): argv → one command line (`sh -lc SCRIPT` is unwrapped to SCRIPT:
  our shell is already bash), run from the workspace root; a non-zero exit is an `ExecResult`,
  a timeout `ExecTimeoutError`, a sandbox failure `ExecTransportError`.
- files: `read`/`write`/`ls` (the SDK's own `FileEntry`, not ours: declaw's adapter returned its
  own type here, which broke skills loading and resume)/`mkdir(parents)`/`rm(recursive)`, all
  through the files API, so no shell output is parsed.
- PTY: `pty_exec_start`/`pty_write_stdin`/`pty_terminate_all`. With `tty=True` the command runs
  in a real sandbox PTY (an interactive `python3` is its REPL); otherwise as a background
  command with live stdin. Output collection and token truncation are the SDK's own helpers.
- `persist_workspace`/`hydrate_workspace`: a portable tar of the workspace (root-relative
  names; the SDK's skip paths left out), built and unpacked on the host, so a run can resume
  in a new sandbox, another process or another backend.
- The SDK's default manifest root, `/workspace`, is used when the sandbox can write it (it can
  since issue 16); a sandbox that cannot (a server older than that) gets
  `/home/user/workspace` instead, as the SDK's own UnixLocal backend relocates it. The
  manifest records the root actually used, so the agent's instructions name it.
- One sandbox user: `user=` arguments are accepted and ignored (as `sudo -u X --` is dropped).
"""

from __future__ import annotations

import asyncio
import io
import posixpath
import time
from collections import deque
from collections.abc import Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal, cast

import anyio
from pydantic import Field

from .. import (
    AsyncSandbox,
    CommandExitException,
    EntryInfo,
    FileNotFoundException,
    FileType,
    PtySize,
    SandboxException,
    TimeoutException,
    _args,
)
from ._common import (
    command_line,
    missing_extra,
    split_cd,
    tar_folder,
    untar_into,
    wait_or_kill,
)

if TYPE_CHECKING:
    from ..async_sandbox import AsyncCommandHandle  # a type only: not exported

try:
    from agents.sandbox.errors import (
        ExecNonZeroError,
        ExecTimeoutError,
        ExecTransportError,
        ExposedPortUnavailableError,
        WorkspaceArchiveReadError,
        WorkspaceArchiveWriteError,
        WorkspaceReadNotFoundError,
    )
    from agents.sandbox.files import EntryKind, FileEntry
    from agents.sandbox.manifest import Manifest
    from agents.sandbox.session.base_sandbox_session import BaseSandboxSession
    from agents.sandbox.session.pty_output import collect_pty_output
    from agents.sandbox.session.pty_types import (
        PTY_PROCESSES_MAX,
        PtyExecUpdate,
        allocate_pty_process_id,
        clamp_pty_yield_time_ms,
        process_id_to_prune_from_meta,
        resolve_pty_write_yield_time_ms,
    )
    from agents.sandbox.session.sandbox_client import (
        BaseSandboxClient,
        BaseSandboxClientOptions,
    )
    from agents.sandbox.session.sandbox_session import SandboxSession
    from agents.sandbox.session.sandbox_session_state import SandboxSessionState
    from agents.sandbox.snapshot import SnapshotBase, SnapshotSpec, resolve_snapshot
    from agents.sandbox.types import ExecResult, ExposedPortEndpoint, Permissions, User
except ImportError as exc:  # the framework is an optional extra
    raise missing_extra("openai-agents") from exc

BACKEND_ID = "declaw-wasm"
DEFAULT_ROOT = cast(str, Manifest.model_fields["root"].default)  # "/workspace"
FALLBACK_ROOT = "/home/user/workspace"
_ECHO_SLACK = 4096  # the prompt before the echoed launch line is far shorter than this


class DeclawWasmSandboxClientOptions(BaseSandboxClientOptions):
    """How to make the sandbox. `security`, `network`, `volumes` and `secrets` are handed to
    `AsyncSandbox.create` as given; the session's state keeps the first three (as declaw's
    JSON) so that a sandbox made again on resume has them too. Secret values never enter the
    state: a session resumed in another process gets them from the client
    (`DeclawWasmSandboxClient(secrets=...)`)."""

    type: Literal["declaw-wasm"] = "declaw-wasm"
    template: str | None = None
    timeout: float = 300
    envs: dict[str, str] | None = None
    metadata: dict[str, str] | None = None
    security: Any = None
    network: Any = None
    volumes: Any = None
    secrets: dict[str, Any] | None = Field(default=None, exclude=True)
    exposed_ports: tuple[int, ...] = ()  # ports of the sandbox `resolve_exposed_port` may resolve


class DeclawWasmSandboxSessionState(SandboxSessionState):
    """What a resume needs: the sandbox to reattach to, and how to make a new one if it is
    gone (the workspace then comes back from the snapshot)."""

    type: Literal["declaw-wasm"] = "declaw-wasm"
    sandbox_id: str | None = None
    template: str | None = None
    timeout: float = 300
    envs: dict[str, str] = Field(default_factory=dict)
    metadata: dict[str, str] = Field(default_factory=dict)
    security: dict[str, Any] | None = None  # declaw's JSON forms (`{"policy_json": ...}`, ...)
    network: dict[str, Any] | None = None
    volumes: list[dict[str, Any]] | None = None

    def create_options(self) -> dict[str, Any]:
        return {k: v for k, v in (("security", self.security), ("network", self.network),
                                  ("volumes", self.volumes)) if v is not None}


@dataclass
class _PtyProcess:
    tty: bool
    handle: AsyncCommandHandle | None = None
    chunks: deque[bytes] = field(default_factory=deque)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    notify: asyncio.Event = field(default_factory=asyncio.Event)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    last_used: float = field(default_factory=time.monotonic)
    exit_code: int | None = None
    # tty: the shell's prompt and its echo of our launch line come first; drop through this.
    skip_through: bytes | None = None
    pending: bytearray = field(default_factory=bytearray)
    waiter: asyncio.Task[None] | None = None

    def feed_text(self, text: str) -> None:
        self.feed(text.encode("utf-8"))

    def feed(self, data: bytes) -> None:
        if self.skip_through is not None:
            self.pending += data
            at = self.pending.find(self.skip_through)
            if at < 0 and len(self.pending) < len(self.skip_through) + _ECHO_SLACK:
                return
            # Found, or never going to be (then show everything rather than hold it back).
            data = bytes(self.pending[at + len(self.skip_through):] if at >= 0 else self.pending)
            self.skip_through, self.pending = None, bytearray()
        if data:
            self.chunks.append(data)
            self.notify.set()


class DeclawWasmSandboxSession(BaseSandboxSession):
    """A `BaseSandboxSession` over one declaw-wasm sandbox."""

    state: DeclawWasmSandboxSessionState

    def __init__(self, *, state: DeclawWasmSandboxSessionState,
                 sandbox: AsyncSandbox | None = None, secrets: dict[str, Any] | None = None) -> None:
        self.state = state
        self._sandbox = sandbox
        self.secrets = secrets  # for a sandbox made again (never in the state)
        self._root_ready = False
        self._pty: dict[int, _PtyProcess] = {}
        self._pty_lock = asyncio.Lock()

    @property
    def sandbox(self) -> AsyncSandbox:
        """The declaw-wasm sandbox (after `start()`)."""
        if self._sandbox is None:
            raise ExecTransportError(command=("sandbox",), message="the session has not started")
        return self._sandbox

    # -- lifecycle ---------------------------------------------------------------------------

    async def _ensure_backend_started(self) -> None:
        if self._sandbox is not None and await self._sandbox.is_running():
            return
        preserved = False
        if self.state.sandbox_id is not None:
            try:
                self._sandbox = await AsyncSandbox.connect(self.state.sandbox_id)
                preserved = await self._sandbox.is_running()
            except SandboxException:
                self._sandbox = None
        if not preserved:
            extra = self.state.create_options()
            if self.secrets:
                extra["secrets"] = self.secrets
            self._sandbox = await _create_sandbox(self.state.template, self.state.timeout,
                                                  self.state.envs, self.state.metadata,
                                                  self.state.manifest, extra)
            self.state.sandbox_id = self._sandbox.sandbox_id
        self._set_start_state_preserved(preserved)

    async def _shutdown_backend(self) -> None:
        if self._sandbox is not None:
            await self._sandbox.kill()

    async def running(self) -> bool:
        return self._sandbox is not None and await self._sandbox.is_running()

    async def _resolve_exposed_port(self, port: int) -> ExposedPortEndpoint:
        """Where a server on the sandbox's `port` is reached: `get_host(port)` (in-process a
        loopback listener, through `serve` its preview name; docs/inbound.md), as host and port."""
        try:
            host = self.sandbox.get_host(port)
            name, _, number = host.rpartition(":")
            endpoint = ExposedPortEndpoint(host=name, port=int(number), tls=False)
        except (SandboxException, ValueError) as exc:
            raise ExposedPortUnavailableError(port=port, exposed_ports=self.state.exposed_ports,
                                              reason="backend_unavailable",
                                              context={"backend": BACKEND_ID, "detail": str(exc)},
                                              cause=exc) from exc
        return endpoint

    def supports_pty(self) -> bool:
        return True

    # -- exec --------------------------------------------------------------------------------

    async def _cwd(self) -> str | None:
        root = self.state.manifest.root
        if not self._root_ready:
            self._root_ready = await self.sandbox.files.exists(root)
        return root if self._root_ready else None

    async def _exec_internal(self, *command: str | Path, timeout: float | None = None) -> ExecResult:
        argv = [str(c) for c in command]
        try:
            handle = await self.sandbox.commands.run(command_line(argv), background=True,
                                                     cwd=await self._cwd(), timeout=timeout or 0)
            result = await wait_or_kill(handle)
        except TimeoutException as exc:
            raise ExecTimeoutError(command=argv, timeout_s=timeout, cause=exc) from exc
        except (SandboxException, ValueError) as exc:
            raise ExecTransportError(command=argv, cause=exc) from exc
        if result.exit_code == 137 and not await self.running():
            raise ExecTransportError(command=argv, message="the sandbox ended during the command")
        return ExecResult(stdout=result.stdout.encode("utf-8"),
                          stderr=result.stderr.encode("utf-8"), exit_code=result.exit_code)

    # -- files -------------------------------------------------------------------------------

    async def read(self, path: Path, *, user: str | User | None = None) -> io.IOBase:
        target = self.normalize_path(path)
        try:
            data = await self.sandbox.files.read(str(target), format="bytes")
        except FileNotFoundException as exc:
            raise WorkspaceReadNotFoundError(path=Path(path), cause=exc) from exc
        except SandboxException as exc:
            raise WorkspaceArchiveReadError(path=Path(path), cause=exc) from exc
        return io.BytesIO(bytes(data))

    async def _read_bounded(self, path: Path, *, max_bytes: int) -> bytes:
        """At most `max_bytes` of a file, streamed: no more is read from the sandbox."""
        target = self.normalize_path(path)
        out = bytearray()
        try:
            stream = await self.sandbox.files.read(str(target), format="stream")
            async with aclosing(stream):
                async for chunk in stream:
                    out += chunk[: max_bytes - len(out)]
                    if len(out) >= max_bytes:
                        break
        except FileNotFoundException as exc:
            raise WorkspaceReadNotFoundError(path=Path(path), cause=exc) from exc
        return bytes(out)

    async def write(self, path: Path, data: io.IOBase, *, user: str | User | None = None) -> None:
        target = self.normalize_path(path, for_write=True)
        try:
            await self.sandbox.files.write(str(target), cast(IO[bytes], data))
        except SandboxException as exc:
            raise WorkspaceArchiveWriteError(path=target, cause=exc) from exc

    async def ls(self, path: Path | str, *, user: str | User | None = None) -> list[FileEntry]:
        target = self.normalize_path(path)
        try:
            entries = await self.sandbox.files.list(str(target))
        except SandboxException as exc:
            raise ExecNonZeroError(ExecResult(stdout=b"", stderr=str(exc).encode(), exit_code=2),
                                   command=("ls", "-la", "--", str(target)), cause=exc) from exc
        return [_file_entry(e) for e in entries]

    async def mkdir(self, path: Path | str, *, parents: bool = False,
                    user: str | User | None = None) -> None:
        target = self.normalize_path(path, for_write=True)
        files = self.sandbox.files
        try:
            if not parents and not await files.exists(posixpath.dirname(str(target))):
                raise FileNotFoundError(f"{target.parent}: no such directory")
            if await files.exists(str(target)):
                if (await files.get_info(str(target))).type != FileType.DIR:
                    raise FileExistsError(f"{target} exists and is not a directory")
                return
            await files.make_dir(str(target))
        except (SandboxException, OSError) as exc:
            raise WorkspaceArchiveWriteError(path=target, cause=exc) from exc

    async def rm(self, path: Path | str, *, recursive: bool = False,
                 user: str | User | None = None) -> None:
        target = self.normalize_path(path, for_write=True)
        files = self.sandbox.files
        try:
            if not await files.exists(str(target)):
                if recursive:
                    return
                raise ExecNonZeroError(
                    ExecResult(stdout=b"", stderr=f"rm: {target}: No such file".encode(),
                               exit_code=1), command=("rm", "--", str(target)))
            info = await files.get_info(str(target))
            if info.type == FileType.DIR and not info.symlink_target and not recursive:
                raise ExecNonZeroError(
                    ExecResult(stdout=b"", stderr=f"rm: {target}: Is a directory".encode(),
                               exit_code=1), command=("rm", "--", str(target)))
            await files.remove(str(target))
        except SandboxException as exc:
            raise WorkspaceArchiveWriteError(path=target, cause=exc) from exc

    # -- workspace archive -------------------------------------------------------------------

    async def persist_workspace(self) -> io.IOBase:
        skip = {p.as_posix() for p in self._persist_workspace_skip_relpaths()}
        try:
            return cast(io.IOBase, await tar_folder(self.sandbox, self.state.manifest.root, skip))
        except SandboxException as exc:
            raise WorkspaceArchiveReadError(path=Path(self.state.manifest.root), cause=exc) from exc

    async def hydrate_workspace(self, data: io.IOBase) -> None:
        root = self.state.manifest.root
        try:
            await untar_into(self.sandbox, root, cast(IO[bytes], data))
        except (SandboxException, ValueError, OSError) as exc:
            raise WorkspaceArchiveWriteError(path=Path(root), cause=exc) from exc
        self._root_ready = True

    # -- PTY ---------------------------------------------------------------------------------

    async def pty_exec_start(self, *command: str | Path, timeout: float | None = None,
                             shell: bool | list[str] = True, user: str | User | None = None,
                             tty: bool = False, yield_time_s: float | None = None,
                             max_output_tokens: int | None = None) -> PtyExecUpdate:
        line = command_line(self._prepare_exec_command(*command, shell=shell, user=None))
        cwd = await self._cwd()
        launch = ""
        if tty:
            # Typed into the PTY's shell, so an interactive program gets the terminal (and
            # streams), and `exit $?` ends the PTY with its status. The Agents SDK's
            # `cd DIR || exit` prefix becomes the PTY's cwd; a script still spanning lines
            # runs from a file (its output then arrives when it ends).
            where, body = split_cd(line)
            cwd, body = where or cwd, body.strip()
            if "\n" in body:
                script = f"/tmp/.declaw-pty-{time.monotonic_ns()}.sh"
                await self.sandbox.files.write(script, body + "\n")
                body = f"sh {script}"
            launch = f"{body}; exit $?"
        entry = _PtyProcess(tty=tty, skip_through=(launch + "\r\n").encode() if tty else None)
        try:
            if tty:
                entry.handle = await self.sandbox.pty.create(
                    PtySize(24, 120), on_data=entry.feed, cwd=cwd, timeout=timeout or 0)
                await self.sandbox.pty.send_stdin(entry.handle.pid, (launch + "\n").encode())
            else:
                entry.handle = await self.sandbox.commands.run(
                    line, background=True, stdin=True, cwd=cwd, timeout=timeout or 0,
                    on_stdout=entry.feed_text, on_stderr=entry.feed_text)
        except (SandboxException, ValueError) as exc:
            raise ExecTransportError(command=[line], cause=exc) from exc
        entry.waiter = asyncio.ensure_future(self._watch(entry))
        async with self._pty_lock:
            process_id = allocate_pty_process_id(set(self._pty))
            pruned = self._prune()
            self._pty[process_id] = entry
        if pruned is not None:
            await self._terminate(pruned)
        wait_ms = 10_000 if yield_time_s is None else int(yield_time_s * 1000)
        return await self._update(process_id, entry, clamp_pty_yield_time_ms(wait_ms),
                                  max_output_tokens)

    async def pty_write_stdin(self, *, session_id: int, chars: str,
                              yield_time_s: float | None = None,
                              max_output_tokens: int | None = None) -> PtyExecUpdate:
        async with self._pty_lock:
            entry = self._resolve_pty_session_entry(pty_processes=self._pty, session_id=session_id)
        if chars and not entry.closed.is_set():
            assert entry.handle is not None
            try:
                if entry.tty:
                    await self.sandbox.pty.send_stdin(entry.handle.pid, chars.encode("utf-8"))
                else:
                    await entry.handle.send_stdin(chars)
            except SandboxException:
                pass  # it ended meanwhile; the update below says so
            await asyncio.sleep(0.1)
        wait_ms = 250 if yield_time_s is None else int(yield_time_s * 1000)
        entry.last_used = time.monotonic()
        return await self._update(
            session_id, entry,
            resolve_pty_write_yield_time_ms(yield_time_ms=wait_ms, input_empty=chars == ""),
            max_output_tokens)

    async def pty_terminate_all(self) -> None:
        async with self._pty_lock:
            entries = list(self._pty.values())
            self._pty.clear()
        for entry in entries:
            await self._terminate(entry)

    async def _watch(self, entry: _PtyProcess) -> None:
        assert entry.handle is not None
        try:
            result = await entry.handle.wait()
            entry.exit_code = result.exit_code
        except CommandExitException as exc:  # a non-zero exit
            entry.exit_code = exc.exit_code
        except SandboxException:
            entry.exit_code = entry.handle.exit_code if entry.handle.exit_code is not None else 1
        finally:
            if entry.skip_through is not None:  # never saw the echo: keep what there was
                entry.skip_through = None
                if entry.pending:
                    entry.chunks.append(bytes(entry.pending))
            entry.closed.set()
            entry.notify.set()

    async def _update(self, process_id: int, entry: _PtyProcess, yield_time_ms: int,
                      max_output_tokens: int | None) -> PtyExecUpdate:
        output, original, closed = await collect_pty_output(
            output_chunks=entry.chunks, output_lock=entry.lock, output_notify=entry.notify,
            is_done=entry.closed.is_set, yield_time_ms=yield_time_ms,
            max_output_tokens=max_output_tokens)
        live: int | None = process_id
        exit_code = entry.exit_code if closed else None
        if exit_code is not None:
            async with self._pty_lock:
                self._pty.pop(process_id, None)
            live = None
        return PtyExecUpdate(process_id=live, output=output, exit_code=exit_code,
                             original_token_count=original)

    def _prune(self) -> _PtyProcess | None:
        if len(self._pty) < PTY_PROCESSES_MAX:
            return None
        meta = [(pid, e.last_used, e.closed.is_set()) for pid, e in self._pty.items()]
        victim = process_id_to_prune_from_meta(meta)
        return self._pty.pop(victim, None) if victim is not None else None

    async def _terminate(self, entry: _PtyProcess) -> None:
        with anyio.CancelScope(shield=True):
            if not entry.closed.is_set() and entry.handle is not None:
                try:
                    await entry.handle.kill()
                except SandboxException:
                    pass
            if entry.waiter is not None:
                await asyncio.gather(entry.waiter, return_exceptions=True)


class DeclawWasmSandboxClient(BaseSandboxClient[DeclawWasmSandboxClientOptions]):
    """Creates, resumes and deletes declaw-wasm sandbox sessions for the Agents SDK."""

    backend_id = BACKEND_ID
    supports_default_options = True

    def __init__(self, *args: Any, secrets: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """`secrets`: secret values (declaw-wasm `Secret`s) for sandboxes this client makes again
        when it resumes a session whose sandbox is gone (they never enter the state)."""
        super().__init__(*args, **kwargs)
        self.secrets = secrets

    async def create(self, *, snapshot: SnapshotSpec | SnapshotBase | None = None,
                     manifest: Manifest | None = None,
                     options: DeclawWasmSandboxClientOptions | None = None) -> SandboxSession:
        options = options or DeclawWasmSandboxClientOptions()
        manifest = self._validate_manifest_for_create(manifest or Manifest())
        saved = {"security": _args.security(options.security),
                 "network": _args.config(options.network, "network"),
                 "volumes": _args.volumes(options.volumes)}
        secrets = options.secrets or self.secrets
        extra = {k: v for k, v in (("security", options.security), ("network", options.network),
                                   ("volumes", options.volumes), ("secrets", secrets)) if v is not None}
        sandbox = await _create_sandbox(options.template, options.timeout, options.envs or {},
                                        options.metadata or {}, manifest, extra)
        if manifest.root == DEFAULT_ROOT and not await _writable(sandbox, DEFAULT_ROOT):
            manifest = manifest.model_copy(update={"root": FALLBACK_ROOT}, deep=True)
        import uuid

        session_id = uuid.uuid4()
        state = DeclawWasmSandboxSessionState(
            session_id=session_id, manifest=manifest,
            snapshot=resolve_snapshot(snapshot, str(session_id)),
            sandbox_id=sandbox.sandbox_id, template=options.template, timeout=options.timeout,
            envs=dict(options.envs or {}), metadata=dict(options.metadata or {}),
            exposed_ports=options.exposed_ports, **saved)
        return self._wrap_session(DeclawWasmSandboxSession(state=state, sandbox=sandbox, secrets=secrets))

    async def delete(self, session: SandboxSession) -> SandboxSession:
        inner = session._inner
        if not isinstance(inner, DeclawWasmSandboxSession):
            raise TypeError("DeclawWasmSandboxClient.delete expects a declaw-wasm session")
        try:
            if inner._sandbox is not None:
                await inner._sandbox.kill()
            elif inner.state.sandbox_id is not None:
                await (await AsyncSandbox.connect(inner.state.sandbox_id)).kill()
        except SandboxException:
            pass  # already gone
        return session

    async def resume(self, state: SandboxSessionState) -> SandboxSession:
        if not isinstance(state, DeclawWasmSandboxSessionState):
            raise TypeError("DeclawWasmSandboxClient.resume expects a declaw-wasm session state")
        state.assert_path_grants_rebound()
        return self._wrap_session(DeclawWasmSandboxSession(state=state, secrets=self.secrets))

    def deserialize_session_state(self, payload: dict[str, object]) -> SandboxSessionState:
        return self._deserialize_session_state_payload(payload, DeclawWasmSandboxSessionState)


async def _create_sandbox(template: str | None, timeout: float, envs: dict[str, str],
                          metadata: dict[str, str], manifest: Manifest,
                          extra: dict[str, Any]) -> AsyncSandbox:
    """The manifest's environment joins the sandbox's (the manifest wins on a clash)."""
    all_envs = {**envs, **(await manifest.environment.resolve())}
    return await AsyncSandbox.create(template=template, timeout=timeout, metadata=metadata or None,
                                     envs=all_envs or None, **extra)


async def _writable(sbx: AsyncSandbox, path: str) -> bool:
    try:
        await sbx.files.make_dir(path)
        return True
    except SandboxException:
        return False


def _file_entry(entry: EntryInfo) -> FileEntry:
    if entry.symlink_target:
        kind = EntryKind.SYMLINK
    elif entry.type == FileType.DIR:
        kind = EntryKind.DIRECTORY
    elif entry.type == FileType.FILE:
        kind = EntryKind.FILE
    else:
        kind = EntryKind.OTHER
    permissions = Permissions.from_mode(entry.mode)
    if kind == EntryKind.DIRECTORY:
        permissions = permissions.model_copy(update={"directory": True})
    return FileEntry(path=entry.path, permissions=permissions, owner=entry.owner,
                     group=entry.group, size=entry.size, kind=kind)


__all__: Sequence[str] = ["DeclawWasmSandboxClient", "DeclawWasmSandboxClientOptions",
                          "DeclawWasmSandboxSession", "DeclawWasmSandboxSessionState"]
