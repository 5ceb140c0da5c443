"""The guest's network: `socket`, `ssl`, `select`/`selectors` and asyncio over the host's door.

`install(patch_on_import)` runs at every guest's start-up (guest/_declaw_boot.py); on the
warm path the snapshot already holds it all, so a guest that opens no connection pays nothing:
no door call happens until a program resolves a name or connects. See
declaw_wasm/_egress/__init__.py for the host's side and docs/egress.md for the design.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType


def install(patch_on_import: Callable[[str, Callable[[ModuleType], None]], None]) -> None:
    from . import readiness, sockets

    sockets.install()
    readiness.install()
    if "ssl" not in sys.modules or not getattr(sys.modules["ssl"], "_declaw_net", False):
        from . import _ssl

        _ssl._declaw_net = True
        sys.modules["ssl"] = _ssl
    sys.modules.setdefault("_ssl", sys.modules["ssl"])  # truststore imports it (no OpenSSL here)
    from . import aio

    patch_on_import("asyncio.selector_events", aio.patch)
    patch_on_import("anyio.streams.tls", aio.patch_anyio_tls)
    patch_on_import("socketserver", sockets.patch_socketserver)
