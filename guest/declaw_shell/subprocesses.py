"""`subprocess`, `os.system` and `os.popen` in the sandbox: a child runs through the sandbox
shell, in this process.

WASI has no processes: CPython's `subprocess.Popen` raises `OSError: [Errno 58] wasi does not
support processes`, and `os.system` does not exist. Programs written for Linux (and so the code
agents write) call them all the same: `subprocess.run(["pip", "install", "x"])`,
`subprocess.check_output("ls | wc -l", shell=True)`, `os.system("echo hi")`. Here `Popen` runs its
command line with the shell that runs `commands.run` (the shell's `python3` stage is a child of
its own: own `__main__`, argv, environment, cwd, streams, exit status; see
`_declaw_boot.run_process`), as a cell's `!cmd` does, and hands back what a finished child
would: its exit status, its output through the pipes asked for.

A `Popen` of a Python program (`python3`, `sys.executable`, a package's console script) that
the parent does not wait for at once (not `run`, `call`, `check_output`, `os.system`) and whose
stdin is not a pipe runs beside the parent, as on Linux: the host starts it as a command of the
sandbox in a guest of its own (the `spawn` door op; `_Spawned` below), so `Popen([sys.executable,
"-m", "http.server"])` returns at once and the parent can talk to the server. `pid` is its `ps`
PID; `poll`, `wait(timeout)`, `communicate`, reading its pipes as it writes, `terminate`, `kill`
work as on Linux. Its output left on the parent's own stdout/stderr (a command's, a cell's) goes
there as it comes; a file's is appended to the file by path; elsewhere (a redirect of the parent)
it is copied when the parent polls, waits or reads. It ends with the command (or the code
context's guest) that started it. Where the host refuses (more than 4 such programs held, a CPU
limit, `max_processes`, a snapshot under way) it runs in this process as below.

Every other child runs on this thread: it has finished when `Popen` returns (a `stdin=PIPE` child
when its input is complete: at `communicate`, `wait`, `poll`, a read of its output, or closing
its stdin), so it cannot run beside the parent or talk with it line by line; `pid` is a number of
its own; `kill`, `terminate` and `send_signal` find it finished. `timeout=` runs it under the
shell's `timeout` (blocking reads and sleeps are stopped; see deadlines.py) and raises
`TimeoutExpired`.
"""

from __future__ import annotations

import codecs
import functools
import io
import itertools
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import time

from declaw_posix import signals

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_pids = itertools.count(4000)
_original_popen: Any = None


class _Input(io.RawIOBase):
    """A child's stdin pipe: what the parent writes is kept; closing it lets the child run."""

    def __init__(self, child: Any) -> None:
        self._child = child
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        if self.closed:
            raise ValueError("write to closed file")
        view = memoryview(data).cast("B")
        self.data += view
        return len(view)

    def close(self) -> None:
        if not self.closed:
            super().close()
            self._child._run_now()


class _Output(io.RawIOBase):
    """A child's stdout or stderr pipe: its bytes, read once the child has run."""

    def __init__(self, child: Any, name: str) -> None:
        self._child = child
        self._name = name
        self._data: io.BytesIO | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._data is None:
            self._child._run_now()
            self._data = io.BytesIO(bytes(self._child._captured[self._name]))
        return self._data.readinto(buffer)


def _text_writer(target: Any) -> Any:
    """A text stream the shell writes to (it writes `str`, undecodable bytes as surrogates)."""
    return io.TextIOWrapper(target, encoding="utf-8", errors="surrogateescape", write_through=True)


def _fd_of(target: Any) -> int:
    """A file object's or a number's file descriptor (a file object flushed first)."""
    if isinstance(target, int):
        return target
    fd = target.fileno()  # io.UnsupportedOperation for a StringIO, as CPython's Popen raises
    target.flush()
    return int(fd)


def _device(target: Any) -> str | None:
    """The device an `open()`ed file object stands for (the boot's devices: `open(os.devnull, "w")`)."""
    for _ in range(3):
        name = getattr(target, "_declaw_device", None)
        if name is not None:
            return str(name)
        target = getattr(target, "buffer", None) or getattr(target, "raw", None)
        if target is None:
            return None
    return None


def _running_loop_hidden() -> Any:
    """The running asyncio loop (a cell with top-level await, an async program), taken away
    while the child's shell runs its own, and given back after; None if there is none."""
    aio: Any = sys.modules.get("asyncio")
    if aio is None:
        return None
    loop = aio.events._get_running_loop()
    if loop is None:
        return None
    task = aio.current_task(loop)
    if task is not None:
        aio.tasks._leave_task(loop, task)
    aio.events._set_running_loop(None)
    return (aio, loop, task)


