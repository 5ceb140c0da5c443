"""Processes and system calls: fork/exec/subprocess/os.system, ctypes, sockets, signals, threads,
aborts, deep recursion; and the door (`_host.call`), the guest's only way to talk to the host,
fed garbage, huge frames, forged exit codes and unknown or out-of-place requests."""

from __future__ import annotations

import ast
import os
import re
import signal
import socket
import time
from typing import Any, Callable

import msgpack
import pytest

from declaw_wasm import testing
from declaw_wasm import Limits, PtySize, RateLimitException, Sandbox, TimeoutException
from waiting import until  # tests/ is on sys.path

from .support import Bounded, PeakRSS, assert_host_fine, guest_threads, run_py, wait_guest_threads

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)

BYTES_LITERAL = r"b'(?:[^'\\]|\\.)*'|b\"(?:[^\"\\]|\\.)*\""  # a printed repr(bytes)
DOOR = """
import _host, msgpack
def door(frame):
    try:
        return repr(_host.call(frame))
    except BaseException as e:
        return type(e).__name__
def req(**r):
    return door(msgpack.packb(r, use_bin_type=True))
"""


def _host_children() -> set[int]:
    """The host processes whose parent is this test process."""
    me = str(os.getpid())
    kids = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[1] == me:
                        kids.add(int(pid))
            except (OSError, IndexError):
                pass
    return kids


def test_no_fork_exec_spawn_or_subprocess(box: Sandbox) -> None:
    """Defends against the guest starting host processes (fork, exec, spawn, subprocess, popen).
    subprocess, os.system and os.popen run their command line through the sandbox's own shell,
    in this process or a guest of its own (docs/guest.md): what they touch is the sandbox's file
    tree, never the host's; os.kill reaches the sandbox's own commands; fork, exec, spawn,
    multiprocessing's processes and pty do not exist (its pools run their tasks in the guest's
    own interpreter: guest/declaw_posix/threads.py)."""
    kids = _host_children()
    code = """
import os, subprocess
for name in ('fork', 'forkpty', 'execv', 'execve', 'posix_spawn', 'spawnv', 'system', 'kill', 'killpg'):
    print(name, hasattr(os, name))
r = subprocess.run(['/bin/sh', '-c', 'touch /tmp/pwned-by-guest; echo in-sandbox'], capture_output=True, text=True)
print('run', r.returncode, r.stdout.strip())
p = subprocess.Popen('id -u', shell=True, stdout=subprocess.PIPE, text=True)
print('Popen', p.communicate()[0].strip(), p.returncode)
print('check_output', subprocess.check_output(['python3', '-c', 'print(1)'], text=True).strip())
print('popen', os.popen('echo via-popen').read().strip())
print('system', os.system('exit 3') >> 8)
for f in (lambda: __import__('multiprocessing').Process(target=print).start(),
          lambda: __import__('pty').fork()):
    try:
        print('RAN', f())
    except (OSError, AttributeError, RuntimeError, NotImplementedError, ImportError) as e:
        print('refused', type(e).__name__)
with __import__('multiprocessing').Pool(2) as pool:  # its tasks run in this interpreter, inline
    print('pool', pool.map(abs, [-1]) == [1], pool.apply(os.getpid) == os.getpid())
"""
    r = run_py(box, code)
    lines = r.stdout.splitlines()
    # os.system and os.kill are the sandbox's (its shell; its own commands, the door's `kill`)
    assert lines[:9] == [f"{n} {n in ('system', 'kill')}" for n in ("fork", "forkpty", "execv", "execve",
                                                                   "posix_spawn", "spawnv", "system", "kill",
                                                                   "killpg")], r
    assert lines[9:14] == ["run 0 in-sandbox", "Popen 1000 0", "check_output 1", "popen via-popen",
                           "system 3"], r
    assert [line.split()[0] for line in lines[14:16]] == ["refused"] * 2, r
    assert lines[16:] == ["pool True True"], r
    assert box.files.exists("/tmp/pwned-by-guest")  # the sandbox's own /tmp
    r = box.commands.run("python3 -c 'import os; os.system(\"touch /tmp/x\")'; bash -c 'echo nested'; "
                         "/bin/sh -c 'echo by-path'; echo after; exec /bin/sh; echo not-reached", timeout=20)
    # `bash`, `/bin/sh` and `exec` run the in-guest shell again (exec then ends the line, as in
    # bash); nothing runs on the host
    assert r.stdout == "nested\nby-path\nafter\n"
    assert box.files.exists("/tmp/x")
    assert not os.path.exists("/tmp/pwned-by-guest")
    assert _host_children() <= kids
    assert_host_fine(box)


