"""The door fuzzer: hypothesis drives every door op and the egress relay of a real sandbox with
malformed, oversized and hostile values, and checks what the host does meanwhile (an audit
hook, tests/fuzz/support.py):

- no host exception escapes the dispatcher: every request map gets a value or an error reply,
  and a request its declaration refuses gets exactly the refusal (its handler never ran);
  every other frame gets the transport's one error;
- every process the host starts is its own pip, with the fixed options and host-made paths,
  and requirement strings the host wrote back itself;
- every file the host opens for writing lies in the sandbox's folders or a temporary folder
  the host made;
- host memory stays bounded, and no handler reads a field its op does not declare.

Volume goes through the host-side dispatcher directly (`testing.command_door` /
`context_door`: a running command's and a running cell's guest, their real routes and
handlers; the frame decoded as the transport decodes it), because a guest round trip per
example (~50 ms of command start) would fit a few hundred examples in the budget instead of
thousands; a smaller set of frames is sent end to end from guest code (`_host.call`). The
`ci` profile keeps this folder under 3 minutes; `nightly` runs ten times the examples
(HYPOTHESIS_PROFILE=nightly). Every finding is fixed, with a regression test named for the
property (tests/test_door_ops.py, tests/security/test_door_bounds.py).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import msgpack
import pytest
from hypothesis import given
from hypothesis.configuration import storage_directory
from hypothesis import strategies as st

from declaw_wasm import Limits, Sandbox, testing
from declaw_wasm._local.door_ops import OPS
from declaw_wasm._packages.pip import GUEST_PYTHON_VERSION, guest_requirement, pip_command, wheel_cache
from declaw_wasm._packages.pip_guard import FILE_BYTES as PIP_FILE_BYTES
from declaw_wasm._packages.pip_guard import MEMORY_BYTES as PIP_MEMORY_BYTES
from declaw_wasm._wasm.door import FrameError, RequestError, decode, watch_reads
from declaw_wasm._wasm.shims import MAX_ANSWER, Encoded, answer_frame
from declaw_wasm.settings import pip_hosts, wheelhouses

from . import strategies
from .support import HostEffects, host_effects, is_device, profile, under

pytestmark = [pytest.mark.guest, pytest.mark.timeout(600)]

RSS_BOUND = 400 << 20  # host memory the fuzz may add, all of it
FD_BOUND = 64  # file descriptors it may leave open
PIP = OPS["pip_install"]
HOSTILE_REQUIREMENTS = ["-e .", "--pre", "x\n--pre", "evil @ file:///etc/passwd", "../x", "/etc/passwd", "x===1",
                        "--index-url=http://127.0.0.1:9/", "x; os_name == '\n--pre'", "-r/etc/passwd"]


def _rss() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


# -- tools the fuzz sandbox lends its guests ------------------------------------------------------

def echo(*args: Any, **kwargs: Any) -> Any:
    return [list(args), kwargs]


def boom(*args: Any, **kwargs: Any) -> None:
    raise RuntimeError("a host tool failed at /srv/secret/path.py")


def opaque(*args: Any, **kwargs: Any) -> Any:
    return threading.Lock()


TOOLS = {"echo": echo, "boom": boom, "opaque": opaque, "nested": lambda n=3: strategies.nested(min(int(n), 40))}


@dataclass
class Fuzz:
    """A sandbox whose command and cell are running, their doors, and what the host did."""

    sandbox: Sandbox
    doors: list[testing.Door]
    effects: HostEffects
    roots: list[Path]
    rss_start: int
    fds_start: int
    handles: list[Any] = field(default_factory=list)


@pytest.fixture(scope="module")
def fuzz() -> Iterator[Fuzz]:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DECLAW_WASM_EGRESS_LOOPBACK_ONLY", "1")  # no DNS, nothing but loopback
        env.setenv("DECLAW_WASM_OFFLINE", "1")  # the host's pip: the wheel cache only
        env.setenv("DECLAW_WASM_PARKED", "0")
        env.setenv("DECLAW_WASM_STANDBY", "0")
        env.setenv("DECLAW_WASM_WARM_IMAGE", "1")
        sandbox = Sandbox.create(timeout=900, tools=TOOLS,
                                 limits=Limits(net_connect_timeout=0.5, net_idle_timeout=0.3))
        command = sandbox.commands.run("sleep 900", background=True, timeout=0)
        sandbox.run_code("1")
        cell = threading.Thread(target=lambda: _quietly(sandbox.run_code, "import time\ntime.sleep(900)",
                                                        timeout=900), daemon=True)
        cell.start()
        kernel = testing.local(sandbox).code._kernel(None)
        deadline = time.monotonic() + 60
        while kernel._current is None:  # the cell runs: the kernel's reports go to it
            assert time.monotonic() < deadline, "the cell did not start"
            time.sleep(0.02)
        effects = host_effects()
        roots = [testing.host_folder(sandbox), *(m.host for m in testing.mounts(sandbox) if m.writable),
                 wheel_cache().parent]
        state = Fuzz(sandbox, [testing.command_door(command), testing.context_door(sandbox)], effects, roots,
                     _rss(), len(os.listdir("/proc/self/fd")), [command])
        effects.clear()
        effects.on = True
        with watch_reads() as reads:
            try:
                yield state
            finally:
                effects.on = False
        assert reads.undeclared == [], reads.undeclared
        sandbox.kill()


def _quietly(fn: Any, *args: Any, **kwargs: Any) -> None:
    try:
        fn(*args, **kwargs)
    except Exception:
        pass


# -- what the host may do ----------------------------------------------------------------------------

PIP_PREFIX = pip_command([])
POLICY = {"tmp": None, "hosts": pip_hosts(), "memory": PIP_MEMORY_BYTES, "file_size": PIP_FILE_BYTES}
PATH_OPTIONS = {"--report", "--target", "--find-links", "-c", "-d", "-r"}
FIXED_ARGS = {"install", "download", "config", "list", "--dry-run", "--ignore-installed", "--quiet", "--no-deps",
              "--no-index", "--require-hashes", "--only-binary", ":all:", "--platform", "any", "--python-version",
              GUEST_PYTHON_VERSION, "--implementation", "cp", "--abi", "none"}


def pip_argv_problem(argv: list[str], made: list[str]) -> str:
    """"" if `argv` is the host's pip with its fixed options, paths in folders the host made or
    configured, and requirements as the host writes them; else what is wrong."""
    # the launcher, its policy (JSON: the run's own temporary folder, one the host made), pip's options
    policy_at = PIP_PREFIX.index(json.dumps(POLICY))
    if len(argv) < len(PIP_PREFIX) or argv[:policy_at] != PIP_PREFIX[:policy_at] or \
            argv[policy_at + 1:len(PIP_PREFIX)] != PIP_PREFIX[policy_at + 1:]:
        return "not the host's pip launcher"
    try:
        policy = json.loads(argv[policy_at])
    except ValueError:
        return "not the host's pip launcher (its policy)"
    if {**policy, "tmp": None} != POLICY or not under(policy.get("tmp") or "/", made):
        return f"not the host's pip policy: {policy!r}"
    rest = argv[len(PIP_PREFIX):]
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg in PATH_OPTIONS:
            if i + 1 >= len(rest) or not under(rest[i + 1], [*made, wheel_cache(), *wheelhouses()]):
                return f"{arg} {rest[i + 1:i + 2]}: not a folder the host made"
            i += 2
            continue
        if arg not in FIXED_ARGS:
            try:
                rewritten = guest_requirement(arg)
            except Exception:
                return f"{arg!r}: not an option or a requirement the host wrote"
            if arg.startswith("-") or rewritten != arg:
                return f"{arg!r}: not written back by the host"
        i += 1
    return ""


def check_host_effects(fuzz: Fuzz) -> None:
    effects = fuzz.effects
    with effects.lock:
        started, written, made = list(effects.started), list(effects.written), list(effects.temporary)
        effects.started.clear()
        effects.written.clear()
    for argv in started:
        problem = pip_argv_problem(argv, made)
        assert not problem, (problem, argv)
    for path in written:
        # hypothesis returns a StorageDirectory (.path) now, a Path before: typeshed's getattr can't say
        if under(path, [os.fspath(getattr(storage_directory(), "path", storage_directory()))]):  # type: ignore[arg-type]
            continue  # hypothesis's own files (its database, its constants cache)
        assert under(path, [*fuzz.roots, *made]) or is_device(path), f"the host wrote {path}"
    assert _rss() - fuzz.rss_start < RSS_BOUND, f"host memory grew by {(_rss() - fuzz.rss_start) >> 20} MiB"
    fds = len(os.listdir("/proc/self/fd"))
    assert fds - fuzz.fds_start < FD_BOUND, f"{fds - fuzz.fds_start} more descriptors open"


# -- one frame, through the door ---------------------------------------------------------------------

def send(door: testing.Door, frame: bytes) -> Any:
    """Answer `frame` as the transport would, checking the door's properties on the way."""
    try:
        request = decode(frame)
    except FrameError:
        assert answer_frame(door.guest, door.answer, frame) == (-2, b"")
        return None
    if type(request) is not dict or type(request.get("op")) is not str or request["op"] == "exit":
        status, answer = answer_frame(door.guest, door.answer, frame)
        assert status in (0, -2) and (status == 0) == (type(request) is dict and request.get("op") == "exit")
        return msgpack.unpackb(answer) if status == 0 else None
    reply = door.answer(door.guest, request)  # no exception may escape the dispatcher
    answer = reply if isinstance(reply, Encoded) else msgpack.packb(reply, use_bin_type=True)
    assert len(answer) <= MAX_ANSWER
    route = door.routes.get(request["op"])
    if route is None:
        assert "not an op this guest may use" in reply["error"]["message"]
        return reply
    try:
        route[0].check(request)
    except RequestError as exc:
        assert reply == route[0].refused(exc)  # refused before its handler, naming the op and field
    if isinstance(reply, dict) and isinstance(reply.get("error"), dict):
        assert isinstance(reply["error"].get("message"), str) and reply["error"]["message"]
    return reply


