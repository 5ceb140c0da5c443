"""Core utilities the library lacks or answers differently from GNU's: `readlink`, `realpath`,
`cmp`, `printenv`, `which`, `tac`, `comm`, `nproc`, `shuf`, `zcat`, `truncate`, `patch` (patch.py),
`jq` (jq.py), `date` (datecmd.py), `sort -V` (versionsort.py), `bc` (bc.py), `hexdump`, `hd`,
`strings`, `split` (fileviews.py), `install`, `chown`, `chgrp`, `envsubst`, `factor`, `expand`,
`unexpand` (smallutils.py),
`echo -e` with GNU's escapes (\\0NNN, \\xHH, \\uHHHH), and `cat`/`tee`/`head -c` passing live input on as it arrives.

The library's `cat`, `tee` and `head` cut their input into lines first, so text sent to a
command's stdin without a newline (`send_stdin("Hello")`) waits for one that may never come;
here what arrives goes out at once (`cat` with options that work on lines, and `head -n`, still
cut lines).
"""

from __future__ import annotations

import asyncio
import codecs
import dataclasses
import importlib
import os
import posixpath
import random
import re

from bash_purepython.command import cat as library_cat
from bash_purepython.command import echo as library_echo
from bash_purepython.command import grep as library_grep
from bash_purepython.command import head as library_head
from bash_purepython.command import tail as library_tail
from bash_purepython.command import lines as library_lines
from bash_purepython.command import sed as library_sed
from bash_purepython.command import seq as library_seq
from bash_purepython.command import sources as library_sources
from bash_purepython.command import tee as library_tee
from bash_purepython.command.cat import CatCommand
from bash_purepython.command.cp import CpCommand as LibraryCp
from bash_purepython.command.rm import RmCommand as LibraryRm
from bash_purepython.command.command import (
    Command,
    CommandResult,
    InputKind,
    OutputKind,
)
from bash_purepython.command.lines import iterate_lines, stdin_lines
from bash_purepython.streams import as_async_iterator, close_iterator

from . import rawbytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable, Iterator
    from pathlib import Path
    from typing import Any

    Invocation = Any  # bash_purepython's CommandInvocation (untyped)

ARGS_ONLY = frozenset({InputKind.ARGUMENTS})
TEXT_OUT = frozenset({OutputKind.TEXT})
STREAM_OUT = frozenset({OutputKind.STREAM_TEXT})
TEXT_IN = frozenset({InputKind.TEXT, InputKind.ARGUMENTS})
STREAM_IN = frozenset({InputKind.STREAM_TEXT, InputKind.TEXT, InputKind.ARGUMENTS})
STDIN_NAMES = ("-", "/dev/stdin")
FILE_CHUNK = 1 << 16
SMALL_UTILS = (("install", "InstallCommand", ARGS_ONLY, "copy files and set attributes"),
               ("chown", "ChownCommand", ARGS_ONLY, "change file owner and group"),
               ("chgrp", "ChgrpCommand", ARGS_ONLY, "change group ownership"),
               ("envsubst", "EnvsubstCommand", TEXT_IN, "substitute environment variables"),
               ("factor", "FactorCommand", TEXT_IN, "factor numbers"),
               ("expand", "ExpandCommand", TEXT_IN, "convert tabs to spaces"),
               ("unexpand", "UnexpandCommand", TEXT_IN, "convert spaces to tabs"))  # smallutils.py


def register(commands: Any) -> None:
    from .grep import GrepCommand
    from .patch import PatchCommand

    for command in (StreamingCatCommand(), FollowingTailCommand(), FormattedSeqCommand(), ReadlinkCommand(),
                    RealpathCommand(), CmpCommand(),
                    PrintenvCommand(), WhichCommand(), GrepCommand(), GrepCommand("egrep", "E"),
                    GrepCommand("fgrep", "F"), TacCommand(), CommCommand(), NprocCommand(), ShufCommand(),
                    PatchCommand(), _zcat(), TruncateCommand(), GuardedRmCommand(), FullerCpCommand(),
                    LazyCommand("jq", "jq", "JqCommand", TEXT_IN, STREAM_OUT, "command-line JSON processor"),
                    LazyCommand("date", "datecmd", "DateCommand", ARGS_ONLY, TEXT_OUT, "print the date and time"),
                    LazyCommand("sort", "versionsort", "SortCommand", STREAM_IN, TEXT_OUT, "sort lines of text"),
                    LazyCommand("bc", "bc", "BcCommand", TEXT_IN, STREAM_OUT,
                                "an arbitrary precision calculator language"),
                    LazyCommand("hexdump", "fileviews", "HexdumpCommand", TEXT_IN, TEXT_OUT,
                                "display file contents in hexadecimal, decimal, octal, or ascii"),
                    LazyCommand("hd", "fileviews", "HdCommand", TEXT_IN, TEXT_OUT, "hexdump -C"),
                    LazyCommand("strings", "fileviews", "StringsCommand", TEXT_IN, TEXT_OUT,
                                "print the sequences of printable characters in files"),
                    LazyCommand("split", "fileviews", "SplitCommand", TEXT_IN, TEXT_OUT, "split a file into pieces"),
                    LazyCommand("git", "git", "GitCommand", TEXT_IN, TEXT_OUT, "the stupid content tracker"),
                    LazyCommand("dd", "dd", "DdCommand", STREAM_IN, STREAM_OUT, "convert and copy a file"),
                    LazyCommand("sed", "sed", "SedCommand", STREAM_IN, STREAM_OUT,
                                "stream editor for filtering and transforming text"),
                    LazyCommand("sqlite3", "sqlitecli", "SqliteCommand", TEXT_IN, TEXT_OUT,
                                "A command line interface for SQLite version 3"),
                    *(LazyCommand(name, "smallutils", attribute, kinds, TEXT_OUT, summary) for name, attribute, kinds,
                      summary in SMALL_UTILS)):
        commands.register(command)


