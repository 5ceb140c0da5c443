"""A running command on the host side: one guest running the in-guest shell, its pid, its live
stdin, and its output as a sequence of events that handles, callbacks and waiters all read.

Every command line (`commands.run`, background or not, and every PTY) is one guest instance:
the shell (guest/declaw_shell) parses and runs the whole line inside it, programs and all.
Two commands of a sandbox are two instances: they run at once and share the sandbox's files.
"""

from __future__ import annotations

import shlex
import threading
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Optional

from .._model import construct
from .._backend import Callback, EventLog, Stream
from .._wasm.boot import shell_turn
from .._wasm.guest import Guest, GuestOutcome
from ..exceptions import InvalidArgumentException, SandboxException, TimeoutException
from ..models import CommandResult, ProcessInfo, PtySize
from ..wire import RunCommand
from .._args import command
from .._wasm.door import NO_NUL, Chars, Int, List, Map, Num, Op, RequestError, Str, Word
from .doors import Routes, dispatch, routes

if TYPE_CHECKING:
    from .launcher import GuestSandbox

MAX_ARG = 128 << 10  # characters of one argument or value (Linux's MAX_ARG_STRLEN)
MAX_ARGS = 4096
MAX_PATH = 4096
MAX_ENV = 4096
MAX_ENV_NAME = 256
ENV_NAME = Chars.excluding("no '=' or NUL", "=\x00")
MAX_STDIN = 8 << 20  # (the door's frame bounds a request first)
READ_BYTES = 1 << 20  # of output per spawn.read answer (an event longer is cut, the rest read next)
# `python3 ... &` programs running at once in a sandbox, each a guest (memory_limit each) that guest
# code, not the caller, asked for: a line beyond it runs the program in its own guest, in turn
MAX_SPAWNED = 4

# The door ops a command's guest may use besides the network's and host tools' (doors.py);
# their handlers are Process's below.
STDIN = Op("stdin", {"n": Int(0, (1 << 63) - 1, doc="bytes wanted (the host gives at most 1 MiB)"),
                     "wait": Num(0, 1e9, null=True, doc="seconds to wait at most (the host waits 60 at most)")},
           "bytes | nil", "up to n bytes of the command's live stdin, waiting for some (at most `wait` "
           "seconds if given: nil when none came); b'' at end of input")
WINSIZE = Op("winsize", {}, "[rows, cols]", "the terminal's size")
SYSINFO = Op("sysinfo", {}, "{pid, self_memory, mem_total, mem_used, uptime, cpus, processes: [{pid, cmd, "
             "args, cwd, tty, started, cpu, memory, spawned}]}",
             "what `free`, `ps`, `uptime` and `resource.getrusage` show: the sandbox's memory limit and "
             "its guests' use (as get_metrics), its running commands (as commands.list(); `pid` is the "
             "asker's, 0 for a code context), the asking guest's memory")
DISK = Op("disk", {}, "{bytes_total, bytes_used, files_total, files_used}",
           "what `df`, `os.statvfs` and `shutil.disk_usage` show: this sandbox's disk quota "
           "(Limits.disk_bytes, disk_files) and what its writable folders hold now")
DETACH = Op("detach", {"status": Int(0, 255, required=True, doc="the line's exit status")}, "nil",
             "the command line ended with `status` while jobs it started with `&` run on (bash leaves them "
             "running): the command is over for its caller (its result, `wait()`, the handle's events end); "
             "the guest goes on with the jobs, listed and killable under the command's pid, without the "
             "command's timeout, until they end or the sandbox does. Once per command; not for a PTY")
