"""The door's own cost: a guest's `_host.call` round trips per kind of request, a command
start (`echo`), and an HTTP GET through the egress door, for the code tree on PYTHONPATH; or,
with --compare OLD NEW, both trees interleaved (OLD, NEW, OLD, NEW...) `--runs` times each, and
the medians side by side.

    python benchmarks/door.py [--loops N]
    python benchmarks/door.py --compare /work/main . --runs 7

Each run is a fresh process (so each tree's code is imported on its own). The HTTP server is
on loopback, mapped to a public-looking name with DECLAW_WASM_RESOLVE; nothing leaves the
machine.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

GUEST = r"""
import _host, msgpack, time, json, sys
from declaw_net import _wire
loops = int(sys.argv[1])
frames = {
    "winsize (12 B)": msgpack.packb({"op": "winsize"}),
    "net.poll, nothing (35 B)": _wire.pack({"read": [], "write": [], "timeout": 0, "op": "net.poll"}),
    "net.close, no such id (20 B)": _wire.pack({"id": 12345, "op": "net.close"}),
    "net.send 100 B of HTTP (150 B)": _wire.pack({"id": 12345, "data": b"GET / HTTP/1.1\r\nHost: x\r\n" * 4,
                                                  "wait": True, "timeout": None, "op": "net.send"}),
    "net.send 64 KiB, no such id": _wire.pack({"id": 12345, "data": bytes(range(256)) * 256, "wait": True,
                                               "timeout": None, "op": "net.send"}),
}
out = {}
for name, frame in frames.items():
    best = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(loops):
            _host.call(frame)
        best.append((time.perf_counter() - start) / loops * 1e6)
    out[name] = sorted(best)[2]
print(json.dumps(out))
"""

HTTP = r"""
import time, json, urllib.request, sys
times = []
for _ in range(int(sys.argv[1])):
    start = time.perf_counter()
    urllib.request.urlopen("http://bench.example/", timeout=10).read()
    times.append((time.perf_counter() - start) * 1e3)
print(json.dumps(sorted(times)[len(times) // 2]))
"""


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


def measure(loops: int) -> dict[str, float]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    os.environ["DECLAW_WASM_RESOLVE"] = f"bench.example:80:127.0.0.1:{server.server_address[1]}"
    from declaw_wasm import Sandbox

    results: dict[str, float] = {}
    with Sandbox.create(timeout=600) as sbx:
        sbx.files.write("/tmp/door.py", GUEST)
        sbx.files.write("/tmp/bench_get.py", HTTP)
        r = sbx.commands.run(f"python3 /tmp/door.py {loops}", timeout=300)
        results.update({f"door: {k} (µs)": v for k, v in json.loads(r.stdout).items()})
        r = sbx.commands.run("python3 /tmp/bench_get.py 30", timeout=300)
        results["HTTP GET through the egress door, median of 30 (ms)"] = json.loads(r.stdout)
        times = []
        for _ in range(30):
            start = time.perf_counter()
            sbx.commands.run("echo hi")
            times.append((time.perf_counter() - start) * 1e3)
        results["commands.run('echo hi'), median of 30 (ms)"] = statistics.median(times)
    server.shutdown()
    return results


def compare(old: str, new: str, runs: int, loops: int) -> None:
    got: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
    for _ in range(runs):
        for label, tree in (("old", old), ("new", new)):
            env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
            command = [sys.executable, str(Path(__file__).resolve()), "--loops", str(loops), "--json"]
            out = subprocess.run(command, env=env, capture_output=True, text=True, check=True, cwd=tree).stdout
            for key, value in json.loads(out.splitlines()[-1]).items():
                got[label].setdefault(key, []).append(value)
    print(f"| measure ({runs} runs each, interleaved) | old median | new median | change | old best | new best |")
    print("|---|---|---|---|---|---|")
    for key in got["old"]:
        a, b = statistics.median(got["old"][key]), statistics.median(got["new"][key])
        print(f"| {key} | {a:.2f} | {b:.2f} | {(b - a) / a * 100:+.1f} % | {min(got['old'][key]):.2f} | "
              f"{min(got['new'][key]):.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--loops", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"))
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    if args.compare:
        old, new = args.compare
        compare(old, new, args.runs, args.loops)
        return
    results = measure(args.loops)
    if args.json:
        print(json.dumps(results))
    else:
        for key, value in results.items():
            print(f"{key}: {value:.2f}")


if __name__ == "__main__":
    main()
