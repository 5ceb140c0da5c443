"""`hexdump`/`hd` (util-linux 2.38), `strings` (GNU binutils 2.40) and `split` (GNU coreutils 9.1):
what agents use to look inside a binary file and to cut a big one up; the guest had none.

- hexdump: the default two-byte hex, `-C` (and `hd`), `-b -c -d -o -x` (several in one run print
  each block in each, in order), `-n LENGTH`, `-s OFFSET` (decimal, 0x hex, 0 octal; b k m
  suffixes), `-v`; identical 16-byte lines squeezed to `*`; files read as one stream. Not here:
  `-e`/`-f` format strings.
- strings: runs of at least 4 (`-n N`) printable ASCII characters or tabs, `-t d|o|x`, `-o`, `-f`,
  `-a` (the whole file is always read, as binutils' default). Not here: `-e` encodings other
  than 7-bit, `-w`, `-s`.
- split: `-l N`, `-b SIZE`, `-C SIZE`, `-n N | l/N`, `-d`/`-x` (and `--numeric-suffixes=FROM`),
  `-a N`, `--additional-suffix`, `-e`, `--verbose`; suffixes widen as GNU's do when `-a` is not
  given (xaa..xyz, then xzaaa...). Not here: `-n r/N`, `-n K/N`, `--filter`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from bash_purepython.command.command import Command, CommandResult, InputKind, OutputKind

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    Invocation = Any  # bash_purepython's CommandInvocation (untyped)

TEXT_IN = frozenset({InputKind.TEXT, InputKind.ARGUMENTS})
TEXT_OUT = frozenset({OutputKind.TEXT})
SIZE = re.compile(r"^(\d+)([a-zA-Z]*)$")
SIZE_UNITS = {"": 1, "b": 512, "K": 1024, "KiB": 1024, "KB": 1000, "M": 1 << 20, "MiB": 1 << 20, "MB": 10 ** 6,
              "G": 1 << 30, "GiB": 1 << 30, "GB": 10 ** 9, "T": 1 << 40, "TB": 10 ** 12}


def _stdin_bytes(invocation: Invocation) -> bytes:
    text = invocation.stdin if invocation.stdin_kind == InputKind.TEXT and invocation.stdin else ""
    return str(text).encode("utf-8", "surrogateescape")


def _read(invocation: Invocation, name: str) -> bytes:
    if name == "-":
        return _stdin_bytes(invocation)
    with open(invocation.state.resolve_path(name), "rb") as handle:
        return handle.read()


def _error_text(exc: OSError) -> str:
    return exc.strerror or str(exc)


# -- hexdump -----------------------------------------------------------------------------------------
CHAR_NAMES = {0: "\\0", 7: "\\a", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t", 11: "\\v"}


def _unit(fmt: str, block: bytes, index: int) -> str:
    """One unit of a line in format FMT (the units of a 16-byte line; index counts bytes)."""
    if fmt == "b":
        return " %03o" % block[index]
    if fmt == "c":
        byte = block[index]
        shown = CHAR_NAMES.get(byte) or (chr(byte) if 32 <= byte < 127 else "%03o" % byte)
        return shown.rjust(4)
    word = block[index] | (block[index + 1] << 8 if index + 1 < len(block) else 0)
    return {"x": "    %04x", "d": "   %05u", "o": "  %06o", "default": " %04x"}[fmt] % word


UNIT_BYTES = {"b": 1, "c": 1, "x": 2, "d": 2, "o": 2, "default": 2}
UNIT_WIDTH = {"b": 4, "c": 4, "x": 8, "d": 8, "o": 8, "default": 5}


def _line(fmt: str, offset: int, block: bytes) -> str:
    if fmt == "C":
        hexes = ["%02x" % byte for byte in block]
        left, right = " ".join(hexes[:8]), " ".join(hexes[8:])
        area = ("%08x  " % offset + left.ljust(23) + "  " + right.ljust(23)) if block else "%08x" % offset
        shown = "".join(chr(byte) if 32 <= byte < 127 else "." for byte in block)
        return area.ljust(60) + "|" + shown + "|\n"
    step = UNIT_BYTES[fmt]
    units = "".join(_unit(fmt, block, index) for index in range(0, len(block), step))
    line = "%07x" % offset + units
    full = 7 + UNIT_WIDTH[fmt] * (16 // step)
    return (line.ljust(full) if len(block) < 16 else line) + "\n"


def _hexdump_size(text: str) -> int:
    """hexdump's numbers: decimal, 0x hex or 0 octal, times b (512), k or m."""
    match = re.fullmatch(r"(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9]\d*)([bkmg]?)", text)
    if match is None:
        raise ValueError(text)
    digits = match.group(1)
    if digits[:2].lower() == "0x":
        number = int(digits, 16)
    else:
        number = int(digits, 8 if digits.startswith("0") else 10)
    return number * {"": 1, "b": 512, "k": 1024, "m": 1 << 20, "g": 1 << 30}[match.group(2)]


