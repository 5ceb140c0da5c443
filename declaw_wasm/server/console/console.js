// The declaw-wasm console (declaw_wasm/server/console.py). Every value from a sandbox is
// rendered as text (textContent, never innerHTML); images only as data: URLs of PNG or JPEG; the
// API key lives in this closure only (no cookie, no storage) and travels as a header.
"use strict";
(() => {
  const PREFIX = "/declaw-wasm";
  let apiKey = "";
  let following = null; // the AbortController of the current follow
  const points = []; // [seq, cpu seconds, memory MiB] of resource samples, for the chart

  const $ = (id) => document.getElementById(id);
  const el = (tag, cls, text) => {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  };
  const headers = () => (apiKey ? { "X-API-Key": apiKey } : {});
  const status = (text) => { $("status").textContent = text; };

  async function getJSON(path) {
    const answer = await fetch(path, { headers: headers(), credentials: "omit", cache: "no-store" });
    if (!answer.ok) throw new Error(`${answer.status} ${answer.statusText}`);
    return answer.json();
  }

  async function listSandboxes() {
    const list = $("sandboxes");
    try {
      const found = await getJSON(`${PREFIX}/console/sandboxes`);
      list.replaceChildren();
      for (const sbx of found) {
        const button = el("button", "", `${sbx.sandbox_id} · ${sbx.template || "?"} · ${sbx.state}`);
        button.dataset.id = String(sbx.sandbox_id);
        button.addEventListener("click", () => select(String(sbx.sandbox_id), button));
        const item = el("li");
        item.append(button);
        list.append(item);
      }
      status(`${found.length} sandbox(es)`);
    } catch (err) {
      status(`cannot list sandboxes: ${err.message}`);
    }
  }

  function select(id, button) {
    for (const b of document.querySelectorAll("nav button.selected")) b.classList.remove("selected");
    button.classList.add("selected");
    $("title").textContent = id;
    $("timeline").replaceChildren();
    points.length = 0;
    drawChart();
    follow(id);
  }

  async function follow(id) {
    if (following) following.abort();
    const controller = new AbortController();
    following = controller;
    let since = 0;
    while (!controller.signal.aborted) {
      try {
        const answer = await fetch(`${PREFIX}/sandboxes/${encodeURIComponent(id)}/events/stream?since=${since}`,
          { headers: headers(), credentials: "omit", cache: "no-store", signal: controller.signal });
        if (!answer.ok || !answer.body) { status(`follow: ${answer.status}`); return; }
        status(`following ${id}`);
        const reader = answer.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        let ended = false;
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          let cut;
          while ((cut = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            const fields = { event: "message", data: "" };
            for (const line of block.split("\n")) {
              const colon = line.indexOf(":");
              if (colon <= 0) continue;
              const name = line.slice(0, colon);
              const rest = line.slice(colon + 1).replace(/^ /, "");
              if (name === "data") fields.data += rest; else if (name === "event") fields.event = rest;
            }
            if (fields.event === "end") { ended = true; continue; }
            if (!fields.data) continue;
            const event = JSON.parse(fields.data);
            if (typeof event.seq === "number" && event.seq > since) {
              since = event.seq;
              render(id, event);
            }
          }
        }
        if (ended) { status(`${id} ended`); return; }
      } catch (err) {
        if (controller.signal.aborted) return;
        status(`follow interrupted: ${err.message}; retrying`);
      }
      await new Promise((done) => setTimeout(done, 1000));
    }
  }

  function pre(text) { return el("pre", "", text); }

  function outputs(item, e) {
    for (const [name, head, tail, size] of [["stdout", e.stdout_head, e.stdout_tail, e.stdout_bytes],
      ["stderr", e.stderr_head, e.stderr_tail, e.stderr_bytes]]) {
      if (!head) continue;
      item.append(el("div", "meta", `${name} (${size} bytes)`));
      item.append(pre(tail ? `${head}\n…\n${tail}` : head));
    }
  }

  function render(id, e) {
    if (e.kind === "sample") { // resources while something runs: the chart, not the timeline
      points.push([e.seq, Number(e.cpu_seconds) || 0, (Number(e.memory_bytes) || 0) / 1048576]);
      drawChart();
      return;
    }
    const kind = String(e.kind || "").split(".")[0];
    const item = el("li", `event kind-${kind}`);
    const when = el("span", "meta", ` #${e.seq} ${e.timestamp}`);
    if (e.kind === "lifecycle") {
      item.append(el("span", "head", `sandbox ${e.action}`), when);
      if (e.template) item.append(el("div", "meta", `template ${e.template}, network ${e.network}`));
    } else if (e.kind === "command.started") {
      item.append(el("span", "head", `$ ${e.cmd || "(terminal)"}`), when);
      item.append(el("div", "meta", `pid ${e.pid} in ${e.cwd}`));
    } else if (e.kind === "command.ended") {
      item.append(el("span", "head", `$ ${e.cmd || "(terminal)"}`), when);
      const line = `exit ${e.exit_code}${e.stopped ? ` (stopped: ${e.stopped})` : ""} · ${e.duration_ms} ms · ` +
        `cpu ${e.cpu_seconds} s`;
      item.append(el("div", e.exit_code === 0 ? "meta" : "meta error", line));
      if (e.error) item.append(el("div", "error", e.error));
      outputs(item, e);
      drawChart();
    } else if (e.kind === "cell") {
      item.append(el("span", "head", "cell"), when);
      item.append(pre(e.code));
      item.append(el("div", "meta", `${e.duration_ms} ms · results: ${(e.result_types || []).join(" | ") || "none"}`));
      if (e.error_name) item.append(el("div", "error", `${e.error_name}: ${e.error_value}`));
      for (const p of e.previews || []) {
        item.append(el("div", "meta", `${p.format} (shown as source)`));
        item.append(pre(p.source));
      }
      for (const ref of e.images || []) showImage(id, ref, item);
      outputs(item, e);
    } else if (e.kind === "file") {
      item.append(el("span", "head", `file ${e.op} ${e.path}`), when, el("span", "meta", ` ${e.size} bytes`));
    } else if (e.kind === "egress") {
      const denied = e.decision === "denied";
      if (denied) item.classList.add("denied");
      item.append(el("span", "head", `${e.method} ${e.url}`), when);
      if (denied) item.append(el("span", "badge denied", "DENIED"));
      if (e.pii_redactions > 0) item.append(el("span", "badge redacted", `${e.pii_redactions} redacted`));
      const parts = [`${e.audit_kind}`, `${e.host}:${e.port}`, `decision ${e.decision}`];
      if (e.rule) parts.push(`rule ${e.rule}`);
      if (e.status_code) parts.push(`status ${e.status_code}`);
      parts.push(`${e.bytes_out} B out, ${e.bytes_in} B in`);
      item.append(el("div", "meta", parts.join(" · ")));
      if (e.reason) item.append(el("div", denied ? "error" : "meta", e.reason));
    } else if (e.kind === "tool") {
      item.append(el("span", "head", `tool ${e.name}`), when, el("span", "meta", ` ${e.decision} ${e.error}`));
    } else if (e.kind === "limit") {
      item.append(el("span", "head", `limit hit: ${e.limit}`), when, el("div", "meta", e.message));
    } else {
      item.append(el("span", "head", String(e.kind)), when);
    }
    $("timeline").append(item);
  }

  const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

  async function showImage(id, ref, item) {
    if (!/^[0-9a-f]{64}$/.test(String(ref.sha256))) return;
    try {
      const image = await getJSON(`${PREFIX}/sandboxes/${encodeURIComponent(id)}/images/${ref.sha256}`);
      if ((image.mime !== "image/png" && image.mime !== "image/jpeg") || !BASE64.test(image.base64)) return;
      const img = el("img", "chart");
      img.alt = `chart ${ref.sha256.slice(0, 12)}`;
      img.src = `data:${image.mime};base64,${image.base64}`;
      item.append(img);
    } catch (err) {
      item.append(el("div", "meta", `chart not available (${err.message})`));
    }
  }

  function drawChart() {
    let canvas = document.querySelector("#summary canvas");
    if (!canvas) {
      canvas = el("canvas");
      canvas.width = 480; canvas.height = 120;
      $("summary").append(el("div", "meta", "CPU seconds (blue) and memory MiB (purple) over time (samples)"),
        canvas);
    }
    const ctx = canvas.getContext("2d");
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    if (points.length === 0) return;
    for (const [index, color] of [[1, "#0969da"], [2, "#8250df"]]) {
      const top = Math.max(...points.map((p) => p[index]), 1e-9);
      ctx.strokeStyle = color;
      ctx.beginPath();
      points.forEach((p, i) => {
        const x = points.length === 1 ? canvas.width / 2 : (i / (points.length - 1)) * (canvas.width - 10) + 5;
        const y = canvas.height - 5 - (p[index] / top) * (canvas.height - 10);
        if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
      });
      ctx.stroke();
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("connect").addEventListener("submit", (ev) => {
      ev.preventDefault();
      apiKey = $("key").value;
      $("key").value = "";
      listSandboxes();
    });
    $("refresh").addEventListener("click", listSandboxes);
    listSandboxes();
  });
})();
