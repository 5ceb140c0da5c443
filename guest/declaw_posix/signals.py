"""Timers and the signals they deliver: `signal.alarm`, `setitimer`, `getitimer`, `pause`.

WASI's CPython is built without them (and without any way for a signal to arrive). The host
keeps this guest's timers (the door's `timer` op: declaw_wasm/_wasm/timers.py) and, when one
comes due, trips its signal in this interpreter as a C signal handler would. CPython then runs
the signal's Python handler between two bytecodes, as on Linux: a computing program within an
epoch tick (10 ms) of the due time, a sleeping one at it. So the evaluation harnesses' idiom —
`signal.signal(SIGALRM, handler)`, `signal.setitimer(ITIMER_REAL, 3)`, run the code, handler
raises `TimeoutError` — stops a busy loop as it does on Linux.

- **Timers**: ITIMER_REAL (wall clock, SIGALRM), ITIMER_VIRTUAL (SIGVTALRM) and ITIMER_PROF
  (SIGPROF), the last two counting this guest's CPU time; values as CPython checks them
  (`ValueError` for NaN, `OverflowError` past what Linux takes, `signal.ItimerError` for a
  negative value or an unknown timer).
- **Default actions**: CPython trips only signals whose handler is a Python function. For
  SIGALRM, SIGVTALRM, SIGPROF and SIGTERM, whose default action ends a Linux process, the
  handler installed in C is always `_dispatch`, and what programs see and set (`signal.signal`,
  `getsignal`: SIG_DFL, SIG_IGN or a function) is kept in `_dispositions`. SIG_DFL ends the
  running program with status 128+N, as the signal would, by raising `SignalExit` (a
  BaseException: `except Exception` does not catch it; `finally` blocks run, which on Linux
  they would not; atexit handlers do not). bash's "Alarm clock" line is not printed. A signal
  that lands in a program's start or end (this module's and the boot's bookkeeping) is dropped,
  so that no handler of a program that has ended runs in the shell's code.
  With no program running (a code context's cell) the interpreter ends with 128+N, as a
  Jupyter kernel's process would.
- **`timeout`'s SIGTERM**: the shell's `timeout` arms timer 3 (declaw_shell/deadlines.py); at
  its deadline a program it started, with SIGTERM left at SIG_DFL, ends as `timeout` stops it
  (`DeadlineReached`); one with a handler of its own runs it, as on Linux. When the deadline's
  command is the shell's own (`timeout 1 sleep 5`, also run inline by a program's
  `subprocess.run(..., timeout=1)`), the event loop stops it and the signal does nothing.
- **A program's timers and handlers are its own**: the programs of a command line run one
  after another in this interpreter (guest/_declaw_boot.py's run_process), so `program_started`
  and `program_ended` keep each one's: a program's handlers are put back and its timers
  disarmed when it ends. A child a program runs inline (`subprocess.run`, `os.system`) holds the
  program's timers while it runs (`hold_timers`); one that came due meanwhile trips when the
  child returns, where on Linux it would have interrupted the wait.
- **`time.sleep`** under an armed timer sleeps on after a handler that returns, as PEP 475
  says (the host ends the sleep at the due time; a handler that raises ends it).

What differs from Linux (docs/guest.md): a timer comes due during a wait for the host (stdin,
a socket, a child) only when the wait ends; the signals are delivered to Python code only (a
long C call — a big numpy operation — finishes first, as on Linux); no other process can send
this one a signal.
"""

from __future__ import annotations

import math
import operator
import os
import time
from typing import Any, NoReturn