OUT_MODES = ("pipe", "null", "parent")
SPAWN = Op("spawn", {
    "args": List(Str(MAX_ARG, NO_NUL), MAX_ARGS, required=True, doc="the arguments after `python3`"),
    "cwd": Str(MAX_PATH, NO_NUL, min_len=1, required=True, doc="its working directory (a guest path)"),
    "env": Map(Str(MAX_ENV_NAME, ENV_NAME, min_len=1), Str(MAX_ARG, NO_NUL), MAX_ENV, required=True,
               doc="its whole environment (the line's exported variables)"),
    "stdin": Str(MAX_STDIN, null=True, doc="its whole input (a redirect or a pipe); none: end of input"),
    "stdout": Word(OUT_MODES, doc="pipe (the default): kept for spawn.read; null: dropped; parent: the "
                                  "asker's own output (a command's stdout, a cell's)"),
    "stderr": Word((*OUT_MODES, "stdout"), doc="as stdout; stdout: where its stdout goes"),
    "stdout_file": Str(MAX_PATH, NO_NUL, min_len=1, null=True,
                       doc="a guest path its stdout is appended to (the host adds `>> PATH` to its line)"),
    "stderr_file": Str(MAX_PATH, NO_NUL, min_len=1, null=True, doc="the same for stderr (`2>> PATH`)")},
    "pid | error", "`python3 ARGS` beside the asker (a `cmd &` job's program, a `subprocess.Popen` of a "
    "Python program: a Python program holds its guest's one thread): a command of the sandbox of its "
    "own, in a new guest, `python3` and the arguments quoted by the host (shlex.join, and the files' "
    "redirects) as its line, without a timeout; bound by max_processes and MAX_SPAWNED and refused "
    "during a snapshot as any command is; killed when the asking command ends or the asking code "
    "context's guest does")
SPAWN_READ = Op("spawn.read", {"pid": Int(1, (1 << 31) - 1, required=True, doc="a program the asker spawned"),
                               "start": Int(0, (1 << 63) - 1, required=True, doc="events read whole so far"),
                               "skip": Int(0, (1 << 63) - 1, doc="bytes read of event `start`")},
                "{events: [[stream, bytes]], next: [start, skip], exit: int | nil, truncated?: [stream], "
                "killed?: bool} | error",
                "what the spawned program wrote from there on (UTF-8, at most 1 MiB), without waiting, and "
                "where the next read starts; its exit status once it has ended and everything is read (then "
                "it is forgotten), with the streams cut at the sandbox's output limit")
SPAWN_KILL = Op("spawn.kill", {"pid": Int(1, (1 << 31) - 1, required=True, doc="a program the asker spawned")},
                "bool", "kill a spawned program (its job ended first: `kill %1`); forgets it")
KILL = Op("kill", {"pid": Int(1, (1 << 31) - 1, required=True, doc="a command of the sandbox (`ps`'s PID)"),
                   "signal": Int(0, 64, required=True, doc="0: only ask whether it runs")},
          "bool | error", "`kill PID`, `pkill`: end a running command or PTY of this sandbox (every signal "
          "but 0 ends it, as SIGKILL would: a guest has no handlers another guest can reach); an error "
          "names a pid the sandbox does not run")
SPAWN_OPS = (SPAWN, SPAWN_READ, SPAWN_KILL)  # also a code context's (kernel.py)
COMMAND_OPS = (STDIN, WINSIZE, SYSINFO, DISK, DETACH, *SPAWN_OPS, KILL)

KILLED_EXIT_CODE = 137  # what bash reports for a SIGKILLed child
CPU_LIMIT_EXIT_CODE = 152  # what bash reports for a child past its CPU limit (SIGXCPU)


class StdinPipe:
    """The command's stdin: bytes the host sends, read by the guest through the door."""

    def __init__(self, open_: bool) -> None:
        self._buffer = bytearray()
        self._closed = not open_
        self._cond = threading.Condition()

    def write(self, data: bytes) -> None:
        with self._cond:
            if self._closed:
                raise SandboxException("stdin of this command is closed (start it with stdin=True "
                                       "to send input)")
            self._buffer += data
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def read(self, guest: Guest, size: Any, wait: Any = None) -> Optional[bytes]:
        """Up to `size` bytes, waiting until some arrive; b"" once closed and drained. `wait`
        (seconds, at most 60: a guest's `timeout` bounding its read): None if nothing came in
        that time."""
        size = max(1, min(int(size), 1 << 20))
        until = None
        if isinstance(wait, (int, float)) and not isinstance(wait, bool):
            until = time.monotonic() + min(max(float(wait), 0.0), 60.0)
        while True:
            with self._cond:
                if self._buffer:
                    data = bytes(self._buffer[:size])
                    del self._buffer[:size]
                    return data
                if self._closed:
                    return b""
                if until is not None and time.monotonic() >= until:
                    return None
                self._cond.wait(0.05)
            guest.check_stopped()


