"""A first-ever `declaw-wasm warmup`: each run in a fresh, empty cache folder, the runtime wheel
already in pip's cache (the first run of the machine downloads it once; run with `--runs 1` first
if that is not so).

    python benchmarks/warmup.py [--runs N] [--cold] [--keep] [--root FOLDER]

(`PYTHONPATH=OTHER_CHECKOUT python benchmarks/warmup.py` times another checkout's warmup, for a
side-by-side on the same machine and load.)

Each run is `declaw-wasm warmup [--cold]` in a subprocess with `DECLAW_WASM_CACHE` set to a new
folder under `--root` (deleted afterwards unless `--keep`); the load average is read before and
after. Each step's wall time and CPU time come from the warmup's own progress lines ("...: done in
Ns (M CPU-s)"), so the figure can be judged step by step on a busy machine. Prints a Markdown
table per run and the median total (paste them into benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

# "...: done in 58s (45 CPU-s)"; older checkouts print no CPU time (run them with PYTHONPATH set to theirs)
STEP = re.compile(r"^declaw-wasm: (?P<what>.+?): (?:done|failed) in (?P<wall>\d+)s(?: \((?P<cpu>\d+) CPU-s\))?$")


@dataclass
class Run:
    total_s: float
    load_before: float
    load_after: float
    steps: list[tuple[str, float, float]] = field(default_factory=list)  # (step, wall s, CPU s)
    cpu_s: float = 0.0  # the warmup process's whole CPU time (children included)


def steps_of(stderr: str) -> list[tuple[str, float, float]]:
    """(step, wall seconds, CPU seconds) of each timed step in a warmup's progress output."""
    found = []
    for line in stderr.splitlines():
        match = STEP.match(line.strip())
        if match:
            found.append((match["what"], float(match["wall"]), float(match["cpu"] or "nan")))
    return found


def one_run(root: Path, cold: bool, keep: bool) -> Run:
    cache = Path(tempfile.mkdtemp(prefix="warmup-", dir=root))
    env = {**os.environ, "DECLAW_WASM_CACHE": str(cache)}
    args = [sys.executable, "-m", "declaw_wasm.cli", "warmup", *(["--cold"] if cold else [])]
    load_before = os.getloadavg()[0]
    before = os.times()
    start = time.monotonic()
    # run from the cache folder: `-m` puts the working directory first on sys.path, before PYTHONPATH
    done = subprocess.run(args, env=env, capture_output=True, text=True, cwd=cache)
    total = time.monotonic() - start
    after = os.times()
    load_after = os.getloadavg()[0]
    if not keep:
        shutil.rmtree(cache, ignore_errors=True)
    if done.returncode != 0:
        raise SystemExit(f"warmup failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    cpu = (after.children_user + after.children_system) - (before.children_user + before.children_system)
    return Run(total, load_before, load_after, steps_of(done.stderr), cpu)


def table(run: Run) -> str:
    lines = ["| step | wall s | CPU s |", "|---|---:|---:|"]
    lines += [f"| {what} | {wall:.0f} | {'-' if cpu != cpu else f'{cpu:.0f}'} |" for what, wall, cpu in run.steps]
    lines.append(f"| **total** (load {run.load_before:.1f} before, {run.load_after:.1f} after) "
                 f"| **{run.total_s:.0f}** | {run.cpu_s:.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--cold", action="store_true", help="warmup --cold (the plain module too)")
    parser.add_argument("--keep", action="store_true", help="keep each run's cache folder")
    parser.add_argument("--root", type=Path, default=Path(tempfile.gettempdir()),
                        help="where the fresh cache folders are made")
    args = parser.parse_args()
    args.root.mkdir(parents=True, exist_ok=True)
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, "
          f"warmup{' --cold' if args.cold else ''}")
    runs = []
    for number in range(1, args.runs + 1):
        run = one_run(args.root, args.cold, args.keep)
        runs.append(run)
        print(f"\nRun {number}:\n\n{table(run)}", flush=True)
    print(f"\nMedian of {len(runs)}: {statistics.median(r.total_s for r in runs):.0f} s "
          f"(loads {', '.join(f'{r.load_before:.1f}-{r.load_after:.1f}' for r in runs)})")


if __name__ == "__main__":
    main()
