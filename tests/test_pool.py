"""The process pool (`backend="processes:N"`): crash isolation with a real pool of worker
processes — a worker SIGKILLed mid-command takes only its own sandboxes, which fail fast; the
pool replaces it; workers share the machine's compiled cache; the pool goes when its agent does.
(The API itself runs on the pool in every module's `served` tests: tests/conftest.py.)"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from declaw_wasm import InvalidArgumentException, Sandbox, SandboxException, SandboxNotFoundException
from declaw_wasm._pool.pool import ProcessPool, pool_for
from declaw_wasm.settings import cache_dir
from waiting import until  # tests/ is on sys.path

POOL = "processes:2"


@pytest.fixture(scope="module")
def guest_path() -> str:
    return "warm"  # the pool runs the same host code on both guest paths


@pytest.fixture
def pool() -> Iterator[ProcessPool]:
    """A pool of the test's own (`backend=` takes the object), so that killing its workers
    leaves the shared `processes:2` pool of the other tests alone."""
    own = ProcessPool(2)
    yield own
    own.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.guest
def test_sandboxes_spread_over_the_workers(pool: ProcessPool) -> None:
    first, second = Sandbox.create(backend=pool), Sandbox.create(backend=pool)
    try:
        assert pool.pid_of(first.sandbox_id) != pool.pid_of(second.sandbox_id)
        assert {pool.pid_of(first.sandbox_id), pool.pid_of(second.sandbox_id)} <= {w.pid for w in pool.workers}
        assert os.getpid() not in {pool.pid_of(first.sandbox_id)}
    finally:
        first.kill()
        second.kill()


@pytest.mark.guest
def test_a_worker_killed_mid_command_fails_only_its_sandboxes_fast(pool: ProcessPool) -> None:
    victim, bystander = Sandbox.create(backend=pool), Sandbox.create(backend=pool)
    victim_pid, bystander_pid = pool.pid_of(victim.sandbox_id), pool.pid_of(bystander.sandbox_id)
    assert victim_pid != bystander_pid
    loop = "python3 -c 'import time\nfor i in range({n}):\n    print(i, flush=True); time.sleep(0.02)'"
    doomed = victim.commands.run(loop.format(n=1000), background=True)
    cell: dict[str, object] = {}
    cell_thread = threading.Thread(target=lambda: cell.update(error=_raises(
        lambda: victim.run_code("import time; time.sleep(30)"))))
    cell_thread.start()
    survivor = bystander.commands.run(loop.format(n=100), background=True)
    until(lambda: doomed._process.text("stdout").count("\n") > 3)

    killed_at = time.monotonic()
    os.kill(victim_pid, signal.SIGKILL)
    with pytest.raises(SandboxException, match="worker process .* was killed by SIGKILL") as info:
        doomed.wait()
    assert time.monotonic() - killed_at < 1.0
    assert victim.sandbox_id in str(info.value)
    cell_thread.join(1.0)
    assert isinstance(cell.get("error"), SandboxException)  # the cell in flight fails too
    assert time.monotonic() - killed_at < 1.0
    for call in (lambda: victim.commands.run("echo hi"), lambda: victim.files.read("/etc/hostname"),
                 lambda: victim.run_code("1"), lambda: Sandbox.connect(victim.sandbox_id, backend=pool)):
        with pytest.raises(SandboxException, match="worker process"):
            call()
    assert victim.is_running() is False and victim.kill() is False

    result = survivor.wait()  # the other worker never noticed: every line arrived
    assert result.stdout == "".join(f"{i}\n" for i in range(100))
    assert bystander.commands.run("echo still here").stdout == "still here\n"
    bystander.kill()

    until(lambda: all(w.dead is None and w.ready.is_set() for w in pool.workers), 60)
    assert victim_pid not in {w.pid for w in pool.workers} and bystander_pid in {w.pid for w in pool.workers}
    with Sandbox.create(backend=pool) as fresh:
        assert fresh.commands.run("echo replaced").stdout == "replaced\n"


def _raises(call) -> object:  # type: ignore[no-untyped-def]
    try:
        call()
    except Exception as exc:
        return exc
    return None


@pytest.mark.guest
def test_calls_by_id_find_the_pool_that_made_the_sandbox() -> None:
    sbx = Sandbox.create(backend=POOL, metadata={"where": "pool"})
    again = Sandbox.connect(sbx.sandbox_id)  # no backend=: the id's home is this process's pool
    again.files.write("/tmp/by-id", "same")
    assert sbx.files.read("/tmp/by-id") == "same"
    assert Sandbox.get_info(sbx.sandbox_id).metadata == {"where": "pool"}
    assert sbx.sandbox_id in [i.sandbox_id for i in Sandbox.list(backend=POOL)]
    assert sbx.sandbox_id not in [i.sandbox_id for i in Sandbox.list()]  # in-process: not there
    assert Sandbox.kill(sbx.sandbox_id) is True
    with pytest.raises(SandboxNotFoundException):
        Sandbox.connect(sbx.sandbox_id)


@pytest.mark.guest
def test_large_files_move_in_chunks_both_ways() -> None:
    with Sandbox.create(backend=POOL) as sbx:
        data = os.urandom(3 << 20) + b"tail"
        sbx.files.write("/tmp/big.bin", io.BytesIO(data))
        assert bytes(sbx.files.read("/tmp/big.bin", format="bytes")) == data
        with sbx.files.read("/tmp/big.bin", format="stream") as stream:
            assert next(iter(stream)) == data[:1 << 20]  # closed early: the worker's session ends
        sbx.files.write("/tmp/big.txt", "é" * (5 << 20))
        assert sbx.commands.run("wc -c /tmp/big.txt").stdout.split()[0] == str(10 << 20)


@pytest.mark.guest
def test_a_pty_and_stdin_cross_the_pipe() -> None:
    from declaw_wasm import PtySize

    with Sandbox.create(backend=POOL) as sbx:
        handle = sbx.commands.run("read a; echo got $a", background=True, stdin=True)
        handle.send_stdin("value\n")
        assert handle.wait().stdout == "got value\n"
        seen = bytearray()
        pty = sbx.pty.create(PtySize(rows=24, cols=80), on_data=seen.extend)
        sbx.pty.send_stdin(pty.pid, b"echo $((6*7))\n")
        until(lambda: b"42" in seen)
        sbx.pty.send_stdin(pty.pid, b"exit\n")
        assert pty.wait().exit_code == 0


@pytest.mark.guest
def test_workers_share_the_compiled_cache() -> None:
    """A new pool's workers load the machine's compiled module: no worker compiles its own."""
    compiled = cache_dir() / "compiled"

    def modules() -> dict[str, int]:  # (locks, pins and other modules come and go with other tests' work)
        return {p.name: p.stat().st_mtime_ns for p in compiled.iterdir() if p.suffix in (".cwasm", ".wasm")}

    before = modules()
    fresh = ProcessPool(2)
    try:
        sandboxes = [Sandbox.create(backend=fresh) for _ in range(2)]
        assert len({fresh.pid_of(s.sandbox_id) for s in sandboxes}) == 2
        assert all(s.commands.run("echo ok").stdout == "ok\n" for s in sandboxes)
        after = modules()
        assert {name: after.get(name) for name in before} == before  # none compiled again
    finally:
        fresh.close()


@pytest.mark.guest
def test_the_workers_go_when_their_agent_dies(tmp_path: Path) -> None:
    agent = subprocess.Popen(
        [sys.executable, "-c",
         "from declaw_wasm import Sandbox, testing\n"
         "from declaw_wasm._pool.pool import pool_for\n"
         "s = Sandbox.create(backend='processes:1')\n"
         "print(pool_for(1).pid_of(s.sandbox_id), flush=True)\n"
         "import time; time.sleep(60)\n"], stdout=subprocess.PIPE, text=True)
    assert agent.stdout is not None
    worker = int(agent.stdout.readline())
    assert _alive(worker)
    agent.kill()  # no atexit, no goodbye: the worker sees its socket close
    agent.wait()
    until(lambda: not _alive(worker) or _zombie(worker), 10)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


@pytest.mark.guest
def test_the_backend_setting_and_its_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECLAW_DOMAIN", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("DECLAW_WASM_BACKEND", POOL)  # wins over DECLAW_DOMAIN
    with Sandbox.create() as sbx:
        assert pool_for(2).knows(sbx.sandbox_id)
    with Sandbox.create(backend="local") as sbx:  # an explicit backend= wins over both
        assert not pool_for(2).knows(sbx.sandbox_id)
    for bad in ("processes:0", "processes:x", "threads", "local:3"):
        with pytest.raises(InvalidArgumentException):
            Sandbox.create(backend=bad)
    monkeypatch.setenv("DECLAW_WASM_BACKEND", "nonsense")
    with pytest.raises(InvalidArgumentException, match="DECLAW_WASM_BACKEND"):
        Sandbox.create()


@pytest.mark.guest
def test_a_checkpointed_sandbox_comes_back_on_another_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`lifecycle={"checkpoint": "cell"}`: the worker killed mid-cell, the cell in flight fails
    saying the sandbox was restored from its checkpoint, and the restored sandbox (on the other
    worker) has the last completed cell's variables and files."""
    monkeypatch.setenv("DECLAW_WASM_STATE", str(tmp_path / "state"))  # the workers inherit it
    own = ProcessPool(2)
    try:
        sbx = Sandbox.create(backend=own, lifecycle={"checkpoint": "cell"}, timeout=600)
        sbx.run_code("x = 41\nopen('/home/user/kept.txt', 'w').write('kept')")
        sbx.commands.run("echo more >> /home/user/kept.txt")
        victim_pid = own.pid_of(sbx.sandbox_id)
        cell: dict[str, object] = {}
        thread = threading.Thread(target=lambda: cell.update(error=_raises(
            lambda: sbx.run_code("x = 0\nimport time; time.sleep(30)"))))
        thread.start()
        time.sleep(0.3)
        killed_at = time.monotonic()
        os.kill(victim_pid, signal.SIGKILL)
        thread.join(5.0)
        error = cell.get("error")
        assert isinstance(error, SandboxException), error
        assert "restored on another host from its checkpoint after turn 2 (command)" in str(error)
        assert time.monotonic() - killed_at < 2.0
        assert own.pid_of(sbx.sandbox_id) != victim_pid
        assert sbx.run_code("x + 1").text == "42"  # the last completed cell's state
        assert sbx.files.read("/home/user/kept.txt") == "keptmore\n"
        assert sbx.is_running() is True
        assert Sandbox.connect(sbx.sandbox_id, backend=own).commands.run("echo hi").stdout == "hi\n"
        assert sbx.kill() is True
    finally:
        own.close()


def test_checkpoints_are_refused_in_process() -> None:
    with pytest.raises(InvalidArgumentException, match="process pool or a Ray cluster"):
        Sandbox.create(lifecycle={"checkpoint": "cell"})
    with pytest.raises(InvalidArgumentException, match="must be 'cell'"):
        Sandbox.create(backend=POOL, lifecycle={"checkpoint": "sometimes"})