class GuardedRmCommand(LibraryRm):
    """The library's `rm`, with GNU's two refusals before it: `rm -r .` or `..` (which deleted the
    working folder or its parent: `rm: refusing to remove '.' or '..' directory: skipping '..'`),
    and `rm -r /` (`rm: it is dangerous to operate recursively on '/'`); the other operands are
    removed, and the status is 1, as GNU's."""

    def run(self, invocation: Invocation) -> Any:
        arguments = list(invocation.arguments)
        options: list[str] = []
        operands: list[str] = []
        for index, argument in enumerate(arguments):
            if argument == "--":
                operands += arguments[index + 1:]
                break
            (options if argument.startswith("-") and argument != "-" else operands).append(argument)
        recursive = any(o in ("--recursive",) or (not o.startswith("--") and set(o[1:]) & {"r", "R"})
                        for o in options)
        if not recursive or "--no-preserve-root" in options:
            return super().run(invocation)
        kept, refused = [], False
        for operand in operands:
            last = operand.rstrip("/").rsplit("/", 1)[-1] if operand.rstrip("/") else "/"
            if last in (".", ".."):
                invocation.state.write_error("rm: refusing to remove '.' or '..' directory: skipping '%s'\n"
                                             % operand)
                refused = True
            elif str(invocation.state.resolve_path(operand)) == "/":
                invocation.state.write_error("rm: it is dangerous to operate recursively on '/'\n"
                                             "rm: use --no-preserve-root to override this failsafe\n")
                refused = True
            else:
                kept.append(operand)
        if not refused:
            return super().run(invocation)
        if not kept:
            return CommandResult(stdout="", exit_code=1)
        result = super().run(dataclasses.replace(invocation, arguments=[*options, "--", *kept]))
        return CommandResult(stdout=result.stdout, exit_code=1)


_CP_DROPPED = frozenset("pdLPH")  # preserve (copy2 keeps modes and times), symlink handling: nothing here


class FullerCpCommand(LibraryCp):
    """The library's `cp`, taking what agents' scripts pass it besides -r, -f, -n, -v: `-a` /
    `--archive` (-r; modes and times are kept as copy2 keeps them), `-p`, `--preserve[=...]`,
    `-d`/`-P`/`-L`/`-H` (no effect here), `-u` / `--update` (a file not newer than its copy is
    skipped); and GNU's refusal to copy a file to `NAME/` that is no folder (it made a file
    NAME: `cp: cannot create regular file 'NAME/': Not a directory`)."""

    def run(self, invocation: Invocation) -> Any:
        state = invocation.state
        options: list[str] = []
        operands: list[str] = []
        update = False
        arguments = list(invocation.arguments)
        for index, argument in enumerate(arguments):
            if argument == "--":
                operands += arguments[index + 1:]
                break
            if argument in ("--archive", "--recursive"):
                options.append("-r")
            elif argument.startswith("--update"):
                update = True
            elif argument.startswith(("--preserve", "--no-preserve", "--dereference", "--no-dereference")):
                pass
            elif argument.startswith("--") or not argument.startswith("-") or argument == "-":
                (options if argument.startswith("--") else operands).append(argument)
            else:
                letters = "".join("r" if c == "a" else "" if c in _CP_DROPPED else c for c in argument[1:])
                update = update or "u" in letters
                letters = letters.replace("u", "")
                if letters:
                    options.append("-" + letters)
        if len(operands) >= 2:
            target = operands[-1]
            destination = state.resolve_path(target)
            if target.endswith("/") and not destination.is_dir():
                for source in operands[:-1]:
                    if not state.resolve_path(source).is_dir():
                        state.write_error("cp: cannot create regular file '%s': Not a directory\n" % target)
                        return CommandResult(stdout="", exit_code=1)
            if update:
                kept = [source for source in operands[:-1] if not _copy_is_current(
                    state.resolve_path(source), destination)]
                if not kept:
                    return CommandResult(stdout="", exit_code=0)
                operands = [*kept, target]
        return super().run(dataclasses.replace(invocation, arguments=[*options, "--", *operands]))


def _copy_is_current(source: Path, destination: Path) -> bool:
    """`cp -u`: the copy of a file exists and is not older than it."""
    target = destination / source.name if destination.is_dir() else destination
    try:
        return source.is_file() and target.stat().st_mtime >= source.stat().st_mtime
    except OSError:
        return False


class LazyCommand(Command):
    """A program of ours whose module is imported at its first use, not with the shell (the
    plain module's guests import the shell at every command): `jq` (jq.py and jqlang.py),
    `date` (datecmd.py), `sort` (versionsort.py, the library's sort with -V), `bc` (bc.py),
    `hexdump`, `hd`, `strings`, `split` (fileviews.py), `git` (git.py, over dulwich), `dd` (dd.py),
    `sed` (sed.py)."""

    def __init__(self, name: str, module: str, attribute: str, input_kinds: Any, output_kinds: Any,
                 summary: str) -> None:
        self.name, self.input_kinds, self.output_kinds, self.summary = name, input_kinds, output_kinds, summary
        self._where = (module, attribute)
        self._inner: Any = None

    def run(self, invocation: Invocation) -> Any:
        if self._inner is None:
            module, attribute = self._where
            self._inner = getattr(importlib.import_module("." + module, __package__), attribute)()
        return self._inner.run(invocation)  # a result, or the awaitable of an async run


def stdin_chunks(stdin: Any, kind: Any) -> AsyncIterator[str]:
    """A command's stdin as the chunks that arrive (not cut into lines)."""
    if kind == InputKind.STREAM_TEXT:
        return as_async_iterator(stdin)
    if kind == InputKind.TEXT:
        return as_async_iterator([stdin] if stdin else [])
    return stdin_lines(stdin, kind) if kind != InputKind.ARGUMENTS else as_async_iterator(())


def _tee_chunks(stdin: Any, kind: Any) -> AsyncIterator[str]:
    return stdin_chunks(stdin, kind)


# devices without an end (the guest's open() answers them): read as they are consumed, as
# `cat DEVICE |` reads them — `head -c 16 /dev/urandom`, `tr -dc a-z < /dev/urandom | head -c 8`
# (read whole, as other files are, they never ended or ran out of memory)
ENDLESS_DEVICES = frozenset({"/dev/zero", "/dev/urandom", "/dev/random"})