def _give_back(hidden: Any) -> None:
    if hidden is None:
        return
    aio, loop, task = hidden
    aio.events._set_running_loop(loop)
    if task is not None:
        aio.tasks._enter_task(loop, task)


class _Child:
    """What `Popen` does here (the class `make_popen` puts in front of CPython's own)."""

    returncode: int | None
    stdin: Any
    stdout: Any
    stderr: Any

    def __init__(self, args: Any, bufsize: int = -1, executable: Any = None, stdin: Any = None,
                 stdout: Any = None, stderr: Any = None, preexec_fn: Any = None, close_fds: bool = True,
                 shell: bool = False, cwd: Any = None, env: Any = None, universal_newlines: Any = None,
                 startupinfo: Any = None, creationflags: int = 0, restore_signals: bool = True,
                 start_new_session: bool = False, pass_fds: Any = (), *, encoding: Any = None,
                 errors: Any = None, text: Any = None, **ignored: Any) -> None:
        self._child_created = False  # CPython's __del__ and _cleanup leave it alone
        self.args = args
        self.returncode: int | None = None
        self.pid = next(_pids)
        self.encoding, self.errors = encoding, errors
        self.text_mode = bool(encoding or errors or text or universal_newlines)
        self.universal_newlines = self.text_mode
        self._timeout: float | None = ignored.get("_declaw_timeout")  # run()'s and call()'s
        self._elapsed = 0.0
        self._captured: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        if stdout == subprocess.STDOUT:
            raise ValueError("STDOUT can only be used for stderr")
        self._line = self._command_line(args, executable, shell)
        self._cwd = os.fspath(cwd) if cwd is not None else os.getcwd()
        if isinstance(self._cwd, bytes):
            self._cwd = os.fsdecode(self._cwd)
        if not os.path.isdir(self._cwd):
            raise FileNotFoundError(2, "No such file or directory", self._cwd)
        self._env = {os.fsdecode(k): os.fsdecode(v) for k, v in (os.environ if env is None else env).items()}
        if not shell:
            self._check_program(executable or self._argv0(args))
        self._where = {"stdin": stdin, "stdout": stdout, "stderr": stderr}
        self._ran = False
        self.stdin = self.stdout = self.stderr = None
        self._input: _Input | None = None
        self._beside: _Spawned | None = None
        if not ignored.get("_declaw_waited") and stdin != subprocess.PIPE:
            self._beside = _Spawned.start(self, shell)
        if self._beside is not None:  # running beside us: its pipes read as it writes
            self.pid = self._beside.pid
            self._ran = True
            for name in ("stdout", "stderr"):
                if self._where[name] == subprocess.PIPE:
                    setattr(self, name, self._wrap(io.BufferedReader(_BesideOutput(self._beside,
                                                                                   self._captured[name]))))
            return
        if stdin == subprocess.PIPE:
            self._input = _Input(self)
            self.stdin = self._wrap(io.BufferedWriter(self._input), write=True)
        if stdout == subprocess.PIPE:
            self.stdout = self._wrap(io.BufferedReader(_Output(self, "stdout")))
        if stderr == subprocess.PIPE:
            self.stderr = self._wrap(io.BufferedReader(_Output(self, "stderr")))
        if self._input is None:
            self._run_now()

    # -- what the child runs ------------------------------------------------------------------
    @staticmethod
    def _argv0(args: Any) -> str:
        if isinstance(args, (str, bytes, os.PathLike)):
            return os.fsdecode(args)
        args = list(args)
        if not args:
            raise IndexError("list index out of range")  # CPython's message for Popen([])
        return os.fsdecode(args[0])

    @staticmethod
    def _command_line(args: Any, executable: Any, shell: bool) -> str:
        if shell:
            line = args if isinstance(args, (str, bytes, os.PathLike)) else list(args)[0]
            return os.fsdecode(line)
        argv = [os.fsdecode(args)] if isinstance(args, (str, bytes, os.PathLike)) else \
            [os.fsdecode(a) for a in args]
        if not argv:
            raise IndexError("list index out of range")
        if executable is not None:
            argv[0] = os.fsdecode(executable)
        return shlex.join(argv)

    def _check_program(self, program: Any) -> None:
        """A program that does not exist fails the `Popen`, as exec would, before anything runs."""
        program = os.fsdecode(program)
        if program == sys.executable:  # the interpreter is a program of the shell, not a file
            return
        if "/" in program:
            found = os.path.exists(os.path.join(self._cwd, program))
        else:
            found = shutil.which(program, path=self._env.get("PATH", os.defpath)) is not None
        if not found:
            raise FileNotFoundError(2, "No such file or directory", program)

    def _wrap(self, raw: Any, write: bool = False) -> Any:
        if not self.text_mode:
            return raw
        return io.TextIOWrapper(raw, encoding=self.encoding or "utf-8", errors=self.errors or "strict",
                                write_through=write, line_buffering=False)

    def _stream(self, name: str, merged_into: Any = None) -> Any:
        """Where the child's stdout or stderr goes, as a text stream for the shell."""
        where = self._where[name]
        if where == subprocess.STDOUT:
            return merged_into
        if where is None:
            return sys.stdout if name == "stdout" else sys.stderr  # the parent's own
        if where == subprocess.PIPE:
            return _text_writer(_Sink(self._captured[name]))
        device = _device(where)
        if where == subprocess.DEVNULL or device in ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"):
            return _text_writer(_Sink(None))
        if device in ("/dev/stdout", "/dev/stderr"):
            return sys.stdout if device == "/dev/stdout" else sys.stderr
        return _text_writer(io.FileIO(_fd_of(where), "w", closefd=False))

    def _stdin_stream(self) -> Any:
        where = self._where["stdin"]
        if where is None:
            return sys.stdin
        if where == subprocess.PIPE:
            data = bytes(self._input.data) if self._input is not None else b""
        elif where == subprocess.DEVNULL or _device(where) is not None:
            if _device(where) == "/dev/stdin":
                return sys.stdin
            data = b""  # null (zero and urandom would never end: read as nothing)
        else:
            fd = _fd_of(where)
            chunks = []
            while True:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
            data = b"".join(chunks)
        return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="surrogateescape", newline="\n")

    def _run_now(self) -> None:
        if self._ran:
            return
        self._ran = True
        import declaw_shell

        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        line = self._line
        if self._timeout is not None:
            line = "timeout %s bash -c %s" % (repr(float(self._timeout)), shlex.quote(line))
        session = declaw_shell.Session(self._cwd, dict(self._env))
        session.stdin = self._stdin_stream()
        session.stdout = self._stream("stdout")
        session.stderr = self._stream("stderr", merged_into=session.stdout)
        hidden = _running_loop_hidden()
        held = signals.hold_timers()  # the parent's: they trip once it has its thread back
        started = time.monotonic()
        try:
            status = session.run(line)
        finally:
            self._elapsed = time.monotonic() - started
            _give_back(hidden)
            signals.resume_timers(held, self._elapsed)
            for stream in (session.stdout, session.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
        self.returncode = status

    def _finish(self, timeout: float | None) -> None:
        if self._beside is not None:
            self._beside.wait(timeout, self.args)
            self.returncode = self._beside.status
            return
        if not self._ran and timeout is not None:
            self._timeout = timeout
        self._run_now()
        # `timeout` ends it with 124 at its deadline (the guest's clock may read a hair short)
        if self._timeout is not None and self.returncode == 124 and self._elapsed >= self._timeout * 0.9:
            raise subprocess.TimeoutExpired(self.args, self._timeout, self._piped("stdout"),
                                            self._piped("stderr"))

    def _piped(self, name: str) -> Any:
        if self._where[name] != subprocess.PIPE:
            return None
        data = bytes(self._captured[name])
        if not self.text_mode:
            return data
        text = data.decode(self.encoding or "utf-8", self.errors or "strict")
        return text.replace("\r\n", "\n").replace("\r", "\n")

    # -- CPython's Popen API ---------------------------------------------------------------------
    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[Any, Any]:
        if input is not None:
            if self._input is None or self._ran:
                if self._input is None:
                    raise ValueError("communicate() given input, but the child's stdin is not a pipe")
            else:
                self._input.data += input.encode(self.encoding or "utf-8", self.errors or "strict") \
                    if isinstance(input, str) else bytes(input)
        if self.stdin is not None:
            try:
                self.stdin.flush()
            except ValueError:  # closed
                pass
        self._finish(timeout)
        out, err = self._piped("stdout"), self._piped("stderr")
        for stream in (self.stdout, self.stderr):
            if stream is not None:
                stream.close()
        return out, err

    def wait(self, timeout: float | None = None) -> int:
        if self.stdin is not None:
            try:
                self.stdin.flush()
            except ValueError:
                pass
        self._finish(timeout)
        assert self.returncode is not None
        return self.returncode

    def poll(self) -> int | None:
        if self._beside is not None:
            self._beside.drain()
            self.returncode = self._beside.status
            return self.returncode
        return self.wait()

    def _wait(self, timeout: float | None) -> int:
        return self.wait(timeout)

    def _internal_poll(self, *args: Any, **kwargs: Any) -> int | None:
        return self.poll() if self._beside is not None else self.returncode

    def send_signal(self, sig: int) -> None:
        """A child beside us ends (every signal but 0 ends it: a guest has no handlers another can
        reach), with status -sig as on Linux; one that ran on this thread has finished."""
        if self._beside is not None and sig:
            self._beside.kill(int(sig))
            self.returncode = self._beside.status

    def terminate(self) -> None:
        self.send_signal(15)

    def kill(self) -> None:
        self.send_signal(9)

    def __exit__(self, *exc: object) -> None:
        for stream in (self.stdout, self.stderr, self.stdin):
            if stream is not None:
                try:
                    stream.close()
                except Exception:
                    pass
        self.wait()

    def __del__(self) -> None:
        pass


def make_popen(base: type) -> type:
    """`subprocess.Popen` for the sandbox: a subclass of CPython's own, so `isinstance` holds."""
    popen = type("Popen", (_Child, base), {"__module__": "subprocess", "__qualname__": "Popen"})
    return popen


class _Sink(io.RawIOBase):
    """Bytes written into a bytearray (None: thrown away, as /dev/null)."""

    def __init__(self, into: bytearray | None) -> None:
        self._into = into

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        if self._into is not None:
            self._into += view
        return len(view)


def install(module: Any) -> None:
    """Patch the `subprocess` module (at its first import)."""
    global _original_popen
    if getattr(module.Popen, "_declaw_sandbox", False):
        return
    _original_popen = module.Popen
    popen = make_popen(module.Popen)
    popen._declaw_sandbox = True  # type: ignore[attr-defined]
    module.Popen = popen
    # A child runs when it is made (unless its stdin is a pipe), before `run` and `call` pass their
    # timeout to `communicate` and `wait`: they hand it to the child as it is made. Their child is
    # waited for at once: it runs here, never beside (check_call, check_output, getoutput call them).
    for name in ("run", "call"):
        setattr(module, name, _with_timeout(getattr(module, name)))


def _with_timeout(function: Any) -> Any:
    @functools.wraps(function)
    def call(*popenargs: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        if timeout is not None:
            kwargs["_declaw_timeout"] = timeout
        kwargs["_declaw_waited"] = True
        return function(*popenargs, timeout=timeout, **kwargs)

    return call


def system(command: Any) -> int:
    """`os.system`: the command line through the sandbox shell, on the parent's own streams; the
    wait status, as on Linux (the exit status times 256)."""
    waited: dict[str, Any] = {"_declaw_waited": True}  # it runs here (see install)
    child = subprocess.Popen(os.fsdecode(command), shell=True, **waited)
    return (child.wait() & 0xFF) << 8


# A shell line run beside the parent only when it is plain words: no expansion, redirect, pipe,
# list or comment the host's `python3 ARGS` line would not carry
_SHELL_SPECIAL = re.compile(r"[|&;<>()$`*?\[\]{}~!#\\\n\r]")
_PYTHON_NAME = re.compile(r"python(3(\.[0-9]+)?)?")
MAX_STDIN = 8 << 20  # what spawn's `stdin` carries (processes.py)


def _top(stream: Any) -> bool:
    """Whether a text stream is what the host shows as the asker's own output (a command's
    stdout or stderr, a cell's), so a child's output can go there straight."""
    stream = getattr(stream, "_inner", stream)  # `python3 -u`'s write-through wrapper
    return stream is sys.__stdout__ or stream is sys.__stderr__ or bool(getattr(stream, "declaw_top", False))


def _file_path(target: Any) -> str | None:
    """The path of the regular file a file object (or descriptor) writes to, if its name still
    leads to that very file; None otherwise."""
    target = getattr(target, "_inner", target)  # `python3 -u`'s write-through wrapper
    try:
        fd = _fd_of(target)
    except (OSError, ValueError, AttributeError):
        return None
    name = getattr(target, "name", None)
    if not isinstance(name, str):
        return None
    path = os.path.abspath(name)
    try:
        here, there = os.stat(path), os.fstat(fd)
    except OSError:
        return None
    if not stat.S_ISREG(here.st_mode) or (here.st_ino, here.st_dev) != (there.st_ino, there.st_dev):
        return None
    return path


class _Spawned:
    """A child running beside its parent: a command of the sandbox in a guest of its own, that
    the host started (`spawn`), read from the host (`spawn.read`) when the parent polls, waits or
    reads its pipes."""

    def __init__(self, pid: int, sinks: dict[str, Any]) -> None:
        self.pid = pid
        self.status: int | None = None
        self._sinks = sinks  # stream -> a text stream its output is copied to (a pipe's: _Sink)
        self._decoders = {name: codecs.getincrementaldecoder("utf-8")("surrogatepass") for name in sinks}
        self._next = (0, 0)

    @classmethod
    def start(cls, child: _Child, shell: bool) -> "_Spawned | None":
        """Ask the host to run `child` beside us; None when it is not a Python program, or where
        the host refuses (it then runs here)."""
        argv = cls._python_args(child, shell)
        if argv is None:
            return None
        request: dict[str, Any] = {"args": argv, "cwd": child._cwd, "env": child._env}
        where = child._where
        rewind: tuple[int, int] | None = None  # where a file's input was, if it runs here after all
        if where["stdin"] is not None and where["stdin"] != subprocess.DEVNULL and _device(where["stdin"]) is None:
            try:
                fd = _fd_of(where["stdin"])
                if os.fstat(fd).st_size > MAX_STDIN:
                    return None
                rewind = fd, os.lseek(fd, 0, os.SEEK_CUR)
            except (OSError, ValueError, AttributeError):
                return None
            request["stdin"] = child._stdin_stream().read()
        sinks = cls._outputs(child, request)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        from . import door

        try:
            pid = door.call("spawn", **request)
        except (TypeError, ValueError):  # text the door cannot carry (a lone surrogate)
            pid = None
        if type(pid) is not int:
            if rewind is not None:
                os.lseek(*rewind, os.SEEK_SET)
            return None
        child_beside = cls(pid, sinks)
        if sinks:
            _COPIED.add(child_beside)
        _BESIDE.add(child_beside)
        return child_beside

    @staticmethod
    def _outputs(child: _Child, request: dict[str, Any]) -> dict[str, Any]:
        """Where its stdout and stderr go, in the request; the streams the parent copies them to
        as it reads them (a pipe, a stream the host cannot reach)."""
        sinks: dict[str, Any] = {}
        where = child._where
        for name in ("stdout", "stderr"):
            target = where[name]
            device = _device(target) if target not in (None, subprocess.PIPE, subprocess.DEVNULL,
                                                       subprocess.STDOUT) else None
            parent = sys.stdout if name == "stdout" else sys.stderr
            if device in ("/dev/stdout", "/dev/stderr"):  # the parent's own
                target, device = None, None
            if target == subprocess.STDOUT:
                request[name] = "stdout"
            elif target == subprocess.DEVNULL or device is not None:
                request[name] = "null"
            elif target is None and _top(parent):
                request[name] = "parent"
            elif target != subprocess.PIPE and (path := _file_path(parent if target is None else target)):
                request[name] = "null"  # a file object's, or the parent's own `> FILE`: appended by name
                request[name + "_file"] = path
            else:  # a pipe, or a stream the host cannot reach: copied here as it is read
                request[name] = "pipe"
                sinks[name] = child._stream(name)
        return sinks

    @staticmethod
    def _python_args(child: _Child, shell: bool) -> list[str] | None:
        """The arguments after `python3` that run the child, if it is a Python program."""
        if shell:
            if _SHELL_SPECIAL.search(child._line):
                return None
            try:
                argv = shlex.split(child._line)
            except ValueError:
                return None
        else:
            argv = shlex.split(child._line)  # shlex.join's words again
        if not argv or "=" in argv[0]:
            return None
        program = argv[0]
        if program == sys.executable or _PYTHON_NAME.fullmatch(os.path.basename(program)):
            return argv[1:]
        # a package's console script: a Python file on PATH (or named by its path)
        found = os.path.join(child._cwd, program) if "/" in program else \
            shutil.which(program, path=child._env.get("PATH", os.defpath))
        try:
            with open(found or "", "rb") as script:
                first = script.readline(256)
        except OSError:
            return None
        if first.startswith(b"#!") and b"python" in first:
            return [os.path.abspath(found or ""), *argv[1:]]
        return None

    def pump(self) -> bool:
        """One read of what it wrote since the last: True if anything came or it ended."""
        if self.status is not None:
            return False
        from . import door

        start, skip = self._next
        reply = door.call("spawn.read", pid=self.pid, start=start, skip=skip)
        if not isinstance(reply, dict) or "error" in reply:  # killed meanwhile (its asker's kill)
            self._ended(-9)
            return True
        for name, data in reply["events"]:
            sink = self._sinks.get(name)
            if sink is None:
                continue
            text = self._decoders[name].decode(data)
            if text:
                sink.write(text)
                sink.flush()
        self._next = tuple(reply["next"])
        if reply["exit"] is not None:
            self._ended(-9 if reply.get("killed") else reply["exit"])  # (every kill ends it as SIGKILL)
            truncated(self.pid, reply.get("truncated"), sys.stderr.write)
            return True
        return bool(reply["events"])

    def drain(self) -> None:
        """Everything it has written so far (a poll)."""
        while self.pump():
            pass

    def wait(self, timeout: float | None, args: Any) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.002
        while self.status is None:
            if self.pump():
                pause = 0.002
                continue
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(args, timeout or 0.0)
            time.sleep(pause if left is None else min(pause, left))
            pause = min(pause * 2, 0.05)

    def kill(self, sig: int) -> None:
        """End it (if it still runs): status -sig, as a signalled child's on Linux."""
        if self.status is not None:
            return
        from . import door

        self.drain()
        if self.status is None:
            self._ended(-sig if door.call("spawn.kill", pid=self.pid) is True else -9)

    def _ended(self, status: int) -> None:
        self.status = status
        _COPIED.discard(self)
        _BESIDE.discard(self)


# children beside us whose output the parent copies (see drain_children), held until they have
# ended: a Popen object dropped at once (`Popen([...])` as a statement) still has its output copied
_COPIED: set[_Spawned] = set()
# every child beside us not yet seen to end (a command's line waits for those that outlive their
# parent: outliving)
_BESIDE: set[_Spawned] = set()


def drain_children() -> None:
    """A program ends (_declaw_boot.run_process): what its children beside it have written so far
    into a stream only it could copy (its stdout redirected into a pipe or `$(...)`) is copied now,
    rather than lost with it; they are ended with its command soon after, as documented."""
    for child in list(_COPIED):
        try:
            child.drain()
        except Exception:
            pass
        if child.status is not None:
            _COPIED.discard(child)


def outliving() -> list[_Spawned]:
    """The children beside us that run on once their parent program has ended, as a Linux
    child does (reparented): those whose output goes where the host sends it (the command's own
    output, a file, nowhere). One whose output only its parent could read (a pipe) ends with the
    line (wait_outliving), as a Linux child would at its next write into a pipe nobody reads."""
    for child in [child for child in _BESIDE if not child._sinks]:
        child.drain()
    return [child for child in _BESIDE if not child._sinks]


async def wait_outliving() -> None:
    """Until every child that outlives its parent has ended (a command's line, after detaching:
    a server `python3 start.py` left running serves the next commands, as on Linux)."""
    import asyncio

    for child in [child for child in _BESIDE if child._sinks]:  # their reader is gone
        child.kill(9)
    pause = 0.002
    while outliving():
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.2)  # a server may run for hours: a look each 0.2 s


class _BesideOutput(io.RawIOBase):
    """A pipe from a child beside us: what it wrote so far, waiting for more while it runs."""

    def __init__(self, spawned: _Spawned, data: bytearray) -> None:
        self._spawned = spawned
        self._data = data  # what the pipe's sink has gathered (the child's _captured)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        pause = 0.002
        while not self._data and self._spawned.status is None:
            if self._spawned.pump():
                pause = 0.002
                continue
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        size = min(len(buffer), len(self._data))
        memoryview(buffer).cast("B")[:size] = self._data[:size]
        del self._data[:size]
        return size


def truncated(pid: int, streams: Any, write: Any) -> None:
    """Say, on the parent's stderr, that a child's output was cut at the sandbox's output limit
    (what the host keeps of a program's output; the rest was dropped, not waited for)."""
    if streams:
        write("declaw-wasm: the %s of program %d went past the sandbox's output limit "
              "(Limits.output_limit): the rest was dropped\n" % (" and ".join(streams), pid))
