"""GNU sed, whole: the library's sed ran a script over one line at a time, so none of the
commands that move between lines or keep state existed — `N`, `n`, `D`, `P`, the hold space
(`h H g G x`), branches and labels (`b t T :`), `r R w W`, `l`, `F`, `z`, `0,/re/`, the empty
regex (`s//new/`), `-z` and `-s`. Agents write those: `sed ':a;N;$!ba;s/\\n/ /g'` to join lines,
`sed '$!N;/^\\(.*\\)\\n\\1$/!P;D'`, `sed -n '/start/{n;p}'`, `sed '0,/old/s//new/'`. Each of these
failed with "unknown command".

This is GNU sed 4.9's model: a script of commands, each with up to two addresses and `!`; `{`
and `}` flattened into jumps so a branch may leave or enter a block; input read one record
ahead (so `$` is known) and read further by `n`/`N` within a cycle; the append queue (`a`, `r`,
`R`) written at the end of a cycle or when `n`/`N` reads the next line; a last line without its
newline printed without it. The library still parses the pieces it parsed (addresses, regular
expressions through its translation to Python's `re` with our escapes, `s` and `y`, the text of
`a i c`) and gives the replacement (coreutils.py, `\\U \\L \\u \\l`); the rest is here. `e` and
the `s///e` flag (run a command) are refused: this shell runs no command from a sed script.
"""

from __future__ import annotations

import asyncio
import posixpath
import re
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

from bash_purepython.command import sed as library_sed
from bash_purepython.command.command import Command, CommandResult
from bash_purepython.command.lines import close_stdin
from bash_purepython.command.sed import Address, AddressKind, Instruction, InstructionKind, SedScriptError
from bash_purepython.shell_state import NULL_DEVICE_PATH
from bash_purepython.streams import as_async_iterator, close_iterator

from . import rawbytes
from .coreutils import ENDLESS_DEVICES, SED_NUMERIC, STREAM_IN, STREAM_OUT, file_chunks, stdin_chunks

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    Invocation = Any  # bash_purepython's CommandInvocation (untyped)

STDIN = "-"
EXIT_BAD_SCRIPT, EXIT_BAD_INPUT, EXIT_IO = 1, 2, 4
NO_ARGUMENT = frozenset("=dDgGhHnNpPxzF")
FILE_ARGUMENT = frozenset("rRwW")
LABELLED = frozenset("btT")
ONE_ADDRESS = frozenset("=aiqQrR")  # GNU takes two for = a i r R; POSIX one: GNU's is kept below
NO_ADDRESS = frozenset(":}")
DEFAULT_WRAP = 70
YIELD_EVERY = 4096  # commands run between turns of the event loop
BATCH = 256  # output pieces gathered, at most, while input is at hand
USAGE = "Usage: sed [OPTION]... {script-only-if-no-other-script} [input-file]...\n"
LAST_REGEX = Address(kind=AddressKind.REGEX)  # `//`: the last regex used, when it runs
_OCTAL = re.compile(r"[^\x20-\x7e]|\\")
_L_ESCAPES = {"\\": "\\\\", "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
              "\v": "\\v"}


class MissingLabel(SedScriptError):
    """A branch to a label the script lacks (GNU's status 4, not 1)."""


class SedRuntimeError(Exception):
    """A script error only running it shows (`s//x/` before any regex); sed stops with status 1."""


@dataclass
class Op:
    """One command of the script."""

    command: str
    start: Optional[Address] = None
    end: Optional[Address] = None
    negated: bool = False
    edit: Optional[Instruction] = None  # `s` and `y`: the library's parse (regex, replacement, flags)
    text: str = ""  # a i c: the text; b t T ":": the label; r R w W (and s///w): the file
    number: int = 0  # q Q: the exit code; l: the line length (-1: the default); { b t T: where to go
    zero: bool = False  # `0,/re/`: the range is open before the first line
    active: bool = False  # a range's state
    last_line: int = 0  # addr1,+N: the range's last line


