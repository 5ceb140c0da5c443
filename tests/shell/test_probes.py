"""What agents run to look at their machine before working: `--version` banners, `free`, `ps`,
`top -b`, `uptime`, `lscpu`, `python3 -m venv`, and block counts in `du`/`stat`/`ls -s`.

The figures come from the sandbox (its memory limit, its guests' memory, its running commands:
the door's `sysinfo` op), so they are checked against `get_metrics()`, `commands.list()` and the
layout of the real tools (column headers compared with the host's own `free`/`ps`/`top` where
the host has them), not against the host's values.
"""

from __future__ import annotations

import re
import shutil
from typing import Iterator

import pytest

from declaw_wasm import Sandbox
from hostbash import host_bash  # tests/ is on sys.path


pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


@pytest.fixture(scope="module")
def sbx() -> Iterator[Sandbox]:
    sandbox = Sandbox.create(timeout=600)
    yield sandbox
    sandbox.kill()


def run(sbx: Sandbox, line: str, **kw: object) -> tuple[str, str, int]:
    try:
        result = sbx.commands.run(line, timeout=60, **kw)  # type: ignore[arg-type]
        return result.stdout, result.stderr, result.exit_code
    except Exception as exc:  # CommandExitException carries the same fields
        return getattr(exc, "stdout", ""), getattr(exc, "stderr", str(exc)), getattr(exc, "exit_code", -1)


# line -> the first line of its output must match this (and say it is declaw-wasm's); exit 0
BANNERS = [
    ("curl --version", r"^curl \d+\.\d+\.\d+ \(wasm32-wasi\) declaw-wasm .*not libcurl"),
    ("curl -V", r"^curl \d+\.\d+\.\d+ "),
    ("wget --version", r"^GNU Wget \d+\.\d+\.\d+ compatible \(declaw-wasm\).*not GNU Wget"),
    ("wget -V", r"^GNU Wget "),
    ("tar --version", r"^tar \(declaw-wasm\) \d+\.\d+$"),
    ("zip -v", r"^This is Zip 3\.0 \(declaw-wasm\)"),
    ("unzip -v", r"^UnZip 6\.00 \(declaw-wasm\)"),
    ("gzip --version", r"^gzip \d+\.\d+ \(declaw-wasm\)$"),
    ("free --version", r"^free from procps-ng .*declaw-wasm"),
    ("ps --version", r"^ps from procps-ng .*declaw-wasm"),
    ("ls --version", r"^ls \(declaw-wasm coreutils\) 9\.1$"),
    ("sort --version", r"^sort \(declaw-wasm coreutils\) "),
    ("cat --version", r"^cat \(declaw-wasm coreutils\) "),
    ("grep --version", r"^grep \(declaw-wasm grep\) 3\.8$"),
    ("sed --version", r"^sed \(declaw-wasm sed\) "),
    ("find --version", r"^find \(declaw-wasm findutils\) "),
    ("xargs --version", r"^xargs \(declaw-wasm findutils\) "),
    ("diff --version", r"^diff \(declaw-wasm diffutils\) "),
    ("awk -W version", r"^awk version \d+ \(declaw-wasm"),
    ("awk --version", r"^awk version \d+ \(declaw-wasm"),
    ("curl --help", r"^Usage: curl \[options\.\.\.\] <url>$"),
    ("wget --help", r"^Usage: wget \[OPTION\]\.\.\. \[URL\]\.\.\.$"),
]


@pytest.mark.parametrize("line,pattern", BANNERS, ids=[b[0] for b in BANNERS])
def test_version_banners(sbx: Sandbox, line: str, pattern: str) -> None:
    out, err, code = run(sbx, line)
    assert code == 0, err
    assert re.search(pattern, out.splitlines()[0]), out
    assert "declaw-wasm" in out


def test_builtins_keep_their_arguments(sbx: Sandbox) -> None:
    out, _, code = run(sbx, "echo --version; printf '%s\\n' --version")
    assert (out, code) == ("--version\n--version\n", 0)


def test_other_options_still_reach_the_tool(sbx: Sandbox) -> None:
    out, _, code = run(sbx, "cd /tmp && echo hi > v.txt && tar -cf v.tar v.txt && tar -tf v.tar && "
                            "gzip -c v.txt | gzip -dc")
    assert (out, code) == ("v.txt\nhi\n", 0)
    _, err, code = run(sbx, "curl --bogus")
    assert code == 2 and "is unknown" in err


