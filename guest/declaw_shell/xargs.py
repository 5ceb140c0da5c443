"""`xargs` as GNU findutils 4.9's, over the library's shell (its own lacked most of it).

`-0`/`-d` delimit the items for `-I` too (`find -print0 | xargs -0 -I{} cmd {}` ran one command
holding every item), `-r` runs nothing for no input (it ran the command once), `-L N` takes N
lines a command, `-a FILE` reads the items from a file, `-E`, `-s` and `-x` are taken, and `-P N`
is accepted and run one after another, as `-P 1` (a guest has one thread: the output is the same
lines, whose order with -P N is up to the machine anyway). A command not found is 127 and ends
xargs, 126 when it cannot run; an exit of 255 ends it with 124; other failures give 123.
"""

from __future__ import annotations

import shlex

from bash_purepython.streams import materialise_text

from . import rawbytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from typing import Any

VALUED = {"-n": "n", "--max-args": "n", "-I": "I", "--replace": "I", "-i": "I", "-d": "d", "--delimiter": "d",
          "-L": "L", "--max-lines": "L", "-l": "L", "-a": "a", "--arg-file": "a", "-P": "P", "--max-procs": "P",
          "-s": "s", "--max-chars": "s", "-E": "E", "--eof": "E", "-e": "E"}
FLAGS = {"-0": "0", "--null": "0", "-r": "r", "--no-run-if-empty": "r", "-t": "t", "--verbose": "t",
         "-x": "x", "--exit": "x", "-p": "p", "--interactive": "p", "--open-tty": "o", "-o": "o"}
OPTIONAL = {"-i": "{}", "-l": "1", "-e": ""}  # their value only attached (`-i{}`, `-l2`); bare: GNU's default


class Usage(Exception):
    """A bad option: its message for stderr."""


def parse(arguments: list[str]) -> tuple[dict[str, str], set[str], list[str]]:
    """(valued options by letter, flag letters, the command and its initial arguments)."""
    values: dict[str, str] = {}
    flags: set[str] = set()
    index = 0
    while index < len(arguments):
        argument = arguments[index]
        if argument == "--":
            index += 1
            break
        if not argument.startswith("-") or argument == "-":
            break
        name, equals, attached = argument.partition("=") if argument.startswith("--") else (argument, "", "")
        if name in FLAGS:
            flags.add(FLAGS[name])
        elif name in OPTIONAL:
            values[VALUED[name]] = OPTIONAL[name]
        elif name in VALUED:
            if not equals:
                if index + 1 >= len(arguments):
                    raise Usage(f"option requires an argument -- '{name.lstrip('-')[:1]}'")
                index += 1
                attached = arguments[index]
            values[VALUED[name]] = attached
        elif argument[:2] in VALUED and len(argument) > 2:
            values[VALUED[argument[:2]]] = argument[2:]
        elif all("-" + c in FLAGS for c in argument[1:]):
            flags.update(FLAGS["-" + c] for c in argument[1:])
        else:
            raise Usage(f"invalid option -- '{argument[1:2]}'\nUsage: xargs [OPTION]... COMMAND [INITIAL-ARGS]...\n"
                        "Try 'xargs --help' for more information.")
        index += 1
    for name in ("n", "L", "P", "s"):
        if name in values and not (values[name].isdigit() and (int(values[name]) > 0 or name == "P")):
            raise Usage(f'invalid number "{values[name]}" for -{name} option')
    return values, flags, arguments[index:] or ["echo"]


def lines_of(text: str, values: dict[str, str], flags: set[str]) -> list[list[str]]:
    """The input's items, by the line (or delimited item) they came on."""
    delimiter = "\0" if "0" in flags else None
    if "d" in values:
        delimiter = rawbytes.printf_escapes(values["d"])[:1] or "\n"
    if delimiter is not None:
        items = text.split(delimiter)
        if items and items[-1] == "":
            items.pop()
        return [[item] for item in items]
    lines = []
    for line in text.split("\n"):
        if "I" in values:  # a whole line an item, its leading blanks dropped
            words = [line.lstrip(" \t")] if line.strip() else []
        else:
            try:
                words = shlex.split(line)
            except ValueError:
                words = line.split()
        if values.get("E") and values["E"] in words:
            lines.append(words[:words.index(values["E"])])
            break
        if words:
            lines.append(words)
    return lines


def batches_of(lines: list[list[str]], values: dict[str, str], flags: set[str]) -> list[list[str]]:
    """The items of each command xargs runs."""
    items = [word for line in lines for word in line]
    if "I" in values:
        return [[item] for item in items]
    if "L" in values:
        per = int(values["L"])
        return [[word for line in lines[start:start + per] for word in line] for start in range(0, len(lines), per)]
    if "n" in values:
        per = int(values["n"])
        return [items[start:start + per] for start in range(0, len(items), per)]
    return [items] if items or "r" not in flags else []


def builtin(executor: Any) -> Callable[[list[str], Any, Any], Awaitable[int]]:
    """The `xargs` builtin of `executor` (the guest's shell executor)."""
    async def xargs(arguments: list[str], stdin: Any, state: Any) -> int:
        try:
            values, flags, command = parse(arguments)
        except Usage as usage:
            state.write_error(f"xargs: {usage}\n")
            return 1
        if "a" in values:
            try:
                text = state.resolve_path(values["a"]).read_text(encoding="utf-8", errors="surrogateescape")
            except OSError as exc:
                state.write_error(f"xargs: {values['a']}: {exc.strerror or exc}\n")
                return 1
        else:
            source = stdin if stdin is not None else state.pending_stdin
            state.pending_stdin = None
            text = "" if source is None else await materialise_text(source.value, source.kind)
        status = 0
        for batch in batches_of(lines_of(text, values, flags), values, flags):
            if "I" in values:
                name = command[0].replace(values["I"], batch[0])
                line_arguments = [part.replace(values["I"], batch[0]) for part in command[1:]]
            else:
                name, line_arguments = command[0], [*command[1:], *batch]
            if "t" in flags or "p" in flags:
                state.write_error(" ".join([name, *line_arguments]) + "\n")
            code = await executor.run_named_command(name, line_arguments, state)
            if code in (126, 127):
                return int(code)
            if code == 255:
                state.write_error(f"xargs: {name}: exited with status 255; aborting\n")
                return 124
            if code:
                status = 123
        return status

    return xargs
