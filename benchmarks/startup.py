"""Start-up and the seed's snippets: native CPython and bash subprocesses vs. sandbox commands,
side by side, and what an idle sandbox, a parked guest and the standby sandboxes cost.

    python benchmarks/startup.py [--repeat N] [--gap SECONDS]

Native is a `python3` from a clean venv holding only what the work needs (_common.clean_python),
or `bash -c`. Sandbox commands are measured two ways: back to back, and after `--gap` seconds
of quiet (default 0.2 s, untimed), as an agent's commands come (an LLM round trip apart): then
the sandbox's next guest is already parked (booted and waiting for its line) and `create` hands
out a pre-created sandbox. Prints Markdown tables of medians (paste them into
benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

import _tree  # noqa: E402,F401  -- PYTHONPATH's tree first (interleave.py), else this repository's

from _common import HEADER, after_gap, median_s, native, row  # noqa: E402

from declaw_wasm import Sandbox, testing  # noqa: E402
from declaw_wasm._assets import examples_dir  # noqa: E402

SNIPPET_PACKAGES = [["sympy"], ["pandas"], ["matplotlib"]]


def seed_snippets() -> list[str]:
    namespace: dict[str, Any] = {}  # what the example's code defines
    source = (examples_dir() / "code_interpreter.py").read_text()
    exec(compile(source, "code_interpreter.py", "exec"), namespace)
    return list(namespace["SNIPPETS"])


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def bash(line: str) -> Callable[[], object]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    return lambda: subprocess.run(["bash", "-c", line], env=env, check=True, capture_output=True)


def sample_peak(peak: list[float], done: threading.Event) -> None:
    """Keeps the highest RSS in `peak[0]`, sampled every 5 ms until `done`."""
    while not done.wait(0.005):
        peak[0] = max(peak[0], rss_mib())


def memory_figures(gap: float) -> None:
    """RSS an idle sandbox costs, a parked guest, and the peak while one runs each seed snippet."""
    from declaw_wasm._local.parking import parking

    time.sleep(1.0)
    before, threads = rss_mib(), threading.active_count()
    idle = [Sandbox.create(timeout=600) for _ in range(20)]
    time.sleep(1.0)
    per_idle = (rss_mib() - before) / len(idle)
    base, parked_before = rss_mib(), parking.count()
    for s in idle if testing.is_warm(idle[0]) else ():  # only the warm image parks guests
        testing.park(s)
    parked = parking.count() - parked_before
    per_parked = (rss_mib() - base) / max(parked, 1)
    extra_threads = threading.active_count() - threads
    for s in idle:
        s.kill()
    print(f"\nIdle cost: a sandbox without a parked guest {per_idle:.2f} MiB RSS (20 created); "
          f"a parked guest {per_parked:.1f} MiB RSS and one thread ({parked} parked, "
          f"{extra_threads} threads more in all)")
    with Sandbox.create(timeout=600) as sbx:
        peaks = []
        for i, code in enumerate(seed_snippets()):
            sbx.files.write(f"/tmp/m_{i}.py", code)
            base, peak, done = rss_mib(), [0.0], threading.Event()
            sampler = threading.Thread(target=sample_peak, args=(peak, done))
            sampler.start()
            sbx.commands.run(f"python3 /tmp/m_{i}.py")
            done.set()
            sampler.join()
            peaks.append(max(peak[0], base) - base)
    print(f"peak extra RSS while a seed snippet runs: {', '.join(f'{p:.0f}' for p in peaks)} MiB")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--gap", type=float, default=0.2)
    args = parser.parse_args()
    repeat, gap = args.repeat, args.gap

    start = time.perf_counter()
    first = Sandbox.create()  # loads the runtime (compiled modules from the cache)
    path = "warm image" if testing.is_warm(first) else "cold (DECLAW_WASM_WARM_IMAGE=0)"
    first.kill()
    print(f"guest path: {path}; first Sandbox.create in this process (runtime load): "
          f"{(time.perf_counter() - start) * 1000:.0f} ms; native: a clean venv's python3 "
          f"{sys.version.split()[0]}, bash -c\n")

    print(HEADER)
    print1 = native(["-c", "print(1)"])

    def fresh(line: str) -> Callable[[], None]:
        def run() -> None:
            with Sandbox.create() as s:
                s.commands.run(line)
        return run

    for _ in range(3):  # standby sandboxes start on the second create of a template
        fresh("true")()
    print(row("`python3 -c 'print(1)'` on a new sandbox (create + run + kill), back to back",
              median_s(print1, repeat), median_s(fresh("python3 -c 'print(1)'"), repeat)))
    print(row(f"`python3 -c 'print(1)'` on a new sandbox, {gap:g} s apart",
              median_s(print1, repeat), after_gap(fresh("python3 -c 'print(1)'"), repeat, gap)))
    print(row(f"`echo hi` on a new sandbox vs `bash -c 'echo hi'`, {gap:g} s apart",
              median_s(bash("echo hi"), repeat), after_gap(fresh("echo hi"), repeat, gap)))
    with Sandbox.create(timeout=3600) as sbx:
        run = sbx.commands.run
        print(row("`python3 -c 'print(1)'` (sandbox up), back to back",
                  median_s(print1, repeat), median_s(lambda: run("python3 -c 'print(1)'"), repeat)))
        print(row(f"`python3 -c 'print(1)'` (sandbox up), {gap:g} s apart",
                  median_s(print1, repeat), after_gap(lambda: run("python3 -c 'print(1)'"), repeat, gap)))
        print(row(f"`echo hi` (sandbox up) vs `bash -c 'echo hi'`, {gap:g} s apart",
                  median_s(bash("echo hi"), repeat), after_gap(lambda: run("echo hi"), repeat, gap)))
        print(row(f"`python3 -c 'import pandas'`, {gap:g} s apart",
                  median_s(native(["-c", "import pandas"], ["pandas"]), repeat),
                  after_gap(lambda: run("python3 -c 'import pandas'"), repeat, gap)))

        def snippet(i: int) -> Callable[[], object]:
            return lambda: run(f"python3 /tmp/snip_{i}.py")

        with tempfile.TemporaryDirectory() as tmp:
            for i, code in enumerate(seed_snippets()):
                local = Path(tmp) / f"snip_{i}.py"
                local.write_text(code.replace("/tmp/chart.png", os.path.join(tmp, "chart.png")))
                sbx.files.write(f"/tmp/snip_{i}.py", code)
                label = ["sympy solve", "pandas groupby", "matplotlib savefig"][i]
                print(row(f"seed snippet {i} ({label})",
                          median_s(native([str(local)], SNIPPET_PACKAGES[i]), repeat),
                          after_gap(snippet(i), repeat, gap)))
    memory_figures(gap)


if __name__ == "__main__":
    main()
