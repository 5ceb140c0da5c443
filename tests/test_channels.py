"""The pool's channel (docs/security.md, "The pool's and Ray's channels"): what a worker process
sends is decoded within bounds, every request gets exactly one answer, and every wait on a
worker is bounded. A compromised worker is a real worker process (tests/hostile_worker.py) whose
answers to calls naming `/hostile/MODE` are replaced by what a worker could send once a guest
had escaped Wasmtime into it: it can fail its own sandboxes, never run code in this process,
make it hold more than a bounded multiple of what it sent, or touch another worker's sandboxes.
"""

from __future__ import annotations

import os
import pickle
import struct
import time
import tracemalloc
from pathlib import Path
from typing import Any, Iterator

import msgpack
import pytest

from declaw_wasm import Limits, Sandbox, SandboxException, TimeoutException
from declaw_wasm._pool import client
from declaw_wasm._pool.codec import (MAX_ARRAYS, MAX_ITEMS, MAX_MAPS, MAX_MESSAGE, MODEL, BadMessage,
                                    MessageTooLarge, pack, unpack)
from declaw_wasm._pool.pool import ProcessPool

from security.support import PeakRSS

MiB = 1 << 20
FACTOR = 48  # the most a decoded message may cost in Python objects, times its size (~40 measured)
ROOT = Path(__file__).resolve().parent.parent


# -- the codec, alone --------------------------------------------------------------------------------
def _cost(data: bytes) -> tuple[Any, int]:
    """(what `unpack` made of `data`, or the exception it raised; the peak bytes it allocated)."""
    tracemalloc.start()
    try:
        out: Any = unpack(data)
    except Exception as exc:  # the caller checks which
        out = exc
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return out, peak


def _array(n: int, item: bytes) -> bytes:
    return b"\xdd" + struct.pack(">I", n) + item * n


def test_a_declared_length_is_bounded_by_the_bytes_that_are_there() -> None:
    for data in (b"\xdd\xff\xff\xff\xff", b"\xdf\xff\xff\xff\xff", b"\xdb\xff\xff\xff\xff",
                 b"\xc6\xff\xff\xff\xff", b"\xc9\xff\xff\xff\xff\x01"):  # array, map, str, bin, ext
        out, peak = _cost(data)
        assert isinstance(out, BadMessage), (data, out)
        assert peak < 64 << 10


def test_nesting_is_bounded() -> None:
    out, peak = _cost(b"\x91" * 10**6 + b"\xc0")
    assert isinstance(out, BadMessage) and peak < MiB
    inner = msgpack.ExtType(MODEL, msgpack.packb(["SandboxInfo", {}]))
    nested = msgpack.packb([msgpack.ExtType(MODEL, msgpack.packb(["EntryInfo", inner]))])
    out, _ = _cost(nested)
    assert isinstance(out, BadMessage) and "another extension type" in str(out)


