"""`subprocess`, `os.system` and `os.popen` in guest code answer as on Linux (guest/declaw_shell/subprocesses.py).

WASI has no processes, so a child runs through the sandbox shell in the guest's own process. One
table of calls runs natively (this machine's Python, real processes, real bash) and in a sandbox,
each in a fresh folder, and every outcome must be the same: return codes, captured bytes and
text, exceptions and their fields, what reached the parent's streams, files written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from declaw_wasm import CommandResult, Limits, Sandbox
from waiting import until  # tests/ is on sys.path

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)

TABLE = r'''
import io, json, os, subprocess, sys

CASES = {
    "run list, captured text": lambda: subprocess.run(["echo", "hi there"], capture_output=True, text=True),
    "run shell, captured bytes": lambda: subprocess.run("printf 'a\\nb' | wc -l", shell=True, capture_output=True),
    "exit status, not raised": lambda: subprocess.run("exit 3", shell=True).returncode,
    "check_call raises": lambda: subprocess.check_call("exit 2", shell=True),
    "check_output": lambda: subprocess.check_output(["printf", "%s-%s", "a", "b"]),
    "check_output text": lambda: subprocess.check_output("echo $((6 * 7))", shell=True, text=True),
    "check_output failing": lambda: subprocess.check_output("echo partial; exit 4", shell=True),
    "stderr captured apart": lambda: subprocess.run("echo out; echo err >&2", shell=True, capture_output=True),
    "stderr into stdout": lambda: subprocess.run("echo err >&2", shell=True, stdout=subprocess.PIPE,
                                                 stderr=subprocess.STDOUT).stdout,
    "devnull": lambda: subprocess.run("echo gone", shell=True, stdout=subprocess.DEVNULL).stdout,
    "input bytes": lambda: subprocess.run(["cat"], input=b"fed\x00in", capture_output=True).stdout,
    "input text to python": lambda: subprocess.run(
        [sys.executable, "-c", "import sys; print(sys.stdin.read().upper()); sys.exit(5)"],
        input="abc", capture_output=True, text=True),
    "undecodable bytes": lambda: subprocess.check_output("printf '\\377\\001'", shell=True),
    "missing program": lambda: subprocess.run(["no-such-program-here"]),
    "missing path": lambda: subprocess.run(["./nope.sh"]),
    "missing cwd": lambda: subprocess.run(["ls"], cwd="no-such-folder"),
    "a string without shell is one program": lambda: subprocess.run("echo hi"),
    "cwd": lambda: subprocess.check_output(["ls"], cwd="sub", text=True),
    "env replaced": lambda: subprocess.check_output("echo \"[$FOO][$HOME]\"", shell=True, text=True,
                                                    env={"FOO": "bar", "PATH": os.environ["PATH"]}),
    "env inherited": lambda: subprocess.check_output("echo $MARKER", shell=True, text=True),
    "to a file": lambda: (subprocess.run(["echo", "into a file"], stdout=open("out.txt", "w")),
                          open("out.txt").read())[1],
    "popen communicate": lambda: subprocess.Popen(["tr", "a-z", "A-Z"], stdin=subprocess.PIPE,
                                                  stdout=subprocess.PIPE).communicate(b"shout\n"),
    "popen write, close, read": lambda: _written(),
    "popen lines": lambda: [line for line in subprocess.Popen("printf 'x\\ny\\n'", shell=True,
                                                                stdout=subprocess.PIPE, text=True).stdout],
    "popen context": lambda: _context(),
    "open devnull": lambda: (open(os.devnull, "w").write("gone"), open(os.devnull).read(),
                             open(os.devnull, "rb").read(), __import__("pathlib").Path(os.devnull).write_text("x")),
    "devnull as a child's stdout": lambda: subprocess.run("echo gone", shell=True,
                                                          stdout=open(os.devnull, "w")).returncode,
    "zero and urandom": lambda: (open("/dev/zero", "rb").read(4), len(open("/dev/urandom", "rb").read(16)),
                                 len(open("/dev/random", "rb").read(8))),
    "dev stdout": lambda: open("/dev/stdout", "w").write("through /dev/stdout\n"),
    "dev null exclusive": lambda: open(os.devnull, "x"),
    "getoutput": lambda: subprocess.getoutput("echo one; echo two"),
    "getstatusoutput": lambda: subprocess.getstatusoutput("echo no; exit 3"),
    "call": lambda: subprocess.call("exit 7", shell=True),
    "timeout": lambda: subprocess.run("sleep 5", shell=True, timeout=0.3),
    "os.system": lambda: os.system("echo from system; exit 3"),
    "os.popen": lambda: _popen(),
    "nested python and subprocess": lambda: subprocess.check_output(
        [sys.executable, "-c",
         "import subprocess; print(subprocess.check_output(['pwd'], cwd='sub', text=True).strip())"],
        text=True).strip().rsplit("/", 1)[-1],
    "isinstance": lambda: isinstance(subprocess.Popen(["true"]), subprocess.Popen),
}


def _written():
    p = subprocess.Popen(["wc", "-c"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    p.stdin.write(b"12345")
    p.stdin.close()
    return p.stdout.read().strip(), p.wait()


def _context():
    with subprocess.Popen(["echo", "ctx"], stdout=subprocess.PIPE) as p:
        out = p.stdout.read()
    return out, p.returncode


def _popen():
    f = os.popen("echo popen; exit 2")
    text = f.read()
    return text, f.close()


'''

# run each case in a folder of its own, print what the parent saw, then the outcomes
HARNESS = r'''
def outcome(fn):
    out, err = io.StringIO(), io.StringIO()
    sys.stdout.flush(); sys.stderr.flush()
    try:
        value = fn()
    except BaseException as exc:
        fields = {k: getattr(exc, k) for k in ("returncode", "output", "stderr", "errno", "filename", "timeout")
                  if getattr(exc, k, None) is not None}
        value = ["raised", type(exc).__name__, fields]
    if isinstance(value, subprocess.CompletedProcess):
        value = ["completed", value.returncode, value.stdout, value.stderr]
    return value


def plain(value):
    if isinstance(value, bytes):
        return ["bytes", value.hex()]
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, float):
        return round(value, 1)
    return value


results = {}
for name, fn in CASES.items():
    os.makedirs(name.replace(" ", "_"), exist_ok=True)
    os.chdir(name.replace(" ", "_"))
    os.makedirs("sub", exist_ok=True)
    open("sub/inside.txt", "w").close()
    results[name] = plain(outcome(fn))
    os.chdir("..")
sys.stdout.flush()
print("\nRESULTS " + json.dumps(results))
'''
TABLE += HARNESS


# `Popen` of a Python program runs beside its parent (the host's `spawn`): each case below would
# come out otherwise (or hang) if the child ran to its end first, as every other child does here
BESIDE = r'''
import io, json, os, subprocess, sys, time, urllib.request

PY = sys.executable


def child(code, **kwargs):
    return subprocess.Popen([PY, "-c", code], **kwargs)


def _server():
    p = subprocess.Popen([PY, "-m", "http.server", os.environ["PORT"], "--bind", "127.0.0.1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first = p.poll()
    for _ in range(200):
        try:
            status = urllib.request.urlopen("http://127.0.0.1:%s/" % os.environ["PORT"], timeout=5).status
            break
        except OSError:
            time.sleep(0.1)
    p.terminate()
    return first, status, p.wait(), p.poll()


def _talk():
    p = child("import os, time\nprint('ready', flush=True)\n"
              "for _ in range(200):\n    if os.path.exists('go'): break\n    time.sleep(0.05)\n"
              "print('saw go' if os.path.exists('go') else 'no go')", stdout=subprocess.PIPE, text=True)
    first = p.stdout.readline()
    open("go", "w").close()
    return first, p.stdout.read(), p.wait()


def _timeout_then_kill():
    p = child("import time; time.sleep(30)")
    try:
        p.wait(timeout=0.3)
        waited = "ended"
    except subprocess.TimeoutExpired as exc:
        waited = [type(exc).__name__, exc.timeout]
    p.kill()
    return waited, p.wait()


def _three_at_once():
    code = ("import os, sys, time\nopen('flag%s' % sys.argv[1], 'w').close()\n"
            "for _ in range(200):\n    if all(os.path.exists('flag%d' % i) for i in range(3)): break\n"
            "    time.sleep(0.05)\n"
            "sys.exit(0 if all(os.path.exists('flag%d' % i) for i in range(3)) else 1)")
    ps = [subprocess.Popen([PY, "-c", code, str(i)]) for i in range(3)]
    return [p.wait() for p in ps]


def _inherited():
    print("parent before", flush=True)
    p = child("import sys; print('child out', flush=True); print('child err', file=sys.stderr)")
    status = p.wait()
    print("parent after", flush=True)
    return status


def _to_a_file():
    with open("log.txt", "w") as log:
        status = child("import sys; print('to the log', flush=True); print('and its errors', file=sys.stderr)",
                       stdout=log, stderr=subprocess.STDOUT).wait()
    return status, open("log.txt").read()


def _stdin_from_a_file():
    open("in.txt", "w").write("from a file\n")
    with open("in.txt") as source:
        return child("import sys; print(sys.stdin.read().upper())", stdin=source, stdout=subprocess.PIPE).communicate()


CASES = {
    "a server, asked, then ended": _server,
    "parent and child talk while it runs": _talk,
    "wait with a timeout, then kill": _timeout_then_kill,
    "three children at once": _three_at_once,
    "left on the parent's streams": _inherited,
    "stderr merged into a pipe": lambda: child("import sys; print('out', flush=True); "
                                               "print('err', file=sys.stderr, flush=True); print('out2')",
                                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT).communicate(),
    "both pipes and a status": lambda: (lambda p: (p.communicate(), p.returncode))(
        child("import sys; print('o'); print('e', file=sys.stderr); sys.exit(3)", stdout=subprocess.PIPE,
              stderr=subprocess.PIPE)),
    "to a file": _to_a_file,
    "stdin from a file": _stdin_from_a_file,
    "env and cwd": lambda: child("import os; print(os.path.basename(os.getcwd()), os.environ.get('FOO'))",
                                 cwd="sub", env={"FOO": "bar", "PATH": os.environ["PATH"]},
                                 stdout=subprocess.PIPE, text=True).communicate()[0],
    "a shell line of a python program": lambda: subprocess.Popen(
        "python3 -c 'print(6 * 7)'", shell=True, stdout=subprocess.PIPE).communicate(),
    "poll while it runs, then its status": lambda: (lambda p: (p.poll(), p.wait(), p.poll(), p.returncode))(
        child("import time; time.sleep(0.5)")),
    "lines as they come": lambda: [line for line in child(
        "import time\nfor i in range(3): print(i, flush=True); time.sleep(0.1)", stdout=subprocess.PIPE,
        text=True).stdout],
}
'''
BESIDE += HARNESS


def _results(stdout: str) -> tuple[str, dict[str, object]]:
    head, _, tail = stdout.rpartition("\nRESULTS ")
    return head, json.loads(tail)


def _same_natively_and_in_a_guest(sandbox: Sandbox, tmp_path: Path, table: str, variables: dict[str, str],
                                  timeout: float) -> CommandResult:
    """Run a table natively (real processes) and in a guest, each in a fresh folder: every outcome,
    and what reached the parent's own stdout in order, must be the same. The guest's result."""
    script = tmp_path / "table.py"
    script.write_text(table)
    native = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env={**os.environ, **variables},
                            capture_output=True, text=True, timeout=timeout)
    assert native.returncode == 0, native.stderr
    sandbox.files.write("/home/user/work/table.py", table)
    assigned = " ".join(f"{name}={value}" for name, value in variables.items())
    guest = sandbox.commands.run(f"cd /home/user/work && {assigned} python3 table.py", timeout=timeout)
    assert guest.exit_code == 0, guest.stderr
    native_out, native_results = _results(native.stdout)
    guest_out, guest_results = _results(guest.stdout)
    assert sorted(guest_results) == sorted(native_results)
    for name, want in native_results.items():
        assert guest_results[name] == want, name
    # what the children wrote to the parent's own stdout, in order
    assert guest_out.splitlines() == native_out.splitlines()
    return guest


def test_subprocess_calls_answer_as_on_linux(fresh: Sandbox, tmp_path: Path) -> None:
    _same_natively_and_in_a_guest(fresh, tmp_path, TABLE, {"MARKER": "inherited"}, timeout=120)


ASYNCIO = r'''
import asyncio, json, sys
from asyncio.subprocess import DEVNULL, PIPE, STDOUT

async def table():
    results = {}
    p = await asyncio.create_subprocess_exec("echo", "hi", stdout=PIPE)
    results["exec"] = [*(x and x.decode() for x in await p.communicate()), p.returncode]
    p = await asyncio.create_subprocess_shell("echo out; echo err >&2; exit 3", stdout=PIPE, stderr=PIPE)
    results["shell, both pipes"] = [*(x.decode() for x in await p.communicate()), p.returncode]
    p = await asyncio.create_subprocess_exec(sys.executable, "-c", "import sys; print(sys.stdin.read().upper())",
                                             stdin=PIPE, stdout=PIPE)
    results["input"] = [(await p.communicate(b"fed in"))[0].decode(), p.returncode]
    p = await asyncio.create_subprocess_shell("printf 'a\\nb\\n'", stdout=PIPE)
    results["lines"] = [[line.decode() async for line in p.stdout], await p.wait()]
    p = await asyncio.create_subprocess_shell("cat; exit 4", stdin=PIPE, stdout=PIPE)
    p.stdin.write(b"written\n")
    await p.stdin.drain()
    p.stdin.close()
    results["stdin closed"] = [(await p.stdout.read()).decode(), await p.wait()]
    p = await asyncio.create_subprocess_shell("echo merged; echo e >&2", stdout=PIPE, stderr=STDOUT)
    results["stderr into stdout"] = [(await p.stdout.read()).decode(), await p.wait()]
    p = await asyncio.create_subprocess_shell("echo to-the-parent; exit 2")
    results["parent's stdout"] = [await p.wait(), p.returncode, p.pid > 0]
    p = await asyncio.create_subprocess_shell("echo gone", stdout=DEVNULL, stderr=DEVNULL)
    results["devnull"] = await p.wait()
    try:
        await asyncio.create_subprocess_exec("no-such-program-here")
    except FileNotFoundError as exc:
        results["missing"] = type(exc).__name__
    p = await asyncio.create_subprocess_exec(sys.executable, "-c", "print(1)", stdout=PIPE)
    results["wait_for"] = (await asyncio.wait_for(p.communicate(), 30))[0].decode()
    p = await asyncio.create_subprocess_shell("true")
    await p.wait()
    try:
        p.kill()
    except ProcessLookupError:
        results["kill after exit"] = "ProcessLookupError"
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    class Protocol(asyncio.SubprocessProtocol):
        def __init__(self):
            self.data = bytearray()
        def pipe_data_received(self, fd, data):
            self.data += data
        def connection_lost(self, exc):  # after its pipes closed and the process exited
            done.set_result(bytes(self.data))

    transport, _ = await loop.subprocess_shell(Protocol, "echo low-level", stdout=PIPE)
    results["protocol"] = [(await done).decode(), transport.get_returncode()]
    transport.close()
    return results

print("\nRESULTS " + json.dumps(asyncio.run(table())))
'''


def test_asyncio_subprocesses_answer_as_on_linux(fresh: Sandbox, tmp_path: Path) -> None:
    """asyncio.create_subprocess_exec/_shell and loop.subprocess_shell (declaw_shell/aio_subprocess.py:
    they failed on `can't start new thread`), natively and in a guest."""
    _same_natively_and_in_a_guest(fresh, tmp_path, ASYNCIO, {}, timeout=120)


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_python_children_run_beside_their_parent_as_on_linux(fresh: Sandbox, tmp_path: Path) -> None:
    """A `Popen` of a Python program runs beside its parent: a server it starts answers, parent
    and child talk while it runs, children run at once, `wait(timeout)`, `poll`, `kill` and
    `terminate` answer as on Linux; its output reaches pipes, files and the parent's own streams.
    One table, natively and in a guest."""
    # (the port: free natively; any in the sandbox, whose loopback is its own)
    guest = _same_natively_and_in_a_guest(fresh, tmp_path, BESIDE, {"PORT": str(_free_port())}, timeout=180)
    assert "child err" in guest.stderr


def test_a_cells_python_child_serves_the_next_cells_and_ends_with_its_context(fresh: Sandbox) -> None:
    """A server a cell starts with `Popen` runs on between cells (a command of the sandbox: listed,
    reachable from commands), and ends when the context's interpreter does."""
    started = fresh.run_code("import subprocess, sys, time, urllib.request\n"
                             "server = subprocess.Popen([sys.executable, '-m', 'http.server', '8000'], "
                             "stderr=subprocess.DEVNULL)\n"
                             "for _ in range(100):\n"
                             "    try:\n        urllib.request.urlopen('http://127.0.0.1:8000/'); break\n"
                             "    except OSError:\n        time.sleep(0.1)\n"
                             "print(server.poll(), server.pid)", timeout=60)
    assert started.error is None, started.error
    assert "".join(started.logs.stdout).startswith("None ")
    pid = int("".join(started.logs.stdout).split()[1])
    listed = {p.pid: p.cmd for p in fresh.commands.list()}
    assert listed.get(pid) == "python3 -m http.server 8000", listed
    assert "Directory listing" in fresh.commands.run("curl -s localhost:8000/").stdout
    asked = fresh.run_code("print(urllib.request.urlopen('http://127.0.0.1:8000/').status, server.poll())")
    assert "".join(asked.logs.stdout) == "200 None\n", asked
    ended = fresh.run_code("import os; os._exit(3)")
    assert ended.error is not None and ended.error.name == "KernelExit", ended
    until_gone = [p.pid for p in fresh.commands.list()]
    for _ in range(100):
        if pid not in until_gone:
            break
        time.sleep(0.05)
        until_gone = [p.pid for p in fresh.commands.list()]
    assert pid not in until_gone


