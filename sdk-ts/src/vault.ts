/**
 * `Vault`: secrets held by the server (declaw's vault routes; declaw's JavaScript name). A
 * sandbox names them with `vaultRefs`; its guest sees `declaw:vault-managed`, the server adds
 * the value to requests to the secret's scoped hosts. Values are write-only, and are sent only
 * over TLS or to a server on loopback.
 */

import { Connection, ConnectionOpts } from "./connection.js";
import { InvalidArgumentError } from "./errors.js";
import { PREFIX } from "./sandbox.js";
import type * as wire from "./wire.js";

export type VaultScope = wire.VaultScope;
export type VaultPreset = wire.VaultPreset;
export type VaultEvent = wire.VaultEvent;

export interface VaultSecret {
  secretId: string;
  name: string;
  scopes: VaultScope[];
  createdAt: string;
  updatedAt: string;
  rotatedAt?: string;
  rotationIntervalDays: number;
  rotationDue: boolean;
}

export interface CreateSecretInput {
  value: string;
  /** Defaults to `provider`. */
  name?: string;
  /** A preset's key ("openai", "anthropic", ...: `listPresets()`), or explicit `scopes`. */
  provider?: string;
  scopes?: VaultScope[];
  rotationIntervalDays?: number;
}

const TEAM = "default";

function secret(raw: wire.StoredSecret): VaultSecret {
  return {
    secretId: raw.secret_id, name: raw.name, scopes: raw.scopes, createdAt: raw.created_at,
    updatedAt: raw.updated_at, rotatedAt: raw.rotated_at ?? undefined,
    rotationIntervalDays: raw.rotation_interval_days ?? 0, rotationDue: raw.rotation_due ?? false,
  };
}

export class Vault {
  private readonly conn: Connection;
  private team?: string;

  constructor(opts: ConnectionOpts = {}) {
    this.conn = new Connection(opts);
  }

  private async secretsPath(): Promise<string> {
    if (this.team === undefined) {
      const teams = (await this.conn.json<wire.TeamList>("GET", "/teams")).teams.filter((t) => t.name === TEAM);
      this.team = teams.length ? teams[0].team_id
        : (await this.conn.json<wire.Team>("POST", "/teams", { json: { name: TEAM } })).team_id;
    }
    return `/teams/${encodeURIComponent(this.team)}/vault/secrets`;
  }

  private async idOf(name: string): Promise<string> {
    const found = (await this.listSecrets()).find((s) => s.name === name);
    if (!found) throw new InvalidArgumentError(`no vault secret named ${JSON.stringify(name)} on the server`);
    return encodeURIComponent(found.secretId);
  }

  async createSecret(input: CreateSecretInput): Promise<VaultSecret> {
    this.conn.checkPrivate("vault secret");
    const json: wire.NewVaultSecret = {
      value: input.value, environment: "prod", name: input.name, provider: input.provider,
      scopes: input.scopes as unknown as Record<string, unknown>[] | undefined, rotation_interval_days: input.rotationIntervalDays ?? 0,
    };
    return secret(await this.conn.json<wire.StoredSecret>("POST", await this.secretsPath(), { json }));
  }

  async listSecrets(): Promise<VaultSecret[]> {
    return (await this.conn.json<wire.StoredSecrets>("GET", await this.secretsPath())).secrets.map(secret);
  }

  async rotateSecret(name: string, value: string): Promise<VaultSecret> {
    this.conn.checkPrivate("vault secret");
    const path = `${await this.secretsPath()}/${await this.idOf(name)}/rotate`;
    return secret(await this.conn.json<wire.StoredSecret>("POST", path, { json: { value } satisfies wire.RotateVaultSecret }));
  }

  /** Replace a secret's scopes. Narrowing is free; adding a host needs `value` (the value again,
   *  which replaces the stored one), else the server answers 409 (`ConflictError`): values are
   *  write-only, so whoever may change scopes must not be able to send one to a host they read. */
  async updateScopes(name: string, scopes: VaultScope[], opts: { value?: string } = {}): Promise<VaultSecret> {
    const json: wire.VaultScopes = { scopes: scopes as unknown as Record<string, unknown>[] };
    if (opts.value !== undefined) {
      this.conn.checkPrivate("vault secret");
      json.value = opts.value;
    }
    const path = `${await this.secretsPath()}/${await this.idOf(name)}/scopes`;
    return secret(await this.conn.json<wire.StoredSecret>("POST", path, { json }));
  }

  /** The vault's changes and refused changes, oldest first (never a value). */
  async auditEvents(): Promise<VaultEvent[]> {
    return this.conn.json<VaultEvent[]>("GET", `${PREFIX}/vault/audit`);
  }

  async deleteSecret(name: string): Promise<void> {
    await this.conn.fetch("DELETE", `${await this.secretsPath()}/${await this.idOf(name)}`);
  }

  async listPresets(): Promise<VaultPreset[]> {
    return (await this.conn.json<wire.Presets>("GET", "/vault/presets")).presets;
  }
}
