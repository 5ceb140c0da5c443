// The TypeScript SDK against a real `declaw-wasm serve`, started here on a free port with a key.
// `declaw-wasm` must be on PATH (the README's test command installs it), or set DECLAW_WASM_BIN.

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import {
  AuthenticationError, CommandHandle, FileNotFoundError, InvalidArgumentError, Sandbox,
  SandboxNotFoundError, TimeoutError,
} from "../dist/index.js";

const KEY = "ts-test-" + randomBytes(8).toString("hex");
let server;
let domain;
let sbx;

function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

async function waitForHealth(url, child, ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`declaw-wasm serve exited with ${child.exitCode}`);
    try {
      const r = await fetch(url + "/health", { headers: { "X-API-Key": KEY } });
      if (r.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error("declaw-wasm serve did not come up");
}

before(async () => {
  const port = await freePort();
  domain = `127.0.0.1:${port}`;
  const env = { ...process.env, DECLAW_API_KEY: KEY,
                DECLAW_WASM_STATE: mkdtempSync(join(tmpdir(), "declaw-wasm-ts-state-")) };
  delete env.DECLAW_DOMAIN;
  server = spawn(process.env.DECLAW_WASM_BIN ?? "declaw-wasm", ["serve", "--port", String(port)],
                 { env, stdio: ["ignore", "inherit", "inherit"] });
  await waitForHealth(`http://${domain}`, server, 300_000);
  process.env.DECLAW_DOMAIN = domain;
  process.env.DECLAW_API_KEY = KEY;
  sbx = await Sandbox.create({ timeout: 600 });
});

after(async () => {
  await sbx?.kill().catch(() => {});
  server?.kill("SIGTERM");
});

describe("files", () => {
  test("write, read in every format, getInfo", async () => {
    const info = await sbx.files.write("/tmp/ts/deep/a.txt", "héllo");
    assert.deepEqual(info, { name: "a.txt", type: "file", path: "/tmp/ts/deep/a.txt" });
    assert.equal(await sbx.files.read("/tmp/ts/deep/a.txt"), "héllo");
    const bytes = await sbx.files.read("/tmp/ts/deep/a.txt", { format: "bytes" });
    assert.ok(bytes instanceof Uint8Array);
    assert.equal(Buffer.from(bytes).toString(), "héllo");
    const blob = await sbx.files.read("/tmp/ts/deep/a.txt", { format: "blob" });
    assert.equal(await blob.text(), "héllo");
    const entry = await sbx.files.getInfo("/tmp/ts/deep/a.txt");
    assert.equal(entry.size, Buffer.byteLength("héllo"));
    assert.equal(entry.permissions, "-rw-r--r--");
    assert.ok(entry.modifiedTime instanceof Date && !isNaN(entry.modifiedTime.getTime()));
  });

  test("streams both ways", async () => {
    const chunk = new Uint8Array(1 << 20).fill(120);
    let sent = 0;
    const upload = new ReadableStream({
      pull(controller) {
        if (sent === 3) controller.close();
        else { controller.enqueue(chunk); sent += 1; }
      },
    });
    await sbx.files.write("/tmp/ts/big.bin", upload);
    let total = 0;
    for await (const part of await sbx.files.read("/tmp/ts/big.bin", { format: "stream" })) total += part.length;
    assert.equal(total, 3 << 20);
    await sbx.files.write("/tmp/ts/bytes.bin", new Uint8Array([0, 1, 255]));
    assert.deepEqual([...await sbx.files.read("/tmp/ts/bytes.bin", { format: "bytes" })], [0, 1, 255]);
  });

  test("list, exists, rename, makeDir, remove", async () => {
    assert.equal(await sbx.files.makeDir("/tmp/ts/m/n"), true);
    assert.equal(await sbx.files.makeDir("/tmp/ts/m/n"), false);
    await sbx.files.write("/tmp/ts/m/n/f", "x");
    assert.deepEqual((await sbx.files.list("/tmp/ts/m", { depth: 2 })).map((e) => e.path),
                     ["/tmp/ts/m/n", "/tmp/ts/m/n/f"]);
    const moved = await sbx.files.rename("/tmp/ts/m/n/f", "moved.txt");
    assert.equal(moved.path, "/home/user/moved.txt");
    assert.equal(await sbx.files.exists("/tmp/ts/m/n/f"), false);
    assert.equal(await sbx.files.exists("moved.txt"), true);
    await sbx.files.remove("/tmp/ts/m");
    await sbx.files.remove("/tmp/ts/m"); // missing: no error
    assert.equal(await sbx.files.exists("/tmp/ts/m"), false);
    await assert.rejects(sbx.files.read("/tmp/ts/missing"), FileNotFoundError);
    await assert.rejects(sbx.files.list("/tmp/ts", { depth: 0 }), InvalidArgumentError);
  });
});

describe("commands", () => {
  test("result, non-zero exit returned, envs and cwd", async () => {
    const r = await sbx.commands.run("echo out; echo err >&2; exit 3");
    assert.deepEqual(r, { exitCode: 3, stdout: "out\n", stderr: "err\n", error: undefined });
    const env = await sbx.commands.run("echo $GREETING $(pwd)", { envs: { GREETING: "hi" }, cwd: "/tmp" });
    assert.equal(env.stdout, "hi /tmp\n");
  });

  test("output streams while the command runs", async () => {
    const start = Date.now();
    const seen = [];
    const r = await sbx.commands.run("echo a; sleep 2; echo b", { onStdout: (d) => seen.push([Date.now() - start, d]) });
    assert.equal(r.stdout, "a\nb\n");
    assert.deepEqual(seen.map(([, d]) => d), ["a\n", "b\n"]);
    assert.ok(seen[0][0] < 1000, `first chunk after ${seen[0][0]} ms`);
    assert.ok(seen[1][0] >= 1900);
  });

  test("background handle, stdin, list, kill", async () => {
    const handle = await sbx.commands.run("cat | tr a-z A-Z", { background: true, stdin: true });
    assert.ok(handle instanceof CommandHandle);
    await handle.sendStdin("hello\n");
    await handle.closeStdin();
    assert.equal((await handle.wait()).stdout, "HELLO\n");
    let started;
    const ready = new Promise((resolve) => { started = resolve; });
    const sleeper = await sbx.commands.run("echo started; sleep 30", { background: true, onStdout: () => started() });
    await ready;
    assert.ok((await sbx.commands.list()).some((p) => p.pid === sleeper.pid));
    assert.equal(await sleeper.kill(), true);
    const killed = await sleeper.wait();
    assert.deepEqual([killed.exitCode, killed.error, killed.stdout], [137, "killed", "started\n"]);
    assert.equal(await sbx.commands.run("read a; echo got $a", { stdin: "x\n" }).then((r) => r.stdout), "got x\n");
  });

  test("a timeout throws TimeoutError with the output so far", async () => {
    await assert.rejects(sbx.commands.run("echo partial; sleep 10", { timeout: 1 }), (err) => {
      assert.ok(err instanceof TimeoutError);
      assert.equal(err.stdout, "partial\n");
      return true;
    });
  });
});

describe("runCode", () => {
  test("state, logs, results, errors", async () => {
    await sbx.runCode("x = 40");
    const lines = [];
    const execution = await sbx.runCode("print('hi')\nx + 2", { onStdout: (m) => lines.push(m.line) });
    assert.equal(execution.text, "42");
    assert.deepEqual(execution.logs.stdout, ["hi\n"]);
    assert.deepEqual(lines, ["hi\n"]);
    const failed = await sbx.runCode("1 / 0");
    assert.equal(failed.error.name, "ZeroDivisionError");
    assert.match(failed.error.traceback, /ZeroDivisionError/);
    assert.equal(failed.executionCount, execution.executionCount + 1);
  });

  test("a matplotlib figure gives a png and a chart", async () => {
    const execution = await sbx.runCode(
      "import matplotlib.pyplot as plt\nplt.bar(['a', 'b'], [3, 5]); plt.title('bars')\nplt.show()");
    const [figure] = execution.results;
    assert.equal(Buffer.from(figure.png, "base64").subarray(0, 4).toString("latin1"), "\x89PNG");
    assert.equal(figure.chart.type, "bar");
    assert.equal(figure.chart.title, "bars");
    assert.ok(figure.formats().includes("png"));
  });

  test("contexts are independent", async () => {
    const one = await sbx.createCodeContext();
    const two = await sbx.createCodeContext({ cwd: "/tmp" });
    await sbx.runCode("where = 'one'", { context: one });
    assert.equal((await sbx.runCode("import os; os.getcwd()", { context: two })).text, "/tmp");
    assert.equal((await sbx.runCode("where", { context: two })).error.name, "NameError");
    assert.ok((await sbx.listCodeContexts()).some((c) => c.id === one.id));
    await sbx.restartCodeContext(one);
    assert.equal((await sbx.runCode("where", { context: one })).error.name, "NameError");
    await sbx.removeCodeContext(two);
    assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === two.id));
  });

  test("a cell past its timeout throws TimeoutError", async () => {
    await assert.rejects(sbx.runCode("import time; time.sleep(10)", { timeout: 1 }), TimeoutError);
  });
});

