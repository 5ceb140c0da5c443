"""Every door op is declared once, beside its handler (declaw_wasm/_wasm/door.py's `Op`), and
the one dispatcher (_local/doors.py) checks each request against its declaration before any
handler runs; a handler reads only the fields its op declares. Frames are decoded within
bounds. Every request gets exactly one answer."""

from __future__ import annotations

import gc
import struct
import threading
import time
from typing import Any, Iterator

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from declaw_wasm import Sandbox, testing
from declaw_wasm.exceptions import SandboxException
from declaw_wasm._local.door_ops import OPS
from declaw_wasm._local.doors import dispatch, routes
from declaw_wasm._wasm.door import (MAX_DEPTH, MAX_FRAME, MEMORY_FACTOR, MEMORY_SLACK, Field, FrameError, Int, Op,
                                    RequestError, Str, UndeclaredField, decode, measure, watch_reads)
from declaw_wasm._wasm.shims import MAX_ANSWER, Encoded, answer_frame
from fuzz import strategies
from tracing import traced


# -- the declarations ------------------------------------------------------------------------------


def test_every_op_declares_its_fields_with_types_and_bounds() -> None:
    assert len(OPS) >= 20
    for name, op in OPS.items():
        assert op.name == name and op.doc and op.reply, name
        for field, spec in op.fields.items():
            assert isinstance(spec, Field) and type(spec) is not Field, (name, field)
            assert field.isidentifier() and field != "op", (name, field)


@pytest.mark.heavy
@settings(max_examples=400, deadline=None)
@given(st.data())
def test_a_request_the_declaration_accepts_is_passed_on_with_its_declared_fields_only(data: Any) -> None:
    op = OPS[data.draw(st.sampled_from(sorted(OPS)))]
    request = data.draw(strategies.accepted_request(op))
    fields = op.check(request)
    assert "op" not in fields and set(fields) <= op.names
    assert fields == {k: v for k, v in request.items() if k != "op"}


@pytest.mark.heavy
@settings(max_examples=400, deadline=None)
@given(st.data())
def test_a_request_the_declaration_refuses_names_the_op_and_the_field(data: Any) -> None:
    op = OPS[data.draw(st.sampled_from(sorted(OPS)))]
    request = data.draw(strategies.refused_request(op))
    with pytest.raises(RequestError) as refused:
        op.check(request)
    error = refused.value
    assert error.op == op.name and str(error).startswith(f"{op.name}: ")
    named = error.field.split("[", 1)[0]
    assert named in op.fields or named not in op.fields and "not a field" in error.why, error
    reply = error.reply()["error"]
    assert reply["message"] == str(error) and reply["kind"] == "invalid" and reply["type"] == "ValueError"


