"""The warm image: nothing from build time leaks into an instance; mounts map afresh. The
renewal tests run on fresh guests and on parked ones (booted before their line came)."""

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from declaw_wasm import testing
from declaw_wasm._wasm.boot import python_spec
from declaw_wasm._wasm.guest import Guest
from declaw_wasm._wasm.layout import Mount, base_env
from declaw_wasm._wasm.warm_image import get_interpreter

from cache_copy import linked_copy  # tests/ is on sys.path

DRAWS = ("import json, random, tempfile, uuid, numpy\n"
         "print(json.dumps([random.random(), float(numpy.random.rand()), "
         "tempfile.NamedTemporaryFile(dir='/tmp').name, str(uuid.uuid4())]))")


pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


class _Commands:
    """`sbx.commands`, with each command run on a parked guest, or on a fresh one."""

    def __init__(self, sbx: Any, parked: bool) -> None:
        self._sbx, self._parked = sbx, parked

    def run(self, cmd: str, **kwargs: Any) -> Any:
        if not self._parked:
            testing.unpark(self._sbx)
            return self._sbx.commands.run(cmd, **kwargs)
        testing.park(self._sbx)
        hits = testing.parked_hits()
        result = self._sbx.commands.run(cmd, **kwargs)
        assert testing.parked_hits() == hits + 1, "the command did not run on the parked guest"
        return result


class _Sandbox:
    def __init__(self, sbx: Any, parked: bool) -> None:
        self.files = sbx.files
        self.commands = _Commands(sbx, parked)


@pytest.fixture(params=["fresh-guest", "parked-guest"])
def guests(request: pytest.FixtureRequest, sbx: Any, guest_path: str) -> Any:
    """The shared sandbox, its commands on fresh guests or parked ones (warm, in-process)."""
    if not testing.is_local(sbx):
        return sbx
    if request.param == "parked-guest" and guest_path != "warm":
        pytest.skip("only the warm image parks guests")
    return _Sandbox(sbx, parked=request.param == "parked-guest")


def test_fresh_instances_draw_different_random_numbers(guests: Any) -> None:
    sbx = guests
    sbx.files.write("/tmp/draws.py", DRAWS)
    first, second = (json.loads(sbx.commands.run("python3 /tmp/draws.py").stdout) for _ in range(2))
    for a, b in zip(first, second, strict=True):
        assert a != b


def test_environment_is_exactly_the_commands(guests: Any) -> None:
    sbx = guests
    r = sbx.commands.run("python3 -c 'import os, sys, json; print(json.dumps([dict(os.environ), "
                         "os.getcwd(), sys.argv]))' x", envs={"ONLY_HERE": "1"}, cwd="/tmp")
    env, cwd, argv = json.loads(r.stdout)
    assert env["ONLY_HERE"] == "1" and env["PWD"] == "/tmp" and env["HOME"] == "/home/user"
    assert set(env) == set(base_env()) | {"ONLY_HERE", "PWD"}
    assert (cwd, argv) == ("/tmp", ["-c", "x"])
    r = sbx.commands.run("python3 -c 'import os; print(os.environ.get(\"ONLY_HERE\"))'")
    assert r.stdout == "None\n"


def test_matplotlib_config_dir_is_the_sandboxs(guests: Any) -> None:
    sbx = guests
    r = sbx.commands.run("python3 -c 'import matplotlib; print(matplotlib.get_configdir(), "
                         "matplotlib.get_backend())'")
    assert r.stdout.lower().split() == ["/home/user/.config/matplotlib", "agg"]


def test_heavy_imports_are_already_done_on_the_warm_path(guests: Any, guest_path: str) -> None:
    sbx = guests
    r = sbx.commands.run("python3 -c 'import sys; print(\"pandas\" in sys.modules)'")
    assert r.stdout == ("True\n" if guest_path == "warm" else "False\n")


def test_reordered_and_extra_mounts_map_to_the_right_folders(tmp_path: Path, guest_path: str) -> None:
    interpreter = get_interpreter(warm=guest_path == "warm")
    folders = {name: tmp_path / name for name in ("home", "tmp", "data")}
    for name, folder in folders.items():
        folder.mkdir()
        (folder / "which.txt").write_text(name)
    shared = [Mount("/usr/local/lib", interpreter.files.lib_dir, False),
              Mount("/usr/local/lib/declaw", Path(__file__).resolve().parent.parent / "guest", False)]
    # Another order than the build's, and a mount the build never had.
    mounts = [Mount("/data", folders["data"], True), *reversed(shared),
              Mount("/tmp", folders["tmp"], True), Mount("/home/user", folders["home"], True)]
    code = ("print([open(p + '/which.txt').read() for p in ('/home/user', '/tmp', '/data')]); "
            "open('/data/new.txt', 'w').write('written')")
    guest = Guest(interpreter, python_spec(interpreter.warm, "/tmp", ["-c", code], base_env(), mounts=mounts))
    guest.start()
    outcome = guest.wait(60)
    assert outcome is not None and outcome.exit_code == 0, outcome and outcome.stderr
    assert outcome.stdout == "['home', 'tmp', 'data']\n"
    assert (folders["data"] / "new.txt").read_text() == "written"