def hexdump(args: list[str], read: Callable[[str], bytes], error: Callable[[str], None],  # noqa: C901 - options
            canonical: bool = False) -> tuple[str, int]:
    formats: list[str] = ["C"] if canonical else []
    length: int | None = None
    skip = 0
    verbose = False
    files: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg == "--":
            files += args[index:]
            break
        if not arg.startswith("-") or arg == "-":
            files.append(arg)
            continue
        if arg in ("--canonical",):
            formats.append("C")
            continue
        if arg in ("--no-squeezing",):
            verbose = True
            continue
        letters = arg[1:]
        while letters:
            letter, letters = letters[0], letters[1:]
            if letter in "bcdoxC":
                formats.append(letter)
            elif letter == "v":
                verbose = True
            elif letter in "nse":
                value = letters or (args[index] if index < len(args) else None)
                if not letters:
                    index += 1
                letters = ""
                if value is None:
                    error(f"hexdump: option requires an argument -- '{letter}'\n"
                          "Try 'hexdump --help' for more information.\n")
                    return "", 1
                if letter == "e":
                    error("hexdump: -e format strings are not supported here\n")
                    return "", 1
                try:
                    number = _hexdump_size(value)
                except ValueError:
                    error(f"hexdump: failed to parse {'length' if letter == 'n' else 'offset'}: '{value}': "
                          "Invalid argument\n")
                    return "", 1
                if letter == "n":
                    length = number
                else:
                    skip = number
            else:
                error(f"hexdump: invalid option -- '{letter}'\nTry 'hexdump --help' for more information.\n")
                return "", 1
    formats = formats or ["default"]
    data = b""
    failed = 0
    for name in files or ["-"]:
        try:
            data += read(name)
        except OSError as exc:
            error(f"hexdump: {name}: {_error_text(exc)}\n")
            failed += 1
    if files and failed == len(files):
        error("hexdump: all input file arguments failed\n")
        return "", 1
    total = len(data)
    data = data[skip:] if length is None else data[skip:skip + length]
    if not data:  # nothing at all, or an offset past the end: the end's offset alone
        return (("%08x\n" if formats[-1] == "C" else "%07x\n") % min(skip, total) if total else ""), \
            1 if failed else 0
    out: list[str] = []
    previous: bytes | None = None
    squeezing = False
    for start in range(0, len(data), 16):
        block = data[start:start + 16]
        if not verbose and block == previous and len(block) == 16:
            if not squeezing:
                out.append("*\n")
                squeezing = True
            continue
        squeezing = False
        previous = block
        for fmt in formats:
            out.append(_line(fmt, skip + start, block))
    end = skip + len(data)
    out.append(("%08x\n" if formats[-1] == "C" else "%07x\n") % end)
    return "".join(out), 1 if failed else 0


class HexdumpCommand(Command):
    """hexdump [-bcCdovx] [-n LENGTH] [-s OFFSET] [FILE...] (module docstring)."""

    name = "hexdump"
    input_kinds = TEXT_IN
    output_kinds = TEXT_OUT
    summary = "display file contents in hexadecimal, decimal, octal, or ascii"
    canonical = False

    def run(self, invocation: Invocation) -> CommandResult:
        text, status = hexdump(list(invocation.arguments), lambda name: _read(invocation, name),
                               invocation.state.write_error, self.canonical)
        return CommandResult(stdout=text, exit_code=status)


