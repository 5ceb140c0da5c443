"""Shell gaps agent frameworks hit (issue 16), where the answer is not one real bash can give on
this machine: live stdin passed on at once, `timeout` stopping what it can, `sudo` as one user,
/workspace and /root, the /usr/bin the guest shows, and the command lines LangChain Deep Agents'
and OpenAI Agents' sandbox tools send. What bash itself prints is in tests/shell/gap_cases.py."""

from __future__ import annotations

import base64
import json
import time
from typing import Callable

import anyio
import pytest

from declaw_wasm import (
    AsyncSandbox,
    Limits,
    NotEnoughSpaceException,
    Sandbox,
    TimeoutException,
)

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


def _until(predicate: Callable[[], bool], timeout: float = 5.0) -> float:
    """Seconds until `predicate()` held; fails after `timeout`."""
    start = time.monotonic()
    while not predicate():
        assert time.monotonic() - start < timeout, "timed out waiting"
        time.sleep(0.01)
    return time.monotonic() - start


# -- bytes that are not UTF-8 -------------------------------------------------------------------
def test_printf_writes_bytes(local_sbx: Sandbox) -> None:
    """`printf '\\377'` writes the byte 0xFF (to stdout, stderr and files), as bash does; the
    streams' text has U+FFFD for it, as for any output that is not UTF-8."""
    result = local_sbx.commands.run("printf '\\377'; printf '\\376' >&2")
    assert (result.stdout, result.stderr) == ("\ufffd", "\ufffd")
    local_sbx.commands.run("printf '\\x89PNG\\r\\n\\032\\n' > /tmp/img.bin; echo -ne '\\xff\\xd8' >> /tmp/img.bin")
    assert local_sbx.files.read("/tmp/img.bin", format="bytes") == b"\x89PNG\r\n\x1a\n\xff\xd8"
    result = local_sbx.commands.run("printf '\\377\\303\\251' | "
                                    "python3 -c 'import sys; print(sys.stdin.buffer.read())'")
    assert result.stdout == "b'\\xff\\xc3\\xa9'\n"


def test_python3_in_a_pipeline_passes_bytes_on(local_sbx: Sandbox) -> None:
    """A `python3` stage reads and writes bytes that are not UTF-8 as CPython 3.15 does on Linux
    (surrogateescape), so they pass through the pipe unchanged."""
    result = local_sbx.commands.run(
        "python3 -c 'import sys; sys.stdout.buffer.write(b\"\\xff\\n\")' | od -An -tx1; "
        "printf '\\377' | python3 -c 'import sys; print(ascii(sys.stdin.read()))'; "
        "printf 'a\\376' | python3 -c 'import sys; sys.stdout.write(sys.stdin.read())' > /tmp/py.bin")
    assert result.stdout == " ff 0a\n'\\udcff'\n"
    assert local_sbx.files.read("/tmp/py.bin", format="bytes") == b"a\xfe"


# -- live stdin, chunk by chunk ------------------------------------------------------------------
@pytest.mark.parametrize("cmd", ["cat", "cat -", "tee /tmp/tee-copy", "head -c 100"])
def test_partial_stdin_is_passed_on_at_once(local_sbx: Sandbox, cmd: str) -> None:
    seen: list[str] = []
    handle = local_sbx.commands.run(f"echo ready; {cmd}", stdin=True, background=True, on_stdout=seen.append)
    _until(lambda: "".join(seen) == "ready\n", 60)  # the guest is up (a cold start takes a while)
    handle.send_stdin("Hello")  # no newline
    assert _until(lambda: "".join(seen) == "ready\nHello") < 1.0
    handle.send_stdin("Hello,\nWorld!")  # several lines arrive whole
    assert _until(lambda: "".join(seen) == "ready\nHelloHello,\nWorld!") < 1.0
    handle.close_stdin()
    assert handle.wait().exit_code == 0


def test_head_c_ends_once_it_has_its_bytes(local_sbx: Sandbox) -> None:
    handle = local_sbx.commands.run("head -c 3; echo [done]", stdin=True, background=True)
    handle.send_stdin("abcdef")
    result = handle.wait()
    assert (result.stdout, result.exit_code) == ("abc[done]\n", 0)


def test_python_reads_one_character_as_it_arrives(local_sbx: Sandbox) -> None:
    seen: list[str] = []
    handle = local_sbx.commands.run(
        "python3 -c 'import sys; print(\"ready\", flush=True); print(repr(sys.stdin.read(1)), flush=True); "
        "print(sys.stdin.read())'", stdin=True, background=True, on_stdout=seen.append)
    _until(lambda: "".join(seen) == "ready\n", 60)
    handle.send_stdin("xy")
    assert _until(lambda: "".join(seen) == "ready\n'x'\n") < 1.0
    handle.send_stdin("z\r\n")  # CRLF reaches the program as sent, as on Linux
    handle.close_stdin()
    assert handle.wait().stdout == "ready\n'x'\nyz\r\n\n"


