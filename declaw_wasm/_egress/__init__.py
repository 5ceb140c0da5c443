"""Egress: the guest's network, run by the host through the door.

WASI gives the guest no sockets, so the host is the network: the guest's `socket` and `ssl`
(guest/declaw_net) ask the host, through door calls (ops.py), to resolve names, open TCP
connections and run TLS; the host applies the sandbox's policy to every name and address
(policy.py, resolve.py), terminates TLS with its own trust (tls.py), parses and re-serialises
every HTTP/1.x request (http.py: Host binding, no smuggling, secret injection, content guards),
enforces limits and records an audit log (session.py, audit.py). docs/egress.md has the design.

Nothing is imported with the package: a sandbox that never connects imports no egress code (its
session is built at the guest's first network op: _local/sandbox.py's `egress`). Public names
live in declaw_wasm.secrets, declaw_wasm.vault and declaw_wasm.security; the older import path
`declaw_wasm._egress.<name>` still gives them, imported when first asked for.
"""

from __future__ import annotations

import importlib
from typing import Any

# environment variables whose values the audit masks as `***` (audit.py), and the sandbox's
# events too (_local/recording.py, which must not import the egress code to know them)
DEFAULT_MASK_PATTERNS = ("*_KEY", "*_SECRET", "*_TOKEN", "*_PASSWORD", "*_CREDENTIALS", "API_KEY", "SECRET_KEY")

_WHERE = {"ContentGuard": ".._guard.contract", "AuditEvent": ".audit", "ALL_TRAFFIC": ".policy", "Policy": ".policy",
          "PolicyError": ".policy", "Secret": ".secrets", "EgressSession": ".session",
          **{name: ".vault" for name in ("Vault", "VaultEvent", "VaultPreset", "VaultScope", "VaultSecret")}}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'declaw_wasm._egress' has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
