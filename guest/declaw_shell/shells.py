"""`bash` and `sh` as programs, programs named by path, and the shell features around them.

Agent frameworks wrap every command in a shell of its own (`sh -lc '…'`, `bash -lc '…'`,
`/bin/sh -c '…' sh "$1"`, `sudo -u user -- …`, `timeout 30 …`). The library runs `bash`/`sh`
against a copy of the whole shell (non-exported variables and functions leak in), accepts only
`-c` as its first argument, sets `$0` to "bash" always, and reads `/bin/sh` as a script file.
Here `bash`/`sh` run their line in the same guest but in a new scope, as a child bash would:
only exported variables come in, nothing leaks back, `exit` ends only that scope, `$0`/`$1…`
are set as bash sets them, options (`-e -u -x -o pipefail`), `-l` (profiles sourced) and `-i`
are accepted. `sh` is bash here (there is no dash). A name with a slash runs as Linux would: a
/bin, /usr/bin or /usr/local/bin path of a program we have is that program; a file with `#!`
runs its interpreter; any other file runs as a bash script.

Also here: `trap` (EXIT and ERR run; signals are stored, never delivered: WASI has none),
`exec CMD` (runs CMD, then the scope ends with its status), the program wrappers `sudo` (one
user: runs the command as is), `nohup`, `nice`, `stdbuf`, `time`, and `timeout` (timeout.py).
`GuestState` carries `$0` and the traps of each scope.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import posixpath
import re
import shlex
import stat
import sys
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from bash_purepython import words
from bash_purepython.block_parser import build_plan
from bash_purepython.execute_command import (OUTPUT_REDIRECTION_KINDS, ErrorDestination, ExecutionResult, Executor,
                                             OutputKind, StdinValue, redirected_sinks)
from bash_purepython.shell_builtins import OPTION_LETTERS, OPTION_NAMES
from bash_purepython.shell_state import (
    BreakLoop,
    CallableSink,
    CollectingSink,
    ContinueLoop,
    ControlFlowSignal,
    ExitShell,
    Job,
    JobTable,
    ShellError,
    ShellState,
    ShellSyntaxError,
)
from bash_purepython.streams import as_async_iterator, materialise_text
from bash_purepython.workflow import Redirection, RedirectionKind, SimpleCommandNode

from . import arrays, continued, deadlines
from . import find as find_command
from . import morebuiltins as more_builtins
from . import rawbytes
from . import timeout as timeout_command
from . import versions
from . import xargs as xargs_command

continued.install()  # a newline after `&&`, `||` or `|` continues the command (continued.py)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable
    from typing import Any

    # bash_purepython has no type information: its classes are Any to the checker
    from bash_purepython.execute_command import Executor as _ExecutorBase

    import declaw_shell

    Destination = Any  # an ErrorDestination or the Path of a file
    Body = Callable[["GuestState"], Awaitable[int]]
else:
    _ExecutorBase = object

SHELL_NAMES = frozenset({"bash", "sh"})
BIN_DIRS = frozenset({"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin", "/usr/local/sbin"})
COMMAND_DIR = "/usr/bin"  # where `which`, `type` and `command -v` say our programs are
BASH_VERSION_LINE = "GNU bash, version 5.2.0(1)-bash_purepython (wasm32-wasip1)\n"
# library builtins that are programs on Linux (`type xargs`: /usr/bin/xargs)
PROGRAM_BUILTINS = frozenset({"xargs"})
SHEBANG_LIMIT = 256


@dataclass
class GuestState(ShellState):
    """The library's shell state plus what bash keeps per shell process: `$0` and the traps.
    A copy is a subshell: it keeps `$0` and starts with no traps, as in bash."""

    script_name: str = "bash"
    traps: dict[str, str] = field(default_factory=dict)
    shopts: set[str] | None = None  # `shopt` settings (morebuiltins.py); None: bash's defaults
    runs_file: bool = False  # a script file's shell (`bash s.sh`, `./s.sh`): FUNCNAME ends in "main"

    def resolve_path(self, path_text: str) -> Path:
        """A path made absolute against the current directory. A `~` in it is a name like any
        other: an unquoted one was expanded with the word, as bash does, so `> '~t'` or `cat '~/x'`
        name files called that (the library's pathlib expanduser expanded a quoted `~` again, and
        raised for `~t`, no such user: the line ended in a traceback). A `..` is taken lexically, as
        bash's `cd` takes it: WASI resolves a path within the mount it starts in, so `cd ..` from
        /home/user, or `ls ../..` from a folder of it, failed ("No such file or directory")."""
        path = path_text if path_text.startswith("/") else posixpath.join(str(self.cwd), path_text)
        if ".." in path.split("/"):
            path = posixpath.normpath(path)
        return Path(path)

    def copy(self) -> GuestState:
        copied = super().copy()
        copied.__class__ = GuestState  # same fields plus ours; the library builds a ShellState
        copied.script_name = self.script_name
        copied.runs_file = self.runs_file
        copied.traps = {}
        copied.shopts = set(self.shopts) if self.shopts is not None else None
        for name, elements in self.arrays.items():  # the library's copy makes each a plain dict
            if isinstance(elements, arrays.AssocArray):
                copied.arrays[name] = elements.copy()
        return copied


_lookup_parameter = words.lookup_parameter


def _lookup_with_script_name(name: str, state: GuestState) -> str:
    if name == "0":
        return getattr(state, "script_name", words.SHELL_NAME)
    if name == "HOME" and name not in state.variables and name not in state.arrays \
            and sys._getframe(1).f_code.co_name != "expand_tilde":
        return ""  # unset (`env -i bash -c 'echo $HOME'`); the library falls back to the host's
    return _lookup_parameter(name, state)


words.lookup_parameter = _lookup_with_script_name  # `$0`: the library answers "bash" always

_expand_operand_as_pattern = words.expand_operand_as_pattern


async def _operand_as_pattern(operand: str, state: GuestState, run_substitution: Any) -> str:
    """The PATTERN of `${v#PATTERN}`, `${v%%PATTERN}`, `${v/PATTERN/...}`: a blank in it is a
    character of it, as in bash. The library read PATTERN as a command's words, so blanks split
    it: `"${line%% *}"` lost its space and removed the whole line."""
    return await _expand_operand_as_pattern(_blanks_escaped(operand), state, run_substitution)


def _blanks_escaped(text: str) -> str:
    """TEXT with each unquoted blank outside `$(...)`, `${...}` and backquotes escaped."""
    if " " not in text and "\t" not in text:
        return text
    out: list[str] = []
    quote, depth, position = "", 0, 0
    while position < len(text):
        character = text[position]
        if quote == "'":
            quote = "" if character == "'" else quote
        elif character == "\\":
            out.append(text[position:position + 2])
            position += 2
            continue
        elif character == "$" and text[position + 1:position + 2] in ("(", "{"):
            depth += 1
            out.append(text[position:position + 2])
            position += 2
            continue
        elif character in ")}" and depth:
            depth -= 1
        elif character == "`":
            depth += -1 if quote == "`" else 1
            quote = "" if quote == "`" else "`" if not quote else quote
        elif character in "'\"" and not depth:
            quote = "" if quote == character else character if not quote else quote
        elif character in " \t" and not quote and not depth:
            out.append("\\" + character)
            position += 1
            continue
        out.append(character)
        position += 1
    return "".join(out)


words.expand_operand_as_pattern = _operand_as_pattern

_try_consume_redirection = words.SimpleCommandTokenizer._try_consume_redirection


def _append_both(tokenizer: Any) -> bool:
    """`&>> FILE` appends stdout and stderr, as bash's `>> FILE 2>&1` (the library had only `&>`)."""
    if not tokenizer.text.startswith("&>>", tokenizer.position):
        return bool(_try_consume_redirection(tokenizer))
    if tokenizer.word_started:
        tokenizer._end_word()
    tokenizer.position += 3
    target = tokenizer._consume_target_word()
    tokenizer.redirections.append(Redirection(kind=RedirectionKind.APPEND_STDOUT, target=target))
    tokenizer.redirections.append(Redirection(kind=RedirectionKind.STDERR_TO_STDOUT, target=""))
    return True


words.SimpleCommandTokenizer._try_consume_redirection = _append_both


