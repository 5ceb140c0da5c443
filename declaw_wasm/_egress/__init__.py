"""Egress: the guest's network, run by the host through the door.

WASI gives the guest no sockets, so the host is the network: the guest's `socket` and `ssl`
(guest/declaw_net) ask the host, through door calls (ops.py), to resolve names, open TCP
connections and run TLS; the host applies the sandbox's policy to every name and address
(policy.py, resolve.py), terminates TLS with its own trust (tls.py), parses and re-serialises
every HTTP/1.x request (http.py: Host binding, no smuggling, secret injection, content guards),
enforces limits and records an audit log (session.py, audit.py). docs/egress.md has the design.
"""

from __future__ import annotations

from .._guard.contract import ContentGuard
from .audit import AuditEvent
from .policy import ALL_TRAFFIC, Policy, PolicyError
from .secrets import Secret
from .session import EgressSession
from .vault import Vault, VaultEvent, VaultPreset, VaultScope, VaultSecret

__all__ = ["ALL_TRAFFIC", "AuditEvent", "ContentGuard", "EgressSession", "Policy", "PolicyError",
           "Secret", "Vault", "VaultEvent", "VaultPreset", "VaultScope", "VaultSecret"]
