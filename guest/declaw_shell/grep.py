"""`grep`, as GNU grep 3.x answers, with the options agent tools send.

The library's grep has no `-Z`/`--null`, `-z`, `--include`/`--exclude`/`--exclude-dir`, `-m`,
`-L`, `-s`, `-f`, `-P`, binary-file handling: an unknown option fails with status 2, and tools
that run `grep … 2>/dev/null || true` (LangChain Deep Agents: `grep -rHnFZ --include=GLOB
--exclude-dir=DIR -e PATTERN PATH`) silently find nothing. This one covers: -E -F -G -P, -e, -f,
-i/-y, -v, -w, -x, -c, -l, -L, -o, -q, -s, -m, -n, -b, -H, -h, --label, -Z/--null,
-z/--null-data, -A/-B/-C/-NUM, --group-separator, --no-group-separator, -r/-R, --include,
--exclude, --exclude-dir, -a, -I, --binary-files, --color (never colours: output is not a
terminal), -U and --line-buffered (accepted). Patterns: BRE and ERE translated to Python's `re`
(the library's translation), `-P` is Python's `re` itself.

Statuses as GNU's: 0 a line was selected, 1 none, 2 trouble (unless -q found a match). A file
holding a NUL byte is binary: a match there says "grep: FILE: binary file matches" on stderr
(-a: search it as text; -I: skip it). Recursive walks list folders in sorted order (GNU's
order is the file system's) and follow symlinks only with -R.
"""

from __future__ import annotations

import fnmatch
import os
import re

from bash_purepython.command.command import (
    Command,
    CommandResult,
    InputKind,
    OutputKind,
)
from bash_purepython.command.sed import translate_regex
from bash_purepython.streams import as_async_iterator, close_iterator

from .coreutils import stdin_chunks

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable, Iterator
    from typing import Any

    Invocation = Any  # bash_purepython's CommandInvocation (untyped)

STDIN_LABEL = "(standard input)"
WITH_VALUE_SHORT = "efmABCdD"
WITH_VALUE_LONG = {"--regexp": "e", "--file": "f", "--max-count": "m", "--after-context": "A",
                   "--before-context": "B", "--context": "C", "--label": "label", "--include": "include",
                   "--exclude": "exclude", "--exclude-dir": "exclude-dir", "--binary-files": "binary-files",
                   "--group-separator": "group-separator", "--directories": "d", "--devices": "D",
                   "--exclude-from": "exclude-from"}
FLAG_LONG = {"--extended-regexp": "E", "--fixed-strings": "F", "--basic-regexp": "G", "--perl-regexp": "P",
             "--ignore-case": "i", "--no-ignore-case": "no-i", "--invert-match": "v", "--word-regexp": "w",
             "--line-regexp": "x", "--count": "c", "--files-with-matches": "l", "--files-without-match": "L",
             "--only-matching": "o", "--quiet": "q", "--silent": "q", "--no-messages": "s",
             "--byte-offset": "b", "--line-number": "n", "--no-line-number": "no-n", "--with-filename": "H",
             "--no-filename": "h", "--null": "Z", "--null-data": "z", "--recursive": "r",
             "--dereference-recursive": "R", "--text": "a", "--no-group-separator": "no-group-separator",
             "--line-buffered": "", "--binary": "", "--initial-tab": "", "--unix-byte-offsets": ""}
FLAG_SHORT = "EFGPiyvwxclLoqsbnHhZzrRaIUTu"
NUMBER_OPTION = re.compile(r"^-(\d+)$")


class GrepError(Exception):
    """A command line or pattern grep refuses (status 2)."""


class Options:
    def __init__(self) -> None:
        self.patterns: list[str] = []
        self.pattern_files: list[str] = []
        self.syntax = "G"
        self.flags: set[str] = set()
        self.max_count: int | None = None
        self.after: int | None = None
        self.before: int | None = None
        self.label = STDIN_LABEL
        self.includes: list[str] = []
        self.excludes: list[str] = []
        self.exclude_dirs: list[str] = []
        self.binary = "binary"
        self.group_separator = "--"
        self.operands: list[str] = []