class ScriptParser(library_sed.ScriptParser):
    """The library's parser for addresses, `s`, `y` and text, and GNU's other commands here."""

    def __init__(self, text: str, number: int, extended: bool, ops: list[Op], blocks: list[int]) -> None:
        super().__init__(text, number, extended)
        self.text: str = text
        self.position: int = 0
        self.ops, self.blocks = ops, blocks
        self._y_strings: tuple[str, ...] = ()

    def parse_all(self) -> None:
        while True:
            self.skip_separators()
            if self.at_end():
                return
            if self.peek() == "}":
                self.position += 1
                if not self.blocks:
                    raise self.error("unexpected `}'")
                self.ops[self.blocks.pop()].number = len(self.ops)
                self.ops.append(Op("}"))
                self._end_of_command()
                continue
            self.parse_op()

    def _end_of_command(self) -> None:
        self.skip_blanks()
        if not self.at_end() and self.peek() not in ";\n}#":
            self.position += 1
            raise self.error("extra characters after command")

    def parse_address(self) -> Optional[Address]:
        if self.peek() == "0" and not self.text[self.position + 1:self.position + 2].isdigit() \
                and self.text[self.position + 1:self.position + 2] != "~":
            self.position += 1
            return Address(kind=AddressKind.LINE, number=0)  # checked in parse_op: only `0,/re/`
        return super().parse_address()

    def compile_regex(self, pattern: str, flags: int) -> Any:
        """GNU's regex: `.` matches a newline and `$` only the end (not before a last newline)
        unless `M`; a quantifier after a quantifier repeats it (`.*?` is greedy, not lazy)."""
        if not pattern:
            return None  # the last regex used, when it runs
        translate = library_sed.translate_regex
        multiline = bool(flags & re.MULTILINE)
        try:
            library_sed.translate_regex = lambda text, extended: _gnu_python_regex(translate(text, extended),
                                                                                  multiline)
            return super().compile_regex(pattern, flags if multiline else flags | re.DOTALL)
        finally:
            library_sed.translate_regex = translate

    def read_delimited(self, delimiter: str, message: str, for_regex: bool) -> str:
        """The text up to an unescaped delimiter: in a regex, a bracket expression is read whole
        (`s/\\/[^/]*$//`: its `/` is no delimiter) and an escaped delimiter is the character with its
        regex meaning (`s|a\\|b|X|`), as GNU's; else the library's reading."""
        if not for_regex:
            return super().read_delimited(delimiter, message, for_regex)
        pieces: list[str] = []
        while not self.at_end():
            character = self.take()
            if character == delimiter:
                return "".join(pieces)
            if character == "\\" and not self.at_end():
                escaped = self.take()
                pieces.append("\n" if escaped == "\n" else escaped if escaped == delimiter and escaped != "n"
                              else "\\" + escaped)
            elif character == "[":
                pieces.append(self._bracket())
            else:
                pieces.append(character)
        raise self.error(message)

    def _bracket(self) -> str:
        """A bracket expression after its `[`, to its `]` (a `]` first in it, and `[:class:]`,
        `[.x.]`, `[=x=]` inside, do not end it); unterminated, the rest is left to the regex."""
        begin = self.position - 1
        text, position = self.text, self.position
        if text[position:position + 1] == "^":
            position += 1
        if text[position:position + 1] == "]":
            position += 1
        while position < len(text):
            if text[position] == "[" and text[position + 1:position + 2] in (":", ".", "="):
                close = text.find(text[position + 1] + "]", position + 2)
                if close >= 0:
                    position = close + 2
                    continue
            if text[position] == "]":
                self.position = position + 1
                return text[begin:self.position]
            if text[position] == "\n":
                break
            position += 1
        return "["

    def parse_regex_address(self, delimiter: str) -> Address:
        address = super().parse_regex_address(delimiter)
        return LAST_REGEX if address.regex is None else address

    def parse_op(self) -> None:  # noqa: C901 - one branch a command, as GNU's compile.c
        start = self.parse_address()
        end = None
        if start is not None:
            self.skip_blanks()
            if self.peek() == ",":
                self.position += 1
                self.skip_blanks()
                end = self.parse_second_address()
        zero = start is not None and start.kind == AddressKind.LINE and start.number == 0
        if zero and (end is None or end.kind != AddressKind.REGEX):
            raise self.error("invalid usage of line address 0")
        self.skip_blanks()
        negated = False
        while self.peek() == "!":
            negated = True
            self.position += 1
            self.skip_blanks()
        if self.at_end():
            raise self.error("missing command")
        command = self.take()
        op = Op(command, start, end, negated, zero=zero)
        if command in NO_ADDRESS and start is not None:
            raise self.error(f"{command} doesn't want any addresses")
        if command in ONE_ADDRESS and command in "qQ" and end is not None:
            raise self.error("command only uses one address")
        if command == "{":
            self.blocks.append(len(self.ops))
            self.ops.append(op)
            return
        if command == "s":
            op.edit = Instruction(kind=InstructionKind.SUBSTITUTE)
            op.text = self.parse_s(op.edit)
        elif command == "y":
            op.edit = Instruction(kind=InstructionKind.TRANSLITERATE)
            self.parse_transliterate(op.edit)
            source, target = self._y_strings
            op.edit.translation = {}
            for before, after in zip(source, target, strict=True):
                op.edit.translation.setdefault(ord(before), after)  # `y/aa/xy/`: a is x, as GNU's
            self._end_of_command()
        elif command in "aic":
            op.text = self.parse_gnu_text()
        elif command == ":":
            op.text = self.read_label()
            if not op.text:
                raise self.error("\":\" lacks a label")
        elif command in LABELLED:
            op.text = self.read_label()
        elif command in FILE_ARGUMENT:
            op.text = self.read_filename()
            if not op.text:
                raise self.error("missing filename in r/R/w/W commands")
        elif command in "qQlL":
            self.skip_blanks()
            op.number = self.read_number() if self.peek().isdigit() else (0 if command in "qQ" else -1)
            self._end_of_command()
        elif command in NO_ARGUMENT:
            self._end_of_command()
        elif command == "e":
            raise self.error("e: this shell runs no command from a sed script")
        elif command == "v":
            self.read_label()
        elif command == "#":
            raise self.error("comments don't accept any addresses")
        else:
            raise self.error(f"unknown command: `{command}'")
        self.ops.append(op)

    def read_label(self) -> str:
        self.skip_blanks()
        begin = self.position
        while not self.at_end() and self.peek() not in ";\n}" and self.peek() not in " \t":
            self.position += 1
        label = self.text[begin:self.position]
        self._end_of_command()
        return label

    def read_filename(self) -> str:
        self.skip_blanks()
        begin = self.position
        while not self.at_end() and self.peek() != "\n":
            self.position += 1
        return self.text[begin:self.position]

    def parse_gnu_text(self) -> str:
        """What `a`, `i` or `c` writes, its newline included: `a text` (blanks before it skipped),
        `a\\` then lines (each ending in `\\` goes on; blanks kept), `a\\text`; `a` or `a\\` then
        an empty line writes an empty line, `a\\` at the script's end nothing. Escapes (`\\t`,
        `\\x41`...) are GNU's, but for the first character of `a\\text`."""
        self.skip_blanks()
        classic = self.peek() == "\\"
        same_line = classic
        if classic:
            self.position += 1
            if self.peek() == "\n":
                self.position += 1
                same_line = False
            elif self.at_end():
                return ""
        elif self.peek() == "\n":  # `a` and a newline: GNU's empty line
            self.position += 1
            return "\n"
        pieces: list[str] = []
        while not self.at_end():
            character = self.take()
            if character == "\\":
                if self.at_end():
                    break
                escaped = self.take()
                if escaped == "\n":
                    pieces.append("\n")
                elif same_line and not pieces:
                    pieces.append(escaped)  # `a\\tfoo`: the backslash was the form's, `t` is text
                else:
                    decoded, self.position = _text_escape(self.text, self.position, escaped)
                    pieces.append(decoded)
            elif character == "\n":
                break
            else:
                pieces.append(character)
        if not pieces and not classic:
            raise self.error("expected \\ after `a', `c' or `i'")
        return "".join(pieces) + "\n"

    def read_transliteration_part(self, delimiter: str) -> str:
        part = super().read_transliteration_part(delimiter)
        self._y_strings = (*self._y_strings[-1:], part)
        return part

    def parse_s(self, edit: Instruction) -> str:
        """`s/re/new/flags`: the library's flags and GNU's `w FILE`; the file, if any."""
        delimiter = self.take()
        if not delimiter or delimiter in "\n\\":
            raise self.error("unterminated `s' command")
        pattern = self.read_delimited(delimiter, "unterminated `s' command", for_regex=True)
        replacement = self.read_delimited(delimiter, "unterminated `s' command", for_regex=False)
        flags, target = 0, ""
        while self.peek() and self.peek() not in ";\n}#" and self.peek() not in " \t":
            flag = self.take()
            if flag.isdigit():
                self.position -= 1
                edit.occurrence = self.read_number()
                if edit.occurrence == 0:
                    raise self.error("number option to `s' command may not be zero")
            elif flag == "g":
                edit.replace_all = True
            elif flag == "p":
                edit.print_after = True
            elif flag in "iI":
                flags |= re.IGNORECASE
            elif flag in "mM":
                flags |= re.MULTILINE
            elif flag == "w":
                target = self.read_filename()
                if not target:
                    raise self.error("missing filename in r/R/w/W commands")
                break
            elif flag == "e":
                raise self.error("e: this shell runs no command from a sed script")
            else:
                raise self.error("unknown option to `s'")
        if not target:
            self._end_of_command()
        edit.regex = self.compile_regex(pattern, flags)
        try:
            edit.replacement = library_sed.compile_replacement(
                replacement, edit.regex.groups if edit.regex is not None else 9)
        except SedScriptError as error:
            raise self.error(str(error)) from error
        return target


