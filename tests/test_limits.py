"""Limits: each one, when hit, gives its documented outcome, and the host goes on."""

from __future__ import annotations

import pytest

from declaw_wasm import CommandExitException, Limits, RateLimitException, Sandbox

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


def test_memory_limit_is_a_memory_error_in_the_guest() -> None:
    with Sandbox.create(limits=Limits(memory_limit=256 << 20)) as sandbox:
        r = sandbox.commands.run("python3 -c 'b = bytearray(512 << 20)'")
        assert r.exit_code == 1 and "MemoryError" in r.stderr
        assert sandbox.commands.run("echo ok").stdout == "ok\n"


def test_output_limit_truncates_and_says_so() -> None:
    with Sandbox.create(limits=Limits(output_limit=1000)) as sandbox:
        r = sandbox.commands.run("python3 -c 'print(\"x\" * 5000)'")
        assert len(r.stdout) == 1000 and "truncated" in (r.error or "")


def test_running_commands_per_sandbox_are_capped() -> None:
    with Sandbox.create(limits=Limits(max_processes=2)) as sandbox:
        first = sandbox.commands.run("sleep 30", background=True)
        sandbox.commands.run("sleep 30", background=True)
        with pytest.raises(RateLimitException, match="max_processes"):
            sandbox.commands.run("echo one too many")
        first.kill()
        with pytest.raises(CommandExitException):
            first.wait()
        assert sandbox.commands.run("echo room again").stdout == "room again\n"


def test_live_sandboxes_per_process_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    live = len(Sandbox.list().next_items())
    monkeypatch.setenv("DECLAW_WASM_MAX_SANDBOXES", str(live + 1))
    with Sandbox.create():
        with pytest.raises(RateLimitException, match="DECLAW_WASM_MAX_SANDBOXES"):
            Sandbox.create()
    Sandbox.create().kill()  # room again once one is gone


def test_files_api_refuses_writes_over_the_disk_quota() -> None:
    import io

    from declaw_wasm import NotEnoughSpaceException

    with Sandbox.create(limits=Limits(disk_bytes=4 << 20)) as sandbox:
        sandbox.files.write("/tmp/small", b"x" * (1 << 20))
        with pytest.raises(NotEnoughSpaceException, match="disk_bytes"):
            sandbox.files.write("/tmp/big", b"x" * (8 << 20))
        with pytest.raises(NotEnoughSpaceException):
            sandbox.files.write("/tmp/streamed", io.BytesIO(b"y" * (8 << 20)))
        assert not sandbox.files.exists("/tmp/big") and not sandbox.files.exists("/tmp/streamed")
        assert sandbox.files.read("/tmp/small", format="bytes") == b"x" * (1 << 20)


def test_write_files_keeps_a_running_total_of_the_disk_quota() -> None:
    from declaw_wasm import NotEnoughSpaceException

    mib = b"x" * (1 << 20)
    with Sandbox.create(limits=Limits(disk_bytes=4 << 20)) as sandbox:
        # one path overwritten three times: 1.5 MiB in the end, not 4.5
        sandbox.files.write_files([{"path": "/tmp/same", "data": mib + mib[:1 << 19]}] * 3)
        assert sandbox.files.get_info("/tmp/same").size == 3 << 19
        with pytest.raises(NotEnoughSpaceException, match="disk_bytes"):
            sandbox.files.write_files([{"path": f"/tmp/f{i}", "data": mib} for i in range(4)])
        assert [sandbox.files.exists(f"/tmp/f{i}") for i in range(4)] == [True, True, False, False]


def test_a_guest_over_the_disk_quota_is_stopped() -> None:
    with Sandbox.create(limits=Limits(disk_bytes=32 << 20, disk_files=2000)) as sandbox:
        sandbox.files.write("/home/user/fill.py", "import time\nf = open('/tmp/fill', 'wb')\n"
                            "while True:\n    f.write(b'x' * (1 << 20)); f.flush(); time.sleep(0.01)\n")
        r = sandbox.commands.run("python3 fill.py", timeout=60)
        assert r.exit_code == 137 and "disk quota exceeded" in r.error and "disk_bytes" in r.error
        sandbox.files.remove("/tmp/fill")
        sandbox.files.write("/home/user/files.py",
                            "for i in range(100000):\n    open(f'/tmp/n{i}', 'w').close()\n")
        r = sandbox.commands.run("python3 files.py", timeout=60)
        assert r.exit_code == 137 and "disk_files" in r.error
        sandbox.commands.run("rm -rf /tmp/n*")
        cell = sandbox.run_code("with open('/tmp/more', 'wb') as f:\n"
                                "    while True: f.write(b'x' * (1 << 20)); f.flush()", timeout=60)
        assert cell.error is not None and cell.error.name == "DiskQuotaExceeded"
        assert sandbox.commands.run("rm -rf /tmp/more; echo cleaned").stdout == "cleaned\n"
        assert sandbox.run_code("1 + 1").text == "2"
