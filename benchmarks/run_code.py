"""run_code: a warm cell's round trip, and the seed's snippets as cells, against native CPython.

    python benchmarks/run_code.py [--cells N]

The cell `x = 1` in a context that is already up (the issue's goal: ≤ 1 ms median), against the
same statement exec'd natively in this process (the floor: no isolation at all); then the
seed's three snippets as three cells of one context, against a native exec of each in a fresh
namespace of a clean venv's python3 (sympy, pandas, matplotlib), its imports done first (as the
warm image has them).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time

import _tree  # noqa: E402,F401  -- PYTHONPATH's tree first (interleave.py), else this repository's

from _common import clean_python  # noqa: E402
from startup import seed_snippets  # noqa: E402

from declaw_wasm import testing  # noqa: E402
from declaw_wasm import Sandbox  # noqa: E402


NATIVE = """
import contextlib, io, json, sys, time
import matplotlib
matplotlib.use("Agg")
took = []
for snippet in json.loads(sys.stdin.read()):
    imports = "\\n".join(line for line in snippet.splitlines() if line.startswith(("import ", "from ")))
    exec(compile(imports, "imports", "exec"), {})  # imports done, as in the snapshot
    with contextlib.redirect_stdout(io.StringIO()):
        start = time.perf_counter()
        exec(compile(snippet, "<cell>", "exec"), {})
        took.append(time.perf_counter() - start)
print(json.dumps(took))
"""


def native_snippets(snippets: list[str]) -> list[float]:
    """Each snippet's time exec'd in a clean venv's python3 (in a temporary folder)."""
    python = clean_python(["sympy", "pandas", "matplotlib"])
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([str(python), "-c", NATIVE], input=json.dumps(snippets), cwd=tmp,
                              capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=500)
    cells = parser.parse_args().cells
    sbx = Sandbox.create(timeout=3600)
    start = time.perf_counter()
    sbx.run_code("x = 0")
    first = time.perf_counter() - start
    times = []
    for _ in range(cells):
        start = time.perf_counter()
        sbx.run_code("x = 1")
        times.append(time.perf_counter() - start)
    native = []
    namespace: dict[str, object] = {}
    code = compile("x = 1", "<cell>", "exec")
    for _ in range(cells):
        start = time.perf_counter()
        exec(code, namespace)
        native.append(time.perf_counter() - start)
    print(f"guest path: {'warm image' if testing.is_warm(sbx) else 'cold'}")
    print(f"first cell of a new context (starts its guest): {first * 1000:.1f} ms")
    print("| work | native (exec in this process) | declaw-wasm `run_code` | |\n|---|---|---|---|")
    median = statistics.median(times)
    print(f"| cell `x = 1`, context up (median of {cells}) | {statistics.median(native) * 1e6:.1f} µs "
          f"| {median * 1000:.2f} ms (p90 {sorted(times)[int(cells * 0.9)] * 1000:.2f} ms) | "
          f"goal ≤ 1 ms: {'met' if median <= 0.001 else 'missed'} |")
    natives = native_snippets(seed_snippets())
    for i, snippet in enumerate(seed_snippets()):
        native_s = natives[i]
        start = time.perf_counter()
        execution = sbx.run_code(snippet)
        sandbox_s = time.perf_counter() - start
        assert execution.error is None, execution.error
        print(f"| seed snippet {i} as a cell | {native_s * 1000:.0f} ms | {sandbox_s * 1000:.0f} ms "
              f"| {sandbox_s / native_s:.1f}× |")
    sbx.kill()


if __name__ == "__main__":
    main()
