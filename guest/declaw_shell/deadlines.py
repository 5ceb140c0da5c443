"""Deadlines of running `timeout` commands, for the places that block outside the event loop.

`timeout` (timeout.py) stops a command that awaits (the shell's own `sleep`, pipes) by
cancelling it on the shell's event loop. Two things block the guest's only thread instead, and
check the innermost deadline here: reading live stdin through the door (door.py asks the host to
wait at most until the deadline) and `time.sleep` in a `python3` program (replaced while a
deadline is active). Either raises `DeadlineReached`, a BaseException so that a program's
`except Exception` does not swallow it; `python3` lets it through without a traceback, as a
process killed by SIGTERM prints none. Code that computes without blocking cannot be stopped
this way: WASI has no signals (the command's own timeout still ends the whole command line).
"""

from __future__ import annotations

import time

_stack: list[float] = []  # monotonic deadlines of the `timeout`s running now, innermost last
_real_sleep = time.sleep


class DeadlineReached(BaseException):
    """The innermost `timeout` ran out while its command was blocked."""

    passes_through_programs = True  # _declaw_boot lets it end a python3 stage silently


def remaining() -> float | None:
    """Seconds left before the earliest active deadline; None when no `timeout` runs."""
    if not _stack:
        return None
    return min(_stack) - time.monotonic()


def _sleep(seconds: float) -> None:
    left = remaining()
    if left is not None and seconds >= left:
        while left is not None and left > 0:  # a sleep may end a hair early by the guest's clock: `timeout` would
            _real_sleep(left)  # then take the deadline for an outer one's and end the line
            left = remaining()
        raise DeadlineReached()
    _real_sleep(seconds)


def keep(stop: BaseException, output: str) -> None:
    """What a layer between `timeout` and its command had collected (a captured program's stdout,
    a `bash -c` script's output so far) when `stop` ended the command: `timeout` writes it out,
    as a killed process's written output stays written. Outer layers' text goes first."""
    if output:
        stop.__dict__["declaw_output"] = output + kept(stop)


def kept(stop: BaseException | None) -> str:
    """The output `keep` gathered on its way up; "" when there is none."""
    output = vars(stop).get("declaw_output", "") if stop is not None else ""
    return output if isinstance(output, str) else ""


class active:
    """`with deadlines.active(seconds):` — a deadline for the code inside."""

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    def __enter__(self) -> active:
        if not _stack:
            time.sleep = _sleep  # type: ignore[assignment]  # takes the numbers programs pass
        _stack.append(self.at)
        return self

    def __exit__(self, *exc: object) -> None:
        _stack.remove(self.at)
        if not _stack:
            time.sleep = _real_sleep

    @property
    def passed(self) -> bool:
        return time.monotonic() >= self.at
