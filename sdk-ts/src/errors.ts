/**
 * Errors, named after E2B's JavaScript SDK. The server reports the Python SDK's exception class
 * (`FileNotFoundException`, ...); `errorFrom` turns that into the matching class here.
 */

import type * as wire from "./wire.js";

export class SandboxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** A command, cell, request or sandbox ran past its timeout. `stdout`/`stderr`: output so far. */
export class TimeoutError extends SandboxError {
  stdout = "";
  stderr = "";
}
export class InvalidArgumentError extends SandboxError {}
export class NotEnoughSpaceError extends SandboxError {}
export class NotFoundError extends SandboxError {}
export class FileNotFoundError extends NotFoundError {}
export class SandboxNotFoundError extends NotFoundError {}
export class TemplateError extends SandboxError {}
/** A compare-and-set version that changed, a lock held by another (HTTP 409). */
export class ConflictError extends SandboxError {}
export class RateLimitError extends SandboxError {}

/** Bad or missing API key. */
export class AuthenticationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "AuthenticationError";
  }
}

const BY_NAME: Record<string, new (message: string) => Error> = {
  SandboxException: SandboxError,
  TimeoutException: TimeoutError,
  InvalidArgumentException: InvalidArgumentError,
  NotEnoughSpaceException: NotEnoughSpaceError,
  NotFoundException: NotFoundError,
  FileNotFoundException: FileNotFoundError,
  SandboxNotFoundException: SandboxNotFoundError,
  TemplateException: TemplateError,
  RateLimitException: RateLimitError,
  ConflictException: ConflictError,
  AuthenticationException: AuthenticationError,
};

/** The server's JSON error body: the exception's class name and message. */
export type ErrorBody = wire.ErrorBody;

export function errorFrom(body: unknown, status = 500): Error {
  if (body && typeof body === "object" && typeof (body as ErrorBody).error === "string") {
    const { error, message, stdout, stderr } = body as ErrorBody;
    const cls = BY_NAME[error];
    if (!cls) return new SandboxError(`${error}: ${message}`);
    const err = new cls(String(message ?? ""));
    if (err instanceof TimeoutError) {
      err.stdout = stdout ?? "";
      err.stderr = stderr ?? "";
    }
    return err;
  }
  if (status === 401) return new AuthenticationError(`${status}: ${String(body)}`);
  return new SandboxError(`${status}: ${String(body)}`);
}
