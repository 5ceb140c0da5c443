"""A server in the sandbox, reached through the host: 1000 keep-alive GETs of a 1 KiB body over one
connection (`http.client`) to a guest `http.server` (HTTP/1.1), through the host listener that
`get_host(8000)` names, against the same server run natively; also through `declaw-wasm serve`'s
preview name (the server in a thread of this process). Prints a Markdown table.

    python3 benchmarks/inbound.py [-n 1000]
"""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from declaw_wasm import Sandbox

SERVER = r'''
import http.server, sys

BODY = b"x" * 1024

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # natively; the host sets TCP_NODELAY on inbound connections

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args):
        pass

http.server.HTTPServer(("127.0.0.1" if len(sys.argv) > 1 else "", int(sys.argv[1]) if len(sys.argv) > 1
                        else 8000), Handler).serve_forever()
'''


def run(address: tuple[str, int], n: int, host_header: str = "") -> tuple[float, float]:
    """(requests per second, p50 latency in ms) of `n` GETs over one keep-alive connection."""
    conn = http.client.HTTPConnection(*address, timeout=30)
    headers = {"Host": host_header} if host_header else {}
    for _ in range(20):  # warm up, and wait for the server
        conn.request("GET", "/", headers=headers)
        answer = conn.getresponse()
        answer.read()
        if answer.status == 200:
            break
        conn.close()
        time.sleep(0.3)
        conn = http.client.HTTPConnection(*address, timeout=30)
    latencies = []
    start = time.perf_counter()
    for _ in range(n):
        began = time.perf_counter()
        conn.request("GET", "/", headers=headers)
        answer = conn.getresponse()
        body = answer.read()
        latencies.append(time.perf_counter() - began)
        assert answer.status == 200 and len(body) == 1024
    total = time.perf_counter() - start
    conn.close()
    return n / total, statistics.median(latencies) * 1000


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=1000)
    n = parser.parse_args().n
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "server.py"
        script.write_text(SERVER)
        port = free_port()
        native = subprocess.Popen([sys.executable, str(script), str(port)])
        try:
            time.sleep(0.5)
            rows.append(("native CPython 3.11, loopback", *run(("127.0.0.1", port), n)))
        finally:
            native.kill()
    with Sandbox.create(timeout=600) as sbx:
        sbx.files.write("/home/user/server.py", SERVER)
        sbx.commands.run("python3 /home/user/server.py", background=True)
        name, hp = sbx.get_host(8000).rsplit(":", 1)
        rows.append(("guest, through the host listener (`get_host`, in-process)", *run((name, int(hp)), n)))
    from declaw_wasm.server import serve_in_thread

    with serve_in_thread(None) as url:
        with Sandbox.create(domain=url, timeout=600) as sbx:
            sbx.files.write("/home/user/server.py", SERVER)
            sbx.commands.run("python3 /home/user/server.py", background=True)
            host = sbx.get_host(8000)
            rows.append(("guest, through `serve`'s preview name (server in this process)",
                         *run(("127.0.0.1", int(host.rsplit(":", 1)[1])), n, host)))
    native_rps = rows[0][1]
    print(f"{n} keep-alive GETs of 1 KiB over one connection; load average {os.getloadavg()[0]:.1f}\n")
    print("| server | requests/s | p50 latency (ms) | of native throughput |")
    print("|---|---:|---:|---:|")
    for label, rps, p50 in rows:
        print(f"| {label} | {rps:.0f} | {p50:.2f} | {rps / native_rps * 100:.0f} % |")


if __name__ == "__main__":
    main()
