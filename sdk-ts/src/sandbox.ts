/** `Sandbox`: one sandbox on a declaw server (`declaw-wasm serve`), with E2B's API shape. */

import { Commands } from "./commands.js";
import { Connection, ConnectionOpts, LOOPBACK, ndjson } from "./connection.js";
import { errorFrom, InvalidArgumentError, SandboxError, SandboxNotFoundError } from "./errors.js";
import { Context, Execution, OutputMessage, Result, ExecutionError } from "./execution.js";
import { Filesystem } from "./files.js";
import { Pty } from "./pty.js";
import { VolumeAttachment, volumeAttachmentToJSON } from "./volumes.js";
import type * as wire from "./wire.js";

/** Where the server keeps what only our SDKs use (declaw_wasm/wire.py's PREFIX). */
export const PREFIX = "/declaw-wasm";

export interface SandboxInfo {
  sandboxId: string;
  templateId: string;
  name?: string;
  metadata: Record<string, string>;
  startedAt: Date;
  endAt: Date;
  state: "running" | "paused";
  cpuCount: number;
  memoryMB: number;
  /** The network policy in force (`allow_out`/`deny_out`), when one was given. */
  network?: Record<string, unknown>;
  allowInternetAccess?: boolean;
  lifecycle?: Record<string, unknown>;
}

/** declaw's network options (E2B's `allow_out`/`deny_out` spellings are accepted too): entries
 *  are IPs, CIDRs or domains (`*.example.com`); allow wins over deny. */
export interface SandboxNetworkOpts {
  allowOut?: string[];
  denyOut?: string[];
  allow_out?: string[];
  deny_out?: string[];
  /** false: requests to the sandbox's servers need its `trafficAccessToken()` (default true). */
  allowPublicTraffic?: boolean;
  allow_public_traffic?: boolean;
}

/** A secret the guest may use but never see: its environment variable holds a placeholder, and
 *  the server puts `value` in its place only in requests over TLS it verified to `hosts`. */
export interface SecretOpts {
  value: string;
  /** Where it may be sent: entries as in `allowOut` (domains, `*.domain`, IPs, CIDRs). */
  hosts: string[];
}

/** declaw's `SandboxLifecycle`. */
export interface SandboxLifecycle {
  /** "kill" (default) or "pause". */
  onTimeout?: string;
  autoResume?: boolean;
}

/** declaw's `SnapshotInfo` (what `createSnapshot` gives). */
export interface SnapshotInfo {
  snapshotId: string;
  sandboxId: string;
  createdAt?: Date;
}

/** declaw's `Snapshot`: a stored snapshot ("pause", "periodic" or "manual"). */
export interface Snapshot extends SnapshotInfo {
  source: string;
  memBlobKey: string;
  vmstateBlobKey: string;
  memSizeBytes?: number;
  pauseDurationMs?: number;
  /** What the snapshot takes in the server's state store. */
  sizeBytes?: number;
}

export interface SandboxOpts extends ConnectionOpts {
  /** "code-interpreter" (default) or "base". */
  template?: string;
  /** The sandbox's lifetime in seconds (default 300). `timeoutMs` (E2B's) is accepted too. */
  timeout?: number;
  timeoutMs?: number;
  metadata?: Record<string, string>;
  envs?: Record<string, string>;
  /** The sandbox's network policy (docs/egress.md): no policy, the public internet. */
  network?: SandboxNetworkOpts;
  /** false: no outbound traffic at all (wins over `network`). Default true. */
  allowInternetAccess?: boolean;
  /** declaw's security policy as its JSON (an object, or the JSON text): guards, audit,
   *  `network` (used when `network` is not given). */
  security?: Record<string, unknown> | string;
  /** Secret values held by the server, never by the guest. Sent only over TLS or to loopback. */
  secrets?: Record<string, SecretOpts>;
  /** ENV_NAME -> the name of a secret in the server's vault (`Vault`): the guest sees
   *  `declaw:vault-managed`, the server adds the secret to requests to its scoped hosts. */
  vaultRefs?: Record<string, string>;
  /** Volumes to attach (`Volumes`; `mode` "copy" by default, "mount", "mount-ro"). */
  volumes?: VolumeAttachment[];
  lifecycle?: SandboxLifecycle;
}

const ALL_TRAFFIC = "0.0.0.0/0";

