"""Cross-sandbox isolation and lifecycle: one sandbox reaching another's files (host paths, `..`
to sibling folders, symlinks), guest state leaking between commands, contexts and sandboxes,
and killing a sandbox while commands, background commands, a PTY, a cell and a files write run.
"""

from __future__ import annotations

import functools
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Awaitable, Callable, cast

import anyio
import pytest

from declaw_wasm import testing
from declaw_wasm import AsyncSandbox, PtySize, Sandbox, SandboxException, TimeoutException

from .support import Bounded, assert_host_fine, deep_tree, guest_threads, run_py, wait_guest_threads

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)

SECRET = "tenant-b-secret-4242"


def _sibling_paths(b: Sandbox) -> list[str]:
    """Every way we can think of to name sandbox B's /tmp/private.txt from inside sandbox A."""
    host = testing.host_path(b, "/tmp/private.txt")
    base = testing.host_folder(b)
    up = "../" * 16
    return [str(host), f"{up}{str(host).lstrip('/')}", f"/tmp/../{base.name}/root/tmp/private.txt",
            f"/tmp/{up}{base.name}/root/tmp/private.txt", f"/home/user/{up}tmp/{base.name}/root/tmp/private.txt",
            f"../../../{base.name}/root/tmp/private.txt", f"/{base.name}/root/tmp/private.txt"]


def test_sibling_sandbox_files_are_unreachable_through_the_api(box: Sandbox) -> None:
    """Defends against one sandbox's files API reading or changing another sandbox's files."""
    with Sandbox.create(timeout=60) as b:
        b.files.write("/tmp/private.txt", SECRET)
        for path in _sibling_paths(b):
            try:
                assert SECRET not in box.files.read(path)
            except SandboxException:
                pass
            assert not box.files.exists(path) or SECRET not in box.files.read(path)
            for mutate in (lambda p=path: box.files.write(p, "overwritten"), lambda p=path: box.files.remove(p),
                           lambda p=path: box.files.rename(p, "/tmp/taken.txt")):
                try:
                    mutate()
                except SandboxException:
                    pass
            assert b.files.read("/tmp/private.txt") == SECRET
        assert_host_fine(box, b)


def test_sibling_sandbox_files_are_unreachable_from_the_guest(box: Sandbox) -> None:
    """Defends against guest code (paths, `..`, symlinks) reaching another sandbox's folder."""
    with Sandbox.create(timeout=60) as b:
        b.files.write("/tmp/private.txt", SECRET)
        home, b_tmp = testing.host_path(box, "/home/user"), testing.host_path(b, "/tmp")
        assert home is not None and b_tmp is not None
        link_target = os.path.relpath(b_tmp, home)  # B's /tmp, on the host
        code = f"""
import os
paths = {_sibling_paths(b)!r}
os.symlink({link_target!r}, '/home/user/to-b')
paths += ['/home/user/to-b/private.txt']
for p in paths:
    try:
        print('READ' if {SECRET!r} in open(p).read() else 'other')
    except OSError as e:
        print(type(e).__name__)
    try:
        open(p, 'w').write('overwritten')
    except OSError:
        pass
for d in ('/..', '/tmp/..', '/home/user/to-b', '/home/../..'):
    try:
        print(sorted(os.listdir(d)))
    except OSError as e:
        print(type(e).__name__)
"""
        r = run_py(box, code)
        assert "READ" not in r.stdout and SECRET not in r.stdout
        assert testing.host_folder(b).name not in r.stdout
        assert b.files.read("/tmp/private.txt") == SECRET
        box.files.remove("/home/user/to-b")
        assert_host_fine(box, b)


