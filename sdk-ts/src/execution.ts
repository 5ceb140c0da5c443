/** What `runCode` returns: E2B code-interpreter's Execution, Result, Logs, ExecutionError. */

export interface Logs {
  stdout: string[];
  stderr: string[];
}

export interface ExecutionError {
  name: string;
  value: string;
  traceback: string;
}

export interface OutputMessage {
  line: string;
  timestamp: Date;
  error: boolean;
}

export interface Context {
  id: string;
  language: string;
  cwd: string;
}

const FORMATS = ["text", "html", "markdown", "svg", "png", "jpeg", "pdf", "latex", "json",
                 "javascript", "data", "chart"] as const;

/** One rich output of a cell: the main result (a final expression's value) or a display. */
export class Result {
  text?: string;
  html?: string;
  markdown?: string;
  svg?: string;
  /** base64 */
  png?: string;
  /** base64 */
  jpeg?: string;
  /** base64 */
  pdf?: string;
  latex?: string;
  json?: unknown;
  javascript?: string;
  data?: Record<string, unknown>;
  /** The chart's data, as E2B extracts it from a matplotlib figure (`type`, `title`, `elements`...). */
  chart?: Record<string, any>;
  isMainResult: boolean;
  extra?: Record<string, unknown>;

  constructor(raw: Record<string, any>) {
    for (const name of FORMATS) {
      if (raw[name] !== undefined && raw[name] !== null) (this as any)[name] = raw[name];
    }
    this.isMainResult = !!raw.is_main_result;
    if (raw.extra) this.extra = raw.extra;
  }

  /** The formats present, then the `extra` keys. */
  formats(): string[] {
    return [...FORMATS.filter((name) => (this as any)[name] !== undefined), ...Object.keys(this.extra ?? {})];
  }

  toString(): string {
    return this.text ?? "";
  }
}

export class Execution {
  results: Result[] = [];
  logs: Logs = { stdout: [], stderr: [] };
  error?: ExecutionError;
  executionCount?: number;

  /** The main result's text, if the cell ended with an expression. */
  get text(): string | undefined {
    return this.results.find((r) => r.isMainResult)?.text;
  }
}
