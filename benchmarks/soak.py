"""Soak: mixed work from a few threads for a while; does the host's memory keep growing?

    python benchmarks/soak.py [--seconds 600] [--threads 3] [--max-growth-mib 200]

Each thread keeps a sandbox and loops over a fixed mix: `python3 -c` commands, pipelines
(`tr`, `awk`), `run_code` cells (a counter that proves the context's state, and a small pandas
groupby), file writes and reads (checked through the API and through `sha256sum` in the guest),
create/run/kill churn of short-lived sandboxes, and now and then a timeout (a `sleep` command,
or a busy cell, which restarts the context). Each thread also replaces its own sandbox every 50
steps. Every output is checked exactly.

Host RSS is sampled every 5 s; the script prints RSS at the end of each minute and the growth
from the end of minute 1 to the end of the run (for runs shorter than two minutes, from the
middle of the run), and exits non-zero if that growth exceeds --max-growth-mib, if any
operation failed, or if a sandbox's host folder or a "declaw-guest"/"declaw-reap" thread
outlives the cleanup. Everything created is killed at the end, whatever happens.
"""

from __future__ import annotations

import argparse
import faulthandler
import hashlib
import math
import secrets
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import _tree  # noqa: E402,F401  -- PYTHONPATH's tree first (interleave.py), else this repository's

from load import (leaked_folders, ms, pct, rss_mib, settle, status_kib,  # noqa: E402
                  wait_declaw_threads_gone)

from declaw_wasm import testing  # noqa: E402
from declaw_wasm import Sandbox, TimeoutException  # noqa: E402

SAMPLE_EVERY_S = 5.0
OP_TIMEOUT = 60
RESTARTED = "[declaw-wasm] this context was restarted"
COUNTER_CELL = "counter = counter + 1 if 'counter' in dir() else 1; print('{token}', counter)"
PANDAS_CELL = ("import pandas as pd\n"
               "df = pd.DataFrame({'g': [i % 3 for i in range(300)], 'v': range(300)})\n"
               "print('{token}', df.groupby('g')['v'].sum().tolist())")
PANDAS_OUT = "[14850, 14950, 15050]"
# One step of a thread: these in turn (a timeout replaces every 25th step, a sandbox swap every 50th).
MIX = ["command", "cell", "pipeline", "files", "cell", "pandas", "awk", "cell", "churn", "pipeline",
       "cell", "command"]


class CheckFailed(Exception):
    pass


def expect(actual: object, expected: object, what: str) -> None:
    if actual != expected:
        raise CheckFailed(f"{what}: expected {expected!r}, got {actual!r}")


