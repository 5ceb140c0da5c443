"""Commands the guest shell adds to bash_purepython's, and the ones it answers differently.

Added: `python`/`python3` (each call runs like a separate process: see
`_declaw_boot.run_process`), `pip` (`python3 -m pip`: declaw_shell/pip.py), `awk` (awk.py), `ln`,
`tput`. Changed: `ls` exits 2 for a missing operand, as GNU's does (the library says 1), and lays
out columns only on a PTY.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import io
import os

from bash_purepython.command.command import Command, CommandResult, InputKind, OutputKind
from bash_purepython.command.help import HelpCommand
from bash_purepython.command.ls import LsCommand
from bash_purepython.command.registry import CommandRegistry

from . import coreutils, deadlines, door, rawbytes, sysinfo, versions

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import IO, Any

    from . import Session
    from .shells import StdoutFile

    Invocation = Any  # bash_purepython's CommandInvocation (untyped)

# whether the command being run has its stderr joined to its stdout (`2>&1` with no file: a pipe,
# `$(...)`, the caller), set around each command (declaw_shell.Executor.run_registered_command)
ERRORS_WITH_STDOUT: contextvars.ContextVar[bool] = contextvars.ContextVar("ERRORS_WITH_STDOUT", default=False)
PYTHON_NAMES = ("python", "python3", "python3.15")
PIP_NAMES = ("pip", "pip3", "pip3.15")
TEXT_IN = frozenset({InputKind.ARGUMENTS, InputKind.TEXT})
TEXT_OUT = frozenset({OutputKind.TEXT})
STREAM_OUT = frozenset({OutputKind.STREAM_TEXT})


def registry(session: Session | None) -> CommandRegistry:
    """The commands of one shell session: the shared ones (made once per guest process) and
    those bound to the session. Every command line makes a session, so this must be cheap: making
    the ~100 shared commands and their `--version` wrappers each time cost ~1 ms of every line."""
    commands = CommandRegistry(commands=[])
    commands.commands = dict(_shared())
    for name in PYTHON_NAMES:
        commands.register(PythonCommand(name, session))
    for name in PIP_NAMES:
        commands.register(PythonCommand(name, session, ["-m", "pip"]))
    for name, module in MODULE_PROGRAMS.items():
        commands.register(ModuleCommand(name, session, ["-m", module]))
    for command in (AwkCommand(session), LnCommand(), TputCommand(session), GnuLsCommand(session)):
        commands.register(command)
    commands.register(HelpCommand(commands.names, commands.summaries))  # lists this registry's names
    versions.install(commands, SESSION_NAMES)
    return commands


# console scripts of the packages bundle (installed without scripts): name -> module run with -m
MODULE_PROGRAMS = {"pytest": "pytest", "py.test": "pytest"}
# made per session
SESSION_NAMES = frozenset(PYTHON_NAMES + PIP_NAMES + tuple(MODULE_PROGRAMS) + ("awk", "ln", "tput", "ls", "help"))
_SHARED: dict[str, Command] = {}


_CONTROL_ESCAPES = {"r": "\r", "f": "\f", "v": "\v", "a": "\a"}
_NOT_FROM_HEX = frozenset("\\/\n")  # a `\xHH` of one of these is left to the library (GNU's makes
# any other character, special ones included: `\x2e` is `.`, any character)


def _gnu_sed_escapes() -> None:
    """sed's regular expressions take GNU sed's `\\r`, `\\f`, `\\v`, `\\a`, `\\xHH`, `\\oNNN`, `\\dNNN` and
    `\\cX` as those characters (`sed -i 's/\\r$//' f` makes a CRLF file LF): the library read them as letters."""
    from bash_purepython.command import sed

    translate = sed.translate_regex

    def translate_regex(pattern: str, extended: bool) -> str:
        if "\\" not in pattern:
            return translate(pattern, extended)
        pieces, position = [], 0
        while position < len(pattern):
            character = pattern[position]
            letter = pattern[position + 1:position + 2]
            numeric = coreutils.SED_NUMERIC.get(letter) if character == "\\" else None
            digits = numeric[1].match(pattern, position + 2) if numeric is not None else None
            if numeric is not None and digits is not None and chr(int(digits.group(), numeric[0])) not in _NOT_FROM_HEX:
                pieces.append(chr(int(digits.group(), numeric[0])))  # `\x1b`: ESC (`sed 's/\x1b\[[0-9;]*m//g'`
                position = digits.end()  # strips colours); `\o033`, `\d27` too
            elif character == "\\" and letter == "c" and position + 2 < len(pattern):
                pieces.append(chr(ord(pattern[position + 2].upper()) ^ 0x40))  # `\cA`: control-A
                position += 3
            elif character == "\\" and position + 1 < len(pattern):
                escaped = pattern[position + 1]
                pieces.append(_CONTROL_ESCAPES.get(escaped, character + escaped))
                position += 2
            else:
                pieces.append(character)
                position += 1
        return translate("".join(pieces), extended)

    sed.translate_regex = translate_regex  # (sed's own module calls it by this name)


def _shared() -> dict[str, Command]:
    """name -> command for the commands that hold no session: bash_purepython's own, curl and
    wget, our coreutils and probes, each wrapped with its `--version` banner. Commands are
    reentrant (one instance already serves every stage of a pipeline), so sessions share them."""
    if not _SHARED:
        _gnu_sed_escapes()
        commands = CommandRegistry()
        from .net_commands import NET_COMMANDS  # curl, wget (over the sandbox's network)

        for net_command in NET_COMMANDS:
            commands.register(net_command())
        coreutils.register(commands)  # readlink, realpath, cmp, printenv, which, grep, streaming cat
        sysinfo.register(commands)  # free, ps, uptime, lscpu: the sandbox's, through the door
        versions.install(commands)  # --version banners for curl, wget, tar, zip...
        _SHARED.update((name, command) for name, command in commands.commands.items()
                       if name not in SESSION_NAMES)
    return _SHARED


class _ErrorStream(io.TextIOBase):
    """A text stream over the shell's error sink (which may be redirected)."""

    def __init__(self, write: Callable[[str], object]) -> None:
        self._write = write

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._write(text)
        return len(text)


