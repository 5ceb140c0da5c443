"""Host tool round trips from guest code, and MCP `run_python_code` round trips over stdio.

    python benchmarks/integrations.py [--calls N] [--only tools|mcp]

Host tools: guest code times its own calls of a host function that returns at once
(`from declaw_tools import noop; noop()`), sync and awaited, in-process and in a process pool,
beside the floor of any door request (`declaw_tools.available()`, answered on the guest's
thread with no executor hop) and a plain Python call in the guest.

MCP (needs `pip install -e '.[mcp]'`): a real `declaw-wasm mcp` process is driven by the `mcp`
SDK's own stdio client (what an MCP host does); the same tool call is timed through the SDK's
in-memory transport (the SDK's cost without a pipe), and its guest work as a plain
`run_code` of the same cell in this process (the floor: no MCP at all).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

import _tree  # noqa: E402,F401  -- PYTHONPATH's tree first (interleave.py), else this repository's

import anyio

from declaw_wasm import AsyncSandbox, Sandbox

CODE = "1 + 1"
ARGS = {"python_code": CODE}


TOOL_CELL = """
import time, statistics, asyncio, declaw_tools
from declaw_tools import noop
def plain():
    return None
def median_us(fn, n):
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6
async def awaited(n):
    times = []
    for _ in range(n):
        start = time.perf_counter()
        await noop()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6
async def gathered(n):
    start = time.perf_counter()
    await asyncio.gather(*(noop() for _ in range(n)))
    return (time.perf_counter() - start) / n * 1e6
median_us(noop, 1); declaw_tools.available()
{"sync": median_us(noop, CALLS), "await": await awaited(CALLS), "gather": await gathered(min(CALLS, 64)),
 "door": median_us(declaw_tools.available, CALLS), "plain": median_us(plain, CALLS)}
"""


def tool_round_trips(calls: int) -> None:
    """Medians, in µs, measured by the guest's own clock."""
    cell = TOOL_CELL.replace("CALLS", str(calls))
    rows = {}
    backends: list[tuple[str, dict[str, Any]]] = [("in-process", {}), ("process pool", {"backend": "processes:1"})]
    for where, kwargs in backends:
        with Sandbox.create(tools={"noop": lambda: None}, **kwargs) as sbx:
            sbx.run_code("1")
            execution = sbx.run_code(cell, timeout=600)
            assert execution.error is None, execution.error
            rows[where] = eval(execution.text or "{}")
    local = rows["in-process"]
    print(f"| host tool, guest-timed (median of {calls}) | in-process | process pool |\n|---|---|---|")
    for key, label in (("sync", "`noop()` round trip"), ("await", "`await noop()` (start + wait)"),
                       ("gather", "`asyncio.gather` of 64, per call"),
                       ("door", "floor: a door request answered on the guest thread (`available()`)"),
                       ("plain", "for scale: a plain Python call in the guest")):
        print(f"| {label} | {local[key]:.1f} µs | {rows['process pool'][key]:.1f} µs |")


async def timed_calls(client: Any, calls: int, tool: str = "run_python_code",
                      args: dict[str, Any] = ARGS) -> list[float]:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        result = await client.call_tool(tool, args)
        times.append(time.perf_counter() - start)
        assert not result.is_error, result.content
    return times


def stats(times: list[float]) -> str:
    ordered = sorted(times)
    return (f"{statistics.median(times) * 1000:.2f} ms "
            f"(p90 {ordered[int(len(ordered) * 0.9)] * 1000:.2f} ms)")


async def mcp_round_trips(calls: int) -> None:
    from mcp import Client, StdioServerParameters

    from declaw_wasm.integrations.mcp import DeclawMcpServer, runner_cell

    # 1. stdio: a real `declaw-wasm mcp` process
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "declaw_wasm.cli", "mcp"], env=dict(os.environ))
    start = time.perf_counter()
    async with Client(params) as client:
        await client.call_tool("run_python_code", ARGS)
        first = time.perf_counter() - start
        stdio = await timed_calls(client, calls)
        stdio_cmd = await timed_calls(client, calls, "run_command", {"command": "echo hi"})
        stdio_cell = await timed_calls(client, calls, "run_code", {"code": "x = 1"})
    # 2. the SDK in memory (no pipe, no process)
    async with Client(DeclawMcpServer(shared=True).mcp) as client:
        await client.call_tool("run_python_code", ARGS)
        memory = await timed_calls(client, calls)
    # 3. no MCP: the same guest work as run_code calls in this process
    sbx = await AsyncSandbox.create()
    context = await sbx.create_code_context()
    cell = runner_cell(CODE, "{}", False)
    await sbx.run_code(cell, context=context)
    direct = []
    for _ in range(calls):
        start = time.perf_counter()
        await sbx.run_code(cell, context=context)
        direct.append(time.perf_counter() - start)
    plain = []
    for _ in range(calls):
        start = time.perf_counter()
        await sbx.run_code("x = 1")
        plain.append(time.perf_counter() - start)
    await sbx.kill()

    floor = statistics.median(direct)
    print(f"first call over stdio (server process start, sandbox, context): {first * 1000:.0f} ms")
    print(f"| `{CODE}` (median of {calls}) | time | vs no MCP |\n|---|---|---|")
    print(f"| `run_python_code` over stdio (`declaw-wasm mcp` process) | {stats(stdio)} "
          f"| {statistics.median(stdio) / floor:.1f}× |")
    print(f"| `run_python_code`, SDK in memory (no pipe) | {stats(memory)} "
          f"| {statistics.median(memory) / floor:.1f}× |")
    print(f"| its guest work: `run_code` of the runner cell, no MCP | {stats(direct)} | 1.0× |")
    print(f"| for scale: `run_code('x = 1')` | {stats(plain)} | "
          f"{statistics.median(plain) / floor:.1f}× |")
    print(f"| `run_command` `echo hi` over stdio | {stats(stdio_cmd)} | "
          f"{statistics.median(stdio_cmd) / floor:.1f}× |")
    print(f"| `run_code` `x = 1` over stdio | {stats(stdio_cell)} | "
          f"{statistics.median(stdio_cell) / floor:.1f}× |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--only", choices=["tools", "mcp"], default=None)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if args.only in (None, "tools"):
        tool_round_trips(args.calls)
    if args.only in (None, "mcp"):
        anyio.run(mcp_round_trips, args.calls)