@dataclass
class Stats:
    """Shared by the threads: latencies and failures per kind of operation."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    times: dict[str, list[float]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    failed: dict[str, int] = field(default_factory=dict)
    ops: int = 0
    created: int = 0
    live: set = field(default_factory=set)  # sandboxes not yet killed
    bases: list[Path] = field(default_factory=list)  # every sandbox's host folder

    def record(self, kind: str, seconds: float, error: Optional[str]) -> None:
        with self.lock:
            self.ops += 1
            self.times.setdefault(kind, []).append(seconds)
            if error is not None:
                self.failed[kind] = self.failed.get(kind, 0) + 1
                self.failures.append(f"{kind}: {error}")

    def new_sandbox(self, lifetime: float) -> Sandbox:
        sbx = Sandbox.create(timeout=lifetime)
        with self.lock:
            self.created += 1
            self.live.add(sbx)
            self.bases.append(Path(testing.host_folder(sbx)))
        return sbx

    def kill(self, sbx: Sandbox) -> None:
        try:
            sbx.kill()
        finally:
            with self.lock:
                self.live.discard(sbx)


class Worker:
    """One thread's loop over the mix, on a sandbox of its own."""

    def __init__(self, no: int, stats: Stats, stop: threading.Event, lifetime: float) -> None:
        self.no = no
        self.stats = stats
        self.stop = stop
        self.lifetime = lifetime
        self.sbx: Optional[Sandbox] = None
        self.counter = 0  # the counter cell's value in the current context
        self.restarted = False  # the next cell's stderr says the context was restarted
        self.step_no = 0
        self.thread = threading.Thread(target=self.run, name=f"soak-worker-{no}", daemon=True)

    def token(self) -> str:
        return f"w{self.no}s{self.step_no}{secrets.token_hex(4)}"

    def fresh_sandbox(self) -> None:
        if self.sbx is not None:
            self.stats.kill(self.sbx)
            self.sbx = None
        self.sbx = self.stats.new_sandbox(self.lifetime)
        self.counter, self.restarted = 0, False

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.step_no += 1
                if self.sbx is None or self.step_no % 50 == 0:
                    self.timed("swap sandbox", self.fresh_sandbox)
                if self.step_no % 25 == 0:
                    kind = "timeout (command)" if self.step_no % 50 else "timeout (cell)"
                else:
                    kind = MIX[self.step_no % len(MIX)]
                self.timed(kind, OPS[kind].__get__(self))
        finally:
            if self.sbx is not None:
                self.stats.kill(self.sbx)

    def timed(self, kind: str, op: Callable[[], None]) -> None:
        error = None
        start = time.perf_counter()
        try:
            op()
        except CheckFailed as exc:
            error = str(exc)
        except Exception as exc:  # noqa: BLE001 - reported, and the thread starts afresh
            error = f"{type(exc).__name__}: {exc}"
            if self.sbx is not None and not self.sbx.is_running():
                self.sbx = None
        self.stats.record(kind, time.perf_counter() - start, error)

    # -- the operations ---------------------------------------------------------------------------
    def run_command(self, cmd: str, stdout: str) -> None:
        assert self.sbx is not None
        r = self.sbx.commands.run(cmd, timeout=OP_TIMEOUT)
        expect((r.stdout, r.stderr, r.exit_code, r.error), (stdout, "", 0, None), cmd)

    def command(self) -> None:
        token = self.token()
        self.run_command(f"python3 -c 'print(\"{token}\")'", token + "\n")

    def pipeline(self) -> None:
        token = self.token()
        self.run_command(f"echo {token} | tr a-z A-Z | cut -c1-200", token.upper() + "\n")

    def awk(self) -> None:
        self.run_command("seq 1 500 | awk '{s += $1} END {print s}' | sort -n", "125250\n")

    def run_cell(self, code: str, stdout: str) -> None:
        assert self.sbx is not None
        execution = self.sbx.run_code(code, timeout=OP_TIMEOUT)
        stderr = "".join(execution.logs.stderr)
        if self.restarted:
            self.restarted = False
            if not stderr.startswith(RESTARTED):
                raise CheckFailed(f"the cell after a timeout: stderr {stderr!r} does not say restarted")
            stderr = stderr.split("\n", 1)[1]
        expect(("".join(execution.logs.stdout), stderr, execution.error), (stdout, "", None), code)

    def cell(self) -> None:
        token = self.token()
        self.counter += 1
        self.run_cell(COUNTER_CELL.format(token=token), f"{token} {self.counter}\n")

    def pandas(self) -> None:
        token = self.token()
        self.run_cell(PANDAS_CELL.replace("{token}", token), f"{token} {PANDAS_OUT}\n")

    def files(self) -> None:
        assert self.sbx is not None
        path = f"/tmp/soak_{self.step_no % 4}.txt"
        text = (self.token() + "\n") * 2000  # ~36 KB
        self.sbx.files.write(path, text)
        expect(self.sbx.files.read(path), text, f"read back {path}")
        digest = hashlib.sha256(text.encode()).hexdigest()
        self.run_command(f"sha256sum {path}", f"{digest}  {path}\n")

    def churn(self) -> None:
        sbx = self.stats.new_sandbox(120)
        try:
            token = self.token()
            r = sbx.commands.run(f"echo {token}", timeout=OP_TIMEOUT)
            expect((r.stdout, r.exit_code, r.error), (token + "\n", 0, None), "churn command")
            execution = sbx.run_code(f"print('{token}')", timeout=OP_TIMEOUT)
            expect("".join(execution.logs.stdout), token + "\n", "churn cell")
        finally:
            base = Path(testing.host_folder(sbx))
            self.stats.kill(sbx)
        if base.exists():
            raise CheckFailed(f"churn: host folder {base} left after kill")

    def timeout_command(self) -> None:
        assert self.sbx is not None
        start = time.perf_counter()
        try:
            self.sbx.commands.run("sleep 30", timeout=0.5)
        except TimeoutException:
            pass
        else:
            raise CheckFailed("`sleep 30` with timeout=0.5 did not time out")
        if time.perf_counter() - start > 10:
            raise CheckFailed(f"`sleep 30` timed out after {time.perf_counter() - start:.1f} s, not 0.5 s")

    def timeout_cell(self) -> None:
        assert self.sbx is not None
        try:
            self.sbx.run_code("while True: pass", timeout=0.5)
        except TimeoutException:
            self.counter, self.restarted = 0, True  # the context starts afresh
        else:
            raise CheckFailed("a busy cell with timeout=0.5 did not time out")


