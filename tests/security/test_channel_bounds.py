"""Outputs and host tools across every backend's channel (docs/security.md, "The pool's and
Ray's channels"): what a sandbox outputs costs the host memory proportional to the sandbox's
output limit, whatever the sizes of its writes (a hundred thousand 1-byte writes, half a
gigabyte in large ones); a cell's logs and rich results share that limit (thousands of
`display()` calls, a few enormous images); none of it can end a process that hosts other
sandboxes. And host tool calls a cell leaves running past its timeout are cancelled, not run,
and never answer into the next cell. Driven from guest code; the output cases run in this
process, in a process pool, on Ray and through `serve` (conftest.py, `ON_EVERY_BACKEND`), and
measure every process hosting the sandbox (`PeakRSS`).
"""

from __future__ import annotations

import os
import re
import threading
import time
import tracemalloc
from typing import Any, Callable

import pytest

from declaw_wasm import Limits, Sandbox, TimeoutException
from declaw_wasm._pool.pool import ProcessPool

from . import support
from .support import PeakRSS, assert_host_fine

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)

MiB = 1 << 20
LIMIT = 32 << 10  # bytes kept per stream in the write-size cases
PAIRS = 40_000  # 1-byte writes to stdout and to stderr, alternating: each stream over its limit


GO = "import os, sys\nsys.stdin.readline()\n"  # the guest is up and waiting before it writes


def _tiny(pairs: int) -> str:
    return GO + f"for _ in range({pairs}):\n    os.write(1, b'x')\n    os.write(2, b'y')\n"


def _large(blocks: int) -> str:  # 4 MiB writes: 32 of them, 128 MiB
    return "block = b'z' * (4 << 20)\n" + GO + f"for _ in range({blocks}):\n    os.write(1, block)\n"


def _host_cost(sandbox: Sandbox, program: str, **kwargs: Any) -> tuple[Any, int]:
    """(the result of `program`, how far it raised the peak RSS of this process and of the
    sandbox's hosts while it wrote). The guest is started first and waits for a line on stdin:
    its own memory (in the hosting process too) is resident before the measure starts."""
    path = f"/tmp/prog-{time.monotonic_ns()}.py"
    sandbox.files.write(path, program)
    handle = sandbox.commands.run(f"python3 {path}", background=True, stdin=True, timeout=240, **kwargs)
    time.sleep(1.0)
    with PeakRSS() as mem:
        handle.send_stdin("go\n")
        r = handle.wait()
    return r, mem.growth


def test_tiny_and_huge_writes_cost_the_host_the_output_limit(make: Callable[..., Sandbox],
                                                             no_background_guests: None) -> None:
    """Defends against output written a byte at a time (each write was an event: ~180 bytes of
    host memory per byte kept, ~12 MB here in-process, twice that on a pool) or in huge writes
    growing the host past the output limit."""
    sandbox = make(limits=Limits(output_limit=LIMIT), timeout=300)
    sandbox.commands.run("true")
    r, cost = _host_cost(sandbox, _tiny(PAIRS))
    assert (len(r.stdout), len(r.stderr)) == (LIMIT, LIMIT) and set(r.stdout) == {"x"} and set(r.stderr) == {"y"}
    assert r.exit_code == 0 and "truncated" in str(r.error)
    bound = 6 * MiB * support.copies()  # what Ray's processes keep beside ours
    assert cost < bound, cost  # two streams of 32 KiB kept
    seen: list[int] = []
    r, cost = _host_cost(sandbox, _large(32), on_stdout=lambda text: seen.append(len(text)))
    assert len(r.stdout) == LIMIT and sum(seen) == LIMIT and r.exit_code == 0
    assert cost < bound, cost
    assert_host_fine(sandbox)


CELL = """
from IPython.display import display, HTML
for i in range(3000):
    display(HTML('<b>%d</b>' % i))
for _ in range(12):
    display(HTML('<i>' + 'x' * (4 << 20) + '</i>'))
for i in range(20000):
    print(i)
'the end'
"""


