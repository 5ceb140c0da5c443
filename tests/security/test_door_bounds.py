"""The door's bounds, attacked from guest code: frames that would decode to far more host memory
than their size (empty containers by the million, deep nesting, huge declared lengths), the
same inside a host tool's arguments; exactly one answer per request whatever the handler does,
and every wait bounded by the guest's deadline; threads started on a guest's behalf (name
lookups, host tool calls) capped per sandbox, abandoned ones included, with a clear error
past the cap."""

from __future__ import annotations

import threading
import time
from typing import Any

import msgpack
import pytest

from declaw_wasm import Limits, Sandbox, testing
from declaw_wasm._egress.resolve import LOOKUP_THREADS, PER_SANDBOX_LOOKUPS
from declaw_wasm._local.tools import PER_SANDBOX_THREADS, TOOL_THREADS
from declaw_wasm._wasm.boot import python_spec
from declaw_wasm._wasm.guest import Guest
from declaw_wasm._wasm.layout import base_env
from declaw_wasm._wasm.shims import MAX_ANSWER, Encoded

from .support import PeakRSS, assert_host_fine, run_py

pytestmark = pytest.mark.guest

BOMBS = """
import _host, struct, time
N = (16 << 20) - 64
def send(name, frame):
    start = time.monotonic()
    try:
        _host.call(frame)
        print(name, 'answered')
    except OSError:
        print(name, 'refused', round(time.monotonic() - start, 2))
send('empty arrays', b'\\xdd' + struct.pack('>I', N) + b'\\x90' * N)
send('empty maps', b'\\xdd' + struct.pack('>I', N) + b'\\x80' * N)
send('small ints', b'\\xdd' + struct.pack('>I', N) + b'\\xe0' * N)
send('deep', b'\\x91' * 100000 + b'\\xc0')
send('declared', (b'\\xdd' + struct.pack('>I', 1 << 31)) * 1000 + b'\\xc0' * (1 << 20))
send('many keys', b'\\xdf' + struct.pack('>I', 1 << 20) + b''.join(b'\\xa3' + struct.pack('>H', i) + b'k\\xc0'
                                                              for i in range(1 << 16)))
"""


def test_door_frames_are_decoded_within_bounds(box: Sandbox, no_background_guests: None) -> None:
    """Host memory per message stays a small multiple of its size: a 16 MiB frame of empty
    arrays decoded to 16 million lists (1.2 GB, seconds of the GIL) before the walk."""
    with PeakRSS() as mem:
        r = run_py(box, BOMBS, timeout=60)
    lines = r.stdout.splitlines()
    assert [line.rsplit(" ", 2)[:2] for line in lines] == [[name, "refused"] for name in (
        "empty arrays", "empty maps", "small ints", "deep", "declared", "many keys")], r
    assert all(float(line.split()[-1]) < 2 for line in lines), r  # refused before anything is built
    assert mem.growth < 200 << 20, mem.growth >> 20  # the guest's own frames (~100 MiB) and one copy
    assert_host_fine(box)


def test_host_tool_arguments_are_decoded_within_bounds(no_background_guests: None) -> None:
    called: list[Any] = []
    with Sandbox.create(timeout=120, tools={"take": lambda *a, **k: called.append(1)}) as sbx:
        code = ("import _host, struct\nfrom declaw_net import _wire\nN = 8 << 20\n"
                "bomb = b'\\x92' + b'\\xdd' + struct.pack('>I', N) + b'\\x90' * N + b'\\x80'\n"
                "reply = _wire.unpack(_host.call(_wire.pack({'op': 'tools.call', 'name': 'take', "
                "'payload': bomb})))\nprint(reply['error']['message'])")
        with PeakRSS() as mem:
            r = run_py(sbx, code, timeout=60)
        assert "bad arguments for host tool 'take': the frame holds more than 1048576 values" in r.stdout, r
        assert mem.growth < 160 << 20, mem.growth >> 20
        assert called == []


# -- exactly one answer ---------------------------------------------------------------------------

ASK = """
import _host, msgpack, time
for what in ('set', 'huge', 'raises', 'int', 'fine', 'encoded'):
    start = time.monotonic()
    try:
        print(what, msgpack.unpackb(_host.call(msgpack.packb({'op': 'x', 'what': what}))),
              round(time.monotonic() - start))
    except OSError as e:
        print(what, 'OSError', round(time.monotonic() - start))
"""