def _head_source(path_text: str, invocation: Invocation) -> Any:
    if path_text == library_head.STDIN_PATH and invocation.stdin_kind == InputKind.STREAM_TEXT:
        return as_async_iterator(invocation.stdin)  # chunks: `head -c` takes them as they come
    if path_text.startswith("/dev/") and str(invocation.state.resolve_path(path_text)) in ENDLESS_DEVICES:
        return as_async_iterator(file_chunks(path_text))  # the same, from the device
    return _library_head_source(path_text, invocation)


def _head_limit(lines: Any, line_limit: int | None, character_limit: int | None) -> Any:
    if character_limit is None:
        lines = iterate_lines(lines)  # `head -n` counts lines: cut the chunks again
    elif character_limit >= 0:
        return _take_bytes(lines, character_limit)
    return _library_head_limit(lines, line_limit, character_limit)


async def _take_bytes(chunks: AsyncIterator[str], limit: int) -> AsyncIterator[str]:
    """`head -c N`: the first N bytes, as GNU's counts them (the library counted characters, so a
    multi-byte character, or random bytes that happen to be UTF-8, made it print more); a
    character cut in two ends as its first bytes (rawbytes.py), pulling no more than needed."""
    left = limit
    try:
        if left <= 0:
            return
        async for chunk in chunks:
            data = rawbytes.to_bytes(chunk)
            if len(data) >= left:
                yield chunk if len(data) == left else rawbytes.from_bytes(data[:left])
                return
            left -= len(data)
            yield chunk
    finally:
        await close_iterator(chunks)


ECHO_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "\\": "\\",
                "e": "\x1b", "E": "\x1b"}


def _echo_escapes(text: str) -> tuple[str, bool]:
    """`echo -e`'s escapes as bash's echo reads them (\\0NNN and \\xHH are bytes: rawbytes.py);
    (text, whether \\c stopped it)."""
    return rawbytes.interpret(text, rawbytes.ECHO_ESCAPE, ECHO_ESCAPES, stop="c")


library_echo.interpret_escapes = _echo_escapes
_SED_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "f": "\f", "v": "\v"}
# sed's numeric escapes (replacement, `a i c` text, regex): the letter -> (base, its digits)
SED_NUMERIC = {"x": (16, re.compile("[0-9A-Fa-f]{1,2}")), "o": (8, re.compile("[0-7]{1,3}")),
                "d": (10, re.compile("[0-9]{1,3}"))}


def _sed_replacement(text: str, group_count: int) -> Any:
    """`s///`'s replacement as GNU sed reads it: `&` and `\\0`-`\\9`, the escapes `\\n \\t \\r \\a \\f
    \\v`, `\\xHH \\oNNN \\dNNN \\cX`, and the case conversions `\\U \\L` (until `\\E`) and `\\u \\l`
    (the next character), over literal text and groups alike. The library's knew `&`, groups, `\\n`
    and `\\t`: `s/.*/\\U&/` printed `U` and the line, `s/$/\\r/` an `r`."""
    ops: list[tuple[str, Any]] = []  # ("text", str), ("group", n), ("case", letter)
    literal: list[str] = []

    def flush() -> None:
        if literal:
            ops.append(("text", "".join(literal)))
            literal.clear()

    position = 0
    while position < len(text):
        character = text[position]
        position += 1
        if character == "\\" and position < len(text):
            escaped = text[position]
            position += 1
            if escaped.isdigit():
                if int(escaped) > group_count:
                    raise library_sed.SedScriptError(f"invalid reference \\{escaped} on `s' command's RHS")
                flush()
                ops.append(("group", int(escaped)))
            elif escaped in "ULulE":
                flush()
                ops.append(("case", escaped))
            elif escaped in SED_NUMERIC and SED_NUMERIC[escaped][1].match(text, position):
                digits = SED_NUMERIC[escaped][1].match(text, position)
                assert digits is not None
                literal.append(chr(int(digits.group(), SED_NUMERIC[escaped][0])))  # `\x27`: a quote
                position = digits.end()
            elif escaped == "c" and position < len(text):
                literal.append(chr(ord(text[position].upper()) ^ 0x40))  # `\cA`: control-A
                position += 1
            else:
                literal.append(_SED_ESCAPES.get(escaped, escaped))
        elif character == "&":
            flush()
            ops.append(("group", 0))
        else:
            literal.append(character)
    flush()
    return _sed_builder(ops)


def _sed_builder(ops: list[tuple[str, Any]]) -> Any:
    """The function from a match to its replacement text, for _sed_replacement's pieces."""
    if not any(kind == "case" for kind, _ in ops):
        def plain(match: Any) -> str:
            return "".join(value if kind == "text" else (match.group(value) or "") for kind, value in ops)
        return plain

    def build(match: Any) -> str:
        out: list[str] = []
        mode, once = "", ""
        for kind, value in ops:
            if kind == "case":
                if value in "UL":
                    mode, once = value, ""
                elif value == "E":
                    mode, once = "", ""
                else:
                    once = value
                continue
            piece = value if kind == "text" else (match.group(value) or "")
            if mode:
                piece = piece.upper() if mode == "U" else piece.lower()
            if once and piece:
                piece = (piece[0].upper() if once == "u" else piece[0].lower()) + piece[1:]
                once = ""
            out.append(piece)
        return "".join(out)
    return build


library_sed.compile_replacement = _sed_replacement
_library_head_source, _library_head_limit = library_head.source_lines, library_head.limit_source
library_head.source_lines, library_head.limit_source = _head_source, _head_limit
library_tee.stdin_lines = _tee_chunks


def file_chunks(path: str | Path) -> Iterator[str]:
    """A file's text in chunks: UTF-8, and any other byte kept as the shell carries it (rawbytes.py:
    a lone surrogate), so `cat img.png | base64` and `cat a.bin > b.bin` pass the bytes on whole."""
    decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
    with open(path, "rb") as handle:
        while True:
            data = handle.read(FILE_CHUNK)
            text = decoder.decode(data, final=not data)
            if text:
                yield text
            if not data:
                return


def _file_lines(path: Path) -> AsyncIterator[str]:
    """A named file's lines for the library's utilities (`head`, `tail`, `cat -n`, `sort`, `cut`,
    `uniq`, `grep`, `sed`...), read as `cat` reads it (file_chunks): the library read it with
    universal newlines, so `head -1 dos.txt` lost the CR that `cat dos.txt | head -1` kept, and
    broken UTF-8 was replaced."""
    return iterate_lines(file_chunks(path))


