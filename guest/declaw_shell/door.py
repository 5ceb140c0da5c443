"""The guest's end of the door to the host, and the standard input that comes through it.

A WASI guest's stdin can only be a file fixed at start, so a command's live stdin (E2B's
`send_stdin`, a PTY's keystrokes) arrives as msgpack requests over `_host.call` instead: the
host answers `{"op": "stdin"}` with the bytes it has (blocking until some arrive; b"" is end of
input). `Terminal` adds what a tty's line discipline would do for a PTY: echo, line editing,
^C, ^D.
"""

from __future__ import annotations

import _pyio
import io

import _host
import msgpack

from . import deadlines

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from typing_extensions import Buffer  # collections.abc.Buffer from 3.12 (the guest's Python has it)

ETX, EOT, BS, DEL, CR, LF = 0x03, 0x04, 0x08, 0x7F, 0x0D, 0x0A


def call(op: str, **args: Any) -> Any:
    """One request to the host; its answer."""
    return msgpack.unpackb(_host.call(msgpack.packb({"op": op, **args}, use_bin_type=True)),
                           raw=False)


class DoorStdin(io.RawIOBase):
    """Raw bytes of the command's stdin, read from the host as they arrive. Under a `timeout`
    (deadlines.py) the wait is bounded: the host answers None when nothing came in `wait`
    seconds, and the read ends the timed command once its deadline passes."""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Buffer) -> int:
        buffer = memoryview(buffer)
        while True:
            left = deadlines.remaining()
            if left is None:
                data = call("stdin", n=len(buffer))
            else:
                if left <= 0:
                    raise deadlines.DeadlineReached()
                data = call("stdin", n=len(buffer), wait=min(left, 1.0))
                if data is None:
                    continue
            buffer[: len(data)] = data
            return len(data)


class LiveStdin(_pyio.TextIOWrapper):
    """The command's stdin as text, as the shell reads it (`cat`, `read`, ...; `python3` reads
    through `program_stdin`).

    The pure-Python TextIOWrapper rather than the C one because the shell must also take
    *whatever has arrived* without waiting for a newline or a full buffer (`cat` echoing
    `send_stdin("Hello")` at once), and only this implementation lets us reach the text it has
    already decoded (`read_chunk`); reading around it would lose that text. Its `read(n)`,
    `readline()` and iteration behave as the C class's do. Lines end at "\\n" and nothing is
    translated, as CPython's own stdin on POSIX (`newline="\\n"`), so `cat` passes CRLF through;
    broken UTF-8 becomes replacement characters."""

    def read_chunk(self) -> str:
        """The text available now: what is decoded already, else one read from the host
        (waiting for it); '' at end of input."""
        self._checkReadable()
        if self._decoder is None:
            self._get_decoder()
        text = self._get_decoded_chars()
        while not text:
            eof = not self._read_chunk()
            text = self._get_decoded_chars()
            if eof:
                break
        return text

    def take_pending(self) -> bytes:
        """The input this reader holds but has not handed out (decoded text, bytes the decoder
        keeps), as bytes; it then holds none. For a program's own reader (`program_stdin`)."""
        if self._decoder is None:
            return b""
        data = self._get_decoded_chars().encode("utf-8", "surrogatepass")
        held, _ = self._decoder.getstate()
        self._decoder.reset()
        return data + held


