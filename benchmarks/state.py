"""State that outlives a sandbox (issue 17): snapshots, pause/resume (also in a new process),
fork, and volumes, side by side with a fresh create (and native where there is one).

    python benchmarks/state.py [--repeat N] [--files 10000] [--mb 10] [--only snapshots|volumes|records]

Prints Markdown tables of medians (paste them into benchmarks/README.md). The state store is a
fresh temp folder (DECLAW_WASM_STATE), deleted at the end, and so is its signing key's file
(DECLAW_WASM_STATE_KEY_FILE). `records`: the calls that are mostly reads and writes of the store's
signed records (a volume's manifest, lease generations, snapshot manifests), to see what signing
costs; it runs on older checkouts too (public calls only), for a side-by-side.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Callable, TypeVar

import _tree  # noqa: E402,F401  -- PYTHONPATH's tree first (interleave.py), else this repository's

STATE = tempfile.mkdtemp(prefix="declaw-wasm-bench-state-")
os.environ["DECLAW_WASM_STATE"] = STATE
os.environ["DECLAW_WASM_STATE_KEY_FILE"] = os.path.join(STATE + "-key", "state.key")

from _common import median_s  # noqa: E402

from declaw_wasm import Execution, Sandbox  # noqa: E402
from declaw_wasm.volumes import VolumeAttachment, Volumes  # noqa: E402

T = TypeVar("T")

LISTDIR = ("python3 -c \"import os, time; t = time.perf_counter(); n = len(os.listdir('{path}')); "
           "print(n, time.perf_counter() - t)\"")


def tar_gz(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 1_700_000_000
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def guest_listdir(sbx: Sandbox, path: str) -> tuple[int, float, float]:
    """(entries, seconds inside the guest for the first os.listdir, wall seconds of the command)."""
    start = time.perf_counter()
    r = sbx.commands.run(LISTDIR.format(path=path), timeout=120)
    wall = time.perf_counter() - start
    assert r.exit_code == 0, r.stderr
    count, seconds = r.stdout.split()
    return int(count), float(seconds), wall


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def mount_ro_listing(n_files: int, repeat: int) -> None:
    files = {f"doc_{i:05d}.txt": f"document {i}\n".encode() for i in range(n_files)}
    vol = Volumes.create("listing", tar_gz(files))
    host = Path(tempfile.mkdtemp(prefix="declaw-wasm-bench-native-"))
    for name, data in files.items():
        (host / name).write_bytes(data)
    native = median_s(lambda: os.listdir(host), repeat)

    start = time.perf_counter()
    first = Sandbox.create(volumes=[VolumeAttachment(vol.volume_id, "/corpus", mode="mount-ro")])
    first_create = time.perf_counter() - start
    count, in_guest, wall = guest_listdir(first, "/corpus")
    assert count == n_files
    start = time.perf_counter()
    later = Sandbox.create(volumes=[VolumeAttachment(vol.volume_id, "/corpus", mode="mount-ro")])
    later_create = time.perf_counter() - start
    plain_create = median_s(lambda: Sandbox.create().kill(), repeat)
    listings = [guest_listdir(later, "/corpus") for _ in range(repeat)]
    later_in_guest = sorted(x[1] for x in listings)[len(listings) // 2]
    later_wall = sorted(x[2] for x in listings)[len(listings) // 2]
    # The same files in the sandbox's own writable tree, for comparison.
    r = later.commands.run("python3 -c \"import shutil; shutil.copytree('/corpus', '/tmp/own')\"", timeout=300)
    assert r.exit_code == 0, r.stderr
    owns = [guest_listdir(later, "/tmp/own") for _ in range(repeat)]
    assert owns[0][0] == n_files
    own = sorted(x[1] for x in owns)[repeat // 2]
    first.kill()
    later.kill()
    shutil.rmtree(host)

    print(f"\n### mount-ro volume of {n_files} files in one folder\n")
    print("| work | native | declaw-wasm | target |\n|---|---|---|---|")
    print(f"| first `os.listdir` of the mount, in the guest (first sandbox) | {ms(native)} | {ms(in_guest)} "
          "| ≤ 150 ms |")
    print(f"| its command (`python3 -c ...`, wall) | | {ms(wall)} | |")
    print(f"| `os.listdir` in a later sandbox (median, in the guest / wall) | {ms(native)} "
          f"| {ms(later_in_guest)} / {ms(later_wall)} | |")
    print(f"| the same files copied into the sandbox's /tmp, `os.listdir` | {ms(native)} | {ms(own)} | |")
    print(f"| `Sandbox.create` + attach, first in the process (materialises the volume) | | {ms(first_create)} | |")
    print(f"| `Sandbox.create` + attach, later (shares the materialised folder) | | {ms(later_create)} | |")
    print(f"| `Sandbox.create` without volumes (median) | | {ms(plain_create)} | |")


def create_from_archive(mb: int, repeat: int) -> None:
    rng = __import__("random").Random(7)
    # ~1000 files of mixed text (compressible, like a corpus) adding up to `mb` MB unpacked.
    words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(2000)]
    files: dict[str, bytes] = {}
    size, i = 0, 0
    while size < mb << 20:
        body = b" ".join(rng.choice(words) for _ in range(1800))
        files[f"corpus/part{i // 100:02d}/doc_{i:05d}.txt"] = body
        size += len(body)
        i += 1
    archive = tar_gz(files)

    def native_extract() -> None:
        dest = tempfile.mkdtemp(prefix="declaw-wasm-bench-x-")
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            tar.extractall(dest, filter="data")
        shutil.rmtree(dest)

    made: list[str] = []
    native = median_s(native_extract, repeat)
    create = median_s(lambda: made.append(Volumes.create("bench", archive).volume_id), repeat)
    vid = made[-1]
    download = median_s(lambda: Volumes.download(vid), repeat)
    copy_create = median_s(lambda: Sandbox.create(volumes=[VolumeAttachment(vid, "/data")]).kill(), repeat)
    plain_create = median_s(lambda: Sandbox.create().kill(), repeat)
    for v in made:
        Volumes.delete(v)

    print(f"\n### volume from a {len(archive) / 1e6:.1f} MB tar.gz ({len(files)} files, "
          f"{size / 1e6:.1f} MB unpacked)\n")
    print("| work | native | declaw-wasm | ratio |\n|---|---|---|---|")
    print(f"| `Volumes.create(name, tar_gz)` vs `tarfile.extractall(filter='data')` | {ms(native)} | {ms(create)} "
          f"| {create / native:.2f}× |")
    print(f"| `Volumes.download` (tar.gz bytes) | | {ms(download)} | |")
    print(f"| `Sandbox.create` with it attached `copy` (+ kill) vs without | {ms(plain_create)} | {ms(copy_create)} "
          f"| {copy_create / plain_create:.2f}× |")


# A context that imported pandas and holds a 10 MiB DataFrame (random floats: incompressible).
PANDAS_10MB = ("import pandas as pd, numpy as np\n"
               "df = pd.DataFrame(np.random.default_rng(1).random((131072, 10)))\n")
CHECK = "int(df.shape[0])"
ROOT = Path(__file__).resolve().parent.parent


def in_new_process(code: str) -> dict[str, list[float]]:
    """`code` in a new Python process (this checkout, the same cache and state store); it prints
    one JSON object of timings: name -> [wall, CPU] seconds."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


