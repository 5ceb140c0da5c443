"""A program's standard streams by their descriptors, and the noise libraries printed in a guest.

In a command line the guest's programs read and write Python streams the shell hands them (a
pipe's, a file's), not descriptors 0-2, so `open(0).read()` (how competitive-programming and filter
scripts read their input) and `os.read(0, n)` read the guest's own, empty, stdin and the program
went on with no input and status 0 (guest/declaw_posix/process.py's `_read`, the boot's `open`).
`sys.stdin.fileno()` raised (it is 0: `os.read`, `open`, `select` and a child's `stdin=sys.stdin` take it as
the program's stdin). `os.get_terminal_size` was missing (AttributeError where code's fallback catches OSError). Each
program runs natively (this machine's CPython) and in a sandbox with the same stdin: the outputs
must match. tqdm's monitor thread and matplotlib's `plt.show()` warned on stderr at every use; a
guest's stderr must now hold nothing of theirs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from declaw_wasm import Sandbox

pytestmark = pytest.mark.guest

PROGS = {
    "open0": ("print(repr(open(0).read()))", "a\nb\n"),
    "open0_numbers": ("a, b = map(int, open(0).read().split()); print(a + b)", "3 4\n"),
    "open0_binary": ("data = open(0, 'rb').read(); print(len(data), data[:3])", "xyz\x01\n"),
    "os_read0": ("import os; print(os.read(0, 2), os.read(0, 10), os.read(0, 5))", "xyz"),
    "os_read0_lines": ("import os, sys\nchunks = []\nwhile True:\n    c = os.read(0, 3)\n    if not c: break\n"
                       "    chunks.append(c)\nprint(b''.join(chunks).decode().split())", "one two\nthree\n"),
    "open1": ("import sys\nf = open(1, 'w', closefd=False); f.write('to fd 1\\n'); f.flush()\nprint('after')", ""),
    "open2": ("import sys\nf = open(2, 'w', closefd=False); f.write('err\\n'); f.flush()\nprint('out')", ""),
    "stdin_then_fd": ("import sys, os\nprint(sys.stdin.readline().strip())", "first\nsecond\n"),
    "stdin_fileno": ("import os, sys\nfd = sys.stdin.fileno(); print(fd, os.read(fd, 3))\n"
                     "print(repr(open(sys.stdin.fileno(), closefd=False).read()))", "abc\ndef\n"),
    "stdin_select": ("import select, sys\nready = select.select([sys.stdin], [], [], 0)[0]\n"
                     "print('piped' if ready else 'none', repr(sys.stdin.read()))", "data\n"),
    "stdin_to_child": ("import subprocess, sys\nout = subprocess.run([sys.executable, '-c', "
                       "'import sys; print(sys.stdin.read().upper())'], stdin=sys.stdin, capture_output=True, "
                       "text=True).stdout\nprint(repr(out))", "to the child\n"),
    "terminal_size": ("import os\ntry: print(os.get_terminal_size().columns)\nexcept OSError: print('no tty')\n"
                      "import shutil; print(shutil.get_terminal_size((81, 25)))", ""),
}


def _native(tmp_path: Path, source: str, stdin: str) -> tuple[str, str]:
    done = subprocess.run([sys.executable, "-c", source], input=stdin, capture_output=True, text=True,
                          cwd=tmp_path, timeout=60, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    return done.stdout, done.stderr


@pytest.mark.parametrize("name", sorted(PROGS))
def test_as_cpython_on_linux(fresh: Sandbox, tmp_path: Path, name: str) -> None:
    source, stdin = PROGS[name]
    native_out, native_err = _native(tmp_path, source, stdin)
    fresh.files.write("/home/user/prog.py", source)
    fresh.files.write("/home/user/stdin.txt", stdin)
    piped = fresh.commands.run("cat /home/user/stdin.txt | python3 /home/user/prog.py", timeout=60)
    redirected = fresh.commands.run("python3 /home/user/prog.py < /home/user/stdin.txt", timeout=60)
    assert (piped.stdout, piped.stderr) == (native_out, native_err)
    assert (redirected.stdout, redirected.stderr) == (native_out, native_err)


def test_libraries_print_no_warning_of_the_guest(fresh: Sandbox) -> None:
    fresh.files.write("/home/user/noise.py", "import sys\n"
                      "from tqdm import tqdm\n"
                      "for _ in tqdm(range(3), file=sys.stdout): pass\n"
                      "import matplotlib.pyplot as plt\n"
                      "plt.plot([1, 2]); plt.show(); plt.show()\n"
                      "print('done')\n")
    for line in ("python3 /home/user/noise.py", "python3 /home/user/noise.py; python3 /home/user/noise.py"):
        run = fresh.commands.run(line, timeout=120)
        assert run.exit_code == 0 and run.stdout.rstrip().endswith("done"), run
        assert run.stderr == "", run.stderr