class _InDirectory:
    """Run with the process in the shell's current directory (programs resolve relative paths
    against the process's, and the shell keeps its own)."""

    def __init__(self, path: object) -> None:
        self.path = str(path)

    def __enter__(self) -> None:
        self.before = os.getcwd()
        os.chdir(self.path)

    def __exit__(self, *exc: object) -> None:
        try:
            os.chdir(self.before)
        except OSError:
            pass


def _stdin_of(invocation: Invocation, session: Session | None, newline: str = "\n") -> IO[str]:
    """Piped or redirected input if there is any, else the command's own stdin. (`newline`: "\n"
    keeps a CR, as CPython's stdin on Linux does (`python3 x.py < dos.txt` sees `\r\n`); "" for
    awk. Bytes that are not UTF-8 read as CPython's stdin reads them on Linux: `surrogateescape`,
    see rawbytes.py.)"""
    if invocation.stdin_kind == InputKind.TEXT:
        return io.TextIOWrapper(io.BytesIO(invocation.stdin.encode("utf-8", "surrogateescape")),
                                encoding="utf-8", errors="surrogateescape", newline=newline)
    assert session is not None  # commands run in a session (binstubs.py only lists them)
    return door.program_stdin(session.stdin)


def _a_job_by_itself() -> bool:
    """Whether the running command is a `cmd &` job's own (run by the job's task: alone, in a
    subshell or a list, or a pipeline's stage), not under `timeout`."""
    from . import shells

    try:
        task = asyncio.current_task()
    except RuntimeError:  # no loop running
        return False
    return task is not None and any(task is job for job in shells.LINE_JOBS) and deadlines.remaining() is None


