"""Shared helpers for the benchmarks: timing and native-CPython baselines side by side."""

from __future__ import annotations

import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence


def median_s(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def clean_python(packages: Sequence[str] = ()) -> Path:
    """The `python3` of a clean venv holding only `packages` (no pip, nothing else), made once
    from this machine's base interpreter and kept in the temporary folder. A development venv
    (editable installs, .pth files, dozens of packages) starts several times slower, so it is no
    baseline (issue 20 found a 62 ms "native" start that a clean venv does in 11 ms)."""
    base = Path(getattr(sys, "_base_executable", sys.executable))
    key = hashlib.sha256("|".join([str(base), sys.version, *sorted(packages)]).encode()).hexdigest()[:12]
    folder = Path(tempfile.gettempdir()) / f"declaw-wasm-bench-venv-{key}"
    python = folder / "bin" / "python3"
    if (folder / "READY").exists():
        return python
    staging = Path(tempfile.mkdtemp(prefix=f".declaw-wasm-bench-venv-{key}-"))
    try:
        subprocess.run([str(base), "-m", "venv", "--without-pip", str(staging)], check=True)
        if packages:
            subprocess.run([sys.executable, "-m", "pip", "--python", str(staging / "bin" / "python3"),
                            "install", "-q", *packages], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        (staging / "READY").write_text(" ".join(packages))
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(staging, folder)  # bin/python3 finds its venv through pyvenv.cfg, wherever it is
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return python


def native(args: list[str], packages: Sequence[str] = ()) -> Callable[[], None]:
    """A native CPython subprocess run of `python3 ARGS`, from a clean venv with `packages`."""
    python = str(clean_python(packages))

    def run() -> None:
        subprocess.run([python, *args], check=True, capture_output=True)

    return run


def after_gap(fn: Callable[[], object], repeat: int, gap: float) -> float:
    """Median of `fn` with `gap` seconds of quiet before each call (not timed): commands as an
    agent sends them, an LLM round trip apart, which lets a sandbox park its next guest."""
    times = []
    for _ in range(repeat):
        time.sleep(gap)
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def row(label: str, native_s: float, sandbox_s: float) -> str:
    return f"| {label} | {native_s * 1000:.0f} ms | {sandbox_s * 1000:.0f} ms | {sandbox_s / native_s:.2f}× |"


HEADER = "| work | native CPython | declaw-wasm | ratio |\n|---|---|---|---|"
