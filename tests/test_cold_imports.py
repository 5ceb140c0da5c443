"""A cold start pays for what it uses: `from declaw_wasm import Sandbox; Sandbox.create()` and a
command, with no options, import none of the egress, guard, security, state, volumes, server,
remote, pool, Ray or integrations code (nor the third-party libraries they bring: h11, TLS, RE2,
fsspec). Checked in a fresh interpreter, by package prefix (modules move; packages are what
a cold start pays for). The egress package's door declarations (`_egress.ops`: what a guest may
send over the network door, checked before anything answers it) load with every guest's door:
they are declarations only; the session, the relay and the policy load at the first network op.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.guest

REPO = Path(__file__).resolve().parent.parent
PROGRAM = """
import json, sys
from declaw_wasm import Sandbox
sbx = Sandbox.create()
assert sbx.commands.run("echo hi").stdout == "hi\\n"
assert sbx.audit_events() == []
sbx.kill()
{after}
print(json.dumps(sorted(sys.modules)))
"""
NOT_ON_A_PLAIN_CREATE = ("declaw_wasm._guard", "declaw_wasm.security", "declaw_wasm._state", "declaw_wasm._volumes",
                         "declaw_wasm.volumes", "declaw_wasm.server", "declaw_wasm._remote", "declaw_wasm._pool",
                         "declaw_wasm._ray", "declaw_wasm.integrations", "declaw_wasm.templates",
                         "declaw_wasm.async_sandbox", "h11", "ssl", "truststore", "re2", "fsspec", "httpx",
                         "fastapi",
                         # run_code's kernels load at the first cell or context; the event loop
                         # libraries only for the async face and the server
                         "declaw_wasm._local.kernel", "anyio", "asyncio",
                         # the JPEG codec (its door declarations load with every guest's door)
                         "declaw_wasm._media.jpeg",
                         # the HTTP protocol beyond the request bodies, and run_code's result models
                         "declaw_wasm.wire.protocol", "declaw_wasm.execution", "declaw_wasm.charts")
EGRESS_DECLARATIONS = {"declaw_wasm._egress", "declaw_wasm._egress.ops"}
# the egress testing hooks make every sandbox build its network at create (a bad one is refused there)
HOOKLESS = {k: v for k, v in os.environ.items() if k not in ("DECLAW_WASM_RESOLVE", "DECLAW_WASM_DNS_ANSWERS")}


def imported(after: str = "") -> list[str]:
    done = subprocess.run([sys.executable, "-c", PROGRAM.format(after=after)], capture_output=True, text=True,
                          timeout=240, cwd=REPO, env={**HOOKLESS, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    modules: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return modules


def under(modules: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)]


def test_a_plain_create_and_command_import_no_egress_guard_state_or_server_code() -> None:
    modules = imported()
    assert under(modules, NOT_ON_A_PLAIN_CREATE) == []
    assert set(under(modules, ("declaw_wasm._egress",))) <= EGRESS_DECLARATIONS
    # what it does import: the face, the in-process backend, the runtime, the guest's door
    for needed in ("declaw_wasm.sandbox", "declaw_wasm._local.sandbox", "declaw_wasm._wasm.guest", "wasmtime"):
        assert needed in modules


def test_the_network_code_loads_when_a_guest_connects_and_the_guards_only_with_a_policy() -> None:
    """The first network op builds the sandbox's egress session (its default policy refuses
    loopback: the session answers with a refusal, audited); still no guard engine without
    `security=`."""
    modules = imported(after="""
sbx = Sandbox.create()
done = sbx.commands.run("python3 -c 'import socket; socket.create_connection((\\"127.0.0.1\\", 9), 2)'")
assert done.exit_code != 0 and "refused" in done.stderr.lower(), done.stderr
assert [e.decision for e in sbx.audit_events()] == ["denied"], sbx.audit_events()
sbx.kill()
""")
    assert "declaw_wasm._egress.session" in modules
    # the relay's hook (its protocol and the identity guard) comes with the relay; the engine does not
    assert set(under(modules, ("declaw_wasm._guard",))) <= {"declaw_wasm._guard", "declaw_wasm._guard.contract"}
    assert under(modules, ("declaw_wasm.security.policy", "re2")) == []


def test_pausing_and_resuming_a_sandbox_that_never_connected_imports_no_network_code() -> None:
    """A snapshot of a plain sandbox records no network state (no secrets, connection ids from
    1) without building its egress session; the restored one still connects (its session is
    built then)."""
    modules = imported(after="""
sbx = Sandbox.create()
sbx.files.write("/tmp/kept", "yes")
sbx.pause()
sbx.resume()
assert sbx.files.read("/tmp/kept") == "yes"
connected = [m for m in sys.modules if m.startswith("declaw_wasm._egress.session")]
assert connected == [], connected
assert sbx.audit_events() == []
sbx.kill()
""")
    assert "declaw_wasm._state.store" in modules
    assert set(under(modules, ("declaw_wasm._egress", "declaw_wasm._guard"))) <= EGRESS_DECLARATIONS
