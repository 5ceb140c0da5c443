"""Start-up and the seed's snippets: native CPython subprocesses vs. sandbox commands, side by side.

    python benchmarks/startup.py [--repeat N]

Prints a Markdown table of medians (paste it into benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import HEADER, median_s, native, row  # noqa: E402

from declaw_wasm import testing  # noqa: E402
from declaw_wasm import Sandbox  # noqa: E402
from declaw_wasm._assets import examples_dir  # noqa: E402


def seed_snippets() -> list[str]:
    namespace: dict[str, object] = {}
    source = (examples_dir() / "code_interpreter.py").read_text()
    exec(compile(source, "code_interpreter.py", "exec"), namespace)
    return list(namespace["SNIPPETS"])  # type: ignore[arg-type]


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def memory_figures() -> None:
    """RSS an idle sandbox costs, and the peak while one runs each seed snippet."""
    import threading

    before = rss_mib()
    idle = [Sandbox.create(timeout=600) for _ in range(20)]
    per_idle = (rss_mib() - before) / len(idle)
    for s in idle:
        s.kill()
    with Sandbox.create(timeout=600) as sbx:
        peaks = []
        for i, code in enumerate(seed_snippets()):
            sbx.files.write(f"/tmp/m_{i}.py", code)
            base, peak, done = rss_mib(), [0.0], threading.Event()

            def sample() -> None:
                while not done.wait(0.005):
                    peak[0] = max(peak[0], rss_mib())

            sampler = threading.Thread(target=sample)
            sampler.start()
            sbx.commands.run(f"python3 /tmp/m_{i}.py")
            done.set()
            sampler.join()
            peaks.append(max(peak[0], base) - base)
    print(f"\nRSS per idle sandbox (20 created): {per_idle:.2f} MiB; "
          f"peak extra RSS while a seed snippet runs: {', '.join(f'{p:.0f}' for p in peaks)} MiB")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat

    start = time.perf_counter()
    first = Sandbox.create()  # loads the runtime (compiled modules from the cache)
    path = "warm snapshot" if testing.is_warm(first) else "cold (DECLAW_WASM_SNAPSHOT=0)"
    first.kill()
    print(f"guest path: {path}; first Sandbox.create in this process (runtime load + self-check): "
          f"{(time.perf_counter() - start) * 1000:.0f} ms\n")

    print(HEADER)

    def fresh_print1() -> None:
        with Sandbox.create() as s:
            s.commands.run("python3 -c 'print(1)'")

    print(row("`python3 -c 'print(1)'` on a new sandbox (create + run + kill)",
              median_s(native(["-c", "print(1)"]), repeat), median_s(fresh_print1, repeat)))
    with Sandbox.create(timeout=3600) as sbx:
        print(row("`python3 -c 'print(1)'` (sandbox already up)",
                  median_s(native(["-c", "print(1)"]), repeat),
                  median_s(lambda: sbx.commands.run("python3 -c 'print(1)'"), repeat)))
        print(row("`python3 -c 'import pandas'`", median_s(native(["-c", "import pandas"]), repeat),
                  median_s(lambda: sbx.commands.run("python3 -c 'import pandas'"), repeat)))
        with tempfile.TemporaryDirectory() as tmp:
            for i, code in enumerate(seed_snippets()):
                local = Path(tmp) / f"snip_{i}.py"
                local.write_text(code.replace("/tmp/chart.png", os.path.join(tmp, "chart.png")))
                sbx.files.write(f"/tmp/snip_{i}.py", code)
                label = ["sympy solve", "pandas groupby", "matplotlib savefig"][i]
                print(row(f"seed snippet {i} ({label})", median_s(native([str(local)]), repeat),
                          median_s(lambda: sbx.commands.run(f"python3 /tmp/snip_{i}.py"), repeat)))
    memory_figures()


if __name__ == "__main__":
    main()