def test_the_warm_image_can_be_switched_off(monkeypatch: pytest.MonkeyPatch, guest_path: str) -> None:
    monkeypatch.setenv("DECLAW_WASM_WARM_IMAGE", "0")
    assert get_interpreter().warm is False
    monkeypatch.setenv("DECLAW_WASM_WARM_IMAGE", "1")
    assert get_interpreter().warm is True


def test_unique_names_do_not_repeat_across_many_commands(guests: Any) -> None:
    sbx = guests
    seen = {sbx.commands.run("python3 -c 'import uuid; print(uuid.uuid4())'").stdout for _ in range(5)}
    assert len(seen) == 5


def test_parked_guests_keep_no_state_between_commands(guests: Any) -> None:
    """What a line does (a module's global, the working directory, sys.path, a leaked file
    handle, an atexit handler) is gone for the next line: each line's guest is its own."""
    sbx = guests
    sbx.files.write("/tmp/leaky.py", "import sys, os, atexit, json\nprint(json.dumps([hasattr(sys, 'marker'), "
                    "os.getcwd(), sys.path[:1]]))\nsys.marker = 1\nos.chdir('/')\nsys.path.insert(0, '/nowhere')\n"
                    "atexit.register(print, 'bye')\nopen('/tmp/leak.txt', 'w').write('x')\n")
    first = sbx.commands.run("cd /home/user && python3 /tmp/leaky.py")
    second = sbx.commands.run("cd /home/user && python3 /tmp/leaky.py")
    assert first.stdout == second.stdout == '[false, "/home/user", ["/tmp"]]\nbye\n', (first, second)


def test_a_parked_guest_becomes_a_code_context(guest_path: str) -> None:
    """The first `run_code` of a sandbox with a parked guest sets the kernel up on it."""
    if guest_path != "warm":
        pytest.skip("only the warm image parks guests")
    from declaw_wasm import Sandbox

    with Sandbox.create(envs={"WHERE": "sandbox"}) as sbx:
        testing.park(sbx)
        hits = testing.parked_hits()
        first = sbx.run_code("import os, sys; x = 41 + 1; x")
        assert testing.parked_hits() == hits + 1
        assert first.text == "42" and first.error is None and first.execution_count == 1
        second = sbx.run_code("print(os.getcwd(), os.environ['WHERE'], x)")
        assert second.logs.stdout == ["/home/user sandbox 42\n"]
        assert sbx.commands.run("echo after").stdout == "after\n"


def test_a_warm_image_that_cannot_be_compiled_leaves_the_cold_path_working(tmp_path: Path, guest_path: str) -> None:
    """Warmup no longer compiles the plain module for the warm path, so the fallback finds it
    or builds it: here a cache whose warm image is damaged (its compiled module gone, its bytes
    not wasm) still runs commands, on the cold path, saying why; the builder is not compiled
    again (the image's bytes are there, only bad)."""
    import os
    import subprocess
    import sys

    from declaw_wasm._wasm.engine import DEFAULT_FLAGS
    from declaw_wasm._wasm.warm_image import warm_image_path
    from declaw_wasm.settings import cache_dir

    if guest_path != "warm":
        pytest.skip("it sets the path itself: one run is enough")
    cold = get_interpreter(warm=False)  # the plain module in the cache (compiled now if it was not)
    copy = tmp_path / "cache"
    linked_copy(cache_dir(), copy)
    for path in copy.glob("compiled/python-warm-*"):  # unlinked, never written: the original shares the inodes
        if path.is_dir():  # a module's pins (snapshots that use it: _cache.pin)
            shutil.rmtree(path)
        else:
            path.unlink()
    bad = copy / warm_image_path(cold.files, DEFAULT_FLAGS).relative_to(cache_dir())
    bad.write_bytes(b"\0asm\1\0\0\0" + b"\x0a\xff\xff\xff\xff\x0f")  # a code section past the end
    code = ("from declaw_wasm import Sandbox\n"
            "with Sandbox.create() as sbx:\n"
            "    print(sbx.commands.run(\"python3 -c 'import sys; print(\\\"pandas\\\" in sys.modules)'\").stdout)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240,
                          env={**os.environ, "DECLAW_WASM_CACHE": str(copy), "DECLAW_WASM_WARM_IMAGE": "1"})
    assert done.returncode == 0 and done.stdout.strip() == "False", (done.stdout, done.stderr[-2000:])
    assert "warm image unavailable, using the cold path" in done.stderr
    assert "builder" not in done.stderr and "compiling the Python runtime module" not in done.stderr
