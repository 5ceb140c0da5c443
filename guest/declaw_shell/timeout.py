"""`timeout [-s SIG] [-k DUR] [--preserve-status] [--foreground] [-v] DURATION CMD [ARG]...`

GNU's exit statuses: 124 when the command timed out (128+9 with `-s KILL`, 128+SIG with
`--preserve-status`), 125 for a bad duration, option or signal, 126/127 when CMD cannot run,
else the command's own. DURATION is a number (decimals, exponents, `inf`) with an optional
s/m/h/d suffix; 0 means no limit.

How the command is stopped: everything the shell runs shares the guest's one thread and its
event loop. A command that waits on the event loop (the shell's `sleep`, pipes, the shell's own
utilities between chunks) is cancelled at the deadline. A `python3` program gets SIGTERM at the
deadline from the host's deadline timer (deadlines.py): left at SIG_DFL it ends there, computing
or sleeping; a handler of its own runs, and the program goes on as on Linux (its status is then
what `--preserve-status` returns). One blocked reading live stdin is stopped by deadlines.py.
What differs from GNU's: the signal is SIGTERM whatever `-s` names (the status reported is
still `-s`'s; with `-s KILL` no handler of the program's keeps it from ending), `-k` is
accepted and not applied, only the innermost program gets the signal (GNU's reaches the whole
process group: a program's inline child), and the shell's own code computing without waiting
(`awk` over a huge file) runs to its end, `timeout` then reporting 124.
"""

from __future__ import annotations

import asyncio
import getopt
import math
import re

from bash_purepython.execute_command import ErrorDestination

from . import deadlines

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bash_purepython.execute_command import ExecutionResult, StdinValue

    from .shells import Destination, GuestState, ShellFeatures, StdoutFile

SIGNAL_NUMBERS = {"HUP": 1, "INT": 2, "QUIT": 3, "ILL": 4, "TRAP": 5, "ABRT": 6, "IOT": 6, "BUS": 7,
                  "FPE": 8, "KILL": 9, "USR1": 10, "SEGV": 11, "USR2": 12, "PIPE": 13, "ALRM": 14,
                  "TERM": 15, "STKFLT": 16, "CHLD": 17, "CONT": 18, "STOP": 19, "TSTP": 20, "TTIN": 21,
                  "TTOU": 22, "URG": 23, "XCPU": 24, "XFSZ": 25, "VTALRM": 26, "PROF": 27, "WINCH": 28,
                  "IO": 29, "POLL": 29, "PWR": 30, "SYS": 31}
DURATION = re.compile(r"(?i)^((?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|inf(?:inity)?)([smhd]?)$")
UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
TRY = "Try 'timeout --help' for more information.\n"
EXIT_TIMED_OUT, EXIT_FAILURE, EXIT_KILLED = 124, 125, 137


class Usage(Exception):
    """A command line GNU timeout refuses (exit 125)."""


def parse_duration(text: str) -> float:
    match = DURATION.match(text)
    if match is None:
        raise Usage("timeout: invalid time interval \u2018%s\u2019\n" % text)
    seconds = float(match.group(1)) * UNIT_SECONDS[match.group(2).lower()]
    return math.inf if math.isinf(seconds) else seconds


def parse_signal(text: str) -> tuple[int, str]:
    name = text.upper()
    if name.isdigit():
        number = int(name)
        if 0 <= number <= 64:
            return number, next((n for n, v in SIGNAL_NUMBERS.items() if v == number), str(number))
    name = name[3:] if name.startswith("SIG") else name
    if name in SIGNAL_NUMBERS:
        return SIGNAL_NUMBERS[name], name
    raise Usage("timeout: \u2018%s\u2019: invalid signal\n" % text)


def parse(arguments: list[str]) -> tuple[float, int, str, bool, bool, list[str]]:
    """(seconds, signal number, signal name, preserve, verbose, command) or Usage."""
    try:
        options, rest = getopt.getopt(list(arguments), "+k:s:v", ["kill-after=", "signal=", "preserve-status",
                                                                  "foreground", "verbose", "help", "version"])
    except getopt.GetoptError as exc:
        short = len(exc.opt) == 1
        if "requires" in exc.msg:
            message = ("option requires an argument -- '%s'" if short else "option '--%s' requires an argument")
        else:
            message = "invalid option -- '%s'" if short else "unrecognized option '--%s'"
        raise Usage("timeout: %s\n" % (message % exc.opt)) from None
    number, name, preserve, verbose = 15, "TERM", False, False
    for option, value in options:
        if option in ("-s", "--signal"):
            number, name = parse_signal(value)
        elif option in ("-k", "--kill-after"):
            parse_duration(value)
        elif option == "--preserve-status":
            preserve = True
        elif option in ("-v", "--verbose"):
            verbose = True
        elif option in ("--help", "--version"):
            raise Usage("timeout: --help and --version are not available here\n")
    if len(rest) < 2:
        raise Usage("")  # GNU says only "Try 'timeout --help'…" here
    return parse_duration(rest[0]), number, name, preserve, verbose, rest[1:]


async def run(executor: ShellFeatures, arguments: list[str], stdin: StdinValue | None, error_destination: Destination,
              state: GuestState, in_pipeline: bool, attached: bool,
              into: StdoutFile | None = None) -> ExecutionResult:
    """`into`: the line's `> FILE`, which a Python program CMD writes itself as it runs."""
    write_error = executor.error_sink(error_destination, state, state.output_sink.write_sync)
    try:
        seconds, number, name, preserve, verbose, command = parse(arguments)
    except Usage as exc:
        write_error(str(exc) + TRY)
        if stdin is not None:
            await executor.discard_stdin(stdin)
        return executor.empty(EXIT_FAILURE)
    if seconds == 0 or math.isinf(seconds):
        return await executor.run_wrapped("timeout", command, stdin, error_destination, state, in_pipeline,
                                          attached, into=into)
    if "/" not in command[0] and not executor.is_program(command[0]):
        return await executor.run_wrapped("timeout", command, stdin, error_destination, state, in_pipeline,
                                          attached, into=into)

    async def body(scope: GuestState) -> int:
        ended_itself: int | None = None  # the command's own status, when it ended after the deadline
        with deadlines.active(seconds, kill=number == 9) as deadline:
            try:
                async with asyncio.timeout(seconds):
                    result = await executor.dispatch(command[0], command[1:], None, ErrorDestination.STDERR,
                                                     scope, attached_to_terminal=scope.is_attached_to_terminal(),
                                                     skip_functions=True, into=into)
                    await executor.drain_to_sink(result, scope)
                    status = result.exit_code
            except TimeoutError as stop:  # the command's output so far stays written, as a killed process's does
                scope.output_sink.write_sync(deadlines.kept(stop.__cause__))
            except deadlines.DeadlineReached as stop:
                if not deadline.passed:
                    raise  # an outer timeout's (it carries the output on up)
                scope.output_sink.write_sync(deadlines.kept(stop))
            else:
                if not deadline.passed:
                    return status
                ended_itself = status  # after the deadline: a program that handled its SIGTERM
        if verbose:
            scope.write_error("timeout: sending signal %s to command \u2018%s\u2019\n" % (name, command[0]))
        if preserve:
            return 128 + number if ended_itself is None else ended_itself
        return EXIT_KILLED if number == 9 else EXIT_TIMED_OUT

    return await executor.run_compound(body, stdin, error_destination, state, in_pipeline, attached)
