"""`sbx.stdio`: declaw's stdio processes, commands with an open stdin pipe and no timeout.

For MCP and LSP servers and REPLs in the sandbox. A face over the same contract as `commands`
(a background command with `stdin=True`), so it works wherever the sandbox runs.

Output arrives as bytes chunks, as declaw gives them: `stream()` calls back with each, iteration
yields `(stream_type, chunk)`, `wait()` returns a `StdioResult` (int-coercible exit code).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Union

from . import _args
from ._backend import ProcessHandle, SandboxBackend
from .exceptions import SandboxException
from .wire import RunCommand

BytesCallback = Optional[Callable[[bytes], None]]


@dataclass
class StdioResult:
    """How a stdio process ended; compares and converts as its exit code (-1 if unknown)."""

    exit_code: int

    def __int__(self) -> int:
        return self.exit_code

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (StdioResult, int)):
            return self.exit_code == (other if isinstance(other, int) else other.exit_code)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.exit_code)


def _bytes(data: Union[str, bytes]) -> bytes:
    return data.encode("utf-8", "surrogateescape") if isinstance(data, str) else bytes(data)


class StdioProcess:
    """A running stdio process (declaw's `StdioProcess`)."""

    def __init__(self, process: ProcessHandle, on_stdout: BytesCallback = None,
                 on_stderr: BytesCallback = None) -> None:
        self._process = process
        self._reader: Optional[threading.Thread] = None
        if on_stdout is not None or on_stderr is not None:
            self._reader = threading.Thread(target=self._read, args=(on_stdout, on_stderr),
                                            name=f"declaw-stdio-{process.pid}", daemon=True)
            self._reader.start()

    @property
    def cmd_id(self) -> str:
        return str(self._process.pid)

    @property
    def exit_code(self) -> Optional[int]:
        return self._exit_code() if self._process.done else None

    def _exit_code(self) -> int:
        try:
            return self._process.result().exit_code
        except SandboxException:
            return -1

    def send_stdin(self, data: Union[bytes, str], request_timeout: Optional[float] = None) -> None:
        self._process.send_stdin(_args.stdin_data(data))

    def close_stdin(self, request_timeout: Optional[float] = None) -> None:
        self._process.close_stdin()

    def kill(self, request_timeout: Optional[float] = None) -> bool:
        return self._process.kill()

    def __iter__(self) -> Iterator[tuple[str, bytes]]:
        if self._reader is not None:
            raise RuntimeError("background reader already running; use wait() instead")
        for event in self._process.events():
            if event.stream in ("stdout", "stderr"):
                yield event.stream, _bytes(event.data)

    def _read(self, on_stdout: BytesCallback, on_stderr: BytesCallback) -> None:
        for event in self._process.events():
            callback = on_stdout if event.stream == "stdout" else on_stderr if event.stream == "stderr" else None
            if callback is not None:
                try:
                    callback(_bytes(event.data))
                except Exception:  # the caller's bug must not end the reader
                    pass

    def stream(self, on_stdout: BytesCallback = None, on_stderr: BytesCallback = None) -> StdioResult:
        """Call back with each chunk of output until the process exits."""
        if self._reader is not None:
            raise RuntimeError("background reader already running; use wait() instead")
        self._read(on_stdout, on_stderr)
        return StdioResult(self._exit_code())

    def wait(self, timeout: Optional[float] = None) -> StdioResult:
        """The exit (or, after `timeout` seconds, `StdioResult(-1)` while it still runs)."""
        if self._reader is not None:
            self._reader.join(timeout)
        else:
            for _ in self._process.events():
                pass
        return StdioResult(self._exit_code() if self._process.done else -1)


class Stdio:
    """declaw's `sbx.stdio`."""

    def __init__(self, backend: SandboxBackend) -> None:
        self._backend = backend

    def start(self, cmd: str, envs: Optional[dict[str, str]] = None, user: Optional[str] = None,
              cwd: Optional[str] = None, on_stdout: BytesCallback = None, on_stderr: BytesCallback = None,
              request_timeout: Optional[float] = None) -> StdioProcess:
        """Start `cmd` with its stdin open (no timeout: it runs until it exits or is killed)."""
        request = RunCommand(cmd=_args.command(cmd), envs=_args.envs(envs),
                             cwd=_args.path(cwd) if cwd is not None else None,
                             timeout=None, background=True, stdin=True)
        return StdioProcess(self._backend.start(request), on_stdout, on_stderr)
