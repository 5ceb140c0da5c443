"""The HTTP routes, one router per noun: each takes its wire body (wire/), checks what the
faces would check (`_args.py`: clients may not be ours), and calls the backend contract's
method of the same name on the sandbox's backend. Blocking work runs in worker threads.

declaw's routes are served at declaw's paths with declaw's shapes (its SDKs run unchanged);
what only our clients use is under `wire.PREFIX`. Pause, resume, snapshots, restore and fork
are `snapshots.py`; volumes come as `volumes.py`: each a router in the list below, over the same
registry.
"""

from __future__ import annotations

from fastapi import APIRouter

from ..registry import Registry
from . import code, commands, files, network, pty, sandboxes, snapshots, stdio, vault, volumes


def routers(registry: Registry) -> list[APIRouter]:
    """One router per noun, each over the registry's sandboxes."""
    return [module.router(registry) for module in (sandboxes, files, commands, pty, stdio, code,
                                                              network, snapshots, vault, volumes)]