OPS: dict[str, Callable[[Worker], None]] = {
    "command": Worker.command, "pipeline": Worker.pipeline, "awk": Worker.awk,
    "cell": Worker.cell, "pandas": Worker.pandas, "files": Worker.files, "churn": Worker.churn,
    "timeout (command)": Worker.timeout_command, "timeout (cell)": Worker.timeout_cell,
}


@dataclass
class Sample:
    t: float
    rss: float
    ops: int
    live: int
    threads: int


def print_minutes(samples: list[Sample], seconds: float) -> None:
    """RSS over time: a row per minute of the run."""
    print("| minute | RSS at its end (MiB) | min–max in the minute (MiB) | operations so far | live sandboxes "
          "| threads |")
    print("|---|---|---|---|---|---|")
    minutes = max(1, math.ceil(min(samples[-1].t, seconds) / 60 - 1e-6))
    for m in range(1, minutes + 1):  # the last minute takes the final sample (a little past its end)
        inside = [s for s in samples
                  if 60 * (m - 1) < s.t and (s.t <= 60 * m + 0.5 or m == minutes)] or [samples[-1]]
        end = inside[-1]
        print(f"| {m} | {end.rss:.0f} | {min(s.rss for s in inside):.0f}–{max(s.rss for s in inside):.0f} "
              f"| {end.ops} | {end.live} | {end.threads} |")


def print_operations(stats: Stats) -> None:
    print("\n| operation | count | failed | p50 | p99 |\n|---|---|---|---|---|")
    for kind in ["command", "pipeline", "awk", "cell", "pandas", "files", "churn", "swap sandbox",
                 "timeout (command)", "timeout (cell)"]:
        times = stats.times.get(kind, [])
        print(f"| {kind} | {len(times)} | {stats.failed.get(kind, 0)} | {ms(pct(times, 0.5))} "
              f"| {ms(pct(times, 0.99))} |")