class HdCommand(HexdumpCommand):
    """hd: hexdump -C."""

    name = "hd"
    canonical = True


# -- strings -----------------------------------------------------------------------------------------
PRINTABLE = re.compile(rb"[\t\x20-\x7e]+")
STRINGS_USAGE = """Usage: strings [option(s)] [file(s)]
 Display printable strings in [file(s)] (stdin by default)
 The options are:
  -a - --all                Scan the entire file, not just the data section [default]
  -d --data                 Only scan the data sections in the file
  -f --print-file-name      Print the name of the file before each string
  -n <number>               Locate & print any sequence of at least <number>
    --bytes=<number>         displayable characters.  (The default is 4).
  -t --radix={o,d,x}        Print the location of the string in base 8, 10 or 16
  -o                        An alias for --radix=o
  -h --help                 Display this information
  -v -V --version           Print the program's version number
"""


def strings(args: list[str], read: Callable[[str], bytes],  # noqa: C901 - the option grammar, one loop
            error: Callable[[str], None]) -> tuple[str, int]:
    minimum = 4
    radix: str | None = None
    with_names = False
    files: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg == "--":
            files += args[index:]
            break
        if not arg.startswith("-") or arg == "-":
            files.append(arg)
            continue
        if arg.startswith("--bytes="):
            arg = "-n" + arg[len("--bytes="):]
        elif arg.startswith("--radix="):
            arg = "-t" + arg[len("--radix="):]
        elif arg == "--print-file-name":
            arg = "-f"
        elif arg in ("--all", "--data"):
            continue
        letters = arg[1:]
        if letters.isdigit():
            letters = "n" + letters
        while letters:
            letter, letters = letters[0], letters[1:]
            if letter == "a":
                continue
            if letter == "f":
                with_names = True
            elif letter == "o":
                radix = "o"
            elif letter in "nt":
                value = letters or (args[index] if index < len(args) else "")
                if not letters:
                    index += 1
                letters = ""
                if letter == "n":
                    if not value.isdigit() or int(value) < 1:
                        error(f"strings: invalid minimum string length {value}\n")
                        return "", 1
                    minimum = int(value)
                elif value in ("d", "o", "x"):
                    radix = value
                else:
                    error(STRINGS_USAGE)
                    return "", 1
            else:
                error(f"strings: invalid option -- '{letter}'\n" + STRINGS_USAGE)
                return "", 1
    out: list[str] = []
    status = 0
    for name in files or ["-"]:
        try:
            data = read(name)
        except OSError:
            error(f"strings: '{name}': No such file\n")
            status = 1
            continue
        prefix = f"{name}: " if with_names else ""
        for match in PRINTABLE.finditer(data):
            if match.end() - match.start() < minimum:
                continue
            where = "" if radix is None else ("%7" + radix + " ") % match.start()
            out.append(prefix + where + match.group().decode("ascii") + "\n")
    return "".join(out), status


class StringsCommand(Command):
    """strings [-a] [-f] [-n MIN] [-t d|o|x] [-o] [FILE...] (module docstring)."""

    name = "strings"
    input_kinds = TEXT_IN
    output_kinds = TEXT_OUT
    summary = "print the sequences of printable characters in files"

    def run(self, invocation: Invocation) -> CommandResult:
        text, status = strings(list(invocation.arguments), lambda name: _read(invocation, name),
                               invocation.state.write_error)
        return CommandResult(stdout=text, exit_code=status)


# -- split -------------------------------------------------------------------------------------------
ALPHA = "abcdefghijklmnopqrstuvwxyz"
DIGITS = "0123456789"
HEX = "0123456789abcdef"


class Usage(ValueError):
    """A bad option: its message, then GNU's "Try 'split --help'" line."""


def _split_size(text: str, what: str, q: Callable[[str], str]) -> int:
    match = SIZE.match(text)
    unit = match.group(2) if match else None
    if match is None or unit not in SIZE_UNITS:
        raise ValueError(f"invalid number of {what}: {q(text)}")
    value = int(match.group(1)) * SIZE_UNITS[unit or ""]
    if value < 1:
        raise ValueError(f"invalid number of {what}: {q(text)}: Numerical result out of range")
    return value


