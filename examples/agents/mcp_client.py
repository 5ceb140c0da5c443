"""MCP: `declaw-wasm mcp` over stdio, called by the official `mcp` client.

Point an MCP host at it the same way, e.g. {"command": "declaw-wasm", "args": ["mcp"]}.
"""
import os
import sys

import anyio
from mcp import Client, StdioServerParameters


async def main() -> None:
    server = StdioServerParameters(command=sys.executable, args=["-m", "declaw_wasm.cli", "mcp"],
                                   env=dict(os.environ))
    async with Client(server) as client:
        reply = await client.call_tool("run_python_code", {
            "python_code": "import math\nprint('computing')\nmath.factorial(n)",
            "global_variables": {"n": 10}})
        print(reply.content[0].text)
        await client.call_tool("run_code", {"code": "total = 40"})  # stateful cells
        print((await client.call_tool("run_code", {"code": "total + 2"})).content[0].text)


anyio.run(main)
