"""Node-loss checkpointing (`lifecycle={"checkpoint": "cell"}`): the hook, not yet the thing.

What it will do: a sandbox created with `checkpoint: "cell"` is snapshotted after each completed
command or cell (its files and its code contexts' state) into the shared state store, and when
its node dies it is restored on another host, losing only the work in flight (target: running
again within 2 s, the last completed cell's state intact).

Why it is not built: it needs the state issue's snapshots of a live sandbox (files + the
kernel's namespace) and its shared store. Building a store of our own here would be a second
one. Until then `Sandbox.create(lifecycle={"checkpoint": ...})` is refused on every backend with
`InvalidArgumentException` (_args.py), so nobody believes a sandbox is checkpointed when it is
not.

Where it plugs in, once the state work lands:
- `after_turn` is called by the host actor (actor.py, `SandboxHost.stream`/`call`) when a
  `start` stream sends its `end` or a `run_code` call returns, for sandboxes created with the
  policy: it takes the snapshot and writes it to the store under the sandbox's id.
- `restore` is called by the driver (sandboxes.py, `RayLink`) when a call fails with the host
  actor gone (`HostLost`): it creates the sandbox again on the least loaded live host from the
  last snapshot and retries nothing (the work in flight is reported lost).
"""

from __future__ import annotations

from typing import Any, Optional

POLICIES = ("cell",)
STATE_STORE_MISSING = ("node-loss checkpointing (lifecycle={'checkpoint': ...}) needs sandbox "
                       "snapshots and a shared state store, which are not built yet")


def policy(lifecycle: Any) -> Optional[str]:
    """The checkpoint policy a `lifecycle` argument asks for (None: none)."""
    if isinstance(lifecycle, dict):
        value = lifecycle.get("checkpoint")
        return None if value is None else str(value)
    value = getattr(lifecycle, "checkpoint", None)
    return None if value is None else str(value)


def after_turn(sandbox_id: str, host: Any) -> None:
    """Snapshot a sandbox after a completed command or cell (the state issue's snapshot + store)."""
    raise NotImplementedError(STATE_STORE_MISSING)


def restore(sandbox_id: str) -> Any:
    """Recreate a sandbox lost with its node from its last snapshot, on another host."""
    raise NotImplementedError(STATE_STORE_MISSING)