def test_ctypes_cannot_reach_memory_or_libraries(box: Sandbox) -> None:
    """Defends against ctypes loading host libraries or poking raw memory."""
    code = """
import ctypes
for f in (lambda: ctypes.CDLL(None), lambda: ctypes.CDLL('libc.so.6'),
          lambda: ctypes.cdll.LoadLibrary('/lib/x86_64-linux-gnu/libc.so.6'),
          lambda: ctypes.string_at(0xFFFFFFF0, 64), lambda: ctypes.memset(16, 0, 1 << 20),
          lambda: ctypes.memmove(0, 0x7FFFFFFF, 4096),
          lambda: ctypes.CFUNCTYPE(ctypes.c_int)(12345)(), lambda: ctypes.pythonapi):
    try:
        print('RAN', f())
    except (OSError, AttributeError) as e:
        print('refused')
"""
    r = run_py(box, code)
    assert r.stdout == "refused\n" * 8, r
    ex = box.run_code("import ctypes\nctypes.memset(0, 0, 1 << 30)")
    assert ex.error is not None and ex.error.name == "OSError"
    assert box.run_code("40 + 2").text == "42"
    assert_host_fine(box)


def test_no_sockets_to_the_host(box: Sandbox) -> None:
    """Defends against the guest connecting to services on the host's loopback."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.3)
    port = server.getsockname()[1]
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(0.3)
    uport = udp.getsockname()[1]
    try:
        code = f"""
import socket
for f in (lambda: socket.create_connection(('127.0.0.1', {port}), timeout=1),
          lambda: socket.socket().connect(('127.0.0.1', {port})),
          lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {uport})),
          lambda: socket.socket(socket.AF_UNIX).connect('/tmp/.X11-unix/X0'),
          lambda: socket.create_connection(socket.getaddrinfo('localhost', {port})[0][4], timeout=1),
          lambda: socket.create_connection((socket.gethostbyname(socket.gethostname()), {port}), timeout=1),
          lambda: socket.create_connection(('localhost', {port}), timeout=1),
          lambda: __import__('urllib.request').request.urlopen('http://127.0.0.1:{port}/', timeout=1)):
    try:
        print('CONNECTED', f())
    except (OSError, AttributeError) as e:
        print('refused')
"""
        r = run_py(box, code, timeout=20)
        assert r.stdout == "refused\n" * 8, r
        # socketpair() is a listening socket of the sandbox and a connection to it: the sandbox
        # talking to itself through the host (docs/inbound.md), never reaching the host's ports
        r = run_py(box, "import socket\na, b = socket.socketpair()\na.sendall(b'ping')\nprint(b.recv(4))")
        assert r.stdout == "b'ping'\n", r
        ex = box.run_code(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)")
        assert ex.error is not None
        r = box.commands.run(f"curl http://127.0.0.1:{port}/; wget http://127.0.0.1:{port}/; "
                             f"nc 127.0.0.1 {port}; echo rc=$?")
        assert r.stdout == "rc=127\n"
        r = box.commands.run(f"echo hi > /dev/tcp/127.0.0.1/{port}")
        assert r.exit_code != 0
        with pytest.raises(socket.timeout):
            server.accept()
        with pytest.raises(socket.timeout):
            udp.recvfrom(16)
    finally:
        server.close()
        udp.close()
    assert_host_fine(box)


def test_signals_stay_in_the_guest(box: Sandbox) -> None:
    """Defends against guest code signalling host processes or installing host handlers."""
    handler = signal.getsignal(signal.SIGINT)
    code = """
import signal, os
print(hasattr(signal, 'alarm'), hasattr(signal, 'pthread_kill'), hasattr(signal, 'setitimer'))
signal.signal(signal.SIGINT, lambda *a: print('guest handler'))
try:  # os.kill reaches the sandbox's own commands only (the door's `kill`): never the host's pid
    os.kill(%d, 9)
