"""The sandbox's network is built at first use (`_local/sandbox.py`'s `EgressSlot`), one per
generation of the sandbox (a create, a resume in place): door routes made before a pause answer
from that generation's session, closed with it, never from the resumed sandbox's open one; a
bad egress testing hook is refused at create, as before the session was built lazily."""

from __future__ import annotations

import pytest

from declaw_wasm import Sandbox, testing
from declaw_wasm._local import sandbox as local

pytestmark = pytest.mark.guest


@pytest.fixture(scope="module")
def guest_path() -> str:  # host-side bookkeeping: the same on both guest paths
    return "warm"


def test_routes_from_before_a_pause_never_reach_the_resumed_sandboxs_network() -> None:
    sbx = Sandbox.create(timeout=60, network={"allow_out": ["api.example.com"]})
    try:
        sbx.run_code("1")
        held = local.sandboxes.get(sbx.sandbox_id)
        assert held is not None
        before = {op.name: handler for op, handler in held.launcher.routes(held.launcher.tool_door(lambda: []))}
        old = testing.egress_of(sbx)
        sbx.pause()
        sbx.resume()
        answer = before["net.resolve"](None, {"host": "127.0.0.1", "port": 80})
        assert answer["error"]["kind"] == "closed", answer
        assert old.closed and not testing.egress_of(sbx).closed
        now = {op.name: handler for op, handler in held.launcher.routes(held.launcher.tool_door(lambda: []))}
        assert "error" not in now["net.resolve"](None, {"host": "127.0.0.1", "port": 80})
    finally:
        sbx.kill()


def test_a_bad_egress_testing_hook_is_refused_at_create(monkeypatch: pytest.MonkeyPatch) -> None:
    """Also when the create is handed a standby sandbox made before the hook was set."""
    for _ in range(3):
        Sandbox.create().kill()
    monkeypatch.setenv("DECLAW_WASM_RESOLVE", "not-a-valid-entry")
    for _ in range(2):
        with pytest.raises(Exception, match="DECLAW_WASM_RESOLVE"):
            Sandbox.create()
