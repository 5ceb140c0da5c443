"""Exports of a sandbox's files (issue 24: every export is bounded by the disk quota and counts
the bytes it reads): snapshot, pause + resume, fork, `files.read` (bytes and stream) and a volume
snapshot of a sandbox holding one large file and many small ones, timed in this checkout or, with
`--compare OTHER`, in this checkout and another one (say the main branch) in alternating child
processes, so that both see the same machine load.

    python benchmarks/exports.py [--repeat 5] [--mb 64] [--files 2000] [--compare /work/main --rounds 4]

Prints a Markdown table of medians: wall time and the process's CPU time (all threads). The state
store is a fresh temp folder per child, deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
WORK = ["snapshot", "pause + resume", "fork", "files.read bytes", "files.read stream", "volume snapshot"]


def measure(tree: str, repeat: int, mb: int, files: int) -> dict[str, list[list[float]]]:
    """In this process (the checkout `tree` first on the path): [wall, cpu] samples per work."""
    sys.path.insert(0, tree)
    state = tempfile.mkdtemp(prefix="declaw-wasm-bench-exports-")
    os.environ["DECLAW_WASM_STATE"] = state
    import declaw_wasm
    from declaw_wasm import Sandbox
    from declaw_wasm.volumes import Volumes

    assert declaw_wasm.__file__.startswith(tree), (declaw_wasm.__file__, tree)
    out: dict[str, list[list[float]]] = {name: [] for name in WORK}

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        start, cpu = time.perf_counter(), time.process_time()
        result = fn()
        out[name].append([time.perf_counter() - start, time.process_time() - cpu])
        return result

    try:
        sbx = Sandbox.create(timeout=3600)
        sbx.files.write("/home/user/big.bin", os.urandom(mb << 20))
        script = (f"import os\nos.makedirs('/home/user/many', exist_ok=True)\nfor i in range({files}):\n"
                  "    open(f'/home/user/many/f{i}.txt', 'wb').write(os.urandom(4096))\n")
        sbx.files.write("/tmp/many.py", script)
        assert sbx.commands.run("python3 /tmp/many.py", timeout=600).exit_code == 0
        sbx.run_code("x = 1")
        for _ in range(repeat):
            info = timed("snapshot", sbx.create_snapshot)
            sbx.delete_snapshot(info.snapshot_id)
            timed("pause + resume", lambda: (sbx.pause(), sbx.resume()))
            [fork] = timed("fork", lambda: sbx.fork(count=1))
            fork.kill()
            data = timed("files.read bytes", lambda: sbx.files.read("/home/user/big.bin", format="bytes"))
            assert len(data) == mb << 20
            del data
            timed("files.read stream", lambda: sum(len(c) for c in sbx.files.read("/home/user/big.bin",
                                                                                 format="stream")))
            volume = timed("volume snapshot", lambda: Volumes.snapshot(sbx.sandbox_id, "/home/user"))
            Volumes.delete(volume.volume_id)
        sbx.kill()
    finally:
        shutil.rmtree(state, ignore_errors=True)
    return out


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def row(samples: list[list[float]]) -> str:
    return f"{median([s[0] for s in samples]) * 1000:.0f} ms (CPU {median([s[1] for s in samples]) * 1000:.0f} ms)"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--mb", type=int, default=64)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--compare", help="another checkout, timed in alternation with this one")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.repeat, args.mb, args.files)))
        return
    trees = {"this checkout": str(HERE.parent)}
    if args.compare:
        trees["--compare"] = str(Path(args.compare).resolve())
    found: dict[str, dict[str, list[list[float]]]] = {key: {name: [] for name in WORK} for key in trees}
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
          f"{args.mb} MiB file + {args.files} × 4 KiB files")
    order = list(trees)
    for index in range(args.rounds if args.compare else 1):
        for key in order if index % 2 == 0 else reversed(order):
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            env["PYTHONPATH"] = trees[key]
            done = subprocess.run([sys.executable, __file__, "--child", trees[key], "--repeat", str(args.repeat),
                                   "--mb", str(args.mb), "--files", str(args.files)],
                                  env=env, capture_output=True, text=True, check=True)
            for name, samples in json.loads(done.stdout.strip().splitlines()[-1]).items():
                found[key][name].extend(samples)
    keys = list(trees)
    print("\n| export | " + " | ".join(f"{k} ({trees[k]})" for k in keys) + " |")
    print("|---|" + "---|" * len(keys))
    for name in WORK:
        print(f"| {name} | " + " | ".join(row(found[k][name]) for k in keys) + " |")
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
