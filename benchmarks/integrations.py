"""MCP `run_python_code` round trips over stdio, against the same work without MCP.

    python benchmarks/integrations.py [--calls N]

Needs `pip install -e '.[mcp]'`. A real `declaw-wasm mcp` process is driven by the `mcp` SDK's
own stdio client (what an MCP host does); the same tool call is timed through the SDK's
in-memory transport (the SDK's cost without a pipe), and its guest work as a plain
`run_code` of the same cell in this process (the floor: no MCP at all).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio
from mcp import Client, StdioServerParameters

from declaw_wasm import AsyncSandbox
from declaw_wasm.integrations.mcp import DeclawMcpServer, runner_cell

CODE = "1 + 1"
ARGS = {"python_code": CODE}


async def timed_calls(client: Client, calls: int, tool: str = "run_python_code",
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


async def main(calls: int) -> None:
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
    anyio.run(main, parser.parse_args().calls)
