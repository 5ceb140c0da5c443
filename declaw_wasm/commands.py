"""`sbx.commands`: command lines run by the shell inside the sandbox (E2B's and declaw's `Commands`).

Each command line runs in a guest of its own, under the in-guest shell (guest/declaw_shell):
bash's language, the core utilities, `python3` as a program. Foreground runs wait and return a
`CommandResult` (a non-zero exit is returned, not raised: declaw's rule); background runs return
a `CommandHandle` at once, whose `wait()` raises `CommandExitException` on a non-zero exit (as
declaw's and E2B's do). Output streams to `on_stdout`/`on_stderr` as it is written.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, List, Optional, Union

from ._model import construct
from . import _args
from ._backend import ProcessHandle, SandboxBackend
from .exceptions import CommandExitException
from .models import CommandResult, ProcessInfo
from .wire import RunCommand

DEFAULT_TIMEOUT = 60.0
StdinArg = Union[bool, str, bytes, None]


class CommandHandle:
    """A running command (E2B's `CommandHandle`): `wait()`, `kill()`, stdin, and iteration over
    its output as `(stdout, stderr, pty)` tuples in which exactly one item is set."""

    def __init__(self, process: ProcessHandle, sandbox_id: Optional[str] = None) -> None:
        self._process = process
        self._sandbox_id = sandbox_id
        self._disconnected = False

    @property
    def pid(self) -> int:
        return self._process.pid

    def __iter__(self) -> Iterator[tuple[Optional[str], Optional[str], Optional[bytes]]]:
        """The output from the start as it comes; past the command's timeout (or its sandbox's
        end) the iteration raises `TimeoutException`, as E2B's does."""
        for event in self._process.events():
            if self._disconnected:
                return
            yield (event.data if event.stream == "stdout" else None,
                   event.data if event.stream == "stderr" else None,
                   event.data if event.stream == "pty" else None)
        if not self._disconnected:
            self._process.result()  # raises if the command timed out

    def wait(self, on_pty: Optional[Callable[[bytes], None]] = None,
             on_stdout: Optional[Callable[[str], None]] = None,
             on_stderr: Optional[Callable[[str], None]] = None) -> CommandResult:
        """Wait for the exit; callbacks given here receive the output from the start. A non-zero
        exit raises `CommandExitException` carrying the result (a killed command: exit code
        137); a timeout raises `TimeoutException` with the output so far."""
        result = self._wait_result(on_pty, on_stdout, on_stderr)
        if result.exit_code != 0:
            raise CommandExitException(exit_code=result.exit_code, stdout=result.stdout,
                                       stderr=result.stderr, error=result.error,
                                       sandbox_id=self._sandbox_id)
        return result

    def _wait_result(self, on_pty: Optional[Callable[[bytes], None]] = None,
                     on_stdout: Optional[Callable[[str], None]] = None,
                     on_stderr: Optional[Callable[[str], None]] = None) -> CommandResult:
        """As `wait`, but a non-zero exit is returned, not raised (what `commands.run` gives)."""
        callbacks = {"stdout": on_stdout, "stderr": on_stderr, "pty": on_pty}
        if any(callbacks.values()):
            for event in self._process.events():
                callback = callbacks[event.stream]
                if callback is not None:
                    callback(event.data)
        return self._process.result()

    def kill(self) -> bool:
        return self._process.kill()

    def send_stdin(self, data: Union[str, bytes], request_timeout: Optional[float] = None) -> None:
        self._process.send_stdin(_args.stdin_data(data))

    def close_stdin(self, request_timeout: Optional[float] = None) -> None:
        self._process.close_stdin()

    def disconnect(self) -> None:
        """Stop iterating this handle's output; the command keeps running."""
        self._disconnected = True


class _Lines:
    """Text as it comes, handed on one line (without its newline) at a time."""

    def __init__(self, callback: Optional[Callable[[str], None]]) -> None:
        self.callback = callback
        self.partial = ""

    def feed(self, text: str) -> None:
        if self.callback is None:
            return
        *lines, self.partial = (self.partial + text).split("\n")
        for line in lines:
            self.callback(line)

    def end(self) -> None:
        if self.callback is not None and self.partial:
            self.callback(self.partial)
        self.partial = ""


class Commands:
    """Runs command lines in one sandbox (E2B's `sbx.commands`)."""

    def __init__(self, backend: SandboxBackend) -> None:
        self._backend = backend

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
        _args.stdin(stdin)
        # every field checked above: constructed, not validated again (the first validation
        # of a pydantic model in a process costs ~20 ms, its plugins looked up; a cold start)
        request = construct(RunCommand,
            cmd=_args.command(cmd), envs=_args.envs(envs), cwd=_args.path(cwd) if cwd is not None else None,
            timeout=_args.timeout(timeout), background=bool(background), tag=_args.tag(tag),
            stdin=True if isinstance(stdin, bytes) else stdin)
        process = self._backend.start(request, on_stdout=on_stdout, on_stderr=on_stderr)
        handle = CommandHandle(process, self._backend.sandbox_id)
        if isinstance(stdin, bytes):
            process.send_stdin(stdin)
            process.close_stdin()
        return handle if background else handle._wait_result()

    def run_stream(self, cmd: str, on_stdout: Optional[Callable[[str], None]] = None,
                   on_stderr: Optional[Callable[[str], None]] = None,
                   envs: Optional[dict[str, str]] = None, user: Optional[str] = None,
                   cwd: Optional[str] = None, timeout: Optional[float] = DEFAULT_TIMEOUT) -> CommandResult:
        """declaw's `run_stream`: run in the foreground with the callbacks called once per line
        of output as it is written (the line without its newline). The result holds the whole
        output, as `run`'s does."""
        lines = {"stdout": _Lines(on_stdout), "stderr": _Lines(on_stderr)}
        result = self.run(cmd, envs=envs, cwd=cwd, timeout=timeout,
                          on_stdout=lines["stdout"].feed, on_stderr=lines["stderr"].feed)
        for split in lines.values():
            split.end()
        return result

    def list(self, request_timeout: Optional[float] = None) -> List[ProcessInfo]:
        """The running commands and PTYs of this sandbox."""
        return self._backend.processes()

    def kill(self, pid: int, request_timeout: Optional[float] = None) -> bool:
        """Kill a command; False if no such command is running."""
        return self._backend.kill_process(pid)

    def connect(self, pid: int, timeout: Optional[float] = DEFAULT_TIMEOUT,
                request_timeout: Optional[float] = None) -> CommandHandle:
        return CommandHandle(self._backend.process(pid), self._backend.sandbox_id)

    def send_stdin(self, pid: int, data: Union[str, bytes],
                   request_timeout: Optional[float] = None) -> None:
        self._backend.send_stdin(pid, _args.stdin_data(data))

    def close_stdin(self, pid: int, request_timeout: Optional[float] = None) -> None:
        self._backend.close_stdin(pid)
