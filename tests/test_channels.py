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
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import msgpack
import pytest

from declaw_wasm import Limits, Sandbox, SandboxException, TimeoutException
from declaw_wasm._pool import client
from declaw_wasm._pool.codec import (MAX_ARRAYS, MAX_ITEMS, MAX_MAPS, MAX_MESSAGE, MODEL, BadMessage,
                                    MessageTooLarge, pack, unpack)
from declaw_wasm._pool.client import OUTPUT_SLACK, TRUNCATED
from declaw_wasm._pool.pool import MAX_TOOL_BYTES, ProcessPool

from security.support import PeakRSS
from tracing import traced


MiB = 1 << 20
FACTOR = 48  # the most a decoded message may cost in Python objects, times its size (~40 measured)
ROOT = Path(__file__).resolve().parent.parent


# -- the codec, alone --------------------------------------------------------------------------------
def _cost(data: bytes) -> tuple[Any, int]:
    """(what `unpack` made of `data`, or the exception it raised; the peak bytes it allocated)."""
    with traced() as peak:
        try:
            out: Any = unpack(data)
        except Exception as exc:  # the caller checks which
            out = exc
        return out, peak.now()


def _array(n: int, item: bytes) -> bytes:
    return b"\xdd" + struct.pack(">I", n) + item * n


@pytest.mark.traces_memory  # tracemalloc stays on after it (tracing.py)
def test_a_declared_length_is_bounded_by_the_bytes_that_are_there() -> None:
    for data in (b"\xdd\xff\xff\xff\xff", b"\xdf\xff\xff\xff\xff", b"\xdb\xff\xff\xff\xff",
                 b"\xc6\xff\xff\xff\xff", b"\xc9\xff\xff\xff\xff\x01"):  # array, map, str, bin, ext
        out, peak = _cost(data)
        assert isinstance(out, BadMessage), (data, out)
        assert peak < 64 << 10


@pytest.mark.traces_memory  # tracemalloc stays on after it (tracing.py)
def test_nesting_is_bounded() -> None:
    out, peak = _cost(b"\x91" * 10**6 + b"\xc0")
    assert isinstance(out, BadMessage) and peak < MiB
    inner = msgpack.ExtType(MODEL, msgpack.packb(["SandboxInfo", {}]))
    nested = msgpack.packb([msgpack.ExtType(MODEL, msgpack.packb(["EntryInfo", inner]))])
    out, _ = _cost(nested)
    assert isinstance(out, BadMessage) and "another extension type" in str(out)