for _module in (library_lines, library_sources, library_head, library_tail, library_cat, library_grep, library_sed):
    _module.file_lines = _file_lines  # each imported the function by name


_SEQ_FORMAT = re.compile(r"%[-+ #0']*\d*(?:\.\d*)?[eEfFgGaA]")


class FormattedSeqCommand(library_seq.SeqCommand):
    """The library's `seq`, and GNU's `-f FORMAT` / `--format=FORMAT` (one printf directive for a
    floating-point number: `seq -f '%03g' 3`, `seq -f 'file%02.0f.txt' 10`)."""

    def run(self, invocation: Invocation) -> CommandResult:
        form, separator, numbers = _seq_options(list(invocation.arguments))
        if form is None:
            return super().run(invocation)
        state = invocation.state
        directives = form.replace("%%", "").count("%")
        if directives != 1 or not _SEQ_FORMAT.search(form.replace("%%", "")):
            state.write_error("seq: format \u2018%s\u2019 has %s\n"
                              % (form, "no % directive" if not directives else "too many % directives"))
            return CommandResult(stdout=as_async_iterator(()), exit_code=1)
        values = []
        for number in numbers:
            try:
                values.append(float(number))
            except ValueError:
                state.write_error("seq: invalid floating point argument: '%s'\n"
                                  "Try 'seq --help' for more information.\n" % number)
                return CommandResult(stdout=as_async_iterator(()), exit_code=1)
        if not 1 <= len(values) <= 3:
            state.write_error("seq: %s\nTry 'seq --help' for more information.\n"
                              % ("missing operand" if not values else "extra operand '%s'" % numbers[3]))
            return CommandResult(stdout=as_async_iterator(()), exit_code=1)
        first, step, last = ((1.0, 1.0, values[0]) if len(values) == 1 else
                             (values[0], 1.0, values[1]) if len(values) == 2 else tuple(values))
        if step == 0:
            state.write_error("seq: invalid Zero increment value: '%s'\n" % numbers[1])
            return CommandResult(stdout=as_async_iterator(()), exit_code=1)
        python_form = form.replace("'", "")  # (the thousands flag: no grouping in the C locale)

        async def lines() -> AsyncIterator[str]:
            count = 0
            while True:
                value = first + count * step
                if (step > 0 and value > last) or (step < 0 and value < last):
                    break
                yield ("" if count == 0 else separator) + python_form % value
                count += 1
            if count:
                yield "\n"

        return CommandResult(stdout=lines(), exit_code=0)


def _seq_options(args: list[str]) -> tuple[str | None, str, list[str]]:
    """`seq`'s format (None: not given), separator and operands."""
    found: dict[str, str] = {"f": "", "s": "\n"}
    given: set[str] = set()
    numbers: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        long = {"--format": "f", "--separator": "s"}.get(arg.partition("=")[0])
        if arg in ("-f", "-s", "--format", "--separator") and index + 1 < len(args):
            letter, value = arg.lstrip("-")[0], args[index + 1]
            index += 1
        elif long is not None and "=" in arg:
            letter, value = long, arg.partition("=")[2]
        elif arg[:2] in ("-f", "-s") and len(arg) > 2:
            letter, value = arg[1], arg[2:]
        else:
            numbers.append(arg)
            index += 1
            continue
        found[letter] = value
        given.add(letter)
        index += 1
    return (found["f"] if "f" in given else None), found["s"], numbers


class FollowingTailCommand(library_tail.TailCommand):
    """The library's `tail`, and `-f`/`-F`/`--follow[=name|descriptor]` [`-s SECONDS`]
    [`--retry`]: after the last lines, what each named file gains as it is written (a header
    when several are followed, "file truncated" when one shrinks), until the command is stopped
    (`timeout 5 tail -f log`, `kill`, `| head -n 3` having read enough). Looks every 0.1 s by
    default, as GNU's does without inotify every `-s`."""

    output_kinds = frozenset({OutputKind.STREAM_TEXT})

    async def run(self, invocation: Invocation) -> CommandResult:
        follow, retry, interval, rest = False, False, 0.1, []
        args = list(invocation.arguments)
        while args:
            arg = args.pop(0)
            if arg == "--":
                rest += [arg, *args]
                break
            if arg in ("-f", "-F", "--follow", "--retry") or arg.startswith(("--follow=", "--pid=")):
                follow = follow or arg != "--retry"
                retry = retry or arg in ("-F", "--retry")
            elif arg in ("-s", "--sleep-interval") or arg.startswith(("-s", "--sleep-interval=")):
                value = arg.partition("=")[2] if arg.startswith("--") else (arg[2:] or (args.pop(0) if args else ""))
                try:
                    interval = max(float(value), 0.01)
                except ValueError:
                    invocation.state.write_error("tail: invalid number of seconds: '%s'\n" % value)
                    return CommandResult(stdout="", exit_code=1)
            elif arg.startswith("-") and len(arg) > 2 and not arg[1:].isdigit() and set(arg[1:]) & set("fF") \
                    and not arg.startswith("--"):
                letters = arg[1:].replace("f", "").replace("F", "")  # `-fn 5`, `-nF`...
                follow, retry = True, retry or "F" in arg
                if letters:
                    rest.append("-" + letters)
            else:
                rest.append(arg)
        first = await super().run(dataclasses.replace(invocation, arguments=rest))
        paths = [p for p in _operands(rest) if p not in STDIN_NAMES] if follow else []
        return CommandResult(stdout=self.follow(invocation, first, paths, retry, interval),
                             exit_code=first.exit_code)

    @staticmethod
    async def follow(invocation: Invocation, first: CommandResult, paths: list[str], retry: bool,
                     interval: float) -> AsyncIterator[str]:
        invocation.exit_status.code = first.exit_code
        if first.stdout:
            yield first.stdout
        state = invocation.state
        sizes: dict[str, int | None] = {}
        for path_text in paths:
            try:
                sizes[path_text] = os.stat(state.resolve_path(path_text)).st_size
            except OSError:
                sizes[path_text] = None if retry else -1  # -1: not followed
        followed = [p for p in paths if sizes[p] != -1]
        last = followed[-1] if followed else None
        while followed:
            await asyncio.sleep(interval)
            for path_text in followed:
                path = state.resolve_path(path_text)
                try:
                    size = os.stat(path).st_size
                except OSError:
                    if sizes[path_text] is not None:
                        state.write_error("tail: '%s' has become inaccessible: No such file or directory\n"
                                          % path_text)
                        sizes[path_text] = None
                    continue
                known = sizes[path_text]
                if known is None or size < known:
                    if known is not None:
                        state.write_error("tail: %s: file truncated\n" % path_text)
                    known = 0
                if size > known:
                    if len(followed) > 1 and last != path_text:
                        yield "\n==> %s <==\n" % path_text
                        last = path_text
                    with open(path, "rb") as handle:
                        handle.seek(known)
                        while known < size:  # in pieces: a file that grew by gigabytes is not held whole
                            data = handle.read(min(size - known, 1 << 20))
                            if not data:
                                break
                            known += len(data)
                            yield rawbytes.from_bytes(data)
                sizes[path_text] = size