_QUANTIFIERS = {"*": (0, None), "+": (1, None), "?": (0, 1)}


def _gnu_python_regex(pattern: str, multiline: bool) -> str:
    """The library's Python pattern made GNU's: outside brackets, an anchor `$` matches only at
    the end (`\\Z`) unless `M`, and quantifiers one after another make one (`*?` → `*`, `+?` →
    `*`, `??` → `?`: Python read them lazy, or possessive)."""
    out: list[str] = []
    position, in_bracket = 0, False
    while position < len(pattern):
        character = pattern[position]
        if character == "\\":
            out.append(pattern[position:position + 2])
            position += 2
            continue
        if in_bracket:
            if character == "]" and not (out and out[-1] in ("[", "[^")):
                in_bracket = False
            out.append(character)
        elif character == "[":
            in_bracket = True
            out.append("[^" if pattern[position + 1:position + 2] == "^" else "[")
            position += 1 if pattern[position + 1:position + 2] == "^" else 0
        elif character == "$" and not multiline:
            out.append(r"\Z")
        elif character in _QUANTIFIERS and out and out[-1] in _QUANTIFIERS:
            low = _QUANTIFIERS[out[-1]][0] * _QUANTIFIERS[character][0]
            high = _QUANTIFIERS[out[-1]][1] is not None and _QUANTIFIERS[character][1] is not None
            out[-1] = "*" if low == 0 and not high else "+" if not high else "?"
        else:
            out.append(character)
        position += 1
    return "".join(out)


_TEXT_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f", "v": "\v", "a": "\a"}


