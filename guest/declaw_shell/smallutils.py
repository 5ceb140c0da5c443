"""Small programs setup scripts and agents call that the guest lacked ('command not found', which
ends a `set -e` script): `install` (GNU coreutils 9.1: -d, -D, -t, -T, -v, -m/-o/-g/-p/-s/-c
accepted), `chown`/`chgrp` (the owner and group are checked against the sandbox's /etc/passwd
and /etc/group, and the files must exist; a sandbox has one user, so ownership stays as it is,
as `chmod`'s modes do), `envsubst` (gettext: $VAR and ${VAR} from the environment, a SHELL-FORMAT
limiting which, `-v`), `factor` (coreutils: any size, Pollard's rho), `expand`/`unexpand` (-t N
or a list, -i, -a, --first-only).
"""

from __future__ import annotations

import math
import os
import random
import re
import shutil
from typing import TYPE_CHECKING, Any

from bash_purepython.command.command import Command, CommandResult, InputKind, OutputKind

if TYPE_CHECKING:
    from collections.abc import Callable

    Invocation = Any  # bash_purepython's CommandInvocation (untyped)

TEXT_IN = frozenset({InputKind.TEXT, InputKind.ARGUMENTS})
ARGS_ONLY = frozenset({InputKind.ARGUMENTS})
TEXT_OUT = frozenset({OutputKind.TEXT})
NAME = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def _stdin(invocation: Invocation) -> str:
    return str(invocation.stdin) if invocation.stdin_kind == InputKind.TEXT and invocation.stdin else ""


def _strerror(exc: OSError) -> str:
    return exc.strerror or str(exc)


# -- install -----------------------------------------------------------------------------------------
def install(args: list[str], resolve: Callable[[str], str], out: Callable[[str], None],  # noqa: C901 - options
            error: Callable[[str], None]) -> int:
    directories = leading = verbose = no_target = False
    target: str | None = None
    operands: list[str] = []
    index = 0
    takes_value = {"m", "o", "g", "t", "S"}
    while index < len(args):
        arg = args[index]
        index += 1
        if arg == "--":
            operands += args[index:]
            break
        if arg.startswith("--"):
            name, _, value = arg.partition("=")
            if name == "--directory":
                directories = True
            elif name == "--verbose":
                verbose = True
            elif name == "--target-directory":
                target = value
            elif name == "--no-target-directory":
                no_target = True
            elif name not in ("--mode", "--owner", "--group", "--preserve-timestamps", "--strip", "--compare",
                              "--backup", "--suffix", "--context", "--preserve-context", "--strip-program"):
                error(f"install: unrecognized option '{arg}'\nTry 'install --help' for more information.\n")
                return 1
            continue
        if not arg.startswith("-") or arg == "-":
            operands.append(arg)
            continue
        for position, letter in enumerate(arg[1:], start=1):
            if letter in takes_value:
                given: str | None = arg[position + 1:] or (args[index] if index < len(args) else None)
                if not arg[position + 1:]:
                    index += 1
                if given is None:
                    error(f"install: option requires an argument -- '{letter}'\n"
                          "Try 'install --help' for more information.\n")
                    return 1
                if letter == "t":
                    target = given
                break
            if letter == "d":
                directories = True
            elif letter == "D":
                leading = True
            elif letter == "v":
                verbose = True
            elif letter == "T":
                no_target = True
            elif letter not in "bcCpsZ":
                error(f"install: invalid option -- '{letter}'\nTry 'install --help' for more information.\n")
                return 1
    if directories:
        if not operands:
            error("install: missing file operand\nTry 'install --help' for more information.\n")
            return 1
        status = 0
        for name in operands:
            status = _make_dirs(name, resolve, out if verbose else None, error) or status
        return status
    if not operands or (len(operands) == 1 and target is None):
        message = "missing file operand" if not operands else f"missing destination file operand after '{operands[0]}'"
        error(f"install: {message}\nTry 'install --help' for more information.\n")
        return 1
    if target is None and not no_target and (len(operands) > 2 or os.path.isdir(resolve(operands[-1]))):
        target = operands.pop()
    if target is not None:
        if leading and _make_dirs(target, resolve, out if verbose else None, error):
            return 1
        if not os.path.isdir(resolve(target)):
            reason = "Not a directory" if os.path.exists(resolve(target)) else "No such file or directory"
            error(f"install: target '{target}': {reason}\n")
            return 1
        pairs = [(source, os.path.join(target, os.path.basename(source.rstrip("/")))) for source in operands]
    else:
        if len(operands) > 2:
            error(f"install: extra operand '{operands[2]}'\nTry 'install --help' for more information.\n")
            return 1
        pairs = [(operands[0], operands[1])]
        if leading and os.path.dirname(operands[1]) and \
                _make_dirs(os.path.dirname(operands[1]), resolve, out if verbose else None, error):
            return 1
    status = 0
    for source, destination in pairs:
        if not os.path.exists(resolve(source)):
            error(f"install: cannot stat '{source}': No such file or directory\n")
            status = 1
            continue
        if os.path.isdir(resolve(source)):
            error(f"install: omitting directory '{source}'\n")
            status = 1
            continue
        try:
            shutil.copyfile(resolve(source), resolve(destination))
        except OSError as exc:
            error(f"install: cannot create regular file '{destination}': {_strerror(exc)}\n")
            status = 1
            continue
        if verbose:
            out(f"'{source}' -> '{destination}'\n")
    return status