class PythonCommand(Command):
    """`python3 ARGS`, run in this guest like a separate process (`_declaw_boot.run_process`);
    as a `cmd &` job, in a guest of its own that the host starts (the `spawn` door op), so the
    line goes on beside it as bash's does (`python3 -m http.server &`: a Python program holds
    this guest's one thread until it returns)."""

    input_kinds = TEXT_IN
    summary = "run a Python program"
    writes_its_file = True  # its `> FILE` as it runs (shells.PYTHON_INTO)

    def __init__(self, name: str, session: Session | None, prefix: Iterable[str] = ()) -> None:
        self.name = name
        self.session = session
        self.prefix = list(prefix)  # `pip ARGS` is `python3 -m pip ARGS`

    @property
    def output_kinds(self) -> frozenset[OutputKind]:
        """Read when the command is about to run: a job's program streams what its guest writes;
        one whose stdout goes to a file writes it itself (an empty stream)."""
        from .shells import PYTHON_INTO

        return STREAM_OUT if _a_job_by_itself() or PYTHON_INTO.get() is not None else TEXT_OUT

    def run(self, invocation: Invocation) -> CommandResult:
        if invocation.stdout_kind != OutputKind.STREAM_TEXT:
            return self._here(invocation)
        from .shells import PYTHON_INTO

        into = PYTHON_INTO.get()
        spawned = self._spawned(invocation) if _a_job_by_itself() else None
        if spawned is not None:
            return spawned
        if into is not None:
            return self._into_file(invocation, into)
        return _streamed(invocation, self._here(invocation))

    def _into_file(self, invocation: Invocation, into: StdoutFile) -> CommandResult:
        """`python3 ... > FILE`: the program writes the file as it runs, as bash's would (`tail
        log` from another command while it trains; stderr in order with it under `2>&1`),
        block-buffered as CPython's stdout to a file is (`-u`, `flush=True` write at once)."""
        from .shells import WRITTEN_THERE

        path, append = into.path, into.append
        into.taken = True
        try:
            if not append:
                open(path, "wb").close()
            raw = open(str(path), "ab")  # appended to, so stderr sent there stays in order (its name a
            # str: a Popen child beside the program appends to it by name, subprocesses.py)
        except OSError as error:  # as bash says it, and the program does not run
            invocation.state.write_error("bash: %s: %s\n" % (path, error.strerror or error))
            WRITTEN_THERE.add(invocation.exit_status)  # said once: the redirect is not tried again
            return _streamed(invocation, CommandResult(stdout="", exit_code=1))
        with raw:
            stdout = io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape")
            try:
                result = self._here(invocation, stdout)
            finally:
                try:
                    stdout.flush()
                except (OSError, ValueError):
                    pass
        WRITTEN_THERE.add(invocation.exit_status)
        return _streamed(invocation, dataclasses.replace(result, stdout=""))

    def _spawned(self, invocation: Invocation) -> CommandResult | None:
        """The program in a guest of its own: its output streamed as it comes (stderr to the
        job's error output), its status the job's; None if the host refuses (`max_processes`,
        a snapshot under way, a CPU limit): the program then runs here as before."""
        state = invocation.state
        request: dict[str, Any] = {"args": [*self.prefix, *invocation.arguments], "cwd": str(state.cwd),
                                   "env": _environment(state)}
        if invocation.stdin_kind == InputKind.TEXT:
            request["stdin"] = invocation.stdin
        try:
            pid = door.call("spawn", **request)
        except (TypeError, ValueError):  # text the door cannot carry (a lone surrogate)
            pid = None
        if type(pid) is not int:
            return None
        from .shells import LIVE_STREAMS

        LIVE_STREAMS.add(invocation.exit_status)
        return CommandResult(stdout=_output_of(pid, invocation), exit_code=0)

    def _here(self, invocation: Invocation, into: IO[str] | None = None) -> CommandResult:
        """The program in this guest, to its end; its stdout `into` a stream if given."""
        import _declaw_boot

        session, state = self.session, invocation.state
        assert session is not None  # commands run in a session (binstubs.py only lists them)
        captured = None
        stdout: IO[str]
        if into is not None:
            stdout = into
        elif invocation.attached_to_terminal:
            stdout = session.stdout  # straight out: streamed as the program writes
        else:
            captured = _Captured()
            stdout = io.TextIOWrapper(captured, encoding="utf-8", errors="surrogateescape",
                                      write_through=True)
        stderr: Any  # a text stream
        if state.write_error is session.state.terminal_write_error:
            stderr = session.stderr
        elif captured is not None and ERRORS_WITH_STDOUT.get():
            stderr = stdout  # `2>&1` into a pipe or the caller: the library gathers a command's errors
            # and puts them all ahead of its stdout; one stream keeps a program's in order
        else:
            stderr = _ErrorStream(state.write_error)
        try:
            status = _declaw_boot.run_process(str(state.cwd), [*self.prefix, *invocation.arguments],
                                              _environment(state), _stdin_of(invocation, session), stdout, stderr)
        except deadlines.DeadlineReached as stop:  # `timeout` ended it: what it wrote stays written
            if captured is not None:
                deadlines.keep(stop, rawbytes.from_bytes(captured.written()))
            raise
        output = rawbytes.from_bytes(captured.written()) if captured is not None else ""
        return CommandResult(stdout=output, exit_code=status)