def _text_escape(text: str, position: int, escaped: str) -> tuple[str, int]:
    """A backslash escape in `a i c` text (`escaped` the character after it, `position` past
    that): GNU's control characters, `\\xHH \\oNNN \\dNNN \\cX`, else the character."""
    numeric = SED_NUMERIC.get(escaped)
    digits = numeric[1].match(text, position) if numeric is not None else None
    if numeric is not None and digits is not None:
        return chr(int(digits.group(), numeric[0])), digits.end()
    if escaped == "c" and position < len(text):
        return chr(ord(text[position].upper()) ^ 0x40), position + 1
    return _TEXT_ESCAPES.get(escaped, escaped), position


def compile_script(expressions: list[str], extended: bool) -> tuple[list[Op], bool]:
    """The flattened script of every expression, and whether it starts `#n` (as `-n`)."""
    ops: list[Op] = []
    blocks: list[int] = []
    joined = library_sed.join_continued_expressions(expressions)
    quiet = bool(joined) and (joined[0] == "#n" or joined[0].startswith("#n\n"))
    for offset, expression in enumerate(joined):
        ScriptParser(expression, offset + 1, extended, ops, blocks).parse_all()
    if blocks:
        raise SedScriptError(f"-e expression #{len(joined)}, char 0: unmatched `{{'")
    labels: dict[str, int] = {}
    for index, op in enumerate(ops):
        if op.command == ":":
            if op.text in labels:
                raise SedScriptError(f"-e expression #1, char 0: duplicate label `{op.text}'")  # GNU's words
            labels[op.text] = index
    for op in ops:
        if op.command in LABELLED:
            if op.text and op.text not in labels:
                raise MissingLabel(f"can't find label for jump to `{op.text}'")
            op.number = labels[op.text] if op.text else len(ops)
    return ops, quiet


# -- input -----------------------------------------------------------------------------------------
class Input:
    """The records of some sources, one read ahead (for `$`), split at the separator (newline, or
    NUL with -z). A source that cannot be read is reported, and the status becomes 2."""

    def __init__(self, invocation: Invocation, paths: list[str], separator: str) -> None:
        self.invocation, self.paths, self.separator = invocation, list(paths), separator
        self.filename = "-"
        self._chunks: Optional[AsyncIterator[str]] = None
        self._source = ""
        self._partial: list[str] = []  # the record being read, in pieces
        self._ready: deque[tuple[str, str]] = deque()  # records read, with their files
        self._ahead: Optional[tuple[str, str]] = None  # (record with its separator, its file)
        self._primed = False

    async def _next_record(self) -> Optional[tuple[str, str]]:
        separator = self.separator
        while not self._ready:
            if self._chunks is None:
                if not self.paths:
                    return None
                self._source = self.paths.pop(0)
                self._chunks = self._open(self._source)
                continue
            try:
                chunk = await self._chunks.__anext__()
            except StopAsyncIteration:
                await close_iterator(self._chunks)
                self._chunks = None
                if self._partial:  # a last record without its separator
                    self._ready.append(("".join(self._partial), self._source))
                    self._partial.clear()
                continue
            await asyncio.sleep(0)  # a file's chunks come without waiting: `timeout` may stop sed here
            *whole, rest = chunk.split(separator)
            for record in whole:
                self._partial.append(record + separator)
                self._ready.append(("".join(self._partial), self._source))
                self._partial.clear()
            if rest:
                self._partial.append(rest)  # a long line is joined once, when it ends
        return self._ready.popleft()

    def _open(self, path_text: str) -> Optional[AsyncIterator[str]]:
        invocation = self.invocation
        if path_text == STDIN:
            return stdin_chunks(invocation.stdin, invocation.stdin_kind)
        if path_text == NULL_DEVICE_PATH:
            return None
        path = invocation.state.resolve_path(path_text)
        if path.is_dir():
            invocation.state.write_error(f"sed: read error on {path_text}: Is a directory\n")
            invocation.exit_status.code = EXIT_BAD_INPUT
            return None
        if not path.exists():
            invocation.state.write_error(f"sed: can't read {path_text}: No such file or directory\n")
            invocation.exit_status.code = EXIT_BAD_INPUT
            return None
        return as_async_iterator(file_chunks(path))

    def buffered(self) -> bool:
        """Whether the record after the next is already read (reading on will not wait)."""
        return bool(self._ready)

    async def read(self) -> Optional[str]:
        """The next record (with its separator if it had one), or None at the end."""
        if not self._primed:
            self._ahead, self._primed = await self._next_record(), True
        if self._ahead is None:
            return None
        record, self.filename = self._ahead
        self._ahead = await self._next_record()
        return record

    @property
    def ended(self) -> bool:
        """Whether the record read last was the last (`$`): known once a record was read."""
        return self._ahead is None

    async def close(self) -> None:
        if self._chunks is not None:
            await close_iterator(self._chunks)
            self._chunks = None


