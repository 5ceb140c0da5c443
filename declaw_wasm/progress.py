"""Progress on stderr for the slow one-time steps (download, unpack, compile).

A step's time is estimated from measured rates, not fixed constants: each kind of step has an
amount of CPU work (CPU-seconds per unit: per MB of wasm compiled, say), as measured by the last
such step on this machine (`Rates`, a small JSON file in the cache) or, the first time, a default
scaled by how fast this machine ran the steps measured so far. While the step runs, the time left
is the CPU work still to do over the CPU rate the process is getting now (its CPU-seconds per
second over the last few seconds), so a machine busy with other work shows a longer, true estimate
rather than a fixed "about 100s".
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional, TextIO

# CPU-seconds per unit of each kind of step on the reference machine (2 cores, busy with another
# job; benchmarks/README.md, `warmup.py`, 2026-12-02): what a first-ever warmup assumes before it
# has measured anything here.
DEFAULT_CPU_PER_UNIT = {
    "compile": 1.1,          # per MB of code, Cranelift optimising for speed: the plain module
    "compile-fuel": 1.6,     # the same with fuel checks
    "compile-warm": 1.3,     # the warm module (the same code, and its memory image)
    "compile-warm-fuel": 1.75,
    "compile-fast": 0.62,    # per MB of code, the warm image's builder (no optimisation, single-pass allocator)
    "warm-up": 6.0,          # the warm-up's imports in a live guest (one unit)
    "site": 2.0,             # byte-compiling the guest site in a guest (one unit)
    "bundle": 22.0,          # installing and byte-compiling the packages bundle (one unit)
}
# How many cores a step keeps busy at most (Wasmtime compiles functions in parallel; a guest runs
# on one thread).
PARALLELISM = {"compile": 8.0, "compile-fuel": 8.0, "compile-warm": 8.0, "compile-warm-fuel": 8.0,
               "compile-fast": 8.0}  # other steps: 1
RATE_WINDOW_S = 10.0
LINE_EVERY_S = 15.0  # a progress line this often when stderr is not a terminal
MAX_RATES_BYTES = 4096
# Bounds on what a rates file may say (it is in a cache someone else may write): far outside any real machine.
CPU_PER_UNIT_BOUNDS = (1e-4, 1e4)


@dataclass(frozen=True)
class Work:
    """What a step has to do: `amount` units of `kind` (MB of wasm for a compile, 1 otherwise)."""

    kind: str
    amount: float = 1.0


class Rates:
    """CPU-seconds per unit of each kind of step on this machine: measured ones (kept in `path`
    when given, read back by the next process), else defaults scaled by this machine's speed
    relative to the reference, as measured so far. Reading is strict and bounded (a damaged or
    hostile file is ignored); writing is best effort (a read-only cache keeps no rates)."""

    def __init__(self, path: Optional[Path] = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._measured: dict[str, float] = self._read()
        self._speed: list[float] = []  # measured / default, for the kinds measured by this process

    def _read(self) -> dict[str, float]:
        if self.path is None:
            return {}
        try:
            with open(self.path, "rb") as f:
                data = json.loads(f.read(MAX_RATES_BYTES + 1)[:MAX_RATES_BYTES + 1])
        except (OSError, ValueError):
            return {}
        return parse_rates(data)

    def cpu_seconds(self, work: Work) -> float:
        """The CPU-seconds `work` should take here."""
        with self._lock:
            per_unit = self._measured.get(work.kind)
            if per_unit is None:
                per_unit = DEFAULT_CPU_PER_UNIT.get(work.kind, 10.0) * self.speed()
            return per_unit * work.amount

    def speed(self) -> float:
        """This machine's CPU time for a step over the reference machine's (1.0 when nothing is measured)."""
        factors = self._speed or [self._measured[k] / DEFAULT_CPU_PER_UNIT[k]
                                  for k in self._measured if k in DEFAULT_CPU_PER_UNIT]
        return sorted(factors)[len(factors) // 2] if factors else 1.0

    def record(self, work: Work, cpu_s: float) -> None:
        """A finished step took `cpu_s` CPU-seconds."""
        if work.amount <= 0 or cpu_s <= 0:
            return
        per_unit = cpu_s / work.amount
        low, high = CPU_PER_UNIT_BOUNDS
        if not low <= per_unit <= high:
            return
        with self._lock:
            self._measured[work.kind] = per_unit
            if work.kind in DEFAULT_CPU_PER_UNIT:
                self._speed.append(per_unit / DEFAULT_CPU_PER_UNIT[work.kind])
            snapshot = dict(self._measured)
        if self.path is not None:
            _write_best_effort(self.path, json.dumps(snapshot, sort_keys=True).encode())


def parse_rates(data: object) -> dict[str, float]:
    """The valid entries of a rates file's JSON: known kinds with a finite number in bounds."""
    if not isinstance(data, dict):
        return {}
    low, high = CPU_PER_UNIT_BOUNDS
    return {kind: float(value) for kind, value in data.items()
            if kind in DEFAULT_CPU_PER_UNIT and isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and low <= value <= high}