def test_async_cat_echoes_partial_stdin() -> None:
    async def main() -> None:
        sandbox = await AsyncSandbox.create()
        try:
            seen: list[str] = []

            async def on_stdout(text: str) -> None:
                seen.append(text)

            handle = await sandbox.commands.run("echo ready; cat", stdin=True, background=True,
                                                on_stdout=on_stdout)
            with anyio.fail_after(60):
                while "".join(seen) != "ready\n":
                    await anyio.sleep(0.01)
            await handle.send_stdin("Hello, World!")
            with anyio.fail_after(1):
                while "".join(seen) != "ready\nHello, World!":
                    await anyio.sleep(0.01)
            await handle.close_stdin()
            assert (await handle.wait()).exit_code == 0
        finally:
            await sandbox.kill()

    anyio.run(main)


# -- timeout -------------------------------------------------------------------------------------
def test_timeout_stops_a_command_waiting_for_stdin(local_sbx: Sandbox) -> None:
    start = time.monotonic()
    handle = local_sbx.commands.run("timeout 0.5 cat; echo $?", stdin=True, background=True)
    result = handle.wait()
    assert result.stdout == "124\n" and time.monotonic() - start < 3


def test_timeout_stops_python_sleeping(local_sbx: Sandbox) -> None:
    start = time.monotonic()
    result = local_sbx.commands.run(
        "timeout 0.5 python3 -c 'import atexit, time; atexit.register(print, \"atexit\"); "
        "print(\"before\", flush=True); time.sleep(30); print(\"after\")'; echo $?")
    assert result.stdout == "before\n124\n" and result.stderr == ""  # no traceback, no atexit
    assert time.monotonic() - start < 5
    assert local_sbx.commands.run("python3 -c 'import time; time.sleep(0.01); print(1)'").stdout == "1\n"


def test_timeout_stops_a_busy_loop_and_the_command_timeout_ends_the_line(local_sbx: Sandbox) -> None:
    """`timeout`'s SIGTERM reaches a CPU-bound program (the host's deadline timer: docs/guest.md,
    "Timers and signals"), and the line goes on; the command's own timeout still ends a line."""
    started = time.monotonic()
    result = local_sbx.commands.run(
        "timeout 0.05 python3 -c 'import time\nt = time.monotonic()\nwhile time.monotonic() - t < 5: pass\n"
        "print(\"finished\")'; echo $?", timeout=30)
    assert result.stdout == "124\n", result
    assert time.monotonic() - started < 4
    with pytest.raises(TimeoutException):
        local_sbx.commands.run("python3 -c 'while True: pass'; echo never", timeout=1)


# -- sudo, /workspace, /root, /usr/bin -------------------------------------------------------------
def test_sudo_runs_the_command_as_is(local_sbx: Sandbox) -> None:
    run = local_sbx.commands.run
    assert run("sudo -u root -- echo hi").stdout == "hi\n"
    assert run("sudo whoami; whoami").stdout == "user\nuser\n"  # one user in a sandbox
    assert run("sudo -E bash -c 'echo $FOO'", envs={"FOO": "bar"}).stdout == "bar\n"
    assert (run('sudo echo "$FOO"').stdout, run('sudo echo "$FOO"').exit_code) == ("\n", 0)  # E2B's envs test
    assert run("sudo -u user -- sh -lc 'echo \"$1\"' sh arg").stdout == "arg\n"  # OpenAI Agents' shape
    assert run("sudo VAR=3 bash -c 'echo $VAR'; sudo -i echo login; sudo -D /tmp pwd").stdout \
        == "3\nlogin\n/tmp\n"
    missing = run("sudo nosuch_cmd")
    assert (missing.exit_code, missing.stderr) == (1, "sudo: nosuch_cmd: command not found\n")
    assert run("sudo").exit_code == 1


