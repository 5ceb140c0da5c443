"""The commands API around the in-guest shell: background commands, stdin, streaming, PTYs.

What bash itself prints is checked against real bash in tests/shell/; here, what E2B's
Commands and Pty surfaces promise."""

from __future__ import annotations

import time
from typing import Any, Callable

import anyio
import pytest

from declaw_wasm import (AsyncSandbox, CommandExitException, CommandHandle, NotFoundException, PtySize, Sandbox,
                         SandboxException, TimeoutException)
from waiting import until  # tests/ is on sys.path

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


@pytest.mark.served
def test_output_streams_while_the_command_runs(sbx: Sandbox) -> None:
    chunks: list[tuple[float, str]] = []
    start = time.monotonic()
    code = "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(1)"
    sbx.files.write("/tmp/stream.py", code)
    r = sbx.commands.run("python3 /tmp/stream.py",
                         on_stdout=lambda s: chunks.append((time.monotonic() - start, s)))
    assert r.stdout == "0\n1\n2\n"
    assert [text for _, text in chunks] == ["0\n", "1\n", "2\n"]
    gaps = [b[0] - a[0] for a, b in zip(chunks, chunks[1:], strict=False)]
    assert all(gap > 0.5 for gap in gaps), gaps  # each arrived as written, not at the end


@pytest.mark.served
def test_utf8_split_across_writes_is_decoded_whole(sbx: Sandbox) -> None:
    code = ("import sys, time; b = 'é€'.encode()\n"
            "for i in range(len(b)):\n    sys.stdout.buffer.write(b[i:i+1]); sys.stdout.flush(); time.sleep(0.05)")
    chunks: list[str] = []
    r = sbx.commands.run(f"python3 -c \"{code}\"", on_stdout=chunks.append)
    assert r.stdout == "é€" and "".join(chunks) == "é€" and "\ufffd" not in "".join(chunks)


@pytest.mark.served
def test_background_command_returns_a_handle_at_once(sbx: Sandbox) -> None:
    start = time.monotonic()
    handle = sbx.commands.run("sleep 1; echo late", background=True, envs={"K": "v"}, cwd="/tmp")
    assert isinstance(handle, CommandHandle) and time.monotonic() - start < 1.0
    info = {p.pid: p for p in sbx.commands.list()}[handle.pid]
    assert (info.cmd, info.cwd, info.envs) == ("sleep 1; echo late", "/tmp", {"K": "v"})
    result = handle.wait()
    assert (result.stdout, result.exit_code) == ("late\n", 0)
    assert handle.pid not in {p.pid for p in sbx.commands.list()}


@pytest.mark.served
def test_background_commands_run_at_once_and_share_files(sbx: Sandbox) -> None:
    waiter = sbx.commands.run("while [ ! -f /tmp/flag-bg ]; do sleep 0.1; done; cat /tmp/flag-bg",
                              background=True, timeout=30)
    setter = sbx.commands.run("echo from-the-other > /tmp/flag-bg", background=True)
    assert setter.wait().exit_code == 0
    assert waiter.wait().stdout == "from-the-other\n"


@pytest.mark.served
def test_iterating_a_handle_gives_output_tuples(sbx: Sandbox) -> None:
    handle = sbx.commands.run("echo a; echo b >&2; echo c", background=True)
    items = list(handle)
    assert all(sum(x is not None for x in item) == 1 for item in items)
    assert "".join(o for o, _, _ in items if o) == "a\nc\n"
    assert "".join(e for _, e, _ in items if e) == "b\n"


@pytest.mark.served
def test_stdin_reaches_a_pipeline_and_python(sbx: Sandbox) -> None:
    handle = sbx.commands.run("cat | tr a-z A-Z", background=True, stdin=True)
    handle.send_stdin("hello\n")
    sbx.commands.send_stdin(handle.pid, b"world\n")
    handle.close_stdin()
    assert handle.wait().stdout == "HELLO\nWORLD\n"
    handle = sbx.commands.run("python3 -c 'print(input()[::-1]); print(input())'", background=True,
                              stdin=True)
    handle.send_stdin("abc\nxyz\n")
    assert handle.wait().stdout == "cba\nxyz\n"


@pytest.mark.served
def test_stdin_data_given_up_front(sbx: Sandbox) -> None:
    assert sbx.commands.run("read a b; echo \"$b-$a\"", stdin="one two\n").stdout == "two-one\n"
    assert sbx.commands.run("wc -l").stdout.strip() == "0"  # no stdin: end of input at once


@pytest.mark.served
def test_sending_to_closed_stdin_says_so(sbx: Sandbox) -> None:
    handle = sbx.commands.run("sleep 5", background=True)
    with pytest.raises(SandboxException, match="stdin"):
        handle.send_stdin("x")
    assert handle.kill()