def _pip_refused(base: dict[str, Any], hostile: str, at: int) -> dict[str, Any]:
    requirements = list(base.get("requirements") or [])
    requirements.insert(min(at, len(requirements)), hostile)
    return {**base, "requirements": requirements[:200]}


@st.composite
def door_frames(draw: Any, routes: dict[str, Any]) -> bytes:
    kind = draw(st.sampled_from(["request"] * 8 + ["frame", "unknown op"]))
    if kind == "frame":
        return draw(strategies.frames)
    if kind == "unknown op":
        name = draw(st.sampled_from(["nope", "next", "done", "", "op", "net.", "tools.", "exit ", "stdin\x00"]))
        return msgpack.packb({"op": name, **draw(st.dictionaries(st.text(max_size=8), strategies.plain, max_size=3))})
    name = draw(st.sampled_from(sorted(routes) + ["exit"]))
    op = OPS[name]
    if name == "pip_install":  # refused before pip runs (real runs: test_fuzz_pip_starts_only_the_hosts_pip)
        request = draw(st.one_of(strategies.refused_request(op), st.builds(
            _pip_refused, strategies.accepted_request(op), st.sampled_from(HOSTILE_REQUIREMENTS),
            st.integers(0, 5))))
    else:
        request = _brief(op, draw(strategies.request(op)))
    return msgpack.packb(request, use_bin_type=True)