def stop_workers(workers: list[Worker], stats: Stats, stop: threading.Event) -> list[str]:
    """Stops the workers and kills what they left alive; the names of those still running."""
    hung: list[str] = []
    stop.set()
    for w in workers:
        w.thread.join(OP_TIMEOUT + 60)
        if w.thread.is_alive():
            hung.append(w.thread.name)
    with stats.lock:
        leftover = list(stats.live)
    for sbx in leftover:  # only if a thread hung or died: kill whatever is still alive
        stats.kill(sbx)
    return hung


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--threads", type=int, default=3)
    parser.add_argument("--max-growth-mib", type=float, default=200)
    args = parser.parse_args()
    # A hang is a finding: dump every thread's stack and stop rather than wait forever.
    faulthandler.dump_traceback_later(args.seconds + 900, exit=True)

    start = time.perf_counter()
    with Sandbox.create() as first:  # loads the runtime
        first.commands.run("echo warm", timeout=OP_TIMEOUT)
        warm = testing.is_warm(first)
    print(f"guest path: {'warm image' if warm else 'cold (DECLAW_WASM_WARM_IMAGE=0)'}; runtime load: "
          f"{(time.perf_counter() - start) * 1000:.0f} ms; {args.threads} threads for {args.seconds:g} s\n")
    settle()
    rss_start = rss_mib()

    stats = Stats()
    stop = threading.Event()
    workers = [Worker(no, stats, stop, args.seconds + 900) for no in range(args.threads)]
    samples: list[Sample] = []
    t0 = time.monotonic()

    def sample() -> None:
        with stats.lock:
            ops, live = stats.ops, len(stats.live)
        samples.append(Sample(time.monotonic() - t0, rss_mib(), ops, live, threading.active_count()))

    try:
        for w in workers:
            w.thread.start()
        next_sample = SAMPLE_EVERY_S
        while True:
            now = time.monotonic() - t0
            if now >= args.seconds:
                break
            time.sleep(max(0.0, min(next_sample, args.seconds) - now))
            if time.monotonic() - t0 >= next_sample - 0.01:
                sample()
                next_sample += SAMPLE_EVERY_S
        sample()
    finally:
        hung = stop_workers(workers, stats, stop)
    elapsed = time.monotonic() - t0
    if hung:
        faulthandler.dump_traceback(all_threads=True)
    left_threads = wait_declaw_threads_gone(5.0)
    leaked = leaked_folders(stats.bases)
    settle()
    rss_end_clean = rss_mib()

    print_minutes(samples, args.seconds)
    base_t = 60.0 if args.seconds >= 120 else args.seconds / 2
    baseline = [s for s in samples if s.t <= base_t + 0.5][-1] if samples[0].t <= base_t + 0.5 else samples[0]
    final = samples[-1]
    growth = final.rss - baseline.rss
    peak = max(s.rss for s in samples)

    print("\n| measure | value |\n|---|---|")
    print(f"| run | {elapsed:.0f} s, {args.threads} threads, {stats.ops} operations "
          f"({stats.ops / elapsed:.1f}/s), {stats.created} sandboxes created |")
    print(f"| RSS before the run → peak → end of run → after cleanup (MiB) | {rss_start:.0f} → {peak:.0f} "
          f"→ {final.rss:.0f} → {rss_end_clean:.0f} |")
    print(f"| growth from t={baseline.t:.0f} s to t={final.t:.0f} s | {growth:+.0f} MiB "
          f"(bound {args.max_growth_mib:g} MiB: {'ok' if growth <= args.max_growth_mib else 'EXCEEDED'}) |")
    print(f"| RssAnon / RssFile after cleanup (MiB) | {status_kib('RssAnon') / 1024:.0f} / "
          f"{status_kib('RssFile') / 1024:.0f} |")
    print(f"| failed operations | {len(stats.failures)} |")
    print(f"| host folders left after cleanup | {len(leaked)} of {len(stats.bases)} |")
    print(f"| declaw-guest / declaw-reap threads left after 5 s | {len(left_threads)} |")

    print_operations(stats)

    problems = list(stats.failures)
    if growth > args.max_growth_mib:
        problems.append(f"RSS grew {growth:.0f} MiB from t={baseline.t:.0f} s to the end "
                        f"(bound {args.max_growth_mib:g} MiB)")
    if hung:
        problems.append(f"threads still running {OP_TIMEOUT + 60} s after stop: {hung}")
    if leaked:
        problems.append(f"{len(leaked)} host folders left after cleanup: {[str(p) for p in leaked[:5]]}")
    if left_threads:
        problems.append(f"{len(left_threads)} declaw threads alive 5 s after cleanup: {left_threads[:10]}")
    faulthandler.cancel_dump_traceback_later()
    if problems:
        print(f"\nFAILED: {len(problems)} problem(s)", file=sys.stderr)
        for line in problems[:30]:
            print(f"  {line}", file=sys.stderr)
        sys.exit(1)
    print("\nall checks passed")


if __name__ == "__main__":
    main()