def _make_dirs(name: str, resolve: Callable[[str], str], out: Callable[[str], None] | None,
               error: Callable[[str], None]) -> int:
    """mkdir -p, saying each folder made (`install -v -d`)."""
    parts = [part for part in name.split("/") if part]
    path = "/" if name.startswith("/") else ""
    for part in parts:
        path = os.path.join(path, part) if path else part
        if os.path.isdir(resolve(path)):
            continue
        try:
            os.mkdir(resolve(path))
        except OSError as exc:
            error(f"install: cannot create directory \u2018{path}\u2019: {_strerror(exc)}\n")
            return 1
        if out is not None:
            out(f"install: creating directory '{path}'\n")
    return 0


class InstallCommand(Command):
    """install [OPTION]... SOURCE DEST | SOURCE... DIRECTORY | -t DIRECTORY SOURCE... | -d DIRECTORY..."""

    name = "install"
    input_kinds = ARGS_ONLY
    output_kinds = TEXT_OUT
    summary = "copy files and set attributes"

    def run(self, invocation: Invocation) -> CommandResult:
        state = invocation.state
        printed: list[str] = []
        status = install(list(invocation.arguments), lambda name: str(state.resolve_path(name)), printed.append,
                         state.write_error)
        return CommandResult(stdout="".join(printed), exit_code=status)


# -- chown, chgrp ------------------------------------------------------------------------------------
def _names(path: str) -> dict[str, str]:
    """name -> id from an /etc/passwd or /etc/group."""
    found: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                fields = line.split(":")
                if len(fields) > 2:
                    found[fields[0]] = fields[2]
    except OSError:
        pass
    return found


def chown(program: str, args: list[str], resolve: Callable[[str], str], error: Callable[[str], None]) -> int:
    recursive = False
    reference = False
    operands: list[str] = []
    for arg in args:
        if arg.startswith("--reference="):
            reference = True
        elif arg in ("-R", "--recursive"):
            recursive = True
        elif arg.startswith("--") or (arg.startswith("-") and len(arg) > 1 and set(arg[1:]) <= set("RcfvhHLP")):
            recursive = recursive or "R" in arg
        elif arg.startswith("-") and len(arg) > 1:
            error(f"{program}: invalid option -- '{arg[1]}'\nTry '{program} --help' for more information.\n")
            return 1
        else:
            operands.append(arg)
    if not reference:
        if not operands:
            error(f"{program}: missing operand\nTry '{program} --help' for more information.\n")
            return 1
        spec = operands.pop(0)
        users, groups = _names(resolve("/etc/passwd")), _names(resolve("/etc/group"))
        owner, separator, group = spec.partition(":") if ":" in spec else spec.partition(".") if \
            program == "chown" and "." in spec and spec.split(".")[0] in users else (spec, "", "")
        if program == "chgrp":
            owner, group = "", spec
        if owner and owner not in users and not owner.isdigit():
            error(f"{program}: invalid user: \u2018{spec}\u2019\n")
            return 1
        if group and group not in groups and not group.isdigit():
            what = "group" if program == "chgrp" else "group"
            error(f"{program}: invalid {what}: \u2018{spec}\u2019\n")
            return 1
    if not operands:
        error(f"{program}: missing operand after \u2018{args[-1] if args else ''}\u2019\n"
              f"Try '{program} --help' for more information.\n")
        return 1
    status = 0
    for name in operands:
        if not os.path.lexists(resolve(name)):
            error(f"{program}: cannot access '{name}': No such file or directory\n")
            status = 1
    del recursive  # a sandbox has one user: nothing below changes either
    return status


class ChownCommand(Command):
    """chown [-R] OWNER[:GROUP] FILE... (module docstring)."""

    name = "chown"
    input_kinds = ARGS_ONLY
    output_kinds = TEXT_OUT
    summary = "change file owner and group"

    def run(self, invocation: Invocation) -> CommandResult:
        state = invocation.state
        status = chown(self.name, list(invocation.arguments), lambda name: str(state.resolve_path(name)),
                       state.write_error)
        return CommandResult(stdout="", exit_code=status)


class ChgrpCommand(ChownCommand):
    name = "chgrp"
    summary = "change group ownership"