def test_a_cell_runs_children_too_inside_its_event_loop(fresh: Sandbox) -> None:
    run = fresh.run_code("import asyncio, subprocess, os\nawait asyncio.sleep(0)\n"
                         "print(subprocess.check_output('echo in a loop', shell=True))\n"
                         "os.system('echo system')")
    assert run.error is None, run.error
    assert "".join(run.logs.stdout) == "b'in a loop\\n'\nsystem\n"


def test_a_server_a_program_leaves_running_serves_the_next_commands(fresh: Sandbox) -> None:
    """`python3 start.py`, which starts a server with Popen and exits (as agents' launch scripts
    do): the command returns, the server runs on as a Linux child does (reparented), listed,
    reachable from the next commands; killing the command ends it. A child whose output only its
    parent could read (a pipe) ends with the command instead."""
    fresh.files.write("/home/user/start.py", "import subprocess, sys\n"
                      "server = subprocess.Popen([sys.executable, '-m', 'http.server', '8000'],\n"
                      "    start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
                      "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],\n"
                      "    stdout=subprocess.PIPE)\n"
                      "print('started', server.pid)\n")
    started = fresh.commands.run("python3 start.py", timeout=30)
    server = int(started.stdout.split()[1])
    until(lambda: fresh.commands.run("curl -s -o /dev/null -w '%{http_code}' localhost:8000/").stdout == "200",
          seconds=5)
    listed = {p.pid: p.cmd for p in fresh.commands.list()}
    assert listed.get(server) == "python3 -m http.server 8000", listed
    assert "python3 -c 'import time; time.sleep(60)'" not in listed.values(), listed  # the piped one ended
    [line] = [pid for pid, cmd in listed.items() if cmd == "python3 start.py"]  # detached, holding the server
    assert fresh.commands.kill(line)
    until(lambda: server not in {p.pid for p in fresh.commands.list()}, seconds=5)


