"""`dd`, which agents run to make test files (`dd if=/dev/zero of=big.bin bs=1M count=10`), to take
random bytes (`dd if=/dev/urandom bs=16 count=1 | base64`) and to cut or patch a binary file in
place (`skip=`, `seek=`, `conv=notrunc`); the guest had none ('command not found').

GNU coreutils 9.1's operands: `if=`, `of=`, `bs=`, `ibs=`, `obs=`, `count=`, `skip=`, `seek=`,
`conv=` (notrunc, noerror, sync, fsync, fdatasync, excl, nocreat, ucase, lcase, swab),
`iflag=`/`oflag=` (count_bytes, skip_bytes, seek_bytes, fullblock, append; the others are accepted
and change nothing here), `status=` (none, noxfer, progress: the last prints what the default
does), with GNU's number suffixes (c, w, b, kB, K, KiB, MB, M, MiB... and `NxM`). Its records
counts, its last line and its messages are GNU's. Input is read a block at a time, never whole:
an endless `if=/dev/zero` with a `count=` ends, and without one it fills the disk quota, as it
fills a disk on Linux. A read is always a whole block unless the input ends (GNU's `fullblock`):
a pipe's input arrives here as the shell hands it on, so GNU's short reads from pipes, which
vary with timing, do not happen.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, BinaryIO

from bash_purepython.command.command import Command, CommandResult, InputKind, OutputKind
from bash_purepython.streams import close_iterator

from . import rawbytes
from .coreutils import stdin_chunks

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    Invocation = Any  # bash_purepython's CommandInvocation (untyped)

STREAM_IN = frozenset({InputKind.STREAM_TEXT, InputKind.TEXT, InputKind.ARGUMENTS})
STREAM_OUT = frozenset({OutputKind.STREAM_TEXT})
SUFFIXES = {"c": 1, "w": 2, "b": 512, "kB": 1000, "K": 1024, "KiB": 1024, "k": 1024}
for _power, _letter in enumerate("MGTPEZY", 2):
    SUFFIXES.update({_letter: 1024 ** _power, _letter + "iB": 1024 ** _power, _letter + "B": 1000 ** _power})
CONVERSIONS = frozenset({"notrunc", "noerror", "sync", "fsync", "fdatasync", "excl", "nocreat", "ucase", "lcase",
                         "swab", "sparse"})
FLAGS = frozenset({"count_bytes", "skip_bytes", "seek_bytes", "fullblock", "append", "direct", "dsync", "sync",
                   "nocache", "nonblock", "noatime", "noctty", "nofollow", "binary", "text", "directory"})
MAX_BLOCK = 1 << 30  # GNU refuses larger blocks than it can allocate; the guest's memory is smaller
HELP = """Usage: dd [OPERAND]...
  or:  dd OPTION
Copy a file, converting and formatting according to the operands.

  bs=BYTES        read and write up to BYTES bytes at a time (default: 512);
                  overrides ibs and obs
  conv=CONVS      convert the file as per the comma separated symbol list
  count=N         copy only N input blocks
  ibs=BYTES       read up to BYTES bytes at a time (default: 512)
  if=FILE         read from FILE instead of stdin
  iflag=FLAGS     read as per the comma separated symbol list
  obs=BYTES       write BYTES bytes at a time (default: 512)
  of=FILE         write to FILE instead of stdout
  oflag=FLAGS     write as per the comma separated symbol list
  seek=N          skip N obs-sized output blocks
  skip=N          skip N ibs-sized input blocks
  status=LEVEL    The LEVEL of information to print to stderr;
                  'none' suppresses everything but error messages,
                  'noxfer' suppresses the final transfer statistics,
                  'progress' shows periodic transfer statistics