NEW_PROCESS = """
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
from declaw_wasm import Sandbox
t1, c1 = time.perf_counter(), time.process_time()
{action}
t2, c2 = time.perf_counter(), time.process_time()
assert sbx.run_code({check!r}).text == "131072"
t3, c3 = time.perf_counter(), time.process_time()
{after}
print(json.dumps({{"import": [t1 - t0, c1 - c0], "call": [t2 - t1, c2 - c1], "first_cell": [t3 - t2, c3 - c2]}}))
"""


class Timings:
    """Wall time and this process's CPU time (every thread: the guests', the compression pool's)
    of repeated runs; `str()` gives both medians. CPU time is what the work costs; wall time,
    on a loaded machine, also what it waited for a core (or the disk)."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def run(self, fn: Callable[[], T]) -> T:
        start, cpu = time.perf_counter(), time.process_time()
        out = fn()
        self.wall.append(time.perf_counter() - start)
        self.cpu.append(time.process_time() - cpu)
        return out

    def add(self, wall: float, cpu: float) -> None:
        self.wall.append(wall)
        self.cpu.append(cpu)

    @property
    def median(self) -> float:
        return sorted(self.wall)[len(self.wall) // 2]

    def __str__(self) -> str:
        cpu = sorted(self.cpu)[len(self.cpu) // 2]
        return f"{ms(self.median)} (CPU {ms(cpu)})"


def snapshots(repeat: int) -> None:
    made: list[Sandbox] = []

    def fresh_cell() -> Execution:
        made.append(Sandbox.create())
        return made[-1].run_code(PANDAS_10MB + CHECK)

    fresh, create = Timings(), Timings()
    for _ in range(repeat):
        fresh.run(fresh_cell)
        create.run(lambda: made.append(Sandbox.create()))  # kills are not timed
    for sandbox in made:
        sandbox.kill()
    sbx = Sandbox.create(timeout=3600)
    sbx.run_code(PANDAS_10MB)
    data = 131072 * 10 * 8
    snap, pauses, resumes, cells = Timings(), Timings(), Timings(), Timings()
    for _ in range(repeat):
        snap.run(sbx.create_snapshot)
    for _ in range(repeat):
        pauses.run(sbx.pause)
        resumes.run(sbx.resume)
        assert cells.run(lambda: sbx.run_code(CHECK).text) == "131072"
    size = next(s for s in sbx.list_snapshots() if s.source == "pause").size_bytes or 0
    image = next(s for s in sbx.list_snapshots() if s.source == "pause").mem_size_bytes or 0
    sbx.pause()
    runs = {key: Timings() for key in ("import", "call", "first_cell")}
    fresh_runs = {key: Timings() for key in ("import", "call", "first_cell")}
    fresh_action = f"sbx = Sandbox.create(); sbx.run_code({PANDAS_10MB!r})"
    for _ in range(repeat):
        for into, action, after in ((runs, f"sbx = Sandbox.resume({sbx.sandbox_id!r})", "sbx.pause()"),
                                    (fresh_runs, fresh_action, "sbx.kill()")):
            found = in_new_process(NEW_PROCESS.format(action=action, check=CHECK, after=after))
            for key, (wall, cpu) in found.items():
                into[key].add(wall, cpu)
    sbx.resume()
    forks, forks_cell = Timings(), Timings()
    for _ in range(repeat):
        start, cpu = time.perf_counter(), time.process_time()
        made = forks.run(lambda: sbx.fork(count=8))
        for fork in made:
            assert fork.run_code(CHECK).text == "131072"
        forks_cell.add(time.perf_counter() - start, time.process_time() - cpu)
        for fork in made:
            fork.kill()
    sbx.kill()

    print("\n### Snapshots, pause/resume and fork of a context holding a 10 MiB DataFrame\n")
    print("The context imported pandas and made `pd.DataFrame` of 131072 × 10 random floats (10 MiB, "
          "incompressible). Baseline: a fresh sandbox doing the same work. Medians of wall time, and of "
          "the process's CPU time (all threads) in brackets.\n")
    print("| work | declaw-wasm | fresh create instead | target |\n|---|---|---|---|")
    print(f"| `pause()` (snapshot to the store, guests freed) | {pauses} | | ≤ 100 ms |")
    print(f"| `resume()` (same process) | {resumes} | {create} (`create`) | ≤ 100 ms |")
    print(f"| first cell after `resume()` (its guest starts from the image) | {cells} | | |")
    print(f"| resume + first cell, same process | {ms(resumes.median + cells.median)} | {fresh} "
          "(create + import pandas + make the DataFrame) | |")
    print(f"| `create_snapshot()` (the sandbox goes on) | {snap} | | |")
    print(f"| pause snapshot in the store (data {data / 1e6:.1f} MB; context memory {image / 1e6:.0f} MB) | "
          f"{size / 1e6:.1f} MB | | ≤ data + 10 MB = {(data / 1e6) + 10:.1f} MB |")
    print(f"| new process: `import declaw_wasm` | {runs['import']} | {fresh_runs['import']} | |")
    print(f"| new process: `Sandbox.resume(id)` (runtime load included) | {runs['call']} | "
          f"{fresh_runs['call']} (create + pandas + DataFrame) | ≤ 150 ms |")
    print(f"| new process: its first cell | {runs['first_cell']} | {fresh_runs['first_cell']} | |")
    print(f"| `fork(count=8)` | {forks} | {ms(8 * create.median)} (8 × `create`) | ≤ 300 ms |")
    print(f"| `fork(count=8)` + a cell in each fork | {forks_cell} | {ms(8 * fresh.median)} "
          "(8 × create + pandas + DataFrame) | |")


def records(repeat: int) -> None:
    """Calls made mostly of record reads and writes: `Volumes.get` (one manifest read), a small
    `VolumeFiles` read (the manifest, then the bytes), a small write (the writer lease taken and
    released: its generations read and written; the manifest read and published), and
    `Sandbox.list_snapshots` of 10 snapshots (10 manifests read)."""
    vol = Volumes.create("records", tar_gz({"a.txt": b"a" * 100}))
    files = Volumes.files(vol.volume_id)
    counter = iter(range(1 << 30))
    rows = [("`Volumes.get` (1 manifest)", median_s(lambda: Volumes.get(vol.volume_id), repeat)),
            ("`VolumeFiles.read`, 100 bytes", median_s(lambda: files.read("/a.txt"), repeat)),
            ("`VolumeFiles.write`, 1 byte (lease, manifest)",
             median_s(lambda: files.write(f"/w{next(counter)}.txt", b"w"), repeat))]
    sbx = Sandbox.create()
    try:
        sbx.run_code("x = 1")
        for _ in range(10):
            sbx.create_snapshot()
        rows.append(("`Sandbox.list_snapshots(id)` (10 manifests)",
                     median_s(lambda: list(Sandbox.list_snapshots(sbx.sandbox_id)), repeat)))
    finally:
        sbx.kill()
    print("\n### Records of the state store (signed since issue 25)\n")
    print("| call | median |\n|---|---|")
    for name, seconds in rows:
        print(f"| {name} | {seconds * 1e3:.3f} ms |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--mb", type=int, default=10)
    parser.add_argument("--only", choices=["snapshots", "volumes", "records"])
    args = parser.parse_args()
    try:
        Sandbox.create().kill()  # load the runtime first
        guest = "warm" if os.environ.get("DECLAW_WASM_WARM_IMAGE", "1") != "0" else "cold"
        print(f"state store: local folder; guest path: {guest}; load average at start: "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        if args.only in (None, "snapshots"):
            snapshots(args.repeat)
        if args.only in (None, "volumes"):
            mount_ro_listing(args.files, args.repeat)
            create_from_archive(args.mb, args.repeat)
        if args.only in (None, "records"):
            records(args.repeat)
        print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(STATE, ignore_errors=True)
        shutil.rmtree(STATE + "-key", ignore_errors=True)


if __name__ == "__main__":
    main()