@pytest.mark.heavy
@pytest.mark.traces_memory  # tracemalloc stays on after it (tracing.py)
def test_a_message_costs_a_bounded_multiple_of_its_size() -> None:
    """The costliest things one byte of msgpack can stand for (empty arrays, maps of one entry,
    1-byte ints outside CPython's small-int cache, 2-character strings) cost at most FACTOR
    times the message; past the container budget the message is refused."""
    n = MiB // 2
    for data in (_array(n, b"\x90"), _array(n, b"\x80"), _array(n // 3, b"\x81\xc0\xc0"), _array(n, b"\xf0"),
                 _array(n // 3, b"\xa2ab"), msgpack.packb([[0, 1]] * (n // 3)),
                 msgpack.packb([["stdout", "x"]] * (n // 10))):
        out, peak = _cost(data)
        assert peak < FACTOR * len(data), (data[:8], peak / len(data))
    assert isinstance(_cost(_array(n, b"\x90"))[0], BadMessage)  # one array per 2 bytes at most
    assert isinstance(_cost(_array(n // 3, b"\x81\xc0\xc0"))[0], BadMessage)  # one map per 16 bytes


@pytest.mark.heavy
@pytest.mark.traces_memory  # tracemalloc stays on after it (tracing.py)
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


@pytest.mark.traces_memory  # tracemalloc stays on after it (tracing.py)
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


@pytest.mark.traces_memory  # tracemalloc stays on after it (tracing.py)
def test_msgpack_timestamps_do_not_cross() -> None:
    """msgpack decodes its own extension type -1 (a `Timestamp`) without asking the codec's
    `ext_hook`: it is refused wherever it stands (top level, in an array, as a map's key or value,
    in a model's fields), in any of its encodings, so only plain data and allow-listed models
    cross; the bytes of one inside a string are only bytes."""
    stamp = msgpack.Timestamp(5)
    for message in (stamp, [1, stamp], {"a": stamp}, {stamp: 1}, [[{"x": [stamp]}]],
                    msgpack.ExtType(MODEL, msgpack.packb(["EntryInfo", stamp])),
                    [msgpack.ExtType(MODEL, msgpack.packb(["EntryInfo", {"name": stamp}]))]):
        out, _ = _cost(msgpack.packb(message))
        assert isinstance(out, BadMessage) and "Timestamp" in str(out), (message, out)
    for raw in (b"\xc7\x0c\xff" + bytes(12), b"\x91\xc8\x00\x0c\xff" + bytes(12),
                b"\x91\xc9\x00\x00\x00\x0c\xff" + bytes(12)):
        out, _ = _cost(raw)
        assert isinstance(out, BadMessage) and "Timestamp" in str(out), (raw, out)
    assert unpack(msgpack.packb([b"\xd6\xff\x00\x00\x00\x05", "\xff"])) == [b"\xd6\xff\x00\x00\x00\x05", "\xff"]


def _deep_chart_result(depth: int) -> bytes:
    chart: dict[str, Any] = {"type": "line", "elements": []}
    for _ in range(depth):
        chart = {"type": "superchart", "elements": [chart]}
    return msgpack.packb([1, "ok", msgpack.ExtType(MODEL, msgpack.packb(["Result", {"text": "x", "chart": chart}]))])


@pytest.mark.traces_memory  # tracemalloc stays on after it (tracing.py)
def test_whatever_raises_while_decoding_is_a_bad_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host's answer holding a chart of 400 nested supercharts (10 KB) is read with the nesting
    cut at MAX_CHART_DEPTH; and were a model's validation to recurse past Python's limit anyway,
    the receiver gets a `BadMessage`, never a `RecursionError` (which escaped Ray's driver)."""
    from declaw_wasm import charts

    out = unpack(_deep_chart_result(400))[2]
    depth, chart = 0, out.chart
    while chart.elements:
        depth, chart = depth + 1, chart.elements[0]
    assert depth == charts.MAX_CHART_DEPTH
    monkeypatch.setattr(charts, "MAX_CHART_DEPTH", 10**6)  # as if nothing bounded the recursion
    out, _ = _cost(_deep_chart_result(400))
    assert isinstance(out, BadMessage) and "RecursionError" in str(out), out


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
        env.setenv("DECLAW_WASM_WARM_IMAGE", "1")
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
    assert mem.growth < (80 if mode == "arrays" else 32) * MiB, mem.growth  # 8 MiB of empty arrays: 512 K at most
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
    lists) is refused before the tools' decoder sees it (within the codec's budget: 512 K
    arrays at most); the tool never runs."""
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


@pytest.mark.guest
@pytest.mark.parametrize("call", ["fork", "create"])
def test_a_worker_cannot_claim_another_workers_sandbox(call: str, hostile: tuple[HostilePool, Path],
                                                      pair: tuple[Sandbox, Sandbox, Sandbox],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker answering a fork or a create with the id of a sandbox on another worker (which
    it may learn from the shared store's listings, or a connect sent to it) would get that
    sandbox's calls — the agent's files, code, envs — from then on: the pool refuses the id,
    fails the call, and kills the worker as compromised. The other worker's sandbox stays where it
    is, reachable by id; only the liar's own sandboxes are lost."""
    pool, _ = hostile
    victim, neighbour, bystander = pair
    pid, home = pool.pid_of(victim.sandbox_id), pool.pid_of(bystander.sandbox_id)
    victim.files.exists(f"/hostile/claim/{call}/{bystander.sandbox_id}")  # what the worker answers next
    liar = next(w for w in pool.workers if w.pid == pid)
    original = pool._pick

    def pick(ready_first: bool = False) -> Any:  # the create goes to the liar, whatever the loads
        with pool._lock:
            liar.pending += 1
        return liar

    monkeypatch.setattr(pool, "_pick", pick)
    with pytest.raises(SandboxException) as failed:
        victim.fork() if call == "fork" else Sandbox.create(backend=pool, timeout=60)
    assert f"the worker process {pid} sent a bad message (it named sandbox {bystander.sandbox_id} as one it " \
        "made, which it did not), so it was killed" in str(failed.value)
    monkeypatch.setattr(pool, "_pick", original)
    assert pool.pid_of(bystander.sandbox_id) == home
    again = Sandbox.connect(bystander.sandbox_id, backend=pool)
    again.files.write("/home/user/token.txt", "for the bystander")
    assert bystander.files.read("/home/user/token.txt") == "for the bystander"
    with pytest.raises(SandboxException, match="is lost: .*after it sent a bad message"):
        neighbour.commands.run("echo")
    _echo(bystander)


@pytest.mark.guest
def test_a_fork_answered_with_the_wrong_number_of_ids_fails(hostile: tuple[HostilePool, Path],
                                                          pair: tuple[Sandbox, Sandbox, Sandbox]) -> None:
    victim, _, _ = pair
    victim.files.exists("/hostile/claim/fork/none")
    with pytest.raises(SandboxException, match="answered fork with 0 distinct ids for 1 forks"):
        victim.fork()
    _echo(victim)


@pytest.mark.guest
def test_a_workers_tool_calls_cost_the_driver_bounded_memory(hostile: tuple[HostilePool, Path],
                                                           no_background_guests: None) -> None:
    """A worker sending 100 host tool calls of 4 MiB arguments each (400 MiB) against a tool
    that blocks: calls past 64 MiB of arguments running and queued here (MAX_TOOL_BYTES, a
    guest's own bound in-process) are refused at once; this process holds ~64 MiB, not 400."""
    pool, _ = hostile
    release = threading.Event()
    started: list[int] = []

    def slow(data: bytes) -> int:
        started.append(len(data))
        release.wait(60)
        return len(data)

    sandbox = Sandbox.create(backend=pool, timeout=300, tools={"slow": slow})
    try:
        with PeakRSS(os.getpid()) as mem:
            assert sandbox.files.exists("/hostile/tool-flood/100/4") is True
            time.sleep(3)
        release.set()
        time.sleep(1)
        # MAX_TOOL_BYTES (64 MiB) held, a call's frame and its decoded copy in flight, and what
        # the allocator keeps: 88-93 MB seen alone, 107 MB after test_pool.py (likely glibc's
        # dynamic mmap threshold, raised once large blocks were freed: later 4 MiB blocks then
        # come from a heap that keeps them). A third of the 400 MiB sent.
        assert mem.growth < 128 * MiB, mem.growth
        assert 0 < len(started) <= MAX_TOOL_BYTES // (4 * MiB), len(started)  # the rest never ran
        _echo(sandbox)
    finally:
        release.set()
        sandbox.kill()


@pytest.mark.guest
def test_a_workers_output_costs_the_driver_at_most_the_output_limit(hostile: tuple[HostilePool, Path],
                                                                    no_background_guests: None) -> None:
    """A worker sending a command 200 MiB of stdout, a cell 300 MiB of streamed logs and 300 MiB
    of results, and a cell's answer of 56 MiB, for a sandbox whose output limit is 1 MiB: this
    process keeps (and hands its callbacks) the limit and a little slack per stream, cut as
    in-process output is; its memory grows by a few MiB, not hundreds."""
    pool, _ = hostile
    sandbox = Sandbox.create(backend=pool, timeout=300, limits=Limits(output_limit=MiB))
    try:
        seen: list[int] = []
        with PeakRSS(os.getpid()) as mem:
            r = sandbox.commands.run("true /hostile/flood/200", timeout=120,
                                     on_stdout=lambda text: seen.append(len(text)))
        assert len(r.stdout) == sum(seen) <= MiB + OUTPUT_SLACK and r.error == "stdout truncated at the " \
            "sandbox's output limit", (len(r.stdout), r.error)
        assert mem.growth < 24 * MiB, mem.growth
        lines: list[str] = []
        results: list[Any] = []
        with PeakRSS(os.getpid()) as mem:
            ex = sandbox.run_code("'/hostile/flood/300'", on_stdout=lambda m: lines.append(m.line),
                                  on_result=results.append)
        assert sum(map(len, lines)) <= MiB + OUTPUT_SLACK + 100 and lines[-1].endswith(TRUNCATED)
        assert sum(len(r.html or "") for r in results) <= 2 * MiB + OUTPUT_SLACK
        assert sum(map(len, ex.logs.stdout)) <= MiB + OUTPUT_SLACK + 100
        # the cell's last message (16 MiB of log lines) decoded, and messages in flight: not the 600 MiB sent
        assert mem.growth < 80 * MiB, mem.growth
        ex = sandbox.run_code("'/hostile/flood/56'")  # no callbacks: one answer of 56 MiB
        assert sum(map(len, ex.logs.stdout)) <= MiB + OUTPUT_SLACK + 100 and ex.logs.stdout[-1].endswith(TRUNCATED)
        assert sum(len(r.html or "") for r in ex.results) <= 2 * MiB + OUTPUT_SLACK
        assert any("results dropped" in line for line in ex.logs.stderr)
        _echo(sandbox)
    finally:
        sandbox.kill()


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
def _hostile_host_class(marker: str) -> type:  # noqa: C901 (one class: its methods count here)
    """A `SandboxHost` whose answer to a call naming `/hostile/MODE` is what an actor taken over
    by a guest could return through Ray (defined here, so Ray ships it by value)."""
    import time as clock

    from declaw_wasm._pool.codec import MODEL
    from declaw_wasm._pool.codec import pack as encode
    from declaw_wasm._ray.actor import SandboxHost
    from declaw_wasm.execution import Execution, Result
    from declaw_wasm.wire import EndLine, OutputLine, StartLine

    def deep_chart(depth: int) -> bytes:  # as tests/hostile_worker.py's (here: shipped by value)
        chart: dict[str, Any] = {"type": "line", "elements": []}
        for _ in range(depth):
            chart = {"type": "superchart", "elements": [chart]}
        return msgpack.packb(msgpack.ExtType(MODEL, msgpack.packb(["Result", {"text": "x", "chart": chart}])))

    class Pwn:
        def __reduce__(self) -> Any:
            return (os.system, (f"touch {marker}",))

    class Boom(Exception):
        def __reduce__(self) -> Any:
            return (os.system, (f"touch {marker}",))

    def mode_of(args: list[Any]) -> str:
        texts = [getattr(a, "cmd", None) or getattr(a, "code", None) or a for a in args]
        return next((t[t.index("/hostile/") + 9:].split()[0].strip("'") for t in texts
                     if isinstance(t, str) and "/hostile/" in t), "")

    class Hostile(SandboxHost):
        flooding = 0  # MiB of a command's output still to send

        def load(self) -> Any:
            try:
                mine = open(marker + ".load").read() == self.name
            except OSError:
                mine = False
            return deep_chart(400) if mine else super().load()

        def run(self, sandbox_id: str, args: list[Any], envs: Any, wait: float) -> bytes:
            mode = mode_of(args)
            if not mode.startswith("flood/"):
                return super().run(sandbox_id, args, envs, wait)
            self.flooding = int(mode.split("/")[1])
            return encode([[[StartLine(pid=4242)]], "flood"])

        def stream_open(self, sandbox_id: str, op: str, args: list[Any], envs: Any, wait: float) -> bytes:
            if args == ["flood"]:
                return encode(["flood", []])
            return super().stream_open(sandbox_id, op, args, envs, wait)

        def stream_next(self, token: str, wait: float) -> bytes:
            if token != "flood":
                return super().stream_next(token, wait)
            if self.flooding <= 0:
                return encode([True, [[EndLine(exit_code=0)]]])
            self.flooding -= 1
            return encode([False, [[OutputLine(type="stdout", data="x" * (1 << 20))]]])

        def call(self, sandbox_id: Any, method: str, args: list[Any], envs: Any = None,
                 secrets: Any = None, state_key: Any = None) -> Any:
            mode = mode_of(args)
            if mode == "timestamp":
                return b"\x92\xa2ok\xd6\xff\x00\x00\x00\x05"
            if mode == "deep-chart":
                return b"\x92\xa2ok" + deep_chart(400)
            if mode.startswith("flood") and method == "run_code":  # a cell's answer of 56 MiB
                block = "x" * (1 << 20)
                return encode(["ok", Execution(logs={"stdout": [block] * 24, "stderr": [block] * 8},
                                               results=[Result(html=block)] * 24)])
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


def _apart(backend: Any, made: list[Sandbox]) -> tuple[Sandbox, Sandbox]:
    """Two new sandboxes on two different Ray hosts."""
    made.append(Sandbox.create(backend=backend, timeout=300))
    victim = made[-1]
    deadline = time.monotonic() + 120  # a replaced host is loading the runtime meanwhile
    while True:
        made.append(Sandbox.create(backend=backend, timeout=300))
        if backend.host_of(made[-1].sandbox_id)["name"] != backend.host_of(victim.sandbox_id)["name"]:
            return victim, made[-1]
        assert time.monotonic() < deadline
        time.sleep(1)


def _hostile_ray(marker: Path) -> Any:
    from declaw_wasm._ray.sandboxes import RaySandboxes

    class HostileRay(RaySandboxes):
        host_class = _hostile_host_class(str(marker))

    return HostileRay(hosts=2)


@pytest.fixture
def default_recursion_limit() -> Iterator[None]:
    """Python's default recursion limit for the test (a library an earlier test ran may have left
    it raised, and 400 nested charts then decode without a RecursionError)."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        yield
    finally:
        sys.setrecursionlimit(before)


def _end_ray(backend: Any, made: list[Sandbox]) -> None:
    import ray

    for sandbox in made:
        try:
            sandbox.kill()
        except SandboxException:
            pass
    for link in list(backend._links.values()):
        ray.kill(link.handle)


@pytest.mark.guest
@pytest.mark.parametrize("where", ["pool", "ray"])
def test_a_host_answer_that_cannot_be_decoded_kills_only_that_host(
        where: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        no_background_guests: None, default_recursion_limit: None) -> None:
    """A worker's or Ray host's answer holding a msgpack Timestamp, or a chart whose reading
    recurses past Python's limit (400 nested supercharts, with the chart depth cap lifted: any
    exception out of decoding), is a bad answer: the host is killed (and replaced), its sandboxes
    fail naming why, the others never notice. On Ray a host answering `load` so (asked of up to 8
    hosts on every create) used to fail every create with a RecursionError and was never
    replaced: now it is replaced, and creates go on."""
    from declaw_wasm import charts

    if where == "pool":
        pool, _ = request.getfixturevalue("hostile")
        made: list[Sandbox] = []
        try:
            for mode, says in (("timestamp", "Timestamp"), ("deep-chart", "RecursionError")):
                victim, neighbour, bystander = _pool_pair(pool, made)
                with monkeypatch.context() as patch:
                    patch.setattr(charts, "MAX_CHART_DEPTH", 10**6)
                    with pytest.raises(SandboxException) as failed:
                        victim.files.exists(f"/hostile/{mode}")
                assert "after it sent a bad message" in str(failed.value) and says in str(failed.value), failed.value
                with pytest.raises(SandboxException, match="is lost"):
                    neighbour.commands.run("echo")
                _echo(bystander)
        finally:
            for sandbox in made:
                sandbox.kill()
        return
    request.getfixturevalue("ray_cluster")
    backend = _hostile_ray(tmp_path / "pwned")
    made = []
    try:
        for mode, says in (("timestamp", "Timestamp"), ("deep-chart", "RecursionError")):
            victim, bystander = _apart(backend, made)
            with monkeypatch.context() as patch:
                patch.setattr(charts, "MAX_CHART_DEPTH", 10**6)
                with pytest.raises(SandboxException) as failed:
                    victim.files.exists(f"/hostile/{mode}")
            assert "sent a bad answer" in str(failed.value) and says in str(failed.value), (mode, failed.value)
            _echo(bystander)
        victim, bystander = _apart(backend, made)  # both hosts up
        liar = backend.host_of(victim.sandbox_id)["name"]
        (tmp_path / "pwned.load").write_text(liar)
        with monkeypatch.context() as patch:
            patch.setattr(charts, "MAX_CHART_DEPTH", 10**6)
            for _ in range(3):  # every create asks both hosts' loads
                made.append(Sandbox.create(backend=backend, timeout=60))
                _echo(made[-1])
        assert liar not in backend._links and len(backend._links) == 2  # killed and replaced
        with pytest.raises(SandboxException, match="is lost"):  # with its host
            victim.commands.run("echo")
        _echo(bystander)
    finally:
        _end_ray(backend, made)


def _pool_pair(pool: HostilePool, made: list[Sandbox]) -> tuple[Sandbox, Sandbox, Sandbox]:
    """(victim, its neighbour on the same worker, a bystander on the other worker), made anew."""
    by_pid: dict[int, list[Sandbox]] = {}
    while len(by_pid) < 2 or max(map(len, by_pid.values())) < 2:  # placement is by load
        assert sum(map(len, by_pid.values())) < 8
        made.append(Sandbox.create(backend=pool, timeout=300))
        by_pid.setdefault(pool.pid_of(made[-1].sandbox_id), []).append(made[-1])
    shared, other = sorted(by_pid.values(), key=len, reverse=True)[:2]
    return shared[0], shared[1], other[0]


@pytest.mark.guest
def test_a_ray_hosts_output_costs_the_driver_at_most_the_output_limit(
        ray_cluster: Any, tmp_path: Path, no_background_guests: None) -> None:
    """A Ray host streaming a command 300 MiB of stdout, and answering a cell with 56 MiB, for a
    sandbox whose output limit is 1 MiB: the driver keeps the limit and a little slack per
    stream, cut as in-process output is."""
    backend = _hostile_ray(tmp_path / "pwned")
    made = [Sandbox.create(backend=backend, timeout=300, limits=Limits(output_limit=MiB))]
    try:
        with PeakRSS(os.getpid()) as mem:
            r = made[0].commands.run("true /hostile/flood/300", timeout=120)
        assert len(r.stdout) <= MiB + OUTPUT_SLACK and "stdout truncated" in str(r.error), (len(r.stdout), r.error)
        assert mem.growth < 96 * MiB, mem.growth  # Ray's own buffers of 1 MiB answers (~50 MiB, for 200 or 500 sent)
        ex = made[0].run_code("'/hostile/flood/56'")
        assert sum(map(len, ex.logs.stdout)) <= MiB + OUTPUT_SLACK + 100 and ex.logs.stdout[-1].endswith(TRUNCATED)
        assert sum(len(r.html or "") for r in ex.results) <= 2 * MiB + OUTPUT_SLACK
        _echo(made[0])
    finally:
        _end_ray(backend, made)