except ProcessLookupError as e:
    print(e.errno)
""" % os.getpid()
    r = run_py(box, code)
    assert r.stdout == "True False True\n3\n", r  # alarm/setitimer: the guest's own timers (test_timers.py)
    assert signal.getsignal(signal.SIGINT) is handler  # the host's handler is untouched
    r = box.commands.run("python3 -c 'import signal; signal.raise_signal(signal.SIGKILL)'; echo $?")
    assert (r.stdout, r.exit_code) == ("137\n", 0), r  # only the program ended, as on Linux
    r = box.commands.run("kill -9 1; kill -9 %d; kill -STOP 0; echo alive" % os.getpid())
    assert r.stdout.endswith("alive\n")
    ex = box.run_code("import signal\nsignal.raise_signal(signal.SIGTERM)")
    assert ex.error is not None  # the context's interpreter ended: reported, not raised
    assert box.run_code("1 + 1").text == "2"
    assert_host_fine(box)


def test_threads_are_refused_and_aborts_end_only_the_guest(box: Sandbox) -> None:
    """Defends against guest threads on the host and against guest aborts taking the host down."""
    before = guest_threads()
    r = run_py(box, "import threading\ntry:\n    threading.Thread(target=print).start()\n"
                    "except RuntimeError as e:\n    print(e)\n")
    assert r.stdout.startswith("can't start new thread: the sandbox runs one thread"), r
    r = box.commands.run("python3 -c 'import os; os.abort()'; echo $?")
    assert (r.stdout, r.exit_code) == ("134\n", 0), r  # the program ends, as on Linux; the line goes on
    r = run_py(box, "import faulthandler; faulthandler._sigsegv()")  # C's own crash: the guest traps
    assert r.exit_code == 134 and "trapped" in str(r.error)
    assert wait_guest_threads(before) <= before
    assert_host_fine(box)


def test_deep_recursion_ends_the_guest_with_an_error(box: Sandbox) -> None:
    """Defends against sys.setrecursionlimit(10**6) recursion crashing the host's native stack."""
    code = ("import sys\nsys.setrecursionlimit(10**6)\ndef f(n):\n    return f(n + 1)\n"
            "try:\n    f(0)\nexcept RecursionError:\n    print('RecursionError', flush=True)\n")
    start = time.monotonic()
    r = run_py(box, code, timeout=30)
    assert r.exit_code != 0 and r.error and "trapped" in r.error  # wasm stack exhausted: the guest ends
    assert r.stdout == "RecursionError\n"
    ex = box.run_code(code, timeout=30)
    assert ex.error is not None and ex.error.name == "KernelExit"
    assert time.monotonic() - start < 20
    assert box.run_code("2 + 2").text == "4"
    assert_host_fine(box)


def test_uncaught_deep_recursion_ends_with_an_error(box: Sandbox) -> None:
    """Defends against a one-line recursion bomb burning the guest's whole timeout."""
    code = "import sys\nsys.setrecursionlimit(10**6)\ndef f(n):\n    return f(n + 1)\nf(0)\n"
    start = time.monotonic()
    try:
        r = run_py(box, code, timeout=20)
        ex = box.run_code(code, timeout=20)
    finally:
        assert_host_fine(box)
    assert time.monotonic() - start < 20
    assert r.exit_code == 1 and r.stderr.endswith("RecursionError: maximum recursion depth exceeded\n"), r
    assert "more frames not shown" in r.stderr and len(r.stderr) < 20_000  # bounded, not 10**6 lines
    assert ex.error is not None and ex.error.name == "RecursionError", ex
    assert "more frames not shown" in ex.error.traceback
    assert box.run_code("sum(range(4))").text == "6"  # the context lives on: nothing trapped