# -- envsubst ----------------------------------------------------------------------------------------
def envsubst(args: list[str], text: str, environ: dict[str, str], error: Callable[[str], None]) -> tuple[str, int]:
    variables_only = False
    formats: list[str] = []
    for arg in args:
        if arg in ("-v", "--variables"):
            variables_only = True
        elif arg in ("-h", "--help"):
            return "Usage: envsubst [OPTION] [SHELL-FORMAT]\n", 0
        elif arg in ("-V", "--version"):
            return "envsubst (GNU gettext-runtime) 0.21\n", 0
        elif arg.startswith("-") and arg != "-":
            error(f"envsubst: invalid option -- '{arg[1:2]}'\nTry 'envsubst --help' for more information.\n")
            return "", 1
        else:
            formats.append(arg)
    if len(formats) > 1:
        error("envsubst: too many arguments\n")
        return "", 1
    named = [m.group(1) or m.group(2) for m in NAME.finditer(formats[0])] if formats else None
    if variables_only:
        if named is None:
            error("envsubst: missing arguments\n")
            return "", 1
        return "".join(f"{name}\n" for name in named), 0
    allowed = set(named) if named is not None else None

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if allowed is not None and name not in allowed:
            return match.group(0)
        return environ.get(name, "")

    return NAME.sub(replace, text), 0


class EnvsubstCommand(Command):
    """envsubst [-v] [SHELL-FORMAT] (module docstring)."""

    name = "envsubst"
    input_kinds = TEXT_IN
    output_kinds = TEXT_OUT
    summary = "substitute environment variables in shell format strings"

    def run(self, invocation: Invocation) -> CommandResult:
        state = invocation.state
        text, status = envsubst(list(invocation.arguments), _stdin(invocation), dict(state.exported_variables()),
                                state.write_error)
        return CommandResult(stdout=text, exit_code=status)


