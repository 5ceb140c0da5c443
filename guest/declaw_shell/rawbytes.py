"""Bytes that are not UTF-8 text, carried through a shell whose data is text.

bash's `printf '\\377'` and `echo -e '\\xff'` write the byte 0xFF, and agents use that to write
binary files (`printf '\\x89PNG\\r\\n' > f`). The library's shell carries `str` everywhere, so
such a byte travels as the lone surrogate U+DCFF (Python's `surrogateescape`, the way CPython
itself passes undecodable bytes of argv and the environment), and wherever the shell turns its
text into bytes the surrogate becomes the byte again: the command's stdout and stderr
(`write`), files written by redirections (`write_file`), `tee`, `sed -i` and pipes into the
utilities that read bytes (`od`, `base64`, `wc -c`...), which encode with the library's
TEXT_ENCODING, set here to CODEC. A command's output in bytes (`gzip`, `base64 -d`) becomes the
shell's text the same way when it goes to a text command or a redirection: the library decoded it
with errors="replace", so `gzip < f > f.gz` wrote a file of U+FFFD where its binary bytes were;
CODEC's decoder keeps them as surrogates whatever errors it is asked for. Files a text command
opens are still read with broken UTF-8 replaced. Valid UTF-8 written byte by byte
(`printf '\\303\\251'`) is the character.
"""

from __future__ import annotations

import codecs
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    import os
    import re as _re
    from collections.abc import Callable
    from typing import Any

    from typing_extensions import Buffer  # collections.abc.Buffer from 3.12 (the guest's Python has it)

CODEC = "declaw-utf-8"  # UTF-8; encoding writes lone surrogates as the bytes they stand for
_SURROGATE = re.compile("[\ud800-\udfff]")


def from_bytes(data: bytes | bytearray) -> str:
    """The shell's text for `data` (bytes from an escape): UTF-8 where it is, the rest escaped."""
    return bytes(data).decode("utf-8", "surrogateescape")


def to_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def write(stream: Any, text: str) -> None:
    """Write the shell's text to a standard stream (a lone surrogate as its byte) and flush."""
    if text.isascii() or getattr(stream, "errors", None) == "surrogateescape" \
            or not _SURROGATE.search(text):
        stream.write(text)
    else:
        buffer = getattr(stream, "buffer", None)
        if buffer is None:
            stream.write(to_bytes(text).decode("utf-8", "replace"))
        else:
            stream.flush()
            buffer.write(to_bytes(text))
    stream.flush()


def write_file(path: str | os.PathLike[str], text: str, append: bool) -> None:
    with open(path, "ab" if append else "wb") as handle:
        handle.write(to_bytes(text))


# -- the codec -------------------------------------------------------------------------------------
def _encode(text: str, errors: str = "strict") -> tuple[bytes, int]:
    return codecs.utf_8_encode(text, "surrogateescape")


def _decode(data: Buffer, errors: str = "strict") -> tuple[str, int]:
    """bytes.decode(CODEC, any errors): the library asks for "replace", which lost binary output."""
    return codecs.utf_8_decode(data, "surrogateescape", True)


class _IncrementalEncoder(codecs.IncrementalEncoder):
    def encode(self, text: str, final: bool = False) -> bytes:
        return codecs.utf_8_encode(text, "surrogateescape")[0]


class _IncrementalDecoder(codecs.BufferedIncrementalDecoder):
    _buffer_decode = codecs.utf_8_decode  # type: ignore[assignment]  # as CPython's encodings/utf_8.py


class _StreamWriter(codecs.StreamWriter):
    encode = staticmethod(_encode)  # type: ignore[assignment]  # as CPython's encodings/utf_8.py


class _StreamReader(codecs.StreamReader):
    decode = staticmethod(codecs.utf_8_decode)  # type: ignore[assignment]  # as CPython's encodings/utf_8.py


def _search(name: str) -> codecs.CodecInfo | None:
    if name.replace("-", "_") != CODEC.replace("-", "_"):
        return None
    return codecs.CodecInfo(_encode, _decode, incrementalencoder=_IncrementalEncoder,
                            incrementaldecoder=_IncrementalDecoder, streamwriter=_StreamWriter,
                            streamreader=_StreamReader, name=CODEC)


def install() -> None:
    """Register CODEC, make it the library's TEXT_ENCODING (in every module that took it), and
    let `printf`'s escapes and the file appender (`2>>`) write bytes."""
    import sys

    from bash_purepython import execute_command, streams
    from bash_purepython.command import printf

    codecs.register(_search)
    module: Any  # the library's modules: their TEXT_ENCODING is replaced
    streams.TEXT_ENCODING = CODEC  # for the modules imported later
    for name, module in list(sys.modules.items()):
        if name.startswith("bash_purepython") and getattr(module, "TEXT_ENCODING", None) == "utf-8":
            module.TEXT_ENCODING = CODEC
    printf.interpret_escapes = printf_escapes
    execute_command.file_appender = file_appender


def file_appender(path: str | os.PathLike[str]) -> Callable[[str], None]:
    """A sink appending the shell's text to a file (the library's, writing bytes)."""
    return lambda text: write_file(path, text, append=True)


# -- backslash escapes -----------------------------------------------------------------------------
PRINTF_ESCAPE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})|U([0-9A-Fa-f]{1,8})|(.))",
                           re.S)
ECHO_ESCAPE = re.compile(r"\\(?:0([0-7]{0,3})|x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})|U([0-9A-Fa-f]{1,8})|(.))",
                         re.S)
PRINTF_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v",
                 "e": "\x1b", "E": "\x1b", "\\": "\\", '"': '"', "'": "'", "?": "?"}


def printf_escapes(text: str) -> str:
    """`printf`'s escapes (in its format and `%b`): \\NNN and \\xHH are bytes, \\uHHHH and
    \\UHHHHHHHH characters."""
    return interpret(text, PRINTF_ESCAPE, PRINTF_SIMPLE)[0]


def interpret(text: str, pattern: _re.Pattern[str], simple: dict[str, str],
              stop: str | None = None) -> tuple[str, bool]:
    """Backslash escapes as bash reads them; (text, whether the escape `stop` ended it). Bytes
    written next to each other are decoded together (`from_bytes`)."""
    if "\\" not in text:
        return text, False
    pieces: list[str] = []
    raw, start = bytearray(), 0

    def flush() -> None:
        if raw:
            pieces.append(from_bytes(raw))
            raw.clear()

    for match in pattern.finditer(text):
        octal, hexa, short, long_, other = match.groups()
        if match.start() > start:
            flush()
            pieces.append(text[start:match.start()])
        start = match.end()
        if octal is not None or hexa is not None:
            raw.append(int(hexa, 16) if hexa is not None else int(octal or "0", 8) & 0xFF)
            continue
        flush()
        if other is not None and other == stop:
            return "".join(pieces), True
        if other is not None:
            pieces.append(simple.get(other, "\\" + other))
            continue
        code = int(short or long_, 16)
        pieces.append(chr(code) if code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd")
    flush()
    pieces.append(text[start:])
    return "".join(pieces), False
