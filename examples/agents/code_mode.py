"""Code mode: sandboxed Python calls functions of this program (host tools), sync or awaited.

The model's code runs in the sandbox; `search` and `fetch_price` run here, with this process's
network and credentials. The sandbox's code sees only what they return.
"""
import asyncio

from declaw_wasm import Sandbox

PRICES = {"wasm": 12.5, "wasi": 8.0, "wit": 3.25}


def search(q: str, limit: int = 5) -> list[str]:
    """Names of products matching `q`."""
    return [name for name in PRICES if name.startswith(q)][:limit]


async def fetch_price(name: str) -> float:
    """The price of a product (an async API call here)."""
    await asyncio.sleep(0.05)
    return PRICES[name]


with Sandbox.create(tools=[search, fetch_price]) as sbx:
    # plain code: a tool call waits and returns the value
    sbx.run_code("from declaw_tools import search, fetch_price\nnames = search(q='w')")
    # code that awaits: tool calls are coroutines, and gathered ones run at once
    execution = sbx.run_code(
        "import asyncio\n"
        "prices = await asyncio.gather(*(fetch_price(name=n) for n in names))\n"
        "print(f'{len(names)} products, total {sum(prices):.2f}')", timeout=30)
    print("".join(execution.logs.stdout), end="")
    calls = [e.url for e in sbx.audit_events() if e.kind == "tool"]
    print(f"{len(calls)} tool calls audited: {', '.join(calls)}")
