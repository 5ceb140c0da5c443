"""`sbx.commands`: command lines run by the shell inside the sandbox (E2B's `Commands`).

Each command line runs in a guest instance of its own (process.py), under the in-guest shell
(runtime/declaw_shell): bash's language, the core utilities, `python3` as a program. Foreground
runs wait and return a `CommandResult` (a non-zero exit is returned, not raised); background runs
return a `CommandHandle` at once. Output streams to `on_stdout`/`on_stderr` as it is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Union

from .exceptions import (InvalidArgumentException, NotFoundException, SandboxException,
                         TimeoutException)
from .limits import MAX_COMMAND_LINE
from .models import CommandResult, ProcessInfo
from .process import KILLED_EXIT_CODE, Process

if TYPE_CHECKING:
    from .sandbox import SandboxCore

DEFAULT_TIMEOUT = 60.0
StdinArg = Union[bool, str, bytes, None]


class CommandHandle:
    """A running command (E2B's `CommandHandle`): `wait()`, `kill()`, stdin, and iteration over
    its output as `(stdout, stderr, pty)` tuples in which exactly one item is set."""

    def __init__(self, process: Process) -> None:
        self._process = process
        self._disconnected = False

    @property
    def pid(self) -> int:
        return self._process.pid

    def __iter__(self) -> Iterator[tuple[Optional[str], Optional[str], Optional[bytes]]]:
        for event in self._process.events():
            if self._disconnected:
                return
            yield (event.data if event.stream == "stdout" else None,
                   event.data if event.stream == "stderr" else None,
                   event.data if event.stream == "pty" else None)

    def wait(self, on_pty: Optional[Callable[[bytes], None]] = None,
             on_stdout: Optional[Callable[[str], None]] = None,
             on_stderr: Optional[Callable[[str], None]] = None) -> CommandResult:
        """Wait for the exit; callbacks given here receive the output from the start. A timeout
        raises `TimeoutException` with the output so far; a killed command gives exit code 137."""
        callbacks = {"stdout": on_stdout, "stderr": on_stderr, "pty": on_pty}
        if any(callbacks.values()):
            for event in self._process.events():
                callback = callbacks[event.stream]
                if callback is not None:
                    callback(event.data)
        return _result(self._process)

    def kill(self) -> bool:
        return self._process.kill()

    def send_stdin(self, data: Union[str, bytes], request_timeout: Optional[float] = None) -> None:
        self._process.send_stdin(data)

    def close_stdin(self, request_timeout: Optional[float] = None) -> None:
        self._process.stdin.close()

    def disconnect(self) -> None:
        """Stop iterating this handle's output; the command keeps running."""
        self._disconnected = True


def _result(process: Process) -> CommandResult:
    outcome = process.wait()
    assert outcome is not None
    if outcome.stopped == "timeout":
        raise TimeoutException(f"command timed out: {process.cmd!r}", outcome.stdout, outcome.stderr)
    if outcome.stopped == "quota":
        return CommandResult(stdout=outcome.stdout, stderr=outcome.stderr,
                             exit_code=KILLED_EXIT_CODE, error=process.quota_message)
    if outcome.stopped == "killed" and not process.killed:
        raise SandboxException(f"sandbox {process.core.sandbox_id} was killed while the command ran")
    error = None
    exit_code = outcome.exit_code
    if process.killed:
        exit_code, error = KILLED_EXIT_CODE, "killed"
    elif outcome.error:
        error = outcome.error
    elif outcome.truncated:
        error = f"{' and '.join(outcome.truncated)} truncated at the sandbox's output limit"
    return CommandResult(stdout=outcome.stdout, stderr=outcome.stderr, exit_code=exit_code,
                         error=error)


class Commands:
    """Runs command lines in one sandbox (E2B's `sbx.commands`)."""

    def __init__(self, core: "SandboxCore") -> None:
        self._core = core

    def run(self, cmd: str, background: bool = False, envs: Optional[dict[str, str]] = None,
            user: Optional[str] = None, cwd: Optional[str] = None,
            on_stdout: Optional[Callable[[str], None]] = None,
            on_stderr: Optional[Callable[[str], None]] = None,
            stdin: StdinArg = None, timeout: Optional[float] = DEFAULT_TIMEOUT,
            request_timeout: Optional[float] = None, tag: Optional[str] = None) -> Any:
        """Run `cmd` as `bash -c` would. Foreground: the `CommandResult`. `background=True`: a
        `CommandHandle` at once. `stdin=True` keeps stdin open for `send_stdin` (str/bytes: that
        input, then end of input). `timeout` (seconds; 0 or None: none) stops the command and
        raises `TimeoutException` carrying the output so far."""
        if not isinstance(cmd, str):
            raise InvalidArgumentException(f"cmd must be a string, got {type(cmd).__name__}")
        size = len(cmd.encode("utf-8", "surrogatepass"))
        if size >= MAX_COMMAND_LINE:
            raise InvalidArgumentException(
                f"command line of {size} bytes: Argument list too long (bash -c takes at most "
                f"{MAX_COMMAND_LINE - 1}, Linux's MAX_ARG_STRLEN); put long data in a file with files.write")
        if stdin is not None and not isinstance(stdin, (bool, str, bytes)):
            raise InvalidArgumentException("stdin must be a bool (keep stdin open), str or bytes")
        process = self._core.spawn(cmd, envs=envs, cwd=cwd, timeout=timeout, on_stdout=on_stdout,
                                   on_stderr=on_stderr, stdin=bool(stdin), tag=tag)
        if isinstance(stdin, (str, bytes)):
            process.send_stdin(stdin)
            process.stdin.close()
        handle = CommandHandle(process)
        return handle if background else handle.wait()

    def list(self, request_timeout: Optional[float] = None) -> list[ProcessInfo]:
        """The running commands and PTYs of this sandbox."""
        return [ProcessInfo(pid=p.pid, tag=p.tag, cmd=p.cmd or "/bin/bash", args=_args(p),
                            envs=dict(p.envs), cwd=p.cwd)
                for p in self._core.processes_checked()]

    def kill(self, pid: int, request_timeout: Optional[float] = None) -> bool:
        """Kill a command; False if no such command is running."""
        return self._core.kill_process(pid)

    def connect(self, pid: int, timeout: Optional[float] = DEFAULT_TIMEOUT,
                request_timeout: Optional[float] = None) -> CommandHandle:
        return CommandHandle(self._running(pid))

    def send_stdin(self, pid: int, data: Union[str, bytes],
                   request_timeout: Optional[float] = None) -> None:
        self._running(pid).send_stdin(data)

    def close_stdin(self, pid: int, request_timeout: Optional[float] = None) -> None:
        self._running(pid).stdin.close()

    def _running(self, pid: int) -> Process:
        process = self._core.process(pid)
        if process is None:
            raise NotFoundException(f"no running command with pid {pid} in sandbox "
                                    f"{self._core.sandbox_id}")
        return process


def _args(process: Process) -> list[str]:
    if process.pty_size is not None:
        return ["-i", "-l"]
    return ["-l", "-c", process.cmd]