class Process(EventLog):
    """One command (or PTY) of a sandbox, from start to exit: the local `ProcessHandle`."""

    def __init__(self, sandbox: "GuestSandbox", pid: int, cmd: str, cwd: str, env: dict[str, str],
                 envs: dict[str, str], timeout: Optional[float], stdin: bool,
                 pty: Optional[PtySize] = None, tag: Optional[str] = None,
                 callbacks: Optional[dict[str, Callback]] = None, parked: Optional[Guest] = None,
                 spawned: Optional["Outputs"] = None) -> None:
        """`parked`: the sandbox's parked guest (parking.py), booted and waiting: the line
        becomes its next turn. Otherwise the command gets a fresh guest. `spawned`: a program
        another guest started (`spawn`), and where its output goes."""
        self.spawned = spawned is not None
        self._outputs = spawned or Outputs()
        self.sandbox = sandbox
        self.pid = pid
        self.cmd = cmd
        self.cwd = cwd
        self.envs = envs
        self.tag = tag
        self.pty_size = pty
        self.stdin = StdinPipe(open_=stdin or pty is not None)
        self._cond = threading.Condition()
        self._callbacks = dict(callbacks or {})
        self.killed = False
        self.quota_message = ""
        self.started = time.time()  # `ps`'s START and TIME (doors.py: sysinfo)
        self._tools = sandbox.launcher.tool_door(lambda: (sandbox.tools,))  # create(tools=)
        # the programs its `python3 ... &` jobs and its programs' Popen run (spawn)
        self._spawner = Spawner(sandbox, self._sink, lambda: self.outcome is not None)
        self._routes: Routes = routes(  # what a command's guest may ask (doors.py)
            (STDIN, lambda guest, r: self.stdin.read(guest, r.get("n", 65536), r.get("wait"))),
            (WINSIZE, lambda guest, r: list(self._winsize())),
            (SYSINFO, lambda guest, r: sandbox.system_view(self.pid, guest)),
            (DISK, lambda guest, r: sandbox.disk_view()),
            (DETACH, lambda guest, r: self._detach(guest, r["status"])),
            *self._spawner.routes(), (KILL, lambda guest, r: kill_in(sandbox, r)),
            *sandbox.launcher.routes(self._tools))  # pip, the network (_egress), host tools
        self.timeout = timeout or None
        self._env = env
        self.outcome: Optional[GuestOutcome] = None
        self._line_end: Optional[GuestOutcome] = None  # the line's result when its jobs outlive it
        self.memory_bytes = 0  # the guest's memory at its end
        self._began = False  # the line's turn started (in a parked guest)
        self._parked = parked
        self.guest = self._bind(parked) if parked is not None else self._fresh_guest()

    def _fresh_guest(self) -> Guest:
        return self.sandbox.launcher.shell(self.cwd, self.cmd, self._env, self.pty_size is not None, self.timeout,
                                           self._on_output("stdout"), self._on_output("stderr"), self._door,
                                           self._finished)

    def _bind(self, guest: Guest) -> Guest:
        """Make the parked guest this command's: its output, its door, its end (a command's text
        is its event log's; a PTY's sinks keep the raw one)."""
        return self.sandbox.launcher.bind(guest, self._on_output("stdout"), self._on_output("stderr"), self._door,
                                          keep=self.pty_size is not None, on_done=self._finished)

    def info(self) -> ProcessInfo:
        args = ["-i", "-l"] if self.pty_size is not None else ["-l", "-c", self.cmd]
        return ProcessInfo(pid=self.pid, tag=self.tag, cmd=self.cmd or "/bin/bash", args=args,
                           envs=dict(self.envs), cwd=self.cwd, is_pty=self.pty_size is not None)

    def ps_row(self) -> dict[str, Any]:
        """This command as `ps` in the guest lists it (doors.py: sysinfo); the command line is
        cut at 4 KiB (the door's answer stays small)."""
        info = self.info()
        return {"pid": self.pid, "cmd": info.cmd[:4096], "args": info.args[:2], "cwd": self.cwd[:4096],
                "tty": self.pty_size is not None, "started": self.started,
                "cpu": round(self.guest.cpu_seconds(), 3), "memory": self.guest.memory_bytes(), "spawned": self.spawned}

    # -- output ------------------------------------------------------------------------------
    def _on_output(self, stream: Stream) -> Callable[[str], None]:
        if stream == "stderr" and self._outputs.merged:
            stream = "stdout"
        if stream in self._outputs.elsewhere:  # a spawned program's stream, dropped or the asker's
            return self._outputs.elsewhere[stream] or _drop

        def deliver(text: str) -> None:
            if self.pty_size is not None:  # a tty's one stream, with onlcr
                self._emit("pty", text.replace("\r\n", "\n").replace("\n", "\r\n").encode())
            else:
                self._emit(stream, text)
        return deliver

    def _sink(self, stream: Stream) -> Callable[[str], None]:
        """Output its spawned programs give it (spawn's `parent`): as if its guest wrote it, within
        its output limit."""
        def write(text: str) -> None:
            sink = self.guest.stdout if stream == "stdout" else self.guest.stderr
            sink(text.encode("utf-8", "surrogatepass"))
        return write

    def _door(self, guest: Guest, request: Any) -> Any:
        return dispatch(self._routes, guest, request)

    def _winsize(self) -> tuple[int, int]:
        size = self.pty_size or PtySize(rows=24, cols=80)
        return size.rows, size.cols

    # -- lifetime ------------------------------------------------------------------------------
    def start(self) -> None:
        if self._parked is None:
            self.guest.start()
            return
        self.guest.set_deadline(self.timeout)  # the command's time counts from now

        def starting() -> None:
            self._began = True

        line = shell_turn(self.cwd, self.cmd, self._env, self.pty_size is not None)
        self.guest.run_turn(line, starting, lambda _code: None, fuel=self.sandbox.limits.cpu_instructions,
                            last=True)

    def _finished(self, guest: Guest) -> None:
        """The guest ended (on its thread): publish the outcome."""
        outcome = guest.wait()
        self.memory_bytes = guest.memory_at_end  # its peak (a linear memory never shrinks): the events'
        self.sandbox.launcher.released(guest)  # its connections close with it
        self._tools.reset()
        if self._parked is not None and not self._began and outcome is not None and outcome.stopped is None \
                and self.sandbox.running:
            # the parked guest ended before the line's turn began (it failed to park, or was
            # stopped): run the line in a fresh guest instead
            self._parked = None
            self.guest = self._fresh_guest()
            self.guest.start()
            return
        if self.sandbox.limits.cpu_instructions:  # counted before the caller can ask the metrics
            self.sandbox.count_fuel(guest.fuel_used)
        with self._cond:
            self.outcome = outcome
            self._cond.notify_all()
        self._spawner.end_all()  # its jobs' programs end with it, as its other jobs did
        self.sandbox.forget_process(self)

    def _detach(self, guest: Guest, status: int) -> Optional[dict[str, Any]]:
        """The line ended and left `cmd &` jobs running (the `detach` op): its caller gets the
        line's result now, with the output so far; the guest runs on with the jobs, without the
        command's deadline (the sandbox's end, its limits and `kill` still stop it)."""
        if self.pty_size is not None:
            return RequestError("detach", "", "a terminal's shell keeps its jobs").reply()
        if self.spawned:  # its line's reads would take it for ended, and stop holding it
            return RequestError("detach", "", "a job's program has no line of its own to end").reply()
        with self._cond:
            if self._line_end is not None or self.outcome is not None:
                return RequestError("detach", "", "the line has ended already").reply()
            truncated = [name for name, sink in (("stdout", guest.stdout), ("stderr", guest.stderr)) if sink.truncated]
            # the text is the event log's (result()); the instructions are counted when the guest ends
            self._line_end = GuestOutcome(exit_code=status, stdout=self.text("stdout"), stderr=self.text("stderr"),
                                          truncated=truncated)
            self._cond.notify_all()
        guest.set_deadline(None)
        return None

    def status(self) -> int:
        """The exit status bash's `wait` reports for this ended command: its result's (a
        command stopped by its deadline or the sandbox's end was killed: 137)."""
        try:
            return self.result().exit_code & 0xFF
        except TimeoutException:
            return KILLED_EXIT_CODE

    @property
    def done(self) -> bool:
        """The command is over for its caller (its events end): it ended, or its line did and
        left jobs running."""
        return self.outcome is not None or self._line_end is not None

    @property
    def running(self) -> bool:
        """Its guest runs: the command, or the jobs its line left running (listed, counted
        against `max_processes`, stopped for the quota, in the way of a snapshot, killable)."""
        return self.outcome is None

    def wait(self, timeout: Optional[float] = None) -> Optional[GuestOutcome]:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self.outcome is None and self._line_end is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cond.wait(left if left is not None else 0.5)
            return self.outcome if self._line_end is None else self._line_end

    def result(self) -> CommandResult:
        outcome = self.wait()
        assert outcome is not None
        if self.pty_size is None and outcome is not self._line_end:  # the text is the event log's (its sinks keep none)
            outcome = replace(outcome, stdout=self.text("stdout"), stderr=self.text("stderr"))
        if outcome.stopped == "timeout":
            raise TimeoutException(f"command timed out: {self.cmd!r}", outcome.stdout, outcome.stderr)
        if outcome.stopped == "quota":
            return construct(CommandResult, stdout=outcome.stdout, stderr=outcome.stderr,
                                                 exit_code=KILLED_EXIT_CODE, error=self.quota_message)
        used = outcome.fuel_used if self.sandbox.limits.cpu_instructions else None
        if outcome.stopped == "fuel":
            budget = self.sandbox.limits.cpu_instructions
            return construct(CommandResult,
                stdout=outcome.stdout, stderr=outcome.stderr, exit_code=CPU_LIMIT_EXIT_CODE,
                error=f"CPU limit reached: the command used its budget of {budget:,} instructions "
                      "(Limits.cpu_instructions) and was stopped",
                cpu_instructions_used=used)
        if outcome.stopped == "killed" and not self.killed:
            raise TimeoutException(f"sandbox {self.sandbox.sandbox_id}: the sandbox was killed or reached its "
                                   "end of life while the command ran", outcome.stdout, outcome.stderr)
        error = None
        exit_code = outcome.exit_code
        if self.killed:
            exit_code, error = KILLED_EXIT_CODE, "killed"
        elif outcome.error:
            error = outcome.error
        elif outcome.truncated:
            error = f"{' and '.join(outcome.truncated)} truncated at the sandbox's output limit"
        # our own values: constructed, not validated (a first validation costs ~20 ms)
        return construct(CommandResult, stdout=outcome.stdout, stderr=outcome.stderr, exit_code=exit_code,
                                             error=error, cpu_instructions_used=used)

    def kill(self) -> bool:
        if self.outcome is not None:  # a line's jobs that outlive it are still this command's
            return False
        self.killed = True
        self.guest.kill("killed")
        return True

    def stop_for_quota(self, message: str) -> None:
        self.quota_message = message
        self.guest.kill("quota")

    def send_stdin(self, data: bytes) -> None:
        if not self.running:
            raise SandboxException(f"process {self.pid} has exited")
        self.stdin.write(bytes(data))

    def close_stdin(self) -> None:
        self.stdin.close()

    def resize(self, size: PtySize) -> None:
        if self.pty_size is None:
            raise InvalidArgumentException(f"process {self.pid} is not a PTY")
        self.pty_size = size



