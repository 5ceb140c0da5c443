// The TypeScript SDK against a real `declaw-wasm serve`, started here on a free port with a key.
// `declaw-wasm` must be on PATH (the README's test command installs it), or set DECLAW_WASM_BIN.

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import { request as httpRequest } from "node:http";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import { promisify } from "node:util";

import {
  AuthenticationError, CommandHandle, ConflictError, FileNotFoundError, InvalidArgumentError, NotFoundError,
  Sandbox, SandboxNotFoundError, TimeoutError, Vault, Volumes,
} from "../dist/index.js";

const KEY = "ts-test-" + randomBytes(8).toString("hex");
let server;
let domain;
let sbx;
let upstream;  // test/upstream.py: local HTTP(S) servers standing in for api.openai.com & co.
let upstreamLines;

/** Start test/upstream.py (the Python that runs `declaw-wasm`, or DECLAW_WASM_PYTHON). */
async function startUpstream() {
  const python = process.env.DECLAW_WASM_PYTHON ?? "python3";
  upstream = spawn(python, [fileURLToPath(new URL("./upstream.py", import.meta.url))],
                   { stdio: ["pipe", "pipe", "inherit"] });
  upstreamLines = createInterface({ input: upstream.stdout })[Symbol.asyncIterator]();
  const first = await upstreamLines.next();
  if (first.done) throw new Error("test/upstream.py did not start (is trustme installed? pip install -e '.[test]')");
  return JSON.parse(first.value);
}

/** What reached the upstreams so far: [{path, server, headers}]. */
async function upstreamRecords(command = "records") {
  upstream.stdin.write(command + "\n");
  return JSON.parse((await upstreamLines.next()).value);
}

/** Run Python in a sandbox; its last stdout line as JSON. */
async function outcome(sandbox, code) {
  await sandbox.files.write("/tmp/probe.py", code);
  const r = await sandbox.commands.run("python3 /tmp/probe.py", { timeout: 120 });
  assert.equal(r.exitCode, 0, r.stderr);
  return JSON.parse(r.stdout.trim().split("\n").at(-1));
}

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
  const up = await startUpstream();
  const env = {
    ...process.env, DECLAW_API_KEY: KEY,
    // the guest's network goes to the local upstreams only (and the host refuses anything else)
    DECLAW_WASM_RESOLVE: up.resolve, DECLAW_WASM_CA_BUNDLE: up.ca, DECLAW_WASM_EGRESS_LOOPBACK_ONLY: "1",
    DECLAW_WASM_STATE: mkdtempSync(join(tmpdir(), "ts-state-")),  // volumes of this run only
  };
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
  upstream?.stdin.end();
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

describe("a keyless server on loopback", () => {
  test("takes the SDK's requests and refuses what a web page can send cross-site", async () => {
    const port = await freePort();
    const env = { ...process.env, DECLAW_WASM_STATE: mkdtempSync(join(tmpdir(), "ts-keyless-")) };
    delete env.DECLAW_API_KEY;
    delete env.DECLAW_DOMAIN;
    const keyless = spawn(process.env.DECLAW_WASM_BIN ?? "declaw-wasm", ["serve", "--port", String(port)],
                          { env, stdio: ["ignore", "inherit", "inherit"] });
    const where = { domain: `127.0.0.1:${port}`, apiKey: "" };
    try {
      await waitForHealth(`http://${where.domain}`, keyless, 300_000);
      const made = await Volumes.empty("ts-keyless", where);  // a POST without a body: typed as JSON
      assert.equal(made.name, "ts-keyless");
      const form = await fetch(`http://${where.domain}/volumes/empty?name=x`, {
        method: "POST", body: "a=b", headers: { "content-type": "application/x-www-form-urlencoded" } });
      assert.equal(form.status, 415);
      const page = await fetch(`http://${where.domain}/volumes`, { headers: { origin: "http://evil.example" } });
      assert.equal(page.status, 403);
      assert.deepEqual((await Volumes.list(where)).map((v) => v.name), ["ts-keyless"]);
    } finally {
      keyless.kill("SIGTERM");
    }
  });
});