/** The create request's JSON (declaw's shapes, as its SDKs send them). */
function createBody(opts: SandboxOpts): wire.CreateSandbox {
  const body: wire.CreateSandbox = {
    template: opts.template, timeout: seconds(opts.timeout, opts.timeoutMs), metadata: opts.metadata,
    envs: opts.envs, vault_refs: opts.vaultRefs,
  };
  if (opts.security !== undefined) {
    body.security = { policy_json: typeof opts.security === "string" ? opts.security : JSON.stringify(opts.security) };
  }
  if (opts.allowInternetAccess === false) {
    body.allow_internet_access = false;
    body.network = { deny_out: [ALL_TRAFFIC] };
  } else if (opts.network !== undefined) {
    const allow = opts.network.allowOut ?? opts.network.allow_out;
    const deny = opts.network.denyOut ?? opts.network.deny_out;
    const open = opts.network.allowPublicTraffic ?? opts.network.allow_public_traffic;
    body.network = { ...(allow ? { allow_out: allow } : {}), ...(deny ? { deny_out: deny } : {}),
                     ...(open === false ? { allow_public_traffic: false } : {}) };
  }
  if (opts.lifecycle !== undefined) {
    body.lifecycle = { on_timeout: opts.lifecycle.onTimeout ?? "kill", auto_resume: opts.lifecycle.autoResume ?? false };
  }
  if (opts.volumes !== undefined) body.volumes = opts.volumes.map(volumeAttachmentToJSON);
  if (opts.secrets !== undefined) {
    body.secrets = Object.fromEntries(Object.entries(opts.secrets).map(
      ([name, s]) => [name, { value: s.value, hosts: s.hosts }]));
  }
  return body;
}

export interface RunCodeOpts {
  language?: string;
  context?: Context;
  onStdout?: (msg: OutputMessage) => void | Promise<void>;
  onStderr?: (msg: OutputMessage) => void | Promise<void>;
  onResult?: (result: Result) => void | Promise<void>;
  onError?: (error: ExecutionError) => void | Promise<void>;
  envs?: Record<string, string>;
  /** Seconds (default 300; 0: none). `timeoutMs` is accepted too. */
  timeout?: number;
  timeoutMs?: number;
}

type Raw = Record<string, any>;

function sandboxInfo(raw: Raw): SandboxInfo {
  return {
    sandboxId: raw.sandbox_id, templateId: raw.template_id, name: raw.name ?? undefined,
    metadata: raw.metadata ?? {}, startedAt: new Date(raw.started_at), endAt: new Date(raw.end_at),
    state: raw.state, cpuCount: raw.cpu_count, memoryMB: raw.memory_mb,
    network: raw.network ?? undefined, allowInternetAccess: raw.allow_internet_access ?? undefined,
    lifecycle: raw.lifecycle ?? undefined,
  };
}

function snapshotOf(raw: wire.Snapshot): Snapshot {
  return {
    snapshotId: raw.snapshot_id, sandboxId: raw.sandbox_id,
    createdAt: raw.created_at ? new Date(raw.created_at) : undefined, source: raw.source ?? "manual",
    memBlobKey: raw.mem_blob_key ?? "", vmstateBlobKey: raw.vmstate_blob_key ?? "",
    memSizeBytes: raw.mem_size_bytes ?? undefined, pauseDurationMs: raw.pause_duration_ms ?? undefined,
    sizeBytes: raw.size_bytes ?? undefined,
  };
}

function seconds(timeout?: number, timeoutMs?: number): number | undefined {
  return timeout ?? (timeoutMs !== undefined ? timeoutMs / 1000 : undefined);
}

async function safely(callback: ((value: any) => unknown) | undefined, value: unknown): Promise<void> {
  try {
    await callback?.(value);
  } catch {
    // the caller's callback bug must not break the stream
  }
}

export class Sandbox {
  readonly files: Filesystem;
  readonly commands: Commands;
  readonly pty: Pty;
  private readonly base: string;

  private readonly ours: string;

  private constructor(readonly sandboxId: string, private readonly conn: Connection) {
    // declaw's paths for what declaw has; ours (cells, contexts, NDJSON streams, the PTY socket)
    // under the server's own prefix
    this.base = `/sandboxes/${encodeURIComponent(sandboxId)}`;
    this.ours = `${PREFIX}${this.base}`;
    this.files = new Filesystem(conn, this.base, this.ours);
    this.commands = new Commands(conn, this.base, this.ours);
    this.pty = new Pty(conn, this.base, this.ours, this.commands);
  }

  /** A new sandbox on the server (`DECLAW_DOMAIN`, key `DECLAW_API_KEY`, or the options). */
  static async create(opts: SandboxOpts = {}): Promise<Sandbox> {
    const conn = new Connection(opts);
    if (opts.secrets && Object.keys(opts.secrets).length) conn.checkPrivate("secrets");
    const raw = await conn.json<Raw>("POST", "/sandboxes", { json: createBody(opts) });
    return new Sandbox(raw.sandbox_id, conn);
  }