def _write_best_effort(path: Path, data: bytes) -> None:
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except OSError:
        pass
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def free_cores(cpu_count: Optional[int] = None, load: Optional[float] = None) -> float:
    """Cores not busy with other work now, at least half of one (from the 1-minute load average)."""
    count = cpu_count if cpu_count is not None else (os.cpu_count() or 1)
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:
            load = 0.0
    return max(0.5, count - load)


class Estimate:
    """The time left of one step: its expected CPU work over the CPU rate measured in the last
    `RATE_WINDOW_S` (before any measurement: the step's parallelism, capped by the free cores)."""

    def __init__(self, cpu_expected: float, cores: float) -> None:
        self.cpu_expected = cpu_expected
        self.cores = cores  # the CPU rate assumed until measured
        self._samples: deque[tuple[float, float]] = deque()

    def sample(self, wall: float, cpu: float) -> None:
        """The step's elapsed wall time and the CPU-seconds used since it started."""
        self._samples.append((wall, cpu))
        while len(self._samples) > 2 and wall - self._samples[1][0] >= RATE_WINDOW_S:
            self._samples.popleft()

    def rate(self) -> float:
        """CPU-seconds per second lately (the assumed cores until two samples a second apart)."""
        if len(self._samples) >= 2:
            (w0, c0), (w1, c1) = self._samples[0], self._samples[-1]
            if w1 - w0 >= 1.0:
                return max((c1 - c0) / (w1 - w0), 0.05)
        return self.cores

    def cpu_used(self) -> float:
        return self._samples[-1][1] if self._samples else 0.0

    def total_s(self) -> float:
        """The step's whole expected wall time, from what is known now."""
        wall = self._samples[-1][0] if self._samples else 0.0
        return wall + self.left_s(self.cpu_used())

    def left_s(self, cpu_used: float) -> float:
        return max(self.cpu_expected - cpu_used, 0.0) / self.rate()


class Progress:
    """Prints one-line status messages, and a ticking timer around long blocking calls."""

    def __init__(self, stream: TextIO | None = None, quiet: bool = False, rates: Optional[Rates] = None,
                 clock: Callable[[], float] = time.monotonic,
                 cpu_clock: Callable[[], float] = time.process_time) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.rates = rates if rates is not None else Rates()
        self.clock = clock
        self.cpu_clock = cpu_clock  # the whole process's CPU time (Wasmtime's compile threads included)

    def say(self, message: str) -> None:
        if not self.quiet:
            print(f"declaw-wasm: {message}", file=self.stream, flush=True)

    def estimate(self, work: Work, load: Optional[float] = None) -> Estimate:
        cores = min(PARALLELISM.get(work.kind, 1.0), free_cores(load=load))
        return Estimate(self.rates.cpu_seconds(work), cores)

    @contextmanager
    def timed(self, what: str, work: Work) -> Iterator[None]:
        """Show `what` with elapsed seconds and the time left while the body runs (it may hold
        no GIL-free hook); record the CPU time it took in `rates`."""
        estimate = self.estimate(work)
        start, cpu_start = self.clock(), self.cpu_clock()
        done = threading.Event()
        tty = getattr(self.stream, "isatty", lambda: False)()

        def tick() -> None:
            next_line = LINE_EVERY_S
            while not done.wait(1.0):
                elapsed = self.clock() - start
                estimate.sample(elapsed, self.cpu_clock() - cpu_start)
                if tty:
                    print("\r" + progress_line(what, elapsed, estimate), end="", file=self.stream, flush=True)
                elif elapsed >= next_line:
                    next_line += LINE_EVERY_S
                    print(progress_line(what, elapsed, estimate), file=self.stream, flush=True)

        if not self.quiet:
            self.say(f"{what} (one time, about {estimate.total_s():.0f}s here: "
                     f"{estimate.cpu_expected:.0f} CPU-s on {estimate.cores:.1f} free cores)")
        ticker = threading.Thread(target=tick, name="declaw-progress", daemon=True)
        if not self.quiet:
            ticker.start()
        ok = False
        try:
            yield
            ok = True
        finally:
            done.set()
            if not self.quiet:
                ticker.join()
                if tty:
                    print(file=self.stream)
            wall, cpu = self.clock() - start, self.cpu_clock() - cpu_start
            if ok:
                self.rates.record(work, cpu)
            self.say(f"{what}: {'done' if ok else 'failed'} in {wall:.0f}s ({cpu:.0f} CPU-s)")


def progress_line(what: str, elapsed: float, estimate: Estimate) -> str:
    """`what [####      ] 40s, about 35s left (1.8 cores)`."""
    left = estimate.left_s(estimate.cpu_used())
    total = elapsed + left
    frac = min(elapsed / total, 0.99) if total > 0 else 0.99
    bar = "#" * int(frac * 20)
    tail = (f"about {left:.0f}s left" if left >= 1 else
            f"longer than the {estimate.cpu_expected:.0f} CPU-s expected, still going")
    return f"declaw-wasm: {what} [{bar:<20}] {elapsed:4.0f}s, {tail} ({estimate.rate():.1f} cores)"
