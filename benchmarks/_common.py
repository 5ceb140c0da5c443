"""Shared helpers for the benchmarks: timing and native-CPython baselines side by side."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from typing import Callable


def median_s(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def native(args: list[str]) -> Callable[[], None]:
    """A native CPython subprocess run of `python3 ARGS` (the same interpreter as the host)."""

    def run() -> None:
        subprocess.run([sys.executable, *args], check=True, capture_output=True)

    return run


def row(label: str, native_s: float, sandbox_s: float) -> str:
    return f"| {label} | {native_s * 1000:.0f} ms | {sandbox_s * 1000:.0f} ms | {sandbox_s / native_s:.2f}× |"


HEADER = "| work | native CPython | declaw-wasm | ratio |\n|---|---|---|---|"