REAL, VIRTUAL, PROF, DEADLINE = range(4)  # the host's timer numbers (timers.py)
SIGTERM, SIGALRM, SIGVTALRM, SIGPROF = 15, 14, 26, 27
DEFAULT_ENDS = (SIGALRM, SIGVTALRM, SIGPROF, SIGTERM)  # default action: the process ends
SIGINT, SIGABRT, SIGKILL = 2, 6, 9
NSIG = 65  # Linux's: signals 1..64
IGNORED_BY_DEFAULT = frozenset({17, 18, 23, 28})  # SIGCHLD, SIGCONT, SIGURG, SIGWINCH
STOPS = frozenset({19, 20, 21, 22})  # SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU: nothing here could continue it
MAX_SECONDS = 9223372036.854775  # CPython's bound: nanoseconds in 64 bits (the host's is 1e10: timers.py)
EINVAL = 22

real_sleep = time.sleep
_armed: set[int] = set()  # the timers this guest has armed (as far as it knows: a turn's end clears them all)
_programs: list[_Program] = []  # the running programs, innermost last
_signal: Any = None  # the signal module, once patched
_real_signal: Any = None  # its own signal.signal
_real_raise_signal: Any = None  # its own signal.raise_signal
_term_pending = [False]  # a deadline's SIGTERM came while no program ran
_dispositions: dict[int, Any] = {}  # DEFAULT_ENDS' handlers as programs see them (absent: SIG_DFL)
_told: set[tuple[float, int, bool]] = set()  # deadlines whose SIGTERM a program's own handler has had
IN_KERNEL = [False]  # this guest is a code context's (no program runs a cell)


class SignalExit(BaseException):
    """A signal's default action ends the running program: its status is 128 + `signum`."""

    passes_through_programs = True  # _declaw_boot: no traceback, the status below

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def status(self) -> int:
        return 128 + self.signum


class _Program:
    """One running program's signal state: the handlers it changed, to put back at its end."""

    __slots__ = ("changed", "saved")

    def __init__(self) -> None:
        self.changed: dict[int, Any] = {}  # signum -> the handler before the program changed it
        self.saved = dict(_dispositions)  # the dispositions of DEFAULT_ENDS before it


def _door(**fields: Any) -> tuple[float, float]:
    from declaw_shell import door

    try:
        answer = door.call("timer", **fields)
    except OSError:  # no host answers (a bare interpreter): no timers
        return 0.0, 0.0
    if type(answer) is not list or len(answer) != 2:  # an error reply: a bug of ours, said plainly
        raise OSError(EINVAL, "the host refused the timer: %r" % (answer,))
    return float(answer[0]), float(answer[1])


def _arm(which: int, value: float, interval: float) -> tuple[float, float]:
    """Set timer `which` (value 0 disarms it); the timer as it was."""
    if value > 0:
        _armed.add(which)
    else:
        _armed.discard(which)
    return _door(which=which, value=value, interval=interval if value > 0 else 0.0)


def _integer(value: Any) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError("'%s' object cannot be interpreted as an integer" % type(value).__name__) from None


def _seconds(value: Any) -> float:
    """A timer value as CPython's setitimer converts it: a float, or an integer."""
    seconds = value if isinstance(value, float) else float(_integer(value))
    if math.isnan(seconds):
        raise ValueError("Invalid value NaN (not a number)")
    if abs(seconds) >= MAX_SECONDS:
        raise OverflowError("timestamp out of range for platform time_t")
    return seconds


def _which(which: Any) -> int:
    number = _integer(which)
    if number not in (REAL, VIRTUAL, PROF):
        raise _itimer_error()
    return number


def _itimer_error() -> OSError:
    error_class = getattr(_signal, "ItimerError", OSError)
    return error_class(EINVAL, "Invalid argument")


def setitimer(which: int, seconds: float, interval: float = 0.0) -> tuple[float, float]:
    """signal.setitimer, as on Linux: arm (or, with 0, disarm) timer `which`; the old
    (value, interval)."""
    number = _which(which)
    value, every = _seconds(seconds), _seconds(interval)
    if value < 0 or every < 0:
        raise _itimer_error()
    return _arm(number, value, every)