@dataclass
class ShellCall:
    """What a `bash`/`sh` command line asks for."""

    name: str
    script_name: str = ""
    text: str | None = None  # -c TEXT
    path: str | None = None  # a script file
    from_stdin: bool = False
    positional: list[str] = field(default_factory=list)
    options: set[tuple[str, bool]] = field(default_factory=set)
    login: bool = False
    interactive: bool = False
    no_exec: bool = False
    version: bool = False


class UsageError(Exception):
    """A `bash`/`sh` command line bash would refuse (exit 2)."""


LONG_IGNORED = frozenset({"--norc", "--noprofile", "--posix", "--noediting", "--restricted", "--verbose",
                          "--debug", "--debugger", "--dump-strings", "--dump-po-strings", "--pretty-print"})
LONG_WITH_VALUE = frozenset({"--rcfile", "--init-file"})


def parse_shell_args(name: str, args: list[str]) -> ShellCall:  # noqa: C901 (bash's option grammar, one flat loop)
    """bash's command line: options up to the first word that is not one, then `-c TEXT [$0
    [ARGS]]`, or `SCRIPT [ARGS]`, or commands from stdin (`-s`, or nothing left)."""
    call = ShellCall(name=name)
    command_mode = stdin_mode = False
    index = 0
    while index < len(args):
        arg = args[index]
        if arg in ("--", "-"):
            index += 1
            break
        if arg.startswith("--"):
            key = arg.split("=", 1)[0]
            if key == "--login":
                call.login = True
            elif key == "--version":
                call.version = True
            elif key in LONG_WITH_VALUE and "=" not in arg:
                index += 1
            elif key not in LONG_IGNORED and key not in LONG_WITH_VALUE:
                raise UsageError("%s: %s: invalid option" % (name, arg))
            index += 1
            continue
        if len(arg) < 2 or arg[0] not in "-+":
            break
        enable = arg[0] == "-"
        for letter in arg[1:]:
            if letter == "c":
                command_mode = True
            elif letter == "s":
                stdin_mode = True
            elif letter == "l":
                call.login = True
            elif letter == "i":
                call.interactive = True
            elif letter == "n":
                call.no_exec = enable
            elif letter in ("o", "O"):
                index += 1
                if index >= len(args):
                    raise UsageError("%s: -%s: option requires an argument" % (name, letter))
                option = OPTION_NAMES.get(args[index]) if letter == "o" else None
                if option is not None:
                    call.options.add((option, enable))
            elif letter in OPTION_LETTERS:
                call.options.add((OPTION_LETTERS[letter], enable))
            elif letter not in "rDabfhkmptvBCEHPT":
                raise UsageError("%s: -%s: invalid option" % (name, letter))
        index += 1
    rest = args[index:]
    if command_mode:
        if not rest:
            raise UsageError("%s: -c: option requires an argument" % name)
        call.text = rest[0]
        call.script_name = rest[1] if len(rest) > 1 else name
        call.positional = rest[2:]
    elif stdin_mode or not rest:
        call.from_stdin = True
        call.script_name = name
        call.positional = rest
    else:
        call.path = rest[0]
        call.script_name = rest[0]
        call.positional = rest[1:]
    return call


class LineJobs(JobTable):
    """A shell's background jobs (`cmd &`), each also kept in `LINE_JOBS`, the guest's list of
    every job of its line, a child bash's too: bash leaves them running when the line ends, and so
    does the guest (declaw_shell.Session)."""

    def register(self, command_text: str, task: asyncio.Task[Any]) -> Job:
        running_jobs()  # a PTY's shell never ends its line: its finished jobs go here
        LINE_JOBS.append(task)
        return super().register(command_text, task)


LINE_JOBS: list[asyncio.Task[Any]] = []
_TO_FILES = (RedirectionKind.WRITE_STDOUT, RedirectionKind.APPEND_STDOUT, RedirectionKind.WRITE_BOTH)
# the exit statuses of the streams that carry a program's output from a guest of its own
# (programs.py: a `python3 ... &` job), which redirections write to their files as it comes
LIVE_STREAMS: weakref.WeakSet[Any] = weakref.WeakSet()
# the exit statuses of the streams of programs that wrote their `> FILE` themselves as they ran
# (programs.py), which redirections leave alone
WRITTEN_THERE: weakref.WeakSet[Any] = weakref.WeakSet()


@dataclass
class StdoutFile:
    """A simple command's `> FILE`; `taken` once a Python program opened it to write itself."""

    path: Path
    append: bool
    taken: bool = False


# the file the next simple command's stdout goes to, if any: set as its redirections are applied,
# taken by its dispatch, so that a Python program named by the command itself, or run by a
# wrapper of HANDS_ON (`timeout`, `nohup`...), writes it as it runs (PYTHON_INTO); a program other
# wrappers run (`xargs`, `command`, a function) has the redirect written from its whole output
STDOUT_FILE: contextvars.ContextVar[StdoutFile | None] = contextvars.ContextVar("STDOUT_FILE", default=None)
PYTHON_INTO: contextvars.ContextVar[StdoutFile | None] = contextvars.ContextVar("PYTHON_INTO", default=None)
HANDS_ON = frozenset({"timeout", "nohup", "nice", "stdbuf", "sudo"})  # wrappers whose `> FILE` the
# program they run writes (run_wrapped)
_HANDED: contextvars.ContextVar[StdoutFile | None] = contextvars.ContextVar("_HANDED", default=None)
# whether the simple command being run redirects its stdout itself (set with STDOUT_FILE)
_OWN_STDOUT: contextvars.ContextVar[bool] = contextvars.ContextVar("_OWN_STDOUT", default=False)
# within a builtin that has redirections of its own (its output is written whole)
_BUILTIN_OUTPUT: contextvars.ContextVar[bool] = contextvars.ContextVar("_BUILTIN_OUTPUT", default=False)


def running_jobs() -> list[asyncio.Task[Any]]:
    """The line's jobs still running (those done are forgotten)."""
    LINE_JOBS[:] = [task for task in LINE_JOBS if not task.done()]
    return list(LINE_JOBS)


def new_scope(state: GuestState, script_name: str, positional: Iterable[str]) -> GuestState:
    """The state a child bash starts with: the exported variables (and nothing else of this
    shell), the same working directory and output, its own jobs."""
    inner = state.copy()
    exported = state.exported_variables()
    inner.variables = dict(exported)
    inner.variables["PWD"] = str(state.cwd)
    inner.exported_names = set(exported) | {"PWD"}
    inner.arrays = {}
    inner.functions = {}
    inner.aliases = {}
    inner.options = set()
    inner.readonly_names = set()
    inner.local_scopes = []
    inner.directory_stack = []
    inner.positional_arguments = list(positional)
    inner.loop_depth = inner.function_depth = inner.condition_depth = 0
    inner.job_table = LineJobs()
    inner.last_background_pid = None
    inner.last_exit_code = 0
    inner.script_name = script_name
    inner.traps = {}
    inner.shopts = None
    return inner


# -- /dev/std* ------------------------------------------------------------------------------------
_TO_STDERR = frozenset({"/dev/stderr", "/dev/fd/2"})
_TO_STDOUT = frozenset({"/dev/stdout", "/dev/fd/1"})


def device_redirections(redirections: list[Redirection]) -> list[Redirection]:
    """`> /dev/stderr` is `>&2`, `2> /dev/stdout` is `2>&1`, `< /dev/stdin` and `> /dev/stdout`
    change nothing: the guest's /dev holds only empty files of those names (read-only), which the
    library would open."""
    if not any(r.target in _TO_STDERR or r.target in _TO_STDOUT or r.target == "/dev/stdin"
               for r in redirections):
        return redirections
    out = []
    for redirection in redirections:
        kind, target = redirection.kind, redirection.target
        if kind in (RedirectionKind.WRITE_STDOUT, RedirectionKind.APPEND_STDOUT):
            if target in _TO_STDERR:
                out.append(Redirection(RedirectionKind.STDOUT_TO_STDERR, ""))
                continue
            if target in _TO_STDOUT:
                continue
        elif kind in (RedirectionKind.WRITE_STDERR, RedirectionKind.APPEND_STDERR):
            if target in _TO_STDOUT:
                out.append(Redirection(RedirectionKind.STDERR_TO_STDOUT, ""))
                continue
            if target in _TO_STDERR:
                continue
        elif kind == RedirectionKind.READ_STDIN and target == "/dev/stdin":
            continue
        out.append(redirection)
    return out