N and BYTES may be followed by the following multiplicative suffixes:
c=1, w=2, b=512, kB=1000, K=1024, MB=1000*1000, M=1024*1024, xM=M,
GB=1000*1000*1000, G=1024*1024*1024, and so on for T, P, E, Z, Y.
"""


class DdError(Exception):
    """A message for stderr (without "dd: "), and whether GNU adds its --help hint."""

    def __init__(self, message: str, hint: bool = False) -> None:
        super().__init__(message)
        self.hint = hint


def number(text: str) -> int:
    """GNU dd's BYTES / N: digits with a suffix, or products of them (`2x512`, `1Mx4`)."""
    total = 1
    for part in text.split("x"):
        digits = part.rstrip("".join(sorted({c for s in SUFFIXES for c in s})))
        suffix = part[len(digits):]
        if not digits.isdigit() or not digits.isascii() or (suffix and suffix not in SUFFIXES):
            raise DdError(f"invalid number: \u2018{text}\u2019")
        total *= int(digits) * (SUFFIXES[suffix] if suffix else 1)
    return total


def human(amount: float, base: int) -> str:
    """coreutils' human_readable with autoscale, rounding to nearest and a space before the unit:
    `512 B`, `4.1 kB`, `4.0 KiB`, `105 MB`."""
    units = ["B", "kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"] if base == 1000 else \
        ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"]
    scaled, unit = float(amount), 0
    while scaled >= base and unit < len(units) - 1:
        scaled /= base
        unit += 1
    if unit == 0:
        return "%d B" % round(scaled)
    if scaled < 10 and round(scaled, 1) < 10:
        return "%.1f %s" % (scaled, units[unit])
    if round(scaled) >= base and unit < len(units) - 1:
        return "%.1f %s" % (round(scaled) / base, units[unit + 1])
    return "%d %s" % (round(scaled), units[unit])


def summary(full_in: int, part_in: int, full_out: int, part_out: int, copied: int, seconds: float,
            transfer: bool) -> str:
    """What GNU dd prints on stderr at its end (status=noxfer: the records only)."""
    lines = f"{full_in}+{part_in} records in\n{full_out}+{part_out} records out\n"
    if not transfer:
        return lines
    si, iec = human(copied, 1000), human(copied, 1024)
    if si.endswith(" B"):
        amount = f"{copied} byte{'s' if copied != 1 else ''}"
    elif iec.endswith(" B"):
        amount = f"{copied} bytes ({si})"
    else:
        amount = f"{copied} bytes ({si}, {iec})"
    rate = human(copied / seconds, 1000) + "/s" if seconds > 0 else "Infinity B/s"
    return lines + f"{amount} copied, {seconds:.6g} s, {rate}\n"


class Options:
    """The operands of one dd, parsed."""

    def __init__(self, arguments: list[str]) -> None:
        self.source: str | None = None
        self.target: str | None = None
        self.ibs = self.obs = 512
        self.bs: int | None = None
        self.count: int | None = None
        self.skip = self.seek = 0
        self.conv: set[str] = set()
        self.iflag: set[str] = set()
        self.oflag: set[str] = set()
        self.status = ""
        for argument in arguments:
            self._operand(argument)
        for conflict in (("excl", "nocreat"), ("ucase", "lcase")):
            if set(conflict) <= self.conv:
                raise DdError(f"cannot combine {conflict[0]} and {conflict[1]}")
        if self.bs is not None:
            self.ibs = self.obs = self.bs

    def _operand(self, argument: str) -> None:  # noqa: C901 - one branch per operand
        name, equals, value = argument.partition("=")
        if not equals:
            raise DdError(f"unrecognized operand \u2018{argument}\u2019", hint=True)
        if name in ("if", "of"):
            setattr(self, "source" if name == "if" else "target", value)
        elif name in ("bs", "ibs", "obs"):
            size = number(value)
            if size < 1 or size > MAX_BLOCK:
                raise DdError(f"invalid number: \u2018{value}\u2019" if size < 1 else
                              f"memory exhausted by input buffer of size {size} bytes ({human(size, 1024)})")
            setattr(self, name, size)
        elif name in ("count", "skip", "seek", "iseek", "oseek"):
            setattr(self, {"iseek": "skip", "oseek": "seek"}.get(name, name), number(value))
        elif name in ("conv", "iflag", "oflag"):
            symbols = {s for s in value.split(",") if s}
            known = CONVERSIONS if name == "conv" else FLAGS
            kind = {"conv": "conversion", "iflag": "input flag", "oflag": "output flag"}[name]
            for symbol in sorted(symbols - known):
                raise DdError(f"invalid {kind}: \u2018{symbol}\u2019", hint=True)
            getattr(self, name).update(symbols)
        elif name == "status":
            if value not in ("none", "noxfer", "progress"):
                raise DdError(f"invalid status level: \u2018{value}\u2019", hint=True)
            self.status = value
        else:
            raise DdError(f"unrecognized operand \u2018{argument}\u2019", hint=True)


