"""Load: N sandboxes × M operations at once, half driven from threads and half from asyncio.

    python benchmarks/load.py [--sandboxes N] [--ops M]

N/2 sandboxes are each driven by a worker of a ThreadPoolExecutor (`Sandbox`, one worker per
sandbox); the other N/2 are `AsyncSandbox`es driven by coroutines in one event loop
(`asyncio.gather`), both halves at the same time. Each sandbox runs M operations, alternating a
command line (`python3 -c 'print("TOKEN")'`, or the pipeline `echo TOKEN | tr a-z A-Z`) and a
`run_code` cell (`counter = counter + 1 if 'counter' in dir() else 1; print('TOKEN', counter)`).
Every operation's output is checked exactly: a token unique to the sandbox and the operation
proves that no output is lost, mixed between sandboxes or truncated; the counter proves that
the context kept its state.

After every sandbox is killed: no host folder (`fs.base`) may remain and no "declaw-guest" or
"declaw-reap-*" thread may outlive a 5 s grace period. Before the load, the memory an idle
sandbox costs (50 created, no guest running) and an idle code context (one cell in each of 20
sandboxes) are measured as RSS deltas.

Prints Markdown tables (paste them into benchmarks/README.md); exits non-zero if a check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import re
import secrets
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import _tree  # noqa: E402,F401  -- PYTHONPATH's tree first (interleave.py), else this repository's

from declaw_wasm import testing  # noqa: E402
from declaw_wasm import AsyncSandbox, Sandbox  # noqa: E402

SANDBOX_TIMEOUT = 3600  # lifetime: longer than any run of this script
OP_TIMEOUT = 120  # per command / cell: generous, the machine is shared
TOKEN_RE = re.compile(r"s\d{3,}o\d{3,}[0-9a-f]{8}", re.IGNORECASE)


# -- process memory and threads (shared with soak.py) --------------------------------------------
def status_kib(field_name: str) -> int:
    """A field of /proc/self/status in KiB (VmRSS, VmHWM, RssAnon, RssFile, Threads...)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1])
    raise KeyError(field_name)


def rss_mib() -> float:
    return status_kib("VmRSS") / 1024


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux ≥ 4.0); False where /proc does not allow it."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def settle() -> None:
    """Collect garbage and give freed guests' memory a moment to be unmapped."""
    gc.collect()
    time.sleep(0.5)
    gc.collect()


class RssSampler:
    """Samples VmRSS in a thread; `peak` is the highest seen, `samples` the (t, MiB) series."""

    def __init__(self, interval: float = 0.02, keep: bool = False) -> None:
        self.interval = interval
        self.keep = keep
        self.peak = rss_mib()
        self.samples: list[tuple[float, float]] = []
        self.start_time = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-rss-sampler", daemon=True)

    def __enter__(self) -> "RssSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def sample(self) -> float:
        value = rss_mib()
        self.peak = max(self.peak, value)
        if self.keep:
            self.samples.append((time.monotonic() - self.start_time, value))
        return value

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()


def declaw_threads() -> list[str]:
    return [t.name for t in threading.enumerate()
            if t.name == "declaw-guest" or t.name.startswith("declaw-reap")]


def wait_declaw_threads_gone(grace_s: float = 5.0) -> list[str]:
    """The declaw guest/reaper threads still alive after up to `grace_s` seconds."""
    deadline = time.monotonic() + grace_s
    while True:
        left = declaw_threads()
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)


def leaked_folders(bases: list[Path]) -> list[Path]:
    return [b for b in bases if b.exists()]


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds >= 0.1 else f"{seconds * 1000:.1f} ms"


# -- the operations --------------------------------------------------------------------------------
COUNTER_CELL = "counter = counter + 1 if 'counter' in dir() else 1; print('{token}', counter)"


def new_token(sandbox_no: int, op_no: int) -> str:
    return f"s{sandbox_no:03d}o{op_no:03d}{secrets.token_hex(4)}"


