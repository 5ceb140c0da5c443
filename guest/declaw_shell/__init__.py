"""The shell inside the guest: bash's command language and core utilities, run in the sandbox.

The interpreter is `bash_purepython` (pure Python, MIT; README "The shell" says why it was
chosen). This package binds it to the sandbox:

* standard streams: output goes to the guest's stdout/stderr as it is produced (the host
  streams it on); stdin comes through the door (door.py), live, for `send_stdin` and PTYs;
* programs.py: `python3` as a pipeline stage, `awk` (awk.py, ours: the library has none), `ln`,
  `tput`, and the few places where the library's utilities answer differently from GNU's;
* `run_command` (one command line, like `bash -c`, output not a terminal) and `run_terminal`
  (an interactive shell with a prompt, for a PTY).
"""

from __future__ import annotations

import asyncio
import errno
import os
import sys
from contextlib import contextmanager
from pathlib import Path

from bash_purepython.command.command import InputKind, OutputKind
from bash_purepython.continuation import script_needs_more_lines
from bash_purepython.execute_command import ErrorDestination, ExecutionResult, Executor, StdinValue
from bash_purepython.shell_state import CallableSink, ControlFlowSignal, ExitShell, ShellError

from . import arrays, door, pipebuffer, programs, rawbytes, shells

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from typing import Any

    from .shells import Destination, GuestState

arrays.install()  # associative arrays, keyed compound assignments, elements in arithmetic
rawbytes.install()  # bytes that are not UTF-8 (`printf '\\377'`) reach files and streams as bytes
pipebuffer.install()  # a stage cut off by its reader is 141 only if it had more than a pipe's buffer to write

EXIT_INTERRUPTED = 130
WRITABLE = ("/home/user", "/tmp", "/workspace")  # the sandbox's writable mounts; / is read-only
_DENIED = {errno.EPERM, errno.EACCES, getattr(errno, "ENOTCAPABLE", errno.EPERM)}


def os_error_text(exc: OSError) -> str:
    """`PATH: REASON` for an OSError, as bash words it. WASI answers a write under the read-only
    root with EPERM (even when a parent folder is missing): say what Linux would."""
    path = os.fsdecode(exc.filename) if exc.filename is not None else ""
    reason = exc.strerror or str(exc)
    if exc.errno in _DENIED and path:
        full = os.path.abspath(path)
        if not any(full == w or full.startswith(w + "/") for w in WRITABLE):
            reason = "Read-only file system" if os.path.isdir(os.path.dirname(full)) \
                else "No such file or directory"
    return "%s: %s" % (path, reason) if path else reason


class RedirectionFailed(ShellError):
    """A redirection could not open its file."""


@contextmanager
def _redirection_errors() -> Iterator[None]:
    """A redirection that cannot open its file fails its command (status 1, `bash: PATH:
    REASON`, so `||`, `&&` and `set -e` see it) and the line goes on, as in bash; the library
    would let the OSError end the whole line with a traceback."""
    try:
        yield
    except OSError as exc:
        raise RedirectionFailed(os_error_text(exc)) from None


class GuestExecutor(shells.ShellFeatures, Executor):
    """The library's executor, with shells.ShellFeatures (bash/sh as programs, paths, traps,
    timeout, find, ...) and one change: a command that reads standard input and was given none
    (no pipe, no redirection) reads the command's own stdin, as a process inherits fd 0. Only
    streaming readers get it, so nothing waits for an end of input it never needed."""

    def __init__(self, registry: Any, session: Session | None) -> None:
        super().__init__(registry)
        self.session = session
        self.exited = False  # `exit` ran: an interactive shell ends

    async def execute_script(self, script: str, state: GuestState) -> int:
        try:
            return await self.run_script(script, state)
        except ExitShell as exit_shell:
            self.exited = True
            state.last_exit_code = exit_shell.exit_code
        except ControlFlowSignal:
            pass
        return state.last_exit_code

    async def run_registered_command(self, command: Any, arguments: list[str], stdin: StdinValue | None,
                                     error_destination: Destination, state: GuestState,
                                     attached_to_terminal: bool = False) -> ExecutionResult:
        if stdin is None and state.pending_stdin is None and self.session is not None \
                and InputKind.STREAM_TEXT in command.input_kinds:
            stdin = StdinValue(value=self.session.stdin_chunks(), kind=OutputKind.STREAM_TEXT)
        token = programs.ERRORS_WITH_STDOUT.set(error_destination == ErrorDestination.STDOUT)
        try:
            return await super().run_registered_command(command, arguments, stdin, error_destination,
                                                        state, attached_to_terminal)
        except OSError as exc:  # a utility that lets one escape (mkdir, cp on the read-only root)
            message = "%s: %s\n" % (getattr(command, "name", "bash"), os_error_text(exc))
            try:
                self.error_sink(error_destination, state, None)(message)
            except OSError:
                state.write_error(message)
            return ExecutionResult.empty(1)
        finally:
            programs.ERRORS_WITH_STDOUT.reset(token)

    async def execute_simple_command(self, node: Any, state: GuestState, stdin: StdinValue | None,
                                     merge_stderr: bool = False, in_pipeline: bool = False) -> ExecutionResult:
        try:
            return await super().execute_simple_command(node, state, stdin, merge_stderr, in_pipeline)
        except RedirectionFailed as exc:
            state.write_error("bash: %s\n" % exc)
            return ExecutionResult.empty(1)

    async def error_destination(self, redirections: list[Any], state: GuestState,
                                merge_stderr: bool) -> Destination:
        with _redirection_errors():
            return await super().error_destination(redirections, state, merge_stderr)

    async def apply_output_redirections(self, result: ExecutionResult, redirections: list[Any],
                                        state: GuestState, error_destination: Destination = None,
                                        merge_stderr: bool = False) -> ExecutionResult:
        with _redirection_errors():
            return await super().apply_output_redirections(result, redirections, state,
                                                           error_destination, merge_stderr)


