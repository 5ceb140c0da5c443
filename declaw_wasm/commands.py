"""`sbx.commands`: command lines run in the sandbox, each program a fresh guest instance.

This is the foundation's small command language: lists joined by `&&`, `||` and `;`,
`VAR=x` prefixes, `cd`, `export`, `true`, `false`, `exit`, `pwd`, `echo`, and `python`/`python3`
with `-c`, `-m`, a script and its arguments, with shell quoting. Anything else answers as bash
does (`bash: foo: command not found`, exit 127); pipes and redirections say plainly that they
are not supported yet. Every `python3` is its own guest, so it behaves like a separate process.
"""

from __future__ import annotations

import posixpath
import re
import shlex
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

from .exceptions import InvalidArgumentException, SandboxException, TimeoutException
from .guest import Guest, GuestSpec, Mount, OutputSink
from .models import CommandResult

if TYPE_CHECKING:
    from .sandbox import SandboxCore

PYTHON_NAMES = re.compile(r"^(?:/usr(?:/local)?/bin/)?python(?:3(?:\.15)?)?$")
GUEST_PYTHON = "/usr/local/bin/python3"
BOOT_SCRIPT = "/usr/local/lib/declaw/_declaw_boot.py"
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
SEPARATORS = {"&&", "||", ";"}
DEFAULT_TIMEOUT = 60.0


@dataclass
class SimpleCommand:
    assignments: dict[str, str] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)


@dataclass
class _LineState:
    """What a command line carries from one command to the next, as a bash process would."""

    cwd: str
    env: dict[str, str]
    stdout: OutputSink
    stderr: OutputSink
    deadline: Optional[float]
    exited: bool = False  # `exit` ran: the rest of the line is skipped


class UnsupportedSyntax(Exception):
    pass