EXEC_REDIRECTS = re.compile(r"\s*exec\s+[0-9]*[<>&]")  # `exec` followed by a redirection
READ_ALONE = re.compile(r"\s*<[^<(]")  # `$(< FILE)`
REDIRECT_FIRST = re.compile(r"\s*(?:[0-9]*[<>]|&>)")  # a command that may be redirections alone
_OPENED = {RedirectionKind.WRITE_STDOUT: "w", RedirectionKind.WRITE_STDERR: "w", RedirectionKind.WRITE_BOTH: "w",
           RedirectionKind.APPEND_STDOUT: "a", RedirectionKind.APPEND_STDERR: "a", RedirectionKind.READ_STDIN: "r"}


def _appender(path: Path | None) -> Callable[[str], None]:
    """A writer appending to PATH (None: /dev/null); a write that fails is lost, as a write to a
    file removed or gone read-only under the shell's descriptor would be."""
    def append(text: str) -> None:
        if path is not None:
            try:
                rawbytes.write_file(path, text, append=True)
            except OSError:
                pass

    return append


class FileSink:
    """A compound's `> FILE` (`{ ...; } > log 2>&1`, `bash s.sh > log`, a loop's, a function's),
    written as its commands write, as bash's descriptor is: another command's `tail log` sees
    it grow, and stderr sent to the same file lands in order with stdout (both were collected
    and written at the end, stderr first). Writes gather in a buffer of at most BUFFER bytes,
    written when full, DELAY seconds after its first write, and at the end (a write per line took
    `seq 200000 > f` from 1.0 to 5.2 s). A write after the end (a background job of the compound)
    appends at once; a write that fails is lost, as `_appender`'s."""

    BUFFER = 64 << 10
    DELAY = 0.02

    def __init__(self, path: Path, append: bool) -> None:
        self.path = path
        if not append:
            open(path, "wb").close()  # raises as bash's open
        # appended to: whatever else writes the file (a program opening it by name) stays in order
        self._handle: Any = open(path, "ab", buffering=0)
        self._pieces: list[bytes] = []
        self._size = 0
        self._timer: asyncio.TimerHandle | None = None
        self.direct = 0  # while a program writes the file itself: errors sent here are written at once

    async def write(self, text: str) -> None:
        self.write_sync(text)

    def write_sync(self, text: str) -> None:
        if not text:
            return
        if self._handle is None:
            _appender(self.path)(text)
            return
        data = rawbytes.to_bytes(text)
        self._pieces.append(data)
        self._size += len(data)
        if self._size >= self.BUFFER or self.direct:
            self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.DELAY, self.flush)

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._pieces and self._handle is not None:
            data = b"".join(self._pieces)
            self._pieces.clear()
            self._size = 0
            try:
                self._handle.write(data)
            except OSError:
                pass

    def close(self) -> None:
        self.flush()
        if self._handle is not None:
            self._handle.close()
            self._handle = None


# -- trap ------------------------------------------------------------------------------------------
SIGNALS = ("HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "BUS", "FPE", "KILL", "USR1", "SEGV", "USR2",
           "PIPE", "ALRM", "TERM", "STKFLT", "CHLD", "CONT", "STOP", "TSTP", "TTIN", "TTOU", "URG",
           "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO", "PWR", "SYS")
PSEUDO_SIGNALS = ("EXIT", "ERR", "DEBUG", "RETURN")


def signal_key(spec: str) -> str | None:
    """'EXIT', 'ERR', … or 'SIGINT' for a trap's signal argument (a name, with or without SIG,
    any case, or a number); None if bash would not know it."""
    text = spec.upper()
    if text.isdigit():
        number = int(text)
        if number == 0:
            return "EXIT"
        return "SIG" + SIGNALS[number - 1] if 0 < number <= len(SIGNALS) else None
    if text in PSEUDO_SIGNALS:
        return text
    if text.startswith("SIG"):
        text = text[3:]
    return "SIG" + text if text in SIGNALS else None


def _trap_order(key: str) -> tuple[int, str]:
    if key in PSEUDO_SIGNALS:
        return (0 if key == "EXIT" else 100 + PSEUDO_SIGNALS.index(key), key)
    return (SIGNALS.index(key[3:]) + 1, key)


def _signal_table() -> str:
    cells = ["%2d) SIG%s" % (number, name) for number, name in enumerate(SIGNALS, 1)]
    return "".join("\t".join(cells[i:i + 5]) + "\n" for i in range(0, len(cells), 5))