def test_every_request_gets_exactly_one_answer_even_when_encoding_it_fails(box: Sandbox) -> None:
    """A real guest, a door whose handler answers what msgpack cannot encode, an answer over the
    door's limit, an exception: the guest gets the door's error for each, once, at once, and
    goes on; the next request is answered normally."""
    interpreter = testing.interpreter_of(box)
    calls: list[str] = []

    def door(guest: Any, request: Any) -> Any:
        what = request["what"]
        calls.append(what)
        if what == "raises":
            raise RuntimeError("a host bug")
        return {"set": {1}, "huge": b"x" * (MAX_ANSWER + 1), "int": 1 << 70, "fine": "ok",
                "encoded": Encoded(msgpack.packb("pre-encoded"))}[what]

    box.files.write("/tmp/ask.py", ASK)
    guest = Guest(interpreter, python_spec(interpreter.warm, "/tmp", ["/tmp/ask.py"], base_env(),
                                           mounts=testing.mounts(box)), door=door)
    guest.start()
    outcome = guest.wait(60)
    assert outcome is not None and outcome.exit_code == 0, outcome and outcome.stderr
    assert outcome.stdout.splitlines() == ["set OSError 0", "huge OSError 0", "raises OSError 0", "int OSError 0",
                                           "fine ok 0", "encoded pre-encoded 0"], outcome.stdout
    assert calls == ["set", "huge", "raises", "int", "fine", "encoded"]  # one handler run each


WAIT_FOREVER = """
import time
from declaw_net import _door
start = time.monotonic()
try:
    _door.call('net.poll', read=[], write=[], timeout=None)   # select() on nothing, no timeout
except BaseException as e:
    print(type(e).__name__)
"""


def test_every_wait_on_an_answer_is_bounded_by_the_guests_deadline(box: Sandbox) -> None:
    """A request that may wait without end (poll on nothing, no timeout) ends with the
    command's timeout: the host's wait looks at the guest's deadline between slices."""
    start = time.monotonic()
    with pytest.raises(Exception, match="timed out"):
        run_py(box, WAIT_FOREVER, timeout=1.5)
    assert time.monotonic() - start < 5
    assert_host_fine(box)


# -- threads started on a guest's behalf ------------------------------------------------------------

LOOKUPS = """
import socket, time
refused = []
start = time.monotonic()
for i in range(10000):
    try:
        socket.getaddrinfo('never-answers.example', 80)
    except socket.gaierror as e:
        if 'still running' in str(e):
            refused.append(str(e))
print(len(refused), round(time.monotonic() - start, 1))
print(refused[-1] if refused else '')
"""


@pytest.mark.timeout(120)
def test_name_lookup_threads_are_capped_per_sandbox_abandoned_ones_included(no_background_guests: None) -> None:
    """A guest that starts 10 000 lookups of a name whose DNS never answers (each abandoned at
    the connect timeout) holds at most PER_SANDBOX_LOOKUPS threads; past the cap each lookup
    fails at once, saying why."""
    release = threading.Event()
    with Sandbox.create(timeout=120, limits=Limits(net_connect_timeout=0.05)) as sbx:
        resolver = testing.egress_of(sbx).resolver

        def never_answers(name: str) -> list[Any]:  # a DNS server that never replies
            release.wait(120)
            raise OSError("no answer")

        resolver.system_lookup = never_answers
        try:
            r = run_py(sbx, LOOKUPS, timeout=90)
            count, _seconds = r.stdout.splitlines()[0].split()
            assert int(count) >= 10000 - PER_SANDBOX_LOOKUPS - 5, r
            assert "name lookups of this sandbox are still running, abandoned ones included" in r.stdout, r
            assert LOOKUP_THREADS.alive(resolver) == PER_SANDBOX_LOOKUPS
            assert sum(t.name == "declaw-dns" for t in threading.enumerate()) <= LOOKUP_THREADS.total
        finally:
            release.set()
        deadline = time.monotonic() + 10
        while LOOKUP_THREADS.alive(resolver) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert LOOKUP_THREADS.alive(resolver) == 0  # the abandoned threads ended with their lookups


ABANDON = """
import asyncio
from declaw_tools import hang
await asyncio.gather(*[hang() for _ in range(20)])
"""


@pytest.mark.timeout(120)
def test_host_tool_threads_are_capped_per_sandbox_abandoned_ones_included(no_background_guests: None) -> None:
    """Cells that start tool calls which never return, then time out (the calls abandoned,
    their threads still busy): the sandbox holds at most PER_SANDBOX_THREADS such threads, and
    a call past the cap fails at once with a clear error."""
    release = threading.Event()

    def hang() -> None:
        release.wait(120)

    with Sandbox.create(timeout=120) as sbx:
        owner = testing.local(sbx).sandbox_id
        try:
            for _ in range(PER_SANDBOX_THREADS // 16):  # each cell's tool set runs 16 at once
                with pytest.raises(Exception, match="timed out"):
                    sbx.run_code(ABANDON, tools={"hang": hang}, timeout=1)
            assert TOOL_THREADS.alive(owner) == PER_SANDBOX_THREADS
            ex = sbx.run_code(ABANDON, tools={"hang": hang}, timeout=10)
            assert ex.error is not None and ex.error.name == "RuntimeError", ex
            assert "host tool calls of this sandbox are still running, abandoned ones included" in ex.error.value
            assert TOOL_THREADS.alive(owner) == PER_SANDBOX_THREADS
        finally:
            release.set()
        deadline = time.monotonic() + 10
        while TOOL_THREADS.alive(owner) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert TOOL_THREADS.alive(owner) == 0
        assert sbx.run_code("1 + 1").text == "2"