def test_guest_state_does_not_leak_between_commands_contexts_and_sandboxes(box: Sandbox) -> None:
    """Defends against one guest poisoning the shared snapshot or stdlib for later guests."""
    poison = ("import json, builtins, os, sys\njson.dumps = lambda *a, **k: 'POISONED'\n"
              "builtins.EVIL = 'set'\nos.environ['POISON'] = '1'\nsys.path.insert(0, '/tmp/evil')\n"
              "import _declaw_boot\n_declaw_boot.start = None\nsecret_in_memory = 'leaky-' * 1000\n")
    r = run_py(box, poison + "print(json.dumps(1))")
    assert r.stdout == "POISONED\n"
    r = box.commands.run("python3 -c 'import json, builtins; print(json.dumps(1), hasattr(builtins, \"EVIL\"))'")
    assert r.stdout == "1 False\n"
    box.files.write("/tmp/evil/json.py", "dumps = lambda *a: 'SHADOWED'")
    assert box.commands.run("cd /home/user && python3 -c 'import json; print(json.dumps(2))'").stdout == "2\n"
    ctx = box.create_code_context()
    box.run_code(poison, context=ctx)
    assert box.run_code("json.dumps(3), EVIL", context=ctx).text == "('POISONED', 'set')"  # its own state
    other_ctx = box.create_code_context()
    ex = box.run_code("import json, builtins; json.dumps(3), hasattr(builtins, 'EVIL')", context=other_ctx)
    assert ex.text == "('3', False)"
    with Sandbox.create(timeout=60) as other:
        assert other.run_code("import json, os; json.dumps(4), os.environ.get('POISON')").text == "('4', None)"
        r = other.commands.run("python3 -c 'import json, sys; print(json.dumps(5), \"/tmp/evil\" in sys.path)'")
        assert r.stdout == "5 False\n"
    box.remove_code_context(ctx)
    assert_host_fine(box)


def test_kill_while_everything_runs(mode: str, make: Callable[..., Sandbox]) -> None:
    """Defends against kill leaving guests running or calls hanging when work is in flight."""
    before = guest_threads()
    s = make(timeout=120)
    here = mode == "in-process"  # its guests are threads of this process, its folder this host's
    base = testing.host_folder(s) if here else None
    outcomes: dict[str, object] = {}

    def record(name: str, fn: Callable[[], object]) -> threading.Thread:
        def body() -> None:
            try:
                outcomes[name] = fn()
            except BaseException as exc:
                outcomes[name] = exc
        t = threading.Thread(target=body, name=f"security-{name}", daemon=True)
        t.start()
        return t

    s.run_code("x = 1")  # the default context's guest is up
    bg = s.commands.run("python3 -c 'while True: pass'", background=True, timeout=60)
    pty = s.pty.create(PtySize(24, 80), timeout=60)
    pty.send_stdin(b"python3 -c 'while True: pass'\n")
    threads = [
        record("busy", lambda: s.commands.run("python3 -c 'while True: pass'", timeout=60)),
        record("sleep", lambda: s.commands.run("sleep 1000", timeout=60)),
        record("stdin", lambda: s.commands.run("cat", stdin=True, timeout=60)),
        record("cell", lambda: s.run_code("while True: pass", timeout=60)),
        record("sleep-cell", lambda: s.run_code("import time; time.sleep(1000)", timeout=60,
                                                context=s.create_code_context())),
        record("bg", bg.wait), record("pty", pty.wait),
    ]
    deadline = time.monotonic() + 10
    if here:
        while guest_threads() < before + 7 and time.monotonic() < deadline:  # 7 guests are up
            time.sleep(0.05)
        assert guest_threads() >= before + 7
    else:  # 5 commands are up (the cells' guests do not show in the list)
        while len(s.commands.list()) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(s.commands.list()) >= 5
        time.sleep(0.5)
    time.sleep(0.2)
    start = time.monotonic()
    assert s.kill() is True
    for t in threads:
        t.join(5)
    assert time.monotonic() - start < 6
    assert all(not t.is_alive() for t in threads), [t.name for t in threads if t.is_alive()]
    for name, outcome in outcomes.items():
        assert isinstance(outcome, SandboxException), (name, outcome)
    assert wait_guest_threads(before) == before  # no guest thread is left
    assert base is None or not base.exists()
    assert_host_fine()


