"""Serverless cold start: a fresh process imports declaw_wasm, creates a sandbox and runs a pandas
command, from a relocated read-only cache, side by side with a native `python3 -c 'import
pandas'`.

    sudo python benchmarks/coldstart.py [--repeat 7]      (root: bind mounts, drop_caches)
    python benchmarks/coldstart.py --smoke                 (one run, no mount: tests/test_benchmarks_run.py)

The cache (DECLAW_WASM_CACHE, built by `declaw-wasm warmup`) is bind-mounted read-only at a new
path and used with DECLAW_WASM_OFFLINE=1, as a function image would ship it. Both sides run in
fresh processes of clean venvs (_common.clean_python): ours holds declaw-wasm's dependencies as the
installed project's own metadata lists them (its core requirements, no extras, at the versions
installed here) and runs this checkout's code; native holds pandas. Figures:
in-process splits (import, create, command) and the whole process, spawn to exit; medians with
the page cache warm, then one run each right after `echo 3 > /proc/sys/vm/drop_caches`.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _tree  # noqa: E402  -- PYTHONPATH's tree first (interleave.py), else this repository's

TREE = _tree.package_tree()  # the checkout whose package the fresh processes import

from _common import clean_python  # noqa: E402



def core_requirements() -> list[str]:
    """declaw-wasm's core dependencies, read from the installed project's metadata (never a list
    kept here: one went stale and the benchmark stopped running), pinned to the versions installed
    in this environment; those whose markers exclude this Python, and every extra's, left out."""
    from packaging.requirements import Requirement

    pinned = []
    for line in importlib.metadata.requires("declaw-wasm") or []:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        pinned.append(f"{requirement.name}=={importlib.metadata.version(requirement.name)}")
    return pinned


OURS = """
import time
t0 = time.perf_counter()
import declaw_wasm
from declaw_wasm import Sandbox
t1 = time.perf_counter()
sbx = Sandbox.create()
t2 = time.perf_counter()
r = sbx.commands.run("python3 -c 'import pandas; print(pandas.DataFrame({\\"a\\": [1, 2]}).a.sum())'")
t3 = time.perf_counter()
assert r.stdout == "3\\n", r
import json, sys
print(json.dumps([t1 - t0, t2 - t1, t3 - t2, t3 - t0]))
sys.stdout.flush()
"""


def drop_caches() -> None:
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def wall(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, cwd="/")
    return time.perf_counter() - start, done.stdout


def environment(cache: Path) -> dict[str, str]:
    """A fresh process's environment: the checkout's code (TREE), `cache` offline, nothing else."""
    return {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "PYTHONPATH": str(TREE),
            "DECLAW_WASM_CACHE": str(cache), "DECLAW_WASM_OFFLINE": "1"}


def smoke() -> None:
    """One fresh process of ours in the clean venv, on the cache as it is (no mount, no root):
    what the test suite runs, so the benchmark cannot stop running unnoticed."""
    from declaw_wasm.settings import cache_dir

    ours_python = clean_python(core_requirements())
    took, out = wall([str(ours_python), "-c", OURS], environment(cache_dir()))
    split = json.loads(out.strip().splitlines()[-1])
    print(f"smoke: import {split[0] * 1000:.0f} ms, create {split[1] * 1000:.0f} ms, command "
          f"{split[2] * 1000:.0f} ms, whole process {took * 1000:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="one run, no read-only mount (the test suite's)")
    args = parser.parse_args()
    if args.smoke:
        return smoke()
    repeat = args.repeat
    from declaw_wasm.settings import cache_dir

    source = cache_dir()
    ours_python = clean_python(core_requirements())
    native_python = clean_python(["pandas"])
    mount = Path(tempfile.mkdtemp(prefix="declaw-wasm-ro-cache-"))
    subprocess.run(["mount", "--bind", str(source), str(mount)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(mount)], check=True)
        env = environment(mount)
        ours_cmd, native_cmd = [str(ours_python), "-c", OURS], [str(native_python), "-c", "import pandas"]
        # ours without the interpreter's own exit (its atexit handlers, its final collections of
        # every object): what the exit costs is the difference
        no_exit_cmd = [str(ours_python), "-c", OURS + "import os\nos._exit(0)\n"]
        # the floor under ours: the interpreter and the two libraries every sandbox needs
        floor_cmd = [str(ours_python), "-c", "import pydantic.main, wasmtime"]
        bare_cmd = [str(ours_python), "-c", "pass"]
        wall(ours_cmd, env)  # the page cache warm
        wall(native_cmd, env)
        ours, native, floor, bare, no_exit = [], [], [], [], []
        for _ in range(repeat):
            took, out = wall(ours_cmd, env)
            ours.append((took, json.loads(out.strip().splitlines()[-1])))
            native.append(wall(native_cmd, env)[0])
            no_exit.append(wall(no_exit_cmd, env)[0])
            floor.append(wall(floor_cmd, env)[0])
            bare.append(wall(bare_cmd, env)[0])
        drop_caches()
        cold_ours = wall(ours_cmd, env)
        drop_caches()
        cold_native = wall(native_cmd, env)[0]
    finally:
        subprocess.run(["umount", str(mount)], check=False)
        os.rmdir(mount)

    def ms(x: float) -> str:
        return f"{x * 1000:.0f} ms"

    split = [statistics.median(t[1][i] for t in ours) for i in range(4)]
    cold_split = json.loads(cold_ours[1].strip().splitlines()[-1])
    print(f"read-only cache: {source} bind-mounted read-only, DECLAW_WASM_OFFLINE=1; "
          f"python {sys.version.split()[0]}; medians of {repeat}\n")
    print("| | page cache warm | after drop_caches |\n|---|---|---|")
    print(f"| `import declaw_wasm` + `from declaw_wasm import Sandbox` | {ms(split[0])} | {ms(cold_split[0])} |")
    print(f"| first `Sandbox.create()` | {ms(split[1])} | {ms(cold_split[1])} |")
    print(f"| first command, `python3 -c 'import pandas; ...'` | {ms(split[2])} | {ms(cold_split[2])} |")
    print(f"| **the three, in-process** | **{ms(split[3])}** | **{ms(cold_split[3])}** |")
    print(f"| the whole process, spawn to exit | {ms(statistics.median(t[0] for t in ours))} | {ms(cold_ours[0])} |")
    whole, native_whole = statistics.median(t[0] for t in ours), statistics.median(native)
    print(f"| native `python3 -c 'import pandas'`, spawn to exit | {ms(native_whole)} "
          f"| {ms(cold_native)} |")
    print(f"| **ours / native, whole process** | **{whole / native_whole:.2f}x** | {cold_ours[0] / cold_native:.2f}x |")
    print(f"| (ours ending with `os._exit(0)` after the command: no interpreter exit) "
          f"| {ms(statistics.median(no_exit))} | |")
    print(f"| (floor: `python3 -c 'import pydantic.main, wasmtime'`, spawn to exit) "
          f"| {ms(statistics.median(floor))} | |")
    print(f"| (floor: `python3 -c pass`, spawn to exit) | {ms(statistics.median(bare))} | |")


if __name__ == "__main__":
    main()
