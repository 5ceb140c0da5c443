"""Images: JPEG work with Pillow in a sandbox and in native CPython, timed inside each
interpreter (start-up excluded), best of `--repeat`.

    python benchmarks/images.py [--repeat 5]

The guest's Pillow has no libjpeg of its own: its JPEG codec is the host's libjpeg-turbo 2.1.5
compiled to WebAssembly (declaw_wasm/_media), run in a fresh instance per call, with pixels moved
by address (docs/security.md, "The guest's JPEG codec on the host"). Native is a clean venv's
python3 with Pillow and numpy (_common.clean_python): Pillow's wheels bundle libjpeg-turbo with
SIMD. One table: each workload, native and guest, and the ratio.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

import _tree  # noqa: F401  -- PYTHONPATH's tree first (interleave.py), else this repository's

from _common import clean_python

WORKLOADS = r'''
import io, json, sys, time
import numpy as np
from PIL import Image

def photo(width, height):  # smooth gradients and noise, built in uint8 (the guest's memory is bounded)
    x = (np.arange(width, dtype=np.uint32) * 255 // width).astype(np.uint8)[None, :]
    y = (np.arange(height, dtype=np.uint32) * 255 // height).astype(np.uint8)[:, None]
    rgb = np.empty((height, width, 3), np.uint8)
    rgb[..., 0], rgb[..., 1], rgb[..., 2] = x, y, x // 2 + y // 2
    rgb += np.random.default_rng(1).integers(0, 24, (height, width, 3), dtype=np.uint8)
    return Image.fromarray(rgb)

BIG = photo(4000, 3000)
SMALL = photo(640, 480)
def saved(image, **options):
    out = io.BytesIO()
    image.save(out, "JPEG", **options)
    return out.getvalue()
BIG_JPEG, PROGRESSIVE = saved(BIG, quality=90), saved(BIG, quality=90, progressive=True)

def decode_big():
    Image.open(io.BytesIO(BIG_JPEG)).load()

def decode_progressive():
    Image.open(io.BytesIO(PROGRESSIVE)).load()

def thumbnail():
    im = Image.open(io.BytesIO(BIG_JPEG))
    im.thumbnail((256, 256))

def encode_big():
    saved(BIG, quality=90)

def encode_optimized():
    saved(BIG, quality=85, optimize=True)

def small_round_trips():
    for _ in range(20):
        Image.open(io.BytesIO(saved(SMALL, quality=85))).load()

WORK = {"decode 4000x3000 q90": decode_big, "decode 4000x3000 progressive": decode_progressive,
        "thumbnail 4000x3000 -> 256 (draft)": thumbnail, "encode 4000x3000 q90": encode_big,
        "encode 4000x3000 q85 optimize": encode_optimized, "640x480 save + load x20": small_round_trips}
repeat, names = int(sys.argv[1]), sys.argv[2:] or list(WORK)
best = {}
for name in names:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        WORK[name]()
        times.append(time.perf_counter() - start)
    best[name] = min(times)
print(json.dumps(best))
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    from declaw_wasm import Sandbox

    python = clean_python(["pillow", "numpy"])
    with tempfile.TemporaryDirectory() as tmp, Sandbox.create(timeout=3600) as sbx:
        script = Path(tmp) / "images.py"
        script.write_text(WORKLOADS)
        native = json.loads(subprocess.run([str(python), str(script), str(args.repeat)], capture_output=True,
                                           text=True, check=True).stdout)
        sbx.files.write("/tmp/images.py", WORKLOADS)
        done = sbx.commands.run(f"python3 /tmp/images.py {args.repeat}", timeout=3600)
        assert done.exit_code == 0, done.stderr
        guest = json.loads(done.stdout)
    print(f"| workload (best of {args.repeat}) | native Pillow | sandbox | ratio |\n|---|---|---|---|")
    for name, seconds in native.items():
        print(f"| {name} | {seconds * 1000:.1f} ms | {guest[name] * 1000:.1f} ms | {guest[name] / seconds:.2f}× |")


if __name__ == "__main__":
    main()