def test_every_call_on_a_killed_sandbox_raises_promptly(make: Callable[..., Sandbox]) -> None:
    """Defends against a killed sandbox still running commands, cells or file operations."""
    s = make(timeout=60)
    pid = s.commands.run("sleep 100", background=True).pid
    s.kill()
    calls = {
        "run": lambda: s.commands.run("echo ok"), "background": lambda: s.commands.run("echo", background=True),
        "connect": lambda: s.commands.connect(pid), "send_stdin": lambda: s.commands.send_stdin(pid, "x"),
        "pty": lambda: s.pty.create(PtySize(24, 80)), "resize": lambda: s.pty.resize(pid, PtySize(5, 5)),
        "run_code": lambda: s.run_code("1"), "context": lambda: s.create_code_context(),
        "read": lambda: s.files.read("/etc/passwd"), "stream": lambda: s.files.read("/etc/passwd", format="stream"),
        "write": lambda: s.files.write("/tmp/x", "x"),
        "write_files": lambda: s.files.write_files([{"path": "/tmp/y", "data": "y"}]),
        "list": lambda: s.files.list("/"), "exists": lambda: s.files.exists("/tmp"),
        "get_info": lambda: s.files.get_info("/tmp"), "remove": lambda: s.files.remove("/tmp/x"),
        "rename": lambda: s.files.rename("/tmp/x", "/tmp/z"), "make_dir": lambda: s.files.make_dir("/tmp/d"),
        "set_timeout": lambda: s.set_timeout(30), "get_info_sbx": lambda: s.get_info(),
        "connect_sbx": lambda: Sandbox.connect(s.sandbox_id),
    }
    for name, call in calls.items():
        start = time.monotonic()
        with pytest.raises((SandboxException, TimeoutException)):
            call()
        assert time.monotonic() - start < 1, name
    assert s.is_running() is False and s.kill() is False
    assert_host_fine()


def test_process_and_context_calls_on_a_killed_sandbox_raise() -> None:
    """Defends against a killed sandbox answering process and context queries as if alive."""
    s = Sandbox.create(timeout=60)
    pid = s.commands.run("sleep 100", background=True).pid
    s.kill()
    assert_host_fine()
    for call in (lambda: s.commands.list(), lambda: s.commands.kill(pid), lambda: s.pty.kill(pid),
                 lambda: s.list_code_contexts(), lambda: s.restart_code_context("default"),
                 lambda: s.remove_code_context("default")):
        with pytest.raises(SandboxException):
            call()


def test_lifetime_timeout_stops_running_work(box: Sandbox) -> None:
    """Defends against work outliving its sandbox's lifetime (the timeout kills everything)."""
    before = guest_threads()
    s = Sandbox.create(timeout=1)
    base = testing.host_folder(s)
    busy = Bounded(lambda: s.commands.run("python3 -c 'while True: pass'", timeout=0))
    cell = Bounded(lambda: s.run_code("while True: pass", timeout=0))
    assert busy.wait(5) and cell.wait(5)
    assert isinstance(busy.error, SandboxException) and isinstance(cell.error, SandboxException)
    with pytest.raises(TimeoutException):
        s.commands.run("echo ok")
    deadline = time.monotonic() + 5
    while base.exists() and time.monotonic() < deadline:  # the Timer thread is still deleting
        time.sleep(0.05)
    assert not base.exists() and wait_guest_threads(before) <= before
    assert_host_fine(box)


def test_async_kill_while_running() -> None:
    """Defends against AsyncSandbox.kill leaving awaiting callers or guests behind."""
    before = guest_threads()

    async def main() -> list[object]:
        s = await AsyncSandbox.create(timeout=60)
        results: list[object] = []

        async def attempt(coro_fn: Callable[[], Awaitable[object]]) -> None:
            try:
                results.append(await coro_fn())
            except Exception as exc:
                results.append(exc)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(attempt, lambda: s.commands.run("python3 -c 'while True: pass'", timeout=30))
                tg.start_soon(attempt, lambda: s.run_code("while True: pass", timeout=30))
                tg.start_soon(attempt, lambda: s.commands.run("sleep 100", timeout=30))
                await anyio.sleep(0.5)
                assert await s.kill() is True
        return results

    results = anyio.run(main)
    assert len(results) == 3 and all(isinstance(r, SandboxException) for r in results), results
    assert wait_guest_threads(before) <= before
    assert_host_fine()


def _remove_tree(path: Path) -> None:
    """Clean up a sandbox folder the product left on the host (it is under /tmp)."""
    if path.exists() and "declaw-wasm-sbx-" in path.name:
        subprocess.run(["rm", "-rf", "--", str(path)], check=False, timeout=60)


class _Slow:
    """A file-like object that trickles data, so a write is in progress when the kill comes."""

    def __init__(self) -> None:
        self.reads = 0

    def read(self, n: int = -1) -> bytes:
        self.reads += 1
        if self.reads > 200:
            return b""
        time.sleep(0.01)
        return b"z" * 65536