WAITS = ("timeout", "wait")  # (seconds: net.*'s timeout, stdin's wait)


def _brief(op: Any, request: dict[str, Any]) -> dict[str, Any]:
    """The request with every wait it may legitimately ask for cut to 50 ms: a guest may wait
    on poll() for a week (the guest's own deadline ends it: tests/security/test_door_bounds.py),
    the fuzz may not. Values the declaration refuses stay as drawn."""
    for name in WAITS:
        value, spec = request.get(name), op.fields.get(name)
        if spec is None or not spec.null and name not in request:
            continue
        if value is None or type(value) in (int, float) and spec.check(value) is None and value > 0.05:
            request[name] = 0.05  # (None or absent: no limit but the guest's deadline)
    if op.name == "kill" and op.fields["signal"].check(request.get("signal")) is None:
        request["signal"] = 0  # only asks: a pid may be the fuzz's own command (tests/test_commands.py ends one)
    return request


@given(st.data())
def test_fuzz_every_door_op_through_the_dispatcher(fuzz: Fuzz, data: Any) -> None:
    door = fuzz.doors[data.draw(st.integers(0, len(fuzz.doors) - 1))]
    for _ in range(data.draw(st.integers(1, 4))):
        send(door, data.draw(door_frames(door.routes)))
    check_host_effects(fuzz)


