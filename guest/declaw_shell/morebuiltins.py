"""bash builtins the library lacks: `getopts`, `mapfile`/`readarray`, `umask`, `shopt`, `ulimit`.

`shopt` keeps bash's option names; `nullglob`, `dotglob` and `globstar` change pathname
expansion (the library's `expand_pathnames` is wrapped here), the others are accepted and change
nothing. `umask` reports and accepts a mask, which WASI cannot apply (files have no modes).
`ulimit` reports a Linux process's usual limits and accepts new ones without applying them: a
guest has no rlimits (the sandbox's own limits are its memory, time and disk quotas).
"""

from __future__ import annotations

import glob

from bash_purepython import words
from bash_purepython.shell_builtins import DEFAULT_READ_VARIABLE_NAME, parse_read_options
from bash_purepython.streams import materialise_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from typing import Any

    from .shells import GuestState, ShellFeatures

    Builtin = Callable[[list[str], Any, GuestState], Awaitable[int]]

SHOPT_NAMES = ("autocd", "cdable_vars", "cdspell", "checkhash", "checkjobs", "checkwinsize", "cmdhist",
               "compat31", "compat32", "compat40", "compat41", "compat42", "compat43", "compat44",
               "complete_fullquote", "direxpand", "dirspell", "dotglob", "execfail", "expand_aliases",
               "extdebug", "extglob", "extquote", "failglob", "force_fignore", "globasciiranges",
               "globskipdots", "globstar", "gnu_errfmt", "histappend", "histreedit", "histverify",
               "hostcomplete", "huponexit", "inherit_errexit", "interactive_comments", "lastpipe",
               "lithist", "localvar_inherit", "localvar_unset", "login_shell", "mailwarn",
               "no_empty_cmd_completion", "nocaseglob", "nocasematch", "noexpand_translation",
               "nullglob", "patsub_replacement", "progcomp", "progcomp_alias", "promptvars",
               "restricted_shell", "shift_verbose", "sourcepath", "varredir_close", "xpg_echo")
SHOPT_DEFAULTS = frozenset({"checkwinsize", "cmdhist", "complete_fullquote", "extquote", "force_fignore",
                            "globasciiranges", "globskipdots", "hostcomplete", "interactive_comments",
                            "patsub_replacement", "progcomp", "promptvars", "sourcepath"})


def table(executor: ShellFeatures) -> dict[str, Builtin]:
    return {"getopts": getopts, "mapfile": _reader(executor), "readarray": _reader(executor),
            "umask": umask, "shopt": shopt, "ulimit": ulimit, "read": _emptying(executor.builtins["read"])}


def _emptying(library_read: Builtin) -> Builtin:
    """The library's `read`, which left its variables as they were at the end of the input: bash
    empties them, so `while read l || [ -n "$l" ]` (how scripts read a last line without a
    newline) ended there, and never ended here."""
    async def read(arguments: list[str], stdin: Any, state: GuestState) -> int:
        options = parse_read_options(arguments)
        if not isinstance(options, str):
            targets = [options.array_name] if options.array_name is not None else \
                options.names or [DEFAULT_READ_VARIABLE_NAME]
            if not any(name in state.readonly_names for name in targets):
                for name in targets:  # what is read replaces them; nothing read leaves them empty
                    if options.array_name is not None:
                        state.variables.pop(name, None)
                        state.arrays[name] = {}
                    else:
                        state.arrays.pop(name, None)
                        state.variables[name] = ""
        return await library_read(arguments, stdin, state)

    return read


def _shopts(state: GuestState) -> set[str]:
    shopts = getattr(state, "shopts", None)
    if not isinstance(shopts, set):
        shopts = state.shopts = set(SHOPT_DEFAULTS)
    return shopts


def _expand_pathnames(expanded_field: Any, state: GuestState) -> list[str]:
    options = getattr(state, "shopts", None) or ()
    if not expanded_field.has_wildcard:
        return [expanded_field.text]
    matches = sorted(glob.glob(expanded_field.pattern, root_dir=state.cwd, recursive="globstar" in options,
                               include_hidden="dotglob" in options))
    if not matches:
        return [] if "nullglob" in options else [expanded_field.text]
    return matches


words.expand_pathnames = _expand_pathnames


