// `npm test`: node --test, with Node 20's WebSocket client switched on for the PTY tests
// (Node >= 22 has it by default).
import { spawnSync } from "node:child_process";

const flags = typeof WebSocket === "undefined" && process.allowedNodeEnvironmentFlags.has("--experimental-websocket")
  ? ["--experimental-websocket", "--no-warnings=ExperimentalWarning"] : [];
const run = spawnSync(process.execPath, [...flags, "--test", "test/"], { stdio: "inherit" });
process.exit(run.status ?? 1);