def test_a_cells_logs_and_results_share_the_output_limit(mode: str, make: Callable[..., Sandbox],
                                                         no_background_guests: None) -> None:
    """Defends against a cell's rich results (thousands of display() calls, a dozen 4 MiB
    pages) growing the host without bound: logs and results share the sandbox's output limit,
    and past it results are dropped with a note. Measured: this process's Python heap where it
    hosts the cell (in-process, served: the guest's memory, in the process too, is not in it),
    else this process's RSS (the Execution crosses the channel to it)."""
    sandbox = make(limits=Limits(output_limit=MiB), timeout=300)
    sandbox.run_code("1")
    here = mode in ("in-process", "served")
    if here:
        tracemalloc.start()
    try:
        with PeakRSS(os.getpid()) as mem:
            ex = sandbox.run_code(CELL, timeout=240)
        cost = tracemalloc.get_traced_memory()[1] if here else mem.growth
    finally:
        tracemalloc.stop()
    assert ex.error is None, ex.error
    kept = sum(len(r.html or "") for r in ex.results) + sum(map(len, ex.logs.stdout + ex.logs.stderr))
    assert 0 < len(ex.results) < 1024 and kept <= MiB, (len(ex.results), kept)
    assert not any(len(r.html or "") > MiB for r in ex.results)
    assert any("results dropped" in line for line in ex.logs.stderr)
    assert cost < 24 * MiB, cost  # one 4 MiB result in flight, decoded and sized (before: all 48 MiB held)
    assert sandbox.run_code("6 * 7").text == "42"
    assert_host_fine(sandbox)


SMALL_FRAMES = """
from declaw_shell import door
for i in range(40):
    door.call("result", data={"application/json": [[0]] * 16000}, main=False)
'the end'
"""


def _heap_or_rss(mode: str) -> tuple[bool, Callable[[], Any]]:
    """Where a cell's output is measured: this process's Python heap where it hosts the cell
    (in-process, served: the guest's own memory, in the process too, is not in it), else this
    process's RSS (the Execution and the callbacks' messages cross the channel to it)."""
    return mode in ("in-process", "served"), lambda: PeakRSS(os.getpid())


def test_a_cells_results_cost_the_host_what_they_hold(mode: str, make: Callable[..., Sandbox],
                                                      no_background_guests: None) -> None:
    """Defends against results charged less than the host holds for them: a 32 KB door frame
    of 16 000 one-item lists decodes to over a megabyte of lists (of empty lists, 62 times its
    size), and results were charged their msgpack size (forty of them fit a 2 MiB limit and
    held 46 MiB). Each result now costs what its objects hold, within the output limit."""
    limit = 2 * MiB
    sandbox = make(limits=Limits(output_limit=limit), timeout=300)
    sandbox.run_code("1")
    here, peak = _heap_or_rss(mode)
    if here:
        tracemalloc.start()
    try:
        with peak() as mem:
            ex = sandbox.run_code(SMALL_FRAMES, timeout=240)
        cost = tracemalloc.get_traced_memory()[1] if here else mem.growth
    finally:
        tracemalloc.stop()
    assert ex.error is None and ex.text == "the end", ex
    assert 1 <= sum(not r.is_main_result for r in ex.results) <= 2, len(ex.results)  # a megabyte each
    assert any("results dropped" in line for line in ex.logs.stderr)
    assert cost < 4 * limit + 4 * MiB, cost  # before: ~46 MiB
    assert sandbox.run_code("6 * 7").text == "42"
    assert_host_fine(sandbox)


@pytest.mark.parametrize("mode", ["in-process", "processes"], indirect=True)
def test_host_tool_calls_past_a_cells_timeout_are_cancelled(mode: str, where: Callable[[str], dict[str, Any]]) -> None:
    """Defends against host tool calls outliving their cell: a cell that starts a hundred calls
    of a blocking tool and times out ends at its timeout; the calls still queued never run, the
    running ones finish unheard (nothing reaches the next cell), and the sandbox and its tools
    work on. In-process and in a pool (whose worker calls the tools back here); served mode
    and Ray refuse host tools."""
    release = threading.Event()
    started: list[int] = []
    lock = threading.Lock()

    def slow(i: int) -> str:
        with lock:
            started.append(i)
        release.wait(60)
        return f"late {i}"

    pool = ProcessPool(1) if mode == "processes" else None
    sandbox = Sandbox.create(timeout=300, tools={"slow": slow, "quick": lambda: "quick"},
                             **({"backend": pool} if pool else where(mode)))
    try:
        start = time.monotonic()
        with pytest.raises(TimeoutException):
            sandbox.run_code("import asyncio\nfrom declaw_tools import slow\n"
                             "print(await asyncio.gather(*(slow(i) for i in range(100))))", timeout=1)
        assert time.monotonic() - start < 4
        time.sleep(0.5)
        ran = len(started)
        assert 0 < ran <= 16, ran  # the tool set's threads; the other calls were cancelled, not run
        release.set()
        time.sleep(0.5)
        assert len(started) == ran  # the cancelled calls never ran, even with threads free
        ex = sandbox.run_code("from declaw_tools import quick\nprint(quick())\n'next'", timeout=30)
        assert ex.error is None and ex.logs.stdout == ["quick\n"], ex
        assert not re.search(r"late \d", str(ex.model_dump()))  # no late answer reached this cell
        assert sandbox.commands.run("echo ok").stdout == "ok\n"
    finally:
        release.set()
        sandbox.kill()
        if pool is not None:
            pool.close()