def test_a_message_costs_a_bounded_multiple_of_its_size() -> None:
    """The costliest things one byte of msgpack can stand for (empty arrays, maps of one entry,
    1-byte ints outside CPython's small-int cache, 2-character strings) cost at most FACTOR
    times the message; past the container budget the message is refused."""
    n = 2 * MiB
    for data in (_array(n, b"\x90"), _array(n, b"\x80"), _array(n // 3, b"\x81\xc0\xc0"), _array(n, b"\xf0"),
                 _array(n // 3, b"\xa2ab"), msgpack.packb([[0, 1]] * (n // 3)),
                 msgpack.packb([["stdout", "x"]] * (n // 10))):
        out, peak = _cost(data)
        assert peak < FACTOR * len(data), (data[:8], peak / len(data))
    assert isinstance(_cost(_array(n, b"\x90"))[0], BadMessage)  # one array per 2 bytes at most
    assert isinstance(_cost(_array(n // 3, b"\x81\xc0\xc0"))[0], BadMessage)  # one map per 16 bytes


def test_a_message_costs_a_bounded_amount_whatever_its_size() -> None:
    """A large message padded with bytes (raising its proportional budget) still holds at most
    MAX_ARRAYS arrays, MAX_MAPS maps and MAX_ITEMS items."""
    pad = msgpack.packb(b"x" * (24 * MiB))
    for rest, says in ((_array(MAX_ARRAYS + 10, b"\x90"), "more arrays"),
                       (_array(MAX_MAPS + 10, b"\x80"), "more maps"),
                       (_array(MAX_ITEMS + 10, b"\xc0"), "exceeds max_array_len"),
                       (_array(8, _array(MAX_ITEMS // 7, b"\xc0")), f"more than {MAX_ITEMS} items")):
        out, peak = _cost(b"\x92" + pad + rest)
        assert isinstance(out, BadMessage) and says in str(out), out
        assert peak < 24 * MiB + 100 * MiB, peak


def test_only_allow_listed_models_cross() -> None:
    for name in ("os.system", "Pwn", "BaseModel", "Sandbox"):
        out, _ = _cost(msgpack.packb([msgpack.ExtType(MODEL, msgpack.packb([name, {}]))]))
        assert isinstance(out, BadMessage) and "unexpected type" in str(out)
    out, _ = _cost(msgpack.packb(msgpack.ExtType(MODEL, pickle.dumps(Exception("x")))))
    assert isinstance(out, BadMessage)
    out, _ = _cost(pickle.dumps({"a": 1}))  # a pickle is not a message
    assert isinstance(out, BadMessage)
    out, _ = _cost(msgpack.packb(msgpack.ExtType(7, b"")))
    assert isinstance(out, BadMessage) and "unknown extension type 7" in str(out)


def test_a_message_over_the_limit_is_refused_by_its_sender() -> None:
    with pytest.raises(MessageTooLarge, match=f"more than a message may carry \\({MAX_MESSAGE} bytes"):
        pack([1, "ok", b"x" * MAX_MESSAGE])
    with pytest.raises(MessageTooLarge, match="more arrays than a message of 16008 bytes"):  # small, over budget
        pack([1, "ok", [[]] * 16000])
    assert unpack(pack([1, "ok", [[0]] * 16000]))[2] == [[0]] * 16000
    assert unpack(pack([1, "ok", bytes(range(256)) * 2000]))[2] == bytes(range(256)) * 2000
    with pytest.raises(TypeError, match="cannot send a object"):
        pack([1, "ok", object()])


# -- a compromised worker -------------------------------------------------------------------------------
class HostilePool(ProcessPool):
    worker_module = "tests.hostile_worker"


@pytest.fixture(scope="module")
def guest_path() -> str:
    return "warm"  # the pool runs the same host code on both guest paths


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HostilePool, Path]]:
    """A pool of two hostile-module workers (each honest until a call names `/hostile/MODE`), and
    the file their pickles would create if this process ever unpickled one."""
    marker = tmp_path_factory.mktemp("hostile") / "pwned"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HOSTILE_MARKER", str(marker))
        env.setenv("DECLAW_WASM_SNAPSHOT", "1")
        env.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        pool = HostilePool(2)
    try:
        yield pool, marker
    finally:
        pool.close()


@pytest.fixture
def pair(hostile: tuple[HostilePool, Path]) -> Iterator[tuple[Sandbox, Sandbox, Sandbox]]:
    """(victim, its neighbour on the same worker, a bystander on the other worker)."""
    pool, _ = hostile
    made: list[Sandbox] = []
    by_pid: dict[int, list[Sandbox]] = {}
    while len(by_pid) < 2 or max(map(len, by_pid.values())) < 2:  # placement is by load
        assert len(made) < 8
        made.append(Sandbox.create(backend=pool, timeout=300))
        by_pid.setdefault(pool.pid_of(made[-1].sandbox_id), []).append(made[-1])
    shared = next(group for group in by_pid.values() if len(group) >= 2)
    bystander = next(s for s in made if s not in shared)
    yield shared[0], shared[1], bystander
    for sandbox in made:
        sandbox.kill()


def _echo(sandbox: Sandbox) -> None:
    assert sandbox.commands.run("echo ok", timeout=30).stdout == "ok\n"


FATAL = {  # mode: what the lost sandboxes' error says
    "declared": "exceeds max_array_len",
    "deep": "StackError",
    "arrays": "more arrays than a message",
    "pickle": "ExtraData",
    "pickle-ext": "ExtraData",
    "model": "unexpected type 'os.system'",
    "unknown": "an unknown notice 'upgrade'",
    "tool-bytes": "a tool call is [id, token, name, arguments]",
    "huge": f"a message of more than {MAX_MESSAGE} bytes",
}


@pytest.mark.guest
@pytest.mark.parametrize("mode", sorted(FATAL))
def test_a_worker_sending_what_is_not_a_message_loses_only_its_own_sandboxes(
        mode: str, hostile: tuple[HostilePool, Path], pair: tuple[Sandbox, Sandbox, Sandbox],
        no_background_guests: None) -> None:
    """Garbage, bombs and pickles from a worker: this process decodes nothing it cannot bound,
    unpickles nothing, kills the worker, and its sandboxes (only they) fail naming why."""
    pool, marker = hostile
    victim, neighbour, bystander = pair
    pid = pool.pid_of(victim.sandbox_id)
    with PeakRSS() as mem:
        with pytest.raises(SandboxException) as failed:
            victim.files.exists(f"/hostile/{mode}")
    message = str(failed.value)
    assert f"the worker process {pid} hosting it" in message and FATAL[mode] in message, message
    assert "was killed by SIGKILL after it sent a bad message" in message
    assert mem.growth < (96 if mode == "arrays" else 32) * MiB, mem.growth  # 8 MiB of empty arrays: 1 M at most
    assert not marker.exists()  # nothing was unpickled
    with pytest.raises(SandboxException, match="is lost"):
        neighbour.commands.run("echo")
    _echo(bystander)  # the other worker never noticed
    _echo(Sandbox.create(backend=pool, timeout=60))  # the pool filled the slot


@pytest.mark.guest
def test_a_worker_lying_about_types_fails_only_that_call(hostile: tuple[HostilePool, Path],
                                                         pair: tuple[Sandbox, Sandbox, Sandbox],
                                                         no_background_guests: None) -> None:
    """Well-formed answers of the wrong type are refused, never converted (bytes(2**40))."""
    victim, neighbour, bystander = pair
    with PeakRSS() as mem:
        with pytest.raises(SandboxException, match="answered read_open with a int, not"):
            victim.files.read("/hostile/lie-int")
        with pytest.raises(SandboxException, match="malformed error"):
            victim.files.exists("/hostile/lie-error")
    assert mem.growth < 32 * MiB
    _echo(victim)
    _echo(neighbour)


@pytest.mark.guest
def test_host_tool_arguments_from_a_worker_are_decoded_within_bounds(hostile: tuple[HostilePool, Path],
                                                                    no_background_guests: None) -> None:
    """A worker's host tool call whose arguments are 8 MiB of empty arrays (~550 MB as Python
    lists) is refused before the tools' decoder sees it (within the codec's budget: 1 M arrays
    at most); the tool never runs."""
    pool, _ = hostile
    calls: list[Any] = []
    sandbox = Sandbox.create(backend=pool, timeout=300, tools={"echo": lambda *a: calls.append(a)})
    try:
        with PeakRSS() as mem:
            assert sandbox.files.exists("/hostile/tool-bomb") is True
            time.sleep(1)
        assert mem.growth < 96 * MiB and calls == [], mem.growth
        _echo(sandbox)
    finally:
        sandbox.kill()


@pytest.mark.guest
def test_every_request_gets_one_answer_even_when_it_cannot_be_encoded(
        hostile: tuple[HostilePool, Path], pair: tuple[Sandbox, Sandbox, Sandbox]) -> None:
    """An answer msgpack cannot carry, or one over the limit, comes back as an error; the
    worker and its sandboxes carry on."""
    victim, neighbour, _ = pair
    with pytest.raises(SandboxException, match="the answer to exists could not be sent .*TypeError"):
        victim.files.exists("/hostile/unencodable")
    with pytest.raises(SandboxException, match="the answer to exists could not be sent .*MessageTooLarge"):
        victim.files.exists("/hostile/too-large")
    _echo(victim)
    _echo(neighbour)


@pytest.mark.guest
def test_a_worker_that_never_answers_is_waited_for_a_bounded_time(
        hostile: tuple[HostilePool, Path], pair: tuple[Sandbox, Sandbox, Sandbox],
        monkeypatch: pytest.MonkeyPatch) -> None:
    victim, _, _ = pair
    monkeypatch.setattr(client, "CALL_WAIT", 2.0)
    start = time.monotonic()
    with pytest.raises(TimeoutException, match="did not answer exists within 2 s"):
        victim.files.exists("/hostile/silent")
    assert time.monotonic() - start < 5
    start = time.monotonic()  # a command's stream: its timeout, and CALL_WAIT more
    with pytest.raises(TimeoutException, match="did not answer start within 3 s"):
        victim.commands.run("cat /hostile/silent", timeout=1)
    assert time.monotonic() - start < 6
    _echo(victim)


# -- an honest worker, a guest making its answer too large ---------------------------------------------
@pytest.mark.guest
def test_a_cells_answer_too_large_to_send_fails_the_cell_not_the_worker() -> None:
    """A cell whose Execution is over the channel's limit (a raised output limit), or over the
    budget the pool's reader gives a message of its size, gets an error naming why; the worker
    and every other sandbox on it live on (it used to end the worker)."""
    pool = ProcessPool(1)
    try:
        big = Sandbox.create(backend=pool, limits=Limits(output_limit=96 * MiB), timeout=300)
        other = Sandbox.create(backend=pool, timeout=300)
        pid = pool.pid_of(big.sandbox_id)
        with pytest.raises(SandboxException, match="the answer to run_code could not be sent .*MessageTooLarge"):
            big.run_code("for _ in range(70):\n    print('x' * (1 << 20))")
        # a small answer the pool's reader would refuse: a result of 16 000 empty lists in 16 KB
        empty_lists = "from declaw_shell import door\ndoor.call('result', data={'application/json': [[]] * 16000})"
        with pytest.raises(SandboxException, match="the answer to run_code could not be sent .*more arrays"):
            big.run_code(empty_lists)
        with pytest.raises(SandboxException, match="the answer to run_code could not be sent .*more arrays"):
            big.run_code(empty_lists, on_result=lambda result: None)  # as a stream's message
        assert pool.pid_of(other.sandbox_id) == pid
        _echo(other)
        assert big.run_code("1 + 1").text == "2"
    finally:
        pool.close()


# -- a compromised Ray host actor -----------------------------------------------------------------------
def _hostile_host_class(marker: str) -> type:
    """A `SandboxHost` whose answer to a call naming `/hostile/MODE` is what an actor taken over
    by a guest could return through Ray (defined here, so Ray ships it by value)."""
    import time as clock

    from declaw_wasm._pool.codec import pack as encode
    from declaw_wasm._ray.actor import SandboxHost

    class Pwn:
        def __reduce__(self) -> Any:
            return (os.system, (f"touch {marker}",))

    class Boom(Exception):
        def __reduce__(self) -> Any:
            return (os.system, (f"touch {marker}",))

    class Hostile(SandboxHost):
        def call(self, sandbox_id: Any, method: str, args: list[Any], envs: Any = None,
                 secrets: Any = None, state_key: Any = None) -> Any:
            mode = next((a[len("/hostile/"):] for a in args if isinstance(a, str) and a.startswith("/hostile/")), "")
            if mode == "pickle":  # an object: Ray pickles it
                return Pwn()
            if mode == "raise":  # an exception: Ray pickles it into its error
                raise Boom()
            if mode == "declared":
                return b"\xdd\xff\xff\xff\xff"
            if mode == "deep":
                return b"\x91" * 10**6 + b"\xc0"
            if mode == "huge":  # bytes over the codec's limit (through the object store)
                return b"\x00" * ((64 << 20) + 1)
            if mode == "lie":
                return encode(["ok", 1 << 40])
            if mode == "silent":
                clock.sleep(3600)
            return super().call(sandbox_id, method, args, envs, secrets, state_key)

    return Hostile


RAY_FATAL = {"pickle": "would have to unpickle ('PYTHON')", "declared": "exceeds max_array_len",
             "deep": "StackError", "huge": f"more than {MAX_MESSAGE}"}


@pytest.mark.guest
def test_a_compromised_ray_host_can_fail_its_own_sandboxes_and_nothing_more(
        ray_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_background_guests: None) -> None:
    """An actor's answers are raw bytes decoded with the pool's bounded codec: a pickled object
    or exception, a msgpack bomb, an answer over the limit is refused without unpickling or
    copying it (the actor is killed and replaced: its own sandboxes are lost), a lie about types
    fails the call, silence past the wait fails it. Nothing runs here, and the other host's
    sandboxes never notice. (What a compromised actor can still do through Ray's own API — run
    tasks anywhere on the cluster — is why a Ray cluster is one trust domain: docs/scale.md.)"""
    from declaw_wasm._ray.sandboxes import RaySandboxes

    marker = tmp_path / "pwned"

    class HostileRay(RaySandboxes):
        host_class = _hostile_host_class(str(marker))

    backend = HostileRay(hosts=2)
    made: list[Sandbox] = []

    def create() -> Sandbox:
        made.append(Sandbox.create(backend=backend, timeout=300))
        return made[-1]

    try:
        for mode, says in RAY_FATAL.items():
            victim = create()
            bystander = create()
            deadline = time.monotonic() + 120  # a replaced host is loading the runtime meanwhile
            while backend.host_of(bystander.sandbox_id)["name"] == backend.host_of(victim.sandbox_id)["name"]:
                assert time.monotonic() < deadline
                time.sleep(1)
                bystander = create()
            with PeakRSS() as mem:
                with pytest.raises(SandboxException) as failed:
                    victim.files.exists(f"/hostile/{mode}")
            assert "sent a bad answer" in str(failed.value) and says in str(failed.value), (mode, failed.value)
            assert mem.growth < 32 * MiB, (mode, mem.growth)
            _echo(bystander)
        with pytest.raises(SandboxException, match="TASK_EXECUTION_EXCEPTION"):  # the pickled error stays unread
            create().files.exists("/hostile/raise")
        lied = create()
        with pytest.raises(SandboxException, match="answered read_open with a int"):
            lied.files.read("/hostile/lie")
        monkeypatch.setattr(client, "CALL_WAIT", 2.0)
        with pytest.raises(TimeoutException, match="did not answer exists within 2 s"):
            lied.files.exists("/hostile/silent")
        assert not marker.exists()  # nothing was unpickled
        _echo(lied)
    finally:
        for sandbox in made:
            try:
                sandbox.kill()
            except SandboxException:
                pass
        import ray

        for link in list(backend._links.values()):
            ray.kill(link.handle)
