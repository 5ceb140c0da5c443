"""`AsyncSandbox`: the async twin of `Sandbox`, over the same faces.

Guest work already runs on guest threads, and remote calls are blocking HTTP; the async face
only waits for them in a worker thread (_threads.py), so the caller's event loop never blocks.
Each method forwards every parameter of its sync twin (tests/test_twins.py compares the
signatures). Output callbacks may be coroutine functions.
"""

from __future__ import annotations

from typing import Any, AsyncGenerator, AsyncIterator, Awaitable, Callable, List, Literal, Optional, Union, overload

from ._backend import WriteData
from ._threads import from_loop, in_thread
from .commands import DEFAULT_TIMEOUT as COMMAND_TIMEOUT
from .commands import CommandHandle, Commands, StdinArg
from .execution import Context, Execution
from .files import FileStream, Filesystem
from .limits import Limits
from .models import CommandResult, EntryInfo, ProcessInfo, PtySize, SandboxInfo, WriteEntry, WriteInfo
from .pty import DEFAULT_TIMEOUT as PTY_TIMEOUT
from .pty import Pty
from .sandbox import RUN_CODE_TIMEOUT, Sandbox, SandboxPaginator, backend_for, create_request, instance_or_id

OutputHandler = Union[Callable[[str], None], Callable[[str], Awaitable[None]]]
DataHandler = Union[Callable[[bytes], None], Callable[[bytes], Awaitable[None]]]


class AsyncFilesystem:
    def __init__(self, sync: Filesystem) -> None:
        self._sync = sync

    @overload
    async def read(self, path: str, format: Literal["text"] = "text", user: Optional[str] = None,
                   request_timeout: Optional[float] = None) -> str: ...
    @overload
    async def read(self, path: str, format: Literal["bytes"], user: Optional[str] = None,
                   request_timeout: Optional[float] = None) -> bytearray: ...
    @overload
    async def read(self, path: str, format: Literal["stream"], user: Optional[str] = None,
                   request_timeout: Optional[float] = None) -> AsyncGenerator[bytes, None]: ...

    async def read(self, path: str, format: str = "text", user: Optional[str] = None,
                   request_timeout: Optional[float] = None) -> Any:
        result = await in_thread(self._sync.read, path, format, user, request_timeout)
        return _aiter_stream(result) if isinstance(result, FileStream) else result

    async def write(self, path: str, data: WriteData, user: Optional[str] = None,
                    request_timeout: Optional[float] = None) -> WriteInfo:
        return await in_thread(self._sync.write, path, data, user, request_timeout)

    async def write_files(self, files: List[WriteEntry], user: Optional[str] = None,
                          request_timeout: Optional[float] = None) -> List[WriteInfo]:
        return await in_thread(self._sync.write_files, files, user, request_timeout)

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


async def _aiter_stream(stream: FileStream) -> AsyncGenerator[bytes, None]:
    try:
        while True:
            chunk = await in_thread(next, stream, None)
            if chunk is None:
                return
            yield chunk
    finally:
        stream.close()


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
        self._result = await in_thread(self._handle.wait, from_loop(on_pty), from_loop(on_stdout),
                                       from_loop(on_stderr))
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
        return async_handle if background else await async_handle.wait()

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

    async def create(self, size: PtySize, on_data: Optional[DataHandler] = None,
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


class _async_instance_or_id(instance_or_id):
    """`instance_or_id` for coroutine methods: `await AsyncSandbox.kill(sandbox_id)` as well as
    `await sbx.kill()`."""

    def __get__(self, obj: Any, cls: type) -> Callable[..., Any]:
        if obj is not None:
            return super().__get__(obj, cls)
        sync_by_id = getattr(Sandbox, self.method.__name__)

        async def by_id(sandbox_id: str, *args: Any, **kwargs: Any) -> Any:
            return await in_thread(sync_by_id, sandbox_id, *args, **kwargs)

        return by_id


class AsyncSandbox:
    """The async sandbox: `sbx = await AsyncSandbox.create()`, then `await sbx.commands.run(...)`."""

    def __init__(self, sync: Sandbox) -> None:
        self._sync = sync
        self.files = AsyncFilesystem(sync.files)
        self.commands = AsyncCommands(sync.commands)
        self.pty = AsyncPty(sync.pty)

    @classmethod
    async def create(cls, template: Optional[str] = None, timeout: Optional[float] = None,
                     metadata: Optional[dict[str, str]] = None, envs: Optional[dict[str, str]] = None,
                     limits: Optional[Limits] = None, **e2b_params: Any) -> "AsyncSandbox":
        sandboxes = backend_for(e2b_params)
        request = create_request(template, timeout, metadata, envs, limits, e2b_params)
        return cls(Sandbox(await in_thread(sandboxes.create, request)))

    @classmethod
    async def connect(cls, sandbox_id: str, timeout: Optional[float] = None,
                      **e2b_params: Any) -> "AsyncSandbox":
        return cls(await in_thread(Sandbox.connect, sandbox_id, timeout, **e2b_params))

    @classmethod
    async def list(cls, **e2b_params: Any) -> SandboxPaginator:
        return await in_thread(Sandbox.list, **e2b_params)

    @property
    def sandbox_id(self) -> str:
        return self._sync.sandbox_id

    @_async_instance_or_id.returning(False)
    async def kill(self, request_timeout: Optional[float] = None, **e2b_params: Any) -> bool:
        return await in_thread(self._sync.kill, request_timeout, **e2b_params)

    @_async_instance_or_id
    async def set_timeout(self, timeout: float, request_timeout: Optional[float] = None,
                          **e2b_params: Any) -> None:
        await in_thread(self._sync.set_timeout, timeout, request_timeout, **e2b_params)

    @_async_instance_or_id
    async def get_info(self, request_timeout: Optional[float] = None, **e2b_params: Any) -> SandboxInfo:
        return await in_thread(self._sync.get_info, request_timeout, **e2b_params)

    async def is_running(self, request_timeout: Optional[float] = None) -> bool:
        return await in_thread(self._sync.is_running, request_timeout)

    async def audit_events(self, request_timeout: Optional[float] = None) -> List[Any]:
        return await in_thread(self._sync.audit_events, request_timeout)

    async def run_code(self, code: str, language: Optional[str] = None,
                       context: Optional[Context] = None,
                       on_stdout: Optional[Callable[[Any], Any]] = None,
                       on_stderr: Optional[Callable[[Any], Any]] = None,
                       on_result: Optional[Callable[[Any], Any]] = None,
                       on_error: Optional[Callable[[Any], Any]] = None,
                       envs: Optional[dict[str, str]] = None,
                       timeout: Optional[float] = RUN_CODE_TIMEOUT,
                       request_timeout: Optional[float] = None) -> Execution:
        """`Sandbox.run_code`, awaited; callbacks may be coroutine functions."""
        return await in_thread(self._sync.run_code, code, language, context, from_loop(on_stdout),
                               from_loop(on_stderr), from_loop(on_result), from_loop(on_error),
                               envs, timeout, request_timeout)

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