  /** The live sandbox with this id; `timeout` can only extend its lifetime. A paused one is
   *  resumed (E2B's rule), from the server's state store. */
  static async connect(sandboxId: string, opts: ConnectionOpts & { timeout?: number } = {}): Promise<Sandbox> {
    const conn = new Connection(opts);
    const info = await conn.json<Raw>("GET", `/sandboxes/${encodeURIComponent(sandboxId)}`,
                                      { query: { timeout: opts.timeout } });
    const sandbox = new Sandbox(sandboxId, conn);
    if (info.state === "paused") await sandbox.resume({ timeout: opts.timeout });
    return sandbox;
  }

  /** Resume a paused sandbox by id (declaw's `resume`). */
  static async resume(sandboxId: string, opts: ConnectionOpts & { timeout?: number } = {}): Promise<Sandbox> {
    const sandbox = new Sandbox(sandboxId, new Connection(opts));
    return sandbox.resume({ timeout: opts.timeout });
  }

  /** declaw's `restore`: the sandbox (same id) as one of its snapshots was (default: the latest,
   *  preferring pause > periodic > manual). */
  static async restore(sandboxId: string,
                       opts: ConnectionOpts & { snapshotId?: string; timeout?: number } = {}): Promise<Sandbox> {
    const conn = new Connection(opts);
    await conn.json("POST", `/sandboxes/${encodeURIComponent(sandboxId)}/restore`, {
      query: { snapshot_id: opts.snapshotId }, json: { timeout: opts.timeout } satisfies wire.ResumeSandbox,
    });
    return new Sandbox(sandboxId, conn);
  }

  /** Every snapshot in the server's state store (or one sandbox's), newest first. */
  static async listSnapshots(opts: ConnectionOpts & { sandboxId?: string } = {}): Promise<Snapshot[]> {
    const found = await new Connection(opts).json<wire.SnapshotList>("GET", "/snapshots",
                                                                     { query: { sandbox_id: opts.sandboxId } });
    return found.snapshots.map(snapshotOf);
  }

  /** The server's live sandboxes, newest first. */
  static async list(opts: ConnectionOpts = {}): Promise<SandboxInfo[]> {
    return (await new Connection(opts).json<wire.SandboxList>("GET", "/sandboxes")).sandboxes.map(sandboxInfo);
  }

  /** Kill a sandbox by id; false if it was already gone. */
  static async kill(sandboxId: string, opts: ConnectionOpts = {}): Promise<boolean> {
    return (await new Connection(opts).json<Raw>("DELETE", `/sandboxes/${encodeURIComponent(sandboxId)}`)).killed;
  }

  /** Stop everything in the sandbox and delete its files; false if it was already gone. */
  async kill(): Promise<boolean> {
    return (await this.conn.json<Raw>("DELETE", this.base)).killed;
  }

  /** Kill the sandbox `timeout` seconds from now. */
  async setTimeout(timeout: number): Promise<void> {
    await this.conn.fetch("PATCH", `${this.base}/timeout`, { json: { timeout } satisfies wire.SetTimeout });
  }

  async getInfo(): Promise<SandboxInfo> {
    return sandboxInfo(await this.conn.json<Raw>("GET", this.base));
  }