def _host_first_line(line: str) -> str | None:
    if shutil.which(line.split()[0]) is None:
        return None
    done = host_bash(["-c", line], capture_output=True, text=True, timeout=30)
    return done.stdout.splitlines()[0] if done.returncode == 0 and done.stdout else None


# the header lines are procps-ng's, character for character
HEADERS = [
    ("free", "               total        used        free      shared  buff/cache   available"),
    ("ps", "  PID TTY          TIME CMD"),
    ("ps aux", "USER       PID %CPU %MEM    VSZ   RSS TTY      STAT START   TIME COMMAND"),
    ("ps -ef", "UID        PID  PPID  C STIME TTY          TIME CMD"),
]


@pytest.mark.parametrize("line,header", HEADERS, ids=[h[0] for h in HEADERS])
def test_headers_are_procps(sbx: Sandbox, line: str, header: str) -> None:
    out, err, code = run(sbx, line)
    assert code == 0, err
    assert out.splitlines()[0] == header
    host = _host_first_line(line)
    if host is not None:
        assert host == header


def test_free_is_the_memory_limit_and_use(sbx: Sandbox) -> None:
    total = sbx.get_metrics()[-1].mem_total
    out, _, code = run(sbx, "free -b; free; free -m; free -h; free -bt")
    assert code == 0
    mems = [line.split() for line in out.splitlines() if line.startswith("Mem:")]
    limit = int(mems[0][1])
    assert limit == total
    used, free_ = int(mems[0][2]), int(mems[0][3])
    assert 0 < used < limit and used + free_ == limit and mems[0][6] == mems[0][3]
    assert int(mems[1][1]) == limit // 1024 and int(mems[2][1]) == limit >> 20
    assert re.fullmatch(r"[\d.]+[KMG]i", mems[3][1]) and mems[3][4] == "0B"
    assert [line.split()[0] for line in out.splitlines()[-3:]] == ["Mem:", "Swap:", "Total:"]
    _, err, code = run(sbx, "free -x")
    assert code == 1 and "invalid option -- 'x'" in err


def test_ps_lists_the_sandbox_commands(sbx: Sandbox) -> None:
    handle = sbx.commands.run("sleep 30 # server", background=True)
    try:
        out, _, code = run(sbx, "ps aux")
        assert code == 0
        rows = {int(line.split()[1]): line for line in out.splitlines()[1:]}
        assert handle.pid in rows and rows[handle.pid].endswith("/bin/bash -l -c sleep 30 # server")
        own = [line for line in rows.values() if line.endswith("-c ps aux")]
        assert len(own) == 1 and own[0].split()[7] == "R" and own[0].startswith("user ")
        assert {p.pid for p in sbx.commands.list()} <= set(rows)
        out, _, _ = run(sbx, "ps -ef | grep 'sleep 30' | grep -v grep")
        assert out.split()[1] == str(handle.pid)
        out, _, code = run(sbx, f"ps -p {handle.pid}")
        assert code == 0 and out.splitlines()[1].split() == [str(handle.pid), "?", "00:00:00", "bash"]
        _, _, code = run(sbx, "ps -p 99999")
        assert code == 1
        out, _, _ = run(sbx, "sleep 2 & ps -ef; wait")  # the line's own background jobs
        assert any(line.endswith(" sleep 2") for line in out.splitlines())
    finally:
        handle.kill()


def test_top_uptime_lscpu(sbx: Sandbox) -> None:
    out, _, code = run(sbx, "top -bn1")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("top - ") and lines[1].startswith("Tasks:")
    assert lines[6] == "  PID USER      PR  NI    VIRT    RES    SHR S  %CPU  %MEM     TIME+ COMMAND"
    out, _, code = run(sbx, "uptime; uptime -p")
    assert code == 0
    assert re.fullmatch(r" \d\d:\d\d:\d\d up .*,  1 user,  load average: [\d.]+, [\d.]+, [\d.]+\nup \d+ minutes?\n",
                        out), out
    out, _, code = run(sbx, "lscpu | grep -E '^(Architecture|CPU\\(s\\)):'")
    assert (out.split(), code) == (["Architecture:", "wasm32", "CPU(s):", "1"], 0)
    out, _, _ = run(sbx, "nproc; lscpu | awk '/^CPU\\(s\\)/{print $2}'")
    assert out == "1\n1\n"