def test_door_garbage_frames(box: Sandbox) -> None:
    """Defends against malformed door frames crashing or confusing the host."""
    code = DOOR + """
frames = [b'garbage', b'', b'\\xc1' * 100, b'\\x81', b'\\xdf\\xff\\xff\\xff\\xff', b'\\x92\\x01',
          msgpack.packb([1, 2, 3]), msgpack.packb('op'), msgpack.packb({'op': None}),
          msgpack.packb({b'op': b'stdin'}), msgpack.packb({'op': 'stdin', 'n': 'x'}),
          msgpack.packb({'op': 'stdin', 'n': -1}), msgpack.packb({'op': 'stdin', 'n': 2**62}),
          msgpack.packb({'op': 'winsize', 'extra': [None] * 1000})]
for f in frames:
    print(door(f))
for bad in ([], None, 'text', 12):
    print(door(bad))
for i in range(2000):
    door(b'garbage')
print('survived')
"""
    before = guest_threads()
    r = run_py(box, code, timeout=30)
    assert r.exit_code == 0 and r.stdout.endswith("survived\n"), r
    answers = r.stdout.splitlines()
    assert answers[:4] == ["OSError"] * 4 and answers[-5:-1] == ["TypeError"] * 4
    assert wait_guest_threads(before) <= before
    assert_host_fine(box)


def test_door_huge_frames(box: Sandbox) -> None:
    """Defends against oversized door frames exhausting host memory."""
    code = DOOR + """
print(door(b'x' * (17 << 20)))
print(door(b'\\xc6' + (200 << 20).to_bytes(4, 'big') + b'x' * 64))
print(req(op='nope', pad='y' * ((16 << 20) - 64)))
print(req(op='stdin', n=10**12))
"""
    with PeakRSS() as mem:
        r = run_py(box, code, timeout=30)
    lines = r.stdout.splitlines()
    assert lines[:2] == ["OSError", "OSError"] and lines[3] == "b'\\xc4\\x00'", r
    assert "nope: not an op this guest may use" in lines[2], r  # an unknown op: an error reply
    assert mem.growth < 160 << 20  # the host copied at most one 16 MiB frame, not 200 MiB
    assert_host_fine(box)


def test_door_forged_exit_codes(box: Sandbox) -> None:
    """Defends against forged `exit` requests (negative, huge, non-numeric codes) confusing the host."""
    r = run_py(box, DOOR + "print(req(op='exit', code=-5))\nimport os\nos._exit(0)\n")
    assert 0 <= r.exit_code <= 255 and r.exit_code == (-5 & 0xFF)
    for code in ("'abc'", "None", "[1]", "10**18", "-(2**63)", "3.5"):
        r = run_py(box, DOOR + f"print(req(op='exit', code={code}))\nprint(req(op='exit'))\n")
        assert "exit: code: is required" in r.stdout.splitlines()[-1], r  # refused: an error reply
        assert 0 <= r.exit_code <= 255
    r = box.commands.run("python3 -c 'import _host, msgpack; _host.call(msgpack.packb({\"op\": \"exit\", "
                         "\"code\": 300}))'; echo next=$?")
    assert r.stdout.startswith("next=")
    ex = box.run_code(DOOR + "req(op='exit', code=-5)\nimport os\nos._exit(0)")
    assert ex.error is not None and ex.error.name == "KernelExit"
    assert box.run_code("3 * 3").text == "9"
    assert_host_fine(box)


def test_door_requests_out_of_place_in_run_code(box: Sandbox) -> None:
    """Defends against a cell forging kernel door requests (results, errors, logs, unknown ops)."""
    ctx = box.create_code_context()
    ex = box.run_code(DOOR + "print(req(op='result', data={'text/plain': 5, 'image/png': ['x']}, main=True))\n"
                             "print(req(op='result', data='garbage', main=True))\n"
                             "print(req(op='error', name=None, value=['x'], traceback={1: 2}))\n"
                             "print(req(op='bogus'))\n"
                             "print(req(op='stdin', n=-1), req(op='winsize'))\n"
                             "req(op='stdout', text='A' * (20 << 20))\n"
                             "'cell end'", context=ctx, timeout=30)
    # each forged request is refused with an error naming the op and the field
    literals = re.findall(BYTES_LITERAL, "".join(ex.logs.stdout))
    answers = [msgpack.unpackb(ast.literal_eval(literal)) for literal in literals]
    messages = [a["error"]["message"] for a in answers if isinstance(a, dict) and "error" in a]
    assert [m.split(":")[0] for m in messages] == ["result", "result", "bogus", "stdin"], messages
    assert messages[0].startswith("result: data['image/png']: must be a string"), messages
    assert ex.logs.stdout[2] == "OSError\n"  # (an int map key: not a door frame at all)
    assert sum(map(len, ex.logs.stdout)) <= testing.limits_of(box).output_limit + 200
    assert box.run_code("6 * 7", context=ctx).text == "42"
    assert_host_fine(box)


