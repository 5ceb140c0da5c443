"""The host-side vault, for the egress relay: its public home is declaw_wasm/secrets.py (`Vault`,
`VaultScope`, `VaultSecret`, `VaultEvent`, `VaultPreset`); re-exported here for the relay's
imports."""

from __future__ import annotations

from ..secrets import (MAX_EVENTS, MAX_SECRET_BYTES, SUPPORTED_TYPES, VAULT_URI, Vault, VaultEvent,
                       VaultPreset, VaultScope, VaultSecret, added_hosts)

__all__ = ["MAX_EVENTS", "MAX_SECRET_BYTES", "SUPPORTED_TYPES", "VAULT_URI", "Vault", "VaultEvent",
           "VaultPreset", "VaultScope", "VaultSecret", "added_hosts"]
