/** `sbx.files`: the sandbox's file tree (E2B's Filesystem). Reads and writes are streamed. */

import { Connection } from "./connection.js";
import { InvalidArgumentError } from "./errors.js";
import type * as wire from "./wire.js";

export type FileType = "file" | "dir" | "symlink";

export interface WriteInfo {
  name: string;
  type?: FileType;
  path: string;
}

export interface EntryInfo extends WriteInfo {
  size: number;
  mode: number;
  permissions: string;
  owner: string;
  group: string;
  modifiedTime: Date;
  symlinkTarget?: string;
}

export type WriteData = string | ArrayBuffer | ArrayBufferView | Blob | ReadableStream<Uint8Array>;

type Raw = Record<string, any>;

function writeInfo(raw: Raw): WriteInfo {
  return { name: raw.name, type: raw.type ?? undefined, path: raw.path };
}

function entryInfo(raw: Raw): EntryInfo {
  return {
    ...writeInfo(raw),
    size: raw.size,
    mode: raw.mode,
    permissions: raw.permissions,
    owner: raw.owner,
    group: raw.group,
    modifiedTime: new Date(raw.modified_time),
    symlinkTarget: raw.symlink_target ?? undefined,
  };
}

export class Filesystem {
  constructor(private readonly conn: Connection, private readonly base: string,
              private readonly ours: string) {}

  /** The file's content: `text` (default), `bytes` (Uint8Array), `blob`, or `stream`. */
  async read(path: string): Promise<string>;
  async read(path: string, opts: { format: "text" }): Promise<string>;
  async read(path: string, opts: { format: "bytes" }): Promise<Uint8Array>;
  async read(path: string, opts: { format: "blob" }): Promise<Blob>;
  async read(path: string, opts: { format: "stream" }): Promise<ReadableStream<Uint8Array>>;
  async read(path: string, opts: { format?: "text" | "bytes" | "blob" | "stream" } = {}): Promise<unknown> {
    const format = opts.format ?? "text";
    if (!["text", "bytes", "blob", "stream"].includes(format)) {
      throw new InvalidArgumentError(`format must be text, bytes, blob or stream, got ${format}`);
    }
    const response = await this.conn.fetch("GET", `${this.base}/files`, { query: { path }, stream: true });
    if (format === "stream") return response.body;
    if (format === "blob") return response.blob();
    if (format === "bytes") return new Uint8Array(await response.arrayBuffer());
    return response.text();
  }

  /** Write (or overwrite) a file, creating missing parent folders. */
  async write(path: string, data: WriteData): Promise<WriteInfo> {
    let body: BodyInit;
    if (typeof data === "string" || data instanceof Blob || data instanceof ReadableStream ||
        data instanceof ArrayBuffer) {
      body = data as BodyInit;
    } else if (ArrayBuffer.isView(data)) {
      body = new Uint8Array(data.buffer, data.byteOffset, data.byteLength) as unknown as BodyInit;
    } else {
      throw new InvalidArgumentError("data must be a string, ArrayBuffer, typed array, Blob or ReadableStream");
    }
    const stream = data instanceof ReadableStream;
    return writeInfo(await this.conn.json<Raw>("PUT", `${this.base}/files/raw`, { query: { path }, body, stream }));
  }

  /** Entries under `path`, `depth` levels deep (default 1), sorted by path. */
  async list(path: string, opts: { depth?: number } = {}): Promise<EntryInfo[]> {
    const raw = await this.conn.json<Raw[]>("GET", `${this.base}/files/list`, {
      query: { path, depth: opts.depth ?? 1 },
    });
    return raw.map(entryInfo);
  }

  async exists(path: string): Promise<boolean> {
    return (await this.conn.json<Raw>("GET", `${this.base}/files/exists`, { query: { path } })).exists;
  }

  async getInfo(path: string): Promise<EntryInfo> {
    return entryInfo(await this.conn.json<Raw>("GET", `${this.base}/files/info`, { query: { path } }));
  }

  /** Remove a file or a folder with its content; a missing path is not an error. */
  async remove(path: string): Promise<void> {
    await this.conn.fetch("DELETE", `${this.base}/files`, { query: { path } });
  }

  async rename(oldPath: string, newPath: string): Promise<EntryInfo> {
    return entryInfo(await this.conn.json<Raw>("PATCH", `${this.base}/files`, {
      json: { old_path: oldPath, new_path: newPath } satisfies wire.Rename,
    }));
  }

  /** Create a folder and its parents; false if it already existed. */
  async makeDir(path: string): Promise<boolean> {
    return (await this.conn.json<Raw>("POST", `${this.base}/files/mkdir`, { json: { path } satisfies wire.MakeDir })).created;
  }
}