def test_door_next_cannot_escape_the_cell_timeout(fresh: Sandbox) -> None:
    """Defends against a cell forging the kernel's `next` request to escape its timeout."""
    call = Bounded(lambda: fresh.run_code(DOOR + "req(op='next')\nwhile True: pass", timeout=1))
    ended = call.wait(3)
    if not ended:
        fresh.kill()  # releases the stuck call
        call.wait(10)
    assert_host_fine()
    assert ended and isinstance(call.error, TimeoutException), "run_code(timeout=1) still running after 3 s"


def test_door_done_cannot_hijack_the_next_cell(fresh: Sandbox) -> None:
    """Defends against a cell forging `done` to intercept the next cell's code and results."""
    first = Bounded(lambda: fresh.run_code(DOOR + "print('stolen:', req(op='done'))\n'first'", timeout=10))
    assert first.wait(10)
    assert first.error is None and len(first.result.logs.stdout) == 1, first.result
    assert "done: not an op this guest may use" in first.result.logs.stdout[0], first.result
    assert first.result.text in ("first", "'first'")  # the cell ran to its end
    second = Bounded(lambda: fresh.run_code("secret = 'cell-two'\n6 * 7", timeout=5))
    ended = second.wait(8)
    if not ended:
        fresh.kill()
    assert_host_fine()
    assert ended and second.error is None
    assert second.result.text == "42" and "cell-two" not in "".join(second.result.logs.stdout)


def test_a_forged_detach_keeps_every_bound_but_the_commands_deadline(
        mode: str, where: Callable[[str], dict[str, Any]]) -> None:
    """Defends against `detach` (what a line that leaves `cmd &` jobs running sends; any guest
    code can forge it) as a way out of the sandbox's bounds. It ends the command for its caller
    early, with the status it names, as `cmd &` may; the guest goes on listed under the pid,
    counted against max_processes, its later output never in the result already returned,
    killed by kill(pid) and with the sandbox. A status out of range, a second detach, a
    terminal's and a cell's are refused."""
    sandbox = Sandbox.create(timeout=120, limits=Limits(max_processes=2), **where(mode))
    try:
        program = DOOR + ("print(req(op='detach', status=256), req(op='detach'), flush=True)\n"
                          "print(req(op='detach', status=7), flush=True)\n"
                          "open('/tmp/second', 'w').write(req(op='detach', status=1))\n"
                          "print('after ' * 1000, flush=True)\n"
                          "import time\n"
                          "while True: time.sleep(0.05)\n")
        sandbox.files.write("/tmp/detach.py", program)
        r = sandbox.commands.run("python3 /tmp/detach.py", timeout=5)
        assert r.exit_code == 7 and "after" not in r.stdout, r
        assert "detach: status: must be a whole number from 0 to 255" in r.stdout, r
        assert "detach: status: is required" in r.stdout, r
        [pid] = [p.pid for p in sandbox.commands.list() if "detach.py" in p.cmd]
        # (the file exists from open() on; what is written lands at close)
        until(lambda: sandbox.files.exists("/tmp/second") and sandbox.files.read("/tmp/second"))
        assert "detach: the line has ended already" in sandbox.files.read("/tmp/second")
        other = sandbox.commands.run("sleep 60", background=True)
        with pytest.raises(RateLimitException, match="max_processes"):  # the detached guest counts
            sandbox.commands.run("true")
        assert sandbox.commands.kill(pid) and other.kill()
        until(lambda: not sandbox.commands.list())
        assert sandbox.commands.run("echo ok").stdout == "ok\n"
        ex = sandbox.run_code(DOOR + "print(req(op='detach', status=0))")
        assert "detach: not an op this guest may use" in "".join(ex.logs.stdout), ex
        if mode == "in-process":  # a terminal's shell reads its next line: it keeps its jobs
            pty = sandbox.pty.create(PtySize(24, 80))
            process = testing.local(sandbox).process(pty.pid, pty=True)
            answer = process._door(process.guest, {"op": "detach", "status": 0})
            assert "a terminal's shell keeps its jobs" in answer["error"]["message"], answer
            sandbox.pty.kill(pty.pid)
        sandbox.commands.run("while :; do sleep 0.1; done & echo", timeout=5)
        assert [p.pid for p in sandbox.commands.list()]
    finally:
        sandbox.kill()
    assert_host_fine()