def _environment(state: Any) -> dict[str, str]:
    """A program's environment: the line's exported variables, PWD its working directory."""
    env: dict[str, str] = state.exported_variables()
    env["PWD"] = str(state.cwd)
    return env


def _streamed(invocation: Invocation, result: CommandResult) -> CommandResult:
    """A result made whole, as the stream the invocation asked for."""
    async def whole() -> Any:
        yield result.stdout
        invocation.exit_status.code = result.exit_code
    return CommandResult(stdout=whole(), exit_code=result.exit_code)


async def _output_of(pid: int, invocation: Invocation) -> Any:
    """A spawned program's output as it comes (stdout yielded, stderr written), then its status
    as the invocation's; the program is killed if the job ends first (`kill %1`, the line's end
    on a terminal)."""
    import codecs

    start, skip, pause, ended = 0, 0, 0.002, False
    # the host stores text as UTF-8 with lone surrogates (bytes that were not UTF-8) kept as such
    decoders = {name: codecs.getincrementaldecoder("utf-8")("surrogatepass") for name in ("stdout", "stderr")}
    try:
        while True:
            reply = door.call("spawn.read", pid=pid, start=start, skip=skip)
            if "error" in reply:
                invocation.state.write_error("bash: %s\n" % reply["error"].get("message", "lost its program"))
                invocation.exit_status.code = 1
                ended = True
                return
            for stream, data in reply["events"]:
                text = decoders[stream].decode(data) if stream in decoders else ""
                if not text:
                    continue
                if stream == "stdout":
                    yield text
                else:
                    invocation.state.write_error(text)
            start, skip = reply["next"]
            if reply["exit"] is not None:
                invocation.exit_status.code = reply["exit"]
                ended = True
                from .subprocesses import truncated

                truncated(pid, reply.get("truncated"), invocation.state.write_error)
                return
            pause = 0.002 if reply["events"] else min(pause * 2, 0.05)
            await asyncio.sleep(pause)
    finally:
        if not ended:
            door.call("spawn.kill", pid=pid)


class ModuleCommand(PythonCommand):
    """A package's console script as `python3 -m MODULE` (`pytest`); not found, as bash says,
    where the package is not installed."""

    def run(self, invocation: Invocation) -> CommandResult:
        import importlib.util

        if importlib.util.find_spec(self.prefix[1]) is None:
            invocation.state.write_error("bash: %s: command not found\n" % self.name)
            missing = CommandResult(stdout="", exit_code=127)
            return _streamed(invocation, missing) if invocation.stdout_kind == OutputKind.STREAM_TEXT else missing
        return super().run(invocation)


class _Captured(io.BytesIO):
    """A piped program's stdout, kept when the program closes it (`python3 -m json.tool`
    closes its output file, stdout included, before it returns)."""

    kept = b""

    def close(self) -> None:
        if not self.closed:
            self.kept = self.getvalue()
        super().close()

    def written(self) -> bytes:
        return self.kept if self.closed else self.getvalue()


class AwkCommand(Command):
    name = "awk"
    input_kinds = TEXT_IN
    output_kinds = TEXT_OUT
    summary = "pattern scanning and processing language"

    def __init__(self, session: Session | None) -> None:
        self.session = session

    def run(self, invocation: Invocation) -> CommandResult:
        from . import awk

        out: list[str] = []
        with _InDirectory(invocation.state.cwd):
            status = awk.run(list(invocation.arguments), _stdin_of(invocation, self.session, ""),
                             out.append, invocation.state.write_error,
                             environ=invocation.state.exported_variables())
        return CommandResult(stdout="".join(out), exit_code=status)