def test_refusals_say_what_was_wrong() -> None:
    connect = OPS["net.connect"]
    cases: list[tuple[dict[str, Any], str]]
    cases = [({"host": "x", "port": 80, "colour": 1}, "net.connect: colour: not a field of net.connect"),
             ({"host": "x"}, "net.connect: port: is required"),
             ({"host": "x", "port": "80"}, "net.connect: port: must be a whole number from 1 to 65535, not '80'"),
             ({"host": "x", "port": True}, "net.connect: port: must be a whole number"),
             ({"host": "x", "port": 0}, "net.connect: port: must be a whole number from 1 to 65535, not 0"),
             ({"host": "x\x00y", "port": 1}, "net.connect: host: must hold no NUL only"),
             ({"host": "h" * 1025, "port": 1}, "net.connect: host: must be 1 to 1024 characters, not 1025"),
             ({"host": "x", "port": 1, "timeout": float("nan")}, "net.connect: timeout: must be a number"),
             ({"host": None, "port": 1}, "net.connect: host: must not be None")]
    for request, message in cases:
        with pytest.raises(RequestError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
            connect.check({"op": "net.connect", **request})
    poll = OPS["net.poll"]
    with pytest.raises(RequestError, match=r"^net.poll: read\[2\]: must be a whole number"):
        poll.check({"read": [1, 2, "x"]})
    with pytest.raises(RequestError, match=r"^net.poll: write: must have at most 1024 items, not 1025"):
        poll.check({"write": list(range(1025))})
    pip = OPS["pip_install"]
    with pytest.raises(RequestError, match=r"^pip_install: present\['ok'\]: must hold letters"):
        pip.check({"present": {"ok": "1.0\n--pre"}})
    with pytest.raises(RequestError, match=r"^pip_install: wheels\[0\]: must hold printable"):
        pip.check({"wheels": ["/tmp/a\u2028b.whl"]})


def test_a_refused_pip_install_is_answered_as_pip_fails() -> None:
    refusal = OPS["pip_install"].refused(RequestError("pip_install", "requirements[0]", "must be a string"))
    assert refusal == {"status": 1, "stdout": "",
                       "stderr": "ERROR: bad install request: requirements[0]: must be a string\n"}


def test_the_dispatcher_refuses_before_the_handler_runs_and_hands_over_declared_fields_only() -> None:
    seen: list[dict[str, Any]] = []
    op = Op("t.echo", {"text": Str(5, required=True), "n": Int(0, 9)}, "nil", "a test op")

    def echo(guest: Any, fields: dict[str, Any]) -> str:
        seen.append(fields)
        return "ok"

    table = routes((op, echo))
    assert dispatch(table, None, {"op": "t.echo", "text": "hello", "n": 3}) == "ok"  # type: ignore[arg-type]
    assert seen == [{"text": "hello", "n": 3}]
    for bad in ({"text": "too long"}, {"text": "x", "n": 10}, {"text": "x", "other": 1}, {"n": 1}):
        reply = dispatch(table, None, {"op": "t.echo", **bad})  # type: ignore[arg-type]
        assert reply["error"]["op"] == "t.echo" and reply["error"]["message"].startswith("t.echo: ")
    reply = dispatch(table, None, {"op": "t.nope"})  # type: ignore[arg-type]
    assert reply["error"]["message"] == "t.nope: not an op this guest may use (its ops: t.echo)"
    assert len(seen) == 1  # no refused request reached the handler
    not_a_request: object
    for not_a_request in ([], "t.echo", {"op": 5}, {"text": "x"}):
        with pytest.raises(ValueError, match="not a door request"):
            dispatch(table, None, not_a_request)  # type: ignore[arg-type]
    with pytest.raises(AssertionError):
        routes((op, lambda guest, fields: None), (op, lambda guest, fields: None))  # one declaration per op


def test_a_handler_that_reads_an_undeclared_field_fails_under_watch() -> None:
    """The mechanism tests rely on (the fuzzer and the routes test below run every op under it):
    outside it a handler reading an undeclared field would just see None."""
    op = Op("t.sloppy", {"text": Str(5)}, "nil", "a test op")
    table = routes((op, lambda guest, fields: fields.get("colour")))
    assert dispatch(table, None, {"op": "t.sloppy", "text": "x"}) is None  # type: ignore[arg-type]
    with watch_reads() as reads:
        with pytest.raises(UndeclaredField, match="t.sloppy read 'colour'"):
            dispatch(table, None, {"op": "t.sloppy", "text": "x"})  # type: ignore[arg-type]
    assert reads.undeclared == [("t.sloppy", "colour")]


# -- frames --------------------------------------------------------------------------------------

def _decoded_peak(frame: bytes) -> int:
    gc.collect()
    with traced() as peak:
        try:
            value = msgpack.unpackb(frame, raw=False, strict_map_key=False)
            del value
        except Exception:
            pass
        return peak.now()


N = 1 << 16
SHAPES = {
    "empty arrays": b"\xdd" + struct.pack(">I", N) + b"\x90" * N,
    "empty maps": b"\xdd" + struct.pack(">I", N) + b"\x80" * N,
    "small negative ints": b"\xdd" + struct.pack(">I", N) + b"\xe0" * N,
    "two-character strings": b"\xdd" + struct.pack(">I", N) + b"\xa2ab" * N,
    "a map of short keys": msgpack.packb({f"{i:x}": None for i in range(N)}),
    "a map of int keys": msgpack.packb({i * 1000: None for i in range(N)}),
    "floats": msgpack.packb([1.5] * N),
    "short bytes": msgpack.packb([b"ab"] * N),
    "one non-BMP character": msgpack.packb("a" * 5000 + "\U0001F600"),
    "a plotly-like figure": msgpack.packb({"data": [{"x": list(range(2000)), "y": [i / 3 for i in range(2000)],
                                                     "type": "scatter", "name": f"s{j}"} for j in range(5)],
                                           "layout": {"title": {"text": "t", "font": {"size": 12}}}}),
}


@pytest.mark.heavy
@pytest.mark.traces_memory  # tracemalloc stays on after it (tracing.py)
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_estimate_covers_what_decoding_takes_and_the_bound_holds(shape: str) -> None:
    frame = SHAPES[shape]
    # tracemalloc counts every thread's allocations: another thread of the test process (a
    # server a test left running) only adds, so the least of three is the decode's own
    peak = min(_decoded_peak(frame) for _ in range(3))
    try:
        _items, _depth, estimate = measure(frame)
    except FrameError as exc:
        assert "times its size" in str(exc) and peak > MEMORY_FACTOR * len(frame), (shape, peak)
        return
    assert estimate >= 0.9 * peak, (shape, estimate, peak)
    assert estimate <= MEMORY_FACTOR * len(frame) + MEMORY_SLACK


def test_hostile_frames_are_refused_before_anything_is_built() -> None:
    big = 16 << 20
    refusals = {
        "empty arrays": b"\xdd" + struct.pack(">I", big - 5) + b"\x90" * (big - 5),
        "nested": b"\x91" * (MAX_DEPTH + 1) + b"\xc0",
        "nested maps": b"\x81\xa1k" * (MAX_DEPTH + 1) + b"\xc0",
        "declared, not there": b"\xdd" + struct.pack(">I", 1 << 31) + b"\xc0" * 100,
        "nested declarations": (b"\xdd" + struct.pack(">I", 1 << 20)) * 60 + b"\xc0" * 2000,
        "an extension": b"\x91" + b"\xc7\x01\x05x" + b"\x00" * 100,
        "trailing bytes": msgpack.packb([1] * 70) + b"\xc0",
        "cut short": msgpack.packb(["x" * 100] * 3)[:-5],
        "more than a million values": b"\xdd" + struct.pack(">I", (1 << 20) + 1) + b"\x00" * ((1 << 20) + 1),
    }
    for name, frame in refusals.items():
        started = time.perf_counter()
        with pytest.raises(FrameError):
            decode(frame)
        assert time.perf_counter() - started < 2, name
    with pytest.raises(FrameError, match="at most 16777216"):
        decode(b"\x00" * (MAX_FRAME + 1))
    assert decode(msgpack.packb(strategies.nested(MAX_DEPTH - 1))) == strategies.nested(MAX_DEPTH - 1)
    assert decode(b"\xd6\xff\x00\x00\x00\x01") == 1.0  # a timestamp in a small frame: a number


@pytest.mark.heavy
@settings(max_examples=300, deadline=None)
@given(strategies.plain)
def test_decode_gives_what_msgpack_gives_for_plain_values(value: Any) -> None:
    frame = msgpack.packb(value, use_bin_type=True)
    expected = msgpack.unpackb(frame, raw=False, strict_map_key=False)
    assert msgpack.packb(decode(frame, strict_map_key=False)) == msgpack.packb(expected)  # (NaN != NaN)
    measure(frame)  # every plain value this small is in bounds


@pytest.mark.heavy
@settings(max_examples=500, deadline=None)
@given(strategies.frames)
def test_a_frame_the_walk_passes_is_one_msgpack_decodes_or_refuses_cleanly(frame: bytes) -> None:
    try:
        decode(frame)
    except FrameError:
        pass


# -- exactly one answer ---------------------------------------------------------------------------

class _Guest:
    exit_code = None

    def declare_exit(self, code: int) -> None:
        self.exit_code = code & 0xFF


def test_every_frame_gets_exactly_one_answer_whatever_the_handler_does() -> None:
    guest: Any = _Guest()

    def handler(g: Any, request: Any) -> Any:
        what = request.get("what")
        if what == "set":
            return {1, 2}
        if what == "object":
            return object()
        if what == "huge":
            return b"x" * (MAX_ANSWER + 1)
        if what == "int":
            return {"n": 1 << 70}  # past msgpack's 64 bits
        if what == "raises":
            raise RuntimeError("a host bug")
        if what == "stop":
            raise SystemExit(1)
        if what == "encoded":
            return Encoded(msgpack.packb({"result": 1}))
        return {"fine": what}

    for what in ("set", "object", "huge", "int", "raises", "stop"):
        assert answer_frame(guest, handler, msgpack.packb({"op": "x", "what": what})) == (-2, b""), what
    assert answer_frame(guest, handler, msgpack.packb({"op": "x", "what": "encoded"})) == \
        (0, msgpack.packb({"result": 1}))
    assert answer_frame(guest, handler, msgpack.packb({"op": "x", "what": "ok"})) == \
        (0, msgpack.packb({"fine": "ok"}))
    assert answer_frame(guest, None, msgpack.packb({"op": "x"})) == (-1, b"")
    assert answer_frame(guest, handler, b"\xc1") == (-2, b"")
    status, answer = answer_frame(guest, handler, msgpack.packb({"op": "exit", "code": 300}))
    assert (status, msgpack.unpackb(answer), guest.exit_code) == (0, None, 44)
    status, answer = answer_frame(guest, handler, msgpack.packb({"op": "exit", "code": "1"}))
    assert status == 0 and "exit: code: must be a whole number" in msgpack.unpackb(answer)["error"]["message"]


# -- every route, every guest ---------------------------------------------------------------------

@pytest.fixture
def tool_sbx() -> Iterator[Sandbox]:
    sandbox = Sandbox.create(timeout=300, tools={"echo": lambda *a, **k: [a, k]})
    yield sandbox
    sandbox.kill()


@pytest.mark.guest
@pytest.mark.timeout(300)
def test_every_route_of_every_guest_is_declared_and_reads_only_declared_fields(tool_sbx: Sandbox) -> None:
    command = tool_sbx.commands.run("sleep 120", background=True)
    def sleeping_cell() -> None:
        try:
            tool_sbx.run_code("import time\ntime.sleep(120)", timeout=150)
        except SandboxException:
            pass  # the fixture kills the sandbox under it

    cell = threading.Thread(target=sleeping_cell, daemon=True)
    tool_sbx.run_code("1")
    cell.start()
    doors = [testing.command_door(command), testing.context_door(tool_sbx)]
    deadline = time.monotonic() + 30
    while testing.local(tool_sbx).code._kernel(None)._current is None:  # the cell runs: reports go to it
        assert time.monotonic() < deadline
        time.sleep(0.02)
    offered: set[str] = {"exit", "timer"}  # (answered by the transport, for every guest)
    try:
        with watch_reads() as reads:
            for door in doors:
                for name, (declared, _handler) in door.routes.items():
                    assert declared is OPS[name], name  # the route carries the one declaration
                    offered.add(name)
                    examples = [strategies.typical_request(declared), {"op": name}]
                    if name == "pip_install":  # one real run of the host's pip, offline, then refusals
                        examples = [{"op": name, "requirements": ["declaw-no-such-project"], "no_index": True,
                                     "no_deps": True, "present": {"x": "1.0"}, "wheels": [], "find_links": []},
                                    {"op": name, "requirements": ["-e ."]}]
                    if name == "tools.call":
                        examples.append({"op": name, "name": "echo", "payload": msgpack.packb([[1], {"a": 2}])})
                    for request in examples:
                        if name in ("net.recv", "net.send", "net.poll", "net.tls", "net.connect"):
                            request["timeout"] = 0  # (no connection is open: nothing to wait for)
                        if name == "stdin":
                            request.pop("wait", None)
                        if name == "kill":
                            request["signal"] = 0  # (only asks: the typical pid may be this very command)
                        if name == "tools.call" and request.get("name") != "echo":
                            continue  # (no tool named "x": refused without a call)
                        reply = door.answer(door.guest, request)
                        msgpack.packb(reply, use_bin_type=True) if not isinstance(reply, Encoded) else None
        assert reads.undeclared == []
        assert {op for op, _ in reads.read} <= offered
        assert offered == set(OPS), set(OPS) ^ offered  # every declared op is offered to some guest
    finally:
        command.kill()