class _Stdin:
    """The command's stdin as bytes, read a block at a time (the shell's text back to its bytes)."""

    def __init__(self, invocation: Invocation) -> None:
        self._chunks: AsyncIterator[str] = stdin_chunks(invocation.stdin, invocation.stdin_kind)
        self._stdin = invocation.stdin if invocation.stdin_kind == InputKind.STREAM_TEXT else None
        self._buffer = bytearray()
        self._ended = False

    async def read(self, size: int) -> bytes:
        while len(self._buffer) < size and not self._ended:
            try:
                chunk = await self._chunks.__anext__()
            except StopAsyncIteration:
                self._ended = True
                break
            self._buffer += rawbytes.to_bytes(chunk)
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    async def close(self) -> None:
        if self._stdin is not None:
            await close_iterator(self._stdin)  # stop an endless producer (`yes | dd count=1`)


class _File:
    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle

    async def read(self, size: int) -> bytes:
        return self.handle.read(size)

    async def close(self) -> None:
        self.handle.close()


def _convert(block: bytes, conv: set[str]) -> bytes:
    if "swab" in conv:
        swapped = bytearray(block)
        swapped[0:len(block) - 1:2], swapped[1::2] = block[1::2], block[0:len(block) - 1:2]
        block = bytes(swapped)
    if "ucase" in conv:
        block = block.upper()
    elif "lcase" in conv:
        block = block.lower()
    return block


def _open_target(path: str, options: Options) -> BinaryIO:
    append = "append" in options.oflag
    if "excl" in options.conv:
        return open(path, "xb")
    exists = os.path.exists(path)
    if "nocreat" in options.conv and not exists:
        raise FileNotFoundError(2, "No such file or directory", path)
    if append:
        return open(path, "ab")
    handle = open(path, "r+b" if exists else "w+b")
    offset = options.seek * (1 if "seek_bytes" in options.oflag else options.obs)
    if "notrunc" not in options.conv and handle.seekable():
        handle.truncate(offset)
    if offset and handle.seekable():
        handle.seek(offset)
    return handle


async def copy(options: Options, source: Any, write: Any) -> AsyncIterator[tuple[int, int, int, int, int]]:
    """Copy as dd does, a block at a time; after each block written: (full and partial blocks in,
    full and partial blocks out, bytes out) so far."""
    full_in = part_in = full_out = part_out = copied = 0
    if options.skip:
        to_skip = options.skip * (1 if "skip_bytes" in options.iflag else options.ibs)
        handle = getattr(source, "handle", None)
        if handle is not None and handle.seekable():
            handle.seek(to_skip)
        else:
            while to_skip > 0:
                skipped = await source.read(min(to_skip, 1 << 16))
                if not skipped:
                    break
                to_skip -= len(skipped)
    left = options.count * (1 if "count_bytes" in options.iflag else options.ibs) \
        if options.count is not None else None
    pending = bytearray()
    reblock = options.bs is None
    while left is None or left > 0:
        block = await source.read(options.ibs if left is None else min(options.ibs, left))
        if not block:
            break
        if left is not None:
            left -= len(block)
        if len(block) == options.ibs:
            full_in += 1
        else:
            part_in += 1
            if "sync" in options.conv:
                block += bytes(options.ibs - len(block))
        block = _convert(block, options.conv)
        if not reblock:
            write(block)
            copied += len(block)
            full_out, part_out = (full_out + 1, part_out) if len(block) == options.obs else (full_out, part_out + 1)
        else:
            pending += block
            while len(pending) >= options.obs:
                write(bytes(pending[:options.obs]))
                del pending[:options.obs]
                copied += options.obs
                full_out += 1
        yield full_in, part_in, full_out, part_out, copied
    if pending:
        write(bytes(pending))
        copied += len(pending)
        part_out += 1
    yield full_in, part_in, full_out, part_out, copied


