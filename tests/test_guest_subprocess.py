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
from pathlib import Path

import pytest

from declaw_wasm import Sandbox

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


def _results(stdout: str) -> tuple[str, dict[str, object]]:
    head, _, tail = stdout.rpartition("\nRESULTS ")
    return head, json.loads(tail)


def test_subprocess_calls_answer_as_on_linux(fresh: Sandbox, tmp_path: Path) -> None:
    script = tmp_path / "table.py"
    script.write_text(TABLE)
    env = {**os.environ, "MARKER": "inherited"}
    native = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=120)
    assert native.returncode == 0, native.stderr
    fresh.files.write("/home/user/work/table.py", TABLE)
    guest = fresh.commands.run("cd /home/user/work && MARKER=inherited python3 table.py", timeout=120)
    assert guest.exit_code == 0, guest.stderr
    native_out, native_results = _results(native.stdout)
    guest_out, guest_results = _results(guest.stdout)
    assert sorted(guest_results) == sorted(native_results)
    for name, want in native_results.items():
        assert guest_results[name] == want, name
    # what the children wrote to the parent's own stdout, in order
    assert guest_out.splitlines() == native_out.splitlines()


def test_a_cell_runs_children_too_inside_its_event_loop(fresh: Sandbox) -> None:
    run = fresh.run_code("import asyncio, subprocess, os\nawait asyncio.sleep(0)\n"
                         "print(subprocess.check_output('echo in a loop', shell=True))\n"
                         "os.system('echo system')")
    assert run.error is None, run.error
    assert "".join(run.logs.stdout) == "b'in a loop\\n'\nsystem\n"