@pytest.mark.served
def test_kill_list_and_connect(sbx: Sandbox) -> None:
    seen: list[str] = []
    handle = sbx.commands.run("echo started; sleep 30", background=True, on_stdout=seen.append)
    until(lambda: "started\n" in seen)
    connected = sbx.commands.connect(handle.pid)
    assert sbx.commands.kill(handle.pid) is True
    with pytest.raises(CommandExitException) as raised:  # a background wait raises on non-zero
        connected.wait()
    result = raised.value
    assert (result.exit_code, result.error, result.stdout) == (137, "killed", "started\n")
    assert sbx.commands.kill(handle.pid) is False
    with pytest.raises(NotFoundException):
        sbx.commands.connect(handle.pid)


@pytest.mark.served
def test_background_timeout_raises_on_wait(sbx: Sandbox) -> None:
    handle = sbx.commands.run("sleep 30", background=True, timeout=1)
    start = time.monotonic()
    with pytest.raises(TimeoutException):
        handle.wait()
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("line, code", [("exit 200", 200), ("python3 -c 'import sys; sys.exit(130)'", 130),
                                        ("exit 126", 126), ("(exit 255); echo $?", 0)])
def test_exit_statuses_above_125_come_through(sbx: Sandbox, line: str, code: int) -> None:
    assert sbx.commands.run(line).exit_code == code


def test_killing_the_sandbox_stops_background_commands() -> None:
    sandbox = Sandbox.create()
    handle = sandbox.commands.run("sleep 60", background=True)
    sandbox.kill()
    with pytest.raises(SandboxException, match="killed"):
        handle.wait()


def _pty_session(sbx: Sandbox, *inputs: bytes | Callable[[Any], None],
                 size: PtySize | None = None) -> tuple[str, list[bytes]]:
    output: list[bytes] = []
    handle = sbx.pty.create(size or PtySize(24, 80), on_data=output.append, timeout=60)
    text = lambda: b"".join(output).decode()  # noqa: E731
    until(lambda: text().endswith("$ "))
    for data in inputs:
        if callable(data):
            data(handle)
            continue

        def answered(seen: int = len(text())) -> bool:
            return len(text()) > seen and (text().endswith("$ ") or text().endswith(">>> "))

        handle.send_stdin(data)
        until(answered)
    handle.send_stdin(b"exit\n")
    handle.wait()
    return text(), output


@pytest.mark.served
def test_pty_is_an_interactive_shell(sbx: Sandbox) -> None:
    text, _ = _pty_session(sbx, b"cd /tmp && echo hi-$((6*7))\r", b"pwd\n")
    assert text.startswith("user@sandbox:~$ ")
    assert "cd /tmp && echo hi-$((6*7))\r\nhi-42\r\n" in text  # echo, CRLF, output
    assert "user@sandbox:/tmp$ pwd\r\n/tmp\r\n" in text


@pytest.mark.served
def test_pty_size_follows_resize(sbx: Sandbox) -> None:
    def resize(handle: Any) -> None:
        sbx.pty.resize(handle.pid, PtySize(rows=40, cols=123))

    text, _ = _pty_session(sbx, b"tput cols; echo $COLUMNS\n", resize, b"tput cols; tput lines; echo $COLUMNS\n",
                           size=PtySize(24, 80))
    assert "80\r\n80\r\n" in text and "123\r\n40\r\n123\r\n" in text


@pytest.mark.served
def test_python3_on_a_pty_is_the_repl(sbx: Sandbox) -> None:
    text, _ = _pty_session(sbx, b"python3\n", b"x = 6 * 7\n", b"x\n", b"exit()\n")
    assert ">>> x\r\n42\r\n>>> " in text
    assert text.rstrip().endswith("exit")


@pytest.mark.served
def test_pty_line_editing_and_kill(sbx: Sandbox) -> None:
    output: list[bytes] = []
    handle = sbx.pty.create(PtySize(24, 80), on_data=output.append)
    until(lambda: b"".join(output).endswith(b"$ "))
    handle.send_stdin(b"echo abX\x7fc\n")
    until(lambda: b"".join(output).count(b"$ ") >= 2)
    assert b"\r\nabc\r\n" in b"".join(output)
    assert sbx.pty.kill(handle.pid) is True
    with pytest.raises(CommandExitException) as raised:
        handle.wait()
    assert raised.value.exit_code == 137


def test_async_background_handle_and_pty() -> None:
    async def main() -> None:
        sandbox = await AsyncSandbox.create()
        try:
            seen: list[str] = []

            async def on_stdout(text: str) -> None:
                seen.append(text)

            handle = await sandbox.commands.run("cat; echo end", background=True, stdin=True,
                                                on_stdout=on_stdout)
            await handle.send_stdin("in\n")
            await handle.close_stdin()
            result = await handle.wait()
            assert (result.stdout, handle.exit_code, handle.stdout) == ("in\nend\n", 0, "in\nend\n")
            assert "".join(seen) == "in\nend\n"
            data: list[bytes] = []
            pty = await sandbox.pty.create(PtySize(24, 80), on_data=data.append)
            await sandbox.pty.send_stdin(pty.pid, b"echo async-pty\nexit\n")
            await pty.wait()
            assert b"async-pty\r\n" in b"".join(data)
        finally:
            await sandbox.kill()

    anyio.run(main)