async def getopts(arguments: list[str], stdin: Any, state: GuestState) -> int:
    """getopts OPTSTRING NAME [ARG...]: bash's option parser for scripts (OPTIND, OPTARG, a
    leading ':' for silent errors)."""
    if len(arguments) < 2:
        state.write_error("bash: getopts: usage: getopts optstring name [arg ...]\n")
        return 2
    spec, name, args = arguments[0], arguments[1], list(arguments[2:]) or list(state.positional_arguments)
    silent = spec.startswith(":")
    spec = spec[1:] if silent else spec
    try:
        index = int(state.variables.get("OPTIND", "1") or "1")
    except ValueError:
        index = 1
    remembered = getattr(state, "getopts_position", (0, 1))
    position = remembered[1] if remembered[0] == index else 1
    state.variables.pop("OPTARG", None)

    def finish(value: str, next_index: int, next_position: int, status: int) -> int:
        state.variables[name] = value
        state.variables["OPTIND"] = str(next_index)
        state.getopts_position = (next_index, next_position)
        return status

    if index > len(args):
        return finish("?", index, 1, 1)
    arg = args[index - 1]
    if position == 1:
        if arg == "--":
            return finish("?", index + 1, 1, 1)
        if not arg.startswith("-") or arg == "-":
            return finish("?", index, 1, 1)
    letter = arg[position]
    position += 1
    at_end = position >= len(arg)
    where = spec.find(letter) if letter != ":" else -1
    if where < 0:
        if silent:
            state.variables["OPTARG"] = letter
        else:
            state.write_error("%s: illegal option -- %s\n" % (_script_name(state), letter))
        return finish("?", index + 1 if at_end else index, 1 if at_end else position, 0)
    if spec[where + 1:where + 2] != ":":
        return finish(letter, index + 1 if at_end else index, 1 if at_end else position, 0)
    if not at_end:
        state.variables["OPTARG"] = arg[position:]
        return finish(letter, index + 1, 1, 0)
    if index < len(args):
        state.variables["OPTARG"] = args[index]
        return finish(letter, index + 2, 1, 0)
    if silent:
        state.variables["OPTARG"] = letter
        return finish(":", index + 1, 1, 0)
    state.write_error("%s: option requires an argument -- %s\n" % (_script_name(state), letter))
    return finish("?", index + 1, 1, 0)


def _script_name(state: GuestState) -> str:
    return getattr(state, "script_name", "bash")


