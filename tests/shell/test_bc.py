"""`bc` in the sandbox's shell (guest/declaw_shell/bc.py) against GNU bc 1.07.1.

Each case of bc_cases.py runs as `bc ARGS < .stdin` under the host's bc (Debian's, installed by
the README's test command where it can) and in a sandbox: stdout, the exit status and stderr
must match, GNU's `adr=N` (a bytecode address) taken out of its runtime errors. The guest tests
at the end are the shell's side (`which bc`, pipes, here-strings, files) and hostile programs
(nesting deeper than any stack, recursion without end, numbers of a million digits), which end
with bc's error, not a crashed guest."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from declaw_wasm import Sandbox
from shell.bc_cases import CASES

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)

HOST_BC = shutil.which("bc")
FOLDER = "/home/user/bccases"


@pytest.fixture(scope="module")
def bc_sbx() -> Iterator[Sandbox]:
    sandbox = Sandbox.create(timeout=1800)
    sandbox.commands.run(f"mkdir -p {FOLDER}")
    yield sandbox
    sandbox.kill()


def _guest(sandbox: Sandbox, args: list[str], stdin: str, env: dict[str, str] | None) -> tuple[str, int, str]:
    sandbox.files.write(f"{FOLDER}/.stdin", stdin)
    run = sandbox.commands.run("bc " + " ".join(shlex.quote(a) for a in args) + " < .stdin", cwd=FOLDER,
                               envs=env or {}, timeout=120)
    return run.stdout, run.exit_code, run.stderr


@pytest.mark.skipif(HOST_BC is None, reason="needs bc on the host (apt-get install bc)")
@pytest.mark.parametrize("case", range(len(CASES)), ids=lambda i: (" ".join(CASES[i][0]) + " " + CASES[i][1])[:50])
def test_bc_as_gnu_bc(bc_sbx: Sandbox, case: int) -> None:
    args, stdin, env = CASES[case]
    assert HOST_BC is not None
    host = subprocess.run(["bc", *args], executable=HOST_BC, input=stdin, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", **(env or {})})
    out, code, err = _guest(bc_sbx, args, stdin, env)
    assert (out, code) == (host.stdout, host.returncode)
    assert err == re.sub(r", adr=-?\d+", "", host.stderr)


def test_bc_in_the_shell(bc_sbx: Sandbox) -> None:
    run = bc_sbx.commands.run("command -v bc && which bc && bc --version | head -1")
    assert run.stdout == "/usr/bin/bc\n/usr/bin/bc\nbc 1.07.1\n"
    line = ("used=37; total=120; echo \"scale=2; $used * 100 / $total\" | bc; bc -l <<< 'scale=5; s(1)'; "
            "printf 'define sq(x) { return x * x; }\\n' > lib.bc; echo 'sq(12)' | bc lib.bc; "
            "if [ $(echo '1.5 > 1.2' | bc) -eq 1 ]; then echo bigger; fi; "
            "x=$(bc <<< '2^64'); echo ${#x}")
    run = bc_sbx.commands.run(line, cwd=FOLDER)
    assert run.stdout == "30.83\n.84147\n144\nbigger\n20\n", run.stderr


def test_bc_hostile_programs_end_with_an_error(bc_sbx: Sandbox) -> None:
    # parentheses deeper than the parser takes: bison's "memory exhausted", and bc ends (as GNU's,
    # whose stack holds ~9 990; ours 2 500); 2 400 work
    run = bc_sbx.commands.run("python3 -c \"print('(' * 100000 + '1' + ')' * 100000); print(7)\" | bc; echo s=$?; "
                              "python3 -c \"print('(' * 2400 + '2' + ')' * 2400)\" | bc", timeout=120)
    assert run.stdout == "s=0\n2\n"
    assert "memory exhausted" in run.stderr
    # recursion without end stops with an error; 900 calls deep work
    run = bc_sbx.commands.run("printf 'define r(n) { if (n == 0) return 0; return r(n - 1) + 1; }\\n"
                              "r(900)\\nr(100000)\\n5\\n' | bc; echo s=$?", timeout=120)
    assert run.stdout == "900\n5\ns=0\n"
    assert "nesting too deep" in run.stderr
    # numbers past CPython's 4300-digit cap on int <-> str, in and out
    run = bc_sbx.commands.run("echo 'x = 7^20000; length(x); x % 1000' | bc; "
                              "python3 -c \"print('9' * 50000 + ' + 1')\" | BC_LINE_LENGTH=0 bc | wc -c", timeout=120)
    assert run.stdout == "16902\n1\n50002\n", run.stderr
    # strings are data: nothing runs
    run = bc_sbx.commands.run("echo 'print \"$(touch /tmp/pwned)\\n\"' | bc; ls /tmp/pwned 2>&1 | head -1")
    assert run.stdout.startswith("$(touch /tmp/pwned)\n") and "No such file" in run.stdout
