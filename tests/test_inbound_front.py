"""The host's side of inbound connections with no guest behind it (declaw_wasm/_egress/inbound.py):
what a local client meets at a sandbox's host listener before any server in the sandbox sees
its bytes — 502 where nothing listens, 403 without the traffic token, a bounded request head,
and a listener that closes with its sandbox. Real sockets on loopback, the real front thread."""

from __future__ import annotations

import http.client
import socket

import pytest

from declaw_wasm import _args
from declaw_wasm._egress.create import plan_from_create, public_traffic
from declaw_wasm._egress.inbound import TOKEN_HEADER
from declaw_wasm._egress.policy import Policy
from declaw_wasm._egress.session import EgressSession
from declaw_wasm.exceptions import InvalidArgumentException
from declaw_wasm.limits import Limits


def _get(port: int, headers: dict[str, str] | None = None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/", headers=headers or {})
        answer = conn.getresponse()
        return answer.status, answer.read().decode()
    finally:
        conn.close()


def test_a_port_nothing_listens_on_answers_502_saying_so() -> None:
    session = EgressSession(Policy(), Limits())
    session.inbound.label = "sbx_test"
    try:
        port = session.inbound.host_port(8000)
        assert session.inbound.host_port(8000) == port  # one host listener per guest port
        status, body = _get(port)
        assert status == 502 and "nothing in sandbox sbx_test listens on port 8000" in body
        events = [e for e in session.audit_events() if e.kind == "inbound"]
        assert events and events[-1].decision == "denied" and events[-1].port == 8000
        assert events[-1].direction == "inbound"
    finally:
        session.close()


def test_traffic_that_is_not_public_needs_the_token() -> None:
    session = EgressSession(Policy(), Limits(), traffic_token="s3cret-token")
    try:
        port = session.inbound.host_port(8000)
        status, body = _get(port)
        assert status == 403 and "e2b-traffic-access-token" in body
        status, _ = _get(port, {TOKEN_HEADER.decode(): "wrong"})
        assert status == 403
        status, body = _get(port, {TOKEN_HEADER.decode(): "s3cret-token"})
        assert status == 502  # past the token: nothing listens
        assert "s3cret-token" not in "".join(str(e) for e in session.audit_events())
    finally:
        session.close()


def test_a_request_head_is_bounded() -> None:
    session = EgressSession(Policy(), Limits(net_header_bytes=2048))
    try:
        port = session.inbound.host_port(8000)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            try:
                sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 8192)
            except OSError:
                pass  # the host may answer and close before it takes it all
            answer = sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 431 ")
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"\x16\x03\x01 not http at all\r\n\r\n")
            assert sock.recv(4096).startswith(b"HTTP/1.1 400 ")
    finally:
        session.close()


def test_a_closed_sandbox_port_refuses_at_once() -> None:
    session = EgressSession(Policy(), Limits())
    port = session.inbound.host_port(8000)
    session.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5)


def test_the_host_listens_on_loopback_only() -> None:
    session = EgressSession(Policy(), Limits())
    try:
        session.inbound.host_port(8000)
        mapped = session.inbound.ports[8000]
        assert mapped.sock.getsockname()[0] == "127.0.0.1"
    finally:
        session.close()


def test_allow_public_traffic_false_makes_a_token() -> None:
    assert plan_from_create({"network": {"allow_public_traffic": False}}).traffic_token
    assert plan_from_create({"network": {"allow_out": []}}).traffic_token is None
    with pytest.raises(InvalidArgumentException, match="allow_public_traffic"):
        public_traffic({"allow_public_traffic": "no"})


@pytest.mark.parametrize("bad", [0, 65536, -1, "80", True, 8.0])
def test_get_host_takes_a_port(bad: object) -> None:
    with pytest.raises(InvalidArgumentException, match="port"):
        _args.port(bad)


def test_a_page_rebinding_its_name_to_loopback_is_refused() -> None:
    session = EgressSession(Policy(), Limits())
    try:
        port = session.inbound.host_port(8000)
        assert _get(port, {"Host": "evil.example"})[0] == 421
        assert _get(port, {"Host": f"127.0.0.1.nip.io:{port}"})[0] == 421
        for fine in (f"localhost:{port}", f"8000-sbx.localhost:{port}", f"[::1]:{port}"):
            assert _get(port, {"Host": fine})[0] == 502, fine  # past the Host check
    finally:
        session.close()


def test_an_operators_names_and_names_under_them_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECLAW_WASM_ALLOWED_HOSTS", "sandboxes.example")
    session = EgressSession(Policy(), Limits())
    try:
        port = session.inbound.host_port(8000)
        for fine in ("sandboxes.example", "8000-sbx_1.sandboxes.example"):
            assert _get(port, {"Host": fine})[0] == 502, fine
        assert _get(port, {"Host": "evilsandboxes.example"})[0] == 421
    finally:
        session.close()