def test_workspace_is_writable_and_counted_in_the_disk_quota() -> None:
    with Sandbox.create(limits=Limits(disk_bytes=4 << 20)) as sandbox:
        result = sandbox.commands.run("mkdir -p /workspace/app && cd /workspace/app && echo hi > f && cat f")
        assert (result.stdout, result.exit_code) == ("hi\n", 0)
        assert sandbox.files.read("/workspace/app/f") == "hi\n"
        sandbox.files.write("/workspace/up.txt", "from the host")
        assert sandbox.commands.run("cat /workspace/up.txt").stdout == "from the host"
        with pytest.raises(NotEnoughSpaceException, match="disk_bytes"):
            sandbox.files.write("/workspace/big", b"x" * (8 << 20))
        result = sandbox.commands.run(
            "python3 -c \"f = open('/workspace/fill', 'wb')\nwhile True: f.write(b'x' * (1 << 20)); f.flush()\"",
            timeout=60)
        assert result.exit_code == 137 and "disk quota exceeded" in (result.error or "")


def test_dot_dot_climbs_out_of_a_mount_as_on_linux(local_sbx: Sandbox) -> None:
    """`cd ..` from /home/user (a mount of its own) is /home, `ls ../..` from a folder of it lists
    /: the shell takes `..` lexically, as bash's `cd` does (WASI resolves a path only within the
    mount it starts in: these said "No such file or directory")."""
    result = local_sbx.commands.run("mkdir -p /home/user/dd && cd /home/user/dd && ls ../.. | grep -c user; "
                                    "cd ../..; pwd; cd /home/user; cd ..; pwd; cd /tmp && cd .. && pwd")
    assert (result.stdout, result.stderr) == ("1\n/home\n/home\n/\n", "")


def test_root_exists_as_on_linux(local_sbx: Sandbox) -> None:
    assert local_sbx.commands.run("cd /root && pwd && ls -d /root").stdout == "/root\n/root\n"
    context = local_sbx.create_code_context(cwd="/root")  # E2B's create_code_context(cwd="/root")
    assert local_sbx.run_code("import os; print(os.getcwd())", context=context).logs.stdout == ["/root\n"]


def test_which_names_files_the_guest_has(local_sbx: Sandbox) -> None:
    result = local_sbx.commands.run(
        "which python3 bash sh ls timeout; test -f \"$(which python3)\" && [ -x /bin/bash ] && echo exists; "
        "ls /usr/bin | grep -cx python3; which nosuch_cmd; echo $?")
    assert result.stdout == ("/usr/bin/python3\n/usr/bin/bash\n/usr/bin/sh\n/usr/bin/ls\n/usr/bin/timeout\n"
                             "exists\n1\n1\n")
    assert local_sbx.commands.run("cat /usr/bin/ls").stdout == '#!/bin/sh\nexec ls "$@"\n'
    assert local_sbx.commands.run("type timeout sudo; command -v sh").stdout == \
        "timeout is /usr/bin/timeout\nsudo is /usr/bin/sudo\n/usr/bin/sh\n"


# -- scopes, streaming, PTY ------------------------------------------------------------------------
def test_a_bash_c_line_streams_its_output(local_sbx: Sandbox) -> None:
    arrivals: list[float] = []
    start = time.monotonic()
    local_sbx.commands.run("bash -lc 'echo a; sleep 1; echo b'",
                           on_stdout=lambda _: arrivals.append(time.monotonic() - start))
    assert len(arrivals) == 2 and arrivals[0] < arrivals[1] - 0.5


def test_bash_typed_at_a_pty_is_an_interactive_shell_of_its_own(local_sbx: Sandbox) -> None:
    from declaw_wasm import PtySize

    data: list[bytes] = []
    pty = local_sbx.pty.create(PtySize(24, 80), on_data=data.append)
    local_sbx.pty.send_stdin(pty.pid, b"X=outer; bash\n")
    _until(lambda: b"".join(data).count(b"$ ") >= 2)
    local_sbx.pty.send_stdin(pty.pid, b"echo \"[$X]\"; exit 3\n")
    local_sbx.pty.send_stdin(pty.pid, b"echo status=$? $X\nexit\n")
    assert pty.wait().exit_code == 0
    text = b"".join(data).decode()
    assert "[]\r\n" in text and "status=3 outer\r\n" in text


