"""Network limits (Limits.net_*): each one hit, with an error that names it."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from declaw_wasm import testing
from declaw_wasm import Limits

from .conftest import PROBE, outcome
from .upstream import Upstreams


pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


def test_limits_are_hit_with_clear_errors(make: Callable[..., Any], up: Upstreams) -> None:
    sbx = make(limits=Limits(net_connections=2, net_connection_bytes=100_000, net_idle_timeout=1.0,
                             net_header_bytes=4096),
               network={"allow_out": ["api.openai.com", "raw.example"]})
    got = outcome(sbx, PROBE + """
import requests
keep = [socket.create_connection(("api.openai.com", 80)), socket.create_connection(("api.openai.com", 80))]
out = {"third": attempt(lambda: connect("api.openai.com", 80))}
for s in keep:
    s.close()
out["after_close"] = attempt(lambda: connect("api.openai.com", 80))
out["big"] = attempt(lambda: len(requests.get("http://api.openai.com/bytes/500000").content))
out["small"] = attempt(lambda: len(requests.get("http://api.openai.com/bytes/1000").content))
def idle():
    s = socket.create_connection(("raw.example", 7000))
    s.settimeout(None)
    return s.recv(10)
out["idle"] = attempt(idle)
out["header"] = attempt(lambda: requests.get("http://api.openai.com/", headers={"X-Big": "a" * 8000}).status_code)
print(json.dumps(out))
""")
    assert not got["third"]["ok"] and "Limits.net_connections" in got["third"]["msg"]
    assert got["after_close"]["ok"]
    assert not got["big"]["ok"] and "Limits.net_connection_bytes" in got["big"]["msg"]
    assert got["small"] == {"ok": True, "value": 1000}
    assert not got["idle"]["ok"] and got["idle"]["type"] == "TimeoutError"
    assert "Limits.net_idle_timeout" in got["idle"]["msg"]
    assert got["header"] == {"ok": True, "value": 431}


def test_sandbox_bytes_limit(make: Callable[..., Any], up: Upstreams) -> None:
    sbx = make(limits=Limits(net_sandbox_bytes=300_000))
    got = outcome(sbx, PROBE + """
import requests
out = {"first": attempt(lambda: len(requests.get("http://api.openai.com/bytes/200000").content)),
       "second": attempt(lambda: len(requests.get("http://api.openai.com/bytes/200000").content))}
print(json.dumps(out))
""")
    assert got["first"] == {"ok": True, "value": 200000}
    assert not got["second"]["ok"] and "Limits.net_sandbox_bytes" in got["second"]["msg"]


def test_a_guest_that_stops_mid_wait_is_not_held(make: Callable[..., Any], up: Upstreams) -> None:
    """A command blocked in recv is stopped by its timeout (the door waits in slices)."""
    import time

    sbx = make(network={"allow_out": ["raw.example"]})
    sbx.files.write("/tmp/wait.py", "import socket\ns = socket.create_connection(('raw.example', 7000))\n"
                                    "s.settimeout(None)\ns.recv(10)\n")
    start = time.monotonic()
    try:
        sbx.commands.run("python3 /tmp/wait.py", timeout=2)
    except Exception as exc:
        assert type(exc).__name__ == "TimeoutException"
    assert time.monotonic() - start < 5
    conns = testing.egress_of(sbx)._conns
    assert conns == {} or all(c.state == "closed" for c in conns.values())
