"""declaw's `VaultClient`: the vault that `vault_refs=` name secrets in, this process's or a server's.

A server's (remote mode: `domain=`, or `DECLAW_DOMAIN` when no `DECLAW_WASM_BACKEND` keeps sandboxes
on this machine), through declaw's vault routes; else this process's (`Vault.default()`), which
in-process, pool and Ray sandboxes resolve their refs in. The same choice `Sandbox.create` makes, so
a secret created here is where the sandbox's refs are looked up."""

from __future__ import annotations

from typing import Any, Optional, Union

from .secrets import Vault, VaultEvent, VaultPreset, VaultScope, VaultSecret
from .settings import api_key as api_key_setting
from .settings import remote_for


class VaultClient:
    """declaw's `VaultClient(api_key=None, domain=None, request_timeout=None)`. Values are
    write-only; to a server they go only over TLS or to loopback."""

    def __init__(self, api_key: Optional[str] = None, domain: Optional[str] = None,
                 request_timeout: Optional[float] = None) -> None:
        where = remote_for(domain)
        if where:
            from ._remote.vault import RemoteVault

            self._target: Union[Vault, RemoteVault] = RemoteVault(where, api_key or api_key_setting())
        else:
            self._target = Vault.default()

    def create_secret(self, value: str, *, name: Optional[str] = None, provider: Optional[str] = None,
                      scopes: Optional[list[Union[VaultScope, dict[str, Any]]]] = None,
                      rotation_interval_days: int = 0) -> VaultSecret:
        """Store `value` with a `provider` preset's scopes (e.g. "openai") or explicit `scopes`;
        `name` defaults to the provider's key. The value is never returned."""
        return self._target.create_secret(value, name=name, provider=provider, scopes=scopes,
                                          rotation_interval_days=rotation_interval_days)

    def list_secrets(self) -> list[VaultSecret]:
        return self._target.list_secrets()

    def rotate_secret(self, name: str, value: str) -> VaultSecret:
        return self._target.rotate_secret(name, value)

    def delete_secret(self, name: str) -> bool:
        return self._target.delete_secret(name)

    def update_scopes(self, name: str, scopes: list[Union[VaultScope, dict[str, Any]]],
                      value: Optional[str] = None) -> VaultSecret:
        """Replace the secret's scopes. Narrowing is free; adding a host needs `value` (the value
        again; it replaces the stored one), else `ConflictException`: a value is write-only, so
        whoever may change scopes must not be able to send it to a host they read. declaw's
        `update_scopes` keeps the value (docs/differences.md)."""
        return self._target.update_scopes(name, scopes, value)

    def audit_events(self) -> list[VaultEvent]:
        """The vault's changes (and refused changes), oldest first; never a value (ours)."""
        return self._target.audit_events()

    def list_presets(self) -> list[VaultPreset]:
        return self._target.list_presets()

    def close(self) -> None:
        """declaw's; nothing to close (connections are pooled per server)."""

    def __enter__(self) -> "VaultClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