def parse(line: str) -> list[tuple[Optional[str], SimpleCommand]]:
    """Split a command line into simple commands with the operator that precedes each."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        tokens = list(lexer)
    except ValueError as exc:  # unbalanced quotes
        raise UnsupportedSyntax(f"syntax error: {exc}") from None
    chain: list[tuple[Optional[str], SimpleCommand]] = []
    op: Optional[str] = None
    current = SimpleCommand()
    for token in tokens:
        if token in SEPARATORS:
            if not current.argv and not current.assignments:
                raise UnsupportedSyntax(f"syntax error near unexpected token `{token}'")
            chain.append((op, current))
            op, current = token, SimpleCommand()
        elif token and all(ch in "();<>|&" for ch in token):
            raise UnsupportedSyntax(f"`{token}' is not supported by this sandbox's shell yet")
        elif not current.argv and ASSIGNMENT.match(token):
            name, value = token.split("=", 1)
            current.assignments[name] = value
        else:
            current.argv.append(token)
    if current.argv or current.assignments:
        chain.append((op, current))
    elif op in ("&&", "||"):
        raise UnsupportedSyntax("syntax error: unexpected end of file")
    return chain


class Commands:
    """Runs command lines in one sandbox (E2B's `sbx.commands`)."""

    def __init__(self, core: "SandboxCore") -> None:
        self._core = core

    def run(self, cmd: str, background: bool = False, envs: Optional[dict[str, str]] = None,
            user: Optional[str] = None, cwd: Optional[str] = None,
            on_stdout: Optional[Callable[[str], None]] = None,
            on_stderr: Optional[Callable[[str], None]] = None,
            timeout: Optional[float] = DEFAULT_TIMEOUT,
            request_timeout: Optional[float] = None) -> CommandResult:
        """Run `cmd` to completion. A non-zero exit code is returned in the result, not raised;
        running past `timeout` seconds (0 or None: no limit) stops it and raises
        `TimeoutException` carrying the output so far."""
        if background:
            raise InvalidArgumentException("background commands are not supported yet")
        if not isinstance(cmd, str):
            raise InvalidArgumentException(f"cmd must be a string, got {type(cmd).__name__}")
        core = self._core
        core.ensure_running()
        limits = core.limits
        state = _LineState(
            cwd=core.fs.absolute(cwd) if cwd else core.fs.absolute("."),
            env={**core.guest_env(), **_check_envs(envs)},
            stdout=OutputSink(limits.output_limit, on_stdout),
            stderr=OutputSink(limits.output_limit, on_stderr),
            deadline=(time.monotonic() + timeout) if timeout else None,
        )
        if cwd and not core.fs.exists(state.cwd):
            raise InvalidArgumentException(f"cwd {state.cwd} does not exist in the sandbox")
        try:
            chain = parse(cmd)
        except UnsupportedSyntax as exc:
            state.stderr(f"bash: {exc}\n".encode())
            return _result(state, 2)
        status = 0
        for op, simple in chain:
            if (op == "&&" and status != 0) or (op == "||" and status == 0):
                continue
            status = self._execute(simple, state, timeout)
            if state.exited:
                break
        return _result(state, status)

    def _execute(self, simple: SimpleCommand, state: _LineState, timeout: Optional[float]) -> int:
        if not simple.argv:
            state.env.update(simple.assignments)
            return 0
        name, args = simple.argv[0], simple.argv[1:]
        builtin = _BUILTINS.get(name)
        if builtin is not None:
            return builtin(self, args, state)
        if PYTHON_NAMES.match(name):
            env = {**state.env, **simple.assignments, "PWD": state.cwd}
            return self._python(args, env, state, timeout)
        state.stderr(f"bash: {name}: command not found\n".encode())
        return 127

    def _python(self, args: list[str], env: dict[str, str], state: _LineState,
                timeout: Optional[float]) -> int:
        core = self._core
        remaining = None
        if state.deadline is not None:
            remaining = state.deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutException(f"command timed out after {timeout} s",
                                       state.stdout.text(), state.stderr.text())
        spec = python_spec(core.runtime.warm, state.cwd, args, env, core.fs.mounts,
                           timeout=remaining, memory_limit=core.limits.memory_limit)
        guest = Guest(core.runtime, spec, stdout=state.stdout, stderr=state.stderr)
        outcome = core.run_guest(guest)
        if outcome.stopped == "timeout":
            raise TimeoutException(f"command timed out after {timeout} s",
                                   outcome.stdout, outcome.stderr)
        if outcome.stopped == "killed":
            raise SandboxException(f"sandbox {core.sandbox_id} was killed while the command ran")
        if outcome.error:
            state.stderr(f"{outcome.error}\n".encode())
        return outcome.exit_code


def python_spec(warm: bool, cwd: str, args: list[str], env: dict[str, str],
                mounts: list[Mount], **limits: Any) -> GuestSpec:
    """`python3 ARGS` in `cwd` as a guest: on the warm snapshot one turn calls the already
    imported boot module; on the cold module `run` executes the boot script with a WASI argv.
    `limits` are GuestSpec's (timeout, memory_limit)."""
    if warm:
        start = f"import _declaw_boot\n_declaw_boot.start({cwd!r}, {args!r}, {env!r})\n"
        return GuestSpec(argv=[GUEST_PYTHON], env=env, mounts=mounts, turns=[start], **limits)
    return GuestSpec(argv=[GUEST_PYTHON, BOOT_SCRIPT, cwd, *args], env=env, mounts=mounts, **limits)


def _result(state: _LineState, status: int) -> CommandResult:
    error = None
    if state.stdout.truncated or state.stderr.truncated:
        error = "output truncated at the sandbox's output limit"
    return CommandResult(stdout=state.stdout.text(), stderr=state.stderr.text(),
                         exit_code=status, error=error)


def _check_envs(envs: Optional[dict[str, str]]) -> dict[str, str]:
    if envs is None:
        return {}
    if not isinstance(envs, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                             for k, v in envs.items()):
        raise InvalidArgumentException("envs must be a dict of str to str")
    return dict(envs)


def _cd(cmds: Commands, args: list[str], state: _LineState) -> int:
    target = args[0] if args else state.env.get("HOME", "/home/user")
    path = posixpath.normpath(posixpath.join(state.cwd, target))
    fs = cmds._core.fs
    try:
        info = fs.get_info(path)
    except SandboxException:
        state.stderr(f"bash: cd: {target}: No such file or directory\n".encode())
        return 1
    if info.type != "dir":
        state.stderr(f"bash: cd: {target}: Not a directory\n".encode())
        return 1
    state.cwd = path
    return 0


def _export(cmds: Commands, args: list[str], state: _LineState) -> int:
    for arg in args:
        if "=" in arg:
            name, value = arg.split("=", 1)
            state.env[name] = value
    return 0


def _echo(cmds: Commands, args: list[str], state: _LineState) -> int:
    newline = True
    if args and args[0] == "-n":
        newline, args = False, args[1:]
    state.stdout((" ".join(args) + ("\n" if newline else "")).encode())
    return 0


def _exit(cmds: Commands, args: list[str], state: _LineState) -> int:
    state.exited = True
    try:
        return int(args[0]) & 0xFF if args else 0
    except ValueError:
        state.stderr(f"bash: exit: {args[0]}: numeric argument required\n".encode())
        return 2


_BUILTINS: dict[str, Callable[[Commands, list[str], _LineState], int]] = {
    "cd": _cd,
    "export": _export,
    "echo": _echo,
    "exit": _exit,
    "true": lambda c, a, s: 0,
    "false": lambda c, a, s: 1,
    "pwd": lambda c, a, s: (s.stdout((s.cwd + "\n").encode()), 0)[1],
}