def _reader(executor: ShellFeatures) -> Builtin:
    async def mapfile(arguments: list[str], stdin: Any, state: GuestState) -> int:
        """mapfile/readarray [-t] [-n COUNT] [-s SKIP] [-d DELIM] [-O ORIGIN] [ARRAY]: lines of
        stdin into an array (MAPFILE by default)."""
        args = list(arguments)
        strip, count, skip, delimiter, name = False, 0, 0, "\n", "MAPFILE"
        origin: int | None = None
        while args and args[0].startswith("-") and len(args[0]) > 1:
            option = args.pop(0)
            if option == "--":
                break
            if option == "-t":
                strip = True
                continue
            if option[1] in "nsdOCcu":
                value = option[2:] or (args.pop(0) if args else "")
                if option[1] == "n":
                    count = int(value or 0)
                elif option[1] == "s":
                    skip = int(value or 0)
                elif option[1] == "d":
                    delimiter = value[:1] or "\0"
                elif option[1] == "O":
                    origin = int(value or 0)
                continue
            state.write_error("bash: mapfile: %s: invalid option\n" % option)
            return 2
        if args:
            name = args[0]
        stdin = executor.take_pending_stdin(stdin, state)
        if stdin is not None:
            text = await materialise_text(stdin.value, stdin.kind)
        else:
            session = getattr(executor, "session", None)
            text = session.stdin.read() if session is not None else ""
        pieces = text.split(delimiter)
        records = [piece + delimiter for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
        records = records[skip:]
        if count:
            records = records[:count]
        if strip:
            records = [r[:-1] if r.endswith(delimiter) else r for r in records]
        elements = dict(state.arrays.get(name, {})) if origin is not None else {}
        start = origin or 0
        elements.update({start + i: record for i, record in enumerate(records)})
        state.variables.pop(name, None)
        state.arrays[name] = elements
        return 0

    return mapfile


async def umask(arguments: list[str], stdin: Any, state: GuestState) -> int:
    args = [a for a in arguments if a not in ("-p",)]
    symbolic = "-S" in args
    args = [a for a in args if a != "-S"]
    mask = getattr(state, "umask_value", 0o022)
    if args:
        try:
            mask = int(args[0], 8)
        except ValueError:
            state.write_error("bash: umask: %s: octal number out of range\n" % args[0])
            return 1
        state.umask_value = mask
        return 0
    if symbolic:
        parts = []
        for who, shift in (("u", 6), ("g", 3), ("o", 0)):
            allowed = ~mask >> shift & 7
            parts.append(who + "=" + "".join(c for c, bit in (("r", 4), ("w", 2), ("x", 1)) if allowed & bit))
        await state.output_sink.write(",".join(parts) + "\n")
    else:
        await state.output_sink.write("%04o\n" % mask)
    return 0


async def shopt(arguments: list[str], stdin: Any, state: GuestState) -> int:
    options = _shopts(state)
    args = list(arguments)
    mode: str | None = None
    quiet = printable = False
    while args and args[0].startswith("-"):
        flag = args.pop(0)
        for letter in flag[1:]:
            if letter in "su":
                mode = letter
            elif letter == "q":
                quiet = True
            elif letter == "p":
                printable = True
            elif letter != "o":
                state.write_error("bash: shopt: -%s: invalid option\n" % letter)
                return 2
    for name in args:
        if name not in SHOPT_NAMES:
            state.write_error("bash: shopt: %s: invalid shell option name\n" % name)
            return 1
    if mode is not None:
        (options.update if mode == "s" else options.difference_update)(args)
        return 0
    names = args or SHOPT_NAMES
    if quiet:
        return 0 if all(name in options for name in names) else 1
    lines = []
    for name in names:
        on = name in options
        lines.append("shopt -%s %s\n" % ("s" if on else "u", name) if printable
                     else "%-20s\t%s\n" % (name, "on" if on else "off"))
    await state.output_sink.write("".join(lines))
    return 0 if all(name in options for name in args) else 1 if args else 0


# flag -> (bash's description, unit, value): a Linux process's usual limits
ULIMITS = {
    "R": ("real-time non-blocking time", "microseconds", "unlimited"), "c": ("core file size", "blocks", "0"),
    "d": ("data seg size", "kbytes", "unlimited"), "e": ("scheduling priority", "", "0"),
    "f": ("file size", "blocks", "unlimited"), "i": ("pending signals", "", "63448"),
    "l": ("max locked memory", "kbytes", "8192"), "m": ("max memory size", "kbytes", "unlimited"),
    "n": ("open files", "", "1024"), "p": ("pipe size", "512 bytes", "8"),
    "q": ("POSIX message queues", "bytes", "819200"), "r": ("real-time priority", "", "0"),
    "s": ("stack size", "kbytes", "8192"), "t": ("cpu time", "seconds", "unlimited"),
    "u": ("max user processes", "", "63448"), "v": ("virtual memory", "kbytes", "unlimited"),
    "x": ("file locks", "", "unlimited"),
}


def _ulimit_line(flag: str, value: str) -> str:
    text, unit, _ = ULIMITS[flag]
    where = "(%s, -%s)" % (unit, flag) if unit else "(-%s)" % flag
    return "%-20s%20s %s\n" % (text, where, value)


async def ulimit(arguments: list[str], stdin: Any, state: GuestState) -> int:
    """ulimit [-SHa] [-flag [LIMIT]]: bash's report of a process's limits; a new LIMIT is
    accepted and kept for the shell's later reports, not applied."""
    kept = getattr(state, "ulimits", None)
    if not isinstance(kept, dict):
        kept = state.ulimits = {}
    flags: list[str] = []
    value: str | None = None
    for arg in arguments:
        if arg.startswith("-") and len(arg) > 1:
            for flag in arg[1:]:
                if flag in "SH":
                    continue
                if flag != "a" and flag not in ULIMITS:
                    state.write_error("bash: ulimit: -%s: invalid option\n"
                                      "ulimit: usage: ulimit [-SHabcdefiklmnpqrstuvxPRT] [limit]\n" % flag)
                    return 2
                flags.append(flag)
        elif value is None:
            value = arg
    if "a" in flags:
        for flag in ULIMITS:
            await state.output_sink.write(_ulimit_line(flag, kept.get(flag, ULIMITS[flag][2])))
        return 0
    flags = flags or ["f"]
    if value is not None:
        if value not in ("unlimited", "hard", "soft") and not value.isdigit():
            state.write_error("bash: ulimit: %s: invalid number\n" % value)
            return 1
        for flag in flags:
            kept[flag] = value if value.isdigit() or value == "unlimited" else kept.get(flag, ULIMITS[flag][2])
        return 0
    for flag in flags:
        shown = kept.get(flag, ULIMITS[flag][2])
        await state.output_sink.write(_ulimit_line(flag, shown) if len(flags) > 1 else shown + "\n")
    return 0