def parse(arguments: Iterable[str]) -> Options:  # noqa: C901 (grep's option grammar, one flat loop)
    options = Options()
    args = list(arguments)
    while args:
        arg = args.pop(0)
        if arg == "--":
            options.operands.extend(args)
            break
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if name == "--color" or name == "--colour":
                continue
            if name in WITH_VALUE_LONG:
                if not eq:
                    if not args:
                        raise GrepError("grep: option '%s' requires an argument" % name)
                    value = args.pop(0)
                _apply(options, WITH_VALUE_LONG[name], value)
            elif name in FLAG_LONG:
                _flag(options, FLAG_LONG[name])
            else:
                raise GrepError("grep: unrecognized option '%s'" % arg)
            continue
        number = NUMBER_OPTION.match(arg)
        if number:
            options.after = options.before = int(number.group(1))
            continue
        if arg.startswith("-") and len(arg) > 1:
            letters = arg[1:]
            for position, letter in enumerate(letters):
                if letter in WITH_VALUE_SHORT:
                    value = letters[position + 1:]
                    if not value:
                        if not args:
                            raise GrepError("grep: option requires an argument -- '%s'" % letter)
                        value = args.pop(0)
                    _apply(options, letter, value)
                    break
                if letter.isdigit():  # -5 inside a cluster: context
                    digits = letters[position:]
                    if digits.isdigit():
                        options.after = options.before = int(digits)
                        break
                if letter not in FLAG_SHORT:
                    raise GrepError("grep: invalid option -- '%s'" % letter)
                _flag(options, letter)
            continue
        options.operands.append(arg)
    return options


def _flag(options: Options, flag: str) -> None:
    if flag in ("E", "F", "G", "P"):
        options.syntax = flag
    elif flag == "y":
        options.flags.add("i")
    elif flag == "no-i":
        options.flags.discard("i")
    elif flag == "no-n":
        options.flags.discard("n")
    elif flag == "I":
        options.binary = "without-match"
    elif flag:
        options.flags.add(flag)


def _apply(options: Options, key: str, value: str) -> None:
    if key == "e":
        options.patterns.append(value)
    elif key == "f":
        options.pattern_files.append(value)
    elif key == "m":
        options.max_count = _number(value, "max count")
    elif key in ("A", "B", "C"):
        count = _number(value, "context length argument")
        if key in ("A", "C"):
            options.after = count
        if key in ("B", "C"):
            options.before = count
    elif key == "label":
        options.label = value
    elif key == "include":
        options.includes.append(value)
    elif key == "exclude":
        options.excludes.append(value)
    elif key == "exclude-dir":
        options.exclude_dirs.append(value)
    elif key == "binary-files":
        if value not in ("binary", "text", "without-match"):
            raise GrepError("grep: invalid argument '%s' for '--binary-files'" % value)
        options.binary = value
    elif key == "group-separator":
        options.group_separator = value