class DdCommand(Command):
    """dd [OPERAND]... (module docstring)."""

    name = "dd"
    input_kinds = STREAM_IN
    output_kinds = STREAM_OUT
    summary = "convert and copy a file"

    def run(self, invocation: Invocation) -> CommandResult:
        state = invocation.state
        arguments = list(invocation.arguments)
        if arguments[:1] == ["--help"]:
            return CommandResult(stdout=HELP, exit_code=0)
        if arguments[:1] == ["--version"]:
            return CommandResult(stdout="dd (GNU coreutils) 9.1\n", exit_code=0)
        try:
            options = Options([a for a in arguments if a != "--"])
        except DdError as error:
            state.write_error(f"dd: {error}\n" + ("Try 'dd --help' for more information.\n" if error.hint else ""))
            return CommandResult(stdout="", exit_code=1)
        return CommandResult(stdout=self.stream(invocation, options), exit_code=0)

    @staticmethod
    async def stream(invocation: Invocation, options: Options) -> AsyncIterator[str]:
        """The copy; what goes to stdout as it is written (so that `dd ... 2>&1` has the data
        before the records, as GNU's has), the records on stderr at the end."""
        state = invocation.state
        source: Any = None
        target: BinaryIO | None = None
        out: list[str] = []
        started = time.monotonic()
        counts = (0, 0, 0, 0, 0)
        copying = False  # the files are open: the records are reported, as GNU's are, even after an error
        try:
            try:
                source = _Stdin(invocation) if options.source is None else \
                    _File(open(str(state.resolve_path(options.source)), "rb"))
            except OSError as exc:
                raise DdError(f"failed to open \u2018{options.source}\u2019: {exc.strerror or exc}") from None
            if options.target is not None:
                try:
                    target = _open_target(str(state.resolve_path(options.target)), options)
                except OSError as exc:
                    raise DdError(f"failed to open \u2018{options.target}\u2019: {exc.strerror or exc}") from None
            write = target.write if target is not None else (lambda data: out.append(rawbytes.from_bytes(data)))
            copying = True
            try:
                async for progress in copy(options, source, write):
                    counts = progress
                    if out:
                        yield "".join(out)
                        out.clear()
            except MemoryError:
                raise DdError(f"memory exhausted by input buffer of size {options.ibs} bytes "
                              f"({human(options.ibs, 1024)})") from None
            except OSError as exc:
                name = options.target if options.target is not None else "standard output"
                raise DdError(f"error writing \u2018{name}\u2019: {exc.strerror or exc}") from None
            if target is not None and ({"fsync", "fdatasync"} & options.conv):
                target.flush()
                os.fsync(target.fileno())
        except DdError as error:
            state.write_error(f"dd: {error}\n")
            invocation.exit_status.code = 1
        finally:
            if source is not None:
                await source.close()
            if target is not None:
                target.close()
        if out:
            yield "".join(out)
        if options.status != "none" and copying:
            state.write_error(summary(*counts, time.monotonic() - started, options.status != "noxfer"))