TRAIN = "python3 -c \"import sys, time\nprint('epoch 1', flush=True)\nprint('warning', file=sys.stderr)\n" \
        "while True: time.sleep(0.1)\""


@pytest.mark.parametrize("line", [
    TRAIN + " > train.log 2>&1", "timeout 600 " + TRAIN + " > train.log 2>&1", "nohup " + TRAIN + " > train.log 2>&1",
    # a script, a function, a compound: their commands write the file as they go, in order
    "bash train.sh > train.log 2>&1", "sh train.sh &> train.log", "timeout 600 bash train.sh > train.log 2>&1",
    "train() { echo started; " + TRAIN + "; }; train > train.log 2>&1",
    "{ echo started; " + TRAIN + "; } > train.log 2>&1",
    "for i in 1; do echo started; " + TRAIN + "; done > train.log 2>&1",
], ids=["alone", "timeout", "nohup", "script", "sh-script", "timeout-script", "function", "braces", "loop"])
def test_a_python_programs_redirect_is_written_as_it_runs(fresh: Sandbox, line: str) -> None:
    """`python3 train.py > train.log 2>&1` in one command (alone, run by `timeout` or `nohup`, or
    by a script, a function or a compound whose output goes there), `cat train.log` from another
    while it runs (as agents watch a training run): the lines flushed so far are there, stderr in
    order."""
    fresh.files.write("/home/user/train.sh", "echo started\n" + TRAIN + "\n")
    expected = ("" if line.startswith(("python3", "timeout 600 python3", "nohup")) else "started\n") \
        + "epoch 1\nwarning\n"
    handle = fresh.commands.run(line, background=True)
    seen = ""
    for _ in range(200):
        seen = fresh.commands.run("cat train.log").stdout
        if seen == expected:
            break
        time.sleep(0.05)
    assert seen == expected
    fresh.commands.kill(handle.pid)