class Session:
    """One shell: its state (variables, cwd, functions) and where its streams go."""

    def __init__(self, cwd: str, env: dict[str, str], terminal: door.Terminal | None = None) -> None:
        self.terminal = terminal
        self.stdin: Any = terminal if terminal is not None else door.door_stdin_text()
        self.stdout: Any = sys.stdout  # a text stream (a cell's DoorStream in a bash context)
        self.stderr: Any = sys.stdout if terminal is not None else sys.stderr  # a PTY has one stream
        state = shells.GuestState(cwd=Path(cwd), write_output=self.write_out, write_error=self.write_err,
                                  variables=dict(env))
        state.variables["PWD"] = cwd
        state.exported_names.update(state.variables)
        state.read_line = self.read_line
        state.job_table = shells.LineJobs()
        # the library also records all output in memory; a long command must not grow the guest
        # "attached to the terminal" then means: straight to the command's stdout (no pipe, no
        # redirection), which is when `python3` streams; `ls` asks `is_tty` for its layout
        state.output_sink = state.terminal_output_sink = CallableSink(self.write_out)
        state.write_error = state.terminal_write_error = self.write_err
        self.state = state
        self.executor = GuestExecutor(programs.registry(self), self)

    def write_out(self, text: str) -> None:
        rawbytes.write(self.stdout, text)

    def write_err(self, text: str) -> None:
        rawbytes.write(self.stderr, text)

    def read_line(self) -> str | None:
        line = self.stdin.readline()
        return line or None

    async def stdin_chunks(self) -> AsyncIterator[str]:
        """The command's stdin as it arrives (a terminal's: a line at a time, as a tty's)."""
        read = getattr(self.stdin, "read_chunk", self.stdin.readline)
        while True:
            chunk = read()
            if not chunk:
                return
            yield chunk

    def finish(self, status: int) -> int:
        """An interactive shell ends: its EXIT trap runs."""
        try:
            return asyncio.run(self.executor.finish_scope(self.state, status))
        except door.Interrupted:
            return status

    def run(self, script: str) -> int:
        try:
            if self.terminal is None:
                return asyncio.run(self._line_then_jobs(script))
            return asyncio.run(self.executor.execute_script(script, self.state))
        except door.Interrupted:
            self.state.last_exit_code = EXIT_INTERRUPTED
            return EXIT_INTERRUPTED

    async def _line_then_jobs(self, script: str) -> int:
        """The line, then the jobs it left running (`cmd &`, a child bash's too) and the Python
        programs its programs started with `subprocess.Popen` and left running: bash leaves them
        running when it exits, so the command is over for its caller (the `detach` op: its
        result, with the output so far) and this guest goes on until they end. (A terminal's
        shell reads its next line instead: its jobs end with the line that started them. A
        program spawned itself cannot detach: its children end with it.)"""
        status = await self.executor.run_line(script, self.state)
        jobs = shells.running_jobs()
        beside = sys.modules.get("declaw_shell.subprocesses")  # (imported once a program asks)
        outliving = beside is not None and beside.outliving()
        if jobs or outliving:
            for stream in (self.stdout, self.stderr):
                stream.flush()
            answer = door.call("detach", status=status & 0xFF)
            while jobs:
                await asyncio.wait(jobs)
                jobs = shells.running_jobs()
            if beside is not None and outliving and not (isinstance(answer, dict) and "error" in answer):
                await beside.wait_outliving()
        return status


def run_command(cwd: str, script: str, env: dict[str, str]) -> int:
    """One command line, like `bash -c SCRIPT`; its exit status."""
    return Session(cwd, env).run(script)


def run_terminal(cwd: str, env: dict[str, str]) -> int:
    """An interactive shell on a PTY: prompt, read a command (more lines while it is
    unfinished), run it; until `exit` or end of input."""
    terminal = door.Terminal(lambda text: (sys.stdout.write(text), sys.stdout.flush()))
    session = Session(cwd, env, terminal=terminal)
    state = session.state
    for name, value in (("TERM", "xterm-256color"), ("LANG", "C.UTF-8"), ("LC_ALL", "C.UTF-8")):
        state.variables.setdefault(name, value)
        state.exported_names.add(name)
    while True:
        _update_size(session, terminal)
        session.write_out(_prompt(state))
        try:
            text = terminal.read_line()
            if not text:
                session.write_out("exit\n")
                return session.finish(state.last_exit_code)
            while script_needs_more_lines(text):
                session.write_out("> ")
                more = terminal.read_line()
                if not more:
                    break
                text += more
        except door.Interrupted:
            state.last_exit_code = EXIT_INTERRUPTED
            continue
        _update_size(session, terminal)  # it may have changed while the line was typed
        status = session.run(text)
        if session.executor.exited:
            return session.finish(status)


def _update_size(session: Session, terminal: door.Terminal) -> None:
    """bash's checkwinsize: $LINES and $COLUMNS follow the terminal's size."""
    rows, cols = terminal.size()
    for name, value in (("LINES", rows), ("COLUMNS", cols)):
        session.state.variables[name] = str(value)
        session.state.exported_names.add(name)


def _prompt(state: GuestState) -> str:
    cwd = str(state.cwd)
    home = state.variables.get("HOME", "")
    if home and (cwd == home or cwd.startswith(home.rstrip("/") + "/")):
        cwd = "~" + cwd[len(home.rstrip("/")):]
    user = state.variables.get("USER", "user")
    host = state.variables.get("HOSTNAME", "sandbox")
    return "%s@%s:%s$ " % (user, host, cwd)
