"""Text someone else chose, made safe for a log line, an error message or a terminal.

A guest chooses file names (any character but `/` and NUL: line breaks, ESC, bidi controls),
and whoever can write a state store chooses the names in it; such text reaches our log lines
(a volume's write-back naming a file it could not store, a checkpoint refused naming the file
that was too much), error messages and the CLI's output. Written raw, a line break forges a log
line (`...not written back\\n2026-01-01 ERROR something else`), an ANSI or OSC sequence commands
the terminal that shows it (colours, the window title, the clipboard with OSC 52), a bidi control
reorders what a reader sees, and a lone surrogate (a non-UTF-8 name decoded with
`surrogateescape`) makes the log handler fail. `printable` writes each such character as an
escape (`\\n`, `\\x1b`, `\\u2028`), the way `repr` would, leaving the rest as it is.

Every logger of ours is made by `logger(name)`, which escapes each record's message (its
arguments included) and the message lines of an exception's traceback, so a log line of ours is
one line whatever it names (tests/test_printable.py checks that no module calls
`logging.getLogger` itself).
"""

from __future__ import annotations

import logging
import re
import traceback
from types import TracebackType
from typing import Optional, Union

# C0 and C1 controls and DEL; line and paragraph separators; bidi controls (marks, embeddings,
# overrides, isolates: "Trojan Source"); the byte-order mark; lone surrogates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ufeff\ud800-\udfff]")
# The same, but for a terminal showing a program's output: tabs and line breaks are its text.
_UNSAFE_ON_A_TERMINAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e"
                                   "\u2066-\u2069\ufeff\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: "re.Match[str]") -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` as one line with no control characters: each one escaped (`\\n`, `\\x1b`, `\\u202e`)."""
    return _UNSAFE.sub(_escape, text)


def terminal_text(text: str) -> str:
    """A program's output for a terminal: tabs and line breaks kept, every other control
    character (ESC and so every ANSI or OSC sequence, C1 controls, bidi controls) escaped."""
    return _UNSAFE_ON_A_TERMINAL.sub(_escape, text)


ExcInfo = tuple[type[BaseException], BaseException, Optional[TracebackType]]


def exception_text(exc_info: ExcInfo) -> str:
    """A traceback as `logging` writes one, each exception's own lines (its type, message and
    notes) escaped by `printable`: the frames are the host's code, the message may name anything."""
    out: list[str] = []

    def walk(te: traceback.TracebackException) -> None:
        if te.__cause__ is not None:
            walk(te.__cause__)
            out.append("\nThe above exception was the direct cause of the following exception:\n\n")
        elif te.__context__ is not None and not te.__suppress_context__:
            walk(te.__context__)
            out.append("\nDuring handling of the above exception, another exception occurred:\n\n")
        if te.stack:
            out.append("Traceback (most recent call last):\n")
            out.extend(te.stack.format())
        out.append(printable("".join(te.format_exception_only()).rstrip("\n")) + "\n")

    walk(traceback.TracebackException(*exc_info, compact=True))
    return "".join(out).rstrip("\n")


class OneLine(logging.Filter):
    """Escape a record's message and its exception's messages (`printable`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # arguments that do not fit the format: logging reports that itself
            return True
        record.msg, record.args = printable(message), None
        record.__dict__.pop("color_message", None)  # uvicorn's coloured copy of the format, unescaped
        if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
            exc_type, exc, tb = record.exc_info
            if exc is not None:
                record.exc_text = exception_text((exc_type, exc, tb))
        return True


def logger(name: Union[str, None]) -> logging.Logger:
    """The logger `name`, with `OneLine` on it (once)."""
    log = logging.getLogger(name)
    if not any(isinstance(f, OneLine) for f in log.filters):
        log.addFilter(OneLine())
    return log
