"""State that outlives a sandbox (issue 17), started with volumes: side by side with native.

    python benchmarks/state.py [--repeat N] [--files 10000] [--mb 10]

Prints Markdown tables of medians (paste them into benchmarks/README.md). The state store is a
fresh temp folder (DECLAW_WASM_STATE), deleted at the end. To come with the snapshot work:
pause/resume, resume in a new process, fork.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

STATE = tempfile.mkdtemp(prefix="declaw-wasm-bench-state-")
os.environ["DECLAW_WASM_STATE"] = STATE

from _common import median_s  # noqa: E402

from declaw_wasm import Sandbox  # noqa: E402
from declaw_wasm.volumes import VolumeAttachment, Volumes  # noqa: E402

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
    print(f"| first `os.listdir` of the mount, in the guest (first sandbox) | {ms(native)} | {ms(in_guest)} | ≤ 150 ms |")
    print(f"| its command (`python3 -c ...`, wall) | | {ms(wall)} | |")
    print(f"| `os.listdir` in a later sandbox (median, in the guest / wall) | {ms(native)} | {ms(later_in_guest)} / {ms(later_wall)} | |")
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

    print(f"\n### volume from a {len(archive) / 1e6:.1f} MB tar.gz ({len(files)} files, {size / 1e6:.1f} MB unpacked)\n")
    print("| work | native | declaw-wasm | ratio |\n|---|---|---|---|")
    print(f"| `Volumes.create(name, tar_gz)` vs `tarfile.extractall(filter='data')` | {ms(native)} | {ms(create)} | {create / native:.2f}× |")
    print(f"| `Volumes.download` (tar.gz bytes) | | {ms(download)} | |")
    print(f"| `Sandbox.create` with it attached `copy` (+ kill) vs without | {ms(plain_create)} | {ms(copy_create)} | {copy_create / plain_create:.2f}× |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--mb", type=int, default=10)
    args = parser.parse_args()
    try:
        Sandbox.create().kill()  # load the runtime first
        guest = "warm" if os.environ.get("DECLAW_WASM_SNAPSHOT", "1") != "0" else "cold"
        print(f"state store: local folder; guest path: {guest}; load average at start: "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        mount_ro_listing(args.files, args.repeat)
        create_from_archive(args.mb, args.repeat)
        print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(STATE, ignore_errors=True)


if __name__ == "__main__":
    main()
