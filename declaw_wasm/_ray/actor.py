"""`SandboxHost`: a Ray actor hosting sandboxes — the pool's `Host` (_pool/host.py), placed by Ray.

The actor is threaded (`max_concurrency`): every call runs on a thread of the actor's process,
and guests run on threads of their own that release the GIL, as in-process. Every value crosses
Ray as an argument or a return (no side channel of ours). A sandbox's secrets (its `envs` and a
command's or cell's, and a create's secret values) arrive as arguments of their own, kept under
Ray's inline size, so Ray never stores them in its object store (client side: sandboxes.py).
So does the state store's signing key, on the calls that may use the store (_pool/client.py
`KEYED`): never in the actor's `runtime_env`.

**What it returns is bytes**: every answer is one message of the pool's codec (_pool/codec.py:
msgpack, allow-listed models, bounded), encoded here, so Ray carries it as raw bytes and the
driver decodes it with the same bounds as a pool worker's — never an object Ray would pickle.
An answer that cannot be encoded (a value msgpack cannot carry, one over the codec's limit) is
answered as an error: every call gets exactly one answer. Streams (a command's output, a cell's
callbacks) are pulled by the driver in plain calls (`stream_open`, `stream_next`), each
answering a batch of messages, not Ray streaming generators (whose end the driver would read
with `ray.get`, unpickling what the actor put there).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Optional

from .._pool.codec import pack
from .._pool.host import Host, error, exception
from ..exceptions import SandboxException

CHUNK = 64 << 10  # output data per streamed message: under Ray's 100 KiB inline limit


def packed(answer: Any, what: str) -> bytes:
    """`answer` as one message; if it cannot be encoded, the error saying so (as a reply)."""
    try:
        return pack(answer)
    except Exception as exc:  # MessageTooLarge, TypeError, OverflowError...
        return pack(list(error(SandboxException(f"the answer to {what} could not be sent from the Ray actor: "
                                                f"{type(exc).__name__}: {str(exc)[:300]}"))))


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

        from .._wasm.warm_image import get_interpreter
        from ..settings import cache_dir

        self.name = name
        self.node = ray.get_runtime_context().get_node_id()
        start = time.monotonic()
        print(f"declaw-wasm: host {name} on node {self.node[:12]} (pid {os.getpid()}): loading the "
              f"runtime from {cache_dir()}", file=sys.stderr, flush=True)
        get_interpreter()  # compiled once per node's cache (file-locked), then mapped
        print(f"declaw-wasm: host {name}: runtime ready in {time.monotonic() - start:.1f}s",
              file=sys.stderr, flush=True)
        self.host = Host(f"Ray actor {name} on node {self.node[:12]}")

    def ready(self) -> bytes:
        import ray

        return pack({"name": self.name, "node": self.node, "pid": os.getpid(), "ip": ray.util.get_node_ip_address()})

    def load(self) -> bytes:
        return pack(int(self.host.call(None, "load", [])[1]))

    def call(self, sandbox_id: Optional[str], method: str, args: list[Any],
             envs: Optional[dict[str, str]] = None, secrets: Any = None, state_key: Any = None) -> bytes:
        """One call: `[kind, payload]`; a create's `secrets` (values: see sandboxes.py) arrive as
        their own argument, and so does the state key of a call that may use the state store
        (`Host.call`)."""
        extra = [] if secrets is None else [secrets]
        return packed(list(self.host.call(sandbox_id, method, with_envs(args, envs) + extra, state_key)), method)

    def run(self, sandbox_id: str, args: list[Any], envs: Optional[dict[str, str]], wait: float) -> bytes:
        """A foreground command without callbacks in one call (`Host.run`): `[messages, token]`."""
        messages, token = self.host.run(sandbox_id, with_envs(args, envs)[0], wait, limit=CHUNK)
        return packed([messages, token], "run")

    def stream_open(self, sandbox_id: str, op: str, args: list[Any], envs: Optional[dict[str, str]],
                    wait: float) -> bytes:
        """A stream (`Host.stream`'s ops), pulled by the driver: `[token or None, first messages]`."""
        return packed(list(self.host.pull_open(sandbox_id, op, with_envs(args, envs), wait, CHUNK)), op)

    def stream_next(self, token: str, wait: float) -> bytes:
        """The stream's next messages: `[ended, messages]` (an exception line for a token this
        host does not know)."""
        try:
            return packed(list(self.host.pull_next(token, wait, CHUNK)), "a stream")
        except Exception as exc:  # a closed session
            return pack([True, [[exception(exc)]]])

    def stream_close(self, token: str) -> bytes:
        self.host.pull_close(token)
        return pack(None)