def command_for(token: str, op_no: int) -> tuple[str, str]:
    """(command line, its exact expected stdout): python3 -c and a pipeline, in turn."""
    if (op_no // 2) % 2 == 0:
        return f"python3 -c 'print(\"{token}\")'", token + "\n"
    return f"echo {token} | tr a-z A-Z", token.upper() + "\n"


def classify(expected: str, actual: str, token: str) -> str:
    """How an output differs from the expected one: lost, mixed, truncated or wrong."""
    if actual == "":
        return "lost"
    if any(t.lower() != token.lower() for t in TOKEN_RE.findall(actual)):
        return "mixed"
    if expected.startswith(actual):
        return "truncated"
    return "wrong"


@dataclass
class Failure:
    sandbox: int
    op: int
    kind: str  # lost, mixed, truncated, wrong, error, exception
    detail: str

    def __str__(self) -> str:
        return f"sandbox {self.sandbox} op {self.op}: {self.kind}: {self.detail}"


@dataclass
class SandboxRun:
    """What one sandbox's driver measured."""

    sandbox: int
    driver: str  # "threads" or "asyncio"
    base: Optional[Path] = None
    create_s: float = 0.0
    kill_s: float = 0.0
    command_s: list[float] = field(default_factory=list)
    cell_s: list[float] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    ops_done: int = 0


def check_command(run: SandboxRun, op_no: int, token: str, expected: str, result: Any) -> None:
    if result.stdout != expected:
        run.failures.append(Failure(run.sandbox, op_no, classify(expected, result.stdout, token),
                                    f"expected {expected!r}, got {result.stdout!r}"))
    elif result.exit_code != 0 or result.stderr or result.error:
        run.failures.append(Failure(run.sandbox, op_no, "error",
                                    f"exit {result.exit_code}, stderr {result.stderr!r}, error {result.error!r}"))


def check_cell(run: SandboxRun, op_no: int, token: str, count: int, execution: Any) -> None:
    expected = f"{token} {count}\n"
    stdout = "".join(execution.logs.stdout)
    if stdout != expected:
        run.failures.append(Failure(run.sandbox, op_no, classify(expected, stdout, token),
                                    f"expected {expected!r}, got {stdout!r}"))
    elif execution.error is not None or execution.logs.stderr:
        run.failures.append(Failure(run.sandbox, op_no, "error",
                                    f"error {execution.error!r}, stderr {execution.logs.stderr!r}"))


def drive_sync(sandbox_no: int, ops: int, created: list[Any]) -> SandboxRun:
    """One sandbox from a worker thread: create, M operations, kill."""
    run = SandboxRun(sandbox_no, "threads")
    start = time.perf_counter()
    sbx = Sandbox.create(timeout=SANDBOX_TIMEOUT)
    run.create_s = time.perf_counter() - start
    created.append(sbx)
    run.base = Path(testing.host_folder(sbx))
    cells = 0
    try:
        for op_no in range(ops):
            token = new_token(sandbox_no, op_no)
            try:
                if op_no % 2 == 0:
                    cmd, expected = command_for(token, op_no)
                    start = time.perf_counter()
                    result = sbx.commands.run(cmd, timeout=OP_TIMEOUT)
                    run.command_s.append(time.perf_counter() - start)
                    check_command(run, op_no, token, expected, result)
                else:
                    cells += 1
                    start = time.perf_counter()
                    execution = sbx.run_code(COUNTER_CELL.format(token=token), timeout=OP_TIMEOUT)
                    run.cell_s.append(time.perf_counter() - start)
                    check_cell(run, op_no, token, cells, execution)
            except Exception as exc:  # noqa: BLE001 - every failure is reported, none stops the run
                run.failures.append(Failure(sandbox_no, op_no, "exception", f"{type(exc).__name__}: {exc}"))
            run.ops_done += 1
    finally:
        start = time.perf_counter()
        sbx.kill()
        run.kill_s = time.perf_counter() - start
    return run


async def drive_async(sandbox_no: int, ops: int, created: list[Any]) -> SandboxRun:
    """One sandbox from a coroutine: the same as drive_sync, through AsyncSandbox."""
    run = SandboxRun(sandbox_no, "asyncio")
    start = time.perf_counter()
    sbx = await AsyncSandbox.create(timeout=SANDBOX_TIMEOUT)
    run.create_s = time.perf_counter() - start
    created.append(sbx)
    run.base = Path(testing.host_folder(sbx))
    cells = 0
    try:
        for op_no in range(ops):
            token = new_token(sandbox_no, op_no)
            try:
                if op_no % 2 == 0:
                    cmd, expected = command_for(token, op_no)
                    start = time.perf_counter()
                    result = await sbx.commands.run(cmd, timeout=OP_TIMEOUT)
                    run.command_s.append(time.perf_counter() - start)
                    check_command(run, op_no, token, expected, result)
                else:
                    cells += 1
                    start = time.perf_counter()
                    execution = await sbx.run_code(COUNTER_CELL.format(token=token), timeout=OP_TIMEOUT)
                    run.cell_s.append(time.perf_counter() - start)
                    check_cell(run, op_no, token, cells, execution)
            except Exception as exc:  # noqa: BLE001
                run.failures.append(Failure(sandbox_no, op_no, "exception", f"{type(exc).__name__}: {exc}"))
            run.ops_done += 1
    finally:
        start = time.perf_counter()
        await sbx.kill()
        run.kill_s = time.perf_counter() - start
    return run


# -- the phases ----------------------------------------------------------------------------------------
def idle_memory(n_sandboxes: int = 50, n_contexts: int = 20) -> tuple[list[str], list[str]]:
    """RSS per idle sandbox and per idle code context; (table rows, failures)."""
    failures: list[str] = []
    settle()
    before = status_kib("VmRSS"), status_kib("RssAnon")
    sandboxes = [Sandbox.create(timeout=SANDBOX_TIMEOUT) for _ in range(n_sandboxes)]
    bases = [Path(testing.host_folder(s)) for s in sandboxes]
    try:
        settle()
        idle = status_kib("VmRSS"), status_kib("RssAnon")
        for i, sbx in enumerate(sandboxes[:n_contexts]):
            token = new_token(900 + i, 0)
            execution = sbx.run_code(COUNTER_CELL.format(token=token), timeout=OP_TIMEOUT)
            if "".join(execution.logs.stdout) != f"{token} 1\n" or execution.error is not None:
                failures.append(f"idle-context cell {i}: {execution!r}")
        settle()
        contexts = status_kib("VmRSS"), status_kib("RssAnon")
    finally:
        for sbx in sandboxes:
            sbx.kill()
    leaked = leaked_folders(bases)
    if leaked:
        failures.append(f"idle phase: {len(leaked)} host folders left after kill: {leaked[:3]}")
    rows = [
        f"| idle sandbox, no guest running ({n_sandboxes} created) | "
        f"{(idle[0] - before[0]) / 1024 / n_sandboxes:.2f} MiB | "
        f"{(idle[1] - before[1]) / 1024 / n_sandboxes:.2f} MiB |",
        f"| idle code context, after one cell ({n_contexts} sandboxes) | "
        f"{(contexts[0] - idle[0]) / 1024 / n_contexts:.1f} MiB | "
        f"{(contexts[1] - idle[1]) / 1024 / n_contexts:.1f} MiB |",
    ]
    return rows, failures


def load(n_sandboxes: int, ops: int, created: list[Any]) -> tuple[list[SandboxRun], float]:
    """Both halves at once: the thread pool's sandboxes and the event loop's. Every sandbox
    made is appended to `created` (the caller kills them again whatever happens)."""
    n_threads = n_sandboxes // 2

    async def all_async() -> list[SandboxRun]:
        return list(await asyncio.gather(*(drive_async(k, ops, created)
                                           for k in range(n_threads, n_sandboxes))))

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, n_threads), thread_name_prefix="bench-driver") as pool:
        futures = [pool.submit(drive_sync, k, ops, created) for k in range(n_threads)]
        async_runs = asyncio.run(all_async()) if n_sandboxes > n_threads else []
        sync_runs = [f.result() for f in futures]
    wall = time.perf_counter() - start
    return sync_runs + async_runs, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sandboxes", type=int, default=50, help="sandboxes at once (half threads, half asyncio)")
    parser.add_argument("--ops", type=int, default=20, help="operations per sandbox")
    args = parser.parse_args()

    start = time.perf_counter()
    with Sandbox.create(timeout=SANDBOX_TIMEOUT) as first:  # loads the runtime; warms the host side
        first.commands.run("echo warm | tr a-z A-Z", timeout=OP_TIMEOUT)
        first.run_code("x = 1", timeout=OP_TIMEOUT)
        warm = testing.is_warm(first)
    print(f"guest path: {'warm image' if warm else 'cold (DECLAW_WASM_WARM_IMAGE=0)'}; "
          f"runtime load + first command and cell: {(time.perf_counter() - start) * 1000:.0f} ms\n")

    failures: list[str] = []
    idle_rows, idle_failures = idle_memory()
    failures += idle_failures
    print("| idle cost (RSS delta per unit) | VmRSS | RssAnon |\n|---|---|---|")
    print("\n".join(idle_rows))

    settle()
    rss_before = rss_mib()
    hwm_reset = reset_peak_rss()
    threads_before = threading.active_count()
    created: list[Any] = []
    try:
        with RssSampler() as sampler:
            runs, wall = load(args.sandboxes, args.ops, created)
    finally:
        for sbx in created:  # already killed by their drivers unless something raised
            sbx.kill()
    hwm = status_kib("VmHWM") / 1024 if hwm_reset else float("nan")
    left_threads = wait_declaw_threads_gone(5.0)
    bases = [r.base for r in runs if r.base is not None]
    leaked = leaked_folders(bases)
    settle()
    rss_after = rss_mib()

    op_failures = [f for r in runs for f in r.failures]
    by_kind = {k: sum(1 for f in op_failures if f.kind == k)
               for k in ("lost", "mixed", "truncated", "wrong", "error", "exception")}
    commands = [t for r in runs for t in r.command_s]
    cells = [t for r in runs for t in r.cell_s]
    total = sum(r.ops_done for r in runs)
    n_threads = sum(1 for r in runs if r.driver == "threads")

    print(f"\n### {args.sandboxes} sandboxes × {args.ops} operations "
          f"({n_threads} from threads, {len(runs) - n_threads} from asyncio, at once)\n")
    print("| measure | value |\n|---|---|")
    print(f"| operations | {total} ({len(commands)} commands, {len(cells)} cells) |")
    print(f"| wall time (create + operations + kill, all sandboxes) | {wall:.1f} s |")
    print(f"| throughput | {total / wall:.1f} ops/s |")
    print(f"| command latency p50 / p99 | {ms(pct(commands, 0.5))} / {ms(pct(commands, 0.99))} |")
    print(f"| cell latency p50 / p99 | {ms(pct(cells, 0.5))} / {ms(pct(cells, 0.99))} |")
    creates = [r.create_s for r in runs]
    kills = [r.kill_s for r in runs]
    print(f"| Sandbox.create p50 / max | {ms(pct(creates, 0.5))} / {ms(max(creates))} |")
    print(f"| kill p50 / max | {ms(pct(kills, 0.5))} / {ms(max(kills))} |")
    print(f"| RSS before → after (MiB) | {rss_before:.0f} → {rss_after:.0f} |")
    print(f"| peak RSS (MiB): sampled every 20 ms / VmHWM | {sampler.peak:.0f} / {hwm:.0f} |")
    print(f"| lost / mixed / truncated / wrong outputs | {by_kind['lost']} / {by_kind['mixed']} / "
          f"{by_kind['truncated']} / {by_kind['wrong']} |")
    print(f"| other failures (non-zero exit or stderr / exceptions) | {by_kind['error']} / {by_kind['exception']} |")
    print(f"| host folders left after kill | {len(leaked)} of {len(bases)} |")
    print(f"| declaw-guest / declaw-reap threads left after 5 s | {len(left_threads)} |")
    print(f"| threads in the process before → after | {threads_before} → {threading.active_count()} |")

    print("\n| driver | sandboxes | command p50 / p99 | cell p50 / p99 |\n|---|---|---|---|")
    for driver in ("threads", "asyncio"):
        mine = [r for r in runs if r.driver == driver]
        c = [t for r in mine for t in r.command_s]
        k = [t for r in mine for t in r.cell_s]
        print(f"| {driver} | {len(mine)} | {ms(pct(c, 0.5))} / {ms(pct(c, 0.99))} | "
              f"{ms(pct(k, 0.5))} / {ms(pct(k, 0.99))} |")

    failures += [str(f) for f in op_failures]
    if total != args.sandboxes * args.ops:
        failures.append(f"{total} operations done, {args.sandboxes * args.ops} expected")
    if leaked:
        failures.append(f"{len(leaked)} host folders left after kill: {[str(p) for p in leaked[:5]]}")
    if left_threads:
        failures.append(f"{len(left_threads)} declaw threads alive 5 s after kill: {left_threads[:10]}")
    if failures:
        print(f"\nFAILED: {len(failures)} check(s)", file=sys.stderr)
        for line in failures[:30]:
            print(f"  {line}", file=sys.stderr)
        sys.exit(1)
    print("\nall checks passed: every output exact, no folder or thread left behind")


if __name__ == "__main__":
    main()
