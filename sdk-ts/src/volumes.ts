/**
 * `Volumes`: named file trees on the server (its state store), attached to sandboxes with
 * `Sandbox.create({ volumes: [...] })`; declaw's JavaScript names (`Volumes.create`, `files`,
 * `locks`, `VolumeInfo`, ...) over declaw's routes, which `declaw-wasm serve` serves.
 */

import { Connection, ConnectionOpts } from "./connection.js";
import type * as wire from "./wire.js";

export type VolumeAttachMode = "copy" | "mount" | "mount-ro";

/** A volume attached to a sandbox: `copy` (default: a private copy made at create), `mount`
 *  (live, shared by the sandboxes mounting it, written back), `mount-ro` (live, read-only). */
export interface VolumeAttachment {
  volumeId: string;
  mountPath: string;
  mode?: VolumeAttachMode;
  /** A folder inside the volume: live mounts only. */
  subpath?: string;
}

export interface VolumeInfo {
  volumeId: string;
  ownerId: string;
  name: string;
  blobKey: string;
  sizeBytes: number;
  contentType: string;
  metadata: Record<string, string>;
  createdAt: string;
  backend: string;
  quotaBytes: number;
  updatedAt: string;
}

export interface FileEntry {
  name: string;
  path: string;
  isDir: boolean;
  size: number;
  modTime: string;
  mode: number;
}

/** An entry with its compare-and-set token (`write(path, data, { ifVersion })`). */
export interface FileInfo extends FileEntry {
  version: string;
}

export interface LockLease {
  token: string;
  ttlSeconds: number;
  expiresAt: string;
}

export interface LockStatus {
  held: boolean;
  expiresInMs: number;
}

export type VolumeData = Uint8Array | ArrayBuffer | Blob | ReadableStream<Uint8Array>;

/** The wire form (snake_case; `mode` omitted for copy, as declaw's SDKs send it). */
export function volumeAttachmentToJSON(att: VolumeAttachment): Record<string, string> {
  const out: Record<string, string> = { volume_id: att.volumeId, mount_path: att.mountPath };
  if (att.mode && att.mode !== "copy") out.mode = att.mode;
  if (att.subpath) out.subpath = att.subpath;
  return out;
}

function volumeInfo(raw: wire.Volume): VolumeInfo {
  return {
    volumeId: raw.volume_id, ownerId: raw.owner_id, name: raw.name, blobKey: raw.blob_key,
    sizeBytes: raw.size_bytes, contentType: raw.content_type, metadata: raw.metadata ?? {},
    createdAt: raw.created_at, backend: raw.backend ?? "", quotaBytes: raw.quota_bytes ?? 0,
    updatedAt: raw.updated_at ?? "",
  };
}

function fileInfo(raw: wire.FileEntry): FileInfo {
  return { name: raw.name, path: raw.path, isDir: raw.is_dir, size: raw.size, modTime: raw.mod_time,
           mode: raw.mode, version: raw.version ?? "" };
}

function fileEntry(raw: wire.FileEntry): FileEntry {
  const { version: _version, ...entry } = fileInfo(raw);
  return entry;
}

function lease(raw: wire.LockHeld): LockLease {
  return { token: raw.token, ttlSeconds: raw.ttl_seconds, expiresAt: raw.expires_at };
}

function body(data: VolumeData): BodyInit {
  if (data instanceof Uint8Array) {
    return new Uint8Array(data.buffer, data.byteOffset, data.byteLength) as unknown as BodyInit;
  }
  return data as BodyInit;
}

const at = (volumeId: string, rest = "") => `/volumes/${encodeURIComponent(volumeId)}${rest}`;

/** Files of one volume (`Volumes.files(volumeId)`); paths inside the volume ("/" its root). */
export class VolumeFiles {
  private readonly conn: Connection;

  constructor(readonly volumeId: string, opts: ConnectionOpts = {}) {
    this.conn = new Connection(opts);
  }

  /** Write `data` at `path` (parents made); the path written. `ifVersion` (from `info`; ""
   *  for "must not exist"): `ConflictError` if the file changed since. */
  async write(path: string, data: VolumeData, opts: { ifVersion?: string } = {}): Promise<string> {
    const raw = await this.conn.json<wire.VolumePath>("PUT", at(this.volumeId, "/files/raw"), {
      query: { path, if_version: opts.ifVersion }, body: body(data) });
    return raw.path;
  }

  async read(path: string): Promise<Uint8Array> {
    return this.conn.bytes("GET", at(this.volumeId, "/files/raw"), { query: { path } });
  }

  async list(path = "/"): Promise<FileEntry[]> {
    const raw = await this.conn.json<{ entries: wire.FileEntry[] }>("GET", at(this.volumeId, "/files/list"), { query: { path } });
    return raw.entries.map(fileEntry);
  }

  async info(path: string): Promise<FileInfo> {
    return fileInfo(await this.conn.json<wire.FileEntry>("GET", at(this.volumeId, "/files/info"), { query: { path } }));
  }

  async exists(path: string): Promise<boolean> {
    return (await this.conn.json<wire.Exists>("GET", at(this.volumeId, "/files/exists"), { query: { path } })).exists;
  }

  async remove(path: string, opts: { recursive?: boolean } = {}): Promise<void> {
    await this.conn.fetch("DELETE", at(this.volumeId, "/files"), { query: { path, recursive: String(opts.recursive ?? false) } });
  }