def _operands(arguments: list[str]) -> list[str]:
    """tail's file operands among its arguments (its options' values left out)."""
    operands: list[str] = []
    args = list(arguments)
    while args:
        arg = args.pop(0)
        if arg == "--":
            return operands + args
        if arg in ("-n", "-c", "--lines", "--bytes"):
            args = args[1:]
        elif not arg.startswith("-") or arg == "-":
            operands.append(arg)
    return operands or ["-"]


class StreamingCatCommand(CatCommand):
    """`cat [-u] [FILE]...` passes its input on as it arrives; with -n, -A, -s… the library's."""

    def run(self, invocation: Invocation) -> CommandResult:
        operands = [a for a in invocation.arguments if a not in ("-u", "--")]
        if any(a.startswith("-") and a not in STDIN_NAMES for a in operands):
            return super().run(invocation)
        return CommandResult(stdout=self.stream(invocation, operands or ["-"]), exit_code=0)

    @staticmethod
    async def stream(invocation: Invocation, paths: Iterable[str]) -> AsyncIterator[str]:
        state = invocation.state
        for path_text in paths:
            if path_text in STDIN_NAMES:
                async for chunk in stdin_chunks(invocation.stdin, invocation.stdin_kind):
                    yield chunk
                continue
            if path_text == "/dev/null":
                continue
            path = state.resolve_path(path_text)
            if path.is_dir():
                state.write_error("cat: %s: Is a directory\n" % path_text)
                invocation.exit_status.code = 1
                continue
            try:
                chunks = file_chunks(path)
                for chunk in chunks:
                    yield chunk
            except OSError as exc:
                state.write_error("cat: %s: %s\n" % (path_text, exc.strerror or exc))
                invocation.exit_status.code = 1


def _options(arguments: Iterable[str],
             letters_with_value: str = "") -> tuple[list[str], dict[str, str | None], list[str]]:
    """Split GNU-style arguments into option letters/long names and operands (`--` ends options)."""
    flags: list[str] = []
    values: dict[str, str | None] = {}
    operands: list[str] = []
    args = list(arguments)
    while args:
        arg = args.pop(0)
        if arg == "--":
            operands.extend(args)
            break
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            flags.append(name)
            if eq:
                values[name] = value
        elif arg.startswith("-") and len(arg) > 1:
            for position, letter in enumerate(arg[1:], 1):
                if letter in letters_with_value:
                    values[letter] = arg[position + 1:] or (args.pop(0) if args else None)
                    flags.append(letter)
                    break
                flags.append(letter)
        else:
            operands.append(arg)
    return flags, values, operands


def canonical(path: str, mode: str) -> str | None:
    """GNU's canonicalization: mode 'e' (every component exists), 'f' (all but the last), 'm'
    (none need to); symlinks resolved. None when the mode's condition fails."""
    try:
        resolved = os.path.realpath(path, strict=(mode == "e"))
    except OSError:
        return None
    if mode == "f" and not os.path.isdir(posixpath.dirname(resolved) or "/"):
        return None
    return resolved


class ReadlinkCommand(Command):
    """readlink [-f|-e|-m] [-n] [-z] [-q|-s] [-v] FILE..."""

    name = "readlink"
    input_kinds = ARGS_ONLY
    output_kinds = TEXT_OUT
    summary = "print resolved symbolic links or canonical file names"

    def run(self, invocation: Invocation) -> CommandResult:
        state = invocation.state
        flags, _, operands = _options(invocation.arguments)
        mode = next((f for f in reversed(flags) if f in ("f", "e", "m")), None)
        mode = {"--canonicalize": "f", "--canonicalize-existing": "e", "--canonicalize-missing": "m"}.get(
            next((f for f in reversed(flags) if f.startswith("--canonicalize")), ""), mode)
        verbose = "v" in flags or "--verbose" in flags
        end = "\0" if "z" in flags or "--zero" in flags else "\n"
        if not operands:
            state.write_error("readlink: missing operand\nTry 'readlink --help' for more information.\n")
            return CommandResult(stdout="", exit_code=1)
        if ("n" in flags or "--no-newline" in flags) and len(operands) == 1:
            end = ""
        out, status = [], 0
        for operand in operands:
            full = str(state.resolve_path(operand))
            if mode is None:
                try:
                    out.append(os.readlink(full) + end)
                except OSError as exc:
                    status = 1
                    if verbose:
                        state.write_error("readlink: %s: %s\n" % (operand, exc.strerror))
                continue
            resolved = canonical(full, mode)
            if resolved is None:
                status = 1
                if verbose:
                    state.write_error("readlink: %s: No such file or directory\n" % operand)
                continue
            out.append(resolved + end)
        return CommandResult(stdout="".join(out), exit_code=status)