class LnCommand(Command):
    """ln [-s] [-f] [-n] [-v] TARGET [LINK] | TARGET... DIRECTORY"""

    name = "ln"
    input_kinds = frozenset({InputKind.ARGUMENTS})
    output_kinds = TEXT_OUT
    summary = "make links between files"

    def run(self, invocation: Invocation) -> CommandResult:
        state = invocation.state
        symbolic = force = verbose = False
        operands: list[str] = []
        for arg in invocation.arguments:
            if arg.startswith("-") and len(arg) > 1 and not operands:
                for flag in arg[1:]:
                    if flag not in "sfnvT":
                        state.write_error("ln: invalid option -- '%s'\n" % flag)
                        return CommandResult(stdout="", exit_code=1)
                    symbolic |= flag == "s"
                    force |= flag == "f"
                    verbose |= flag == "v"
            else:
                operands.append(arg)
        if not operands:
            state.write_error("ln: missing file operand\n")
            return CommandResult(stdout="", exit_code=1)
        if len(operands) == 1:
            pairs = [(operands[0], os.path.basename(operands[0].rstrip("/")))]
        elif os.path.isdir(state.resolve_path(operands[-1])):
            pairs = [(t, os.path.join(operands[-1], os.path.basename(t.rstrip("/"))))
                     for t in operands[:-1]]
        elif len(operands) == 2:
            pairs = [(operands[0], operands[1])]
        else:
            state.write_error("ln: target '%s' is not a directory\n" % operands[-1])
            return CommandResult(stdout="", exit_code=1)
        status = 0
        lines: list[str] = []
        for target, link in pairs:
            link_path = state.resolve_path(link)
            try:
                if force and (os.path.lexists(link_path)):
                    os.unlink(link_path)
                if symbolic:
                    os.symlink(target, link_path)
                else:
                    os.link(state.resolve_path(target), link_path)
                if verbose:
                    lines.append("'%s' -> '%s'\n" % (link, target))
            except OSError as exc:
                verb = "symbolic link" if symbolic else "hard link"
                state.write_error("ln: failed to create %s '%s': %s\n" % (verb, link, exc.strerror))
                status = 1
        return CommandResult(stdout="".join(lines), exit_code=status)


class TputCommand(Command):
    """The terminal capabilities agents ask for: size, colours, clearing."""

    name = "tput"
    input_kinds = frozenset({InputKind.ARGUMENTS})
    output_kinds = TEXT_OUT
    summary = "query terminal capabilities"
    SEQUENCES = {"clear": "\x1b[H\x1b[2J", "sgr0": "\x1b(B\x1b[m", "bold": "\x1b[1m",
                 "smul": "\x1b[4m", "rmul": "\x1b[24m", "rev": "\x1b[7m", "reset": "\x1bc",
                 "civis": "\x1b[?25l", "cnorm": "\x1b[?12l\x1b[?25h"}

    def __init__(self, session: Session | None) -> None:
        self.session = session

    def run(self, invocation: Invocation) -> CommandResult:
        args = [a for a in invocation.arguments if not a.startswith("-T")]
        if not args:
            invocation.state.write_error("tput: usage: tput [-Ttype] capname [parameters]\n")
            return CommandResult(stdout="", exit_code=2)
        cap = args[0]
        if cap in ("cols", "lines"):
            variables = invocation.state.variables
            size = None
            if self.session is not None and self.session.terminal is not None:
                size = self.session.terminal.size()
            if size is not None:
                value = size[1] if cap == "cols" else size[0]
            else:
                value = variables.get("COLUMNS" if cap == "cols" else "LINES") or (80 if cap == "cols" else 24)
            return CommandResult(stdout="%s\n" % value, exit_code=0)
        if cap == "colors":
            return CommandResult(stdout="256\n", exit_code=0)
        if cap in ("setaf", "setab") and len(args) > 1 and args[1].isdigit():
            return CommandResult(stdout="\x1b[%d;5;%sm" % (38 if cap == "setaf" else 48, args[1]),
                                 exit_code=0)
        if cap in self.SEQUENCES:
            return CommandResult(stdout=self.SEQUENCES[cap], exit_code=0)
        invocation.state.write_error("tput: unknown terminfo capability '%s'\n" % cap)
        return CommandResult(stdout="", exit_code=4)


class GnuLsCommand(LsCommand):
    def __init__(self, session: Session | None) -> None:
        super().__init__()
        self.session = session

    def run(self, invocation: Invocation) -> CommandResult:
        if self.session is None or self.session.terminal is None:  # columns only on a terminal: one name a line
            invocation = dataclasses.replace(invocation, attached_to_terminal=False)
        result = super().run(invocation)
        if result.exit_code == 1:  # GNU ls: 2 when a named file cannot be accessed
            return CommandResult(stdout=result.stdout, exit_code=2)
        return result
