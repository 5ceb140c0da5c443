"""Secrets, the vault, the policy and the audit log beyond this process: through `declaw-wasm
serve` (our remote SDK, declaw's own SDK and its `VaultClient`), and in a process pool's worker
(secrets as call arguments, vault refs resolved where the vault is). The same local upstreams as
the rest of this folder; the server runs in a thread of this process, inside the namespace.

What must hold everywhere: the guest sees a placeholder, the upstream of a scoped host gets the
value over TLS the host verified, and the value is in no guest file, no audit event, no log line,
and never crosses a plain-HTTP hop to another machine."""

from __future__ import annotations

import logging
from typing import Any, Iterator

import httpx
import pytest

from declaw_wasm import (InvalidArgumentException, Sandbox, Secret, Vault, VaultClient, VaultScope,
                         testing)
from declaw_wasm._pool.pool import ProcessPool
from declaw_wasm.server import create_app, serve_in_thread

from .conftest import PROBE, outcome
from .upstream import Upstreams

KEY = "served-egress-key"
VALUE = "sk-served/Abc+123_xyz"
ASK = PROBE + """
import os, requests
key = os.environ["OPENAI_API_KEY"]
out = {"env": key,
       "echo": requests.get("https://api.openai.com/v1/models", headers={"Authorization": "Bearer " + key}).text,
       "other": requests.get("https://example.com/other", headers={"Authorization": "Bearer " + key}).json()}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def guest_path() -> str:
    return "warm"  # where the host injects does not depend on the guest path


@pytest.fixture(scope="module")
def server(upstreams: Upstreams) -> Iterator[str]:
    """A server started inside the namespace, after DECLAW_WASM_RESOLVE and the CA are set."""
    with serve_in_thread(KEY, vault=Vault()) as url:  # the server's own vault, not this process's
        yield url


def _no_trace(sbx: Any, value: str, caplog: pytest.LogCaptureFixture) -> None:
    """The value is in no file of the sandbox (on the host), no audit event, no log record."""
    folder = testing.host_folder(sbx)
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert value.encode() not in path.read_bytes(), path
    assert value not in "".join(e.model_dump_json() for e in sbx.audit_events())
    assert value not in caplog.text


@pytest.mark.guest
def test_served_secrets_reach_only_their_host(server: str, up: Upstreams,
                                              caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    sbx = Sandbox.create(domain=server, api_key=KEY, timeout=300,
                         secrets={"OPENAI_API_KEY": Secret(VALUE, hosts=["api.openai.com"])},
                         network={"allow_out": ["api.openai.com", "example.com"]})
    try:
        got = outcome(sbx, ASK)
        assert got["env"].startswith("declaw-secret-") and VALUE not in got["echo"]
        assert got["other"]["headers"]["Authorization"] == "Bearer " + got["env"]  # not its host
        seen = {r.path: r for r in up.records()}
        assert seen["/v1/models"].header("Authorization") == "Bearer " + VALUE
        assert seen["/other"].header("Authorization") == "Bearer " + got["env"]
        events = sbx.audit_events()  # over the wire: GET /declaw-wasm/sandboxes/{id}/audit
        assert [e.secrets_injected for e in events if e.secrets_injected] == [["OPENAI_API_KEY"]]
        assert all(e.decision == "allowed" for e in events)
        local = Sandbox.connect(sbx.sandbox_id)  # the server runs in this process: look behind it
        _no_trace(local, VALUE, caplog)
        denied = outcome(sbx, PROBE + "print(json.dumps(attempt(lambda: get('https://evil.com/'))))")
        assert not denied["ok"] and "policy" in denied["msg"]
        assert any(e.decision == "denied" and e.host == "evil.com" for e in sbx.audit_events())
    finally:
        sbx.kill()


@pytest.mark.guest
def test_declaws_vault_client_and_vault_refs_against_the_server(server: str, up: Upstreams,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    """declaw's own SDK, unchanged: `VaultClient().create_secret(..., provider="openai")`, then
    `Sandbox.create(vault_refs=...)`: the guest sees `declaw:vault-managed`, the host sends the
    provider's header to the provider's host only; the value is never returned."""
    declaw = pytest.importorskip("declaw")
    caplog.set_level(logging.DEBUG)
    where = {"api_key": KEY, "domain": server.split("//", 1)[1]}
    vault = declaw.VaultClient(**where)
    created = vault.create_secret("sk-vaulted-1", provider="openai")
    assert created.name == "openai" and created.scopes[0].domain_regex == "api.openai.com"
    assert "sk-vaulted" not in str(vault.list_secrets()) + str(created)
    vault.rotate_secret("openai", "sk-vaulted-2")
    custom = vault.create_secret("tok-3", name="echo-token", scopes=[
        declaw.VaultScope(domain_regex="~^postman-echo\\.com$", injection_type="header", header_name="X-Token")])
    vault.update_scopes("echo-token", [{"domain_regex": "postman-echo.com", "injection_type": "header",
                                        "header_name": "X-Token-2"}])
    with pytest.raises(declaw.ConflictException):  # pointing a value at a host one reads needs the value
        vault.update_scopes("openai", [{"domain_regex": "api.openai.com"}, {"domain_regex": "example.com"}])
    assert {p.key for p in vault.list_presets()} >= {"openai", "anthropic"}
    sbx = declaw.Sandbox.create(template="code-interpreter", **where,
                                vault_refs={"OPENAI_API_KEY": "openai", "ECHO": "echo-token"})
    try:
        assert sbx.commands.run("echo $OPENAI_API_KEY $ECHO").stdout == "declaw:vault-managed declaw:vault-managed\n"
        code = PROBE + """
