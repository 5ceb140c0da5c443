"""Compute speed: the same workloads in a sandbox and in native CPython, timed inside each
interpreter (start-up excluded), best of `--repeat`.

    python benchmarks/compute.py [--repeat 5] [--fuel] [--linalg-only]

Native is a clean venv's python3 with numpy and pandas only (_common.clean_python). The guest
is the warm image's CPython 3.15 on Wasmtime (Cranelift, opt level "speed", SIMD on: see the
engine check printed first). `--fuel` also runs the workloads on the fuel-enabled build
(`declaw-wasm warmup --fuel`) and prints its slowdown against the plain one.

A second table times linear algebra (docs/compute.md) four ways: in the guest with its large
BLAS calls routed to the host (`DECLAW_WASM_HOST_BLAS=1`, the default; the host BLAS may use
every core), in the guest with every call kept in it (`=0`), and natively in a clean venv with
the guest's libraries (numpy, SciPy, scikit-learn) at one BLAS thread and at all cores.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import _tree  # noqa: E402,F401  -- PYTHONPATH's tree first (interleave.py), else this repository's

from _common import clean_python  # noqa: E402

if TYPE_CHECKING:  # at run time declaw_wasm is imported by the functions that use it
    from declaw_wasm import Sandbox

WORKLOADS = r'''
import json, re, sys, time

def loop():
    total = 0
    for i in range(3_000_000):
        total += i * i % 7
    return total

def calls():
    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)
    return fib(25)

def matmul():
    import numpy as np
    a = np.random.default_rng(0).random((400, 400))
    for _ in range(10):
        a @ a

def vector():
    import numpy as np
    x = np.random.default_rng(0).random(2_000_000)
    for _ in range(10):
        (np.sin(x) * x + 1.0).sum()

def groupby():
    import numpy as np, pandas as pd
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"k": rng.integers(0, 1000, 1_000_000), "v": rng.random(1_000_000)})
    df.groupby("k")["v"].agg(["mean", "sum", "count"])

def json_round_trips():
    doc = {"items": [{"id": i, "name": f"item {i}", "tags": ["a", "b"], "price": i * 1.5}
                     for i in range(1000)]}
    for _ in range(50):
        json.loads(json.dumps(doc))

def regex():
    text = "user-%d@example.com, " * 20000
    for _ in range(5):
        len(re.findall(r"[\w.-]+@[\w.-]+\.\w+", text))

def sorting():
    import random
    data = [random.random() for _ in range(500_000)]
    for _ in range(3):
        sorted(data)

def strings():
    parts = []
    for i in range(300_000):
        parts.append(f"{i}:{i * 2}".upper().replace("1", "x"))
    "".join(parts).split("x")

import numpy, pandas  # imported before timing (on the warm path they are in the snapshot)
repeat = int(sys.argv[1])
only = sys.argv[2] if len(sys.argv) > 2 else None
out = {}
for name, fn in [("pure-Python loop (3e6 steps)", loop), ("function calls (fib 25)", calls),
                 ("numpy 400x400 matmul x10", matmul), ("numpy vector math 2e6 x10", vector),
                 ("pandas groupby 1e6 rows", groupby), ("json round trips (1000 items x50)", json_round_trips),
                 ("regex findall (20k emails x5)", regex), ("sort 5e5 floats x3", sorting),
                 ("str format/upper/replace 3e5", strings)]:
    if only is not None and name != only:
        continue
    best = None
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        took = time.perf_counter() - start
        best = took if best is None else min(best, took)
    out[name] = best
print(json.dumps(out))
'''


LINALG = r'''
import json, sys, time
import numpy as np

rng = np.random.default_rng(0)

def matmul_500():
    a = rng.standard_normal((500, 500))
    return lambda: a @ a

def svd():
    a = rng.standard_normal((1000, 300))
    return lambda: np.linalg.svd(a, full_matrices=False)

def solve():
    a, b = rng.standard_normal((1000, 1000)), rng.standard_normal(1000)
    return lambda: np.linalg.solve(a, b)

def pca():
    from sklearn.decomposition import PCA
    x = rng.standard_normal((20000, 200))
    return lambda: PCA(50, random_state=0).fit(x)

def ridge():
    from sklearn.linear_model import Ridge
    x, y = rng.standard_normal((20000, 200)), rng.standard_normal(20000)
    return lambda: Ridge().fit(x, y)

def logistic():
    from sklearn.linear_model import LogisticRegression
    x = rng.standard_normal((20000, 50))
    y = (x[:, 0] + 0.5 * rng.standard_normal(20000) > 0).astype(int)
    return lambda: LogisticRegression().fit(x, y)

def kmeans():
    from sklearn.cluster import KMeans
    x = rng.standard_normal((20000, 10))
    return lambda: KMeans(8, n_init=1, random_state=0).fit(x)

def small_matmul():
    a = rng.standard_normal((10, 10))
    def run():
        for _ in range(1000):
            a @ a
    return run

CASES = {"numpy a @ a, 500x500": matmul_500, "np.linalg.svd 1000x300": svd,
         "np.linalg.solve 1000x1000": solve, "PCA(50).fit 20000x200": pca,
         "Ridge().fit 20000x200": ridge, "LogisticRegression().fit 20000x50": logistic,
         "KMeans(8).fit 20000x10": kmeans, "10x10 matmul x1000": small_matmul}
repeat, name = int(sys.argv[1]), sys.argv[2]
fn = CASES[name]()
fn()  # a first call outside the timing (imports, the host BLAS's first use)
times = []
for _ in range(repeat):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
print(json.dumps({name: min(times)}))
'''
LINALG_NAMES = ["numpy a @ a, 500x500", "np.linalg.svd 1000x300", "np.linalg.solve 1000x1000",
                "PCA(50).fit 20000x200", "Ridge().fit 20000x200", "LogisticRegression().fit 20000x50",
                "KMeans(8).fit 20000x10", "10x10 matmul x1000"]


def linalg_table(repeat: int) -> None:
    """The linear algebra table (module docstring): routed (the host BLAS at its default, one
    thread, and at every core), kept in the guest, native at one thread and at every core."""
    import os

    from declaw_wasm import Sandbox

    python = clean_python(["numpy", "pandas", "scipy", "scikit-learn"])
    cores = os.cpu_count() or 1
    rows = []
    # every core: the thread count is the process's, read once, so that sandbox lives in a pool
    # worker started with it (DECLAW_WASM_BLAS_THREADS, docs/compute.md)
    os.environ["DECLAW_WASM_BLAS_THREADS"] = str(cores)
    wide = Sandbox.create(timeout=3600, backend="processes:1")
    os.environ.pop("DECLAW_WASM_BLAS_THREADS")
    with tempfile.TemporaryDirectory() as tmp, Sandbox.create(timeout=3600) as sbx, wide:
        (Path(tmp) / "linalg.py").write_text(LINALG)
        for box in (sbx, wide):
            box.files.write("/tmp/linalg.py", LINALG)
        for name in LINALG_NAMES:
            row = []
            for threads in ("1", str(cores)):
                env = dict(os.environ, OPENBLAS_NUM_THREADS=threads, OMP_NUM_THREADS=threads)
                done = subprocess.run([str(python), str(Path(tmp) / "linalg.py"), str(repeat), name],
                                      capture_output=True, text=True, check=True, env=env)
                row.append(json.loads(done.stdout)[name])
            for box, routed in ((sbx, "1"), (wide, "1"), (sbx, "0")):  # HOST_BLAS: read at each call
                os.environ["DECLAW_WASM_HOST_BLAS"] = routed
                result = box.commands.run(f"python3 /tmp/linalg.py {repeat} '{name}'", timeout=3600)
                assert result.exit_code == 0, result.stderr
                row.append(json.loads(result.stdout)[name])
            os.environ.pop("DECLAW_WASM_HOST_BLAS", None)
            rows.append((name, *row))
    print(f"\n| workload (best of {repeat}) | native, 1 thread | native, {cores} threads | guest, routed | "
          f"ratio (routed / native 1) | guest, routed, {cores} BLAS threads | ratio | guest, kept in the guest | "
          "ratio (kept / native 1) |\n|---|---|---|---|---|---|---|---|---|")
    for name, one, every, routed, wide_routed, kept in rows:
        print(f"| {name} | {one * 1000:.1f} ms | {every * 1000:.1f} ms | {routed * 1000:.1f} ms | "
              f"{routed / one:.2f}× | {wide_routed * 1000:.1f} ms | {wide_routed / one:.2f}× | "
              f"{kept * 1000:.1f} ms | {kept / one:.1f}× |")


def engine_check() -> None:
    """Cranelift's opt level and SIMD, as the engine is configured, and whether the module uses
    SIMD (a module with SIMD instructions fails validation with SIMD off)."""
    import wasmtime

    from declaw_wasm._wasm.engine import DEFAULT_FLAGS
    from declaw_wasm._wasm.warm_image import get_interpreter

    interpreter = get_interpreter()
    config = DEFAULT_FLAGS.config()
    config.wasm_simd = False
    config.wasm_relaxed_simd = False
    data = interpreter.files.module.read_bytes()
    try:
        wasmtime.Module.validate(wasmtime.Engine(config), data)
        uses = "no"
    except wasmtime.WasmtimeError:
        uses = "yes"
    print(f"engine: Cranelift (opt level: wasmtime's default, \"speed\"; we never lower it but "
          f"for the one-off snapshot builder), wasm SIMD on (wasmtime's default); the module "
          f"uses SIMD instructions: {uses}")


def guest_blas() -> str:
    from declaw_wasm import Sandbox

    with Sandbox.create() as sbx:
        code = ("import numpy, json; c = numpy.show_config(mode='dicts'); "
                "print(json.dumps(c.get('Build Dependencies', {}).get('blas', {})))")
        return sbx.commands.run(f"python3 -c \"{code}\"").stdout.strip()


NAMES = ["pure-Python loop (3e6 steps)", "function calls (fib 25)", "numpy 400x400 matmul x10",
         "numpy vector math 2e6 x10", "pandas groupby 1e6 rows", "json round trips (1000 items x50)",
         "regex findall (20k emails x5)", "sort 5e5 floats x3", "str format/upper/replace 3e5"]


def in_guest(sbx: Sandbox, repeat: int, name: str) -> tuple[float, Optional[int], float]:
    """(best time, instructions the command ran (fuel only), the command's wall time)."""
    start = time.perf_counter()
    result = sbx.commands.run(f"python3 /tmp/workloads.py {repeat} '{name}'", timeout=3600)
    took = time.perf_counter() - start
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)[name], result.cpu_instructions_used, took


