"""A running command on the host side: one guest running the in-guest shell, its pid, its live
stdin, and its output as a sequence of events that handles, callbacks and waiters all read.

Every command line (`commands.run`, background or not, and every PTY) is one guest instance:
the shell (runtime/declaw_shell) parses and runs the whole line inside it, programs and all.
Two commands of a sandbox are two instances: they run at once and share the sandbox's files.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Literal, Optional

from .exceptions import InvalidArgumentException, SandboxException
from .guest import Guest, GuestOutcome, GuestSpec, OutputSink
from .models import PtySize
from .packages import install_for_guest

if TYPE_CHECKING:
    from .sandbox import SandboxCore

GUEST_PYTHON = "/usr/local/bin/python3"
BOOT_SCRIPT = "/usr/local/lib/declaw/_declaw_boot.py"
KILLED_EXIT_CODE = 137  # what bash reports for a SIGKILLed child
PTY_DEFAULT_ENV = {"TERM": "xterm-256color", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}

Stream = Literal["stdout", "stderr", "pty"]


def boot_spec(warm: bool, entry: str, args: list[Any], cold_args: list[str], env: dict[str, str],
              profile: Optional[dict[str, Any]] = None, **spec: Any) -> GuestSpec:
    """A guest whose program is one of the boot module's entries (runtime/_declaw_boot.py): on
    the warm snapshot, one turn calling `_declaw_boot.<entry>(*args)` (the module is already
    imported); on the cold module, `run` with the boot script and `cold_args` as its argv.
    `profile` is the template's (templates.GuestTemplate.profile); `spec` holds GuestSpec's
    other fields."""
    if warm:
        call = ", ".join([*(repr(arg) for arg in args), f"profile={profile!r}"])
        return GuestSpec(argv=[GUEST_PYTHON], env=env,
                         turns=[f"import _declaw_boot\n_declaw_boot.{entry}({call})\n"], **spec)
    profile_args = ["--profile", json.dumps(profile)] if profile else []
    return GuestSpec(argv=[GUEST_PYTHON, BOOT_SCRIPT, *profile_args, *cold_args], env=env, **spec)


def turns_spec(warm: bool, entry: str, args: list[Any], env: dict[str, str],
               profile: Optional[dict[str, Any]] = None, **spec: Any) -> GuestSpec:
    """A guest that runs as turns on both paths (a code context): its first turn calls
    `_declaw_boot.<entry>(*args, profile=...)`, on the cold module after loading the boot module
    from its file (there, nothing has imported it)."""
    call = ", ".join([*(repr(arg) for arg in args), f"profile={profile!r}"])
    load = "import _declaw_boot\n" if warm else (
        "import sys, importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('_declaw_boot', {BOOT_SCRIPT!r})\n"
        "_declaw_boot = importlib.util.module_from_spec(spec)\n"
        "sys.modules['_declaw_boot'] = _declaw_boot\n"
        "spec.loader.exec_module(_declaw_boot)\n"
        "del spec\n")
    return GuestSpec(argv=[GUEST_PYTHON], env=env, turns=[f"{load}_declaw_boot.{entry}({call})\n"], **spec)


def shell_spec(warm: bool, cwd: str, script: str, env: dict[str, str], tty: bool,
               **spec: Any) -> GuestSpec:
    """The shell running `script` in `cwd` (or, with `tty`, an interactive shell)."""
    cold_args = ["--pty", cwd] if tty else ["--shell", cwd, script]
    return boot_spec(warm, "shell", [cwd, script, env, tty], cold_args, env, **spec)


def python_spec(warm: bool, cwd: str, args: list[str], env: dict[str, str], **spec: Any) -> GuestSpec:
    """`python3 ARGS` alone, without the shell (the snapshot's self-check, the site's compile)."""
    return boot_spec(warm, "start", [cwd, args, env], [cwd, *args], env, **spec)


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

    def read(self, guest: Guest, size: int, wait: Any = None) -> Optional[bytes]:
        """Up to `size` bytes, waiting until some arrive; b"" once closed and drained. `wait`
        (seconds, from the guest's `timeout`): None if nothing came in that time."""
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


@dataclass
class Event:
    stream: Stream
    data: Any  # str for stdout/stderr, bytes for a PTY


class EventLog:
    """A command's output as a list of events that handles, callbacks and waiters all read;
    `done` says no more will come. A local `Process` and remote.py's copy of a served command
    both keep one."""

    _events: list[Event]
    _cond: threading.Condition
    _callbacks: dict[Any, Optional[Callable[[Any], None]]]

    @property
    def done(self) -> bool:
        raise NotImplementedError

    def set_callbacks(self, **callbacks: Optional[Callable[[Any], None]]) -> None:
        for stream, callback in callbacks.items():
            if callback is not None:
                self._callbacks[stream] = callback

    def text(self, stream: str) -> str:
        """Everything written to `stream` so far."""
        with self._cond:
            return "".join(e.data for e in self._events if e.stream == stream)

    def events(self, start: int = 0) -> Iterator[Event]:
        """Every event from `start` on, waiting for more until the command has ended."""
        index = start
        while True:
            with self._cond:
                while index >= len(self._events) and not self.done:
                    self._cond.wait(0.1)
                if index >= len(self._events):
                    return
                batch = self._events[index:]
            index += len(batch)
            yield from batch


class Process(EventLog):
    """One command (or PTY) of a sandbox, from start to exit."""

    def __init__(self, core: "SandboxCore", pid: int, cmd: str, cwd: str, env: dict[str, str],
                 envs: dict[str, str], timeout: Optional[float], stdin: bool,
                 on_stdout: Optional[Callable[[str], None]] = None,
                 on_stderr: Optional[Callable[[str], None]] = None,
                 pty: Optional[PtySize] = None, on_pty: Optional[Callable[[bytes], None]] = None,
                 tag: Optional[str] = None) -> None:
        self.core = core
        self.pid = pid
        self.cmd = cmd
        self.cwd = cwd
        self.envs = envs
        self.tag = tag
        self.pty_size = pty
        self.stdin = StdinPipe(open_=stdin or pty is not None)
        self._events: list[Event] = []
        self._cond = threading.Condition()
        self._callbacks: dict[Stream, Optional[Callable[[Any], None]]] = {
            "stdout": on_stdout, "stderr": on_stderr, "pty": on_pty}
        self.killed = False
        self.quota_message = ""
        limits = core.limits
        stdout = OutputSink(limits.output_limit, self._on_output("stdout"))
        stderr = OutputSink(limits.output_limit, self._on_output("stderr"))
        spec = shell_spec(core.runtime.warm, cwd, cmd, env, tty=pty is not None,
                          profile=core.profile, mounts=core.fs.mounts, timeout=timeout or None,
                          memory_limit=limits.memory_limit, output_limit=limits.output_limit)
        self.guest = Guest(core.runtime, spec, stdout=stdout, stderr=stderr, door=self._door)
        self.outcome: Optional[GuestOutcome] = None

    # -- output ------------------------------------------------------------------------------
    def _on_output(self, stream: Stream) -> Callable[[str], None]:
        def deliver(text: str) -> None:
            if self.pty_size is not None:  # a tty's one stream, with onlcr
                self._emit("pty", text.replace("\r\n", "\n").replace("\n", "\r\n").encode())
            else:
                self._emit(stream, text)
        return deliver

    def _emit(self, stream: Stream, data: Any) -> None:
        with self._cond:
            self._events.append(Event(stream, data))
            self._cond.notify_all()
        callback = self._callbacks.get(stream)
        if callback is not None:
            try:
                callback(data)
            except Exception:  # a caller's callback bug must not break the guest
                pass

    def events_since(self, start: int, wait: float) -> tuple[list[Event], bool]:
        """The events from `start` on, waiting at most `wait` seconds for one; and whether the
        command has exited (then the list holds everything left). For the server's streams,
        which must not block a thread for as long as a quiet command runs."""
        deadline = time.monotonic() + wait
        with self._cond:
            while start >= len(self._events) and not self.done:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, 0.1))
            return self._events[start:], self.done

    # -- the door: requests from the guest ---------------------------------------------------
    def _door(self, guest: Guest, request: Any) -> Any:
        op = request.get("op") if isinstance(request, dict) else None
        if op == "stdin":
            return self.stdin.read(guest, request.get("n", 65536), request.get("wait"))
        if op == "winsize":
            size = self.pty_size or PtySize(rows=24, cols=80)
            return [size.rows, size.cols]
        if op == "pip_install":
            return install_for_guest(self.core.fs, request, guest.stop_requested)
        raise ValueError(f"unknown door request {op!r}")

    # -- lifetime ------------------------------------------------------------------------------
    def start(self) -> None:
        self.guest.start()
        threading.Thread(target=self._reap, name=f"declaw-reap-{self.pid}", daemon=True).start()

    def _reap(self) -> None:
        outcome = self.guest.wait()
        with self._cond:
            self.outcome = outcome
            self._cond.notify_all()
        self.core.forget_process(self)

    @property
    def done(self) -> bool:
        return self.outcome is not None

    def wait(self, timeout: Optional[float] = None) -> Optional[GuestOutcome]:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self.outcome is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cond.wait(left if left is not None else 0.5)
            return self.outcome

    def kill(self) -> bool:
        if self.done:
            return False
        self.killed = True
        self.guest.kill("killed")
        return True

    def stop_for_quota(self, message: str) -> None:
        self.quota_message = message
        self.guest.kill("quota")

    def send_stdin(self, data: Any) -> None:
        if isinstance(data, str):
            data = data.encode()
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise InvalidArgumentException(f"stdin data must be str or bytes, got {type(data).__name__}")
        if self.done:
            raise SandboxException(f"process {self.pid} has exited")
        self.stdin.write(bytes(data))

    def resize(self, size: PtySize) -> None:
        if self.pty_size is None:
            raise InvalidArgumentException(f"process {self.pid} is not a PTY")
        self.pty_size = _check_size(size)


def _check_size(size: Any) -> PtySize:
    if not isinstance(size, PtySize) or not (0 < size.rows <= 10000 and 0 < size.cols <= 10000):
        raise InvalidArgumentException(f"size must be a PtySize with positive rows and cols, got {size!r}")
    return size