def getitimer(which: int) -> tuple[float, float]:
    """signal.getitimer: (seconds left, interval) of timer `which`; (0.0, 0.0) when disarmed."""
    number = _which(which)
    if number not in _armed:
        return 0.0, 0.0
    return _door(which=number)


def alarm(seconds: int) -> int:
    """signal.alarm: SIGALRM in `seconds` (0 cancels; a negative C int is a huge unsigned one, as
    alarm(2) takes it); the whole seconds the previous alarm had left, rounded as glibc rounds
    them (a pending alarm says at least 1)."""
    number = _integer(seconds)
    if not -(1 << 31) <= number < 1 << 31:
        raise OverflowError("Python int too %s to convert to C int" % ("large" if number > 0 else "small"))
    left, _ = _arm(REAL, float(number & 0xFFFFFFFF), 0.0)
    whole = int(left) + (1 if left - int(left) >= 0.5 else 0)
    return whole or (1 if left > 0 else 0)


def pause() -> None:
    """signal.pause: sleep until a signal's handler has run. Only this guest's timers can
    signal it: with none armed the wait could never end, and it raises instead of hanging."""
    wall = [w for w in (REAL, DEADLINE) if w in _armed]
    left = [_door(which=w)[0] for w in wall]
    left = [s for s in left if s > 0]
    if not left:
        raise RuntimeError("deadlock: signal.pause() with no wall-clock timer armed (signal.alarm, "
                           "setitimer(ITIMER_REAL)) would wait forever: nothing else can signal this program")
    real_sleep(min(left))  # the host ends it when the timer trips; the handler runs on return


def _sleep(seconds: float) -> None:
    """time.sleep: with a wall-clock timer armed, the host ends the sleep when it trips; sleep on
    after a handler that returns (PEP 475)."""
    if not _armed or not isinstance(seconds, (int, float)):
        real_sleep(seconds)  # also says what is wrong with `seconds`
        return
    end = time.monotonic() + seconds
    real_sleep(seconds)
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return
        real_sleep(left)


DEADLINE_REPEAT_S = 0.1


def forget_deadline(entry: tuple[float, int, bool]) -> None:
    """A `timeout` has ended (deadlines.py)."""
    _told.discard(entry)


def arm_deadline(seconds: float | None) -> None:
    """The shell's `timeout` deadline (declaw_shell/deadlines.py): SIGTERM in `seconds`, then
    every DEADLINE_REPEAT_S until disarmed (a SIGTERM dropped in a program's bookkeeping comes
    again; a program's own handler gets one), or none (None)."""
    _arm(DEADLINE, seconds or 0.0, DEADLINE_REPEAT_S)


def programs_running() -> int:
    """How many programs run now, one inside another (run_process, inline children)."""
    return len(_programs)


def _dispatch(signum: int, frame: Any) -> None:
    """The C-level handler of DEFAULT_ENDS: runs what the program installed (`_dispositions`),
    SIG_DFL's action for these signals (the program ends), or nothing for SIG_IGN. A signal that
    lands in this module's or the boot's bookkeeping — a program starting or ending — is dropped:
    the program it was for is not running its own code (a deadline's comes again: its timer
    repeats)."""
    handler = _dispositions.get(signum, _signal.SIG_DFL)
    if _in_bookkeeping(frame):
        return
    if signum == SIGTERM:
        from declaw_shell import deadlines

        passed = deadlines.passed_for(len(_programs))
        if passed is None and deadlines.reached():
            _term_pending[0] = True  # the shell's own code runs: its event loop stops it, or the
            return  # next program to start under the deadline stops at once
        if passed is not None:
            if handler is _signal.SIG_DFL or passed[2]:  # `-s KILL`: no handler can keep it
                raise deadlines.DeadlineReached()
            if passed in _told:
                return  # GNU's timeout sends it once (the timer repeats until the program ends)
            _told.add(passed)
    if handler is _signal.SIG_IGN:
        return
    if handler is not _signal.SIG_DFL:
        handler(signum, frame)
        return
    default_action(signum)  # in the shell's own code (a timer armed behind the bookkeeping's back): nothing