class RealpathCommand(Command):
    """realpath [-e|-m] [-s] [-q] [-z] [--relative-to=DIR] [--relative-base=DIR] FILE..."""

    name = "realpath"
    input_kinds = ARGS_ONLY
    output_kinds = TEXT_OUT
    summary = "print the resolved path"

    def run(self, invocation: Invocation) -> CommandResult:
        state = invocation.state
        flags, values, operands = _options(invocation.arguments)
        mode = "f"
        for flag in flags:
            mode = {"e": "e", "--canonicalize-existing": "e", "m": "m", "--canonicalize-missing": "m",
                    "E": "f"}.get(flag, mode)
        plain = "s" in flags or "--strip" in flags or "--no-symlinks" in flags
        quiet = "q" in flags or "--quiet" in flags
        end = "\0" if "z" in flags or "--zero" in flags else "\n"
        if not operands:
            state.write_error("realpath: missing operand\nTry 'realpath --help' for more information.\n")
            return CommandResult(stdout="", exit_code=1)

        def resolve(text: str) -> str | None:
            full = str(state.resolve_path(text))
            if plain:
                normal = posixpath.normpath(full)
                if mode == "e" and not os.path.exists(normal):
                    return None
                return normal
            return canonical(full, mode)

        relative_to = values.get("--relative-to")
        relative_base = values.get("--relative-base")
        base_to = resolve(relative_to) if relative_to else None
        base_base = resolve(relative_base) if relative_base else None
        out, status = [], 0
        for operand in operands:
            resolved = resolve(operand)
            if resolved is None:
                status = 1
                if not quiet:
                    state.write_error("realpath: %s: No such file or directory\n" % operand)
                continue
            if base_base is not None and not _inside(resolved, base_base):
                out.append(resolved + end)
                continue
            if base_to is not None and (base_base is None or _inside(base_to, base_base)):
                resolved = posixpath.relpath(resolved, base_to)
            elif base_base is not None:
                resolved = posixpath.relpath(resolved, base_base)
            out.append(resolved + end)
        return CommandResult(stdout="".join(out), exit_code=status)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


class CmpCommand(Command):
    """cmp [-s] [-l] [-b] [-n LIMIT] [-i SKIP] FILE1 [FILE2]: GNU's messages and statuses (0 same,
    1 different, 2 trouble)."""

    name = "cmp"
    input_kinds = frozenset({InputKind.TEXT, InputKind.ARGUMENTS})
    output_kinds = TEXT_OUT
    summary = "compare two files byte by byte"

    def run(self, invocation: Invocation) -> CommandResult:
        state = invocation.state
        flags, values, operands = _options(invocation.arguments, "ni")
        silent = any(f in flags for f in ("s", "--silent", "--quiet"))
        verbose = "l" in flags or "--verbose" in flags
        show_bytes = "b" in flags or "--print-bytes" in flags
        try:
            limit = _size(values.get("n", values.get("--bytes")))
            skip = _size(values.get("i", values.get("--ignore-initial"))) or 0
        except ValueError as exc:
            state.write_error("cmp: invalid --bytes value '%s'\n" % exc)
            return CommandResult(stdout="", exit_code=2)
        if not operands or len(operands) > 2:
            message = ("missing operand after 'cmp'" if not operands else "extra operand '%s'" % operands[2])
            state.write_error("cmp: %s\ncmp: Try 'cmp --help' for more information.\n" % message)
            return CommandResult(stdout="", exit_code=2)
        names = operands + ["-"] * (2 - len(operands))
        contents = []
        for name in names:
            if name in STDIN_NAMES:
                text = invocation.stdin if invocation.stdin_kind == InputKind.TEXT else ""
                contents.append(text.encode("utf-8", "surrogateescape"))
                continue
            try:
                with open(state.resolve_path(name), "rb") as handle:
                    contents.append(handle.read())
            except OSError as exc:
                state.write_error("cmp: %s: %s\n" % (name, exc.strerror))
                return CommandResult(stdout="", exit_code=2)
        first, second = (data[skip:] for data in contents)
        if limit is not None:
            first, second = first[:limit], second[:limit]
        out, differ = [], False
        line = 1
        for index in range(min(len(first), len(second))):
            a, b = first[index], second[index]
            if a != b:
                differ = True
                if silent:
                    break
                if verbose:
                    width = len(str(min(len(first), len(second))))
                    out.append("%*d %3o %3o\n" % (width, index + 1, a, b))
                    continue
                extra = " is %3o %s %3o %s" % (a, _shown(a), b, _shown(b)) if show_bytes else ""
                out.append("%s %s differ: byte %d, line %d%s\n" % (names[0], names[1], index + 1, line, extra))
                break
            if a == 0x0A:
                line += 1
        if len(first) != len(second) and (verbose or not differ):
            differ = True
            shorter, name = (first, names[0]) if len(first) < len(second) else (second, names[1])
            if not silent and not shorter:
                state.write_error("cmp: EOF on %s which is empty\n" % name)
            elif not silent:
                line_text = "" if verbose else ", line %d" % (shorter[:-1].count(b"\n") + 1)
                state.write_error("cmp: EOF on %s after byte %d%s\n" % (name, len(shorter), line_text))
        return CommandResult(stdout="".join(out), exit_code=1 if differ else 0)


def _shown(byte: int) -> str:
    if byte >= 0x80:
        return "M-" + _shown(byte - 0x80)
    if byte < 0x20:
        return "^" + chr(byte + 0x40)
    return "^?" if byte == 0x7F else chr(byte)


SIZE_UNITS = {"": 1, "K": 1024, "KB": 1000, "KIB": 1024, "M": 1 << 20, "MB": 10 ** 6, "MIB": 1 << 20,
              "G": 1 << 30, "GB": 10 ** 9, "GIB": 1 << 30}


def _size(text: str | None) -> int | None:
    if text is None:
        return None
    digits = text
    while digits and not digits[-1].isdigit():
        digits = digits[:-1]
    unit = text[len(digits):].upper()
    if not digits.isdigit() or unit not in SIZE_UNITS:
        raise ValueError(text)
    return int(digits) * SIZE_UNITS[unit]


class PrintenvCommand(Command):
    """printenv [-0] [NAME]...: the environment, or the named variables' values (exit 1 if one
    is not set)."""

    name = "printenv"
    input_kinds = ARGS_ONLY
    output_kinds = TEXT_OUT
    summary = "print all or part of the environment"

    def run(self, invocation: Invocation) -> CommandResult:
        flags, _, names = _options(invocation.arguments)
        end = "\0" if "0" in flags or "--null" in flags else "\n"
        env = invocation.state.exported_variables()
        if not names:
            return CommandResult(stdout="".join("%s=%s%s" % (k, v, end) for k, v in env.items()), exit_code=0)
        found = [env[name] + end for name in names if name in env and "=" not in name]
        return CommandResult(stdout="".join(found), exit_code=0 if len(found) == len(names) else 1)