class ShellFeatures(_ExecutorBase):
    """Mixed into the guest's executor (declaw_shell.GuestExecutor); the library's Executor is
    its base for the type checker only (at run time GuestExecutor's own bases give it)."""

    session: declaw_shell.Session | None  # GuestExecutor's

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.builtins["trap"] = self.builtin_trap
        self.builtins["exec"] = self.builtin_exec
        self.script_command_names = frozenset({"source", "."})
        self.programs = {"bash": self.run_shell, "sh": self.run_shell, "sudo": self.run_sudo,
                         "nohup": self.run_nohup, "nice": self.run_nice, "stdbuf": self.run_stdbuf,
                         "time": self.run_time, "timeout": self.run_timeout, "find": self.run_find}
        self.builtins.update(more_builtins.table(self))
        self.builtins["xargs"] = versions.answering_version(xargs_command.builtin(self), versions.XARGS_VERSION)
        describe = self.shell_builtins.describe

        def describe_programs(name: str, state: GuestState) -> tuple[str | None, str]:
            if name in self.programs and name != "time" and name not in state.aliases \
                    and name not in state.functions or name in PROGRAM_BUILTINS:
                return "file", "%s is %s/%s" % (name, COMMAND_DIR, name)
            kind, description = describe(name, state)
            if kind is None:  # a file on $PATH (`type black` after `pip install black`)
                path = self.on_path(name, state)
                if path is not None:
                    return "file", "%s is %s" % (name, path)
            return kind, description

        self.shell_builtins.describe = describe_programs
        command = self.builtins["command"]

        async def command_v(arguments: list[str], stdin: StdinValue | None, state: GuestState) -> int:
            """`command -v NAME...`: a file on $PATH by its path (the library's names ours alone)."""
            if len(arguments) < 2 or arguments[0] != "-v":
                return int(await command(arguments, stdin, state))
            status = 0
            for name in arguments[1:]:
                path = self.on_path(name, state) if describe(name, state)[0] is None else None
                if path is not None:
                    await state.output_sink.write(path + "\n")
                elif await command(["-v", name], None, state):
                    status = 1
            return status

        self.builtins["command"] = command_v

    # -- which names are programs ------------------------------------------------------------------
    def is_program(self, name: str) -> bool:
        """Whether NAME is a program of ours (what `sudo`, `timeout`, `exec` can run)."""
        return (name in self.programs and name != "time") or self.registry.get(name) is not None \
            or name in PROGRAM_BUILTINS

    def program_names(self) -> list[str]:
        """Every program name, for /usr/bin (binstubs.py)."""
        names = set(self.registry.names()) | PROGRAM_BUILTINS | (set(self.programs) - {"time"})
        return sorted(names - {"help"})

    # -- dispatch ------------------------------------------------------------------------------------
    async def dispatch(self, name: str, arguments: list[str], stdin: StdinValue | None,
                       error_destination: Destination, state: GuestState, in_pipeline: bool = False,
                       attached_to_terminal: bool = False, skip_functions: bool = False,
                       into: StdoutFile | None = None) -> ExecutionResult:
        """The library's, with a simple command's `> FILE` given to the Python program it names
        (or `into`, a wrapper's: `timeout 600 python3 train.py > log`) to write as it runs."""
        if into is None:
            into = STDOUT_FILE.get()
        if STDOUT_FILE.get() is not None:
            STDOUT_FILE.set(None)  # this command's own `> FILE`: not for the commands it runs
        sink = state.output_sink
        if into is None and not in_pipeline and isinstance(sink, FileSink) and not _OWN_STDOUT.get():
            # a command in a compound whose stdout is a file (`bash train.sh > log 2>&1`): a Python
            # program (a wrapper's, a shell's, a function's) writes it as it runs, stderr sent there
            # in order with it
            sink.flush()
            sink.direct += 1
            try:
                return await self.dispatch(name, arguments, stdin, error_destination, state, in_pipeline,
                                           attached_to_terminal, skip_functions, StdoutFile(sink.path, True))
            finally:
                sink.direct -= 1
        if skip_functions or name not in state.functions:
            if "/" in name:
                found = self.program_at(name, arguments, state)
                if isinstance(found, int):
                    if stdin is not None:
                        await self.discard_stdin(stdin)
                    return self.empty(found)
                if found[0] not in SHELL_NAMES or posixpath.basename(name) != found[0]:
                    name = found[0]  # a shell named by its path keeps that path as its `$0`
                arguments = found[1:]
            base = posixpath.basename(name) if "/" in name else name
            handler = self.programs.get(base)
            if handler is not None and into is not None and base in HANDS_ON | SHELL_NAMES and not in_pipeline:
                return await self.handing(into, handler(name, arguments, stdin, error_destination, state,
                                                        in_pipeline, attached_to_terminal))
            if handler is not None:
                return await handler(name, arguments, stdin, error_destination, state, in_pipeline,
                                     attached_to_terminal)
        elif into is not None and not in_pipeline:  # a function: its body writes the file (FileSink)
            return await self.handing(into, super().dispatch(name, arguments, stdin, error_destination, state,
                                                             in_pipeline, attached_to_terminal, skip_functions))
        if "/" not in name and (skip_functions or name not in state.functions):
            on_path = self.on_path(name, state)
            if on_path is not None:  # a program pip installed (~/.local/bin), a script put on $PATH
                return await self.dispatch(on_path, arguments, stdin, error_destination, state, in_pipeline,
                                           attached_to_terminal, skip_functions, into)
        if into is not None and not (getattr(self.registry.get(name), "writes_its_file", False)
                                     and (skip_functions or name not in state.functions)):
            into = None
        token = PYTHON_INTO.set(into)
        try:
            return await super().dispatch(name, arguments, stdin, error_destination, state, in_pipeline,
                                          attached_to_terminal, skip_functions)
        finally:
            PYTHON_INTO.reset(token)

    def on_path(self, name: str, state: GuestState) -> str | None:
        """The file a bare command name runs from $PATH, as bash finds it, when the name is none
        of ours (a builtin, a registered command, a program of the shell): the console scripts
        `pip install` puts in ~/.local/bin, a script copied to a folder on $PATH. WASI has no
        execute bits: any regular file counts (program_at then reads its `#!`)."""
        if (not name or name in self.builtins or self.registry.get(name) is not None or name in self.programs
                or name in PROGRAM_BUILTINS or name == "env"):
            return None
        for folder in state.variables.get("PATH", "").split(":"):
            candidate = posixpath.join(folder or ".", name)
            try:
                if stat.S_ISREG(os.stat(state.resolve_path(candidate)).st_mode):
                    return candidate
            except (OSError, ValueError):
                continue
        return None

    async def call_function(self, name: str, arguments: list[str], stdin: StdinValue | None,
                            error_destination: Destination, state: GuestState,
                            in_pipeline: bool = False) -> ExecutionResult:
        """The library's, with bash's FUNCNAME: the functions being run, innermost first, and
        "main" last in a script file's shell (`log() { echo "[${FUNCNAME[1]}] $*"; }`; the
        library left it unset)."""
        outer = state.arrays.get("FUNCNAME")
        stack = [outer[i] for i in sorted(outer)] if outer else (["main"] if state.runs_file else [])
        state.arrays["FUNCNAME"] = dict(enumerate([name, *stack]))
        try:
            return await super().call_function(name, arguments, stdin, error_destination, state, in_pipeline)
        finally:
            if outer is None:
                state.arrays.pop("FUNCNAME", None)
            else:
                state.arrays["FUNCNAME"] = outer

    @staticmethod
    async def handing(into: StdoutFile, call: Awaitable[ExecutionResult]) -> ExecutionResult:
        """Run a wrapper (HANDS_ON), a shell or a function with its line's `> FILE` handed on to
        what it runs: a Python program or a compound's commands write it as they go."""
        token = _HANDED.set(into)
        try:
            result = await call
        finally:
            _HANDED.reset(token)
        if into.taken:  # written there already: the redirect leaves it be
            result.written_there = True
        return result

    async def run_builtin_as_compound(self, *args: Any, **kwargs: Any) -> ExecutionResult:
        """A builtin with its own redirections (`xargs ... > f`, `command python3 ... > f`): its
        `> FILE` is written from its whole output, never by a program it runs."""
        token = _BUILTIN_OUTPUT.set(True)
        try:
            return await super().run_builtin_as_compound(*args, **kwargs)
        finally:
            _BUILTIN_OUTPUT.reset(token)

    @staticmethod
    def empty(status: int) -> ExecutionResult:
        return ExecutionResult.empty(status)

    def program_at(self, name: str, arguments: list[str], state: GuestState) -> list[str] | int:
        """The command line a path runs, [program, *args], or an exit status after saying why
        not: a program of ours in a bin folder, a `#!` interpreter, or a bash script."""
        absolute = posixpath.normpath(posixpath.join(str(state.cwd), name))
        folder, base = posixpath.split(absolute)
        if folder in BIN_DIRS and self.is_program(base):
            return [base, *arguments]
        path = state.resolve_path(name)
        if path.is_dir():
            state.write_error("bash: %s: Is a directory\n" % name)
            return 126
        try:
            with open(path, "rb") as handle:
                head = handle.read(SHEBANG_LIMIT)
        except FileNotFoundError:
            state.write_error("bash: %s: No such file or directory\n" % name)
            return 127
        except OSError as exc:
            state.write_error("bash: %s: %s\n" % (name, exc.strerror))
            return 126
        if head.startswith(b"\x7fELF"):
            state.write_error("bash: %s: cannot execute binary file: Exec format error\n" % name)
            return 126
        if not head.startswith(b"#!"):
            return ["bash", name, *arguments]
        line = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").strip()
        interpreter, _, option = line.partition(" ")
        option = option.strip()
        program = posixpath.basename(interpreter)
        known = program == "env" or (posixpath.dirname(interpreter) in BIN_DIRS and self.is_program(program))
        if not interpreter or not known:
            state.write_error("bash: %s: %s: bad interpreter: No such file or directory\n" % (name, interpreter))
            return 126
        return [program, *([option] if option else []), name, *arguments]

    # -- bash / sh -----------------------------------------------------------------------------------
    async def run_shell(  # noqa: C901 (bash's ways to get its script, each a few lines)
            self, name: str, arguments: list[str], stdin: StdinValue | None, error_destination: Destination,
            state: GuestState, in_pipeline: bool, attached: bool) -> ExecutionResult:
        write_error = self.error_sink(error_destination, state, state.output_sink.write_sync)
        stdin = self.take_pending_stdin(stdin, state)
        try:
            call = parse_shell_args(name, arguments)
        except UsageError as exc:
            write_error("%s\n" % exc)
            return await self.fail_script_command(stdin, 2)
        if call.version:
            if stdin is not None:
                await self.discard_stdin(stdin)
            return ExecutionResult(stdout=BASH_VERSION_LINE, kind=OutputKind.TEXT, exit_code=0)
        text = call.text
        if call.path is not None:
            path = state.resolve_path(call.path)
            try:
                text = path.read_bytes().decode("utf-8", "replace")
            except IsADirectoryError:
                write_error("%s: %s: Is a directory\n" % (name, call.path))
                return await self.fail_script_command(stdin, 126)
            except FileNotFoundError:
                write_error("%s: %s: No such file or directory\n" % (name, call.path))
                return await self.fail_script_command(stdin, 127)
            except OSError as exc:
                write_error("%s: %s: %s\n" % (name, call.path, exc.strerror))
                return await self.fail_script_command(stdin, 126)
        elif call.from_stdin:
            session = getattr(self, "session", None)
            if stdin is not None:
                text = await materialise_text(stdin.value, stdin.kind)
                stdin = None
            elif session is not None and session.terminal is not None:
                text = None  # typed at a PTY: an interactive shell of its own
            else:
                text = session.stdin.read() if session is not None else ""
        inner = new_scope(state, call.script_name, call.positional)
        inner.runs_file = call.path is not None
        for option, enable in call.options:
            (inner.options.add if enable else inner.options.discard)(option)

        async def body(scope: GuestState) -> int:
            status = 0
            try:
                if call.no_exec:
                    return self.check_syntax(text or "", scope)
                if call.login:
                    await self.source_profiles(scope, name)
                elif (call.interactive or text is None) and name == "bash":
                    await self.source_file(scope, "~/.bashrc")
                if text is None:
                    status = await self.interact(scope)
                else:
                    status = await self.run_script(text, scope)
            except ExitShell as exit_shell:
                status = exit_shell.exit_code
            except (BreakLoop, ContinueLoop):
                status = scope.last_exit_code
            return await self.finish_scope(scope, status)

        return await self.run_compound(body, stdin, error_destination, inner, in_pipeline, attached, copy=False)

    async def run_compound(self, body: Body, stdin: StdinValue | None, error_destination: Destination,
                           state: GuestState, in_pipeline: bool, attached: bool,
                           copy: bool = True) -> ExecutionResult:
        """Run `body(scope)` as one program's work: as a pipeline stage it streams from a task of
        its own (on a copy of the state), else it runs inline, straight to the terminal when
        nothing is redirected (so `bash -c`, `timeout`, `find -exec` output streams)."""
        stdin = self.take_pending_stdin(stdin, state)
        if in_pipeline:
            return await self.stream_compound(body, state.copy() if copy else state, stdin, [],
                                              merge_stderr=False, error_destination=error_destination)
        return await self.execute_compound(body, state, stdin, [], direct_output=attached,
                                           error_destination=error_destination)

    async def execute_compound(self, run: Body, state: GuestState, stdin: StdinValue | None,
                               redirections: list[Redirection], direct_output: bool,
                               error_destination: Destination | None = None) -> ExecutionResult:
        """A compound whose stdout goes to a file (its own `> FILE`, or the one its shell's or
        function's line handed on) writes it as it runs (compound_into_file). Otherwise the
        library's, whose captured output so far goes up with a `timeout` that stops it
        (deadlines.keep): `timeout 5 bash -c 'echo started; sleep 9' > log` writes `started`."""
        into = None
        if not redirections:  # a shell's or function's: the file its line's `> FILE` handed on, if any
            into = self.handed()
        elif not _BUILTIN_OUTPUT.get():
            seen = device_redirections(redirections)
            if any(r.kind in _TO_FILES for r in seen):
                target, append, _ = await self.trace_stdout_target(seen, state, False)
                if isinstance(target, Path):
                    into = StdoutFile(target, append)
        if into is not None:
            into.taken = True
            return await self.compound_into_file(run, state, stdin, redirections, into, error_destination)
        outer = state.output_sink

        async def keeping(scope: GuestState) -> int:
            try:
                return await run(scope)
            except (deadlines.DeadlineReached, asyncio.CancelledError) as stop:
                sink = scope.output_sink
                if sink is not outer and isinstance(sink, CollectingSink):
                    deadlines.keep(stop, sink.text())
                raise

        return await super().execute_compound(keeping, state, stdin, redirections, direct_output,
                                              error_destination)

    async def compound_into_file(self, run: Body, state: GuestState, stdin: StdinValue | None,
                                 redirections: list[Redirection], into: StdoutFile,
                                 error_destination: Destination | None) -> ExecutionResult:
        """A compound whose stdout goes to a file: its commands write the file as they go
        (FileSink), stderr too when it goes there (`> log 2>&1`, `&> log`)."""
        stdin = await self.apply_input_redirections(stdin, redirections, state)
        if error_destination is None:
            error_destination = await self.error_destination(redirections, state, merge_stderr=False)
        errors_there = isinstance(error_destination, Path) and error_destination == into.path
        try:
            sink = FileSink(into.path, into.append or errors_there)
        except OSError as exc:
            from . import RedirectionFailed, os_error_text  # the package imports this module

            raise RedirectionFailed(os_error_text(exc)) from None
        if errors_there:
            write_error = sink.write_sync
        else:  # elsewhere (perhaps the same file by another route: `timeout 5 bash s.sh > log 2>&1`)
            elsewhere = self.error_sink(error_destination, state, sink.write_sync)

            def write_error(text: str) -> None:
                sink.flush()  # what stdout wrote before stays before
                elsewhere(text)
        previous_stdin = state.pending_stdin
        if stdin is not None:
            state.pending_stdin = stdin
        try:
            with redirected_sinks(state, output_sink=sink, write_error=write_error):
                exit_code = await run(state)
        finally:
            state.pending_stdin = previous_stdin
            sink.close()
        return ExecutionResult.empty(exit_code)

    async def interact(self, scope: GuestState) -> int:
        """`bash` typed at a PTY's prompt: prompt, read, run, until `exit` or ^D."""
        from bash_purepython.continuation import script_needs_more_lines

        import declaw_shell

        from .door import Interrupted

        session = self.session
        assert session is not None and session.terminal is not None  # only a PTY's shell interacts
        while True:
            session.write_out(declaw_shell._prompt(scope))
            try:
                text = session.terminal.read_line()
                while text and script_needs_more_lines(text):
                    session.write_out("> ")
                    more = session.terminal.read_line()
                    if not more:
                        break
                    text += more
            except Interrupted:
                scope.last_exit_code = 130
                continue
            if not text:
                session.write_out("exit\n")
                return scope.last_exit_code
            await self.run_script(text, scope)

    @staticmethod
    def check_syntax(text: str, state: GuestState) -> int:
        """`bash -n`: parse only."""
        try:
            for block in continued.split(text):
                build_plan(block)
        except ShellSyntaxError as error:
            state.write_error("bash: %s\n" % error)
            return 2
        return 0

    async def source_profiles(self, state: GuestState, name: str) -> None:
        """A login shell reads /etc/profile, then bash the first of ~/.bash_profile,
        ~/.bash_login, ~/.profile (sh: ~/.profile)."""
        await self.source_file(state, "/etc/profile")
        for candidate in (("~/.bash_profile", "~/.bash_login", "~/.profile") if name == "bash"
                          else ("~/.profile",)):
            if await self.source_file(state, candidate):
                return

    async def source_file(self, state: GuestState, path_text: str) -> bool:
        home = state.variables.get("HOME", "/home/user")
        path = state.resolve_path(home + path_text[1:] if path_text.startswith("~/") else path_text)
        try:
            text = path.read_bytes().decode("utf-8", "replace")
        except OSError:
            return False
        state.function_depth += 1  # `return` works in a sourced file
        try:
            await self.run_script(text, state)
        except ControlFlowSignal as signal:
            if isinstance(signal, ExitShell):
                raise
        finally:
            state.function_depth -= 1
        return True

    # -- /dev/stdout, /dev/stderr, /dev/stdin as redirection targets ---------------------------------
    async def error_destination(self, redirections: list[Redirection], state: GuestState,
                                merge_stderr: bool) -> Destination:
        """Where stderr goes, as the library's (in order: where stdout points when `2>&1` is
        applied), except that `2>&1` after `>> FILE` (and so `&>> FILE`) appends: the library
        emptied FILE there, so `cmd >> log 2>&1` lost the log."""
        destination: Destination = ErrorDestination.STDOUT if merge_stderr else ErrorDestination.STDERR
        stdout_target: Destination = ErrorDestination.STDOUT
        stdout_appends = False
        for redirection in device_redirections(redirections):
            kind = redirection.kind
            if kind in (RedirectionKind.WRITE_STDOUT, RedirectionKind.APPEND_STDOUT):
                path = await self.redirection_path(redirection, state)
                stdout_target = ErrorDestination.DISCARD if path is None else path
                stdout_appends = kind == RedirectionKind.APPEND_STDOUT
                if destination == ErrorDestination.STDOUT:
                    destination = ErrorDestination.SINK_STDOUT
            elif kind == RedirectionKind.STDERR_TO_STDOUT:
                destination = stdout_target
                if isinstance(destination, Path) and not stdout_appends:
                    destination.write_text("", encoding="utf-8")
            elif kind == RedirectionKind.WRITE_BOTH:
                path = await self.redirection_path(redirection, state)
                if path is None:
                    destination = ErrorDestination.DISCARD
                else:
                    path.write_text("", encoding="utf-8")
                    destination = path
            elif kind in (RedirectionKind.WRITE_STDERR, RedirectionKind.APPEND_STDERR):
                path = await self.redirection_path(redirection, state)
                if path is None:
                    destination = ErrorDestination.DISCARD
                    continue
                if kind == RedirectionKind.WRITE_STDERR:
                    path.write_text("", encoding="utf-8")
                destination = path
        return destination

    async def apply_input_redirections(self, stdin: StdinValue | None, redirections: list[Redirection],
                                       state: GuestState) -> StdinValue | None:
        """The library's, reading a `< FILE` as bytes kept (rawbytes.py): it replaced every byte
        that is not UTF-8, so `zcat < f.gz` or `python3 x.py < data.bin` read a broken copy."""
        redirections = device_redirections(redirections)
        STDOUT_FILE.set(None)
        _OWN_STDOUT.set(any(r.kind in OUTPUT_REDIRECTION_KINDS for r in redirections))
        if any(r.kind in _TO_FILES for r in redirections) and not _BUILTIN_OUTPUT.get():
            # where this simple command's stdout goes (earlier files made, as bash does)
            target, append, _ = await self.trace_stdout_target(redirections, state, False)
            STDOUT_FILE.set(StdoutFile(target, append) if isinstance(target, Path) else None)
        if not any(r.kind == RedirectionKind.READ_STDIN for r in redirections):
            return await super().apply_input_redirections(stdin, redirections, state)
        for redirection in redirections:
            if redirection.kind != RedirectionKind.READ_STDIN:
                stdin = await super().apply_input_redirections(stdin, [redirection], state)
                continue
            path = await self.redirection_path(redirection, state)
            if path is None:
                stdin = StdinValue(value="", kind=OutputKind.TEXT)
                continue
            if str(path).startswith("/dev/"):
                from .coreutils import ENDLESS_DEVICES, file_chunks

                if str(path) in ENDLESS_DEVICES:  # read as it is consumed
                    stdin = StdinValue(value=as_async_iterator(file_chunks(path)), kind=OutputKind.STREAM_TEXT)
                    continue
            try:
                with path.open(encoding="utf-8", errors="surrogateescape", newline="") as handle:
                    stdin = StdinValue(value=handle.read(), kind=OutputKind.TEXT)
            except FileNotFoundError as error:
                raise ShellError(f"{redirection.target}: No such file or directory") from error
        return stdin

    async def apply_output_redirections(self, result: ExecutionResult, redirections: list[Redirection],
                                        state: GuestState, error_destination: Destination = None,
                                        merge_stderr: bool = False) -> ExecutionResult:
        """The library's, writing a file as bytes (rawbytes.py) and appending by O_APPEND rather
        than reading the file back and rewriting it; the output of a program in a guest of its
        own (`LIVE_STREAMS`) is written as it comes, the file made first, as bash's `>` does
        (`tail log` while a server runs). (The library's own streams stay written whole: they
        come a line at a time, and a write per line took `seq 200000 > f` from 1.0 to 5.2 s.)"""
        redirections = device_redirections(redirections)
        target, append, redirected = await self.trace_stdout_target(redirections, state, merge_stderr)
        if not redirected:
            return result
        if isinstance(target, Path) and (getattr(result.stdout, "exit_status", None) in WRITTEN_THERE
                                         or getattr(result, "written_there", False)):
            return ExecutionResult.empty(result.exit_code)
        if isinstance(target, Path) and getattr(result.stdout, "exit_status", None) in LIVE_STREAMS:
            errors_there = isinstance(error_destination, Path) and error_destination == target
            with open(target, "ab" if append or errors_there else "wb", buffering=0) as handle:
                async for chunk in result.stdout:
                    handle.write(rawbytes.to_bytes(chunk))
            return ExecutionResult.empty(result.exit_code)
        text = await materialise_text(result.stdout, result.kind)
        if target is None:
            return ExecutionResult(stdout=text, kind=OutputKind.TEXT, exit_code=result.exit_code)
        if target == ErrorDestination.STDERR:
            if text:
                state.write_error(text)
        elif isinstance(target, Path):
            errors_there = isinstance(error_destination, Path) and error_destination == target
            rawbytes.write_file(target, text, append=append or errors_there)
        return ExecutionResult.empty(result.exit_code)

    # -- scopes and traps ----------------------------------------------------------------------------
    async def run_line(self, script: str, state: GuestState) -> int:
        """One command line at the top: the script, then its EXIT trap."""
        status = await self.execute_script(script, state)
        return await self.finish_scope(state, status)

    async def finish_scope(self, state: GuestState, status: int) -> int:
        """A shell scope ends: its EXIT trap runs (with `$?` the status); `exit` there sets the
        scope's final status."""
        traps = getattr(state, "traps", None)
        action = traps.pop("EXIT", None) if traps else None
        if not action:
            return status
        state.last_exit_code = status
        try:
            await self.run_script(action, state)
        except ExitShell as exit_shell:
            return exit_shell.exit_code
        except ControlFlowSignal:
            pass
        return status

    async def drain_to_sink(self, result: ExecutionResult, state: GuestState) -> None:
        """After each command of a script: PIPESTATUS, and the ERR trap."""
        await super().drain_to_sink(result, state)
        caller = sys._getframe(1).f_code
        if caller is _RUN_AND_DRAIN:  # an item of an and/or list: its stages, should it be the last
            ran = _LIST_STAGES.get()
            if ran is not None:
                ran.append(getattr(result, "pipe_stages", None) or [result])
        if caller is not _RUN_SCRIPT:
            return
        stages = getattr(result, "pipe_stages", None) or [result]
        state.variables.pop("PIPESTATUS", None)
        state.arrays["PIPESTATUS"] = {i: str(stage.exit_code) for i, stage in enumerate(stages)}
        traps = getattr(state, "traps", None)
        if traps and traps.get("ERR"):
            status = result.exit_code
            if status != 0 and state.condition_depth == 0 and not result.exempt_from_errexit:
                action = traps.pop("ERR")
                state.last_exit_code = status
                try:
                    await self.run_script(action, state)
                finally:
                    traps.setdefault("ERR", action)
                    state.last_exit_code = status

    async def execute_and_or_list(self, node: Any, state: GuestState, stdin: StdinValue | None,
                                  direct_output: bool) -> ExecutionResult:
        """The library's; PIPESTATUS after `cd src && make | tee log` is the last pipeline's, as
        bash's (it held the list's status alone)."""
        ran: list[list[ExecutionResult]] = []
        token = _LIST_STAGES.set(ran)
        try:
            result = await super().execute_and_or_list(node, state, stdin, direct_output)
        finally:
            _LIST_STAGES.reset(token)
        if ran and len(ran[-1]) > 1:
            result.pipe_stages = ran[-1]
        return result

    async def run_subshell_script(self, script: str, state: GuestState) -> int:
        """`( … )` and `$( … )`: a subshell's EXIT trap runs when it ends."""
        status = await super().run_subshell_script(script, state)
        return await self.finish_scope(state, status)

    async def execute_pipeline(self, node: Any, state: GuestState, stdin: StdinValue | None) -> ExecutionResult:
        stages: list[ExecutionResult] = []
        token = _PIPE_STAGES.set(stages)
        try:
            result = await super().execute_pipeline(node, state, stdin)
        finally:
            _PIPE_STAGES.reset(token)
        result.pipe_stages = stages  # for PIPESTATUS, read once the stages have finished
        return result

    async def execute_stage(self, stage: Any, state: GuestState, stdin: StdinValue | None,
                            merge_stderr: bool) -> ExecutionResult:
        """The library's, and a simple command whose stderr goes where its stdout went before its
        own `> FILE` (`cmd 2>&1 >/dev/null | grep x`, to read only its errors) runs as a stage of
        its own, whose sink is the pipe: the library wrote those errors past the pipe."""
        if isinstance(stage, SimpleCommandNode) and _errors_into_the_pipe(stage.text):
            async def alone(inner: GuestState) -> int:
                result = await self.execute_simple_command(stage, inner, self.take_pending_stdin(None, inner),
                                                           merge_stderr)
                await self.drain_to_sink(result, inner)
                return result.exit_code

            result = await self.stream_compound(alone, state.copy(), stdin, [], merge_stderr)
        else:
            result = await super().execute_stage(stage, state, stdin, merge_stderr)
        stages = _PIPE_STAGES.get(None)
        if stages is not None:
            stages.append(result)
        return result

    async def capture_script(self, script: str, state: GuestState) -> Any:
        """`$( )` runs in a subshell: its assignments, `cd` and traps stay inside. `$(< FILE)` is
        FILE's content, as bash reads it (the library ran nothing: it was empty)."""
        if READ_ALONE.match(script):
            found, redirections, assignments = words.tokenize_simple_command(script.strip())
            if not found and not assignments and [r.kind for r in redirections] == [RedirectionKind.READ_STDIN]:
                path = await self.redirection_path(redirections[0], state)
                if path is None:  # /dev/null
                    return "", 0
                try:
                    with open(path, "rb") as handle:
                        return rawbytes.from_bytes(handle.read()), 0
                except OSError as error:
                    state.write_error("bash: %s: %s\n" % (redirections[0].target, error.strerror or error))
                    return "", 1
        inner = state.copy()
        inner.pending_stdin = state.pending_stdin
        try:
            return await super().capture_script(script, inner)
        finally:
            state.pending_stdin = inner.pending_stdin

    async def builtin_trap(self, arguments: list[str], stdin: StdinValue | None, state: GuestState) -> int:
        traps = state.traps if isinstance(getattr(state, "traps", None), dict) else {}
        args = list(arguments)
        if args[:1] == ["--"]:
            args = args[1:]
        if args[:1] == ["-l"]:
            await state.output_sink.write(_signal_table())
            return 0
        if not args or args[0] == "-p":
            wanted = args[1:]
            keys = [signal_key(spec) for spec in wanted] if wanted else sorted(traps, key=_trap_order)
            lines = ["trap -- %s %s\n" % (shlex.quote(traps[key]), key) for key in keys if key in traps]
            await state.output_sink.write("".join(lines))
            return 0
        if len(args) == 1 or args[0] == "-":
            action, specs = None, args[1:] if args[0] == "-" else args
        else:
            action, specs = args[0], args[1:]
        status = 0
        for spec in specs:
            key = signal_key(spec)
            if key is None:
                state.write_error("bash: trap: %s: invalid signal specification\n" % spec)
                status = 1
            elif action is None:
                traps.pop(key, None)
            else:
                traps[key] = action
        return status

    async def execute_simple_command(self, node: Any, state: GuestState, stdin: StdinValue | None,
                                     merge_stderr: bool = False, in_pipeline: bool = False) -> ExecutionResult:
        """The library's, and `exec` with only redirections (`exec >log 2>&1`, `exec 2>/dev/null`),
        which redirects the rest of this shell (the library applied them to `exec` alone)."""
        if not in_pipeline and EXEC_REDIRECTS.match(node.text):
            found, redirections, assignments = words.tokenize_simple_command(node.text)
            if redirections and not assignments:
                arguments = await words.expand_words(found, state, self.substitution_runner(state))
                if arguments == ["exec"]:
                    await self.redirect_shell(redirections, state)
                    return self.empty(0)
        if REDIRECT_FIRST.match(node.text):
            found, redirections, _ = words.tokenize_simple_command(node.text)
            if redirections and not found:  # `> log`, `>> log`, `< in`: the library ran nothing
                result = await super().execute_simple_command(node, state, stdin, merge_stderr, in_pipeline)
                status = await self.open_alone(redirections, state)
                return result if status == 0 else self.empty(status)
        return await super().execute_simple_command(node, state, stdin, merge_stderr, in_pipeline)

    async def open_alone(self, redirections: list[Redirection], state: GuestState) -> int:
        """A command of redirections alone: bash opens each file in order (`> log` makes or
        empties it, `>> log` makes it, `< in` must be readable) and runs nothing; 1 if one fails."""
        for redirection in device_redirections(redirections):
            mode = _OPENED.get(redirection.kind)
            path = await self.redirection_path(redirection, state) if mode is not None else None
            if path is None:  # another kind, or /dev/null
                continue
            try:
                if mode == "r":
                    open(path, "rb").close()
                else:
                    rawbytes.write_file(path, "", append=mode == "a")
            except OSError as error:
                state.write_error("bash: %s: %s\n" % (redirection.target, error.strerror or error))
                return 1
        return 0

    async def redirect_shell(self, redirections: list[Redirection], state: GuestState) -> None:
        """`exec`'s redirections, for the rest of this shell: stdout and stderr become the sinks
        they name, in order (`exec >log 2>&1`: both to log; `exec 2>&1 >log`: stderr where
        stdout was). Writes go to the file as they come (appended, bytes kept: rawbytes.py)."""
        for redirection in device_redirections(redirections):
            kind = redirection.kind
            if kind == RedirectionKind.STDERR_TO_STDOUT:
                state.write_error = state.output_sink.write_sync
                continue
            if kind == RedirectionKind.STDOUT_TO_STDERR:
                state.output_sink = CallableSink(state.write_error)
                continue
            mode = _OPENED.get(kind)
            if mode is None or mode == "r":
                continue  # `exec <FILE`: this shell's stdin is the command's own
            path = await self.redirection_path(redirection, state)
            if path is not None:  # opened (created, emptied for `>`) now, as bash opens it
                try:
                    rawbytes.write_file(path, "", append=mode == "a")
                except OSError as exc:
                    from . import RedirectionFailed, os_error_text  # the package imports this module

                    raise RedirectionFailed(os_error_text(exc)) from None
            write = _appender(path)
            if kind in (RedirectionKind.WRITE_STDOUT, RedirectionKind.APPEND_STDOUT, RedirectionKind.WRITE_BOTH):
                state.output_sink = CallableSink(write)
            if kind in (RedirectionKind.WRITE_STDERR, RedirectionKind.APPEND_STDERR, RedirectionKind.WRITE_BOTH):
                state.write_error = write

    async def builtin_exec(self, arguments: list[str], stdin: StdinValue | None, state: GuestState) -> int:
        """`exec CMD ARGS`: run CMD, then this shell ends with its status. (`exec` with only
        redirections is `redirect_shell`.)"""
        args = list(arguments)
        while args and args[0].startswith("-") and args[0] != "--":
            option = args.pop(0)
            if option == "-a" and args:
                args.pop(0)
        if args[:1] == ["--"]:
            args = args[1:]
        if not args:
            return 0
        if "/" not in args[0] and not self.is_program(args[0]):
            state.write_error("bash: exec: %s: not found\n" % args[0])
            raise ExitShell(127)
        result = await self.dispatch(args[0], args[1:], stdin, ErrorDestination.STDERR, state,
                                     attached_to_terminal=state.is_attached_to_terminal(),
                                     skip_functions=True)
        await self.drain_to_sink(result, state)
        raise ExitShell(result.exit_code)

    # -- program wrappers ----------------------------------------------------------------------------
    async def run_wrapped(self, wrapper: str, args: list[str], stdin: StdinValue | None,
                          error_destination: Destination, state: GuestState, in_pipeline: bool, attached: bool,
                          missing_status: int = 127, into: StdoutFile | None = None) -> ExecutionResult:
        """Run ARGS[0] as the program a wrapper names; a Python program writes the wrapper's
        `> FILE` (`into`, else the one handed on) itself as it runs."""
        into = into or self.handed()
        name = args[0]
        if "/" not in name and not self.is_program(name):
            write_error = self.error_sink(error_destination, state, state.output_sink.write_sync)
            if wrapper == "sudo":
                write_error("sudo: %s: command not found\n" % name)
                missing_status = 1
            else:
                write_error("%s: failed to run command '%s': No such file or directory\n" % (wrapper, name))
            if stdin is not None:
                await self.discard_stdin(stdin)
            return self.empty(missing_status)
        return await self.dispatch(name, args[1:], stdin, error_destination, state, in_pipeline, attached,
                                   skip_functions=True, into=into)

    def usage(self, error_destination: Destination, state: GuestState, stdin: StdinValue | None, text: str,
              status: int) -> int:
        self.error_sink(error_destination, state, state.output_sink.write_sync)(text)
        return status

    async def run_sudo(  # noqa: C901 (sudo's option grammar, one flat loop)
            self, name: str, arguments: list[str], stdin: StdinValue | None, error_destination: Destination,
            state: GuestState, in_pipeline: bool, attached: bool) -> ExecutionResult:
        """sudo [-u USER] [-g GROUP] [-E] [-H] [-n] [-S] [-i|-s] [-D DIR] [--] [VAR=VALUE]... CMD:
        one user in a sandbox, so the command runs as is (the user, environment and files are the
        same); `-i`/`-s` run it through `bash -l -c`/`bash -c`, `-D` in that folder."""
        args = list(arguments)
        login = shell = False
        directory = None
        while args and args[0].startswith("-") and len(args[0]) > 1:
            option = args.pop(0)
            if option == "--":
                break
            if option.startswith("--"):
                key, _, value = option.partition("=")
                if key in ("--user", "--group", "--chdir", "--prompt", "--host", "--close-from",
                           "--command-timeout", "--role", "--type", "--other-user") and not value and args:
                    value = args.pop(0)
                if key == "--login":
                    login = True
                elif key == "--shell":
                    shell = True
                elif key == "--chdir":
                    directory = value
                elif key in ("--version", "--validate", "--reset-timestamp", "--remove-timestamp"):
                    return self.empty(0)
                continue
            letters = option[1:]
            for position, letter in enumerate(letters):
                if letter in "ugpDhCTrtRU":
                    value = letters[position + 1:] or (args.pop(0) if args else "")
                    if letter == "D":
                        directory = value
                    break
                if letter == "i":
                    login = True
                elif letter == "s":
                    shell = True
                elif letter in "vkKV" and not args:
                    return self.empty(0)
        assignments = []
        while args and "=" in args[0] and not args[0].startswith("="):
            assignments.append(args.pop(0))
        if not args:
            if login or shell:
                args = ["bash"] + (["-l"] if login else [])
            else:
                self.usage(error_destination, state, stdin,
                           "usage: sudo [-u user] [-E] [-i|-s] [-D directory] [--] command [arg ...]\n", 1)
                if stdin is not None:
                    await self.discard_stdin(stdin)
                return self.empty(1)
        elif login or shell:
            args = ["bash", *(["-l"] if login else []), "-c", shlex.join(args)]
        if assignments:
            args = ["env", *assignments, *args]
        if directory:
            inner = state.copy()
            inner.pending_stdin = state.pending_stdin
            inner.cwd = state.resolve_path(directory)
            if not inner.cwd.is_dir():
                self.usage(error_destination, state, stdin,
                           "sudo: unable to change directory to %s: No such file or directory\n" % directory, 1)
                return self.empty(1)
            state = inner
        return await self.run_wrapped("sudo", args, stdin, error_destination, state, in_pipeline, attached)

    async def run_nohup(self, name: str, arguments: list[str], stdin: StdinValue | None,
                        error_destination: Destination, state: GuestState, in_pipeline: bool,
                        attached: bool) -> ExecutionResult:
        args = list(arguments)
        if args[:1] == ["--"]:
            args = args[1:]
        if not args:
            self.usage(error_destination, state, stdin, "nohup: missing operand\n", 125)
            return self.empty(125)
        return await self.run_wrapped("nohup", args, stdin, error_destination, state, in_pipeline, attached)

    async def run_nice(self, name: str, arguments: list[str], stdin: StdinValue | None,
                       error_destination: Destination, state: GuestState, in_pipeline: bool,
                       attached: bool) -> ExecutionResult:
        args = list(arguments)
        while args and args[0].startswith("-") and args[0] != "--":
            option = args.pop(0)
            if option in ("-n", "--adjustment") and args:
                args.pop(0)
        if args[:1] == ["--"]:
            args = args[1:]
        if not args:
            return ExecutionResult(stdout="0\n", kind=OutputKind.TEXT, exit_code=0)
        return await self.run_wrapped("nice", args, stdin, error_destination, state, in_pipeline, attached)

    async def run_stdbuf(self, name: str, arguments: list[str], stdin: StdinValue | None,
                         error_destination: Destination, state: GuestState, in_pipeline: bool,
                         attached: bool) -> ExecutionResult:
        args = list(arguments)
        while args and args[0].startswith("-") and args[0] != "--":
            option = args.pop(0)
            if option in ("-i", "-o", "-e") and args:
                args.pop(0)
        if args[:1] == ["--"]:
            args = args[1:]
        if not args:
            self.usage(error_destination, state, stdin, "stdbuf: missing operand\n", 125)
            return self.empty(125)
        return await self.run_wrapped("stdbuf", args, stdin, error_destination, state, in_pipeline, attached)

    async def run_time(self, name: str, arguments: list[str], stdin: StdinValue | None,
                       error_destination: Destination, state: GuestState, in_pipeline: bool,
                       attached: bool) -> ExecutionResult:
        """`time CMD`: bash's keyword, for a simple command (a pipeline after `time` times its
        first command only); the report goes to stderr. User time is the guest's CPU time."""
        args = list(arguments)
        posix = False
        while args and args[0] in ("-p", "--"):
            posix |= args.pop(0) == "-p"

        async def body(scope: GuestState) -> int:
            started, cpu = time.monotonic(), time.process_time()
            status = 0
            if args:
                result = await self.dispatch(args[0], args[1:], None, ErrorDestination.STDERR, scope,
                                             attached_to_terminal=scope.is_attached_to_terminal())
                await self.drain_to_sink(result, scope)
                status = result.exit_code
            real, user = time.monotonic() - started, time.process_time() - cpu
            if posix:
                scope.write_error("real %.2f\nuser %.2f\nsys %.2f\n" % (real, user, 0.0))
            else:
                scope.write_error("\nreal\t%s\nuser\t%s\nsys\t0m0.000s\n" % (_minutes(real), _minutes(user)))
            return status

        return await self.run_compound(body, stdin, error_destination, state, in_pipeline, attached)

    async def run_find(self, name: str, arguments: list[str], stdin: StdinValue | None,
                       error_destination: Destination, state: GuestState, in_pipeline: bool,
                       attached: bool) -> ExecutionResult:
        if list(arguments) == ["--version"]:  # versions.py: GNU's shape, naming declaw-wasm
            return ExecutionResult(stdout=versions.FIND_VERSION, kind=OutputKind.TEXT, exit_code=0)
        return await find_command.run(self, arguments, stdin, error_destination, state, in_pipeline, attached)

    async def run_timeout(self, name: str, arguments: list[str], stdin: StdinValue | None,
                          error_destination: Destination, state: GuestState, in_pipeline: bool,
                          attached: bool) -> ExecutionResult:
        return await timeout_command.run(self, arguments, stdin, error_destination, state, in_pipeline,
                                         attached, self.handed())

    @staticmethod
    def handed() -> StdoutFile | None:
        """The running wrapper's `> FILE` (HANDS_ON): for the program it runs, not for any that
        one runs."""
        into = _HANDED.get()
        _HANDED.set(None)
        return into