def default_action(signum: int) -> None:
    """SIG_DFL's action for `signum`: the running program ends with 128+N (a cell's interpreter,
    as a Jupyter kernel's process would); a signal Linux ignores or that stops a process does
    nothing (no one here could continue a stopped program)."""
    if signum in IGNORED_BY_DEFAULT or signum in STOPS:
        return
    if _programs:
        raise SignalExit(signum)
    if IN_KERNEL[0]:
        _end_interpreter(128 + signum)


def abort() -> NoReturn:
    """`os.abort()`: SIGABRT's default action whatever handler is set, as C's abort() — the
    program ends with 134 (WASI's abort() is a trap, which ended the guest's whole command line)."""
    default_action(SIGABRT)
    _end_interpreter(128 + SIGABRT)  # no program runs: the shell's own code


def raise_signal(signalnum: int) -> None:
    """`signal.raise_signal` (and `os.kill` of this process): a signal left at SIG_DFL takes its
    default action here (WASI's raise() traps for those that end a process, which ended the
    whole command line); SIGKILL always ends the program; a handler runs as on Linux."""
    number = operator.index(signalnum)
    if not -(2**31) <= number < 2**31:
        raise OverflowError("Python int too large to convert to C int")
    if number == 0:
        return  # raise(0): no signal, as on Linux
    if not 0 < number < NSIG:
        raise OSError(EINVAL, "Invalid argument")  # WASI's raise() would say errno 28
    if number == SIGKILL or (number not in DEFAULT_ENDS and _signal.getsignal(number) in (_signal.SIG_DFL, None)):
        default_action(number)
        return
    _real_raise_signal(signalnum)  # CPython's checks; a handler (DEFAULT_ENDS' is _dispatch)


# of _declaw_boot.py: `_run_user` too, for what it does around the code (a signal landing as it
# returns or prints the program's traceback is not the program's: its exception would escape)
_BOOKKEEPING_NAMES = frozenset({"main", "_status_of", "run_process", "_run_user"})


def _in_bookkeeping(frame: Any) -> bool:
    """Whether `frame` is in a program's start or end rather than in its code: walking outwards,
    the boot's or this module's bookkeeping comes before the boot's `_user_code` (the one frame
    a program's own code runs under)."""
    depth = 0
    while frame is not None and depth < 64:
        code = frame.f_code
        if code in _BOOKKEEPING:
            return True
        if code.co_filename.endswith("_declaw_boot.py"):
            if code.co_name == "_user_code":
                return False
            if code.co_name in _BOOKKEEPING_NAMES:
                return True
        frame = frame.f_back
        depth += 1
    return False


def _end_interpreter(status: int) -> NoReturn:
    """Exit with `status` (WASI's proc_exit carries 0..125 only: the host is told it first)."""
    try:
        from declaw_shell import door

        door.call("exit", code=status)
        status = 0
    except Exception:  # noqa: BLE001 -- no door: the guest ends all the same
        status = 1
    os._exit(status)


