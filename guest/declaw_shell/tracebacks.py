"""Uncaught exceptions with enormous tracebacks, printed and freed in bounded time.

With `sys.setrecursionlimit(10**6)`, a runaway recursion ends in a RecursionError about 10**6
frames deep. CPython's traceback module then builds a FrameSummary for every frame (~0.5 ms
each in the guest: about 8 minutes) before it collapses the repeats; and freeing the chain
recurses in C once per frame, past the 2 MiB wasm stack, so the guest traps. Here a traceback
of more than LIMIT frames prints its first and last KEEP frames and a line saying how many were
left out, and `release` frees a chain innermost first, one frame at a time. Shorter tracebacks
print exactly as CPython prints them.
"""

from __future__ import annotations

import collections
import sys
import traceback

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from types import TracebackType

LIMIT = 2000
KEEP = 50


def _depth(tb: TracebackType | None, at_most: int) -> int:
    n = 0
    while tb is not None and n <= at_most:
        n += 1
        tb = tb.tb_next
    return n


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    """The exception and those it was raised from or during, as CPython prints them."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ if exc.__cause__ is not None else \
            (None if exc.__suppress_context__ else exc.__context__)


def is_long(exc: BaseException) -> bool:
    """Whether printing `exc` the usual way would walk more than LIMIT frames."""
    return any(_depth(e.__traceback__, LIMIT) > LIMIT for e in _chain(exc))


def format_exception(exc: BaseException, tb: TracebackType | None = None) -> list[str]:
    """`traceback.format_exception(exc)`'s lines, bounded: `tb` (default: the exception's own)
    replaces the outermost exception's traceback."""
    if tb is not None:
        exc.__traceback__ = tb
    if not is_long(exc):
        return traceback.format_exception(type(exc), exc, exc.__traceback__)
    lines = []
    for i, e in enumerate(reversed(list(_chain(exc)))):
        if i:
            lines.append("\nThe above exception was the direct cause of the following exception:\n\n"
                         if e.__cause__ is not None else
                         "\nDuring handling of the above exception, another exception occurred:\n\n")
        lines.extend(_format_one(e))
    return lines


def _format_one(exc: BaseException) -> list[str]:
    tb = exc.__traceback__
    if _depth(tb, LIMIT) <= LIMIT:
        return traceback.format_exception(type(exc), exc, tb, chain=False)
    head: list[TracebackType] = []
    tail: collections.deque[TracebackType] = collections.deque(maxlen=KEEP)
    total = 0
    while tb is not None:
        if total < KEEP:
            head.append(tb)
        else:
            tail.append(tb)
        total += 1
        tb = tb.tb_next
    lines = ["Traceback (most recent call last):\n"]
    lines.extend(_frames(head))
    lines.append("  [... %d more frames not shown: this traceback is %d frames deep ...]\n"
                 % (total - len(head) - len(tail), total))
    lines.extend(_frames(tail))
    lines.extend(traceback.format_exception_only(type(exc), exc))
    return lines


def _frames(tbs: Iterable[TracebackType]) -> list[str]:
    return traceback.StackSummary.extract((tb.tb_frame, tb.tb_lineno) for tb in tbs).format()


def release(exc: BaseException) -> None:
    """Drop the tracebacks of `exc` and its chain, innermost frame first, so that no free
    recurses through a long chain."""
    pending: list[BaseException | None] = [exc]
    seen = set()
    while pending:
        e = pending.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        pending.extend((e.__cause__, e.__context__))
        tb, e.__traceback__ = e.__traceback__, None
        tbs = []
        while tb is not None:
            tbs.append(tb)
            tb = tb.tb_next
        while tbs:
            last = tbs.pop()
            if tbs:
                tbs[-1].tb_next = None  # `last` and its frame go alone, the caller's frame stays
            del last


def print_uncaught(exc: BaseException, tb: TracebackType | None) -> None:
    """How an uncaught exception of user code is shown: `sys.excepthook` (CPython's, unless the
    program set its own), or, for an enormous traceback under CPython's hook, the bounded form.
    Then the chain is freed."""
    try:
        if sys.excepthook is sys.__excepthook__ and (is_long(exc) or _depth(tb, LIMIT) > LIMIT):
            sys.stderr.write("".join(format_exception(exc, tb)))
        else:
            sys.excepthook(type(exc), exc.with_traceback(tb), tb)
    finally:
        release(exc)
