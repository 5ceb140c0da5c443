"""For sdk-ts's tests: the egress tests' local upstreams (tests/egress/upstream.py: HTTP and
HTTPS on loopback, a CA made with trustme). Prints one JSON line, `{"resolve", "ca"}`, for the
server's DECLAW_WASM_RESOLVE and DECLAW_WASM_CA_BUNDLE; then answers each `records` line on
stdin with one JSON line of the requests that reached the upstreams; exits when stdin closes."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from egress import upstream  # noqa: E402

servers = upstream.start(["api.openai.com", "example.com", "evil.com"], Path(tempfile.mkdtemp(prefix="ts-upstream-")))
print(json.dumps({"resolve": servers.resolve_env(), "ca": str(servers.ca_path)}), flush=True)
for line in sys.stdin:
    if line.strip() == "records":
        found = [{"path": r.path, "server": r.server, "headers": {k.lower(): v for k, v in r.headers}}
                 for r in servers.records()]
        print(json.dumps(found), flush=True)
    elif line.strip() == "clear":
        servers.clear()
        print("[]", flush=True)
servers.stop()