def patch_signal(module: Any) -> None:
    """Give `signal` what WASI's lacks (module docstring); idempotent."""
    global _signal, _real_signal, _real_raise_signal
    if getattr(module, "_declaw_timers", False):
        return
    _signal = module
    real_signal = _real_signal = module.signal
    _real_raise_signal = module.raise_signal
    real_getsignal = module.getsignal

    def signal(signalnum: int, handler: Any) -> Any:
        number = int(signalnum)
        if number in DEFAULT_ENDS:
            real_signal(signalnum, handler)  # CPython's checks and errors
            real_signal(signalnum, _dispatch)
            previous = _dispositions.get(number, module.SIG_DFL)
            if handler is module.SIG_DFL:
                _dispositions.pop(number, None)
            else:
                _dispositions[number] = handler
            return previous
        previous = real_signal(signalnum, handler)
        if _programs and number not in _programs[-1].changed:
            _programs[-1].changed[number] = previous
        return previous

    def getsignal(signalnum: int) -> Any:
        if int(signalnum) in DEFAULT_ENDS:
            return _dispositions.get(int(signalnum), module.SIG_DFL)
        return real_getsignal(signalnum)

    signal.__doc__, getsignal.__doc__ = real_signal.__doc__, real_getsignal.__doc__
    module.signal, module.getsignal = signal, getsignal
    module.ITIMER_REAL, module.ITIMER_VIRTUAL, module.ITIMER_PROF = REAL, VIRTUAL, PROF
    if not hasattr(module, "ItimerError"):
        class ItimerError(OSError):
            pass

        ItimerError.__module__ = "signal"
        ItimerError.__qualname__ = ItimerError.__name__ = "itimer_error"  # as CPython names it
        module.ItimerError = ItimerError
    module.alarm, module.setitimer, module.getitimer, module.pause = alarm, setitimer, getitimer, pause
    raise_signal.__doc__ = _real_raise_signal.__doc__
    module.raise_signal = raise_signal
    for number in DEFAULT_ENDS:
        real_signal(number, _dispatch)
    time.sleep = _sleep  # type: ignore[assignment]  # takes the numbers programs pass
    module._declaw_timers = True


def program_started() -> None:
    """A program starts (guest/_declaw_boot.py's main). If a `timeout`'s deadline passed while
    no program ran, the program is stopped before it starts."""
    if _term_pending[0]:
        _term_pending[0] = False
        from declaw_shell import deadlines

        if deadlines.passed_for(len(_programs) + 1) is not None:
            raise deadlines.DeadlineReached()
    program = _Program()
    for number, handler in list(_dispositions.items()):
        if callable(handler):
            del _dispositions[number]  # as exec resets a caught signal to SIG_DFL; an ignored one stays
    # a new Python's SIGINT raises KeyboardInterrupt in it (the shell's asyncio runner has its own)
    interrupt = _signal.getsignal(SIGINT) if _signal is not None else None
    if interrupt is not None and callable(interrupt) and interrupt is not _signal.default_int_handler:
        program.changed[SIGINT] = _real_signal(SIGINT, _signal.default_int_handler)
    _programs.append(program)


def program_ended() -> None:
    """The running program ends: its timers disarmed, its handlers put back."""
    if not _programs:
        return
    program = _programs.pop()
    _dispositions.clear()
    _dispositions.update(program.saved)
    hold_timers()  # its timers end with it
    for number, handler in program.changed.items():
        try:
            _real_signal(number, handler)
        except (ValueError, TypeError, OSError):
            pass


Held = dict[int, tuple[float, float]]


def hold_timers() -> Held:
    """A child about to run inline, on this thread (declaw_shell/subprocesses.py): the running
    program's timers, disarmed until `resume_timers` (the child's are its own)."""
    held: Held = {}
    for which in (REAL, VIRTUAL, PROF):
        if which in _armed:
            value, interval = _arm(which, 0.0, 0.0)
            if value > 0:
                held[which] = (value, interval)
    return held


def resume_timers(held: Held, elapsed: float) -> None:
    """The inline child has returned after `elapsed` seconds: the program's timers re-armed with
    what they had left (the CPU timers did not run meanwhile); one that came due meanwhile trips
    now, back in the program's own code."""
    for which, (value, interval) in held.items():
        left = value - elapsed if which == REAL else value
        _arm(which, max(left, 1e-6), interval)


# (not hold_timers/resume_timers: they run in the calling program's own code, subprocess.run's, where its
# handler belongs; a program's end reaches hold_timers through program_ended)
_BOOKKEEPING = frozenset(f.__code__ for f in (program_started, program_ended))
