"""`AsyncSandbox`: the async twin of `Sandbox`, over the same core.

Guest work already runs on guest threads; the async face only waits for it in a worker thread
(anyio), so the caller's event loop never blocks (nor does it in remote mode, where the same
calls are HTTP requests: remote.py). Output callbacks may be coroutine functions.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, AsyncIterator, Awaitable, Callable, Optional, TypeVar, Union

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from .commands import CommandHandle, Commands, StdinArg
from .execution import Context, Execution
from .files import FileStream, Filesystem
from .kernel import DEFAULT_TIMEOUT as RUN_CODE_TIMEOUT
from .filesystem import WriteData
from .limits import Limits
from .models import (CommandResult, EntryInfo, ProcessInfo, PtySize, SandboxInfo, WriteEntry,
                     WriteInfo)
from .process import Process
from .pty import Pty
from .sandbox import Sandbox, SandboxCore, SandboxPaginator, new_core

T = TypeVar("T")
# Waiting threads are cheap: do not let anyio's default 40 cap how many commands run at once.
_waiters = anyio.CapacityLimiter(10_000)
OutputHandler = Union[Callable[[str], None], Callable[[str], Awaitable[None]]]
DataHandler = Union[Callable[[bytes], None], Callable[[bytes], Awaitable[None]]]


async def _in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs), limiter=_waiters)


def _from_loop(handler: Optional[Callable[[Any], Any]]) -> Optional[Callable[[Any], None]]:
    """A sync callback for guest threads that runs `handler` (sync or async) on this loop."""
    if handler is None:
        return None
    token = anyio.lowlevel.current_token()
    if inspect.iscoroutinefunction(handler):
        async_handler = handler

        def call_async(text: Any) -> None:
            anyio.from_thread.run(async_handler, text, token=token)  # type: ignore[arg-type]

        return call_async
    sync_handler = handler

    def call_sync(text: Any) -> None:
        anyio.from_thread.run_sync(sync_handler, text, token=token)

    return call_sync


class AsyncFilesystem:
    def __init__(self, sync: Filesystem) -> None:
        self._sync = sync

    async def read(self, path: str, format: str = "text", **kw: Any) -> Any:
        if format == "stream":
            stream = await _in_thread(self._sync.read, path, "stream")
            return _aiter_stream(stream)
        return await _in_thread(self._sync.read, path, format)

    async def write(self, path: str, data: WriteData, **kw: Any) -> WriteInfo:
        return await _in_thread(self._sync.write, path, data)

    async def write_files(self, files: list[WriteEntry], **kw: Any) -> list[WriteInfo]:
        return await _in_thread(self._sync.write_files, files)

    async def list(self, path: str, depth: Optional[int] = 1, **kw: Any) -> list[EntryInfo]:
        return await _in_thread(self._sync.list, path, depth)

    async def exists(self, path: str, **kw: Any) -> bool:
        return await _in_thread(self._sync.exists, path)

    async def get_info(self, path: str, **kw: Any) -> EntryInfo:
        return await _in_thread(self._sync.get_info, path)

    async def remove(self, path: str, **kw: Any) -> None:
        await _in_thread(self._sync.remove, path)

    async def rename(self, old_path: str, new_path: str, **kw: Any) -> EntryInfo:
        return await _in_thread(self._sync.rename, old_path, new_path)

    async def make_dir(self, path: str, **kw: Any) -> bool:
        return await _in_thread(self._sync.make_dir, path)


async def _aiter_stream(stream: FileStream) -> AsyncIterator[bytes]:
    try:
        while True:
            chunk = await _in_thread(next, stream, None)
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
        self._process: Process = handle._process
        self._result: Optional[CommandResult] = None

    @property
    def pid(self) -> int:
        return self._handle.pid

    @property
    def stdout(self) -> str:
        return self._process.text("stdout")

    @property
    def stderr(self) -> str:
        return self._process.text("stderr")

    @property
    def exit_code(self) -> Optional[int]:
        return self._result.exit_code if self._result is not None else None

    @property
    def error(self) -> Optional[str]:
        return self._result.error if self._result is not None else None

    async def wait(self) -> CommandResult:
        self._result = await _in_thread(self._handle.wait)
        return self._result

    async def kill(self) -> bool:
        return await _in_thread(self._handle.kill)

    async def send_stdin(self, data: Union[str, bytes], **kw: Any) -> None:
        await _in_thread(self._handle.send_stdin, data)

    async def close_stdin(self, **kw: Any) -> None:
        await _in_thread(self._handle.close_stdin)

    async def disconnect(self) -> None:
        self._handle.disconnect()

    def __aiter__(self) -> AsyncIterator[tuple[Optional[str], Optional[str], Optional[bytes]]]:
        return _aiter_handle(self._handle)


async def _aiter_handle(handle: CommandHandle) -> AsyncIterator[tuple[Optional[str], Optional[str], Optional[bytes]]]:
    items = iter(handle)
    while True:
        item = await _in_thread(next, items, None)
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
                  timeout: Optional[float] = 60, request_timeout: Optional[float] = None) -> Any:
        """`CommandResult`, or with `background=True` an `AsyncCommandHandle`."""
        handle = await _in_thread(self._sync.run, cmd, background=True, envs=envs, cwd=cwd,
                                  on_stdout=_from_loop(on_stdout), on_stderr=_from_loop(on_stderr),
                                  stdin=stdin, timeout=timeout)
        async_handle = AsyncCommandHandle(handle)
        return async_handle if background else await async_handle.wait()

    async def list(self, **kw: Any) -> list[ProcessInfo]:
        return await _in_thread(self._sync.list)

    async def kill(self, pid: int, **kw: Any) -> bool:
        return await _in_thread(self._sync.kill, pid)

    async def send_stdin(self, pid: int, data: Union[str, bytes], **kw: Any) -> None:
        await _in_thread(self._sync.send_stdin, pid, data)

    async def close_stdin(self, pid: int, **kw: Any) -> None:
        await _in_thread(self._sync.close_stdin, pid)

    async def connect(self, pid: int, timeout: Optional[float] = 60,
                      on_stdout: Optional[OutputHandler] = None,
                      on_stderr: Optional[OutputHandler] = None, **kw: Any) -> AsyncCommandHandle:
        handle = await _in_thread(self._sync.connect, pid)
        handle._process.set_callbacks(stdout=_from_loop(on_stdout), stderr=_from_loop(on_stderr))
        return AsyncCommandHandle(handle)


class AsyncPty:
    def __init__(self, sync: Pty) -> None:
        self._sync = sync

    async def create(self, size: PtySize, on_data: Optional[DataHandler] = None,
                     user: Optional[str] = None, cwd: Optional[str] = None,
                     envs: Optional[dict[str, str]] = None, timeout: Optional[float] = 60,
                     **kw: Any) -> AsyncCommandHandle:
        handle = await _in_thread(self._sync.create, size, cwd=cwd, envs=envs, timeout=timeout,
                                  on_data=_from_loop(on_data))
        return AsyncCommandHandle(handle)

    async def send_stdin(self, pid: int, data: bytes, **kw: Any) -> None:
        await _in_thread(self._sync.send_stdin, pid, data)

    async def resize(self, pid: int, size: PtySize, **kw: Any) -> None:
        await _in_thread(self._sync.resize, pid, size)

    async def kill(self, pid: int, **kw: Any) -> bool:
        return await _in_thread(self._sync.kill, pid)

    async def connect(self, pid: int, on_data: Optional[DataHandler] = None,
                      **kw: Any) -> AsyncCommandHandle:
        handle = await _in_thread(self._sync.connect, pid)
        handle._process.set_callbacks(pty=_from_loop(on_data))
        return AsyncCommandHandle(handle)


class AsyncSandbox:
    """The async sandbox: `sbx = await AsyncSandbox.create()`, then `await sbx.commands.run(...)`."""

    def __init__(self, core: SandboxCore) -> None:
        self._core = core
        self._sync = Sandbox(core)
        self.files = AsyncFilesystem(self._sync.files)
        self.commands = AsyncCommands(self._sync.commands)
        self.pty = AsyncPty(self._sync.pty)

    @classmethod
    async def create(cls, template: Optional[str] = None, timeout: Optional[float] = None,
                     metadata: Optional[dict[str, str]] = None, envs: Optional[dict[str, str]] = None,
                     limits: Optional[Limits] = None, **e2b_params: Any) -> "AsyncSandbox":
        from . import remote

        conn = remote.connection(e2b_params)
        if conn is not None:  # remote mode (remote.py)
            from ._egress.create import refuse_served

            refuse_served(e2b_params)
            return remote.RemoteAsyncSandbox(await _in_thread(
                remote.RemoteSandbox.create_on, conn, template, timeout, metadata, envs, limits))
        core = await _in_thread(new_core, template, timeout, metadata, envs, limits, e2b_params)
        return cls(core)

    @classmethod
    async def connect(cls, sandbox_id: str, timeout: Optional[float] = None, **kw: Any) -> "AsyncSandbox":
        from . import remote

        conn = remote.connection(kw)
        if conn is not None:
            return remote.RemoteAsyncSandbox(await _in_thread(
                remote.RemoteSandbox.connect_on, conn, sandbox_id, timeout))
        sync = await _in_thread(Sandbox.connect, sandbox_id, timeout)
        return cls(sync._core)

    @classmethod
    def list(cls, **kw: Any) -> SandboxPaginator:
        return Sandbox.list(**kw)

    @property
    def sandbox_id(self) -> str:
        return self._core.sandbox_id

    async def kill(self, **kw: Any) -> bool:
        return await _in_thread(self._core.kill)

    async def set_timeout(self, timeout: float, **kw: Any) -> None:
        await _in_thread(self._core.set_timeout, timeout)

    async def get_info(self, **kw: Any) -> SandboxInfo:
        return await _in_thread(self._sync.get_info)

    async def is_running(self, **kw: Any) -> bool:
        return self._core.running

    async def audit_events(self, **kw: Any) -> list[Any]:
        """The sandbox's outbound events (Sandbox.audit_events)."""
        return await _in_thread(self._sync.audit_events)

    async def run_code(self, code: str, language: Optional[str] = None,
                       context: Optional[Context] = None,
                       on_stdout: Optional[Callable[[Any], Any]] = None,
                       on_stderr: Optional[Callable[[Any], Any]] = None,
                       on_result: Optional[Callable[[Any], Any]] = None,
                       on_error: Optional[Callable[[Any], Any]] = None,
                       envs: Optional[dict[str, str]] = None,
                       timeout: Optional[float] = RUN_CODE_TIMEOUT, **kw: Any) -> Execution:
        """`Sandbox.run_code`, awaited; callbacks may be coroutine functions."""
        return await _in_thread(self._sync.run_code, code, language, context,
                                on_stdout=_from_loop(on_stdout), on_stderr=_from_loop(on_stderr),
                                on_result=_from_loop(on_result), on_error=_from_loop(on_error),
                                envs=envs, timeout=timeout)

    async def create_code_context(self, cwd: Optional[str] = None, language: Optional[str] = None,
                                  **kw: Any) -> Context:
        return await _in_thread(self._sync.create_code_context, cwd, language)

    async def list_code_contexts(self, **kw: Any) -> list[Context]:
        return await _in_thread(self._sync.list_code_contexts)

    async def restart_code_context(self, context: Any, **kw: Any) -> None:
        await _in_thread(self._sync.restart_code_context, context)

    async def remove_code_context(self, context: Any, **kw: Any) -> None:
        await _in_thread(self._sync.remove_code_context, context)

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.kill()