def test_a_child_beside_its_parent_is_signalled_copied_and_cut_as_documented(fresh: Sandbox) -> None:
    """`os.kill` reaches a child beside the parent by its pid (0: is it alive; any other signal
    ends it, as SIGKILL would: -9), an unknown pid is ProcessLookupError; what a child wrote into
    its parent's redirected stdout (a file, a pipe, `$(...)`) is there after the parent returns
    without waiting; a pipe's output past the sandbox's output limit is said to be cut."""
    killed = fresh.commands.run(
        "python3 -c \"import os, signal, subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
        "os.kill(p.pid, 0)\nos.kill(p.pid, signal.SIGTERM)\nprint(p.wait())\n"
        "try:\n    os.kill(p.pid, 0)\nexcept ProcessLookupError as e:\n    print(e.errno)\"")
    assert killed.stdout == "-9\n3\n", killed
    # the child has written (and said so with a file) before the parent returns, without waiting
    fresh.files.write("/home/user/pop.py", "import os, subprocess, sys, time\n"
                      "subprocess.Popen([sys.executable, '-c',\n"
                      "                  'print(\"child\", flush=True); open(\"done\", \"w\")'])\n"
                      "while not os.path.exists('done'): time.sleep(0.02)\n"
                      "os.remove('done'); print('parent')\n")
    for line in ("python3 pop.py > f; sort f", "python3 pop.py | sort", "x=$(python3 pop.py); echo \"$x\" | sort"):
        assert fresh.commands.run(line).stdout == "child\nparent\n", line
    with Sandbox.create(limits=Limits(output_limit=1 << 20)) as small:
        cut = small.commands.run(
            "python3 -c \"import subprocess, sys\n"
            "p = subprocess.Popen([sys.executable, '-c', 'print(\\\"x\\\" * (3 << 20))'], stdout=subprocess.PIPE)\n"
            "print(len(p.stdout.read()), p.wait())\"")
        assert cut.stdout == f"{1 << 20} 0\n", cut
        assert "went past the sandbox's output limit (Limits.output_limit)" in cut.stderr, cut
