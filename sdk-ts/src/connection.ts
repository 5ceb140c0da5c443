/**
 * One declaw server: base URL, API key, JSON requests, NDJSON streams, and error mapping.
 * Uses Node's built-in fetch (Node >= 20): no runtime dependencies.
 */

import { AuthenticationError, errorFrom, InvalidArgumentError, SandboxError, TimeoutError } from "./errors.js";

export interface ConnectionOpts {
  /** `host:port` or a URL; default `DECLAW_DOMAIN`, then `127.0.0.1:8080`. */
  domain?: string;
  /** Default `DECLAW_API_KEY`. */
  apiKey?: string;
  /** Milliseconds for one plain request (not streams); default 60 000, 0: none. */
  requestTimeoutMs?: number;
}

export const LOOPBACK = /^(localhost|127\.\d+\.\d+\.\d+|\[?::1\]?)$/;

/** `host:port` or a URL -> base URL (http on loopback, https elsewhere without a scheme). */
export function baseUrl(domain: string): string {
  const trimmed = domain.trim().replace(/\/+$/, "");
  if (trimmed.includes("://")) {
    const url = new URL(trimmed);
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new SandboxError(`DECLAW_DOMAIN must be host:port or an http(s) URL, got ${domain}`);
    }
    return trimmed;
  }
  const host = new URL(`http://${trimmed}`).hostname;
  return `${LOOPBACK.test(host) ? "http" : "https"}://${trimmed}`;
}

export class Connection {
  readonly url: string;
  private readonly headers: Record<string, string>;
  private readonly requestTimeoutMs: number;

  constructor(opts: ConnectionOpts = {}) {
    const domain = opts.domain ?? process.env.DECLAW_DOMAIN ?? "127.0.0.1:8080";
    this.url = baseUrl(domain);
    const apiKey = opts.apiKey ?? process.env.DECLAW_API_KEY;
    this.headers = apiKey ? { "X-API-Key": apiKey } : {};
    this.requestTimeoutMs = opts.requestTimeoutMs ?? 60_000;
  }

  /** Refuse to send secret values (`what`) unless the connection is TLS or stays on this
   *  machine (loopback): over plain HTTP to another machine anyone on the way could read them. */
  checkPrivate(what: string): void {
    const url = new URL(this.url);
    if (url.protocol !== "https:" && !LOOPBACK.test(url.hostname)) {
      throw new InvalidArgumentError(
        `${what}: refusing to send secret values to ${this.url} over plain HTTP (anyone on the way could ` +
        "read them); use an https:// server URL, or a server on loopback");
    }
  }

  /** A checked response (errors thrown as the SDK's classes). `stream`: no request timeout. */
  async fetch(method: string, path: string, init: {
    query?: Record<string, string | number | undefined>;
    json?: unknown;
    body?: BodyInit;
    contentType?: string;
    stream?: boolean;
    signal?: AbortSignal;
  } = {}): Promise<Response> {
    const url = new URL(this.url + path);
    for (const [k, v] of Object.entries(init.query ?? {})) {
      if (v !== undefined) url.searchParams.set(k, String(v));
    }
    const headers: Record<string, string> = { ...this.headers };
    let body: BodyInit | undefined = init.body;
    if (init.json !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(init.json);
    } else if (body !== undefined) {
      headers["content-type"] = init.contentType ?? "application/octet-stream";
    } else if (method === "POST") {
      // a keyless server refuses a POST without a type: a web page could send one cross-site
      headers["content-type"] = "application/json";
    }
    const signals: AbortSignal[] = [];
    if (init.signal) signals.push(init.signal);
    if (!init.stream && this.requestTimeoutMs > 0) signals.push(AbortSignal.timeout(this.requestTimeoutMs));
    let response: Response;
    try {
      response = await fetch(url, {
        method, headers, body,
        signal: signals.length ? AbortSignal.any(signals) : undefined,
        // a ReadableStream body is sent as it is produced
        ...(body instanceof ReadableStream ? { duplex: "half" } : {}),
      } as RequestInit);
    } catch (err) {
      if ((err as Error)?.name === "TimeoutError") {
        throw new TimeoutError(`request to the declaw server timed out: ${method} ${path}`);
      }
      throw new SandboxError(`cannot reach the declaw server at ${this.url}: ${(err as Error)?.message ?? err}`);
    }
    if (response.status >= 400) {
      const text = await response.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // not JSON: keep the text
      }
      throw errorFrom(parsed, response.status);
    }
    return response;
  }

  /** A WebSocket to `path`, with the API key (Node >= 22, or Node 20 with
   *  --experimental-websocket: the SDK takes no dependencies). */
  webSocket(path: string): WebSocket {
    const WS = (globalThis as any).WebSocket;
    if (typeof WS !== "function") {
      throw new SandboxError("PTYs need a WebSocket client: Node >= 22, or Node 20 with --experimental-websocket");
    }
    const socket = new WS(this.url.replace(/^http/, "ws") + path, { headers: this.headers });
    socket.binaryType = "arraybuffer";
    return socket;
  }

  async json<T>(method: string, path: string, init: Parameters<Connection["fetch"]>[2] = {}): Promise<T> {
    const response = await this.fetch(method, path, init);
    const text = await response.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }

  async bytes(method: string, path: string, init: Parameters<Connection["fetch"]>[2] = {}): Promise<Uint8Array> {
    const response = await this.fetch(method, path, init);
    return new Uint8Array(await response.arrayBuffer());
  }
}

/** The lines of an NDJSON response, parsed, as they arrive. */
export async function* ndjson<T = Record<string, any>>(response: Response): AsyncGenerator<T> {
  if (!response.body) return;
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let newline: number;
      while ((newline = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, newline).trim();
        buffer = buffer.slice(newline + 1);
        if (line) yield JSON.parse(line);
      }
    }
  } catch (err) {
    if (err instanceof AuthenticationError || err instanceof SandboxError) throw err;
    throw new SandboxError(`the connection to the declaw server broke: ${(err as Error)?.message ?? err}`);
  }
  buffer += decoder.decode();
  if (buffer.trim()) yield JSON.parse(buffer);
}
