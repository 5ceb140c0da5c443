"""Sandbox lifecycle: create, kill, connect, list, info, timeouts, async twin."""

import time

import anyio
import pytest

from declaw_wasm import (AsyncSandbox, InvalidArgumentException, Sandbox, SandboxException,
                         SandboxNotFoundException, TimeoutException)


@pytest.mark.guest
def test_kill_is_idempotent_and_static() -> None:
    s = Sandbox.create()
    assert s.is_running()
    assert s.kill() is True
    assert s.kill() is False
    assert not s.is_running()
    with pytest.raises(SandboxException, match="was killed"):
        s.commands.run("python3 -c 'print(1)'")
    t = Sandbox.create()
    assert Sandbox.kill(t.sandbox_id) is True
    assert Sandbox.kill(t.sandbox_id) is False


@pytest.mark.guest
def test_connect_list_and_info() -> None:
    s = Sandbox.create(metadata={"owner": "tests"})
    try:
        again = Sandbox.connect(s.sandbox_id)
        again.files.write("/tmp/shared", "same sandbox")
        assert s.files.read("/tmp/shared") == "same sandbox"
        ids = [i.sandbox_id for i in Sandbox.list().next_items()]
        assert s.sandbox_id in ids
        info = s.get_info()
        assert (info.sandbox_id, info.template_id, info.metadata) == \
            (s.sandbox_id, "code-interpreter", {"owner": "tests"})
        assert Sandbox.get_info(s.sandbox_id).sandbox_id == s.sandbox_id
    finally:
        s.kill()
    with pytest.raises(SandboxNotFoundException):
        Sandbox.connect(s.sandbox_id)


@pytest.mark.guest
def test_lifetime_timeout_kills_and_says_so() -> None:
    s = Sandbox.create(timeout=1)
    s.set_timeout(1.5)  # extending works
    time.sleep(2.0)
    assert not s.is_running()
    with pytest.raises(TimeoutException, match="reached its timeout"):
        s.files.read("/etc/hostname")


@pytest.mark.guest
def test_with_block_kills() -> None:
    with Sandbox.create() as s:
        pass
    assert not s.is_running()


def test_bad_create_arguments() -> None:
    with pytest.raises(InvalidArgumentException, match="unknown template"):
        Sandbox.create(template="no-such-template")
    with pytest.raises(InvalidArgumentException, match="envs"):
        Sandbox.create(envs={"A": 1})  # type: ignore[dict-item]
    import tempfile
    from pathlib import Path

    before = set(Path(tempfile.gettempdir()).glob("declaw-wasm-sbx-*"))
    with pytest.raises(InvalidArgumentException, match="timeout"):
        Sandbox.create(timeout=-1)
    assert set(Path(tempfile.gettempdir()).glob("declaw-wasm-sbx-*")) == before  # no folder left


@pytest.mark.guest
def test_e2b_only_parameters_are_accepted() -> None:
    with Sandbox.create(api_key="unused", request_timeout=5) as s:
        assert s.commands.run("python3 -c 'print(1)'", timeout=30, request_timeout=5).stdout == "1\n"


@pytest.mark.guest
def test_kill_stops_a_running_command() -> None:
    import threading

    s = Sandbox.create()
    errors: list[BaseException] = []

    def work() -> None:
        try:
            s.commands.run("python3 -c 'while True: pass'", timeout=0)
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=work)
    t.start()
    time.sleep(0.5)
    start = time.monotonic()
    assert s.kill() is True
    t.join(5)
    assert not t.is_alive() and time.monotonic() - start < 2
    assert isinstance(errors[0], SandboxException)


@pytest.mark.guest
def test_async_sandbox() -> None:
    async def main() -> tuple[str, list[str], str]:
        seen: list[str] = []

        async def on_out(text: str) -> None:
            seen.append(text)

        async with await AsyncSandbox.create() as s:
            await s.files.write("/tmp/a.py", "print('async')")
            r = await s.commands.run("python3 /tmp/a.py", on_stdout=on_out)
            text = await s.files.read("/tmp/a.py")
            return r.stdout, seen, text

    stdout, seen, text = anyio.run(main)
    assert stdout == "async\n" and seen == ["async\n"] and text == "print('async')"


def test_a_program_that_forgets_kill_leaves_no_sandbox_folders(guest_path: str) -> None:
    import subprocess
    import sys
    from pathlib import Path

    program = ("from declaw_wasm import Sandbox, testing\n"
               "a = Sandbox.create(); b = Sandbox.create(template='base')\n"
               "a.commands.run('sleep 60', background=True)\n"
               "print(testing.host_folder(a)); print(testing.host_folder(b))\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    folders = done.stdout.split()
    assert len(folders) == 2 and not any(Path(f).exists() for f in folders)
