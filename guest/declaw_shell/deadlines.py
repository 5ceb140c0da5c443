"""Deadlines of running `timeout` commands, for what the event loop cannot cancel.

`timeout` (timeout.py) stops a command that awaits (the shell's own `sleep`, pipes) by
cancelling it on the shell's event loop. A `python3` program holds the guest's one thread
instead, so each deadline also arms the host's deadline timer (timer 3: guest/declaw_posix/
signals.py, declaw_wasm/_wasm/timers.py), which sends SIGTERM at the innermost deadline as GNU
timeout does: a program that left SIGTERM at SIG_DFL ends there (`DeadlineReached`, computing or
sleeping), one with a handler of its own runs it. Reading live stdin through the door waits at
most until the deadline (door.py). `DeadlineReached` is a BaseException, so that a program's
`except Exception` does not swallow it; `python3` lets it through without a traceback, as a
process killed by SIGTERM prints none.
"""

from __future__ import annotations

import time

_stack: list[tuple[float, int, bool]] = []  # (monotonic deadline, programs running when it began, `-s KILL`),
# innermost last
SLACK_S = 1e-3  # the host's clock and ours read the same instant a hair apart


class DeadlineReached(BaseException):
    """The innermost `timeout` ran out while its command was running."""

    passes_through_programs = True  # _declaw_boot lets it end a python3 stage silently


def remaining() -> float | None:
    """Seconds left before the earliest active deadline; None when no `timeout` runs."""
    if not _stack:
        return None
    return min(entry[0] for entry in _stack) - time.monotonic()


def reached() -> bool:
    """Whether an active deadline has passed (the host's SIGTERM for it has come)."""
    left = remaining()
    return left is not None and left <= SLACK_S


def passed_for(programs: int) -> tuple[float, int, bool] | None:
    """The passed deadline that stops the innermost of `programs` running programs: one its
    `timeout` started (a program that runs `timeout 1 sleep 5` inline, `subprocess.run(...,
    timeout=1)`, is not its command: the event loop stops that). None if there is none."""
    now = time.monotonic() + SLACK_S
    return next((entry for entry in _stack if entry[0] <= now and entry[1] < programs), None)


def _arm() -> None:
    """The host's deadline timer at the earliest active deadline, or disarmed."""
    from declaw_posix import signals

    left = remaining()
    signals.arm_deadline(None if left is None else max(left, 1e-6))


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

    def __init__(self, seconds: float, kill: bool = False) -> None:
        """`kill`: `timeout -s KILL`, which no handler of the program's can keep from ending it."""
        from declaw_posix import signals

        self.at = time.monotonic() + seconds
        self._entry = (self.at, signals.programs_running(), kill)

    def __enter__(self) -> active:
        _stack.append(self._entry)
        _arm()
        return self

    def __exit__(self, *exc: object) -> None:
        from declaw_posix import signals

        _stack.remove(self._entry)
        signals.forget_deadline(self._entry)
        _arm()

    @property
    def passed(self) -> bool:
        return time.monotonic() >= self.at - SLACK_S