def _errors_into_the_pipe(text: str) -> bool:
    """Whether a simple command's redirections send its stderr to where its stdout pointed before
    a later `> FILE` moved stdout away (`2>&1 >FILE`): the pipe, in a pipeline's stage."""
    if "&1" not in text:
        return False  # (no tokenizing for the usual stage)
    into_stdout = False
    stdout_moved = False
    for redirection in words.tokenize_simple_command(text)[1]:
        kind = redirection.kind
        if kind in (RedirectionKind.WRITE_STDOUT, RedirectionKind.APPEND_STDOUT):
            if into_stdout and not stdout_moved:
                return True
            stdout_moved = True
        elif kind == RedirectionKind.STDERR_TO_STDOUT:
            into_stdout = not stdout_moved
        elif kind in (RedirectionKind.WRITE_BOTH, RedirectionKind.WRITE_STDERR, RedirectionKind.APPEND_STDERR):
            into_stdout = False
    return False


def _minutes(seconds: float) -> str:
    return "%dm%.3fs" % (seconds // 60, seconds % 60)


_RUN_SCRIPT = Executor.run_script.__code__
_RUN_AND_DRAIN = Executor.run_and_drain.__code__
# the stages of each item an and/or list ran (execute_and_or_list): the last one's are PIPESTATUS
_LIST_STAGES: contextvars.ContextVar[list[list[ExecutionResult]] | None] = contextvars.ContextVar(
    "declaw_list_stages", default=None)
# the pipeline being built, per task
_PIPE_STAGES: contextvars.ContextVar[list[ExecutionResult]] = contextvars.ContextVar("declaw_pipe_stages")