# -- running ---------------------------------------------------------------------------------------
@dataclass
class Output:
    """Where text goes: the command's stdout or a `w` file; GNU's missing-newline rule (a last
    line that had none is printed without it, and gets one if anything follows)."""

    write: Callable[[str], None]
    missing: bool = False

    def emit(self, text: str, separator: str) -> None:
        if self.missing:
            self.write(separator)
            self.missing = False
        self.write(text)

    def line(self, text: str, newline: bool, separator: str) -> None:
        self.emit(text + (separator if newline else ""), separator)
        self.missing = not newline


@dataclass
class Runner:
    ops: list[Op]
    quiet: bool
    invocation: Invocation
    separator: str = "\n"
    wrap: int = DEFAULT_WRAP
    pieces: list[str] = field(default_factory=list)
    hold: str = ""
    hold_newline: bool = True  # GNU keeps whether each space ends its line: x g h G H carry it
    line_number: int = 0
    exit_code: int = 0
    last_regex: Any = None
    replaced: bool = False  # an `s` replaced since the last line was read or `t`/`T` ran
    files: dict[str, Output] = field(default_factory=dict)
    readers: dict[str, Iterator[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.stdout = Output(self.pieces.append)
        self.out = self.stdout  # -i: each file's new text
        for op in self.ops:  # GNU opens (and empties) every `w` file before the first line
            target = op.text if op.command in "wW" or (op.command == "s" and op.text) else ""
            if target and target not in self.files:
                self.files[target] = self._writer(target)

    def _writer(self, target: str) -> Output:
        if target == "/dev/stdout":
            return self.stdout
        if target == "/dev/stderr":
            return Output(self.invocation.state.write_error)
        path = self.invocation.state.resolve_path(target)
        try:
            rawbytes.write_file(path, "", append=False)
        except OSError as error:
            raise SedRuntimeError(f"couldn't open file {target}: {error.strerror}") from error
        return Output(rawbytes.file_appender(path))

    def reset(self) -> None:
        """A new file under -s or -i: line numbers and ranges start again (the hold space stays)."""
        self.line_number = 0
        for op in self.ops:
            op.active, op.last_line = False, 0

    async def cycles(self, source: Input) -> AsyncIterator[bool]:
        """Run the script over `source`: yield after each cycle (its output in `self.pieces`),
        True once `q` or `Q` ended the run."""
        space: Optional[str] = None
        newline = True
        appends: list[tuple[str, str]] = []
        while True:
            if space is None:
                record = await source.read()
                if record is None:
                    return
                space, newline = self._split(record)
                self.line_number += 1
                self.replaced = False
            state = _Cycle(space, newline, appends=appends)
            ended = await self._execute(state, source)
            if state.autoprint and not self.quiet:
                self.out.line(state.space, state.newline, self.separator)
            if ended and self.out.missing:  # q: GNU ends the output with its newline
                self.out.emit("", self.separator)
            appends = []
            if state.restart:  # D: the next cycle starts with what is left; its queue waits for its end
                space, newline, appends = state.space, state.newline, list(state.appends)
            else:
                self._flush_appends(state)
                space, newline = None, True
            yield ended
            if ended:
                return

    def _split(self, record: str) -> tuple[str, bool]:
        if record.endswith(self.separator):
            return record[:-1], True
        return record, False

    def _flush_appends(self, state: _Cycle) -> None:
        for kind, value in state.appends:
            if kind == "text":
                self.out.emit(value, self.separator)
            elif kind == "file":
                self._append_file(value)
            else:
                self.out.emit(value, self.separator)  # R's line, with its separator if it had one
        state.appends.clear()

    def _append_file(self, target: str) -> None:
        if target == "/dev/stdin" or not target:
            return
        path = self.invocation.state.resolve_path(target)
        if _endless(path) or not path.is_file():
            return  # GNU: a file that cannot be read is silently ignored
        try:
            text = "".join(file_chunks(path))
        except OSError:
            return
        if text:
            self.out.emit(text, self.separator)  # raw, as GNU copies it (no newline added after)

    def _read_line_of(self, target: str) -> Optional[str]:
        reader = self.readers.get(target)
        if reader is None:  # a file that cannot be read gives nothing, as `r`'s (a device without end too)
            path = self.invocation.state.resolve_path(target)
            readable = path.is_file() and not _endless(path)
            reader = iter(_file_records(path, self.separator)) if readable else iter(())
            self.readers[target] = reader
        return next(reader, None)

    async def _execute(self, state: _Cycle, source: Input) -> bool:  # noqa: C901 - one branch a command
        """Run the script over the cycle's pattern space; whether sed is to quit."""
        ops, pc, steps = self.ops, 0, 0
        while pc < len(ops):
            op = ops[pc]
            pc += 1
            steps += 1
            if not steps % YIELD_EVERY:
                await asyncio.sleep(0)  # a loop of branches (`:a;ba`): `timeout` may stop sed here
            if op.command in "}:" or not self._selects(op, state, source):
                if op.command == "{":
                    pc = op.number + 1
                continue
            command = op.command
            if command == "{":
                continue
            if command == "s":
                if self._substitute(op, state):
                    self.replaced = True
                    if op.edit is not None and op.edit.print_after:
                        self.out.line(state.space, state.newline, self.separator)
                    if op.text:
                        self.files[op.text].line(state.space, state.newline, self.separator)
            elif command == "y":
                assert op.edit is not None
                state.space = state.space.translate(op.edit.translation)
            elif command == "p":
                self.out.line(state.space, state.newline, self.separator)
            elif command == "P":
                self._first_line(self.out, state)
            elif command == "d":
                state.autoprint = False
                return False
            elif command == "D":
                state.autoprint = False
                if self.separator in state.space:
                    state.space = state.space.split(self.separator, 1)[1]
                    state.restart = True
                return False
            elif command in "nN":
                if source.ended:
                    return False  # GNU: no next line ends the script here, printing the pattern space (not -n)
                if command == "n" and not self.quiet:
                    self.out.line(state.space, state.newline, self.separator)
                self._flush_appends(state)
                record = await source.read()
                assert record is not None
                text, state.newline = self._split(record)
                self.line_number += 1
                self.replaced = False
                state.space = text if command == "n" else state.space + self.separator + text
            elif command == "g":
                state.space, state.newline = self.hold, self.hold_newline
            elif command == "G":
                state.space, state.newline = state.space + self.separator + self.hold, self.hold_newline
            elif command == "h":
                self.hold, self.hold_newline = state.space, state.newline
            elif command == "H":
                self.hold, self.hold_newline = self.hold + self.separator + state.space, state.newline
            elif command == "x":
                state.space, self.hold = self.hold, state.space
                state.newline, self.hold_newline = self.hold_newline, state.newline
            elif command == "z":
                state.space = ""
            elif command in LABELLED:
                if command == "b" or self.replaced == (command == "t"):
                    pc = op.number
                if command != "b":
                    self.replaced = False
            elif command == "=":
                self.out.emit(f"{self.line_number}{self.separator}", self.separator)
            elif command == "l":
                self.out.emit(self._unambiguous(state.space, op.number), self.separator)
            elif command == "F":
                self.out.emit(f"{source.filename}\n", self.separator)
            elif command == "a":
                state.appends.append(("text", op.text))
            elif command == "i":
                self.out.emit(op.text, self.separator)
            elif command == "c":
                if op.end is None or op.negated or not op.active:
                    self.out.emit(op.text, self.separator)
                state.autoprint = False
                return False
            elif command == "r":
                state.appends.append(("file", op.text))
            elif command == "R":
                line = self._read_line_of(op.text)
                if line is not None:
                    state.appends.append(("line", line))
            elif command == "w":
                self.files[op.text].line(state.space, state.newline, self.separator)
            elif command == "W":
                self._first_line(self.files[op.text], state)
            elif command == "q":
                self.exit_code = op.number & 0xFF
                return True
            elif command == "Q":
                self.exit_code = op.number & 0xFF
                state.autoprint = False
                state.appends.clear()
                return True
        return False

    def _first_line(self, output: Output, state: _Cycle) -> None:
        """`P`, `W`: the pattern space up to its first newline (whole, as `p`, if it has none)."""
        first, cut, _ = state.space.partition(self.separator)
        output.line(first, bool(cut) or state.newline, self.separator)

    def _regex(self, regex: Any) -> Any:
        if regex is None:
            if self.last_regex is None:
                raise SedRuntimeError("no previous regular expression")
            return self.last_regex
        self.last_regex = regex
        return regex

    def _substitute(self, op: Op, state: _Cycle) -> bool:
        edit = op.edit
        assert edit is not None and edit.replacement is not None
        regex = self._regex(edit.regex)
        if edit.occurrence == 1 and not edit.replace_all:  # the common `s/re/new/`: one search
            match = regex.search(state.space)
            if match is None:
                return False
            try:
                state.space = state.space[:match.start()] + edit.replacement(match) + state.space[match.end():]
            except IndexError:
                raise SedRuntimeError("invalid reference on `s' command's RHS") from None
            return True
        pieces: list[str] = []
        last_end, previous_end, seen, replaced = 0, -1, 0, False
        space = state.space
        for match in regex.finditer(space):
            if match.start() == match.end() == previous_end:
                continue
            previous_end = match.end()
            seen += 1
            if seen < edit.occurrence:
                continue
            pieces.append(space[last_end:match.start()])
            try:
                pieces.append(edit.replacement(match))
            except IndexError:
                raise SedRuntimeError("invalid reference on `s' command's RHS") from None
            last_end, replaced = match.end(), True
            if not edit.replace_all:
                break
        if replaced:
            pieces.append(space[last_end:])
            state.space = "".join(pieces)
        return replaced

    def _matches(self, address: Address, state: _Cycle, source: Input) -> bool:
        kind = address.kind
        if kind == AddressKind.LINE:
            return self.line_number == address.number
        if kind == AddressKind.LAST:
            return source.ended
        if kind == AddressKind.REGEX:
            return self._regex(address.regex).search(state.space) is not None
        if kind == AddressKind.STEP:
            if address.step <= 0:
                return self.line_number == address.number
            return self.line_number >= address.number and (self.line_number - address.number) % address.step == 0
        return False

    def _selects(self, op: Op, state: _Cycle, source: Input) -> bool:
        """Whether `op` applies to this line (after `!`), moving its range as GNU's
        match_address_p does."""
        start, end = op.start, op.end
        if start is None:
            return not op.negated
        if end is None:
            return self._matches(start, state, source) != op.negated
        line = self.line_number
        if op.zero and line == 1 and op.last_line == 0:
            op.active, op.last_line = True, -1  # 0,/re/: open before the first line, so line 1 may end it
        if op.active:
            if end.kind == AddressKind.LINE:
                op.active = line < end.number
                return (line <= end.number) != op.negated
            if end.kind == AddressKind.RELATIVE:
                op.active = line < op.last_line
                return (line <= op.last_line) != op.negated
            if end.kind == AddressKind.MULTIPLE:
                op.active = end.number > 0 and line % end.number != 0
                return not op.negated
            if end.kind == AddressKind.LAST:
                op.active = not source.ended
                return not op.negated
            if self._regex(end.regex).search(state.space) is not None:
                op.active = False
            return not op.negated
        if op.zero or not self._matches(start, state, source):
            return op.negated
        if end.kind == AddressKind.LINE:
            op.active = line < end.number
        elif end.kind == AddressKind.RELATIVE:
            op.last_line = line + end.number
            op.active = end.number > 0
        elif end.kind == AddressKind.MULTIPLE:
            op.active = end.number > 0  # (the line that opens it is not checked: `2,~2` is 2 3 4)
        elif end.kind == AddressKind.LAST:
            op.active = not source.ended
        else:
            op.active = True
        return not op.negated

    def _unambiguous(self, space: str, width: int) -> str:
        """`l`: escapes for what is not printable ASCII, `\\` before each line break, `$` at the end."""
        width = self.wrap if width < 0 else width
        escaped: list[str] = []
        for character in space:
            if character in _L_ESCAPES:
                escaped.append(_L_ESCAPES[character])
            elif " " <= character <= "~":
                escaped.append(character)
            else:
                escaped.extend(f"\\{byte:03o}" for byte in rawbytes.to_bytes(character))
        lines: list[str] = []
        current = ""
        for piece in escaped:
            if width > 0 and len(current) + len(piece) > width - 1:
                lines.append(current + "\\\n")
                current = ""
            current += piece
        lines.append(current + "$" + self.separator)
        return "".join(lines)


def _endless(path: Any) -> bool:
    """Whether `path` is a device without end (/dev/zero...), however it was named."""
    return posixpath.normpath(str(path)) in ENDLESS_DEVICES


@dataclass
class _Cycle:
    space: str
    newline: bool
    autoprint: bool = True
    restart: bool = False  # `D`: the next cycle starts with what is left, reading nothing
    appends: list[tuple[str, str]] = field(default_factory=list)


def _file_records(path: Any, separator: str) -> Iterator[str]:
    """`R`'s file, a record at a time (without its separator)."""
    pending: list[str] = []
    for chunk in file_chunks(path):
        *records, rest = chunk.split(separator)
        for record in records:
            yield "".join(pending) + record + separator
            pending.clear()
        pending.append(rest)
    if any(pending):
        yield "".join(pending)


# -- the command -----------------------------------------------------------------------------------
class SedCommand(Command):
    """GNU sed: `-n -e -f -E/-r -s -i[SUFFIX] -z -u -l N --posix --debug --sandbox`."""

    name = "sed"
    summary = "stream editor for filtering and transforming text"
    input_kinds = STREAM_IN
    output_kinds = STREAM_OUT

    async def run(self, invocation: Invocation) -> CommandResult:
        from bash_purepython.command.arguments import CommandArgumentParser, parse_command_arguments

        parser = CommandArgumentParser("sed", "stream editor for filtering and transforming text")
        parser.add_argument("-n", "--quiet", "--silent", action="store_true")
        parser.add_argument("-e", "--expression", dest="scripts", action="append", default=[], type=_expression)
        parser.add_argument("-f", "--file", dest="scripts", action="append", type=_script_file)
        parser.add_argument("-E", "-r", "--regexp-extended", action="store_true")
        parser.add_argument("-s", "--separate", action="store_true")
        parser.add_argument("-z", "--null-data", action="store_true")
        parser.add_argument("-u", "--unbuffered", action="store_true")
        parser.add_argument("-l", "--line-length", type=int, default=DEFAULT_WRAP)
        parser.add_argument("--posix", action="store_true")
        parser.add_argument("--debug", action="store_true")
        parser.add_argument("--sandbox", action="store_true")
        parser.add_argument("--follow-symlinks", action="store_true")
        parser.add_argument("script_and_paths", nargs="*")
        given = [_STDIN_OPERAND if argument == STDIN else argument for argument in invocation.arguments]
        arguments, suffix = library_sed.extract_in_place(given)  # (it dropped a lone `-`)
        parsed = parse_command_arguments(parser, arguments, invocation.state)
        if isinstance(parsed, int):
            return await _fail(invocation, "", parsed)
        expressions: list[str] = []
        paths = [STDIN if path == _STDIN_OPERAND else path for path in parsed.script_and_paths]
        for kind, value in parsed.scripts:  # -e and -f in the order given
            if kind == "e":
                expressions.append(value)
                continue
            path = invocation.state.resolve_path(value)
            if not path.is_file():
                return await _fail(invocation, f"sed: couldn't open file {value}: No such file or directory\n",
                                   EXIT_IO)
            text = "".join(file_chunks(path)).replace("\r\n", "\n")
            expressions.append(text[:-1] if text.endswith("\n") else text)
        if not expressions:
            if not paths:
                return await _fail(invocation, USAGE, EXIT_BAD_SCRIPT)
            expressions.append(paths.pop(0))
        try:
            ops, quiet = compile_script(expressions, parsed.regexp_extended)
            if parsed.sandbox and any(op.command in "rRwW" or (op.command == "s" and op.text) for op in ops):
                raise SedScriptError("-e expression #1, char 0: e/r/w commands disabled in sandbox mode")
            runner = Runner(ops, parsed.quiet or quiet, invocation, "\0" if parsed.null_data else "\n",
                            parsed.line_length)
        except (SedScriptError, SedRuntimeError) as error:
            bad_script = isinstance(error, SedScriptError) and not isinstance(error, MissingLabel)
            return await _fail(invocation, f"sed: {error}\n", EXIT_BAD_SCRIPT if bad_script else EXIT_IO)
        if suffix is not None:
            await close_stdin(invocation.stdin)
            if not paths:
                return await _fail(invocation, "sed: no input files\n", EXIT_BAD_INPUT)
            code = await _in_place(runner, invocation, paths, suffix)
            return CommandResult(stdout=as_async_iterator(["".join(runner.pieces)] if runner.pieces else []),
                                 exit_code=code)
        paths = paths or [STDIN]
        groups = [[path] for path in paths] if parsed.separate else [paths]
        return CommandResult(stdout=_stream(runner, invocation, groups), exit_code=0)


_STDIN_OPERAND = "\0-"  # a lone `-` while the library's option reader runs


def _expression(text: str) -> tuple[str, str]:
    return ("e", text)


def _script_file(text: str) -> tuple[str, str]:
    return ("f", text)


async def _fail(invocation: Invocation, message: str, code: int = EXIT_BAD_SCRIPT) -> CommandResult:
    if message:
        invocation.state.write_error(message)
    await close_stdin(invocation.stdin)
    return CommandResult(stdout=as_async_iterator(()), exit_code=code)


async def _stream(runner: Runner, invocation: Invocation, groups: list[list[str]]) -> AsyncIterator[str]:
    """The output as each cycle ends (a pipeline's next stage gets it at once)."""
    try:
        for group in groups:
            runner.reset()
            source = Input(invocation, group, runner.separator)
            ended = False
            try:
                async for ended in runner.cycles(source):
                    if ended:
                        break
                    if runner.pieces and (not source.buffered() or len(runner.pieces) >= BATCH):
                        text = "".join(runner.pieces)  # before sed may wait for input: a pipe's reader
                        runner.pieces.clear()  # gets each line as it is made (`tail -f | sed`)
                        yield text
                if runner.pieces:
                    yield "".join(runner.pieces)
                    runner.pieces.clear()
            finally:
                await source.close()
            if ended:
                break
    except SedRuntimeError as error:
        if runner.pieces:
            yield "".join(runner.pieces)
        invocation.state.write_error(f"sed: -e expression #1, char 0: {error}\n")
        invocation.exit_status.code = EXIT_BAD_SCRIPT
        return
    except MemoryError:  # a line that never ends (`sed p /dev/zero`), a hold space grown past the guest's memory
        runner.pieces.clear()
        invocation.state.write_error("sed: couldn't re-allocate memory\n")
        invocation.exit_status.code = EXIT_IO
        return
    finally:
        await close_stdin(invocation.stdin)
    if runner.exit_code:
        invocation.exit_status.code = runner.exit_code


async def _in_place(runner: Runner, invocation: Invocation, paths: list[str], suffix: str) -> int:
    """-i: each file's output replaces it (after a copy named with the suffix, `*` standing for
    the file's name); `$` and line numbers are each file's."""
    code = 0
    for path_text in paths:
        path = invocation.state.resolve_path(path_text)
        if path_text == STDIN or (path.exists() and not path.is_file()):
            invocation.state.write_error(f"sed: couldn't edit {path_text}: not a regular file\n")
            code = EXIT_IO
            continue
        if not path.exists():
            invocation.state.write_error(f"sed: can't read {path_text}: No such file or directory\n")
            code = EXIT_BAD_INPUT
            continue
        edited: list[str] = []
        runner.out = Output(edited.append)
        runner.reset()
        source = Input(invocation, [path_text], runner.separator)
        ended = False
        try:
            async for ended in runner.cycles(source):
                if ended:
                    break
        except SedRuntimeError as error:
            invocation.state.write_error(f"sed: -e expression #1, char 0: {error}\n")
            return EXIT_BAD_SCRIPT
        except MemoryError:
            invocation.state.write_error("sed: couldn't re-allocate memory\n")
            return EXIT_IO
        finally:
            await source.close()
        if suffix:
            backup = suffix.replace("*", path.name) if "*" in suffix else path.name + suffix
            target = path.parent / backup if "/" not in backup else invocation.state.resolve_path(backup)
            rawbytes.write_file(target, "".join(file_chunks(path)), append=False)
        rawbytes.write_file(path, "".join(edited), append=False)
        if ended:
            return runner.exit_code or code
    return code