def _names(prefix: str, alphabet: str, length: int | None, start: int, extra: str,
           count: int | None) -> Iterator[str]:
    """The output files' names, as GNU split makes them: a fixed-length suffix (-a, or wide
    enough for -n's count), or one that widens when its first character is the alphabet's last."""
    if length is not None or count is not None:
        width = length if length is not None else 2
        if count is not None and length is None:
            while len(alphabet) ** width < count + start:
                width += 1
        number = start
        while True:
            if number >= len(alphabet) ** width:
                raise ValueError("output file suffixes exhausted")
            digits = []
            value = number
            for _ in range(width):
                value, digit = divmod(value, len(alphabet))
                digits.append(alphabet[digit])
            yield prefix + "".join(reversed(digits)) + extra
            number += 1
    middle, width, number = "", 2, start
    while True:
        digits = []
        value = number
        for _ in range(width):
            value, digit = divmod(value, len(alphabet))
            digits.append(alphabet[digit])
        suffix = "".join(reversed(digits))
        if suffix[0] == alphabet[-1]:  # widen: the last character moves into the prefix
            middle += alphabet[-1]
            width += 1
            number = 0
            continue
        yield prefix + middle + suffix + extra
        number += 1


def split(args: list[str], read: Callable[[str], bytes], write: Callable[[str, bytes], None],  # noqa: C901
          out: Callable[[str], None], error: Callable[[str], None], utf8: bool = True) -> int:
    def q(text: str) -> str:  # GNU's quotes in a UTF-8 locale, and in C's
        return f"\u2018{text}\u2019" if utf8 else f"'{text}'"

    lines: int | None = None
    size: int | None = None
    line_bytes: int | None = None
    chunks: tuple[str, int] | None = None
    alphabet = ALPHA
    start = 0
    length: int | None = None
    extra = ""
    elide = False
    verbose = False
    operands: list[str] = []
    index = 0

    def value_of(arg: str, letter: str) -> str:
        nonlocal index
        rest = arg[arg.index(letter) + 1:]
        if rest:
            return rest
        if index >= len(args):
            raise Usage(f"option requires an argument -- '{letter}'")
        index += 1
        return args[index - 1]

    try:
        while index < len(args):
            arg = args[index]
            index += 1
            if arg == "--":
                operands += args[index:]
                break
            if not arg.startswith("-") or arg == "-":
                operands.append(arg)
                continue
            if arg.startswith("--"):
                name, _, value = arg.partition("=")
                if name == "--additional-suffix":
                    extra = value
                elif name == "--numeric-suffixes":
                    alphabet, start = DIGITS, int(value or 0)
                elif name == "--hex-suffixes":
                    alphabet, start = HEX, int(value or "0", 16)
                elif name == "--elide-empty-files":
                    elide = True
                elif name == "--verbose":
                    verbose = True
                elif name in ("--lines", "--bytes", "--line-bytes", "--number", "--suffix-length"):
                    arg = {"--lines": "-l", "--bytes": "-b", "--line-bytes": "-C", "--number": "-n",
                           "--suffix-length": "-a"}[name] + value
                else:
                    raise Usage(f"unrecognized option '{arg}'")
                if not arg.startswith("-") or arg.startswith("--"):
                    continue
            for position, letter in enumerate(arg[1:]):
                if letter == "d":
                    alphabet = DIGITS
                elif letter == "x":
                    alphabet = HEX
                elif letter == "e":
                    elide = True
                elif letter in "lbCna":
                    value = value_of(arg[position:], letter)
                    if letter == "l":
                        if not value.isdigit() or int(value) < 1:
                            raise ValueError(f"invalid number of lines: {q(value)}"
                                             + (": Numerical result out of range" if value.isdigit() else ""))
                        lines = int(value)
                    elif letter == "b":
                        size = _split_size(value, "bytes", q)
                    elif letter == "C":
                        line_bytes = _split_size(value, "bytes", q)
                    elif letter == "a":
                        if not value.isdigit():
                            raise ValueError(f"invalid suffix length: {q(value)}")
                        length = int(value)
                    else:
                        mode, _, count = value.rpartition("/")
                        if mode not in ("", "l") or not count.isdigit() or int(count) < 1:
                            raise ValueError(f"invalid number of chunks: {q(value)}")
                        chunks = (mode, int(count))
                    break
                else:
                    raise Usage(f"invalid option -- '{letter}'")
    except ValueError as exc:
        more = "Try 'split --help' for more information.\n" if isinstance(exc, Usage) else ""
        error(f"split: {exc}\n{more}")
        return 1
    if len(operands) > 2:
        error(f"split: extra operand {q(operands[2])}\nTry 'split --help' for more information.\n")
        return 1
    source = operands[0] if operands else "-"
    prefix = operands[1] if len(operands) > 1 else "x"
    if chunks is not None and source == "-":
        error("split: -: cannot determine file size\n")
        return 1
    try:
        data = read(source)
    except OSError as exc:
        error(f"split: cannot open '{source}' for reading: {_error_text(exc)}\n")
        return 1
    pieces = _pieces(data, lines, size, line_bytes, chunks)
    if elide:
        pieces = [piece for piece in pieces if piece]
    names = _names(prefix, alphabet, length, start, extra, chunks[1] if chunks else None)
    try:
        for piece in pieces:
            name = next(names)
            if verbose:
                out(f"creating file '{name}'\n")
            write(name, piece)
    except ValueError as exc:
        error(f"split: {exc}\n")
        return 1
    except OSError as exc:
        error(f"split: {_error_text(exc)}\n")
        return 1
    return 0