def kill_in(sandbox: "GuestSandbox", request: dict[str, Any]) -> Any:
    """`kill PID` (and `os.kill`) of a command of the asker's sandbox (the asking command's own
    pid too, as `kill $$` would)."""
    try:
        target = sandbox.process(request["pid"])
    except SandboxException:
        return RequestError("kill", "pid", f"({request['pid']}) - No such process").reply()
    return True if request["signal"] == 0 else target.kill()


def _drop(text: str) -> None:
    """A spawned program's stream its asker sent to /dev/null."""


@dataclass(frozen=True)
class Outputs:
    """Where a spawned program's output goes: its own event log (read with spawn.read) unless
    `elsewhere` names the stream (None: dropped; else the asker's sink); `merged`: its stderr
    goes where its stdout does."""

    elsewhere: dict[Stream, Optional[Callable[[str], None]]] = field(default_factory=dict)
    merged: bool = False


class Spawner:
    """The programs one asker (a command's guest, a code context's) started with `spawn`: held
    until read to their end or killed, and killed when the asker ends (`end_all`)."""

    def __init__(self, sandbox: "GuestSandbox", parent: Callable[[Stream], Callable[[str], None]],
                 stopped: Callable[[], bool]) -> None:
        self.sandbox = sandbox
        self._parent = parent  # the asker's own output, for `parent`
        self._stopped = stopped  # the asker has ended (or is ending)
        self._lock = threading.Lock()
        self._children: dict[int, Process] = {}

    def routes(self) -> tuple[tuple[Op, Callable[[Guest, dict[str, Any]], Any]], ...]:
        return (SPAWN, self._spawn), (SPAWN_READ, self._read), (SPAWN_KILL, self._kill)

    def _spawn(self, guest: Guest, request: dict[str, Any]) -> Any:
        """Start the program as a command of the sandbox (every bound a command has). Not with a
        CPU limit: the program would get a budget of its own, and the asker could run any number
        of budgets in turn; there it runs in the asker's guest, on the asker's budget."""
        if self.sandbox.limits.cpu_instructions:
            return RequestError("spawn", "", "the sandbox has a CPU limit (Limits.cpu_instructions): a "
                                "program runs on its asker's budget, in the asker's guest").reply()
        stdin = request.get("stdin")
        out, err = request.get("stdout", "pipe"), request.get("stderr", "pipe")
        words = shlex.join(["python3", *request["args"]])
        for redirect, path in ((">>", request.get("stdout_file")), ("2>>", request.get("stderr_file"))):
            if path is not None:  # a guest path, for the program's shell in the sandbox's own files
                words += f" {redirect} {shlex.quote(path)}"
        if request.get("stdout_file") is not None and err == "stdout" and request.get("stderr_file") is None:
            words += " 2>&1"
        elsewhere: dict[Stream, Optional[Callable[[str], None]]] = {}
        modes: tuple[tuple[Stream, str], ...] = (("stdout", out), ("stderr", err))
        for stream, mode in modes:
            if mode in ("null", "parent"):
                elsewhere[stream] = self._parent(stream) if mode == "parent" else None
        try:
            line = command(words)  # as commands.run's are bounded
            child = self.sandbox.start(RunCommand(cmd=line, cwd=request["cwd"], envs=request["env"], timeout=0,
                                                  stdin=stdin if stdin is not None else False, background=True),
                                       spawned=Outputs(elsewhere, merged=err == "stdout"))
        except SandboxException as exc:
            return RequestError("spawn", "", str(exc)).reply()
        with self._lock:
            self._children[child.pid] = child
        if self._stopped():  # the asker ended while it started: its end_all did not see it
            self._forget(child)
            child.kill()
        return child.pid

    def _child(self, op: str, pid: int) -> "Process | dict[str, Any]":
        with self._lock:
            child = self._children.get(pid)
        return child if child is not None else RequestError(op, "pid", f"{pid} is not a program the asker "
                                                                       "started, or it was read to its end").reply()

    def _read(self, guest: Guest, request: dict[str, Any]) -> Any:
        child = self._child("spawn.read", request["pid"])
        if not isinstance(child, Process):
            return child
        pieces, start, skip, ended = child.read_raw(request["start"], request.get("skip", 0), READ_BYTES)
        answer: dict[str, Any] = {"events": [list(piece) for piece in pieces], "next": [start, skip], "exit": None}
        if ended and not child.running:
            answer["exit"] = child.status()
            answer["truncated"] = list(child.outcome.truncated) if child.outcome is not None else []
            answer["killed"] = child.killed  # `kill PID`, os.kill: a signal's status, not an exit's
            self._forget(child)
        return answer

    def _kill(self, guest: Guest, request: dict[str, Any]) -> Any:
        child = self._child("spawn.kill", request["pid"])
        if not isinstance(child, Process):
            return child
        self._forget(child)
        return child.kill()

    def _forget(self, child: Process) -> None:
        """A spawned program read to its end or killed: its output and its place among the
        sandbox's MAX_SPAWNED are given up."""
        with self._lock:
            held = self._children.pop(child.pid, None) is not None
        if held:
            self.sandbox.release_spawned()

    def end_all(self) -> None:
        """The asker has ended: its programs end with it."""
        with self._lock:
            children = list(self._children.values())
        for child in children:
            self._forget(child)
            child.kill()