import requests
out = {"openai": requests.get("https://api.openai.com/v1/models").text,
       "echo": requests.get("https://postman-echo.com/get").text,
       "other": requests.get("https://example.com/x").json()["headers"].get("Authorization")}
print(json.dumps(out))
"""
        sbx.files.write("/tmp/v.py", code)
        result = sbx.commands.run("python3 /tmp/v.py", timeout=120)
        assert result.exit_code == 0, result.stderr
        seen = {r.path: r for r in up.records()}
        assert seen["/v1/models"].header("Authorization") == "Bearer sk-vaulted-2"  # the rotated value
        assert seen["/get"].header("X-Token-2") == "tok-3" and seen["/get"].header("X-Token") is None
        assert seen["/x"].header("Authorization") is None  # example.com: the refused widening
        assert "sk-vaulted" not in result.stdout
        assert "sk-vaulted" not in caplog.text and "tok-3" not in caplog.text
    finally:
        sbx.kill()
        vault.delete_secret("openai")
        vault.delete_secret("echo-token")
    assert custom.name == "echo-token" and vault.list_secrets() == []
    with pytest.raises(declaw.NotFoundException):
        declaw.VaultClient(**where)._client.get("/teams/elsewhere/vault/secrets")
    with pytest.raises(declaw.InvalidArgumentException, match="not supported"):  # no sigv4 here
        vault.create_secret("x", name="aws", scopes=[{"domain_regex": "s3.amazonaws.com",
                                                      "injection_type": "sigv4"}])


@pytest.mark.guest
def test_our_vault_client_and_sdk_in_remote_mode(server: str, up: Upstreams) -> None:
    vault = VaultClient(api_key=KEY, domain=server)
    vault.create_secret("sk-ours-1", name="ours", scopes=[VaultScope(domain_regex="api.openai.com")])
    assert [s.name for s in vault.list_secrets()] == ["ours"]
    assert "ours" not in [s.name for s in VaultClient().list_secrets()]  # not this process's vault
    try:
        sbx = Sandbox.create(domain=server, api_key=KEY, vault_refs={"OPENAI_API_KEY": "ours"})
        try:
            got = outcome(sbx, ASK)
            assert got["env"] == "declaw:vault-managed"
            assert {r.path: r for r in up.records()}["/v1/models"].header("Authorization") == "Bearer sk-ours-1"
        finally:
            sbx.kill()
        with pytest.raises(InvalidArgumentException, match="Vault object"):
            Sandbox.create(domain=server, api_key=KEY, vault=Vault(), vault_refs={"K": "ours"})
    finally:
        vault.delete_secret("ours")


@pytest.mark.heavy
def test_secret_values_never_cross_plain_http_to_another_machine(server: str) -> None:
    """Our SDK refuses before connecting; a server that got them anyway refuses them."""
    for domain in ("http://192.0.2.10:8080", "http://[2001:db8::1]:8080"):
        with pytest.raises(InvalidArgumentException, match="plain HTTP"):
            Sandbox.create(domain=domain, api_key=KEY, secrets={"K": Secret("v1", hosts=["x.com"])})
        with pytest.raises(InvalidArgumentException, match="plain HTTP"):
            VaultClient(domain=domain, api_key=KEY).create_secret("v1", name="n", provider="openai")
    # the server's side: a request in clear from a non-loopback peer (httpx's ASGI transport
    # plays the peer 192.0.2.7)
    app = create_app(KEY)
    transport = httpx.ASGITransport(app=app, client=("192.0.2.7", 40000))
    body = {"secrets": {"K": {"value": "v-in-clear", "hosts": ["x.com"]}}}

    async def post() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=transport, base_url="http://declaw.test",
                                     headers={"X-API-Key": KEY}) as client:
            return [await client.post("/sandboxes", json=body),
                    await client.post("/teams/default/vault/secrets",
                                      json={"value": "v-in-clear", "provider": "openai"})]

    import anyio

    for response in anyio.run(post):
        assert response.status_code == 400 and "rotate them" in response.json()["message"]
        assert "v-in-clear" not in response.text


@pytest.mark.guest
def test_a_process_pool_gets_secrets_as_call_arguments(upstreams: Upstreams, up: Upstreams) -> None:
    """The worker gets the values as arguments of its create call (never in its environment: a
    worker's environment is the agent's, checked below), and vault refs resolved here."""
    vault = Vault()
    vault.create_secret("sk-pool-vault", name="pooled", provider="openai")
    pool = ProcessPool(1)
    try:
        sbx = Sandbox.create(backend=pool, timeout=300, vault=vault, vault_refs={"OPENAI_API_KEY": "pooled"},
                             secrets={"OTHER": Secret("sk-pool-secret", hosts=["example.com"])})
        try:
            got = outcome(sbx, ASK + """