# -- factor ------------------------------------------------------------------------------------------
def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    for p in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37):
        if n % p == 0:
            return n == p
    d, r = n - 1, 0
    while d % 2 == 0:
        d, r = d // 2, r + 1
    for a in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37):  # deterministic below 3.3e24, strong above
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(r - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _rho(n: int, rng: random.Random) -> int:
    """A factor of composite n (Pollard's rho, Brent's cycle)."""
    if n % 2 == 0:
        return 2
    while True:
        y, c, m = rng.randrange(1, n), rng.randrange(1, n), 128
        g = r = q = 1
        x = ys = y
        while g == 1:
            x = y
            for _ in range(r):
                y = (y * y + c) % n
            k = 0
            while k < r and g == 1:
                ys = y
                for _ in range(min(m, r - k)):
                    y = (y * y + c) % n
                    q = q * abs(x - y) % n
                g = math.gcd(q, n)
                k += m
            r *= 2
        if g == n:
            g = 1
            while g == 1:
                ys = (ys * ys + c) % n
                g = math.gcd(abs(x - ys), n)
        if g != n:
            return g


def prime_factors(n: int) -> list[int]:
    if n < 2:
        return []  # GNU: "0:" and "1:"
    factors: list[int] = []
    for p in (2, 3, 5, 7, 11, 13):
        while n % p == 0:
            factors.append(p)
            n //= p
    pending = [n] if n > 1 else []
    rng = random.Random(n)
    while pending:
        m = pending.pop()
        if _is_prime(m):
            factors.append(m)
            continue
        d = _rho(m, rng)
        pending += [d, m // d]
    return sorted(factors)


def factor(args: list[str], text: str, error: Callable[[str], None]) -> tuple[str, int]:
    numbers = [a for a in args if a != "--"] or text.split()
    out: list[str] = []
    status = 0
    for item in numbers:
        if args and item.startswith("-") and item[1:2].isdigit():
            error(f"factor: invalid option -- '{item[1]}'\nTry 'factor --help' for more information.\n")
            return "", 1
        digits = item.lstrip("+")
        if not digits.isdigit() or not digits.isascii():
            error(f"factor: \u2018{item}\u2019 is not a valid positive integer\n")
            status = 1
            continue
        n = int(digits)
        out.append(f"{n}:" + "".join(f" {p}" for p in prime_factors(n)) + "\n")
    return "".join(out), status


class FactorCommand(Command):
    """factor [NUMBER]... (module docstring)."""

    name = "factor"
    input_kinds = TEXT_IN
    output_kinds = TEXT_OUT
    summary = "factor numbers"

    def run(self, invocation: Invocation) -> CommandResult:
        text, status = factor(list(invocation.arguments), _stdin(invocation), invocation.state.write_error)
        return CommandResult(stdout=text, exit_code=status)


# -- expand, unexpand --------------------------------------------------------------------------------
def _tab_stops(spec: str) -> list[int]:
    """GNU's tab list; ValueError with GNU's message."""
    parts = [part for part in re.split(r"[ ,]+", spec.strip()) if part]
    if not parts or not all(part.isdigit() for part in parts):
        raise ValueError(f"tab size contains invalid character(s): \u2018{spec}\u2019")
    stops = [int(part) for part in parts]
    if 0 in stops:
        raise ValueError("tab size cannot be 0")
    if stops != sorted(set(stops)):
        raise ValueError("tab sizes must be ascending")
    return stops


def _next_stop(column: int, stops: list[int]) -> int:
    if len(stops) == 1:
        return (column // stops[0] + 1) * stops[0]
    for stop in stops:
        if stop > column:
            return stop
    return column + 1  # past the list: one column, as GNU


def expand_line(line: str, stops: list[int], initial: bool) -> str:
    out: list[str] = []
    column = 0
    leading = True
    for character in line:
        if character == "\t" and (leading or not initial):
            target = _next_stop(column, stops)
            out.append(" " * (target - column))
            column = target
            continue
        if character not in " \t":
            leading = False
        out.append(character)
        column = column - 1 if character == "\b" and column else column + 1
    return "".join(out)


def unexpand_line(line: str, stops: list[int], all_blanks: bool) -> str:
    """Blanks that reach a tab stop become a tab (two or more of them, or one tab); only leading
    ones unless -a."""
    out: list[str] = []
    column = 0
    pending: list[str] = []
    converting = True
    for character in line:
        if character in " \t" and converting:
            pending.append(character)
            column = _next_stop(column, stops) if character == "\t" else column + 1
            at_stop = column % stops[0] == 0 if len(stops) == 1 else column in stops
            if at_stop:
                out.append("\t" if len(pending) > 1 or pending[-1] == "\t" else pending[0])
                pending = []
            continue
        out.extend(pending)
        pending = []
        if not all_blanks:
            converting = False
        out.append(character)
        column = column - 1 if character == "\b" and column else column + 1
    out.extend(pending)
    return "".join(out)


def expand(program: str, args: list[str], read: Callable[[str], str],  # noqa: C901 - the option grammar
           error: Callable[[str], None]) -> tuple[str, int]:
    spec = "8"
    initial = all_blanks = False
    first_only = tabs_given = False
    files: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg.startswith(("-t", "--tabs")) or re.fullmatch(r"-\d+(,\d+)*", arg):
            tabs_given = True
        if arg.startswith("--tabs="):
            spec = arg[len("--tabs="):]
        elif arg in ("-i", "--initial"):
            initial = True
        elif arg in ("-a", "--all"):
            all_blanks = True
        elif arg == "--first-only":
            first_only = True
        elif arg == "-t" or arg == "--tabs":
            spec = args[index] if index < len(args) else ""
            index += 1
        elif arg.startswith("-t"):
            spec = arg[2:]
        elif re.fullmatch(r"-\d+(,\d+)*", arg):
            spec = arg[1:]
        elif arg.startswith("-") and arg != "-":
            error(f"{program}: invalid option -- '{arg[1:2]}'\nTry '{program} --help' for more information.\n")
            return "", 1
        else:
            files.append(arg)
    try:
        stops = _tab_stops(spec)
    except ValueError as exc:
        error(f"{program}: {exc}\n")
        return "", 1
    if program == "unexpand" and tabs_given and not first_only:
        all_blanks = True  # GNU: -t implies -a
    out: list[str] = []
    status = 0
    for name in files or ["-"]:
        try:
            text = read(name)
        except OSError as exc:
            error(f"{program}: {name}: {_strerror(exc)}\n")
            status = 1
            continue
        for line in text.splitlines(keepends=True):
            body, newline = (line[:-1], "\n") if line.endswith("\n") else (line, "")
            if program == "expand":
                out.append(expand_line(body, stops, initial) + newline)
            else:
                out.append(unexpand_line(body, stops, all_blanks) + newline)
    return "".join(out), status


class ExpandCommand(Command):
    """expand [-i] [-t N|LIST] [FILE]... / unexpand [-a] [-t N|LIST] [--first-only] [FILE]..."""

    name = "expand"
    input_kinds = TEXT_IN
    output_kinds = TEXT_OUT
    summary = "convert tabs to spaces"

    def run(self, invocation: Invocation) -> CommandResult:
        state = invocation.state

        def read(name: str) -> str:
            if name == "-":
                return _stdin(invocation)
            with open(state.resolve_path(name), encoding="utf-8", errors="surrogateescape") as handle:
                return handle.read()

        text, status = expand(self.name, list(invocation.arguments), read, state.write_error)
        return CommandResult(stdout=text, exit_code=status)


class UnexpandCommand(ExpandCommand):
    name = "unexpand"
    summary = "convert spaces to tabs"
