"""The vault at declaw's paths, as declaw's `VaultClient` calls them: its hidden tenancy (one
team "default", one environment "prod"), secrets by id under `/teams/{team_id}/vault/secrets`
(create, list, rotate, delete, replace scopes) and `/vault/presets`. Over the server's `Vault`
(registry.vault), the one `vault_refs` of the sandboxes it makes are resolved in.

Values are write-only: taken in request bodies (only over TLS or from loopback, `check_private`),
kept in the server's memory (or the file the operator pointed a `Vault` at), never returned,
never in a log line, an error message or an audit event. So the scopes that say where a value
may go cannot be widened without the value (409: `Vault.update_scopes`); every change is an
event of the vault's audit log, ours to read at `GET {PREFIX}/vault/audit`.
"""

from __future__ import annotations

from datetime import datetime, timezone

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel

from ...secrets import VaultEvent, VaultPreset, VaultSecret
from ..._threads import in_thread
from ...exceptions import InvalidArgumentException, NotFoundException
from ...wire import ErrorBody
from ...wire import (PREFIX, Environment, EnvironmentList, NewTeam, NewVaultSecret, RotateVaultSecret, Team,
                     TeamList, VaultScopes)
from ..registry import Registry
from .common import ERRORS, check_private

TEAM = "default"
ENVIRONMENT = "prod"
STARTED = datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


class StoredSecret(VaultSecret):
    """A vault secret's metadata as declaw's server sends it (never the value)."""

    team_id: str = TEAM
    env_id: str = ENVIRONMENT


class StoredSecrets(BaseModel):
    secrets: list[StoredSecret]


class Presets(BaseModel):
    presets: list[VaultPreset]


def _team(team_id: str) -> None:
    if team_id != TEAM:
        raise NotFoundException(f"no team {team_id[:100]!r} (this server has one team, {TEAM!r})")


def _stored(secret: VaultSecret) -> StoredSecret:
    return StoredSecret(**secret.model_dump())


def router(registry: Registry) -> APIRouter:
    vault = APIRouter(tags=["vault"])
    _tenancy(vault)
    _secrets(vault, registry)
    return vault


def _tenancy(vault: APIRouter) -> None:
    """declaw's hidden tenancy: the one team and environment."""

    @vault.get("/teams", responses=ERRORS)
    async def teams() -> TeamList:
        return TeamList(teams=[Team(team_id=TEAM, name=TEAM, created_at=STARTED)])

    @vault.post("/teams", status_code=201, responses=ERRORS)
    async def new_team(body: NewTeam) -> Team:
        """Only the one team exists; asking for it again returns it."""
        if body.name != TEAM:
            raise InvalidArgumentException(f"this server has one team, {TEAM!r}")
        return Team(team_id=TEAM, name=TEAM, created_at=STARTED)

    @vault.get("/teams/{team_id}/environments", responses=ERRORS)
    async def environments(team_id: str) -> EnvironmentList:
        _team(team_id)
        return EnvironmentList(environments=[Environment(env_id=ENVIRONMENT, name=ENVIRONMENT)])

    @vault.post("/teams/{team_id}/environments", status_code=201, responses=ERRORS)
    async def new_environment(team_id: str, body: NewTeam) -> Environment:
        _team(team_id)
        if body.name != ENVIRONMENT:
            raise InvalidArgumentException(f"this server's vault has one environment, {ENVIRONMENT!r}")
        return Environment(env_id=ENVIRONMENT, name=ENVIRONMENT)


def _secrets(vault: APIRouter, registry: Registry) -> None:
    store = registry.vault

    def name_of(secret_id: str) -> str:
        for secret in store.list_secrets():
            if secret.secret_id == secret_id:
                return secret.name
        raise NotFoundException(f"no vault secret with id {secret_id[:100]!r}")

    @vault.get("/teams/{team_id}/vault/secrets", responses=ERRORS)
    async def list_secrets(team_id: str) -> StoredSecrets:
        _team(team_id)
        return StoredSecrets(secrets=[_stored(s) for s in store.list_secrets()])

    @vault.post("/teams/{team_id}/vault/secrets", status_code=201, responses=ERRORS)
    async def create_secret(team_id: str, body: NewVaultSecret, http: Request) -> StoredSecret:
        """Store a value with its scopes (a `provider` preset's, or explicit `scopes`)."""
        _team(team_id)
        check_private(http, "vault secret")
        if body.environment != ENVIRONMENT:
            raise InvalidArgumentException(f"this server's vault has one environment, {ENVIRONMENT!r}")
        secret = await in_thread(store.create_secret, body.value.get_secret_value(),
                                 name=body.name or body.provider, provider=body.provider,
                                 scopes=body.scopes, rotation_interval_days=body.rotation_interval_days)
        return _stored(secret)

    @vault.post("/teams/{team_id}/vault/secrets/{secret_id}/rotate", responses=ERRORS)
    async def rotate_secret(team_id: str, secret_id: str, body: RotateVaultSecret, http: Request) -> StoredSecret:
        """A new value (scopes unchanged); sandboxes created from now on get it."""
        _team(team_id)
        check_private(http, "vault secret")
        return _stored(await in_thread(store.rotate_secret, name_of(secret_id), body.value.get_secret_value()))

    @vault.post("/teams/{team_id}/vault/secrets/{secret_id}/scopes", responses={**ERRORS, 409: {"model": ErrorBody}})
    async def update_scopes(team_id: str, secret_id: str, body: VaultScopes, http: Request) -> StoredSecret:
        """Replace the scopes. Narrowing is free; adding a host needs `value` (the value again,
        which replaces the stored one), else 409 — declaw's `update_scopes` keeps the value and
        so can only narrow here (docs/differences.md)."""
        _team(team_id)
        check_private(http, "vault secret", body.value)
        value = None if body.value is None else body.value.get_secret_value()
        return _stored(await in_thread(store.update_scopes, name_of(secret_id), list(body.scopes), value))

    @vault.delete("/teams/{team_id}/vault/secrets/{secret_id}", status_code=204, responses=ERRORS)
    async def delete_secret(team_id: str, secret_id: str) -> Response:
        _team(team_id)
        await in_thread(store.delete_secret, name_of(secret_id))
        return Response(status_code=204)

    @vault.get(PREFIX + "/vault/audit", responses=ERRORS)
    async def audit() -> list[VaultEvent]:
        """The vault's changes and refused changes, oldest first (ours; never a value)."""
        return await in_thread(store.audit_events)

    @vault.get("/vault/presets", responses=ERRORS)
    async def presets() -> Presets:
        """The provider catalogue (hosts and how the value is sent; no secret material)."""
        return Presets(presets=store.list_presets())
