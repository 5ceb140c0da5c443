"""Many idle sandboxes in one process: create latency, memory, threads, kill latency.

    python benchmarks/idle.py [--sandboxes 10000]

The project aims at 10 000 idle sandboxes in one process in <= 1 GiB with `Sandbox.create`
p99 <= 3 ms. An idle sandbox is a host folder and a few objects: no guest runs between commands
(parked guests are bounded per process, DECLAW_WASM_PARKED) and one timer thread serves every
sandbox's lifetime.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from pathlib import Path

import _tree  # noqa: E402,F401  -- PYTHONPATH's tree first (interleave.py), else this repository's


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sandboxes", type=int, default=10_000)
    n = parser.parse_args().sandboxes
    os.environ["DECLAW_WASM_MAX_SANDBOXES"] = str(n + 10)
    from declaw_wasm import Sandbox
    from declaw_wasm._local.parking import parking

    Sandbox.create().kill()  # the runtime loaded
    time.sleep(0.5)
    rss0, threads0 = rss_mib(), threading.active_count()
    created, lat = [], []
    for _ in range(n):
        start = time.perf_counter()
        created.append(Sandbox.create(timeout=3600))
        lat.append(time.perf_counter() - start)
    time.sleep(1.0)
    rss1, threads1 = rss_mib(), threading.active_count()
    sample = created[len(created) // 2]
    ran = sample.commands.run("echo alive").stdout.strip()
    kills = []
    for s in created:
        start = time.perf_counter()
        s.kill()
        kills.append(time.perf_counter() - start)
    from declaw_wasm._local.files import deleter

    start = time.perf_counter()
    deleter.wait(3600)  # the folders themselves go in the background
    deleted = time.perf_counter() - start
    print(f"| measure ({n} idle sandboxes in one process) | value |\n|---|---|")
    print(f"| `Sandbox.create` p50 / p99 / max | {statistics.median(lat) * 1000:.2f} / "
          f"{pct(lat, 0.99) * 1000:.2f} / {max(lat) * 1000:.1f} ms |")
    print(f"| RSS before → with all idle (MiB) | {rss0:.0f} → {rss1:.0f} "
          f"({(rss1 - rss0) * 1024 / n:.1f} KiB per sandbox) |")
    print(f"| threads before → with all idle | {threads0} → {threads1} |")
    print(f"| parked guests while idle | {parking.count()} |")
    print(f"| a command in one of them | {ran!r} |")
    print(f"| `kill` p50 / p99 / max | {statistics.median(kills) * 1000:.2f} / "
          f"{pct(kills, 0.99) * 1000:.2f} / {max(kills) * 1000:.1f} ms |")
    print(f"| the background deleter, done after the last kill | {deleted:.1f} s |")


if __name__ == "__main__":
    main()