test_fuzz_every_door_op_through_the_dispatcher = profile()(test_fuzz_every_door_op_through_the_dispatcher)


# -- the host's pip, for real ---------------------------------------------------------------------------

NAMES = st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,20}[A-Za-z0-9])?", fullmatch=True)
REQUIREMENTS = st.builds(
    lambda name, extras, spec, marker: name + extras + spec + marker, NAMES,
    st.sampled_from(["", "[a]", "[a,b-c]"]),
    st.sampled_from(["", "==1.0", ">=0.1,<9", "~=1.2", "!=2", "==1.*", " (>=1)"]),
    st.sampled_from(["", "; python_version >= '3'", "; os_name == 'posix' and extra == 'x'",
                     '; platform_machine == "wasm32"']))


@given(st.data())
def test_fuzz_pip_starts_only_the_hosts_pip(fuzz: Fuzz, data: Any) -> None:
    """Requests the declaration and the parser accept run the real host pip (offline here):
    only the host's launcher starts, with fixed options, host-made paths and requirements the
    host wrote back itself."""
    request = {"op": "pip_install", "requirements": data.draw(st.lists(REQUIREMENTS, min_size=1, max_size=3)),
               "no_index": data.draw(st.booleans()), "no_deps": data.draw(st.booleans()),
               "present": data.draw(st.dictionaries(NAMES, st.sampled_from(["1.0", "2!1.0.post1", "0.1rc1"]),
                                                    max_size=3))}
    reply = send(fuzz.doors[data.draw(st.integers(0, 1))], msgpack.packb(request))
    assert set(reply) == {"status", "stdout", "stderr"} and reply["status"] in (0, 1), reply
    check_host_effects(fuzz)


test_fuzz_pip_starts_only_the_hosts_pip = profile(0.02, shrink=False)(test_fuzz_pip_starts_only_the_hosts_pip)


# -- frames from guest code ---------------------------------------------------------------------------

SENDER = """
import sys, _host, msgpack
frames = msgpack.unpackb(open(sys.argv[1], 'rb').read())
for frame in frames:
    try:
        answer = _host.call(frame)
        print('answer', len(answer))
    except OSError as e:
        print('error', type(e).__name__)
print('done')
"""


def _packed_request(name: str) -> st.SearchStrategy[bytes]:
    return strategies.request(OPS[name]).map(strategies.packed)


@given(st.lists(st.one_of(strategies.frames, st.sampled_from(sorted(OPS)).flatmap(_packed_request)),
    min_size=1, max_size=25))
def test_fuzz_frames_sent_from_guest_code(fuzz: Fuzz, frames: list[bytes]) -> None:
    """End to end: a command sends each frame with `_host.call`; each gets one answer (bytes
    or the door's OSError), the command ends, the host is fine."""
    frames = [f for f in frames if not (b"pip_install" in f and b"requirements" in f)  # (pip: above)
              and b"detach" not in f  # ends the command for its caller: tests/security/test_processes.py
              and b"kill" not in f]  # may end the sender itself (its pid): tests/test_commands.py
    sandbox = fuzz.sandbox
    sandbox.files.write("/tmp/fuzz-sender.py", SENDER)
    sandbox.files.write("/tmp/fuzz-frames.bin", msgpack.packb(frames, use_bin_type=True))
    r = sandbox.commands.run("python3 /tmp/fuzz-sender.py /tmp/fuzz-frames.bin", timeout=60)
    lines = r.stdout.splitlines()  # (a forged `exit` may set the command's status: any is fine)
    assert len(lines) == len(frames) + 1 and lines[-1] == "done", r
    assert all(line.split()[0] in ("answer", "error") for line in lines[:-1]), r
    check_host_effects(fuzz)


test_fuzz_frames_sent_from_guest_code = profile(0.04, shrink=False)(test_fuzz_frames_sent_from_guest_code)


# -- the egress relay -------------------------------------------------------------------------------

