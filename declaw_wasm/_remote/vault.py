"""A declaw-wasm server's vault, as declaw's `VaultClient` reaches declaw's: its routes
(`/teams/{team}/vault/secrets...`, `/vault/presets`; server/routes/vault.py), secrets by name
(mapped to ids here, as declaw's client does), the values write-only and sent only to a server
on loopback or over TLS."""

from __future__ import annotations

from typing import Any, Optional, Union

from ..secrets import VaultEvent, VaultPreset, VaultScope, VaultSecret
from ..exceptions import InvalidArgumentException
from ..wire import PREFIX
from .connection import Connection, segment

TEAM = "default"
ENVIRONMENT = "prod"


def _scope(scope: Any) -> dict[str, Any]:
    if isinstance(scope, VaultScope):
        return scope.model_dump()
    if callable(getattr(scope, "to_dict", None)):
        return dict(scope.to_dict())
    if isinstance(scope, dict):
        return scope
    raise InvalidArgumentException(f"a vault scope must be a VaultScope or a dict, got {type(scope).__name__}")


class RemoteVault:
    """The vault of one server (the methods of `Vault`, by name)."""

    def __init__(self, domain: str, api_key: Optional[str]) -> None:
        self.conn = Connection.get(domain, api_key)
        self._team: Optional[str] = None

    def _secrets_path(self) -> str:
        if self._team is None:
            teams = self.conn.request("GET", "/teams").get("teams", [])
            found = sorted((t for t in teams if t.get("name") == TEAM), key=lambda t: str(t.get("created_at", "")))
            if found:
                self._team = str(found[0]["team_id"])
            else:
                self._team = str(self.conn.request("POST", "/teams", json={"name": TEAM})["team_id"])
        return f"/teams/{segment(self._team)}/vault/secrets"

    def _id_of(self, name: str) -> str:
        for secret in self.list_secrets():
            if secret.name == name:
                return secret.secret_id
        raise InvalidArgumentException(f"no vault secret named {name!r} on the server")

    def create_secret(self, value: str, *, name: Optional[str] = None, provider: Optional[str] = None,
                      scopes: Optional[list[Union[VaultScope, dict[str, Any]]]] = None,
                      rotation_interval_days: int = 0) -> VaultSecret:
        self.conn.check_private("vault secret")
        body: dict[str, Any] = {"environment": ENVIRONMENT, "value": value,
                                "rotation_interval_days": rotation_interval_days}
        if name is not None:
            body["name"] = name
        if provider is not None:
            body["provider"] = provider
        if scopes is not None:
            body["scopes"] = [_scope(s) for s in scopes]
        return VaultSecret.model_validate(self.conn.request("POST", self._secrets_path(), json=body))

    def list_secrets(self) -> list[VaultSecret]:
        found = self.conn.request("GET", self._secrets_path()).get("secrets", [])
        return [VaultSecret.model_validate(s) for s in found]

    def rotate_secret(self, name: str, value: str) -> VaultSecret:
        self.conn.check_private("vault secret")
        path = f"{self._secrets_path()}/{segment(self._id_of(name))}/rotate"
        return VaultSecret.model_validate(self.conn.request("POST", path, json={"value": value}))

    def delete_secret(self, name: str) -> bool:
        self.conn.request("DELETE", f"{self._secrets_path()}/{segment(self._id_of(name))}")
        return True

    def update_scopes(self, name: str, scopes: list[Union[VaultScope, dict[str, Any]]],
                      value: Optional[str] = None) -> VaultSecret:
        body: dict[str, Any] = {"scopes": [_scope(s) for s in scopes]}
        if value is not None:
            self.conn.check_private("vault secret")
            body["value"] = value
        path = f"{self._secrets_path()}/{segment(self._id_of(name))}/scopes"
        return VaultSecret.model_validate(self.conn.request("POST", path, json=body))

    def audit_events(self) -> list[VaultEvent]:
        return [VaultEvent.model_validate(e) for e in self.conn.request("GET", f"{PREFIX}/vault/audit")]

    def list_presets(self) -> list[VaultPreset]:
        return [VaultPreset.model_validate(p) for p in self.conn.request("GET", "/vault/presets").get("presets", [])]
