"""E2B's shapes of the state calls (its SDK's tests use them so): `sbx.connect()` on an
instance, `fork` answering a list (also `Sandbox.fork(id)`), the class forms
`Sandbox.delete_snapshot(snapshot_id)` and `Sandbox.list_snapshots(sandbox_id=, name=)` (a
paginator), named snapshots, `Sandbox.create(snapshot_id)`, `pause(keep_memory=False)` and the
lifecycle's `{"on_timeout": {"action": "pause", "keep_memory": ...}}` form."""

from __future__ import annotations

import time

import anyio
import pytest

from declaw_wasm import AsyncSandbox, InvalidArgumentException, Sandbox, SandboxNotFoundException
from declaw_wasm.models import SandboxState

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


def test_instance_connect_resumes_in_place(sandbox: Sandbox, state: str) -> None:
    sandbox.files.write("/home/user/kept.txt", "kept")
    assert sandbox.pause()
    assert not sandbox.is_running()
    resumed = sandbox.connect()
    assert resumed is sandbox and sandbox.is_running()
    assert sandbox.files.read("/home/user/kept.txt") == "kept"
    assert sandbox.connect(timeout=900) is sandbox  # a running one: only the lifetime may grow


def test_fork_is_a_list_and_by_id(sandbox: Sandbox, state: str) -> None:
    sandbox.files.write("/home/user/state.txt", "before")
    [fork] = sandbox.fork()
    try:
        assert isinstance(fork, Sandbox) and fork.files.read("/home/user/state.txt") == "before"
    finally:
        fork.kill()
    [by_id] = Sandbox.fork(sandbox.sandbox_id)
    by_id.kill()
    with pytest.raises(InvalidArgumentException):
        Sandbox.fork("sbx-nothing-here", count=0)  # the count is checked before the id
    sandbox.kill()
    with pytest.raises(SandboxNotFoundException):
        sandbox.fork()


def test_snapshot_class_forms_and_names(sandbox: Sandbox, state: str) -> None:
    sandbox.files.write("/home/user/snap.txt", "in the snapshot")
    sandbox.run_code("w = 1")  # a context in the snapshot too
    named = sandbox.create_snapshot(name="my-snap")
    plain = Sandbox.create_snapshot(sandbox.sandbox_id)
    assert named.names == ["my-snap"] and plain.names == []
    everything = Sandbox.list_snapshots()
    assert everything.has_next
    assert {s.snapshot_id for s in everything.next_items()} >= {named.snapshot_id, plain.snapshot_id}
    assert not everything.has_next
    mine = Sandbox.list_snapshots(sandbox_id=sandbox.sandbox_id)
    assert [s.snapshot_id for s in mine] == [plain.snapshot_id, named.snapshot_id]  # also a list, newest first
    assert [s.snapshot_id for s in Sandbox.list_snapshots(name="my-snap").next_items()] == [named.snapshot_id]
    assert Sandbox.list_snapshots(name="no-such-name").next_items() == []
    # E2B makes a sandbox from a snapshot by passing its id as the template
    copy = Sandbox.create(named.snapshot_id)
    try:
        assert copy.sandbox_id != sandbox.sandbox_id
        assert copy.files.read("/home/user/snap.txt") == "in the snapshot"
    finally:
        copy.kill()
    assert Sandbox.delete_snapshot(named.snapshot_id) is True
    assert Sandbox.delete_snapshot(named.snapshot_id) is False  # E2B's: False when there was none
    assert sandbox.delete_snapshot(plain.snapshot_id) is True  # declaw's instance form: idempotent
    assert sandbox.delete_snapshot(plain.snapshot_id) is True


def test_filesystem_only_pause(sandbox: Sandbox, state: str) -> None:
    sandbox.run_code("x = 42")
    sandbox.files.write("/home/user/marker.txt", "persisted")
    assert sandbox.pause(keep_memory=False)
    sandbox.connect()
    assert sandbox.files.read("/home/user/marker.txt") == "persisted"
    error = sandbox.run_code("x").error
    assert error is not None and error.name == "NameError"  # the contexts started afresh
    with pytest.raises(InvalidArgumentException):
        sandbox.pause(keep_memory="no")