describe("network, secrets and the vault", () => {
  const ASK = `
import json, os, requests
key = os.environ["OPENAI_API_KEY"]
out = {"env": key, "echo": requests.get("https://api.openai.com/v1/models", headers={"Authorization": "Bearer " + key}).text,
       "other": requests.get("https://example.com/other", headers={"Authorization": "Bearer " + key}).json()["headers"]}
try:
    requests.get("https://evil.com/", timeout=10)
    out["evil"] = "reached"
except Exception as exc:
    out["evil"] = str(exc)
print(json.dumps(out))
`;

  test("secrets: the guest sees a placeholder, the scoped host gets the value; the audit says so", async () => {
    await upstreamRecords("clear");
    const value = "sk-ts/" + randomBytes(6).toString("hex");
    const s = await Sandbox.create({
      secrets: { OPENAI_API_KEY: { value, hosts: ["api.openai.com"] } },
      network: { allowOut: ["api.openai.com", "example.com"] },
    });
    try {
      const got = await outcome(s, ASK);
      assert.match(got.env, /^declaw-secret-/);
      assert.ok(!got.echo.includes(value) && got.other.Authorization === "Bearer " + got.env);
      assert.match(got.evil, /policy/);
      const seen = Object.fromEntries((await upstreamRecords()).map((r) => [r.path, r]));
      assert.equal(seen["/v1/models"].headers.authorization, "Bearer " + value);
      assert.equal(seen["/other"].headers.authorization, "Bearer " + got.env);
      assert.equal(seen["/"], undefined);
      const events = await s.auditEvents();
      assert.deepEqual(events.filter((e) => e.secrets_injected?.length).map((e) => e.secrets_injected), [["OPENAI_API_KEY"]]);
      assert.ok(events.some((e) => e.decision === "denied" && e.host === "evil.com"));
      assert.ok(!JSON.stringify(events).includes(value));
      assert.deepEqual((await s.getInfo()).network, { allow_out: ["api.openai.com", "example.com"] });
    } finally {
      await s.kill();
    }
  });

  test("allowInternetAccess: false and a security policy's network", async () => {
    const closed = await Sandbox.create({ allowInternetAccess: false, network: { allowOut: ["example.com"] } });
    const policed = await Sandbox.create({ security: { network: { allow_out: ["example.com"] } }, lifecycle: { onTimeout: "kill" } });
    try {
      const probe = `
import json, requests
def attempt(url):
    try:
        return requests.get(url, timeout=10).status_code
    except Exception as exc:
        return str(exc)
print(json.dumps([attempt("https://example.com/a"), attempt("https://api.openai.com/b")]))
`;
      const [closedA, closedB] = await outcome(closed, probe);
      assert.match(String(closedA), /policy/);
      assert.match(String(closedB), /policy/);
      assert.deepEqual((await closed.getInfo()).network, { deny_out: ["0.0.0.0/0"] });
      const [okA, deniedB] = await outcome(policed, probe);
      assert.equal(okA, 200);
      assert.match(String(deniedB), /policy/);
      assert.deepEqual((await policed.getInfo()).lifecycle, { on_timeout: "kill", auto_resume: false });
    } finally {
      await closed.kill();
      await policed.kill();
    }
  });

  test("vaultRefs name secrets in the server's vault", async () => {
    await upstreamRecords("clear");
    const vault = new Vault();
    const created = await vault.createSecret({ value: "sk-ts-vault-1", provider: "openai" });
    assert.equal(created.name, "openai");
    assert.ok(!JSON.stringify(await vault.listSecrets()).includes("sk-ts-vault"));
    await vault.rotateSecret("openai", "sk-ts-vault-2");
    assert.ok((await vault.listPresets()).some((p) => p.key === "anthropic"));
    const s = await Sandbox.create({ vaultRefs: { OPENAI_API_KEY: "openai" } });
    try {
      const got = await outcome(s, ASK);
      assert.equal(got.env, "declaw:vault-managed");
      const seen = Object.fromEntries((await upstreamRecords()).map((r) => [r.path, r]));
      assert.equal(seen["/v1/models"].headers.authorization, "Bearer sk-ts-vault-2");
      assert.equal(seen["/other"].headers.authorization, "Bearer declaw:vault-managed");
    } finally {
      await s.kill();
    }
    // a write-only value's hosts widen only with the value again; narrowing is free
    await assert.rejects(vault.updateScopes("openai", [{ domain_regex: "example.com" }]), ConflictError);
    await vault.updateScopes("openai", [{ domain_regex: "example.com" }], { value: "sk-ts-vault-3" });
    await vault.updateScopes("openai", [{ domain_regex: "example.com" }]);
    const changes = (await vault.auditEvents()).filter((e) => e.name === "openai" && e.action === "update_scopes");
    assert.deepEqual(changes.map((e) => [e.decision, e.value_supplied]),
                     [["denied", false], ["allowed", true], ["allowed", false]]);
    assert.ok(!JSON.stringify(changes).includes("sk-ts-vault"));
    await vault.deleteSecret("openai");
    assert.deepEqual(await vault.listSecrets(), []);
    await assert.rejects(Sandbox.create({ vaultRefs: { K: "openai" } }), InvalidArgumentError);
  });

  test("secret values never go over plain HTTP to another machine", async () => {
    const far = { domain: "http://192.0.2.10:9", apiKey: KEY };
    await assert.rejects(Sandbox.create({ ...far, secrets: { K: { value: "v", hosts: ["x.com"] } } }),
                         (err) => err instanceof InvalidArgumentError && /plain HTTP/.test(err.message));
    await assert.rejects(new Vault(far).createSecret({ value: "v", provider: "openai" }), InvalidArgumentError);
  });
});

