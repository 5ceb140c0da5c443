"""The official openai client inside the guest (`ai-agent`), against the host's own openai client,
both calling the same local TLS upstream that speaks OpenAI's wire format (tests/egress/providers.py).

    python benchmarks/agents.py [--repeat N]

Measures: a non-streamed chat completion's latency through the guest SDK (guest TLS by the
host, the key injected, the policy and audit on every call) next to the host SDK's, and the
guest's `import openai` time: in a fresh sandbox (the template's byte-compiled files, read for
the first time by that guest) and again in a second fresh sandbox. Only loopback servers started
here are contacted (api.openai.com is mapped to them with DECLAW_WASM_RESOLVE).
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import _tree  # noqa: E402,F401  -- PYTHONPATH's tree first (interleave.py), else this repository's

GUEST_CALLS = r'''
import json, time, openai
client = openai.OpenAI(max_retries=0)
def call():
    return client.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "hi"}])
call()  # the first call opens the connection
times = []
for _ in range(REPEAT):
    start = time.perf_counter()
    call()
    times.append(time.perf_counter() - start)
print(json.dumps(sorted(times)[len(times) // 2]))
'''

IMPORT = "import time\nstart = time.perf_counter()\nimport openai\nprint(time.perf_counter() - start)"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args(argv)
    # the egress tests' servers (by name: mypy knows tests/ as top-level packages)
    upstream = importlib.import_module("tests.egress.upstream")
    OPENAI_KEY = importlib.import_module("tests.egress.providers").OPENAI_KEY

    servers = upstream.start(["api.openai.com"], Path(tempfile.mkdtemp(prefix="agents-bench-")))
    os.environ.update(DECLAW_WASM_RESOLVE=servers.resolve_env(), DECLAW_WASM_CA_BUNDLE=str(servers.ca_path),
                      DECLAW_WASM_EGRESS_LOOPBACK_ONLY="1")
    import httpx2
    import openai

    from declaw_wasm import ALL_TRAFFIC, Sandbox, Secret

    host = openai.OpenAI(api_key=OPENAI_KEY, base_url=f"https://127.0.0.1:{servers.https.port}/v1", max_retries=0,
                         http_client=httpx2.Client(verify=str(servers.ca_path)))

    def host_call() -> None:
        host.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "hi"}])

    host_call()
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        host_call()
        times.append(time.perf_counter() - start)
    host_s = statistics.median(times)

    imports = []
    for _ in range(2):
        with Sandbox.create(template="ai-agent") as sbx:
            imports.append(float(sbx.run_code(IMPORT, timeout=300).logs.stdout[-1]))
    with Sandbox.create(template="ai-agent", network={"allow_out": ["api.openai.com"], "deny_out": [ALL_TRAFFIC]},
                        secrets={"OPENAI_API_KEY": Secret(OPENAI_KEY, hosts=["api.openai.com"])}) as sbx:
        run = sbx.run_code(GUEST_CALLS.replace("REPEAT", str(args.repeat)), timeout=600)
        if run.error:
            print(run.error.traceback, file=sys.stderr)
            return 1
        guest_s = float(run.logs.stdout[-1])
    print("| measure | host openai | guest openai (ai-agent) | added |")
    print("|---|---|---|---|")
    print(f"| non-streamed chat completion, median of {args.repeat} | {host_s * 1e3:.2f} ms | "
          f"{guest_s * 1e3:.2f} ms | {(guest_s - host_s) * 1e3:+.2f} ms |")
    print(f"| `import openai` in a fresh sandbox (first, second) | | {imports[0] * 1e3:.0f} ms, "
          f"{imports[1] * 1e3:.0f} ms | |")
    servers.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