def test_arch_locale_ulimit(sbx: Sandbox) -> None:
    out, _, code = run(sbx, "arch; uname -m; ulimit -n; ulimit; ulimit -n 4096; ulimit -n; ulimit -c -s")
    assert (out, code) == ("wasm32\nwasm32\n1024\nunlimited\n4096\n"
                           "core file size              (blocks, -c) 0\n"
                           "stack size                  (kbytes, -s) 8192\n", 0)
    _, err, code = run(sbx, "ulimit -Z")
    assert code == 2 and "-Z: invalid option" in err
    out, _, code = run(sbx, "ulimit -a")
    ours = [line.rsplit(" ", 1)[0] for line in out.splitlines()]
    host = host_bash(["-c", "ulimit -a"], capture_output=True, text=True).stdout
    assert code == 0 and ours == [line.rsplit(" ", 1)[0] for line in host.splitlines()]  # bash's layout
    out, _, code = run(sbx, "locale", envs={"LANG": "C.UTF-8"})
    assert code == 0 and out.splitlines()[:3] == ["LANG=C.UTF-8", "LANGUAGE=", 'LC_CTYPE="C.UTF-8"']
    assert out.splitlines()[-1] == "LC_ALL="


# (line, expected stdout): an agent's usual virtual-environment steps
VENV = [
    ("python3 -m venv .venv && . .venv/bin/activate && echo $VIRTUAL_ENV && which python pip "
     "&& python -c 'print(6*7)' && deactivate && echo \"[$VIRTUAL_ENV]\" && which python",
     "/home/user/.venv\n/home/user/.venv/bin/python\n/home/user/.venv/bin/pip\n42\n[]\n/usr/bin/python\n"),
    ("python3 -m venv /tmp/v2 && ls /tmp/v2 /tmp/v2/bin && grep -c . /tmp/v2/pyvenv.cfg >/dev/null && "
     "echo 'import sys; print(sys.argv[1:])' | /tmp/v2/bin/python3 - a b",
     "/tmp/v2:\nbin\ninclude\nlib\npyvenv.cfg\n\n/tmp/v2/bin:\nactivate\npip\npip3\npip3.15\npython\npython3\n"
     "python3.15\n['a', 'b']\n"),
    ("python3 -m venv --prompt demo /tmp/v3 && . /tmp/v3/bin/activate && echo \"$VIRTUAL_ENV_PROMPT\"",
     "(demo) \n"),
    ("python3 -c 'import venv, os; venv.create(\"/tmp/v4\"); print(os.path.isfile(\"/tmp/v4/bin/activate\"))'",
     "True\n"),
    ("python3 -m venv; echo $?", "2\n"),
]


@pytest.mark.parametrize("line,expected", VENV, ids=[f"venv{i}" for i in range(len(VENV))])
def test_venv(sbx: Sandbox, line: str, expected: str) -> None:
    out, err, code = run(sbx, line, cwd="/home/user")
    assert (out, code) == (expected, 0), err


# (line, expected stdout): blocks as ext4 allocates them (WASI reports none)
BLOCKS = [
    ("printf 12345678 > b8; du -s b8; ls -s b8; stat -c '%b %B' b8", "4\tb8\n4 b8\n8 512\n"),
    ("python3 -c 'open(\"b5k\", \"w\").write(\"x\" * 5000)'; du b5k; stat -c %b b5k", "8\tb5k\n16\n"),
    (": > empty; du empty; stat -c %b empty", "0\tempty\n0\n"),
    ("mkdir -p dd && echo x > dd/f && du -s dd", "8\tdd\n"),
    # its own file: parametrised cases may run on different workers, in any order
    ("printf 12345678 > p8; python3 -c 'import os; print(os.stat(\"p8\").st_blocks)'", "8\n"),
]


@pytest.mark.parametrize("line,expected", BLOCKS, ids=[f"blocks{i}" for i in range(len(BLOCKS))])
def test_blocks(sbx: Sandbox, line: str, expected: str) -> None:
    sbx.commands.run("mkdir -p /home/user/blk")
    out, err, code = run(sbx, line, cwd="/home/user/blk")
    assert (out, code) == (expected, 0), err