class WhichCommand(Command):
    """which [-a] NAME...: the first (-a: every) executable of that name on $PATH, as the guest's
    file tree holds them (our programs are in /usr/bin and /bin); exit 1 if one is missing."""

    name = "which"
    input_kinds = ARGS_ONLY
    output_kinds = TEXT_OUT
    summary = "locate a command"

    def run(self, invocation: Invocation) -> CommandResult:
        state = invocation.state
        args = list(invocation.arguments)
        every = False
        while args and args[0].startswith("-") and len(args[0]) > 1:
            option = args.pop(0)
            if option == "--":
                break
            if option != "-a":
                state.write_error("Illegal option %s\n" % option)
                return CommandResult(stdout="Usage: /usr/bin/which [-a] args\n", exit_code=2)
            every = True
        if not args:
            return CommandResult(stdout="", exit_code=1)
        folders = [f or "." for f in state.variables.get("PATH", "").split(":")]
        out: list[str] = []
        status = 0
        for name in args:
            if "/" in name:
                candidates = [name]
            else:
                candidates = [posixpath.join(folder, name) for folder in folders]
            found = [c for c in candidates if os.path.isfile(state.resolve_path(c))]
            if not found:
                status = 1
            out.extend(c + "\n" for c in (found if every else found[:1]))
        return CommandResult(stdout="".join(out), exit_code=status)


def _input_text(invocation: Invocation, paths: list[str], program: str) -> tuple[list[str], bool]:
    """The text of the named files (or stdin), and whether one could not be read."""
    state, failed = invocation.state, False
    texts: list[str] = []
    for path_text in paths or ["-"]:
        if path_text in STDIN_NAMES:
            texts.append(invocation.stdin if invocation.stdin_kind == InputKind.TEXT else "")
            continue
        try:
            with open(state.resolve_path(path_text), "rb") as handle:
                texts.append(handle.read().decode("utf-8", "replace"))
        except OSError as exc:
            state.write_error("%s: %s: %s\n" % (program, path_text, exc.strerror))
            failed = True
    return texts, failed


TEXT_AND_ARGS = frozenset({InputKind.TEXT, InputKind.ARGUMENTS})


class TacCommand(Command):
    """tac [-s SEP] [FILE]...: lines (records) last first."""

    name = "tac"
    input_kinds = TEXT_AND_ARGS
    output_kinds = TEXT_OUT
    summary = "concatenate and print files in reverse"

    def run(self, invocation: Invocation) -> CommandResult:
        flags, values, paths = _options(invocation.arguments, "s")
        separator = values.get("s", values.get("--separator")) or "\n"
        texts, failed = _input_text(invocation, paths, "tac")
        out: list[str] = []
        for text in texts:
            records = text.split(separator)
            tail = records.pop()
            records = [record + separator for record in records]
            if tail:
                records.append(tail)
            out.extend(reversed(records))
        return CommandResult(stdout="".join(out), exit_code=1 if failed else 0)


class CommCommand(Command):
    """comm [-123] [--output-delimiter=STR] [-z] FILE1 FILE2: lines only in one, only in the
    other, in both, of two sorted files."""

    name = "comm"
    input_kinds = TEXT_AND_ARGS
    output_kinds = TEXT_OUT
    summary = "compare two sorted files line by line"

    def run(self, invocation: Invocation) -> CommandResult:
        state = invocation.state
        flags, values, paths = _options(invocation.arguments)
        if len(paths) != 2:
            message = "missing operand" if len(paths) < 2 else "extra operand '%s'" % paths[2]
            if len(paths) == 1:
                message = "missing operand after '%s'" % paths[0]
            state.write_error("comm: %s\nTry 'comm --help' for more information.\n" % message)
            return CommandResult(stdout="", exit_code=1)
        end = "\0" if "z" in flags or "--zero-terminated" in flags else "\n"
        texts, failed = _input_text(invocation, paths, "comm")
        if failed:
            return CommandResult(stdout="", exit_code=1)
        lines = []
        for text in texts:
            records = text.split(end)
            if records and records[-1] == "":
                records.pop()
            lines.append(records)
        delimiter = values.get("--output-delimiter", "\t") or ""  # given with "=": never None
        shown = [str(column) not in "".join(f for f in flags if f in "123") for column in (1, 2, 3)]
        prefix = {1: "", 2: delimiter if shown[0] else "", 3: delimiter * (shown[0] + shown[1])}
        check = "--nocheck-order" not in flags
        out: list[str] = []
        unsorted = [False, False]
        first, second = lines
        i = j = 0

        def note_order(which: int, records: list[str], index: int) -> None:
            if check and index and records[index] < records[index - 1] and not unsorted[which]:
                unsorted[which] = True
                state.write_error("comm: file %d is not in sorted order\n" % (which + 1))

        while i < len(first) or j < len(second):
            if j >= len(second) or (i < len(first) and first[i] < second[j]):
                note_order(0, first, i)
                if shown[0]:
                    out.append(prefix[1] + first[i] + end)
                i += 1
            elif i >= len(first) or second[j] < first[i]:
                note_order(1, second, j)
                if shown[1]:
                    out.append(prefix[2] + second[j] + end)
                j += 1
            else:
                note_order(0, first, i)
                note_order(1, second, j)
                if shown[2]:
                    out.append(prefix[3] + first[i] + end)
                i += 1
                j += 1
        if any(unsorted):
            state.write_error("comm: input is not in sorted order\n")
        return CommandResult(stdout="".join(out), exit_code=1 if any(unsorted) else 0)


class NprocCommand(Command):
    """nproc: 1 — a guest has one thread (WASI has none of its own)."""

    name = "nproc"
    input_kinds = ARGS_ONLY
    output_kinds = TEXT_OUT
    summary = "print the number of processing units available"

    def run(self, invocation: Invocation) -> CommandResult:
        return CommandResult(stdout="1\n", exit_code=0)