def test_boot_id(sandbox: Sandbox, state: str) -> None:
    """/proc/sys/kernel/random/boot_id, as on Linux: kept by a pause that keeps memory, new
    after a filesystem-only one (E2B's tests tell the two apart by it); read-only to the guest."""
    boot = sandbox.files.read("/proc/sys/kernel/random/boot_id").strip()
    assert len(boot) == 36 and sandbox.commands.run("cat /proc/sys/kernel/random/boot_id").stdout.strip() == boot
    assert sandbox.commands.run("echo x > /proc/sys/kernel/random/boot_id").exit_code != 0
    assert sandbox.pause()
    sandbox.connect()
    assert sandbox.files.read("/proc/sys/kernel/random/boot_id").strip() == boot
    assert sandbox.pause(keep_memory=False)
    sandbox.connect()
    assert sandbox.files.read("/proc/sys/kernel/random/boot_id").strip() != boot
    other = Sandbox.create(timeout=60)
    try:
        assert other.files.read("/proc/sys/kernel/random/boot_id").strip() != boot
    finally:
        other.kill()


def test_lifecycle_forms(state: str) -> None:
    killed = Sandbox.create(timeout=60, lifecycle={"on_timeout": None})  # E2B: untyped is "kill"
    killed.kill()
    sbx = Sandbox.create(timeout=60, lifecycle={"on_timeout": {"action": "pause", "keep_memory": False}})
    try:
        sbx.run_code("y = 1")
        sbx.files.write("/home/user/m.txt", "m")
        sbx.set_timeout(0)  # E2B's: the lifetime ends now, so it pauses
        deadline = time.monotonic() + 30
        while sbx.is_running() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sbx.get_info().state == SandboxState.PAUSED
        sbx.connect()
        assert sbx.files.read("/home/user/m.txt") == "m"
        error = sbx.run_code("y").error
        assert error is not None and error.name == "NameError"  # filesystem-only
    finally:
        sbx.kill()
    with pytest.raises(InvalidArgumentException):
        Sandbox.create(lifecycle={"on_timeout": {"action": "pause", "keep_memory": "x"}})
    with pytest.raises(InvalidArgumentException):
        Sandbox.create(timeout=0)  # 0 ends a lifetime (set_timeout), it is not one


def test_async_forms(state: str) -> None:
    async def main() -> None:
        sbx = await AsyncSandbox.create(timeout=120)
        try:
            snap = await sbx.create_snapshot(name="a")
            pages = AsyncSandbox.list_snapshots(sandbox_id=sbx.sandbox_id)  # not a coroutine (E2B's)
            assert pages.has_next
            assert [s.snapshot_id for s in await pages.next_items()] == [snap.snapshot_id]
            forks = await sbx.fork()
            assert len(forks) == 1 and isinstance(forks[0], AsyncSandbox)
            await forks[0].kill()
            [by_id] = await AsyncSandbox.fork(sbx.sandbox_id)
            await by_id.kill()
            assert await sbx.pause()
            assert await sbx.connect() is sbx and await sbx.is_running()
            assert await AsyncSandbox.delete_snapshot(snap.snapshot_id) is True
            assert await AsyncSandbox.delete_snapshot(snap.snapshot_id) is False
        finally:
            await sbx.kill()

    anyio.run(main)


def test_e2b_forms_through_the_server(server_url: str, state: str) -> None:
    """The names, the filesystem-only pause and the class forms travel through `declaw-wasm serve`."""
    from conftest import API_KEY  # noqa: E402 (tests/ is on sys.path)

    where = {"domain": server_url, "api_key": API_KEY}
    sbx = Sandbox.create(**where)  # type: ignore[arg-type]
    try:
        sbx.run_code("z = 3")
        snap = sbx.create_snapshot(name="served-name")
        assert snap.names == ["served-name"]
        assert [s.snapshot_id for s in Sandbox.list_snapshots(name="served-name", **where).next_items()] == \
            [snap.snapshot_id]
        assert sbx.pause(keep_memory=False)
        assert sbx.connect() is sbx and sbx.is_running()
        assert sbx.run_code("z").error.name == "NameError"
        [fork] = Sandbox.fork(sbx.sandbox_id, **where)
        fork.kill()
        assert Sandbox.delete_snapshot(snap.snapshot_id, **where) is True
        assert Sandbox.delete_snapshot(snap.snapshot_id, **where) is False
    finally:
        sbx.kill()