def test_kill_during_files_writes_fails_them_cleanly() -> None:
    """Defends against files-API writes in flight at kill time hanging or raising non-SDK errors."""
    s = Sandbox.create(timeout=60)
    base = testing.host_folder(s)
    try:
        # _Slow has only read(), all the SDK uses of a file object
        writes = [Bounded(functools.partial(s.files.write, f"/tmp/deep/{i}/big.bin", cast(IO[bytes], _Slow())))
                  for i in range(3)]
        many = Bounded(lambda: [s.files.write(f"/home/user/n{i}/f.txt", "x") for i in range(100_000)])
        time.sleep(0.3)
        assert s.kill() is True
        for call in writes + [many]:
            assert call.wait(10)
            assert call.error is None or isinstance(call.error, SandboxException), repr(call.error)
        with pytest.raises(SandboxException):
            s.files.write("/tmp/after.txt", "x")
        assert_host_fine()
    finally:
        _remove_tree(base)  # a racing write can leave it behind: see the next case


def _write_many(s: Sandbox, prefix: str) -> None:
    for i in range(100_000):
        s.files.write(f"{prefix}{i}/f.txt", "x")


def test_kill_racing_files_writes_leaves_no_host_folder() -> None:
    """Defends against a write racing kill leaving the sandbox's files on the host disk."""
    leaked: list[Path] = []
    for _ in range(8):
        s = Sandbox.create(timeout=60)
        base = testing.host_folder(s)
        calls = [Bounded(functools.partial(_write_many, s, f"/home/user/t{k}-")) for k in range(4)]
        time.sleep(0.2)
        s.kill()
        for call in calls:
            assert call.wait(10)
        time.sleep(0.1)
        if base.exists():
            leaked.append(base)
            _remove_tree(base)
            break
    assert_host_fine()
    assert not leaked, f"{leaked[0]} left on disk after kill"


def test_many_sandboxes_at_once_stay_isolated() -> None:
    """Defends against concurrent sandboxes seeing each other's files or environment."""
    sandboxes = [Sandbox.create(timeout=60, envs={"ME": str(i)}) for i in range(4)]
    try:
        def work(i: int, s: Sandbox) -> str:
            s.files.write("/tmp/same-name.txt", f"owner {i}")
            r = s.commands.run("for n in 1 2 3; do cat /tmp/same-name.txt; echo \" $ME\"; done")
            return r.stdout + s.files.read("/tmp/same-name.txt")
        calls = [Bounded(functools.partial(work, i, s)) for i, s in enumerate(sandboxes)]
        for i, call in enumerate(calls):
            assert call.wait(30) and call.error is None, call.error
            assert call.result == f"owner {i} {i}\n" * 3 + f"owner {i}"
        assert len({testing.host_folder(s) for s in sandboxes}) == 4
    finally:
        for s in sandboxes:
            s.kill()
    assert_host_fine()




def test_kill_removes_a_guest_made_deep_tree() -> None:
    """Defends against a deep folder chain making kill fail and leak the host folder."""
    s = Sandbox.create(timeout=60)
    base = testing.host_folder(s)
    try:
        deep_tree(s, "/tmp/nest")
        try:
            killed = s.kill()
        except RecursionError:  # reported without its 1000-frame traceback (slow to render)
            pytest.fail("Sandbox.kill() raised RecursionError", pytrace=False)
        assert killed is True and not base.exists()
    finally:
        _remove_tree(base)
        assert_host_fine()


def test_files_remove_of_a_deep_tree(fresh: Sandbox) -> None:
    """Defends against a deep folder chain making files.remove raise a non-SDK exception."""
    deep_tree(fresh, "/tmp/nest")
    try:
        try:
            fresh.files.remove("/tmp/nest")
        except SandboxException:
            pass  # refusing is fine; a non-SDK exception is not
        except RecursionError:  # reported without its 1000-frame traceback (slow to render)
            pytest.fail("files.remove() raised RecursionError", pytrace=False)
    finally:
        fresh.commands.run("rm -rf /tmp/nest", timeout=60)  # so the fixture's kill can clean up
        assert_host_fine(fresh)