SPAWNS = """
import json, time, _host, msgpack
def call(**r):
    try:
        return msgpack.unpackb(_host.call(msgpack.packb(r, use_bin_type=True)), raw=False)
    except BaseException as e:
        return type(e).__name__
def error(answer):
    return answer["error"]["message"] if isinstance(answer, dict) and "error" in answer else answer
out = {}
out["quoted"] = call(op="spawn", args=["-c", "import sys; open('/tmp/argv', 'w').write(repr(sys.argv))",
                                       "; touch /tmp/pwned\\ntouch /tmp/pwned2", "$(touch /tmp/pwned3)", "`id`"],
                     cwd="/tmp", env={"HOME": "/root"})
while call(op="spawn.read", pid=out["quoted"], start=0)["exit"] is None:  # it ends: no longer counted
    time.sleep(0.05)
out["redirected"] = call(op="spawn", args=["-c", "import sys; print('into the file', flush=True); "
                                              "print('e', file=sys.stderr)"], cwd="/tmp", env={},
                         stdout="null", stderr="stdout", stdout_file="/tmp/o'; touch pwned4\\n$(touch pwned5)`id`")
while call(op="spawn.read", pid=out["redirected"], start=0)["exit"] is None:
    time.sleep(0.05)
out["mode"] = error(call(op="spawn", args=[], cwd="/tmp", env={}, stdout="tee"))
out["file_nul"] = error(call(op="spawn", args=[], cwd="/tmp", env={}, stderr_file="/tmp/a\\x00b"))
out["missing"] = error(call(op="spawn", cwd="/tmp", env={}))
out["nul"] = error(call(op="spawn", args=["a\\x00b"], cwd="/tmp", env={}))
out["name"] = error(call(op="spawn", args=[], cwd="/tmp", env={"A=B": "c"}))
out["cwd"] = error(call(op="spawn", args=[], cwd="/no/such/folder", env={}))
out["huge"] = error(call(op="spawn", args=["x" * (200 << 10)], cwd="/tmp", env={}))
sleepers = [call(op="spawn", args=["-c", "import time; time.sleep(60)"], cwd="/", env={}) for _ in range(4)]
out["sleepers"] = [type(pid).__name__ for pid in sleepers]
out["fifth"] = error(call(op="spawn", args=["-c", "pass"], cwd="/", env={}))
out["not_mine"] = error(call(op="spawn.read", pid=1, start=0))
out["killed"] = call(op="spawn.kill", pid=sleepers[0])
out["read_killed"] = error(call(op="spawn.read", pid=sleepers[0], start=0))
out["long"] = error(call(op="spawn", args=["x" * 100000, "y" * 100000], cwd="/", env={}))
quick = call(op="spawn", args=["-c", "print('q' * 3000000)"], cwd="/", env={})
time.sleep(3)  # it ends; unread, it still holds its place (and its output)
out["unread_holds"] = error(call(op="spawn", args=["-c", "pass"], cwd="/", env={}))
def read_all(pid):
    start, skip, chunks = 0, 0, []
    while True:
        reply = call(op="spawn.read", pid=pid, start=start, skip=skip)
        chunks += [len(data) for _, data in reply["events"]]
        start, skip = reply["next"]
        if reply["exit"] is not None:
            return reply["exit"], chunks
        time.sleep(0.02)
status, sizes = read_all(quick)
out["quick"] = [status, sum(sizes), max(sizes)]
detacher = call(op="spawn", args=["-c", "import _host, msgpack; open('/tmp/detach-answer', 'w').write(str("
                                         "msgpack.unpackb(_host.call(msgpack.packb({'op': 'detach', 'status': 0})), "
                                         "raw=False)))"], cwd="/", env={})
out["detacher"] = read_all(detacher)[0]
open("/tmp/spawns-out.json", "w").write(json.dumps(out))
open("/tmp/spawned.json", "w").write(json.dumps(sleepers[1:]))
while True:
    time.sleep(0.05)
"""