class ShufCommand(Command):
    """shuf [-n COUNT] [-r] [-e ARG... | -i LO-HI | FILE]: a random permutation of the lines."""

    name = "shuf"
    input_kinds = TEXT_AND_ARGS
    output_kinds = TEXT_OUT
    summary = "generate random permutations"

    def run(self, invocation: Invocation) -> CommandResult:
        state = invocation.state
        args = list(invocation.arguments)
        count, repeat, echo_mode, span, operands = None, False, False, None, []
        while args:
            arg = args.pop(0)
            if arg in ("-n", "--head-count") and args:
                count = args.pop(0)
            elif arg.startswith("--head-count="):
                count = arg.split("=", 1)[1]
            elif arg.startswith("-n") and len(arg) > 2:
                count = arg[2:]
            elif arg in ("-r", "--repeat"):
                repeat = True
            elif arg in ("-e", "--echo"):
                echo_mode = True
            elif arg in ("-i", "--input-range") and args:
                span = args.pop(0)
            elif arg.startswith("-i") and len(arg) > 2:
                span = arg[2:]
            else:
                operands.append(arg)
        try:
            count = None if count is None else int(count)
        except ValueError:
            state.write_error("shuf: invalid line count: '%s'\n" % count)
            return CommandResult(stdout="", exit_code=1)
        if span is not None:
            low, _, high = span.partition("-")
            items = [str(n) for n in range(int(low), int(high) + 1)]
        elif echo_mode:
            items = operands
        else:
            texts, failed = _input_text(invocation, operands[:1], "shuf")
            if failed:
                return CommandResult(stdout="", exit_code=1)
            items = texts[0].splitlines() if texts else []
        if repeat:
            picked = [random.choice(items) for _ in range(count if count is not None else 0)] if items else []
        else:
            picked = random.sample(items, len(items))
            if count is not None:
                picked = picked[:count]
        return CommandResult(stdout="".join(item + "\n" for item in picked), exit_code=0)


def _zcat() -> Command:
    """`zcat FILE...`: `gunzip -c` (the library has gzip and gunzip, not zcat)."""
    import dataclasses

    from bash_purepython.command.gzip import GunzipCommand

    class ZcatCommand(GunzipCommand):
        name = "zcat"
        summary = "decompress gzip files to standard output"

        async def run(self, invocation: Invocation) -> CommandResult:
            return await super().run(dataclasses.replace(invocation, arguments=["-c", *invocation.arguments]))

    return ZcatCommand()


TRUNCATE_UNITS = {"": 1, "K": 1 << 10, "KB": 10 ** 3, "KIB": 1 << 10, "M": 1 << 20, "MB": 10 ** 6, "MIB": 1 << 20,
                  "G": 1 << 30, "GB": 10 ** 9, "GIB": 1 << 30, "T": 1 << 40, "TB": 10 ** 12, "TIB": 1 << 40}


class TruncateCommand(Command):
    """truncate [-c] [-o] (-s [+-<>/%]SIZE | -r RFILE) FILE...: GNU's sizes, messages and statuses."""

    name = "truncate"
    input_kinds = ARGS_ONLY
    output_kinds = TEXT_OUT
    summary = "shrink or extend the size of a file to the specified size"

    def run(self, invocation: Invocation) -> CommandResult:  # noqa: C901 - GNU's option set, one flat function
        state = invocation.state
        flags, values, operands = _options(invocation.arguments, "sr")
        size_text = values.get("s", values.get("--size"))
        reference = values.get("r", values.get("--reference"))
        no_create = "c" in flags or "--no-create" in flags
        unknown = [f for f in flags if f not in ("s", "r", "c", "o", "--size", "--reference", "--no-create",
                                                 "--io-blocks")]
        if unknown:
            flag = unknown[0]
            shown = "unrecognized option '%s'" % flag if flag.startswith("--") else "invalid option -- '%s'" % flag
            return _fail(state, "truncate", shown)
        if size_text is None and reference is None:
            return _fail(state, "truncate", "you must specify either '--size' or '--reference'")
        if not operands:
            return _fail(state, "truncate", "missing file operand")
        mode, amount = "=", 0
        if size_text is not None:
            text = size_text.strip()
            if text[:1] in "+-<>/%" and text:
                mode, text = text[0], text[1:]
            digits = text.rstrip("KMGTBkmgtiI")
            unit = text[len(digits):].upper()
            if not digits.isdigit() or unit not in TRUNCATE_UNITS:
                state.write_error("truncate: Invalid number: '%s'\n" % size_text)
                return CommandResult(stdout="", exit_code=1)
            amount = int(digits) * TRUNCATE_UNITS[unit]
            if mode in "/%" and amount == 0:
                state.write_error("truncate: division by zero\n")
                return CommandResult(stdout="", exit_code=1)
        base = None
        if reference is not None:
            try:
                base = os.stat(state.resolve_path(reference)).st_size
            except OSError as exc:
                state.write_error("truncate: cannot stat '%s': %s\n" % (reference, exc.strerror))
                return CommandResult(stdout="", exit_code=1)
            if size_text is None:
                mode, amount = "=", base
        status = 0
        for operand in operands:
            path = state.resolve_path(operand)
            if not os.path.exists(path):
                if no_create:
                    continue
                try:
                    open(path, "ab").close()
                except OSError as exc:
                    state.write_error("truncate: cannot open '%s' for writing: %s\n" % (operand, exc.strerror))
                    status = 1
                    continue
            current = base if base is not None else os.path.getsize(path)
            new = {"=": amount, "+": current + amount, "-": max(current - amount, 0),
                   "<": min(current, amount), ">": max(current, amount),
                   "/": current // amount * amount if amount else 0,
                   "%": -(-current // amount) * amount if amount else 0}[mode]
            try:
                os.truncate(path, new)
            except OSError as exc:
                state.write_error("truncate: cannot open '%s' for writing: %s\n" % (operand, exc.strerror))
                status = 1
        return CommandResult(stdout="", exit_code=status)


def _fail(state: Any, name: str, message: str) -> CommandResult:
    state.write_error("%s: %s\nTry '%s --help' for more information.\n" % (name, message, name))
    return CommandResult(stdout="", exit_code=1)
