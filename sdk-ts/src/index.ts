/**
 * declaw-wasm: sandboxes served by `declaw-wasm serve`, with E2B's API shape.
 *
 *   import { Sandbox } from "declaw-wasm";
 *   const sbx = await Sandbox.create({ template: "code-interpreter", timeout: 180 });
 *   const r = await sbx.commands.run("python3 -c 'print(6 * 7)'");  // r.exitCode, r.stdout
 *   await sbx.kill();
 */

export { Sandbox } from "./sandbox.js";
export type { SandboxInfo, SandboxOpts, RunCodeOpts, SandboxNetworkOpts, SandboxLifecycle, SecretOpts,
              Snapshot, SnapshotInfo } from "./sandbox.js";
export { Volumes, VolumeFiles, VolumeLocks, volumeAttachmentToJSON } from "./volumes.js";
export type { FileEntry, FileInfo, LockLease, LockStatus, VolumeAttachMode, VolumeAttachment, VolumeData,
              VolumeInfo } from "./volumes.js";
export { Vault } from "./vault.js";
export type { CreateSecretInput, VaultEvent, VaultPreset, VaultScope, VaultSecret } from "./vault.js";
export type { AuditEvent } from "./wire.js";
export { Filesystem } from "./files.js";
export type { EntryInfo, FileType, WriteData, WriteInfo } from "./files.js";
export { CommandHandle, Commands } from "./commands.js";
export type { CommandResult, CommandStartOpts, ProcessInfo } from "./commands.js";
export { Pty, PtyHandle } from "./pty.js";
export type { PtyCreateOpts, PtySize } from "./pty.js";
export { Execution, Result } from "./execution.js";
export type { Context, ExecutionError, Logs, OutputMessage } from "./execution.js";
export { Connection, baseUrl } from "./connection.js";
export type { ConnectionOpts } from "./connection.js";
export {
  AuthenticationError, ConflictError, FileNotFoundError, InvalidArgumentError, NotEnoughSpaceError, NotFoundError,
  RateLimitError, SandboxError, SandboxNotFoundError, TemplateError, TimeoutError,
} from "./errors.js";