  /** Where a server listening on the sandbox's `port` is reached (E2B's `getHost`: a host, no
   *  scheme): `<port>-<sandbox id>.localhost:<server port>` for a server on loopback (browsers
   *  resolve every `*.localhost` name to loopback), `<port>-<sandbox id>.<server name>` otherwise.
   *  The server answers it from the sandbox's server, with no API key (docs/inbound.md). */
  getHost(port: number): string {
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      throw new InvalidArgumentError(`port must be a whole number from 1 to 65535, got ${port}`);
    }
    const url = new URL(this.conn.url);
    const name = LOOPBACK.test(url.hostname) ? "localhost" : url.hostname;
    return `${port}-${this.sandboxId.toLowerCase()}.${name}${url.port ? ":" + url.port : ""}`;
  }

  /** The token a request to `getHost(port)` must carry in `e2b-traffic-access-token` when the
   *  sandbox was created with `network: { allowPublicTraffic: false }`; else undefined. */
  async trafficAccessToken(): Promise<string | undefined> {
    const found = await this.conn.json<{ traffic_access_token: string | null }>(
      "GET", `${this.ours}/traffic-access-token`);
    return found.traffic_access_token ?? undefined;
  }

  /** The sandbox's outbound network events, oldest first: each connection and request with
   *  the policy's decision, bytes, duration and the names (never values) of secrets injected. */
  async auditEvents(): Promise<wire.AuditEvent[]> {
    return this.conn.json<wire.AuditEvent[]>("GET", `${this.ours}/audit`);
  }

  /** Snapshot the sandbox into the server's state store and free it; false if paused already. */
  async pause(): Promise<boolean> {
    return (await this.conn.json<wire.Paused>("POST", `${this.base}/pause`)).paused;
  }

  /** Bring the paused sandbox back (its files and code contexts); `timeout`: its new lifetime. */
  async resume(opts: { timeout?: number } = {}): Promise<Sandbox> {
    await this.conn.json("POST", `${this.base}/resume`, { json: { timeout: opts.timeout } satisfies wire.ResumeSandbox });
    return this;
  }

  /** Snapshot files and code contexts; the sandbox goes on. */
  async createSnapshot(): Promise<SnapshotInfo> {
    const { snapshotId, sandboxId, createdAt } = await this.snapshot();
    return { snapshotId, sandboxId, createdAt };
  }

  /** declaw's `snapshot()`: `createSnapshot`, answered as a `Snapshot`. */
  async snapshot(): Promise<Snapshot> {
    return snapshotOf(await this.conn.json<wire.Snapshot>("POST", `${this.base}/snapshot`, { json: {} }));
  }

  async listSnapshots(): Promise<Snapshot[]> {
    return (await this.conn.json<wire.SnapshotList>("GET", `${this.base}/snapshots`)).snapshots.map(snapshotOf);
  }

  /** Delete one of the sandbox's snapshots (true, also if it was gone). */
  async deleteSnapshot(snapshotId: string): Promise<boolean> {
    await this.conn.json("DELETE", `${this.base}/snapshots/${encodeURIComponent(snapshotId)}`);
    return true;
  }

  /** `count` new sandboxes with this one's files and code contexts, diverging from here. */
  async fork(count = 1): Promise<Sandbox[]> {
    const forked = await this.conn.json<wire.Forked>("POST", `${this.ours}/fork`,
                                                     { json: { count } satisfies wire.ForkSandbox });
    return forked.sandboxes.map((info) => new Sandbox(info.sandbox_id, this.conn));
  }

  async isRunning(): Promise<boolean> {
    try {
      return (await this.conn.json<wire.Status>("GET", `${this.base}/status`)).is_running;
    } catch (err) {
      if (err instanceof SandboxError) return false;
      throw err;
    }
  }

  /** Run a cell in a stateful Python context (the default one unless `context` is given).
   *  Code errors land in `execution.error`; a cell past its timeout throws `TimeoutError`. */
  async runCode(code: string, opts: RunCodeOpts = {}): Promise<Execution> {
    const response = await this.conn.fetch("POST", `${this.ours}/execute`, {
      stream: true,
      json: { code, language: opts.language, context_id: opts.context?.id, envs: opts.envs,
              timeout: seconds(opts.timeout, opts.timeoutMs) ?? 300 } satisfies wire.RunCode,
    });
    const execution = new Execution();
    for await (const line of ndjson<wire.CellLine>(response)) {
      if (line.type === "stdout" || line.type === "stderr") {
        execution.logs[line.type].push(line.text);
        const message = { line: line.text, timestamp: new Date(line.timestamp ?? Date.now()), error: line.type === "stderr" };
        await safely(line.type === "stdout" ? opts.onStdout : opts.onStderr, message);
      } else if (line.type === "result") {
        const result = new Result(line);
        execution.results.push(result);
        await safely(opts.onResult, result);
      } else if (line.type === "error") {
        execution.error = { name: line.name, value: line.value, traceback: line.traceback };
        await safely(opts.onError, execution.error);
      } else if (line.type === "number_of_executions") {
        execution.executionCount = line.execution_count ?? undefined;
      } else if (line.type === "end_of_execution") {
        return execution;
      } else if (line.type === "exception") {
        throw errorFrom(line);
      }
    }
    throw new SandboxError("the declaw server ended the cell's stream early");
  }

  async createCodeContext(opts: { cwd?: string; language?: string } = {}): Promise<Context> {
    return this.conn.json<Context>("POST", `${this.ours}/contexts`, { json: { cwd: opts.cwd, language: opts.language } satisfies wire.CreateContext });
  }

  async listCodeContexts(): Promise<Context[]> {
    return this.conn.json<Context[]>("GET", `${this.ours}/contexts`);
  }

  async restartCodeContext(context: Context | string): Promise<void> {
    const id = typeof context === "string" ? context : context.id;
    await this.conn.fetch("POST", `${this.ours}/contexts/${encodeURIComponent(id)}/restart`);
  }

  async removeCodeContext(context: Context | string): Promise<void> {
    const id = typeof context === "string" ? context : context.id;
    await this.conn.fetch("DELETE", `${this.ours}/contexts/${encodeURIComponent(id)}`);
  }
}

export { SandboxNotFoundError };