def test_a_forged_spawn_is_a_command_with_every_bound(mode: str, where: Callable[[str], dict[str, Any]]) -> None:
    """Defends against `spawn` (what a line's `python3 ... &` job sends; any guest code can forge
    it) as a way onto the host or past the sandbox's bounds. Its arguments reach the new command's
    line only quoted by the host (`;`, a newline, `$(...)` and backquotes stay python3's
    arguments); the program is a command of the sandbox, listed, counted against max_processes
    and MAX_SPAWNED (4), killed with the command that asked; its fields are bounded and checked
    (NUL, an environment name with '=', a missing folder, 200 KiB arguments, an output mode, a
    file path); a file's path reaches the line only quoted (the program's output lands in the
    file of that exact name, nothing in it runs); only the asker that spawned a program reads or
    kills it; a cell's programs end with the cell's interpreter."""
    import json

    sandbox = Sandbox.create(timeout=120, limits=Limits(max_processes=8), **where(mode))
    try:
        sandbox.files.write("/tmp/spawns.py", SPAWNS)
        handle = sandbox.commands.run("python3 /tmp/spawns.py", background=True)
        until(lambda: sandbox.files.exists("/tmp/spawned.json"), seconds=60)
        out = json.loads(sandbox.files.read("/tmp/spawns-out.json"))
        assert type(out["quoted"]) is int, out
        until(lambda: sandbox.files.exists("/tmp/argv"))
        assert sandbox.files.read("/tmp/argv") == repr(
            ["-c", "; touch /tmp/pwned\ntouch /tmp/pwned2", "$(touch /tmp/pwned3)", "`id`"])
        assert sandbox.files.read("/tmp/o'; touch pwned4\n$(touch pwned5)`id`") == "into the file\ne\n"
        assert not [n for n in ("pwned", "pwned2", "pwned3", "pwned4", "pwned5") if sandbox.files.exists(f"/tmp/{n}")]
        assert "stdout: must be one of pipe, null, parent" in out["mode"], out
        assert "stderr_file: must hold no NUL only" in out["file_nul"], out
        assert out["missing"] == "spawn: args: is required", out
        assert out["nul"].startswith("spawn: args[0]: must hold no NUL only"), out
        assert "(the key) must hold no '=' or NUL only" in out["name"], out
        assert "/no/such/folder does not exist" in out["cwd"], out
        assert "must be 0 to 131072 characters" in out["huge"], out
        assert out["sleepers"] == ["int"] * 4, out
        assert "already holds 4 programs that guests started beside them" in out["fifth"], out
        assert "1 is not a program the asker started" in out["not_mine"], out
        assert out["killed"] is True and "is not a program the asker started" in out["read_killed"], out
        assert "Argument list too long" in out["long"], out
        assert "already holds 4 programs" in out["unread_holds"], out  # an ended one, unread, holds its place
        assert out["quick"][:2] == [0, 3000001] and out["quick"][2] <= 1 << 20, out  # in pieces
        assert out["detacher"] == 0, out  # a program's forged detach: its line would stop holding it
        assert "a job's program has no line of its own to end" in sandbox.files.read("/tmp/detach-answer")
        spawned = json.loads(sandbox.files.read("/tmp/spawned.json"))
        listed = {p.pid: p.cmd for p in sandbox.commands.list()}
        assert set(spawned) <= set(listed) and listed[spawned[0]] == "python3 -c 'import time; time.sleep(60)'"
        with pytest.raises(RateLimitException, match="max_processes"):  # 1 + 3 + 4 more would be 8
            for _ in range(5):
                sandbox.commands.run("sleep 60", background=True)
        assert sandbox.commands.kill(handle.pid)
        until(lambda: not set(spawned) & {p.pid for p in sandbox.commands.list()})
        for p in sandbox.commands.list():
            sandbox.commands.kill(p.pid)
        # a cell's guest may spawn too: the same bounds, and its programs end with its interpreter
        ex = sandbox.run_code("import _host, msgpack\n"
                              "def call(**r):\n"
                              "    return msgpack.unpackb(_host.call(msgpack.packb(r)), raw=False)\n"
                              "print(call(op='spawn', args=['-c', 'import time; time.sleep(60)'], cwd='/', env={}))\n"
                              "print(call(op='spawn', args=[], cwd='/', env={'A=B': 'c'}))")
        lines = "".join(ex.logs.stdout).splitlines()
        assert "(the key) must hold no '=' or NUL only" in lines[1], ex
        cell_child = int(lines[0])
        assert cell_child in {p.pid for p in sandbox.commands.list()}
        ended = sandbox.run_code("import os; os._exit(0)")
        assert ended.error is not None and ended.error.name == "KernelExit"
        until(lambda: cell_child not in {p.pid for p in sandbox.commands.list()})
    finally:
        sandbox.kill()
    assert_host_fine()


