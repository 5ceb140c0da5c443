/**
 * `sbx.pty`: interactive shells on a terminal (E2B's Pty). The output comes over a WebSocket
 * (`/sandboxes/{id}/pty/{pid}`) as the guest writes it; stdin and resizes go up the same socket.
 */

import { CommandResult, Commands } from "./commands.js";
import { Connection } from "./connection.js";
import { errorFrom, NotFoundError } from "./errors.js";
import type * as wire from "./wire.js";

export interface PtySize {
  rows: number;
  cols: number;
}

export interface PtyCreateOpts extends PtySize {
  onData?: (data: Uint8Array) => void | Promise<void>;
  cwd?: string;
  envs?: Record<string, string>;
  /** Seconds (default 60; 0: none). `timeoutMs` is accepted too. */
  timeout?: number;
  timeoutMs?: number;
}

/** A running PTY: `wait()`, `kill()`, and input and resizes over its socket. */
export class PtyHandle {
  exitCode?: number;
  error?: string;
  private end?: wire.PtyEnd;
  private readonly finished: Promise<void>;

  constructor(readonly pid: number, private readonly pty: Pty, private readonly socket: WebSocket,
              onData?: PtyCreateOpts["onData"]) {
    this.finished = new Promise((resolve) => {
      socket.onmessage = (event: MessageEvent) => {
        if (typeof event.data === "string") {
          this.end = JSON.parse(event.data) as wire.PtyEnd;
          if (this.end?.type === "end") {
            this.exitCode = this.end.exit_code;
            this.error = this.end.error ?? undefined;
          }
        } else {
          Promise.resolve(onData?.(new Uint8Array(event.data as ArrayBuffer))).catch(() => {});
        }
      };
      socket.onclose = () => resolve();
    });
  }

  /** Wait for the shell to exit (a killed one: exit code 137). */
  async wait(): Promise<CommandResult> {
    await this.finished;
    const end: wire.PtyEnd = this.end ?? { type: "exception", error: "SandboxException", message: "the PTY's socket closed early" };
    if (end.type === "exception") throw errorFrom(end);
    return { exitCode: end.exit_code, stdout: "", stderr: "", error: end.error ?? undefined };
  }

  /** Send keystrokes (bytes or text). */
  async sendInput(data: Uint8Array | string): Promise<void> {
    this.socket.send(typeof data === "string" ? new TextEncoder().encode(data) : data);
  }

  async resize(size: PtySize): Promise<void> {
    this.socket.send(JSON.stringify({ type: "resize", rows: size.rows, cols: size.cols } satisfies wire.ResizeMessage));
  }

  kill(): Promise<boolean> {
    return this.pty.kill(this.pid);
  }

  /** Stop receiving output; the shell keeps running (`sbx.pty.connect(pid)` attaches again). */
  disconnect(): void {
    this.socket.close();
  }
}

export class Pty {
  constructor(private readonly conn: Connection, private readonly base: string,
              private readonly ours: string, private readonly commands: Commands) {}

  /** Start `bash -i -l` on a terminal of this size. */
  async create(opts: PtyCreateOpts): Promise<PtyHandle> {
    const timeout = opts.timeout ?? (opts.timeoutMs !== undefined ? opts.timeoutMs / 1000 : 60);
    const { pid } = await this.conn.json<wire.Pid>("POST", `${this.base}/pty`, {
      json: { size: { rows: opts.rows ?? 24, cols: opts.cols ?? 80 }, cwd: opts.cwd, envs: opts.envs,
              timeout } satisfies wire.CreatePty,
    });
    return this.connect(pid, { onData: opts.onData });
  }

  /** Attach to a running PTY; its output is replayed from the start. */
  async connect(pid: number, opts: Pick<PtyCreateOpts, "onData"> = {}): Promise<PtyHandle> {
    const socket = this.conn.webSocket(`${this.ours}/pty/${pid}`);
    await new Promise<void>((resolve, reject) => {
      socket.onopen = () => resolve();
      socket.onerror = () => reject(new NotFoundError(`no running PTY with pid ${pid} (or the server is unreachable)`));
    });
    socket.onerror = null;
    return new PtyHandle(pid, this, socket, opts.onData);
  }

  async sendInput(pid: number, data: Uint8Array | string): Promise<void> {
    await this.commands.sendStdin(pid, data);
  }

  async resize(pid: number, size: PtySize): Promise<void> {
    await this.conn.fetch("PATCH", `${this.base}/pty/${pid}`, { json: { size: { rows: size.rows, cols: size.cols } } satisfies wire.Resize });
  }

  kill(pid: number): Promise<boolean> {
    return this.commands.kill(pid);
  }
}