def natively(python: Path, tmp: Path, repeat: int, name: str) -> float:
    done = subprocess.run([str(python), str(tmp / "workloads.py"), str(repeat), name], capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout)[name]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--fuel", action="store_true")
    parser.add_argument("--linalg-only", action="store_true", help="only the linear algebra table")
    args = parser.parse_args()
    from declaw_wasm import Limits, Sandbox

    if args.linalg_only:
        linalg_table(args.repeat)
        return

    engine_check()
    print(f"guest numpy's BLAS: {guest_blas()}\n")
    python = clean_python(["numpy", "pandas"])
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Sandbox.create(timeout=3600) as plain:
        (Path(tmp) / "workloads.py").write_text(WORKLOADS)
        plain.files.write("/tmp/workloads.py", WORKLOADS)
        fueled = Sandbox.create(timeout=3600, limits=Limits(cpu_instructions=1 << 62)) if args.fuel else None
        if fueled is not None:
            fueled.files.write("/tmp/workloads.py", WORKLOADS)
        for name in NAMES:  # each workload natively, plain and with fuel, one after the other
            native = natively(python, Path(tmp), args.repeat, name)
            guest = in_guest(plain, args.repeat, name)[0]
            fuel = in_guest(fueled, args.repeat, name) if fueled is not None else None
            rows.append((name, native, guest, fuel))
        if fueled is not None:
            fueled.kill()
    print(f"| workload (best of {args.repeat}) | native CPython {sys.version.split()[0]} | "
          "declaw-wasm | ratio |\n|---|---|---|---|")
    for name, native, guest, _ in rows:
        print(f"| {name} | {native * 1000:.0f} ms | {guest * 1000:.0f} ms | {guest / native:.1f}× |")
    if args.fuel:
        print("\n| workload (best of the same runs) | plain module | fuel module | slowdown | "
              "instructions per second (fuel) |\n|---|---|---|---|---|")
        for name, _, guest, fuel in rows:
            assert fuel is not None
            best, used, took = fuel
            rate = f"{used / took / 1e9:.2f} G" if used else "?"
            print(f"| {name} | {guest * 1000:.0f} ms | {best * 1000:.0f} ms | {best / guest:.2f}× | {rate} |")
    linalg_table(args.repeat)


if __name__ == "__main__":
    main()