describe("pty", { skip: typeof WebSocket === "undefined" && "no WebSocket client in this Node" }, () => {
  test("an interactive shell: input, resize, exit code", async () => {
    const chunks = [];
    const text = () => Buffer.concat(chunks).toString();
    const until = async (predicate) => {
      const deadline = Date.now() + 20_000;
      while (!predicate()) {
        assert.ok(Date.now() < deadline, `timed out; output so far: ${JSON.stringify(text())}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    const handle = await sbx.pty.create({ rows: 24, cols: 80, onData: (d) => chunks.push(Buffer.from(d)) });
    await until(() => text().endsWith("$ "));
    await handle.sendInput("echo hi-$((6*7))\n");
    await until(() => text().includes("hi-42\r\n"));
    await handle.resize({ rows: 30, cols: 111 });
    await sbx.pty.sendInput(handle.pid, "tput cols\n");
    await until(() => text().includes("111\r\n"));
    await handle.sendInput("exit 5\n");
    assert.equal((await handle.wait()).exitCode, 5);
    assert.ok(text().startsWith("user@sandbox:~$ "));
  });

  test("kill, and reattaching replays the output", async () => {
    const first = [];
    const handle = await sbx.pty.create({ rows: 24, cols: 80, onData: (d) => first.push(d) });
    await handle.sendInput("echo before-detach\n");
    while (!Buffer.concat(first.map((d) => Buffer.from(d))).toString().includes("before-detach\r\n")) {
      await new Promise((r) => setTimeout(r, 20));
    }
    handle.disconnect();
    const again = [];
    const attached = await sbx.pty.connect(handle.pid, { onData: (d) => again.push(Buffer.from(d)) });
    assert.equal(await sbx.pty.kill(handle.pid), true);
    const result = await attached.wait();
    assert.equal(result.exitCode, 137);
    assert.match(Buffer.concat(again).toString(), /before-detach\r\n/);
  });
});

describe("sandboxes", () => {
  test("info, list, connect, kill", async () => {
    const other = await Sandbox.create({ metadata: { owner: "ts" } });
    const info = await other.getInfo();
    assert.deepEqual([info.sandboxId, info.templateId, info.metadata], [other.sandboxId, "code-interpreter", { owner: "ts" }]);
    assert.ok((await Sandbox.list()).some((i) => i.sandboxId === other.sandboxId));
    const again = await Sandbox.connect(other.sandboxId);
    await again.files.write("/tmp/shared", "same");
    assert.equal(await other.files.read("/tmp/shared"), "same");
    assert.equal(await other.isRunning(), true);
    assert.equal(await other.kill(), true);
    assert.equal(await Sandbox.kill(other.sandboxId), false);
    assert.equal(await other.isRunning(), false);
    await assert.rejects(other.commands.run("echo gone"), SandboxNotFoundError);
  });

  test("a missing or wrong key is refused", async () => {
    await assert.rejects(Sandbox.create({ apiKey: "wrong" }), AuthenticationError);
    const r = await fetch(`http://${domain}/sandboxes`);
    assert.equal(r.status, 401);
    assert.equal((await r.json()).error, "AuthenticationException");
  });
});

test("snapshots, pause and resume, restore, fork (docs/state.md)", async () => {
  const box = await Sandbox.create();
  try {
    await box.runCode("x = 41");
    await box.files.write("/home/user/state.txt", "kept");
    const info = await box.createSnapshot();
    assert.equal(info.sandboxId, box.sandboxId);
    await box.runCode("x += 1");
    assert.equal(await box.pause(), true);
    assert.equal((await box.getInfo()).state, "paused");
    const again = await Sandbox.connect(box.sandboxId);  // connecting resumes
    assert.equal((await again.runCode("print(x)")).logs.stdout.join(""), "42\n");
    const [fork] = await again.fork(1);
    await fork.runCode("x = 0");
    assert.equal((await again.runCode("print(x)")).logs.stdout.join(""), "42\n");
    assert.equal(await fork.files.read("/home/user/state.txt"), "kept");
    await fork.kill();
    const sources = (await again.listSnapshots()).map((s) => s.source).sort();
    assert.deepEqual(sources, ["manual", "pause"]);
    const back = await Sandbox.restore(box.sandboxId, { snapshotId: info.snapshotId });
    assert.equal((await back.runCode("print(x)")).logs.stdout.join(""), "41\n");
    assert.ok((await Sandbox.listSnapshots({ sandboxId: box.sandboxId })).length >= 2);
    assert.equal(await back.deleteSnapshot(info.snapshotId), true);
  } finally {
    await Sandbox.kill(box.sandboxId);
  }
});

test("examples/code_interpreter.ts prints what the Python example prints", async () => {
  const script = fileURLToPath(new URL("../dist-examples/code_interpreter.js", import.meta.url));
  const { stdout } = await promisify(execFile)(process.execPath, [script], { env: process.env, timeout: 300_000 });
  const lines = stdout.split("\n");
  assert.deepEqual(lines.slice(0, 6), [
    "--- snippet 0: exit 0",
    "solution: {x: 13/7, y: 11/7}",
    "--- snippet 1: exit 0",
    "{'APAC': 150, 'EU': 80}",
    "--- snippet 2: exit 0",
    "wrote /tmp/chart.png",
  ]);
  const size = Number(lines[6].match(/^chart\.png size: (\d+) bytes$/)[1]);
  assert.ok(size > 10_000 && size < 200_000);
});