# -- what agent frameworks send ----------------------------------------------------------------------
def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_deep_agents_sandbox_command_shapes(local_sbx: Sandbox) -> None:
    """The shapes of LangChain Deep Agents' BaseSandbox commands (deepagents 0.7.32,
    backends/sandbox.py): grep as `grep -rHnFZ … || true` parsed at NUL bytes, the other tools as
    `python3 -c "…" 2>&1` with base64 arguments, an edit payload through a heredoc."""
    local_sbx.files.write("/workspace/da/main.py", "import os\n# TODO: one\n")
    local_sbx.files.write("/workspace/da/pkg/util.py", "x = 1  # TODO two\n")
    local_sbx.files.write("/workspace/da/.git/x", "TODO hidden\n")
    grep = ("{ if [ -d /workspace/da ] && command -v rg >/dev/null 2>&1; then rg -HnF0 -e TODO -- /workspace/da; "
            "else grep -rHnFZ --exclude-dir=.git --include='*.py' -e TODO /workspace/da; fi; } 2>/dev/null"
            " | head -n 11 || true")
    out = local_sbx.commands.run(grep)
    assert out.exit_code == 0
    found = sorted(tuple(line.split("\0", 1)) for line in out.stdout.splitlines())
    assert found == [("/workspace/da/main.py", "2:# TODO: one"), ("/workspace/da/pkg/util.py", "1:x = 1  # TODO two")]
    listing = local_sbx.commands.run(
        "python3 -c \"\nimport os, json, base64\npath = base64.b64decode('%s').decode('utf-8')\n"
        "for entry in os.scandir(path):\n    print(json.dumps({'path': os.path.join(path, entry.name), "
        "'is_dir': entry.is_dir(follow_symlinks=False)}))\n\" 2>/dev/null" % _b64("/workspace/da"))
    assert sorted(json.loads(line)["path"] for line in listing.stdout.splitlines()) == \
        ["/workspace/da/.git", "/workspace/da/main.py", "/workspace/da/pkg"]
    payload = _b64(json.dumps({"path": "/workspace/da/main.py", "old": "one", "new": "1"}))
    edit = local_sbx.commands.run(
        "python3 -c \"\nimport sys, base64, json\np = json.loads(base64.b64decode(sys.stdin.read().strip()))\n"
        "t = open(p['path']).read()\nopen(p['path'], 'w').write(t.replace(p['old'], p['new']))\n"
        "print(json.dumps({'count': t.count(p['old'])}))\n\" 2>&1 <<'__DEEPAGENTS_EDIT_EOF__'\n%s\n"
        "__DEEPAGENTS_EDIT_EOF__\n" % payload)
    assert json.loads(edit.stdout) == {"count": 1}
    assert local_sbx.files.read("/workspace/da/main.py") == "import os\n# TODO: 1\n"
    assert local_sbx.commands.run("test -e /workspace/da/pkg || test -L /workspace/da/pkg; rm -rf /workspace/da/pkg; "
                                  "test -e /workspace/da/pkg; echo $?").stdout == "1\n"


def test_openai_agents_sandbox_command_shapes(local_sbx: Sandbox) -> None:
    """OpenAI Agents' sandbox session (openai-agents 0.24) wraps commands as `sh -lc JOINED`,
    `sudo -u USER -- …`, and probes paths with small `sh -c SCRIPT sh PATH` scripts."""
    run = local_sbx.commands.run
    assert run("sh -lc 'mkdir -p /workspace/oa && cd /workspace/oa && echo ok > f && cat f'").stdout == "ok\n"
    write_check = ('target="$1"\nif [ -e "$target" ]; then\n    [ -f "$target" ]\n    exit $?\nfi\n'
                   'parent=$(dirname "$target")\n[ -d "$parent" ]\n')
    assert run("sh -lc '%s' sh /workspace/oa/new.txt; echo $?" % write_check.replace("'", "'\\''")).stdout == "0\n"
    assert run("sh -lc '%s' sh /workspace/oa/f; echo $?" % write_check.replace("'", "'\\''")).stdout == "0\n"
    assert run("sudo -u user -- sh -lc 'cat > \"$1\"' sh /workspace/oa/g <<< data; cat /workspace/oa/g").stdout \
        == "data\n"
    assert run("sh -c 'mv -- \"$1\" \"$2\"' sh /workspace/oa/g /workspace/oa/h && cat /workspace/oa/h").stdout \
        == "data\n"


def test_a_device_without_an_end_read_whole_is_an_error_not_a_crash(local_sbx: Sandbox) -> None:
    """Read whole, /dev/zero and /dev/urandom never end (Linux reads until memory runs out): the
    reader is told so at once (ENOMEM), as an error its program prints, and the line goes on
    (a MemoryError traceback ended the whole line). Read as consumed, they still stream."""
    run = local_sbx.commands.run("wc -c /dev/zero; echo $?; md5sum /dev/urandom; echo $?; "
                                 "head -c 3 /dev/zero | wc -c", timeout=60)
    assert run.stdout == "1\n1\n3\n", run
    assert run.stderr == ("wc: /dev/zero: Cannot allocate memory (the device has no end)\n"
                          "md5sum: /dev/urandom: Cannot allocate memory (the device has no end)\n"), run