out2 = requests.get("https://example.com/pooled", headers={"X-Key": os.environ["OTHER"]}).text
print(json.dumps({"other_env": os.environ["OTHER"], "echo2": out2}))
""")
            assert got["other_env"].startswith("declaw-secret-") and "sk-pool" not in got["echo2"]
            seen = {r.path: r for r in up.records()}
            assert seen["/v1/models"].header("Authorization") == "Bearer sk-pool-vault"
            assert seen["/pooled"].header("X-Key") == "sk-pool-secret"
            environ = open(f"/proc/{pool.pid_of(sbx.sandbox_id)}/environ", "rb").read()
            assert b"sk-pool" not in environ
        finally:
            sbx.kill()
    finally:
        pool.close()


@pytest.mark.guest
def test_a_server_over_tls_takes_secrets(up: Upstreams, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """`declaw-wasm serve --tls-cert/--tls-key`: HTTPS, which clients on other machines need to
    send secret values (ours refuse plain HTTP to anything but loopback)."""
    import trustme

    from declaw_wasm._remote.connection import Connection

    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1")
    cert, key, trust = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    issued.cert_chain_pems[0].write_to_path(str(cert))
    issued.private_key_pem.write_to_path(str(key))
    ca.cert_pem.write_to_path(str(trust))
    monkeypatch.setenv("SSL_CERT_FILE", str(trust))  # httpx's trust for this client
    Connection("https://192.0.2.10:8443", KEY).check_private("secrets")  # TLS: allowed anywhere
    with serve_in_thread(KEY, tls=(str(cert), str(key)), vault=Vault()) as url:
        assert url.startswith("https://")
        sbx = Sandbox.create(domain=url, api_key=KEY,
                             secrets={"OPENAI_API_KEY": Secret("sk-over-tls", hosts=["api.openai.com"])})
        try:
            assert outcome(sbx, ASK)["env"].startswith("declaw-secret-")
            assert {r.path: r for r in up.records()}["/v1/models"].header("Authorization") == "Bearer sk-over-tls"
        finally:
            sbx.kill()
