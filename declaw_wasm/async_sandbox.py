"""`AsyncSandbox`: the async twin of `Sandbox`, over the same faces.

Guest work already runs on guest threads, and remote calls are blocking HTTP; the async face
only waits for them in a worker thread (_threads.py), so the caller's event loop never blocks.
Each method forwards every parameter of its sync twin (tests/test_twins.py compares the
signatures). Output callbacks may be coroutine functions.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Awaitable, Callable, List, Literal, Optional, Union, overload

import asyncio
from datetime import datetime
from typing import Dict

from . import _args
from ._backend import WriteData
from ._threads import from_loop, in_thread, loop_token
from .commands import DEFAULT_TIMEOUT as COMMAND_TIMEOUT
from .commands import CommandHandle, Commands, StdinArg
from .exceptions import CommandExitException
from .execution import Context, Execution
from .files import FileStream, Filesystem, WatchHandle
from .limits import Limits
from .models import (CommandResult, EntryInfo, FilesystemEvent, ProcessInfo, PtySize, SandboxInfo,
                     SandboxMetrics, SandboxQuery, Snapshot, SnapshotInfo, WriteInfo)
from .pty import DEFAULT_SIZE as PTY_SIZE
from .pty import DEFAULT_TIMEOUT as PTY_TIMEOUT
from .pty import Pty
from .sandbox import (RUN_CODE_TIMEOUT, Sandbox, backend_for, create_request, instance_or_class,
                      instance_or_id, template_or_snapshot, tool_spec)
from .stdio import Stdio, StdioProcess, StdioResult

OutputHandler = Union[Callable[[str], None], Callable[[str], Awaitable[None]]]
DataHandler = Union[Callable[[bytes], None], Callable[[bytes], Awaitable[None]]]


class AsyncFilesystem:
    def __init__(self, sync: Filesystem) -> None:
        self._sync = sync

    @overload
    async def read(self, path: str, format: Literal["text"] = "text", user: Optional[str] = None,
                   request_timeout: Optional[float] = None, gzip: bool = False,
                   stream_idle_timeout: Optional[float] = None) -> str: ...
    @overload
    async def read(self, path: str, format: Literal["bytes"], user: Optional[str] = None,
                   request_timeout: Optional[float] = None, gzip: bool = False,
                   stream_idle_timeout: Optional[float] = None) -> bytearray: ...
    @overload
    async def read(self, path: str, format: Literal["stream"], user: Optional[str] = None,
                   request_timeout: Optional[float] = None, gzip: bool = False,
                   stream_idle_timeout: Optional[float] = None) -> "AsyncFileStream": ...

    async def read(self, path: str, format: str = "text", user: Optional[str] = None,
                   request_timeout: Optional[float] = None, gzip: bool = False,
                   stream_idle_timeout: Optional[float] = None) -> Any:
        result = await in_thread(self._sync.read, path, format, user, request_timeout, gzip,
                                 stream_idle_timeout)
        return AsyncFileStream(result) if isinstance(result, FileStream) else result

    async def write(self, path: str, data: WriteData, user: Optional[str] = None,
                    request_timeout: Optional[float] = None, gzip: bool = False,
                    use_octet_stream: Optional[bool] = None,
                    metadata: Optional[dict[str, str]] = None) -> WriteInfo:
        return await in_thread(self._sync.write, path, data, user, request_timeout, gzip,
                               use_octet_stream, metadata)

    async def write_files(self, files: List[Any], user: Optional[str] = None,
                          request_timeout: Optional[float] = None, gzip: bool = False,
                          use_octet_stream: Optional[bool] = None,
                          metadata: Optional[dict[str, str]] = None) -> List[WriteInfo]:
        return await in_thread(self._sync.write_files, files, user, request_timeout, gzip,
                               use_octet_stream, metadata)

    async def watch_dir(self, path: str, on_event: Callable[[FilesystemEvent], Any],
                        on_exit: Optional[Callable[[Optional[Exception]], Any]] = None,
                        user: Optional[str] = None, request_timeout: Optional[float] = None,
                        timeout: Optional[float] = 60, recursive: bool = False,
                        include_entry: bool = False, allow_network_mounts: bool = False) -> "AsyncWatchHandle":
        """E2B's async watch: `on_event` (sync or async) gets each event as it comes, for
        `timeout` seconds (0 or None: until `stop()`); `on_exit` gets the error that ended the
        watch, or None."""
        handle = await in_thread(self._sync.watch_dir, path, user, request_timeout, recursive,
                                 include_entry, allow_network_mounts)
        return AsyncWatchHandle(handle, on_event, on_exit, timeout)

    async def list(self, path: str, depth: Optional[int] = 1, user: Optional[str] = None,
                   request_timeout: Optional[float] = None) -> List[EntryInfo]:
        return await in_thread(self._sync.list, path, depth, user, request_timeout)

    async def exists(self, path: str, user: Optional[str] = None,
                     request_timeout: Optional[float] = None) -> bool:
        return await in_thread(self._sync.exists, path, user, request_timeout)

    async def get_info(self, path: str, user: Optional[str] = None,
                       request_timeout: Optional[float] = None) -> EntryInfo:
        return await in_thread(self._sync.get_info, path, user, request_timeout)

    async def remove(self, path: str, user: Optional[str] = None,
                     request_timeout: Optional[float] = None) -> None:
        await in_thread(self._sync.remove, path, user, request_timeout)

    async def rename(self, old_path: str, new_path: str, user: Optional[str] = None,
                     request_timeout: Optional[float] = None) -> EntryInfo:
        return await in_thread(self._sync.rename, old_path, new_path, user, request_timeout)

    async def make_dir(self, path: str, user: Optional[str] = None,
                       request_timeout: Optional[float] = None) -> bool:
        return await in_thread(self._sync.make_dir, path, user, request_timeout)


class AsyncFileStream:
    """A file's bytes for async code (E2B's async reader): `async for chunk in stream`, and
    `async with` (or `await stream.aclose()`) to let go early."""

    def __init__(self, stream: FileStream) -> None:
        self._stream = stream

    def __aiter__(self) -> "AsyncFileStream":
        return self

    async def __anext__(self) -> bytes:
        chunk = await in_thread(next, self._stream, None)
        if chunk is None:
            await self.aclose()
            raise StopAsyncIteration
        return chunk

    async def aclose(self) -> None:
        await in_thread(self._stream.close)

    async def __aenter__(self) -> "AsyncFileStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class AsyncWatchHandle:
    """A watch for async code (E2B's `AsyncWatchHandle`): events go to `on_event` as they come
    (polled every 50 ms in a task); `await stop()` ends it."""

    POLL = 0.05

    def __init__(self, handle: WatchHandle, on_event: Callable[[FilesystemEvent], Any],
                 on_exit: Optional[Callable[[Optional[Exception]], Any]], timeout: Optional[float]) -> None:
        self._handle = handle
        self._on_event = on_event
        self._on_exit = on_exit
        self._timeout = timeout or None
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = None if self._timeout is None else loop.time() + self._timeout
        error: Optional[Exception] = None
        try:
            while deadline is None or loop.time() < deadline:
                for event in await in_thread(self._handle.get_new_events):
                    outcome = self._on_event(event)
                    if asyncio.iscoroutine(outcome):
                        await outcome
                await asyncio.sleep(self.POLL)
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # the watch ended by an error: told to on_exit
            error = exc
        finally:
            await in_thread(self._handle.stop)
            if self._on_exit is not None:
                outcome = self._on_exit(error)
                if asyncio.iscoroutine(outcome):
                    await outcome

    async def stop(self) -> None:
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass


class _LazyHandle:
    """A `CommandHandle` reached on first use (declaw's `connect_command` is a plain method and
    must not block the event loop)."""

    def __init__(self, connect: Callable[[], CommandHandle], pid: int) -> None:
        self._connect = connect
        self._handle: Optional[CommandHandle] = None
        self.pid = pid

    def __getattr__(self, name: str) -> Any:
        if self._handle is None:
            self._handle = self._connect()
        return getattr(self._handle, name)


class AsyncCommandHandle:
    """A running command for async code (E2B's `AsyncCommandHandle`): output so far in `stdout`
    and `stderr`, `exit_code`/`error` once it has ended; callbacks were bound at creation."""

    def __init__(self, handle: CommandHandle) -> None:
        self._handle = handle
        self._result: Optional[CommandResult] = None

    @property
    def pid(self) -> int:
        return self._handle.pid

    @property
    def stdout(self) -> str:
        return self._handle._process.text("stdout")

    @property
    def stderr(self) -> str:
        return self._handle._process.text("stderr")

    @property
    def exit_code(self) -> Optional[int]:
        return self._result.exit_code if self._result is not None else None

    @property
    def error(self) -> Optional[str]:
        return self._result.error if self._result is not None else None

    async def wait(self, on_pty: Optional[DataHandler] = None, on_stdout: Optional[OutputHandler] = None,
                   on_stderr: Optional[OutputHandler] = None) -> CommandResult:
        """As `CommandHandle.wait`: a non-zero exit raises `CommandExitException`."""
        try:
            self._result = await in_thread(self._handle.wait, from_loop(on_pty), from_loop(on_stdout),
                                           from_loop(on_stderr))
        except CommandExitException as exc:
            self._result = CommandResult(stdout=exc.stdout, stderr=exc.stderr, exit_code=exc.exit_code,
                                         error=exc.error)
            raise
        return self._result

    async def _wait_result(self) -> CommandResult:
        self._result = await in_thread(self._handle._wait_result)
        return self._result

    async def kill(self) -> bool:
        return await in_thread(self._handle.kill)

    async def send_stdin(self, data: Union[str, bytes], request_timeout: Optional[float] = None) -> None:
        await in_thread(self._handle.send_stdin, data, request_timeout)

    async def close_stdin(self, request_timeout: Optional[float] = None) -> None:
        await in_thread(self._handle.close_stdin, request_timeout)

    async def disconnect(self) -> None:
        self._handle.disconnect()

    def __aiter__(self) -> AsyncIterator[tuple[Optional[str], Optional[str], Optional[bytes]]]:
        return _aiter_handle(self._handle)


async def _aiter_handle(handle: CommandHandle) -> AsyncIterator[tuple[Optional[str], Optional[str], Optional[bytes]]]:
    items = iter(handle)
    while True:
        item = await in_thread(next, items, None)
        if item is None:
            return
        yield item


class AsyncCommands:
    def __init__(self, sync: Commands) -> None:
        self._sync = sync

    async def run(self, cmd: str, background: bool = False, envs: Optional[dict[str, str]] = None,
                  user: Optional[str] = None, cwd: Optional[str] = None,
                  on_stdout: Optional[OutputHandler] = None,
                  on_stderr: Optional[OutputHandler] = None, stdin: StdinArg = None,
                  timeout: Optional[float] = COMMAND_TIMEOUT, request_timeout: Optional[float] = None,
                  tag: Optional[str] = None) -> Any:
        """`CommandResult`, or with `background=True` an `AsyncCommandHandle`."""
        handle = await in_thread(self._sync.run, cmd, True, envs, user, cwd, from_loop(on_stdout),
                                 from_loop(on_stderr), stdin, timeout, request_timeout, tag)
        async_handle = AsyncCommandHandle(handle)
        return async_handle if background else await async_handle._wait_result()

    async def run_stream(self, cmd: str, on_stdout: Optional[OutputHandler] = None,
                         on_stderr: Optional[OutputHandler] = None, envs: Optional[dict[str, str]] = None,
                         user: Optional[str] = None, cwd: Optional[str] = None,
                         timeout: Optional[float] = COMMAND_TIMEOUT) -> CommandResult:
        return await in_thread(self._sync.run_stream, cmd, from_loop(on_stdout), from_loop(on_stderr),
                               envs, user, cwd, timeout)

    async def list(self, request_timeout: Optional[float] = None) -> List[ProcessInfo]:
        return await in_thread(self._sync.list, request_timeout)

    async def kill(self, pid: int, request_timeout: Optional[float] = None) -> bool:
        return await in_thread(self._sync.kill, pid, request_timeout)

    async def send_stdin(self, pid: int, data: Union[str, bytes],
                         request_timeout: Optional[float] = None) -> None:
        await in_thread(self._sync.send_stdin, pid, data, request_timeout)

    async def close_stdin(self, pid: int, request_timeout: Optional[float] = None) -> None:
        await in_thread(self._sync.close_stdin, pid, request_timeout)

    async def connect(self, pid: int, timeout: Optional[float] = COMMAND_TIMEOUT,
                      request_timeout: Optional[float] = None,
                      on_stdout: Optional[OutputHandler] = None,
                      on_stderr: Optional[OutputHandler] = None) -> AsyncCommandHandle:
        handle = await in_thread(self._sync.connect, pid, timeout, request_timeout)
        handle._process.set_callbacks(stdout=from_loop(on_stdout), stderr=from_loop(on_stderr))
        return AsyncCommandHandle(handle)


class AsyncPty:
    def __init__(self, sync: Pty) -> None:
        self._sync = sync

    async def create(self, size: PtySize = PTY_SIZE, on_data: Optional[DataHandler] = None,
                     user: Optional[str] = None, cwd: Optional[str] = None,
                     envs: Optional[dict[str, str]] = None, timeout: Optional[float] = PTY_TIMEOUT,
                     request_timeout: Optional[float] = None) -> AsyncCommandHandle:
        """E2B's async order: `on_data` second (the sync twin takes it last)."""
        handle = await in_thread(self._sync.create, size, user, cwd, envs, timeout, request_timeout,
                                 from_loop(on_data))
        return AsyncCommandHandle(handle)

    async def send_stdin(self, pid: int, data: bytes, request_timeout: Optional[float] = None) -> None:
        await in_thread(self._sync.send_stdin, pid, data, request_timeout)

    async def resize(self, pid: int, size: PtySize, request_timeout: Optional[float] = None) -> None:
        await in_thread(self._sync.resize, pid, size, request_timeout)

    async def kill(self, pid: int, request_timeout: Optional[float] = None) -> bool:
        return await in_thread(self._sync.kill, pid, request_timeout)

    async def connect(self, pid: int, timeout: Optional[float] = PTY_TIMEOUT,
                      request_timeout: Optional[float] = None,
                      on_data: Optional[DataHandler] = None) -> AsyncCommandHandle:
        handle = await in_thread(self._sync.connect, pid, timeout, request_timeout)
        handle._process.set_callbacks(pty=from_loop(on_data))
        return AsyncCommandHandle(handle)


class AsyncStdioProcess:
    """declaw's async stdio process."""

    def __init__(self, sync: StdioProcess) -> None:
        self._sync = sync

    @property
    def cmd_id(self) -> str:
        return self._sync.cmd_id

    @property
    def exit_code(self) -> Optional[int]:
        return self._sync.exit_code

    async def send_stdin(self, data: Union[bytes, str], request_timeout: Optional[float] = None) -> None:
        await in_thread(self._sync.send_stdin, data, request_timeout)

    async def close_stdin(self, request_timeout: Optional[float] = None) -> None:
        await in_thread(self._sync.close_stdin, request_timeout)

    async def kill(self, request_timeout: Optional[float] = None) -> bool:
        return await in_thread(self._sync.kill, request_timeout)

    async def stream(self, on_stdout: Optional[DataHandler] = None,
                     on_stderr: Optional[DataHandler] = None) -> StdioResult:
        return await in_thread(self._sync.stream, from_loop(on_stdout), from_loop(on_stderr))

    async def wait(self, timeout: Optional[float] = None) -> StdioResult:
        return await in_thread(self._sync.wait, timeout)

    def __aiter__(self) -> AsyncIterator[tuple[str, bytes]]:
        return _aiter_items(iter(self._sync))


async def _aiter_items(items: Any) -> AsyncIterator[Any]:
    while True:
        item = await in_thread(next, items, None)
        if item is None:
            return
        yield item


class AsyncStdio:
    def __init__(self, sync: Stdio) -> None:
        self._sync = sync

    async def start(self, cmd: str, envs: Optional[dict[str, str]] = None, user: Optional[str] = None,
                    cwd: Optional[str] = None, on_stdout: Optional[DataHandler] = None,
                    on_stderr: Optional[DataHandler] = None,
                    request_timeout: Optional[float] = None) -> AsyncStdioProcess:
        return AsyncStdioProcess(await in_thread(self._sync.start, cmd, envs, user, cwd, from_loop(on_stdout),
                                                 from_loop(on_stderr), request_timeout))


class AsyncSandboxPaginator:
    """`AsyncSandbox.list(...)`: E2B's async paginator (`has_next`, `await next_items()`), and,
    awaited, declaw's answer (`(await AsyncSandbox.list())["sandboxes"]`)."""

    def __init__(self, fetch: Callable[[], Any]) -> None:
        self._fetch = fetch  # a SandboxPaginator, or a SnapshotPaginator (list_snapshots)
        self._sync: Optional[Any] = None

    async def _pages(self) -> Any:
        if self._sync is None:
            self._sync = await in_thread(self._fetch)
        return self._sync

    @property
    def has_next(self) -> bool:
        return self._sync is None or self._sync.has_next

    @property
    def next_token(self) -> Optional[str]:
        return None if self._sync is None else self._sync.next_token

    async def next_items(self, **e2b_params: Any) -> List[Any]:
        found: List[Any] = (await self._pages()).next_items()
        return found

    def __await__(self) -> Any:
        return self._pages().__await__()

    def __aiter__(self) -> AsyncIterator[SandboxInfo]:
        return self._items()

    async def _items(self) -> AsyncIterator[SandboxInfo]:
        while self.has_next:
            for item in await self.next_items():
                yield item


class _async_instance_or_id(instance_or_id):
    """`instance_or_id` for coroutine methods: `await AsyncSandbox.kill(sandbox_id)` as well as
    `await sbx.kill()`."""

    def __get__(self, obj: Any, cls: type) -> Callable[..., Any]:
        if obj is not None:
            return super().__get__(obj, cls)
        sync_by_id = getattr(Sandbox, self.method.__name__)

        async def by_id(sandbox_id: str, *args: Any, **kwargs: Any) -> Any:
            found = await in_thread(sync_by_id, sandbox_id, *args, **kwargs)
            return AsyncSandbox(found) if isinstance(found, Sandbox) else found  # `resume` gives the sandbox

        return by_id


class AsyncSandbox:
    """The async sandbox: `sbx = await AsyncSandbox.create()`, then `await sbx.commands.run(...)`."""

    default_template = Sandbox.default_template
    default_sandbox_timeout = Sandbox.default_sandbox_timeout

    def __init__(self, sync: Sandbox) -> None:
        self._sync = sync
        self.files = AsyncFilesystem(sync.files)
        self.commands = AsyncCommands(sync.commands)
        self.pty = AsyncPty(sync.pty)
        self.stdio = AsyncStdio(sync.stdio)

    @classmethod
    async def create(cls, template: Optional[str] = None, timeout: Optional[float] = None,
                     metadata: Optional[dict[str, str]] = None, envs: Optional[dict[str, str]] = None, *,
                     vault_refs: Optional[dict[str, str]] = None, secure: bool = True,
                     allow_internet_access: bool = True, network: Any = None, security: Any = None,
                     lifecycle: Any = None, volumes: Optional[List[Any]] = None,
                     api_key: Optional[str] = None, domain: Optional[str] = None,
                     request_timeout: Optional[float] = None, limits: Optional[Limits] = None,
                     secrets: Optional[dict[str, Any]] = None, vault: Any = None,
                     guard_plugins: Any = None, tools: Any = None, snapshot: Optional[str] = None,
                     journal: Any = None, **e2b_params: Any) -> "AsyncSandbox":
        """`Sandbox.create`, awaited; coroutine functions among `tools` run on this event loop."""
        template, snapshot = template_or_snapshot(template, snapshot)
        options = {"vault_refs": vault_refs, "secure": secure, "allow_internet_access": allow_internet_access,
                   "network": network, "security": security, "lifecycle": lifecycle, "volumes": volumes,
                   "limits": limits, "secrets": secrets, "vault": vault, "guard_plugins": guard_plugins,
                   "tools": tool_spec(tools, loop_token()), "snapshot": snapshot,
                   "journal": _args.journal(journal)}
        sandboxes = backend_for({"api_key": api_key, "domain": domain, "backend": e2b_params.pop("backend", None)})
        request = create_request(template, timeout, metadata, envs, options, e2b_params)
        return cls(Sandbox(await in_thread(sandboxes.create, request)))

    async def _connect_by_id(cls: Any, sandbox_id: str, timeout: Optional[float] = None, *,
                             secrets: Optional[dict[str, Any]] = None, vault: Any = None,
                             **e2b_params: Any) -> "AsyncSandbox":
        return cls(await in_thread(Sandbox.connect, sandbox_id, timeout, secrets=secrets, vault=vault,
                                   **e2b_params))

    async def _connect_instance(self, timeout: Optional[float] = None, *, secrets: Optional[dict[str, Any]] = None,
                                vault: Any = None, **e2b_params: Any) -> "AsyncSandbox":
        await in_thread(self._sync.connect, timeout, secrets=secrets, vault=vault, **e2b_params)
        return self

    connect = instance_or_class(_connect_by_id, _connect_instance)

    @classmethod
    def list(cls, query: Optional[SandboxQuery] = None, limit: Optional[int] = None,
             next_token: Optional[str] = None, api_key: Optional[str] = None,
             domain: Optional[str] = None, request_timeout: Optional[float] = None,
             **e2b_params: Any) -> AsyncSandboxPaginator:
        """Not a coroutine (E2B's): a paginator whose `next_items()` is awaited; awaiting the
        paginator itself gives declaw's answer."""
        return AsyncSandboxPaginator(lambda: Sandbox.list(query, limit, next_token, api_key, domain,
                                                          request_timeout, **e2b_params))

    @property
    def sandbox_id(self) -> str:
        return self._sync.sandbox_id

    def get_host(self, port: int) -> str:
        """Not a coroutine (E2B's): `Sandbox.get_host`."""
        return self._sync.get_host(port)

    @property
    def traffic_access_token(self) -> Optional[str]:
        return self._sync.traffic_access_token

    @_async_instance_or_id.returning(False)
    async def kill(self, request_timeout: Optional[float] = None, *, wait: bool = False, **e2b_params: Any) -> bool:
        return await in_thread(self._sync.kill, request_timeout, wait=wait, **e2b_params)

    @classmethod
    async def kill_by_id(cls, sandbox_id: str, *, wait: bool = False, connection_config: Any = None,
                         request_timeout: Optional[float] = None, **e2b_params: Any) -> bool:
        return await in_thread(Sandbox.kill_by_id, sandbox_id, wait=wait, connection_config=connection_config,
                               request_timeout=request_timeout, **e2b_params)

    @classmethod
    async def kill_many(cls, sandbox_ids: List[str], *, wait: bool = False, connection_config: Any = None,
                        request_timeout: Optional[float] = None, **e2b_params: Any) -> Dict[str, Dict[str, Any]]:
        return await in_thread(Sandbox.kill_many, sandbox_ids, wait=wait, connection_config=connection_config,
                               request_timeout=request_timeout, **e2b_params)

    async def get_metrics(self, start: Optional[datetime] = None, end: Optional[datetime] = None,
                          request_timeout: Optional[float] = None) -> List[SandboxMetrics]:
        return await in_thread(self._sync.get_metrics, start, end, request_timeout)

    # -- declaw's flat methods (its AsyncSandbox has no .commands/.files; ours has both) ----------
    async def run_command(self, cmd: str, background: bool = False, envs: Optional[dict[str, str]] = None,
                          user: Optional[str] = None, cwd: Optional[str] = None,
                          on_stdout: Optional[OutputHandler] = None, on_stderr: Optional[OutputHandler] = None,
                          timeout: Optional[float] = COMMAND_TIMEOUT,
                          request_timeout: Optional[float] = None) -> Any:
        return await self.commands.run(cmd, background, envs, user, cwd, on_stdout, on_stderr,
                                       timeout=timeout, request_timeout=request_timeout)

    async def list_commands(self, request_timeout: Optional[float] = None) -> List[ProcessInfo]:
        return await self.commands.list(request_timeout)

    async def kill_command(self, pid: int, request_timeout: Optional[float] = None) -> bool:
        return await self.commands.kill(pid, request_timeout)

    def connect_command(self, pid: int) -> AsyncCommandHandle:
        """declaw's: a plain method; the handle reaches the command when first awaited."""
        return AsyncCommandHandle(_LazyHandle(lambda: self._sync.commands.connect(pid), pid))  # type: ignore[arg-type]

    async def send_command_stdin(self, pid: int, data: Union[str, bytes],
                                 request_timeout: Optional[float] = None) -> None:
        await self.commands.send_stdin(pid, data, request_timeout)

    async def read_file(self, path: str, format: str = "text", user: Optional[str] = None,
                        request_timeout: Optional[float] = None) -> Any:
        return await self.files.read(path, format, user, request_timeout)  # type: ignore[call-overload]

    async def write_file(self, path: str, data: WriteData, user: Optional[str] = None,
                         request_timeout: Optional[float] = None) -> WriteInfo:
        return await self.files.write(path, data, user, request_timeout)

    async def write_files(self, files: List[Any], user: Optional[str] = None,
                          request_timeout: Optional[float] = None) -> List[WriteInfo]:
        return await self.files.write_files(files, user, request_timeout)

    async def list_files(self, path: str, depth: Optional[int] = 1, user: Optional[str] = None,
                         request_timeout: Optional[float] = None) -> List[EntryInfo]:
        return await self.files.list(path, depth, user, request_timeout)

    async def file_exists(self, path: str, user: Optional[str] = None,
                          request_timeout: Optional[float] = None) -> bool:
        return await self.files.exists(path, user, request_timeout)

    async def get_file_info(self, path: str, user: Optional[str] = None,
                            request_timeout: Optional[float] = None) -> EntryInfo:
        return await self.files.get_info(path, user, request_timeout)

    async def remove_file(self, path: str, user: Optional[str] = None,
                          request_timeout: Optional[float] = None) -> None:
        await self.files.remove(path, user, request_timeout)

    async def rename_file(self, old_path: str, new_path: str, user: Optional[str] = None,
                          request_timeout: Optional[float] = None) -> EntryInfo:
        return await self.files.rename(old_path, new_path, user, request_timeout)

    async def make_dir(self, path: str, user: Optional[str] = None,
                       request_timeout: Optional[float] = None) -> bool:
        return await self.files.make_dir(path, user, request_timeout)

    @_async_instance_or_id
    async def set_timeout(self, timeout: float, request_timeout: Optional[float] = None,
                          **e2b_params: Any) -> None:
        await in_thread(self._sync.set_timeout, timeout, request_timeout, **e2b_params)

    @_async_instance_or_id
    async def get_info(self, request_timeout: Optional[float] = None, **e2b_params: Any) -> SandboxInfo:
        return await in_thread(self._sync.get_info, request_timeout, **e2b_params)

    async def is_running(self, request_timeout: Optional[float] = None) -> bool:
        return await in_thread(self._sync.is_running, request_timeout)

    # -- state: snapshots, pause and resume, fork (docs/state.md) ---------------------------------
    @_async_instance_or_id
    async def pause(self, request_timeout: Optional[float] = None, *, keep_memory: Optional[bool] = None,
                    **e2b_params: Any) -> bool:
        return await in_thread(self._sync.pause, request_timeout, keep_memory=keep_memory, **e2b_params)

    @_async_instance_or_id
    async def beta_pause(self, request_timeout: Optional[float] = None, *, keep_memory: Optional[bool] = None,
                         **e2b_params: Any) -> bool:
        return await in_thread(self._sync.beta_pause, request_timeout, keep_memory=keep_memory, **e2b_params)

    @_async_instance_or_id
    async def resume(self, request_timeout: Optional[float] = None, *, timeout: Optional[float] = None,
                     secrets: Optional[dict[str, Any]] = None, vault: Any = None,
                     **e2b_params: Any) -> "AsyncSandbox":
        await in_thread(self._sync.resume, request_timeout, timeout=timeout, secrets=secrets, vault=vault,
                        **e2b_params)
        return self

    @_async_instance_or_id
    async def create_snapshot(self, request_timeout: Optional[float] = None, *, name: Optional[str] = None,
                              **e2b_params: Any) -> SnapshotInfo:
        return await in_thread(self._sync.create_snapshot, request_timeout, name=name, **e2b_params)

    async def snapshot(self, request_timeout: Optional[float] = None) -> Snapshot:
        return await in_thread(self._sync.snapshot, request_timeout)

    async def _list_snapshots_of(self, request_timeout: Optional[float] = None, **e2b_params: Any) -> List[Snapshot]:
        return await in_thread(self._sync.list_snapshots, request_timeout, **e2b_params)

    def _list_snapshots(cls: Any, sandbox_id: Optional[str] = None, **params: Any) -> AsyncSandboxPaginator:
        """Not a coroutine (E2B's): a paginator whose `next_items()` is awaited; awaiting the
        paginator itself gives declaw's list."""
        return AsyncSandboxPaginator(lambda: Sandbox.list_snapshots(sandbox_id, **params))

    list_snapshots = instance_or_class(_list_snapshots, _list_snapshots_of)

    async def _delete_snapshot_of(self, snapshot_id: str, request_timeout: Optional[float] = None) -> bool:
        return await in_thread(self._sync.delete_snapshot, snapshot_id, request_timeout)

    async def _delete_snapshot(cls: Any, snapshot_id: str, request_timeout: Optional[float] = None,
                               **e2b_params: Any) -> bool:
        return await in_thread(Sandbox.delete_snapshot, snapshot_id, request_timeout, **e2b_params)

    delete_snapshot = instance_or_class(_delete_snapshot, _delete_snapshot_of)

    @classmethod
    async def restore(cls, sandbox_id: str, *, snapshot_id: Optional[str] = None, api_key: Optional[str] = None,
                      domain: Optional[str] = None, request_timeout: Optional[float] = None,
                      timeout: Optional[float] = None, secrets: Optional[dict[str, Any]] = None, vault: Any = None,
                      **e2b_params: Any) -> "AsyncSandbox":
        return cls(await in_thread(Sandbox.restore, sandbox_id, snapshot_id=snapshot_id, api_key=api_key,
                                   domain=domain, request_timeout=request_timeout, timeout=timeout,
                                   secrets=secrets, vault=vault, **e2b_params))

    async def _fork(self, timeout: Optional[float] = None, count: Optional[int] = None,
                    request_timeout: Optional[float] = None, **e2b_params: Any) -> List["AsyncSandbox"]:
        """A list of `count` (default 1) new `AsyncSandbox`es, as `Sandbox.fork`."""
        forks = await in_thread(self._sync.fork, timeout, count, request_timeout, **e2b_params)
        return [AsyncSandbox(f) for f in forks]

    async def _fork_by_id(cls: Any, sandbox_id: str, timeout: Optional[float] = None, count: Optional[int] = None,
                          request_timeout: Optional[float] = None, **e2b_params: Any) -> List["AsyncSandbox"]:
        forks = await in_thread(Sandbox.fork, sandbox_id, timeout, count, request_timeout, **e2b_params)
        return [AsyncSandbox(f) for f in forks]

    fork = instance_or_class(_fork_by_id, _fork)

    def download_url(self, path: str, user: Optional[str] = None,
                     use_signature_expiration: Optional[int] = None) -> str:
        """`Sandbox.download_url` (not a coroutine, as E2B's: the first call binds the loopback
        server's socket and starts its thread, without waiting for it)."""
        return self._sync.download_url(path, user, use_signature_expiration)

    def upload_url(self, path: Optional[str] = None, user: Optional[str] = None,
                   use_signature_expiration: Optional[int] = None) -> str:
        return self._sync.upload_url(path, user, use_signature_expiration)

    async def audit_events(self, request_timeout: Optional[float] = None) -> List[Any]:
        return await in_thread(self._sync.audit_events, request_timeout)

    async def events(self, since: int = 0, request_timeout: Optional[float] = None) -> List[Any]:
        return await in_thread(self._sync.events, since, request_timeout)

    async def run_code(self, code: str, language: Optional[str] = None,
                       context: Optional[Context] = None,
                       on_stdout: Optional[Callable[[Any], Any]] = None,
                       on_stderr: Optional[Callable[[Any], Any]] = None,
                       on_result: Optional[Callable[[Any], Any]] = None,
                       on_error: Optional[Callable[[Any], Any]] = None,
                       envs: Optional[dict[str, str]] = None,
                       timeout: Optional[float] = RUN_CODE_TIMEOUT,
                       request_timeout: Optional[float] = None, *, tools: Any = None) -> Execution:
        """`Sandbox.run_code`, awaited; callbacks may be coroutine functions, and so may
        `tools` (they run on this event loop)."""
        return await in_thread(self._sync.run_code, code, language, context, from_loop(on_stdout),
                               from_loop(on_stderr), from_loop(on_result), from_loop(on_error),
                               envs, timeout, request_timeout, tools=tool_spec(tools, loop_token()))

    async def create_code_context(self, cwd: Optional[str] = None, language: Optional[str] = None,
                                  request_timeout: Optional[float] = None) -> Context:
        return await in_thread(self._sync.create_code_context, cwd, language, request_timeout)

    async def list_code_contexts(self, request_timeout: Optional[float] = None) -> List[Context]:
        return await in_thread(self._sync.list_code_contexts, request_timeout)

    async def restart_code_context(self, context: Any, request_timeout: Optional[float] = None) -> None:
        await in_thread(self._sync.restart_code_context, context, request_timeout)

    async def remove_code_context(self, context: Any, request_timeout: Optional[float] = None) -> None:
        await in_thread(self._sync.remove_code_context, context, request_timeout)

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.kill()

    def __repr__(self) -> str:
        return f"<AsyncSandbox {self.sandbox_id}>"
