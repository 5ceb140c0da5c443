"""`date` in the sandbox's shell (guest/declaw_shell/datecmd.py) against GNU date 9.1: each case of
date_cases.py runs on the host and in a sandbox with the same $TZ and must print the same
stdout and stderr with the same status. The forms relative to now are checked against the
sandbox's own clock; setting the clock is refused."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from declaw_wasm import Sandbox
from shell.date_cases import CASES

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)
GNU_DATE = shutil.which("date")


def _is_gnu() -> bool:
    if GNU_DATE is None:
        return False
    return "GNU coreutils" in subprocess.run([GNU_DATE, "--version"], capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def date_sbx() -> Iterator[Sandbox]:
    sandbox = Sandbox.create(timeout=1800)
    yield sandbox
    sandbox.kill()


@pytest.mark.skipif(not _is_gnu(), reason="needs GNU date on the host")
@pytest.mark.parametrize("case", range(len(CASES)),
                         ids=lambda i: "TZ=%s %s" % (CASES[i][1], " ".join(CASES[i][0]))[:70])
def test_date_as_gnu_date(date_sbx: Sandbox, case: int) -> None:
    args, tz = CASES[case]
    assert "-s" not in args and not any(a.startswith("--set") for a in args)  # never the host's clock
    host = subprocess.run(["date", *args], capture_output=True, text=True, timeout=10,
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TZ": tz, "LC_ALL": "C.UTF-8"})
    run = date_sbx.commands.run("date " + " ".join(shlex.quote(a) for a in args), envs={"TZ": tz}, timeout=60)
    assert (run.stdout, run.exit_code, run.stderr) == (host.stdout, host.returncode, host.stderr)


def _numbers(sandbox: Sandbox, line: str) -> list[int]:
    run = sandbox.commands.run(line, timeout=60)
    assert run.exit_code == 0, run.stderr
    return [int(word) for word in run.stdout.split()]


def test_date_relative_to_now(date_sbx: Sandbox) -> None:
    now, yesterday, ago, later, weekday, friday, next_fri, last_fri = _numbers(
        date_sbx, "date +%s; date -d yesterday +%s; date -d '3 days ago' +%s; date -d '+90 minutes' +%s; "
                  "date +%u; date -d friday +%u; date -d 'next friday' +%s; date -d 'last friday' +%s")
    assert abs(yesterday - (now - 86400)) <= 2 and abs(ago - (now - 3 * 86400)) <= 2
    assert abs(later - (now + 5400)) <= 2
    assert friday == 5
    # GNU: 'next friday' and 'last friday' are midnights a week apart from the coming or past Friday;
    # on a Friday they are the next and the previous week's (so up to 8 days back, as bash's date)
    assert 0 < next_fri - now <= 7 * 86400 and -8 * 86400 < last_fri - now < 0
    assert next_fri % 86400 == 0 and last_fri % 86400 == 0 and (next_fri - last_fri) in (7 * 86400, 14 * 86400)
    (today_noon,) = _numbers(date_sbx, "date -d \"$(date +%F) 12:00\" +%H%M")
    assert today_noon == 1200


def test_date_defaults_reference_and_file(date_sbx: Sandbox) -> None:
    run = date_sbx.commands.run("TZ=UTC date -d '2024-01-02 03:04:05'; touch -d @0 old 2>/dev/null || true; "
                                "printf '2024-01-02\\n@86400\\nbogus\\n' > dates; date -u -f dates +%F; echo $?; "
                                "echo x > f; [ \"$(date -r f +%s)\" -le \"$(date +%s)\" ] && echo ref-ok")
    assert run.stdout == "Tue Jan  2 03:04:05 UTC 2024\n2024-01-02\n1970-01-02\n1\nref-ok\n"
    assert run.stderr == "date: invalid date ‘bogus’\n"


def test_date_never_sets_the_clock(date_sbx: Sandbox) -> None:
    run = date_sbx.commands.run("date -s '2020-01-01'; echo $?; date 0101000020; echo $?; date +%Y")
    lines = run.stdout.split("\n")
    assert lines[:2] == ["1", "1"] and int(lines[2]) >= 2026
    assert run.stderr == "date: cannot set date: Operation not permitted\n" * 2