def _number(value: str, what: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise GrepError("grep: invalid %s" % what) from None
    if number < 0 and what != "max count":
        raise GrepError("grep: %s: invalid %s" % (value, what))
    return number


def compile_patterns(patterns: list[str], options: Options) -> re.Pattern[str]:
    flags = re.IGNORECASE if "i" in options.flags else 0
    try:
        pieces = []
        for pattern in patterns:
            if options.syntax == "F":
                piece = re.escape(pattern)
            elif options.syntax == "P":
                piece = pattern
            else:
                piece = translate_regex(pattern, options.syntax == "E")
            pieces.append("(?:%s)" % piece)
        combined = "|".join(pieces) if pieces else "(?!)"
        if "x" in options.flags:
            combined = "^(?:%s)$" % combined
        elif "w" in options.flags:
            combined = r"(?<![\w])(?:%s)(?![\w])" % combined
        return re.compile(combined, flags)
    except re.error as error:
        if options.syntax == "P":
            raise GrepError("grep: %s" % error) from None
        if "[" in str(error) or "unterminated character set" in str(error):
            raise GrepError("grep: Unmatched [, [^, [:, [., or [=") from None
        raise GrepError("grep: Invalid regular expression") from None


def _matches_glob(name: str, globs: list[str]) -> bool:
    """GNU's --include/--exclude: the glob matches the whole name or a suffix after a slash."""
    parts = name.split("/")
    return any(fnmatch.fnmatchcase("/".join(parts[i:]), glob) for glob in globs for i in range(len(parts)))


class GrepCommand(Command):
    name = "grep"
    input_kinds = frozenset({InputKind.STREAM_TEXT, InputKind.TEXT, InputKind.ARGUMENTS})
    output_kinds = frozenset({OutputKind.STREAM_TEXT})
    summary = "print lines that match patterns"

    def __init__(self, name: str = "grep", syntax: str | None = None) -> None:
        self.name = name
        self.forced_syntax = syntax  # egrep, fgrep

    def run(self, invocation: Invocation) -> CommandResult:
        state = invocation.state
        try:
            options = parse(invocation.arguments)
            if self.forced_syntax:
                options.syntax = self.forced_syntax
            patterns = list(options.patterns)
            for path_text in options.pattern_files:
                patterns.extend(self.pattern_file(path_text, invocation))
            if not options.patterns and not options.pattern_files:
                if not options.operands:
                    raise GrepError("Usage: grep [OPTION]... PATTERNS [FILE]...\n"
                                    "Try 'grep --help' for more information.")
                patterns.extend(options.operands.pop(0).split("\n"))
            else:
                patterns = [line for pattern in patterns for line in pattern.split("\n")]
            regex = compile_patterns(patterns, options)
        except GrepError as error:
            state.write_error("%s\n" % error)
            return CommandResult(stdout=as_async_iterator(()), exit_code=2)
        return CommandResult(stdout=Search(invocation, options, regex).run(), exit_code=0)

    @staticmethod
    def pattern_file(path_text: str, invocation: Invocation) -> list[str]:
        if path_text == "-":
            text = invocation.stdin if invocation.stdin_kind == InputKind.TEXT else ""
        else:
            try:
                with open(invocation.state.resolve_path(path_text), "rb") as handle:
                    text = handle.read().decode("utf-8", "replace")
            except OSError as exc:
                raise GrepError("grep: %s: %s" % (path_text, exc.strerror)) from None
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return lines


class Search:
    """One grep run over its files: yields output text; sets the exit status at the end."""

    def __init__(self, invocation: Invocation, options: Options, regex: re.Pattern[str]) -> None:
        self.invocation = invocation
        self.state = invocation.state
        self.options = options
        self.regex = regex
        flags = options.flags
        self.recursive = "r" in flags or "R" in flags
        self.quiet = "q" in flags
        self.any_selected = False
        self.trouble = False
        self.record_end = "\0" if "z" in flags else "\n"
        self.name_end = "\0" if "Z" in flags else None
        self.binary = False  # the file being searched is binary

    async def run(self) -> AsyncIterator[str]:
        options = self.options
        operands = options.operands or (["."] if self.recursive else ["-"])
        targets = self.targets(operands, bare=not options.operands)
        # names when there are several operands, or a folder is searched (GNU: `grep -r x file` has none)
        into_folders = self.recursive and any(op != "-" and self.state.resolve_path(op).is_dir() for op in operands)
        show_names = ("H" in options.flags or into_folders or len(operands) > 1) and "h" not in options.flags
        try:
            for label, path in targets:
                async for piece in self.search(label, path, show_names):
                    yield piece
                if self.quiet and self.any_selected:
                    break
        finally:
            if self.invocation.stdin_kind == InputKind.STREAM_TEXT:
                await close_iterator(self.invocation.stdin)  # stop an endless producer
            status = 0 if self.any_selected else 1
            if self.trouble and not (self.quiet and self.any_selected):
                status = 2
            self.invocation.exit_status.code = status

    def error(self, message: str) -> None:
        self.trouble = True
        if "s" not in self.options.flags:
            self.state.write_error("grep: %s\n" % message)

    # -- which files ---------------------------------------------------------------------------------
    def targets(self, operands: list[str], bare: bool = False) -> Iterator[tuple[str, str | None]]:
        """(label, path or None for stdin), lazily, in order. (`grep -r PATTERN` with no
        operand searches "." and labels files without "./".)"""
        options = self.options
        for operand in operands:
            if operand == "-":
                yield options.label, None
                continue
            path = self.state.resolve_path(operand)
            if path.is_dir():
                if not self.recursive:
                    self.error("%s: Is a directory" % operand)
                    continue
                if options.exclude_dirs and _matches_glob(operand.rstrip("/") or "/", options.exclude_dirs) \
                        and operand not in (".", "./"):
                    continue
                prefix = operand if operand.endswith("/") else operand + "/"
                prefix = prefix.rstrip("/") + "/" if prefix.strip("/") else prefix
                if bare:
                    prefix = ""
                yield from self.walk(str(path), prefix)
                continue
            if not self.selected_file(operand):
                continue
            yield operand, str(path)

    def selected_file(self, name: str) -> bool:
        options = self.options
        if options.excludes and _matches_glob(name, options.excludes):
            return False
        if options.includes and not _matches_glob(name, options.includes):
            return False
        return True

    def walk(self, folder: str, prefix: str) -> Iterator[tuple[str, str]]:
        follow = "R" in self.options.flags
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            self.error("%s: %s" % (prefix.rstrip("/") or folder, exc.strerror))
            return
        for entry in entries:
            label = prefix + entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=follow)
                is_file = entry.is_file(follow_symlinks=follow)
            except OSError:
                continue
            if is_dir:
                if self.options.exclude_dirs and any(fnmatch.fnmatchcase(entry.name, g)
                                                     for g in self.options.exclude_dirs):
                    continue
                yield from self.walk(entry.path, label + "/")
            elif is_file and self.selected_file(entry.name):
                yield label, entry.path

    # -- one file ------------------------------------------------------------------------------------
    async def records(self, path: str | None) -> AsyncIterator[str]:
        """The file's (or stdin's) records, with their terminators; and whether it is binary."""
        end = self.record_end
        if path is None:
            source = stdin_chunks(self.invocation.stdin, self.invocation.stdin_kind)
            pending = ""
            async for chunk in source:
                pending += chunk
                while True:
                    cut = pending.find(end)
                    if cut < 0:
                        break
                    yield pending[:cut + 1]
                    pending = pending[cut + 1:]
            if pending:
                yield pending
            return
        with open(path, "rb") as handle:
            data = handle.read()
        if end == "\n" and b"\0" in data and self.options.binary != "text" and "a" not in self.options.flags:
            self.binary = True
        text = data.decode("utf-8", "replace")
        start = 0
        while start < len(text):
            cut = text.find(end, start)
            if cut < 0:
                yield text[start:]
                return
            yield text[start:cut + 1]
            start = cut + 1

    def prefix(self, label: str, show_names: bool, number: int, offset: int, separator: str) -> str:
        parts = []
        if show_names:
            parts.append(label + (self.name_end if self.name_end is not None else separator))
        if "n" in self.options.flags:
            parts.append("%d%s" % (number, separator))
        if "b" in self.options.flags:
            parts.append("%d%s" % (offset, separator))
        return "".join(parts)

    async def search(  # noqa: C901 (one pass over a file: selection, context, counts, listing)
            self, label: str, path: str | None, show_names: bool) -> AsyncIterator[str]:
        options, flags, regex = self.options, self.options.flags, self.regex
        self.binary = False
        invert = "v" in flags
        listing = "l" in flags or "L" in flags
        counting = "c" in flags
        silent_lines = self.quiet or listing or counting
        only = "o" in flags
        before = options.before or 0
        after = options.after or 0
        context = (before or after) and not silent_lines and not only
        selected = 0
        held: list[tuple[int, int, str]] = []  # (number, offset, text) of lines before a match
        after_left = 0
        last_printed = 0
        printed_group = getattr(self, "printed_group", False)
        number = offset = 0
        if options.max_count == 0:
            return
        try:
            records = self.records(path)
            async for record in records:
                number += 1
                body = record[:-1] if record.endswith(self.record_end) else record
                hit = regex.search(body) is not None
                if hit != invert:
                    if self.binary and options.binary == "without-match":
                        return
                    selected += 1
                    self.any_selected = True
                    if self.quiet:
                        return
                    if not silent_lines and not self.binary:
                        first = held[0][0] if held else number
                        if context and printed_group and (not last_printed or first > last_printed + 1) \
                                and "no-group-separator" not in flags:
                            yield options.group_separator + "\n"
                        for held_number, held_offset, held_text in held:
                            yield self.prefix(label, show_names, held_number, held_offset, "-") + held_text \
                                + self.record_end
                        held = []
                        if only:
                            if not invert:
                                for match in regex.finditer(body):
                                    if match.group(0):
                                        yield self.prefix(label, show_names, number, offset + _bytes(
                                            body[:match.start()]), ":") + match.group(0) + self.record_end
                        else:
                            yield self.prefix(label, show_names, number, offset, ":") + body + self.record_end
                        printed_group = True
                        last_printed = number
                        after_left = after
                    if options.max_count is not None and selected >= options.max_count:
                        if context and after_left:
                            async for extra in self.trailing(records, label, show_names, number, offset
                                                             + _bytes(record), after_left):
                                yield extra
                        break
                elif context:
                    if after_left:
                        after_left -= 1
                        last_printed = number
                        yield self.prefix(label, show_names, number, offset, "-") + body + self.record_end
                    elif before:
                        held.append((number, offset, body))
                        del held[:-before]
                offset += _bytes(record)
        except OSError as exc:
            self.error("%s: %s" % (label, exc.strerror))
            return
        finally:
            self.printed_group = printed_group
        if counting:
            name = (label + (self.name_end or ":")) if show_names else ""
            yield "%s%d\n" % (name, selected)
        if listing and (selected > 0) == ("l" in flags):
            yield label + (self.name_end if self.name_end is not None else "\n")
        if self.binary and selected and not silent_lines:
            self.state.write_error("grep: %s: binary file matches\n" % label)

    async def trailing(self, records: AsyncIterator[str], label: str, show_names: bool, number: int, offset: int,
                       count: int) -> AsyncIterator[str]:
        async for record in records:
            number += 1
            body = record[:-1] if record.endswith(self.record_end) else record
            yield self.prefix(label, show_names, number, offset, "-") + body + self.record_end
            offset += _bytes(record)
            count -= 1
            if count <= 0:
                return


def _bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))
