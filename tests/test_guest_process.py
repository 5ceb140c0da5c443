"""A program's interpreter state is its own, as a process's is (guest/declaw_posix/process.py).

The programs of a command line run one after another in the guest's one interpreter. Before, what
one changed reached the next and the shell: a `sys.settrace`, `builtins.print = None`, a module
replaced in `sys.modules`, `gc.disable()`, `warnings.simplefilter("error")`, decimal's precision,
the umask, socket's default timeout all carried over; `random.seed(1)` made the next program's
numbers the seeded ones; the first program's `logging.basicConfig` turned the next one's into a
no-op that logged to the first one's stderr; `cd a && python3 -c 'import cfg'` then `cd b && ...`
imported a's cfg.py again; `sys.stdout.close()` or `os.close(1)` ended the whole command line
(the shell's own stream was closed); `os.write(1, ...)` and `sys.__stdout__` went past the line's
redirections and pipes; `-W error`, `-Xutf8` and PYTHONWARNINGS were ignored or refused.

Each line runs natively (bash and this machine's CPython) and in a sandbox: the outputs must match."""

from __future__ import annotations

import pytest

from declaw_wasm import Sandbox

from hostbash import host_bash  # tests/ is on sys.path

pytestmark = pytest.mark.guest


def _py(code: str) -> str:
    return "python3 -c '%s'" % code


LINES = [
    # sys's hooks and limits
    _py("import sys; sys.settrace(lambda *a: None); sys.setprofile(lambda *a: None)") + "; "
    + _py("import sys; print(sys.gettrace(), sys.getprofile())"),
    _py("import sys; sys.excepthook = lambda *a: print(\"hook\")") + "; " + _py("1/0") + " 2>/dev/null; echo $?",
    _py("import sys; sys.setrecursionlimit(200)") + "; " + _py("import sys; print(sys.getrecursionlimit())"),
    _py("import sys\nclass No:\n def find_spec(self, *a): raise ImportError(\"blocked\")\n"
        "sys.meta_path.insert(0, No())") + "; " + _py("import json; print(json.dumps([1]))"),
    # builtins and sys.modules
    _py("import builtins; builtins.print = None; builtins.extra = 1") + "; "
    + _py("print(1, \"extra\" in dir(__builtins__))"),
    _py("import sys, types; sys.modules[\"json\"] = types.ModuleType(\"json\"); del sys.modules[\"os\"]; "
        "sys.modules[\"fake\"] = object()") + "; "
    + _py("import json, os, sys; print(json.dumps(1), os.sep, \"fake\" in sys.modules)"),
    # the program's own modules are the next one's only if they are its own too
    "d=$(mktemp -d); mkdir $d/a $d/b; echo \"X = 1\" > $d/a/cfg.py; echo \"X = 2\" > $d/b/cfg.py; "
    "cd $d/a && " + _py("import cfg; print(cfg.X)") + "; cd $d/b && " + _py("import cfg; print(cfg.X)")
    + "; PYTHONPATH=$d/a " + _py("import cfg; print(cfg.X)") + "; rm -r $d",
    # the collector, the umask, socket's timeout, decimal, tempfile, random
    _py("import gc; gc.disable(); gc.set_threshold(1)") + "; "
    + _py("import gc; print(gc.isenabled(), gc.get_threshold()[0] > 1)"),
    _py("import os; os.umask(0o777)") + "; " + _py("import os; print(os.umask(0) != 0o777)"),
    _py("import socket; socket.setdefaulttimeout(0.001)") + "; "
    + _py("import socket; print(socket.getdefaulttimeout())"),
    _py("import decimal; decimal.getcontext().prec = 3") + "; "
    + _py("import decimal; print(decimal.getcontext().prec)"),
    _py("import tempfile; tempfile.tempdir = \"/nowhere\"") + "; "
    + _py("import tempfile; print(tempfile.gettempdir() != \"/nowhere\")"),
    _py("import random; random.seed(1)") + "; " + _py("import random; print(random.random() != 0.13436424411240122)"),
    # warnings: filters, -W, PYTHONWARNINGS, and a warning shown again by the next program
    _py("import warnings; warnings.simplefilter(\"error\")") + "; "
    + _py("import warnings; print(any(f[0] == \"error\" for f in warnings.filters))"),
    "python3 -W error -c 'import warnings; warnings.warn(\"x\")' 2>/dev/null; echo $?; "
    "PYTHONWARNINGS=error python3 -c 'import warnings; warnings.warn(\"y\")' 2>/dev/null; echo $?; "
    "python3 -Werror::DeprecationWarning -Xutf8 -c 'print(3)'; python3 -W ignore -c 'print(4)'",
    "for i in 1 2; do " + _py("import warnings\ndef f(): warnings.warn(\"again\", UserWarning)\nf()")
    + " 2>&1 | grep -c \"UserWarning: again\"; done",
    # logging: the next program configures its own, to its own stderr
    _py("import logging; logging.basicConfig(level=logging.INFO, format=\"one %(message)s\"); "
        "logging.getLogger(\"app\").addHandler(logging.StreamHandler()); logging.info(\"a\")") + " 2>/dev/null; "
    + _py("import logging; logging.basicConfig(level=logging.INFO, format=\"two %(message)s\"); "
          "logging.info(\"b\"); logging.getLogger(\"app\").warning(\"c\")") + " 2>&1",
    # the standard streams: closed for the program only; fds 1 and 2 are the line's
    _py("import sys; sys.stdout.close()") + "; echo $?; " + _py("import os; os.close(1); os.close(2)") + "; echo $?; "
    + _py("import sys; sys.stdout.close(); print(1)") + " 2>/dev/null; echo $?",
    _py("import os; os.write(1, b\"to one\\n\"); os.write(2, b\"to two\\n\")") + " 2>&1 >/dev/null | tr a-z A-Z",
    _py("import sys; print(\"dunder\", file=sys.__stdout__)") + " | tr a-z A-Z",
]


