"""The warm snapshot: nothing from build time leaks into an instance; mounts map afresh."""

import json
from pathlib import Path

from declaw_wasm._wasm.boot import python_spec
from declaw_wasm._wasm.guest import Guest
from declaw_wasm._wasm.layout import Mount, base_env
from declaw_wasm._wasm.snapshot import get_runtime

DRAWS = ("import json, random, tempfile, uuid, numpy\n"
         "print(json.dumps([random.random(), float(numpy.random.rand()), "
         "tempfile.NamedTemporaryFile(dir='/tmp').name, str(uuid.uuid4())]))")


def test_fresh_instances_draw_different_random_numbers(sbx) -> None:
    sbx.files.write("/tmp/draws.py", DRAWS)
    first, second = (json.loads(sbx.commands.run("python3 /tmp/draws.py").stdout) for _ in range(2))
    for a, b in zip(first, second):
        assert a != b


def test_environment_is_exactly_the_commands(sbx) -> None:
    r = sbx.commands.run("python3 -c 'import os, sys, json; print(json.dumps([dict(os.environ), "
                         "os.getcwd(), sys.argv]))' x", envs={"ONLY_HERE": "1"}, cwd="/tmp")
    env, cwd, argv = json.loads(r.stdout)
    assert env["ONLY_HERE"] == "1" and env["PWD"] == "/tmp" and env["HOME"] == "/home/user"
    assert set(env) == set(base_env()) | {"ONLY_HERE", "PWD"}
    assert (cwd, argv) == ("/tmp", ["-c", "x"])
    r = sbx.commands.run("python3 -c 'import os; print(os.environ.get(\"ONLY_HERE\"))'")
    assert r.stdout == "None\n"


def test_matplotlib_config_dir_is_the_sandboxs(sbx) -> None:
    r = sbx.commands.run("python3 -c 'import matplotlib; print(matplotlib.get_configdir(), "
                         "matplotlib.get_backend())'")
    assert r.stdout.lower().split() == ["/home/user/.config/matplotlib", "agg"]


def test_heavy_imports_are_already_done_on_the_warm_path(sbx, guest_path) -> None:
    r = sbx.commands.run("python3 -c 'import sys; print(\"pandas\" in sys.modules)'")
    assert r.stdout == ("True\n" if guest_path == "warm" else "False\n")


def test_reordered_and_extra_mounts_map_to_the_right_folders(tmp_path: Path, guest_path) -> None:
    runtime = get_runtime(warm=guest_path == "warm")
    folders = {name: tmp_path / name for name in ("home", "tmp", "data")}
    for name, folder in folders.items():
        folder.mkdir()
        (folder / "which.txt").write_text(name)
    shared = [Mount("/usr/local/lib", runtime.files.lib_dir, False),
              Mount("/usr/local/lib/declaw", Path(__file__).resolve().parent.parent / "runtime", False)]
    # Another order than the build's, and a mount the build never had.
    mounts = [Mount("/data", folders["data"], True), *reversed(shared),
              Mount("/tmp", folders["tmp"], True), Mount("/home/user", folders["home"], True)]
    code = ("print([open(p + '/which.txt').read() for p in ('/home/user', '/tmp', '/data')]); "
            "open('/data/new.txt', 'w').write('written')")
    guest = Guest(runtime, python_spec(runtime.warm, "/tmp", ["-c", code], base_env(), mounts=mounts))
    guest.start()
    outcome = guest.wait(60)
    assert outcome is not None and outcome.exit_code == 0, outcome and outcome.stderr
    assert outcome.stdout == "['home', 'tmp', 'data']\n"
    assert (folders["data"] / "new.txt").read_text() == "written"


def test_snapshot_can_be_switched_off(monkeypatch, guest_path) -> None:
    monkeypatch.setenv("DECLAW_WASM_SNAPSHOT", "0")
    assert get_runtime().warm is False
    monkeypatch.setenv("DECLAW_WASM_SNAPSHOT", "1")
    assert get_runtime().warm is True


def test_unique_names_do_not_repeat_across_many_commands(sbx) -> None:
    seen = {sbx.commands.run("python3 -c 'import uuid; print(uuid.uuid4())'").stdout for _ in range(5)}
    assert len(seen) == 5