describe("volumes", () => {
  test("files with versions, locks, download and create from the bytes", async () => {
    const vol = await Volumes.create("ts-vol");
    const files = Volumes.files(vol.volumeId);
    assert.equal(await files.write("/data/a.txt", new TextEncoder().encode("one")), "/data/a.txt");
    const { version } = await files.info("/data/a.txt");
    await files.write("/data/a.txt", new TextEncoder().encode("two"), { ifVersion: version });
    await assert.rejects(files.write("/data/a.txt", new Uint8Array([1]), { ifVersion: version }), ConflictError);
    assert.equal(new TextDecoder().decode(await files.read("/data/a.txt")), "two");
    assert.deepEqual((await files.list("/")).map((e) => [e.name, e.isDir]), [["data", true]]);
    assert.equal(await files.exists("/nope"), false);
    assert.equal(await files.mkdir("/tmpdir"), "/tmpdir");
    assert.deepEqual(await files.rename("/tmpdir", "/gone"), { oldPath: "/tmpdir", newPath: "/gone" });
    await files.remove("/gone", { recursive: true });
    const locks = Volumes.locks(vol.volumeId);
    const lease = await locks.acquire("/data", 30);
    await assert.rejects(locks.acquire("/data"), ConflictError);
    assert.equal((await locks.status("/data")).held, true);
    assert.equal((await locks.renew("/data", lease.token, 60)).ttlSeconds, 60);
    assert.equal(await locks.release("/data", lease.token), true);
    const archive = await Volumes.download(vol.volumeId);
    assert.deepEqual([...archive.slice(0, 2)], [0x1f, 0x8b]);  // tar.gz
    const copy = await Volumes.create("ts-copy", archive);
    assert.equal(new TextDecoder().decode(await Volumes.files(copy.volumeId).read("/data/a.txt")), "two");
    assert.ok((await Volumes.list()).some((v) => v.volumeId === copy.volumeId));
    for (const v of [vol, copy]) await Volumes.delete(v.volumeId);
    await assert.rejects(Volumes.get(vol.volumeId), NotFoundError);
    await assert.rejects(Volumes.get("bad.id"), InvalidArgumentError);
  });

  test("attached to sandboxes, then snapshot and commit", async () => {
    const vol = await Volumes.create("ts-attach");
    await Volumes.files(vol.volumeId).write("/in.txt", new TextEncoder().encode("input"));
    const s = await Sandbox.create({ volumes: [{ volumeId: vol.volumeId, mountPath: "/work", mode: "mount" },
                                                { volumeId: vol.volumeId, mountPath: "/ro", mode: "mount-ro" }] });
    try {
      assert.equal((await s.commands.run("cat /work/in.txt")).stdout, "input");
      assert.notEqual((await s.commands.run("echo x > /ro/x.txt")).exitCode, 0);
      await s.commands.run("echo out > /work/out.txt && echo snap > /tmp/snap.txt");
      const committed = await Volumes.commit(s.sandboxId, vol.volumeId);
      assert.equal(committed.name, "ts-attach-commit");
      assert.equal(new TextDecoder().decode(await Volumes.files(committed.volumeId).read("/out.txt")), "out\n");
      const snap = await Volumes.snapshot(s.sandboxId, "/tmp", "ts-snap");
      assert.equal(new TextDecoder().decode(await Volumes.files(snap.volumeId).read("/snap.txt")), "snap\n");
      for (const v of [committed, snap]) await Volumes.delete(v.volumeId);
    } finally {
      await s.kill();
    }
    await Volumes.delete(vol.volumeId);
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

/** GET `path` on a preview host (`<port>-<id>.localhost:<port>`): sent to 127.0.0.1 with that
 *  name as the Host, as a browser does (this machine's resolver may not know `*.localhost`). */
function previewGet(host, path, headers = {}) {
  const port = Number(host.split(":").at(-1));
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port, path, headers: { ...headers, Host: host } }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }));
    });
    req.on("error", reject);
    req.end();
  });
}

async function previewServed(host, path, headers = {}) {
  for (let i = 0; i < 150; i++) {
    const got = await previewGet(host, path, headers);
    if (got.status !== 502) return got;
    await new Promise((r) => setTimeout(r, 200));
  }
  return previewGet(host, path, headers);
}

test("getHost: a server in the sandbox, by its preview name, with the traffic token when not public", async () => {
  const open = await Sandbox.create({ timeout: 300 });
  const closed = await Sandbox.create({ timeout: 300, network: { allowPublicTraffic: false } });
  try {
    for (const s of [open, closed]) {
      await s.files.write("/home/user/site/index.html", "<h1>ts</h1>");
      await s.commands.run("python3 -m http.server 8000 -d /home/user/site", { background: true });
    }
    const host = open.getHost(8000);
    assert.equal(host, `8000-${open.sandboxId}.localhost:${domain.split(":").at(-1)}`);
    assert.deepEqual(await previewServed(host, "/index.html"), { status: 200, body: "<h1>ts</h1>" });
    assert.equal(await open.trafficAccessToken(), undefined);
    const token = await closed.trafficAccessToken();
    assert.ok(token);
    assert.equal((await previewGet(closed.getHost(8000), "/index.html")).status, 403);
    const got = await previewServed(closed.getHost(8000), "/index.html", { "e2b-traffic-access-token": token });
    assert.equal(got.status, 200);
    assert.throws(() => open.getHost(0), InvalidArgumentError);
  } finally {
    await open.kill();
    await closed.kill();
  }
});
