"""Limits: each one, when hit, gives its documented outcome, and the host goes on."""

from __future__ import annotations

import pytest

from declaw_wasm import Limits, RateLimitException, Sandbox
from declaw_wasm.sandbox import SandboxCore


def test_memory_limit_is_a_memory_error_in_the_guest() -> None:
    with Sandbox.create(limits=Limits(memory_limit=256 << 20)) as sandbox:
        r = sandbox.commands.run("python3 -c 'b = bytearray(512 << 20)'")
        assert r.exit_code == 1 and "MemoryError" in r.stderr
        assert sandbox.commands.run("echo ok").stdout == "ok\n"


def test_output_limit_truncates_and_says_so() -> None:
    with Sandbox.create(limits=Limits(output_limit=1000)) as sandbox:
        r = sandbox.commands.run("python3 -c 'print(\"x\" * 5000)'")
        assert len(r.stdout) == 1000 and "truncated" in (r.error or "")


def test_running_commands_per_sandbox_are_capped() -> None:
    with Sandbox.create(limits=Limits(max_processes=2)) as sandbox:
        first = sandbox.commands.run("sleep 30", background=True)
        sandbox.commands.run("sleep 30", background=True)
        with pytest.raises(RateLimitException, match="max_processes"):
            sandbox.commands.run("echo one too many")
        first.kill()
        first.wait()
        assert sandbox.commands.run("echo room again").stdout == "room again\n"


def test_live_sandboxes_per_process_are_capped(monkeypatch) -> None:
    with SandboxCore.registry_lock:
        live = len(SandboxCore.registry)
    monkeypatch.setenv("DECLAW_WASM_MAX_SANDBOXES", str(live + 1))
    with Sandbox.create():
        with pytest.raises(RateLimitException, match="DECLAW_WASM_MAX_SANDBOXES"):
            Sandbox.create()
    Sandbox.create().kill()  # room again once one is gone
