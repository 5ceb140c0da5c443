/**
 * `sbx.commands`: command lines run by the shell inside the sandbox (E2B's Commands).
 * Output arrives as it is written (NDJSON lines from the server). A non-zero exit code is
 * returned in the result, not thrown (declaw's rule).
 */

import { Connection, ndjson } from "./connection.js";
import { errorFrom, SandboxError } from "./errors.js";
import type * as wire from "./wire.js";

export interface CommandResult {
  exitCode: number;
  stdout: string;
  stderr: string;
  error?: string;
}

export interface ProcessInfo {
  pid: number;
  tag?: string;
  cmd: string;
  args: string[];
  envs: Record<string, string>;
  cwd?: string;
}

export interface CommandStartOpts {
  /** Return a handle at once instead of waiting for the exit. */
  background?: boolean;
  envs?: Record<string, string>;
  cwd?: string;
  onStdout?: (data: string) => void | Promise<void>;
  onStderr?: (data: string) => void | Promise<void>;
  /** Seconds (default 60; 0: none). `timeoutMs` (E2B's) is accepted too. */
  timeout?: number;
  timeoutMs?: number;
  /** true: keep stdin open for `sendStdin`; a string: that input, then end of input. */
  stdin?: boolean | string;
  tag?: string;
}

type Line = wire.CommandLine;
type End = wire.EndLine | wire.ExceptionLine;

/** A running command (E2B's CommandHandle): output so far, `wait()`, `kill()`, stdin. */
export class CommandHandle {
  stdout = "";
  stderr = "";
  exitCode?: number;
  error?: string;
  private end?: End;
  private readonly finished: Promise<void>;

  constructor(
    readonly pid: number,
    private readonly commands: Commands,
    lines: AsyncGenerator<Line>,
    private readonly callbacks: Pick<CommandStartOpts, "onStdout" | "onStderr">,
  ) {
    this.finished = this.pump(lines);
  }

  private async pump(lines: AsyncGenerator<Line>): Promise<void> {
    try {
      for await (const line of lines) {
        if (line.type === "stdout" || line.type === "stderr") {
          const data = String(line.data ?? "");
          if (line.type === "stdout") this.stdout += data;
          else this.stderr += data;
          const callback = line.type === "stdout" ? this.callbacks.onStdout : this.callbacks.onStderr;
          try {
            await callback?.(data);
          } catch {
            // the caller's callback bug must not break the stream
          }
        } else if (line.type === "end" || line.type === "exception") {
          this.end = line;
          if (line.type === "end") {
            this.exitCode = line.exit_code;
            this.error = line.error ?? undefined;
          }
          return;
        }
      }
      this.end = { type: "exception", error: "SandboxException", message: "the declaw server ended the command's stream early" };
    } catch (err) {
      this.end = { type: "exception", error: "SandboxException", message: (err as Error)?.message ?? String(err) };
    }
  }

  /** Wait for the exit. A timeout throws `TimeoutError` (with the output so far). */
  async wait(): Promise<CommandResult> {
    await this.finished;
    const end = this.end!;
    if (end.type === "exception") throw errorFrom(end);
    return { exitCode: end.exit_code, stdout: this.stdout, stderr: this.stderr, error: end.error ?? undefined };
  }

  kill(): Promise<boolean> {
    return this.commands.kill(this.pid);
  }

  sendStdin(data: string | Uint8Array): Promise<void> {
    return this.commands.sendStdin(this.pid, data);
  }

  closeStdin(): Promise<void> {
    return this.commands.closeStdin(this.pid);
  }
}

export class Commands {
  constructor(private readonly conn: Connection, private readonly base: string,
              private readonly ours: string) {}

  /** Run `cmd` as `bash -c` would: the result, or with `background: true` a handle at once. */
  async run(cmd: string, opts: CommandStartOpts & { background: true }): Promise<CommandHandle>;
  async run(cmd: string, opts?: CommandStartOpts & { background?: false }): Promise<CommandResult>;
  async run(cmd: string, opts: CommandStartOpts = {}): Promise<CommandResult | CommandHandle> {
    const timeout = opts.timeout ?? (opts.timeoutMs !== undefined ? opts.timeoutMs / 1000 : 60);
    const response = await this.conn.fetch("POST", `${this.ours}/commands`, {
      stream: true,
      json: { cmd, envs: opts.envs, cwd: opts.cwd, timeout, stdin: opts.stdin,
              background: !!opts.background, tag: opts.tag } satisfies wire.RunCommand,
    });
    const handle = await this.attach(response, opts);
    return opts.background ? handle : handle.wait();
  }

  private async attach(response: Response, callbacks: CommandStartOpts): Promise<CommandHandle> {
    const lines = ndjson<Line>(response);
    const first = await lines.next();
    if (first.done || first.value.type !== "start") {
      throw new SandboxError(`unexpected first line from the declaw server: ${JSON.stringify(first.value)}`);
    }
    return new CommandHandle(first.value.pid, this, lines, callbacks);
  }

  /** A running command's handle, with its output from the start. */
  async connect(pid: number, opts: Pick<CommandStartOpts, "onStdout" | "onStderr"> = {}): Promise<CommandHandle> {
    const response = await this.conn.fetch("GET", `${this.ours}/commands/${pid}/events`, { stream: true });
    return this.attach(response, opts);
  }

  /** The running commands (and PTYs) of the sandbox. */
  async list(): Promise<ProcessInfo[]> {
    const raw = await this.conn.json<wire.ProcessInfo[]>("GET", `${this.base}/commands`);
    return raw.map((p) => ({ pid: p.pid, tag: p.tag ?? undefined, cmd: p.cmd, args: p.args ?? [],
                             envs: p.envs ?? {}, cwd: p.cwd ?? undefined }));
  }

  /** Kill a command; false if no such command is running. */
  async kill(pid: number): Promise<boolean> {
    return (await this.conn.json<wire.Killed>("DELETE", `${this.base}/commands/${pid}`)).killed;
  }

  async sendStdin(pid: number, data: string | Uint8Array): Promise<void> {
    const json: wire.Stdin = typeof data === "string"
      ? { data, encoding: "utf-8" }
      : { data: Buffer.from(data).toString("base64"), encoding: "base64" };
    await this.conn.fetch("POST", `${this.base}/commands/${pid}/stdin`, { json });
  }

  async closeStdin(pid: number): Promise<void> {
    await this.conn.fetch("POST", `${this.ours}/commands/${pid}/stdin/close`);
  }
}