def test_a_forged_kill_reaches_only_its_own_sandbox(mode: str, where: Callable[[str], dict[str, Any]]) -> None:
    """Defends against `kill` (what `kill PID`, `pkill` and `os.kill` send, from a command or a
    cell; any guest code can forge it) as a way to end another sandbox's commands: a pid is
    looked up in the asker's own sandbox only, so another sandbox's running pid is "No such
    process" here and its command runs on; fields out of range or missing are refused by name."""
    import json

    other = Sandbox.create(timeout=120, **where(mode))
    asker = Sandbox.create(timeout=120, **where(mode))
    try:
        other.commands.run("true")  # the victim's pid is 2: the asker's one command is 1
        victim = other.commands.run("sleep 60", background=True)
        code = ("import _host, msgpack, json\n"
                "def call(**r):\n"
                "    a = msgpack.unpackb(_host.call(msgpack.packb(r, use_bin_type=True)), raw=False)\n"
                "    return a['error']['message'] if isinstance(a, dict) else a\n"
                f"print(json.dumps([call(op='kill', pid={victim.pid}, signal=9), call(op='kill', pid=1, signal=65),"
                " call(op='kill', pid=0, signal=9), call(op='kill', pid=1)]))")
        asker.files.write("/tmp/kill.py", code)
        out = json.loads(asker.commands.run("python3 /tmp/kill.py").stdout)
        assert out[0] == f"kill: pid: ({victim.pid}) - No such process", out
        assert "signal: must be a whole number from 0 to 64" in out[1], out
        assert "pid: must be a whole number from 1" in out[2], out
        assert "signal: is required" in out[3], out
        cell = asker.run_code(code)  # a code context's guest is offered `kill` too (os.kill, `!kill`)
        assert json.loads("".join(cell.logs.stdout))[0] == f"kill: pid: ({victim.pid}) - No such process", cell
        assert [p.pid for p in other.commands.list()] == [victim.pid]
    finally:
        other.kill()
        asker.kill()
    assert_host_fine()


def test_the_disk_op_answers_this_sandbox_only(box: Sandbox) -> None:
    """Defends the `disk` door op (`df`, `os.statvfs`, `shutil.disk_usage`; threat model: door
    ops): it takes no fields, answers this sandbox's quota and use only (another sandbox's files
    never count), from a command or a cell, and a guest asking in a loop pays the walks in its
    own time, bounded by its command's."""
    other = Sandbox.create(timeout=120)
    try:
        other.files.write("/tmp/theirs.bin", b"t" * (20 << 20))
        program = DOOR + ("print(req(op='disk', path='/etc'))\n"
                          "import shutil\nprint(shutil.disk_usage('/').used < 20 << 20)\n"
                          "import time\nstart = time.monotonic()\n"
                          "for _ in range(300): shutil.disk_usage('/')\n"
                          "print(time.monotonic() - start < 20)\n")
        box.files.write("/tmp/disk.py", program)
        r = box.commands.run("python3 /tmp/disk.py", timeout=60)
        lines = r.stdout.splitlines()
        assert "path" in lines[0] and lines[1:] == ["True", "True"], r
        cell = box.run_code("from declaw_shell import door\ndoor.call('disk')['bytes_used'] < 20 << 20")
        assert cell.error is None and cell.text == "True", cell
        with pytest.raises(TimeoutException):  # a loop of walks is the guest's time, not the host's
            box.commands.run("python3 -c 'import os\nwhile True: os.statvfs(\"/\")'", timeout=2)
    finally:
        other.kill()
    assert_host_fine(box)