@pytest.mark.parametrize("line", LINES, ids=[line[:50] for line in LINES])
def test_the_next_program_starts_as_a_new_process(fresh: Sandbox, line: str) -> None:
    native = host_bash(["-c", line], capture_output=True, text=True, timeout=60)
    assert native.returncode == 0 and native.stdout, native
    guest = fresh.commands.run(line, cwd="/home/user", timeout=60)
    assert (guest.stdout, guest.exit_code) == (native.stdout, 0), guest.stderr


def test_the_shell_is_as_it_was(fresh: Sandbox) -> None:
    """A program that changes all of it at once, then the shell's own commands and a program."""
    wreck = _py("import builtins, sys, gc, logging, warnings\nsys.settrace(lambda *a: None)\n"
                "gc.disable(); logging.basicConfig(); warnings.simplefilter(\"error\")\n"
                "builtins.len = None; sys.modules.clear()")
    r = fresh.commands.run(wreck + "; echo $? | tr 0 o; ls -d /tmp; " + _py("print(len([1, 2]))"), timeout=60)
    assert (r.stdout, r.exit_code) == ("o\n/tmp\n2\n", 0), r.stderr


def test_a_cells_program_starts_with_logging_unconfigured_and_the_cells_stays(fresh: Sandbox) -> None:
    """A cell's `!python3` runs as a new process would: the cell's logging set aside for it (its
    basicConfig is not a no-op) and put back after it, handlers and all."""
    first = fresh.run_code("import logging; logging.basicConfig(level=logging.INFO, format='cell %(message)s'); "
                           "logging.info('x')")
    program = fresh.run_code("!python3 -c 'import logging; logging.basicConfig(format=\"prog %(message)s\"); "
                             "logging.warning(\"p\")'")
    after = fresh.run_code("logging.info('y')")
    assert (first.logs.stderr, program.logs.stderr, after.logs.stderr) == (["cell x\n"], ["prog p\n"], ["cell y\n"])
