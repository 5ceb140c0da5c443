"""`SandboxHost`: a Ray actor hosting sandboxes — the pool's `Host` (_pool/host.py), placed by Ray.

The actor is threaded (`max_concurrency`): every call and stream runs on a thread of the actor's
process, and guests run on threads of their own that release the GIL, as in-process. Streams
are Ray streaming generators; every value crosses Ray as an argument or a return (no side
channel of ours). A sandbox's secrets (its `envs` and a command's or cell's, and a create's
secret values) arrive as arguments of their own, kept under Ray's inline size, so Ray never stores them in its object
store (client side: sandboxes.py). So does the state store's signing key, on the calls that may use
the store (_pool/client.py `KEYED`): never in the actor's `runtime_env`.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Iterator, Optional

from .._pool.host import Host, Reply

CHUNK = 64 << 10  # output data per streamed message: under Ray's 100 KiB inline limit


def with_envs(args: list[Any], envs: Optional[dict[str, str]]) -> list[Any]:
    """The request among `args` gets back the envs that travelled beside it."""
    if envs is None:
        return args
    return [a.model_copy(update={"envs": envs}) if hasattr(a, "envs") and hasattr(a, "model_copy") else a
            for a in args]


class SandboxHost:
    """The sandboxes of one Ray actor (decorated with `ray.remote` by sandboxes.py)."""

    def __init__(self, name: str) -> None:
        import ray

        from .._wasm.snapshot import get_runtime
        from ..settings import cache_dir

        self.name = name
        self.node = ray.get_runtime_context().get_node_id()
        start = time.monotonic()
        print(f"declaw-wasm: host {name} on node {self.node[:12]} (pid {os.getpid()}): loading the "
              f"runtime from {cache_dir()}", file=sys.stderr, flush=True)
        get_runtime()  # compiled once per node's cache (file-locked), then mapped
        print(f"declaw-wasm: host {name}: runtime ready in {time.monotonic() - start:.1f}s",
              file=sys.stderr, flush=True)
        self.host = Host(f"Ray actor {name} on node {self.node[:12]}")

    def ready(self) -> dict[str, Any]:
        import ray

        return {"name": self.name, "node": self.node, "pid": os.getpid(), "ip": ray.util.get_node_ip_address()}

    def load(self) -> int:
        return int(self.host.call(None, "load", [])[1])

    def call(self, sandbox_id: Optional[str], method: str, args: list[Any],
             envs: Optional[dict[str, str]] = None, secrets: Any = None, state_key: Any = None) -> Reply:
        """One call; a create's `secrets` (values: see sandboxes.py) arrive as their own argument,
        and so does the state key of a call that may use the state store (`Host.call`)."""
        extra = [] if secrets is None else [secrets]
        return self.host.call(sandbox_id, method, with_envs(args, envs) + extra, state_key)

    def run(self, sandbox_id: str, args: list[Any], envs: Optional[dict[str, str]],
            wait: float) -> tuple[list[Reply], Optional[str]]:
        """A foreground command without callbacks in one call (`Host.run`)."""
        return self.host.run(sandbox_id, with_envs(args, envs)[0], wait, limit=CHUNK)

    def stream(self, sandbox_id: str, op: str, args: list[Any],
               envs: Optional[dict[str, str]] = None) -> Iterator[Reply]:
        yield from self.host.stream(sandbox_id, op, with_envs(args, envs), limit=CHUNK)