def _pieces(data: bytes, lines: int | None, size: int | None, line_bytes: int | None,
            chunks: tuple[str, int] | None) -> list[bytes]:
    if chunks is not None:
        mode, count = chunks
        every = len(data) // count  # GNU's chunk size; the last chunk takes the rest
        bounds = [every * k for k in range(count)] + [len(data)]
        if mode == "l":  # each chunk ends at the first newline at or after its byte bound
            ends = []
            position = 0
            for bound in bounds[1:]:
                end = max(bound, position)
                if end < len(data):
                    newline = data.find(b"\n", end - 1 if end else 0)
                    end = len(data) if newline < 0 else newline + 1
                ends.append(min(end, len(data)) if bound != len(data) else len(data))
                position = ends[-1]
            starts = [0, *ends[:-1]]
            return [data[a:b] for a, b in zip(starts, ends, strict=True)]
        return [data[bounds[k]:bounds[k + 1]] for k in range(count)]
    if size is not None:
        return [data[k:k + size] for k in range(0, len(data), size)]
    rows = data.splitlines(keepends=True)
    if line_bytes is not None:
        pieces: list[bytes] = []
        current = b""
        for row in rows:
            while len(row) > line_bytes:  # a line longer than SIZE is cut at SIZE
                if current:
                    pieces.append(current)
                    current = b""
                pieces.append(row[:line_bytes])
                row = row[line_bytes:]
            if len(current) + len(row) > line_bytes:
                pieces.append(current)
                current = b""
            current += row
        if current:
            pieces.append(current)
        return pieces
    every = lines or 1000
    return [b"".join(rows[k:k + every]) for k in range(0, len(rows), every)]


class SplitCommand(Command):
    """split [OPTION]... [FILE [PREFIX]] (module docstring)."""

    name = "split"
    input_kinds = TEXT_IN
    output_kinds = TEXT_OUT
    summary = "split a file into pieces"

    def run(self, invocation: Invocation) -> CommandResult:
        state = invocation.state
        printed: list[str] = []

        def write(name: str, data: bytes) -> None:
            with open(state.resolve_path(name), "wb") as handle:
                handle.write(data)

        environ = dict(state.exported_variables())
        locale = environ.get("LC_ALL") or environ.get("LC_MESSAGES") or environ.get("LANG") or ""
        status = split(list(invocation.arguments), lambda name: _read(invocation, name), write, printed.append,
                       state.write_error, utf8="utf-8" in locale.lower() or "utf8" in locale.lower())
        return CommandResult(stdout="".join(printed), exit_code=status)