  async rename(oldPath: string, newPath: string): Promise<{ oldPath: string; newPath: string }> {
    const raw = await this.conn.json<wire.Renamed>("PATCH", at(this.volumeId, "/files"), {
      json: { old_path: oldPath, new_path: newPath } satisfies wire.Rename });
    return { oldPath: raw.old_path, newPath: raw.new_path };
  }

  async mkdir(path: string): Promise<string> {
    return (await this.conn.json<wire.VolumePath>("POST", at(this.volumeId, "/files/mkdir"), {
      json: { path } satisfies wire.MakeDir })).path;
  }
}

/** Advisory locks over (volume, path), with a TTL and tokens (`Volumes.locks(volumeId)`). */
export class VolumeLocks {
  private readonly conn: Connection;

  constructor(readonly volumeId: string, opts: ConnectionOpts = {}) {
    this.conn = new Connection(opts);
  }

  /** `ConflictError` while another holds it (default TTL 30 s). */
  async acquire(path: string, ttlSeconds?: number): Promise<LockLease> {
    return lease(await this.conn.json<wire.LockHeld>("POST", at(this.volumeId, "/locks"), {
      json: { path, ttl_seconds: ttlSeconds } satisfies wire.LockAcquire }));
  }

  /** true if released while valid, false if it had expired; `ConflictError` for another's token. */
  async release(path: string, token: string): Promise<boolean> {
    return (await this.conn.json<wire.Released>("DELETE", at(this.volumeId, "/locks"), {
      json: { path, token } satisfies wire.LockToken })).released;
  }

  async renew(path: string, token: string, ttlSeconds?: number): Promise<LockLease> {
    return lease(await this.conn.json<wire.LockHeld>("POST", at(this.volumeId, "/locks/renew"), {
      json: { path, token, ttl_seconds: ttlSeconds } satisfies wire.LockToken }));
  }

  async status(path: string): Promise<LockStatus> {
    const raw = await this.conn.json<wire.LockStatus>("GET", at(this.volumeId, "/locks"), { query: { path } });
    return { held: raw.held, expiresInMs: raw.expires_in_ms };
  }
}

export class Volumes {
  /** A volume from `data` (tar.gz, or tar/tar.bz2/tar.xz bytes: regular files and folders kept,
   *  links, devices and `..` dropped by the server), or empty without data. */
  static async create(name: string, data?: VolumeData, opts: ConnectionOpts & { contentType?: string } = {}): Promise<VolumeInfo> {
    const conn = new Connection(opts);
    const empty = data === undefined || (data instanceof Uint8Array && data.length === 0) ||
      (data instanceof ArrayBuffer && data.byteLength === 0);
    return volumeInfo(await conn.json<wire.Volume>("POST", "/volumes", {
      query: { name }, ...(empty ? {} : { body: body(data!), contentType: opts.contentType ?? "application/gzip" }) }));
  }

  static async empty(name: string, opts: ConnectionOpts = {}): Promise<VolumeInfo> {
    return volumeInfo(await new Connection(opts).json<wire.Volume>("POST", "/volumes/empty", { query: { name } }));
  }

  static async ingest(name: string, data: VolumeData, opts: ConnectionOpts = {}): Promise<VolumeInfo> {
    return volumeInfo(await new Connection(opts).json<wire.Volume>("POST", "/volumes/ingest", {
      query: { name }, body: body(data), contentType: "application/gzip" }));
  }

  /** A new volume from a folder (or file) of a live sandbox (default name "snapshot"). */
  static async snapshot(sandboxId: string, path: string, name?: string, opts: ConnectionOpts = {}): Promise<VolumeInfo> {
    return volumeInfo(await new Connection(opts).json<wire.Volume>(
      "POST", `/sandboxes/${encodeURIComponent(sandboxId)}/volumes/snapshot`, { query: { path, name } }));
  }

  /** A new volume from where `volumeId` is attached in the sandbox ("<source>-commit"). */
  static async commit(sandboxId: string, volumeId: string, name?: string, opts: ConnectionOpts = {}): Promise<VolumeInfo> {
    return volumeInfo(await new Connection(opts).json<wire.Volume>(
      "POST", `/sandboxes/${encodeURIComponent(sandboxId)}/volumes/${encodeURIComponent(volumeId)}/commit`,
      { query: { name } }));
  }

  static async get(volumeId: string, opts: ConnectionOpts = {}): Promise<VolumeInfo> {
    return volumeInfo(await new Connection(opts).json<wire.Volume>("GET", at(volumeId)));
  }

  static async list(opts: ConnectionOpts = {}): Promise<VolumeInfo[]> {
    return (await new Connection(opts).json<{ volumes: wire.Volume[] }>("GET", "/volumes")).volumes.map(volumeInfo);
  }

  /** The volume as tar.gz bytes. */
  static async download(volumeId: string, opts: ConnectionOpts = {}): Promise<Uint8Array> {
    return new Connection(opts).bytes("GET", at(volumeId, "/download"));
  }

  static async delete(volumeId: string, opts: ConnectionOpts = {}): Promise<void> {
    await new Connection(opts).fetch("DELETE", at(volumeId));
  }

  static files(volumeId: string, opts: ConnectionOpts = {}): VolumeFiles {
    return new VolumeFiles(volumeId, opts);
  }

  static locks(volumeId: string, opts: ConnectionOpts = {}): VolumeLocks {
    return new VolumeLocks(volumeId, opts);
  }
}