class Upstream:
    """A loopback server that records what reaches it and answers each read with a small
    HTTP response."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._serve, daemon=True, name="fuzz-upstream").start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        conn.settimeout(2)
        with conn:
            try:
                while True:
                    data = conn.recv(65536)
                    if not data:
                        return
                    with self.lock:
                        self.received.append(data)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            except OSError:
                return


HTTP_ATTACKS = [
    b"GET / HTTP/1.1\r\nHost: fuzz.example\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n",
    b"GET http://evil.example/ HTTP/1.1\r\nHost: fuzz.example\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: fuzz.example\r\nHost: evil.example\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: fuzz.example\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: fuzz.example\r\nX: a\nInjected: b\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: fuzz.example\r\n X-Folded: c\r\n\r\n",
    b"CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: fuzz.example\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: fuzz.example\r\n\r\nGET / HTTP/1.1\r\nHost: evil.example\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40,
    b"GET /\x00 HTTP/1.1\r\nHost: fuzz.example\r\n\r\n",
    b"G\xc3\xa9T / HTTP/1.1\r\nHost: fuzz.example\r\n\r\n",
    b"GET / HTTP/9.9\r\nHost: fuzz.example\r\n\r\n",
]


@pytest.fixture(scope="module")
def relay() -> Iterator[tuple[testing.Door, Upstream, Sandbox]]:
    upstream = Upstream()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DECLAW_WASM_EGRESS_LOOPBACK_ONLY", "1")
        env.setenv("DECLAW_WASM_RESOLVE", f"fuzz.example:80:127.0.0.1:{upstream.port}")
        env.setenv("DECLAW_WASM_PARKED", "0")
        env.setenv("DECLAW_WASM_STANDBY", "0")
        env.setenv("DECLAW_WASM_WARM_IMAGE", "1")
        sandbox = Sandbox.create(timeout=900, limits=Limits(net_connect_timeout=1.0, net_idle_timeout=0.5,
                                                            net_header_bytes=16 << 10))
        command = sandbox.commands.run("sleep 900", background=True, timeout=0)
        try:
            with watch_reads() as reads:
                yield testing.command_door(command), upstream, sandbox
            assert reads.undeclared == []
        finally:
            sandbox.kill()
            upstream.sock.close()


@given(st.lists(st.one_of(st.sampled_from(HTTP_ATTACKS), st.binary(max_size=300),
                          st.tuples(st.sampled_from(HTTP_ATTACKS), st.integers(1, 40)).map(
                              lambda t: t[0][: t[1]])), min_size=1, max_size=4),
       st.sampled_from(["fuzz.example", "evil.example", "127.0.0.1", "localhost", "169.254.169.254"]))
def test_fuzz_the_egress_relay(relay: tuple[testing.Door, Upstream, Sandbox], payloads: list[bytes],
                               host: str) -> None:
    """Hostile bytes through a connection the policy allows: answers are values or errors, and
    nothing reaches the upstream but requests for the name the connection was opened for."""
    door, upstream, _sandbox = relay
    reply = send(door, msgpack.packb({"op": "net.connect", "host": host, "port": 80, "by_name": True,
                                      "timeout": 1.0}))
    if "error" in reply:
        assert host != "fuzz.example", reply
        return
    cid = reply["id"]
    for payload in payloads:
        reply = send(door, msgpack.packb({"op": "net.send", "id": cid, "data": payload, "wait": False},
                                         use_bin_type=True))
        if "error" in reply:
            break
        send(door, msgpack.packb({"op": "net.recv", "id": cid, "n": 65536, "wait": True, "timeout": 0.1}))
    send(door, msgpack.packb({"op": "net.close", "id": cid}))
    time.sleep(0.01)
    with upstream.lock:
        seen, upstream.received[:] = b"".join(upstream.received), []
    for head in seen.split(b"\r\n\r\n"):
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"host:"):
                assert line.split(b":", 1)[1].strip().split(b":")[0] == b"fuzz.example", seen[:500]


test_fuzz_the_egress_relay = profile(0.15, shrink=False)(test_fuzz_the_egress_relay)


def test_the_fuzz_left_the_host_fine(fuzz: Fuzz) -> None:
    """After the fuzz: the sandbox still runs commands and cells, and a new one starts."""
    r = fuzz.sandbox.commands.run("echo ok", timeout=30)
    assert (r.exit_code, r.stdout) == (0, "ok\n")
    with Sandbox.create(timeout=60) as other:
        assert other.commands.run("echo ok", timeout=30).stdout == "ok\n"
    check_host_effects(fuzz)