class ProgramStdin(io.RawIOBase):
    """The command's stdin as one `python3` stage reads it: first what the shell's reader holds,
    then the door. Like a process on Linux, the stage buffers on its own (CPython's C reader,
    fast line by line), and what it read but did not use is gone when it ends."""

    def __init__(self, live: LiveStdin) -> None:
        self.live = live
        self.pending: bytes | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Buffer) -> int:
        buffer = memoryview(buffer)
        if self.pending is None:
            self.pending = self.live.take_pending()
        if self.pending:
            count = min(len(buffer), len(self.pending))
            buffer[:count] = self.pending[:count]
            self.pending = self.pending[count:]
            return count
        data = self.live.buffer.read1(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def program_stdin(stdin: Any) -> Any:
    """A program's own text reader over the shell's stdin (a PTY's terminal is shared as is);
    bytes that are not UTF-8 read as CPython's stdin on Linux reads them (`surrogateescape`)."""
    if not isinstance(stdin, LiveStdin):
        return stdin
    return io.TextIOWrapper(io.BufferedReader(ProgramStdin(stdin)), encoding="utf-8",
                            errors="surrogateescape", newline="\n")


def door_stdin_text() -> LiveStdin:
    return LiveStdin(io.BufferedReader(DoorStdin()), encoding="utf-8", errors="replace", newline="\n")


class Interrupted(Exception):
    """^C typed at the terminal while a line was being read."""


class Terminal(io.TextIOBase):
    """A PTY's cooked mode: keystrokes come from the host raw; this echoes them and hands out
    whole lines, with backspace, ^U, ^C (raises Interrupted) and ^D (end of input on an empty
    line). Output newlines become CRLF on the host side, as a tty's `onlcr` would."""

    def __init__(self, write: Callable[[str], object]) -> None:
        self.write_out = write
        self.pending = bytearray()  # raw keystrokes not yet used
        self.lines: list[str] = []  # complete lines not yet read
        self.eof = False

    def readable(self) -> bool:
        return True

    def size(self) -> tuple[int, int]:
        rows, cols = call("winsize")
        return int(rows), int(cols)

    def _key(self) -> int | None:
        while not self.pending:
            data = call("stdin", n=4096)
            if not data:
                return None
            self.pending += data
        key = self.pending[0]
        del self.pending[0]
        return key

    def read_line(self) -> str:
        """The next line typed (with its newline), '' at end of input."""
        if self.lines:
            return self.lines.pop(0)
        if self.eof:
            return ""
        line = bytearray()
        while True:
            key = self._key()
            if key is None:
                self.eof = True
                return line.decode("utf-8", "replace")
            if key in (CR, LF):
                self.write_out("\n")
                line += b"\n"
                return line.decode("utf-8", "replace")
            if key == ETX:
                self.write_out("^C\n")
                raise Interrupted()
            if key == EOT:
                if not line:
                    return ""
                continue
            if key in (BS, DEL):
                self._erase_char(line)
                continue
            if key == 0x15:  # ^U: kill the line
                self.write_out("\b \b" * len(line.decode("utf-8", "replace")))
                line.clear()
                continue
            if key == 0x1B:  # escape sequences (arrows...): not supported, swallowed
                self._swallow_escape()
                continue
            line.append(key)
            if key < 0x80:
                self.write_out(chr(key))
            elif _complete_utf8(line):  # echo a multi-byte character once it is whole
                self.write_out(_last_char(line))

    def _erase_char(self, line: bytearray) -> None:
        """Backspace: drop one whole UTF-8 character."""
        if line:
            del line[-1]
            while line and (line[-1] & 0xC0) == 0x80:
                del line[-1]
            self.write_out("\b \b")

    def _swallow_escape(self) -> None:
        key = self._key()
        if key == ord("["):
            while True:
                key = self._key()
                if key is None or 0x40 <= key <= 0x7E:
                    return

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]  # typeshed's TextIOBase keeps IOBase's bytes
        return self.read_line()

    def read(self, size: int | None = -1) -> str:
        chunks: list[str] = []
        while True:
            line = self.read_line()
            if not line:
                return "".join(chunks)
            chunks.append(line)

    def __iter__(self) -> Terminal:  # type: ignore[override]  # typeshed's TextIOBase keeps IOBase's bytes
        return self

    def __next__(self) -> str:  # type: ignore[override]  # typeshed's TextIOBase keeps IOBase's bytes
        line = self.read_line()
        if not line:
            raise StopIteration
        return line

    def isatty(self) -> bool:
        return True


def _complete_utf8(data: bytearray) -> bool:
    """Whether `data` ends with a complete multi-byte UTF-8 character."""
    i = len(data) - 1
    while i >= 0 and (data[i] & 0xC0) == 0x80:
        i -= 1
    if i < 0:
        return False
    lead = data[i]
    need = 2 if lead >= 0xC0 and lead < 0xE0 else 3 if lead < 0xF0 else 4
    return len(data) - i == need


def _last_char(data: bytearray) -> str:
    i = len(data) - 1
    while i >= 0 and (data[i] & 0xC0) == 0x80:
        i -= 1
    return bytes(data[i:]).decode("utf-8", "replace")
